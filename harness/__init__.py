"""The benchmarking harness: config schema, plugins, one measurement protocol, clocks,
environment capture, tracking and process isolation.

    import harness
    record = harness.run({"model": {"name": "sample"}, "backend": {"name": "pytorch"}})
    record.status, record.metrics["latency_median_ms"]
"""

from .job import run, summary_line
from .records.record import Record

__all__ = ["Record", "run", "summary_line"]
