#!/usr/bin/env python3
"""`minitrain export` against `minitrain predict`, as a user runs both (issue 34).

Trains small models on the CPU (every activation; regressions with 1 and 3 outputs, a
one-layer model, cross_entropy classifiers with text class names holding a comma, a quote, a
backslash, "??/" and non-ASCII bytes, a bce_with_logits model), then

  export_check.py MINITRAIN c WORK CC       exports each to C, compiles it with CC -std=c99 -O2
                                            -Wall -Wextra -Werror and tests/tools/export_driver.c,
                                            runs it: its outputs, classes and probabilities must
                                            be the bytes of `predict --gemm reference`, and within
                                            rtol 1.3e-6, atol 1e-5 of the default predict
  export_check.py MINITRAIN onnx WORK       exports each to ONNX (and classifiers again with
                                            --probabilities): onnx.checker passes, and
                                            onnxruntime's outputs are within the same tolerances
                                            of predict's; "SKIP: ..." when onnx or onnxruntime is
                                            missing
  export_check.py MINITRAIN size WORK CC    the .text size of a 784-128-10 classifier compiled -Os
"""

import json
import os
import random
import shutil
import struct
import subprocess
import sys

RTOL, ATOL = 1.3e-6, 1e-5  # torch.testing's float32 tolerances
ACTIVATIONS = ["relu", "gelu", "gelu_tanh", "tanh", "sigmoid"]
CLASS_NAMES = ['a,b', 'say "hi"', 'back\\slash', 'what??/', 'caf\u00e9']


# ---- files ------------------------------------------------------------------------------------

