"""Data for the book: a generated French -> English toy corpus, vocabulary, batches, files.

Corpus generation and its tokenizer use the standard library only; real text goes through
sacremoses (``TextCodec``); batching builds torch tensors.
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
from labformer.data.moses import TextCodec, normalize_text
from labformer.data.pairs import guess_language, load_pairs, read_pairs, save_pairs
from labformer.data.text import SentencePair, detokenize, tokenize
from labformer.data.vocab import Vocab

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
