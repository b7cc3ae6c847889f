#!/usr/bin/env bash
# onnxruntime-gpu's wheel (~256 MB) is far over the 64 MiB one device call carries: it travels in
# parts on one warm machine. Here (CPU machine): `bash bench/ort_wheel.sh` fills .whl_ort_0/ ..
# .whl_ort_4/ (git-ignored; the last one also holds the SHA256 of the whole). On the GPU, one call
# per part: `bash bench/ort_wheel.sh stage N` (carrying .whl_ort_N), then `bash bench/ort_wheel.sh
# install` (any call after the last part) joins, checks and installs it into /tmp/site.
set -euo pipefail
cd "$(dirname "$0")/.."
PARTS=/tmp/ort_parts SITE=/tmp/site
case "${1:-split}" in
split)
  PY=${DEVICE_PYTHON:-3.12}
  rm -rf .whl_ort .whl_ort_? && mkdir -p .whl_ort
  .venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version "$PY" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    -d .whl_ort onnxruntime-gpu==1.31.1
  wheel=$(ls .whl_ort/onnxruntime_gpu-*.whl)
  split -b 50M -d -a 1 "$wheel" ".whl_ort/$(basename "$wheel").part"
  i=0
  for part in .whl_ort/*.part?; do mkdir -p ".whl_ort_$i" && mv "$part" ".whl_ort_$i/"; i=$((i + 1)); done
  (cd .whl_ort && sha256sum "$(basename "$wheel")") > ".whl_ort_$((i - 1))/SHA256"
  rm -rf .whl_ort
  du -sh .whl_ort_? ;;
stage)
  mkdir -p $PARTS && cp ".whl_ort_$2"/* $PARTS/ && ls -la $PARTS ;;
install)
  (cd $PARTS && cat onnxruntime_gpu-*.whl.part? > "$(cut -d' ' -f3 SHA256)" && sha256sum -c SHA256)
  python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE $PARTS/onnxruntime_gpu-*.whl
  PYTHONPATH=$SITE python3 -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())" ;;
*) echo "usage: bench/ort_wheel.sh [split|stage N|install]"; exit 2 ;;
esac
