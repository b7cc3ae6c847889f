#!/usr/bin/env bash
# IOS benchmark on a CUDA GPU (see bench/ios_bench.py); extra arguments go to it.
# Usage: OUT=dir bash bench/gpu_ios.sh --models inception_v3 --precisions tf32
set -uo pipefail
OUT=${OUT:-results/bench}
mkdir -p "$OUT"
source bench/gpu_site.sh "$OUT"
python3 bench/ios_bench.py --out "$OUT" --results "$OUT/results" "$@"
cp -r "$OUT/results/cache" "$OUT/cost_cache" 2>/dev/null
tar czf "$OUT/records.tgz" -C "$OUT/results" records schedules 2>/dev/null; rm -rf "$OUT/results"
