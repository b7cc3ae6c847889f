"""``python -m harness --help``: a Hydra help template built from the schema and the loaded
plugins, so every backend's options appear with their defaults and one line each (the
trailing comment of the dataclass field that declares it)."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import typing
from typing import TYPE_CHECKING, Any

from .config import BackendConfig, BenchConfig, DeviceConfig, ModelConfig, RunnerConfig, SweepConfig, TrackingConfig

if TYPE_CHECKING:
    from .backend import Backend

FIELD = re.compile(r"^\s+(\w+):[^=#]*=[^#]*?(?:#\s*(.*))?$")
BLOCK = re.compile(r"^\s+#:?\s?(.*)$")  # a comment above a field (``#:`` or ``#``), when it has no trailing one

HEAD = """harness: the same CNNs on many inference backends, one measurement protocol, MLflow (IOS is the flagship).

  python -m harness [key=value ...]              one measurement (defaults: squeezenet, pytorch, batch 1)
  python -m harness -m batch=1,16 backend=ios,pytorch    a sweep: resumable, one table at the end
  python -m harness -m hydra/launcher=loadaware ...   jobs at once; each GPU measures for one job at a time
  python -m harness -m +experiment=schedules     a study of the IOS paper (see conf/experiment/)
  python -m harness.report schedules             that study's tables, plots and HTML page
  python -m harness.report --compare A B         two sweeps, studies or runs, with CIs and a verdict
  python -m harness --list-backends              which backends can run on this machine, and why not
  python -m harness --list-models [timm|torchvision] [PATTERN]    the zoo's models; a source's names
  python -m harness --debug ...                  full tracebacks instead of one-line errors
  python -m harness.upload                       send records kept while the MLflow store was down

Config groups (group=choice):
$APP_CONFIG_GROUPS
"""

TAIL = """
Shell completion (bash): eval "$(ios-harness -sc install=bash)"  (the ios-harness script comes
with the package; zsh and fish: install=zsh, install=fish).
Hydra's own flags: python -m harness --hydra-help
"""


def comments(cls: type) -> dict[str, str]:
    """Each field's description in a dataclass's source, by field name: its trailing comment, else the
    first sentence of the comment block above it."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            lines = inspect.getsource(klass).splitlines()
        except (OSError, TypeError):
            continue
        block: list[str] = []
        for line in lines:
            if b := BLOCK.match(line):
                block.append(b.group(1).strip())
                continue
            m = FIELD.match(line)
            if m and (m.group(2) or block):
                out[m.group(1)] = (m.group(2) or _first_sentence(" ".join(block))).strip()
            block = []
    return out


def _first_sentence(text: str, width: int = 110) -> str:
    """The text up to its first full stop or colon (a description's gist), cut at ``width``."""
    gist = re.split(r"(?<=[.:])\s", text, maxsplit=1)[0].rstrip(".:")
    return gist if len(gist) <= width else gist[:width - 3].rsplit(" ", 1)[0] + "..."


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        v = f.default
    elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        v = f.default_factory()  # type: ignore[misc]
    else:
        return "(required)"
    return getattr(v, "value", v)


def options(cls: type, prefix: str, skip: tuple[str, ...] = ("name",)) -> list[str]:
    notes = comments(cls)
    choices = _choices(cls)
    rows = []
    for f in dataclasses.fields(cls):
        if f.name in skip or f.name in ("model", "backend") or (
                f.default_factory is not dataclasses.MISSING and dataclasses.is_dataclass(f.default_factory)):
            continue  # groups: listed on their own
        text = f"  {prefix}{f.name}={_default(f)}"
        note = notes.get(f.name, "")
        if f.name in choices and choices[f.name] not in note:
            note = f"{choices[f.name]}{'; ' + note if note else ''}"
        rows.append(f"{text:<44} {note}".rstrip())
    return rows


def _choices(cls: type) -> dict[str, str]:
    """The choices of each Enum field (``fp32, tf32, fp16, bf16``)."""
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):
        return {}
    return {name: ", ".join(str(m.value) for m in kind) for name, kind in hints.items()
            if isinstance(kind, type) and issubclass(kind, enum.Enum)}


def template(backends: dict[str, type[Backend]]) -> str:
    """Hydra's --help text: the options of the harness and of each backend (``backends``: name ->
    backend class, as :func:`harness.plugins.backends` gives them)."""
    parts = [HEAD, "Top-level options:"]
    parts += options(BenchConfig, "")
    groups: tuple[tuple[str, type], ...] = (("model", ModelConfig), ("runner", RunnerConfig), ("device", DeviceConfig),
                                            ("tracking", TrackingConfig), ("sweep", SweepConfig))
    for name, group in groups:
        parts += ["", f"{name}.* :"] + options(group, f"{name}.")
    parts += ["", "Backend options (backend=<name> backend.<option>=value), every backend's:"]
    common = tuple(f.name for f in dataclasses.fields(BackendConfig))
    parts += options(BackendConfig, "backend.")
    for name, cls in backends.items():
        doc = cls.runs or (" ".join((inspect.getdoc(cls) or "").split()).split(". ")[0] if cls.__doc__ else "")
        parts += ["", f"backend={name}" + (f"    {doc}" if doc else "")] + options(cls.config_class, "backend.", common)
    text = "\n".join(parts) + "\n" + TAIL
    return text.replace("$", "$$").replace("$$APP_CONFIG_GROUPS", "$APP_CONFIG_GROUPS")  # string.Template
