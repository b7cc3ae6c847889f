#!/usr/bin/env bash
# After a refactor: the GPU tests and a few runs through the command line on one CUDA GPU (a search,
# its reuse, a PyTorch run, a load-aware sweep), everything in one tarball (the device tool returns
# few files). Usage: OUT=dir bash bench/gpu_check.sh
set -uo pipefail
OUT=${OUT:-results/check}
R="$OUT/results"
mkdir -p "$OUT"
source bench/gpu_site.sh "$OUT"
if [ -z "${ONLY_SWEEP:-}" ]; then
  python3 -m pytest -q -p no:cacheprovider tests/test_ios_gpu.py tests/test_planner.py > "$OUT/gpu_tests.log" 2>&1
  echo "rc=$?" >> "$OUT/gpu_tests.log"
fi
O=(tracking=off "tracking.results_dir=$R" device=cuda runner.max_time_s=2)
H=(python3 -m harness "${O[@]}")
{
  [ "${ONLY_SWEEP:-}" ] || {
  "${H[@]}" model=squeezenet backend=ios batch=1          # searches and saves the schedule
  "${H[@]}" model=squeezenet backend=ios batch=1          # reuses it
  "${H[@]}" model=squeezenet backend=pytorch batch=16
  "${H[@]}" model=inception_v3 backend=ios batch=1 backend.cost_model=calibrated
  }
  python3 -m harness -m "${O[@]}" hydra/launcher=loadaware model=squeezenet backend=ios,pytorch batch=1,16
  echo "sweep rc=$?"
} > "$OUT/runs.log" 2>&1
tar czf "$OUT/check.tgz" -C "$OUT" versions.txt install.log gpu_tests.log runs.log results 2>/dev/null
rm -rf "$R"
