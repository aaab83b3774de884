#!/usr/bin/env python3
"""Fills the emulated-GPU table of kernels/gemm/gemm_ladder/README.md (the block between its
`<!-- emulator table` and `<!-- end emulator table -->` lines) from the JSON of
`minitrain bench gemm --counters --json FILE` (docs/emulator_counters.md), so that the table is
never typed by hand.

    scripts/fill_ladder_emu_table.py JSON [README] [--check]

Columns per rung: global load and store sectors per request, shared-memory bank conflicts and
registers (exact, counted at the JSON's shape), theoretical occupancy and limiter on the JSON's
device profile, and the roofline model's GFLOP/s at 4096^3 (FLOPs 2 x 4096^3 over the profile's
FP32 peak, DRAM bytes the three matrices once, plus 3 us), labelled modelled.
--check: exit 1 when the README's block is not what the JSON gives (nothing written).
"""
import argparse
import json
import os
import sys

BEGIN = "<!-- emulator table: scripts/fill_ladder_emu_table.py writes it, do not edit -->"
END = "<!-- end emulator table -->"
LAUNCH_OVERHEAD_S = 3e-6  # cuda_emu/include/cuda_emu/occupancy.h kModelLaunchOverheadS


def modelled_gflops_4096(peak, bw):
    n = 4096
    flops, bytes_ = 2.0 * n ** 3, 3.0 * n * n * 4
    t = max(flops / peak, bytes_ / bw) + LAUNCH_OVERHEAD_S
    return flops / t / 1e9


def block(doc):
    prof = doc["profile"]
    m, n, k = doc["shape"]
    g4096 = modelled_gflops_4096(float(prof["fp32_flops"]), float(prof["dram_bytes_per_s"]))
    lines = [BEGIN, "",
             f"On the emulated GPU: counted at {m} x {n} x {k} by `minitrain bench gemm --counters "
             f"--json` (exact counters; occupancy on the {prof['name']} profile with "
             f"{doc.get('registers_from', 'nvcc')} registers; the last column MODELLED, not "
             "measured: docs/emulator_counters.md).", "",
             "| rung | load sectors / request | store sectors / request | bank conflicts | registers "
             "| occupancy (limiter) | modelled GFLOP/s at 4096^3 |",
             "|---|---|---|---|---|---|---|"]
    for r in doc["rungs"]:
        regs = "unknown" if r.get("registers") is None else str(r["registers"])
        lines.append(f"| `{r['rung']}` | {r['global_load_sectors_per_request']:.2f} | "
                     f"{r['global_store_sectors_per_request']:.2f} | {r['shared_bank_conflicts']} | "
                     f"{regs} | {r['occupancy_pct']:.1f} % ({r['occupancy_limiter']}) | "
                     f"{g4096:,.0f} |")
    lines += ["", "The modelled column is the same for every rung: the DRAM roofline charges each "
              "the same bytes at 4096^3, where all are compute bound at the FP32 peak; the counted "
              "columns are what separate them.", "", END]
    return "\n".join(lines)


def fill(readme, doc):
    if BEGIN not in readme or END not in readme:
        raise SystemExit(f"fill_ladder_emu_table.py: the README lacks the lines {BEGIN!r} and {END!r}")
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + block(doc) + tail


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("readme", nargs="?",
                    default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                         "kernels", "gemm", "gemm_ladder", "README.md"))
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    try:
        with open(a.json) as f:
            doc = json.load(f)
        doc["profile"], doc["rungs"], doc["shape"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"fill_ladder_emu_table.py: {a.json} is not the JSON of minitrain bench gemm --counters --json: {e}")
    with open(a.readme) as f:
        old = f.read()
    new = fill(old, doc)
    if a.check:
        if new != old:
            print(f"{a.readme}: the emulator table is not what {a.json} gives: run "
                  f"scripts/fill_ladder_emu_table.py {a.json}", file=sys.stderr)
            sys.exit(1)
        print(f"{a.readme}: the emulator table is {a.json}'s")
        return
    tmp = a.readme + ".tmp"
    with open(tmp, "w") as f:
        f.write(new)
    os.replace(tmp, a.readme)
    print(f"wrote the emulator table of {a.readme}")


if __name__ == "__main__":
    main()
