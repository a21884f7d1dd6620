"""labformer.layers: residual sublayer, FFN, encoder/decoder layers against PyTorch's (copied
by labformer.convert)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from labformer.convert import decoder_layer_from_torch, encoder_layer_from_torch
from labformer.layers import DecoderLayer, EncoderLayer, FeedForward, ResidualSublayer, residual
from labformer.masks import causal_mask, from_key_padding_mask
from labformer.multihead import KVCache, MultiHeadAttention

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


@pytest.mark.parametrize("norm_first", [False, True])
def test_residual_sublayer_formula(norm_first):
    """Post-LN: LN(x + F(x)); Pre-LN: x + F(LN(x)), with LN written out by hand."""
    block = ResidualSublayer(D, norm_first=norm_first, layer_norm_eps=1e-3)
    _randomise(block)
    w, b = block.norm.weight, block.norm.bias
    x = torch.randn(2, 5, D)
    sub = nn.Linear(D, D)
    expected = (x + sub(_manual_layer_norm(x, w, b, 1e-3)) if norm_first
                else _manual_layer_norm(x + sub(x), w, b, 1e-3))
    assert_close(block(x, sub), expected)
    assert_close(residual(x, sub, block.norm, nn.Identity(), norm_first), expected)
    other = residual(x, sub, block.norm, nn.Identity(), not norm_first)
    assert not_close(other, expected)  # the two placements really differ


@pytest.mark.parametrize("norm_first", [False, True])
def test_residual_false_replaces_the_input(norm_first):
    """Without the skip connection: LN(F(x)) (Post-LN), F(LN(x)) (Pre-LN); norms stay put."""
    block = ResidualSublayer(D, norm_first=norm_first, residual=False)
    _randomise(block)
    assert "residual=False" in repr(block)
    x = torch.randn(2, 5, D)
    sub = nn.Linear(D, D)
    expected = sub(block.norm(x)) if norm_first else block.norm(sub(x))
    assert_close(block(x, sub), expected)
    assert_close(residual(x, sub, block.norm, nn.Identity(), norm_first, skip=False), expected)
    with_skip = ResidualSublayer(D, norm_first=norm_first)
    with_skip.load_state_dict(block.state_dict())
    assert not_close(with_skip(x, sub), expected)


@pytest.mark.parametrize("cls", [EncoderLayer, DecoderLayer])
def test_layer_switches_reach_every_sublayer_and_attention(cls):
    default = cls(D, H, FF)
    assert all(m.residual for m in default.modules() if isinstance(m, ResidualSublayer))
    assert all(m.scale is None for m in default.modules() if isinstance(m, MultiHeadAttention))
    ablated = cls(D, H, FF, residual=False, scale_scores=False)
    subs = [m for m in ablated.modules() if isinstance(m, ResidualSublayer)]
    attns = [m for m in ablated.modules() if isinstance(m, MultiHeadAttention)]
    assert len(subs) == (2 if cls is EncoderLayer else 3) and not any(m.residual for m in subs)
    assert len(attns) == (1 if cls is EncoderLayer else 2)
    assert all(m.scale == 1.0 for m in attns)


def test_residual_passes_extra_arguments_to_the_sublayer():
    block = ResidualSublayer(D, norm_first=True)
    x, y = torch.randn(2, 3, D), torch.randn(2, 3, D)
    assert_close(block(x, torch.add, y), x + block.norm(x) + y)


def test_residual_dropout_on_branch_only():
    x = torch.randn(3, 4, D)
    zero_branch = nn.Dropout(p=0.999999).train()
    out = residual(x, lambda y: y * 5, nn.Identity(), zero_branch, norm_first=True)
    assert_close(out, x)  # everything in the branch dropped, the skip path kept
    block = ResidualSublayer(D, dropout=0.999999, norm_first=True).train()
    assert_close(block(x, lambda y: y * 5), x)


def test_each_sublayer_owns_one_norm():
    """Claim 3 of the chapter: two residual sublayers in an encoder layer, three in a decoder
    layer, each with its own LayerNorm, each norm used once per forward pass."""
    enc, dec = EncoderLayer(D, H, FF), DecoderLayer(D, H, FF)
    for layer, n in ((enc, 2), (dec, 3)):
        subs = [m for m in layer.children() if isinstance(m, ResidualSublayer)]
        assert len(subs) == n
        norms = [m for m in layer.modules() if isinstance(m, nn.LayerNorm)]
        assert len(norms) == n and len({id(m) for m in norms}) == n
        calls: list[int] = []
        for m in norms:
            m.register_forward_hook(lambda m, *_, seen=calls: seen.append(id(m)))
        layer(torch.randn(2, 4, D), *(() if layer is enc else (torch.randn(2, 3, D),)))
        assert sorted(calls) == sorted(id(m) for m in norms)


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
    ours = encoder_layer_from_torch(ref)
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
        got = ours(x, mask=mask)
    if use_pad and not train:
        # torch's eval fast path may leave padded query rows arbitrary; compare real rows.
        assert_close(got[0], expected[0])
        assert_close(got[1, :4], expected[1, :4])
    else:
        assert_close(got, expected)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_gradients_match_torch(norm_first):
    ref = _torch_enc(norm_first).train()
    ours = encoder_layer_from_torch(ref).train()
    x1 = torch.randn(2, 6, D, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_()
    ours(x1, mask=causal_mask(6)).pow(2).sum().backward()
    ref(x2, src_mask=~causal_mask(6)).pow(2).sum().backward()
    assert_close(x1.grad, x2.grad, atol=1e-4)
    assert_close(ours.ffn.linear1.weight.grad, ref.linear1.weight.grad, atol=1e-4)
    assert_close(ours.sublayer1.norm.weight.grad, ref.norm1.weight.grad, atol=1e-4)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("train", [False, True])
@pytest.mark.parametrize("padding", [False, True])
def test_decoder_layer_matches_torch(norm_first, train, padding):
    ref = _torch_dec(norm_first)
    ours = decoder_layer_from_torch(ref)
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
        got = ours(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)
    assert_close(got, expected)


def test_decoder_layer_from_torch_copies_norm3_and_eps():
    ref = nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True, layer_norm_eps=1e-3)
    _randomise(ref, 5)
    ours = decoder_layer_from_torch(ref)
    assert ours.sublayer3.norm.eps == 1e-3
    assert torch.equal(ours.sublayer3.norm.weight, ref.norm3.weight)
    assert torch.equal(ours.cross_attn.out_proj.weight, ref.multihead_attn.out_proj.weight)


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_from_torch_keeps_dtype_and_eval_disables_every_dropout(kind):
    """A float64 copy stays float64, and with dropout 0.3 in eval mode it still matches."""
    torch.manual_seed(0)
    cls = nn.TransformerEncoderLayer if kind == "encoder" else nn.TransformerDecoderLayer
    ref = cls(D, H, FF, dropout=0.3, batch_first=True, dtype=torch.float64)
    _randomise(ref)
    ref.eval()
    copy = encoder_layer_from_torch if kind == "encoder" else decoder_layer_from_torch
    ours = copy(ref).eval()
    assert {p.dtype for p in ours.parameters()} == {torch.float64}
    x = torch.randn(2, 5, D, dtype=torch.float64)
    inputs = (x,) if kind == "encoder" else (x, torch.randn(2, 6, D, dtype=torch.float64))
    with torch.no_grad():
        assert_close(ours(*inputs), ref(*inputs), atol=1e-12)
    ours.train()
    torch.manual_seed(1)
    assert not_close(ours(*inputs), ref(*inputs))  # the copied dropout is live in training


def test_factory_arguments():
    f64 = {"dtype": torch.float64, "device": "cpu"}
    layers = (EncoderLayer(D, H, FF, **f64), DecoderLayer(D, H, FF, **f64),
              FeedForward(D, FF, **f64), ResidualSublayer(D, **f64))
    for layer in layers:
        assert {p.dtype for p in layer.parameters()} == {torch.float64}


def test_layer_masks_are_keyword_only():
    """torch's layers take src_mask / tgt_mask by position with True = blocked; ours, True =
    may attend, are refused by position so that the two cannot be confused."""
    x = torch.randn(1, 3, D)
    with pytest.raises(TypeError):
        EncoderLayer(D, H, FF)(x, causal_mask(3))
    with pytest.raises(TypeError):
        DecoderLayer(D, H, FF)(x, x, causal_mask(3))


def test_encoder_layer_permutation_equivariant_not_invariant():
    layer = encoder_layer_from_torch(_torch_enc(False)).eval()
    x = torch.randn(2, 6, D)
    perm = torch.tensor([5, 2, 0, 4, 1, 3])
    out, out_p = layer(x), layer(x[:, perm])
    assert_close(out_p, out[:, perm])
    assert not_close(out_p, out)


def test_decoder_layer_cache_matches_full():
    layer = decoder_layer_from_torch(_torch_dec(True)).eval()
    x, memory = torch.randn(2, 4, D), torch.randn(2, 6, D)
    mem_mask = from_key_padding_mask(KPM)
    full = layer(x, memory, tgt_mask=causal_mask(4), memory_mask=mem_mask)
    cache = (KVCache(), KVCache(static=True))
    steps = [layer(x[:, t : t + 1], memory, memory_mask=mem_mask, cache=cache) for t in range(4)]
    assert_close(torch.cat(steps, 1), full)


def test_from_torch_rejects_unsupported_layers():
    with pytest.raises(ValueError, match="ReLU"):
        encoder_layer_from_torch(nn.TransformerEncoderLayer(D, H, FF, activation="gelu",
                                                            batch_first=True))
    with pytest.raises(ValueError, match="batch_first"):
        encoder_layer_from_torch(nn.TransformerEncoderLayer(D, H, FF, batch_first=False))
    with pytest.raises(ValueError, match="ReLU"):
        decoder_layer_from_torch(nn.TransformerDecoderLayer(D, H, FF, activation="gelu",
                                                            batch_first=True))
