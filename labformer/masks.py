"""Attention masks: the one convention used everywhere in labformer.

A mask is a boolean tensor, **True = may attend**, broadcastable to the attention scores
``(B, h, T_q, T_k)``. This is the convention of
``torch.nn.functional.scaled_dot_product_attention``.
PyTorch's ``nn.MultiheadAttention`` uses the opposite for ``key_padding_mask`` (True = ignore);
:func:`from_key_padding_mask` is the only place that converts between the two.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .special import PAD_ID

__all__ = [
    "causal_mask",
    "padding_mask",
    "from_key_padding_mask",
    "combine_masks",
    "check_mask",
    "check_special_ids",
    "check_token_ids",
]


def causal_mask(size: int, device: torch.device | str | None = None) -> Tensor:
    """(T, T) mask where position i may attend to positions 0..i (lower triangle and diagonal)."""
    if not isinstance(size, int) or size < 1:
        raise ValueError(f"causal_mask needs a positive int size, got {size!r}")
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


def padding_mask(tokens: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """(B, 1, 1, T) mask that is True on the real (non-padding) tokens of ``tokens`` (B, T)."""
    if tokens.dim() != 2:
        raise ValueError(
            f"padding_mask expects token ids of shape (B, T), got {tuple(tokens.shape)}"
        )
    if tokens.is_floating_point():
        raise ValueError(f"padding_mask expects integer token ids, got dtype {tokens.dtype}")
    return (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, T): broadcast over heads and queries


def check_special_ids(ids: dict[str, int], vocab_sizes: dict[str, int]) -> None:
    """Raise ValueError unless every special id (PAD, BOS, ...) lies in every vocabulary and no
    two are equal: a PAD that shares BOS's id would mask out every sentence's first token.

    ids: ``{"pad_id": 0, "bos_id": 1, ...}``; vocab_sizes: ``{"src_vocab_size": V_s, ...}``.
    """
    seen: dict[int, str] = {}
    for name, value in ids.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an int, got {value!r}")
        for vocab, size in vocab_sizes.items():
            if not 0 <= value < size:
                raise ValueError(f"{name}={value} is not a valid id for {vocab}={size}")
        if value in seen:
            raise ValueError(f"{name} and {seen[value]} are both {value}; special ids must differ")
        seen[value] = name


def from_key_padding_mask(key_padding_mask: Tensor) -> Tensor:
    """PyTorch's key_padding_mask (B, T_k), True = ignore -> (B, 1, 1, T_k), True = may attend."""
    if key_padding_mask.dim() != 2 or key_padding_mask.dtype != torch.bool:
        raise ValueError(
            "key_padding_mask must be a bool tensor of shape (B, T_k), got "
            f"{key_padding_mask.dtype} {tuple(key_padding_mask.shape)}"
        )
    return ~key_padding_mask[:, None, None, :]


def combine_masks(*masks: Tensor | None) -> Tensor | None:
    """Logical AND of the given masks (broadcasting); Nones are skipped, all None gives None."""
    out = None
    for m in masks:
        if m is None:
            continue
        if m.dtype != torch.bool:
            raise ValueError(f"masks must be bool (True = may attend), got dtype {m.dtype}")
        out = m if out is None else out & m
    return out


def check_mask(mask: Tensor, scores_shape: tuple[int, ...] | torch.Size) -> None:
    """Raise ValueError unless ``mask`` is boolean and broadcastable to ``scores_shape``."""
    if not isinstance(mask, Tensor):
        raise ValueError(f"mask must be a torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise ValueError(
            f"mask must be a bool tensor (True = may attend), got dtype {mask.dtype} "
            f"with shape {tuple(mask.shape)}"
        )
    shape = tuple(scores_shape)
    ok = mask.dim() <= len(shape) and all(
        m in (1, s) for m, s in zip(reversed(mask.shape), reversed(shape), strict=False)
    )
    if not ok:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the attention scores "
            f"{shape} (expected something like (B, 1, T_q or 1, T_k))"
        )


def check_token_ids(tokens: Tensor, size: int, what: str = "token ids") -> None:
    """Raise ValueError unless every id of ``tokens`` lies in [0, size).

    The check reads the ids' range back to the host, which on a GPU would wait for every
    queued kernel, at every forward. So it runs on CPU tensors only; on CUDA the same condition
    is a device-side assertion (``torch._assert_async``) that never stops the host; on other
    devices the indexing op reports bad ids itself.
    """
    if not tokens.numel():
        return
    if tokens.device.type == "cpu":
        _check_ids_on_host(tokens, size, what)
    elif tokens.device.type == "cuda":
        torch._assert_async(((tokens >= 0) & (tokens < size)).all())


def _check_ids_on_host(tokens: Tensor, size: int, what: str) -> None:
    low, high = torch.aminmax(tokens)
    if low < 0 or high >= size:
        raise ValueError(f"{what} must lie in [0, {size}), got {int(low)}..{int(high)}")
