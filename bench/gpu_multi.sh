#!/usr/bin/env bash
# Issue 30 on a host with several GPUs: one sweep with the load-aware launcher over every GPU, then
# the same sweep with the basic launcher on one GPU (each job measured alone), each from cold (its
# own results dir: no IOS schedules or cost cache). Records stay under $OUT/<launcher>/records (no
# MLflow there); bench/multi_gpu_table.py compares them.
#   call (carry .whl):  OUT=dir DEADLINE=540 [ORDER="basic loadaware"] bash bench/gpu_multi.sh [overrides...]
set -uo pipefail
OUT=${OUT:-results/bench}
DEADLINE=${DEADLINE:-330}
start=$(date +%s)
mkdir -p "$OUT"
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 || { tail -5 "$OUT/install.log"; exit 1; }
{ nvidia-smi -L; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv; \
  nproc; python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"; } | tee "$OUT/gpu.txt"
SWEEP=(model=inception_v3,squeezenet backend=ios,pytorch batch=1,16 device=cuda tracking=off
       runner.warmup_time_s=0.5 runner.min_time_s=1 runner.max_time_s=5 "$@")
sweep() {  # name, time limit, extra args...
  local name=$1 limit=$2; shift 2
  local rd=/tmp/multi_$name t0
  t0=$(date +%s.%N)
  timeout -s INT -k 15 "$limit" python3 -m harness -m "$@" "${SWEEP[@]}" tracking.results_dir="$rd" 2>&1 \
    | tee "$OUT/$name.log" | grep -E "^Model:|rror|makespan|Launching|device [0-9]: GPU"
  echo "$name exit ${PIPESTATUS[0]} wall $(python3 -c "import time; print(round(time.time() - $t0, 1))") s" \
    | tee -a "$OUT/walls.txt"
  tar czf "$OUT/records_$name.tgz" -C "$rd" records 2>/dev/null
  find "$rd" -name launcher.json -exec cp {} "$OUT/launcher_$name.json" \;
}
# ORDER: which sweeps, in order (2026-11-25: load-aware first, and the basic one, which takes about
# twice as long, ran out of time; run the basic one first when the device time allows both, ~8 min)
for name in ${ORDER:-basic loadaware}; do
  left=$(( DEADLINE - ($(date +%s) - start) ))
  [ "$left" -gt 40 ] || { echo "no time left for the $name sweep" | tee -a "$OUT/walls.txt"; break; }
  case $name in
    basic) CUDA_VISIBLE_DEVICES=0 sweep basic "$left" hydra/launcher=basic ;;
    loadaware) sweep loadaware "$left" hydra/launcher=loadaware ;;
  esac
done
