"""Where an IOS search's time goes, per run: python bench/search_table.py RESULTS_DIR [...].

Reads the JSON records under each RESULTS_DIR/records (pending or uploaded) and prints one tab-separated
row per ios run: the search core, whether the schedule was reused, the whole optimization cost and its
phases (Planner.plan's: graph passes, layout timing, the schedule -- inside it the DP with its stage timing
and the in-situ selection --, preparing the model: kernel choice, Triton compiles, capture; saving), the
DP's counters, the kernel choice's (candidates timed, reused from the store, Triton compiles), how the layout
was chosen and the latency. Records older than the phases show "-" for them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PHASES = ("passes", "layout", "tables", "schedule", "build", "prepare", "save", "release")
COLUMNS = ("model", "precision", "batch", "core", "reused", "cost_s", *(f"{p}_s" for p in PHASES), "dp_s", "select_s",
           "states", "transitions", "stages", "timed", "screened", "kernels_timed", "kernels_reused", "compiles",
           "compile_s", "ahead", "ahead_s", "layout_ahead_s", "layout_by", "median_ms")


def kernels(m: dict) -> tuple:
    """The kernel choice's share: candidates timed, choices reused from the store, Triton compiles one by one and
    their seconds, the programs compiled ahead on threads and those passes' seconds (the layout screen's apart)."""
    return (*(int(m[k]) if k in m else "-" for k in ("kernel_ops_timed", "kernel_reused", "kernel_compiles")),
            f"{m['kernel_compile_s']:.1f}" if "kernel_compile_s" in m else "-",
            int(m["kernel_ahead_programs"]) if "kernel_ahead_programs" in m else "-",
            *(f"{m[k]:.1f}" if k in m else "-" for k in ("kernel_ahead_s", "layout_ahead_s")))


def rows(results: Path):
    for f in sorted(results.glob("records/**/*.json")):
        r = json.loads(f.read_text())
        c, m = r.get("config", {}), r.get("metrics", {})
        backend = c.get("backend", {})
        planned = {"search_search_s", "plan_schedule_s"} & set(m)  # searched, or planned with the phases recorded
        if not isinstance(backend, dict) or backend.get("name") != "ios" or not planned:
            continue
        head = (c.get("model", {}).get("name"), c.get("precision"), c.get("batch"), backend.get("search_core", "auto"))
        cost, dp, sel = m.get("optimization_cost_s", 0.0), m.get("search_search_s", 0.0), m.get("search_select_s", 0.0)
        phases = [f"{m[f'plan_{p}_s']:.1f}" if f"plan_{p}_s" in m else "-" for p in PHASES]
        latency = f"{m.get('latency_ms', m.get('latency_median_ms', float('nan'))):.3f}"
        yield (*head, "yes" if m.get("search_reused") == 1.0 else "no", f"{cost:.1f}", *phases, f"{dp:.1f}",
               f"{sel:.1f}", int(m.get("search_states", 0)),
               int(m.get("search_transitions", 0)), int(m.get("search_stage_evaluations", 0)),
               int(m.get("search_measurements", 0)), int(m.get("search_parts_screened", 0)), *kernels(m),
               r.get("params", {}).get("layout_chosen_by", "-"), latency)
        if "plan_schedule_last_s" in m:  # runner.processes=N: the last process's preparation (a warm rerun)
            last = [f"{m[f'plan_{p}_last_s']:.1f}" if f"plan_{p}_last_s" in m else "-" for p in PHASES]
            yield (*head, f"{'yes' if m.get('search_reused_last') == 1.0 else 'no'} (process {int(m['processes'])})",
                   f"{m['optimization_cost_last_s']:.1f}", *last, *["-"] * (len(COLUMNS) - len(PHASES) - 7), latency)


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
