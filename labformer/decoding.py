"""Turning a trained model into output sequences: greedy decoding and beam search.

Both functions use only this model interface (``Transformer`` has it, so does the test double
:class:`labformer.book.testing.PrefixTableModel`)::

    model.config.pad_id, .bos_id, .eos_id -> the special ids (one source of truth: the model)
    model.encode(src (B, S)) -> memory (B, S, D)
    model.src_mask(src (B, S)) -> memory_mask (B, 1, 1, S)
    model.new_cache() -> cache with .offset and .reorder(index)
    model.decode(tgt, memory, memory_mask, cache) -> logits (B, T, V)

With a cache, each step feeds only the newest token, (B, 1); the keys and values of earlier
positions come from the cache (incremental decoding). Without one, the whole prefix is run again.

Scores are sums of log-probabilities. PAD and BOS are never generated (their log-probabilities
are set to -inf, without renormalising). Beam search can rank finished hypotheses with GNMT's
length penalty (Wu et al. 2016): score = log_prob / ((5 + L) / 6) ** alpha, where L counts the
generated tokens, EOS included; alpha = 0 (the default) means no normalisation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "BeamStep",
    "DecodingModel",
    "Hypothesis",
    "beam_search",
    "greedy_decode",
    "length_penalty_factor",
    "sequence_log_prob",
]


class SpecialIds(Protocol):
    """What decoding reads from ``model.config``."""

    @property
    def pad_id(self) -> int: ...
    @property
    def bos_id(self) -> int: ...
    @property
    def eos_id(self) -> int: ...


class DecodingModel(Protocol):
    """The model interface both decoders use (the module docstring lists the shapes)."""

    @property
    def config(self) -> Any: ...  # a SpecialIds: TransformerConfig, testing.TableConfig
    def encode(self, src: Tensor) -> Tensor: ...
    def src_mask(self, src: Tensor) -> Tensor: ...
    def new_cache(self) -> Any: ...
    def decode(self, tgt: Tensor, memory: Tensor, memory_mask: Tensor,
               cache: Any = None) -> Tensor: ...


@dataclass(frozen=True)
class Hypothesis:
    """One output of beam search: tokens (no BOS; ends with EOS if finished) and its scores."""

    tokens: list[int]
    score: float  # log_prob divided by the length penalty; what hypotheses are ranked by
    log_prob: float  # sum of the tokens' log-probabilities
    finished: bool = True  # False if it hit max_len without EOS


@dataclass(frozen=True)
class BeamStep:
    """What one beam-search step kept, for drawing the search tree (batch row 0 only)."""

    parents: list[int]  # for each kept live hypothesis, the index of its parent in the last step
    tokens: list[int]  # the token it appended
    log_probs: list[float]  # its total log-probability (-inf for an empty slot)
    finished: list[tuple[int, float]] = field(default_factory=list)  # (parent, log_prob) ended


def length_penalty_factor(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT's length penalty ((5 + length) / 6) ** alpha; 1 when alpha = 0."""
    return ((5.0 + length) / 6.0) ** alpha


@dataclass(frozen=True)
class _Specials:
    pad: int
    bos: int
    eos: int


def _specials(model: DecodingModel, pad_id: int | None = None, bos_id: int | None = None,
              eos_id: int | None = None) -> _Specials:
    """The model's special ids (``model.config``), each replaced by an explicit override."""
    cfg: SpecialIds = model.config
    return _Specials(cfg.pad_id if pad_id is None else pad_id,
                     cfg.bos_id if bos_id is None else bos_id,
                     cfg.eos_id if eos_id is None else eos_id)


def _check_src(src: Tensor) -> Tensor:
    """src as (B, S) integer ids (a single sentence (S,) becomes one row)."""
    if src.dim() == 1:
        src = src.unsqueeze(0)
    if src.dim() != 2 or src.is_floating_point():
        raise ValueError(f"src must be integer ids (B, S) or (S,), got {src.dtype} "
                         f"{tuple(src.shape)}")
    return src


