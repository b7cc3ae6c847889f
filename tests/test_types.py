"""The library type-checks clean (mypy with the config in pyproject.toml), so a change that
breaks a typed contract (a backend's config, a record field) fails here, not at run time."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_mypy_reports_no_errors():
    pytest.importorskip("mypy", reason="mypy is not installed (the dev extra has it)")
    res = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary"], cwd=REPO, capture_output=True,
                         text=True, timeout=900)
    errors = [line for line in res.stdout.splitlines() if ": error:" in line]
    assert res.returncode == 0 and not errors, "\n".join(errors[:40]) or res.stderr[-2000:]
