"""Tests for labformer.metrics: BLEU, chrF and exact match on cases computed by hand."""

from __future__ import annotations

import math

import pytest

from labformer.metrics import corpus_bleu, corpus_chrf, exact_match

HYPS = ["i am a student.", "the cat is under the table.", "she has a red car."]
REFS = ["i am a student.", "the cat is on the table.", "she has a small red car."]


def test_bleu_known_answer_geometric_mean_of_precisions() -> None:
    # One word differs at the end: 1- to 4-gram precisions 5/6, 4/5, 3/4, 2/3; same length.
    bleu = corpus_bleu(["the cat sat on the mat"], ["the cat sat on the rug"])
    assert bleu == pytest.approx(100 * (5 / 6 * 4 / 5 * 3 / 4 * 2 / 3) ** 0.25)  # 75.98


def test_bleu_known_answer_brevity_penalty() -> None:
    # Every n-gram of the 5-word output matches; the reference has 6: BP = exp(1 - 6/5).
    bleu = corpus_bleu(["the cat sat on the"], ["the cat sat on the mat"])
    assert bleu == pytest.approx(100 * math.exp(1 - 6 / 5))  # 81.87


def test_bleu_is_a_corpus_statistic_not_a_mean_of_sentences() -> None:
    # Both sentences above together: counts add up (10/11, 8/9, 6/7, 4/5), lengths 11 vs 12.
    bleu = corpus_bleu(["the cat sat on the mat", "the cat sat on the"],
                       ["the cat sat on the rug", "the cat sat on the mat"])
    precisions = 10 / 11 * 8 / 9 * 6 / 7 * 4 / 5
    assert bleu == pytest.approx(100 * math.exp(1 - 12 / 11) * precisions ** 0.25)  # 78.78
    assert bleu != pytest.approx((75.98 + 81.87) / 2, abs=0.05)


def test_bleu_perfect_and_zero() -> None:
    assert corpus_bleu(REFS, REFS) == pytest.approx(100.0)
    assert corpus_bleu(["x y z w"], ["a b c d"]) == pytest.approx(0.0)
    assert 0 < corpus_bleu(HYPS, REFS) < 100


def test_bleu_same_for_joined_tokens_and_text() -> None:
    joined_h = ["i am a student .", "the cat is under the table ."]
    joined_r = ["i am a student .", "the cat is on the table ."]
    text_h = ["i am a student.", "the cat is under the table."]
    text_r = ["i am a student.", "the cat is on the table."]
    assert corpus_bleu(joined_h, joined_r) == pytest.approx(corpus_bleu(text_h, text_r))
    # 13a splits the final full stop: without it "student." is one token, and BLEU drops.
    assert corpus_bleu(text_h, text_r, tokenize="none") < corpus_bleu(text_h, text_r)


def test_chrf_known_answers() -> None:
    # Characters a, a, b against a, a, c: 1-grams match 2 of 3, 2-grams (aa, ab) 1 of 2,
    # 3-grams 0 of 1, each way; precision = recall, and chrF averages the orders: 7/18.
    assert corpus_chrf(["aab"], ["aac"]) == pytest.approx(100 * (2 / 3 + 1 / 2 + 0) / 3)
    assert corpus_chrf(["ab"], ["ac"]) == pytest.approx(25.0)  # (1/2 + 0) / 2
    assert corpus_chrf(["abc"], ["xyz"]) == pytest.approx(0.0)
    assert corpus_chrf(REFS, REFS) == pytest.approx(100.0)


def test_exact_match() -> None:
    assert exact_match(HYPS, REFS) == pytest.approx(100 / 3)
    assert exact_match(["a  b ", "c"], ["a b", "c"]) == 100.0
    assert exact_match(["a"], ["b"]) == 0.0


@pytest.mark.parametrize("metric", [corpus_bleu, corpus_chrf, exact_match])
def test_errors(metric) -> None:
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        metric(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="no sentences"):
        metric([], [])
    with pytest.raises(TypeError, match="single string"):
        metric("a b", "a b")
