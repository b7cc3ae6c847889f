#!/usr/bin/env bash
# IOS ready in seconds (issue 42), on one CUDA GPU: cold and warm optimization cost per network and for a batch
# sweep, with the kernel choices kept in the store and the layout reused across batch sizes. Parts:
#   gputests        pytest tests/test_ios_gpu.py (the CUDA runtimes, kernel choice, plan reuse; GPUTESTS_K: pytest -k)
#   ready:M1,M2     each network cold in its own fresh store, then warm (sweep.rerun=true), fp16 batch 1
#   batches:M       one network at batch 1,16,64,128 in one fresh store (the layout timed once, kernels shared)
#   batches-reuse:M the same with backend.schedule_any_batch=8 (searched at 1 and 16, reused at 64 and 128)
#   tconv:M         Triton convolutions in the kernel choice (issue 42, item 4): M in one fresh store with
#                   backend.triton_convs=false,true (one sweep, the schedule shared), the second again warm, then
#                   bench/critical_path.py on both (what stands on the critical path, kernel by kernel)
#   firstcalls:M1,M2  bench/conv_first_call.py: each distinct convolution's first call in a fresh process, cuDNN's
#                   plan search on and off, through PyTorch's cuDNN v8 (graph) API and its v7 (legacy) one
#                   (TORCH_CUDNN_V8_API_DISABLED=1), to $OUT/firstcalls-M.txt
#   memory:M        bench/memory_probe.py: what a cold and a warm plan of M leave allocated on the GPU
#   dwkernels:M1,M2 bench/depthwise_kernels.py: each distinct depthwise convolution on cuDNN, the Triton kernel and
#                   ATen's, first call and steady state; twice (the second loads Triton's programs from its disk
#                   cache), to $OUT/dwkernels-M.txt
#   cudnnfe:M       bench/cudnn_plan_probe.py with cuDNN's frontend (carry .whl_fe: the nvidia-cudnn-frontend
#                   wheel): every engine id (ENGINES, 80) on shapes FE_SHAPES (0,2,4), then the saved plans loaded in
#                   a new process, and PyTorch's own first calls with cuDNN's log on (the engine it builds), to
#                   $OUT/cudnnfe-M-*.txt
#   e.g. call (carry .whl):  OUT=dir bash bench/gpu_ready.sh gputests ready:inception_v3,nasnet batches:inception_v3
# Everything comes back in $OUT/ready.tgz (logs, records) and $OUT/search_table.tsv (bench/search_table.py).
# Python's bytecode cache: see bench/gpu_site.sh. For lanes side by side (bench/gpu_lanes.sh): LANE names this
# lane's logs and stores apart; ARGS go to every sweep, WARM_ARGS to the warm ones (e.g. runner.processes=3).
set -uo pipefail
LANE=${LANE:-}
OUT=${OUT:-results/ready} LOGS=/tmp/ready_logs$LANE
read -ra ARGS <<< "${ARGS:-}"
read -ra WARM_ARGS <<< "${WARM_ARGS:-}"
mkdir -p "$OUT"
source bench/gpu_site.sh $LOGS
env | grep -i "^python" >> "$LOGS/versions.txt"
stores=()
sweep() {  # sweep NAME STORE OVERRIDES...
  local name=$1 rd=$2; shift 2
  local t0=$SECONDS
  timeout "${SWEEP_S:-400}" python3 -m harness -m device=cuda tracking=off tracking.results_dir="$rd" precision=fp16 \
    backend=ios runner.max_time_s=2 runner.min_time_s=1 "${ARGS[@]}" "$@" > "$LOGS/$name.log" 2>&1
  echo "$name: $((SECONDS - t0)) s, rc=$?" >> "$LOGS/times.txt"
  stores+=("$rd")
}
for part in "$@"; do
  case $part in
    gputests) timeout 300 python3 -m pytest -q -x tests/test_ios_gpu.py ${GPUTESTS_K:+-k "$GPUTESTS_K"} \
                > "$LOGS/gputests.log" 2>&1
              echo "gputests: rc=$?" >> "$LOGS/times.txt" ;;
    ready:*) IFS=, read -ra models <<< "${part#ready:}"
             for m in "${models[@]}"; do
               rd=/tmp/ready${LANE}_$m
               rm -rf "$rd"  # cold: nothing saved, no kernel choice kept (a machine still warm keeps /tmp)
               sweep "ready-$m-cold" "$rd" model="$m" batch=1
               sweep "ready-$m-warm" "$rd" model="$m" batch=1 sweep.rerun=true "${WARM_ARGS[@]}"
             done ;;
    batches:*) m=${part#batches:}
               rm -rf "/tmp/batches${LANE}_$m"
               sweep "batches-$m" "/tmp/batches${LANE}_$m" model="$m" batch=1,16,64,128 ;;
    batches-reuse:*) m=${part#batches-reuse:}  # the same sweep, each schedule reused within a factor of 8
               rm -rf "/tmp/batchesreuse${LANE}_$m"
               sweep "batchesreuse-$m" "/tmp/batchesreuse${LANE}_$m" model="$m" batch=1,16,64,128 \
                 backend.schedule_any_batch=8 ;;
    tconv:*) m=${part#tconv:}
             rm -rf "/tmp/tconv${LANE}_$m"
             sweep "tconv-$m" "/tmp/tconv${LANE}_$m" model="$m" batch=1 backend.triton_convs=false,true
             sweep "tconv-$m-warm" "/tmp/tconv${LANE}_$m" model="$m" batch=1 backend.triton_convs=true sweep.rerun=true
             for t in "" --triton-convs; do
               timeout "${PROFILE_S:-120}" python3 bench/critical_path.py --model "$m" --store "/tmp/tconv${LANE}_$m" $t \
                 --out "$OUT/critical-$m${t:+-triton}.tsv" > "$LOGS/critical-$m${t:+-triton}.log" 2>&1
               echo "critical-$m${t:+-triton}: rc=$?" >> "$LOGS/times.txt"
             done ;;
    firstcalls:*) IFS=, read -ra models <<< "${part#firstcalls:}"
             for m in "${models[@]}"; do
               for api in v8 v7; do
                 for search in benchmark heuristic; do
                   TORCH_CUDNN_V8_API_DISABLED=$([ $api = v7 ] && echo 1 || echo 0) timeout "${PROFILE_S:-150}" \
                     python3 bench/conv_first_call.py --model "$m" --search $search >> "$OUT/firstcalls-$m.txt" 2>&1
                   echo "firstcalls-$m-$api-$search: rc=$?" >> "$LOGS/times.txt"
                 done
               done
             done ;;
    memory:*) m=${part#memory:}  # what a cold and a warm plan leave allocated, by pool and by owner
              timeout "${PROFILE_S:-150}" python3 bench/memory_probe.py --model "$m" > "$LOGS/memory-$m.log" 2>&1
              echo "memory-$m: rc=$?" >> "$LOGS/times.txt" ;;
    dwkernels:*) IFS=, read -ra models <<< "${part#dwkernels:}"
             for m in "${models[@]}"; do
               rm -rf "/tmp/dwtriton$LANE"  # the first run compiles every Triton program, the second loads them
               for run in cold cache; do
                 echo "== $run" >> "$OUT/dwkernels-$m.txt"
                 TRITON_CACHE_DIR=/tmp/dwtriton$LANE timeout "${PROFILE_S:-150}" python3 bench/depthwise_kernels.py \
                   --model "$m" >> "$OUT/dwkernels-$m.txt" 2>&1
                 echo "dwkernels-$m-$run: rc=$?" >> "$LOGS/times.txt"
               done
             done ;;
    cudnnfe:*) m=${part#cudnnfe:}
             python3 -m pip install -q --no-deps --target /tmp/fesite .whl_fe/*.whl >> "$LOGS/fe-install.log" 2>&1
             shapes=${FE_SHAPES:-0,2,4}
             rm -rf "/tmp/cudnnfe$LANE" "/tmp/cudnnfe$LANE.log"  # no plan or log of an earlier call on this machine
             for phase in build load; do
               PYTHONPATH=/tmp/fesite:$PYTHONPATH timeout "${PROFILE_S:-150}" python3 bench/cudnn_plan_probe.py $phase \
                 --model "$m" --store "/tmp/cudnnfe$LANE" --shapes "$shapes" \
                 $([ $phase = build ] && echo --engines "${ENGINES:-80}") > "$OUT/cudnnfe-$m-$phase.txt" 2>&1
               echo "cudnnfe-$m-$phase: rc=$?" >> "$LOGS/times.txt"
             done
             CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=/tmp/cudnnfe$LANE.log timeout "${PROFILE_S:-150}" python3 \
               bench/cudnn_plan_probe.py torch --model "$m" --shapes "${shapes%%,*}" > "$OUT/cudnnfe-$m-torch.txt" 2>&1
             echo "cudnnfe-$m-torch: rc=$?" >> "$LOGS/times.txt"
             grep -i -E "engine|knob|plan" "/tmp/cudnnfe$LANE.log" | head -c 400000 > "$OUT/cudnnfe-$m-torch-log.txt" ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
for rd in $(printf '%s\n' "${stores[@]}" | sort -u); do echo "== $rd"; python3 bench/search_table.py "$rd"; done > "$OUT/search_table.tsv" 2>&1
tar czf "$OUT/ready.tgz" -C /tmp "ready_logs$LANE" $(cd /tmp && ls -d "ready${LANE}"_*/records \
  "batches${LANE}"_*/records "batchesreuse${LANE}"_*/records "tconv${LANE}"_*/records 2>/dev/null)
exit 0
