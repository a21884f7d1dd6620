"""labformer: a small, tested Transformer, built concept by concept for the book.

What the chapters use is importable from here (``from labformer import ...``, the names in
``__all__``); everything else from its module (``labformer.attention``, ``labformer.data``,
``labformer.book.testing``, ...). Names are imported on first use, so ``import labformer`` is
instant and ``labformer --help`` does not load torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

__all__ = [
    "AdditiveAttention",
    "DecoderLayer",
    "EncoderLayer",
    "LanguageModel",
    "LearnedPositionalEncoding",
    "MultiHeadAttention",
    "NoPositionalEncoding",
    "PositionalEncoding",
    "Seq2SeqRNN",
    "TrainConfig",
    "Transformer",
    "TransformerConfig",
    "Translator",
    "attention_with_weights",
    "beam_search",
    "causal_mask",
    "combine_masks",
    "greedy_decode",
    "kl_divergence",
    "label_smoothed_cross_entropy",
    "length_penalty_factor",
    "padding_mask",
    "record_attention",
    "sample",
    "sequence_log_prob",
    "setup_notebook",
    "sinusoidal_positions",
    "smoothed_targets",
    "soft_cross_entropy",
    "train_translator",
]

# Where each name of __all__ is defined, in the book's order (one concept per module). Very
# generic names (``entropy``, ``residual``, ``score``) stay in their modules:
# ``from labformer.loss import entropy``. The training loop is ``labformer.train.train``: a
# top-level ``train`` would be the function or the submodule ``labformer.train`` depending on
# what was imported first (importing a submodule sets the package's attribute of that name).
_HOME: dict[str, tuple[str, ...]] = {
    "book.notebook": ("setup_notebook",),
    "rnn": ("Seq2SeqRNN",),
    "attention": ("attention_with_weights", "AdditiveAttention"),
    "masks": ("causal_mask", "padding_mask", "combine_masks"),
    "multihead": ("MultiHeadAttention",),
    "book.record": ("record_attention",),
    "positional": ("PositionalEncoding", "LearnedPositionalEncoding", "NoPositionalEncoding",
                   "sinusoidal_positions"),
    "layers": ("EncoderLayer", "DecoderLayer"),
    "transformer": ("Transformer", "TransformerConfig"),
    "loss": ("label_smoothed_cross_entropy", "smoothed_targets", "kl_divergence",
             "soft_cross_entropy"),
    "decoding": ("greedy_decode", "beam_search", "length_penalty_factor", "sequence_log_prob"),
    "lm": ("LanguageModel",),
    "sampling": ("sample",),
    "train": ("TrainConfig",),
    "app.translate": ("Translator", "train_translator"),
}
_MODULE_OF = {name: module for module, names in _HOME.items() for name in names}
# Names of earlier versions: an AttributeError that says where each went. The very generic ones
# stay in their modules; torch's name for attention is not reused, since torch's function of
# that name returns the output only and labformer's returns (out, weights).
_MOVED = {"scaled_dot_product_attention": "labformer.attention_with_weights",
          "entropy": "labformer.loss.entropy", "residual": "labformer.layers.residual",
          "score": "labformer.app.translate.score"}

if TYPE_CHECKING:  # what type checkers see; at run time, __getattr__ imports on first use
    from .app.translate import Translator, train_translator
    from .attention import AdditiveAttention, attention_with_weights
    from .book.notebook import setup_notebook
    from .book.record import record_attention
    from .decoding import beam_search, greedy_decode, length_penalty_factor, sequence_log_prob
    from .layers import DecoderLayer, EncoderLayer
    from .lm import LanguageModel
    from .loss import (
        kl_divergence,
        label_smoothed_cross_entropy,
        smoothed_targets,
        soft_cross_entropy,
    )
    from .masks import causal_mask, combine_masks, padding_mask
    from .multihead import MultiHeadAttention
    from .positional import (
        LearnedPositionalEncoding,
        NoPositionalEncoding,
        PositionalEncoding,
        sinusoidal_positions,
    )
    from .rnn import Seq2SeqRNN
    from .sampling import sample
    from .train import TrainConfig
    from .transformer import Transformer, TransformerConfig


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        moved = f"; use {_MOVED[name]}" if name in _MOVED else ""
        raise AttributeError(f"module 'labformer' has no attribute {name!r}{moved}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
