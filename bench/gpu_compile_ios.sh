#!/usr/bin/env bash
# Issue 59: torch.compile(backend="ios") against the IOS backend and Inductor reduce-overhead, one sweep per model
# group on one GPU, same protocol (fp16, batch 1), fresh stores: compile-ios's latency within 3% of IOS's, never
# slower than Inductor's beyond the CIs; its note says what fell back. Each argument is one sweep's models, e.g.
#   model=inception_v3,squeezenet (the IR zoo's: torch.compile traces the IR's torch module)
#   model=timm,model.arch=resnet50,mobilenetv3_large_100 (commas after the first: the overrides' separator is ',')
#   OUT=dir bash bench/gpu_compile_ios.sh model=randwire,nasnet    (carry .whl; two lanes: bench/gpu_lanes.sh)
set -uo pipefail
OUT=${OUT:-results/compile_ios}
source bench/gpu_site.sh "$OUT"
i=0
for spec in "$@"; do
  group=g$i; i=$((i + 1))
  mkdir -p "$OUT/$group"
  if [[ $spec == model=timm,* ]]; then models=(model=timm "${spec#model=timm,}"); else models=("$spec"); fi
  echo "$spec" > "$OUT/$group/spec"
  python3 -m harness -m "${models[@]}" backend=ios,pytorch_ios,pytorch_compile precision=fp16 device=cuda batch=1 \
    tracking=off tracking.results_dir="$OUT/$group/r" ${EXTRA:-} > "$OUT/$group/log" 2>&1
  python3 - "$OUT/$group/r" > "$OUT/$group/table.tsv" <<'PY'
import json, sys
from pathlib import Path
print("model\tbackend\tstatus\tmedian_ms\tci_pct\tcost_s\tnote")
for f in sorted(Path(sys.argv[1], "records").glob("*.json")):
    r = json.loads(f.read_text())
    m, note = r.get("metrics", {}), next((n for n in r.get("notes", []) if "IOS runs" in n), "")
    print(f"{r['config']['model'].get('arch') or r['config']['model']['name']}\t{r.get('label')}\t{r['status']}\t"
          f"{m.get('latency_median_ms', float('nan')):.4f}\t{100 * m.get('latency_ci_rel_halfwidth', float('nan')):.2f}\t"
          f"{m.get('optimization_cost_s', float('nan')):.1f}\t{note[:200] or r.get('error', '')[:200]}")
PY
done
tar czf "$OUT/compile_ios.tgz" -C "$OUT" . 2>/dev/null
