"""The Transformer (Vaswani et al. 2017, Figure 1): an encoder stack, a decoder stack, a generator.

    memory = Encoder(Embedding(src) * sqrt(d_model) + PE)                  (Sections 3.1, 3.4, 3.5)
    logits = Decoder(Embedding(tgt) * sqrt(d_model) + PE, memory) W_out

``Transformer(config)`` wires the parts together; ``encode`` / ``decode`` are exposed separately
so that greedy decoding and beam search can reuse the encoder's memory and a key/value cache.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from .layers import DecoderLayer, EncoderLayer
from .masks import causal_mask, check_special_ids, check_token_ids, padding_mask
from .multihead import KVCache
from .positional import (
    LearnedPositionalEncoding,
    NoPositionalEncoding,
    PositionalEncoding,
    _Positions,
)
from .special import BOS_ID, EOS_ID, PAD_ID, UNK_ID

__all__ = ["TransformerConfig", "Encoder", "Decoder", "DecoderCache", "Transformer"]

_POSITIONS: dict[str, type[_Positions]] = {
    "sinusoidal": PositionalEncoding,
    "learned": LearnedPositionalEncoding,
    "none": NoPositionalEncoding,
}
_TIES = ("none", "output", "all")


@dataclass(frozen=True)
class TransformerConfig:
    """Every size of the model in one place. Defaults are the paper's base model."""

    src_vocab_size: int  # source vocabulary size, special tokens included
    tgt_vocab_size: int  # target vocabulary size, special tokens included
    d_model: int = 512  # width of every token vector between sublayers
    num_heads: int = 8  # h; each head has d_k = d_model / h
    num_encoder_layers: int = 6  # N in the paper, encoder side
    num_decoder_layers: int = 6  # N in the paper, decoder side
    d_ff: int = 2048  # hidden width of the position-wise feed-forward network
    dropout: float = 0.1  # on embeddings+positions, attention weights and each residual branch
    max_len: int = 256  # longest sequence the positional table covers
    norm_first: bool = False  # False: Post-LN (the paper); True: Pre-LN (Xiong et al. 2020)
    # Weight tying: "none"; "output", the target embedding is the output projection (Press &
    # Wolf 2017); "all", source embedding, target embedding and output projection are one
    # matrix (the paper, Section 3.4; needs src_vocab_size == tgt_vocab_size). The booleans of
    # earlier versions still work: True means "output", False "none".
    tie_embeddings: str | bool = "none"
    # Special token ids, the same on both sides (labformer.data.Vocab's PAD, BOS, EOS, UNK).
    # Training, decoding and the model read them from here, never from defaults of their own.
    pad_id: int = PAD_ID  # padding: masked out of attention and of the loss
    bos_id: int = BOS_ID  # begin of sentence: the first decoder input
    eos_id: int = EOS_ID  # end of sentence: decoding stops after it
    unk_id: int = UNK_ID  # unknown word
    positional: str = "sinusoidal"  # "sinusoidal" (fixed table), "learned" or "none" (ablation)
    # Ablations: the paper's model has both True.
    scale_scores: bool = True  # False: attention scores q.k are not divided by sqrt(d_k)
    residual: bool = True  # False: each sublayer's output replaces its input (norms kept)
    # False: the source gets no positions while the target keeps ``positional`` (an ablation
    # that leaves the decoder's word order intact and takes the encoder's away).
    encoder_positions: bool = True

    # A ClassVar, so not a dataclass field: named configurations shared by demos and tests.
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "base": dict(d_model=512, num_heads=8, num_encoder_layers=6, num_decoder_layers=6,
                     d_ff=2048, dropout=0.1),
        "small": dict(d_model=256, num_heads=4, num_encoder_layers=3, num_decoder_layers=3,
                      d_ff=1024, dropout=0.1),
        "tiny": dict(d_model=32, num_heads=4, num_encoder_layers=2, num_decoder_layers=2,
                     d_ff=64, dropout=0.0, max_len=64),
    }

    def __post_init__(self) -> None:
        _check_config(self)

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> TransformerConfig:
        """A named configuration ('base', 'small', 'tiny'), vocabulary sizes given as overrides."""
        if name not in cls.PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(cls.PRESETS)}")
        return cls(**{**cls.PRESETS[name], **overrides})

    def replace(self, **changes: Any) -> TransformerConfig:
        """A copy with some fields changed (the config itself is frozen)."""
        return dataclasses.replace(self, **changes)


