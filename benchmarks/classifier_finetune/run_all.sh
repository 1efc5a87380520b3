#!/bin/bash
# The whole experiment, one core: 5 fold runs (out-of-fold knowledge/hop logits of the silver train rows), the full
# run (cal/test logits), then the evaluation.
set -e
cd "$(dirname "$0")"
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PY=${TORCH_VENV:-../../.venv-torch}/bin/python
OUT=../../bench-cache/classifier-finetune
[ -f $OUT/data.npz ] || taskset -c 1 $PY prep_data.py
for run in full fold0 fold1 fold2 fold3 fold4; do
  [ -f $OUT/$run.npz ] || taskset -c 1 $PY finetune.py --run $run
done
taskset -c 1 $PY evaluate.py
