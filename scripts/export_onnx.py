#!/usr/bin/env python3
"""Writes an MLP as an ONNX graph with the onnx package. `minitrain export --format onnx` runs this
with the model it rebuilt from the weights' metadata (the same model predict runs), handed over as
a float32 .safetensors file of PyTorch state_dict names; this script only draws the graph.

  python3 scripts/export_onnx.py --weights T.safetensors --sizes 784,128,10 --activation relu
      --head logits|softmax|sigmoid [--argmax] [--classes JSON] --opset 17 --out model.onnx

The graph, in the Sequential's order: per Linear `i` a Gemm node named `i` (transB=1: y = x W^T + b,
initializers `i.weight` [out, in] and `i.bias` [out], torch's names), then the activation node
`i+1` (Relu, Tanh, Sigmoid; GELU's erf form as x * 0.5 * (1 + Erf(x * 1/sqrt(2))) and its tanh
form as 0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), the operations
kernels/activation_math.h computes). Input `x` [rows, IN] of raw features (with --mean and --scale,
from train --standardize, the first nodes are Sub and Div by them); output `y` (a regression), `logits` or
`probabilities` (with --head: Softmax over the classes; Sigmoid per label for bce_with_logits), and for a
cross_entropy classifier `class` [rows, 1] int64 (ArgMax of the logits, the first of ties). The
file passes onnx.checker.check_model(full_check=True) before it is written, atomically.
"""

import argparse
import json
import os
import struct
import sys

NEEDS = ("minitrain export --format onnx needs Python 3 with the onnx package: pip install onnx "
         "(scripts/setup.sh installs it)")


def read_safetensors(path):
    """{name: numpy float32 array} of a float32 .safetensors file (what minitrain wrote)."""
    import numpy as np
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise ValueError(f"{path}: tensor '{name}' is {info['dtype']}, expected F32")
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(body[begin:end], dtype="<f4").reshape(info["shape"]).copy()
    return out


class Graph:
    def __init__(self, helper, numpy_helper, np):
        self.helper, self.numpy_helper, self.np = helper, numpy_helper, np
        self.nodes, self.initializers, self.constants = [], [], {}

    def node(self, op, inputs, output, name, **attrs):
        self.nodes.append(self.helper.make_node(op, inputs, [output], name=name, **attrs))
        return output

    def constant(self, name, value):
        """A float32 scalar initializer, made once per name."""
        if name not in self.constants:
            self.constants[name] = name
            self.initializers.append(
                self.numpy_helper.from_array(self.np.array(value, dtype=self.np.float32), name))
        return name

    def tensor(self, name, array):
        self.initializers.append(self.numpy_helper.from_array(array, name))
        return name


def activation(g, kind, x, name):
    """The activation of `x` as nodes named `name` and `name/...`; returns the output's name."""
    if kind == "relu":
        return g.node("Relu", [x], f"{name}.out", name)
    if kind == "tanh":
        return g.node("Tanh", [x], f"{name}.out", name)
    if kind == "sigmoid":
        return g.node("Sigmoid", [x], f"{name}.out", name)
    if kind == "gelu":  # x * 0.5 * (1 + erf(x * 1/sqrt(2)))
        scaled = g.node("Mul", [x, g.constant("gelu.sqrt1_2", 0.70710678118654752440)],
                        f"{name}.scaled", f"{name}/scale")
        erf = g.node("Erf", [scaled], f"{name}.erf", f"{name}/erf")
        one_plus = g.node("Add", [g.constant("one", 1.0), erf], f"{name}.one_plus", f"{name}/add")
        half_x = g.node("Mul", [x, g.constant("half", 0.5)], f"{name}.half_x", f"{name}/half")
        return g.node("Mul", [half_x, one_plus], f"{name}.out", name)
    if kind == "gelu_tanh":  # 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
        x_sq = g.node("Mul", [x, x], f"{name}.x_sq", f"{name}/square")
        x_cube = g.node("Mul", [x_sq, x], f"{name}.x_cube", f"{name}/cube")
        k_cube = g.node("Mul", [g.constant("gelu_tanh.kappa", 0.044715), x_cube], f"{name}.k_cube",
                        f"{name}/kappa")
        inner_sum = g.node("Add", [x, k_cube], f"{name}.inner_sum", f"{name}/sum")
        inner = g.node("Mul", [g.constant("gelu_tanh.sqrt_2_over_pi", 0.79788456080286535588),
                               inner_sum], f"{name}.inner", f"{name}/beta")
        t = g.node("Tanh", [inner], f"{name}.tanh", f"{name}/tanh")
        one_plus = g.node("Add", [g.constant("one", 1.0), t], f"{name}.one_plus", f"{name}/add")
        half_x = g.node("Mul", [g.constant("half", 0.5), x], f"{name}.half_x", f"{name}/half")
        return g.node("Mul", [half_x, one_plus], f"{name}.out", name)
    raise ValueError(f"unknown activation '{kind}' (relu, gelu, gelu_tanh, tanh, sigmoid)")


