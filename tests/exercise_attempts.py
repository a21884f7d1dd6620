"""Attempts at labformer.book.exercises, written from the exercises' statements alone (no
labformer).

``RIGHT[name]`` is a correct attempt at each exercise; ``WRONG`` lists classic mistakes, at
least three per exercise, each with the property (``Mismatch.property``) that must reject it.
The layers and multi-head attention are written once with switches, and each wrong class flips
one switch. Used by tests/notebooks/test_exercises.py and by tests/mutants.py (make test-mutants).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

Step = Callable[[list[int]], Tensor]


# ------------------------------------------------------------------------------- attention


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None
              ) -> tuple[Tensor, Tensor]:
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def attention_scaled_after_softmax(q: Tensor, k: Tensor, v: Tensor,
                                   mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1) / math.sqrt(q.shape[-1])
    return weights @ v, weights


def attention_softmax_over_queries(q: Tensor, k: Tensor, v: Tensor,
                                   mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-2)
    return weights @ v, weights


def attention_inverted_mask(q: Tensor, k: Tensor, v: Tensor,
                            mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))  # True taken as "hide"
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def attention_unscaled(q: Tensor, k: Tensor, v: Tensor,
                       mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def attention_naive_exp(q: Tensor, k: Tensor, v: Tensor,
                        mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    e = torch.exp(scores)  # no max subtracted: overflows for large scores
    if mask is not None:
        e = e * mask
    weights = e / e.sum(-1, keepdim=True)
    return weights @ v, weights


def attention_k_dot_T(q: Tensor, k: Tensor, v: Tensor,
                      mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    scores = q @ k.T / math.sqrt(q.shape[-1])  # .T reverses every axis of a batch
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def attention_mask_after_softmax(q: Tensor, k: Tensor, v: Tensor,
                                 mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        weights = weights * mask  # zeroed, but the row no longer sums to one
    return weights @ v, weights


# ----------------------------------------------------------------------------------- masks


def causal_mask(T: int) -> Tensor:
    return torch.tril(torch.ones(T, T, dtype=torch.bool))


def causal_mask_upper(T: int) -> Tensor:
    return torch.triu(torch.ones(T, T, dtype=torch.bool))


def causal_mask_no_diagonal(T: int) -> Tensor:
    return torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)


def causal_mask_float(T: int) -> Tensor:
    return torch.tril(torch.ones(T, T))


def causal_mask_blocked_true(T: int) -> Tensor:
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # True = blocked


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    return (tokens != pad_id)[:, None, None, :]


def padding_mask_inverted(tokens: Tensor, pad_id: int) -> Tensor:
    return (tokens == pad_id)[:, None, None, :]


def padding_mask_pad_zero(tokens: Tensor, pad_id: int) -> Tensor:
    return (tokens != 0)[:, None, None, :]  # forgets its argument


def padding_mask_query_axis(tokens: Tensor, pad_id: int) -> Tensor:
    return (tokens != pad_id)[:, None, :, None]


def padding_mask_flat(tokens: Tensor, pad_id: int) -> Tensor:
    return tokens != pad_id


# ------------------------------------------------------------------------------- positions


def _angles(max_len: int, d_model: int, exponent_scale: float = 2.0) -> Tensor:
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    i = torch.arange(d_model // 2, dtype=torch.float64)
    return pos / 10000.0 ** (exponent_scale * i / d_model)  # (max_len, d_model / 2)


def sinusoidal_positions(max_len: int, d_model: int) -> Tensor:
    a = _angles(max_len, d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(a)
    pe[:, 1::2] = torch.cos(a)
    return pe


def sinusoidal_swapped(max_len: int, d_model: int) -> Tensor:
    a = _angles(max_len, d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.cos(a)
    pe[:, 1::2] = torch.sin(a)
    return pe


def sinusoidal_halves(max_len: int, d_model: int) -> Tensor:
    a = _angles(max_len, d_model)
    return torch.cat([torch.sin(a), torch.cos(a)], dim=-1).float()  # sin block, cos block


def sinusoidal_i_over_d(max_len: int, d_model: int) -> Tensor:
    a = _angles(max_len, d_model, exponent_scale=1.0)  # 10000^(i / d), not 10000^(2i / d)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(a)
    pe[:, 1::2] = torch.cos(a)
    return pe


def sinusoidal_times(max_len: int, d_model: int) -> Tensor:
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    i = torch.arange(d_model // 2, dtype=torch.float64)
    a = pos * 10000.0 ** (2 * i / d_model)  # multiplied instead of divided
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(a)
    pe[:, 1::2] = torch.cos(a)
    return pe


# ------------------------------------------------------------------------------ layer norm


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def layer_norm_unbiased(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True)  # divides by n - 1
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def layer_norm_eps_outside(x: Tensor, weight: Tensor, bias: Tensor,
                           eps: float = 1e-5) -> Tensor:
    mean = x.mean(-1, keepdim=True)
    std = ((x - mean) ** 2).mean(-1, keepdim=True).sqrt()
    return (x - mean) / (std + eps) * weight + bias


def layer_norm_first_axis(x: Tensor, weight: Tensor, bias: Tensor,
                          eps: float = 1e-5) -> Tensor:
    mean = x.mean(0, keepdim=True)
    var = ((x - mean) ** 2).mean(0, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def layer_norm_affine_first(x: Tensor, weight: Tensor, bias: Tensor,
                            eps: float = 1e-5) -> Tensor:
    y = x * weight + bias  # scaled and shifted, then normalised: the affine is undone
    mean = y.mean(-1, keepdim=True)
    var = ((y - mean) ** 2).mean(-1, keepdim=True)
    return (y - mean) / torch.sqrt(var + eps)


def layer_norm_no_eps(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var) * weight + bias


# --------------------------------------------------------------------- multi-head attention


class MultiHead(nn.Module):
    """Multi-head attention; the class attributes are the switches the wrong ones flip."""

    transpose_back = True
    scale_by_d_k = True
    keys_from_key = True
    use_mask = True
    use_out_proj = True

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        self.h, self.d_k = num_heads, d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                mask: Tensor | None = None) -> Tensor:
        B, T_q, D = query.shape

        def split(x: Tensor) -> Tensor:
            return x.view(B, x.shape[1], self.h, self.d_k).transpose(1, 2)

        q = split(self.q_proj(query))
        k = split(self.k_proj(key if self.keys_from_key else query))
        v = split(self.v_proj(value if self.keys_from_key else query))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k if self.scale_by_d_k else D)
        if mask is not None and self.use_mask:
            scores = scores.masked_fill(~mask, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v  # (B, h, T_q, d_k)
        out = out.transpose(1, 2).reshape(B, T_q, D) if self.transpose_back \
            else out.reshape(B, T_q, D)
        return self.out_proj(out) if self.use_out_proj else out


class MultiHeadNoTranspose(MultiHead):
    transpose_back = False


class MultiHeadScaledByDModel(MultiHead):
    scale_by_d_k = False


class MultiHeadKeysFromQuery(MultiHead):
    keys_from_key = False


class MultiHeadIgnoresMask(MultiHead):
    use_mask = False


class MultiHeadNoOutProj(MultiHead):
    use_out_proj = False


# ---------------------------------------------------------------------------------- the loss


def label_smoothed_cross_entropy(logits: Tensor, target: Tensor, smoothing: float,
                                 ignore_index: int) -> Tensor:
    keep = target != ignore_index
    log_p = torch.log_softmax(logits, dim=-1)
    safe = torch.where(keep, target, torch.zeros_like(target))
    nll = -log_p.gather(-1, safe.unsqueeze(-1)).squeeze(-1)
    loss = (1 - smoothing) * nll - smoothing * log_p.mean(-1)
    return (loss * keep).sum() / keep.sum()


def lsce_pads_counted(logits: Tensor, target: Tensor, smoothing: float,
                      ignore_index: int) -> Tensor:
    log_p = torch.log_softmax(logits, dim=-1)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    return ((1 - smoothing) * nll - smoothing * log_p.mean(-1)).mean()


def lsce_pads_in_count(logits: Tensor, target: Tensor, smoothing: float,
                       ignore_index: int) -> Tensor:
    keep = target != ignore_index
    log_p = torch.log_softmax(logits, dim=-1)
    safe = torch.where(keep, target, torch.zeros_like(target))
    nll = -log_p.gather(-1, safe.unsqueeze(-1)).squeeze(-1)
    loss = (1 - smoothing) * nll - smoothing * log_p.mean(-1)
    return (loss * keep).sum() / target.numel()  # divides by every position


def lsce_v_minus_one(logits: Tensor, target: Tensor, smoothing: float,
                     ignore_index: int) -> Tensor:
    keep = target != ignore_index
    V = logits.shape[-1]
    log_p = torch.log_softmax(logits, dim=-1)
    safe = torch.where(keep, target, torch.zeros_like(target))
    p = torch.full_like(log_p, smoothing / (V - 1))  # eps over the V - 1 wrong classes
    p.scatter_(-1, safe.unsqueeze(-1), 1 - smoothing)
    loss = -(p * log_p).sum(-1)
    return (loss * keep).sum() / keep.sum()


def lsce_raw_logits(logits: Tensor, target: Tensor, smoothing: float,
                    ignore_index: int) -> Tensor:
    keep = target != ignore_index
    safe = torch.where(keep, target, torch.zeros_like(target))
    nll = -logits.gather(-1, safe.unsqueeze(-1)).squeeze(-1)  # logits used as log-probs
    loss = (1 - smoothing) * nll - smoothing * logits.mean(-1)
    return (loss * keep).sum() / keep.sum()


def lsce_no_one_minus_eps(logits: Tensor, target: Tensor, smoothing: float,
                          ignore_index: int) -> Tensor:
    keep = target != ignore_index
    log_p = torch.log_softmax(logits, dim=-1)
    safe = torch.where(keep, target, torch.zeros_like(target))
    nll = -log_p.gather(-1, safe.unsqueeze(-1)).squeeze(-1)
    loss = nll - smoothing * log_p.mean(-1)  # the target keeps 1, not 1 - eps
    return (loss * keep).sum() / keep.sum()


# -------------------------------------------------------------------------------- decoding


def greedy_decode(step: Step, bos_id: int, eos_id: int, max_len: int) -> list[int]:
    out: list[int] = []
    for _ in range(max_len):
        token = int(step([bos_id, *out]).argmax())
        out.append(token)
        if token == eos_id:
            break
    return out


def greedy_forgets_eos(step: Step, bos_id: int, eos_id: int, max_len: int) -> list[int]:
    out: list[int] = []
    for _ in range(max_len):
        out.append(int(step([bos_id, *out]).argmax()))
    return out


def greedy_drops_eos(step: Step, bos_id: int, eos_id: int, max_len: int) -> list[int]:
    out: list[int] = []
    for _ in range(max_len):
        token = int(step([bos_id, *out]).argmax())
        if token == eos_id:
            break
        out.append(token)
    return out


def greedy_keeps_bos(step: Step, bos_id: int, eos_id: int, max_len: int) -> list[int]:
    out = [bos_id]
    for _ in range(max_len):
        out.append(int(step(out).argmax()))
        if out[-1] == eos_id:
            break
    return out


def greedy_one_too_many(step: Step, bos_id: int, eos_id: int, max_len: int) -> list[int]:
    out: list[int] = []
    for _ in range(max_len + 1):
        token = int(step([bos_id, *out]).argmax())
        out.append(token)
        if token == eos_id:
            break
    return out


def greedy_argmin(step: Step, bos_id: int, eos_id: int, max_len: int) -> list[int]:
    out: list[int] = []
    for _ in range(max_len):
        token = int(step([bos_id, *out]).argmin())
        out.append(token)
        if token == eos_id:
            break
    return out


def greedy_no_bos(step: Step, bos_id: int, eos_id: int, max_len: int) -> list[int]:
    out: list[int] = []
    for _ in range(max_len):
        token = int(step(out).argmax())  # the first call gets an empty prefix
        out.append(token)
        if token == eos_id:
            break
    return out


def greedy_same_prefix(step: Step, bos_id: int, eos_id: int, max_len: int) -> list[int]:
    out: list[int] = []
    log_p = step([bos_id])  # computed once: every later token ignores the ones before it
    for _ in range(max_len):
        out.append(int(log_p.argmax()))
        if out[-1] == eos_id:
            break
        log_p[out[-1]] = float("-inf")
    return out


def _beam(step: Step, bos_id: int, eos_id: int, beam_size: int, max_len: int, alpha: float,
          *, rank: str = "sum", penalty_counts_eos: bool = True, eos_finishes: bool = True,
          return_from: str = "all", per_parent: bool = False,
          finished_in_beam: bool = False) -> list[int]:
    """Beam search as the exercise states it; the keyword switches plant the mistakes."""
    alive: list[tuple[list[int], float, float]] = [([], 0.0, 0.0)]  # tokens, log p, last
    finished: list[tuple[list[int], float, float]] = []
    for _ in range(max_len):
        cands = []
        for tokens, lp, _last in alive:
            log_p = step([bos_id, *tokens]).tolist()
            children = [(tokens + [t], lp + x, x) for t, x in enumerate(log_p)]
            if per_parent:  # the best children of each parent, no pruning across parents
                children = sorted(children, key=lambda c: c[1], reverse=True)[:beam_size]
            cands += children
        if finished_in_beam:  # finished hypotheses stay in the beam, taking slots
            cands += finished
            finished = []
        cands.sort(key=lambda c: c[1] if rank == "sum" else c[2], reverse=True)
        kept = cands if per_parent else cands[:beam_size]
        if eos_finishes:
            finished += [c for c in kept if c[0][-1] == eos_id]
            alive = [c for c in kept if c[0][-1] != eos_id]
        else:
            alive = kept
        if not alive:
            break

    def score(c: tuple[list[int], float, float]) -> float:
        length = len(c[0]) - (0 if penalty_counts_eos or c[0][-1] != eos_id else 1)
        return c[1] / ((5 + length) / 6) ** alpha

    pool = {"all": finished + alive, "alive": alive or finished}[return_from]
    return max(pool, key=score)[0]


def beam_search(step: Step, bos_id: int, eos_id: int, beam_size: int, max_len: int,
                alpha: float) -> list[int]:
    return _beam(step, bos_id, eos_id, beam_size, max_len, alpha)


def beam_ranks_last_token(step: Step, bos_id: int, eos_id: int, beam_size: int, max_len: int,
                          alpha: float) -> list[int]:
    return _beam(step, bos_id, eos_id, beam_size, max_len, alpha, rank="last")


def beam_no_length_penalty(step: Step, bos_id: int, eos_id: int, beam_size: int,
                           max_len: int, alpha: float) -> list[int]:
    return _beam(step, bos_id, eos_id, beam_size, max_len, 0.0)


def beam_penalty_without_eos(step: Step, bos_id: int, eos_id: int, beam_size: int,
                             max_len: int, alpha: float) -> list[int]:
    return _beam(step, bos_id, eos_id, beam_size, max_len, alpha, penalty_counts_eos=False)


def beam_extends_finished(step: Step, bos_id: int, eos_id: int, beam_size: int, max_len: int,
                          alpha: float) -> list[int]:
    return _beam(step, bos_id, eos_id, beam_size, max_len, alpha, eos_finishes=False)


def beam_per_parent(step: Step, bos_id: int, eos_id: int, beam_size: int, max_len: int,
                    alpha: float) -> list[int]:
    return _beam(step, bos_id, eos_id, beam_size, max_len, alpha, per_parent=True)


def beam_finished_take_slots(step: Step, bos_id: int, eos_id: int, beam_size: int,
                             max_len: int, alpha: float) -> list[int]:
    return _beam(step, bos_id, eos_id, beam_size, max_len, alpha, finished_in_beam=True)


def beam_forgets_finished(step: Step, bos_id: int, eos_id: int, beam_size: int,
                          max_len: int, alpha: float) -> list[int]:
    return _beam(step, bos_id, eos_id, beam_size, max_len, alpha, return_from="alive")


# ---------------------------------------------------------------------------------- layers


class FeedForward(nn.Module):
    relu = True

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        h = self.linear1(x)
        return self.linear2(torch.relu(h) if self.relu else h)


class Sublayer(nn.Module):
    """A residual connection and its LayerNorm: norm(x + f(x)) (Post-LN)."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: Tensor, f: Callable[[Tensor], Tensor], pre_ln: bool = False,
                residual: bool = True) -> Tensor:
        if pre_ln:
            return x + f(self.norm(x)) if residual else f(self.norm(x))
        return self.norm(x + f(x) if residual else f(x))


