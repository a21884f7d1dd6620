"""Copies of ``torch.nn`` modules as labformer modules, with the same weights.

The tests and chapters 4 and 7 check labformer against PyTorch's own layers this way: copy a
``torch.nn.MultiheadAttention`` (:func:`mha_from_torch`), ``TransformerEncoderLayer``
(:func:`encoder_layer_from_torch`) or ``TransformerDecoderLayer``
(:func:`decoder_layer_from_torch`), feed both the same input, compare. Each copy lives on the
original's device and in its dtype.
"""

from __future__ import annotations

from typing import TypeVar

import torch
import torch.nn.functional as F
from torch import nn

from .layers import DecoderLayer, EncoderLayer
from .multihead import MultiHeadAttention

__all__ = ["mha_from_torch", "encoder_layer_from_torch", "decoder_layer_from_torch"]


def mha_from_torch(m: nn.MultiheadAttention) -> MultiHeadAttention:
    """A copy of ``torch.nn.MultiheadAttention`` on the same device and in the same dtype
    (packed in-projection, no bias_k / add_zero_attn)."""
    if not m._qkv_same_embed_dim or m.bias_k is not None or m.add_zero_attn:
        raise ValueError("only nn.MultiheadAttention with kdim = vdim = embed_dim is supported")
    w_in, b_in = m.in_proj_weight, m.in_proj_bias
    new = MultiHeadAttention(m.embed_dim, m.num_heads, dropout=m.dropout, bias=b_in is not None,
                             device=w_in.device, dtype=w_in.dtype)
    with torch.no_grad():
        for i, proj in enumerate((new.q_proj, new.k_proj, new.v_proj)):
            rows = slice(i * m.embed_dim, (i + 1) * m.embed_dim)  # W^Q, W^K, W^V stacked
            proj.weight.copy_(w_in[rows])
            if b_in is not None:
                proj.bias.copy_(b_in[rows])
        new.out_proj.load_state_dict(m.out_proj.state_dict())
    return new


def encoder_layer_from_torch(layer: nn.TransformerEncoderLayer) -> EncoderLayer:
    """A copy of ``nn.TransformerEncoderLayer`` (ReLU, batch_first), same device and dtype."""
    return _layer_from_torch(EncoderLayer, layer)


def decoder_layer_from_torch(layer: nn.TransformerDecoderLayer) -> DecoderLayer:
    """A copy of ``nn.TransformerDecoderLayer`` (ReLU, batch_first), same device and dtype."""
    new = _layer_from_torch(DecoderLayer, layer)
    new.cross_attn = mha_from_torch(layer.multihead_attn)
    new.sublayer3.norm.load_state_dict(layer.norm3.state_dict())
    return new


_Layer = TypeVar("_Layer", EncoderLayer, DecoderLayer)


def _layer_from_torch(
    cls: type[_Layer], layer: nn.TransformerEncoderLayer | nn.TransformerDecoderLayer
) -> _Layer:
    """The parts encoder and decoder layers share: sizes, self-attention, FFN, norms 1 and 2."""
    if getattr(layer, "activation", None) is not F.relu:
        raise ValueError("only ReLU layers can be copied (labformer's FeedForward uses ReLU)")
    attn = layer.self_attn
    if not attn.batch_first:
        raise ValueError("copy a batch_first=True layer: labformer is batch first")
    weight = layer.linear1.weight
    new = cls(attn.embed_dim, attn.num_heads, layer.linear1.out_features,
              dropout=layer.dropout.p, norm_first=layer.norm_first,
              layer_norm_eps=layer.norm1.eps, device=weight.device, dtype=weight.dtype)
    new.self_attn = mha_from_torch(attn)
    new.ffn.linear1.load_state_dict(layer.linear1.state_dict())
    new.ffn.linear2.load_state_dict(layer.linear2.state_dict())
    new.sublayer1.norm.load_state_dict(layer.norm1.state_dict())
    new.sublayer2.norm.load_state_dict(layer.norm2.state_dict())
    return new
