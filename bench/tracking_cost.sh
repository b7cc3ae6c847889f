#!/usr/bin/env bash
# What MLflow tracking adds to a 10-job sweep on this CPU (issue 56: at most 1.2x the same sweep untracked):
# the sweep's wall time on a fresh local store (the default: the end batch sent by a detached upload), the time
# until that upload has ended, and the same sweep with tracking=off. Run from the repository root, on an idle
# machine:  bash bench/tracking_cost.sh [REPEATS]
set -euo pipefail
repeats=${1:-3}
py=${PYTHON:-.venv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sweep=(-m harness -m model=sample backend=overhead batch=1,2,3,4,5,6,7,8,9,10 runner=quick)
export HARNESS_PLUGINS=tests.fake_backends

now() { date +%s.%N; }
for i in $(seq "$repeats"); do
  for kind in fresh off; do
    dir="$work/$kind-$i"
    extra=()
    [ "$kind" = off ] && extra=(tracking=off)
    t0=$(now)
    "$py" "${sweep[@]}" "tracking.results_dir=$dir" "${extra[@]}" >"$dir.log" 2>&1
    t1=$(now)
    "$py" -c "import sys; from harness.records import background; sys.exit(bool(background.wait(sys.argv[1])))" "$dir"
    t2=$(now)
    runs=$("$py" - "$dir" <<'EOF'
import sys
from pathlib import Path
db = Path(sys.argv[1]) / "mlflow.db"
if not db.exists():
    print("-")
else:
    import sqlite3
    con = sqlite3.connect(db)
    print(con.execute("select count(*) from runs where status = 'FINISHED'").fetchone()[0])
EOF
)
    printf '%s run %d: command %.2f s, upload ended %.2f s after it, MLflow runs FINISHED: %s, pending: %d\n' \
      "$kind" "$i" "$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t1" | bc)" "$runs" \
      "$(find "$dir/records/pending" -name '*.json' 2>/dev/null | wc -l)"
  done
done
