"""Tests the book's verdicts are checked with beside the t-test: an exact sign-flip permutation
test on paired differences, and Holm's step-down procedure across a family of verdicts.

The sign-flip test asks how unusual the mean of paired differences is among the means the same
differences give under every assignment of signs: if the two arms of each pair were exchangeable
(no effect), each difference was as likely to come out with the other sign. It assumes only that
symmetry, not a normal distribution, and is exact: all ``2**n`` sign patterns are counted, for
``n`` up to :data:`MAX_EXACT` pairs.

Holm's procedure controls the chance of at least one false rejection in a family of ``m`` tests
at ``alpha`` (the family-wise error rate), whatever their dependence, and rejects at least what
Bonferroni (each test at ``alpha / m``) rejects.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MAX_EXACT = 20  # 2**20 sign patterns, counted as two halves of 2**10 sums each

__all__ = ["MAX_EXACT", "holm", "holm_adjusted", "sign_flip_p"]


def _half_sums(values: np.ndarray) -> np.ndarray:
    """The sums of ``values`` under all ``2**len(values)`` sign patterns."""
    sums = np.zeros(1)
    for v in values:
        sums = np.concatenate([sums + v, sums - v])
    return sums


def sign_flip_p(diffs: Sequence[float] | np.ndarray, null: float = 0.0) -> float:
    """The exact two-sided p-value of the sign-flip permutation test that the paired differences
    ``diffs`` are centred on ``null``: the share of all ``2**n`` sign patterns of
    ``diffs - null`` whose sum is at least as far from zero as the observed sum (ties counted
    as at least as far, to a relative tolerance of 1e-9).

    The smallest p it can give is ``2 / 2**n`` (every difference of one sign): with 10 pairs
    that is 0.002, so a family's level of, say, 0.05 / 17 = 0.0029 is reachable only from about
    10 pairs on. Raises ValueError for more than :data:`MAX_EXACT` pairs or none.
    """
    d = np.asarray(diffs, dtype=float).ravel() - null
    if d.size == 0 or d.size > MAX_EXACT:
        raise ValueError(f"sign_flip_p counts all 2**n sign patterns for 1 <= n <= {MAX_EXACT} "
                         f"pairs; got n = {d.size}")
    if not np.all(np.isfinite(d)):
        raise ValueError("sign_flip_p needs finite differences")
    observed = abs(d.sum())
    tol = 1e-9 * np.abs(d).sum()
    if observed <= tol:  # a sum of zero: every pattern is at least as far from zero
        return 1.0
    half = d.size // 2
    left, right = _half_sums(d[:half]), np.sort(_half_sums(d[half:]))
    # patterns with |l + r| >= observed: r >= observed - l, or r <= -observed - l (disjoint,
    # as observed > 0)
    upper = right.size - np.searchsorted(right, observed - left - tol, side="left")
    lower = np.searchsorted(right, -observed - left + tol, side="right")
    extreme = int((upper + lower).sum())
    return min(1.0, extreme / 2.0 ** d.size)


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm's adjusted p-values, in the order given: the smallest level of the family at which
    each hypothesis is rejected by the step-down procedure. With the p-values sorted,
    ``p_(1) <= ... <= p_(m)``, the i-th adjusted value is ``max_{j <= i} min(1, (m - j + 1)
    p_(j))``."""
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1 or np.any((p < 0) | (p > 1)) or not np.all(np.isfinite(p)):
        raise ValueError(f"holm needs a list of p-values in [0, 1]; got {p_values!r}")
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled) if m else scaled
    return [float(a) for a in adjusted]


def holm(p_values: Sequence[float], alpha: float = 0.05) -> list[bool]:
    """Which hypotheses Holm's step-down procedure rejects at family-wise level ``alpha``, in
    the order given: compare the smallest p-value with ``alpha / m``, the next with
    ``alpha / (m - 1)``, and so on, stopping at the first that is not below its level."""
    if not 0 < alpha < 1:
        raise ValueError(f"holm needs 0 < alpha < 1; got {alpha}")
    return [a <= alpha for a in holm_adjusted(p_values)]
