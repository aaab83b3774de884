#!/bin/bash
# usage: scripts/loss_weights_check.sh BIN OUTFILE [extra flags e.g. --device cuda]
# Trains the default MSE config and a config of every other loss (huber, kl_div with and without
# log_target, cross_entropy, l1, smooth_l1 with beta 0.5 and 0, bce_with_logits), prints sha256 of the
# saved weights.
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
run l1 --steps 30 --loss l1
run smooth_l1 --steps 30 --loss smooth_l1 --smooth-l1-beta 0.5
run smooth_l1_beta0 --steps 30 --loss smooth_l1 --smooth-l1-beta 0
run bce_with_logits --steps 30 --loss bce_with_logits
run kl_div_prob --data examples/data/iris.csv --target-columns petal_width --ignore-columns species --model mlp:3,16,1 --loss kl_div --steps 30
} | tee "$OUT"
