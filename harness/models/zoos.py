"""The model zoos users already use, timm and torchvision, and a user's own factory: their names, the
``nn.Module`` with random-init weights (nothing is downloaded), its input size, and BatchNorm statistics
calibrated on random inputs so that the output depends on the input (the correctness check must see it)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from functools import cache
from typing import Any, cast

from ios_core.errors import UserError

#: how a user lists a zoo's names
LISTING = {"timm": "python -m harness --list-models timm '*pattern*'",
           "torchvision": "python -m harness --list-models torchvision"}
DEFAULT_SIZE = 224  # a module factory's input, and torchvision's where its weights do not say
CALIBRATION_BATCHES = 4


class MissingZoo(UserError):
    """A zoo's library is not installed; the message names the extra that installs it."""


def import_torchvision() -> types.ModuleType:
    """torchvision, also beside a torch build it was not compiled for (PyPI's torchvision is a CUDA build; next
    to the CPU torch its C++ operators do not register and its import fails in ``_meta_registrations``). The
    model definitions are pure Python: the registrations of the missing operators are skipped then."""
    if importlib.util.find_spec("torchvision") is None:
        raise MissingZoo("model=torchvision needs torchvision, which is not installed: pip install -e '.[timm]'")
    try:
        import torchvision  # type: ignore[import-untyped]
    except RuntimeError as exc:
        if "does not exist" not in str(exc):
            raise
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")
        import torchvision
    return torchvision


def import_zoo(zoo: str) -> types.ModuleType:
    """The zoo's library (timm imports torchvision, so the same care applies)."""
    tv = import_torchvision() if zoo == "torchvision" or importlib.util.find_spec("torchvision") else None
    if zoo == "torchvision":
        assert tv is not None
        return tv
    if importlib.util.find_spec("timm") is None:
        raise MissingZoo("model=timm needs timm, which is not installed: pip install -e '.[timm]'")
    return importlib.import_module("timm")


def version(zoo: str) -> str:
    return str(getattr(import_zoo(zoo), "__version__", "?"))


@cache
def architectures(zoo: str) -> tuple[str, ...]:
    """The model names a zoo builds (torchvision: its classification models)."""
    lib = import_zoo(zoo)
    if zoo == "timm":
        return tuple(lib.list_models())
    return tuple(lib.models.list_models(module=lib.models))


def known(zoo: str, arch: str) -> bool:
    """An architecture the zoo builds: its listed names, and for timm also the deprecated names it still maps
    (``adv_inception_v3``, in PyTorch's TIMM suite, is ``inception_v3.tf_adv_in1k`` since timm 0.9)."""
    return arch in architectures(zoo) or (zoo == "timm" and bool(import_zoo("timm").is_model(arch)))


def build(kind: str, ref: str, image_size: int, seed: int) -> tuple[Any, tuple[int, int, int]]:
    """The float32 CPU module in eval mode (seeded weights) and its input shape (C, H, W)."""
    import torch

    torch.manual_seed(seed)
    if kind == "timm":
        module, shape = _timm(ref, image_size)
    elif kind == "torchvision":
        module, shape = _torchvision(ref, image_size)
    else:
        module, shape = _factory(ref, image_size)
    module = module.float().eval()
    if kind != "module":  # a user's factory may bring trained statistics: those are left as they are
        calibrate(module, shape, seed)
    return module, shape


def _timm(arch: str, image_size: int) -> tuple[Any, tuple[int, int, int]]:
    timm = import_zoo("timm")
    module = None
    if image_size:  # ViT-style models fix their token grid at creation; CNNs take any size and refuse the argument
        try:
            module = timm.create_model(arch, pretrained=False, img_size=image_size)
        except TypeError:
            module = None
    if module is None:
        module = timm.create_model(arch, pretrained=False)
    c, h, w = module.pretrained_cfg.get("input_size", (3, DEFAULT_SIZE, DEFAULT_SIZE))
    return module, (int(c), image_size or int(h), image_size or int(w))


def _torchvision(arch: str, image_size: int) -> tuple[Any, tuple[int, int, int]]:
    tv = import_zoo("torchvision")
    builder = tv.models.get_model_builder(arch)
    kwargs: dict[str, Any] = {"weights": None}
    if arch in ("inception_v3", "googlenet"):  # their auxiliary heads exist only for training
        kwargs.update(aux_logits=False, init_weights=True)
    size = image_size or _weights_size(tv, arch)
    try:  # ViT fixes its token grid at creation (a keyword its builder passes on: vit_h_14's weights are 518 px)
        module = builder(**kwargs, image_size=size)
    except TypeError:  # CNNs and Swin take any size and refuse the keyword
        module = builder(**kwargs)
    return module, (3, size, size)


def _weights_size(tv: Any, arch: str) -> int:
    """The crop size of the architecture's default weights (metadata only, nothing is downloaded)."""
    try:
        return int(tv.models.get_model_weights(arch).DEFAULT.transforms().crop_size[0])
    except Exception:
        return DEFAULT_SIZE


def _factory(target: str, image_size: int) -> tuple[Any, tuple[int, int, int]]:
    size = image_size or DEFAULT_SIZE
    return _first_output_class()(_made(target)), (3, size, size)


