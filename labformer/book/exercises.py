"""Graded exercises: the reader writes one part of the Transformer, and labformer checks it.

    from labformer.book import exercises
    exercises.check("attention", my_attention)   # prints a line; raises on a mistake

:func:`check` grades an attempt by properties, over several random sizes and seeds (shapes,
rows that sum to one, masks respected, invariances, agreement with labformer's own part, edge
cases such as a single key), never by one fixed input. It returns ``True`` (and prints a
line) when every check passes, and raises :class:`Mismatch`, an ``AssertionError``, at the
first check that fails: its message names the property in one sentence and shows a small input
on which it fails, with what was expected and what came back. An attempt that still raises
``NotImplementedError`` (the stub) is not a failure: ``check`` prints a "not attempted yet"
line and returns ``False``. The grading is deterministic (fixed seeds) and leaves torch's
global random state as it found it.

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
  the ``beam_size`` best by summed log-probability; those ending in EOS move to the finished
  list; the search stops when none is alive or after ``max_len`` steps; the result is the
  finished-or-alive hypothesis with the highest ``log p / ((5 + L) / 6) ** alpha``, L the
  number of tokens after BOS, EOS included.
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
floating dtype; values are compared within float32 tolerance.

Messages come in English and in Chinese (the book's two editions): ``check(..., lang="zh")``,
or the environment variable ``LABFORMER_LANG=zh`` (also ``zh_CN``, ``zh-CN``); ``lang``
wins over the variable, and anything else means English. :data:`MESSAGES` holds both
catalogues, keyed by message id (``"attention.mask"``, ...); ``Mismatch.property`` is the id
of the property that failed.
"""

from __future__ import annotations

import contextvars
import math
import os
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["MESSAGES", "NAMES", "Mismatch", "check"]

NAMES: tuple[str, ...] = (
    "attention",
    "causal_mask",
    "padding_mask",
    "sinusoidal_positions",
    "layer_norm",
    "multi_head_attention",
    "label_smoothed_cross_entropy",
    "greedy_decode",
    "beam_search",
    "encoder_layer",
    "decoder_layer",
    "lm_causal_mask",
    "top_k_filter",
)

_EN: dict[str, str] = {
    # the frame of every message
    "input": "input:",
    "expected": "expected:",
    "got": "got:",
    "ok": "✓ {name}: all {n} checks passed.",
    "not_attempted": ("· {name}: not attempted yet (the attempt still raises "
                      "NotImplementedError). Write it, then run the check again."),
    "unknown": "unknown exercise {name!r}; the exercises are: {names}.",
    # properties every exercise may fail
    "raised": "the attempt raised {error} on an input it should accept.",
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
    "top_k_filter.count": ("exactly k tokens of each row should keep a probability above 0; "
                           "the others get exactly 0 (their logits set to -inf, not to 0)."),
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
    "d.extended": " (and it extended {ids}, which the beam drops)",
    "d.param_shapes": "the shapes of labformer's parameters",
    "d.every_sublayer": "every sublayer",
    "d.kept": "kept tokens {ids}",
    "d.kept_count": "row {row}: {n} kept",
    "d.row_sum": "row {row} sums to {total}",
}

