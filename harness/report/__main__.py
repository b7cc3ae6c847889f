"""``python -m harness.report <study or sweep id>``: write a sweep's report and log it to MLflow."""

from __future__ import annotations

import argparse
import sys

from ..config import ConfigError, TrackingConfig
from .build import build_report
from .compare import compare, parse_threshold
from .subjects import listing


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.report",
                                 description="Tables, plots and an HTML page of a sweep: by sweep id, or the newest "
                                             "sweep of a study (schedules, frameworks, utilization, specialization, "
                                             "prune, batchsize, autotvm, devices).")
    ap.add_argument("name", nargs="*", help="a study (experiment preset) name or a sweep id; several: one "
                                            "report of them together (the same study run on two GPUs); none: "
                                            "the recent sweeps and runs, to pick from")
    ap.add_argument("--results-dir", default=TrackingConfig.results_dir)
    ap.add_argument("--out", default=None, help="folder to write (default: <results-dir>/reports/<study>-<id>/)")
    ap.add_argument("--baseline", default=None,
                    help="the override of the speed-up baseline, e.g. backend:pytorch (default: the sweep's)")
    ap.add_argument("--no-mlflow", action="store_true", help="do not log the report to the sweep's parent run")
    ap.add_argument("--compare", nargs=2, metavar=("BASELINE", "CANDIDATE"),
                    help="two sweeps (ids or study names) or single runs (record ids, a prefix of 6+ characters, "
                         "MLflow run ids) or latest: their shared jobs side by side, the speed-up of the candidate "
                         "with its CI and whether it is beyond the noise; writes compare.csv with --out")
    ap.add_argument("--fail-on-slowdown", metavar="PCT", default=None,
                    help="with --compare: exit 1 when a job of the candidate is slower than the baseline beyond the "
                         "noise (both CIs) by more than PCT (e.g. 5%%): a gate for CI jobs")
    args = ap.parse_args(argv)
    if args.compare and args.name:
        ap.error("name a study or sweep id (a report), or --compare BASELINE CANDIDATE, not both")
    if not args.compare and not args.name:  # what there is to report or compare
        print("\n".join(listing(args.results_dir)))
        return 0
    if args.compare:
        return _compare(args.results_dir, args.compare[0], args.compare[1], args.out, args.fail_on_slowdown)
    if args.fail_on_slowdown is not None:
        ap.error("--fail-on-slowdown goes with --compare BASELINE CANDIDATE")
    try:
        folder = build_report(args.name, args.results_dir, args.out, args.baseline, log=not args.no_mlflow)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"report: {folder / 'index.html'}")
    print((folder / "report.md").read_text().split("### Summary lines")[0])
    return 0


def _compare(results_dir: str, baseline: str, candidate: str, out: str | None, fail_on: str | None) -> int:
    from pathlib import Path

    try:
        threshold = parse_threshold(fail_on) if fail_on is not None else None
        result = compare(results_dir, baseline, candidate)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(result.table.markdown())
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "compare.csv").write_text(result.table.csv())
        print(f"written: {Path(out) / 'compare.csv'}")
    if threshold is None:
        return 0
    worse = result.regressions(threshold)
    for job, slowdown in worse.items():
        print(f"slower: {job}: {100 * slowdown:.1f}% beyond the noise (threshold {100 * threshold:g}%)",
              file=sys.stderr)
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
