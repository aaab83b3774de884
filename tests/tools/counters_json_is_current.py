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
if len(got["rungs"]) != len(want["rungs"]):
    problems.append(f"{len(got['rungs'])} rungs, the fixture has {len(want['rungs'])}")
if problems:
    print("\n".join(problems))
    sys.exit(f"{fixture} is not what the emulated GPU counts now: remake it with "
             f"minitrain bench gemm --counters --shape {m},{n},{k} --json {fixture} "
             "(and the ladder README's table with scripts/fill_ladder_emu_table.py)")
print(f"{fixture}: every rung's counters as committed")
