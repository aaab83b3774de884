#!/usr/bin/env python3
"""Draws training curves from minitrain metrics logs (train --log, one JSON object per line) with
matplotlib: one panel per metric, side by side, one line per run. `minitrain plot` runs this.

  python3 scripts/plot_metrics.py RUN_DIR_OR_JSONL... [--metric loss,val_loss] [--out curves.png]

An argument is a metrics file, a run directory holding metrics.jsonl, or a `minitrain pipelines`
directory whose runs each hold one (every DIR/*/metrics.jsonl). --out's extension picks the format
(.png, .svg, .pdf). Held-out metrics (val_*) are drawn at the steps they were evaluated, with
markers; the default metrics are loss, and val_loss / accuracy / val_accuracy when a log has them.
A loss panel (loss, val_loss, ...) whose values span more than two decades gets a log scale. The
best run (the lowest val_loss, or the lowest loss when no run was validated) is marked with a star
at its best step in every panel, and one legend below the panels serves them all. Run names and the
title are drawn as written: a `$` is a dollar sign, not the start of matplotlib's mathtext.
"""

import argparse
import glob
import json
import math
import os
import sys

NEEDS = ("minitrain plot needs Python 3 with matplotlib: on Debian, sudo apt-get install "
         "python3-matplotlib (scripts/setup.sh installs it); elsewhere, pip install matplotlib")


class PlotError(Exception):
    pass


def metrics_files(arg):
    """The (name, path) pairs an argument stands for."""
    if os.path.isfile(arg):
        return [(os.path.splitext(os.path.basename(arg))[0], arg)]
    if os.path.isdir(arg):
        own = os.path.join(arg, "metrics.jsonl")
        if os.path.isfile(own):
            return [(os.path.basename(os.path.normpath(arg)), own)]
        runs = sorted(glob.glob(os.path.join(arg, "*", "metrics.jsonl")))
        if runs:
            return [(os.path.basename(os.path.dirname(p)), p) for p in runs]
        raise PlotError(f"{arg}: no metrics.jsonl in it or in its subdirectories (train --log FILE "
                        "writes one; minitrain pipelines writes DIR/NAME/metrics.jsonl)")
    raise PlotError(f"{arg}: no such file or directory")


def read_log(path):
    """{metric: ([step...], [value...])} of every numeric field but the bookkeeping ones."""
    skip = {"step", "steps", "epoch", "val_rows", "memory_in_use_bytes", "memory_peak_bytes",
            "host_memory_peak_bytes", "samples_per_s", "step_ms", "lr", "epoch_end"}
    series = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line of a run that is still writing, or was killed
            if not isinstance(row, dict) or not isinstance(row.get("step"), int):
                raise PlotError(f"{path}:{number}: not a minitrain metrics line (no integer 'step')")
            for key, value in row.items():
                if key in skip or not isinstance(value, (int, float)) or isinstance(value, bool):
                    continue
                xs, ys = series.setdefault(key, ([], []))
                xs.append(row["step"])
                ys.append(float(value))
    if not series:
        raise PlotError(f"{path}: no metrics lines")
    return series


def literal(text):
    """`text` as matplotlib draws it verbatim: a `$` would start mathtext (and an unbalanced or
    malformed formula raised a ParseException from savefig)."""
    return text.replace("$", r"\$")


def log_scale(metric, values):
    """Whether a panel of `metric` gets a log y axis: a loss whose positive values span more than
    two decades (a loss falling from 10 to 0.01 is otherwise a flat line after the first steps)."""
    positive = [v for v in values if math.isfinite(v) and v > 0]
    return "loss" in metric and bool(positive) and max(positive) / min(positive) > 100


def best_point(logs):
    """(run index, metric, step, value) of the lowest val_loss of any run, or of the lowest loss
    when no run logged val_loss; None when neither was logged with a finite value."""
    for metric in ("val_loss", "loss"):
        best = None
        for i, (_, series) in enumerate(logs):
            if metric not in series:
                continue
            for step, value in zip(*series[metric]):
                if math.isfinite(value) and (best is None or value < best[3]):
                    best = (i, metric, step, value)
        if best is not None:
            return best
    return None


