"""The graders' words: the message catalogues, and how a failed property is worded.

The English catalogue is :data:`EN` below; the Chinese one is ``zh.json`` beside this file
(every Chinese string of the exercises lives there, none in Python). Both are keyed by message
id: ``"attention.mask"`` (a property of one exercise), ``"raised"`` (a property any exercise
may fail), ``"d.*"`` (the words inside the input / expected / got lines), and the frame of
every message (``"input"``, ``"ok"``, ...). ``tests/notebooks/test_exercises.py`` checks that
the two hold the same ids with the same fields.

A grader (:mod:`labformer.book.exercises.graders`) raises :class:`Fail` with a message id and
the small input it fails on; :func:`word` turns it into a :class:`Mismatch` in the reader's
language, whose message is the short block a notebook shows in place of a traceback.
"""

from __future__ import annotations

import contextvars
import json
import os
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["EN", "MESSAGES", "ZH", "Fail", "GraderLine", "Mismatch", "lang_of", "say", "t",
           "text", "word"]

EN: dict[str, str] = {
    # the frame of every message
    "input": "input:",
    "expected": "expected:",
    "got": "got:",
    "your_line": "your line:",
    "ok": "✓ {name}: all {n} checks passed.",
    "not_attempted": ("· {name}: not attempted yet (the attempt still raises "
                      "NotImplementedError). Write it, then run the check again."),
    "unknown": "unknown exercise {name!r}; the exercises are: {names}.",
    # properties every exercise may fail
    "raised": "your code raised {error} on an input it should accept.",
    "returns_tensor": "the result should be a torch.Tensor, not {type}.",
    "shape": "{what} should have the shape the exercise asks for.",
    "dtype": "{what} should be a {kind} tensor.",
    "returns_ids": ("the result should be the ids after BOS, as a list of ints or a 1-D "
                    "tensor, not {type}."),
    "prefix": "step should be called with the whole prefix so far, starting with BOS.",
    "max_len": "at most max_len tokens should be generated (step called at most max_len times).",
    "parameter_names": ("the layer's parameters should have labformer's names and shapes, so "
                        "that load_state_dict copies its weights in."),
    "post_ln": ("the layer should be Post-LN, norm(x + sublayer(x)), the norm after the "
                "residual sum; this output is Pre-LN's, x + sublayer(norm(x))."),
    "residual": ("every sublayer should sit in a residual connection, norm(x + sublayer(x)); "
                 "this output is that of a layer whose {which} has none."),
    # attention
    "attention.returns_pair": "attention should return a pair (out, weights), not {type}.",
    "attention.rows_sum_to_one": ("the attention weights of each query should sum to 1 over "
                                  "the keys (a softmax over the last axis, after scaling)."),
    "attention.weights": "the weights should be softmax(q·kᵀ / √d_k) over the keys.",
    "attention.output": "the output should be the weights times v: out = weights @ v.",
    "attention.mask": "a key that the mask forbids (False) should get weight exactly 0.",
    "attention.stable": ("the result should stay finite for large scores (subtract each row's "
                         "maximum before exp, or use torch.softmax)."),
    # causal_mask
    "causal_mask.causal": ("position i may attend to positions 0..i only: True on and below "
                           "the diagonal, False above it (True = may attend)."),
    # padding_mask
    "padding_mask.real_tokens": ("the mask should be True exactly where the token is not "
                                 "pad_id (True = may attend), whatever pad_id is."),
    # sinusoidal_positions
    "sinusoidal_positions.position_zero": ("at position 0 every even column is sin 0 = 0 and "
                                           "every odd column is cos 0 = 1."),
    "sinusoidal_positions.values": ("column 2i should be sin(pos / 10000^(2i / d_model)) and "
                                    "column 2i + 1 the cos of the same angle."),
    # layer_norm
    "layer_norm.zero_mean": ("with weight 1 and bias 0, every vector along the last axis "
                             "should come out with mean 0."),
    "layer_norm.unit_variance": ("with weight 1 and bias 0, every vector along the last axis "
                                 "should come out with variance 1, by the biased variance "
                                 "(divide by n, not n - 1), as nn.LayerNorm does."),
    "layer_norm.affine": ("the normalised values should then be scaled by weight and shifted "
                          "by bias: y * weight + bias."),
    "layer_norm.eps": ("eps belongs inside the square root, (x - mean) / sqrt(var + eps): a "
                       "vector of nearly equal values then stays finite and matches "
                       "nn.LayerNorm."),
    "layer_norm.matches": "the result should equal nn.LayerNorm's over the last axis.",
    # multi_head_attention
    "multi_head_attention.projections": ("the class should hold four nn.Linear(d_model, "
                                         "d_model) named q_proj, k_proj, v_proj and out_proj."),
    "multi_head_attention.one_head": ("with one head, the output should be out_proj(attention("
                                      "q_proj(query), k_proj(key), v_proj(value)))."),
    "multi_head_attention.heads": ("with h heads, each head should attend in its own slice of "
                                   "d_k = d_model / h features (scores scaled by 1/√d_k), and "
                                   "the heads' outputs be put back side by side (transpose "
                                   "before merging) before out_proj."),
    "multi_head_attention.cross": ("keys and values should come from the key and value "
                                   "arguments: in cross-attention the query differs from them, "
                                   "even in length."),
    "multi_head_attention.mask": "the keys that the mask forbids should not change the output.",
    "multi_head_attention.matches": ("the output should equal labformer's MultiHeadAttention "
                                     "with the same weights."),
    # label_smoothed_cross_entropy
    "label_smoothed_cross_entropy.scalar": "the loss should be one number (a 0-dim tensor).",
    "label_smoothed_cross_entropy.cross_entropy": ("with smoothing 0, the loss should be the mean "
                                                   "of -log_softmax(logits)[target] over the "
                                                   "positions."),
    "label_smoothed_cross_entropy.padding": ("positions whose target is ignore_index should "
                                             "count neither in the sum nor in the number of "
                                             "positions averaged over."),
    "label_smoothed_cross_entropy.smoothing": ("with smoothing ε the target should be 1 - ε on "
                                               "the right class plus ε / V on every one of the "
                                               "V classes (PyTorch's convention)."),
    "label_smoothed_cross_entropy.matches": ("the loss should equal F.cross_entropy(logits, "
                                             "target, label_smoothing=ε, ignore_index=...)."),
    # greedy_decode
    "greedy_decode.stops_at_eos": "decoding should stop once EOS is picked: nothing follows EOS.",
    "greedy_decode.keeps_eos": "the result should end with the EOS that stopped decoding.",
    "greedy_decode.no_bos": "the result should hold the ids after BOS, without BOS itself.",
    "greedy_decode.argmax": ("each step should pick the most probable next token, the argmax "
                             "of step(prefix)."),
    # beam_search
    "beam_search.eos_ends": ("a hypothesis that ends with EOS is finished and should not be "
                             "extended."),
    "beam_search.pool": ("at each step the beam should keep the beam_size candidates with the "
                         "highest summed log-probability (over all their tokens); the "
                         "hypothesis returned is not one the beam holds at the end."),
    "beam_search.per_parent": ("each step should keep the beam_size best candidates of all "
                               "the hypotheses together, one ranking by summed "
                               "log-probability: keeping the beam_size best children of each "
                               "parent separately, with no pruning across parents, lets the "
                               "beam grow to beam_size², beam_size³, ... hypotheses."),
    "beam_search.finished_slots": ("a hypothesis that ends with EOS should leave the beam for "
                                   "the finished list: kept in the beam, finished hypotheses "
                                   "take slots from the alive ones at every later step, so "
                                   "fewer hypotheses are extended."),
    "beam_search.length_penalty": ("the result should be chosen by the length-penalised "
                                   "score log p / ((5 + L) / 6)^alpha, not by log p alone: "
                                   "the length penalty was ignored."),
    "beam_search.eos_in_length": ("in the length penalty ((5 + L) / 6)^alpha, L counts every "
                                  "token after BOS, the final EOS included."),
    "beam_search.forgets_finished": ("the finished hypotheses should compete for the result "
                                     "too: the best by score among the finished and the "
                                     "still alive, not among the alive alone."),
    "beam_search.final_choice": ("among the finished hypotheses and those still alive, the "
                                 "result should be the one with the highest "
                                 "log p / ((5 + L) / 6)^alpha, L the tokens after BOS, EOS "
                                 "included."),
    # encoder_layer
    "encoder_layer.mask": ("positions that the mask forbids should not change the outputs at "
                           "the other positions."),
    "encoder_layer.matches": ("the output should equal labformer's EncoderLayer with the same "
                              "weights: x = norm1(x + self_attn(x, x, x)), then "
                              "norm2(x + ffn(x))."),
    # decoder_layer
    "decoder_layer.uses_memory": ("the cross-attention should read the encoder's memory: "
                                  "another memory should give another output."),
    "decoder_layer.causal": ("with the causal tgt_mask, the output at position i should not "
                             "depend on the positions after i."),
    "decoder_layer.memory_mask": ("memory positions that memory_mask forbids should not change "
                                  "the output."),
    "decoder_layer.cross_mask": ("the cross-attention (queries from x, keys and values from "
                                 "memory) should be masked with memory_mask, not tgt_mask: "
                                 "tgt_mask (T, T) belongs to the self-attention, and the "
                                 "cross-attention's scores are (T, S), S the memory's length."),
    "decoder_layer.matches": ("the output should equal labformer's DecoderLayer with the same "
                              "weights: x = norm1(x + self_attn(x)), x = norm2(x + "
                              "cross_attn(x, memory)), then norm3(x + ffn(x))."),
    # the words inside the input / expected / got lines
    # lm_causal_mask
    "lm_causal_mask.causal": ("row i is position offset + i: it may attend to positions "
                              "0..offset + i (True), not to the later ones (False)."),
    "lm_causal_mask.offset": ("the T new tokens come after the offset cached ones: row i is "
                              "position offset + i, so the mask is the last T rows of the "
                              "causal mask of offset + T positions, not its first T."),
    # top_k_filter
    "top_k_filter.sums_to_one": ("the probabilities of each row should sum to 1: after "
                                 "keeping k tokens, renormalise over them."),
    "top_k_filter.count": ("exactly k tokens of each row should keep a probability above 0, "
                           "and the others exactly 0."),
    "top_k_filter.zero_logits": ("the tokens left out should get probability exactly 0: set "
                                 "their logits to -inf before the softmax, not to 0 "
                                 "(exp(0) = 1, so they keep some probability)."),
    "top_k_filter.ties_kept": ("exactly k tokens per row, also where other logits equal the "
                               "k-th largest: a threshold (logits below the k-th value set "
                               "to -inf) keeps every tied token; keep the smaller ids first, "
                               "as argmax does."),
    "top_k_filter.most_probable": ("the tokens kept should be the k with the largest logits "
                                   "of their row."),
    "top_k_filter.ties": ("where equal logits compete for the last place, the smaller token "
                          "id should win, as argmax does."),
    "top_k_filter.matches": ("each kept token's probability should be the softmax over the "
                             "kept logits: exp(logit) / sum of exp over the k kept."),
    "d.first_values": "shape {shape}, first values [{head}, ...]",
    "d.kind.causal": "causal",
    "d.kind.padding": "padding",
    "d.kind.random": "random",
    "d.kind.one_key": "one allowed key per row",
    "d.kind.large": "large",
    "d.kind.none": "none",
    "d.kind.self": "self",
    "d.kind.cross": "cross",
    "d.large_qk": " (entries of q and k around ±40)",
    "d.finite": "finite values",
    "d.the_mask": "the mask",
    "d.the_table": "the table",
    "d.the_output": "the output",
    "d.the_weights": "the weights",
    "d.floating": "floating-point",
    "d.values_around": " (values around 2 ± 3)",
    "d.nearly_equal": " (rows of nearly equal values)",
    "d.an_nn_module": "an nn.Module",
    "d.missing": "missing",
    "d.unexpected": "unexpected",
    "d.nothing_listed": "none",
    "d.key_value_query": "key and value = query",
    "d.key_value": "key and value {shape}",
    "d.changed_kv": ", the forbidden keys and values changed",
    "d.changed_logits": ", the logits at the ignored positions changed",
    "d.changed_x": ", x changed at the forbidden positions",
    "d.changed_last": ", x changed at the last position",
    "d.changed_memory": ", memory changed at the forbidden positions",
    "d.another_memory": ", then another memory",
    "d.another_output": "another output",
    "d.same_output": "the same output",
    "d.no_masks": "no masks",
    "d.step_table": ("a step function over V = {vocab} tokens (table seed {seed}), bos_id = {bos}, "
                     "eos_id = {eos}"),
    "d.greedy_is": "; the greedy output is {ids}",
    "d.no_step_after_eos": "no step after EOS = {eos}",
    "d.at_most": "at most {n} tokens after BOS",
    "d.asks_for": "step({ids}) asks for token {n}",
    "d.list_of_ints": "a list of ints",
    "d.after_prefix": "after {prefix}: token {token} (log p {lp})",
    "d.token_lp": "token {token} (log p {lp})",
    "d.nothing": "nothing",
    "d.result": "; result {ids}",
    "d.calls": "calls {calls}; result {ids}",
    "d.hypothesis": "{ids} (log p {lp}, score {score})",
    "d.beam_holds": "; the beam ends holding {held}",
    "d.beam_width": "at most {k} hypotheses extended at each step",
    "d.beam_grew": "{n} hypotheses of {length} tokens extended at one step",
    "d.extended": " (and it extended {ids}, which the beam drops)",
    "d.param_shapes": "the shapes of labformer's parameters",
    "d.every_sublayer": "every sublayer",
    "d.kept": "kept tokens {ids}",
    "d.kept_count": "row {row}: {n} kept",
    "d.row_sum": "row {row} sums to {total}",
}

