"""The TASO backend: the IR as a TASO graph, optimized by TASO's substitution search, run on CUDA.

``prepare`` converts the graph (convert.py), optionally runs ``taso.optimize(graph, alpha,
budget)`` and logs TASO's own figures: its cost model's estimate (``cost()``, the sum of its
measured per-op times) before and after, and its own measured latency (``run_time()``, the
IOS paper's TASO number).

What the runner times is not TASO's runtime: TASO's Python API has no call that runs a
graph on given inputs and returns outputs. ``PyGraph.run_time()`` (python/taso/_cython/core.pyx)
is ``Graph::run`` (src/core/ops.cc), which maps every op, times 100 passes over uninitialised
inputs and returns milliseconds. So the graph TASO chose is exported with
``taso.export_onnx`` (repaired in export.py) and executed op for op by ONNX Runtime's CUDA
provider with ORT's own graph rewrites off; that session is timed and checked against the
reference. One exporter limit is known: it drops activations fused into convolutions. The
converter never fuses, but a TASO substitution that fuses conv + relu would export a conv
without its relu; the runner's correctness check then fails the run rather than report it.

Written against jiazhihao/TASO at f11782c (2021-03-31, the IOS paper's TASO v1.0 era) and
unverified until run against a real TASO build: TASO is not on PyPI and none is built here.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from harness.backend import Backend, BackendError, MissingDependency, Model, Prepared, store_dir
from harness.onnx_session import callables, output_to_numpy, session
from ios_core.ir import Graph

from .config import TasoConfig
from .convert import convert
from .export import export

INSTALL = ("TASO is not on PyPI: build it from https://github.com/jiazhihao/TASO as its INSTALL.md says "
           "(CUDA and cuDNN; in the checkout `mkdir build && cd build && cmake .. && sudo make install`, "
           "then `cd ../python && python setup.py install`) and export TASO_HOME=<the checkout>")
PROVIDER = "CUDAExecutionProvider"
ACTIVATIONS = ("Relu", "Sigmoid", "Tanh")
OP_LIST_LIMIT = 4192  # PyGraph.get_operator_list's fixed buffer (core.pyx); export_onnx reads the ops through it


def import_taso() -> Any:
    """The ``taso`` module, or MissingDependency with the build instructions in one line."""
    try:
        return importlib.import_module("taso")
    except ImportError as err:  # absent, or built without its runtime library on the loader path
        raise MissingDependency(f"backend 'taso' cannot import taso ({err}); {INSTALL}") from None


def taso_home_problem() -> str | None:
    """Why ``taso.optimize`` would abort the process: it asserts on a missing TASO_HOME and
    loads its substitution rules from $TASO_HOME/graph_subst.pb (Graph::optimize)."""
    home = os.environ.get("TASO_HOME", "")
    if not home:
        return "TASO_HOME is not set; TASO's optimizer reads $TASO_HOME/graph_subst.pb (export TASO_HOME=<checkout>)"
    if not (Path(home) / "graph_subst.pb").is_file():
        return f"TASO_HOME={home} has no graph_subst.pb; point it at the TASO checkout"
    return None


def op_counts(tg: Any) -> Counter[str]:
    """Operators of a TASO graph by ONNX type name (``get_operator_list`` skips inputs and weights)."""
    return Counter(str(tg.get_operator_type(op)) for op in tg.get_operator_list())


class Counting:
    """Forwards to TASO's graph builder, counting the operators made (inputs and weights aside)."""

    def __init__(self, graph: Any):
        self.graph, self.ops = graph, 0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.graph, name)
        if name in ("new_input", "new_weight"):
            return method

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.ops += 1
            return method(*args, **kwargs)
        return counted


def ort_session(model: Any, precision: str) -> Any:
    """An ONNX Runtime session on PROVIDER running ``model`` op for op (ORT's rewrites off)."""
    import onnxruntime as ort

    if PROVIDER not in ort.get_available_providers():
        raise BackendError(f"the taso backend runs TASO's graph with onnxruntime's {PROVIDER}, which "
                           f"onnxruntime {ort.__version__} here lacks: pip install onnxruntime-gpu")
    return session(model, PROVIDER, precision, level="disable")


