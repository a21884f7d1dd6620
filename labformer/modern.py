"""The post-2017 parts of a LLaMA-style block, for the language model of chapter 15.

* :class:`GroupedQueryAttention` (Ainslie et al. 2023): h query heads share fewer key/value
  heads, optionally with rotary positions (:class:`~labformer.positional.RotaryEmbedding`,
  Su et al. 2021) on the queries and keys;
* :class:`RMSNorm` (Zhang & Sennrich 2019): LayerNorm without its centring;
* :class:`SwiGLU` (Shazeer 2020): a gated feed-forward network.

Each replaces a 2017 part of :mod:`labformer.multihead` or :mod:`labformer.layers`, and
:class:`~labformer.lm.LanguageModel` switches them on one at a time.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .multihead import KVCache, MultiHeadAttention, _check_inputs
from .positional import RotaryEmbedding

__all__ = ["GroupedQueryAttention", "RMSNorm", "SwiGLU"]


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
        _check_inputs(self.d_model, query, key, value)
        if self.rotary is not None and (query.shape[1] != key.shape[1]
                                        or (cache is not None and cache.static)):
            raise ValueError("rotary positions need self-attention: as many keys as queries, "
                             "and no static cache")
        q = self._split(self.q_proj(query))  # (B, h, T_q, d_k)
        if cache is not None and cache.static and cache.k is not None and cache.v is not None:
            k, v = cache.k, cache.v  # (B, h_kv, T_k, d_k), projected once
        else:
            k = self._split(self.k_proj(key))  # (B, h_kv, T_k, d_k)
            v = self._split(self.v_proj(value))
            if self.rotary is not None:  # queries and keys only; the values stay as they are
                offset = 0 if cache is None else len(cache)
                q, k = self.rotary(q, offset), self.rotary(k, offset)
            if cache is not None:
                k, v = cache.update(k, v)  # (B, h_kv, T_past + T_k, d_k)
        k, v = self._share(k), self._share(v)  # (B, h, T_k, d_k)
        return self._attend(q, k, v, mask, need_weights, is_causal)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", num_kv_heads={self.num_kv_heads}"


class RMSNorm(nn.Module):
    """Root-mean-square normalisation (Zhang & Sennrich 2019), the norm of LLaMA-style blocks.

    y = x / sqrt(mean(x^2) + eps) * weight, over the last axis. LayerNorm without its two
    centring steps: no mean subtracted, no bias added; one gain per feature, starting at 1.
    """

    def __init__(
        self,
        d_model: int,
        eps: float = 1e-5,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if d_model <= 0 or eps <= 0:
            raise ValueError(f"RMSNorm needs d_model > 0 and eps > 0, got {d_model}, {eps}")
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x: Tensor) -> Tensor:
        """x (..., d_model) -> (..., d_model), each vector scaled to a root mean square of 1."""
        rms = x.pow(2).mean(dim=-1, keepdim=True).add(self.eps).rsqrt()  # (..., 1)
        return x * rms * self.weight

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


class SwiGLU(nn.Module):
    """Gated feed-forward network (Shazeer 2020), the FFN of LLaMA-style blocks.

    out = W_down(dropout(silu(W_gate x) * (W_up x))): the hidden layer is a SiLU "gate"
    multiplied elementwise by a second projection. Three matrices instead of two and no
    biases; models that keep the parameter count of a ReLU FFN of width d_ff use a hidden
    width of about 2/3 d_ff. The names are those of the LLaMA checkpoints.
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        dropout: float = 0.0,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        factory: dict[str, Any] = {"device": device, "dtype": dtype, "bias": False}
        self.gate_proj = nn.Linear(d_model, d_ff, **factory)
        self.up_proj = nn.Linear(d_model, d_ff, **factory)
        self.down_proj = nn.Linear(d_ff, d_model, **factory)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """x (B, T, d_model) -> (B, T, d_model), each position independently."""
        hidden = F.silu(self.gate_proj(x)) * self.up_proj(x)  # (B, T, d_ff)
        out: Tensor = self.down_proj(self.dropout(hidden))
        return out