def _next_log_probs(logits: Tensor, banned: Sequence[int]) -> Tensor:
    """logits (N, V) of the last position -> log-probabilities with banned ids at -inf."""
    log_p = F.log_softmax(logits.float(), dim=-1)  # (N, V)
    for index in banned:  # int indices: no id list copied to the device
        log_p[:, index] = -math.inf
    return log_p


class _Stepper:
    """Runs the decoder one token at a time, with or without the key/value cache."""

    def __init__(self, model: DecodingModel, memory: Tensor, memory_mask: Tensor, bos: Tensor,
                 use_cache: bool) -> None:
        self.model, self.memory, self.memory_mask = model, memory, memory_mask
        self.cache = model.new_cache() if use_cache else None
        self.prefix = bos  # (N, t): every token fed so far, BOS first
        self.new = bos  # (N, 1): the tokens the next call still has to feed

    def logits(self) -> Tensor:
        """Logits (N, V) for the position after the current prefix."""
        if self.cache is None:
            out = self.model.decode(self.prefix, self.memory, self.memory_mask)  # (N, t, V)
        else:
            out = self.model.decode(self.new, self.memory, self.memory_mask, self.cache)
        return out[:, -1]

    def advance(self, tokens: Tensor, index: Tensor | None = None) -> None:
        """Keep rows ``index`` (beam reordering), then append ``tokens`` (N,)."""
        if index is not None:
            self.prefix = self.prefix.index_select(0, index)
            if self.cache is not None:
                self.cache.reorder(index)
        self.prefix = torch.cat([self.prefix, tokens[:, None]], dim=1)  # (N, t + 1)
        self.new = tokens[:, None]  # (N, 1)


@torch.no_grad()
def greedy_decode(
    model: DecodingModel,
    src: Tensor,
    max_len: int = 50,
    *,
    use_cache: bool = True,
    bos_id: int | None = None,
    eos_id: int | None = None,
    pad_id: int | None = None,
) -> Tensor:
    """Pick the most probable token at every step: src (B, S) -> ids (B, L), L <= max_len.

    Rows keep their EOS and are padded with PAD after it; BOS is not included. The special ids
    are the model's (``model.config``); pass one only to override it (a benchmark that must
    never stop passes ``eos_id=-1``).
    """
    ids = _specials(model, pad_id, bos_id, eos_id)
    src = _check_src(src)
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, got {max_len}")
    B = src.shape[0]
    memory, memory_mask = model.encode(src), model.src_mask(src)
    bos = torch.full((B, 1), ids.bos, dtype=torch.long, device=src.device)
    stepper = _Stepper(model, memory, memory_mask, bos, use_cache)
    done = torch.zeros(B, dtype=torch.bool, device=src.device)
    out = []
    for _ in range(max_len):
        log_p = _next_log_probs(stepper.logits(), (ids.pad, ids.bos))  # (B, V)
        token = log_p.argmax(dim=-1)  # (B,)
        token = torch.where(done, torch.full_like(token, ids.pad), token)
        out.append(token)
        done = done | (token == ids.eos)
        if bool(done.all()):
            break
        stepper.advance(token)
    return torch.stack(out, dim=1)  # (B, L)


@torch.no_grad()
def sequence_log_prob(model: DecodingModel, src: Tensor, tokens: Tensor) -> Tensor:
    """Total log-probability of given outputs: src (B, S), tokens (B, L) without BOS -> (B,).

    Positions holding PAD (after EOS) are not counted; PAD and BOS are banned, as in
    decoding, so the result is the score beam search would give the same tokens (alpha = 0).
    """
    ids = _specials(model)
    bos_id, pad_id = ids.bos, ids.pad
    src = _check_src(src)
    if tokens.dim() != 2 or tokens.shape[0] != src.shape[0]:
        raise ValueError(f"tokens must be (B, L) with B = {src.shape[0]}, got "
                         f"{tuple(tokens.shape)}")
    memory, memory_mask = model.encode(src), model.src_mask(src)
    bos = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    tgt_in = torch.cat([bos, tokens[:, :-1]], dim=1)  # (B, L)
    logits = model.decode(tgt_in, memory, memory_mask)  # (B, L, V)
    B, L, V = logits.shape
    log_p = _next_log_probs(logits.reshape(B * L, V), (pad_id, bos_id)).view(B, L, V)
    picked = log_p.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)  # (B, L)
    return torch.where(tokens == pad_id, torch.zeros_like(picked), picked).sum(dim=1)


