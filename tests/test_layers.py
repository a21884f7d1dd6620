"""labformer.layers: residual + LayerNorm, FFN, encoder/decoder layers against PyTorch's."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from labformer.layers import DecoderLayer, EncoderLayer, FeedForward, residual
from labformer.masks import causal_mask, from_key_padding_mask

from _helpers import assert_close, not_close

D, H, FF = 16, 4, 32


def _manual_layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)  # biased variance, as in the LN paper
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def _randomise(module: nn.Module, seed: int = 0) -> None:
    """Non-trivial LayerNorm affine and biases so that copying mistakes show up."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() == 1:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5 + (1.0 if "norm" in name and
                                                                   "weight" in name else 0.0))


def test_layer_norm_usage_matches_manual_formula():
    norm = nn.LayerNorm(D)
    _randomise(nn.ModuleDict({"norm": norm}))
    x = torch.randn(2, 5, D)
    sub = nn.Linear(D, D)
    assert_close(norm(x), _manual_layer_norm(x, norm.weight, norm.bias))
    drop = nn.Identity()
    post = residual(x, sub, norm, drop, norm_first=False)
    assert_close(post, _manual_layer_norm(x + sub(x), norm.weight, norm.bias))
    pre = residual(x, sub, norm, drop, norm_first=True)
    assert_close(pre, x + sub(_manual_layer_norm(x, norm.weight, norm.bias)))
    assert not_close(pre, post)


def test_residual_dropout_on_branch_only():
    x = torch.randn(3, 4, D)
    zero_branch = nn.Dropout(p=0.999999).train()
    out = residual(x, lambda y: y * 5, nn.Identity(), zero_branch, norm_first=True)
    assert_close(out, x)  # everything in the branch dropped, the skip path kept


def test_feed_forward_formula_and_positionwise():
    ffn = FeedForward(D, FF)
    x = torch.randn(2, 5, D)
    out = ffn(x)
    manual = F.relu(x @ ffn.linear1.weight.T + ffn.linear1.bias) @ ffn.linear2.weight.T
    assert_close(out, manual + ffn.linear2.bias)
    assert_close(ffn(x[:, 2:3]), out[:, 2:3])  # each position on its own


def _torch_layer(cls, norm_first, seed=0):
    torch.manual_seed(seed)
    ref = cls(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    _randomise(ref, seed)
    return ref


def _torch_enc(norm_first, seed=0):
    return _torch_layer(nn.TransformerEncoderLayer, norm_first, seed)


def _torch_dec(norm_first, seed=0):
    return _torch_layer(nn.TransformerDecoderLayer, norm_first, seed)


KPM = torch.tensor([[False] * 6, [False, False, False, False, True, True]])  # True = ignore


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("train", [False, True])
@pytest.mark.parametrize("masks", ["none", "padding", "causal", "both"])
def test_encoder_layer_matches_torch(norm_first, train, masks):
    ref = _torch_enc(norm_first)
    ours = EncoderLayer.from_torch(ref)
    assert ours.norm_first is norm_first
    ref.train(train), ours.train(train)
    x = torch.randn(2, 6, D)
    use_pad, use_causal = masks in ("padding", "both"), masks in ("causal", "both")
    kw = {}
    mask = None
    if use_pad:
        kw["src_key_padding_mask"] = KPM
        mask = from_key_padding_mask(KPM)
    if use_causal:
        kw["src_mask"] = ~causal_mask(6)  # torch: True = not allowed
        kw["is_causal"] = True
        mask = causal_mask(6) if mask is None else mask & causal_mask(6)
    with torch.no_grad():
        expected = ref(x, **kw)
        got = ours(x, mask)
    if use_pad and not train:
        # torch's eval fast path may leave padded query rows arbitrary; compare real rows.
        assert_close(got[0], expected[0])
        assert_close(got[1, :4], expected[1, :4])
    else:
        assert_close(got, expected)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_gradients_match_torch(norm_first):
    ref = _torch_enc(norm_first).train()
    ours = EncoderLayer.from_torch(ref).train()
    x1 = torch.randn(2, 6, D, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_()
    ours(x1, causal_mask(6)).pow(2).sum().backward()
    ref(x2, src_mask=~causal_mask(6)).pow(2).sum().backward()
    assert_close(x1.grad, x2.grad, atol=1e-4)
    assert_close(ours.ffn.linear1.weight.grad, ref.linear1.weight.grad, atol=1e-4)
    assert_close(ours.norm1.weight.grad, ref.norm1.weight.grad, atol=1e-4)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("train", [False, True])
@pytest.mark.parametrize("padding", [False, True])
def test_decoder_layer_matches_torch(norm_first, train, padding):
    ref = _torch_dec(norm_first)
    ours = DecoderLayer.from_torch(ref)
    ref.train(train), ours.train(train)
    x, memory = torch.randn(2, 5, D), torch.randn(2, 6, D)
    tgt_kpm = torch.tensor([[False] * 5, [False, False, False, True, True]])
    kw = dict(tgt_mask=~causal_mask(5), tgt_is_causal=True)
    tgt_mask, memory_mask = causal_mask(5), None
    if padding:
        kw.update(tgt_key_padding_mask=tgt_kpm, memory_key_padding_mask=KPM)
        tgt_mask = tgt_mask & from_key_padding_mask(tgt_kpm)
        memory_mask = from_key_padding_mask(KPM)
    with torch.no_grad():
        expected = ref(x, memory, **kw)
        got = ours(x, memory, tgt_mask, memory_mask)
    assert_close(got, expected)


def test_decoder_layer_from_torch_copies_norm3_and_eps():
    ref = nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True, layer_norm_eps=1e-3)
    _randomise(ref, 5)
    ours = DecoderLayer.from_torch(ref)
    assert ours.norm3.eps == 1e-3
    assert torch.equal(ours.norm3.weight, ref.norm3.weight)
    assert torch.equal(ours.cross_attn.out_proj.weight, ref.multihead_attn.out_proj.weight)


def test_encoder_layer_permutation_equivariant_not_invariant():
    layer = EncoderLayer.from_torch(_torch_enc(False)).eval()
    x = torch.randn(2, 6, D)
    perm = torch.tensor([5, 2, 0, 4, 1, 3])
    out, out_p = layer(x), layer(x[:, perm])
    assert_close(out_p, out[:, perm])
    assert not_close(out_p, out)


def test_decoder_layer_cache_matches_full():
    layer = DecoderLayer.from_torch(_torch_dec(True)).eval()
    from labformer.multihead import KVCache

    x, memory = torch.randn(2, 4, D), torch.randn(2, 6, D)
    mem_mask = from_key_padding_mask(KPM)
    full = layer(x, memory, causal_mask(4), mem_mask)
    cache = (KVCache(), KVCache(static=True))
    steps = [layer(x[:, t : t + 1], memory, None, mem_mask, cache) for t in range(4)]
    assert_close(torch.cat(steps, 1), full)


def test_from_torch_rejects_unsupported_layers():
    with pytest.raises(ValueError, match="ReLU"):
        EncoderLayer.from_torch(nn.TransformerEncoderLayer(D, H, FF, activation="gelu",
                                                           batch_first=True))
    with pytest.raises(ValueError, match="batch_first"):
        EncoderLayer.from_torch(nn.TransformerEncoderLayer(D, H, FF, batch_first=False))
    with pytest.raises(ValueError, match="ReLU"):
        DecoderLayer.from_torch(nn.TransformerDecoderLayer(D, H, FF, activation="gelu",
                                                           batch_first=True))
