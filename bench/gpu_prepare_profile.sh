#!/usr/bin/env bash
# Where IOS's cold and warm preparation spend their time, function by function (issue 42): each network planned
# cold (a fresh store) and then warm (the saved schedule reused), in the measuring process itself
# (runner.isolate=false) under cProfile; the top functions by cumulative and own time go to $OUT.
#   e.g. call (carry .whl):  OUT=dir bash bench/gpu_prepare_profile.sh squeezenet inception_v3
set -uo pipefail
OUT=${OUT:-results/prepare_profile}
source bench/gpu_site.sh "$OUT"
for m in "$@"; do
  rm -rf "/tmp/prof_store_$m"  # each network cold in its own store
  for run in cold warm; do
    t0=$SECONDS
    timeout 400 python3 -m cProfile -o "/tmp/$m-$run.prof" -m harness model="$m" backend=ios precision=fp16 batch=1 \
      device=cuda runner.isolate=false tracking=off tracking.results_dir="/tmp/prof_store_$m" runner.max_time_s=2 \
      runner.min_time_s=1 sweep.rerun=true > "$OUT/$m-$run.log" 2>&1
    echo "$m $run: $((SECONDS - t0)) s" >> "$OUT/times.txt"
    python3 - "/tmp/$m-$run.prof" >> "$OUT/profiles.txt" <<'PY'
import pstats, sys
print("=" * 30, sys.argv[1])
s = pstats.Stats(sys.argv[1])
s.sort_stats("cumulative").print_stats(45)
s.sort_stats("tottime").print_stats(25)
PY
  done
done
python3 bench/search_table.py /tmp/prof_store_* > "$OUT/search_table.tsv" 2>&1
exit 0
