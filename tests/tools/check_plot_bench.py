#!/usr/bin/env python3
"""Runs scripts/plot_bench.py on the fixtures of tests/fixtures/bench/ and checks what it wrote:
the markdown rows (values known from make_bench_fixtures.py; with repetitions, the median's),
that every SVG is well-formed XML naming its series and the device, and that a file that is not
benchmark JSON is refused with exit 2 and its name.

  check_plot_bench.py PLOT_SCRIPT FIXTURE_DIR WORK_DIR"""
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def svg_texts(path):
    root = ET.parse(path).getroot()  # raises on malformed XML
    check(root.tag == SVG + "svg", f"{path}: root is {root.tag}, not svg")
    return [t.text or "" for t in root.iter(SVG + "text")] + [t.text or "" for t in root.iter(SVG + "title")]


def main(script, fixtures, work):
    shutil.rmtree(work, ignore_errors=True)
    out = os.path.join(work, "out")
    names = ["gemm", "memory", "optimizer", "train-step"]
    r = subprocess.run([sys.executable, script] + [os.path.join(fixtures, n + ".json") for n in names]
                       + ["--out", out], capture_output=True, text=True)
    check(r.returncode == 0, f"plot_bench exited {r.returncode}: {r.stderr}")

    md = {n: open(os.path.join(out, n + ".md")).read() for n in names if os.path.exists(os.path.join(out, n + ".md"))}
    check(set(md) == set(names), f"markdown files written: {sorted(md)}, want {names}")
    rows = {
        "gemm": ["| gemm/square_1024/naive | 800 us | 2.68k | 5.0 |",
                 "| gemm/square_4096/cublas | 2.5 ms | 55k | 100.0 |",
                 "| gemm/mlp_b256_w512_fwd_xWt/cublas | 5 us | 26.8 | 100.0 |",
                 "| benchmark | time | GFLOP/s | pct_of_ref |"],
        "memory": ["| memory/add_vec4/4KiB | 27.31 ns | 150 | 50.0 | 4 KiB |",
                   "| memory/copy/262144KiB | 89.48 us | 3k | 100.0 | 256 MiB |"],
        # the median of 1, 4, 2 ms and of 6, 4, 4.5 ms, not the mean or a single repetition
        "optimizer": ["| optimizer/adam/fused | 2 ms | 500M |", "| optimizer/adam/per_tensor | 4.5 ms | 222M |"],
        "train-step": ["| benchmark | time | loss | params | samples/s |", "| train_step/sgd/w64/b64 | "],
    }
    for n, want in rows.items():
        for row in want:
            check(row in md.get(n, ""), f"{n}.md lacks the row {row!r}:\n{md.get(n, '')}")
    check(md.get("optimizer", "").count("| optimizer/") == 2, "optimizer.md: one row per case (aggregates only)")
    check("gpu: NVIDIA H100 80GB HBM3; host: gpu-box (16 CPUs @ 3000 MHz)" in md.get("gemm", ""),
          "gemm.md does not name the device and host")

    charts = {
        "gemm_gflops.svg": ["cublas", "naive", "warptile", "GFLOP/s", "matrix size m = n = k (log scale)", "1024",
                            "NVIDIA H100"],
        "memory_gbps.svg": ["copy (roof)", "add_vec4", "GB/s (log scale)", "buffer size (log scale)", "256 MiB",
                            "NVIDIA H100"],
        "optimizer_params.svg": ["optimizer/adam/fused", "optimizer/adam/per_tensor", "parameters updated per second",
                                 "device: cpu"],
        "train-step_samples.svg": ["train_step/sgd/w64/b64", "train_step/adam/w256/b64", "training samples per second"],
    }
    for name, want in charts.items():
        path = os.path.join(out, name)
        if not os.path.exists(path):
            check(False, f"no {name} in {sorted(os.listdir(out))}")
            continue
        try:
            texts = svg_texts(path)
        except ET.ParseError as e:
            check(False, f"{name} is not well-formed XML: {e}")
            continue
        for w in want:
            check(any(w in t for t in texts), f"{name} has no text with {w!r}: {texts}")
    svgs = sorted(f for f in os.listdir(out) if f.endswith(".svg"))
    check(svgs == sorted(charts), f"charts written {svgs}, want {sorted(charts)}")

    bad = os.path.join(work, "not_bench.json")
    with open(bad, "w") as f:
        f.write("{ this is not json")
    r = subprocess.run([sys.executable, script, bad, "--out", out], capture_output=True, text=True)
    check(r.returncode == 2 and "not_bench.json' is not JSON" in r.stderr,
          f"bad input: exit {r.returncode}, stderr {r.stderr!r}")
    r = subprocess.run([sys.executable, script, os.path.join(work, "missing.json")], capture_output=True, text=True)
    check(r.returncode == 2 and "cannot read" in r.stderr and "missing.json" in r.stderr,
          f"missing input: exit {r.returncode}, stderr {r.stderr!r}")

    for f in failures:
        print("FAIL: " + f)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
