"""Tests for labformer.metrics: BLEU and chrF equal sacrebleu's, exact match by hand."""

from __future__ import annotations

import pytest
import sacrebleu

from labformer.metrics import corpus_bleu, corpus_chrf, exact_match

HYPS = ["i am a student.", "the cat is under the table.", "she has a red car."]
REFS = ["i am a student.", "the cat is on the table.", "she has a small red car."]


def test_bleu_equals_sacrebleu() -> None:
    expected = sacrebleu.corpus_bleu(HYPS, [REFS]).score
    assert corpus_bleu(HYPS, REFS) == pytest.approx(expected)
    assert 0 < corpus_bleu(HYPS, REFS) < 100
    none = sacrebleu.corpus_bleu(HYPS, [REFS], tokenize="none").score
    assert corpus_bleu(HYPS, REFS, tokenize="none") == pytest.approx(none)


def test_bleu_perfect_and_zero() -> None:
    assert corpus_bleu(REFS, REFS) == pytest.approx(100.0)
    assert corpus_bleu(["x y z w"], ["a b c d"]) == pytest.approx(0.0)


def test_bleu_same_for_joined_tokens_and_text() -> None:
    joined_h = ["i am a student .", "the cat is under the table ."]
    joined_r = ["i am a student .", "the cat is on the table ."]
    text_h = ["i am a student.", "the cat is under the table."]
    text_r = ["i am a student.", "the cat is on the table."]
    assert corpus_bleu(joined_h, joined_r) == pytest.approx(corpus_bleu(text_h, text_r))


def test_chrf_equals_sacrebleu() -> None:
    expected = sacrebleu.corpus_chrf(HYPS, [REFS]).score
    assert corpus_chrf(HYPS, REFS) == pytest.approx(expected)
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
    with pytest.raises(ValueError, match="single string"):
        metric("a b", "a b")
