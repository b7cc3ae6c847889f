"""Where an IOS search's time goes, per run: python bench/search_table.py RESULTS_DIR [...].

Reads the JSON records under each RESULTS_DIR/records (pending or uploaded) and prints one tab-separated
row per ios run: the search core, the whole optimization cost and its phases (the DP with its stage
timing, the in-situ selection, the rest: layout and kernel timing, model build), the DP's counters and
the latency.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

COLUMNS = ("model", "precision", "batch", "core", "cost_s", "dp_s", "select_s", "other_s", "states", "transitions",
           "stages", "timed", "screened", "median_ms")


def rows(results: Path):
    for f in sorted(results.glob("records/**/*.json")):
        r = json.loads(f.read_text())
        c, m = r.get("config", {}), r.get("metrics", {})
        backend = c.get("backend", {})
        if not isinstance(backend, dict) or backend.get("name") != "ios" or "search_search_s" not in m:
            continue
        cost, dp, sel = m.get("optimization_cost_s", 0.0), m["search_search_s"], m.get("search_select_s", 0.0)
        yield (c.get("model", {}).get("name"), c.get("precision"), c.get("batch"), backend.get("search_core", "auto"),
               f"{cost:.1f}", f"{dp:.1f}", f"{sel:.1f}", f"{cost - dp - sel:.1f}", int(m.get("search_states", 0)),
               int(m.get("search_transitions", 0)), int(m.get("search_stage_evaluations", 0)),
               int(m.get("search_measurements", 0)), int(m.get("search_parts_screened", 0)),
               f"{m.get('latency_ms', m.get('latency_median_ms', float('nan'))):.3f}")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    print("\t".join(COLUMNS))
    for d in argv:
        for row in rows(Path(d)):
            print("\t".join(str(x) for x in row))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