@torch.no_grad()
def beam_search(
    model: DecodingModel,
    src: Tensor,
    beam_size: int = 4,
    top_beams: int = 1,
    max_len: int | Sequence[int] = 50,
    length_penalty: float = 0.0,
    *,
    use_cache: bool = True,
    trace: list[BeamStep] | None = None,
    early_stopping: bool = True,
    bos_id: int | None = None,
    eos_id: int | None = None,
    pad_id: int | None = None,
) -> list[list[Hypothesis]]:
    """Beam search: src (B, S) or (S,) -> for each row, its ``top_beams`` best hypotheses.

    All B * beam_size hypotheses run through the decoder together, one call per step. At each
    step, an EOS candidate ranked among the best ``beam_size`` is set aside as finished; the best
    ``beam_size`` non-EOS candidates live on. A row stops once it holds ``beam_size`` finished
    hypotheses and no live one can still beat the worst of them. ``max_len`` is one limit for
    every row or one per row (B,): a row's result depends only on its own source and limit,
    never on the other rows of its batch. ``length_penalty`` is GNMT's alpha. ``beam_size=1``
    is greedy decoding. Pass a list as ``trace`` to collect one :class:`BeamStep` per step for
    batch row 0. ``early_stopping=False`` runs every row to its limit (the stopping rule must
    not change the result; the tests check it). The special ids are the model's
    (``model.config``) unless overridden.

    The search runs on the model's device; the host reads one small (B, K, 4) tensor per step
    (the finished and live candidates), so a GPU is synchronised once per step, not per
    hypothesis.
    """
    if beam_size < 1:
        raise ValueError(f"beam_size must be at least 1, got {beam_size}")
    if not 1 <= top_beams <= beam_size:
        raise ValueError(f"top_beams must be in [1, beam_size={beam_size}], got {top_beams}")
    if length_penalty < 0:
        raise ValueError(f"length_penalty (alpha) must be >= 0, got {length_penalty}")
    ids = _specials(model, pad_id, bos_id, eos_id)
    bos_id, eos_id, pad_id = ids.bos, ids.eos, ids.pad
    src = _check_src(src)
    B, K, device = src.shape[0], beam_size, src.device
    limits = _row_limits(max_len, B)

    # Every beam of every row in one batch of B * K rows: row b's beams are b*K .. b*K + K-1.
    memory = model.encode(src)  # (B, S, D)
    memory_mask = model.src_mask(src)  # (B, 1, 1, S)
    memory = memory.repeat_interleave(K, dim=0)  # (B*K, S, D)
    memory_mask = memory_mask.repeat_interleave(K, dim=0)  # (B*K, 1, 1, S)
    bos = torch.full((B * K, 1), bos_id, dtype=torch.long, device=device)
    stepper = _Stepper(model, memory, memory_mask, bos, use_cache)

    # Only beam 0 starts alive; the other K-1 copies of BOS would only duplicate it.
    beam_lp = torch.full((B, K), -math.inf, device=device)
    beam_lp[:, 0] = 0.0
    # On the host, each step's (parent, token) of every live hypothesis, (B, K) each: a
    # hypothesis's tokens are read back along its parents only when it leaves the beam.
    history: list[tuple[list[list[int]], list[list[int]]]] = []
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    done = [False] * B

    def score(log_prob: float, length: int) -> float:
        return log_prob / float(length_penalty_factor(length, length_penalty))

    def tokens_of(b: int, k: int) -> list[int]:
        """The tokens of live hypothesis k of row b after the last step in ``history``."""
        out = []
        for parents, tokens in reversed(history):
            out.append(tokens[b][k])
            k = parents[b][k]
        return out[::-1]

    for t in range(1, max(limits) + 1):
        log_p = _next_log_probs(stepper.logits(), (pad_id, bos_id))  # (B*K, V)
        V = log_p.shape[-1]
        cand = beam_lp.unsqueeze(-1) + log_p.view(B, K, V)  # (B, K, V)
        # Rank of the worst candidate still "in the beam": EOS candidates above it finish.
        kth = cand.view(B, K * V).topk(min(K, K * V), dim=1).values[:, -1:]  # (B, 1)
        eos_lp = cand[:, :, eos_id]  # (B, K)
        ends = torch.where((eos_lp > -math.inf) & (eos_lp >= kth), eos_lp, -math.inf)
        cand[:, :, eos_id] = -math.inf
        live_lp, live_idx = cand.view(B, K * V).topk(K, dim=1)  # (B, K) each
        parent, token = live_idx // V, live_idx % V  # (B, K) each
        # The one read per step: float64 holds the float32 scores and the ids exactly.
        host = torch.stack([ends.double(), live_lp.double(), parent.double(), token.double()],
                           dim=-1).tolist()  # (B, K, 4)
        step = BeamStep([], [], [])
        for b in range(B):
            if done[b]:
                continue
            for k in range(K):
                lp = host[b][k][0]
                if lp > -math.inf:
                    seq = tokens_of(b, k) + [eos_id]
                    finished[b].append(Hypothesis(seq, score(lp, t), lp, True))
                    if b == 0:
                        step.finished.append((k, lp))
        history.append(([[int(h[2]) for h in row] for row in host],
                        [[int(h[3]) for h in row] for row in host]))
        if trace is not None:
            trace.append(BeamStep(history[-1][0][0], history[-1][1][0],
                                  [h[1] for h in host[0]], step.finished))
        beam_lp = live_lp

        for b in range(B):
            if done[b]:
                continue
            finished[b].sort(key=lambda h: h.score, reverse=True)
            del finished[b][K:]  # only the best K can ever be returned or matter for stopping
            best_live = host[b][0][1]
            if best_live == -math.inf:
                done[b] = True  # nothing left to extend
            elif early_stopping and len(finished[b]) >= K:
                # A live hypothesis only loses log-probability as it grows, so its best possible
                # score is its log-prob now under the largest length penalty still reachable.
                bound = best_live / float(length_penalty_factor(limits[b], length_penalty))
                done[b] = bound <= finished[b][-1].score
            if not done[b] and t == limits[b]:
                # Hit its limit: unfinished hypotheses compete too, scored at their full length.
                for k in range(K):
                    lp = host[b][k][1]
                    if lp > -math.inf:
                        finished[b].append(Hypothesis(tokens_of(b, k), score(lp, t), lp, False))
                done[b] = True
        if all(done):
            break
        flat_parent = (parent + torch.arange(B, device=device).unsqueeze(1) * K).view(-1)
        stepper.advance(token.view(-1), flat_parent)

    results = []
    for b in range(B):
        pool = sorted(finished[b], key=lambda h: h.score, reverse=True)
        results.append(pool[:top_beams])
    return results


def _row_limits(max_len: int | Sequence[int], rows: int) -> list[int]:
    """One output limit per batch row, from a shared limit or a list of them."""
    limits = [max_len] * rows if isinstance(max_len, int) else [int(n) for n in max_len]
    if len(limits) != rows:
        raise ValueError(f"max_len must be an int or one limit per row ({rows}), got "
                         f"{len(limits)} limits")
    if limits and min(limits) < 1:
        raise ValueError(f"max_len must be at least 1, got {min(limits)}")
    return limits
