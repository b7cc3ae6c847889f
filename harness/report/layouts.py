"""How each study is tabulated and drawn (rows, columns, metric, plot): read by the tables and
by the sweep lookup (a study whose report combines all its sweeps)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import conf_dir


@dataclass(frozen=True)
class Layout:
    """How a study is tabulated and drawn."""

    rows: str = "model"  # the config key whose values are the rows
    metric: str = "latency"  # latency or throughput
    plot: str = "bars"  # bars, heatmap, scatter or lines
    cols: str = ""  # a config key for the columns; empty: the variant (label and varying options)
    per: str = ""  # one table per value of this key (or per combination of comma-separated keys)
    also: tuple[str, ...] = ()  # more metrics tabulated the same way (no speed-up)
    combine: bool = False  # the report of the study covers all its sweeps (one per machine), not the newest


def _load() -> dict[str, Layout]:
    """The studies' layouts from conf/report_layouts.yaml: data beside the study presets, so that a
    study built on one backend's option (specialization: ``backend.opt_batch``) keeps it out of the code."""
    from omegaconf import OmegaConf

    raw: dict[str, Any] = OmegaConf.to_container(OmegaConf.load(conf_dir() / "report_layouts.yaml"))  # type: ignore[assignment]
    out = {}
    for study, spec in (raw or {}).items():
        kwargs: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in (spec or {}).items()}
        out[study] = Layout(**kwargs)
    return out


LAYOUTS = _load()

#: how a table or plot names a key that is not a config key
KEY_NAMES = {"param:schedule_made_on": "schedule made on", "tag:backend_device": "GPU"}


def key_name(key: str) -> str:
    return KEY_NAMES.get(key, key)


METRICS = {"latency": ("latency_median_ms", "median latency (ms)"),
           "throughput": ("throughput_ips", "throughput (images/s)"),
           "cost": ("optimization_cost_s", "optimization cost (s)")}
