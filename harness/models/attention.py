"""``torch.nn.MultiheadAttention`` exported batch-first.

PyTorch's MultiheadAttention computes sequence-first inside: a batch-first input is transposed to (L, N, E) and
the batch is folded into the heads (L, N * H, E / H), so its ONNX export moves the batch axis off axis 0 and
back (torchvision's ViT). ios_core's IR keeps the batch on axis 0 and cannot follow that. Before an export, each
module of that kind whose call the same function can replace is swapped, in a copy, for the batch-first form
timm's models export (one packed projection, the heads split after it, ``scaled_dot_product_attention``), which
every consumer of the export reads. The function is the same; the float64 reference stays the original module.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any


def _eligible(m: Any) -> bool:
    """Batch-first, one packed input projection, no extra key/value biases or zero attention: what the
    batch-first form computes exactly (a call with masks or asking for the weights still goes to the original)."""
    return bool(m.batch_first and m._qkv_same_embed_dim and m.bias_k is None and m.bias_v is None
                and not m.add_zero_attn)


def batch_first_attention(module: Any) -> Any:
    """``module`` itself where it has no MultiheadAttention to swap, else a copy with each swapped."""
    import torch

    if not any(isinstance(m, torch.nn.MultiheadAttention) and _eligible(m) for m in module.modules()):
        return module
    out = copy.deepcopy(module)
    for m in list(out.modules()):
        for child_name, child in list(m.named_children()):
            if isinstance(child, torch.nn.MultiheadAttention) and _eligible(child):
                setattr(m, child_name, _batch_first_class()(child))
    return out


@cache
def _batch_first_class() -> type:
    import torch
    import torch.nn.functional as F

    class BatchFirstAttention(torch.nn.Module):
        """The call of a batch-first MultiheadAttention without masks and without its weights, in batch-first
        operators; any other call goes to the original module it wraps."""

        def __init__(self, inner: torch.nn.MultiheadAttention):
            super().__init__()
            self.inner = inner

        def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                    average_attn_weights=True, is_causal=False):
            if key_padding_mask is not None or attn_mask is not None or need_weights or is_causal \
                    or query.dim() != 3:
                return self.inner(query, key, value, key_padding_mask=key_padding_mask, need_weights=need_weights,
                                  attn_mask=attn_mask, average_attn_weights=average_attn_weights,
                                  is_causal=is_causal)
            a = self.inner
            w, b = a.in_proj_weight, a.in_proj_bias
            if query is key and key is value:
                q, k, v = F.linear(query, w, b).chunk(3, dim=-1)
            else:
                ws, bs = w.chunk(3), (b.chunk(3) if b is not None else (None, None, None))
                q, k, v = (F.linear(t, wi, bi) for t, wi, bi in zip((query, key, value), ws, bs))
            n, heads = query.shape[0], a.num_heads
            q, k, v = (t.reshape(n, t.shape[1], heads, a.head_dim).transpose(1, 2) for t in (q, k, v))
            drop = a.dropout if self.training else 0.0
            o = F.scaled_dot_product_attention(q, k, v, dropout_p=drop)
            o = o.transpose(1, 2).reshape(n, query.shape[1], a.embed_dim)
            return a.out_proj(o), None

    return BatchFirstAttention
