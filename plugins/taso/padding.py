"""Which of TASO's two padding modes computes an IR conv or pool exactly.

TASO's conv2d and pool2d take only ``SAME`` or ``VALID`` (python/taso/_cython/core.pyx,
``get_padding_mode``). Its SAME is not TensorFlow's: the total padding is TF's, but
``Conv2D::get_padding`` (src/core/conv2d.cc; ``Pool2D::get_padding`` in src/core/pool2d.cc
alike) puts ``(total + 1) // 2`` on *both* sides and the output size is ``ceil(n / stride)``;
``map()`` in src/cudnn/{conv2d,pool2d}_kernel.cu asserts that cuDNN's output size agrees. So SAME is exact
for an IR node exactly when the IR's leading padding is that number and both output sizes
match; VALID when the IR pads nothing and the window count is the floor formula. Anything
else is padded explicitly before a VALID op (see convert.py).
"""

from __future__ import annotations

from collections.abc import Sequence

SAME, VALID = "SAME", "VALID"


def same_pad(n: int, kernel: int, stride: int) -> int:
    """The padding TASO's SAME puts on each side of an axis of size ``n``."""
    total = max(kernel - (stride if n % stride == 0 else n % stride), 0)
    return (total + 1) // 2


def axis_modes(n: int, kernel: int, stride: int, pad: int, out: int) -> set[str]:
    """The modes that place every window of one axis where the IR does, with ``out`` windows."""
    modes = set()
    p = same_pad(n, kernel, stride)
    if pad == p and out == -(-n // stride) and (n + 2 * p - kernel) // stride + 1 == out:
        modes.add(SAME)
    if pad == 0 and out == (n - kernel) // stride + 1:
        modes.add(VALID)
    return modes


def exact_mode(size: Sequence[int], kernel: Sequence[int], stride: Sequence[int], pad: Sequence[int],
               out: Sequence[int]) -> str | None:
    """SAME or VALID if one mode is exact on both axes (SAME first: TASO's enlarge-and-merge
    substitutions only match SAME convs, as its ONNX importer notes for 1x1 convs), else None."""
    both = axis_modes(size[0], kernel[0], stride[0], pad[0], out[0]) & \
        axis_modes(size[1], kernel[1], stride[1], pad[1], out[1])
    for mode in (SAME, VALID):
        if mode in both:
            return mode
    return None


def mode_pad(mode: str, size: Sequence[int], kernel: Sequence[int], stride: Sequence[int]) -> tuple[int, int]:
    """The per-side padding TASO applies in ``mode`` (for the divisor of its average pools)."""
    if mode == VALID:
        return (0, 0)
    return (same_pad(size[0], kernel[0], stride[0]), same_pad(size[1], kernel[1], stride[1]))
