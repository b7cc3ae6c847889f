#!/usr/bin/env bash
# Backends that really run on the GPU (issue 26), on one warm lent machine:
#   TVM-cuDNN in each precision (and autotvm after it):
#     call (carry .whl_tvm_a):          bash bench/gpu_tvm.sh stage
#     call (carry .whl_tvm_b, .whl):    OUT=dir [MODELS="m1 m2"] [PRECISIONS="fp32 tf32 fp16"] bash bench/gpu_backends.sh tvm
#     later calls, same machine:        the same without carrying .whl_tvm_b (TVM is installed; the library built)
#   ONNX Runtime on CUDA beside PyTorch's CUDA graph:
#     calls (carry .whl_ort_N, N=0..3): bash bench/ort_wheel.sh stage N
#     call (carry .whl_ort_4, .whl):    OUT=dir bash bench/gpu_backends.sh ort
#   autotvm (after `tvm`, same machine; carry .whl, .whl_tvm_c): OUT=dir TRIALS=64 bash bench/gpu_backends.sh autotvm
# Records stay under $RD/records (no MLflow there); the summary lines go to $OUT/summary.txt.
set -uo pipefail
SITE=/tmp/site OUT=${OUT:-results/bench}
RD=${RESULTS_DIR:-$OUT/results}
export PYTHONPATH=$SITE HARNESS_CACHE_DIR=/tmp/harness_cache
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE .whl/*.whl || exit 1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { tail -5 "$OUT/install.log"; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$OUT/versions.txt"
run() { python3 -m harness batch=1 device=cuda tracking.results_dir="$RD" "$@" 2>&1 \
        | grep -E "^Model:|rror" | tee -a "$OUT/summary.txt"; }
case "${1:-}" in
tvm)  # installed once per warm machine; then each of $MODELS in each of $PRECISIONS
  if ! python3 -c "import tvm" 2>/dev/null; then
    [ -d .whl_tvm_b ] || { echo "TVM is not installed on this machine: carry .whl_tvm_b (after the stage call)"; exit 1; }
    (cd /tmp/tvm_parts && cp "$OLDPWD"/.whl_tvm_b/* . && cat apache_tvm-*.whl.part0? > "$(cut -d' ' -f3 SHA256)" \
       && sha256sum -c SHA256) || exit 1
    python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE /tmp/tvm_parts/*.whl || exit 1
  fi
  python3 -c "import tvm, torch; print('tvm', tvm.__version__, 'torch', torch.__version__, 'cudnn', \
    torch.backends.cudnn.version())" | tee -a "$OUT/versions.txt"
  { which nvcc; find / -path /proc -prune -o -name host_defines.h -print 2>/dev/null | head -5; } >> "$OUT/versions.txt"
  python3 -m harness_plugins.tvm.build_cudnn 2>&1 | tee -a "$OUT/summary.txt"
  cat /tmp/harness_cache/tvm_cudnn/*/build.json > "$OUT/build.json" 2>/dev/null
  python3 -m harness --list-backends > "$OUT/list_backends.txt" 2>&1
  for model in ${MODELS:-inception_v3 squeezenet randwire nasnet}; do
    for precision in ${PRECISIONS:-fp32 tf32 fp16}; do
      t0=$SECONDS
      run model=$model backend=tvm_cudnn precision=$precision ${RUNNER:-runner.max_time_s=3 runner.min_time_s=1}
      echo "tvm_cudnn $model $precision: $((SECONDS - t0)) s" >> "$OUT/times.txt"
    done
  done ;;
autotvm)  # xgboost (autotvm's cost model) comes in .whl_tvm_c (bench/tvm_wheel.sh)
  [ -d .whl_tvm_c ] && { python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE .whl_tvm_c/*.whl \
    || exit 1; }
  run model=inception_v3 backend=autotvm precision=fp32 backend.trials="${TRIALS:-64}" backend.trials_per_iter=16 ;;
ort)
  bash bench/ort_wheel.sh stage 4 >/dev/null && bash bench/ort_wheel.sh install 2>&1 | tail -2 | tee -a "$OUT/versions.txt"
  python3 -m harness --list-backends > "$OUT/list_backends.txt" 2>&1
  for model in ${MODELS:-inception_v3 squeezenet randwire nasnet}; do
    run model=$model backend=onnxruntime precision=fp32
    run model=$model backend=onnxruntime precision=tf32
    run model=$model backend=pytorch_cudagraph precision=fp32
    run model=$model backend=pytorch_cudagraph precision=tf32
  done ;;
*) echo "usage: bench/gpu_backends.sh tvm|autotvm|ort"; exit 2 ;;
esac
tar czf "$OUT/records-$1.tgz" -C "$RD" records 2>/dev/null