ZH_PATH = Path(__file__).with_name("zh.json")
ZH: dict[str, str] = json.loads(ZH_PATH.read_text(encoding="utf-8"))

MESSAGES: dict[str, dict[str, str]] = {"en": EN, "zh": ZH}
"""The two message catalogues, ``{"en": {id: text}, "zh": {id: text}}``, with the same ids."""

#: The labels of a message's lines, in the order shown.
LABELS = ("input", "expected", "got", "your_line")


class Mismatch(AssertionError):
    """An attempt that is wrong: the message names the property and shows an input it fails.

    ``exercise`` is the exercise's name, ``property`` the failed property's message id
    (a key of the catalogues in :data:`MESSAGES`, such as ``"attention.mask"``).

    In IPython and Jupyter the failure shows as its message alone, one short block: IPython
    calls :meth:`_render_traceback_` instead of printing the traceback into the package.
    """

    def __init__(self, message: str, exercise: str, property: str) -> None:
        super().__init__(message)
        self.exercise = exercise
        self.property = property

    def _render_traceback_(self) -> list[str]:
        """The lines IPython shows for this exception: the message, its first line in red."""
        first, *rest = str(self).splitlines() or [""]
        return [f"\x1b[1;31m✗ {first}\x1b[0m", *rest]


Mismatch.__module__ = "labformer.book.exercises"


