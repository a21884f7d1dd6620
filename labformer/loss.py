"""The training loss: label-smoothed cross-entropy that leaves padding out.

Label smoothing (Szegedy et al. 2016; used by Vaswani et al. 2017 with epsilon = 0.1) trains
against the target distribution

    p = (1 - epsilon) * one_hot(y) + epsilon / V

over all V classes, which is PyTorch's convention in ``F.cross_entropy(label_smoothing=)``.
The loss is the cross-entropy H(p, q) = H(p) + KL(p || q) with the model's softmax q, averaged
over the positions whose target is not ``ignore_index`` (padding).

Zero-probability terms follow the convention 0 * log 0 = 0, so a target that puts no mass on a
class never turns the loss into inf or NaN, even where the model's log-probability is -inf.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .masks import check_token_ids
from .special import PAD_ID

__all__ = [
    "LabelSmoothingLoss",
    "entropy",
    "kl_divergence",
    "label_smoothed_cross_entropy",
    "smoothed_targets",
    "soft_cross_entropy",
]

_REDUCTIONS = ("mean", "sum", "none")


def _check_smoothing(smoothing: float) -> None:
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")


def _check_logits_target(logits: Tensor, target: Tensor) -> None:
    if not logits.is_floating_point() or logits.dim() < 2:
        raise ValueError(f"logits must be floating point (..., V), got {logits.dtype} "
                         f"{tuple(logits.shape)}")
    if target.is_floating_point() or target.shape != logits.shape[:-1]:
        raise ValueError(f"target must hold integer ids of shape {tuple(logits.shape[:-1])} "
                         f"for logits {tuple(logits.shape)}, got {target.dtype} "
                         f"{tuple(target.shape)}")


def _kept_targets(target: Tensor, ignore_index: int | None, num_classes: int
                  ) -> tuple[Tensor, Tensor]:
    """(positions that count, target with a valid id at ignored positions); checks the ids."""
    keep = torch.ones_like(target, dtype=torch.bool) if ignore_index is None \
        else target != ignore_index
    safe_target = torch.where(keep, target, torch.zeros_like(target))  # any valid id at pads
    check_token_ids(safe_target, num_classes, "target ids")
    return keep, safe_target


def _xlogy(p: Tensor, log_q: Tensor) -> Tensor:
    """p * log_q elementwise, 0 where p == 0 (even if log_q is -inf)."""
    return torch.where(p > 0, p * log_q, torch.zeros((), dtype=log_q.dtype, device=log_q.device))


def label_smoothed_cross_entropy(
    logits: Tensor,
    target: Tensor,
    smoothing: float = 0.0,
    ignore_index: int | None = PAD_ID,
    reduction: str = "mean",
) -> Tensor:
    """Cross-entropy against label-smoothed targets; logits (..., V), target (...) -> loss.

    Equals ``F.cross_entropy(logits.reshape(-1, V), target.reshape(-1), label_smoothing=,
    ignore_index=)``. ``reduction="mean"`` averages over non-ignored positions (0.0 if there
    are none, where PyTorch gives NaN); ``"none"`` returns (...) with zeros at ignored positions.
    """
    _check_logits_target(logits, target)
    _check_smoothing(smoothing)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    V = logits.shape[-1]
    keep, safe_target = _kept_targets(target, ignore_index, V)  # (...) each
    log_q = F.log_softmax(logits.float(), dim=-1)  # (..., V)
    nll = -log_q.gather(-1, safe_target.unsqueeze(-1)).squeeze(-1)  # (...)
    loss = (1.0 - smoothing) * nll
    if smoothing > 0:
        # The uniform part: epsilon/V on every class, i.e. epsilon * mean over classes of -log q.
        loss = loss - smoothing * log_q.mean(dim=-1)
    # where (not multiply) so that a non-finite value at a padded position cannot leak in.
    loss = torch.where(keep, loss, torch.zeros_like(loss))  # float32
    if reduction == "none":
        return loss.to(logits.dtype)
    # Summed in float32, cast once at the end: a float16 sum of many tokens loses precision.
    total = loss.sum()
    if reduction == "mean":
        total = total / keep.sum().clamp(min=1)
    return total.to(logits.dtype)


class LabelSmoothingLoss(nn.Module):
    """Module form of :func:`label_smoothed_cross_entropy`: (logits (..., V), target (...))."""

    def __init__(self, smoothing: float = 0.1, ignore_index: int | None = PAD_ID,
                 reduction: str = "mean") -> None:
        super().__init__()
        _check_smoothing(smoothing)
        if reduction not in _REDUCTIONS:
            raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
        self.smoothing = smoothing
        self.ignore_index = ignore_index
        self.reduction = reduction

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        """logits (..., V), target (...) -> scalar (or (...) with reduction='none')."""
        return label_smoothed_cross_entropy(logits, target, self.smoothing, self.ignore_index,
                                            self.reduction)

    def extra_repr(self) -> str:
        return f"smoothing={self.smoothing}, ignore_index={self.ignore_index}"


def smoothed_targets(
    target: Tensor, num_classes: int, smoothing: float = 0.0,
    ignore_index: int | None = PAD_ID,
) -> Tensor:
    """The target distribution p: target (...) ids -> (..., num_classes); rows sum to 1.

    Rows at ``ignore_index`` are all zero: padding is not a prediction to learn.
    """
    _check_smoothing(smoothing)
    if target.is_floating_point():
        raise ValueError(f"target must hold integer ids, got {target.dtype}")
    if num_classes <= 0:
        raise ValueError(f"num_classes must be positive, got {num_classes}")
    keep, safe_target = _kept_targets(target, ignore_index, num_classes)
    p = F.one_hot(safe_target, num_classes).float() * (1.0 - smoothing)  # (..., V)
    p = p + smoothing / num_classes
    return p * keep.unsqueeze(-1)


def entropy(p: Tensor, dim: int = -1) -> Tensor:
    """H(p) = -sum p log p over ``dim`` (0 log 0 = 0); p (..., V) -> (...)."""
    return -_xlogy(p, torch.log(p)).sum(dim) + 0.0  # + 0.0 turns -0.0 into 0.0


def soft_cross_entropy(p: Tensor, log_q: Tensor, dim: int = -1) -> Tensor:
    """H(p, q) = -sum p log q over ``dim`` for log-probabilities log_q; (..., V) -> (...)."""
    if p.shape != log_q.shape:
        raise ValueError(f"p and log_q must have the same shape, got {tuple(p.shape)} and "
                         f"{tuple(log_q.shape)}")
    return -_xlogy(p, log_q).sum(dim)


def kl_divergence(p: Tensor, log_q: Tensor, dim: int = -1) -> Tensor:
    """KL(p || q) = sum p (log p - log q) over ``dim``; >= 0, so H(p, q) = H(p) + KL(p || q)."""
    if p.shape != log_q.shape:
        raise ValueError(f"p and log_q must have the same shape, got {tuple(p.shape)} and "
                         f"{tuple(log_q.shape)}")
    return _xlogy(p, torch.log(p) - log_q).sum(dim)