class Encoder(nn.Module):
    pre_ln = False
    residual_attn = True
    use_mask = True
    relu = True

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.self_attn = MultiHead(d_model, num_heads)
        self.ffn = FeedForward(d_model, d_ff)
        self.ffn.relu = self.relu
        self.sublayer1 = Sublayer(d_model)
        self.sublayer2 = Sublayer(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        m = mask if self.use_mask else None
        x = self.sublayer1(x, lambda y: self.dropout(self.self_attn(y, y, y, m)), self.pre_ln,
                           self.residual_attn)
        return self.sublayer2(x, lambda y: self.dropout(self.ffn(y)), self.pre_ln)


class EncoderPreLN(Encoder):
    pre_ln = True


class EncoderNoResidual(Encoder):
    residual_attn = False


class EncoderIgnoresMask(Encoder):
    use_mask = False


class EncoderNoReLU(Encoder):
    relu = False


class EncoderOneNorm(nn.Module):
    """One LayerNorm shared by both sublayers: its parameter names are not labformer's."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int) -> None:
        super().__init__()
        self.self_attn = MultiHead(d_model, num_heads)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = self.norm(x + self.self_attn(x, x, x, mask))
        return self.norm(x + self.ffn(x))


class Decoder(nn.Module):
    pre_ln = False
    use_tgt_mask = True
    use_memory_mask = True
    residual_ffn = True
    cross_on_memory = True
    cross_first = False
    cross_mask = "memory_mask"  # the mask the cross-attention gets
    self_mask = "tgt_mask"  # the mask the self-attention gets

    def __init__(self, d_model: int, num_heads: int, d_ff: int) -> None:
        super().__init__()
        self.self_attn = MultiHead(d_model, num_heads)
        self.cross_attn = MultiHead(d_model, num_heads)
        self.ffn = FeedForward(d_model, d_ff)
        self.sublayer1 = Sublayer(d_model)
        self.sublayer2 = Sublayer(d_model)
        self.sublayer3 = Sublayer(d_model)

    def forward(self, x: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None) -> Tensor:
        given = {"tgt_mask": tgt_mask, "memory_mask": memory_mask}
        t_mask = given[self.self_mask] if self.use_tgt_mask else None
        m_mask = given[self.cross_mask] if self.use_memory_mask else None

        def self_block(y: Tensor) -> Tensor:
            return self.sublayer1(y, lambda z: self.self_attn(z, z, z, t_mask), self.pre_ln)

        def cross_block(y: Tensor) -> Tensor:
            src = memory if self.cross_on_memory else y
            mask = m_mask if self.cross_on_memory else None
            return self.sublayer2(y, lambda z: self.cross_attn(z, src, src, mask), self.pre_ln)

        x = self_block(cross_block(x)) if self.cross_first else cross_block(self_block(x))
        return self.sublayer3(x, self.ffn, self.pre_ln, self.residual_ffn)


class DecoderNoCausal(Decoder):
    use_tgt_mask = False


class DecoderPreLN(Decoder):
    pre_ln = True


class DecoderNoResidualFFN(Decoder):
    residual_ffn = False


class DecoderCrossOnItself(Decoder):
    cross_on_memory = False


class DecoderCrossFirst(Decoder):
    cross_first = True


class DecoderIgnoresMemoryMask(Decoder):
    use_memory_mask = False


class DecoderCrossGetsTgtMask(Decoder):
    cross_mask = "tgt_mask"


class DecoderMasksSwapped(Decoder):
    cross_mask, self_mask = "tgt_mask", "memory_mask"


# ------------------------------------------------------------------------ the language model


def lm_causal_mask(T: int, offset: int) -> Tensor:
    # row i is position offset + i: columns 0..offset + i
    return torch.ones(T, offset + T, dtype=torch.bool).tril(offset)


def lm_causal_mask_first_rows(T: int, offset: int) -> Tensor:
    return torch.ones(offset + T, offset + T, dtype=torch.bool).tril()[:T]


def lm_causal_mask_off_by_one(T: int, offset: int) -> Tensor:
    return torch.ones(T, offset + T, dtype=torch.bool).tril(offset + 1)


def lm_causal_mask_no_offset(T: int, offset: int) -> Tensor:
    return torch.ones(T, T, dtype=torch.bool).tril()


def lm_causal_mask_upper(T: int, offset: int) -> Tensor:
    return torch.ones(T, offset + T, dtype=torch.bool).triu(offset)


def _ranked(logits: Tensor) -> Tensor:
    """Token ids by logit, largest first; equal logits: the smaller id first."""
    return torch.sort(logits, dim=-1, descending=True, stable=True).indices


def _keep(logits: Tensor, ids: Tensor) -> Tensor:
    keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, ids, True)
    return logits.masked_fill(~keep, float("-inf")).softmax(-1)


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    return _keep(logits, _ranked(logits)[..., :k])


def top_k_filter_k_plus_one(logits: Tensor, k: int) -> Tensor:
    return _keep(logits, _ranked(logits)[..., :k + 1])


def top_k_filter_not_renormalised(logits: Tensor, k: int) -> Tensor:
    probs = logits.softmax(-1)
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, _ranked(logits)[..., :k], True)
    return probs * keep


def top_k_filter_least_probable(logits: Tensor, k: int) -> Tensor:
    return _keep(logits, _ranked(-logits)[..., :k])


def top_k_filter_zero_logits(logits: Tensor, k: int) -> Tensor:
    keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, _ranked(logits)[..., :k], True)
    return logits.masked_fill(~keep, 0.0).softmax(-1)  # 0 is not -inf


def top_k_filter_larger_id_first(logits: Tensor, k: int) -> Tensor:
    flipped = _ranked(logits.flip(-1))[..., :k]  # ties: the larger id first
    return _keep(logits, logits.shape[-1] - 1 - flipped)


def top_k_filter_ties_kept(logits: Tensor, k: int) -> Tensor:
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf")).softmax(-1)


def top_k_filter_nanogpt(logits: Tensor, k: int) -> Tensor:
    """nanoGPT's sampling step: -inf below the k-th value, written into the logits in place."""
    v, _ = torch.topk(logits, min(k, logits.size(-1)))
    logits[logits < v[..., [-1]]] = -float("inf")
    return torch.softmax(logits, dim=-1)


def top_k_filter_nanogpt_k_plus_one(logits: Tensor, k: int) -> Tensor:
    """nanoGPT's -inf, with another bug: the threshold at the (k + 1)-th value."""
    v, _ = torch.topk(logits, min(k + 1, logits.size(-1)))
    return logits.masked_fill(logits < v[..., [-1]], -float("inf")).softmax(-1)


# ------------------------------------------------------------------------------- the lists


RIGHT: dict[str, Any] = {
    "attention": attention,
    "causal_mask": causal_mask,
    "padding_mask": padding_mask,
    "sinusoidal_positions": sinusoidal_positions,
    "layer_norm": layer_norm,
    "multi_head_attention": MultiHead,
    "label_smoothed_cross_entropy": label_smoothed_cross_entropy,
    "greedy_decode": greedy_decode,
    "beam_search": beam_search,
    "encoder_layer": Encoder,
    "decoder_layer": Decoder,
    "lm_causal_mask": lm_causal_mask,
    "top_k_filter": top_k_filter,
}


@dataclass(frozen=True)
class Wrong:
    exercise: str
    mistake: str  # in words
    attempt: Any
    property: str  # the Mismatch.property that must reject it


WRONG: list[Wrong] = [
    Wrong("attention", "scaled after the softmax", attention_scaled_after_softmax,
          "attention.rows_sum_to_one"),
    Wrong("attention", "softmax over the query axis", attention_softmax_over_queries,
          "attention.rows_sum_to_one"),
    Wrong("attention", "mask inverted (True taken as hidden)", attention_inverted_mask,
          "attention.mask"),
    Wrong("attention", "scores not divided by sqrt(d_k)", attention_unscaled,
          "attention.weights"),
    Wrong("attention", "exp without subtracting the maximum", attention_naive_exp,
          "attention.stable"),
    Wrong("attention", "mask applied after the softmax", attention_mask_after_softmax,
          "attention.rows_sum_to_one"),
    Wrong("attention", "k.T on a batch (raises in the reader's line)", attention_k_dot_T,
          "raised"),
    Wrong("causal_mask", "upper triangle", causal_mask_upper, "causal_mask.causal"),
    Wrong("causal_mask", "diagonal left out", causal_mask_no_diagonal, "causal_mask.causal"),
    Wrong("causal_mask", "a float mask", causal_mask_float, "dtype"),
    Wrong("causal_mask", "True = blocked", causal_mask_blocked_true, "causal_mask.causal"),
    Wrong("padding_mask", "True at the padding", padding_mask_inverted,
          "padding_mask.real_tokens"),
    Wrong("padding_mask", "pad id 0 hard-coded", padding_mask_pad_zero,
          "padding_mask.real_tokens"),
    Wrong("padding_mask", "shaped (B, 1, T, 1)", padding_mask_query_axis, "shape"),
    Wrong("padding_mask", "shaped (B, T)", padding_mask_flat, "shape"),
    Wrong("sinusoidal_positions", "sin and cos swapped", sinusoidal_swapped,
          "sinusoidal_positions.position_zero"),
    Wrong("sinusoidal_positions", "sin half, then cos half", sinusoidal_halves,
          "sinusoidal_positions.position_zero"),
    Wrong("sinusoidal_positions", "10000^(i/d) instead of 10000^(2i/d)", sinusoidal_i_over_d,
          "sinusoidal_positions.values"),
    Wrong("sinusoidal_positions", "pos times the frequency term", sinusoidal_times,
          "sinusoidal_positions.values"),
    Wrong("layer_norm", "unbiased variance", layer_norm_unbiased, "layer_norm.unit_variance"),
    Wrong("layer_norm", "eps outside the square root", layer_norm_eps_outside,
          "layer_norm.eps"),
    Wrong("layer_norm", "statistics over the first axis", layer_norm_first_axis,
          "layer_norm.zero_mean"),
    Wrong("layer_norm", "weight and bias applied before normalising", layer_norm_affine_first,
          "layer_norm.affine"),
    Wrong("layer_norm", "no eps", layer_norm_no_eps, "layer_norm.eps"),
    Wrong("multi_head_attention", "heads merged without the transpose", MultiHeadNoTranspose,
          "multi_head_attention.heads"),
    Wrong("multi_head_attention", "scores divided by sqrt(d_model)", MultiHeadScaledByDModel,
          "multi_head_attention.heads"),
    Wrong("multi_head_attention", "keys and values projected from the query",
          MultiHeadKeysFromQuery, "multi_head_attention.cross"),
    Wrong("multi_head_attention", "mask ignored", MultiHeadIgnoresMask,
          "multi_head_attention.mask"),
    Wrong("multi_head_attention", "out_proj never applied", MultiHeadNoOutProj,
          "multi_head_attention.one_head"),
    Wrong("label_smoothed_cross_entropy", "padding counted in the loss", lsce_pads_counted,
          "label_smoothed_cross_entropy.padding"),
    Wrong("label_smoothed_cross_entropy", "padding counted in the average's denominator",
          lsce_pads_in_count, "label_smoothed_cross_entropy.padding"),
    Wrong("label_smoothed_cross_entropy", "smoothing over V - 1 classes", lsce_v_minus_one,
          "label_smoothed_cross_entropy.smoothing"),
    Wrong("label_smoothed_cross_entropy", "logits used as log-probabilities", lsce_raw_logits,
          "label_smoothed_cross_entropy.cross_entropy"),
    Wrong("label_smoothed_cross_entropy", "the right class keeps 1, not 1 - eps",
          lsce_no_one_minus_eps, "label_smoothed_cross_entropy.smoothing"),
    Wrong("greedy_decode", "forgets to stop at EOS", greedy_forgets_eos,
          "greedy_decode.stops_at_eos"),
    Wrong("greedy_decode", "leaves EOS out of the result", greedy_drops_eos,
          "greedy_decode.keeps_eos"),
    Wrong("greedy_decode", "returns BOS too", greedy_keeps_bos, "greedy_decode.no_bos"),
    Wrong("greedy_decode", "one step too many (max_len + 1)", greedy_one_too_many, "max_len"),
    Wrong("greedy_decode", "picks the least probable token", greedy_argmin,
          "greedy_decode.argmax"),
    Wrong("greedy_decode", "prefix without BOS", greedy_no_bos, "prefix"),
    Wrong("greedy_decode", "the next token chosen without the prefix", greedy_same_prefix,
          "prefix"),
    Wrong("beam_search", "ranks by the last token's log-probability", beam_ranks_last_token,
          "beam_search.pool"),
    Wrong("beam_search", "no length penalty", beam_no_length_penalty,
          "beam_search.length_penalty"),
    Wrong("beam_search", "length penalty without EOS in L", beam_penalty_without_eos,
          "beam_search.eos_in_length"),
    Wrong("beam_search", "the best beam_size children of each parent, no global pruning",
          beam_per_parent, "beam_search.per_parent"),
    Wrong("beam_search", "finished hypotheses take beam slots", beam_finished_take_slots,
          "beam_search.finished_slots"),
    Wrong("beam_search", "extends hypotheses that ended with EOS", beam_extends_finished,
          "beam_search.eos_ends"),
    Wrong("beam_search", "returns the best alive hypothesis, forgetting the finished",
          beam_forgets_finished, "beam_search.forgets_finished"),
    Wrong("encoder_layer", "Pre-LN instead of Post-LN", EncoderPreLN, "post_ln"),
    Wrong("encoder_layer", "no residual around self-attention", EncoderNoResidual, "residual"),
    Wrong("encoder_layer", "mask ignored", EncoderIgnoresMask, "encoder_layer.mask"),
    Wrong("encoder_layer", "feed-forward without its ReLU", EncoderNoReLU,
          "encoder_layer.matches"),
    Wrong("encoder_layer", "one LayerNorm shared by both sublayers", EncoderOneNorm,
          "parameter_names"),
    Wrong("decoder_layer", "decoder without the causal mask (tgt_mask ignored)",
          DecoderNoCausal, "decoder_layer.causal"),
    Wrong("decoder_layer", "Pre-LN instead of Post-LN", DecoderPreLN, "post_ln"),
    Wrong("decoder_layer", "no residual around the feed-forward", DecoderNoResidualFFN,
          "residual"),
    Wrong("decoder_layer", "cross-attention on its own input, not the memory",
          DecoderCrossOnItself, "decoder_layer.uses_memory"),
    Wrong("decoder_layer", "cross-attention before self-attention", DecoderCrossFirst,
          "decoder_layer.matches"),
    Wrong("decoder_layer", "memory_mask ignored", DecoderIgnoresMemoryMask,
          "decoder_layer.memory_mask"),
    Wrong("decoder_layer", "tgt_mask passed to the cross-attention", DecoderCrossGetsTgtMask,
          "decoder_layer.cross_mask"),
    Wrong("decoder_layer", "tgt_mask and memory_mask swapped", DecoderMasksSwapped,
          "decoder_layer.cross_mask"),
    Wrong("lm_causal_mask", "the first T rows, not the last", lm_causal_mask_first_rows,
          "lm_causal_mask.offset"),
    Wrong("lm_causal_mask", "off by one: each position sees the next", lm_causal_mask_off_by_one,
          "lm_causal_mask.causal"),
    Wrong("lm_causal_mask", "the cached positions left out", lm_causal_mask_no_offset, "shape"),
    Wrong("lm_causal_mask", "upper triangle", lm_causal_mask_upper, "lm_causal_mask.causal"),
    Wrong("top_k_filter", "keeps k + 1 tokens", top_k_filter_k_plus_one, "top_k_filter.count"),
    Wrong("top_k_filter", "not renormalised", top_k_filter_not_renormalised,
          "top_k_filter.sums_to_one"),
    Wrong("top_k_filter", "keeps the k least probable", top_k_filter_least_probable,
          "top_k_filter.most_probable"),
    Wrong("top_k_filter", "dropped logits set to 0, not -inf", top_k_filter_zero_logits,
          "top_k_filter.zero_logits"),
    Wrong("top_k_filter", "ties broken towards the larger id", top_k_filter_larger_id_first,
          "top_k_filter.ties"),
    Wrong("top_k_filter", "every token tied with the k-th kept", top_k_filter_ties_kept,
          "top_k_filter.ties_kept"),
    Wrong("top_k_filter", "nanoGPT-style: -inf below the k-th value, in place (ties kept)",
          top_k_filter_nanogpt, "top_k_filter.ties_kept"),
    Wrong("top_k_filter", "nanoGPT-style -inf, threshold at the (k + 1)-th value",
          top_k_filter_nanogpt_k_plus_one, "top_k_filter.count"),
]
