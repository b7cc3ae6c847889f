#!/usr/bin/env bash
# Framework backends that the lent H100 has (JAX with CUDA, ONNX Runtime CPU-only) on
# inception_v3 batch 1. Usage: OUT=dir bash bench/gpu_frameworks.sh
set -uo pipefail
OUT=${OUT:-results/bench}
RD=${RESULTS_DIR:-$OUT/results}
mkdir -p "$OUT"
source bench/gpu_site.sh "$OUT"
python3 -c "import jax, onnxruntime; print('jax', jax.__version__, jax.devices(), 'onnxruntime', onnxruntime.__version__, onnxruntime.get_available_providers())" | tee -a "$OUT/versions.txt"
run() { python3 -m harness model=${MODEL:-inception_v3} batch=1 tracking.results_dir="$RD" "$@" 2>&1 \
        | grep -E "^Model:|rror" | tee -a "$OUT/summary.txt"; }
for prec in fp32 tf32 fp16; do run backend=jax device=cuda precision=$prec; done
run backend=onnxruntime device=cuda precision=fp32          # expected: no CUDA provider here
run backend=onnxruntime device=cpu precision=fp32 runner.max_time_s=20
tar czf "$OUT/records.tgz" -C "$RD" records 2>/dev/null
