#!/bin/bash
# usage: scripts/optimizer_weights_check.sh BIN OUTFILE [extra flags e.g. --device cuda]
# Trains SGD, Adam, AdamW and RMSprop with every optimizer flag, each schedule (with and without
# warm-up), gradient clipping, smooth_l1 and cross_entropy with label smoothing and class weights;
# prints the sha256 of each run's saved weights. A refactor of the settings keeps every line.
set -e
BIN=$(realpath "$1"); OUT=$(realpath -m "$2"); shift 2
D=$(mktemp -d)
cd "$(dirname "$0")/.."
run() { local name=$1; shift; "$BIN" train "$@" $EXTRA_FLAGS --progress none --save $D/$name.safetensors > $D/$name.log 2>&1 || { echo "FAIL $name"; cat $D/$name.log; exit 1; }; echo "$name $(sha256sum < $D/$name.safetensors | cut -c1-16)"; }
EXTRA_FLAGS=${*:-}
{
run sgd --steps 30 --optimizer sgd --lr 0.05 --momentum 0.9 --nesterov --weight-decay 1e-3
run adam --steps 30 --optimizer adam --lr 0.01 --betas 0.8,0.99 --eps 1e-6 --amsgrad --weight-decay 1e-4
run adamw --steps 30 --optimizer adamw --lr 0.01 --weight-decay 0.05
run rmsprop --steps 30 --optimizer rmsprop --lr 0.005 --alpha 0.9 --eps 1e-7 --momentum 0.5 --centered --weight-decay 1e-4
run step_warmup --steps 30 --schedule step --step-size 4 --gamma 0.7 --warmup-steps 10
run cosine_warmup --steps 30 --schedule cosine --warmup-steps 7 --lr 0.01
run cosine --steps 30 --schedule cosine --optimizer sgd --lr 0.05
run clip --steps 30 --clip-grad-norm 0.5 --lr 0.02 --grad-accum 2
run smooth_l1 --steps 30 --loss smooth_l1 --smooth-l1-beta 0.5
run ce_smooth --data examples/data/iris.csv --target-columns species --model mlp:4,16,3 --loss cross_entropy --label-smoothing 0.1 --class-weights auto --epochs 3 --batch-size 16 --lr 0.01
} | tee "$OUT"
