"""Translation metrics: corpus BLEU and chrF through sacrebleu, and exact match.

BLEU uses sacrebleu's default ``13a`` tokenizer, so numbers are the standard, comparable
ones (the signature sacrebleu prints). For the toy corpus's English side it also makes the
score the same whether sentences are passed detokenised (``"i am a student."``) or as
space-joined tokens (``"i am a student ."``): 13a splits the final punctuation either way,
and English sentences there hold no apostrophes. Hypotheses and references should be in
the same form. sacrebleu is imported on first use, so that importing labformer stays light.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["corpus_bleu", "corpus_chrf", "exact_match"]


def _check(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    if isinstance(hypotheses, str) or isinstance(references, str):
        raise TypeError("expected lists of sentences, got a single string")
    if len(hypotheses) != len(references):
        raise ValueError(f"got {len(hypotheses)} hypotheses but {len(references)} references")
    if not hypotheses:
        raise ValueError("no sentences to score")


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str], *,
                tokenize: str = "13a") -> float:
    """Corpus BLEU in [0, 100] of ``hypotheses`` against one reference each (sacrebleu)."""
    _check(hypotheses, references)
    import sacrebleu

    return sacrebleu.corpus_bleu(list(hypotheses), [list(references)],
                                 tokenize=tokenize).score


def corpus_chrf(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Corpus chrF in [0, 100] (character 6-grams, sacrebleu defaults), one reference each."""
    _check(hypotheses, references)
    import sacrebleu

    return sacrebleu.corpus_chrf(list(hypotheses), [list(references)]).score


def exact_match(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Percentage (0-100) of hypotheses equal to their reference, whitespace normalised."""
    _check(hypotheses, references)
    hits = sum(h.split() == r.split() for h, r in zip(hypotheses, references, strict=True))
    return 100.0 * hits / len(references)
