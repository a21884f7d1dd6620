"""Data for the book: a generated French -> English toy corpus, vocabulary, batches, files.

Corpus generation and tokenisation use the standard library only; batching builds torch
tensors.
"""

from labformer.data.batching import (
    Batch,
    build_vocabs,
    encode_pairs,
    make_batches,
    pad_sequences,
    padding_fraction,
)
from labformer.data.corpus import Corpus, candidate_pairs, generate_corpus
from labformer.data.pairs import load_pairs, save_pairs
from labformer.data.text import SentencePair, detokenize, tokenize
from labformer.data.vocab import Vocab

__all__ = [
    "Batch",
    "Corpus",
    "SentencePair",
    "Vocab",
    "build_vocabs",
    "candidate_pairs",
    "detokenize",
    "encode_pairs",
    "generate_corpus",
    "load_pairs",
    "make_batches",
    "pad_sequences",
    "padding_fraction",
    "save_pairs",
    "tokenize",
]
