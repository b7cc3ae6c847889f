#!/usr/bin/env bash
# Numbers across processes (issue 39) and where IOS's optimization time goes, cold and warm (issue 42), on one
# CUDA GPU. Parts (each a sweep; a call takes what fits in the 10-minute limit), on one warm lent machine:
#   processes:MODEL   IOS-Both and its Greedy, 5 processes each, fp16 batch 1 (the first IOS process searches
#                     cold, the last reuses the schedule: the record keeps both preparations, cold and warm)
#   batch128          IOS and torch.compile reduce-overhead on inception_v3 at batch 128, 3 processes each
#   phases:M1,M2,..   those networks cold (a fresh store), then warm (sweep.rerun=true), fp16 batch 1
#   e.g. call (carry .whl):  OUT=dir bash bench/gpu_repeats.sh processes:inception_v3 batch128
# Then here: python bench/search_table.py <OUT>/phases <OUT>/processes (the phase table: a processes record
# gives its first and last process), the sweep tables in <OUT>/*.log (between-process CIs, memory, energy).
set -uo pipefail
OUT=${OUT:-results/repeats}
source bench/gpu_site.sh "$OUT"
sweep() {  # sweep NAME RESULTS_DIR OVERRIDES...
  local name=$1 rd=$2; shift 2
  local t0=$SECONDS
  timeout "${SWEEP_S:-560}" python3 -m harness -m device=cuda tracking=off tracking.results_dir="$rd" \
    runner.max_time_s=3 runner.min_time_s=1 "$@" > "$OUT/$name.log" 2>&1
  echo "$name: $((SECONDS - t0)) s, rc=$?" >> "$OUT/times.txt"
  tar czf "$OUT/$(basename "$rd").tgz" -C "$rd" records 2>/dev/null  # after each part: a call cut short keeps them
}
for part in "$@"; do
  case $part in
    processes:*) m=${part#processes:}
                 sweep "processes-$m" /tmp/rep_processes model="$m" precision=fp16 batch=1 backend=ios,ios_greedy \
                   runner.processes=5 sweep.baseline=backend:ios_greedy ;;
    batch128) sweep batch128 /tmp/rep_b128 model=inception_v3 precision=fp16 batch=128 \
                backend=ios,pytorch_compile runner.processes=3 ;;
    phases:*) m=${part#phases:}; mkdir -p "$OUT/phases"
              sweep phases-cold "$OUT/phases" model="$m" precision=fp16 batch=1 backend=ios
              sweep phases-warm "$OUT/phases" model="$m" precision=fp16 batch=1 backend=ios sweep.rerun=true ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
python3 bench/search_table.py "$OUT/phases" /tmp/rep_processes /tmp/rep_b128 > "$OUT/search_table.tsv" 2>&1
exit 0
