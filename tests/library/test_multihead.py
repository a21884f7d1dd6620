"""labformer.multihead: MultiHeadAttention against nn.MultiheadAttention (copied by
labformer.convert), caches, recording (labformer.book.record)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from labformer.book.record import record_attention
from labformer.convert import mha_from_torch
from labformer.masks import causal_mask, from_key_padding_mask
from labformer.multihead import KVCache, MultiHeadAttention

from _helpers import assert_close, not_close, random_mask

D, H = 16, 4


def _pair(d_model=D, heads=H, bias=True, seed=0):
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(d_model, heads, batch_first=True, bias=bias)
    if bias:  # torch initialises biases to zero; make them matter
        with torch.no_grad():
            ref.in_proj_bias.normal_()
            ref.out_proj.bias.normal_()
    return ref.eval(), mha_from_torch(ref).eval()


def _inputs(B=2, T_q=5, T_k=6, d_model=D, seed=1):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, T_q, d_model, generator=g), torch.randn(B, T_k, d_model, generator=g),
            torch.randn(B, T_k, d_model, generator=g))


def _torch_masks():
    """torch conventions: key_padding_mask True = ignore; bool attn_mask True = NOT allowed."""
    kpm = torch.tensor([[False] * 6, [False, False, False, False, True, True]])
    g = torch.Generator().manual_seed(3)
    allowed = random_mask(5, 6, generator=g)
    allowed[:, 0] = True  # keep a real key in every row for both batch entries
    return kpm, ~allowed, allowed


@pytest.mark.parametrize("masks", ["none", "kpm", "attn", "both"])
def test_mha_matches_torch_outputs_and_weights(masks):
    ref, mha = _pair()
    q, k, v = _inputs()
    kpm, torch_attn, allowed = _torch_masks()
    use_kpm, use_attn = masks in ("kpm", "both"), masks in ("attn", "both")
    tkw = dict(key_padding_mask=kpm if use_kpm else None,
               attn_mask=torch_attn if use_attn else None)
    ours_mask = None
    if use_kpm:
        ours_mask = from_key_padding_mask(kpm)
    if use_attn:
        ours_mask = allowed if ours_mask is None else ours_mask & allowed
    out, w = mha(q, k, v, mask=ours_mask)
    assert out.shape == (2, 5, D) and w.shape == (2, H, 5, 6)
    ref_out, ref_w = ref(q, k, v, **tkw, average_attn_weights=False)
    assert_close(out, ref_out)
    assert_close(w, ref_w)
    _, ref_avg = ref(q, k, v, **tkw)  # averaged over heads by default
    assert_close(w.mean(1), ref_avg)
    if ours_mask is not None:
        assert (w[~ours_mask.expand_as(w)] == 0).all()


def test_mha_gradients_match_torch():
    ref, mha = _pair()
    ref.train(), mha.train()  # dropout 0, so train mode must agree too
    q, k, v = _inputs()
    kpm, torch_attn, allowed = _torch_masks()
    q1, q2 = q.clone().requires_grad_(), q.clone().requires_grad_()
    k1, k2 = k.clone().requires_grad_(), k.clone().requires_grad_()
    g = torch.randn(2, 5, D)
    (mha(q1, k1, v, mask=from_key_padding_mask(kpm) & allowed)[0] * g).sum().backward()
    (ref(q2, k2, v, key_padding_mask=kpm, attn_mask=torch_attn)[0] * g).sum().backward()
    assert_close(q1.grad, q2.grad)
    assert_close(k1.grad, k2.grad)
    w_in = torch.cat([mha.q_proj.weight.grad, mha.k_proj.weight.grad, mha.v_proj.weight.grad])
    assert_close(w_in, ref.in_proj_weight.grad)
    b_in = torch.cat([mha.q_proj.bias.grad, mha.k_proj.bias.grad, mha.v_proj.bias.grad])
    assert_close(b_in, ref.in_proj_bias.grad)
    assert_close(mha.out_proj.weight.grad, ref.out_proj.weight.grad)
    assert_close(mha.out_proj.bias.grad, ref.out_proj.bias.grad)


def test_from_torch_without_bias():
    ref, mha = _pair(bias=False)
    assert mha.q_proj.bias is None and mha.out_proj.bias is None
    q, k, v = _inputs()
    assert_close(mha(q, k, v)[0], ref(q, k, v)[0])


def test_from_torch_rejects_unsupported():
    with pytest.raises(ValueError, match="kdim"):
        mha_from_torch(nn.MultiheadAttention(8, 2, kdim=4, vdim=4))
    with pytest.raises(ValueError, match="kdim"):
        mha_from_torch(nn.MultiheadAttention(8, 2, add_bias_kv=True))
    with pytest.raises(ValueError, match="kdim"):
        mha_from_torch(nn.MultiheadAttention(8, 2, add_zero_attn=True))


@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding"])
def test_fast_path_equals_explicit_path(mask_kind):
    _, mha = _pair()
    x, _, _ = _inputs(T_q=6)
    mask = {"none": None, "causal": causal_mask(6),
            "padding": from_key_padding_mask(_torch_masks()[0])}[mask_kind]
    out, w = mha(x, x, x, mask=mask)
    fast, none = mha(x, x, x, mask=mask, need_weights=False)
    assert none is None and w is not None
    assert_close(fast, out)


def test_fully_masked_query_row_finite_both_paths():
    _, mha = _pair()
    q, k, v = _inputs()
    mask = torch.ones(2, 1, 5, 6, dtype=torch.bool)
    mask[0, 0, 2] = False  # batch 0, query 2 sees no key
    for need_weights in (True, False):
        qq = q.clone().requires_grad_()
        mha.zero_grad()
        out, w = mha(qq, k, v, mask=mask, need_weights=need_weights)
        assert torch.isfinite(out).all()
        if need_weights:
            assert (w[0, :, 2] == 0).all()
        # No values reach the row: it is the out-projection bias alone.
        assert_close(out[0, 2], mha.out_proj.bias.detach())
        out.sum().backward()
        assert torch.isfinite(qq.grad).all()
        assert all(torch.isfinite(p.grad).all() for p in mha.parameters())


def test_self_attention_is_permutation_equivariant_not_invariant():
    _, mha = _pair()
    x, _, _ = _inputs(T_q=6)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    out = mha(x, x, x)[0]
    out_p = mha(x[:, perm], x[:, perm], x[:, perm])[0]
    assert_close(out_p, out[:, perm])
    assert not_close(out_p, out)  # tokens did move: not invariant


def test_mask_is_keyword_only():
    """nn.MultiheadAttention's fourth positional argument is key_padding_mask (True = ignore):
    a mask passed by position here could silently mean the opposite, so it is refused."""
    _, mha = _pair()
    q, k, v = _inputs()
    with pytest.raises(TypeError):
        mha(q, k, v, torch.ones(5, 6, dtype=torch.bool))


@pytest.mark.parametrize("need_weights", [True, False])
def test_attention_dropout_is_a_module_that_eval_switches_off(need_weights):
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H, dropout=0.5)
    assert isinstance(mha.dropout, nn.Dropout) and mha.dropout.p == 0.5
    plain = MultiHeadAttention(D, H)
    plain.load_state_dict(mha.state_dict())
    q, k, v = _inputs()
    mha.eval()
    assert_close(mha(q, k, v, need_weights=need_weights)[0], plain(q, k, v)[0])
    mha.train()
    torch.manual_seed(1)
    assert not_close(mha(q, k, v, need_weights=need_weights)[0], plain(q, k, v)[0])
    mha.dropout.eval()  # the module's own flag decides, as for every nn.Dropout
    assert_close(mha(q, k, v, need_weights=need_weights)[0], plain(q, k, v)[0])


def test_dtype_and_device_factory_arguments():
    mha = MultiHeadAttention(D, H, dtype=torch.float64, device="cpu")
    assert {p.dtype for p in mha.parameters()} == {torch.float64}
    # "meta" (shapes, no storage) is a device other than the default on every machine.
    meta = MultiHeadAttention(D, H, device="meta")
    assert {p.device.type for p in meta.parameters()} == {"meta"}
    assert meta(*(t.to("meta") for t in _inputs()))[0].device.type == "meta"
    q, k, v = (t.double() for t in _inputs())
    assert mha(q, k, v)[0].dtype == torch.float64


def test_from_torch_keeps_dtype():
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(D, H, batch_first=True, dtype=torch.float64).eval()
    with torch.no_grad():
        ref.in_proj_bias.normal_()
    mha = mha_from_torch(ref).eval()
    assert {p.dtype for p in mha.parameters()} == {torch.float64}
    q, k, v = (t.double() for t in _inputs())
    out, w = mha(q, k, v)
    ref_out, ref_w = ref(q, k, v, average_attn_weights=False)
    assert_close(out, ref_out, atol=1e-12)  # float64 end to end: agreement far below float32's
    assert_close(w, ref_w, atol=1e-12)


def test_mha_errors_name_shapes():
    with pytest.raises(ValueError, match=r"d_model \(10\).*num_heads \(4\)"):
        MultiHeadAttention(10, 4)
    with pytest.raises(ValueError, match="num_heads"):
        MultiHeadAttention(8, 0)
    _, mha = _pair()
    q, k, v = _inputs()
    with pytest.raises(ValueError, match=r"query \(5, 16\)"):
        mha(q[0], k, v)
    with pytest.raises(ValueError, match=r"key \(2, 6, 8\)"):
        mha(q, k[..., :8], v)
    with pytest.raises(ValueError, match=r"key \(2, 6, 16\), value \(2, 4, 16\)"):
        mha(q, k, v[:, :4])
    with pytest.raises(ValueError, match=r"query \(1, 5, 16\)"):
        mha(q[:1], k, v)
    with pytest.raises(ValueError, match=r"torch.float32 with shape \(5, 6\)"):
        mha(q, k, v, mask=torch.ones(5, 6))
    with pytest.raises(ValueError, match=r"torch.int64"):
        mha(q, k, v, mask=torch.ones(5, 6, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(5, 5\).*\(2, 4, 5, 6\)"):
        mha(q, k, v, mask=torch.ones(5, 5, dtype=torch.bool), need_weights=False)


def test_kv_cache_self_attention_incremental():
    _, mha = _pair()
    x, _, _ = _inputs(T_q=5)
    full = mha(x, x, x, mask=causal_mask(5))[0]
    cache = KVCache()
    assert not cache.filled and len(cache) == 0
    steps = []
    for t in range(5):
        xt = x[:, t : t + 1]
        steps.append(mha(xt, xt, xt, need_weights=False, cache=cache)[0])
        assert len(cache) == t + 1 and cache.k.shape == (2, H, t + 1, D // H)
    assert cache.filled
    assert_close(torch.cat(steps, 1), full)


def test_static_cache_projects_memory_once():
    _, mha = _pair()
    q, mem, _ = _inputs()
    calls = {"k": 0, "v": 0}
    mha.k_proj.register_forward_hook(lambda *a: calls.__setitem__("k", calls["k"] + 1))
    mha.v_proj.register_forward_hook(lambda *a: calls.__setitem__("v", calls["v"] + 1))
    cache = KVCache(static=True)
    outs = [mha(q[:, t : t + 1], mem, mem, cache=cache)[0] for t in range(5)]
    assert calls == {"k": 1, "v": 1}
    assert len(cache) == 6  # memory length, not growing
    assert_close(torch.cat(outs, 1), mha(q, mem, mem)[0])


def test_kv_cache_update_and_reorder():
    cache = KVCache()
    cache.reorder(torch.tensor([0]))  # empty cache: nothing to do, no error
    k = torch.arange(3 * 2 * 1 * 2, dtype=torch.float32).view(3, 2, 1, 2)
    cache.update(k, k + 100)
    cache.update(k + 1, k + 101)
    assert cache.k.shape == (3, 2, 2, 2)
    index = torch.tensor([2, 0, 2])
    before_k, before_v = cache.k.clone(), cache.v.clone()
    cache.reorder(index)
    assert torch.equal(cache.k, before_k[index]) and torch.equal(cache.v, before_v[index])
    static = KVCache(static=True)
    static.update(k, k)
    static.update(k + 5, k + 5)  # static caches are replaced, not appended
    assert torch.equal(static.k, k + 5)


def test_record_attention_collects_and_detaches():
    model = nn.ModuleDict({"a": MultiHeadAttention(D, H), "b": MultiHeadAttention(D, 2)})
    q, k, v = _inputs()
    with record_attention(model) as maps:
        model["a"](q, k, v, need_weights=False)  # recording forces the explicit path
        model["b"](q, q, q)
    assert set(maps) == {"a", "b"}
    assert maps["a"].shape == (2, H, 5, 6) and maps["b"].shape == (2, 2, 5, 5)
    assert not maps["a"].requires_grad
    assert_close(maps["a"].sum(-1), torch.ones(2, H, 5))
    assert_close(maps["b"], model["b"](q, q, q)[1].detach())
    maps.clear()
    model["a"](q, k, v)
    assert maps == {}  # after the block, nothing is recorded any more
    with record_attention(model["b"]) as again:  # and a new block records afresh
        model["b"](q, q, q)
    assert set(again) == {""} and maps == {}


def test_record_attention_removed_after_exception():
    mha = MultiHeadAttention(D, H)
    with pytest.raises(RuntimeError):
        with record_attention(mha) as maps:
            raise RuntimeError("boom")
    q, k, v = _inputs()
    mha(q, k, v)
    assert maps == {}  # the failed block left no recorder behind


@settings(max_examples=25, deadline=None)
@given(
    B=st.integers(1, 3),
    T=st.integers(1, 6),
    heads=st.sampled_from([1, 2, 4]),
    d_per_head=st.integers(1, 4),
    seed=st.integers(0, 2**16),
    use_mask=st.booleans(),
)
def test_mha_property_matches_torch(B, T, heads, d_per_head, seed, use_mask):
    d_model = heads * d_per_head
    ref, mha = _pair(d_model, heads, seed=seed)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, d_model, generator=g)
    allowed = random_mask(T, T, generator=g) if use_mask else None
    out, w = mha(x, x, x, mask=allowed)
    ref_out, ref_w = ref(x, x, x, attn_mask=None if allowed is None else ~allowed,
                         average_attn_weights=False)
    assert_close(out, ref_out)
    assert_close(w, ref_w)


@pytest.mark.parametrize("need_weights", [True, False])
def test_scale_one_equals_default_with_queries_scaled_up(need_weights):
    """scale=1.0 drops the 1/sqrt(d_k): the same as the default with W_Q, b_Q times sqrt(d_k),
    on the explicit path and on the fused one."""
    _, mha = _pair()
    unscaled = MultiHeadAttention(D, H, scale=1.0).eval()
    unscaled.load_state_dict(mha.state_dict())
    assert unscaled.scale == 1.0 and mha.scale is None and "scale=1.0" in repr(unscaled)
    q, k, v = _inputs()
    mask = from_key_padding_mask(_torch_masks()[0])
    out = unscaled(q, k, v, mask=mask, need_weights=need_weights)[0]
    assert not_close(out, mha(q, k, v, mask=mask)[0])  # the scale matters
    with torch.no_grad():
        mha.q_proj.weight.mul_((D // H) ** 0.5)
        mha.q_proj.bias.mul_((D // H) ** 0.5)
    assert_close(out, mha(q, k, v, mask=mask, need_weights=need_weights)[0])


@pytest.mark.parametrize("need_weights", [True, False])
def test_is_causal_equals_the_causal_mask(need_weights):
    from labformer.masks import causal_mask

    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H).eval()
    x = torch.randn(2, 6, D)
    masked, w_masked = mha(x, x, x, mask=causal_mask(6), need_weights=need_weights)
    causal, w_causal = mha(x, x, x, is_causal=True, need_weights=need_weights)
    assert_close(causal, masked)
    if need_weights:
        assert_close(w_causal, w_masked)
        assert (w_causal.triu(1) == 0).all()
    assert not_close(mha(x, x, x, need_weights=need_weights)[0], causal)  # it does mask
    with pytest.raises(ValueError, match="is_causal needs no mask"):
        mha(x, x, x, mask=causal_mask(6), is_causal=True)
    with pytest.raises(ValueError, match="as many keys as queries"):
        mha(x[:, :2], x, x, is_causal=True)
