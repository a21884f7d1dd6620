"""tests/mutants.py names what caught each bug: a failed claim, a grader's Mismatch, an error."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))
import mutants  # noqa: E402


def test_first_failure_names_the_claim_the_mismatch_or_the_error() -> None:
    claim = "ClaimFailed: 1 of 5 claims do not hold\n- the weights sum to one\n"
    assert mutants.first_failure(claim) == "the weights sum to one"
    mismatch = ("Traceback (most recent call last):\n  File x\n"
                "labformer.book.exercises.Mismatch: attention: each row of weights must sum to 1\n"
                "  input    q (2, 3)\nAssertionError\n")
    assert mutants.first_failure(mismatch) == (
        "labformer.book.exercises.Mismatch: attention: each row of weights must sum to 1")
    assert mutants.first_failure("\x1b[31mValueError: bad shape\x1b[0m") == "ValueError: bad shape"
    assert mutants.first_failure("") == "(no output)"