@dataclass
class Fail(Exception):
    """A failed property, before it is worded in the reader's language.

    ``line`` is where the reader's own code raised (function, line number and source line),
    for the "raised" property.
    """

    prop: str
    input: str = ""
    expected: str = ""
    got: str = ""
    fields: dict[str, str] = field(default_factory=dict)
    line: str = ""


def lang_of(lang: str | None) -> str:
    """"zh" or "en": ``lang`` if given, else the environment variable LABFORMER_LANG."""
    chosen = lang if lang is not None else os.environ.get("LABFORMER_LANG", "en")
    return "zh" if chosen.lower().replace("-", "_") in ("zh", "zh_cn", "zh_hans") else "en"


def text(lang: str, key: str, **fields: Any) -> str:
    return MESSAGES[lang][key].format(**fields)


LANG: contextvars.ContextVar[str] = contextvars.ContextVar("labformer_exercises_lang",
                                                           default="en")


def t(key: str, **fields: Any) -> str:
    """A fragment of a message (id ``d.<key>``), in the language of the check under way."""
    return text(LANG.get(), f"d.{key}", **fields)


def prop_key(exercise: str, prop: str) -> str:
    """The message id of a property: the exercise's own (``attention.mask``), or a shared one."""
    key = f"{exercise}.{prop}"
    return key if key in EN else prop


