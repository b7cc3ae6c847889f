#!/usr/bin/env bash
# Issue 30 on a host with several GPUs. Sweeps, in ORDER:
#   basic      the sweep with the basic launcher on GPU 0, from cold (its own searches): the makespan baseline
#   loadaware  the same sweep with the load-aware launcher over every GPU, from cold
#   alone      after loadaware: each job again, alone, on the GPU it ran on, reusing the load-aware
#              sweep's store (the same IOS schedule), IOS jobs first
# Everything comes back in $OUT/multi.tgz (the device tool returns at most 8 files): per sweep its
# log and records (no MLflow there), walls.txt, gpu.txt, the launcher summary; after unpacking,
# `python bench/multi_gpu_table.py DIR` compares them (latency against the same job alone,
# overlapping spans per GPU, makespans).
#   call (carry .whl):  OUT=dir DEADLINE=560 [ORDER="basic loadaware alone"] bash bench/gpu_multi.sh [overrides...]
set -uo pipefail
FINAL=${OUT:-results/bench}
OUT=/tmp/multi_out
DEADLINE=${DEADLINE:-330}
start=$(date +%s)
mkdir -p "$OUT"
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 || { tail -5 "$OUT/install.log"; exit 1; }
{ nvidia-smi -L; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv; \
  nproc; python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"; } | tee "$OUT/gpu.txt"
JOBS=(model=inception_v3,squeezenet backend=ios,pytorch batch=1,16)
FIXED=(device=cuda tracking=off runner.warmup_time_s=0.5 runner.min_time_s=1 runner.max_time_s=5 "$@")
trap 'mkdir -p "$FINAL"; tar czf "$FINAL/multi.tgz" -C "$OUT" .; cp "$OUT/walls.txt" "$FINAL/" 2>/dev/null' EXIT
sweep() {  # name, time limit, extra args...
  local name=$1 limit=$2; shift 2
  local rd=${RD:-/tmp/multi_$name} t0
  t0=$(date +%s.%N)
  timeout -s INT -k 15 "$limit" python3 -m harness -m "$@" "${FIXED[@]}" tracking.results_dir="$rd" 2>&1 \
    | tee "$OUT/$name.log" | grep -E "^Model:|rror|makespan|Launching|device [0-9]: GPU"
  echo "$name exit ${PIPESTATUS[0]} wall $(python3 -c "import time; print(round(time.time() - $t0, 1))") s" \
    | tee -a "$OUT/walls.txt"
  find "$rd" -name launcher.json -exec cp {} "$OUT/launcher_$name.json" \;
}
# 2026-11-25 on 2x H100: basic ~235 s, loadaware 110-170 s, alone ~25 s a job
for name in ${ORDER:-basic loadaware alone}; do
  left=$(( DEADLINE - ($(date +%s) - start) ))
  [ "$left" -gt 40 ] || { echo "no time left for the $name sweep" | tee -a "$OUT/walls.txt"; break; }
  case $name in
    basic) CUDA_VISIBLE_DEVICES=0 sweep basic "$left" hydra/launcher=basic "${JOBS[@]}" ;;
    loadaware) sweep loadaware "$left" hydra/launcher=loadaware "${JOBS[@]}" ;;
    alone)  # one job at a time, each on the GPU its load-aware run had: "gpu model backend batch" lines
      python3 -c "
import glob, json
jobs = []
for f in glob.glob('/tmp/multi_loadaware/records/*.json'):
    r = json.load(open(f)); c = r['config']
    jobs.append((c['backend']['name'] != 'ios', int(c['batch']) == 1, r['params'].get('launcher_gpu_index', 0),
                 c['model']['name'], c['backend']['name'], c['batch']))
for j in sorted(jobs):
    print(*j[2:])" > "$OUT/alone_jobs.txt"
      while read -r g m b n <&3; do
        left=$(( DEADLINE - ($(date +%s) - start) ))
        [ "$left" -gt 30 ] || { echo "no time left for $m $b $n alone on GPU $g" | tee -a "$OUT/walls.txt"; break; }
        CUDA_VISIBLE_DEVICES=$g RD=/tmp/multi_alone sweep "alone-$m-$b-$n" "$left" hydra/launcher=basic \
          backend.store=/tmp/multi_loadaware model="$m" backend="$b" batch="$n" < /dev/null
      done 3< "$OUT/alone_jobs.txt" ;;
  esac
done
for name in basic loadaware alone; do
  [ -d "/tmp/multi_$name/records" ] && tar czf "$OUT/records_$name.tgz" -C "/tmp/multi_$name" records
done
