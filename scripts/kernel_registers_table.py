#!/usr/bin/env python3
"""The register table of the emulated GPU's occupancy (docs/emulator_counters.md): registers and
static shared memory per kernel from the real compiler, one line per kernel of minitrain's .cu
files, written to cuda_emu/kernel_registers.tsv and compiled into the emulator.

    scripts/kernel_registers_table.py [--arch sm_90] [--check] [--from RESOURCES.tsv]

runs scripts/kernel_resources.sh (nvcc --resource-usage, about 15 s a file) over kernels/**/*.cu
and folds a template's instantiations into one line (the emulator knows a launch by the kernel's
name as written, not by its template arguments): their count, least and most registers, most
static shared memory. Each line carries the first 16 hex digits of its .cu file's SHA-256, so a
test (emu_kernel_registers_test) can say when a file changed after the table was made.
--check: exit 1 when the table differs from what nvcc gives now (nothing written).
--check-sources: no compiler needed: exit 1 when a .cu file's hash differs from its lines' (it
changed after the table was made) or a .cu file with a __global__ kernel has no line.
Needs nvcc, except for --check-sources; without it exits 2.
"""
import argparse
import hashlib
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = os.path.join(ROOT, "cuda_emu", "kernel_registers.tsv")


def sources():
    out = []
    for d, _, files in os.walk(os.path.join(ROOT, "kernels")):
        out += [os.path.relpath(os.path.join(d, f), ROOT) for f in files if f.endswith(".cu")]
    return sorted(out)


def base_name(demangled):
    """'void a::b::k<1, T>(int*, long)' -> 'k'."""
    s = demangled.replace("(anonymous namespace)", "anon").split("(")[0]
    depth, name = 0, ""
    for ch in s:  # drop template arguments
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            name += ch
    return name.split()[-1].split("::")[-1]


def sha16(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def table(arch, resources=None):
    if resources is None:
        r = subprocess.run([os.path.join(ROOT, "scripts", "kernel_resources.sh"), "--arch", arch, *sources()],
                           cwd=ROOT, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"kernel_registers_table.py: kernel_resources.sh failed ({r.returncode}): {r.stderr}")
        resources = r.stdout
    folded = {}
    for line in resources.splitlines()[1:]:
        path, kernel, regs, smem, _ = line.split("\t")
        key = (path, base_name(kernel))
        n, lo, hi, sm = folded.get(key, (0, 1 << 30, 0, 0))
        folded[key] = (n + 1, min(lo, int(regs)), max(hi, int(regs)), max(sm, int(smem)))
    version = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
    release = re.search(r"release ([0-9.]+), (V[0-9.]+)", version)
    lines = ["# Registers per kernel from nvcc --resource-usage: scripts/kernel_registers_table.py made "
             "this file; the emulated GPU's occupancy reads it (docs/emulator_counters.md).",
             f"# nvcc {release.group(1)} ({release.group(2)}), {arch}" if release else f"# nvcc ?, {arch}",
             "file\tkernel\tinstantiations\tregisters_min\tregisters_max\tstatic_smem_max\tsource_sha256"]
    for (path, kernel), (n, lo, hi, sm) in sorted(folded.items()):
        lines.append(f"{path}\t{kernel}\t{n}\t{lo}\t{hi}\t{sm}\t{sha16(path)}")
    return "\n".join(lines) + "\n"


def check_sources():
    rows = [l.split("\t") for l in open(TABLE).read().splitlines() if l and not l.startswith(("#", "file\t"))]
    problems, listed = [], set()
    for row in rows:
        path, kernel, sha = row[0], row[1], row[6]
        listed.add(path)
        if not os.path.exists(os.path.join(ROOT, path)):
            problems.append(f"{path} (kernel {kernel}) no longer exists")
        elif sha16(path) != sha:
            problems.append(f"{path} changed after the table was made (kernel {kernel})")
    for path in sources():
        if path not in listed and "__global__" in open(os.path.join(ROOT, path)).read():
            problems.append(f"{path} has kernels and no line")
    for p in sorted(set(problems)):
        print(f"kernel_registers_table.py: {p}", file=sys.stderr)
    if problems:
        print("run scripts/kernel_registers_table.py (nvcc, about 15 s a file) and commit "
              "cuda_emu/kernel_registers.tsv", file=sys.stderr)
        sys.exit(1)
    print(f"{TABLE}: {len(rows)} kernels, every source as when the table was made")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--from", dest="resources", help="kernel_resources.sh's output, already made")
    ap.add_argument("--check-sources", action="store_true")
    a = ap.parse_args()
    if a.check_sources:
        check_sources()
        return
    if subprocess.run(["sh", "-c", "command -v nvcc"], capture_output=True).returncode != 0:
        print("kernel_registers_table.py: nvcc not found: registers unknown", file=sys.stderr)
        sys.exit(2)
    text = table(a.arch, open(a.resources).read() if a.resources else None)
    if a.check:
        old = open(TABLE).read() if os.path.exists(TABLE) else ""
        if old != text:
            print(f"{TABLE} is not what nvcc gives now: run scripts/kernel_registers_table.py", file=sys.stderr)
            sys.exit(1)
        return
    tmp = TABLE + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, TABLE)
    print(f"wrote {TABLE}: {len(text.splitlines()) - 3} kernels")


if __name__ == "__main__":
    main()