_ZH: dict[str, str] = {
    "input": "输入：",
    "expected": "应为：",
    "got": "得到：",
    "ok": "✓ {name}：全部 {n} 项检查通过。",
    "not_attempted": ("· {name}：尚未作答（仍抛出 NotImplementedError）。写好之后，"
                      "再运行一次检查。"),
    "unknown": "没有名为 {name!r} 的练习；练习有：{names}。",
    "raised": "在一个本应接受的输入上，作答抛出了 {error}。",
    "returns_tensor": "结果应是 torch.Tensor，而不是 {type}。",
    "shape": "{what}的形状应与练习要求的一致。",
    "dtype": "{what}应是{kind}类型的张量。",
    "returns_ids": "结果应是 BOS 之后的各个 id（int 列表或一维张量），而不是 {type}。",
    "prefix": "调用 step 时应传入目前为止的完整前缀，以 BOS 开头。",
    "max_len": "最多只能生成 max_len 个词元（step 最多调用 max_len 次）。",
    "parameter_names": "层的参数应与 labformer 的同名同形，load_state_dict 才能把权重复制进来。",
    "post_ln": ("该层应是 Post-LN：norm(x + sublayer(x))，归一化在残差相加之后；"
                "这个输出却是 Pre-LN 的 x + sublayer(norm(x))。"),
    "residual": ("每个子层都应包在残差连接里：norm(x + sublayer(x))；"
                 "这个输出却与 {which} 没有残差连接的层相同。"),
    "attention.returns_pair": "attention 应返回一对 (out, weights)，而不是 {type}。",
    "attention.rows_sum_to_one": ("每个查询在所有键上的注意力权重之和应为 1（缩放之后，"
                                  "沿最后一维做 softmax）。"),
    "attention.weights": "权重应是 softmax(q·kᵀ / √d_k)，在键的维度上归一化。",
    "attention.output": "输出应是权重乘以 v：out = weights @ v。",
    "attention.mask": "掩码禁止（False）的键，权重应恰好为 0。",
    "attention.stable": ("分数很大时结果也应保持有限（先减去每行的最大值再取 exp，"
                         "或直接用 torch.softmax）。"),
    "causal_mask.causal": ("位置 i 只能关注位置 0..i：对角线及其下方为 True，"
                           "上方为 False（True = 可以关注）。"),
    "padding_mask.real_tokens": ("掩码应恰好在词元不等于 pad_id 处为 True（True = 可以关注），"
                                 "无论 pad_id 是多少。"),
    "sinusoidal_positions.position_zero": "在位置 0，偶数列都是 sin 0 = 0，奇数列都是 cos 0 = 1。",
    "sinusoidal_positions.values": ("第 2i 列应是 sin(pos / 10000^(2i / d_model))，"
                                    "第 2i + 1 列是同一角度的 cos。"),
    "layer_norm.zero_mean": "当 weight 为 1、bias 为 0 时，沿最后一维的每个向量输出后均值应为 0。",
    "layer_norm.unit_variance": ("当 weight 为 1、bias 为 0 时，沿最后一维的每个向量"
                                 "输出后方差应为 1，用有偏方差（除以 n 而不是 n - 1），"
                                 "与 nn.LayerNorm 相同。"),
    "layer_norm.affine": "归一化之后应再乘以 weight、加上 bias：y * weight + bias。",
    "layer_norm.eps": ("eps 应放在平方根里面：(x - mean) / sqrt(var + eps)；"
                       "这样几乎全等的向量也保持有限，并与 nn.LayerNorm 一致。"),
    "layer_norm.matches": "结果应与 nn.LayerNorm 沿最后一维的结果相同。",
    "multi_head_attention.projections": ("这个类应包含四个 nn.Linear(d_model, d_model)，"
                                         "名为 q_proj、k_proj、v_proj 和 out_proj。"),
    "multi_head_attention.one_head": ("只有一个头时，输出应是 out_proj(attention(q_proj(query), "
                                      "k_proj(key), v_proj(value)))。"),
    "multi_head_attention.heads": ("有 h 个头时，每个头应在自己那 d_k = d_model / h "
                                   "个特征上做注意力（分数乘以 1/√d_k），"
                                   "各头的输出再并排拼回（合并前先转置），然后经过 out_proj。"),
    "multi_head_attention.cross": ("键和值应来自参数 key 和 value："
                                   "交叉注意力中查询与它们不同，长度也可能不同。"),
    "multi_head_attention.mask": "掩码禁止的键不应改变输出。",
    "multi_head_attention.matches": "输出应与权重相同的 labformer MultiHeadAttention 相同。",
    "label_smoothed_cross_entropy.scalar": "损失应是一个数（0 维张量）。",
    "label_smoothed_cross_entropy.cross_entropy": ("平滑为 0 时，损失应是各位置 "
                                                   "-log_softmax(logits)[target] 的平均。"),
    "label_smoothed_cross_entropy.padding": ("目标为 ignore_index 的位置，"
                                             "既不计入总和，也不计入求平均的位置数。"),
    "label_smoothed_cross_entropy.smoothing": ("平滑为 ε 时，目标分布应是正确类别上 1 - ε，"
                                               "再在全部 V 个类别上各加 ε / V（PyTorch 的约定）。"),
    "label_smoothed_cross_entropy.matches": ("损失应等于 F.cross_entropy(logits, target, "
                                             "label_smoothing=ε, ignore_index=...)。"),
    "greedy_decode.stops_at_eos": "选出 EOS 后解码应停止：EOS 之后不再有词元。",
    "greedy_decode.keeps_eos": "结果应以使解码停止的那个 EOS 结尾。",
    "greedy_decode.no_bos": "结果应是 BOS 之后的 id，不含 BOS 本身。",
    "greedy_decode.argmax": "每一步都应选概率最大的下一个词元，即 step(prefix) 的 argmax。",
    "beam_search.eos_ends": "以 EOS 结尾的假设已经完成，不应再扩展。",
    "beam_search.pool": ("每一步，束应保留总对数概率（其所有词元之和）最高的 beam_size 个候选；"
                         "返回的假设不在束最后持有的假设之中。"),
    "beam_search.final_choice": ("在已完成和仍存活的假设中，结果应是 log p / ((5 + L) / 6)^alpha "
                                 "最高的那个，L 为 BOS 之后的词元数，含 EOS。"),
    "encoder_layer.mask": "掩码禁止的位置不应改变其他位置的输出。",
    "encoder_layer.matches": ("输出应与权重相同的 labformer EncoderLayer 相同："
                              "x = norm1(x + self_attn(x, x, x))，然后 norm2(x + ffn(x))。"),
    "decoder_layer.uses_memory": "交叉注意力应读取编码器的 memory：换一个 memory，输出也应改变。",
    "decoder_layer.causal": "使用因果 tgt_mask 时，位置 i 的输出不应依赖 i 之后的位置。",
    "decoder_layer.memory_mask": "memory_mask 禁止的 memory 位置不应改变输出。",
    "decoder_layer.matches": ("输出应与权重相同的 labformer DecoderLayer 相同："
                              "x = norm1(x + self_attn(x))，x = norm2(x + cross_attn(x, memory))，"
                              "然后 norm3(x + ffn(x))。"),
    "lm_causal_mask.causal": ("第 i 行是位置 offset + i：它可以关注位置 0..offset + i（True），"
                              "不能关注之后的位置（False）。"),
    "lm_causal_mask.offset": ("T 个新词元排在 offset 个已缓存的词元之后：第 i 行是位置 "
                              "offset + i，所以掩码是 offset + T 个位置的因果掩码的最后 T 行，"
                              "而不是前 T 行。"),
    "top_k_filter.sums_to_one": ("每一行的概率之和应为 1：保留 k 个词元之后，"
                                 "要在它们上面重新归一化。"),
    "top_k_filter.count": ("每一行应恰好有 k 个词元的概率大于 0；其余词元的概率恰好为 0"
                           "（把它们的 logit 设为 -inf，而不是 0）。"),
    "top_k_filter.most_probable": "保留下来的应是该行 logit 最大的 k 个词元。",
    "top_k_filter.ties": ("几个相等的 logit 争最后一个名额时，应保留 id 较小的词元，"
                          "与 argmax 一样。"),
    "top_k_filter.matches": ("每个保留词元的概率应是在保留的 logit 上做的 softmax："
                             "exp(logit) 除以保留的 k 个 exp 之和。"),
    "d.first_values": "形状 {shape}，前几个值 [{head}, ...]",
    "d.kind.causal": "因果",
    "d.kind.padding": "填充",
    "d.kind.random": "随机",
    "d.kind.one_key": "每行只允许一个键",
    "d.kind.large": "大数值",
    "d.kind.none": "无",
    "d.kind.self": "自注意力",
    "d.kind.cross": "交叉注意力",
    "d.large_qk": "（q 和 k 的元素约为 ±40）",
    "d.finite": "有限值",
    "d.the_mask": "掩码",
    "d.the_table": "位置表",
    "d.the_output": "输出",
    "d.the_weights": "权重",
    "d.floating": "浮点",
    "d.values_around": "（数值约为 2 ± 3）",
    "d.nearly_equal": "（每行数值几乎相等）",
    "d.an_nn_module": "一个 nn.Module",
    "d.missing": "缺少",
    "d.unexpected": "多出",
    "d.nothing_listed": "无",
    "d.key_value_query": "key 和 value = query",
    "d.key_value": "key 和 value {shape}",
    "d.changed_kv": "，改变被禁止的键和值",
    "d.changed_logits": "，改变被忽略位置上的 logits",
    "d.changed_x": "，改变 x 在被禁止位置上的值",
    "d.changed_last": "，改变 x 在最后一个位置上的值",
    "d.changed_memory": "，改变 memory 在被禁止位置上的值",
    "d.another_memory": "，再换一个 memory",
    "d.another_output": "不同的输出",
    "d.same_output": "相同的输出",
    "d.no_masks": "无掩码",
    "d.step_table": ("一个覆盖 V = {vocab} 个词元的 step 函数（表种子 {seed}），bos_id = {bos}, "
                     "eos_id = {eos}"),
    "d.greedy_is": "；贪心输出为 {ids}",
    "d.no_step_after_eos": "EOS = {eos} 之后不再调用 step",
    "d.at_most": "BOS 之后最多 {n} 个词元",
    "d.asks_for": "step({ids}) 要第 {n} 个词元",
    "d.list_of_ints": "int 列表",
    "d.after_prefix": "在 {prefix} 之后：词元 {token}（log p {lp}）",
    "d.token_lp": "词元 {token}（log p {lp}）",
    "d.nothing": "没有词元",
    "d.result": "；结果 {ids}",
    "d.calls": "调用 {calls}；结果 {ids}",
    "d.hypothesis": "{ids}（log p {lp}，分数 {score}）",
    "d.beam_holds": "；束最后持有 {held}",
    "d.extended": "（并且扩展了束会丢弃的 {ids}）",
    "d.param_shapes": "与 labformer 参数相同的形状",
    "d.every_sublayer": "所有子层",
    "d.kept": "保留的词元 {ids}",
    "d.kept_count": "第 {row} 行保留了 {n} 个词元",
    "d.row_sum": "第 {row} 行之和为 {total}",
}

MESSAGES: dict[str, dict[str, str]] = {"en": _EN, "zh": _ZH}
"""The two message catalogues, ``{"en": {id: text}, "zh": {id: text}}``, with the same ids."""


class Mismatch(AssertionError):
    """An attempt that is wrong: the message names the property and shows an input it fails.

    ``exercise`` is the exercise's name, ``property`` the failed property's message id
    (a key of the catalogues in :data:`MESSAGES`, such as ``"attention.mask"``).
    """

    def __init__(self, message: str, exercise: str, property: str) -> None:
        super().__init__(message)
        self.exercise = exercise
        self.property = property


