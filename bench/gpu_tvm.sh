#!/usr/bin/env bash
# TVM on the lent GPU machine, which has no TVM: the wheel comes in two halves
# (bench/tvm_wheel.sh) over two calls on one warm machine.
#   call 1 (carry .whl_tvm_a):          bash bench/gpu_tvm.sh stage
#   call 2 (carry .whl_tvm_b and .whl): OUT=dir bash bench/gpu_tvm.sh run
#   or, to install only:                 bash bench/gpu_tvm.sh install
#   later calls (same warm machine):    OUT=dir bash bench/gpu_tvm.sh tune TRIALS [MODEL [overrides...]]
# autotvm's cost model needs xgboost: carry .whl_tvm_c with call 2 or with the first `tune` call.
# The tuning database lives in results/tvm_tuning on that machine, so a later `tune` call
# with more trials tunes only the difference and then measures.
set -uo pipefail
PARTS=/tmp/tvm_parts SITE=/tmp/site
OUT=${OUT:-results/bench}
RD=${RESULTS_DIR:-$OUT/results}
case "${1:-}" in
stage)
  mkdir -p $PARTS && cp .whl_tvm_a/* $PARTS/ && ls -la $PARTS; exit ;;
run|install)
  cp .whl_tvm_b/* $PARTS/ || exit 1
  (cd $PARTS && cat apache_tvm-*.whl.part0? > "$(cut -d' ' -f3 SHA256)" && sha256sum -c SHA256) || exit 1
  python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE $PARTS/*.whl .whl/*.whl \
    $(ls .whl_tvm_c/*.whl 2>/dev/null) || exit 1 ;;  # xgboost for tune: carry .whl_tvm_c (bench/tvm_wheel.sh)
tune) [ -d .whl_tvm_c ] && { python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE \
        .whl_tvm_c/*.whl || exit 1; } ;;
*) echo "usage: bench/gpu_tvm.sh stage|run|install|tune TRIALS [MODEL [overrides...]]"; exit 2 ;;
esac
export PYTHONPATH=$SITE
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || exit 1
python3 -c "import tvm; print('tvm', tvm.__version__, 'cuda', tvm.cuda(0).exist, tvm.cuda(0).device_name, \
  'arch', tvm.target.Target.from_device(tvm.cuda(0)).arch)" | tee -a "$OUT/versions.txt"
run() { python3 -m harness batch=1 device=cuda tracking.results_dir="$RD" "$@" 2>&1 \
        | grep -E "^Model:|rror" | tee -a "$OUT/summary.txt"; }
if [ "$1" = install ]; then
  exit 0
elif [ "$1" = run ]; then
  for model in inception_v3 squeezenet randwire nasnet; do run model=$model backend=tvm precision=fp32; done
  run model=inception_v3 backend=tvm precision=fp16
  run model=inception_v3 backend=tvm precision=fp32 backend.cuda_graph=true
  run model=inception_v3 backend=tvm_cudnn precision=fp32       # expected: PyPI's TVM has no cuDNN
else
  run model="${3:-inception_v3}" backend=autotvm precision=fp32 backend.trials="$2" backend.trials_per_iter=16 \
      "${@:4}"
fi
tar czf "$OUT/records.tgz" -C "$RD" records 2>/dev/null
du -sh results/tvm_tuning/*/* 2>/dev/null | tee -a "$OUT/summary.txt"