def npy_f32(path, rows, cols, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin-1"))
        f.write(struct.pack("<%df" % len(values), *values))


def npy_data(path):
    """(shape, raw little-endian float32 bytes) of an .npy file predict wrote; its classes, which
    predict writes as int64 ('<i8'), as float32 like the C's class.bin."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:6] == b"\x93NUMPY", path
    n = struct.unpack("<H", data[8:10])[0] if data[6] == 1 else struct.unpack("<I", data[8:12])[0]
    start = (10 if data[6] == 1 else 12) + n
    header = data[start - n:start].decode("latin-1")
    shape = tuple(int(s) for s in header.split("(")[1].split(")")[0].split(",") if s.strip())
    if "'<i8'" in header:
        ints = struct.unpack("<%dq" % ((len(data) - start) // 8), data[start:])
        return shape, struct.pack("<%df" % len(ints), *ints)
    assert "'<f4'" in header, header
    return shape, data[start:]


def floats(raw):
    return struct.unpack("<%df" % (len(raw) // 4), raw)


def run(args, **kw):
    p = subprocess.run(args, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: exit {p.returncode}: {' '.join(args)}\n{p.stdout}{p.stderr}")
    return p.stdout + p.stderr


# ---- the models -------------------------------------------------------------------------------

def make_data(work, rng, inputs, outputs, rows):
    x = [rng.uniform(-2, 2) for _ in range(rows * inputs)]
    y = []
    for r in range(rows):
        row = x[r * inputs:(r + 1) * inputs]
        for o in range(outputs):
            y.append(sum((i + o + 1) * 0.3 * v for i, v in enumerate(row)) % 3 - 1.5)
    npy_f32(f"{work}/x.npy", rows, inputs, x)
    npy_f32(f"{work}/y.npy", rows, outputs, y)
    with open(f"{work}/x.bin", "wb") as f:
        f.write(struct.pack("<%df" % len(x), *x))
    return x


def classifier_table(work, rng, inputs, rows):
    """A CSV whose label column names CLASS_NAMES (quoted as CSV quotes them)."""
    def cell(s):
        return '"' + s.replace('"', '""') + '"' if any(c in s for c in ',"') else s
    lines = [",".join([f"f{i}" for i in range(inputs)] + ["label"])]
    x = []
    for r in range(rows):
        row = [rng.uniform(-2, 2) for _ in range(inputs)]
        k = int((row[0] + 2) / 4 * len(CLASS_NAMES)) % len(CLASS_NAMES)
        row = [struct.unpack("<f", struct.pack("<f", v))[0] for v in row]  # exact float32 values
        x += row
        lines.append(",".join(["%.9g" % v for v in row] + [cell(CLASS_NAMES[k])]))
    with open(f"{work}/t.csv", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    npy_f32(f"{work}/x.npy", rows, inputs, x)
    with open(f"{work}/x.bin", "wb") as f:
        f.write(struct.pack("<%df" % len(x), *x))


def cases():
    """(name, kind, sizes, activation, train flags...): every activation as a regression with 1
    output and as a classifier; several outputs and depths; a single Linear; bce_with_logits;
    weights saved as bfloat16."""
    out = []
    for a in ACTIVATIONS:
        out.append((f"reg1_{a}", "regression", [4, 12, 1], a))
        out.append((f"cls_{a}", "classifier", [3, 10, len(CLASS_NAMES)], a))
    out.append(("reg3_deep", "regression", [4, 9, 7, 5, 3], "gelu"))
    out.append(("reg3_tanh", "regression", [4, 16, 3], "tanh"))
    out.append(("linear_only", "regression", [4, 2], "relu"))
    out.append(("bce_labels", "bce", [4, 8, 3], "sigmoid"))
    out.append(("reg_bf16_weights", "regression", [4, 12, 2], "gelu", "--save-dtype", "bf16"))
    # train --standardize: the exported model takes raw features and standardises them itself
    out.append(("reg_standardized", "regression", [4, 12, 2], "tanh", "--standardize"))
    out.append(("cls_standardized", "classifier", [3, 10, len(CLASS_NAMES)], "relu", "--standardize"))
    return out


def train(minitrain, work, name, kind, sizes, act, seed, *extra):
    d = f"{work}/{name}"
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    rng = random.Random(seed)
    common = ["--model", "mlp:" + ",".join(map(str, sizes)), "--activation", act, "--epochs", "15",
              "--batch-size", "16", "--lr", "0.01", "--save", f"{d}/w.safetensors",
              "--progress", "none", "--device", "cpu", "--seed", str(seed)] + list(extra)
    if kind == "classifier":
        classifier_table(d, rng, sizes[0], 120)
        run([minitrain, "train", "--data", f"{d}/t.csv", "--target-columns", "label",
             "--loss", "cross_entropy"] + common)
    else:
        make_data(d, rng, sizes[0], sizes[-1], 120)
        if kind == "bce":  # 0/1 labels from the regression's targets
            _, raw = npy_data(f"{d}/y.npy")
            y = [1.0 if v > 0 else 0.0 for v in floats(raw)]
            npy_f32(f"{d}/y.npy", 120, sizes[-1], y)
        run([minitrain, "train", "--data", f"{d}/x.npy", "--targets", f"{d}/y.npy"] + common +
            (["--loss", "bce_with_logits"] if kind == "bce" else []))
    return d


def predict(minitrain, d, out, *extra):
    run([minitrain, "predict", "--weights", f"{d}/w.safetensors", "--input", f"{d}/x.npy",
         "--output", f"{d}/{out}", "--device", "cpu"] + list(extra))
    return npy_data(f"{d}/{out}")


def close(got, want, what):
    bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if not abs(g - w) <= ATOL + RTOL * abs(w)]
    if len(got) != len(want) or bad:
        raise SystemExit(f"FAIL: {what}: {len(bad)} of {len(want)} values beyond rtol {RTOL}, "
                         f"atol {ATOL} (first: {bad[:3]}; lengths {len(got)}, {len(want)})")


def same_bytes(got, want, what):
    if got != want:
        g, w = floats(got), floats(want)
        diff = [(i, a, b) for i, (a, b) in enumerate(zip(g, w)) if a != b or struct.pack("<f", a) != struct.pack("<f", b)]
        raise SystemExit(f"FAIL: {what}: not bit-identical ({len(diff)} of {len(w)} differ, first "
                         f"{diff[:3]}; lengths {len(g)}, {len(w)})")


def nonzero(raw, what):
    if max(abs(v) for v in floats(raw)) == 0:
        raise SystemExit(f"FAIL: {what}: all zeros")


# ---- C ----------------------------------------------------------------------------------------

def check_c(minitrain, work, cc):
    driver = os.path.join(os.path.dirname(os.path.abspath(__file__)), "export_driver.c")
    for seed, (name, kind, sizes, act, *extra) in enumerate(cases(), start=1):
        d = train(minitrain, work, name, kind, sizes, act, seed, *extra)
        symbol = f"m_{name}"
        run([minitrain, "export", "--weights", f"{d}/w.safetensors", "--format", "c",
             "--out", f"{d}/c", "--name", symbol])
        flags = [f"-DMODEL={symbol}", f'-DMODEL_HEADER="{symbol}.h"']
        if kind == "classifier":
            flags += ["-DCLASSIFIER", "-DCLASS_NAMES"]
        if kind == "bce":
            flags += ["-DLABELS"]
        run([cc, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-I", f"{d}/c", *flags,
             f"{d}/c/{symbol}.c", driver, "-o", f"{d}/driver", "-lm"])
        run([f"{d}/driver", d])
        header = open(f"{d}/c/{symbol}.h", encoding="utf-8").read()
        if kind == "classifier" and f"{symbol}_input_names" not in header:
            raise SystemExit(f"FAIL: {name}: the header does not name the inputs (feature columns)")
        if ("--standardize" in extra) != (f"{symbol}_mean" in open(f"{d}/c/{symbol}.c").read()):
            raise SystemExit(f"FAIL: {name}: standardisation in the C does not follow the weights")
        with open(f"{d}/y.bin", "rb") as f:
            y = f.read()
        nonzero(y, f"{name}: C outputs")
        if kind == "regression":
            _, ref = predict(minitrain, d, "ref.npy", "--gemm", "reference")
            same_bytes(y, ref, f"{name}: C forward vs predict --gemm reference")
            _, dflt = predict(minitrain, d, "default.npy")
            close(floats(y), floats(dflt), f"{name}: C forward vs default predict")
            print(f"ok   {name}: {len(floats(y))} outputs bit-identical to predict --gemm reference")
            continue
        head = "class.bin" if kind == "classifier" else "labels.bin"
        with open(f"{d}/{head}", "rb") as f:
            cls = f.read()
        with open(f"{d}/p.bin", "rb") as f:
            p = f.read()
        _, ref_cls = predict(minitrain, d, "ref_class.npy", "--gemm", "reference")
        _, ref_p = predict(minitrain, d, "ref_p.npy", "--gemm", "reference", "--probabilities")
        same_bytes(cls, ref_cls, f"{name}: C {head} vs predict --gemm reference")
        same_bytes(p, ref_p, f"{name}: C probabilities vs predict --gemm reference --probabilities")
        _, dflt_p = predict(minitrain, d, "default_p.npy", "--probabilities")
        close(floats(p), floats(dflt_p), f"{name}: C probabilities vs default predict")
        if kind == "classifier":
            with open(f"{d}/names.txt", "rb") as f:
                names = f.read().decode("utf-8").split("\n")[:-1]
            meta = sorted(CLASS_NAMES)  # the training's classes, in sorted order
            if names != meta:
                raise SystemExit(f"FAIL: {name}: class names {names!r}, expected {meta!r}")
            if len(set(floats(cls))) < 2:
                raise SystemExit(f"FAIL: {name}: every row in one class: {set(floats(cls))}")
        print(f"ok   {name}: classes and probabilities bit-identical to predict --gemm reference")
    check_docs_program(minitrain, work, cc)


def check_docs_program(minitrain, work, cc):
    """docs/shipping_a_model.md's C program, compiled against a classifier exported as `digits`,
    names row 0's class as predict does."""
    docs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "shipping_a_model.md")
    text = open(docs, encoding="utf-8").read()
    marker = "<!-- export_check.py compiles and runs this program -->\n```c\n"
    program = text[text.index(marker) + len(marker):].split("```", 1)[0]
    d = f"{work}/cls_relu"
    run([minitrain, "export", "--weights", f"{d}/w.safetensors", "--format", "c", "--out", f"{d}/doc",
         "--name", "digits"])
    with open(f"{d}/doc/main.c", "w") as f:
        f.write(program)
    run([cc, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", f"{d}/doc/main.c", f"{d}/doc/digits.c",
         "-I", f"{d}/doc", "-lm", "-o", f"{d}/doc/classify"])
    _, raw = npy_data(f"{d}/x.npy")
    row = floats(raw)[:3]
    _, cls = npy_data(f"{d}/ref_class.npy")
    want = sorted(CLASS_NAMES)[int(floats(cls)[0])]
    got = subprocess.run([f"{d}/doc/classify"] + ["%.9g" % v for v in row], capture_output=True)
    if got.returncode != 0 or got.stdout.decode("utf-8") != want + "\n":
        raise SystemExit(f"FAIL: the docs' program printed {got.stdout!r} (exit {got.returncode}), "
                         f"predict says {want!r}")
    print(f"ok   docs/shipping_a_model.md's program: row 0 is {want!r}, as predict says")


