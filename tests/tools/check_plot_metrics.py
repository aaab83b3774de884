#!/usr/bin/env python3
"""Issue 30's checks of scripts/plot_metrics.py (what `minitrain plot` runs), on hand-written logs:
a run name and a title holding `$` (once a mathtext ParseException from savefig) are drawn as
written; one legend serves every panel (there was one per panel); the best run is marked at its
best step and named on stdout; a val_loss spanning decades gets a log scale like loss.

  check_plot_metrics.py PLOT_SCRIPT WORK_DIR

It runs the script under the first of $MINITRAIN_PYTHON, this interpreter and /usr/bin/python3
that can import matplotlib; when none can, it checks the helpers that need no matplotlib and
prints "SKIP: no Python with matplotlib", which CMake reports as skipped."""
import importlib.util
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from matplotlib_python import pick_python  # noqa: E402

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)




def write_log(path, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for step, loss, val in rows:
            f.write('{"step": %d, "loss": %g%s}\n' % (step, loss, "" if val is None else ', "val_loss": %g' % val))


def main():
    script, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    # The helpers, without matplotlib.
    spec = importlib.util.spec_from_file_location("plot_metrics", script)
    pm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pm)
    check(pm.literal("r$^$") == r"r\$^\$", f"literal('r$^$') is {pm.literal('r$^$')!r}")
    check(pm.log_scale("val_loss", [10.0, 1.0, 0.01]), "val_loss from 10 to 0.01 gets no log scale")
    check(not pm.log_scale("val_loss", [2.0, 1.0]), "val_loss from 2 to 1 gets a log scale")
    check(not pm.log_scale("accuracy", [0.001, 1.0]), "accuracy gets a log scale")
    logs = [("a", {"loss": ([1, 2, 3], [3.0, 2.0, 1.0]), "val_loss": ([2], [1.5])}),
            ("b", {"loss": ([1, 2, 3], [3.0, 0.5, 0.7]), "val_loss": ([2, 3], [0.9, 1.2])})]
    check(pm.best_point(logs) == (1, "val_loss", 2, 0.9), f"best_point is {pm.best_point(logs)}")
    check(pm.best_point([("a", {"loss": ([1, 2], [2.0, 1.0])})]) == (0, "loss", 2, 1.0),
          "without val_loss the best is the lowest loss")

    python = pick_python()
    if python is not None:
        # Runs whose names hold `$`: "r$^$" is a malformed formula to mathtext.
        write_log(os.path.join(work, "runs", "r$^$", "metrics.jsonl"),
                  [(1, 3.0, 10.0), (2, 1.0, 0.5), (3, 0.5, 0.02)])
        write_log(os.path.join(work, "runs", "cost$1", "metrics.jsonl"),
                  [(1, 3.0, 10.0), (2, 2.0, 0.05), (3, 1.5, 0.3)])
        out = os.path.join(work, "c.svg")
        p = subprocess.run([python, script, "--out", out, "--title", r"sweep $\frac$ lr", "--",
                            os.path.join(work, "runs")], capture_output=True, text=True)
        shown = f"exit {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr[-2000:]}"
        check(p.returncode == 0, "a `$` in a run name or title fails: " + shown)
        check("Traceback" not in p.stderr, "a traceback: " + shown)
        check("best: r$^$ (val_loss 0.02 at step 3)" in p.stdout, "the best run is not named: " + shown)
        if p.returncode == 0:
            svg = open(out, encoding="utf-8").read()
            legends = svg.count('<g id="legend_')
            check(legends == 1, f"{legends} legends for the loss and val_loss panels, want one")
    if FAILURES:
        print("FAIL:\n  " + "\n  ".join(FAILURES))
        return 1
    if python is None:
        print("SKIP: no Python with matplotlib (the helpers were checked; the drawing was not)")
        return 0
    print(f"ok: plot_metrics.py checked with {python}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
