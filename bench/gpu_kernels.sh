#!/usr/bin/env bash
# "IOS on the fastest kernels" on a CUDA GPU. Usage: OUT=dir bash bench/gpu_kernels.sh STEP
#   ablation: the GPU tests, then the passes, the kernel choice and the layout on/off under Greedy on the four
#             networks (fp16, batch 1)
#   one:      one harness run: bash bench/gpu_kernels.sh one model=... backend=...
#   profile:  bench/kernel_profile.py (IOS and torch.compile kernel by kernel) with the given arguments
#   both:     IOS-Both with every default beside torch.compile reduce-overhead (BATCHES, BOTH_PRECISIONS)
#   sweep:    the kernels preset (PRESET=kernels, or kernels_quick) as one sweep
#   search:   cold IOS searches per search core (CORES="native python", MODELS), phases by bench/search_table.py
# Records stay under $RD/records (no MLflow on the lent GPU); bench/kernels_table.py prints them.
set -uo pipefail
OUT=${OUT:-results/bench}
RD=${RESULTS_DIR:-$PWD/results}
mkdir -p "$OUT"
# --no-build-isolation: nothing can be fetched there; pybind11 comes with the carried wheels
source bench/gpu_site.sh "$OUT"
run() { python3 -m harness device=cuda tracking.results_dir="$RD" "$@" 2>&1 \
        | grep -E "^Model:|rror" | tee -a "$OUT/summary.txt"; }
case "${1:-ablation}" in
  ablation)
    [ -n "${TESTS:-}" ] && python3 -m pytest -q -p no:cacheprovider tests/test_ios_gpu.py tests/test_kernels.py tests/test_passes.py \
      2>&1 | tail -3 | tee -a "$OUT/summary.txt"
    for prec in ${PRECISIONS:-fp16}; do
      for m in ${MODELS:-inception_v3 nasnet randwire squeezenet}; do
        G="model=$m precision=$prec backend=ios_greedy"
        run $G backend.channels_last=false backend.passes=[] backend.kernels=cudnn  # before this issue
        run $G backend.channels_last=true backend.passes=[] backend.kernels=cudnn   # the old flag
        run $G backend.channels_last=true backend.kernels=cudnn                     # + passes
        run $G backend.channels_last=true backend.passes=[]                         # + kernel choice
        run $G                                                                      # the defaults (auto layout)
      done
    done
    for prec in ${BOTH_PRECISIONS:-}; do
      for m in ${BOTH_MODELS:-inception_v3}; do run model=$m precision=$prec backend=ios; done
    done ;;
  both)  # IOS-Both with every default, beside torch.compile reduce-overhead
    for prec in ${BOTH_PRECISIONS:-fp16 tf32}; do
      for m in ${BOTH_MODELS:-inception_v3}; do
        for b in ${BATCHES:-1}; do
          run model=$m precision=$prec batch=$b backend=ios
          run model=$m precision=$prec batch=$b backend=pytorch_compile
        done
      done
    done ;;
  one) run "${@:2}" ;;  # one harness run with the given overrides
  search)  # cold IOS searches, a fresh store each (no saved layout, schedule or stage cost reused)
    python3 -c "from ios_core.schedule import native; print('search core:', native.core_name())" | tee -a "$OUT/summary.txt"
    for core in ${CORES:-native}; do
      for m in ${MODELS:-randwire nasnet inception_v3}; do
        d="$RD/search-$core-$m"
        python3 -m harness device=cuda tracking.results_dir="$d" model=$m precision=${PRECISION:-fp16} backend=ios \
          backend.store="$d" backend.search_core=$core "${@:2}" 2>&1 | grep -E "^Model:|rror|search \(" \
          | tail -3 | tee -a "$OUT/summary.txt"
      done
    done
    python3 bench/search_table.py "$RD"/search-* | tee "$OUT/search.tsv" ;;
  profile) timeout "${PROFILE_S:-300}" python3 bench/kernel_profile.py "${@:2}" 2>&1 | grep -v -i warn \
             | tee "$OUT/profile.txt" ;;
  sweep)
    python3 -m harness -m +experiment="${PRESET:-kernels}" device=cuda tracking.results_dir="$RD" "${@:2}" 2>&1 \
      | grep -vE "^\s*$" | tee -a "$OUT/sweep.txt" | grep -E "^Model:|rror|^\|" ;;
esac
python3 bench/kernels_table.py "$RD" | tee "$OUT/table.tsv"
tar czf "$OUT/records.tgz" -C "$RD" records schedules $(cd "$RD" && ls -d search-* 2>/dev/null) 2>/dev/null
