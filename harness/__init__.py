"""The benchmarking harness: config schema, plugins, one measurement protocol, clocks,
environment capture, tracking and process isolation.

    import harness
    record = harness.run({"model": {"name": "sample"}, "backend": {"name": "pytorch"}})
"""

from .job import run, summary_line

__all__ = ["run", "summary_line"]
