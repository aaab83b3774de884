#!/bin/bash
# The same weights from the same commands, across a refactor of the training step or of the
# parallel modes: runs 20 small `minitrain train` commands (one device, dp, mp, ddp, grad-accum,
# the hybrid, local SGD with and without the moments, stopped and resumed, a classifier with
# held-out data and --save-best under ddp and local SGD, fp16 loss scaling with skipped steps)
# with the given binary in OUT, then prints the sha256 of every saved weights and checkpoint file
# and the numbers of every log line (timings dropped). Run it with the build before and after a
# change and diff the two outputs: any difference is a changed bit. Needs mpirun (Open MPI).
#
#   scripts/parallel_weights_check.sh build/cpu/tools/minitrain /tmp/before > before.txt
#   ... change, rebuild ...
#   scripts/parallel_weights_check.sh build/cpu/tools/minitrain /tmp/after > after.txt
#   diff before.txt after.txt && echo identical
set -euo pipefail
M=$(realpath "$1"); OUT=$2
IRIS=$(realpath "$(dirname "$0")/../examples/data/iris.csv")
rm -rf "$OUT"; mkdir -p "$OUT"; cd "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
C="--model mlp:4,16,16,2 --data synthetic:96 --no-shuffle --device cpu --optimizer adam --lr 0.01 --seed 3 --progress none"
$M train $C --batch-size 8 --epochs 2 --save one.safetensors --log one.jsonl >/dev/null
$M train $C --batch-size 8 --epochs 2 --parallel dp --replicas 2 --save dp.safetensors --log dp.jsonl >/dev/null
$M train $C --batch-size 8 --epochs 2 --parallel mp --stages 2 --micro-batches 2 --save mp.safetensors --log mp.jsonl >/dev/null
mpirun -n 2 $M train $C --batch-size 4 --epochs 2 --parallel ddp --save ddp.safetensors --log ddp.jsonl >/dev/null
mpirun -n 2 $M train $C --batch-size 4 --epochs 2 --grad-accum 2 --parallel ddp --save ddpacc.safetensors --log ddpacc.jsonl >/dev/null
mpirun -n 2 $M train $C --batch-size 4 --epochs 2 --parallel ddp --stages 2 --micro-batches 2 --save hybrid.safetensors >/dev/null
mpirun -n 2 $M train $C --batch-size 4 --epochs 2 --parallel ddp --sync-every 3 --save lsgd.safetensors --log lsgd.jsonl >/dev/null
mpirun -n 2 $M train $C --batch-size 4 --epochs 2 --parallel ddp --sync-every 3 --sync-optimizer-state --save lsgdm.safetensors >/dev/null
# local SGD stopped at a checkpoint and resumed
mpirun -n 2 $M train $C --batch-size 4 --steps 7 --parallel ddp --sync-every 3 --checkpoint-dir lck --checkpoint-every 5 --save lsgd_a.safetensors >/dev/null
mpirun -n 2 $M train $C --batch-size 4 --steps 12 --parallel ddp --sync-every 3 --checkpoint-dir lck --resume --save lsgd_b.safetensors >/dev/null
# ddp checkpoint, resumed on one rank with the same global batch
mpirun -n 2 $M train $C --batch-size 4 --steps 6 --parallel ddp --checkpoint-dir dck --save ddp_a.safetensors >/dev/null
$M train $C --batch-size 8 --steps 12 --checkpoint-dir dck --resume --save ddp_b.safetensors --log ddp_b.jsonl >/dev/null
# dp resumed (replicas get replica 0's weights)
$M train $C --batch-size 8 --steps 5 --parallel dp --replicas 2 --checkpoint-dir pck --save dp_a.safetensors >/dev/null
$M train $C --batch-size 8 --steps 12 --parallel dp --replicas 2 --checkpoint-dir pck --resume --save dp_b.safetensors >/dev/null
# a classifier under ddp (accuracy counts summed over ranks), held-out data, save-best, early stop
I="--data $IRIS --target-columns species --loss cross_entropy --model mlp:4,16,3 --device cpu --optimizer adam --lr 0.02 --seed 1 --progress none --val-split 0.2 --eval-every 5"
$M train $I --batch-size 8 --epochs 3 --save iris1.safetensors --save-best iris1b.safetensors --log iris1.jsonl >/dev/null
mpirun -n 2 $M train $I --batch-size 4 --epochs 3 --parallel ddp --save iris2.safetensors --save-best iris2b.safetensors --log iris2.jsonl >/dev/null
mpirun -n 2 $M train $I --batch-size 4 --epochs 3 --parallel ddp --sync-every 2 --save iris3.safetensors --log iris3.jsonl >/dev/null
# fp16 loss scaling with local SGD (ranks agree on skipping), forced to overflow by a huge scale
mpirun -n 2 $M train $C --batch-size 4 --steps 24 --parallel ddp --sync-every 2 --precision fp16 --loss-scale 1e9 --loss-scale-growth-interval 3 --save fp16.safetensors --log fp16.jsonl >/dev/null
$M train $C --batch-size 8 --steps 24 --precision fp16 --loss-scale 1e9 --loss-scale-growth-interval 3 --save fp16one.safetensors --log fp16one.jsonl >/dev/null
for f in *.safetensors; do sha256sum $f; done
for f in lck/* dck/* pck/*; do sha256sum $f; done
for f in *.jsonl; do python3 -c "
import json,sys
for l in open('$f'):
    j=json.loads(l); print('$f', {k:j[k] for k in sorted(j) if k in ('step','epoch','loss','accuracy','val_loss','val_accuracy','lr','loss_scale','skipped','grad_norm','samples')})
"; done
