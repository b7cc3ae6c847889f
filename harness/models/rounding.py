"""The model evaluated as a correct backend in a lower precision would evaluate it, on the CPU: the scale of the
error a correctness check must allow. A randomly initialised, BatchNorm-calibrated network can be so
ill-conditioned that every backend's rounding is amplified alike (issue 58), and a fixed tolerance then fails
them all; measured against this evaluation, the check allows what the model's own conditioning forces and no
more, and a backend that mangles its input still errs by far more than its precision can explain."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

#: how the rounding is emulated, per precision: the dtype values are stored in between layers (None: float32
#: arithmetic is the precision's own). TF32 has no CPU form; float32 stands for it (its tolerance is wide anyway)
STORED = {"fp32": None, "tf32": None, "fp16": "float16", "bf16": "bfloat16"}


def evaluator(module: Any, precision: str) -> Callable[[np.ndarray], np.ndarray]:
    """A float32 copy of ``module`` whose weights, buffers, input and every leaf module's output are rounded to
    the precision's storage type (GPUs accumulate in float32 and store activations in fp16/bf16); returns a
    function from a float32 batch to the float64 output."""
    import torch

    stored = STORED[precision]
    copied = copy.deepcopy(module).float().eval()
    dtype = getattr(torch, stored) if stored else None
    if dtype is not None:
        with torch.no_grad():
            for tensor in (*copied.parameters(), *copied.buffers()):
                if tensor.is_floating_point():
                    tensor.copy_(tensor.to(dtype).float())

        def rounded(_module: Any, _inputs: Any, out: Any) -> Any:
            if isinstance(out, torch.Tensor) and out.is_floating_point():
                return out.to(dtype).float()
            return out
        for leaf in copied.modules():
            if next(leaf.children(), None) is None:
                leaf.register_forward_hook(rounded)

    def forward(x: np.ndarray) -> np.ndarray:
        t = torch.from_numpy(np.asarray(x, np.float32))
        if dtype is not None:
            t = t.to(dtype).float()
        with torch.no_grad():
            return copied(t).double().numpy()
    return forward
