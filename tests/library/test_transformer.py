"""labformer.transformer: config, masks, leaks, caching, recording, tied embeddings, and the
whole model against torch.nn.Transformer."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest
import torch
from torch import nn

from labformer.book.record import record_attention
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
        (dict(positional="rotary"), "'sinusoidal', 'learned', 'none', got 'rotary'"),
        (dict(tie_embeddings="both"), "'none', 'output', 'all'.*got 'both'"),
        (dict(tie_embeddings="all"), "src_vocab_size=5 and tgt_vocab_size=6 differ"),
        (dict(scale_scores=1), "scale_scores must be True or False, got 1"),
        (dict(residual="no"), "residual must be True or False"),
        (dict(norm_first=None), "norm_first"),
        (dict(max_len=0), "max_len"),
        (dict(bos_id=0), "bos_id and pad_id are both 0"),
        (dict(eos_id=5), "eos_id=5 is not a valid id for src_vocab_size=5"),
        (dict(unk_id=6, src_vocab_size=9), "unk_id=6 is not a valid id for tgt_vocab_size=6"),
        (dict(pad_id=-1), "pad_id=-1"),
        (dict(unk_id=2), "unk_id and eos_id are both 2"),
    ],
)
def test_config_validation(changes, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig.preset("tiny", **{"src_vocab_size": 5, "tgt_vocab_size": 6, **changes})


def test_config_special_ids_reach_the_model():
    cfg = TransformerConfig.preset("tiny", src_vocab_size=V_SRC, tgt_vocab_size=V_TGT,
                                   pad_id=3, bos_id=0, eos_id=1, unk_id=2)
    assert (cfg.pad_id, cfg.bos_id, cfg.eos_id, cfg.unk_id) == (3, 0, 1, 2)
    default = TransformerConfig(5, 6)
    assert (default.pad_id, default.bos_id, default.eos_id, default.unk_id) == (0, 1, 2, 3)
    model = Transformer(cfg)
    assert model.src_embed.padding_idx == 3 and model.tgt_embed.padding_idx == 3
    tokens = torch.tensor([[5, 0, 3, 3]])
    assert model.src_mask(tokens)[0, 0, 0].tolist() == [True, True, False, False]


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
    assert model.encode(src).shape == (2, 7, 32)
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
    see_all = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    assert not_close(model.decode(tgt, memory, see_all)[1],
                     model.decode(tgt, memory, model.src_mask(src))[1])


def test_decode_requires_the_memory_mask():
    model = _model()
    src, tgt = _batch()
    memory = model.encode(src)
    with pytest.raises(TypeError):
        model.decode(tgt, memory)  # no memory_mask at all
    with pytest.raises(ValueError, match=r"model.src_mask\(src\)"):
        model.decode(tgt, memory, None)
    with pytest.raises(ValueError, match=r"\(2, 1, 1, 6\).*\(2, 4, 6, 7\)"):
        model.decode(tgt, memory, model.src_mask(src[:, :6]))  # mask of another source
    with pytest.raises(ValueError, match="bool"):
        model.decode(tgt, memory, model.src_mask(src).long())


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
    assert maps == {}  # no module records once the block is left


def test_tied_embeddings_share_one_parameter():
    tied, untied = _model(tie_embeddings=True), _model()
    assert tied.generator.weight is tied.tgt_embed.weight
    assert untied.generator.weight is not untied.tgt_embed.weight
    assert untied.num_parameters() - tied.num_parameters() == V_TGT * 32
    # The shared matrix's gradient is the sum of what it gets as an embedding and as the
    # output layer: the same model untied, with both copies equal, splits it in two.
    with torch.no_grad():
        untied.load_state_dict(tied.state_dict())
        untied.generator.weight.copy_(tied.tgt_embed.weight)
    src, tgt = _batch()
    assert torch.equal(tied(src, tgt), untied(src, tgt))
    tied(src, tgt).square().sum().backward()
    untied(src, tgt).square().sum().backward()
    both = untied.generator.weight.grad + untied.tgt_embed.weight.grad
    assert untied.generator.weight.grad.abs().sum() > 0 and untied.tgt_embed.weight.grad.abs(
    ).sum() > 0
    assert_close(tied.tgt_embed.weight.grad, both, atol=1e-5, rtol=1e-5)


def test_tie_embeddings_booleans_and_old_checkpoint_configs_still_load():
    base = dict(src_vocab_size=V_SRC, tgt_vocab_size=V_TGT)
    assert TransformerConfig(**base).tie_embeddings == "none"
    assert TransformerConfig(**base, tie_embeddings=True).tie_embeddings == "output"
    assert TransformerConfig(**base, tie_embeddings=False).tie_embeddings == "none"
    model = _model(tie_embeddings="output")
    # A checkpoint of an earlier version: a boolean, and no scale_scores / residual fields.
    old = dataclasses.asdict(model.config)
    old.update(tie_embeddings=True)
    del old["scale_scores"], old["residual"], old["positional"]
    cfg = TransformerConfig(**old)
    assert cfg == model.config and dataclasses.asdict(cfg)["tie_embeddings"] == "output"
    loaded = Transformer(cfg).eval()
    loaded.load_state_dict(model.state_dict())
    src, tgt = _batch()
    assert torch.equal(loaded(src, tgt), model(src, tgt))
    assert loaded.generator.weight is loaded.tgt_embed.weight


def test_tie_all_shares_one_matrix_between_embeddings_and_output():
    V = 12
    torch.manual_seed(0)
    cfg = TransformerConfig.preset("tiny", src_vocab_size=V, tgt_vocab_size=V,
                                   tie_embeddings="all")
    model = Transformer(cfg)
    assert model.src_embed.weight is model.tgt_embed.weight is model.generator.weight
    output_only = Transformer(cfg.replace(tie_embeddings="output"))
    assert output_only.src_embed.weight is not output_only.tgt_embed.weight
    assert output_only.num_parameters() - model.num_parameters() == V * cfg.d_model
    assert (model.src_embed.weight[cfg.pad_id] == 0).all()
    # Both embeddings and the output send their gradient into the one matrix.
    src, tgt = _batch()
    src, tgt = src.clamp(max=V - 1), tgt.clamp(max=V - 1)
    model.encode(src).sum().backward()
    from_source = model.src_embed.weight.grad.clone()
    model.zero_grad()
    model.decode(tgt, model.encode(src).detach(), model.src_mask(src)).sum().backward()
    from_target = model.tgt_embed.weight.grad.clone()
    assert from_source.abs().sum() > 0 and from_target.abs().sum() > 0
    model.zero_grad()
    model(src, tgt).square().sum().backward()
    # ... and the whole model's gradient is the sum over the three places it is used.
    split = Transformer(cfg.replace(tie_embeddings="none"))
    split.load_state_dict(model.state_dict())  # the one matrix copied to its three places
    split(src, tgt).square().sum().backward()
    three = split.src_embed.weight.grad + split.tgt_embed.weight.grad + split.generator.weight.grad
    assert_close(model.src_embed.weight.grad, three, atol=1e-5, rtol=1e-5)


def test_positional_none_makes_the_encoder_permutation_equivariant():
    model = _model(positional="none")
    assert list(model.positions.parameters()) == [] and list(model.positions.buffers()) == []
    src = torch.randint(4, V_SRC, (2, 7), generator=torch.Generator().manual_seed(5))
    perm = torch.randperm(7, generator=torch.Generator().manual_seed(6))
    assert_close(model.encode(src[:, perm]), model.encode(src)[:, perm])
    with_positions = _model()
    assert not_close(with_positions.encode(src[:, perm]), with_positions.encode(src)[:, perm])


def test_encoder_positions_false_removes_positions_from_the_source_only():
    model = _model(encoder_positions=False)
    full = _model()
    assert model.state_dict().keys() == full.state_dict().keys()
    model.load_state_dict(full.state_dict())
    src, tgt = _batch()
    perm = torch.randperm(7, generator=torch.Generator().manual_seed(6))
    # The encoder is permutation-equivariant, so cross-attention cannot tell the order ...
    assert_close(model.encode(src[:, perm]), model.encode(src)[:, perm])
    assert_close(model(src[:, perm], tgt), model(src, tgt))
    assert not_close(full(src[:, perm], tgt), full(src, tgt))
    # ... while the decoder still sees its own word order: same as the full model there.
    memory = model.encode(src)
    mask = model.src_mask(src)
    assert_close(model.decode(tgt, memory, mask), full.decode(tgt, memory, mask))
    assert not_close(model.encode(src), full.encode(src))
    with pytest.raises(ValueError, match="encoder_positions must be True or False"):
        _model(encoder_positions=0)


def test_scale_scores_false_equals_queries_scaled_up_in_every_attention():
    """No 1/sqrt(d_k) anywhere: the same model as the default one with every W_Q and b_Q
    multiplied by sqrt(d_k)."""
    unscaled = _model(scale_scores=False)
    attns = [m for m in unscaled.modules() if hasattr(m, "q_proj")]
    assert len(attns) == 2 + 2 * 2 and all(m.scale == 1.0 for m in attns)
    scaled = _model(seed=1)
    scaled.load_state_dict(unscaled.state_dict())
    src, tgt = _batch()
    assert not_close(scaled(src, tgt), unscaled(src, tgt))
    d_k = unscaled.config.d_model // unscaled.config.num_heads
    with torch.no_grad():
        for m in scaled.modules():
            if hasattr(m, "q_proj"):
                m.q_proj.weight.mul_(d_k**0.5)
                m.q_proj.bias.mul_(d_k**0.5)
    assert_close(scaled(src, tgt), unscaled(src, tgt))


@pytest.mark.parametrize("norm_first", [False, True])
def test_residual_false_removes_every_skip_connection(norm_first):
    model = _model(residual=False, norm_first=norm_first)
    subs = [m for n, m in model.named_modules() if n.split(".")[-1].startswith("sublayer")]
    assert len(subs) == 2 * 2 + 2 * 3 and not any(m.residual for m in subs)
    src, tgt = _batch()
    default = _model(norm_first=norm_first)
    default.load_state_dict(model.state_dict())
    assert not_close(default(src, tgt), model(src, tgt))
    # Post-LN without the skip: each layer's output is a function of its sublayers only, so
    # zeroing the last FFN's output weights and bias makes the encoder output LN(0) = its bias.
    layer = model.encoder.layers[-1]
    with torch.no_grad():
        layer.ffn.linear2.weight.zero_()
        layer.ffn.linear2.bias.zero_()
    memory = model.encode(src)
    if norm_first:  # Pre-LN: the stack's final norm of a zero stream, its bias
        assert_close(memory, model.encoder.norm.bias.expand_as(memory))
    else:
        assert_close(memory, layer.sublayer2.norm.bias.expand_as(memory))


def test_transformer_errors():
    model = _model()
    src, tgt = _batch()
    memory = model.encode(src)
    mmask = model.src_mask(src)
    with pytest.raises(ValueError, match=r"B = 2, got \(1, 7, 32\)"):
        model.decode(tgt, memory[:1], mmask)
    with pytest.raises(ValueError, match=r"got \(7, 32\)"):
        model.decode(tgt, memory[0], mmask)
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


# --- parameter count ---------------------------------------------------------------------


def _closed_form_parameters(cfg: TransformerConfig) -> int:
    """The parameter count from the sizes alone (Vaswani et al. 2017, Section 3)."""
    d, f, V_s, V_t = cfg.d_model, cfg.d_ff, cfg.src_vocab_size, cfg.tgt_vocab_size
    attention = 4 * d * d + 4 * d  # W_Q, W_K, W_V, W_O (d x d each, h heads or not) + biases
    ffn = d * f + f + f * d + d
    norm = 2 * d  # gain and bias
    encoder = cfg.num_encoder_layers * (attention + ffn + 2 * norm)
    decoder = cfg.num_decoder_layers * (2 * attention + ffn + 3 * norm)
    final_norms = 2 * norm if cfg.norm_first else 0
    source = 0 if cfg.tie_embeddings == "all" else V_s * d  # "all": the target's matrix
    embeddings = source + V_t * d + (cfg.max_len * d if cfg.positional == "learned" else 0)
    generator = (0 if cfg.tie_embeddings in ("output", "all") else V_t * d) + V_t
    return encoder + decoder + final_norms + embeddings + generator


@pytest.mark.parametrize(
    "overrides",
    [{}, {"norm_first": True}, {"positional": "learned"}, {"tie_embeddings": True},
     {"num_heads": 1, "num_encoder_layers": 1, "num_decoder_layers": 3, "d_ff": 48}],
)
def test_parameter_count_closed_form(overrides):
    model = _model(**overrides)
    assert model.num_parameters() == _closed_form_parameters(model.config)


def test_base_preset_has_the_papers_parameter_count():
    """Table 3: the base model has 65M parameters, with one 37000-token vocabulary shared by
    both embeddings and the output layer. labformer ties the target embedding and the output;
    the paper's model also shares the source embedding, so it is left out of the count here."""
    cfg = TransformerConfig.preset("base", src_vocab_size=37000, tgt_vocab_size=37000,
                                   tie_embeddings=True)
    shared_vocab_count = _closed_form_parameters(cfg) - 37000 * cfg.d_model
    assert abs(shared_vocab_count / 65e6 - 1) < 0.05, shared_vocab_count  # 63.1M


