"""Install hints that fit how this package was installed: the messages say ``pip install -e '.[extra]'`` (a
checkout, the README's way); where the package came from a wheel or an index that command means nothing, and
the hint names the package instead."""

from __future__ import annotations

import re
from functools import cache

DIST = "ios-harness"
_EDITABLE_EXTRA = re.compile(r"pip install -e '\.\[([\w,-]+)\]'")


@cache
def editable() -> bool:
    """Whether the harness runs from a checkout (an editable install, or the source tree on the path) rather than
    from a wheel unpacked into site-packages."""
    from pathlib import Path

    parts = Path(__file__).resolve().parts
    return "site-packages" not in parts and "dist-packages" not in parts


def fit(text: str) -> str:
    """``text`` with each ``pip install -e '.[x]'`` as this install needs it."""
    return text if editable() else _EDITABLE_EXTRA.sub(lambda m: f"pip install '{DIST}[{m.group(1)}]'", text)