class Encoder(nn.Module):
    """N encoder layers (Figure 1, left), as ``nn.TransformerEncoder``; in the Pre-LN form a
    final LayerNorm, since the residual stream is never normalised otherwise."""

    def __init__(self, cfg: TransformerConfig, *, device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        factory: dict[str, Any] = {"device": device, "dtype": dtype}
        self.layers = nn.ModuleList(  # N separate modules: no shared weights
            EncoderLayer(cfg.d_model, cfg.num_heads, cfg.d_ff, cfg.dropout, cfg.norm_first,
                         residual=cfg.residual, scale_scores=cfg.scale_scores, **factory)
            for _ in range(cfg.num_encoder_layers))
        self.norm = nn.LayerNorm(cfg.d_model, **factory) if cfg.norm_first else nn.Identity()

    def forward(self, x: Tensor, *, mask: Tensor | None = None) -> Tensor:
        """x (B, S, d_model), mask (B, 1, 1, S), True = real token -> memory (B, S, d_model)."""
        for layer in self.layers:
            x = layer(x, mask=mask)
        out: Tensor = self.norm(x)
        return out


class Decoder(nn.Module):
    """N decoder layers (Figure 1, right, below the output layer), as ``nn.TransformerDecoder``;
    a final LayerNorm in the Pre-LN form, as :class:`Encoder`."""

    def __init__(self, cfg: TransformerConfig, *, device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        factory: dict[str, Any] = {"device": device, "dtype": dtype}
        self.layers = nn.ModuleList(
            DecoderLayer(cfg.d_model, cfg.num_heads, cfg.d_ff, cfg.dropout, cfg.norm_first,
                         residual=cfg.residual, scale_scores=cfg.scale_scores, **factory)
            for _ in range(cfg.num_decoder_layers))
        self.norm = nn.LayerNorm(cfg.d_model, **factory) if cfg.norm_first else nn.Identity()

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        *,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: DecoderCache | None = None,
        tgt_is_causal: bool = False,
    ) -> Tensor:
        """x (B, T, d_model), memory (B, S, d_model) -> (B, T, d_model); masks True = may attend.

        tgt_is_causal=True, with no tgt_mask: causal self-attention without a mask tensor."""
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      cache=None if cache is None else cache.layers[i],
                      tgt_is_causal=tgt_is_causal)
        out: Tensor = self.norm(x)
        return out


