"""Encoder and decoder layers (Vaswani et al. 2017, Figure 1), in Post-LN and Pre-LN form.

Each sublayer is wrapped in a residual connection and a LayerNorm. The paper normalises after
the residual sum (Post-LN, ``norm_first=False``); Xiong et al. (2020) normalise the sublayer's
input instead (Pre-LN, ``norm_first=True``), which trains without warm-up. Both are here, and
both match ``torch.nn.TransformerEncoderLayer`` / ``TransformerDecoderLayer`` in the tests.
Two switches exist for ablations only: ``residual=False`` drops the skip connection (the
sublayer's output replaces its input) and ``scale_scores=False`` drops the 1/sqrt(d_k).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .multihead import KVCache, MultiHeadAttention

__all__ = ["FeedForward", "residual", "ResidualSublayer", "EncoderLayer", "DecoderLayer",
           "RMSNorm", "SwiGLU"]

class FeedForward(nn.Module):
    """Position-wise feed-forward network: Linear(d_model, d_ff), ReLU, dropout, Linear back."""

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
        self.linear1 = nn.Linear(d_model, d_ff, device=device, dtype=dtype)
        self.linear2 = nn.Linear(d_ff, d_model, device=device, dtype=dtype)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """x (B, T, d_model) -> (B, T, d_model), each position independently."""
        out: Tensor = self.linear2(self.dropout(F.relu(self.linear1(x))))
        return out


def residual(
    x: Tensor,
    sublayer: Callable[..., Tensor],
    norm: Callable[[Tensor], Tensor],
    dropout: Callable[[Tensor], Tensor],
    norm_first: bool,
    *args: Any,
    skip: bool = True,
) -> Tensor:
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

    def __init__(
        self,
        d_model: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        *,
        residual: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
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


class _LayerBase(nn.Module):
    """What both layer types share: their arguments, and building the sublayers in order
    (self-attention, cross-attention for a decoder layer, the FFN, one residual sublayer
    around each)."""

    _cross_attention: ClassVar[bool] = False  # True in DecoderLayer

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        *,
        residual: bool = True,
        scale_scores: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        factory: dict[str, Any] = {"device": device, "dtype": dtype}
        self.norm_first = norm_first
        attn: dict[str, Any] = {"dropout": dropout, "scale": None if scale_scores else 1.0}
        self.self_attn = MultiHeadAttention(d_model, num_heads, **attn, **factory)
        if self._cross_attention:
            self.cross_attn = MultiHeadAttention(d_model, num_heads, **attn, **factory)
        self.ffn = FeedForward(d_model, d_ff, dropout, **factory)
        sub = (d_model, dropout, norm_first, layer_norm_eps)
        sub_kw: dict[str, Any] = {"residual": residual, **factory}
        self.sublayer1 = ResidualSublayer(*sub, **sub_kw)  # around self-attention
        # Encoder: around the FFN. Decoder: around cross-attention, then sublayer3, the FFN.
        self.sublayer2 = ResidualSublayer(*sub, **sub_kw)
        if self._cross_attention:
            self.sublayer3 = ResidualSublayer(*sub, **sub_kw)


class EncoderLayer(_LayerBase):
    """Two sublayers: self-attention, then the feed-forward network.

    Args:
        d_model, num_heads, d_ff: sizes, as in the paper.
        dropout: on the attention weights, inside the FFN and on each residual branch.
        norm_first: False for Post-LN (the paper), True for Pre-LN.
        layer_norm_eps, device, dtype: as in ``torch.nn.TransformerEncoderLayer``.
        residual: False drops every skip connection (an ablation; norms stay in place).
        scale_scores: False leaves the attention scores undivided by sqrt(d_k) (an ablation).
    """

    def forward(self, x: Tensor, *, mask: Tensor | None = None) -> Tensor:
        """x (B, S, d_model) -> (B, S, d_model); mask broadcastable to (B, h, S, S),
        True = may attend (keyword-only: torch's positional src_mask means the opposite)."""
        x = self.sublayer1(x, self._sa_block, mask)
        out: Tensor = self.sublayer2(x, self.ffn)
        return out

    def _sa_block(self, x: Tensor, mask: Tensor | None) -> Tensor:
        out: Tensor = self.self_attn(x, x, x, mask=mask, need_weights=False)[0]
        return out

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> EncoderLayer:
        """A copy of ``nn.TransformerEncoderLayer`` (ReLU, batch_first), same device and dtype."""
        return _from_torch(cls, layer)


class DecoderLayer(_LayerBase):
    """Three sublayers: masked self-attention, cross-attention on the memory, feed-forward.

    Args: as :class:`EncoderLayer`.
    """

    _cross_attention = True

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        *,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: tuple[KVCache, KVCache] | None = None,
        tgt_is_causal: bool = False,
    ) -> Tensor:
        """x (B, T, d_model), memory (B, S, d_model) -> (B, T, d_model).

        tgt_mask broadcastable to (B, h, T, T_past + T), memory_mask to (B, h, T, S), both
        True = may attend; cache: (self-attention cache, static cross-attention cache) for
        incremental decoding. tgt_is_causal=True (with no tgt_mask): the self-attention is
        causal, without a mask tensor.
        """
        self_cache, cross_cache = cache if cache is not None else (None, None)
        x = self.sublayer1(x, self._sa_block, tgt_mask, self_cache, tgt_is_causal)
        x = self.sublayer2(x, self._ca_block, memory, memory_mask, cross_cache)
        out: Tensor = self.sublayer3(x, self.ffn)
        return out

    def _sa_block(self, x: Tensor, mask: Tensor | None, cache: KVCache | None,
                  is_causal: bool = False) -> Tensor:
        out: Tensor = self.self_attn(x, x, x, mask=mask, need_weights=False, cache=cache,
                                     is_causal=is_causal)[0]
        return out

    def _ca_block(
        self, x: Tensor, memory: Tensor, mask: Tensor | None, cache: KVCache | None
    ) -> Tensor:
        out: Tensor = self.cross_attn(x, memory, memory, mask=mask, need_weights=False,
                                      cache=cache)[0]
        return out

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> DecoderLayer:
        """A copy of ``nn.TransformerDecoderLayer`` (ReLU, batch_first), same device and dtype."""
        new = _from_torch(cls, layer)
        new.cross_attn = MultiHeadAttention.from_torch(layer.multihead_attn)
        new.sublayer3.norm.load_state_dict(layer.norm3.state_dict())
        return new


