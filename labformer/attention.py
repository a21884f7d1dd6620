"""Attention as soft addressing: score every key against a query, softmax, average the values.

Three ways to score, all returning ``(output, weights)`` so chapters can plot the weights:

* :func:`attention_with_weights`: the Transformer's scaled dot-product attention, Vaswani et
  al. (2017), Eq. 1 (named apart from ``torch.nn.functional.scaled_dot_product_attention``,
  which returns the output only).
* :class:`AdditiveAttention`: Bahdanau et al. (2015), a small MLP on query and key.
* :class:`DotAttention` and :class:`GeneralAttention`: Luong et al. (2015), ``q.k`` and ``q^T W k``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .masks import check_mask

__all__ = [
    "masked_softmax",
    "attend",
    "attention_with_weights",
    "Scorer",
    "AdditiveAttention",
    "DotAttention",
    "GeneralAttention",
]


def masked_softmax(scores: Tensor, mask: Tensor | None) -> Tensor:
    """Softmax over the last axis where ``mask`` is True; rows with no True get all-zero weights.

    Masked scores are set to the dtype's most negative finite value rather than -inf, so a row
    whose keys are all masked yields a finite softmax (and finite gradients) instead of NaN;
    that row is then zeroed, so it contributes nothing.
    """
    if mask is None:
        return scores.softmax(dim=-1)
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return scores.softmax(dim=-1).masked_fill(~mask, 0.0)


def attend(
    scores: Tensor, value: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0
) -> tuple[Tensor, Tensor]:
    """Turn scores into weights and average the values: every scorer in labformer ends here.

    scores (..., T_q, T_k), value (..., T_k, d_v), mask bool (True = may attend) broadcastable to
    the scores. Returns out (..., T_q, d_v) and weights (..., T_q, T_k); ``dropout_p`` drops
    weights (inverted dropout) and is the caller's to set to 0 outside training.
    """
    weights = masked_softmax(scores, mask)  # (..., T_q, T_k)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ value, weights  # (..., T_q, d_v), (..., T_q, T_k)


def attention_with_weights(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
    *,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention, softmax(q k^T / sqrt(d_k)) v (Vaswani et al. 2017, Eq. 1),
    and its weights.

    query (..., T_q, d_k), key (..., T_k, d_k), value (..., T_k, d_v);
    mask bool, True = may attend, broadcastable to (..., T_q, T_k).
    Returns out (..., T_q, d_v) and weights (..., T_q, T_k); ``scale`` defaults to 1/sqrt(d_k).
    """
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise ValueError(
            "query, key and value need at least 2 dims (..., T, d), got "
            f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
        )
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must share the last dim d_k, got query {tuple(query.shape)} "
            f"and key {tuple(key.shape)}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key and value must have the same length T_k, got key {tuple(key.shape)} "
            f"and value {tuple(value.shape)}"
        )
    try:  # leading (batch, head) dims must broadcast, else matmul fails with a RuntimeError
        torch.broadcast_shapes(  # type: ignore[no-untyped-call]
            query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except RuntimeError:
        raise ValueError(
            "query, key and value batch dims do not broadcast, got "
            f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
        ) from None
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    d_k = query.shape[-1]
    scale = 1.0 / math.sqrt(d_k) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale  # (..., T_q, T_k)
    if mask is not None:
        check_mask(mask, scores.shape)
    return attend(scores, value, mask, dropout_p)



def _check_rnn_inputs(query: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None) -> None:
    if query.dim() != 2 or keys.dim() != 3 or values.dim() != 3:
        raise ValueError(
            "expected query (B, d_q), keys (B, S, d_k), values (B, S, d_v); got "
            f"{tuple(query.shape)}, {tuple(keys.shape)}, {tuple(values.shape)}"
        )
    if keys.shape[:2] != values.shape[:2] or query.shape[0] != keys.shape[0]:
        raise ValueError(
            f"batch and length must agree: query {tuple(query.shape)}, keys {tuple(keys.shape)}, "
            f"values {tuple(values.shape)}"
        )
    if mask is not None and (mask.dtype != torch.bool or tuple(mask.shape) != keys.shape[:2]):
        raise ValueError(
            f"mask must be bool (B, S) = {tuple(keys.shape[:2])} with True = real token, "
            f"got {mask.dtype} {tuple(mask.shape)}"
        )


class Scorer(nn.Module):
    """Base of the RNN-era scorers: score each key against one query, then :func:`attend`.

    ``prepare_keys`` is the part of the score that depends on the keys alone; a decoder that
    queries the same memory at every step computes it once and passes it as ``prepared_keys``.
    """

    def prepare_keys(self, keys: Tensor) -> Tensor:
        """keys (B, S, d_k) -> what ``score_prepared`` reads; the keys themselves by default."""
        return keys

    def score_prepared(self, query: Tensor, prepared: Tensor) -> Tensor:  # pragma: no cover
        """query (B, d_q), prepared keys (B, S, .) -> scores (B, S)."""
        raise NotImplementedError

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        """query (B, d_q), keys (B, S, d_k) -> scores (B, S)."""
        return self.score_prepared(query, self.prepare_keys(keys))

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        values: Tensor | None = None,
        *,
        mask: Tensor | None = None,
        prepared_keys: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """query (B, d_q), keys (B, S, d_k), values (B, S, d_v) -> context (B, d_v), weights (B, S).

        mask (B, S) bool, True = real token; prepared_keys: ``self.prepare_keys(keys)``, if known.
        """
        values = keys if values is None else values
        _check_rnn_inputs(query, keys, values, mask)
        prepared = self.prepare_keys(keys) if prepared_keys is None else prepared_keys
        scores = self.score_prepared(query, prepared)  # (B, S)
        context, weights = attend(
            scores.unsqueeze(1), values, None if mask is None else mask.unsqueeze(1)
        )  # (B, 1, d_v), (B, 1, S): one query per row
        return context.squeeze(1), weights.squeeze(1)


class AdditiveAttention(Scorer):
    """Bahdanau et al. (2015): score(q, k) = v^T tanh(W_q q + W_k k)."""

    def __init__(
        self,
        query_dim: int,
        key_dim: int,
        hidden_dim: int,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        factory: dict[str, Any] = {"device": device, "dtype": dtype}
        self.w_query = nn.Linear(query_dim, hidden_dim, bias=False, **factory)
        self.w_key = nn.Linear(key_dim, hidden_dim, bias=True, **factory)
        self.v = nn.Linear(hidden_dim, 1, bias=False, **factory)

    def prepare_keys(self, keys: Tensor) -> Tensor:
        """keys (B, S, d_k) -> W_k k + b (B, S, hidden): independent of the decoder step."""
        projected: Tensor = self.w_key(keys)
        return projected

    def score_prepared(self, query: Tensor, prepared: Tensor) -> Tensor:
        """query (B, d_q), prepared keys (B, S, hidden) -> scores (B, S)."""
        hidden = torch.tanh(self.w_query(query).unsqueeze(1) + prepared)  # (B, S, hidden)
        scores: Tensor = self.v(hidden)
        return scores.squeeze(-1)


class DotAttention(Scorer):
    """Luong et al. (2015), "dot": score(q, k) = q . k (query and key of the same size)."""

    def score_prepared(self, query: Tensor, keys: Tensor) -> Tensor:
        """query (B, d), keys (B, S, d) -> scores (B, S)."""
        if query.shape[-1] != keys.shape[-1]:
            raise ValueError(
                f"dot attention needs query and keys of the same size, got query "
                f"{tuple(query.shape)} and keys {tuple(keys.shape)}"
            )
        return torch.bmm(keys, query.unsqueeze(-1)).squeeze(-1)


class GeneralAttention(Scorer):
    """Luong et al. (2015), "general": score(q, k) = q^T W k."""

    def __init__(
        self,
        query_dim: int,
        key_dim: int,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.w = nn.Linear(key_dim, query_dim, bias=False, device=device, dtype=dtype)

    def prepare_keys(self, keys: Tensor) -> Tensor:
        """keys (B, S, d_k) -> W k (B, S, d_q): independent of the decoder step."""
        projected: Tensor = self.w(keys)
        return projected

    def score_prepared(self, query: Tensor, prepared: Tensor) -> Tensor:
        """query (B, d_q), prepared keys (B, S, d_q) -> scores (B, S)."""
        return torch.bmm(prepared, query.unsqueeze(-1)).squeeze(-1)