class TasoBackend(Backend[TasoConfig]):
    name = "taso"
    times_in_prepare = True  # TASO's optimizer measures each operator on the GPU
    display_name = "TASO"
    runs = ("TASO's optimized graph (taso.optimize), run through its ONNX export by ONNX Runtime CUDA; "
            "unverified until run against a TASO build")
    config_class = TasoConfig
    devices = ("cuda",)
    requires = ("taso", "onnxruntime")
    install = "build TASO from source (github.com/jiazhihao/TASO, INSTALL.md) and pip install onnxruntime-gpu"
    cfg: TasoConfig

    @classmethod
    def check_installed(cls) -> None:
        if importlib.util.find_spec("taso") is None:
            raise MissingDependency(f"backend 'taso' needs TASO, which is not installed. {INSTALL}")
        if importlib.util.find_spec("onnxruntime") is None:
            raise MissingDependency("backend 'taso' runs TASO's graph with onnxruntime, which is not installed: "
                                    "pip install onnxruntime-gpu")

    @classmethod
    def not_ready(cls) -> str | None:
        return taso_home_problem()

    def prepare(self, model: Model, batch: int, device: str, precision: str) -> Prepared:
        graph = model.graph()  # the IR: this backend converts it node by node
        taso = import_taso()
        cfg = self.cfg
        if precision not in ("fp32", "tf32"):
            raise BackendError(f"TASO computes in float32; precision={precision} is not supported (use fp32 or tf32)")
        if cfg.optimize and (problem := taso_home_problem()):
            raise BackendError(f"backend.optimize=true needs TASO's rules: {problem}")
        metrics: dict[str, float] = {}
        tg, counts = self.taso_graph(taso, graph, batch, metrics)
        metrics["taso_run_time_ms"] = float(tg.run_time())  # TASO's own timing loop, once (it leaks its buffers)
        sess = ort_session(export(taso, tg, (batch, *graph.output_shape)), precision)
        infer, load = callables(sess, batch, graph.input_shape)
        return Prepared(infer=infer, load_input=load, to_numpy=output_to_numpy,
                        display_name="TASO" if cfg.optimize else "TASO-SEQ",
                        device_name=f"{device} (TASO graph on ONNX Runtime {PROVIDER})",
                        params={"taso_version": str(getattr(taso, "__version__", "unknown")),
                                "taso_executor": f"onnxruntime {PROVIDER}", "taso_alpha": cfg.alpha,
                                "taso_budget": cfg.budget, "taso_optimize": cfg.optimize},
                        metrics=metrics,
                        artifacts={"taso_ops.json": json.dumps({k: dict(sorted(v.items())) for k, v in counts.items()},
                                                               indent=1)})

    def taso_graph(self, taso: Any, graph: Graph, batch: int, metrics: dict[str, float]
                   ) -> tuple[Any, dict[str, Counter[str]]]:
        """The converted graph, searched by ``taso.optimize`` when configured, with its operator
        counts before and after; TASO's cost estimates and the times taken go into ``metrics``."""
        cfg = self.cfg
        t = time.perf_counter()
        tg = taso.new_graph()
        counting = Counting(tg)
        convert(graph, counting, batch)
        metrics["taso_convert_s"] = time.perf_counter() - t
        # the search may grow a graph to twice its operators (Graph::optimize's 2 * maxNumOps)
        if counting.ops * (2 if cfg.optimize else 1) > OP_LIST_LIMIT:
            raise BackendError(f"{graph.name} is {counting.ops} TASO operators; TASO's get_operator_list, which its "
                               f"export_onnx uses, holds {OP_LIST_LIMIT} (a fixed buffer in core.pyx)"
                               + (", and the search may double them" if cfg.optimize else ""))
        metrics["taso_cost_ms_initial"] = float(tg.cost())
        counts = {"initial": op_counts(tg)}
        if cfg.optimize:
            work = store_dir(cfg.store) / "taso"
            work.mkdir(parents=True, exist_ok=True)
            os.environ["TASO_HOME"] = str(Path(os.environ["TASO_HOME"]).resolve())  # still found after chdir
            t = time.perf_counter()
            with contextlib.chdir(work):  # Graph::optimize writes timer.txt into the working directory
                tg = taso.optimize(tg, alpha=cfg.alpha, budget=cfg.budget)
            metrics["taso_optimize_s"] = time.perf_counter() - t
            counts["optimized"] = op_counts(tg)
        final = counts["optimized" if cfg.optimize else "initial"]
        metrics.update(taso_cost_ms=float(tg.cost()), taso_ops=float(sum(final.values())),
                       taso_activations_initial=float(sum(counts["initial"][a] for a in ACTIVATIONS)),
                       taso_activations=float(sum(final[a] for a in ACTIVATIONS)))
        return tg, counts
