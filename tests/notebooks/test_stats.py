"""labformer.book.stats against brute force and small cases worked by hand."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from labformer.book.notebook import t_quantile
from labformer.book.stats import MAX_EXACT, holm, holm_adjusted, registered_verdict, sign_flip_p


def brute_sign_flip(diffs: list[float], null: float = 0.0) -> float:
    d = [x - null for x in diffs]
    observed = abs(sum(d))
    count = sum(abs(sum(s * x for s, x in zip(signs, d, strict=True))) >= observed - 1e-9
                for signs in itertools.product((1, -1), repeat=len(d)))
    return count / 2 ** len(d)


def brute_holm(p: list[float], alpha: float) -> list[bool]:
    order = sorted(range(len(p)), key=lambda i: p[i])
    reject = [False] * len(p)
    for step, i in enumerate(order):
        if p[i] > alpha / (len(p) - step):
            break
        reject[i] = True
    return reject


def test_all_of_one_sign_gives_the_smallest_p() -> None:
    assert sign_flip_p([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(2 / 32)
    assert sign_flip_p([-0.5] * 10) == pytest.approx(2 / 1024)
    assert sign_flip_p(np.arange(1, 21)) == pytest.approx(2 / 2 ** 20)


def test_small_cases_by_hand() -> None:
    # 1, 2, -3: sums of the 8 patterns are +-0, +-2, +-4, +-6; |0| observed: p = 1
    assert sign_flip_p([1.0, 2.0, -3.0]) == 1.0
    # 3, 1, 1: sums +-5, +-3, +-3, +-1; observed 5: 2 of 8
    assert sign_flip_p([3.0, 1.0, 1.0]) == pytest.approx(0.25)
    # observed 3 (3, 1, -1): |sum| >= 3 in 6 of 8
    assert sign_flip_p([3.0, 1.0, -1.0]) == pytest.approx(0.75)
    assert sign_flip_p([2.0]) == 1.0
    assert sign_flip_p([0.0, 0.0]) == 1.0


@pytest.mark.parametrize("seed", range(12))
def test_agrees_with_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 13))
    diffs = list(rng.normal(0.3, 1.0, n).round(int(rng.integers(0, 3))))  # ties when rounded
    assert sign_flip_p(diffs) == pytest.approx(brute_sign_flip(diffs), abs=1e-12)
    assert sign_flip_p(diffs, null=0.2) == pytest.approx(brute_sign_flip(diffs, 0.2), abs=1e-12)


def test_ties_count_as_extreme_and_scale_does_not_matter() -> None:
    diffs = [1.0, 1.0, 1.0, -1.0, 1.0, -1.0]
    assert sign_flip_p(diffs) == pytest.approx(brute_sign_flip(diffs))
    assert sign_flip_p([1e-6 * x for x in diffs]) == pytest.approx(sign_flip_p(diffs))
    assert sign_flip_p([x + 0.1 for x in [0.1, 0.2, 0.3]]) == sign_flip_p([0.2, 0.3, 0.4])


def test_refuses_what_it_cannot_count_exactly() -> None:
    with pytest.raises(ValueError, match="2\\*\\*n"):
        sign_flip_p(np.ones(MAX_EXACT + 1))
    with pytest.raises(ValueError):
        sign_flip_p([])
    with pytest.raises(ValueError, match="finite"):
        sign_flip_p([1.0, float("nan")])


def test_holm_worked_example() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted: 0.005 <= 0.05/4, 0.01 <= 0.05/3, 0.03 > 0.05/2: stop
    assert holm(p, 0.05) == [True, False, False, True]
    assert holm_adjusted(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.2], 0.05) == [False] and holm([0.04], 0.05) == [True]
    assert holm_adjusted([0.5, 0.6, 0.7]) == pytest.approx([1.0, 1.0, 1.0])  # 0.7 < 1.2 before it
    assert holm([]) == []


@pytest.mark.parametrize("seed", range(20))
def test_holm_agrees_with_the_step_down_rule_and_beats_bonferroni(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 40))
    p = list(rng.uniform(0, 0.01, m) if seed % 2 else rng.uniform(0, 1, m) ** 3)
    for alpha in (0.05, 0.01):
        assert holm(p, alpha) == brute_holm(p, alpha)
        assert all(h or not b for h, b in zip(holm(p, alpha), [x <= alpha / m for x in p],
                                              strict=True))
    adjusted = holm_adjusted(p)
    assert all(a >= x for a, x in zip(adjusted, p, strict=True))
    order = np.argsort(p)
    assert all(np.diff(np.array(adjusted)[order]) >= 0)  # monotone in p


def test_holm_refuses_bad_input() -> None:
    with pytest.raises(ValueError):
        holm([0.5, 1.5])
    with pytest.raises(ValueError):
        holm([0.5], alpha=0)


# --- the registered analysis (book/data/plans/README.md) --------------------------------------

LEVEL_K = 34  # the book-wide family the v2 registrations fix: a = 0.05 / 34


@pytest.mark.parametrize("seed", range(40))
def test_registered_t_equivalence_is_the_interval_rule(seed: int) -> None:
    """The t label is the interval rule written out here (a difference when |mean| >
    t_{1-a/2, n-1} SE, else within when |mean| + t_{1-a, n-1} SE < delta), and the reported
    two-sided p is at most a exactly when it finds a difference."""
    rng = np.random.default_rng(seed)
    d = rng.normal(rng.uniform(-4, 4), rng.uniform(0.5, 6), size=20)
    delta = 5.0
    v = registered_verdict(d, delta, LEVEL_K)
    mean, se, a = d.mean(), d.std(ddof=1) / np.sqrt(20), 0.05 / LEVEL_K
    differs = abs(mean) > t_quantile(1 - a / 2, 19) * se
    equivalent = abs(mean) + t_quantile(1 - a, 19) * se < delta
    want = ("higher" if mean > 0 else "lower") if differs else (
        "within" if equivalent else "open")
    assert v.t_label == want, (v, want)
    assert (v.t_p <= a) == differs  # the reported p says what the label says


def test_registered_sign_flip_labels_by_hand() -> None:
    """20 differences of one sign: the smallest sign-flip p, 2 / 2**20, far below a; 20 tiny
    differences around zero: both tests call them within +-delta; nineteen at +1 and one at
    -60: both tests leave it open (mean -2.05, SE 3.05)."""
    up = registered_verdict(np.linspace(1, 3, 20), 5.0, LEVEL_K)
    assert up.flip_p == pytest.approx(2 / 2 ** 20) and up.verdict == "higher"
    flat = registered_verdict(np.tile([0.1, -0.1, 0.05, -0.05], 5), 5.0, LEVEL_K)
    assert flat.verdict == "within" and flat.flip_equivalence_p <= 0.05 / LEVEL_K
    wide = registered_verdict([1.0] * 19 + [-60.0], 5.0, LEVEL_K)
    assert (wide.t_label, wide.flip_label, wide.verdict) == ("open", "open", "open")
    assert wide.mean == pytest.approx(-2.05)


def test_registered_verdict_depends_on_the_test_when_they_differ() -> None:
    """Nineteen pairs at +2 and one at -25 (mean 0.65, SE 1.35): t cannot put the mean
    within +-5 at a = 0.05 / 34 (TOST p 0.0022), the sign-flip equivalence test can
    (p 0.00018): the verdict is "depends on the test". All twenty
    positive but spread (0.5 x 17, 9 x 3): sign-flip says higher (p = 2 / 2**20), t does not
    (t = 2.9 < t_{1 - a/2, 19} = 3.7)."""
    split = registered_verdict([2.0] * 19 + [-25.0], 5.0, LEVEL_K)
    assert (split.t_label, split.flip_label) == ("open", "within")
    assert split.verdict == "depends on the test"
    assert split.flip_equivalence_p == pytest.approx(0.000183, abs=1e-6)
    mixed = registered_verdict([0.5] * 17 + [9.0, 9.0, 9.0], 5.0, LEVEL_K)
    assert mixed.flip_label == "higher" and mixed.t_label != "higher"
    assert mixed.verdict == "depends on the test"
    agree = registered_verdict(np.linspace(-1, 4, 20), 5.0, LEVEL_K)
    assert agree.verdict == agree.t_label == agree.flip_label == "higher"


def test_registered_verdict_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="at least 3"):
        registered_verdict([1.0, 2.0], 5.0, LEVEL_K)
    with pytest.raises(ValueError, match="delta > 0"):
        registered_verdict([1.0, 2.0, 3.0], 0.0, LEVEL_K)
    with pytest.raises(ValueError, match="finite"):
        registered_verdict([1.0, float("nan"), 3.0], 5.0, LEVEL_K)
