"""Study reports: a sweep's runs as the paper's tables and plots, in one folder and one HTML page.

    python -m harness.report schedules            # the newest sweep of that study (preset)
    python -m harness.report 890bdc27605e         # a sweep by id

The runs come from the sweep's JSON records under ``results/records/`` or, for a sweep that
ran elsewhere and was uploaded, from MLflow. See :mod:`harness.report.build`.
"""

from .build import build_report
from .runs import Run, find_sweep, load_runs

__all__ = ["Run", "build_report", "find_sweep", "load_runs"]
