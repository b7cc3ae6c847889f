#!/usr/bin/env bash
# Study presets (conf/experiment/) at full size on a CUDA GPU, resumable across calls.
# Usage: OUT=dir DEADLINE=580 bash bench/gpu_studies.sh "schedules prune" [overrides...]
# Records, the sweep state and schedules live in results/gpu (carry it to the next call to
# resume a sweep cut off by the deadline); a copy comes back as $OUT/results.tgz.
set -uo pipefail
OUT=${OUT:-results/bench}
DEADLINE=${DEADLINE:-580}
RES=${RES:-results/gpu}
start=$(date +%s)
mkdir -p "$OUT" "$RES"
source bench/gpu_site.sh "$OUT"
presets=$1; shift
for p in $presets; do
  left=$(( DEADLINE - ($(date +%s) - start) ))
  [ "$left" -gt 20 ] || { echo "no time left for $p"; break; }
  # SIGINT at the deadline: the running job is recorded KILLED, the sweep resumes on the next call
  timeout -s INT -k 15 "$left" python3 -m harness -m +experiment="$p" device=cuda \
    tracking.results_dir="$PWD/$RES" "$@" 2>&1 | grep -v "^\[.*HYDRA\]" | tee -a "$OUT/$p.log"
  echo "$p exit ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s" | tee -a "$OUT/studies.log"
done
tar czf "$OUT/results.tgz" -C "$RES" records schedules 2>/dev/null