_Layer = TypeVar("_Layer", EncoderLayer, DecoderLayer)


def _from_torch(
    cls: type[_Layer], layer: nn.TransformerEncoderLayer | nn.TransformerDecoderLayer
) -> _Layer:
    """The parts encoder and decoder layers share: sizes, self-attention, FFN, norms 1 and 2."""
    if getattr(layer, "activation", None) is not F.relu:
        raise ValueError("only ReLU layers can be copied (labformer's FeedForward uses ReLU)")
    attn = layer.self_attn
    if not attn.batch_first:
        raise ValueError("copy a batch_first=True layer: labformer is batch first")
    weight = layer.linear1.weight
    new = cls(
        attn.embed_dim,
        attn.num_heads,
        layer.linear1.out_features,
        dropout=layer.dropout.p,
        norm_first=layer.norm_first,
        layer_norm_eps=layer.norm1.eps,
        device=weight.device,
        dtype=weight.dtype,
    )
    new.self_attn = MultiHeadAttention.from_torch(attn)
    new.ffn.linear1.load_state_dict(layer.linear1.state_dict())
    new.ffn.linear2.load_state_dict(layer.linear2.state_dict())
    new.sublayer1.norm.load_state_dict(layer.norm1.state_dict())
    new.sublayer2.norm.load_state_dict(layer.norm2.state_dict())
    return new


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
