#!/usr/bin/env python3
"""Every GoogleTest case of tests/ is registered by a build whose ctest run includes it.

CI builds each test file where it buys something (docs/building.md, "CI: the stages"): the CUDA
build in CI compiles only the test files that may hold gpu cases (Note [gpu tests only]), the cpu
build compiles them all, the emulated build compiles the gpu ones and runs its `gpu` label only.
A case is lost when no build both registers and runs it: a file left out everywhere, a case under
an #if that no build takes, or a file in no CMakeLists.txt at all. This check reads every test
source's TEST/TEST_F/TEST_P/TYPED_TEST declarations and finds each in the union of the builds'
ctest lists (`ctest -N`, with the label filter of that build's test preset).

    scripts/check_every_case_runs.py BUILD[:LABEL] ...
        e.g. build/release build/cpu build/emu:gpu   (LABEL: only that label's entries count)

A file compiled only into programs that ctest runs whole (the MPI programs, one entry per rank
count; the fault-injection program) is counted by its program, not case by case.
Exit 0 with a one-line summary; 1 naming every lost case (at most 40) and every file no build
compiles.
"""
import functools
import json
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DECL = re.compile(r"^[ \t]*(TEST|TEST_F|TEST_P|TYPED_TEST)\(\s*(\w+)\s*,\s*(\w+)\s*\)", re.M)
TARGET = re.compile(r"CMakeFiles/([^/]+)\.dir/")


def declared_cases(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return {(m.group(2), m.group(3)) for m in DECL.finditer(f.read())}


def ctest_names(build, label):
    cmd = ["ctest", "--test-dir", build, "-N"] + (["-L", label] if label else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [m.group(1) for m in re.finditer(r"^\s*Test\s+#\d+: (\S+)", out, re.M)]


def suite_and_name(entry):
    """'Devices/Suite.Name/cpu' -> ({'Devices', 'Suite'}, 'Name'); 'Suite/0.Name' -> ({'Suite', '0'},
    'Name'); a typed case with named types: 'Suite.Name<Suite/naive.' -> ({'Suite'}, 'Name')."""
    head, dot, tail = entry.partition(".")
    if not dot:
        return set(), None
    return set(head.split("/")), re.split(r"[/<]", tail)[0]


@functools.lru_cache(maxsize=None)
def source_dir(build):
    """The tree BUILD was configured from (a clean clone's builds of the same commit compare too)."""
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith("CMAKE_HOME_DIRECTORY:"):
                return os.path.realpath(line.split("=", 1)[1].strip())
    return ROOT


def source_of(build, path):
    """A compiled file's path in this tree (emulated builds compile BUILD/cuda_emu_src/X.cu.cpp)."""
    mirror = os.path.join(os.path.realpath(build), "cuda_emu_src") + os.sep
    if path.startswith(mirror) and path.endswith(".cu.cpp"):
        return os.path.join(ROOT, path[len(mirror):-len(".cpp")])
    src = source_dir(build) + os.sep
    return os.path.join(ROOT, path[len(src):]) if path.startswith(src) else path


def compiled_into(build):
    """{source: {target, ...}} for the test files this build compiles, and the targets whose cases
    ctest registers one by one (gtest_discover_tests writes TARGET[1]_include.cmake)."""
    with open(os.path.join(build, "compile_commands.json")) as f:
        commands = json.load(f)
    files = {}
    for c in commands:
        src = source_of(build, os.path.realpath(c["file"]))
        if not src.startswith(os.path.join(ROOT, "tests") + os.sep):
            continue
        args = shlex.split(c["command"]) if "command" in c else c["arguments"]
        out = args[args.index("-o") + 1] if "-o" in args else ""
        m = TARGET.search(out)
        if m:
            files.setdefault(src, set()).add(m.group(1))
    discovered = set()
    for dirpath, _, names in os.walk(os.path.join(build, "tests")):
        for n in names:
            if n.endswith("[1]_include.cmake"):
                discovered.add(n[: -len("[1]_include.cmake")])
    return files, discovered


def main(argv):
    if not argv:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    registered = {}  # case (suite, name) -> builds that run it
    compiled = {}  # source -> (discovered targets, other targets)
    for arg in argv:
        build, _, label = arg.partition(":")
        if not os.path.isfile(os.path.join(build, "compile_commands.json")):
            print(f"check_every_case_runs: {build} has no compile_commands.json (not configured?)", file=sys.stderr)
            return 2
        for entry in ctest_names(build, label):
            suites, name = suite_and_name(entry)
            for s in suites:
                registered.setdefault((s, name), set()).add(build)
        files, discovered = compiled_into(build)
        for src, targets in files.items():
            d, o = compiled.setdefault(src, (set(), set()))
            d.update(targets & discovered)
            o.update(targets - discovered)

    lost, nowhere, whole = [], [], 0
    total = 0
    for dirpath, dirs, names in os.walk(os.path.join(ROOT, "tests")):
        dirs.sort()
        for n in sorted(names):
            if not n.endswith((".cpp", ".cu")):
                continue
            path = os.path.join(dirpath, n)
            cases = declared_cases(path)
            if not cases:
                continue
            total += len(cases)
            rel = os.path.relpath(path, ROOT)
            discovered, other = compiled.get(path, (set(), set()))
            if not discovered and not other:
                nowhere.append(rel)
                continue
            if not discovered:  # run whole by its program's ctest entries
                whole += len(cases)
                continue
            lost += [f"{rel}: {s}.{c}" for s, c in sorted(cases) if (s, c) not in registered]
    if lost or nowhere:
        for f in nowhere:
            print(f"check_every_case_runs: {f} declares cases but no build compiles it", file=sys.stderr)
        if lost:
            print(f"check_every_case_runs: {len(lost)} declared cases that no build runs "
                  f"({' '.join(argv)}):", file=sys.stderr)
            for line in lost[:40]:
                print("  " + line, file=sys.stderr)
        return 1
    print(f"[every case] all {total} declared cases run: {total - whole} registered one by one in "
          f"{' + '.join(argv)}, {whole} inside whole-program entries (MPI, fault injection)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