def _width(s: str) -> int:
    """The columns ``s`` takes in a monospaced font (wide characters count two)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)


def word(fail: Fail, exercise: str, lang: str) -> Mismatch:
    """The failure as the reader reads it: one sentence, then the input, expected and got."""
    key = prop_key(exercise, fail.prop)
    lines = [f"{exercise}: {text(lang, key, **fail.fields)}"]
    values = dict(zip(LABELS, (fail.input, fail.expected, fail.got, fail.line), strict=True))
    width = max(_width(text(lang, w)) for w in LABELS if values[w])
    for label, value in values.items():
        if value:
            shown = text(lang, label)
            lines.append(f"  {shown}{' ' * (width - _width(shown))} {value}")
    return Mismatch("\n".join(lines), exercise, key)


class GraderLine:
    """The line ``check`` shows: plain text, and in a notebook an HTML span that names its
    message id and fields, so that the book's Chinese edition, built from the notebooks run
    once in English, shows the same line from the Chinese catalogue (book/_ext/claims.py)."""

    def __init__(self, lang: str, key: str, **fields: Any) -> None:
        self.lang, self.key, self.fields = lang, key, fields
        self.text = text(lang, key, **fields)

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        import html

        data = html.escape(json.dumps(self.fields, ensure_ascii=False, sort_keys=True))
        return (f'<p><span class="lf-grader" data-key="{self.key}" data-fields="{data}">'
                f"{html.escape(self.text, quote=False)}</span></p>")


def say(lang: str, key: str, **fields: Any) -> None:
    """Print the grader's line; in IPython, display it (text and the translatable HTML)."""
    line = GraderLine(lang, key, **fields)
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the book's requirements
        get_ipython = None  # noqa: N806
    if get_ipython is not None and get_ipython() is not None:
        from IPython.display import display

        display(line)  # type: ignore[no-untyped-call]
    else:
        print(line.text)