def check_size(minitrain, work, cc):
    d = f"{work}/size_784_128_10"
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    rng = random.Random(7)
    x = [rng.uniform(0, 1) for _ in range(64 * 784)]
    npy_f32(f"{d}/x.npy", 64, 784, x)
    npy_f32(f"{d}/y.npy", 64, 1, [float(i % 10) for i in range(64)])
    rows = [",".join(["%.9g" % v for v in x[r * 784:(r + 1) * 784]] + [str(r % 10)]) for r in range(64)]
    with open(f"{d}/t.csv", "w") as f:
        f.write(",".join([f"p{i}" for i in range(784)] + ["digit"]) + "\n" + "\n".join(rows) + "\n")
    run([minitrain, "train", "--data", f"{d}/t.csv", "--target-columns", "digit", "--loss",
         "cross_entropy", "--model", "mlp:784,128,10", "--steps", "2", "--save",
         f"{d}/w.safetensors", "--progress", "none", "--device", "cpu"])
    run([minitrain, "export", "--weights", f"{d}/w.safetensors", "--format", "c", "--out", d,
         "--name", "digits"])
    run([cc, "-std=c99", "-Os", "-Wall", "-Wextra", "-Werror", "-c", f"{d}/digits.c", "-o", f"{d}/digits.o"])
    out = run(["size", "-A", f"{d}/digits.o"])
    sections = {l.split()[0]: int(l.split()[1]) for l in out.splitlines()
                if l.startswith(".") and len(l.split()) >= 2 and l.split()[1].isdigit()}
    weights = 4 * (784 * 128 + 128 + 128 * 10 + 10)
    text = sections.get(".text", 0)
    rodata = sum(v for k, v in sections.items() if k.startswith(".rodata"))
    print(f"784-128-10 classifier, {cc} -Os: .text {text} bytes, .rodata {rodata} bytes "
          f"(weights {weights} bytes, {rodata - weights} bytes beyond them)")
    if text > 32 * 1024:
        raise SystemExit(f"FAIL: .text {text} bytes > 32 KiB")


