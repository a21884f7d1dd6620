"""The intro's count of checks, and the false-alarm rates it derives, match the built book."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "_build" / "html" / "book"
WORDS = {"forty": 40, "fifty": 50, "sixty": 60, "thirty": 30, "four thousand": 4000,
         "five thousand": 5000, "three thousand": 3000, "seven thousand": 7000}


def _tail(z: float) -> float:
    """P(N(0, 1) > z)."""
    return 0.5 * math.erfc(z / math.sqrt(2))


def test_the_intro_counts_the_checks_the_pages_carry() -> None:
    if not PAGES.is_dir():
        pytest.fail("no built book in _build/html: run `make book` first (make test does)")
    checks = sum(len(re.findall(r'<li class="lf-(?:holds|fails)"', p.read_text(encoding="utf-8")))
                 for p in PAGES.glob("*.html"))
    text = " ".join((ROOT / "book" / "intro.md").read_text(encoding="utf-8").split())
    stated = int(re.search(r"checks about (\d+) claims per build", text).group(1))
    assert abs(stated - checks) <= 0.15 * checks, (
        f"the intro says about {stated} checks; the built pages carry {checks}")
    four, five = re.search(r"about one build in ([a-z ]+?) would fail.*?about one build in "
                           r"([a-z ]+?)\.", text).groups()
    for word, z in ((four, 4), (five, 5)):
        expected = 1 / (checks * _tail(z))
        assert word in WORDS and abs(WORDS[word] - expected) <= 0.3 * expected, (
            f"'one build in {word}' at {z} SD: {checks} checks give one in {expected:.0f}")
