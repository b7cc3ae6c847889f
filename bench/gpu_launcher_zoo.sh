#!/usr/bin/env bash
# The load-aware launcher against Hydra's basic one on a zoo sweep (issue 55, "studies at scale, fast and quiet"):
# six timm models (random init, fp16, batch 1) on IOS, torch.compile reduce-overhead and the PyTorch CUDA graph,
# one sweep per launcher, each from cold: its own results folder and store (no schedules, kernel choices, Inductor
# cache; the backends put TORCHINDUCTOR_CACHE_DIR under the store) and its own Triton cache. Tracking as users run
# it (the default, a local MLflow store; records stay pending where MLflow is absent). On the lent GPU machine:
#   OUT=dir DEADLINE=560 bash bench/gpu_launcher_zoo.sh "loadaware basic" [overrides...]
# Both sweeps rarely fit one call: one launcher per call on the same warm machine compares them whole.
# ARCHS, BACKENDS (comma lists) replace the models and backends. In $OUT: launchers.log (exit code and wall time
# per launcher), <launcher>.log (the console), records_<launcher>/ (the JSON records, also as records_<l>.tgz)
# and launcher_<launcher>.json (the load-aware launcher's makespan and device use). Compare with
#   python bench/launcher_table.py OUT/records_basic OUT/records_loadaware --names basic loadaware \
#     --launcher-json OUT/launcher_basic.json OUT/launcher_loadaware.json
set -uo pipefail
OUT=${OUT:-results/bench}
DEADLINE=${DEADLINE:-560}
ARCHS=${ARCHS:-mobilenetv3_large_100,repvgg_a2,tf_efficientnet_b0,resnet18,ghostnet_100,convnextv2_nano}
BACKENDS=${BACKENDS:-ios,pytorch_compile,pytorch_cudagraph}
start=$(date +%s)
mkdir -p "$OUT"
source bench/gpu_site.sh "$OUT"
python3 -c "import timm, torchvision" 2>>"$OUT/versions.txt"  # their bytecode cache, so no launcher pays for it
python3 -c "import timm; print('timm', timm.__version__)" >>"$OUT/versions.txt" 2>&1
launchers=$1; shift
for l in $launchers; do
  left=$(( DEADLINE - ($(date +%s) - start) ))
  [ "$left" -gt 30 ] || { echo "no time left for $l" | tee -a "$OUT/launchers.log"; break; }
  rd=$PWD/results/zoo_$l
  rm -rf "$rd" "/tmp/zoo_triton_$l" "/tmp/zoo_inductor_$l"
  export TRITON_CACHE_DIR=/tmp/zoo_triton_$l TORCHINDUCTOR_CACHE_DIR=/tmp/zoo_inductor_$l
  t0=$(date +%s.%N)
  timeout -s TERM -k 10 "$left" python3 -m harness -m hydra/launcher="$l" model=timm model.arch="$ARCHS" \
    backend="$BACKENDS" precision=fp16 batch=1 device=cuda \
    ++backend.store="$rd" tracking.results_dir="$rd" "$@" 2>&1 | tee "$OUT/$l.log"
  rc=${PIPESTATUS[0]}
  echo "$l exit $rc wall $(python3 -c "import time; print(round(time.time() - $t0, 1))") s" | tee -a "$OUT/launchers.log"
  find "$rd" -name launcher.json -exec cp {} "$OUT/launcher_$l.json" \;
  tar czf "$OUT/records_$l.tgz" -C "$rd" records 2>/dev/null
  mkdir -p "$OUT/records_$l" && cp -r "$rd/records/." "$OUT/records_$l/" 2>/dev/null
done
