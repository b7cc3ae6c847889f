#!/usr/bin/env bash
# A refactor's check on one CUDA GPU (issue 57): the same latencies and optimization cost before and after. In the
# tree TREE (default: this one; another commit's files for "before", e.g. from `git archive`), with fresh Triton and
# Inductor caches and a fresh store: the paper's four networks on IOS and torch.compile reduce-overhead (fp16,
# batch 1, one basic sweep), then the mission command again in the same store (a warm rerun), each timed.
# Usage (carry .whl): OUT=dir TAG=after bash bench/gpu_before_after.sh; TREE=before TAG=before ... for the other.
# Comes back as $OUT/$TAG.tgz: versions, logs, the records (bench/before_after_table.py reads them).
set -uo pipefail
OUT=$(realpath -m "${OUT:-results/before_after}")
TAG=${TAG:-after} TREE=${TREE:-.}
L="$OUT/$TAG" R="/tmp/store-$TAG"
mkdir -p "$L"
rm -rf "$R" "/tmp/triton-$TAG" "/tmp/inductor-$TAG"
export TRITON_CACHE_DIR="/tmp/triton-$TAG" TORCHINDUCTOR_CACHE_DIR="/tmp/inductor-$TAG"
if [ -d .whl ]; then  # the wheels from this tree's root, wherever TREE is
  python3 -m pip install -q --no-index --no-deps --no-compile --target "${SITE:-/tmp/site}" .whl/*.whl 2>/dev/null || exit 1
fi
cd "$TREE" || exit 1
source bench/gpu_site.sh "$L"
O=(tracking=off "tracking.results_dir=$R" device=cuda precision=fp16 batch=1)
{
  s=$(date +%s.%N)
  timeout 470 python3 -m harness -m "${O[@]}" model=inception_v3,nasnet,randwire,squeezenet backend=ios,pytorch_compile
  echo "sweep rc=$? wall_s=$(awk "BEGIN{print $(date +%s.%N) - $s}")"
  s=$(date +%s.%N)
  timeout 60 python3 -m harness "${O[@]}" model=nasnet backend=ios
  echo "mission rerun rc=$? wall_s=$(awk "BEGIN{print $(date +%s.%N) - $s}")"
} > "$L/runs.log" 2>&1
cp -r "$R/records" "$L/" 2>/dev/null
tar czf "$OUT/$TAG.tgz" -C "$OUT" "$TAG"
rm -rf "$L"
