#!/usr/bin/env bash
# One real sweep under each given Hydra launcher (issue 15): ios and a short autotvm tuning on two
# models, each sweep from cold (its own store: no schedules, cost cache or tuning database).
# Needs TVM in /tmp/site (bench/gpu_tvm.sh stage, then install, on the same warm machine).
#   OUT=dir DEADLINE=570 bash bench/gpu_launcher.sh "basic loadaware" [overrides...]
set -uo pipefail
OUT=${OUT:-results/bench}
DEADLINE=${DEADLINE:-570}
start=$(date +%s)
mkdir -p "$OUT"
source bench/gpu_site.sh "$OUT"
launchers=$1; shift
for l in $launchers; do
  left=$(( DEADLINE - ($(date +%s) - start) ))
  [ "$left" -gt 30 ] || { echo "no time left for $l" | tee -a "$OUT/launchers.log"; break; }
  rd=$PWD/results/launcher_$l
  t0=$(date +%s.%N)
  timeout -s INT -k 15 "$left" python3 -m harness -m hydra/launcher="$l" backend=ios,autotvm_brief \
    model=squeezenet,inception_v3 batch=1 device=cuda precision=fp32 \
    ++backend.store="$rd" tracking.results_dir="$rd" "$@" 2>&1 | tee "$OUT/$l.log"
  rc=${PIPESTATUS[0]}
  echo "$l exit $rc wall $(python3 -c "import time; print(round(time.time() - $t0, 1))") s" | tee -a "$OUT/launchers.log"
  find "$rd" -name launcher.json -exec cp {} "$OUT/launcher_$l.json" \;
  tar czf "$OUT/records_$l.tgz" -C "$rd" records 2>/dev/null
done
