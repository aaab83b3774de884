#!/usr/bin/python3
"""Held-out loss of one model trained in each precision (fp32, bf16, fp16) on a real table.

sklearn's copy of the UCI digits table (1797 x 64, 10 classes) is split 75/25, stratified, with a
fixed seed; `minitrain train --precision P` trains mlp:64,64,64,10 with cross-entropy (Adam lr 1e-3,
batch 32, 30 epochs) for each of SEEDS initialisations and reports the held-out val_loss and
accuracy after the last step, then each precision's mean over the seeds relative to fp32's.

    /usr/bin/python3 scripts/precision_holdout.py [MINITRAIN] [--seeds N]

Needs NumPy and scikit-learn (Debian: python3-numpy python3-sklearn); MINITRAIN defaults to
build/release/tools/minitrain.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

HERE = os.path.dirname(os.path.abspath(__file__))
PRECISIONS = ["fp32", "bf16", "fp16"]
HELD_OUT = re.compile(r"held out \(\d+ rows\): val_loss ([0-9.e+-]+), val_accuracy ([0-9.e+-]+)")


def write_split(directory):
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.25, stratify=y, random_state=0)
    paths = {}
    for name, array in [("x", xtr), ("y", ytr.astype(np.int64)), ("val_x", xte),
                        ("val_y", yte.astype(np.int64))]:
        paths[name] = os.path.join(directory, name + ".npy")
        np.save(paths[name], array)
    return paths


def train(minitrain, paths, precision, seed):
    out = subprocess.run(
        [minitrain, "train", "--model", "mlp:64,64,64,10", "--loss", "cross_entropy",
         "--data", paths["x"], "--targets", paths["y"], "--val-data", paths["val_x"],
         "--val-targets", paths["val_y"], "--epochs", "30", "--batch-size", "32", "--lr", "1e-3",
         "--seed", str(seed), "--precision", precision, "--progress", "none"],
        check=True, capture_output=True, text=True).stdout
    m = HELD_OUT.search(out)
    if not m:
        sys.exit("no held-out line in:\n" + out)
    return float(m.group(1)), float(m.group(2))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("minitrain", nargs="?",
                        default=os.path.join(HERE, "..", "build", "release", "tools", "minitrain"))
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        paths = write_split(d)
        losses = {p: [] for p in PRECISIONS}
        print("| seed | " + " | ".join(f"{p} val_loss (accuracy)" for p in PRECISIONS) + " |")
        print("|---|" + "---|" * len(PRECISIONS))
        for seed in range(args.seeds):
            cells = []
            for p in PRECISIONS:
                loss, accuracy = train(args.minitrain, paths, p, seed)
                losses[p].append(loss)
                cells.append(f"{loss:.6f} ({accuracy:.4f})")
            print(f"| {seed} | " + " | ".join(cells) + " |")
        base = np.mean(losses["fp32"])
        print("| mean | " + " | ".join(
            f"{np.mean(losses[p]):.6f} ({100 * (np.mean(losses[p]) / base - 1):+.2f}% vs fp32)"
            for p in PRECISIONS) + " |")


if __name__ == "__main__":
    main()
