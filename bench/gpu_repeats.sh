#!/usr/bin/env bash
# Numbers across processes (issue 39) and where IOS's optimization time goes, cold and warm (issue 42), on one
# CUDA GPU. One part per call (each well under the 10-minute limit), on one warm lent machine:
#   call (carry .whl):  OUT=dir bash bench/gpu_repeats.sh processes   # IOS-Both and Greedy, 5 processes each,
#                                                                     # inception_v3 and nasnet, fp16 batch 1
#   call (carry .whl):  OUT=dir bash bench/gpu_repeats.sh batch128    # IOS and torch.compile at batch 128, 3 each
#   call (carry .whl):  OUT=dir bash bench/gpu_repeats.sh phases      # the four networks cold, then warm
# Then here: python bench/search_table.py <OUT>/phases (the phase table), the sweep tables in <OUT>/*.log
# (between-process CIs) and the usage columns (memory, energy from NVML) in the same tables.
set -uo pipefail
SITE=/tmp/site OUT=${OUT:-results/repeats}
export PYTHONPATH=$SITE
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE .whl/*.whl || exit 1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { tail -5 "$OUT/install.log"; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$OUT/versions.txt" 2>&1
sweep() {  # sweep NAME RESULTS_DIR OVERRIDES...
  local name=$1 rd=$2; shift 2
  local t0=$SECONDS
  timeout "${SWEEP_S:-560}" python3 -m harness -m device=cuda tracking=off tracking.results_dir="$rd" \
    runner.max_time_s=3 runner.min_time_s=1 "$@" > "$OUT/$name.log" 2>&1
  echo "$name: $((SECONDS - t0)) s, rc=$?" >> "$OUT/times.txt"
}
for part in "$@"; do
  case $part in
    processes) sweep processes /tmp/rep_processes model=inception_v3,nasnet precision=fp16 batch=1 \
                 backend=ios,ios_greedy runner.processes=5 sweep.baseline=backend:ios_greedy ;;
    batch128) sweep batch128 /tmp/rep_b128 model=inception_v3 precision=fp16 batch=128 \
                backend=ios,pytorch_compile runner.processes=3 ;;
    phases) mkdir -p "$OUT/phases"
            sweep phases-cold "$OUT/phases" model=inception_v3,nasnet,randwire,squeezenet precision=fp16 batch=1 backend=ios
            sweep phases-warm "$OUT/phases" model=inception_v3,nasnet,randwire,squeezenet precision=fp16 batch=1 backend=ios \
              sweep.rerun=true ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
for d in /tmp/rep_processes /tmp/rep_b128; do [ -d $d/records ] && tar czf "$OUT/$(basename $d).tgz" -C $d records; done
exit 0
