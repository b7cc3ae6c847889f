"""IOS backend: the inter-operator scheduler (ios_core's DP) and its stream runtime."""

from harness.hookspecs import hookimpl

from .backend import IosBackend
from .config import IosConfig
from .report import same_run_table


@hookimpl
def harness_backends():
    return [IosBackend]


@hookimpl
def harness_report_tables(runs, layout):
    table = same_run_table(runs, layout)
    return [table] if table is not None else []


__all__ = ["IosBackend", "IosConfig"]
