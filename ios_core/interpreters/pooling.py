"""Pooling geometry shared by the reference and every converter that pools with explicit pads
(TensorFlow, JAX): the output size, ceil_mode's right padding, and average pooling's divisor."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..ir.nodes import Pool


def pool_pads(node: Pool, h: int, w: int) -> tuple[int, int, int, int]:
    """(out h, out w, right pad h, right pad w): the right padding is large enough for
    ceil_mode's last window. Shared by every converter that pools with explicit pads."""
    (kh, kw), (sh, sw), (ph, pw) = node.kernel, node.stride, node.padding
    oh, ow = node.out_size(h, 0), node.out_size(w, 1)
    return oh, ow, max(ph, (oh - 1) * sh + kh - h - ph), max(pw, (ow - 1) * sw + kw - w - pw)


def avg_divisor(node: Pool, h: int, w: int) -> np.ndarray:
    """(oh, ow) divisor of an average pool: window cells inside the padded input
    (count_include_pad) or inside the input itself, never in ceil_mode's extension."""
    (kh, kw), (sh, sw), (ph, pw) = node.kernel, node.stride, node.padding
    oh, ow, rh, rw = pool_pads(node, h, w)
    pad_h, pad_w = (ph, pw) if node.count_include_pad else (0, 0)
    mask = np.zeros((h + ph + rh, w + pw + rw))
    mask[ph - pad_h:ph + h + pad_h, pw - pad_w:pw + w + pad_w] = 1.0
    return sliding_window_view(mask, (kh, kw))[::sh, ::sw][:oh, :ow].sum(axis=(2, 3))
