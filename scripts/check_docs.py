#!/usr/bin/env python3
"""The doc check: every shell command the README (and the checked docs pages) shows is run.

  check_docs.py --build DIR [--emu-build DIR] [--list] [FILE.md ...]

Each fenced block whose info string is `sh` (or `bash`, `shell`) holds commands, one a line
(a trailing backslash continues it); a block of any other language (`text`, `cpp`, `toml`, ...)
shows something else and is not run. A fence with no language in a checked file is an error, so
that no command hides in an unmarked block. Every command is one of:

  - run: its programs are the build's (`build/release/tools/minitrain`, `build/release/examples/NAME`;
    `build/emu/tools/minitrain` with --emu-build). It runs under bash from a fresh temporary
    directory laid out like the repository's root: `build/release/tools` and `.../examples` are
    links to --build's, `build/emu/tools` to --emu-build's, and the folders in INPUTS link to the
    source tree's (they hold the data the commands read). It must exit 0, and where EXPECT has a
    rule for it, its output must say what the docs say it does;
  - not run: listed in NOT_RUN with the reason (the two top commands: setup, and the whole suite);
  - emulated: a `build/emu/` command when --emu-build is not given: the emu preset's ctest case
    `docs_commands_run_on_emulated_gpus` runs it (printed, not hidden);
  - anything else is an error ("does not know how to run"): add the program or a NOT_RUN row.

The commands of one file share their directory, in order, as a reader typing them would.
Exit status: 0 when every command ran as expected, 1 otherwise, 2 on a usage error.
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The pages whose shell blocks are checked when no file is named.
DEFAULT_FILES = ["README.md", "docs/training.md", "docs/library.md", "docs/emulated_gpus.md",
                 "docs/profiling.md"]

# Source folders the commands read from (data, fixtures), linked into the temporary directory.
INPUTS = ["examples", "tests"]

# Commands that cannot run inside the test suite, each with the reason (exact text, comment cut).
NOT_RUN = {
    "scripts/setup.sh && build/release/tools/minitrain train":
        "installs Debian packages and builds the release preset: it is the first step of "
        "scripts/test.sh, and the training run is ctest minitrain_train_default_run_lowers_the_loss_tenfold",
    "scripts/test.sh":
        "the whole test suite, of which this check is one case; .ci/run runs exactly it (checked below)",
    "scripts/setup.sh emu":
        "builds the emu preset (the CUDA code for emulated GPUs); scripts/test.sh does, and this check's "
        "emulated case runs in it",
    "ctest --preset emu":
        "the emulated GPUs' whole suite, of which docs_commands_run_on_emulated_gpus is one case",
    "scripts/setup.sh emu-tsan && ctest --preset emu-tsan -R ^Cuda(Emu|BrokenKernels)":
        "builds the ThreadSanitizer preset and runs the race cases: a stage of scripts/test.sh",
    "scripts/emucc.sh my.cu -o my && MINITRAIN_EMU_COUNTERS=c.jsonl ./my":
        "compiles the reader's own my.cu; ctest CudaEmuCc.CompilesAProgramAndCountsItsAccesses (emu "
        "preset) runs scripts/emucc.sh on a program of its own and checks the counters",
}

# Programs a command may start, by the path the docs give: (prefix, which build, its folder there).
PROGRAMS = [
    ("build/release/tools/", "build", "tools"),
    ("build/release/examples/", "build", "examples"),
    ("build/emu/tools/", "emu", "tools"),
]


def held_out_accuracy_at_least(minimum):
    def check(out):
        m = re.search(r"held out \((\d+) rows\): val_loss [0-9.e+-]+, val_accuracy ([0-9.e+-]+)", out)
        if not m:
            return "it printed no 'held out (N rows): val_loss X, val_accuracy Y' line"
        if float(m.group(2)) < minimum:
            return f"held-out accuracy {m.group(2)} is below the {minimum} the docs promise"
        return None
    return check


def output_matches(regex):
    def check(out):
        return None if re.search(regex, out) else f"its output does not match /{regex}/"
    return check


# What a command's output must show, for commands whose docs say what they do: (regex on the
# command, rule).
EXPECT = [
    (r"minitrain train --data examples/data/iris\.csv .*--val-split", held_out_accuracy_at_least(0.9)),
    (r"minitrain evaluate --weights iris\.safetensors", output_matches(r'"rows":150,"classes":3,')),
    (r"minitrain predict --weights \S+ --input examples/data/iris\.csv", output_matches(r"predicted 150 rows")),
    (r"examples/regression_mlp cpu 2", output_matches(r"epoch 2  mean loss [0-9.]+")),
    (r"examples/classify_csv examples/data/iris\.csv species 50", output_matches(r"30 held-out rows: accuracy (1\.000|0\.9[0-9]*)")),
    (r"build/emu/tools/minitrain train --device cuda", output_matches(r"on cuda(:0)?\b.*\n(.*\n)*done: steps")),
    (r"minitrain train .*--profile-kernels", output_matches(r"kernel profile: \d+ step\(s\), .*\n(.*\n)*  \(outside any op\) ")),
]

SHELL_LANGS = {"sh", "bash", "shell"}


def commands_of(path):
    """(line number, command, language) of every line of every fenced block; fences without a
    language are returned with language None."""
    out, lang, start, pending = [], None, 0, ""
    in_block = False
    with open(path) as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        fence = re.match(r"^\s*```(.*)$", line)
        if fence and not in_block:
            in_block, lang, start = True, fence.group(1).strip() or None, n
            if lang is None:
                out.append((n, None, None))
            continue
        if fence and in_block:
            in_block = False
            continue
        if not in_block or lang not in SHELL_LANGS:
            continue
        if pending:
            line = pending + " " + line.strip()
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1].rstrip()
            continue
        pending = ""
        if line.strip() and not line.strip().startswith("#"):
            out.append((n, line.strip(), lang))
    if in_block:
        out.append((start, "", "unclosed"))
    return out


def without_comment(cmd):
    lex = shlex.shlex(cmd, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = "#"
    return list(lex)


def programs_of(tokens):
    """The program of each simple command in a line (after VAR=value assignments)."""
    progs, expect_prog = [], True
    for t in tokens:
        if t in ("&&", "||", ";", "|", "&"):
            expect_prog = True
            continue
        if expect_prog:
            if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", t):
                continue
            progs.append(t)
            expect_prog = False
    return progs


def classify(cmd, have_emu):
    tokens = without_comment(cmd)
    text = " ".join(tokens)
    if text in NOT_RUN:
        return "not run", NOT_RUN[text]
    kinds = set()
    for p in programs_of(tokens):
        for prefix, kind, _ in PROGRAMS:
            if p.startswith(prefix) and "/" not in p[len(prefix):] and p != prefix:
                kinds.add(kind)
                break
        else:
            return "unknown", f"does not know how to run '{p}': give it a program of the build " \
                              f"({', '.join(x for x, _, _ in PROGRAMS)}) or a NOT_RUN row with the reason"
    if "emu" in kinds and not have_emu:
        return "emulated", "needs the emu build: run by ctest docs_commands_run_on_emulated_gpus (emu preset)"
    return "run", ""


def make_sandbox(build, emu):
    d = tempfile.mkdtemp(prefix="minitrain_docs_")
    for name in INPUTS:
        os.symlink(os.path.join(ROOT, name), os.path.join(d, name))
    os.makedirs(os.path.join(d, "build", "release"))
    for prefix, kind, sub in PROGRAMS:
        target = {"build": build, "emu": emu}[kind]
        link = os.path.join(d, prefix.rstrip("/"))
        if target and not os.path.exists(link):
            os.makedirs(os.path.dirname(link), exist_ok=True)
            os.symlink(os.path.join(target, sub), link)
    return d


def check_ci_runs_the_test_command():
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        lines = [l.strip() for l in f if l.strip() and not l.strip().startswith("#")]
    if "scripts/test.sh" not in lines:
        return ".ci/run does not run the README's test command 'scripts/test.sh'"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="the build whose tools/ and examples/ stand for build/release")
    ap.add_argument("--emu-build", help="the emu preset's build, for build/emu/ commands")
    ap.add_argument("--list", action="store_true", help="classify the commands, run nothing")
    ap.add_argument("--timeout", type=float, default=60, help="seconds per command")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    if not args.list and not args.build and not args.emu_build:
        ap.error("--build (or --emu-build) is needed to run commands; --list runs none")
    files = args.files or [os.path.join(ROOT, f) for f in DEFAULT_FILES]
    only_emu = args.emu_build and not args.build
    failures, ran, total = [], 0, time.time()

    err = check_ci_runs_the_test_command()
    if err:
        failures.append(err)

    for path in files:
        rel = os.path.relpath(path, ROOT)
        sandbox = None if args.list else make_sandbox(
            os.path.abspath(args.build) if args.build else None,
            os.path.abspath(args.emu_build) if args.emu_build else None)
        for n, cmd, lang in commands_of(path):
            where = f"{rel}:{n}"
            if lang is None:
                failures.append(f"{where}: a fence without a language: say `sh` for commands, `text` otherwise")
                continue
            if lang == "unclosed":
                failures.append(f"{where}: a fence that is never closed")
                continue
            kind, why = classify(cmd, bool(args.emu_build))
            if only_emu and kind == "run" and "build/emu/" not in cmd:
                continue  # the cpu preset's case runs it
            if kind == "unknown":
                failures.append(f"{where}: {cmd}\n    {why}")
                print(f"FAIL {where}: {why}")
                continue
            if kind != "run" or args.list:
                print(f"{kind:8} {where}: {cmd}" + (f"\n         ({why})" if why else ""))
                continue
            start = time.time()
            try:
                r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=sandbox, capture_output=True,
                                   text=True, timeout=args.timeout, stdin=subprocess.DEVNULL)
                code, out = r.returncode, r.stdout + r.stderr
            except subprocess.TimeoutExpired as e:
                code, out = "timeout", f"(over {args.timeout:.0f} s) " + str(e.stdout or "")
            took = time.time() - start
            ran += 1
            problem = None if code == 0 else f"exit {code}"
            if problem is None:
                for pattern, rule in EXPECT:
                    if re.search(pattern, cmd):
                        problem = rule(out)
                        if problem:
                            break
            status = "ok  " if problem is None else "FAIL"
            print(f"{status} {where} ({took:.1f} s): {cmd}")
            if problem:
                tail = "\n".join(out.strip().split("\n")[-6:])
                failures.append(f"{where}: {cmd}\n    {problem}\n    output (last lines):\n{tail}")
        if sandbox:
            subprocess.run(["rm", "-rf", sandbox])

    print(f"\n{ran} commands ran in {time.time() - total:.1f} s")
    if failures:
        print(f"\n{len(failures)} problem(s):")
        for f in failures:
            print("- " + f)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