@dataclass
class _Fail(Exception):
    """A failed property, before it is worded in the reader's language."""

    prop: str
    input: str = ""
    expected: str = ""
    got: str = ""
    fields: dict[str, str] = field(default_factory=dict)


def _lang(lang: str | None) -> str:
    chosen = lang if lang is not None else os.environ.get("LABFORMER_LANG", "en")
    return "zh" if chosen.lower().replace("-", "_") in ("zh", "zh_cn", "zh_hans") else "en"


def _text(lang: str, key: str, **fields: Any) -> str:
    return MESSAGES[lang][key].format(**fields)


_LANG: contextvars.ContextVar[str] = contextvars.ContextVar("labformer_exercises_lang",
                                                            default="en")


def _t(key: str, **fields: Any) -> str:
    """A fragment of a message, in the language of the check under way."""
    return _text(_LANG.get(), f"d.{key}", **fields)


def _prop_key(exercise: str, prop: str) -> str:
    key = f"{exercise}.{prop}"
    return key if key in _EN else prop


def _word(fail: _Fail, exercise: str, lang: str) -> Mismatch:
    key = _prop_key(exercise, fail.prop)
    lines = [f"{exercise}: {_text(lang, key, **fail.fields)}"]
    width = max(len(_text(lang, w)) for w in ("input", "expected", "got"))
    for label, value in (("input", fail.input), ("expected", fail.expected), ("got", fail.got)):
        if value:
            lines.append(f"  {_text(lang, label):<{width}} {value}")
    return Mismatch("\n".join(lines), exercise, key)


def check(name: str, attempt: Any, *, lang: str | None = None, quiet: bool = False) -> bool:
    """Grade ``attempt`` at exercise ``name``: True if right, Mismatch if wrong.

    Prints one line (unless ``quiet``): the checks passed, or "not attempted yet" when the
    attempt raises NotImplementedError, in which case it returns False. ``lang``: "en" or
    "zh"; None reads the environment variable LABFORMER_LANG (default English). Raises
    ValueError for a name not in :data:`NAMES`.
    """
    chosen = _lang(lang)
    if name not in _GRADERS:
        raise ValueError(_text(chosen, "unknown", name=name, names=", ".join(NAMES)))
    counter = [0]
    token = _LANG.set(chosen)
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            _GRADERS[name](attempt, counter)
    except NotImplementedError:
        if not quiet:
            _say(chosen, "not_attempted", name=name)
        return False
    except _Fail as fail:
        raise _word(fail, name, chosen) from None
    finally:
        _LANG.reset(token)
    if not quiet:
        _say(chosen, "ok", name=name, n=counter[0])
    return True


class GraderLine:
    """The line ``check`` shows: plain text, and in a notebook an HTML span that names its
    message id and fields, so that the book's Chinese edition, built from the notebooks run
    once in English, shows the same line from the Chinese catalogue (book/_ext/claims.py)."""

    def __init__(self, lang: str, key: str, **fields: Any) -> None:
        self.lang, self.key, self.fields = lang, key, fields
        self.text = _text(lang, key, **fields)

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        import html
        import json

        data = html.escape(json.dumps(self.fields, ensure_ascii=False, sort_keys=True))
        return (f'<p><span class="lf-grader" data-key="{self.key}" data-fields="{data}">'
                f"{html.escape(self.text, quote=False)}</span></p>")


def _say(lang: str, key: str, **fields: Any) -> None:
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


# ---------------------------------------------------------------------------------- helpers


def _call(fn: Callable[..., Any], *args: Any, inp: str = "", **kwargs: Any) -> Any:
    """Run the reader's code; an error other than NotImplementedError fails "raised"."""
    try:
        return fn(*args, **kwargs)
    except (NotImplementedError, _Fail):
        raise
    except Exception as err:  # the reader's bug, reported as a failed property
        text = str(err).strip().splitlines()
        error = type(err).__name__ + (f" ({text[0][:160]})" if text else "")
        raise _Fail("raised", inp, fields={"error": error}) from None


def _shape(x: Tensor | Sequence[int]) -> str:
    return str(tuple(x.shape if isinstance(x, Tensor) else x))


def _num(x: float) -> str:
    return f"{x:.4g}"


def _show(t: Tensor) -> str:
    """A small tensor's values, rounded; a large one's shape and first values."""
    if t.dtype == torch.bool:
        if t.dim() == 2:
            return " / ".join("".join("1" if v else "0" for v in row) for row in t.tolist())
        return str(t.int().tolist())
    values = t.detach().double()
    if values.numel() <= 12:
        return str([float(_num(v)) for v in values.flatten().tolist()]) if values.dim() <= 1 \
            else str(values.round(decimals=4).tolist())
    head = ", ".join(_num(v) for v in values.flatten()[:6].tolist())
    return _t("first_values", shape=_shape(t), head=head)


def _tensor(x: Any, inp: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise _Fail("returns_tensor", inp, fields={"type": type(x).__name__})
    return x


def _check_shape(x: Tensor, expected: Sequence[int], what: str, inp: str) -> None:
    if tuple(x.shape) != tuple(expected):
        raise _Fail("shape", inp, _shape(expected), _shape(x), {"what": what})


def _worst(got: Tensor, expected: Tensor) -> tuple[tuple[int, ...], float, float]:
    """Where got and expected differ most (NaN counts as the largest difference)."""
    diff = (got.double() - expected.double()).abs()
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, math.inf), diff)
    flat = int(diff.flatten().argmax())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape))
    return index, float(expected.double()[index]), float(got.double()[index])


