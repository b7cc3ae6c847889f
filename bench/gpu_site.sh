# Sourced by bench/gpu_*.sh on the lent GPU machine, with the folder for its logs as $1: the carried wheels
# (.whl: Hydra, OmegaConf, nvidia-ml-py, ...) into $SITE on PYTHONPATH, this project installed in development
# mode (its log in $1/install.log), the GPU and driver appended to $1/versions.txt. Exits the script on failure.
SITE=${SITE:-/tmp/site}
export PYTHONPATH=$SITE
mkdir -p "$1"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .whl/*.whl || exit 1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$1/install.log" 2>&1 || { tail -5 "$1/install.log"; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$1/versions.txt" 2>&1
