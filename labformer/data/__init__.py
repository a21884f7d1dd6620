"""Data for the book: a generated French -> English toy corpus, vocabulary, batches, files.

Corpus generation and its tokenizer use the standard library only; real text goes through
sacremoses (``TextCodec``); batching builds torch tensors, so its names (``Batch``,
``make_batches``, ...) are imported on first use: ``import labformer.data`` (or any module
under it but ``batching``) does not load torch.
"""

from __future__ import annotations

import importlib
import importlib.resources
from pathlib import Path
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
    "everyday_pairs_path",
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


def everyday_pairs_path() -> Path:
    """The path of the everyday French -> English pairs shipped with the package.

    About 300 cased pairs written by hand (``French<TAB>English``, one a line), read by
    ``load_pairs`` and by ``labformer train --pairs``. The file is package data, so the path
    works from a clone, an installed wheel or a notebook downloaded on its own::

        from labformer.data import everyday_pairs_path, load_pairs
        pairs = load_pairs(everyday_pairs_path())
    """
    resource = importlib.resources.files("labformer.data") / "fr-en-everyday.tsv"
    return Path(str(resource))


def __getattr__(name: str) -> Any:
    if name not in _BATCHING:
        raise AttributeError(f"module 'labformer.data' has no attribute {name!r}")
    value = getattr(importlib.import_module("labformer.data.batching"), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
