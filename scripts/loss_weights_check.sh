#!/bin/bash
# usage: scripts/loss_weights_check.sh BIN OUTFILE [extra flags e.g. --device cuda]
# Trains the default MSE config and huber / kl_div / cross_entropy configs, prints sha256 of the saved weights.
set -e
BIN=$(realpath "$1"); OUT=$(realpath -m "$2"); shift 2
D=$(mktemp -d)
cd "$(dirname "$0")/.."
run() { local name=$1; shift; "$BIN" train "$@" $EXTRA_FLAGS --save $D/$name.safetensors > $D/$name.log 2>&1 || { echo "FAIL $name"; cat $D/$name.log; exit 1; }; echo "$name $(sha256sum < $D/$name.safetensors | cut -c1-16)"; }
EXTRA_FLAGS=${*:-}
{
run mse_default --steps 30
run huber --steps 30 --loss huber --huber-delta 0.5
run kl_div --steps 30 --loss kl_div --kl-log-target
run ce_iris --data examples/data/iris.csv --target-columns species --model mlp:4,16,3 --loss cross_entropy --epochs 3 --batch-size 16 --lr 0.01
} | tee "$OUT"
