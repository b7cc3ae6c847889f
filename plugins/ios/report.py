"""IOS's table in a sweep's report: the finalists its search timed back to back in one process
(the schedule kept, Greedy, Sequential), registered through the ``harness_report_tables`` hook."""

from __future__ import annotations

from harness.report.runs import Run
from harness.report.tables import Layout, Table, variant

SAME_RUN = ("selected", "dp", "greedy", "sequential")


def same_run_table(runs: list[Run], layout: Layout) -> Table | None:
    """IOS runs whose search timed its finalists back to back in one process: the schedule kept and
    the speed-up over Greedy and Sequential measured there. Separate jobs run in separate processes,
    whose latencies differ by a few percent for the same schedule, so these are the fair ratios."""
    timed = [(r, found) for r in runs
             if len(found := {k: v for k in SAME_RUN if (v := r.metric(f"search_whole_{k}_ms"))}) == len(SAME_RUN)]
    if not timed:
        return None
    cols = ["kept", "Greedy", "Sequential", "kept vs Greedy", "kept vs Sequential"]
    t = Table("IOS finalists timed back to back in the same process during the search (ms)", "run", [], cols,
              geomean=False)
    for run, ms in timed:
        opt = run.value("backend.opt_batch")  # 0 or absent: searched at the batch it runs at
        searched_at = opt if opt not in ("", "0") else run.value("batch")
        name = f"{run.value('model')} {variant(run, runs, Layout(cols='batch', per='backend.opt_batch'))}"
        name += f" (searched at bs{searched_at})" if len({r.value('batch') for r in runs}) > 1 else ""
        kept = run.metric("predicted_insitu_ms") or min(ms.values())  # the finalist the search kept
        t.rows.append(name)
        t.cells.update({(name, "kept"): kept, (name, "Greedy"): ms["greedy"], (name, "Sequential"): ms["sequential"],
                        (name, "kept vs Greedy"): f"{ms['greedy'] / kept:.2f}x",
                        (name, "kept vs Sequential"): f"{ms['sequential'] / kept:.2f}x"})
    return t
