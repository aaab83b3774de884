#!/usr/bin/env python3
"""Fills the GPU columns (GFLOP/s, % of cuBLAS) of kernels/gemm/gemm_ladder/README.md's rung table
from the JSON of `minitrain bench gemm` on a GPU (bench/gemm_bench.cpp: rows named
gemm/<shape>/<backend>[/manual_time] with the counters GFLOP/s and pct_of_ref, the label
"ref <reference backend>"), so that the table is never filled by hand (docs/gpu_kit.md).

    scripts/fill_ladder_table.py GEMM_JSON [README] [--shape square_4096] [--print]

Without --print the README is rewritten in place; with it the filled table goes to stdout only.
Exits 1 when the JSON has no CUDA result for a rung of the table (a rung that errored, or a CPU run).
"""
import argparse
import json
import re
import sys

ROW = re.compile(r"^\| *(\d+) *\| *`([a-z0-9_]+)` *\|")


def results(data, shape):
    """{backend: (GFLOP/s, pct_of_ref, reference)} for the rows of `shape`; means over repetitions
    are taken as Google Benchmark reports them (aggregate 'mean' when present, else the run)."""
    out = {}
    for b in data.get("benchmarks", []):
        name = b.get("run_name") or b.get("name", "")
        parts = name.split("/")
        if len(parts) < 3 or parts[0] != "gemm" or parts[1] != shape or b.get("error_occurred"):
            continue
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "mean":
            continue
        if "GFLOP/s" not in b or "pct_of_ref" not in b:
            continue
        ref = b.get("label", "").removeprefix("ref ").strip() or "?"
        if parts[2] not in out or b.get("aggregate_name") == "mean":
            out[parts[2]] = (float(b["GFLOP/s"]), float(b["pct_of_ref"]), ref)
    return out


def fill(readme, data, shape):
    measured = results(data, shape)
    ctx = data.get("context", {})
    if ctx.get("device", "cuda").startswith("cpu"):
        raise SystemExit(f"fill_ladder_table.py: the JSON is a CPU run (device {ctx.get('device')})")
    lines, missing = [], []
    for line in readme.splitlines():
        m = ROW.match(line)
        if m:
            cells = line.split("|")
            # | # | rung | file | what it changes | what bounds it | GFLOP/s | % of cuBLAS |
            backend = m.group(2)
            if backend in measured:
                gflops, pct, ref = measured[backend]
                cells[-3] = f" {gflops:,.0f} "
                cells[-2] = f" {pct:.0f}" + ("" if ref == "cublas" else f" (of {ref})") + " "
            else:
                missing.append(backend)
            line = "|".join(cells)
        elif line.startswith("GFLOP/s and % of cuBLAS:"):
            line = (f"GFLOP/s and % of cuBLAS: measured at {shape} on "
                    f"{ctx.get('gpu', ctx.get('device', 'the GPU'))}, filled by "
                    f"scripts/fill_ladder_table.py from `minitrain bench gemm` (docs/gpu_kit.md).")
        lines.append(line)
    # The sentence after the measured-on line belonged to the unmeasured table.
    text = "\n".join(lines) + "\n"
    text = re.sub(r"(filled by scripts/fill_ladder_table\.py[^\n]*\n)written; `bench/gemm_bench\.cpp`[^\n]*\n",
                  r"\1", text)
    return text, missing


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("json")
    ap.add_argument("readme", nargs="?", default="kernels/gemm/gemm_ladder/README.md")
    ap.add_argument("--shape", default="square_4096")
    ap.add_argument("--print", action="store_true", help="print the table, leave the README")
    a = ap.parse_args()
    with open(a.json) as f:
        data = json.load(f)
    with open(a.readme) as f:
        text, missing = fill(f.read(), data, a.shape)
    if a.print:
        print("\n".join(l for l in text.splitlines() if l.startswith("|")))
    else:
        with open(a.readme, "w") as f:
            f.write(text)
    if missing:
        print(f"fill_ladder_table.py: no {a.shape} result for: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
