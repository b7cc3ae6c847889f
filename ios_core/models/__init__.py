"""The model zoo: the IOS paper's networks as the original builds them, a correct
ResNet-50 control case, the README demo, and any ONNX CNN the IR covers."""

from __future__ import annotations

import inspect
from collections.abc import Callable

from ..ir import Graph, GraphError
from .inception import inception_v3
from .nasnet import nasnet
from .randwire import randwire
from .resnet import resnet50
from .sample import sample
from .squeezenet import squeezenet


def onnx_model(path: str = "") -> Graph:
    """Any ONNX CNN whose operators the IR covers (weights from the file)."""
    from ..onnx import import_onnx
    if not path or path == "???":
        raise GraphError("model=onnx needs the file: add +model.params.path=/absolute/path/to/model.onnx")
    return import_onnx(path)


MODELS: dict[str, Callable[..., Graph]] = {
    "sample": sample,
    "inception_v3": inception_v3,
    "randwire": randwire,
    "nasnet": nasnet,
    "squeezenet": squeezenet,
    "resnet50": resnet50,
    "onnx": onnx_model,
}


def model_params(name: str) -> dict[str, object]:
    """The keyword parameters (and defaults) a model builder accepts."""
    sig = inspect.signature(get_builder(name))
    return {k: p.default for k, p in sig.parameters.items()}


def get_builder(name: str) -> Callable[..., Graph]:
    try:
        return MODELS[name]
    except KeyError:
        raise GraphError(f"unknown model {name!r}; choose one of: {', '.join(MODELS)}") from None


def check_params(name: str, params: dict) -> None:
    """Unknown parameters and wrong types are errors that name the parameter and the valid
    ones; checked before any work (the harness calls this in the parent process)."""
    valid = model_params(name)
    bad = sorted(set(params) - set(valid))
    if bad:
        raise GraphError(f"model {name!r} has no parameter {', '.join(bad)}; valid: {', '.join(valid)}")
    for key, value in params.items():
        default = valid[key]
        if default is None or default is inspect.Parameter.empty:
            continue
        want = type(default)
        exact = isinstance(value, want) and not (want is int and isinstance(value, bool))
        widened = want is float and isinstance(value, int) and not isinstance(value, bool)
        if not (exact or widened):
            raise GraphError(f"model {name!r}: parameter {key}={value!r} must be {want.__name__} "
                             f"(like its default {default!r})")


def build_model(name: str, **params) -> Graph:
    """Build a zoo model by name; unknown parameters are an error that lists valid ones."""
    builder = get_builder(name)
    check_params(name, params)
    try:
        return builder(**params)
    except GraphError as exc:
        if "too small" not in str(exc) or "image_size" not in params:
            raise
        raise GraphError(f"{exc}: model {name!r} needs image_size >= {_smallest_size(builder, params)}") from None


def _smallest_size(builder: Callable[..., Graph], params: dict) -> int:
    """The least image_size the model builds at (shape errors come before weights, so fast)."""
    def ok(size: int) -> bool:
        try:
            builder(**{**params, "image_size": size})
            return True
        except GraphError:
            return False
    lo, hi = int(params["image_size"]), max(2 * int(params["image_size"]), 8)
    while not ok(hi):
        lo, hi = hi, hi * 2
        if hi > 4096:
            return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi
