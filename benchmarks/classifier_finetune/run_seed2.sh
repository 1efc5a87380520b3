#!/bin/bash
# Seed 2 of the fine-tune (same data, folds and recipe; another torch init / dropout / silver order), then evaluate.
set -e
cd "$(dirname "$0")"
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PY=${TORCH_VENV:-../../.venv-torch}/bin/python
OUT=../../bench-cache/classifier-finetune
for run in full_seed2 fold0_s2 fold1_s2 fold2_s2 fold3_s2 fold4_s2; do
  [ -f $OUT/$run.npz ] || taskset -c 1 $PY finetune.py --run $run
done
taskset -c 1 $PY evaluate.py
