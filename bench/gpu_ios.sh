#!/usr/bin/env bash
# IOS benchmark on a CUDA GPU (see bench/ios_bench.py); extra arguments go to it.
# Usage: OUT=dir bash bench/gpu_ios.sh --models inception_v3 --precisions tf32
set -uo pipefail
OUT=${OUT:-results/bench}
mkdir -p "$OUT"
if [ -d .whl ]; then  # wheels carried to a machine without Hydra/OmegaConf/pluggy
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/gpu.csv"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())" | tee -a "$OUT/gpu.csv"
python3 bench/ios_bench.py --out "$OUT" --results "$OUT/results" "$@"
cp -r "$OUT/results/cache" "$OUT/cost_cache" 2>/dev/null
tar czf "$OUT/records.tgz" -C "$OUT/results" records schedules 2>/dev/null; rm -rf "$OUT/results"
