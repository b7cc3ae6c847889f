"""The benchmarking harness: config schema, plugins, one measurement protocol, clocks,
environment capture, tracking and process isolation.

    import harness
    record = harness.run({"model": {"name": "sample"}, "backend": {"name": "pytorch"}})
    record.status, record.metrics["latency_median_ms"]
"""

from .interrupts import quiet_while_starting

quiet_while_starting()  # `python -m harness`: a Ctrl-C during the imports below is one line

from .job import run, summary_line  # noqa: E402
from .records.record import Record  # noqa: E402

__all__ = ["Record", "run", "summary_line"]
