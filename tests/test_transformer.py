"""labformer.transformer: config, masks, leaks, caching, recording, tied embeddings."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from labformer.multihead import record_attention
from labformer.transformer import DecoderCache, Transformer, TransformerConfig

from _helpers import assert_close, not_close

V_SRC, V_TGT = 13, 11


def _model(seed=0, **overrides) -> Transformer:
    torch.manual_seed(seed)
    cfg = TransformerConfig.preset("tiny", src_vocab_size=V_SRC, tgt_vocab_size=V_TGT, **overrides)
    return Transformer(cfg).eval()


def _batch(seed=1):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, V_SRC, (2, 7), generator=g)
    src[1, 5:] = 0  # second sentence padded
    tgt = torch.randint(4, V_TGT, (2, 6), generator=g)
    tgt[:, 0] = 1  # BOS
    return src, tgt


# --- config -------------------------------------------------------------------------------


def test_config_presets_and_frozen():
    tiny = TransformerConfig.preset("tiny", src_vocab_size=5, tgt_vocab_size=6)
    assert (tiny.d_model, tiny.num_heads, tiny.num_encoder_layers, tiny.d_ff) == (32, 4, 2, 64)
    base = TransformerConfig.preset("base", src_vocab_size=5, tgt_vocab_size=6)
    assert (base.d_model, base.num_heads, base.d_ff, base.num_decoder_layers) == (512, 8, 2048, 6)
    assert base == TransformerConfig(5, 6)  # the defaults are the paper's base model
    small = TransformerConfig.preset("small", src_vocab_size=5, tgt_vocab_size=6, d_ff=10)
    assert small.d_model == 256 and small.d_ff == 10  # overrides win
    with pytest.raises(dataclasses.FrozenInstanceError):
        tiny.d_model = 64
    with pytest.raises(ValueError, match=r"'huge'.*\['base', 'small', 'tiny'\]"):
        TransformerConfig.preset("huge", src_vocab_size=5, tgt_vocab_size=6)


def test_config_replace():
    tiny = TransformerConfig.preset("tiny", src_vocab_size=5, tgt_vocab_size=6)
    pre = tiny.replace(norm_first=True, num_heads=2)
    assert pre.norm_first and pre.num_heads == 2 and pre.d_model == tiny.d_model
    assert not tiny.norm_first and tiny.num_heads == 4  # the original is unchanged
    with pytest.raises(ValueError, match="divisible"):
        tiny.replace(num_heads=5)


@pytest.mark.parametrize(
    "changes,message",
    [
        (dict(src_vocab_size=0), "src_vocab_size must be positive, got 0"),
        (dict(tgt_vocab_size=-1), "tgt_vocab_size"),
        (dict(num_encoder_layers=0), "num_encoder_layers"),
        (dict(d_model=30, num_heads=4), r"d_model \(30\).*num_heads \(4\)"),
        (dict(dropout=1.0), r"dropout must be in \[0, 1\)"),
        (dict(dropout=-0.1), "dropout"),
        (dict(positional="rotary"), "'rotary'"),
        (dict(max_len=0), "max_len"),
    ],
)
def test_config_validation(changes, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig.preset("tiny", **{"src_vocab_size": 5, "tgt_vocab_size": 6, **changes})


# --- model --------------------------------------------------------------------------------


def test_forward_shapes_and_masks():
    model = _model()
    src, tgt = _batch()
    logits = model(src, tgt)
    assert logits.shape == (2, 6, V_TGT)
    assert torch.isfinite(logits).all()
    sm = model.src_mask(src)
    assert sm.shape == (2, 1, 1, 7) and sm[1, 0, 0].tolist() == [True] * 5 + [False] * 2
    tgt_p = tgt.clone()
    tgt_p[0, 4:] = 0
    tm = model.tgt_mask(tgt_p)
    assert tm.shape == (2, 1, 6, 6)
    assert tm[1, 0].tolist() == torch.ones(6, 6, dtype=torch.bool).tril().tolist()
    assert not tm[0, 0, 5, 4] and tm[0, 0, 5, 3] and not tm[0, 0, 2, 3]
    memory = model.encode(src)
    assert memory.shape == (2, 7, 32)
    assert_close(model.decode(tgt, memory, model.src_mask(src)), logits)
    assert len(model.encoder.layers) == 2 and len(model.decoder.layers) == 2


def test_pre_ln_has_final_norm_post_ln_has_none():
    assert isinstance(_model().encoder.norm, nn.Identity)
    pre = _model(norm_first=True)
    assert isinstance(pre.encoder.norm, nn.LayerNorm)
    assert isinstance(pre.decoder.norm, nn.LayerNorm)


def test_causal_no_leak_from_future_targets():
    model = _model()
    src, tgt = _batch()
    base = model(src, tgt)
    changed = tgt.clone()
    changed[:, 4:] = torch.tensor([5, 6])  # rewrite positions 4 and 5
    out = model(src, changed)
    assert_close(out[:, :4], base[:, :4])  # earlier positions cannot see the future
    assert not_close(out[:, 4:], base[:, 4:])
    past = tgt.clone()
    past[:, 1] = (tgt[:, 1] - 4 + 1) % (V_TGT - 4) + 4  # a different real token
    out_past = model(src, past)
    assert_close(out_past[:, 0], base[:, 0])
    assert not_close(out_past[:, 2:], base[:, 2:])  # the past DOES reach later positions


def test_padded_source_positions_do_not_leak():
    model = _model()
    src, tgt = _batch()
    base = model(src, tgt)
    # Extra padding at the end of the source changes nothing.
    longer = torch.cat([src, torch.zeros(2, 3, dtype=torch.long)], 1)
    assert_close(model(longer, tgt), base)
    # Change what sits at the padded positions (the PAD embedding row): no effect ...
    with torch.no_grad():
        model.src_embed.weight[0] += 3.0
    assert_close(model(src, tgt), base)
    # ... unless the padding mask is dropped, which shows the perturbation is real.
    memory = model.encode(src)
    assert not_close(model.decode(tgt, memory, None)[1], model.decode(tgt, memory,
                                                                      model.src_mask(src))[1])


def test_padded_target_positions_do_not_leak_backwards():
    model = _model()
    src, tgt = _batch()
    tgt[:, 4:] = 0
    base = model(src, tgt)
    other = tgt.clone()
    other[:, 4:] = 7  # padded positions now hold something else
    out = model(src, other)
    assert_close(out[:, :4], base[:, :4])
    assert not_close(out[:, 4:], base[:, 4:])


@pytest.mark.parametrize("overrides", [{}, {"norm_first": True}, {"positional": "learned"},
                                       {"norm_first": True, "positional": "learned",
                                        "tie_embeddings": True}])
def test_incremental_decoding_equals_full(overrides):
    model = _model(**overrides)
    src, tgt = _batch()
    memory, mmask = model.encode(src), model.src_mask(src)
    cache = model.new_cache()
    assert isinstance(cache, DecoderCache) and cache.offset == 0 and len(cache.layers) == 2
    full = model.decode(tgt, memory, mmask)  # causal: row t only depends on the prefix
    for t in range(tgt.shape[1]):
        step = model.decode(tgt[:, t : t + 1], memory, mmask, cache)
        assert step.shape == (2, 1, V_TGT)
        assert_close(step[:, 0], full[:, t])
        assert cache.offset == t + 1
    # A chunk of several new tokens also continues from the offset.
    cache2 = model.new_cache()
    first = model.decode(tgt[:, :3], memory, mmask, cache2)
    rest = model.decode(tgt[:, 3:], memory, mmask, cache2)
    assert_close(torch.cat([first, rest], 1), full)


def test_cache_static_memory_not_reprojected():
    model = _model()
    src, tgt = _batch()
    memory, mmask = model.encode(src), model.src_mask(src)
    calls = []
    for layer in model.decoder.layers:
        layer.cross_attn.k_proj.register_forward_hook(lambda *a: calls.append(1))
    cache = model.new_cache()
    for t in range(4):
        model.decode(tgt[:, t : t + 1], memory, mmask, cache)
    assert len(calls) == len(model.decoder.layers)  # once per layer, on the first step


def test_cache_reorder_for_beams():
    model = _model()
    src, tgt = _batch()
    memory, mmask = model.encode(src), model.src_mask(src)
    cache = model.new_cache()
    model.decode(tgt[:, :3], memory, mmask, cache)
    index = torch.tensor([1, 1, 0])
    cache.reorder(index)
    for self_cache, cross_cache in cache.layers:
        assert self_cache.k.shape[0] == 3 and cross_cache.k.shape[0] == 3
    step = model.decode(tgt[index, 3:4], memory[index], mmask[index], cache)
    full = model.decode(tgt[index, :4], memory[index], mmask[index])
    assert_close(step[:, 0], full[:, 3])


def test_record_attention_on_transformer():
    model = _model()
    src, tgt = _batch()
    with record_attention(model) as maps:
        logits = model(src, tgt)
    names = {f"encoder.layers.{i}.self_attn" for i in range(2)}
    names |= {f"decoder.layers.{i}.{kind}" for i in range(2) for kind in ("self_attn",
                                                                          "cross_attn")}
    assert set(maps) == names
    assert maps["encoder.layers.0.self_attn"].shape == (2, 4, 7, 7)
    assert maps["decoder.layers.1.self_attn"].shape == (2, 4, 6, 6)
    cross = maps["decoder.layers.0.cross_attn"]
    assert cross.shape == (2, 4, 6, 7)
    assert (cross[1, :, :, 5:] == 0).all()  # padded source keys get no weight
    assert (maps["decoder.layers.0.self_attn"].triu(1) == 0).all()  # causal
    assert_close(model(src, tgt), logits)  # recording does not change the result
    maps.clear()
    model(src, tgt)
    assert maps == {}
    assert all(m._recorder is None for m in model.modules() if hasattr(m, "_recorder"))


def test_tied_embeddings_share_one_parameter():
    tied, untied = _model(tie_embeddings=True), _model()
    assert tied.generator.weight is tied.tgt_embed.weight
    assert untied.generator.weight is not untied.tgt_embed.weight
    assert untied.num_parameters() - tied.num_parameters() == V_TGT * 32
    manual = sum(p.numel() for p in {id(p): p for p in tied.parameters()}.values())
    assert tied.num_parameters() == manual
    src, tgt = _batch()
    tied(src, tgt).sum().backward()
    assert tied.generator.weight.grad is tied.tgt_embed.weight.grad


def test_transformer_errors():
    model = _model()
    src, tgt = _batch()
    memory = model.encode(src)
    with pytest.raises(ValueError, match=r"B = 2, got \(1, 7, 32\)"):
        model.decode(tgt, memory[:1])
    with pytest.raises(ValueError, match=r"got \(7, 32\)"):
        model.decode(tgt, memory[0])
    with pytest.raises(ValueError, match=r"\(2, 7\) vs \(1, 6\)"):
        model(src, tgt[:1])
    bad = src.clone()
    bad[0, 0] = V_SRC
    with pytest.raises(ValueError, match=rf"\[0, {V_SRC}\).*{V_SRC}"):
        model.encode(bad)
    bad[0, 0] = -1
    with pytest.raises(ValueError, match="-1"):
        model.encode(bad)
    with pytest.raises(ValueError, match=rf"\[0, {V_TGT}\)"):
        model(src, torch.full((2, 3), V_TGT))
    with pytest.raises(ValueError, match=r"torch.float32 \(2, 7\)"):
        model.encode(src.float())
    with pytest.raises(ValueError, match=r"\(7,\)"):
        model.encode(src[0])
    with pytest.raises(ValueError, match="max_len=64"):
        model.encode(torch.ones(1, 65, dtype=torch.long))


def test_embeddings_scaled_then_positions_added():
    model = _model()
    src, tgt = _batch()
    seen = {}

    def grab(key):
        def hook(module, args):
            seen[key] = args[0]  # returns None: the inputs pass through unchanged

        return hook

    model.encoder.register_forward_pre_hook(grab("enc"))
    model.decoder.register_forward_pre_hook(grab("dec"))
    model(src, tgt)
    pe = model.positions.pe
    assert_close(seen["enc"], model.src_embed(src) * 32**0.5 + pe[:7])
    assert_close(seen["dec"], model.tgt_embed(tgt) * 32**0.5 + pe[:6])
    assert (model.src_embed.weight[0] == 0).all()  # PAD row starts at zero
