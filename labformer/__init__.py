"""labformer: a small, tested Transformer, built concept by concept for the book.

What the chapters use is importable from here (``from labformer import ...``, the names in
``__all__``); everything else from its module (``labformer.attention``, ``labformer.data``,
``labformer.testing``, ...). Names are imported on first use, so ``import labformer`` is
instant and ``labformer --help`` does not load torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

__all__ = [
    "AdditiveAttention",
    "DecoderLayer",
    "EncoderLayer",
    "LearnedPositionalEncoding",
    "MultiHeadAttention",
    "NoPositionalEncoding",
    "PositionalEncoding",
    "Seq2SeqRNN",
    "TrainConfig",
    "Transformer",
    "TransformerConfig",
    "Translator",
    "beam_search",
    "causal_mask",
    "combine_masks",
    "entropy",
    "greedy_decode",
    "kl_divergence",
    "label_smoothed_cross_entropy",
    "length_penalty_factor",
    "padding_mask",
    "record_attention",
    "residual",
    "scaled_dot_product_attention",
    "score",
    "sequence_log_prob",
    "setup_notebook",
    "sinusoidal_positions",
    "smoothed_targets",
    "soft_cross_entropy",
    "train_translator",
]

# Where each name of __all__ is defined, in the book's order (one concept per module).
_HOME: dict[str, tuple[str, ...]] = {
    "notebook": ("setup_notebook",),
    "rnn": ("Seq2SeqRNN",),
    "attention": ("scaled_dot_product_attention", "AdditiveAttention"),
    "masks": ("causal_mask", "padding_mask", "combine_masks"),
    "multihead": ("MultiHeadAttention", "record_attention"),
    "positional": ("PositionalEncoding", "LearnedPositionalEncoding", "NoPositionalEncoding",
                   "sinusoidal_positions"),
    "layers": ("residual", "EncoderLayer", "DecoderLayer"),
    "transformer": ("Transformer", "TransformerConfig"),
    "loss": ("label_smoothed_cross_entropy", "smoothed_targets", "entropy", "kl_divergence",
             "soft_cross_entropy"),
    "decoding": ("greedy_decode", "beam_search", "length_penalty_factor", "sequence_log_prob"),
    "train": ("TrainConfig",),
    "translate": ("Translator", "score", "train_translator"),
}
_MODULE_OF = {name: module for module, names in _HOME.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'labformer' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