def _made(target: str) -> Any:
    """What a user's factory returns, refused unless an ``nn.Module``."""
    import torch

    module_name, _, attr = target.partition(":")
    made = getattr(importlib.import_module(module_name), attr)()
    if not isinstance(made, torch.nn.Module):
        raise UserError(f"model.target={target} returned {type(made).__name__}, not a torch.nn.Module")
    return made


def recurrent_layers(target: str) -> list[tuple[str, str]]:
    """A module factory's recurrent layers (``torch.nn`` LSTM, GRU, RNN) as (path, class), found by making it on the
    meta device: each exports to the ONNX operator of its class's name. Empty where the meta device cannot tell."""
    import torch

    try:
        with torch.device("meta"):
            module = _made(target)
    except Exception:  # noqa: BLE001 - the meta device cannot tell (or the factory is wrong: check_on_meta says so)
        return []
    kinds = (torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN)  # a user's subclass exports as its base
    return [(path, next(k.__name__ for k in kinds if isinstance(m, k))) for path, m in module.named_modules()
            if isinstance(m, kinds)]


def check_on_meta(kind: str, ref: str, image_size: int) -> str | None:
    """What is wrong with the model, found in the parent without building its weights: the module made on the
    meta device and run there at its input size. A factory that returns no ``nn.Module``, a size too small (with
    the smallest that works), or a factory's forward that fails at every size (its error) is the answer; None
    where nothing is, or where the meta device cannot tell (a factory that loads weights, an operator without a
    meta kernel, a value read from a tensor): the measuring process finds those."""
    import torch

    build = {"timm": _timm, "torchvision": _torchvision}.get(kind, _factory)
    try:
        with torch.device("meta"):
            module, shape = build(ref, image_size)
    except UserError as exc:  # the factory's return, refused by the same check a run makes
        return str(exc)
    except Exception:  # noqa: BLE001 - the meta device cannot tell; the measuring process will
        return None
    error = _meta_error(module, shape)
    if error is None:
        return None
    with torch.device("meta"):  # the model's own size: its config's, no weights
        default = DEFAULT_SIZE if kind == "module" else build(ref, 0)[1][1]
    if not image_size or default <= image_size or _meta_error(module, (shape[0], default, default)) is not None:
        return _forward_fails(ref, shape, error) if kind == "module" else None  # nothing the size explains
    lo, hi = image_size, default  # fails at lo, runs at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _meta_error(module, (shape[0], mid, mid)) is None else (mid, hi)
    return f"model.image_size={image_size} is too small for {ref}: the smallest input it runs at is {hi} px"


def _meta_error(module: Any, shape: tuple[int, int, int]) -> Exception | None:
    """The module's forward on a meta input of ``(1, *shape)``: None where it runs, else its exception."""
    import torch

    try:
        with torch.no_grad():
            module.eval()(torch.empty(1, *shape, device="meta"))
        return None
    except Exception as exc:  # noqa: BLE001 - a shape error, or something the meta device cannot do
        return exc


def _forward_fails(ref: str, shape: tuple[int, int, int], error: Exception) -> str | None:
    """A factory's forward that fails on the meta device for a reason of its own (a shape error: a layer of the
    wrong width), in one line; None where the meta device is what failed (no meta kernel, a tensor's value read,
    a copy to another device), which the measuring process must then try."""
    text = str(error).strip()
    if isinstance(error, NotImplementedError) or "meta" in text.lower() or not text:
        return None
    return (f"model.target={ref}: its module's forward fails on a (1, {', '.join(map(str, shape))}) input: "
            f"{type(error).__name__}: {text.splitlines()[0][:200]}")


@cache
def _first_output_class() -> type:
    import torch

    class FirstOutputModule(torch.nn.Module):
        """A user's module, its forward's first tensor as the output (tuples and lists of outputs)."""

        def __init__(self, inner: torch.nn.Module):
            super().__init__()
            self.inner = inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.inner(x)
            while isinstance(y, (tuple, list)):
                y = y[0]
            return y
    return FirstOutputModule


def calibrate(module: Any, shape: tuple[int, int, int], seed: int) -> None:
    """Running statistics of every BatchNorm from a few batches of seeded random input (the cumulative mean,
    not the default momentum), the rest of the module staying in eval mode; then each channel's mean folded
    into its variance (mean 0, variance the mean square), so that a BatchNorm scales its input and no longer
    centres it. Random-init statistics (mean 0, variance 1) let activations grow or vanish through a deep
    network until the output no longer depends on the input; centring every layer decorrelates nearby inputs
    layer by layer until the network is chaotic and amplifies every backend's rounding alike (issue 58; the
    numbers, model by model, are in BENCHMARKS.md)."""
    import torch

    norms = [m for m in module.modules()
             if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.running_var is not None]
    if not norms:
        return
    gen = torch.Generator().manual_seed(seed + 7)
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
        m.train()
    with torch.no_grad():
        for _ in range(CALIBRATION_BATCHES):
            module(torch.randn((2, *shape), generator=gen))
        for m in norms:
            m.eval()
            mean, var = cast(torch.Tensor, m.running_mean), cast(torch.Tensor, m.running_var)
            var += mean ** 2
            mean.zero_()
