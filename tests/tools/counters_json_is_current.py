#!/usr/bin/env python3
"""Runs `minitrain bench gemm --counters --shape M,N,K --json` on emulated GPUs and compares it with
a committed JSON of the same shape (tests/fixtures/roofline/): the counters are exact and
deterministic, so any difference means a rung's memory behaviour changed since the fixture (and
the ladder README's emulator table, made from such a JSON) was made.

    counters_json_is_current.py MINITRAIN FIXTURE.json WORK_DIR
"""
import json
import os
import subprocess
import sys

minitrain, fixture, work = sys.argv[1:4]
want = json.load(open(fixture))
m, n, k = want["shape"]
os.makedirs(work, exist_ok=True)
out = os.path.join(work, "now.json")
r = subprocess.run([minitrain, "bench", "gemm", "--counters", "--shape", f"{m},{n},{k}",
                    "--device-profile", want["profile"]["key"], "--json", out],
                   capture_output=True, text=True, timeout=600)
if r.returncode != 0:
    sys.exit(f"bench gemm --counters failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
got = json.load(open(out))
problems = []
for g, w in zip(got["rungs"], want["rungs"]):
    for key in w:
        if g.get(key) != w[key]:
            problems.append(f"{w['rung']}: {key} is {g.get(key)!r}, the fixture has {w[key]!r}")
# The hierarchical roofline's L1 level, worked by hand: H100's L1 roof is one 128-byte wavefront
# per SM per clock, 128 x 132 SMs x 1.98 GHz = 33.454 TB/s; the naive rung uses no shared memory,
# so its L1 bytes are its global bytes moved; no rung moves fewer; the L1 model's time is the
# longest of compute, DRAM and L1 plus the 3 us launch overhead.
prof = got["profile"]
if prof["key"] == "h100" and prof.get("l1_bytes_per_s") != 128 * 132 * 1.98e9:
    problems.append(f"h100 l1_bytes_per_s is {prof.get('l1_bytes_per_s')!r}, not 128 x 132 x 1.98e9")
l1_bw = prof.get("l1_bytes_per_s") or float("inf")
for g in got["rungs"]:
    if g["rung"] == "naive" and g.get("l1_bytes") != g["bytes_moved"]:
        problems.append(f"naive: l1_bytes {g.get('l1_bytes')!r} is not its bytes_moved {g['bytes_moved']}")
    if g.get("l1_bytes", -1) < g["bytes_moved"]:
        problems.append(f"{g['rung']}: l1_bytes {g.get('l1_bytes')!r} is below bytes_moved {g['bytes_moved']}")
    want_t = max(g["flops"] / prof["fp32_flops"], g["distinct_bytes"] / prof["dram_bytes_per_s"],
                 g.get("l1_bytes", 0) / l1_bw) + 3e-6 * g["launches"]
    if abs(g.get("modelled_l1_time_s", 0) - want_t) > 1e-12:
        problems.append(f"{g['rung']}: modelled_l1_time_s {g.get('modelled_l1_time_s')!r}, by hand {want_t}")
# The L2 level, worked by hand: H100's L2 roof is its assumed 5120 bytes per clock x 1.98 GHz =
# 10.1376 TB/s; a rung's L2 bytes hold at least its stores (write-through) and at most every
# sector it moves; the levels model's time is the longest of compute, DRAM, L2 and L1 plus the
# 3 us launch overhead.
if prof["key"] == "h100" and prof.get("l2_bytes_per_s") != 5120 * 1.98e9:
    problems.append(f"h100 l2_bytes_per_s is {prof.get('l2_bytes_per_s')!r}, not 5120 x 1.98e9")
l2_bw = prof.get("l2_bytes_per_s") or float("inf")
for g in got["rungs"]:
    if not (g.get("l2_bytes", -1) <= g["bytes_moved"]):
        problems.append(f"{g['rung']}: l2_bytes {g.get('l2_bytes')!r} above bytes_moved {g['bytes_moved']}")
    want_t = max(g["flops"] / prof["fp32_flops"], g["distinct_bytes"] / prof["dram_bytes_per_s"],
                 g.get("l2_bytes", 0) / l2_bw, g.get("l1_bytes", 0) / l1_bw) + 3e-6 * g["launches"]
    if abs(g.get("modelled_levels_time_s", 0) - want_t) > 1e-12:
        problems.append(f"{g['rung']}: modelled_levels_time_s {g.get('modelled_levels_time_s')!r}, by hand {want_t}")
if len(got["rungs"]) != len(want["rungs"]):
    problems.append(f"{len(got['rungs'])} rungs, the fixture has {len(want['rungs'])}")
if problems:
    print("\n".join(problems))
    sys.exit(f"{fixture} is not what the emulated GPU counts now: remake it with "
             f"minitrain bench gemm --counters --shape {m},{n},{k} --json {fixture} "
             "(and the ladder README's table with scripts/fill_ladder_emu_table.py)")
print(f"{fixture}: every rung's counters as committed")
