"""Shared helpers for the labformer unit tests (not a conftest: plain functions)."""

from __future__ import annotations

import torch
from torch import Tensor

ATOL = 1e-5


def random_mask(*shape: int, generator: torch.Generator | None = None, p: float = 0.5) -> Tensor:
    """Random bool mask (True = may attend) with at least one True in every last-axis row."""
    mask = torch.rand(*shape, generator=generator) < p
    first = torch.randint(0, shape[-1], shape[:-1], generator=generator)
    mask.scatter_(-1, first.unsqueeze(-1), True)  # guarantees one allowed key per row
    return mask


def assert_close(a: Tensor, b: Tensor, atol: float = ATOL, rtol: float = 0.0) -> None:
    """torch.testing.assert_close with the absolute tolerance used across the suite."""
    torch.testing.assert_close(a, b, atol=atol, rtol=rtol)


def not_close(a: Tensor, b: Tensor, atol: float = 1e-4) -> bool:
    """True when the tensors differ by more than ``atol`` somewhere."""
    return bool((a - b).abs().max() > atol)
