"""A GRU encoder-decoder whose decoder takes a pluggable attention (chapter 1).

The RNN encoder-decoder of Cho et al. (2014) and Sutskever et al. (2014) squeezes the whole
source into one fixed-size vector. Bahdanau et al. (2015) keep every encoder state (the
*memory*) and let each decoder step take a weighted average of it; Luong et al. (2015) score
with a dot product instead of a small MLP. :class:`Seq2SeqRNN` builds all of them with one
architecture, so that only the way the decoder reads the source differs:

* ``"none"``: no attention. The decoder sees the source only through one vector, the final
  encoder state, which starts the decoder and is fed to it again at every step (Cho et al.).
* ``"source"``: the variant of the chapter's source article (and of PyTorch's old seq2seq
  tutorial): a Linear layer maps [embedded input; hidden] to ``max_len`` position scores.
  The scores never see the encoder states, only the decoder's own input and hidden state.
* ``"additive"``: Bahdanau scoring, ``v^T tanh(W s + U h_j)``.
* ``"dot"``: Luong "dot" scoring, ``s . h_j``.

Design choices (all variants share them):

* The encoder is a bidirectional GRU (as in Bahdanau et al.); its two directions are
  concatenated and projected to ``hidden_dim``, so every memory vector has the decoder's size
  and dot scoring needs no extra projection.
* Attention is placed as in Bahdanau et al.: the query is the *previous* decoder state
  ``s_{t-1}``; the context ``c_t`` enters the GRU with the embedded previous token, and the
  output layer reads ``[s_t; c_t]``. (Luong et al. attend *after* the GRU step; only their dot
  score is used here.)
* Special ids (``pad_id``, ``bos_id``, ``eos_id``, ``unk_id``) are given once, to the
  constructor, with the same defaults and checks as :class:`~labformer.TransformerConfig`.
* Sources are right-padded with ``pad_id``. Padding is excluded from the encoder (packed
  sequences) and from attention: a masked softmax renormalises over the real tokens. For
  ``"source"`` the scores are cut to the first ``S`` of the ``max_len`` slots before that
  masked softmax (the article's code softmaxes all ``max_len`` slots and lets the zero-padded
  encoder outputs absorb the rest, so its weights over real tokens need not sum to 1).

``model.config`` (:class:`RNNConfig`) records the constructor's arguments. The training loop
``labformer.train.train`` expects ``model(src, tgt_in) -> logits`` and ``model.config.pad_id``;
:class:`TeacherForcedRNN` wraps a :class:`Seq2SeqRNN` that way, so that the translator
chapter trains its recurrent baseline with the Transformer's own loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .attention import AdditiveAttention, DotAttention, Scorer, attend
from .masks import check_special_ids
from .special import BOS_ID, EOS_ID, PAD_ID, UNK_ID

__all__ = ["ATTENTION_KINDS", "EncoderOutput", "RNNConfig", "Seq2SeqRNN", "TeacherForcedRNN"]

ATTENTION_KINDS = ("none", "source", "additive", "dot")


@dataclass(frozen=True)
class RNNConfig:
    """The sizes and special ids a :class:`Seq2SeqRNN` was built with (its ``config``)."""

    src_vocab_size: int
    tgt_vocab_size: int
    emb_dim: int  # token embedding size, source and target
    hidden_dim: int  # GRU state size H, encoder (per direction) and decoder
    attention: str  # one of ATTENTION_KINDS
    max_len: int  # position slots of the "source" scorer
    pad_id: int
    bos_id: int
    eos_id: int
    unk_id: int


class EncoderOutput(NamedTuple):
    """What the decoder needs from the encoder, computed once per source batch."""

    memory: Tensor  # (B, S, H) every encoder state, projected to the decoder's size
    keys: Tensor  # memory as the scorer reads it, scorer.prepare_keys(memory), computed once
    src_mask: Tensor  # (B, S) bool, True = real token
    summary: Tensor  # (B, H) the fixed vector: final states of both directions -> s_0


class _SourceArticleAttention(nn.Module):
    """The source article's scorer: Linear([embedded input; hidden]) -> max_len position scores."""

    def __init__(self, emb_dim: int, hidden_dim: int, max_len: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.proj = nn.Linear(emb_dim + hidden_dim, max_len)

    def forward(
        self, emb: Tensor, hidden: Tensor, memory: Tensor, mask: Tensor
    ) -> tuple[Tensor, Tensor]:
        """emb (B, E), hidden (B, H), memory (B, S, H), mask (B, S) -> (B, H), (B, S)."""
        S = memory.shape[1]
        # The memory is only *averaged*, never scored: slot j's score does not know what is at j.
        scores = self.proj(torch.cat([emb, hidden], dim=-1))[:, :S]  # (B, S)
        # Renormalised over the real tokens; one query per row: (B, 1, S) -> (B, 1, H).
        context, weights = attend(scores.unsqueeze(1), memory, mask.unsqueeze(1))
        return context.squeeze(1), weights.squeeze(1)  # (B, H), (B, S)


class Seq2SeqRNN(nn.Module):
    """GRU encoder-decoder with pluggable attention: "none", "source", "additive" or "dot".

    forward(src (B, S), tgt_in (B, T)) -> logits (B, T, V), weights (B, T, S) or None.
    The special ids default to labformer.special's (every Vocab's PAD, BOS, EOS, UNK).
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        emb_dim: int = 64,
        hidden_dim: int = 128,
        attention: str = "additive",
        max_len: int = 32,
        pad_id: int = PAD_ID,
        bos_id: int = BOS_ID,
        eos_id: int = EOS_ID,
        unk_id: int = UNK_ID,
    ) -> None:
        super().__init__()
        if attention not in ATTENTION_KINDS:
            raise ValueError(f"attention must be one of {ATTENTION_KINDS}, got {attention!r}")
        check_special_ids(
            {"pad_id": pad_id, "bos_id": bos_id, "eos_id": eos_id, "unk_id": unk_id},
            {"src_vocab_size": src_vocab_size, "tgt_vocab_size": tgt_vocab_size},
        )
        self.config = RNNConfig(src_vocab_size, tgt_vocab_size, emb_dim, hidden_dim, attention,
                                max_len, pad_id, bos_id, eos_id, unk_id)
        self.attention_kind = attention
        self.hidden_dim = hidden_dim
        self.max_len = max_len
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = pad_id, bos_id, eos_id, unk_id
        self.tgt_vocab_size = tgt_vocab_size

        self.src_embed = nn.Embedding(src_vocab_size, emb_dim, padding_idx=pad_id)
        self.encoder = nn.GRU(emb_dim, hidden_dim, batch_first=True, bidirectional=True)
        self.memory_proj = nn.Linear(2 * hidden_dim, hidden_dim)  # both directions -> H
        self.bridge = nn.Linear(2 * hidden_dim, hidden_dim)  # final states -> s_0

        self.tgt_embed = nn.Embedding(tgt_vocab_size, emb_dim, padding_idx=pad_id)
        self.decoder = nn.GRUCell(emb_dim + hidden_dim, hidden_dim)  # input [y_{t-1}; c_t]
        self.out = nn.Linear(2 * hidden_dim, tgt_vocab_size)  # reads [s_t; c_t]

        self.attn: _SourceArticleAttention | Scorer | None
        if attention == "source":
            self.attn = _SourceArticleAttention(emb_dim, hidden_dim, max_len)
        elif attention == "additive":
            self.attn = AdditiveAttention(hidden_dim, hidden_dim, hidden_dim)
        elif attention == "dot":
            self.attn = DotAttention()
        else:
            self.attn = None

    # ----------------------------------------------------------------- checks
    def _check_src(self, src: Tensor) -> None:
        if src.dim() != 2 or src.is_floating_point():
            raise ValueError(f"src must be integer token ids (B, S), got {src.dtype} "
                             f"{tuple(src.shape)}")
        real = src != self.pad_id  # (B, S)
        if not bool(real[:, 0].all()):
            raise ValueError(f"every source needs at least one real token; src {tuple(src.shape)}")
        # Right padding only: once a row hits padding it must stay padding.
        if bool((real[:, 1:] & ~real[:, :-1]).any()):
            raise ValueError(f"src must be right-padded with pad_id={self.pad_id}")
        if self.attention_kind == "source" and src.shape[1] > self.max_len:
            raise ValueError(
                f"the 'source' attention has {self.max_len} position slots, but src "
                f"{tuple(src.shape)} has length {src.shape[1]} > max_len"
            )

    # ---------------------------------------------------------------- encoder
    def encode(self, src: Tensor) -> EncoderOutput:
        """src (B, S) -> EncoderOutput(memory (B, S, H), keys, src_mask (B, S), summary (B, H))."""
        self._check_src(src)
        B, S = src.shape
        src_mask = src != self.pad_id  # (B, S), True = real token
        lengths = src_mask.sum(dim=1).cpu()
        packed = pack_padded_sequence(
            self.src_embed(src), lengths, batch_first=True, enforce_sorted=False
        )
        outputs, final = self.encoder(packed)  # final: (2, B, H), last *real* step per direction
        outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=S)  # (B, S, 2H)
        memory = self.memory_proj(outputs)  # (B, S, H)
        summary = torch.tanh(self.bridge(torch.cat([final[0], final[1]], dim=-1)))  # (B, H)
        # The keys' part of the score (Bahdanau's U h_j) does not depend on the step: once here.
        keys = self.attn.prepare_keys(memory) if isinstance(self.attn, Scorer) else memory
        return EncoderOutput(memory, keys, src_mask, summary)

    # ---------------------------------------------------------------- decoder
    def attend(
        self, prev_tokens: Tensor, hidden: Tensor, enc: EncoderOutput,
        prev_emb: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Read the source for one step: prev_tokens (B,), hidden s_{t-1} (B, H)
        -> context c_t (B, H), weights (B, S) over enc.memory. ``prev_emb`` (B, E) is
        ``tgt_embed(prev_tokens)`` when the caller has it already."""
        if self.attn is None:
            raise ValueError("attention='none' has no attention step: the decoder reads only s_0")
        context: tuple[Tensor, Tensor]
        if isinstance(self.attn, _SourceArticleAttention):
            emb = self.tgt_embed(prev_tokens) if prev_emb is None else prev_emb
            context = self.attn(emb, hidden, enc.memory, enc.src_mask)
            return context
        # Query s_{t-1}; keys and values are the memory: (B, H), (B, S).
        context = self.attn(hidden, enc.memory, enc.memory, mask=enc.src_mask,
                            prepared_keys=enc.keys)
        return context

    def _recur(
        self, prev_tokens: Tensor, emb: Tensor, hidden: Tensor, enc: EncoderOutput
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """The recurrent part of a step, without the output layer: prev_tokens (B,), their
        embedding (B, E), s_{t-1} (B, H) -> s_t (B, H), context c_t (B, H), weights (B, S)."""
        if self.attn is None:
            context, weights = enc.summary, None  # Cho et al. (2014): c is fed at every step
        else:
            context, weights = self.attend(prev_tokens, hidden, enc, emb)  # (B, H), (B, S)
        hidden = self.decoder(torch.cat([emb, context], dim=-1), hidden)  # (B, H)
        return hidden, context, weights

    def step(
        self, prev_tokens: Tensor, hidden: Tensor, enc: EncoderOutput
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """One decoder step: prev_tokens (B,), hidden s_{t-1} (B, H)
        -> logits (B, V), new hidden s_t (B, H), weights (B, S) or None."""
        hidden, context, weights = self._recur(prev_tokens, self.tgt_embed(prev_tokens),
                                               hidden, enc)
        logits = self.out(torch.cat([hidden, context], dim=-1))  # (B, V)
        return logits, hidden, weights

    def forward(self, src: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor | None]:
        """Teacher forcing: src (B, S), tgt_in (B, T) (starts with BOS)
        -> logits (B, T, V), attention weights (B, T, S) or None for "none"."""
        if tgt_in.dim() != 2 or tgt_in.is_floating_point():
            raise ValueError(f"tgt_in must be integer token ids (B, T), got {tgt_in.dtype} "
                             f"{tuple(tgt_in.shape)}")
        if src.dim() == 2 and src.shape[0] != tgt_in.shape[0]:
            raise ValueError(f"src {tuple(src.shape)} and tgt_in {tuple(tgt_in.shape)} "
                             "must have the same batch size")
        enc = self.encode(src)
        hidden = enc.summary
        emb = self.tgt_embed(tgt_in)  # (B, T, E): teacher forcing knows every input at once
        states: list[Tensor] = []
        weights: list[Tensor] = []
        # A loop even in training: an RNN's step t needs s_{t-1}, so steps cannot run at once.
        # Only the recurrence is in the loop; the output layer reads every [s_t; c_t] at once,
        # the same numbers as step() computes one step at a time.
        for t in range(tgt_in.shape[1]):
            hidden, context, w = self._recur(tgt_in[:, t], emb[:, t], hidden, enc)
            states.append(torch.cat([hidden, context], dim=-1))  # (B, 2H)
            if w is not None:
                weights.append(w)
        all_weights = torch.stack(weights, dim=1) if weights else None  # (B, T, S)
        return self.out(torch.stack(states, dim=1)), all_weights  # (B, T, V)

    @torch.no_grad()
    def greedy_decode(
        self,
        src: Tensor,
        bos_id: int | None = None,
        eos_id: int | None = None,
        *,
        max_len: int,
    ) -> tuple[Tensor, Tensor | None]:
        """Pick the arg-max token step by step: src (B, S) -> tokens (B, L <= max_len)
        (no BOS; EOS kept; pad_id after it), weights (B, L, S) or None (zeros after EOS).

        bos_id and eos_id default to the model's own; pass them only to override.
        """
        if not isinstance(max_len, int) or max_len < 1:
            raise ValueError(f"max_len must be a positive int, got {max_len!r}")
        bos_id = self.bos_id if bos_id is None else bos_id
        eos_id = self.eos_id if eos_id is None else eos_id
        enc = self.encode(src)
        hidden = enc.summary
        B = src.shape[0]
        prev = torch.full((B,), bos_id, dtype=torch.long, device=src.device)
        done = torch.zeros(B, dtype=torch.bool, device=src.device)
        tokens, weights = [], []
        for _ in range(max_len):
            logits, hidden, w = self.step(prev, hidden, enc)
            nxt = logits.argmax(dim=-1).masked_fill(done, self.pad_id)  # (B,)
            tokens.append(nxt)
            if w is not None:
                weights.append(w.masked_fill(done.unsqueeze(1), 0.0))
            done = done | (nxt == eos_id)
            prev = nxt
            if bool(done.all()):
                break
        out_weights = torch.stack(weights, dim=1) if weights else None  # (B, L, S)
        return torch.stack(tokens, dim=1), out_weights  # (B, L)


class TeacherForcedRNN(nn.Module):
    """A :class:`Seq2SeqRNN` as ``labformer.train.train`` sees a model: logits only.

    forward(src (B, S), tgt_in (B, T)) -> logits (B, T, V); ``config`` is the wrapped model's,
    so the training loop finds ``config.pad_id``. The parameters are the wrapped model's own:
    training the adapter trains ``rnn``.
    """

    def __init__(self, rnn: Seq2SeqRNN) -> None:
        super().__init__()
        self.rnn = rnn
        self.config = rnn.config

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        logits: Tensor = self.rnn(src, tgt_in)[0]  # (B, T, V); the loss needs no weights
        return logits