# --- the whole model against torch.nn.Transformer ----------------------------------------


def _torch_transformer(model: Transformer) -> nn.Transformer:
    """A torch.nn.Transformer holding ``model``'s encoder and decoder stacks, weights translated
    name by name; a final norm only in the Pre-LN form, as in labformer (and the paper)."""
    cfg = model.config
    kw = dict(d_model=cfg.d_model, nhead=cfg.num_heads, dim_feedforward=cfg.d_ff,
              dropout=cfg.dropout, batch_first=True, norm_first=cfg.norm_first)

    def final_norm():
        return nn.LayerNorm(cfg.d_model) if cfg.norm_first else None

    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(**kw), cfg.num_encoder_layers,
                                    norm=final_norm(), enable_nested_tensor=False)
    decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(**kw), cfg.num_decoder_layers,
                                    norm=final_norm())
    ref = nn.Transformer(custom_encoder=encoder, custom_decoder=decoder, **kw)
    state: dict[str, object] = {}
    for name, t in model.state_dict().items():
        if not name.startswith(("encoder.", "decoder.")):
            continue  # embeddings, positions and generator stay outside nn.Transformer
        name = re.sub(r"sublayer(\d)\.norm", r"norm\1", name)
        name = name.replace(".cross_attn.", ".multihead_attn.").replace(".ffn.", ".")
        packed = re.fullmatch(r"(.*)\.([qkv])_proj\.(weight|bias)", name)
        if packed:  # torch packs W_Q, W_K, W_V into one in_proj matrix
            parts = state.setdefault(f"{packed[1]}.in_proj_{packed[3]}", [None] * 3)
            parts["qkv".index(packed[2])] = t
        else:
            state[name] = t
    ref.load_state_dict({k: torch.cat(v) if isinstance(v, list) else v for k, v in state.items()})
    return ref


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("train", [False, True])
def test_whole_model_matches_torch_transformer(norm_first, train):
    model = _model(norm_first=norm_first)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():  # non-trivial biases and norm gains, so that mix-ups show
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5 + ("norm" in name and
                                                                   "weight" in name))
    ref = _torch_transformer(model)
    model.train(train), ref.train(train)  # dropout is 0: train mode takes torch's slow path
    src, tgt = _batch()
    tgt[0, 4:] = 0  # target padding as well as source padding
    scale = math.sqrt(model.config.d_model)
    with torch.no_grad():
        src_x = model.positions(model.src_embed(src) * scale)  # (B, S, d_model)
        tgt_x = model.positions(model.tgt_embed(tgt) * scale)  # (B, T, d_model)
        src_kpm, tgt_kpm = src == 0, tgt == 0  # torch: True = ignore
        memory = ref.encoder(src_x, src_key_padding_mask=src_kpm)
        out = ref(src_x, tgt_x, tgt_mask=~torch.ones(6, 6, dtype=torch.bool).tril(),
                  src_key_padding_mask=src_kpm, tgt_key_padding_mask=tgt_kpm,
                  memory_key_padding_mask=src_kpm, tgt_is_causal=True)
        expected = model.generator(out)  # (B, T, V)
        ours_memory, logits = model.encode(src), model(src, tgt)
    real = ~src_kpm
    assert_close(ours_memory[real], memory[real])  # torch's eval path may zero padded rows
    assert_close(logits, expected)


