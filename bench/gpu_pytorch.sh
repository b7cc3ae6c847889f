#!/usr/bin/env bash
# PyTorch backend on a CUDA GPU, inception_v3 batch 1, every mode and precision.
# On the lent H100 (no MLflow there) records stay pending: copy results/records home
# and run `python -m harness.upload`. Usage: OUT=dir bash bench/gpu_pytorch.sh
set -uo pipefail
OUT=${OUT:-results/bench}
RD=${RESULTS_DIR:-$PWD/results}
mkdir -p "$OUT"
source bench/gpu_site.sh "$OUT"
run() { python3 -m harness model=inception_v3 backend=pytorch batch=1 device=cuda tracking.results_dir="$RD" "$@" 2>&1 \
        | grep -E "^Model:|error" | tee -a "$OUT/summary.txt"; }
MODES=${MODES:-eager cudagraph reduce-overhead}
for prec in ${PRECISIONS:-fp32 tf32 fp16}; do
  for mode in $MODES; do
    case $mode in
      eager|cudagraph) run precision=$prec backend.mode=$mode ;;
      *) run precision=$prec backend.mode=compile backend.compile_mode=$mode ;;
    esac
  done
done
tar czf "$OUT/records.tgz" -C "$RD" records
