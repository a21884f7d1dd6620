"""Encoder and decoder layers (Vaswani et al. 2017, Figure 1), in Post-LN and Pre-LN form.

Each sublayer is wrapped in a residual connection and a LayerNorm. The paper normalises after
the residual sum (Post-LN, ``norm_first=False``); Xiong et al. (2020) normalise the sublayer's
input instead (Pre-LN, ``norm_first=True``), which trains without warm-up. Both are here, and
both match ``torch.nn.TransformerEncoderLayer`` / ``TransformerDecoderLayer`` in the tests.
"""

from __future__ import annotations

from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from .multihead import KVCache, MultiHeadAttention

__all__ = ["FeedForward", "residual", "EncoderLayer", "DecoderLayer"]


class FeedForward(nn.Module):
    """Position-wise feed-forward network: Linear(d_model, d_ff), ReLU, dropout, Linear back."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """x (B, T, d_model) -> (B, T, d_model), each position independently."""
        return self.linear2(self.dropout(F.relu(self.linear1(x))))


def residual(
    x: Tensor,
    sublayer: Callable[[Tensor], Tensor],
    norm: nn.Module,
    dropout: nn.Module,
    norm_first: bool,
) -> Tensor:
    """Post-LN: norm(x + sublayer(x)); Pre-LN: x + sublayer(norm(x)). Dropout on the branch."""
    if norm_first:
        return x + dropout(sublayer(norm(x)))
    return norm(x + dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    """Two sublayers: self-attention, then the feed-forward network."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """x (B, S, d_model), mask broadcastable to (B, h, S, S), True = may attend."""

        def attend(y: Tensor) -> Tensor:
            return self.self_attn(y, y, y, mask, need_weights=False)[0]

        x = residual(x, attend, self.norm1, self.dropout, self.norm_first)
        return residual(x, self.ffn, self.norm2, self.dropout, self.norm_first)

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> EncoderLayer:
        """A copy of ``torch.nn.TransformerEncoderLayer`` (ReLU activation, batch_first)."""
        return _from_torch(cls, layer).to(layer.linear1.weight.device)


class DecoderLayer(nn.Module):
    """Three sublayers: masked self-attention, cross-attention on the memory, feed-forward."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: tuple[KVCache, KVCache] | None = None,
    ) -> Tensor:
        """x (B, T, d_model), memory (B, S, d_model) -> (B, T, d_model).

        tgt_mask broadcastable to (B, h, T, T_past + T), memory_mask to (B, h, T, S);
        cache: (self-attention cache, static cross-attention cache) for incremental decoding.
        """
        self_cache, cross_cache = cache if cache is not None else (None, None)

        def self_attend(y: Tensor) -> Tensor:
            return self.self_attn(y, y, y, tgt_mask, need_weights=False, cache=self_cache)[0]

        def cross_attend(y: Tensor) -> Tensor:
            out = self.cross_attn(
                y, memory, memory, memory_mask, need_weights=False, cache=cross_cache
            )
            return out[0]

        x = residual(x, self_attend, self.norm1, self.dropout, self.norm_first)
        x = residual(x, cross_attend, self.norm2, self.dropout, self.norm_first)
        return residual(x, self.ffn, self.norm3, self.dropout, self.norm_first)

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> DecoderLayer:
        """A copy of ``torch.nn.TransformerDecoderLayer`` (ReLU activation, batch_first)."""
        new = _from_torch(cls, layer)
        new.cross_attn = MultiHeadAttention.from_torch(layer.multihead_attn)
        new.norm3.load_state_dict(layer.norm3.state_dict())
        return new.to(layer.linear1.weight.device)


def _from_torch(cls: type, layer: nn.Module) -> nn.Module:
    """The parts encoder and decoder layers share: sizes, self-attention, FFN, norms 1 and 2."""
    if getattr(layer, "activation", None) is not F.relu:
        raise ValueError("only ReLU layers can be copied (labformer's FeedForward uses ReLU)")
    attn = layer.self_attn
    if not attn.batch_first:
        raise ValueError("copy a batch_first=True layer: labformer is batch first")
    new = cls(
        attn.embed_dim,
        attn.num_heads,
        layer.linear1.out_features,
        dropout=layer.dropout.p,
        norm_first=layer.norm_first,
        layer_norm_eps=layer.norm1.eps,
    )
    new.self_attn = MultiHeadAttention.from_torch(attn)
    new.ffn.linear1.load_state_dict(layer.linear1.state_dict())
    new.ffn.linear2.load_state_dict(layer.linear2.state_dict())
    new.norm1.load_state_dict(layer.norm1.state_dict())
    new.norm2.load_state_dict(layer.norm2.state_dict())
    return new
