#!/usr/bin/env python3
"""ctest: scripts/fill_ladder_table.py fills the ladder README's GPU columns from a synthetic
`minitrain bench gemm` JSON in bench/gemm_bench.cpp's format, and refuses what it cannot fill.
    fill_ladder_table_test.py SCRIPT README"""
import json
import os
import subprocess
import sys
import tempfile

script, readme = sys.argv[1:]
rungs = ["naive", "coalesced", "smem_tiled", "double_buffered", "blocktile_1d", "blocktile_2d",
         "vectorized", "warptile", "tc_tf32", "tc_bf16"]


def row(shape, backend, gflops, pct, ref):
    # As Google Benchmark writes a UseManualTime() row of bench/gemm_bench.cpp.
    return {"name": f"gemm/{shape}/{backend}/manual_time", "run_name": f"gemm/{shape}/{backend}",
            "run_type": "iteration", "iterations": 10, "real_time": 1.0, "time_unit": "us",
            "GFLOP/s": gflops, "pct_of_ref": pct, "label": f"ref {ref}"}


bench = [row("square_4096", "cublas", 50000.0, 100.0, "cublas"),
         row("square_128", "naive", 1.0, 1.0, "cublas")]  # another shape: must not be used
for i, r in enumerate(rungs):
    ref = {"tc_tf32": "cublas_tf32", "tc_bf16": "cublas_bf16"}.get(r, "cublas")
    bench.append(row("square_4096", r, 1000.0 * (i + 1), 2.0 * (i + 1), ref))
data = {"context": {"device": "cuda:0", "gpu": "NVIDIA H100 80GB HBM3"}, "benchmarks": bench}


def run(d, *extra):
    with tempfile.TemporaryDirectory() as tmp:
        j, md = os.path.join(tmp, "gemm.json"), os.path.join(tmp, "README.md")
        json.dump(d, open(j, "w"))
        open(md, "w").write(open(readme).read())
        p = subprocess.run([sys.executable, script, j, md, *extra], capture_output=True, text=True)
        return p, open(md).read()


def check(cond, what):
    if not cond:
        print("FAILED:", what)
        sys.exit(1)


p, text = run(data)
check(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")
lines = {l.split("|")[2].strip(): l for l in text.splitlines() if l.startswith("| 0") or l.startswith("| 1")}
check("| 1,000 | 2 |" in lines["`naive`"], "naive row: " + lines["`naive`"])
check("| 8,000 | 16 |" in lines["`warptile`"], "warptile row: " + lines["`warptile`"])
check("| 9,000 | 18 (of cublas_tf32) |" in lines["`tc_tf32`"], "tc_tf32 row: " + lines["`tc_tf32`"])
check("| 10,000 | 20 (of cublas_bf16) |" in lines["`tc_bf16`"], "tc_bf16 row: " + lines["`tc_bf16`"])
check("NVIDIA H100 80GB HBM3" in text and "to be measured" not in text, "the measured-on line")
check(text.count("| — |") == 0, "a dash left in the table")

# --print leaves the README alone
p, text = run(data, "--print")
check(p.returncode == 0 and "to be measured" in text and "| 8,000 | 16 |" in p.stdout, "--print")

# a rung without a result (errored) fails and names it
bad = json.loads(json.dumps(data))
bad["benchmarks"] = [b for b in bad["benchmarks"] if "warptile" not in b["name"]]
p, _ = run(bad)
check(p.returncode == 1 and "warptile" in p.stderr, f"missing rung: {p.returncode} {p.stderr}")

# a CPU run is refused
cpu = json.loads(json.dumps(data))
cpu["context"]["device"] = "cpu"
p, _ = run(cpu)
check(p.returncode != 0 and "CPU run" in p.stderr + p.stdout, "CPU run accepted")
print("fill_ladder_table.py: OK")
