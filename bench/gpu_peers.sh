#!/usr/bin/env bash
# Peers at their best on one CUDA GPU (issue 40): torch.compile max-autotune with Inductor's caches in the
# store, cold then warm, with and without Triton convolution templates; ONNX Runtime CUDA with and without
# a CUDA graph, fp16 and fp32; IOS beside them in the same sweep. The paper's four networks. Parts (a batch
# size after @, default 1; the store in /tmp/peers_results is kept between calls on a warm machine, so a
# -warm part reuses the caches its cold part filled):
#   ma-aten[@B] ma-aten-warm[@B]   max-autotune, convolutions on ATen/cuDNN (GEMMs and pointwise autotuned)
#   ma-vendor[@B] ma-vendor-warm[@B]  max-autotune with ATen/cuDNN convolutions and ATen/cuBLAS GEMMs: nothing
#                                  compiled per template (cold inception_v3 spent 309 of 368 s tuning Triton GEMMs)
#   ma-modes[@B] ma-modes-warm[@B]  the vendor preset (pytorch_max_autotune_vendor) in both of torch's max-autotune
#                                  modes, with and without CUDA graphs (max-autotune-no-cudagraphs), cold then warm
#   ma-triton[@B]                  max-autotune with Triton convolution templates too, inception_v3 only
#   ro[@B]                         torch.compile reduce-overhead, fp16 (max-autotune's same-run pair)
#   ort[@B]                        ONNX Runtime CUDA, CUDA graph on and off, fp16 and fp32
#   ort-nhwc[@B]                   ONNX Runtime CUDA with a CUDA graph, NCHW against NHWC kernels (prefer_nhwc)
#   ios[@B] ios-fp16[@B]           IOS, fp16 and fp32 (or fp16 only)
# On one warm lent machine (the onnxruntime-gpu wheel travels in parts, see bench/ort_wheel.sh), e.g.
#   call (carry .whl, .whl_ort_1):  bash bench/ort_wheel.sh stage 1 && OUT=dir bash bench/gpu_peers.sh ma-aten
#   call (carry .whl, .whl_ort_4):  bash bench/ort_wheel.sh stage 4 && bash bench/ort_wheel.sh install &&
#                                   OUT=dir bash bench/gpu_peers.sh ort
# $OUT gets the logs (one per part), records.tgz, summary.txt (each run's summary line) and times.txt. NETS (comma
# separated), RD (the store) and MA_MODES (ma-modes' compile modes, comma separated) may be given: lanes side by side
# (bench/gpu_lanes.sh) split the networks, or the modes.
set -uo pipefail
OUT=${OUT:-results/peers}
RD=${RD:-/tmp/peers_results}
NETS=${NETS:-inception_v3,nasnet,randwire,squeezenet}
source bench/gpu_site.sh "$OUT"
python3 -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())" \
  >> "$OUT/versions.txt" 2>&1
sweep() {  # sweep NAME BATCH OVERRIDES...
  local name=$1 batch=$2; shift 2
  local t0=$SECONDS
  timeout "${SWEEP_S:-540}" python3 -m harness -m batch="$batch" device=cuda tracking=off tracking.results_dir="$RD" \
    runner.max_time_s=3 runner.min_time_s=1 "$@" > "$OUT/$name.log" 2>&1
  echo "$name: $((SECONDS - t0)) s, rc=$?" >> "$OUT/times.txt"
  grep -E "^Model:|rror|┃|│|AUTOTUNE|took" "$OUT/$name.log" >> "$OUT/summary.txt"
}
MA="backend=pytorch_max_autotune precision=fp16 backend.compile_timeout_s=${COMPILE_S:-500}"
ATEN="model=$NETS $MA backend.autotune_conv_backends=ATEN"  # cuDNN convolutions; GEMMs autotuned
VENDOR="$ATEN backend.autotune_gemm_backends=ATEN"  # cuDNN and cuBLAS: nothing compiled per template
MODES="model=$NETS backend=pytorch_max_autotune_vendor precision=fp16 backend.compile_timeout_s=${COMPILE_S:-500}
  backend.compile_mode=${MA_MODES:-max-autotune,max-autotune-no-cudagraphs} backend.compile_threads=${THREADS:-0}"
WARM=sweep.rerun=true  # the same sweep again, measured anew: its caches are the cold part's
for spec in "$@"; do
  part=${spec%@*} batch=1
  [[ $spec == *@* ]] && batch=${spec#*@}
  name=$part-b$batch  # files that come back are named in letters, digits, '.', '_' and '-'
  case $part in
    ma-aten) sweep "$name" "$batch" $ATEN ;;
    ma-aten-warm) sweep "$name" "$batch" $ATEN $WARM ;;
    ma-vendor) sweep "$name" "$batch" $VENDOR ;;
    ma-vendor-warm) sweep "$name" "$batch" $VENDOR $WARM ;;
    ma-modes) sweep "$name" "$batch" $MODES ;;
    ma-modes-warm) sweep "$name" "$batch" $MODES $WARM ;;
    ma-triton) sweep "$name" "$batch" model=inception_v3 $MA backend.autotune_conv_backends='"ATEN,TRITON"' ;;
    ro) sweep "$name" "$batch" model=$NETS backend=pytorch_compile precision=fp16 ;;
    ort) sweep "$name" "$batch" model=$NETS precision=fp16,fp32 backend=onnxruntime backend.cuda_graph=auto,false ;;
    ort-nhwc) sweep "$name" "$batch" model=$NETS precision=fp16,fp32 backend=onnxruntime backend.prefer_nhwc=false,true ;;
    ios) sweep "$name" "$batch" model=$NETS precision=fp16,fp32 backend=ios ;;
    ios-fp16) sweep "$name" "$batch" model=$NETS precision=fp16 backend=ios ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
tar czf "$OUT/records.tgz" -C "$RD" records 2>/dev/null
exit 0
