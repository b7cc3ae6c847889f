#!/usr/bin/env bash
# Peers at their best on one CUDA GPU (issue 40): torch.compile max-autotune with Inductor's caches in the
# store, cold then warm, with and without Triton convolution templates; ONNX Runtime CUDA with and without
# a CUDA graph, fp16 and fp32; IOS beside them in the same sweep. The paper's four networks at batch 1.
# On one warm lent machine (the onnxruntime-gpu wheel travels in parts, see bench/ort_wheel.sh):
#   calls (carry .whl_ort_N, N=0..4):  bash bench/ort_wheel.sh stage N   (then: bash bench/ort_wheel.sh install)
#   call (carry .whl):                 OUT=dir bash bench/gpu_peers.sh ma-aten ma-aten-warm
#   call (carry .whl):                 OUT=dir bash bench/gpu_peers.sh ort ios
#   call (carry .whl):                 OUT=dir bash bench/gpu_peers.sh ma-triton   (inception_v3 only)
# Records stay in $OUT/records.tgz, one summary line per run in $OUT/summary.txt, part times in times.txt.
set -uo pipefail
SITE=/tmp/site OUT=${OUT:-results/peers}
RD=/tmp/peers_results  # kept between calls on a warm machine: the warm max-autotune part reuses its caches
NETS=inception_v3,nasnet,randwire,squeezenet
export PYTHONPATH=$SITE
mkdir -p "$OUT" "$RD"
python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE .whl/*.whl || exit 1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { tail -5 "$OUT/install.log"; exit 1; }
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, onnxruntime as o; print('torch', torch.__version__, 'onnxruntime', o.__version__, o.get_available_providers())"
} >> "$OUT/versions.txt" 2>&1
sweep() {  # sweep NAME OVERRIDES...
  local name=$1; shift
  local t0=$SECONDS
  timeout "${SWEEP_S:-560}" python3 -m harness -m batch=1 device=cuda tracking=off tracking.results_dir="$RD" \
    runner.max_time_s=3 runner.min_time_s=1 "$@" > "$OUT/$name.log" 2>&1
  echo "$name: $((SECONDS - t0)) s, rc=$?" >> "$OUT/times.txt"
  grep -E "^Model:|rror|┃|│" "$OUT/$name.log" >> "$OUT/summary.txt"
}
for part in "$@"; do
  case $part in
    ma-aten) sweep ma-aten model=$NETS precision=fp16 backend=pytorch_max_autotune backend.autotune_conv_backends=ATEN \
               backend.compile_timeout_s=500 ;;
    ma-aten-warm) sweep ma-aten-warm model=$NETS precision=fp16 backend=pytorch_max_autotune \
                    backend.autotune_conv_backends=ATEN backend.compile_timeout_s=500 sweep.rerun=true ;;
    ma-triton) sweep ma-triton model=inception_v3 precision=fp16 backend=pytorch_max_autotune \
                 backend.compile_timeout_s=500 ;;
    ort) sweep ort model=$NETS precision=fp16,fp32 backend=onnxruntime backend.cuda_graph=auto,false ;;
    ios) sweep ios model=$NETS precision=fp16,fp32 backend=ios ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
tar czf "$OUT/records.tgz" -C "$RD" records 2>/dev/null
