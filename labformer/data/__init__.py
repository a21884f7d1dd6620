"""Data for the book: a generated French -> English toy corpus, vocabulary, batches, files.

Corpus generation and its tokenizer use the standard library only; real text goes through
sacremoses (``TextCodec``); batching builds torch tensors, so its names (``Batch``,
``make_batches``, ...) are imported on first use: ``import labformer.data`` (or any module
under it but ``batching``) does not load torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from labformer.data.corpus import Corpus, candidate_pairs, generate_corpus
from labformer.data.moses import TextCodec, normalize_text
from labformer.data.pairs import guess_language, load_pairs, read_pairs, save_pairs
from labformer.data.text import SentencePair, detokenize, tokenize
from labformer.data.vocab import Vocab

if TYPE_CHECKING:  # imported on first use at run time (they need torch)
    from labformer.data.batching import (
        Batch,
        build_vocabs,
        encode_pairs,
        make_batches,
        pad_sequences,
        padding_fraction,
    )

_BATCHING = frozenset({"Batch", "build_vocabs", "encode_pairs", "make_batches", "pad_sequences",
                       "padding_fraction"})

__all__ = [
    "Batch",
    "Corpus",
    "SentencePair",
    "TextCodec",
    "Vocab",
    "build_vocabs",
    "candidate_pairs",
    "detokenize",
    "encode_pairs",
    "generate_corpus",
    "guess_language",
    "load_pairs",
    "make_batches",
    "pad_sequences",
    "normalize_text",
    "padding_fraction",
    "read_pairs",
    "save_pairs",
    "tokenize",
]


def __getattr__(name: str) -> Any:
    if name not in _BATCHING:
        raise AttributeError(f"module 'labformer.data' has no attribute {name!r}")
    value = getattr(importlib.import_module("labformer.data.batching"), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
