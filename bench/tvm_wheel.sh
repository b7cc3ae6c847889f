#!/usr/bin/env bash
# TVM's wheel (~96 MiB) is over the 64 MiB one device call carries, so it travels in two
# halves on one warm machine. Here (CPU machine): `bash bench/tvm_wheel.sh` fills
# .whl_tvm_a/ (first half + ffi and psutil wheels), .whl_tvm_b/ (second half + SHA256 of the
# whole) and .whl_tvm_c/ (xgboost, for autotvm's cost model: with the source tree a half and
# xgboost were over the 64 MiB a call carries), all git-ignored. On the GPU: bench/gpu_tvm.sh
# stage, then run (or bench/gpu_backends.sh tvm); .whl_tvm_c with the autotvm call.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${DEVICE_PYTHON:-3.12}
rm -rf .whl_tvm .whl_tvm_a .whl_tvm_b .whl_tvm_c && mkdir -p .whl_tvm .whl_tvm_a .whl_tvm_b .whl_tvm_c
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version "$PY" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl_tvm apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post1 xgboost-cpu psutil
wheel=$(ls .whl_tvm/apache_tvm-*.whl)
(cd .whl_tvm && sha256sum "$(basename "$wheel")") > .whl_tvm_b/SHA256
split -n 2 -d "$wheel" ".whl_tvm_a/$(basename "$wheel").part"
mv ".whl_tvm_a/$(basename "$wheel").part01" .whl_tvm_b/
mv .whl_tvm/xgboost*.whl .whl_tvm_c/
for w in .whl_tvm/*.whl; do [ "$w" = "$wheel" ] || cp "$w" .whl_tvm_a/; done
rm -rf .whl_tvm
du -sh .whl_tvm_a .whl_tvm_b .whl_tvm_c
