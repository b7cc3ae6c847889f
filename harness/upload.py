"""``python -m harness.upload``: send pending JSON records to MLflow.

Records stay in results/records/pending/ when the store was down or MLflow was not
installed (the lent GPU machine); copy that folder home and run this. It also closes the
parent runs of sweeps that ended (or whose process died, here or on the machine the folder
came from) while the store was down, with their own status and end time. Killed at any
moment, running it again completes what it started: one MLflow run per record.

    python -m harness.upload [--results-dir DIR] [--uri URI] [--experiment NAME]

A sweep hands its end batch to ``--sweep ID`` in the background (single runs: ``--only RUN_ID``); what such an
upload could not do is in records/upload.log, and the next run prints it.
"""

from __future__ import annotations

import argparse
import json
import sys

from .config import TrackingConfig
from .messages import one_line_warnings
from .multirun import sweep_table
from .records import background, faults, sweeps
from .records.record import Record
from .records.store import StoreError
from .records.tracking import Tracker, default_uri, deliver, mlflow_available, pending_records


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.upload", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results-dir", default=TrackingConfig.results_dir)
    ap.add_argument("--uri", default=None, help="override the store recorded in each record")
    ap.add_argument("--experiment", default=None)
    ap.add_argument("--only", default=None, metavar="RUN_ID",
                    help="send this one pending record and nothing else (what a single run's background upload "
                         "does); sweeps are left as they are")
    ap.add_argument("--sweep", default=None, metavar="SWEEP_ID",
                    help="send this sweep's end batch: its pending records, the parent runs of ended sweeps, its "
                         "speed-ups (what a sweep's background upload does)")
    ap.add_argument("--close-stale", action=argparse.BooleanOptionalAction, default=True,
                    help="end as KILLED the sweeps still marked RUNNING by another machine (results copied home "
                         "from a machine that was taken away mid-sweep; default). --no-close-stale leaves them "
                         "open, for a results folder shared with a machine whose sweep still runs")
    args = ap.parse_args(argv)
    one_line_warnings()
    if not mlflow_available():
        print("error: MLflow is not installed here: pip install -e '.[mlflow]'", file=sys.stderr)
        return 2
    try:
        if args.sweep is not None:  # a sweep's background upload: the lock is inherited too
            sent, total = sweep_table.send(args.results_dir, args.sweep)
            print(f"uploaded {sent} of {total} pending record(s) (sweep {args.sweep})")
            return 0 if sent == total else 1
        if args.only is not None:  # a run's background upload: the folder's lock is already its own (inherited)
            return _upload(args)
        with background.held(args.results_dir):  # never beside a background upload of the same record
            return _upload(args)
    except StoreError as exc:  # a half-made store: nothing sent, the records stay pending
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a background upload's failure is one line the next run shows
        if args.only is None and args.sweep is None:
            raise
        what, kept, them = ((f"record {args.only}", "it stays", "it") if args.only is not None
                            else (f"sweep {args.sweep}'s records", "they stay", "them"))
        print(f"error: the upload of {what} failed ({type(exc).__name__}: {exc}); {kept} in "
              f"{args.results_dir}/records/pending: `python -m harness.upload` sends {them}",
              file=sys.stderr)
        return 1


def _upload(args: argparse.Namespace) -> int:
    paths = pending_records(args.results_dir)
    if args.only is not None:
        paths = [p for p in paths if p.stem == args.only]
    sent = 0
    trackers: dict[tuple[str, str], Tracker] = {}  # each store opened once for all its records
    for path in paths:
        record = Record.from_dict(json.loads(path.read_text()))
        tr = record.tracking
        tr["enabled"] = True
        made_in = record.config.get("tracking", {}).get("results_dir")
        if made_in and tr.get("uri") == default_uri(made_in):  # older records: the default store where they
            tr["uri"] = ""  # were made, another machine's path; they go to the store beside them here
        if args.uri:
            tr["uri"] = args.uri
        if args.experiment:
            tr["experiment"] = args.experiment
        if deliver(record, args.results_dir, trackers):
            sent += 1
    if args.only is not None:
        print(f"uploaded {sent} of {len(paths)} pending record(s) ({args.only})")
        return 0 if sent == len(paths) else 1
    reaped = sweeps.reap(args.results_dir, other_hosts=args.close_stale)  # sweeps whose process died: KILLED
    faults.point("upload.reaped")
    closed = sweeps.close_parents(args.results_dir, args.uri, args.experiment, strict=True)
    off = sum(sweeps.untracked(state) for state in sweeps.states(args.results_dir))
    print(f"uploaded {sent} of {len(paths)} pending record(s)"
          + (f"; closed {closed} sweep parent run(s)" if closed else "")
          + (f" ({len(reaped)} sweep(s) whose process had died marked KILLED)" if reaped else "")
          + (f"; skipped {off} sweep(s) run with tracking=off (no MLflow for them)" if off else ""))
    return 0 if sent == len(paths) else 1


if __name__ == "__main__":
    sys.exit(main())
