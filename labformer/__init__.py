"""labformer: a small, tested Transformer, built concept by concept for the book.

Everything a chapter needs is importable from here: ``from labformer import ...``.
"""

from .attention import (
    AdditiveAttention,
    DotAttention,
    GeneralAttention,
    masked_softmax,
    scaled_dot_product_attention,
)
from .decoding import (
    BeamStep,
    Hypothesis,
    PrefixTableModel,
    beam_search,
    greedy_decode,
    length_penalty_factor,
    sequence_log_prob,
)
from .layers import DecoderLayer, EncoderLayer, FeedForward, residual
from .loss import (
    LabelSmoothingLoss,
    entropy,
    kl_divergence,
    label_smoothed_cross_entropy,
    smoothed_targets,
    soft_cross_entropy,
)
from .masks import causal_mask, check_mask, combine_masks, from_key_padding_mask, padding_mask
from .multihead import KVCache, MultiHeadAttention, record_attention
from .notebook import setup_notebook
from .positional import LearnedPositionalEncoding, PositionalEncoding, sinusoidal_positions
from .rnn import ATTENTION_KINDS, Seq2SeqRNN
from .train import History, TrainConfig, load_checkpoint, save_checkpoint
from .transformer import Decoder, DecoderCache, Encoder, Transformer, TransformerConfig
from .translate import Translation, Translator, build_model, score, train_translator

__version__ = "0.1.0"
