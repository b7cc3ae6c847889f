#!/usr/bin/env bash
# PyTorch's TIMM suite (18 models, random init) at batch 1 in fp16 on one CUDA GPU (issue 37): the module on
# PyTorch's CUDA graph and torch.compile reduce-overhead, the ONNX export on ONNX Runtime CUDA. On one warm
# lent machine (the onnxruntime-gpu wheel travels in parts, see bench/ort_wheel.sh):
#   calls (carry .whl_ort_N, N=0..3):   bash bench/ort_wheel.sh stage N
#   call (carry .whl_ort_4, .whl):      OUT=dir bash bench/gpu_timm_suite.sh ort cudagraph
#   call (carry .whl):                  OUT=dir bash bench/gpu_timm_suite.sh compile-a   (then compile-b)
#   call (carry .whl):                  OUT=dir bash bench/gpu_timm_suite.sh ios-a       (then ios-b, paper:
#                                       IOS on the suite (issue 38) and on the paper's four networks)
#   call (carry .whl):                  OUT=dir bash bench/gpu_timm_suite.sh pair-0 pair-1 ...  (IOS and
#                                       torch.compile reduce-overhead in one sweep, three models a part, 0..5)
#   call (carry .whl):                  OUT=dir bash bench/gpu_timm_suite.sh profile:mobilevit_s misses  (a
#                                       kernel profile of one model; tf_efficientnet_b0 in 3 processes each)
#   call (carry .whl):                  OUT=dir bash bench/gpu_timm_suite.sh retime  (the misses and two
#                                       transformers again, IOS and compile in one sweep; models:A,B,C any)
# Each part is one sweep per backend; the records stay in $OUT/results.tgz and one line per run goes to
# $OUT/suite.md (model, variant, latency, error against the float64 module).
set -uo pipefail
SITE=/tmp/site OUT=${OUT:-results/timm_suite}
RD=/tmp/timm_suite_results
export PYTHONPATH=$SITE
mkdir -p "$OUT" "$RD"
MODELS=(adv_inception_v3 beit_base_patch16_224 convnextv2_nano deit_base_distilled_patch16_224 deit_tiny_patch16_224
        dm_nfnet_f0 ghostnet_100 inception_v3 mobilenetv2_100 mobilenetv3_large_100 mobilevit_s nfnet_l0 repvgg_a2
        swin_base_patch4_window7_224 tf_efficientnet_b0 visformer_small vit_base_patch14_dinov2
        vit_base_patch16_siglip_256)
join() { local IFS=,; echo "$*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE .whl/*.whl || exit 1
if [ -d /tmp/ort_parts ] && ! PYTHONPATH=$SITE python3 -c "import onnxruntime as o; assert 'CUDAExecutionProvider' in o.get_available_providers()" 2>/dev/null; then
  (cd /tmp/ort_parts && cp "$OLDPWD"/.whl_ort_4/* . 2>/dev/null; cat onnxruntime_gpu-*.whl.part? > "$(cut -d' ' -f3 SHA256)" \
    && sha256sum -c SHA256 >/dev/null) && python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE \
    /tmp/ort_parts/onnxruntime_gpu-*.whl
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { tail -5 "$OUT/install.log"; exit 1; }
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, timm, onnxruntime as o; print('torch', torch.__version__, 'timm', timm.__version__, 'onnxruntime', o.__version__, o.get_available_providers())"
} >> "$OUT/versions.txt" 2>&1
sweep() {  # sweep NAME MODELS... -- OVERRIDES...
  local name=$1; shift
  local models=(); while [ "$1" != "--" ]; do models+=("$1"); shift; done; shift
  local t0=$SECONDS
  timeout "${SWEEP_S:-540}" python3 -m harness -m model=timm "model.arch=$(join "${models[@]}")" batch=1 \
    precision=fp16 device=cuda tracking=off tracking.results_dir="$RD" runner.max_time_s=3 runner.min_time_s=1 "$@" \
    > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name: $((SECONDS - t0)) s, rc=$rc" >> "$OUT/times.txt"
}
for part in "$@"; do
  case $part in
    cudagraph) sweep cudagraph "${MODELS[@]}" -- backend=pytorch backend.mode=cudagraph ;;
    ort) sweep ort "${MODELS[@]}" -- backend=onnxruntime ;;
    compile-a) sweep compile-a "${MODELS[@]:0:9}" -- backend=pytorch backend.mode=compile \
                 backend.compile_mode=reduce-overhead ;;
    compile-b) sweep compile-b "${MODELS[@]:9}" -- backend=pytorch backend.mode=compile \
                 backend.compile_mode=reduce-overhead ;;
    pair-*) i=${part#pair-}; sweep "$part" "${MODELS[@]:$((i * 3)):3}" -- backend=ios,pytorch_compile ;;
    misses) sweep misses tf_efficientnet_b0 -- backend=ios,pytorch_compile runner.processes=3 ;;
    models:*) IFS=, read -ra some <<< "${part#models:}"  # any models of the suite, IOS and compile in one sweep
              sweep "models-${some[0]}" "${some[@]}" -- backend=ios,pytorch_compile ;;
    retime) sweep retime tf_efficientnet_b0 mobilevit_s convnextv2_nano deit_tiny_patch16_224 \
              swin_base_patch4_window7_224 -- backend=ios,pytorch_compile ;;  # the misses and two transformers
    profile:*) arch=${part#profile:}  # where the GPU time goes (bench/kernel_profile.py), IOS Greedy vs compile
               timeout "${PROFILE_S:-200}" python3 bench/kernel_profile.py --model "timm:$arch" --precision fp16 \
                 --batch 1 > "$OUT/profile-$arch.txt" 2>&1; echo "$part: rc=$?" >> "$OUT/times.txt" ;;
    ios-a) sweep ios-a "${MODELS[@]:0:9}" -- backend=ios ;;
    ios-b) sweep ios-b "${MODELS[@]:9}" -- backend=ios ;;
    paper) timeout "${SWEEP_S:-540}" python3 -m harness -m model=inception_v3,nasnet,randwire,squeezenet batch=1 \
             precision=fp16 device=cuda tracking=off tracking.results_dir="$RD" runner.max_time_s=3 \
             runner.min_time_s=1 backend=ios > "$OUT/paper.log" 2>&1; echo "paper: rc=$?" >> "$OUT/times.txt" ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
python3 - "$RD" > "$OUT/suite.md" <<'EOF'
import glob, json, sys
rows = []
for path in glob.glob(f"{sys.argv[1]}/records/*.json"):
    r = json.load(open(path))
    m = r.get("metrics", {})
    rows.append((r["config"]["model"].get("arch", ""), r.get("label") or r["config"]["backend"]["name"],
                 r.get("status"), m.get("latency_median_ms"), m.get("max_rel_error"), m.get("optimization_cost_s"),
                 m.get("model_build_s"), (r.get("error") or "")[:160]))
print("| model | variant | status | median ms | rel. error | opt. cost s | model s | error |")
print("|---|---|---|---|---|---|---|---|")
for row in sorted(rows, key=lambda x: (x[0], x[1])):
    print("| " + " | ".join("" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v)) for v in row) + " |")
EOF
tar czf "$OUT/results.tgz" -C "$RD" . 2>/dev/null