def default_metrics(logs):
    seen = set().union(*(set(s) for _, s in logs))
    return [m for m in ("loss", "val_loss", "accuracy", "val_accuracy") if m in seen]


def main(argv):
    parser = argparse.ArgumentParser(prog="minitrain plot", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="metrics files, run directories or pipelines directories")
    parser.add_argument("--metric", default="", help="comma-separated metrics (default: loss, and "
                        "val_loss, accuracy, val_accuracy where logged)")
    parser.add_argument("--out", default="curves.png", help="the picture (.png, .svg or .pdf)")
    parser.add_argument("--title", default="", help="a title above the panels")
    args = parser.parse_args(argv)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(NEEDS, file=sys.stderr)
        return 3
    try:
        logs = []
        for arg in args.runs:
            for name, path in metrics_files(arg):
                logs.append((name, read_log(path)))
        metrics = [m for m in args.metric.split(",") if m] or default_metrics(logs)
        missing = [m for m in metrics if not any(m in s for _, s in logs)]
        if missing:
            known = sorted(set().union(*(set(s) for _, s in logs)))
            raise PlotError(f"no run logged {', '.join(missing)}; the logs have: {', '.join(known)}")
        ext = os.path.splitext(args.out)[1].lower()
        if ext not in (".png", ".svg", ".pdf"):
            raise PlotError(f"--out {args.out}: name a .png, .svg or .pdf file")
    except (PlotError, OSError) as e:
        print(f"minitrain plot: error: {e}", file=sys.stderr)
        return 1

    fig, axes = plt.subplots(1, len(metrics), figsize=(5.2 * len(metrics), 4.2), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    best = best_point(logs)
    handles = {}  # run index -> its line, for the one legend
    best_handle = None
    for ax, metric in zip(axes[0], metrics):
        values = []
        for i, (name, series) in enumerate(logs):
            if metric not in series:
                continue
            xs, ys = series[metric]
            held_out = metric.startswith("val_")
            (line,) = ax.plot(xs, ys, label=literal(name), color=colors[i % len(colors)], linewidth=1.4,
                              marker="o" if held_out else None, markersize=3.5)
            handles.setdefault(i, line)
            values += ys
            if best is not None and best[0] == i and best[2] in xs:
                y = ys[xs.index(best[2])]
                if math.isfinite(y):
                    (mark,) = ax.plot([best[2]], [y], linestyle="none", marker="*", markersize=14,
                                      color=colors[i % len(colors)], markeredgecolor="black", zorder=5)
                    best_handle = best_handle or mark
        if log_scale(metric, values):
            ax.set_yscale("log")
        ax.set_title(literal(metric))
        ax.set_xlabel("step")
        ax.grid(True, alpha=0.3)
    legend = [handles[i] for i in sorted(handles)]
    labels = [literal(logs[i][0]) for i in sorted(handles)]
    if best_handle is not None:
        legend.append(best_handle)
        labels.append(literal(f"best: {logs[best[0]][0]} ({best[1]} {best[3]:.4g} at step {best[2]})"))
    # One legend for all panels, below them: every run has one colour in every panel.
    fig.legend(legend, labels, loc="lower center", ncol=min(len(labels), 4), fontsize=8, frameon=False)
    rows = (len(labels) + 3) // 4
    if args.title:
        fig.suptitle(literal(args.title))
    fig.tight_layout(rect=(0, 0.06 * rows, 1, 1))
    out_dir = os.path.dirname(os.path.abspath(args.out))
    tmp = os.path.join(out_dir, "." + os.path.basename(args.out) + ".tmp" + ext)
    try:
        fig.savefig(tmp, dpi=120)
        os.replace(tmp, args.out)  # a picture appears whole or not at all
    except OSError as e:
        print(f"minitrain plot: error: cannot write {args.out}: {e}", file=sys.stderr)
        return 1
    runs = ", ".join(name for name, _ in logs)
    print(f"plot: {args.out} ({', '.join(metrics)} of {len(logs)} run(s): {runs})")
    if best is not None:
        print(f"best: {logs[best[0]][0]} ({best[1]} {best[3]:.6g} at step {best[2]})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
