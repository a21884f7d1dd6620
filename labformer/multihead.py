"""Multi-head attention (Vaswani et al. 2017, Section 3.2.2), with a key/value cache for decoding.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

h heads of size d_k = d_model / h each attend on their own projection of the input; their outputs
are concatenated and mixed by W_O. Shapes: inputs (B, T, d_model), heads (B, h, T, d_k).
Grouped-query attention, its post-2017 variant, is in :mod:`labformer.modern`;
``labformer.record_attention`` collects the weights for the book's pictures.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import attention_with_weights
from .masks import causal_mask, check_mask

__all__ = ["MultiHeadAttention", "KVCache"]


class MultiHeadAttention(nn.Module):
    """Multi-head attention: h parallel scaled dot-product attentions on learned projections.

    Args:
        d_model: width of the inputs and of the output.
        num_heads: h; each head attends in d_k = d_model / h dimensions.
        dropout: probability of dropping an attention weight, in training mode only.
        bias: whether the four projections have biases.
        scale: multiplies the scores q.k; None is the paper's 1/sqrt(d_k), 1.0 leaves them
            unscaled (an ablation).
        device, dtype: where and in which precision to create the parameters (as in torch.nn).
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True, *,
                 scale: float | None = None, device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        _check_sizes(d_model, num_heads)
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.scale = scale  # None: 1/sqrt(d_k), decided where the scores are computed
        # A module, not a float, so that .eval() switches it off like every other dropout.
        self.dropout = nn.Dropout(dropout)
        factory: dict[str, Any] = {"device": device, "dtype": dtype}
        self.q_proj = nn.Linear(d_model, d_model, bias=bias, **factory)  # W^Q of all h heads
        self.k_proj = nn.Linear(d_model, d_model, bias=bias, **factory)  # W^K
        self.v_proj = nn.Linear(d_model, d_model, bias=bias, **factory)  # W^V
        self.out_proj = nn.Linear(d_model, d_model, bias=bias, **factory)  # W^O

    def forward(self, query: Tensor, key: Tensor, value: Tensor, *, mask: Tensor | None = None,
                need_weights: bool = True, cache: KVCache | None = None,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        """query (B, T_q, D), key/value (B, T_k, D) -> out (B, T_q, D), weights (B, h, T_q, T_k).

        mask: bool, True = may attend, broadcastable to (B, h, T_q, T_k). Keyword-only because
        ``nn.MultiheadAttention``'s fourth argument, key_padding_mask, means the opposite.
        need_weights=False takes PyTorch's fused kernel and returns None for the weights.
        cache: with a filled static cache, key and value are not projected again.
        is_causal: query position i attends to key positions 0..i, without a mask tensor (as
        ``causal_mask(T)``; needs T_q == T_k and no ``mask``); PyTorch's fused kernels then
        build no mask at all.
        """
        _check_inputs(self.d_model, query, key, value)
        q = self._split(self.q_proj(query))  # (B, h, T_q, d_k)
        if cache is not None and cache.static and cache.k is not None and cache.v is not None:
            k, v = cache.k, cache.v  # (B, h, T_k, d_k), projected once from the memory
        else:
            k, v = self._split(self.k_proj(key)), self._split(self.v_proj(value))
            if cache is not None:
                k, v = cache.update(k, v)  # (B, h, T_past + T_k, d_k)
        return self._attend(q, k, v, mask, need_weights, is_causal)

    def _split(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, -1, self.d_k).transpose(1, 2)  # (B, h, T, d_k): one row per head

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool,
                is_causal: bool) -> tuple[Tensor, Tensor | None]:
        """The heads' attention, merged and projected: q (B, h, T_q, d_k), k and v
        (B, h, T_k, d_k) -> out (B, T_q, D), weights (B, h, T_q, T_k) or None."""
        B, _, T_q, _ = q.shape
        _check_attend(self.num_heads, q, k, mask, is_causal)
        p = self.dropout.p if self.dropout.training else 0.0
        weights: Tensor | None = None
        if need_weights:
            if is_causal:  # the weights are asked for: the (T, T) mask is needed anyway
                mask = causal_mask(T_q, q.device)
            out, weights = attention_with_weights(q, k, v, mask, dropout_p=p, scale=self.scale)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p,
                                                 is_causal=is_causal, scale=self.scale)
        out = out.transpose(1, 2).reshape(B, T_q, self.d_model)  # (B, T_q, h * d_k)
        return self.out_proj(out), weights

    def extra_repr(self) -> str:
        scale = "" if self.scale is None else f", scale={self.scale}"
        return f"d_model={self.d_model}, num_heads={self.num_heads}{scale}"


class KVCache:
    """Keys and values already projected and split into heads, kept between decoding steps.

    A self-attention cache grows by the new positions at every step. A ``static`` cache (for
    cross-attention) is filled once from the encoder's memory and then reused as it is.
    """

    def __init__(self, static: bool = False) -> None:
        self.static = static
        self.k: Tensor | None = None  # (B, h, T_k, d_k)
        self.v: Tensor | None = None  # (B, h, T_k, d_k)

    @property
    def filled(self) -> bool:
        return self.k is not None

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.shape[-2]

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store (static) or append (self-attention) new heads (B, h, T_new, d_k); return all."""
        if self.k is None or self.v is None or self.static:
            self.k, self.v = k, v
        else:
            self.k = torch.cat([self.k, k], dim=-2)  # (B, h, T_old + T_new, d_k)
            self.v = torch.cat([self.v, v], dim=-2)
        return self.k, self.v

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (B_new,), e.g. the surviving hypotheses of a beam search."""
        if self.k is not None and self.v is not None:
            self.k = self.k.index_select(0, index)
            self.v = self.v.index_select(0, index)


# ---- checks of the arguments ----------------------------------------------------------------

def _check_sizes(d_model: int, num_heads: int) -> None:
    if d_model <= 0 or num_heads <= 0 or d_model % num_heads != 0:
        raise ValueError(
            f"d_model ({d_model}) must be a positive multiple of num_heads ({num_heads})")


def _check_inputs(d_model: int, query: Tensor, key: Tensor, value: Tensor) -> None:
    shapes = f"query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
    if query.dim() != 3 or key.dim() != 3 or value.dim() != 3:
        raise ValueError(f"expected (B, T, d_model) inputs, got {shapes}")
    if {query.shape[-1], key.shape[-1], value.shape[-1]} != {d_model}:
        raise ValueError(f"last dim must be d_model={d_model}, got {shapes}")
    if key.shape[:2] != value.shape[:2] or query.shape[0] != key.shape[0]:
        raise ValueError(f"batch sizes and key/value lengths must agree, got {shapes}")


def _check_attend(num_heads: int, q: Tensor, k: Tensor, mask: Tensor | None,
                  is_causal: bool) -> None:
    B, _, T_q, _ = q.shape
    if is_causal and (mask is not None or k.shape[-2] != T_q):
        raise ValueError(f"is_causal needs no mask and as many keys as queries, got mask "
                         f"{None if mask is None else tuple(mask.shape)}, {T_q} queries "
                         f"and {k.shape[-2]} keys")
    if mask is not None:
        check_mask(mask, (B, num_heads, T_q, k.shape[-2]))
