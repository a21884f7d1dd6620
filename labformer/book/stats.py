"""Tests the book's verdicts are checked with beside the t-test: an exact sign-flip permutation
test on paired differences, and Holm's step-down procedure across a family of verdicts.

The sign-flip test asks how unusual the mean of paired differences is among the means the same
differences give under every assignment of signs: if the two arms of each pair were exchangeable
(no effect), each difference was as likely to come out with the other sign. It assumes only that
symmetry, not a normal distribution, and is exact: all ``2**n`` sign patterns are counted, for
``n`` up to :data:`MAX_EXACT` pairs.

:func:`registered_verdict` is the analysis the sweeps registered before their runs
(``book/data/plans/*.json``, "analysis"): each verdict read twice, by Student's t and by the
sign-flip test, on the same paired differences, at one level of the book-wide family.

Holm's procedure controls the chance of at least one false rejection in a family of ``m`` tests
at ``alpha`` (the family-wise error rate), whatever their dependence, and rejects at least what
Bonferroni (each test at ``alpha / m``) rejects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAX_EXACT = 20  # 2**20 sign patterns, counted as two halves of 2**10 sums each

__all__ = ["MAX_EXACT", "RegisteredVerdict", "holm", "holm_adjusted", "registered_verdict",
           "sign_flip_p"]


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


def _one_sided_flip_p(shifted: np.ndarray, rejecting_side: int) -> float:
    """One-sided sign-flip p of the shifted differences: half the two-sided p when their mean
    lies on the rejecting side (-1: below zero, +1: above), and 1 otherwise."""
    mean = float(shifted.mean())
    if mean * rejecting_side <= 0:
        return 1.0
    return sign_flip_p(shifted) / 2


@dataclass(frozen=True)
class RegisteredVerdict:
    """One verdict by the registered analysis: both tests' labels and p-values."""

    verdict: str  # the label both tests give, or "depends on the test"
    t_label: str  # "higher", "lower", "within", "open" (labformer.book.notebook.decide)
    flip_label: str
    mean: float
    se: float
    n: int
    delta: float
    level: float  # the family's alpha / k
    t_p: float  # two-sided p of no difference, Student's t
    flip_p: float  # the same, exact sign-flip
    flip_equivalence_p: float  # the larger of the two one-sided sign-flip p-values of +-delta


def registered_verdict(diffs: Sequence[float] | np.ndarray, delta: float, k: int,
                       alpha: float = 0.05) -> RegisteredVerdict:
    """The registered analysis of a sweep's paired differences (book/data/plans/README.md):
    every verdict computed twice, at level ``a = alpha / k`` (Bonferroni over the book's ``k``
    verdicts).

    (a) Student's t, the book's rule (:func:`labformer.book.notebook.decide`): a difference
    when the two-sided p is at most ``a``, else equivalence when ``|mean| + t_{1-a, n-1} SE <
    delta`` (the two one-sided tests). (b) The exact sign-flip test (:func:`sign_flip_p`): the
    two-sided p of no difference; equivalence by the two one-sided sign-flip tests of
    ``d - delta < 0`` and ``d + delta > 0``, each one-sided p being half the two-sided p of
    the shifted differences when their mean lies on the rejecting side, else 1.

    Each test's label: "higher" / "lower" (the mean's sign), else "within", else "open". The
    verdict is that label when both tests agree, and "depends on the test" when they do not.
    """
    from labformer.book.notebook import decide, t_two_sided_p

    d = np.asarray(diffs, dtype=float).ravel()
    if d.size < 3 or not np.all(np.isfinite(d)):
        raise ValueError(f"a verdict needs at least 3 finite paired differences, got {d!r}")
    if not delta > 0 or k < 1 or not 0 < alpha < 1:
        raise ValueError(f"registered_verdict needs delta > 0, k >= 1 and 0 < alpha < 1; "
                         f"got {delta}, {k}, {alpha}")
    level = alpha / k
    t_label, mean, se = decide(d, delta, k, alpha)
    t_p = t_two_sided_p(mean / se, d.size - 1) if se > 0 else float(mean == 0)
    flip_p = sign_flip_p(d)
    flip_eq = max(_one_sided_flip_p(d - delta, -1), _one_sided_flip_p(d + delta, +1))
    if flip_p <= level:
        flip_label = "higher" if mean > 0 else "lower"
    else:
        flip_label = "within" if flip_eq <= level else "open"
    verdict = t_label if t_label == flip_label else "depends on the test"
    return RegisteredVerdict(verdict, t_label, flip_label, mean, se, d.size, float(delta),
                             level, t_p, flip_p, flip_eq)
