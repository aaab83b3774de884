#!/usr/bin/env python3
"""Draws training curves from minitrain metrics logs (train --log, one JSON object per line) with
matplotlib: one panel per metric, side by side, one line per run. `minitrain plot` runs this.

  python3 scripts/plot_metrics.py RUN_DIR_OR_JSONL... [--metric loss,val_loss] [--out curves.png]

An argument is a metrics file, a run directory holding metrics.jsonl, or a `minitrain pipelines`
directory whose runs each hold one (every DIR/*/metrics.jsonl). --out's extension picks the format
(.png, .svg, .pdf). Held-out metrics (val_*) are drawn at the steps they were evaluated, with
markers; the default metrics are loss, and val_loss / accuracy / val_accuracy when a log has them.
A loss panel whose values span more than two decades gets a log scale.
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
    for ax, metric in zip(axes[0], metrics):
        values = []
        for i, (name, series) in enumerate(logs):
            if metric not in series:
                continue
            xs, ys = series[metric]
            held_out = metric.startswith("val_")
            ax.plot(xs, ys, label=name, color=colors[i % len(colors)], linewidth=1.4,
                    marker="o" if held_out else None, markersize=3.5)
            values += [y for y in ys if math.isfinite(y)]
        positive = [v for v in values if v > 0]
        if "loss" in metric and positive and max(positive) / min(positive) > 100:
            ax.set_yscale("log")
        ax.set_title(metric)
        ax.set_xlabel("step")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
