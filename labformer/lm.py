"""A decoder-only language model: chapter 8's decoder without cross-attention, plus switches.

Remove the cross-attention sublayer from a decoder layer and what is left is an encoder layer
whose self-attention is causal: :class:`DecoderOnlyLayer`. A stack of them, an embedding and
an output projection make :class:`LanguageModel`, trained to predict every next token.

The defaults are the 2017 block (Post-LN, LayerNorm, ReLU feed-forward, sinusoidal positions,
as many key/value heads as query heads); keyword switches give the parts of current open
models, one at a time or together (``LanguageModelConfig.MODERN``):

* ``norm_first=True``: Pre-LN (Xiong et al. 2020), with a final norm before the output;
* ``norm="rmsnorm"``: :class:`~labformer.modern.RMSNorm` (Zhang & Sennrich 2019);
* ``ffn="swiglu"``: :class:`~labformer.modern.SwiGLU` (Shazeer 2020);
* ``positional="rope"``: :class:`~labformer.positional.RotaryEmbedding` (Su et al. 2021) on
  queries and keys, nothing added to the embeddings (also ``"learned"`` and ``"none"``);
* ``num_kv_heads``: grouped-query attention (Ainslie et al. 2023), 1 = multi-query.

Incremental decoding keeps each layer's keys and values in an :class:`LMCache`;
:meth:`LanguageModel.kv_cache_bytes` computes its size, :meth:`LMCache.nbytes` measures it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .layers import FeedForward, ResidualSublayer
from .masks import causal_mask, check_token_ids
from .modern import GroupedQueryAttention, RMSNorm, SwiGLU
from .multihead import KVCache
from .positional import (
    LearnedPositionalEncoding,
    NoPositionalEncoding,
    PositionalEncoding,
    RotaryEmbedding,
    _Positions,
)

__all__ = ["LanguageModelConfig", "DecoderOnlyLayer", "LMCache", "LanguageModel"]

# What each ``positional`` adds to the embeddings; "rope" adds nothing and rotates inside.
_ADDED: dict[str, type[_Positions]] = {
    "sinusoidal": PositionalEncoding,
    "learned": LearnedPositionalEncoding,
    "none": NoPositionalEncoding,
    "rope": NoPositionalEncoding,
}
_NORMS = ("layernorm", "rmsnorm")
_FFNS = ("relu", "swiglu")


@dataclass(frozen=True)
class LanguageModelConfig:
    """Every size and switch of a :class:`LanguageModel`; the defaults are the 2017 block."""

    vocab_size: int  # tokens, special ones included
    d_model: int = 64  # width of every token vector between sublayers
    num_heads: int = 4  # h query heads, each of d_k = d_model / h
    num_layers: int = 2  # N decoder-only layers
    d_ff: int = 256  # hidden width of the feed-forward network (of each of SwiGLU's two)
    max_len: int = 256  # longest sequence (positions 0..max_len-1)
    dropout: float = 0.0  # on embeddings+positions, attention weights, FFN and each branch
    norm_first: bool = False  # False: Post-LN (2017); True: Pre-LN, with a final norm
    norm: str = "layernorm"  # "layernorm" (2017) or "rmsnorm"
    ffn: str = "relu"  # "relu" (2017) or "swiglu"
    positional: str = "sinusoidal"  # "sinusoidal" (2017), "learned", "rope" or "none"
    num_kv_heads: int | None = None  # key/value heads; None = num_heads (2017), 1 = multi-query
    tie_embeddings: bool = False  # True: the output projection is the embedding matrix
    norm_eps: float = 1e-5  # eps of every norm

    # A ClassVar, not a field: the switches of a LLaMA-style block (grouped-query attention
    # aside, which is a choice of num_kv_heads).
    MODERN: ClassVar[dict[str, Any]] = dict(norm_first=True, norm="rmsnorm", ffn="swiglu",
                                            positional="rope")

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "num_heads", "num_layers", "d_ff", "max_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.d_model % self.num_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by num_heads ({self.num_heads})")
        if self.num_kv_heads is None:
            object.__setattr__(self, "num_kv_heads", self.num_heads)
        kv = self.num_kv_heads
        if isinstance(kv, bool) or not isinstance(kv, int) or kv <= 0 or self.num_heads % kv:
            raise ValueError(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads "
                             f"({kv!r})")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        for name, allowed in (("norm", _NORMS), ("ffn", _FFNS), ("positional", tuple(_ADDED))):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, got "
                                 f"{getattr(self, name)!r}")
        for name in ("norm_first", "tie_embeddings"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"sinusoidal positions need an even d_model, got {self.d_model}")
        if self.positional == "rope" and self.d_k % 2:
            raise ValueError(f"rotary positions turn pairs of dimensions: they need an even "
                             f"d_k = d_model / num_heads, got {self.d_k}")
        if not self.norm_eps > 0:
            raise ValueError(f"norm_eps must be positive, got {self.norm_eps}")

    @property
    def d_k(self) -> int:
        """Size of one head."""
        return self.d_model // self.num_heads

    def replace(self, **changes: Any) -> LanguageModelConfig:
        """A copy with some fields changed (the config itself is frozen)."""
        return dataclasses.replace(self, **changes)


def _norm(cfg: LanguageModelConfig, factory: dict[str, Any]) -> nn.Module:
    if cfg.norm == "rmsnorm":
        return RMSNorm(cfg.d_model, cfg.norm_eps, **factory)
    return nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps, **factory)


class DecoderOnlyLayer(nn.Module):
    """Causal self-attention then the feed-forward network, a residual sublayer around each.

    Chapter 8's decoder layer without its cross-attention. With the default switches it has
    the parameters of an :class:`~labformer.layers.EncoderLayer` (the same names, so the
    state dicts load into each other) and computes what that layer computes with a causal
    mask.
    """

    def __init__(
        self,
        cfg: LanguageModelConfig,
        rotary: RotaryEmbedding | None = None,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        factory: dict[str, Any] = {"device": device, "dtype": dtype}
        self.self_attn = GroupedQueryAttention(cfg.d_model, cfg.num_heads, cfg.num_kv_heads,
                                               cfg.dropout, rotary=rotary, **factory)
        ffn = SwiGLU if cfg.ffn == "swiglu" else FeedForward
        self.ffn = ffn(cfg.d_model, cfg.d_ff, cfg.dropout, **factory)
        sub = (cfg.d_model, cfg.dropout, cfg.norm_first, cfg.norm_eps)
        self.sublayer1 = ResidualSublayer(*sub, **factory)  # around self-attention
        self.sublayer2 = ResidualSublayer(*sub, **factory)  # around the FFN
        if cfg.norm == "rmsnorm":  # in place of the LayerNorm each sublayer built
            for sublayer in (self.sublayer1, self.sublayer2):
                sublayer.norm = _norm(cfg, factory)  # type: ignore[assignment]

    def forward(self, x: Tensor, *, mask: Tensor | None = None,
                cache: KVCache | None = None) -> Tensor:
        """x (B, T, d_model) -> (B, T, d_model); mask broadcastable to (B, h, T, T_past + T),
        True = may attend; cache: this layer's keys and values of the earlier positions."""
        x = self.sublayer1(x, self._sa_block, mask, cache)
        out: Tensor = self.sublayer2(x, self.ffn)
        return out

    def _sa_block(self, x: Tensor, mask: Tensor | None, cache: KVCache | None) -> Tensor:
        out: Tensor = self.self_attn(x, x, x, mask=mask, need_weights=False, cache=cache)[0]
        return out


