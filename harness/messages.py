"""How the CLI's warnings read: one line, ``warning: <what and what to do>``, as its errors do, instead of Python's
``file.py:114: UserWarning: ...`` and the source line under it (``--debug`` keeps Python's form)."""

from __future__ import annotations

import os
import warnings
from typing import Any


def _one_line(message: Any, category: type[Warning], filename: str, lineno: int, line: str | None = None) -> str:
    kind = "" if category is UserWarning else f" ({category.__name__})"
    return f"warning: {message}{kind}\n"


def one_line_warnings() -> None:
    """Every warning of this process as one line (the CLI and its measuring children); nothing under --debug."""
    if not os.environ.get("HARNESS_DEBUG"):
        warnings.formatwarning = _one_line
