"""Graded exercises: the reader writes one part of the Transformer, and labformer checks it.

    from labformer.book import exercises
    exercises.check("attention", my_attention)   # prints a line; raises on a mistake

:func:`check` grades an attempt by properties, over several random sizes and seeds (shapes,
rows that sum to one, masks respected, invariances, agreement with labformer's own part, edge
cases such as a single key), never by one fixed input. It prints a line when every check
passes and returns None (so a notebook shows no ``Out:`` line), and raises :class:`Mismatch`,
an ``AssertionError``, at the first check that fails: its message names the property in one
sentence (the classic mistake, where the result is that of one) and shows a small input on
which it fails, with what was expected and what came back; when the reader's own code raised,
the reader's line that raised. In IPython and Jupyter the failure shows as that message alone,
one short block, with no traceback into this package. An attempt that still raises
``NotImplementedError`` (the stub) is not a failure: ``check`` prints a "not attempted yet"
line. :func:`passes` grades the same way and answers True (every check passed) or False (not
attempted yet). The grading is deterministic (fixed seeds) and leaves torch's global random
state as it found it.

The attempts, by name (:data:`NAMES`); a plain function or an ``nn.Module`` class:

* ``"attention"``: ``f(q, k, v, mask=None) -> (out, weights)``; q ``(..., T_q, d_k)``, k
  ``(..., T_k, d_k)``, v ``(..., T_k, d_v)``; mask bool, True = may attend, broadcastable to
  ``(..., T_q, T_k)``, every query row allowed at least one key.
* ``"causal_mask"``: ``f(T) -> bool (T, T)``.
* ``"padding_mask"``: ``f(tokens, pad_id) -> bool (B, 1, 1, T)`` for tokens ``(B, T)``.
* ``"sinusoidal_positions"``: ``f(max_len, d_model) -> float (max_len, d_model)``, even
  columns sin, odd columns cos, of pos / 10000^(2i / d_model) (d_model even).
* ``"layer_norm"``: ``f(x, weight, bias, eps=1e-5)`` over the last axis, biased variance.
* ``"multi_head_attention"``: a class ``C(d_model, num_heads)`` with four
  ``nn.Linear(d_model, d_model)`` named ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``;
  ``forward(query, key, value, mask=None)`` returns ``(B, T_q, d_model)`` or a tuple whose
  first item is it. The grader copies labformer's weights into the four projections.
* ``"label_smoothed_cross_entropy"``: ``f(logits, target, smoothing, ignore_index)``; logits
  ``(..., V)`` (graded with ``(N, V)`` and ``(B, T, V)``), target ``(...)``; the mean over the
  positions whose target is not ``ignore_index``, smoothing / V on every class (PyTorch's
  ``F.cross_entropy(label_smoothing=...)``).
* ``"greedy_decode"``: ``f(step, bos_id, eos_id, max_len)`` -> the ids after BOS, up to and
  including EOS, at most ``max_len``; ``step(prefix: list[int])`` returns log-probabilities
  ``(V,)`` (a float64 tensor) of the token after ``prefix``, which starts with BOS.
* ``"beam_search"``: ``f(step, bos_id, eos_id, beam_size, max_len, alpha)`` -> the best
  hypothesis' ids after BOS. Each step expands every alive hypothesis by every token and keeps
  the ``beam_size`` best of all those candidates together by summed log-probability; those
  ending in EOS move to the finished list; the search stops when none is alive or after
  ``max_len`` steps; the result is the finished-or-alive hypothesis with the highest
  ``log p / ((5 + L) / 6) ** alpha``, L the number of tokens after BOS, EOS included.
* ``"encoder_layer"`` and ``"decoder_layer"``: Post-LN classes built as
  ``C(d_model, num_heads, d_ff)`` whose parameter names are those of labformer's
  ``EncoderLayer`` / ``DecoderLayer`` (``self_attn.q_proj.weight``, ..., ``ffn.linear1.weight``,
  ``sublayer1.norm.weight``, ...; the decoder adds ``cross_attn`` and ``sublayer3``), so that
  ``load_state_dict`` copies labformer's weights in. Called as ``layer(x, mask=...)`` and
  ``layer(x, memory, tgt_mask=..., memory_mask=...)``, in eval mode.
* ``"lm_causal_mask"``: ``f(T, offset) -> bool (T, offset + T)``: the mask of a language
  model's self-attention when ``T`` new tokens follow ``offset`` cached ones; row i is position
  ``offset + i`` and may attend to positions ``0..offset + i``.
* ``"top_k_filter"``: ``f(logits, k) -> probabilities (..., V)`` for logits ``(..., V)``: the
  softmax restricted to the ``k`` largest logits of each row and renormalised, exactly 0
  elsewhere; equal logits rank the smaller token id first (as ``argmax``).

Results may come back as lists or tuples where ids are asked for, and as tensors of any
floating dtype; values are compared within float32 tolerance. The input line names a class
attempt by its own name and keywords (``MyDecoderLayer(d_model=8, num_heads=2, d_ff=16)``)
and a tensor by its name and shape (``x (2, 4, 8)``).

The package: :mod:`~labformer.book.exercises.graders` (the properties checked),
:mod:`~labformer.book.exercises.messages` (the words, English and Chinese; the Chinese
catalogue is ``zh.json``). Messages come in English and in Chinese (the book's two editions):
``check(..., lang="zh")``, or the environment variable ``LABFORMER_LANG=zh`` (also ``zh_CN``,
``zh-CN``); ``lang`` wins over the variable, and anything else means English.
:data:`MESSAGES` holds both catalogues, keyed by message id (``"attention.mask"``, ...);
``Mismatch.property`` is the id of the property that failed.
"""

from __future__ import annotations

from typing import Any

import torch

from labformer.book.exercises.graders import GRADERS, NAMES
from labformer.book.exercises.messages import (
    LANG,
    MESSAGES,
    Fail,
    GraderLine,
    Mismatch,
    lang_of,
    say,
    text,
    word,
)

__all__ = ["MESSAGES", "NAMES", "GraderLine", "Mismatch", "check", "passes"]


def passes(name: str, attempt: Any, *, lang: str | None = None, quiet: bool = False) -> bool:
    """Grade ``attempt`` at exercise ``name``: True if right, False if not attempted yet
    (it raises NotImplementedError), :class:`Mismatch` if wrong.

    Prints one line (unless ``quiet``). ``lang``: "en" or "zh"; None reads the environment
    variable LABFORMER_LANG (default English). Raises ValueError for a name not in
    :data:`NAMES`.
    """
    __tracebackhide__ = True  # pytest and IPython leave this frame out of tracebacks
    chosen = lang_of(lang)
    if name not in GRADERS:
        raise ValueError(text(chosen, "unknown", name=name, names=", ".join(NAMES)))
    counter = [0]
    token = LANG.set(chosen)
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            GRADERS[name](attempt, counter)
    except NotImplementedError:
        if not quiet:
            say(chosen, "not_attempted", name=name)
        return False
    except Fail as fail:
        raise word(fail, name, chosen) from None
    finally:
        LANG.reset(token)
    if not quiet:
        say(chosen, "ok", name=name, n=counter[0])
    return True


def check(name: str, attempt: Any, *, lang: str | None = None, quiet: bool = False) -> None:
    """Grade ``attempt`` at exercise ``name`` and print one line: the checks passed, or "not
    attempted yet"; raise :class:`Mismatch` if it is wrong. Returns None, so that a
    notebook cell ending with it shows no ``Out:`` line. As :func:`passes` otherwise."""
    __tracebackhide__ = True
    passes(name, attempt, lang=lang, quiet=quiet)
