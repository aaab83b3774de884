#!/usr/bin/env python3
"""A classifier on a real public table, trained by minitrain and by PyTorch with the same
settings, initial weights and batches: the held-out accuracy of both, and how far their losses
and weights drift apart.

  python3 scripts/torch_classifier_parity.py MINITRAIN [--dataset digits|wine|breast_cancer]
        [--epochs 30] [--lr 1e-3] [--hidden 64] [--label-smoothing 0] [--class-weights]

Needs torch, numpy, scikit-learn (its bundled copies of the UCI tables: digits 1797 x 64 with
10 classes, wine 178 x 13 with 3, breast_cancer 569 x 30 with 2) and safetensors. The table is
split 75/25 stratified by a fixed seed and written as CSV with text labels ("class_3"); features
are standardised with the training rows' mean and std. torch builds the MLP, writes its initial
weights, and both train from them with Adam on the same batches in order (no shuffle).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from safetensors.torch import save_file
from sklearn import datasets
from sklearn.model_selection import train_test_split


def write_csv(path, x, y, names):
    with open(path, "w") as f:
        f.write(",".join([f"f{i}" for i in range(x.shape[1])] + ["label"]) + "\n")
        for row, label in zip(x, y):
            f.write(",".join(f"{v:.9g}" for v in row) + f",{names[label]}\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("minitrain")
    p.add_argument("--dataset", default="digits")
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--label-smoothing", type=float, default=0.0)
    p.add_argument("--class-weights", action="store_true", help="balanced class weights")
    a = p.parse_args()

    table = getattr(datasets, f"load_{a.dataset}")()
    x, y = table.data.astype(np.float64), table.target.astype(np.int64)
    xt, xv, yt, yv = train_test_split(x, y, test_size=0.25, stratify=y, random_state=0)
    mean, std = xt.mean(0), xt.std(0)
    std[std == 0] = 1
    xt, xv = ((xt - mean) / std).astype(np.float32), ((xv - mean) / std).astype(np.float32)
    classes = int(y.max()) + 1
    # Sorted text labels give the indices back: class_0 < class_1 < ... for up to 10 classes.
    assert classes <= 10
    names = [f"class_{k}" for k in range(classes)]

    work = tempfile.mkdtemp(prefix="mt_parity_")
    write_csv(f"{work}/train.csv", xt, yt, names)
    write_csv(f"{work}/val.csv", xv, yv, names)
    torch.manual_seed(0)
    layers = [torch.nn.Linear(x.shape[1], a.hidden), torch.nn.ReLU(),
              torch.nn.Linear(a.hidden, a.hidden), torch.nn.ReLU(), torch.nn.Linear(a.hidden, classes)]
    model = torch.nn.Sequential(*layers)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, f"{work}/init.safetensors")

    weights = None
    if a.class_weights:  # torch's usual balanced weights, as --class-weights auto computes them
        counts = np.bincount(yt, minlength=classes)
        weights = torch.tensor(len(yt) / (classes * counts), dtype=torch.float32)
    loss_fn = torch.nn.CrossEntropyLoss(weight=weights, label_smoothing=a.label_smoothing)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    xt_t, yt_t = torch.from_numpy(xt), torch.from_numpy(yt)
    torch_losses = []
    for _ in range(a.epochs):
        for i in range(0, len(xt), a.batch_size):
            opt.zero_grad()
            loss = loss_fn(model(xt_t[i:i + a.batch_size]), yt_t[i:i + a.batch_size])
            loss.backward()
            opt.step()
            torch_losses.append(loss.item())
    with torch.no_grad():
        logits = model(torch.from_numpy(xv))
        torch_val_loss = torch.nn.CrossEntropyLoss(weight=weights, label_smoothing=a.label_smoothing)(
            logits, torch.from_numpy(yv)).item()
        torch_acc = (logits.argmax(1).numpy() == yv).mean()

    hidden = f"{a.hidden},{a.hidden}"
    cmd = [a.minitrain, "train", "--model", f"mlp:{x.shape[1]},{hidden},{classes}",
           "--data", f"{work}/train.csv", "--target-columns", "label", "--loss", "cross_entropy",
           "--val-data", f"{work}/val.csv", "--init", f"{work}/init.safetensors", "--no-shuffle",
           "--device", "cpu", "--epochs", str(a.epochs), "--batch-size", str(a.batch_size),
           "--lr", str(a.lr), "--optimizer", "adam", "--progress", "none",
           "--log", f"{work}/m.jsonl", "--save", f"{work}/w.safetensors"]
    if a.label_smoothing:
        cmd += ["--label-smoothing", str(a.label_smoothing)]
    if a.class_weights:
        cmd += ["--class-weights", "auto"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"minitrain failed:\n{out.stdout}{out.stderr}")
    lines = [json.loads(l) for l in open(f"{work}/m.jsonl")]
    mt_losses = [l["loss"] for l in lines]
    last = [l for l in lines if "val_loss" in l][-1]
    def drift(n):
        return max(abs(m - t) / max(abs(t), 1e-12) for m, t in zip(mt_losses[:n], torch_losses[:n]))
    from safetensors.torch import load_file
    mt_w = load_file(f"{work}/w.safetensors")
    w_drift = max((mt_w[k] - v).abs().max().item() for k, v in model.state_dict().items())
    print(f"{a.dataset}: {len(xt)} training rows, {len(xv)} held out, {classes} classes, "
          f"mlp:{x.shape[1]},{hidden},{classes}, adam lr {a.lr}, batch {a.batch_size}, {a.epochs} epochs"
          + (f", label_smoothing {a.label_smoothing}" if a.label_smoothing else "")
          + (", balanced class weights" if a.class_weights else ""))
    print(f"  held-out accuracy: minitrain {last['val_accuracy']:.4f}, torch {torch_acc:.4f}")
    print(f"  held-out loss:     minitrain {last['val_loss']:.6f}, torch {torch_val_loss:.6f}")
    # float32 rounding differences grow through training (the two sum in different orders).
    print(f"  step losses, largest relative difference: first 10 steps {drift(10):.2e}, "
          f"first 100 {drift(100):.2e}, all {len(torch_losses)} {drift(len(torch_losses)):.2e}; "
          f"final weights: largest difference {w_drift:.2e}")
    print(f"  minitrain: {out.stdout.strip().splitlines()[-3]}")


if __name__ == "__main__":
    main()
