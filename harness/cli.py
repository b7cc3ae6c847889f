"""``python -m harness``: a thin Hydra layer over :func:`harness.run`.

    python -m harness model=inception_v3 backend=pytorch batch=1
    python -m harness -m batch=1,8 backend=pytorch
    python -m harness --list-backends
    python -m harness --list-models [timm|torchvision] [PATTERN]
    python -m harness --debug ...      (full tracebacks)
"""

from __future__ import annotations

import fnmatch
import os
import signal
import sys
from typing import Any

from hydra_plugins.harness_loadaware.loadaware_launcher import LoadAwareLauncher
from hydra_plugins.harness_slurm import slurm_launcher  # hydra/launcher=submitit_slurm (the submitit extra)
from ios_core.errors import UserError
from ios_core.models import MODELS

from .backend import BackendError
from .config import ConfigError, conf_dir, hydra_error_line
from .context import launched_apart
from .install import fit
from .interrupts import ending, outside_a_run, started
from .job import run
from .lifecycle import THIS
from .machine.environment import resolve_device
from .messages import one_line_warnings
from .models import zoos
from .multirun.callbacks import job_sweep_info
from .plugins import BROKEN, aliases, backend_table, check_runnable, get_backend, register_configs
from .records import sweeps
from .records.store import StoreError
from .spec import check_results_dir

GROUPS = ("model", "backend", "device", "runner", "tracking", "experiment")


def _print_backends() -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="harness backends")
    for col in ("backend", "devices", "status", "install", "ran on a GPU", "runs"):
        table.add_column(col)
    for row in backend_table():  # text, not markup: "pip install -e '.[onnx]'" keeps its brackets
        table.add_row(*(escape(cell) for cell in row))
    Console().print(table)


def _task(cfg: Any) -> str:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    sweep: dict[str, Any] | None = None
    if multirun:
        sweep = {**job_sweep_info(hc.sweep.dir), "job_num": hc.job.num,
                 "job_overrides": sweeps.job_overrides(list(hc.overrides.task)),
                 "swept": sorted(str(k) for k in (hc.sweeper.get("params") or {}))}  # a preset's sweep
    try:
        if sweep is None:  # one run: a missing library is one line before any work
            get_backend(str(cfg.backend.name)).check_installed()
        elif (why := _unrunnable(cfg)) is not None:  # a sweep skips it in one line; its report says why
            job = [o for o in sweep["job_overrides"] if not o.lstrip("+~").startswith(("experiment=", "tracking."))]
            print(f"skipped: {' '.join(job)}: {why}", file=sys.stderr, flush=True)
            sweeps.record_unmeasured_job(str(cfg.tracking.results_dir), sweep, f"{type(why).__name__}: {why}",
                                      status="SKIPPED", label=_label(cfg))
            return "SKIPPED"
        record = run(cfg, sweep=sweep, background=sweep is None)
    except UserError as exc:  # bad input of any kind: one line, exit 2
        if os.environ.get("HARNESS_DEBUG"):
            raise
        print(f"error: {fit(str(exc))}", file=sys.stderr)
        if sweep is None or isinstance(exc, StoreError):  # a single run; a store to fix first (records kept)
            sys.exit(2)
        # one bad combination does not end the sweep: it is recorded FAILED
        sweeps.record_unmeasured_job(str(cfg.tracking.results_dir), sweep, f"{type(exc).__name__}: {exc}")
        THIS.failures.append(f"{' '.join(sweep['job_overrides'])}: {exc}")
        return "FAILED"
    if record.stopped_by is not None and not launched_apart():  # its record is kept and its sweep ended KILLED
        ending()
        raise SystemExit(128 + record.stopped_by)  # (a Submitit job returns it: its sweep is another process's)
    if record.status != "FINISHED":
        THIS.failures.append(record.summary or record.status)
        if not multirun:
            sys.exit(1)
    return record.status


def _unrunnable(cfg: Any) -> Exception | None:
    """Why this job's backend cannot run here (library, device, build feature), or None."""
    try:
        kind = cfg.device.type
        device = resolve_device(str(getattr(kind, "value", kind)))
    except Exception:  # no such device here: the run refuses it with its own line
        return None
    try:
        check_runnable(str(cfg.backend.name), device)
    except UserError as exc:
        return exc
    return None


def _label(cfg: Any) -> str:
    """The variant's name (TVM-cuDNN) for a job that does not run, so its report column is the usual one."""
    cls = get_backend(str(cfg.backend.name))
    try:
        return cls.label_of(cls.config_class.from_mapping(cfg.backend))
    except Exception:
        return cls.display_name or cls.name


