"""Hydra callback: create the sweep's parent MLflow run once at sweep start (parallel
jobs would race otherwise) and close it at the end. Cleanup that must survive Ctrl-C
(clock reset, records) lives in our own handlers, not here."""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from .tracking import Tracker, default_uri, mlflow_available


def sweep_info_from_dir(sweep_dir: str) -> dict[str, str]:
    path = str(Path(sweep_dir).resolve())
    return {"sweep_id": hashlib.sha1(path.encode()).hexdigest()[:12], "sweep_name": f"sweep {Path(path).name}"}


def _tracker(config: Any) -> Tracker | None:
    tr = config.tracking
    if not tr.enabled or not mlflow_available():
        return None
    return Tracker(tr.uri or default_uri(tr.results_dir), tr.experiment)


class SweepCallback(Callback):
    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        self.info = sweep_info_from_dir(config.hydra.sweep.dir)
        self.parent = None
        try:
            tracker = _tracker(config)
            if tracker is not None:
                self.parent = (tracker, tracker.parent_run(self.info["sweep_id"], self.info["sweep_name"]))
        except Exception as exc:  # store down: jobs keep records; upload creates the parent later
            warnings.warn(f"could not create the sweep's parent run ({str(exc).splitlines()[0][:200]})",
                          stacklevel=2)

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        if self.parent is not None:
            try:
                self.parent[0].finish_parent(self.parent[1])
            except Exception:  # nothing is lost: children and records are already stored
                pass
