"""Sampling from a language model: temperature, top-k and top-p (nucleus), with a KV cache.

Each step turns the logits of the last position into a distribution and draws one token:

1. temperature T: p = softmax(logits / T); T < 1 sharpens, T > 1 flattens;
2. top-k: only the k most probable tokens keep their probability (Fan et al. 2018);
3. top-p: only the smallest set of most probable tokens whose mass reaches p (Holtzman et
   al. 2020), measured after top-k;

then renormalises what is kept. Ties are ranked by token id (the smaller first), as
``argmax`` does, so ``top_k=1`` and a tiny ``top_p`` keep exactly the greedy token.

:func:`chi_square_test` is the goodness-of-fit test the unit tests use to check that the draws
follow these distributions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import torch
from torch import Tensor

__all__ = ["CachedLanguageModel", "next_token_probs", "sample", "chi_square_test"]


class CachedLanguageModel(Protocol):
    """What :func:`sample` needs (:class:`labformer.lm.LanguageModel` has it)."""

    def new_cache(self) -> Any: ...
    def __call__(self, tokens: Tensor, *, cache: Any = None) -> Tensor: ...


def _check_options(temperature: float, top_k: int | None, top_p: float | None) -> None:
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or not (
            temperature > 0 and math.isfinite(temperature)):
        raise ValueError(f"temperature must be a positive number, got {temperature!r}; for "
                         "greedy decoding use top_k=1")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int)
                              or top_k < 1):
        raise ValueError(f"top_k must be an int >= 1 or None, got {top_k!r}")
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float))
                              or not 0.0 < top_p <= 1.0):
        raise ValueError(f"top_p must lie in (0, 1] or be None, got {top_p!r}")


def next_token_probs(
    logits: Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> Tensor:
    """logits (..., V) -> the distribution a token is drawn from (..., V), in float32 or wider.

    softmax(logits / temperature), restricted to the ``top_k`` most probable tokens and then
    to the smallest most-probable set of mass >= ``top_p``, renormalised; the dropped tokens
    get probability exactly 0. Ties rank the smaller token id first.
    """
    _check_options(temperature, top_k, top_p)
    scaled = logits.to(torch.promote_types(logits.dtype, torch.float32)) / temperature
    V = scaled.shape[-1]
    # Ranks by logit, largest first; a stable sort keeps equal logits in id order.
    order = torch.sort(scaled, dim=-1, descending=True, stable=True).indices  # (..., V)
    ranked = scaled.gather(-1, order)  # (..., V), descending
    keep = torch.ones_like(ranked, dtype=torch.bool)  # in rank order
    if top_k is not None and top_k < V:
        keep[..., top_k:] = False
    if top_p is not None and top_p < 1.0:
        probs = ranked.masked_fill(~keep, -math.inf).softmax(dim=-1)  # (..., V), after top-k
        before = probs.cumsum(dim=-1) - probs  # mass of the better-ranked tokens
        keep &= before < top_p  # the first token always stays (0 < top_p)
    ranked = ranked.masked_fill(~keep, -math.inf)
    probs = torch.zeros_like(ranked).scatter(-1, order, ranked.softmax(dim=-1))  # id order
    return probs


def _check_prompt(prompt: Tensor, max_new_tokens: int) -> None:
    if not isinstance(prompt, Tensor) or prompt.dim() != 2 or prompt.is_floating_point() \
            or prompt.dtype == torch.bool or prompt.shape[0] == 0 or prompt.shape[1] == 0:
        shape = tuple(prompt.shape) if isinstance(prompt, Tensor) else type(prompt).__name__
        raise ValueError(f"prompt must be integer token ids (B, T) with B, T >= 1, got {shape}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) \
            or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")


@torch.no_grad()
def sample(
    model: CachedLanguageModel,
    prompt: Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    eos_id: int | None = None,
    use_cache: bool = True,
) -> Tensor:
    """Continue each row of ``prompt`` (B, T) by ``max_new_tokens`` drawn tokens -> (B, T + new).

    Each token is drawn from :func:`next_token_probs` of the last position's logits, with
    ``torch.multinomial`` and ``generator`` (the same generator state gives the same tokens).
    With ``use_cache`` (the default) the prompt runs once and every later step feeds only the
    newest token, the keys and values of the earlier positions coming from the model's cache;
    ``use_cache=False`` runs the whole prefix again at every step (same tokens, slower).

    ``eos_id``: once a row has produced it, that row is padded with ``eos_id`` to the end (its
    later draws are discarded); when every row has finished, generation stops early and the
    output is still (B, T + max_new_tokens). The model is not put in eval mode here: call
    ``model.eval()`` first if it has dropout.
    """
    _check_prompt(prompt, max_new_tokens)
    _check_options(temperature, top_k, top_p)
    B, T = prompt.shape
    max_len = getattr(getattr(model, "config", None), "max_len", None)
    if isinstance(max_len, int) and T + max_new_tokens > max_len:
        raise ValueError(f"{T} prompt + {max_new_tokens} new tokens exceed the model's "
                         f"max_len={max_len}")
    out = torch.full((B, T + max_new_tokens), -1 if eos_id is None else eos_id,
                     dtype=prompt.dtype, device=prompt.device)
    out[:, :T] = prompt
    if max_new_tokens == 0:
        return out
    cache = model.new_cache() if use_cache else None
    logits = model(prompt, cache=cache)[:, -1]  # (B, V): the next token's
    if eos_id is not None and (isinstance(eos_id, bool) or not isinstance(eos_id, int)
                               or not 0 <= eos_id < logits.shape[-1]):
        raise ValueError(f"eos_id must be a token id in [0, {logits.shape[-1]}), got {eos_id!r}")
    done = torch.zeros(B, dtype=torch.bool, device=prompt.device)
    for t in range(T, T + max_new_tokens):
        probs = next_token_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)
        token = torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B,)
        if eos_id is not None:
            token = token.masked_fill(done, eos_id)  # finished rows stay finished
            done |= token == eos_id
        out[:, t] = token
        if t + 1 == T + max_new_tokens or bool(done.all()):
            break
        if cache is not None:
            logits = model(out[:, t : t + 1], cache=cache)[:, -1]  # (B, 1) in -> (B, V)
        else:
            logits = model(out[:, : t + 1])[:, -1]  # the whole prefix again
    return out


def chi_square_test(counts: Sequence[int] | Tensor, probs: Sequence[float] | Tensor,
                    ) -> tuple[float, float]:
    """Pearson's goodness-of-fit test of observed ``counts`` against ``probs``.

    Returns (statistic, p-value): X^2 = sum (O - E)^2 / E over the categories of positive
    probability, with E = n p, and the chance that a chi-square variable with (categories - 1)
    degrees of freedom exceeds it. A draw in a category of probability 0 gives (inf, 0.0).
    Valid when every expected count is large (say >= 5).
    """
    observed = [float(c) for c in (counts.tolist() if isinstance(counts, Tensor) else counts)]
    p = [float(q) for q in (probs.tolist() if isinstance(probs, Tensor) else probs)]
    if len(observed) != len(p) or any(c < 0 for c in observed) or any(q < 0 for q in p):
        raise ValueError("counts and probs must be non-negative and of the same length")
    total, mass = sum(observed), sum(p)
    if total <= 0 or not math.isclose(mass, 1.0, abs_tol=1e-6):
        raise ValueError(f"need some counts and probabilities summing to 1, got {total} "
                         f"counts and mass {mass}")
    if any(c > 0 and q == 0 for c, q in zip(observed, p, strict=True)):
        return math.inf, 0.0
    stat = sum((c - total * q) ** 2 / (total * q) for c, q in zip(observed, p, strict=True)
               if q > 0)
    df = sum(q > 0 for q in p) - 1
    return stat, _chi_square_tail(stat, df)


def _chi_square_tail(x: float, df: int) -> float:
    """P(X > x) for X chi-square with ``df`` degrees of freedom, in closed form: for df = 1,
    erfc(sqrt(x / 2)); for df = 2, exp(-x / 2); and Q(x, k + 2) = Q(x, k) + (x/2)^(k/2)
    exp(-x/2) / Gamma(k/2 + 1)."""
    if df < 1:
        return 1.0  # one category: nothing can deviate
    if x <= 0:
        return 1.0
    k = 2 if df % 2 == 0 else 1
    tail = math.exp(-x / 2) if k == 2 else math.erfc(math.sqrt(x / 2))
    while k < df:
        tail += math.exp((k / 2) * math.log(x / 2) - x / 2 - math.lgamma(k / 2 + 1))
        k += 2
    return min(1.0, tail)
