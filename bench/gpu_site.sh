# Sourced by bench/gpu_*.sh on the lent GPU machine, with the folder for its logs as $1: the carried wheels
# (.whl: Hydra, OmegaConf, nvidia-ml-py, ...; a call that carries none reuses what an earlier call on the same warm
# machine put there) into $SITE on PYTHONPATH, this project installed in development mode (its log in
# $1/install.log), and in $1/versions.txt the GPU (name, driver, clocks, temperature), the commit and the versions
# of torch, CUDA and cuDNN. Exits the script on failure.
# The lent machine's Python writes no bytecode cache, so every process compiled torch's ~3,500 modules from source
# (about 10 s of each run's import and first compile, profiled): a cache folder is given, and filled once here,
# as an installed environment has.
SITE=${SITE:-/tmp/site}
export PYTHONPATH=$SITE PYTHONPYCACHEPREFIX=/tmp/pycache
unset PYTHONDONTWRITEBYTECODE
mkdir -p "$1"
if [ -n "${SITE_READY:-}" ]; then return 0 2>/dev/null || exit 0; fi  # lanes of bench/gpu_lanes.sh: installed once
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .whl/*.whl 2>/dev/null || exit 1
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$1/install.log" 2>&1 || { tail -5 "$1/install.log"; exit 1; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
  git rev-parse --short HEAD 2>/dev/null
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
} >> "$1/versions.txt" 2>&1
python3 -c "import harness.job, torch._dynamo, torch._inductor.compile_fx, triton" 2>>"$1/versions.txt"
