#!/usr/bin/env bash
# One command installs everything into .venv: the CPU build of PyTorch first (a plain
# `torch` would pull a multi-GB CUDA build), then this package with all installable extras.
# On a GPU machine: TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu130" ./install.sh
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# shellcheck disable=SC2086
.venv/bin/python -m pip install -q $TORCH_SPEC
# ranges in pyproject.toml, the versions CI tests in constraints.txt
.venv/bin/python -m pip install -q -c constraints.txt -e ".[all,dev]"
# the MLflow UI test drives a headless Chromium: Debian's packages, where this user may install them
if [ -z "${SKIP_BROWSER:-}" ] && ! command -v chromedriver >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 \
   && [ "$(id -u)" = 0 ]; then
  { apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium chromium-driver >/dev/null 2>&1; }; } \
    || echo "chromium could not be installed: the MLflow UI test will skip"
fi
# a one-node SLURM cluster with accounting and a PostgreSQL server for the cluster tests (tests/services.py starts
# them under a temporary folder, on ports of their own): Debian's packages, where this user may install them
if [ -z "${SKIP_CLUSTER:-}" ] && ! command -v slurmdbd >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 \
   && [ "$(id -u)" = 0 ]; then
  CLUSTER_PKGS="slurm-wlm slurmdbd munge mariadb-server postgresql"
  # shellcheck disable=SC2086
  { DEBIAN_FRONTEND=noninteractive apt-get install -y -q $CLUSTER_PKGS >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $CLUSTER_PKGS \
         >/dev/null 2>&1; }; } \
    || echo "SLURM or PostgreSQL could not be installed: the cluster tests will skip"
fi
# TVM-cuDNN: TVM's cuDNN functions, compiled from the installed TVM's own sources, where torch has CUDA
if .venv/bin/python -c "import sys, torch, tvm; sys.exit(0 if torch.version.cuda else 1)" >/dev/null 2>&1; then
  .venv/bin/python -m harness_plugins.tvm.build_cudnn || echo "TVM-cuDNN was not built (above: why); backend=tvm_cudnn stays unavailable"
fi
echo "installed into .venv ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'))"
