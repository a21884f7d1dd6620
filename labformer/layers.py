"""Encoder and decoder layers (Vaswani et al. 2017, Section 3.1 and Figure 1), Post-LN and Pre-LN.

    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2                     (Section 3.3)
    Post-LN (the paper):      x = LayerNorm(x + Dropout(Sublayer(x)))
    Pre-LN (Xiong et al. 2020): x = x + Dropout(Sublayer(LayerNorm(x)))

An encoder layer has two sublayers (self-attention, the FFN), a decoder layer three (masked
self-attention, cross-attention on the encoder's memory, the FFN), each wrapped in a residual
connection and a LayerNorm. Pre-LN (``norm_first=True``) trains without warm-up. Both forms
match ``torch.nn.TransformerEncoderLayer`` / ``TransformerDecoderLayer`` in the tests
(:mod:`labformer.convert` copies their weights). Two switches exist for ablations only:
``residual=False`` drops the skip connection (the sublayer's output replaces its input) and
``scale_scores=False`` drops the 1/sqrt(d_k).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .multihead import KVCache, MultiHeadAttention

__all__ = ["FeedForward", "residual", "ResidualSublayer", "EncoderLayer", "DecoderLayer"]


class FeedForward(nn.Module):
    """Position-wise feed-forward network: Linear(d_model, d_ff), ReLU, dropout, Linear back."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, *,
                 device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff, device=device, dtype=dtype)
        self.linear2 = nn.Linear(d_ff, d_model, device=device, dtype=dtype)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """x (B, T, d_model) -> (B, T, d_model), each position independently."""
        out: Tensor = self.linear2(self.dropout(F.relu(self.linear1(x))))
        return out


def residual(x: Tensor, sublayer: Callable[..., Tensor], norm: Callable[[Tensor], Tensor],
             dropout: Callable[[Tensor], Tensor], norm_first: bool, *args: Any,
             skip: bool = True) -> Tensor:
    """Post-LN: norm(x + sublayer(x)); Pre-LN: x + sublayer(norm(x)). Dropout on the branch.

    Extra ``args`` go to the sublayer after its input: ``sublayer(y, *args)``. ``skip=False``
    removes the skip connection, the norm staying where it was: norm(sublayer(x)) (Post-LN),
    sublayer(norm(x)) (Pre-LN).
    """
    if norm_first:
        branch = dropout(sublayer(norm(x), *args))
        return x + branch if skip else branch
    branch = dropout(sublayer(x, *args))
    return norm(x + branch if skip else branch)


class ResidualSublayer(nn.Module):
    """One residual sublayer: owns its LayerNorm and dropout, wraps any sublayer function.

    ``forward(x, sublayer, *args)`` is :func:`residual` with this module's norm and dropout;
    ``args`` (a mask, a cache) go on to ``sublayer(y, *args)``. The Annotated Transformer's
    ``SublayerConnection``, with both placements of the norm. ``residual=False`` (an ablation)
    drops the skip connection: the branch replaces its input.
    """

    def __init__(self, d_model: int, dropout: float = 0.0, norm_first: bool = False,
                 layer_norm_eps: float = 1e-5, *, residual: bool = True,
                 device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.residual = residual
        self.norm = nn.LayerNorm(d_model, eps=layer_norm_eps, device=device, dtype=dtype)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, sublayer: Callable[..., Tensor], *args: Any) -> Tensor:
        """x (B, T, d_model) -> (B, T, d_model)."""
        return residual(x, sublayer, self.norm, self.dropout, self.norm_first, *args,
                        skip=self.residual)

    def extra_repr(self) -> str:
        return f"norm_first={self.norm_first}" + ("" if self.residual else ", residual=False")