def build(args):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    sizes = [int(s) for s in args.sizes.split(",")]
    tensors = read_safetensors(args.weights)
    g = Graph(helper, numpy_helper, np)
    cur = "x"
    if args.mean is not None:  # train --standardize: the graph takes raw features
        mean = np.array(json.loads(args.mean), dtype=np.float32)
        scale = np.array(json.loads(args.scale), dtype=np.float32)
        if mean.shape != (sizes[0],) or scale.shape != (sizes[0],):
            raise ValueError(f"--mean {mean.shape} and --scale {scale.shape} do not fit {sizes[0]} inputs")
        centred = g.node("Sub", [cur, g.tensor("standardize.mean", mean)], "x.centred", "standardize/sub")
        cur = g.node("Div", [centred, g.tensor("standardize.scale", scale)], "x.standardized",
                     "standardize/div")
    layers = len(sizes) - 1
    for layer in range(layers):
        i = 2 * layer
        w, b = tensors.pop(f"{i}.weight"), tensors.pop(f"{i}.bias")
        if w.shape != (sizes[layer + 1], sizes[layer]) or b.shape != (sizes[layer + 1],):
            raise ValueError(f"layer {i}: weight {w.shape}, bias {b.shape} do not fit {args.sizes}")
        last = layer + 1 == layers
        out = ("logits" if args.argmax or args.labels else "y") if last else f"{i}.out"
        cur = g.node("Gemm", [cur, g.tensor(f"{i}.weight", w), g.tensor(f"{i}.bias", b)], out,
                     str(i), transB=1)
        if not last:
            cur = activation(g, args.activation, cur, str(i + 1))
    if tensors:
        raise ValueError(f"tensors the model does not use: {sorted(tensors)}")

    logits = cur
    rows = "rows"
    outputs = []
    if args.head == "softmax":
        cur = g.node("Softmax", [logits], "probabilities", "softmax", axis=1)
    elif args.head == "sigmoid":
        cur = g.node("Sigmoid", [logits], "probabilities", "sigmoid")
    outputs.append(helper.make_tensor_value_info(cur, TensorProto.FLOAT, [rows, sizes[-1]]))
    if args.argmax:
        g.node("ArgMax", [logits], "class", "argmax", axis=1, keepdims=1, select_last_index=0)
        outputs.append(helper.make_tensor_value_info("class", TensorProto.INT64, [rows, 1]))

    graph = helper.make_graph(
        g.nodes, "minitrain_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, sizes[0]])], outputs,
        initializer=g.initializers)
    model = helper.make_model(graph, producer_name="minitrain",
                              opset_imports=[helper.make_opsetid("", args.opset)])
    model.ir_version = min(model.ir_version, 8)  # what opset 17's runtimes read
    meta = {"model": "mlp:" + args.sizes, "activation": args.activation, "head": args.head}
    if args.classes_given:
        meta["classes"] = args.classes
    if args.inputs is not None:  # the names of x's columns, in order
        meta["feature_columns"] = args.inputs
    if args.mean is not None:
        meta["standardize_mean"], meta["standardize_scale"] = args.mean, args.scale
    helper.set_model_props(model, meta)
    onnx.checker.check_model(model, full_check=True)
    return model


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--weights", required=True)
    p.add_argument("--sizes", required=True)
    p.add_argument("--activation", required=True)
    p.add_argument("--head", choices=["logits", "softmax", "sigmoid"], default="logits")
    p.add_argument("--argmax", action="store_true",
                   help="a cross_entropy classifier: logits, and the class as output 'class'")
    p.add_argument("--labels", action="store_true",
                   help="bce_with_logits: one logit per label (output 'logits')")
    p.add_argument("--classes", default=None, help="the class names as a JSON list")
    p.add_argument("--mean", default=None,
                   help="train --standardize: the features' mean as a JSON list (with --scale)")
    p.add_argument("--scale", default=None, help="their standard deviation as a JSON list")
    p.add_argument("--inputs", default=None,
                   help="the feature columns' names as a JSON list (metadata feature_columns)")
    p.add_argument("--opset", type=int, default=17)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    args.classes_given = args.classes is not None
    try:
        import onnx  # noqa: F401
    except ImportError:
        sys.exit(NEEDS)
    try:
        model = build(args)
    except Exception as e:  # one line, as the command's own errors
        sys.exit(f"export_onnx.py: {type(e).__name__}: {e}")
    import onnx
    target = os.path.abspath(args.out)
    temp = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.tmp.{os.getpid()}")
    try:
        with open(temp, "wb") as f:
            f.write(model.SerializeToString())
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, target)
    except OSError as e:
        if os.path.exists(temp):
            os.remove(temp)
        sys.exit(f"export_onnx.py: cannot write '{args.out}': {e.strerror}")


if __name__ == "__main__":
    main()