class LMCache:
    """Per-layer key/value caches for incremental decoding, and how many positions are done."""

    def __init__(self, num_layers: int) -> None:
        self.layers = [KVCache() for _ in range(num_layers)]
        self.offset = 0  # positions already processed; the next token's position

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (B_new,) in every layer's cache."""
        for layer in self.layers:
            layer.reorder(index)

    def numel(self) -> int:
        """Numbers stored: keys and values of every layer, (B, h_kv, T, d_k) each."""
        return sum(t.numel() for c in self.layers for t in (c.k, c.v) if t is not None)

    def nbytes(self) -> int:
        """Bytes held by the stored keys and values (measured on the tensors)."""
        return sum(t.numel() * t.element_size() for c in self.layers for t in (c.k, c.v)
                   if t is not None)


class LanguageModel(nn.Module):
    """A decoder-only Transformer language model: tokens (B, T) -> next-token logits (B, T, V).

    Causal: the logits at position t depend on tokens 0..t only. Built from the package's
    blocks: the embedding scaled by sqrt(d_model) plus positions (as :class:`Transformer`'s
    target side), N :class:`DecoderOnlyLayer`, a final norm in the Pre-LN form, a linear
    output. No padding: every row is a window of running text, all of the same length.

    Args:
        vocab_size, d_model, num_heads, num_layers, d_ff, max_len, dropout, norm_first, norm,
            ffn, positional, num_kv_heads, tie_embeddings, norm_eps: the fields of
            :class:`LanguageModelConfig` (defaults: the 2017 block).
        device, dtype: where and in which precision to create the parameters (as in torch.nn).
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 64,
        num_heads: int = 4,
        num_layers: int = 2,
        d_ff: int = 256,
        max_len: int = 256,
        *,
        dropout: float = 0.0,
        norm_first: bool = False,
        norm: str = "layernorm",
        ffn: str = "relu",
        positional: str = "sinusoidal",
        num_kv_heads: int | None = None,
        tie_embeddings: bool = False,
        norm_eps: float = 1e-5,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.config = cfg = LanguageModelConfig(
            vocab_size, d_model, num_heads, num_layers, d_ff, max_len, dropout, norm_first,
            norm, ffn, positional, num_kv_heads, tie_embeddings, norm_eps)
        factory: dict[str, Any] = {"device": device, "dtype": dtype}
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model, **factory)
        self.positions = _ADDED[cfg.positional](cfg.d_model, cfg.max_len, cfg.dropout,
                                                **factory)
        # One rotary table for every layer (a buffer, not a parameter).
        self.rotary = (RotaryEmbedding(cfg.d_k, cfg.max_len, **factory)
                       if cfg.positional == "rope" else None)
        self.layers = nn.ModuleList(
            DecoderOnlyLayer(cfg, self.rotary, **factory) for _ in range(cfg.num_layers))
        # Pre-LN never normalises the residual stream inside the layers: a final norm does.
        self.norm = _norm(cfg, factory) if cfg.norm_first else nn.Identity()
        self.generator = nn.Linear(cfg.d_model, cfg.vocab_size, **factory)
        self._reset_parameters()
        if cfg.tie_embeddings:
            self.generator.weight = self.embed.weight  # (V, d_model) shared

    @classmethod
    def from_config(
        cls,
        config: LanguageModelConfig,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> LanguageModel:
        """The model of a :class:`LanguageModelConfig` (e.g. ``cfg.replace(norm="rmsnorm")``)."""
        fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
        return cls(**fields, device=device, dtype=dtype)

    def _reset_parameters(self) -> None:
        # As Transformer: Xavier for every matrix; the embedding (scaled by sqrt(d_model) in
        # forward) starts with std 1/sqrt(d_model).
        for name, p in self.named_parameters():
            if p.dim() > 1 and "embed" not in name and "positions" not in name:
                nn.init.xavier_uniform_(p)
        nn.init.normal_(self.embed.weight, std=self.config.d_model**-0.5)

    def new_cache(self) -> LMCache:
        """An empty cache for incremental decoding with ``forward(tokens, cache=cache)``."""
        return LMCache(len(self.layers))

    def forward(self, tokens: Tensor, *, cache: LMCache | None = None) -> Tensor:
        """tokens (B, T) -> logits (B, T, V); logits[:, t] predict token t + 1.

        Without a cache, ``tokens`` is the whole sequence, under a causal mask. With one, it
        holds only the new tokens, numbered from ``cache.offset``; the earlier positions'
        keys and values come from the cache (one new token needs no mask at all).
        """
        if tokens.dim() != 2 or tokens.is_floating_point() or tokens.shape[1] == 0:
            raise ValueError(f"expected integer token ids (B, T) with T >= 1, got "
                             f"{tokens.dtype} {tuple(tokens.shape)}")
        check_token_ids(tokens, self.config.vocab_size)
        T = tokens.shape[1]
        offset = 0 if cache is None else cache.offset
        x = self.embed(tokens) * math.sqrt(self.config.d_model)  # (B, T, d_model)
        x = self.positions(x, offset)  # adds positions offset..offset+T-1 (or none), dropout
        mask: Tensor | None = None
        if cache is None or T > 1:
            # New positions offset..offset+T-1 see every earlier position and themselves.
            mask = causal_mask(offset + T, tokens.device)[offset:]  # (T, offset + T)
        for i, layer in enumerate(self.layers):
            x = layer(x, mask=mask, cache=None if cache is None else cache.layers[i])
        if cache is not None:
            cache.offset += T
        logits: Tensor = self.generator(self.norm(x))  # (B, T, V)
        return logits

    def loss(self, tokens: Tensor) -> Tensor:
        """Mean next-token cross-entropy (nats) of ``tokens`` (B, T), T >= 2: the logits at
        positions 0..T-2 against the tokens 1..T-1. Its exp is the perplexity."""
        if tokens.dim() != 2 or tokens.shape[1] < 2:
            raise ValueError(f"loss needs tokens (B, T) with T >= 2, got {tuple(tokens.shape)}")
        logits = self(tokens[:, :-1])  # (B, T - 1, V)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),  # (B (T - 1), V)
                               tokens[:, 1:].reshape(-1))

    def kv_cache_numel(self, batch_size: int, length: int) -> int:
        """Numbers a full cache holds for ``batch_size`` rows of ``length`` positions:
        2 (keys, values) * layers * batch * num_kv_heads * length * d_k."""
        if batch_size < 0 or length < 0:
            raise ValueError(f"need batch_size, length >= 0, got {batch_size}, {length}")
        cfg = self.config
        kv = cfg.num_kv_heads
        assert kv is not None  # set by the config
        return 2 * cfg.num_layers * batch_size * kv * length * cfg.d_k

    def kv_cache_bytes(self, batch_size: int, length: int) -> int:
        """Bytes of that cache, in the dtype of the model's parameters."""
        size = self.embed.weight.element_size()
        return self.kv_cache_numel(batch_size, length) * size

    def num_parameters(self) -> int:
        """Trainable parameters, shared (tied) ones counted once."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)