class EncoderLayer(nn.Module):
    """Two sublayers: self-attention, then the feed-forward network.

    Args:
        d_model, num_heads, d_ff: sizes, as in the paper.
        dropout: on the attention weights, inside the FFN and on each residual branch.
        norm_first: False for Post-LN (the paper), True for Pre-LN.
        layer_norm_eps, device, dtype: as in ``torch.nn.TransformerEncoderLayer``.
        residual: False drops every skip connection (an ablation; norms stay in place).
        scale_scores: False leaves the attention scores undivided by sqrt(d_k) (an ablation).
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0,
                 norm_first: bool = False, layer_norm_eps: float = 1e-5, *,
                 residual: bool = True, scale_scores: bool = True,
                 device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        factory: dict[str, Any] = {"device": device, "dtype": dtype}
        sublayer = (d_model, dropout, norm_first, layer_norm_eps)
        self.norm_first = norm_first
        self.self_attn = _attention(d_model, num_heads, dropout, scale_scores, factory)
        self.ffn = FeedForward(d_model, d_ff, dropout, **factory)
        self.sublayer1 = ResidualSublayer(*sublayer, residual=residual, **factory)
        self.sublayer2 = ResidualSublayer(*sublayer, residual=residual, **factory)

    def forward(self, x: Tensor, *, mask: Tensor | None = None) -> Tensor:
        """x (B, S, d_model) -> (B, S, d_model); mask broadcastable to (B, h, S, S),
        True = may attend (keyword-only: torch's positional src_mask means the opposite)."""
        x = self.sublayer1(x, lambda y: self.self_attn(y, y, y, mask=mask, need_weights=False)[0])
        out: Tensor = self.sublayer2(x, self.ffn)
        return out


class DecoderLayer(nn.Module):
    """Three sublayers: masked self-attention, cross-attention on the memory, feed-forward.

    Args: as :class:`EncoderLayer`.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0,
                 norm_first: bool = False, layer_norm_eps: float = 1e-5, *,
                 residual: bool = True, scale_scores: bool = True,
                 device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        factory: dict[str, Any] = {"device": device, "dtype": dtype}
        sublayer = (d_model, dropout, norm_first, layer_norm_eps)
        self.norm_first = norm_first
        self.self_attn = _attention(d_model, num_heads, dropout, scale_scores, factory)
        self.cross_attn = _attention(d_model, num_heads, dropout, scale_scores, factory)
        self.ffn = FeedForward(d_model, d_ff, dropout, **factory)
        self.sublayer1 = ResidualSublayer(*sublayer, residual=residual, **factory)
        self.sublayer2 = ResidualSublayer(*sublayer, residual=residual, **factory)
        self.sublayer3 = ResidualSublayer(*sublayer, residual=residual, **factory)

    def forward(self, x: Tensor, memory: Tensor, *, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, cache: tuple[KVCache, KVCache] | None = None,
                tgt_is_causal: bool = False) -> Tensor:
        """x (B, T, d_model), memory (B, S, d_model) -> (B, T, d_model).

        tgt_mask broadcastable to (B, h, T, T_past + T), memory_mask to (B, h, T, S), both
        True = may attend; cache: (self-attention cache, static cross-attention cache) for
        incremental decoding. tgt_is_causal=True (with no tgt_mask): the self-attention is
        causal, without a mask tensor.
        """
        self_cache, cross_cache = cache if cache is not None else (None, None)
        x = self.sublayer1(x, lambda y: self.self_attn(
            y, y, y, mask=tgt_mask, need_weights=False, cache=self_cache,
            is_causal=tgt_is_causal)[0])
        x = self.sublayer2(x, lambda y: self.cross_attn(
            y, memory, memory, mask=memory_mask, need_weights=False, cache=cross_cache)[0])
        out: Tensor = self.sublayer3(x, self.ffn)
        return out


def _attention(d_model: int, num_heads: int, dropout: float, scale_scores: bool,
               factory: dict[str, Any]) -> MultiHeadAttention:
    """A layer's attention; scale_scores=False (an ablation) leaves q.k undivided by sqrt(d_k)."""
    return MultiHeadAttention(d_model, num_heads, dropout, scale=None if scale_scores else 1.0,
                              **factory)
