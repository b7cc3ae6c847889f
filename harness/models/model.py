"""A model of one run as its native forms: the ``nn.Module`` (where the source is one), the ONNX model (the
user's file, or exported from the module) and ios_core's IR (imported from the ONNX model, or built by the zoo).
Each is made on first use and kept for the run, a failure too (said again, not retried); the float64
reference comes from the source."""

from __future__ import annotations

import copy
import hashlib
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ios_core.errors import UserError
from ios_core.inputs import seeded_array
from ios_core.interpreters import reference_forward
from ios_core.ir import Graph
from ios_core.models import build_model

from . import onnx_io, rounding, zoos
from .errors import FormError
from .source import ModelSource

#: the forms a backend may take (``Backend.forms``): the torch module, the ONNX model, ios_core's IR
FORMS = ("module", "onnx", "graph")
FORM_NAMES = {"module": "a torch nn.Module", "onnx": "an ONNX model", "graph": "ios_core's IR"}


class Model:
    """The run's model: ``module()`` (a fresh float32 CPU copy each call: backends move and cast it),
    ``onnx()`` (an ``onnx.ModelProto`` for the run's batch), ``graph()`` (an :class:`ios_core.ir.Graph`);
    ``reference(x)`` the float64 output; ``input_shape`` (C, H, W)."""

    def __init__(self, source: ModelSource, batch: int, seed: int = 0):
        self.source, self.batch, self.seed = source, batch, seed
        self.seconds: dict[str, float] = {}  # how long each form took to make
        self._made: dict[str, Any] = {}
        self._failed: dict[str, str] = {}
        self._shape: tuple[int, int, int] | None = None
        self._reference: tuple[str, Callable[[np.ndarray], np.ndarray]] | None = None
        self._in_precision: dict[str, Callable[[np.ndarray], np.ndarray]] = {}

    @classmethod
    def from_graph(cls, graph: Graph, batch: int = 1) -> Model:
        """A model given as ios_core's IR (a graph built or imported in Python): its other forms come from it."""
        model = cls(ModelSource("zoo", graph.name), batch)
        model._made["graph"] = graph
        return model

    @property
    def name(self) -> str:
        return self.source.label

    def __repr__(self) -> str:
        made = ", ".join(self._made) or "no form yet"
        return f"Model({self.name}, batch {self.batch}: {made})"

    # -- the forms ---------------------------------------------------------------------------------
    def module(self) -> Any:
        make = self._source_module if self.source.is_module else self._graph_module  # else the IR as a module
        return copy.deepcopy(self._form("module", make))

    def onnx(self) -> Any:
        return self._form("onnx", self._make_onnx)

    def graph(self) -> Graph:
        return self._form("graph", self._make_graph)

    def made(self, kind: str) -> bool:
        return kind in self._made

    def digest(self) -> str:
        """A short stable name of what is computed, for caches keyed by the model (tuning databases, engines):
        the IR's hash where the IR was made (its structure), else a hash of the ONNX model's bytes."""
        if self.made("graph"):
            return self.graph().hash()
        return hashlib.sha256(self.onnx().SerializeToString()).hexdigest()[:16]

    def take(self, forms: Iterable[str]) -> str | None:
        """The first of ``forms`` this model can be given in, made now (so its time is not the backend's);
        None when ``forms`` is empty. A :class:`FormError` says why each failed."""
        why = []
        for kind in forms:
            try:
                getattr(self, kind)()
                return kind
            except FormError as exc:
                why.append(f"as {FORM_NAMES[kind]}: {exc}")
        if why:
            raise FormError("; ".join(why))
        return None

    @property
    def input_shape(self) -> tuple[int, int, int]:
        if self._shape is None:
            if self.source.kind == "zoo":
                self._shape = tuple(self.graph().input_shape)  # type: ignore[assignment]
            elif self.source.kind == "onnx":
                self._shape = onnx_io.input_shape(self.onnx())
            else:
                self._form("module", self._source_module)
        assert self._shape is not None
        return self._shape

    def input(self, seed: int) -> np.ndarray:
        """The seeded float32 input of the run's batch (the same numbers in any process)."""
        return seeded_array(self.input_shape, self.batch, seed)

    # -- the reference -----------------------------------------------------------------------------
    def reference(self, x: np.ndarray) -> np.ndarray:
        """The float64 output for ``x``: the module in float64 on the CPU, or the IR's reference executor
        (zoo models, ONNX files the IR imports), or onnx's reference evaluator on a float64 copy."""
        return self._reference_fn()[1](x)

    def in_precision(self, x: np.ndarray, precision: str) -> np.ndarray | None:
        """The output for ``x`` of the model evaluated as a correct backend would in ``precision``
        (:mod:`.rounding`), or None where the model has no module of its own (the IR's zoo, ONNX files)."""
        if not self.source.is_module:
            return None
        if precision not in self._in_precision:
            self._in_precision[precision] = rounding.evaluator(self._form("module", self._source_module), precision)
        return self._in_precision[precision](x)

    @property
    def reference_kind(self) -> str:
        return self._reference_fn()[0]

    def _reference_fn(self) -> tuple[str, Callable[[np.ndarray], np.ndarray]]:
        """(what computes the reference, the function), made on first use and kept for the run."""
        if self._reference is None:
            self._reference = self._make_reference()
        return self._reference

    def _make_reference(self) -> tuple[str, Callable[[np.ndarray], np.ndarray]]:
        if self.source.is_module:
            return "the module in float64 (torch, CPU)", self._module_float64()
        try:
            graph = self.graph()
            return "ios_core's reference executor (float64)", lambda x: reference_forward(graph, x)
        except FormError:
            if self.source.is_zoo:
                raise
        return "onnx's reference evaluator on a float64 copy", onnx_io.float64_evaluator(self.onnx())

    def _module_float64(self) -> Callable[[np.ndarray], np.ndarray]:
        import torch

        double = copy.deepcopy(self._form("module", self._source_module)).double()

        def forward(x: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                return double(torch.from_numpy(np.asarray(x, np.float64))).numpy()
        return forward

    # -- making them ---------------------------------------------------------------------------------
    def _form(self, kind: str, make: Callable[[], Any]) -> Any:
        if kind in self._made:
            return self._made[kind]
        if kind in self._failed:
            raise FormError(self._failed[kind])
        t = time.perf_counter()
        try:
            value = make()
        except UserError as exc:  # FormError, the zoo's MissingZoo, the IR's GraphError
            self._failed[kind] = str(exc)
            raise FormError(str(exc)) from None
        self.seconds[kind] = time.perf_counter() - t
        self._made[kind] = value
        return value

    def _source_module(self) -> Any:
        try:
            module, self._shape = zoos.build(self.source.kind, self.source.ref, self.source.image_size, self.seed)
        except UserError:  # a missing library, a factory that returns no module
            raise
        except Exception as exc:  # the library's own refusal (a size a Swin window cannot take, ...)
            raise FormError(f"{self.name} cannot be built: {type(exc).__name__}: "
                            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}") from None
        return module

    def _graph_module(self) -> Any:
        from ios_core.interpreters.torch import to_torch

        return to_torch(self.graph())

    def _make_onnx(self) -> Any:
        if self.source.kind == "onnx":
            return onnx_io.load_file(self.source.ref, self.batch)
        if self.source.kind == "zoo":
            from ios_core.onnx import export_onnx

            return export_onnx(self.graph())
        import torch

        module = self._form("module", self._source_module)
        return onnx_io.export_module(module, torch.zeros((self.batch, *self.input_shape)))

    def _make_graph(self) -> Graph:
        if self.source.kind == "zoo":
            return build_model(self.source.ref, **self.source.params)
        from ios_core.onnx import import_onnx

        try:
            return import_onnx(self.onnx(), name=self.name)
        except UserError as exc:
            raise FormError(f"ios_core's IR cannot import its ONNX model: {exc}") from None
