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
        from ..ir import GraphError
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

PAPER_MODELS = ("inception_v3", "randwire", "nasnet", "squeezenet")


def model_params(name: str) -> dict[str, object]:
    """The keyword parameters (and defaults) a model builder accepts."""
    sig = inspect.signature(get_builder(name))
    return {k: p.default for k, p in sig.parameters.items()}


def get_builder(name: str) -> Callable[..., Graph]:
    try:
        return MODELS[name]
    except KeyError:
        raise GraphError(f"unknown model {name!r}; choose one of: {', '.join(MODELS)}") from None


def build_model(name: str, **params) -> Graph:
    """Build a zoo model by name; unknown parameters are an error that lists valid ones."""
    builder = get_builder(name)
    valid = model_params(name)
    bad = sorted(set(params) - set(valid))
    if bad:
        raise GraphError(f"model {name!r} has no parameter {', '.join(bad)}; valid: {', '.join(valid)}")
    return builder(**params)


__all__ = ["MODELS", "PAPER_MODELS", "build_model", "get_builder", "inception_v3", "model_params", "nasnet",
           "randwire", "resnet50", "sample", "squeezenet"]
