#!/usr/bin/env bash
# What makes fresh processes of the same job differ (issue 56, item 8): each part measures one network on one
# backend in N fresh measuring processes (runner.processes=N) once per cuDNN plan choice (backend.cudnn_search:
# benchmark times each shape's plans in every process; heuristic takes cuDNN's first-ranked plan, nothing timed).
# fp16, batch 1, one job at a time (Hydra's basic launcher). On the lent GPU machine:
#   OUT=dir N=10 bash bench/gpu_process_spread.sh inception_v3:ios nasnet:pytorch_compile [overrides...]
# Two GPUs: one call of the script per GPU, each with its CUDA_VISIBLE_DEVICES, its cores (taskset) and its OUT.
# In $OUT: <model>_<backend>.log (the console, with the end-of-sweep table), records_<model>_<backend>.tgz and
# times.txt. Then here: python bench/spread_table.py OUT/records_*.tgz
set -uo pipefail
OUT=${OUT:-results/spread}
N=${N:-10}
SEARCHES=${SEARCHES:-benchmark,heuristic}
source bench/gpu_site.sh "$OUT"
parts=()
while [ $# -gt 0 ] && [[ $1 == *:* ]]; do parts+=("$1"); shift; done
for part in "${parts[@]}"; do
  model=${part%%:*} backend=${part#*:}
  rd=/tmp/spread_${model}_${backend}_$$
  rm -rf "$rd"
  t0=$SECONDS
  timeout -k 10 "${PART_S:-580}" python3 -m harness -m model="$model" backend="$backend" precision=fp16 batch=1 \
    device=cuda tracking=off tracking.results_dir="$rd" ++backend.store="$rd" backend.cudnn_search="$SEARCHES" \
    runner.processes="$N" runner.max_time_s=2 runner.min_time_s=1 "$@" > "$OUT/${model}_${backend}.log" 2>&1
  echo "$part: rc=$? $((SECONDS - t0)) s" >> "$OUT/times.txt"
  tar czf "$OUT/records_${model}_${backend}.tgz" -C "$rd" records 2>/dev/null
done
exit 0