def _register_launcher() -> None:
    """Make ``hydra/launcher=loadaware`` known, and ``submitit_slurm`` the harness's (which waits for every
    job). Hydra discovers plugins by listing the ``hydra_plugins`` folders, which misses an editable
    install's; registering by hand works for every install."""
    from hydra.core.plugins import Plugins

    Plugins.instance().register(LoadAwareLauncher)
    slurm_launcher.register()


def _checked_argv(argv: list[str]) -> list[str]:
    """The arguments with old backend names rewritten; a group value that is a path, or a results
    folder that cannot be written, ends here in one line (exit 2) before Hydra writes anything."""
    try:
        old = aliases()
    except BackendError:  # a plugin that cannot be loaded: said in one line later
        old = {}
    # `backend=null` would reach Hydra as "no value": old names are rewritten to the new ones
    argv = [f"backend={old[a.split('=', 1)[1]]}" if a.startswith("backend=") and a.split("=", 1)[1] in old
            else a for a in argv]
    for arg in argv:  # a config group takes a plain name: never a path out of conf/
        key, _, value = arg.lstrip("+~").partition("=")
        broken = [BROKEN[v].message(v) for v in value.split(",") if key == "backend" and v in BROKEN]
        if broken:  # asked for by name: why its plugin did not load (the other backends are unaffected)
            print(f"error: {broken[0]}", file=sys.stderr)
            sys.exit(2)
        if key in GROUPS and ("/" in value or ".." in value or "\\" in value):
            print(f"error: {key}={value!r} is not a {key} name: use a plain name (see conf/{key}/), "
                  f"not a path", file=sys.stderr)
            sys.exit(2)
        if key == "tracking.results_dir":  # Hydra writes its own logs there before any check of ours
            try:
                check_results_dir(value)
            except ConfigError as exc:
                print(f"error: {exc}", file=sys.stderr)
                sys.exit(2)
    return argv


def main(argv: list[str] | None = None) -> None:
    started()
    if "--debug" not in (sys.argv[1:] if argv is None else argv):
        one_line_warnings()
    try:
        _main(argv)
    except KeyboardInterrupt as exc:  # Ctrl-C outside a run (a run records itself KILLED and exits 130 itself)
        outside_a_run(THIS.sweep, getattr(exc, "signum", signal.SIGINT))


def _main(argv: list[str] | None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--debug" in argv:
        argv.remove("--debug")
        os.environ["HYDRA_FULL_ERROR"] = "1"
        os.environ["HARNESS_DEBUG"] = "1"
    argv = _checked_argv(argv)
    import hydra

    try:
        if "--list-backends" in argv:
            _print_backends()
            return
        if "--list-models" in argv:
            _print_models(argv[argv.index("--list-models") + 1:])
            return
        register_configs()
        _register_launcher()
    except UserError as exc:  # a plugin that cannot be loaded, a zoo that is not installed
        if os.environ.get("HARNESS_DEBUG"):
            raise
        print(f"error: {fit(str(exc))}", file=sys.stderr)
        sys.exit(2)
    sys.argv = [sys.argv[0], *argv]
    app = hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="config")(_task)
    debug = bool(os.environ.get("HARNESS_DEBUG"))
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra raises instead of printing its own report
    try:
        app()
    except KeyboardInterrupt as exc:  # before `finally` would end the sweep FAILED
        outside_a_run(THIS.sweep, getattr(exc, "signum", signal.SIGINT))
    except Exception as exc:  # composition errors (typos, bad values): one line, exit 2
        if debug:
            raise
        print(f"error: {hydra_error_line(exc)} (--debug for the full traceback)", file=sys.stderr)
        sys.exit(2)
    finally:  # a sweep Hydra abandoned before its end callback (a bad swept value) is ended FAILED
        THIS.end_unfinished()
    # jobs a launcher ran in other processes (Submitit) failed there: the sweep's records count them
    failed = THIS.failed()
    if failed:
        print(f"{failed} run(s) failed", file=sys.stderr)
        sys.exit(1)


def _print_models(args: list[str]) -> None:
    """The zoo's models and the sources; with a source (timm, torchvision) its names, filtered by a glob."""
    if not args:
        print("zoo (model=NAME):", ", ".join(m for m in MODELS if m != "onnx"))
        print("sources: model=timm model.arch=NAME | model=torchvision model.arch=NAME | model=onnx model.path=FILE"
              " | model=module model.target=package.module:factory")
        print("names: python -m harness --list-models timm '*vit*'  (or torchvision)")
        return
    zoo, pattern = args[0], (args[1] if len(args) > 1 else "*")
    if zoo not in zoos.LISTING:
        raise ConfigError(f"--list-models {zoo}: choose timm or torchvision")
    names = [n for n in zoos.architectures(zoo) if fnmatch.fnmatch(n, pattern)]
    print("\n".join(names) if names else f"no {zoo} model matches {pattern!r}")
