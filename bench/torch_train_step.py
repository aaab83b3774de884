#!/usr/bin/python3
"""PyTorch's side of bench/train_step_bench.cpp: one training step of mlp:64,W,W,16 (ReLU),
float32, MSELoss(mean), zero_grad, backward, SGD(momentum 0.9) or Adam step, on one fixed batch,
for W in 64..1024 and batch 256 and 64. On the CPU by default; `--device cuda` runs it on the GPU
(the counterpart of train_step/cuda/...; the loss.item() of every step synchronises, as there),
and `--dtype bf16` runs forward and loss under torch.autocast(bfloat16) with float32 weights and
optimizer (mixed precision; docs/gpu_kit.md).

Each case: warm-up steps, then `--repeats` timed runs of enough steps to last ~0.2 s each; the
figure is the median time per step. torch's optimizers run with their default (per-tensor loops;
1.13 defaults foreach=False) and with foreach=True (multi-tensor); the comparison takes the
faster of the two as torch's time. bench/compare_train_step.sh also runs this script with
OMP_WAIT_POLICY=PASSIVE: Debian's torch does its GEMMs on OpenBLAS's pthread pool while its own
OpenMP threads spin between regions, and on two cores the passive policy is much faster.

    /usr/bin/python3 bench/torch_train_step.py [--threads 2] [--repeats 7] [--json out.json]
                                               [--cases sgd/w64/b256,adam/w1024/b64]
                                               [--device cpu|cuda] [--dtype fp32|bf16]
"""
import argparse
import json
import statistics
import time

import torch

IN, OUT = 64, 16
WIDTHS = [64, 128, 256, 512, 1024]
BATCHES = [256, 64]


def make_model(width):
    return torch.nn.Sequential(
        torch.nn.Linear(IN, width), torch.nn.ReLU(),
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, OUT))


def make_optimizer(name, params, foreach):
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.01, momentum=0.9, foreach=foreach)
    return torch.optim.Adam(params, lr=1e-3, foreach=foreach)


def time_case(opt_name, width, batch, foreach, repeats, device="cpu", dtype="fp32"):
    torch.manual_seed(0)
    model = make_model(width).to(device)
    opt = make_optimizer(opt_name, model.parameters(), foreach)
    loss_fn = torch.nn.MSELoss()
    x = (torch.rand(batch, IN) * 2 - 1).to(device)
    y = (torch.rand(batch, OUT) * 2 - 1).to(device)
    autocast = dtype == "bf16"

    def step():
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()  # the loss reaches Python every step, as a training loop logs it

    for _ in range(10):
        step()
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < 0.1:
        step()
        n += 1
    per_run = max(1, int(0.2 / ((time.perf_counter() - t0) / n)))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(per_run):
            step()
        times.append((time.perf_counter() - t0) / per_run)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", help="also write {case: {variant: seconds}} here")
    ap.add_argument("--cases", help="comma-separated cases (optimizer/wWIDTH/bBATCH); default all")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="where the step runs (cuda: torch's first GPU)")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: forward and loss under torch.autocast(bfloat16)")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("torch_train_step.py: --device cuda, but torch sees no GPU "
                         f"(torch {torch.__version__}, built with CUDA {torch.version.cuda})")
    torch.set_num_threads(args.threads)

    results = {}
    where = (torch.cuda.get_device_name(0) if args.device == "cuda"
             else f"{torch.get_num_threads()} threads")
    print(f"torch {torch.__version__}, {args.device} ({where}), {args.dtype}, "
          f"median of {args.repeats} runs")
    print(f"{'case':28s} {'default us':>11s} {'foreach us':>11s} {'samples/s':>11s}")
    for opt_name in ["sgd", "adam"]:
        for batch in BATCHES:
            for width in WIDTHS:
                case = f"{opt_name}/w{width}/b{batch}"
                if args.cases and case not in args.cases.split(","):
                    continue
                r = {v: time_case(opt_name, width, batch, fe, args.repeats, args.device, args.dtype)
                     for v, fe in (("default", None), ("foreach", True))}
                results[case] = r
                best = min(r.values())
                print(f"{case:28s} {r['default'] * 1e6:11.1f} {r['foreach'] * 1e6:11.1f} "
                      f"{batch / best:11.0f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch_version": torch.__version__, "threads": args.threads,
                       "device": args.device, "dtype": args.dtype,
                       "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else None,
                       "seconds_per_step": results}, f, indent=1)


if __name__ == "__main__":
    main()
