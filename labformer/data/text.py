"""Word-level tokenisation for the toy corpus (and for small real pairs files).

Text is lower-cased; punctuation marks are tokens of their own; an elided word keeps its
apostrophe and stands alone: ``"j'ai un chat."`` -> ``["j'", "ai", "un", "chat", "."]``.
Hyphenated words stay whole (``est-ce``). ``detokenize`` undoes this for the corpus's own
sentences, which put no space before punctuation (in French too, for simplicity).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: A (source sentence, target sentence) pair: the one type for a parallel corpus's rows.
SentencePair = tuple[str, str]

# An elided word with its apostrophe, then words (hyphens inside), then any other symbol.
_TOKEN = re.compile(r"\w+'|\w+(?:-\w+)*|[^\w\s]")
#: Typographic apostrophes -> ASCII, for ``str.translate`` (the Moses codec reads text so too).
APOSTROPHES = str.maketrans({"\u2019": "'", "\u02bc": "'"})
PUNCTUATION = frozenset(".,;:!?")


def tokenize(text: str) -> list[str]:
    """Split lower-cased ``text`` into words, elided words (``l'``) and punctuation marks."""
    return _TOKEN.findall(text.lower().translate(APOSTROPHES))


def detokenize(tokens: Iterable[str]) -> str:
    """Join tokens into text: no space after an elision (``l'``) nor before punctuation."""
    out: list[str] = []
    for token in tokens:
        if out and not (token in PUNCTUATION or out[-1].endswith("'")):
            out.append(" ")
        out.append(token)
    return "".join(out)
