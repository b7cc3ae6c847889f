#!/usr/bin/env bash
# Why a job measured faster under the load-aware launcher than alone (BENCHMARKS.md, issue 55: GPU medians 5-33%
# lower, by CUDA events too, at the same SM clock): one zoo job (PyTorch CUDA graph, fp16 batch 1) measured alone
# under conditions that each change one thing, interleaved and repeated:
#   unpinned   runner.lane_cores=0: the measuring process on every core, torch's pool on all of them (before)
#   lane       runner.lane_cores=2 (the default now): the timed loop on the last two cores, as in a sweep
#   taskset    the whole run on the last two cores from the start (taskset), lane_cores=0
#   burn       unpinned, with a busy loop on every other core (package C-states, CPU clocks)
#   burn1      the default lane, with one busy loop on one core off the lane (the host awake, nothing shared)
#   build      the default lane, with a process off the lane building timm models in a loop on 4 threads (what a
#              load-aware sweep runs beside a measurement: a CPU phase)
#   ctx        the default lane, with another process holding an idle CUDA context on the GPU (a sweep's other jobs)
#   ctxN       the same, the other process holding N MiB of GPU memory (a sweep's other jobs' buffers)
#   launcher   the job as a one-job sweep under the load-aware launcher (its lane, its slot's threads, its env)
#   uuid       the default lane, CUDA_VISIBLE_DEVICES as the GPU's UUID (as the launcher sets it)
#   threads4   the default lane, the run on the cores off the lane with 4 threads until it measures (as a slot)
# The cores are those local to GPU 0 (sysfs). On the lent GPU machine:
#   OUT=dir DEADLINE=280 bash bench/gpu_lane_factors.sh [ARCHS=a,b] [REPS=2]
# In $OUT: factors.csv (condition, arch, rep, host and CUDA-event medians, CV) and each run's console log.
set -uo pipefail
OUT=${OUT:-results/bench}
DEADLINE=${DEADLINE:-280}
ARCHS=${ARCHS:-ghostnet_100,tf_efficientnet_b0}
REPS=${REPS:-2}
CONDITIONS=${CONDITIONS:-unpinned lane taskset burn}
start=$(date +%s)
source bench/gpu_site.sh "$OUT"
bus=$(nvidia-smi -i 0 --query-gpu=pci.bus_id --format=csv,noheader | tr 'A-F' 'a-f' | sed 's/^0000//')
local_cpus=$(cat "/sys/bus/pci/devices/$bus/local_cpulist" 2>/dev/null || echo "0-$(( $(nproc) - 1 ))")
cores=$(python3 -c "
import sys
out = []
for part in sys.argv[1].split(','):
    a, _, b = part.partition('-'); out += range(int(a), int(b or a) + 1)
print(' '.join(map(str, out)))" "$local_cpus")
last2=$(echo $cores | awk '{print $(NF-1)","$NF}')
others=$(echo $cores | awk '{for (i = 1; i <= NF - 2; i++) print $i}')
echo "GPU 0 at $bus, local cores $local_cpus; lane $last2" | tee -a "$OUT/versions.txt"
rd=$PWD/results/factors
echo "condition,arch,rep,latency_median_ms,gpu_latency_median_ms,latency_cv,measure_cores,measure_threads,sm_clock_mean_mhz" > "$OUT/factors.csv"
python3 -c "import timm" 2>/dev/null
for rep in $(seq 1 "$REPS"); do
  for arch in ${ARCHS//,/ }; do
    for c in $CONDITIONS; do
      [ $(( $(date +%s) - start )) -lt "$DEADLINE" ] || { echo "deadline: stopped before $c $arch $rep"; break 3; }
      pre=(); lane=0; burners=(); multi=()
      case $c in
        lane) lane=2 ;;
        taskset) pre=(taskset -c "$last2") ;;
        burn) for k in $others; do taskset -c "$k" python3 -c "while True: pass" & burners+=($!); done ;;
        burn1) lane=2; taskset -c "$(echo $others | awk '{print $1}')" python3 -c "while True: pass" & burners+=($!) ;;
        build) lane=2; taskset -c "$(echo $others | awk '{print $1","$2","$3","$4}')" python3 -c "
import timm, torch
torch.set_num_threads(4)
while True:
    timm.create_model('convnextv2_nano')" & burners+=($!) ;;
        launcher) lane=2; multi=(-m hydra/launcher=loadaware) ;;
        uuid) lane=2; pre=(env "CUDA_VISIBLE_DEVICES=$(nvidia-smi -i 0 --query-gpu=uuid --format=csv,noheader)") ;;
        threads4) lane=2; pre=(env OMP_NUM_THREADS=4 MKL_NUM_THREADS=4 taskset -c "$(echo $others | tr ' ' ',')") ;;
        ctx[0-9]*) lane=2; mb=${c#ctx}; python3 -c "
import time, torch
held = torch.empty(int(${mb:-0}) << 20, dtype=torch.uint8, device='cuda'); time.sleep(600)" & burners+=($!); sleep 5 ;;
        ctxold) lane=2; python3 -c "
import time, torch
torch.zeros(1, device='cuda'); time.sleep(600)" & burners+=($!); sleep 4 ;;
      esac
      rm -rf "$rd"
      "${pre[@]}" python3 -m harness "${multi[@]}" model=timm model.arch="$arch" backend=pytorch_cudagraph precision=fp16 batch=1 \
        device=cuda runner.max_time_s=3 runner.lane_cores=$lane ++backend.store="$rd" tracking.results_dir="$rd" \
        >"$OUT/${c}_${arch}_$rep.log" 2>&1
      [ ${#burners[@]} -gt 0 ] && kill "${burners[@]}" 2>/dev/null; wait 2>/dev/null
      python3 - "$rd" "$c" "$arch" "$rep" >>"$OUT/factors.csv" <<'PY'
import glob, json, sys
rd, c, arch, rep = sys.argv[1:]
for f in glob.glob(rd + "/records/**/*.json", recursive=True):
    m = json.load(open(f)).get("metrics", {})
    if "latency_median_ms" in m:
        print(",".join([c, arch, rep] + [str(round(m.get(k, float("nan")), 5)) for k in (
            "latency_median_ms", "gpu_latency_median_ms", "latency_cv", "measure_cores", "measure_threads",
            "sm_clock_mean_mhz")]))
PY
    done
  done
done
cat "$OUT/factors.csv"