# ---- ONNX -------------------------------------------------------------------------------------

def check_onnx(minitrain, work):
    try:
        import numpy as np
        import onnx
        import onnxruntime as ort
    except ImportError as e:
        print(f"SKIP: onnx and onnxruntime are needed ({e}); pip install onnx onnxruntime "
              "(scripts/setup.sh installs them)")
        return
    # The command runs its script with the first Python that has onnx; this one has.
    os.environ.setdefault("MINITRAIN_PYTHON", sys.executable)
    for seed, (name, kind, sizes, act, *extra) in enumerate(cases(), start=1):
        d = train(minitrain, work, name, kind, sizes, act, seed, *extra)
        _, raw = npy_data(f"{d}/x.npy")
        x = np.frombuffer(raw, dtype="<f4").reshape(-1, sizes[0])
        variants = [("", [])] + ([("_p", ["--probabilities"])] if kind != "regression" else [])
        for suffix, extra in variants:
            path = f"{d}/model{suffix}.onnx"
            out = run([minitrain, "export", "--weights", f"{d}/w.safetensors", "--format", "onnx",
                       "--out", path] + extra)
            if "opset 17" not in out:
                raise SystemExit(f"FAIL: {name}: the opset is not stated: {out}")
            model = onnx.load(path)
            onnx.checker.check_model(model, full_check=True)
            inits = [i.name for i in model.graph.initializer]
            for l in range(len(sizes) - 1):
                for p in (f"{2 * l}.weight", f"{2 * l}.bias"):
                    if p not in inits:
                        raise SystemExit(f"FAIL: {name}: no initializer '{p}' in {inits}")
            session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            names = [o.name for o in session.get_outputs()]
            got = dict(zip(names, session.run(None, {"x": x})))
            if kind == "regression":
                _, want = predict(minitrain, d, "default.npy")
                close(got["y"].ravel().tolist(), floats(want), f"{name}: onnxruntime vs predict")
            elif suffix:
                _, want = predict(minitrain, d, "default_p.npy", "--probabilities")
                close(got["probabilities"].ravel().tolist(), floats(want),
                      f"{name}: onnxruntime probabilities vs predict --probabilities")
            elif kind == "classifier":
                _, want = predict(minitrain, d, "default_class.npy")
                want_cls = floats(want)
                z = got["logits"]
                for r, (c, w) in enumerate(zip(got["class"].ravel().tolist(), want_cls)):
                    # a class may differ only where the two largest logits are within tolerance
                    top = sorted(z[r].tolist(), reverse=True)
                    if c != int(w) and abs(top[0] - top[1]) > ATOL + RTOL * abs(top[0]):
                        raise SystemExit(f"FAIL: {name}: row {r}: onnx class {c}, predict {int(w)}")
                meta = {p.key: p.value for p in model.metadata_props}
                if json.loads(meta.get("classes", "[]")) != sorted(CLASS_NAMES):
                    raise SystemExit(f"FAIL: {name}: metadata classes {meta.get('classes')}")
            else:  # bce: labels from the logits
                _, want = predict(minitrain, d, "default_labels.npy")
                z = got["logits"].ravel().tolist()
                for i, (v, w) in enumerate(zip(z, floats(want))):
                    if (v > 0) != (w == 1.0) and abs(v) > ATOL:
                        raise SystemExit(f"FAIL: {name}: label {i}: logit {v}, predict {w}")
        print(f"ok   {name}: onnx.checker passes, onnxruntime within rtol {RTOL}, atol {ATOL}")


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    minitrain, part, work = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3]
    os.makedirs(work, exist_ok=True)
    if part == "c":
        check_c(minitrain, work, sys.argv[4])
    elif part == "size":
        check_size(minitrain, work, sys.argv[4])
    elif part == "onnx":
        check_onnx(minitrain, work)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