# --- device and dtype ---------------------------------------------------------------------


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_factory_dtype(positional):
    m32 = _model(positional=positional)
    m64 = Transformer(m32.config, dtype=torch.float64, device="cpu").eval()
    tensors = list(m64.parameters()) + list(m64.buffers())
    assert {t.dtype for t in tensors} == {torch.float64}
    m64.load_state_dict(m32.state_dict())
    src, tgt = _batch()
    out = m64(src, tgt)
    assert out.dtype == torch.float64
    assert_close(out, m32(src, tgt).double(), atol=1e-4)


@pytest.mark.parametrize("norm_first", [False, True])
def test_causal_flag_equals_the_masked_path_at_every_real_position(norm_first, monkeypatch):
    masked_model, causal_model = _model(norm_first=norm_first), _model(norm_first=norm_first)
    src, tgt = _batch()
    tgt[1, 3:] = 0  # right padding, as make_batches and the decoders produce
    real = (tgt != 0)[..., None]
    masked = masked_model(src, tgt)

    def no_mask(*args, **kwargs):
        raise AssertionError("the causal path must not build a target mask")

    monkeypatch.setattr(Transformer, "tgt_mask", no_mask)
    causal = causal_model(src, tgt, tgt_is_causal=True)
    assert_close(causal * real, masked * real)
    assert not_close(causal, masked)  # PAD positions differ: no loss reads them
    # What a loss reads (real positions only) has the same gradient on both paths.
    (causal.square() * real).sum().backward()
    (masked.square() * real).sum().backward()
    for (name, p), q in zip(causal_model.named_parameters(), masked_model.parameters(),
                            strict=True):
        assert_close(p.grad, q.grad), name


def test_cached_one_token_decoding_builds_no_mask(monkeypatch):
    from labformer import transformer as transformer_mod
    from labformer.decoding import greedy_decode

    model = _model()
    src, _ = _batch()
    uncached = greedy_decode(model, src, max_len=8, use_cache=False, eos_id=-1)
    built = []
    real_causal = transformer_mod.causal_mask
    monkeypatch.setattr(transformer_mod, "causal_mask",
                        lambda *a, **k: built.append(a) or real_causal(*a, **k))
    monkeypatch.setattr(Transformer, "tgt_mask", lambda *a: built.append(a))
    cached = greedy_decode(model, src, max_len=8, use_cache=True, eos_id=-1)
    assert built == [] and torch.equal(cached, uncached)
    # Several new tokens at once still get the causal part of the mask.
    cache = model.new_cache()
    memory, memory_mask = model.encode(src), model.src_mask(src)
    model.decode(torch.ones(2, 1, dtype=torch.long), memory, memory_mask, cache)
    model.decode(torch.full((2, 3), 5), memory, memory_mask, cache)
    assert len(built) == 1