class DecoderCache:
    """Per-layer key/value caches for incremental decoding, and how many positions are done."""

    def __init__(self, num_layers: int) -> None:
        self.layers = [(KVCache(), KVCache(static=True)) for _ in range(num_layers)]
        self.offset = 0  # positions already decoded; the next token's position

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` in every cache (beam search reorders hypotheses)."""
        for self_cache, cross_cache in self.layers:
            self_cache.reorder(index)
            cross_cache.reorder(index)


class Transformer(nn.Module):
    """Encoder-decoder Transformer for sequence-to-sequence tasks (batch first, PAD masked).

    Args:
        config: every size and special id (:class:`TransformerConfig`).
        device, dtype: where and in which precision to create the parameters (as in torch.nn).

    Shape:
        src (B, S) and tgt (B, T) token ids; logits (B, T, tgt_vocab_size).
    """

    def __init__(
        self,
        config: TransformerConfig,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.config = cfg = config
        factory: dict[str, Any] = {"device": device, "dtype": dtype}
        self.src_embed = nn.Embedding(cfg.src_vocab_size, cfg.d_model, padding_idx=cfg.pad_id,
                                      **factory)
        self.tgt_embed = nn.Embedding(cfg.tgt_vocab_size, cfg.d_model, padding_idx=cfg.pad_id,
                                      **factory)
        self.positions = _POSITIONS[cfg.positional](cfg.d_model, cfg.max_len, cfg.dropout,
                                                    **factory)
        # Without encoder positions, the source's embeddings get only the dropout.
        self.src_positions: nn.Module | None = (
            None if cfg.encoder_positions
            else NoPositionalEncoding(cfg.d_model, cfg.max_len, cfg.dropout, **factory))
        self.encoder = Encoder(cfg, **factory)
        self.decoder = Decoder(cfg, **factory)
        self.generator = nn.Linear(cfg.d_model, cfg.tgt_vocab_size, **factory)
        self._reset_parameters()
        if cfg.tie_embeddings in ("output", "all"):
            self.generator.weight = self.tgt_embed.weight  # (|V|, d_model) shared
        if cfg.tie_embeddings == "all":
            self.src_embed.weight = self.tgt_embed.weight  # one vocabulary, one matrix

    def _reset_parameters(self) -> None:
        # Xavier for every matrix, as in the reference implementations; embeddings are scaled by
        # sqrt(d_model) in forward, so start them small (std 1/sqrt(d_model)).
        for name, p in self.named_parameters():
            if p.dim() > 1 and "embed" not in name and "positions" not in name:
                nn.init.xavier_uniform_(p)
        for emb in (self.src_embed, self.tgt_embed):
            nn.init.normal_(emb.weight, std=self.config.d_model**-0.5)
            with torch.no_grad():
                emb.weight[self.config.pad_id].zero_()

    def src_mask(self, src: Tensor) -> Tensor:
        """(B, 1, 1, S): True on the real source tokens; the ``memory_mask`` of :meth:`decode`."""
        return padding_mask(src, self.config.pad_id)

    def tgt_mask(self, tgt: Tensor) -> Tensor:
        """(B, 1, T, T): causal AND not padding (on the keys)."""
        return causal_mask(tgt.shape[1], tgt.device) & padding_mask(tgt, self.config.pad_id)

    def _embed(self, tokens: Tensor, table: nn.Embedding, offset: int = 0,
               positions: nn.Module | None = None) -> Tensor:
        """Token ids (B, T) -> table(tokens) * sqrt(d_model) + positions offset.., then dropout.

        ``positions``: the module that adds them (default ``self.positions``)."""
        _check_tokens(tokens, table.num_embeddings)
        x = table(tokens) * math.sqrt(self.config.d_model)  # (B, T, d_model)
        out: Tensor = (positions or self.positions)(x, offset)
        return out

    def encode(self, src: Tensor) -> Tensor:
        """src (B, S) token ids -> memory (B, S, d_model). Decode it with ``self.src_mask(src)``."""
        x = self._embed(src, self.src_embed, positions=self.src_positions)
        memory: Tensor = self.encoder(x, mask=self.src_mask(src))
        return memory

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        memory_mask: Tensor,
        cache: DecoderCache | None = None,
        *,
        tgt_is_causal: bool = False,
    ) -> Tensor:
        """tgt (B, T), memory (B, S, d_model), memory_mask (B, 1, 1, S) -> logits (B, T, V).

        ``memory_mask`` is required: it is ``self.src_mask(src)`` for the ``src`` that was
        encoded (True = real token), so that no query attends to source padding. Without a
        cache, ``tgt`` is the whole prefix (causal and padding masks are built here). With a
        cache, ``tgt`` holds only the new tokens; earlier positions come from the cache, and
        the new ones are numbered from ``cache.offset``; one new token needs no mask at all.

        ``tgt_is_causal=True`` promises that PAD only ever follows a row's real tokens (right
        padding, as :func:`labformer.data.make_batches` and the decoders produce): then the
        causal mask alone keeps every real position from the PAD keys, and the decoder's
        self-attention runs on PyTorch's causal kernels with no (B, 1, T, T) mask built. Real
        positions get the same logits; PAD positions (which no loss counts) differ.
        """
        _check_memory(tgt, memory, memory_mask)
        T = tgt.shape[1]
        offset = 0 if cache is None else cache.offset
        x = self._embed(tgt, self.tgt_embed, offset)
        causal = cache is None and tgt_is_causal
        mask: Tensor | None = None
        if cache is None and not tgt_is_causal:
            mask = self.tgt_mask(tgt)  # (B, 1, T, T)
        elif cache is not None and T > 1:
            # New positions offset..offset+T-1 see every cached position and the causal part.
            mask = causal_mask(offset + T, tgt.device)[offset:]  # (T, offset + T)
        # (One new token with a cache may attend to every position: no mask.)
        x = self.decoder(x, memory, tgt_mask=mask, memory_mask=memory_mask, cache=cache,
                         tgt_is_causal=causal)
        if cache is not None:
            cache.offset += T
        logits: Tensor = self.generator(x)
        return logits

    def forward(self, src: Tensor, tgt_in: Tensor, *, tgt_is_causal: bool = False) -> Tensor:
        """Teacher forcing: src (B, S), tgt_in (B, T) starting with BOS -> logits (B, T, V).

        ``tgt_is_causal``: tgt_in is right-padded, so no target mask is built (see decode)."""
        _check_batch(src, tgt_in)
        memory = self.encode(src)
        return self.decode(tgt_in, memory, self.src_mask(src), tgt_is_causal=tgt_is_causal)

    def new_cache(self) -> DecoderCache:
        """An empty cache for incremental decoding with :meth:`decode`."""
        return DecoderCache(len(self.decoder.layers))

    def num_parameters(self) -> int:
        """Trainable parameters, shared (tied) ones counted once."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)


# ---- checks of the arguments ----------------------------------------------------------------

def _check_config(cfg: TransformerConfig) -> None:
    for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "num_heads", "d_ff",
                 "max_len", "num_encoder_layers", "num_decoder_layers"):
        if getattr(cfg, name) <= 0:
            raise ValueError(f"{name} must be positive, got {getattr(cfg, name)}")
    if cfg.d_model % cfg.num_heads:
        raise ValueError(
            f"d_model ({cfg.d_model}) must be divisible by num_heads ({cfg.num_heads})"
        )
    if not 0.0 <= cfg.dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {cfg.dropout}")
    if cfg.positional not in _POSITIONS:
        raise ValueError(f"positional must be one of {', '.join(map(repr, _POSITIONS))}, "
                         f"got {cfg.positional!r}")
    for name in ("norm_first", "scale_scores", "residual", "encoder_positions"):
        if not isinstance(getattr(cfg, name), bool):
            raise ValueError(f"{name} must be True or False, got {getattr(cfg, name)!r}")
    if isinstance(cfg.tie_embeddings, bool):  # the boolean of earlier versions
        object.__setattr__(cfg, "tie_embeddings", "output" if cfg.tie_embeddings else "none")
    if cfg.tie_embeddings not in _TIES:
        raise ValueError(f"tie_embeddings must be one of {', '.join(map(repr, _TIES))} "
                         f"(or True / False), got {cfg.tie_embeddings!r}")
    if cfg.tie_embeddings == "all" and cfg.src_vocab_size != cfg.tgt_vocab_size:
        raise ValueError(
            "tie_embeddings='all' shares one matrix between both embeddings and the output, "
            f"so it needs one vocabulary: src_vocab_size={cfg.src_vocab_size} and "
            f"tgt_vocab_size={cfg.tgt_vocab_size} differ"
        )
    check_special_ids(
        {name: getattr(cfg, name) for name in ("pad_id", "bos_id", "eos_id", "unk_id")},
        {"src_vocab_size": cfg.src_vocab_size, "tgt_vocab_size": cfg.tgt_vocab_size},
    )


def _check_tokens(tokens: Tensor, vocab_size: int) -> None:
    if tokens.dim() != 2 or tokens.is_floating_point():
        raise ValueError(f"expected integer token ids (B, T), got {tokens.dtype} "
                         f"{tuple(tokens.shape)}")
    check_token_ids(tokens, vocab_size)


def _check_memory(tgt: Tensor, memory: Tensor, memory_mask: Tensor | None) -> None:
    if memory.dim() != 3 or memory.shape[0] != tgt.shape[0]:
        raise ValueError(f"memory must be (B, S, d_model) with B = {tgt.shape[0]}, "
                         f"got {tuple(memory.shape)}")
    if memory_mask is None:  # its shape is checked where it is used, by every cross-attention
        raise ValueError("decode needs the memory_mask of the encoded source, "
                         "model.src_mask(src) (B, 1, 1, S); None would attend to padding")


def _check_batch(src: Tensor, tgt_in: Tensor) -> None:
    if src.shape[0] != tgt_in.shape[0]:
        raise ValueError(f"src and tgt_in batch sizes differ: {tuple(src.shape)} vs "
                         f"{tuple(tgt_in.shape)}")
