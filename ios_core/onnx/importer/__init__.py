"""Import ONNX vision models (CNNs and transformers) into the IR.

Each ONNX tensor maps to an *expression*: a list of terms (concatenated) of values (summed), so Concat
on channels and Add of equal shapes cost no node and consumers read them directly, the way IOS writes
graphs. BatchNormalization folds into the conv before it (else it is a per-channel affine op),
activations fuse into a conv whose only consumer they are, Dropout/Identity vanish, and every other
operator becomes an :class:`~ios_core.ir.Op` of the registry (:mod:`ios_core.ir.ops`).

The IR's shapes are per sample. The importer imports for one batch size ``B`` and keeps, for every ONNX
tensor, its full shape: the batch is ONNX axis 0 ("own": IR shape = shape[1:]), or axis 0 is the batch
times the IR's first axis ("merged", after a reshape such as Swin's window partition), or a (B, F) vector
kept as the IR's (F, 1, 1). A Transpose that moves the batch off axis 0 (timm's ``qkv.permute(2, 0, 3, 1,
4)``) is held back and resolved through the slices, squeezes and gathers that follow it. Nodes whose
inputs are all constants (weight standardization, shape arithmetic) are folded with onnx's reference
evaluator. Blocks are cut where a single tensor is live (every path crosses it).

The package: :mod:`.symbols` (the symbol table: per ONNX tensor its expression and full shape, and
:class:`~.symbols.BatchAxis`, the three mappings above), :mod:`.state` (the importer's state, the helpers
every converter shares and the walk over the nodes), :mod:`.registry` (``@converter("Conv")``: one function
per operator type), the converters by family (:mod:`.nn`, :mod:`.arith`, :mod:`.layout`), :mod:`.lazy` (the
held-back transposes), :mod:`.fold` (constant folding) and :mod:`.blocks` (block cutting). A new operator is
one function registered with ``@converter("OpType")`` in the module of its family.
"""

from __future__ import annotations

from pathlib import Path

import onnx

from ...ir import Graph
from . import arith, layout, nn  # noqa: F401 - they register the converters
from .errors import OnnxImportError, at, foreign, unknown
from .fold import folds
from .registry import supported_ops
from .state import Importer

__all__ = ["SUPPORTED_OPS", "OnnxImportError", "first_unsupported", "import_onnx", "supported_ops"]

SUPPORTED_OPS = tuple(supported_ops())


def first_unsupported(model: onnx.ModelProto) -> str | None:
    """Without importing (no weights read): the error the import would raise for the first operator it cannot
    take at all (a custom domain, an unknown type), or None; the nodes it folds are passed over as it passes
    them."""
    g = model.graph
    consts = {t.name for t in g.initializer}
    known = set(SUPPORTED_OPS)
    for n in g.node:
        if n.domain not in ("", "ai.onnx"):
            return at(n, foreign(n))
        if n.op_type == "Constant" or folds(n, consts):
            consts.update(n.output)
        elif n.op_type not in known:
            return at(n, unknown(n))
    return None


def import_onnx(source: str | Path | onnx.ModelProto, name: str | None = None, batch: int | None = None) -> Graph:
    """Read an ONNX vision model into a Graph (weights included) for ``batch`` (default: the file's fixed batch
    size, else 1); errors name the ONNX node."""
    if isinstance(source, onnx.ModelProto):
        model, default = source, source.graph.name or "onnx"
    else:
        path = Path(source)
        if not path.exists():
            raise OnnxImportError(f"{path}: no such file")
        try:
            model = onnx.load(str(path))
            onnx.checker.check_model(model)
        except Exception as exc:  # onnx raises DecodeError, ValidationError, ...
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise OnnxImportError(f"{path}: not a valid ONNX model ({first})") from None
        default = path.stem
    inits = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    fixed = None
    if inputs and inputs[0].type.tensor_type.shape.dim:
        d0 = inputs[0].type.tensor_type.shape.dim[0]
        fixed = int(d0.dim_value) if d0.HasField("dim_value") and d0.dim_value > 0 else None
    if batch is not None and fixed is not None and batch != fixed:
        raise OnnxImportError(f"the model's batch size is fixed at {fixed}; it cannot be imported for batch {batch}")
    return Importer(model, batch or fixed or 1).run(name or default)
