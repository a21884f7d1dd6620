"""labformer.attention: scaled dot-product attention against PyTorch, and the RNN-era scorers."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from labformer.attention import (
    AdditiveAttention,
    DotAttention,
    GeneralAttention,
    attend,
    attention_with_weights,
    masked_softmax,
)
from labformer.masks import causal_mask, padding_mask

from _helpers import assert_close, random_mask


def _qkv(B=2, h=3, T_q=4, T_k=5, d_k=8, d_v=6, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, h, T_q, d_k, generator=g).to(dtype)
    k = torch.randn(B, h, T_k, d_k, generator=g).to(dtype)
    v = torch.randn(B, h, T_k, d_v, generator=g).to(dtype)
    return q, k, v


def _masks():
    """Named masks (True = may attend) broadcastable to (2, 3, 5, 5)."""
    causal = causal_mask(5)
    pad = padding_mask(torch.tensor([[3, 4, 5, 0, 0], [6, 7, 8, 9, 0]]))
    return {"none": None, "causal": causal, "padding": pad, "combined": causal & pad}


@pytest.mark.parametrize("name", ["none", "causal", "padding", "combined"])
def test_sdpa_matches_torch(name):
    mask = _masks()[name]
    q, k, v = _qkv(T_q=5, T_k=5)
    out, w = attention_with_weights(q, k, v, mask)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert out.shape == (2, 3, 5, 6) and w.shape == (2, 3, 5, 5)
    assert_close(out, ref)
    assert_close(w.sum(-1), torch.ones(2, 3, 5))
    if mask is not None:
        full = mask.expand_as(w)
        assert (w[~full] == 0).all()  # exactly zero, not just small
        assert (w[full] > 0).all()
    # The weights are the softmax of the scaled scores (independent formula).
    scores = q @ k.transpose(-2, -1) / math.sqrt(8)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    assert_close(w, scores.softmax(-1))


def test_sdpa_gradients_match_torch():
    mask = _masks()["combined"]
    q, k, v = (t.requires_grad_() for t in _qkv(T_q=5, T_k=5))
    q2, k2, v2 = (t.detach().clone().requires_grad_() for t in (q, k, v))
    g = torch.randn(2, 3, 5, 6)
    (attention_with_weights(q, k, v, mask)[0] * g).sum().backward()
    (F.scaled_dot_product_attention(q2, k2, v2, attn_mask=mask) * g).sum().backward()
    for a, b in [(q, q2), (k, k2), (v, v2)]:
        assert_close(a.grad, b.grad)


def test_sdpa_custom_scale_and_3d_inputs():
    q, k, v = (t[0] for t in _qkv())  # (h, T, d): any leading dims
    out, w = attention_with_weights(q, k, v, scale=0.3)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, scale=0.3))
    assert_close(w, (q @ k.transpose(-2, -1) * 0.3).softmax(-1))


def test_sdpa_cross_lengths():
    q, k, v = _qkv(T_q=2, T_k=7)
    mask = random_mask(2, 1, 2, 7, generator=torch.Generator().manual_seed(1))
    out, w = attention_with_weights(q, k, v, mask)
    assert out.shape == (2, 3, 2, 6) and w.shape == (2, 3, 2, 7)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_sdpa_dropout():
    q, k, v = _qkv()
    torch.manual_seed(0)
    out, w = attention_with_weights(q, k, v, dropout_p=0.5)
    _, w0 = attention_with_weights(q, k, v)
    dropped = w == 0
    assert dropped.any() and (~dropped).any()
    assert_close(w[~dropped], w0[~dropped] * 2.0)  # inverted dropout rescales survivors
    assert_close(out, w @ v)


def test_fully_masked_row_is_zero_and_finite():
    q, k, v = (t.requires_grad_() for t in _qkv(T_q=3, T_k=4))
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[1] = False  # query 1 may attend to nothing
    out, w = attention_with_weights(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert (w[..., 1, :] == 0).all() and (out[..., 1, :] == 0).all()
    assert_close(w[..., [0, 2], :].sum(-1), torch.ones(2, 3, 2))
    (out.sum() + w.sum()).backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()
    assert (q.grad[..., 1, :] == 0).all()  # the empty row has no influence


def test_masked_softmax_directly():
    scores = torch.tensor([[1.0, 2.0, 3.0], [0.5, 0.5, 0.5]])
    mask = torch.tensor([[True, False, True], [False, False, False]])
    w = masked_softmax(scores, mask)
    e1, e3 = math.exp(1.0), math.exp(3.0)
    assert_close(w[0], torch.tensor([e1 / (e1 + e3), 0.0, e3 / (e1 + e3)]))
    assert (w[1] == 0).all()
    assert_close(masked_softmax(scores, None), scores.softmax(-1))


def test_attend_is_masked_softmax_then_weighted_sum():
    scores = torch.tensor([[[0.0, 1.0, 2.0], [3.0, 0.0, -1.0]]])  # (1, T_q=2, T_k=3)
    value = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]]])  # (1, T_k=3, d_v=2)
    mask = torch.tensor([[True, False, True], [True, True, True]])
    out, w = attend(scores, value, mask)
    e0, e2 = 1.0, math.exp(2.0)
    row0 = torch.tensor([e0 / (e0 + e2), 0.0, e2 / (e0 + e2)])
    assert_close(w[0, 0], row0)
    assert_close(out[0, 0], row0[0] * value[0, 0] + row0[2] * value[0, 2])
    assert_close(out[0, 1], scores[0, 1].softmax(-1) @ value[0])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_masking_in_low_precision(dtype):
    mask = _masks()["combined"]
    q, k, v = _qkv(T_q=5, T_k=5)
    ref, _ = attention_with_weights(q, k, v, mask)
    out, w = attention_with_weights(q.to(dtype), k.to(dtype), v.to(dtype), mask)
    assert out.dtype == dtype and w.dtype == dtype
    assert (w[~mask.expand_as(w)] == 0).all()
    assert torch.isfinite(out).all()
    assert_close(out.float(), ref, atol=5e-2)
    # A fully masked row stays finite and zero in low precision too.
    empty = torch.zeros(5, 5, dtype=torch.bool)
    out_e, w_e = attention_with_weights(q.to(dtype), k.to(dtype), v.to(dtype), empty)
    assert (out_e == 0).all() and (w_e == 0).all()


def test_sdpa_errors_name_shapes():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=r"\(4,\)"):
        attention_with_weights(torch.randn(4), k, v)
    with pytest.raises(ValueError, match=r"query \(2, 3, 4, 8\) and key \(2, 3, 5, 7\)"):
        attention_with_weights(q, torch.randn(2, 3, 5, 7), v)
    with pytest.raises(ValueError, match=r"key \(2, 3, 5, 8\) and value \(2, 3, 6, 6\)"):
        attention_with_weights(q, k, torch.randn(2, 3, 6, 6))
    with pytest.raises(ValueError, match=r"\(5, 3, 4, 8\).*\(2, 3, 5, 8\)"):
        attention_with_weights(torch.randn(5, 3, 4, 8), k, v)
    with pytest.raises(ValueError, match=r"torch.float32 with shape \(4, 5\)"):
        attention_with_weights(q, k, v, torch.ones(4, 5))
    with pytest.raises(ValueError, match=r"torch.int64 with shape \(4, 5\)"):
        attention_with_weights(q, k, v, torch.ones(4, 5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(4, 4\).*\(2, 3, 4, 5\)"):
        attention_with_weights(q, k, v, torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="dropout_p"):
        attention_with_weights(q, k, v, dropout_p=1.0)


@settings(max_examples=25, deadline=None)
@given(
    B=st.integers(1, 3),
    h=st.integers(1, 3),
    T_q=st.integers(1, 6),
    T_k=st.integers(1, 6),
    d_k=st.integers(1, 8),
    seed=st.integers(0, 2**16),
    use_mask=st.booleans(),
)
def test_sdpa_property_matches_torch(B, h, T_q, T_k, d_k, seed, use_mask):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, h, T_q, d_k, generator=g)
    k = torch.randn(B, h, T_k, d_k, generator=g)
    v = torch.randn(B, h, T_k, d_k + 1, generator=g)
    mask = random_mask(B, h, T_q, T_k, generator=g) if use_mask else None
    out, w = attention_with_weights(q, k, v, mask)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    assert_close(w.sum(-1), torch.ones(B, h, T_q))
    if mask is not None:
        assert (w[~mask] == 0).all()


# --- RNN-era scorers ----------------------------------------------------------------------


def _rnn_inputs(B=3, S=5, d_q=4, d_k=6, d_v=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, d_q, generator=g), torch.randn(B, S, d_k, generator=g),
            torch.randn(B, S, d_v, generator=g))


def _check_scorer(module, query, keys, values, expected_scores):
    mask = torch.tensor(
        [[True] * 5, [True, True, True, False, False], [False, True] + [False] * 3]
    )
    ctx, w = module(query, keys, values)
    assert ctx.shape == (3, values.shape[-1]) and w.shape == (3, 5)
    assert_close(w, expected_scores.softmax(-1))
    assert_close(ctx, torch.einsum("bs,bsd->bd", expected_scores.softmax(-1), values))
    ctx_m, w_m = module(query, keys, values, mask=mask)
    assert (w_m[~mask] == 0).all()
    ref = expected_scores.masked_fill(~mask, float("-inf")).softmax(-1)
    assert_close(w_m, ref)
    assert_close(ctx_m, torch.einsum("bs,bsd->bd", ref, values))
    assert_close(ctx_m[2], values[2, 1])  # only key 1 allowed for row 2


def test_additive_attention():
    q, k, v = _rnn_inputs()
    att = AdditiveAttention(4, 6, 9)
    with torch.no_grad():
        scores = torch.tanh(q[:, None] @ att.w_query.weight.T + k @ att.w_key.weight.T
                            + att.w_key.bias) @ att.v.weight[0]
        _check_scorer(att, q, k, v, scores)


def test_dot_attention():
    q, k, v = _rnn_inputs(d_q=6)
    _check_scorer(DotAttention(), q, k, v, (k * q[:, None]).sum(-1))
    ctx, w = DotAttention()(q, k)  # values default to keys
    assert_close(ctx, torch.einsum("bs,bsd->bd", w, k))
    with pytest.raises(ValueError, match=r"query \(3, 4\) and keys \(3, 5, 6\)"):
        DotAttention()(torch.randn(3, 4), k)


def test_general_attention():
    q, k, v = _rnn_inputs()
    att = GeneralAttention(4, 6)
    with torch.no_grad():
        scores = torch.einsum("bq,qk,bsk->bs", q, att.w.weight, k)
        _check_scorer(att, q, k, v, scores)


@pytest.mark.parametrize(
    "make", [lambda: AdditiveAttention(4, 6, 9), lambda: GeneralAttention(4, 6), DotAttention]
)
def test_prepared_keys_are_the_keys_part_of_the_score(make):
    """A decoder that queries one memory at every step prepares the keys once: same result."""
    torch.manual_seed(0)
    att = make()
    q, k, v = _rnn_inputs(d_q=6) if isinstance(att, DotAttention) else _rnn_inputs()
    mask = torch.tensor([[True] * 5, [True, True, False, False, False], [True] * 5])
    with torch.no_grad():
        prepared = att.prepare_keys(k)
        ctx, w = att(q, k, v, mask=mask)
        ctx_p, w_p = att(q, k, v, mask=mask, prepared_keys=prepared)
        assert_close(ctx_p, ctx)
        assert_close(w_p, w)
        assert_close(att.score(q, k), att.score_prepared(q, prepared))
        # The prepared keys are really what is read (not recomputed from ``keys``).
        _, w_other = att(q, k, v, mask=mask, prepared_keys=prepared.flip(1))
        assert (w_other - w).abs().max() > 1e-3


def test_scorer_factory_arguments():
    f64 = {"dtype": torch.float64}
    for att in (AdditiveAttention(4, 6, 9, **f64), GeneralAttention(4, 6, **f64)):
        assert {p.dtype for p in att.parameters()} == {torch.float64}


def test_scorers_fully_masked_row_finite():
    q, k, v = _rnn_inputs(d_q=6)
    q.requires_grad_()
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[0] = False
    ctx, w = DotAttention()(q, k, v, mask=mask)
    assert (ctx[0] == 0).all() and (w[0] == 0).all()
    ctx.sum().backward()
    assert torch.isfinite(q.grad).all()


def test_scorer_errors_name_shapes():
    q, k, v = _rnn_inputs()
    att = AdditiveAttention(4, 6, 9)
    with pytest.raises(ValueError, match=r"\(3, 1, 4\)"):
        att(q[:, None], k, v)
    with pytest.raises(ValueError, match=r"values \(3, 4, 7\)"):
        att(q, k, v[:, :4])
    with pytest.raises(ValueError, match=r"query \(2, 4\)"):
        att(q[:2], k, v)
    with pytest.raises(ValueError, match=r"\(3, 5\).*torch.int64 \(3, 5\)"):
        att(q, k, v, mask=torch.ones(3, 5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"torch.bool \(3, 4\)"):
        att(q, k, v, mask=torch.ones(3, 4, dtype=torch.bool))
