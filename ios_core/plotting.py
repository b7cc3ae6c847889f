"""matplotlib for plots written to files only (Agg), and the figure-to-text step every plot in
the project ends with. Plots are optional: without matplotlib, :func:`pyplot` returns None."""

from __future__ import annotations

import io
from typing import Any


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend, or None where it is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def render(fig: Any, fmt: str = "svg", dpi: int = 100) -> Any:
    """The figure as SVG text (``fmt="svg"``) or PNG bytes; the figure is closed."""
    buf: io.StringIO | io.BytesIO = io.StringIO() if fmt == "svg" else io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi, bbox_inches="tight")
    pyplot().close(fig)
    return buf.getvalue()
