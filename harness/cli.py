"""``python -m harness``: a thin Hydra layer over :func:`harness.run`.

    python -m harness model=inception_v3 backend=pytorch batch=1
    python -m harness -m batch=1,8 backend=pytorch
    python -m harness --list-backends
    python -m harness --debug ...      (full tracebacks)
"""

from __future__ import annotations

import os
import sys
from typing import Any

from .config import REPO_ROOT, BenchConfig, ConfigError

_failures: list[str] = []
GROUPS = ("model", "backend", "device", "runner", "tracking", "experiment")


def _print_backends() -> None:
    from rich.console import Console
    from rich.table import Table

    from .plugins import backend_table

    table = Table(title="harness backends")
    for col in ("backend", "devices", "status", "extra"):
        table.add_column(col)
    for row in backend_table():
        table.add_row(*row)
    Console().print(table)


def _task(cfg: Any) -> str:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from ios_core.ir import GraphError

    from .backend import BackendError
    from .callbacks import sweep_info_from_dir
    from .runner import run

    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    sweep = sweep_info_from_dir(hc.sweep.dir) if multirun else None
    try:
        record = run(cfg, sweep=sweep)
    except (ConfigError, GraphError, BackendError) as exc:
        if os.environ.get("HARNESS_DEBUG"):
            raise
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    if record["status"] != "FINISHED":
        _failures.append(record["summary"])
        if not multirun:
            sys.exit(1)
    return record["status"]


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--debug" in argv:
        argv.remove("--debug")
        os.environ["HYDRA_FULL_ERROR"] = "1"
        os.environ["HARNESS_DEBUG"] = "1"
    from .plugins import ALIASES

    # `backend=null` would reach Hydra as "no value": old names are rewritten to the new ones
    argv = [f"backend={ALIASES[a.split('=', 1)[1]]}" if a.startswith("backend=") and a.split("=", 1)[1] in ALIASES
            else a for a in argv]
    for arg in argv:  # a config group takes a plain name: never a path out of conf/
        key, _, value = arg.lstrip("+~").partition("=")
        if key in GROUPS and ("/" in value or ".." in value or "\\" in value):
            print(f"error: {key}={value!r} is not a {key} name: use a plain name (see conf/{key}/), "
                  f"not a path", file=sys.stderr)
            sys.exit(2)
        if key == "tracking.results_dir":  # Hydra writes its own logs there before any check of ours
            from .runner import check_results_dir
            try:
                check_results_dir(value)
            except ConfigError as exc:
                print(f"error: {exc}", file=sys.stderr)
                sys.exit(2)
    if "--list-backends" in argv:
        _print_backends()
        return
    import hydra
    from hydra.core.config_store import ConfigStore

    from .plugins import register_configs

    ConfigStore.instance().store(name="bench_schema", node=BenchConfig)
    register_configs()
    sys.argv = [sys.argv[0], *argv]
    app = hydra.main(version_base="1.3", config_path=str(REPO_ROOT / "conf"), config_name="config")(_task)
    app()
    if _failures:
        print(f"{len(_failures)} run(s) failed", file=sys.stderr)
        sys.exit(1)
