"""Real text in and out: Unicode NFC, then the Moses tokenizer and detokenizer (sacremoses).

The translator's text goes through one :class:`TextCodec` per side. Its default, ``"moses"``,
is the tokenizer that machine-translation evaluation assumes (Koehn et al., the Moses
toolkit's ``tokenizer.perl``, here in its Python port sacremoses): it knows each language's
apostrophes (``l'`` + ``homme``, ``it`` + ``'s``), quotes, « », abbreviations (``p.m.``,
``Mr.``), decimal numbers and thousands separators, and its detokenizer undoes all of that.
Case is kept. Two things come before it: NFC normalisation (an NFD ``é``, e followed by a
combining accent, becomes the one character ``é``) and typographic apostrophes read as ``'``.
Clock times (``7:30``) are protected, so that they come back without a space.

``"words"`` is the generated corpus's own lower-case tokenizer (:func:`labformer.data.tokenize`);
on that corpus both kinds give the same tokens, and ``"words"`` is about 20 times faster.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from labformer.data.text import APOSTROPHES
from labformer.data.text import detokenize as words_detokenize
from labformer.data.text import tokenize as words_tokenize

__all__ = ["KINDS", "TextCodec", "normalize_text"]

KINDS = ("moses", "words")
_PROTECTED = (r"\d{1,2}:\d{2}",)  # clock times stay one token: "7:30", not "7 : 30"


def normalize_text(text: str) -> str:
    """NFC, ASCII apostrophes, surrounding white space removed: what every side is read as."""
    return unicodedata.normalize("NFC", text).translate(APOSTROPHES).strip()


@lru_cache(maxsize=8)
def _moses(lang: str) -> tuple[Any, Any]:
    from sacremoses import MosesDetokenizer, MosesTokenizer

    return MosesTokenizer(lang=lang), MosesDetokenizer(lang=lang)


@dataclass(frozen=True)
class TextCodec:
    """Text <-> tokens for one language: ``kind`` "moses" (cased, real text) or "words"."""

    lang: str = "en"  # ISO 639-1 code, for Moses's language rules (fr, en, de, ...)
    kind: str = "moses"
    lowercase: bool = False  # fold case on input (a model trained on lower-case text)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown tokenizer kind {self.kind!r}: use one of {KINDS}")
        if not (self.lang.isalpha() and 2 <= len(self.lang) <= 3):
            raise ValueError(f"expected a language code such as 'fr' or 'en', got {self.lang!r}")

    def normalize(self, text: str) -> str:
        """The text as the model reads it: NFC, ASCII apostrophes, lower-cased if ``lowercase``."""
        text = normalize_text(text)
        return text.lower() if self.lowercase or self.kind == "words" else text

    def tokenize(self, text: str) -> list[str]:
        """Tokens of ``text`` after :meth:`normalize`."""
        text = self.normalize(text)
        if self.kind == "words":
            return words_tokenize(text)
        tokenizer, _ = _moses(self.lang)
        tokens: list[str] = tokenizer.tokenize(text, escape=False,
                                               protected_patterns=list(_PROTECTED))
        return tokens

    def detokenize(self, tokens: Iterable[str]) -> str:
        """Text of ``tokens``: the inverse of :meth:`tokenize` up to normalisation."""
        tokens = list(tokens)
        if self.kind == "words":
            return words_detokenize(tokens)
        _, detokenizer = _moses(self.lang)
        text: str = detokenizer.detokenize(tokens)
        return text

    def to_dict(self) -> dict[str, Any]:
        """Plain data for a checkpoint; :meth:`from_dict` reads it back."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TextCodec:
        """Rebuild a codec saved by :meth:`to_dict` (unknown keys are an error)."""
        if not isinstance(data, dict):
            raise ValueError(f"expected a dict as written by TextCodec.to_dict(), got {data!r}")
        unknown = set(data) - {"lang", "kind", "lowercase"}
        if unknown:
            raise ValueError(f"unknown tokenizer settings {sorted(unknown)}")
        return cls(**data)