def _close(got: Tensor, expected: Tensor, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    return bool(torch.allclose(got.double(), expected.double(), atol=atol, rtol=rtol))


def _compare(prop: str, got: Tensor, expected: Tensor, inp: str, name: str,
             atol: float = 1e-5, rtol: float = 1e-4) -> None:
    """Fail ``prop`` unless got == expected within tolerance, showing the worst entry."""
    if not _close(got, expected, atol, rtol):
        index, want, have = _worst(got, expected)
        where = f"{name}[{', '.join(map(str, index))}]" if index else name
        raise _Fail(prop, inp, f"{where} = {_num(want)}", f"{where} = {_num(have)}")


@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """torch's global generator seeded, for building modules (check() restores it after)."""
    torch.manual_seed(seed)
    yield


def _randn(g: torch.Generator, *shape: int, scale: float = 1.0) -> Tensor:
    return torch.randn(*shape, generator=g) * scale


# -------------------------------------------------------------------- attention and masks


def _grade_attention(f: Any, n: list[int]) -> None:
    from labformer.attention import attention_with_weights
    from labformer.masks import causal_mask

    # (leading dims, T_q, T_k, d_k, d_v, mask kind); d_k >= 2 so that the scale matters
    cases: list[tuple[tuple[int, ...], int, int, int, int, str]] = [
        ((2,), 3, 4, 4, 5, "none"),
        ((), 4, 3, 8, 2, "none"),
        ((2, 3), 2, 5, 2, 3, "none"),
        ((1,), 3, 1, 4, 4, "none"),  # a single key
        ((2,), 3, 3, 4, 2, "causal"),
        ((2, 2), 4, 5, 4, 3, "padding"),
        ((3,), 4, 6, 2, 2, "random"),
        ((2, 3), 3, 4, 4, 4, "one_key"),  # every row may attend exactly one key
        ((2,), 3, 5, 4, 3, "large"),
    ]
    for seed, (lead, tq, tk, dk, dv, kind) in enumerate(cases):
        g = torch.Generator().manual_seed(100 + seed)
        big = 40.0 if kind == "large" else 1.0
        q, k, v = _randn(g, *lead, tq, dk, scale=big), _randn(g, *lead, tk, dk, scale=big), \
            _randn(g, *lead, tk, dv)
        mask: Tensor | None = None
        if kind == "causal":
            mask = causal_mask(tq)
        elif kind == "padding":
            lengths = torch.randint(1, tk + 1, (lead[0],), generator=g)
            lengths[0] = tk - 2
            mask = (torch.arange(tk) < lengths[:, None])[:, None, None, :]  # (B, 1, 1, T_k)
        elif kind == "random":
            mask = torch.rand(*lead, tq, tk, generator=g) < 0.5
            mask[..., torch.randint(0, tk, (tq,), generator=g)[:, None] ==
                 torch.arange(tk)] = True  # one allowed key per row at least
        elif kind == "one_key":
            pick = torch.randint(0, tk, (tq,), generator=g)
            mask = pick[:, None] == torch.arange(tk)  # (T_q, T_k)
        inp = f"q {_shape(q)}, k {_shape(k)}, v {_shape(v)}, mask " + (
            "None" if mask is None else f"{_shape(mask)} ({_t('kind.' + kind)})")
        if mask is not None and mask.dim() == 2 and mask.numel() <= 36:
            inp += f" = {_show(mask)}"
        ref_out, ref_w = attention_with_weights(q.double(), k.double(), v.double(), mask)
        result = _call(f, q, k, v, mask, inp=inp)
        n[0] += 1
        if not isinstance(result, tuple | list) or len(result) != 2:
            raise _Fail("returns_pair", inp, fields={"type": type(result).__name__})
        out, weights = (_tensor(x, inp) for x in result)
        _check_shape(weights, ref_w.shape, _t("the_weights"), inp)
        _check_shape(out, ref_out.shape, _t("the_output"), inp)
        n[0] += 2
        if kind == "large" and not bool(torch.isfinite(out).all() and
                                        torch.isfinite(weights).all()):
            raise _Fail("stable", inp + _t("large_qk"), _t("finite"), _show(weights))
        if mask is not None:
            forbidden = ~mask.expand(ref_w.shape)
            leak = torch.where(forbidden, weights.double().abs().nan_to_num(1.0), 0.0)
            if bool((leak > 1e-6).any()):
                index, _, have = _worst(leak, torch.zeros_like(leak))
                where = f"weights[{', '.join(map(str, index))}]"
                raise _Fail("mask", inp, f"{where} = 0", f"{where} = {_num(have)}")
            n[0] += 1
        _compare("rows_sum_to_one", weights.sum(-1), torch.ones(ref_w.shape[:-1]), inp,
                 "weights.sum(-1)")
        _compare("weights", weights, ref_w, inp, "weights")
        _compare("output", out, ref_out, inp, "out", atol=1e-4)
        n[0] += 3


def _bool_result(f: Any, args: tuple[Any, ...], shape: tuple[int, ...], inp: str) -> Tensor:
    out = _tensor(_call(f, *args, inp=inp), inp)
    if out.dtype != torch.bool:
        raise _Fail("dtype", inp, "torch.bool", str(out.dtype), {"what": _t("the_mask"),
                                                                 "kind": "bool"})
    _check_shape(out, shape, _t("the_mask"), inp)
    return out


def _grade_causal_mask(f: Any, n: list[int]) -> None:
    for size in (1, 2, 3, 5, 8):
        inp = f"T = {size}"
        out = _bool_result(f, (size,), (size, size), inp)
        expected = torch.ones(size, size, dtype=torch.bool).tril()
        n[0] += 3
        if not torch.equal(out, expected):
            show = size <= 5
            raise _Fail("causal", inp, _show(expected) if show else "tril",
                        _show(out) if show else f"row 0 = {_show(out[0].int())}")


def _grade_padding_mask(f: Any, n: list[int]) -> None:
    # (B, T, pad_id): pad ids 0 and others, rows all real, all padding, pads inside a row
    for seed, (batch, length, pad) in enumerate([(2, 5, 4), (3, 4, 0), (1, 1, 7), (4, 6, 1),
                                                 (2, 3, 2)]):
        g = torch.Generator().manual_seed(200 + seed)
        tokens = torch.randint(0, 9, (batch, length), generator=g)
        tokens = torch.where(tokens == pad, tokens + 1, tokens)
        keep = torch.randint(0, length + 1, (batch,), generator=g)
        keep[0], keep[-1] = length, length - 1  # a row with no padding, one with some
        tokens[torch.arange(length) >= keep[:, None]] = pad
        if seed == 4:
            tokens[0, 1] = pad  # a pad id inside a row is padding too
        inp = f"tokens = {tokens.tolist()}, pad_id = {pad}"
        out = _bool_result(f, (tokens, pad), (batch, 1, 1, length), inp)
        n[0] += 3
        expected = (tokens != pad)[:, None, None, :]
        if not torch.equal(out, expected):
            raise _Fail("real_tokens", inp, str(expected.int().flatten(1).tolist()),
                        str(out.int().flatten(1).tolist()))


def _grade_sinusoidal_positions(f: Any, n: list[int]) -> None:
    from labformer.positional import sinusoidal_positions

    for max_len, d_model in ((1, 2), (6, 4), (12, 8), (40, 16), (7, 6), (30, 64)):
        inp = f"max_len = {max_len}, d_model = {d_model}"
        out = _tensor(_call(f, max_len, d_model, inp=inp), inp)
        if not out.is_floating_point():
            raise _Fail("dtype", inp, "float", str(out.dtype),
                        {"what": _t("the_table"), "kind": _t("floating")})
        _check_shape(out, (max_len, d_model), _t("the_table"), inp)
        expected = sinusoidal_positions(max_len, d_model, dtype=torch.float64)
        n[0] += 2
        if not _close(out[0], expected[0]):
            raise _Fail("position_zero", inp, f"PE[0] = {_show(expected[0, :8])}",
                        f"PE[0] = {_show(out[0, :8])}")
        _compare("values", out, expected, inp, "PE", atol=1e-4)
        n[0] += 2


# ------------------------------------------------------------------------------ layer norm


def _grade_layer_norm(f: Any, n: list[int]) -> None:
    shapes: list[tuple[int, ...]] = [(4, 8), (2, 3, 5), (3, 2), (2, 2, 2, 6)]
    for seed, shape in enumerate(shapes):
        g = torch.Generator().manual_seed(300 + seed)
        d = shape[-1]
        x = _randn(g, *shape, scale=3.0) + 2.0
        ones, zeros = torch.ones(d), torch.zeros(d)
        inp = f"x {_shape(x)}{_t('values_around')}, weight = ones({d}), bias = zeros({d})"
        out = _tensor(_call(f, x, ones, zeros, 1e-5, inp=inp), inp)
        _check_shape(out, shape, _t("the_output"), inp)
        _compare("zero_mean", out.mean(-1), torch.zeros(shape[:-1]), inp, "out.mean(-1)",
                 atol=1e-4)
        _compare("unit_variance", out.double().var(-1, unbiased=False),
                 torch.ones(shape[:-1]), inp, "out.var(-1, unbiased=False)", atol=1e-3)
        weight, bias = _randn(g, d) * 0.5 + 1.0, _randn(g, d) * 0.5
        inp = f"x {_shape(x)}, weight = {_show(weight)}, bias = {_show(bias)}"
        out = _tensor(_call(f, x, weight, bias, 1e-5, inp=inp), inp)
        expected = F.layer_norm(x.double(), (d,), weight.double(), bias.double(), 1e-5)
        _compare("affine", out, expected, inp, "out", atol=1e-4)
        n[0] += 4
    # eps: nearly constant rows (variance far below eps) and a constant row
    g = torch.Generator().manual_seed(310)
    # centred near 0, so that computing var as E[x²] - mean² loses no precision to float32
    x = 0.01 + _randn(g, 3, 4, scale=1e-3)
    x[1] = 0.25
    weight, bias = _randn(g, 4) * 0.5 + 1.0, _randn(g, 4) * 0.5
    for eps in (1e-5, 1e-2):
        inp = (f"x = {_show(x)}{_t('nearly_equal')}, weight = {_show(weight)}, "
               f"bias = {_show(bias)}, eps = {eps}")
        out = _tensor(_call(f, x, weight, bias, eps, inp=inp), inp)
        expected = F.layer_norm(x.double(), (4,), weight.double(), bias.double(), eps)
        _compare("eps", out, expected, inp, "out", atol=1e-4)
        n[0] += 1
    # a single feature: every vector is its own mean, the output is the bias
    x = _randn(g, 3, 1)
    inp = f"x = {_show(x)} (d = 1), weight = [2.0], bias = [0.5]"
    out = _tensor(_call(f, x, torch.tensor([2.0]), torch.tensor([0.5]), 1e-5, inp=inp), inp)
    _compare("matches", out, torch.full((3, 1), 0.5), inp, "out", atol=1e-4)
    n[0] += 1


# --------------------------------------------------------------------- multi-head attention


_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")


def _first_output(result: Any, inp: str) -> Tensor:
    if isinstance(result, tuple | list) and result:
        result = result[0]
    return _tensor(result, inp)


def _grade_multi_head_attention(cls: Any, n: list[int]) -> None:
    from labformer.masks import causal_mask
    from labformer.multihead import MultiHeadAttention

    # (d_model, heads, B, T_q, T_k, kind): one head first, then several, cross, masks
    cases = [(8, 1, 2, 3, 3, "self"), (4, 1, 1, 2, 2, "self"), (8, 2, 2, 4, 4, "self"),
             (12, 3, 1, 5, 5, "self"), (8, 2, 2, 3, 3, "cross"), (4, 1, 2, 2, 4, "cross"),
             (8, 4, 2, 3, 5, "cross"), (12, 2, 2, 4, 6, "padding"), (8, 2, 2, 4, 4, "causal")]
    for seed, (d, h, batch, tq, tk, kind) in enumerate(cases):
        with _seeded(400 + seed):
            ref = MultiHeadAttention(d, h).eval()
        inp = f"C(d_model={d}, num_heads={h})"
        attempt = _call(cls, d, h, inp=inp)
        if not isinstance(attempt, nn.Module):
            raise _Fail("projections", inp, _t("an_nn_module"), type(attempt).__name__)
        for name in _PROJECTIONS:
            layer = getattr(attempt, name, None)
            if not isinstance(layer, nn.Linear) or layer.weight.shape != (d, d) \
                    or layer.bias is None:
                got = "missing" if layer is None else repr(layer)
                raise _Fail("projections", inp, f"{name} = nn.Linear({d}, {d})",
                            f"{name} = {got}")
            _call(layer.load_state_dict, getattr(ref, name).state_dict(), inp=inp)
        attempt.eval()
        n[0] += 1
        g = torch.Generator().manual_seed(450 + seed)
        query = _randn(g, batch, tq, d)
        key = query if kind in ("self", "causal") else _randn(g, batch, tk, d)
        value = query if kind in ("self", "causal") else _randn(g, batch, tk, d)
        mask: Tensor | None = None
        if kind == "causal":
            mask = causal_mask(tq)
        elif kind == "padding":
            lengths = torch.tensor([tk - 2, tk][:batch])
            mask = (torch.arange(tk) < lengths[:, None])[:, None, None, :]
        inp += (f", query {_shape(query)}, " +
                (_t("key_value_query") if key is query else _t("key_value", shape=_shape(key))) +
                ("" if mask is None else f", mask {_shape(mask)} ({_t('kind.' + kind)})"))
        kwargs = {"mask": mask}
        out = _first_output(_call(attempt, query, key, value, inp=inp, **kwargs), inp)
        _check_shape(out, (batch, tq, d), _t("the_output"), inp)
        n[0] += 1
        expected = ref(query, key, value, mask=mask)[0]
        if mask is not None and kind == "padding":
            # keys (and values) the mask forbids must not matter
            noise = _randn(g, batch, tk, d, scale=3.0) * (~mask[:, 0, 0, :, None])
            changed = _first_output(_call(attempt, query, key + noise, value + noise,
                                          inp=inp, **kwargs), inp)
            _compare("mask", changed, out, inp + _t("changed_kv"),
                     "out", atol=1e-4)
            n[0] += 1
        prop = {"self": "one_head" if h == 1 else "heads", "causal": "mask",
                "padding": "mask", "cross": "cross"}[kind]
        _compare(prop, out, expected, inp, "out", atol=1e-4)
        n[0] += 1


# ---------------------------------------------------------------------------------- the loss


def _grade_label_smoothed_cross_entropy(f: Any, n: list[int]) -> None:
    # (shape of target, V, smoothing, ignore_index, with padding)
    cases: list[tuple[tuple[int, ...], int, float, int, bool]] = [
        ((6,), 5, 0.0, -100, False),
        ((2, 4), 7, 0.0, 0, False),
        ((2, 5), 6, 0.0, 0, True),
        ((8,), 4, 0.0, 3, True),
        ((2, 3), 5, 0.1, -100, False),
        ((7,), 3, 0.4, -100, False),
        ((3, 4), 6, 0.2, 0, True),
        ((2, 6), 9, 0.1, 2, True),
    ]
    for seed, (shape, vocab, eps, ignore, pads) in enumerate(cases):
        g = torch.Generator().manual_seed(500 + seed)
        logits = _randn(g, *shape, vocab, scale=2.0)
        target = torch.randint(0, vocab, shape, generator=g)
        if ignore >= 0:  # no accidental padding where there should be none
            target = torch.where(target == ignore, (target + 1) % vocab, target)
        if pads:
            where = torch.rand(shape, generator=g) < 0.4
            where.view(-1)[0], where.view(-1)[-1] = False, True
            target = torch.where(where, torch.full_like(target, ignore), target)
        inp = (f"logits {_shape(logits)}, target = {target.tolist()}, smoothing = {eps}, "
               f"ignore_index = {ignore}")
        loss = _tensor(_call(f, logits, target, eps, ignore, inp=inp), inp)
        if loss.numel() != 1 or loss.dim() > 1:
            raise _Fail("scalar", inp, "shape ()", f"shape {_shape(loss)}")
        n[0] += 1
        expected = F.cross_entropy(logits.reshape(-1, vocab).double(), target.reshape(-1),
                                   label_smoothing=eps, ignore_index=ignore)
        prop = "matches"
        if eps == 0.0:
            prop = "padding" if pads else "cross_entropy"
        elif not pads:
            prop = "smoothing"
        _compare(prop, loss.reshape(()), expected, inp, "loss", atol=1e-5)
        n[0] += 1
        if pads:  # logits at ignored positions must not matter
            noisy = logits + _randn(g, *shape, vocab, scale=5.0) * (target == ignore)[..., None]
            again = _tensor(_call(f, noisy, target, eps, ignore, inp=inp), inp)
            _compare("padding", again.reshape(()), expected, inp + _t("changed_logits"),
                     "loss", atol=1e-5)
            n[0] += 1


# -------------------------------------------------------------------------------- decoding


class _StepTable:
    """A fixed random language model over V tokens: log-probabilities keyed on the prefix.

    BOS is made very unlikely (so no right attempt depends on whether BOS may be generated);
    EOS gets ``eos_bias[len(prefix) - 1]`` added to its logit, which sets where outputs end.
    Every call is checked: the prefix starts with BOS, holds no EOS after it, and asks for
    token number ``limit`` at most.
    """

    def __init__(self, seed: int, vocab: int, bos: int, eos: int, eos_bias: Sequence[float],
                 limit: int, exercise: str, inp: str) -> None:
        self.seed, self.vocab, self.bos, self.eos = seed, vocab, bos, eos
        self.eos_bias, self.limit, self.exercise, self.inp = list(eos_bias), limit, exercise, inp
        self.table: dict[tuple[int, ...], list[float]] = {}
        self.asked: list[tuple[int, ...]] = []  # the prefixes step was called with, after BOS

    def log_probs(self, prefix: tuple[int, ...]) -> list[float]:
        if prefix not in self.table:
            r = random.Random(f"{self.seed}:{prefix}")
            logits = [r.gauss(0.0, 1.5) for _ in range(self.vocab)]
            logits[self.bos] -= 30.0
            logits[self.eos] += self.eos_bias[min(len(prefix) - 1, len(self.eos_bias) - 1)]
            top: float = max(logits)
            norm = top + math.log(sum(math.exp(v - top) for v in logits))
            self.table[prefix] = [v - norm for v in logits]
        return self.table[prefix]

    def __call__(self, prefix: Any) -> Tensor:
        ids = _ids(prefix, "prefix", self.inp)
        if not ids or ids[0] != self.bos:
            raise _Fail("prefix", self.inp, f"step([{self.bos}, ...])  (BOS = {self.bos})",
                        f"step({ids})")
        if self.eos in ids[1:]:
            prop = "eos_ends" if self.exercise == "beam_search" else "stops_at_eos"
            raise _Fail(prop, self.inp, _t("no_step_after_eos", eos=self.eos), f"step({ids})")
        if len(ids) - 1 >= self.limit:
            raise _Fail("max_len", self.inp, _t("at_most", n=self.limit),
                        _t("asks_for", ids=ids, n=len(ids)))
        self.asked.append(tuple(ids[1:]))
        return torch.tensor(self.log_probs(tuple(ids)), dtype=torch.float64)

    def score(self, tokens: Sequence[int]) -> float:
        """The summed log-probability of ``tokens`` after BOS."""
        prefix = [self.bos]
        total = 0.0
        for t in tokens:
            total += self.log_probs(tuple(prefix))[t]
            prefix.append(t)
        return total


def _ids(x: Any, what: str, inp: str) -> list[int]:
    """A list or tuple of ints, or a 1-D integer tensor, as a list of ints."""
    if isinstance(x, Tensor) and x.dim() == 1 and not x.is_floating_point():
        return [int(v) for v in x.tolist()]
    if isinstance(x, list | tuple) and all(isinstance(v, int) or (isinstance(v, Tensor) and
                                                                   v.numel() == 1) for v in x):
        return [int(v) for v in x]
    if what == "prefix":
        raise _Fail("prefix", inp, _t("list_of_ints"), type(x).__name__)
    raise _Fail("returns_ids", inp, fields={"type": type(x).__name__})


def _greedy_reference(step: _StepTable, max_len: int) -> list[int]:
    out: list[int] = []
    while len(out) < max_len:
        lp = step.log_probs((step.bos, *out))
        out.append(max(range(step.vocab), key=lambda t: lp[t]))
        if out[-1] == step.eos:
            break
    return out


def _grade_greedy_decode(f: Any, n: list[int]) -> None:
    # (V, BOS, EOS, max_len, EOS logit bias by length): some end early, some hit max_len
    cases = [(5, 1, 2, 6, [-2.0, -1.0, 0.5, 3.0]), (6, 0, 5, 4, [-9.0]),
             (4, 3, 0, 1, [-1.0]), (7, 2, 1, 7, [-1.0, 0.0, 1.0, 2.0, 3.0]),
             (5, 4, 3, 3, [5.0]), (8, 1, 6, 5, [-3.0, -3.0, 2.0])]
    for seed, (vocab, bos, eos, max_len, bias) in enumerate(cases):
        inp = _t("step_table", vocab=vocab, seed=600 + seed, bos=bos, eos=eos) + \
            f", max_len = {max_len}"
        step = _StepTable(600 + seed, vocab, bos, eos, bias, max_len, "greedy_decode", inp)
        expected = _greedy_reference(step, max_len)
        inp += _t("greedy_is", ids=expected)
        step.inp = inp
        got = _ids(_call(f, step, bos, eos, max_len, inp=inp), "result", inp)
        n[0] += 1
        if got == expected:
            n[0] += 1
            continue
        if got[:1] == [bos] and got[1:] == expected:
            raise _Fail("no_bos", inp, str(expected), str(got))
        if expected[-1] == eos and got == expected[:-1]:
            raise _Fail("keeps_eos", inp, str(expected), str(got))
        asked = set(step.asked)
        unasked = next((got[:i] for i in range(len(got)) if tuple(got[:i]) not in asked), None)
        if unasked is not None:  # a token chosen without the prefix before it
            calls = ", ".join(f"step({[bos, *p]})" for p in step.asked[:4])
            raise _Fail("prefix", inp, f"step({[bos, *unasked]})",
                        _t("calls", calls=calls, ids=got))
        # (a result past max_len, or going on after EOS, made step fail already)
        i = next((i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b),
                 min(len(got), len(expected)))
        lp = step.log_probs((bos, *expected[:i]))
        have = _t("token_lp", token=got[i], lp=_num(lp[got[i]])) if i < len(got) \
            else _t("nothing")
        raise _Fail("argmax", inp, _t("after_prefix", prefix=[bos, *expected[:i]],
                                      token=expected[i], lp=_num(lp[expected[i]])),
                    have + _t("result", ids=got))


@dataclass
class _BeamResult:
    best: list[int]
    pool: dict[tuple[int, ...], float]  # the finished and the last alive: their scores
    expanded: set[tuple[int, ...]]  # every hypothesis the beam extends, at any step


def _beam_reference(step: _StepTable, beam_size: int, max_len: int,
                    alpha: float) -> _BeamResult:
    """Beam search exactly as the exercise states it."""
    alive: list[tuple[list[int], float]] = [([], 0.0)]
    finished: list[tuple[list[int], float]] = []
    expanded: set[tuple[int, ...]] = set()
    for _ in range(max_len):
        expanded.update(tuple(tokens) for tokens, _ in alive)
        candidates = [(tokens + [t], lp + step.log_probs((step.bos, *tokens))[t])
                      for tokens, lp in alive for t in range(step.vocab)]
        candidates.sort(key=lambda c: c[1], reverse=True)
        kept = candidates[:beam_size]
        finished += [c for c in kept if c[0][-1] == step.eos]
        alive = [c for c in kept if c[0][-1] != step.eos]
        if not alive:
            break

    def score(lp: float, length: int) -> float:
        return lp / float(((5.0 + length) / 6.0) ** alpha)

    pool = {tuple(tokens): score(lp, len(tokens)) for tokens, lp in finished + alive}
    best = max(pool, key=lambda tokens: pool[tokens])
    return _BeamResult(list(best), pool, expanded)


# (table seed, V, BOS, EOS, beam_size, max_len, alpha, EOS logit bias by length). The seeds
# are chosen so that each case tells: with beam_size > 1 the beam's answer is not greedy's, nor
# that of a beam ranked by its last token; with alpha > 0 the length penalty changes the winner
# (tests/notebooks/test_exercises.py checks both); in the last case EOS never makes it into the
# beam.
_BEAM_CASES: list[tuple[int, int, int, int, int, int, float, list[float]]] = [
    (1, 5, 1, 2, 1, 4, 0.0, [-1.0, 0.0, 1.0]),
    (6, 6, 0, 3, 3, 4, 0.0, [-1.0, -0.5, 0.5, 1.0]),
    (17, 5, 4, 2, 2, 5, 0.0, [0.0, 0.5, 1.0]),
    (12, 7, 1, 2, 4, 3, 0.0, [-1.5, 0.0, 0.0]),
    (332, 6, 1, 0, 3, 5, 1.0, [1.0, -1.0, 0.0, 1.0]),
    (563, 6, 2, 4, 2, 6, 0.8, [0.0, -0.5, 0.0, 0.5, 1.0]),
    (62, 6, 0, 5, 4, 4, 2.0, [0.5, 0.0, 0.5]),
    (289, 5, 3, 1, 3, 5, 1.5, [1.0, 0.0, 0.5, 1.0]),
    (24, 6, 1, 2, 3, 3, 0.0, [-6.0]),
]


def _grade_beam_search(f: Any, n: list[int]) -> None:
    for seed, vocab, bos, eos, k, max_len, alpha, bias in _BEAM_CASES:
        inp = _t("step_table", vocab=vocab, seed=seed, bos=bos, eos=eos) + \
            f", beam_size = {k}, max_len = {max_len}, alpha = {alpha}"
        step = _StepTable(seed, vocab, bos, eos, bias, max_len, "beam_search", inp)
        ref = _beam_reference(step, k, max_len, alpha)
        got = _ids(_call(f, step, bos, eos, k, max_len, alpha, inp=inp), "result", inp)
        n[0] += 1
        if got == ref.best:
            n[0] += 1
            continue
        want = _t("hypothesis", ids=ref.best, lp=_num(step.score(ref.best)),
                  score=_num(ref.pool[tuple(ref.best)]))
        stray = next((p for p in step.asked if p not in ref.expanded), None)
        if stray is not None or tuple(got) not in ref.pool:
            if len(got) > max_len:
                raise _Fail("max_len", inp, want, str(got))
            held = ", ".join(str(list(t)) for t in sorted(ref.pool, key=ref.pool.__getitem__,
                                                           reverse=True)[:4])
            extended = "" if stray is None else _t("extended", ids=list(stray))
            raise _Fail("pool", inp, want + _t("beam_holds", held=held), f"{got}{extended}")
        have = _t("hypothesis", ids=got, lp=_num(step.score(got)),
                  score=_num(ref.pool[tuple(got)]))
        raise _Fail("final_choice", inp, want, have)


# ---------------------------------------------------------------------------------- layers


def _randomise(module: nn.Module, g: torch.Generator) -> None:
    """Give the norms (and biases) values far from their defaults, so that mix-ups show."""
    for name, p in module.named_parameters():
        if p.dim() == 1:
            p.copy_(_randn(g, *p.shape, scale=0.5) + (1.0 if "norm" in name and
                                                       name.endswith("weight") else 0.0))


def _load_layer(cls: Any, ref: nn.Module, d: int, h: int, d_ff: int) -> nn.Module:
    inp = f"C({d}, {h}, {d_ff})"
    attempt = _call(cls, d, h, d_ff, inp=inp)
    if not isinstance(attempt, nn.Module):
        raise _Fail("parameter_names", inp, _t("an_nn_module"), type(attempt).__name__)
    state = dict(ref.named_parameters())
    own = dict(attempt.named_parameters())  # the attempt's buffers, if any, are its own
    missing = sorted(set(state) - set(own))
    unexpected = sorted(set(own) - set(state))
    if missing or unexpected:
        none = _t("nothing_listed")
        raise _Fail("parameter_names", inp, f"{_t('missing')}: {', '.join(missing) or none}",
                    f"{_t('unexpected')}: {', '.join(unexpected) or none}")
    wrong = [f"{k} {tuple(own[k].shape)}, not {tuple(v.shape)}" for k, v in state.items()
             if own[k].shape != v.shape]
    if wrong:
        raise _Fail("parameter_names", inp, _t("param_shapes"),
                    "; ".join(wrong[:3]))
    _call(attempt.load_state_dict, state, strict=False, inp=inp)
    return attempt.eval()


def _variants(ref: nn.Module) -> Iterator[tuple[str, dict[str, str], nn.Module]]:
    """Copies of ``ref`` with a classic mistake: Pre-LN, or a sublayer without its residual."""
    import copy

    pre = copy.deepcopy(ref)
    subs = [name for name, _ in ref.named_children() if name.startswith("sublayer")]
    for name in subs:
        getattr(pre, name).norm_first = True
    yield "post_ln", {}, pre
    for which in [*subs, None]:
        variant = copy.deepcopy(ref)
        for other in subs if which is None else [which]:
            getattr(variant, other).residual = False
        yield "residual", {"which": which or _t("every_sublayer")}, variant


def _compare_layer(out: Tensor, expected: Tensor, run_ref: Callable[[nn.Module], Tensor],
                   ref: nn.Module, inp: str) -> None:
    if _close(out, expected, atol=1e-4):
        return
    for prop, fields, variant in _variants(ref):
        if _close(out, run_ref(variant), atol=1e-4):
            index, want, have = _worst(out, expected)
            where = f"out[{', '.join(map(str, index))}]"
            raise _Fail(prop, inp, f"{where} = {_num(want)}", f"{where} = {_num(have)}", fields)
    _compare("matches", out, expected, inp, "out", atol=1e-4)


def _grade_encoder_layer(cls: Any, n: list[int]) -> None:
    from labformer.layers import EncoderLayer

    for seed, (d, h, d_ff, batch, length) in enumerate([(8, 2, 16, 2, 4), (12, 3, 8, 1, 5),
                                                        (8, 1, 12, 3, 1), (16, 4, 24, 2, 6)]):
        g = torch.Generator().manual_seed(800 + seed)
        with _seeded(800 + seed):
            ref = EncoderLayer(d, h, d_ff).eval()
        _randomise(ref, g)
        attempt = _load_layer(cls, ref, d, h, d_ff)
        n[0] += 1
        x = _randn(g, batch, length, d)
        inp = f"C({d}, {h}, {d_ff}), x {_shape(x)}, mask None"
        out = _first_output(_call(attempt, x, mask=None, inp=inp), inp)
        _check_shape(out, x.shape, _t("the_output"), inp)
        _compare_layer(out, ref(x), lambda m: m(x), ref, inp)  # noqa: B023 (used at once)
        n[0] += 2
        if length < 3:
            continue
        lengths = torch.tensor([length - 2, length, length - 1][:batch])
        mask = (torch.arange(length) < lengths[:, None])[:, None, None, :]  # (B, 1, 1, T)
        inp = f"C({d}, {h}, {d_ff}), x {_shape(x)}, mask {_shape(mask)} " \
              f"({_t('kind.padding')}) " \
              f"= {mask.int().flatten(1).tolist()}"
        out = _first_output(_call(attempt, x, mask=mask, inp=inp), inp)
        real = mask[:, 0, 0, :, None]
        noisy = x + _randn(g, *x.shape, scale=3.0) * ~real
        again = _first_output(_call(attempt, noisy, mask=mask, inp=inp), inp)
        _compare("mask", again * real, out * real, inp + _t("changed_x"), "out", atol=1e-4)
        expected = ref(x, mask=mask)
        _compare_layer(out, expected, lambda m: m(x, mask=mask), ref, inp)  # noqa: B023
        n[0] += 2


def _grade_decoder_layer(cls: Any, n: list[int]) -> None:
    from labformer.layers import DecoderLayer
    from labformer.masks import causal_mask

    for seed, (d, h, d_ff, batch, length, src) in enumerate([(8, 2, 16, 2, 4, 5),
                                                             (12, 3, 8, 1, 5, 3),
                                                             (8, 1, 12, 2, 3, 4),
                                                             (16, 4, 24, 2, 6, 6)]):
        g = torch.Generator().manual_seed(900 + seed)
        with _seeded(900 + seed):
            ref = DecoderLayer(d, h, d_ff).eval()
        _randomise(ref, g)
        attempt = _load_layer(cls, ref, d, h, d_ff)
        n[0] += 1
        x, memory = _randn(g, batch, length, d), _randn(g, batch, src, d)
        inp = f"C({d}, {h}, {d_ff}), x {_shape(x)}, memory {_shape(memory)}, {_t('no_masks')}"
        nomask = {"tgt_mask": None, "memory_mask": None}
        out = _first_output(_call(attempt, x, memory, inp=inp, **nomask), inp)
        _check_shape(out, x.shape, _t("the_output"), inp)
        other = _first_output(_call(attempt, x, _randn(g, batch, src, d), inp=inp, **nomask),
                              inp)
        if _close(other, out, atol=1e-4):
            raise _Fail("uses_memory", inp + _t("another_memory"), _t("another_output"),
                        _t("same_output"))
        _compare_layer(out, ref(x, memory), lambda m: m(x, memory), ref, inp)  # noqa: B023
        n[0] += 3
        # the causal mask: changing the last position changes no earlier output
        tgt_mask = causal_mask(length)
        lengths = torch.tensor([src - 1, src][:batch])
        memory_mask = (torch.arange(src) < lengths[:, None])[:, None, None, :]
        inp = (f"C({d}, {h}, {d_ff}), x {_shape(x)}, memory {_shape(memory)}, tgt_mask = "
               f"causal_mask({length}), memory_mask {_shape(memory_mask)} = "
               f"{memory_mask.int().flatten(1).tolist()}")
        masks = {"tgt_mask": tgt_mask, "memory_mask": memory_mask}
        out = _first_output(_call(attempt, x, memory, inp=inp, **masks), inp)
        later = x.clone()
        later[:, -1] += _randn(g, batch, d, scale=3.0)
        again = _first_output(_call(attempt, later, memory, inp=inp, **masks), inp)
        _compare("causal", again[:, :-1], out[:, :-1], inp + _t("changed_last"), "out",
                 atol=1e-4)
        hidden = memory + _randn(g, *memory.shape, scale=3.0) * ~memory_mask[:, 0, 0, :, None]
        again = _first_output(_call(attempt, x, hidden, inp=inp, **masks), inp)
        _compare("memory_mask", again, out, inp + _t("changed_memory"), "out", atol=1e-4)
        _compare_layer(out, ref(x, memory, **masks), lambda m: m(x, memory, **masks),  # noqa: B023
                       ref, inp)
        n[0] += 3


# ----------------------------------------------------------------------- the language model


def _grade_lm_causal_mask(f: Any, n: list[int]) -> None:
    from labformer.masks import causal_mask

    for size, offset in ((1, 0), (3, 0), (4, 2), (1, 5), (2, 3), (5, 1), (3, 4)):
        inp = f"T = {size}, offset = {offset}"
        out = _bool_result(f, (size, offset), (size, offset + size), inp)
        expected = causal_mask(offset + size)[offset:]
        n[0] += 3
        if not torch.equal(out, expected):
            prop = "offset" if offset and torch.equal(out, causal_mask(offset + size)[:size]) \
                else "causal"
            raise _Fail(prop, inp, _show(expected), _show(out))


def _grade_top_k_filter(f: Any, n: list[int]) -> None:
    from labformer.sampling import next_token_probs

    # (leading dims, V, k, kind): a tie at the last place, large logits, k = V, k = 1
    cases: list[tuple[tuple[int, ...], int, int, str]] = [
        ((), 5, 2, "random"), ((2,), 6, 1, "random"), ((3,), 8, 3, "random"),
        ((2, 2), 7, 7, "random"), ((), 6, 2, "tie"), ((2,), 9, 4, "large"),
        ((3,), 5, 4, "tie"),
    ]
    for seed, (lead, vocab, k, kind) in enumerate(cases):
        g = torch.Generator().manual_seed(1000 + seed)
        logits = _randn(g, *lead, vocab, scale=50.0 if kind == "large" else 2.0)
        if kind == "tie":  # the k-th and (k+1)-th largest are equal, at ids in either order
            flat = logits.reshape(-1, vocab)
            for row in flat:
                order = row.argsort(descending=True)
                row[order[k]] = row[order[k - 1]]
        inp = f"logits = {_show(logits)}, k = {k}"
        out = _tensor(_call(f, logits, k, inp=inp), inp)
        _check_shape(out, logits.shape, _t("the_output"), inp)
        n[0] += 2
        expected = next_token_probs(logits.double(), top_k=k)
        got, want = out.double().reshape(-1, vocab), expected.reshape(-1, vocab)
        for row, (o, e) in enumerate(zip(got, want, strict=True)):
            if abs(float(o.sum()) - 1.0) > 1e-5:
                raise _Fail("sums_to_one", inp, _t("row_sum", row=row, total=1),
                            _t("row_sum", row=row, total=_num(float(o.sum()))))
            kept = [int(i) for i in (o > 0).nonzero().flatten()]
            wanted = [int(i) for i in (e > 0).nonzero().flatten()]
            if len(kept) != len(wanted):
                raise _Fail("count", inp, _t("kept_count", n=len(wanted), row=row),
                            _t("kept_count", n=len(kept), row=row) + ": " + _show(o.float()))
            if kept != wanted:
                raise _Fail("ties" if kind == "tie" else "most_probable", inp,
                            _t("kept", ids=wanted), _t("kept", ids=kept))
        n[0] += 3
        _compare("matches", out, expected, inp, "probs", atol=1e-5)
        n[0] += 1


_GRADERS: dict[str, Callable[[Any, list[int]], None]] = {
    "attention": _grade_attention,
    "causal_mask": _grade_causal_mask,
    "padding_mask": _grade_padding_mask,
    "sinusoidal_positions": _grade_sinusoidal_positions,
    "layer_norm": _grade_layer_norm,
    "multi_head_attention": _grade_multi_head_attention,
    "label_smoothed_cross_entropy": _grade_label_smoothed_cross_entropy,
    "greedy_decode": _grade_greedy_decode,
    "beam_search": _grade_beam_search,
    "encoder_layer": _grade_encoder_layer,
    "decoder_layer": _grade_decoder_layer,
    "lm_causal_mask": _grade_lm_causal_mask,
    "top_k_filter": _grade_top_k_filter,
}
assert tuple(_GRADERS) == NAMES
