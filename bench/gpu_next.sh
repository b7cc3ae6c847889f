#!/usr/bin/env bash
# What the sixteenth session left for the GPU (not yet run), one part per argument, each under $OUT/<part>:
#   fp16check  issue 58: timm inception_v3 and adv_inception_v3 in fp16 pass the conditioning-aware check on
#              IOS, PyTorch and torch.compile (they failed at 5-7% against 3% before it)
#   planload   issue 59: inception_v3 planned and saved, then loaded in a new process (--load-only): the first
#              inference's time, target 3 s with a warm Triton cache
#   placement  issues 55/56: ten fresh processes of torch.compile reduce-overhead on inception_v3 (heuristic
#              plans) with the caching allocator as it is and with expandable segments, whose one process in ten
#              ran 20-32% slower (BENCHMARKS.md, "What makes processes differ")
#   OUT=dir bash bench/gpu_next.sh fp16check planload placement
set -uo pipefail
OUT=${OUT:-results/next}
source bench/gpu_site.sh "$OUT"
for part in "$@"; do
  mkdir -p "$OUT/$part"
  case $part in
    fp16check)
      python3 -m harness -m model=timm model.arch=inception_v3,adv_inception_v3 backend=ios,pytorch,pytorch_compile \
        precision=fp16 device=cuda tracking=off tracking.results_dir="$OUT/$part/r" runner.max_time_s=2 \
        > "$OUT/$part/log" 2>&1 ;;
    planload)
      args=(--device cuda --model inception_v3 --image-size 0 --precision fp16 --folder "/tmp/planload")
      { python3 examples/saved_plan.py "${args[@]}"
        python3 examples/saved_plan.py "${args[@]}" --load-only
        python3 examples/saved_plan.py "${args[@]}" --load-only; } > "$OUT/$part/log" 2>&1 ;;
    placement)
      OUT="$OUT/$part/default" N=10 SEARCHES=heuristic PART_S=250 bash bench/gpu_process_spread.sh inception_v3:pytorch_compile
      PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True OUT="$OUT/$part/expandable" N=10 SEARCHES=heuristic PART_S=250 \
        bash bench/gpu_process_spread.sh inception_v3:pytorch_compile ;;
    *) echo "unknown part $part" >&2 ;;
  esac
done
tar czf "$OUT/next.tgz" -C "$OUT" . 2>/dev/null
