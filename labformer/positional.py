"""Positional encodings: attention alone cannot tell word order, so positions are added to it.

PE[pos, 2i] = sin(pos / 10000^(2i / d_model)), PE[pos, 2i + 1] = cos(pos / 10000^(2i / d_model))
(Vaswani et al. 2017, Section 3.5), or a learned table of the same shape, or (an ablation) none.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

__all__ = [
    "sinusoidal_positions",
    "PositionalEncoding",
    "LearnedPositionalEncoding",
    "NoPositionalEncoding",
    "RotaryEmbedding",
]


def sinusoidal_positions(
    max_len: int,
    d_model: int,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> Tensor:
    """The (max_len, d_model) sinusoidal table: even columns sine, odd columns cosine.

    Computed in float64 and then cast to ``dtype`` (default: torch's default dtype, float32).
    """
    if max_len <= 0 or d_model <= 0 or d_model % 2 != 0:
        raise ValueError(
            f"need max_len > 0 and an even d_model > 0, got max_len={max_len}, d_model={d_model}"
        )
    f64: dict[str, Any] = {"device": device, "dtype": torch.float64}
    pos = torch.arange(max_len, **f64)[:, None]  # (max_len, 1)
    # Frequencies 1 / 10000^(2i/d), in float64 so that the table is exact in the final dtype.
    freq = torch.exp(torch.arange(0, d_model, 2, **f64) * (-math.log(10000.0) / d_model))
    table = torch.empty(max_len, d_model, **f64)
    table[:, 0::2] = torch.sin(pos * freq)  # (max_len, d_model / 2)
    table[:, 1::2] = torch.cos(pos * freq)
    return table.to(dtype or torch.get_default_dtype())


class _Positions(nn.Module):
    """Shared forward: add rows offset..offset+T of a (max_len, d_model) table, then dropout."""

    def __init__(
        self,
        d_model: int,
        max_len: int = 512,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.dropout = nn.Dropout(dropout)

    def table(self) -> Tensor | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """x (B, T, d_model) -> x + PE[offset : offset + T]; ``offset`` > 0 in cached decoding."""
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"expected (B, T, {self.d_model}), got {tuple(x.shape)}")
        T = x.shape[1]
        if offset < 0 or offset + T > self.max_len:
            raise ValueError(
                f"positions {offset}..{offset + T - 1} exceed max_len={self.max_len}; "
                "build the model with a larger max_len"
            )
        table = self.table()
        out: Tensor = self.dropout(x if table is None else x + table[offset : offset + T])
        return out


class PositionalEncoding(_Positions):
    """Adds the fixed sinusoidal table (a buffer: moves with the model, never trained; rebuilt
    rather than saved in the state dict)."""

    pe: Tensor

    def __init__(
        self,
        d_model: int,
        max_len: int = 512,
        dropout: float = 0.0,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(d_model, max_len, dropout)
        table = sinusoidal_positions(max_len, d_model, device=device, dtype=dtype)
        self.register_buffer("pe", table, persistent=False)

    def table(self) -> Tensor:
        return self.pe


class LearnedPositionalEncoding(_Positions):
    """Adds a trained (max_len, d_model) table, one vector per position (as in BERT and GPT)."""

    def __init__(
        self,
        d_model: int,
        max_len: int = 512,
        dropout: float = 0.0,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        if max_len <= 0 or d_model <= 0:
            raise ValueError(f"need positive max_len and d_model, got {max_len}, {d_model}")
        super().__init__(d_model, max_len, dropout)
        self.embedding = nn.Embedding(max_len, d_model, device=device, dtype=dtype)
        nn.init.normal_(self.embedding.weight, std=0.02)

    def table(self) -> Tensor:
        return self.embedding.weight


class NoPositionalEncoding(_Positions):
    """No position signal at all, only the dropout (an ablation: without positions, attention
    cannot tell word order). ``max_len`` still bounds the lengths, as in the other two."""

    def __init__(
        self,
        d_model: int,
        max_len: int = 512,
        dropout: float = 0.0,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        # device and dtype: the constructor the other two have; with no table, nothing to place.
        del device, dtype
        super().__init__(d_model, max_len, dropout)

    def table(self) -> None:
        return None


class RotaryEmbedding(nn.Module):
    """Rotary position embedding, RoPE (Su et al. 2021), for queries and keys of one head size.

    Nothing is added to the embeddings. Inside attention, after the projections, the pair of
    dimensions (2i, 2i + 1) of the query or key at position p is rotated by the angle
    p * omega_i, with the frequencies omega_i of the sinusoidal table (chapter 5): the angles
    are read from ``sinusoidal_positions(max_len, head_dim)``, whose even columns are sin and
    odd columns cos of exactly these angles. Then (R_p q) . (R_s k) = q . R_(s - p) k: the
    score depends on the positions only through their offset. Values are never rotated.
    """

    cos: Tensor
    sin: Tensor

    def __init__(
        self,
        head_dim: int,
        max_len: int = 512,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if head_dim <= 0 or head_dim % 2:
            raise ValueError(f"RoPE rotates pairs of dimensions: head_dim must be even and "
                             f"positive, got {head_dim}")
        self.head_dim, self.max_len = head_dim, max_len
        table = sinusoidal_positions(max_len, head_dim, device=device, dtype=dtype)
        # Buffers (move with the model, rebuilt rather than saved), (max_len, head_dim / 2).
        self.register_buffer("sin", table[:, 0::2].contiguous(), persistent=False)
        self.register_buffer("cos", table[:, 1::2].contiguous(), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """x (..., T, head_dim), e.g. heads (B, h, T, d_k), at positions offset..offset+T-1 ->
        the same shape, each pair (2i, 2i + 1) rotated by position * omega_i."""
        if x.dim() < 2 or x.shape[-1] != self.head_dim:
            raise ValueError(f"expected (..., T, {self.head_dim}), got {tuple(x.shape)}")
        T = x.shape[-2]
        if offset < 0 or offset + T > self.max_len:
            raise ValueError(
                f"positions {offset}..{offset + T - 1} exceed max_len={self.max_len}; "
                "build the model with a larger max_len"
            )
        cos = self.cos[offset : offset + T].to(x.dtype)  # (T, head_dim / 2)
        sin = self.sin[offset : offset + T].to(x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, head_dim / 2) each
        # (even, odd) -> (even cos - odd sin, even sin + odd cos), interleaved back
        rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
        return rotated.flatten(-2)  # (..., T, head_dim / 2, 2) -> (..., T, head_dim)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, max_len={self.max_len}"
