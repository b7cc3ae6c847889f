"""An external plugin of the sweep hook (named in HARNESS_PLUGINS by a test): writes what it was told, and the
sweep's state on disk at that moment, as JSON lines to the file in SWEEP_OBSERVER_LOG."""

import json
import os

from harness.hookspecs import hookimpl
from harness.records import sweeps


@hookimpl
def harness_sweep_finished(sweep):
    state = sweeps.read_state(sweep.results_dir, sweep.sweep_id) or {}
    seen = {"sweep_id": sweep.sweep_id, "ended": sweep.sweep.ended, "failed": sweep.sweep.failed,
            "status": state.get("status"), "baseline": sweep.baseline, "tracking": dict(sweep.tracking)}
    with open(os.environ["SWEEP_OBSERVER_LOG"], "a") as f:
        f.write(json.dumps(seen) + "\n")
