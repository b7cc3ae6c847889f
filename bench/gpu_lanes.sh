#!/usr/bin/env bash
# Bench scripts side by side on a host with several GPUs: each argument is one lane, a command run with
# CUDA_VISIBLE_DEVICES set to the lane's index (0, 1, ...), LANE=<index>, OUT=/tmp/lanes/<index> and the project
# installed once (SITE_READY), all lanes at once; each is cut at LANE_S seconds (default 540), never later than
# the call's CALL_S, 600, less the time spent so far and MARGIN_S, 150, for the lanes' stop, the tar and the way
# back (about 410 s in effect), so what it finished still comes back (whitespace separates the overrides in a
# lane's ARGS). The lanes share the host's CPU cores: costs measured beside a compiling lane are a crowded
# machine's (say so where they are reported). Everything comes back in $OUT/lanes.tgz (each lane's output folder,
# the gpu_ready logs and every store's records) and, per lane, its tables: lane<i>-search_table.tsv (IOS) and
# lane<i>-summary.txt (peers).
#   e.g. call (carry .whl, kind nvidia-h100-x4):
#     OUT=$OUT bash bench/gpu_lanes.sh "bash bench/gpu_ready.sh ready:squeezenet" \
#       "ARGS=backend.cudnn_search=heuristic bash bench/gpu_ready.sh ready:squeezenet" \
#       "NETS=nasnet RD=/tmp/peers3 THREADS=16 bash bench/gpu_peers.sh ma-modes ma-modes-warm"
set -uo pipefail
FINAL=${OUT:-results/lanes}
rm -rf /tmp/lanes  # a warm machine keeps /tmp: no lane reports an earlier call's tables
mkdir -p "$FINAL" /tmp/lanes
source bench/gpu_site.sh /tmp/lanes
nvidia-smi -L >> /tmp/lanes/versions.txt; nproc >> /tmp/lanes/versions.txt
# the lanes end in time for the tar and the way back inside the call's limit (CALL_S, the device's 600 s): a call
# whose lanes ran to 579 s of 600 came back with rc -1 and no files (2026-11-27; its /tmp was fetched by a second
# call), and so did one that ended at 561 s with a 60 s margin; with 90 s, two calls on a machine started for them
# were cut at 511-514 s of wall time (lanes ended at 510 s of the script's: the machine's start is counted too), rc
# -1 and nothing back: 150 s by default
LANE_S=$(( ${LANE_S:-540} < ${CALL_S:-600} - SECONDS - ${MARGIN_S:-150} ? ${LANE_S:-540} : ${CALL_S:-600} - SECONDS - ${MARGIN_S:-150} ))
echo "lanes cut at $LANE_S s" >> /tmp/lanes/lanes.txt
i=0
for lane in "$@"; do
  mkdir -p "/tmp/lanes/$i"
  echo "$i: $lane" >> /tmp/lanes/lanes.txt
  (t0=$SECONDS
   CUDA_VISIBLE_DEVICES=$i LANE=$i OUT=/tmp/lanes/$i SITE_READY=1 timeout -s INT -k 20 "$LANE_S" \
     bash -c "$lane" > "/tmp/lanes/$i/lane.log" 2>&1
   echo "lane $i: rc=$? $((SECONDS - t0)) s" >> /tmp/lanes/lanes.txt) &
  i=$((i + 1))
done
wait
# a lane cut at LANE_S leaves its sweep's python running (timeout gives each its own process group): stop them
pkill -INT -f "python3 -m harness" 2>/dev/null && sleep 10 && pkill -KILL -f "python3 -m harness" 2>/dev/null
for ((j = 0; j < i; j++)); do
  [ -f "/tmp/lanes/$j/search_table.tsv" ] && cp "/tmp/lanes/$j/search_table.tsv" "$FINAL/lane$j-search_table.tsv"
  [ -f "/tmp/lanes/$j/summary.txt" ] && cp "/tmp/lanes/$j/summary.txt" "$FINAL/lane$j-summary.txt"
done
cp /tmp/lanes/lanes.txt "$FINAL/"
tar czf "$FINAL/lanes.tgz" -C /tmp lanes $(cd /tmp && ls -d ready_logs* ready*_*/records batches*_*/records \
  tconv*_*/records peers*/records 2>/dev/null)
exit 0
