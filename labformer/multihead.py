"""Multi-head attention (Vaswani et al. 2017, Section 3.2.2), with a key/value cache for decoding.

h heads of size d_k = d_model / h each attend on their own projection of the input; their outputs
are concatenated and mixed by W_O. Shapes: inputs (B, T, d_model), heads (B, h, T, d_k).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import attention_with_weights
from .masks import causal_mask, check_mask
from .positional import RotaryEmbedding

__all__ = ["KVCache", "MultiHeadAttention", "record_attention", "GroupedQueryAttention"]


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

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        *,
        scale: float | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if d_model <= 0 or num_heads <= 0 or d_model % num_heads != 0:
            raise ValueError(
                f"d_model ({d_model}) must be a positive multiple of num_heads ({num_heads})"
            )
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.scale = scale  # None: 1/sqrt(d_k), decided where the scores are computed
        # A module, not a float, so that .eval() switches it off like every other dropout.
        self.dropout = nn.Dropout(dropout)
        factory: dict[str, Any] = {"device": device, "dtype": dtype}
        self.q_proj = nn.Linear(d_model, d_model, bias=bias, **factory)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias, **factory)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias, **factory)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias, **factory)
        # Set by record_attention(): where to put this module's weights, and under which name.
        self._recorder: tuple[dict[str, Tensor], str] | None = None

    def _split(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.num_heads, self.d_k).transpose(1, 2)  # (B, h, T, d_k)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        *,
        mask: Tensor | None = None,
        need_weights: bool = True,
        cache: KVCache | None = None,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """query (B, T_q, D), key/value (B, T_k, D) -> out (B, T_q, D), weights (B, h, T_q, T_k).

        mask: bool, True = may attend, broadcastable to (B, h, T_q, T_k). Keyword-only because
        ``nn.MultiheadAttention``'s fourth argument, key_padding_mask, means the opposite.
        need_weights=False takes PyTorch's fused kernel and returns None for the weights.
        cache: with a filled static cache, key and value are not projected again.
        is_causal: query position i attends to key positions 0..i, without a mask tensor (as
        ``causal_mask(T)``; needs T_q == T_k and no ``mask``); PyTorch's fused kernels then
        build no mask at all.
        """
        self._check(query, key, value)
        B, T_q, _ = query.shape
        q = self._split(self.q_proj(query))  # (B, h, T_q, d_k)
        if cache is not None and cache.static and cache.k is not None and cache.v is not None:
            k, v = cache.k, cache.v  # (B, h, T_k, d_k), projected once from the memory
        else:
            k, v = self._split(self.k_proj(key)), self._split(self.v_proj(value))
            if cache is not None:
                k, v = cache.update(k, v)  # (B, h, T_past + T_k, d_k)
        return self._attend(q, k, v, mask, need_weights, is_causal)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool,
                is_causal: bool) -> tuple[Tensor, Tensor | None]:
        """The heads' attention, merged and projected: q (B, h, T_q, d_k), k and v
        (B, h, T_k, d_k) -> out (B, T_q, D), weights (B, h, T_q, T_k) or None."""
        B, _, T_q, _ = q.shape
        if is_causal and (mask is not None or k.shape[-2] != T_q):
            raise ValueError(f"is_causal needs no mask and as many keys as queries, got mask "
                             f"{None if mask is None else tuple(mask.shape)}, {T_q} queries "
                             f"and {k.shape[-2]} keys")
        if mask is not None:
            check_mask(mask, (B, self.num_heads, T_q, k.shape[-2]))
        p = self.dropout.p if self.dropout.training else 0.0
        weights: Tensor | None = None
        if need_weights or self._recorder is not None:
            if is_causal:  # the weights are asked for: the (T, T) mask is needed anyway
                mask = causal_mask(T_q, q.device)
            out, weights = attention_with_weights(q, k, v, mask, dropout_p=p, scale=self.scale)
            if self._recorder is not None:
                maps, name = self._recorder
                maps[name] = weights.detach()
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p,
                                                 is_causal=is_causal, scale=self.scale)
        out = out.transpose(1, 2).reshape(B, T_q, self.d_model)  # (B, T_q, h * d_k)
        return self.out_proj(out), (weights if need_weights else None)

    def _check(self, query: Tensor, key: Tensor, value: Tensor) -> None:
        shapes = f"query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
        if query.dim() != 3 or key.dim() != 3 or value.dim() != 3:
            raise ValueError(f"expected (B, T, d_model) inputs, got {shapes}")
        if {query.shape[-1], key.shape[-1], value.shape[-1]} != {self.d_model}:
            raise ValueError(f"last dim must be d_model={self.d_model}, got {shapes}")
        if key.shape[:2] != value.shape[:2] or query.shape[0] != key.shape[0]:
            raise ValueError(f"batch sizes and key/value lengths must agree, got {shapes}")

    def extra_repr(self) -> str:
        scale = "" if self.scale is None else f", scale={self.scale}"
        return f"d_model={self.d_model}, num_heads={self.num_heads}{scale}"

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> MultiHeadAttention:
        """A copy of ``torch.nn.MultiheadAttention`` on the same device and in the same dtype
        (packed in-projection, no bias_k / add_zero_attn)."""
        if not m._qkv_same_embed_dim or m.bias_k is not None or m.add_zero_attn:
            raise ValueError("only nn.MultiheadAttention with kdim = vdim = embed_dim is supported")
        w_in, b_in = m.in_proj_weight, m.in_proj_bias
        new = cls(m.embed_dim, m.num_heads, dropout=m.dropout, bias=b_in is not None,
                  device=w_in.device, dtype=w_in.dtype)
        with torch.no_grad():
            for i, proj in enumerate((new.q_proj, new.k_proj, new.v_proj)):
                rows = slice(i * m.embed_dim, (i + 1) * m.embed_dim)
                proj.weight.copy_(w_in[rows])
                if b_in is not None:
                    proj.bias.copy_(b_in[rows])
            new.out_proj.load_state_dict(m.out_proj.state_dict())
        return new


@contextmanager
def record_attention(model: nn.Module) -> Iterator[dict[str, Tensor]]:
    """Collect the attention weights of every MultiHeadAttention in ``model`` during the block.

    Yields a dict filled on each forward, ``{module name: weights (B, h, T_q, T_k)}``, e.g.
    ``maps["decoder.layers.0.cross_attn"]``.
    """
    maps: dict[str, Tensor] = {}
    modules = [(n, m) for n, m in model.named_modules() if isinstance(m, MultiHeadAttention)]
    for name, m in modules:
        m._recorder = (maps, name)
    try:
        yield maps
    finally:
        for _, m in modules:
            m._recorder = None


class GroupedQueryAttention(MultiHeadAttention):
    """Multi-head attention whose h query heads share num_kv_heads key/value heads (Ainslie et
    al. 2023), optionally with rotary positions on the queries and keys.

    Query head i reads key/value head i // (h / num_kv_heads): groups of h / num_kv_heads
    consecutive query heads share one. ``num_kv_heads = num_heads`` is multi-head attention
    (the same parameters as :class:`MultiHeadAttention`, and the same outputs); 1 is multi-query
    attention (Shazeer 2019). A cache holds the shared heads only, (B, num_kv_heads, T, d_k):
    h / num_kv_heads times smaller than multi-head attention's.

    Args:
        d_model, num_heads, dropout, bias, scale, device, dtype: as :class:`MultiHeadAttention`.
        num_kv_heads: key/value heads, a divisor of num_heads; None means num_heads.
        rotary: a :class:`~labformer.positional.RotaryEmbedding` of size d_k that rotates the
            queries and the keys (never the values) by their positions, numbered from the
            cache's length. Self-attention only (the query and key positions are the same).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        num_kv_heads: int | None = None,
        dropout: float = 0.0,
        bias: bool = True,
        *,
        scale: float | None = None,
        rotary: RotaryEmbedding | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(d_model, num_heads, dropout, bias, scale=scale, device=device,
                         dtype=dtype)
        kv = num_heads if num_kv_heads is None else num_kv_heads
        if isinstance(kv, bool) or not isinstance(kv, int) or kv <= 0 or num_heads % kv:
            raise ValueError(f"num_kv_heads ({num_kv_heads!r}) must be a positive divisor of "
                             f"num_heads ({num_heads})")
        if rotary is not None and rotary.head_dim != self.d_k:
            raise ValueError(f"rotary embedding of size {rotary.head_dim} for heads of size "
                             f"d_k={self.d_k}")
        self.num_kv_heads = kv
        if kv != num_heads:  # narrower key and value projections: kv heads of d_k each
            factory: dict[str, Any] = {"device": device, "dtype": dtype}
            self.k_proj = nn.Linear(d_model, kv * self.d_k, bias=bias, **factory)
            self.v_proj = nn.Linear(d_model, kv * self.d_k, bias=bias, **factory)
        self.rotary = rotary

    def _split_kv(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.num_kv_heads, self.d_k).transpose(1, 2)  # (B, h_kv, T, d_k)

    def _share(self, x: Tensor) -> Tensor:
        """(B, h_kv, T, d_k) -> (B, h, T, d_k): each key/value head repeated for its group."""
        group = self.num_heads // self.num_kv_heads
        return x if group == 1 else x.repeat_interleave(group, dim=1)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        *,
        mask: Tensor | None = None,
        need_weights: bool = True,
        cache: KVCache | None = None,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """query (B, T_q, D), key/value (B, T_k, D) -> out (B, T_q, D), weights (B, h, T_q, T_k).

        As :meth:`MultiHeadAttention.forward`; the cache holds (B, h_kv, T, d_k) heads, keys
        already rotated.
        """
        self._check(query, key, value)
        B, T_q, _ = query.shape
        if self.rotary is not None and (query.shape[1] != key.shape[1]
                                        or (cache is not None and cache.static)):
            raise ValueError("rotary positions need self-attention: as many keys as queries, "
                             "and no static cache")
        q = self._split(self.q_proj(query))  # (B, h, T_q, d_k)
        if cache is not None and cache.static and cache.k is not None and cache.v is not None:
            k, v = cache.k, cache.v  # (B, h_kv, T_k, d_k), projected once
        else:
            k = self._split_kv(self.k_proj(key))  # (B, h_kv, T_k, d_k)
            v = self._split_kv(self.v_proj(value))
            if self.rotary is not None:  # queries and keys only; the values stay as they are
                offset = 0 if cache is None else len(cache)
                q, k = self.rotary(q, offset), self.rotary(k, offset)
            if cache is not None:
                k, v = cache.update(k, v)  # (B, h_kv, T_past + T_k, d_k)
        k, v = self._share(k), self._share(v)  # (B, h, T_k, d_k)
        return self._attend(q, k, v, mask, need_weights, is_causal)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", num_kv_heads={self.num_kv_heads}"
