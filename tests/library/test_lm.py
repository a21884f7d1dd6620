"""labformer.lm and the modern block's parts: causality under every switch, the KV cache and its
size, grouped-query attention against multi-head attention, RoPE, RMSNorm, SwiGLU, training."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import labformer
import labformer.lm as lm_module
from labformer.book.record import record_attention
from labformer.layers import EncoderLayer, FeedForward
from labformer.lm import DecoderOnlyLayer, LanguageModel, LanguageModelConfig, LMCache
from labformer.masks import causal_mask
from labformer.modern import GroupedQueryAttention, RMSNorm, SwiGLU
from labformer.multihead import KVCache, MultiHeadAttention
from labformer.positional import RotaryEmbedding, sinusoidal_positions

from _helpers import assert_close, not_close

V, D, H, L, F_, T = 11, 16, 4, 2, 32, 9

SWITCHES = list(itertools.product(
    (False, True),  # norm_first
    ("layernorm", "rmsnorm"),
    ("relu", "swiglu"),
    ("sinusoidal", "learned", "rope", "none"),
    (H, 2, 1),  # num_kv_heads: MHA, GQA, multi-query
))


def _model(seed: int = 0, **switches) -> LanguageModel:
    torch.manual_seed(seed)
    model = LanguageModel(vocab_size=V, d_model=D, num_heads=H, num_layers=L, d_ff=F_,
                          max_len=32, **switches)
    _perturb_norms(model)
    return model.eval()


def _perturb_norms(model: nn.Module) -> None:
    """Norms start at weight 1 and bias 0, and biases of Linear at small values: make them
    matter, so that a wrong formula cannot hide behind the identity."""
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.LayerNorm, RMSNorm)):
                m.weight.copy_(1 + 0.3 * torch.randn(m.weight.shape, generator=g))
            if isinstance(m, nn.LayerNorm):
                m.bias.copy_(0.3 * torch.randn(m.bias.shape, generator=g))


def _switches(norm_first, norm, ffn, positional, kv):
    return dict(norm_first=norm_first, norm=norm, ffn=ffn, positional=positional,
                num_kv_heads=kv)


def _tokens(B=2, length=T, seed=1):
    return torch.randint(0, V, (B, length), generator=torch.Generator().manual_seed(seed))


def _future_leaks(model: LanguageModel, tokens: torch.Tensor) -> tuple[float, float]:
    """(largest change of the logits at positions <= t when the tokens after t are redrawn,
    smallest change of the logits at t when token t itself is redrawn), over every t."""
    g = torch.Generator().manual_seed(5)
    base = model(tokens)
    leak, reach = 0.0, math.inf
    for t in range(tokens.shape[1]):
        after = tokens.clone()
        after[:, t + 1 :] = torch.randint(0, V, after[:, t + 1 :].shape, generator=g)
        leak = max(leak, (model(after)[:, : t + 1] - base[:, : t + 1]).abs().max().item())
        at = tokens.clone()
        at[:, t] = (at[:, t] + 1 + torch.randint(0, V - 1, (tokens.shape[0],), generator=g)) % V
        reach = min(reach, (model(at)[:, t] - base[:, t]).abs().max().item())
    return leak, reach


@pytest.mark.parametrize("switch", SWITCHES, ids=lambda s: "-".join(map(str, s)))
def test_logits_at_t_never_depend_on_later_tokens_under_every_switch(switch):
    model = _model(**_switches(*switch))
    tokens = _tokens()
    logits = model(tokens)
    assert logits.shape == (2, T, V) and torch.isfinite(logits).all()
    leak, reach = _future_leaks(model, tokens)
    assert leak < 1e-5  # the past is blind to the future
    assert reach > 1e-3  # and the test can see a change: token t moves the logits at t


def test_the_causality_test_catches_a_mask_off_by_one(monkeypatch):
    def peeking(size, device=None):
        return torch.ones(size, size, dtype=torch.bool, device=device).tril(1)

    monkeypatch.setattr(lm_module, "causal_mask", peeking)
    leak, _ = _future_leaks(_model(), _tokens())
    assert leak > 1e-3


@pytest.mark.parametrize("positional", ["sinusoidal", "learned", "rope", "none"])
@pytest.mark.parametrize("kv", [H, 2, 1])
def test_cached_decoding_gives_the_logits_of_the_whole_sequence(positional, kv):
    model = _model(norm_first=True, norm="rmsnorm", ffn="swiglu", positional=positional,
                   num_kv_heads=kv)
    tokens = _tokens()
    full = model(tokens)
    # a prompt of 4 (one chunk, under its causal mask), then one token at a time, then 2
    cache = model.new_cache()
    parts = [model(tokens[:, :4], cache=cache)]
    parts += [model(tokens[:, t : t + 1], cache=cache) for t in range(4, 7)]
    parts.append(model(tokens[:, 7:], cache=cache))
    assert cache.offset == T and len(cache.layers[0]) == T
    assert_close(torch.cat(parts, dim=1), full)


def test_default_layer_is_an_encoder_layer_under_a_causal_mask():
    for norm_first in (False, True):
        cfg = LanguageModelConfig(V, D, H, 1, F_, 32, norm_first=norm_first)
        torch.manual_seed(0)
        ours = DecoderOnlyLayer(cfg).eval()
        _perturb_norms(ours)
        reference = EncoderLayer(D, H, F_, norm_first=norm_first).eval()
        reference.load_state_dict(ours.state_dict())  # the same names and shapes
        x = torch.randn(2, T, D, generator=torch.Generator().manual_seed(3))
        assert_close(ours(x, mask=causal_mask(T)), reference(x, mask=causal_mask(T)))


def test_the_2017_defaults_and_the_modern_preset():
    model = LanguageModel(V)
    cfg = model.config
    assert (cfg.norm_first, cfg.norm, cfg.ffn, cfg.positional, cfg.num_kv_heads) == (
        False, "layernorm", "relu", "sinusoidal", cfg.num_heads)
    layer = model.layers[0]
    assert isinstance(layer.sublayer1.norm, nn.LayerNorm) and isinstance(layer.ffn, FeedForward)
    assert isinstance(model.norm, nn.Identity) and model.rotary is None
    modern = LanguageModel(V, **LanguageModelConfig.MODERN)
    layer = modern.layers[0]
    assert isinstance(layer.sublayer1.norm, RMSNorm) and isinstance(layer.ffn, SwiGLU)
    assert isinstance(modern.norm, RMSNorm) and layer.self_attn.rotary is modern.rotary
    assert labformer.LanguageModel is LanguageModel


def test_config_round_trip_tying_and_loss():
    cfg = LanguageModelConfig(V, D, H, L, F_, 32, num_kv_heads=2, tie_embeddings=True)
    model = LanguageModel.from_config(cfg.replace(norm="rmsnorm"))
    assert model.config == cfg.replace(norm="rmsnorm") and cfg.d_k == D // H
    assert model.generator.weight is model.embed.weight
    untied = LanguageModel.from_config(cfg.replace(tie_embeddings=False))
    tied = LanguageModel.from_config(cfg)
    assert untied.num_parameters() - tied.num_parameters() == V * D
    tokens = _tokens()
    logits = model(tokens[:, :-1])
    by_hand = F.cross_entropy(logits.reshape(-1, V), tokens[:, 1:].reshape(-1))
    assert_close(model.loss(tokens), by_hand)


@pytest.mark.parametrize("bad", [
    dict(vocab_size=0), dict(d_model=10, num_heads=4), dict(num_kv_heads=3),
    dict(num_kv_heads=0), dict(num_kv_heads=True), dict(dropout=1.0), dict(norm="batchnorm"),
    dict(ffn="gelu"), dict(positional="alibi"), dict(norm_first=1), dict(norm_eps=0.0),
    dict(d_model=12, num_heads=4, positional="rope"), dict(d_model=9, num_heads=1),
    dict(num_layers=2.0),
])
def test_bad_configurations_are_refused(bad):
    kwargs = dict(vocab_size=V, d_model=D, num_heads=H) | bad
    with pytest.raises(ValueError):
        LanguageModel(**kwargs)


def test_bad_inputs_are_refused():
    model = _model()
    for tokens in (torch.zeros(2, 3), torch.zeros(3, dtype=torch.long),
                   torch.zeros(2, 0, dtype=torch.long), torch.full((1, 2), V)):
        with pytest.raises(ValueError):
            model(tokens)
    with pytest.raises(ValueError, match="max_len"):
        model(torch.zeros(1, 33, dtype=torch.long))
    with pytest.raises(ValueError, match="T >= 2"):
        model.loss(torch.zeros(1, 1, dtype=torch.long))
    with pytest.raises(ValueError):
        model.kv_cache_numel(-1, 3)


def test_kv_cache_size_computed_and_measured_shrinks_by_heads_over_kv_heads():
    B, length = 3, 20
    sizes = {}
    for kv in (H, 2, 1):
        model = _model(num_kv_heads=kv)
        cache = model.new_cache()
        model(_tokens(B, length), cache=cache)
        assert cache.numel() == model.kv_cache_numel(B, length)
        assert cache.nbytes() == model.kv_cache_bytes(B, length) == 4 * cache.numel()
        assert cache.layers[0].k.shape == (B, kv, length, D // H)  # shared heads only
        sizes[kv] = cache.nbytes()
    assert sizes[H] == 2 * L * B * H * length * (D // H) * 4
    assert sizes[H] / sizes[2] == H / 2 and sizes[H] / sizes[1] == H
    assert LMCache(2).nbytes() == 0
    half = LanguageModel(V, D, H, L, F_, 32, num_kv_heads=2, dtype=torch.float64)
    assert half.kv_cache_bytes(B, length) == 8 * half.kv_cache_numel(B, length)


def test_cache_reorder_keeps_the_chosen_rows():
    model = _model(num_kv_heads=2)
    cache = model.new_cache()
    model(_tokens(3, 4), cache=cache)
    k = cache.layers[1].k.clone()
    cache.reorder(torch.tensor([2, 0]))
    assert torch.equal(cache.layers[1].k, k[[2, 0]])


# ---- grouped-query attention ----------------------------------------------------------------

def _inputs(B=2, T_=6, seed=1):
    return torch.randn(B, T_, D, generator=torch.Generator().manual_seed(seed))


def test_gqa_with_as_many_kv_heads_as_heads_is_multi_head_attention():
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H).eval()
    gqa = GroupedQueryAttention(D, H).eval()
    gqa.load_state_dict(mha.state_dict())  # the same parameters, names and shapes
    x = _inputs()
    mask = causal_mask(6)
    for kwargs in (dict(mask=mask), dict(mask=mask, need_weights=False),
                   dict(is_causal=True, need_weights=False), dict(is_causal=True)):
        out, w = gqa(x, x, x, **kwargs)
        ref, ref_w = mha(x, x, x, **kwargs)
        assert_close(out, ref)
        assert (w is None) == (ref_w is None) and (w is None or torch.allclose(w, ref_w))
    # and cached, token by token
    cache, ref_cache = KVCache(), KVCache()
    for t in range(6):
        step = x[:, t : t + 1]
        assert_close(gqa(step, step, step, cache=cache)[0],
                     mha(step, step, step, cache=ref_cache)[0])


@pytest.mark.parametrize("kv", [2, 1])
def test_gqa_is_mha_whose_key_value_heads_are_repeated_for_their_group(kv):
    torch.manual_seed(0)
    gqa = GroupedQueryAttention(D, H, kv).eval()
    assert gqa.k_proj.out_features == kv * (D // H)
    mha = MultiHeadAttention(D, H).eval()
    d_k, group = D // H, H // kv
    with torch.no_grad():
        for name in ("q_proj", "out_proj"):
            getattr(mha, name).load_state_dict(getattr(gqa, name).state_dict())
        for name in ("k_proj", "v_proj"):
            small, big = getattr(gqa, name), getattr(mha, name)
            for head in range(H):  # query head `head` reads kv head head // group
                rows = slice(head * d_k, (head + 1) * d_k)
                src = slice((head // group) * d_k, (head // group + 1) * d_k)
                big.weight[rows] = small.weight[src]
                big.bias[rows] = small.bias[src]
    x = _inputs()
    out, w = gqa(x, x, x, mask=causal_mask(6))
    ref, ref_w = mha(x, x, x, mask=causal_mask(6))
    assert_close(out, ref)
    assert_close(w, ref_w)


def test_gqa_is_recorded_and_checks_its_arguments():
    model = _model(num_kv_heads=2)
    with record_attention(model) as maps:
        model(_tokens())
    assert maps["layers.0.self_attn"].shape == (2, H, T, T)
    weights = maps["layers.1.self_attn"]
    assert torch.all(weights.triu(1) == 0)  # causal
    for kv in (3, 0, 8, 2.0):
        with pytest.raises(ValueError, match="num_kv_heads"):
            GroupedQueryAttention(D, H, kv)
    with pytest.raises(ValueError, match="rotary"):
        GroupedQueryAttention(D, H, rotary=RotaryEmbedding(8))
    rope = GroupedQueryAttention(D, H, rotary=RotaryEmbedding(D // H, 16))
    x = _inputs()
    with pytest.raises(ValueError, match="self-attention"):
        rope(x, x[:, :3], x[:, :3])
    static = KVCache(static=True)
    with pytest.raises(ValueError, match="self-attention"):
        rope(x, x, x, cache=static)
    plain = GroupedQueryAttention(D, H, 2)
    with pytest.raises(ValueError, match="is_causal"):
        plain(x, x, x, is_causal=True, mask=causal_mask(6))
    with pytest.raises(ValueError):
        plain(x, x, x, mask=torch.ones(6, 5, dtype=torch.bool))
    static.update(*[torch.randn(2, 2, 6, D // H)] * 2)  # a filled static cache is reused
    assert plain(x[:, :2], x, x, cache=static)[0].shape == (2, 2, D)
    assert "num_kv_heads=2" in repr(plain)


# ---- rotary position embedding --------------------------------------------------------------

def _rope_by_hand(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """Chapter 5's formula: rotate each (2i, 2i+1) pair of x (T, d) by pos * 10000^(-2i/d)."""
    d = x.shape[-1]
    freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d / 2,)
    angle = pos[:, None].double() * freq  # (T, d / 2)
    c, s = torch.cos(angle), torch.sin(angle)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2], out[..., 1::2] = even * c - odd * s, even * s + odd * c
    return out


def test_rope_is_chapter_5s_rotation_and_keeps_norms():
    rope = RotaryEmbedding(8, 40, dtype=torch.float64)
    x = torch.randn(3, 2, 40, 8, dtype=torch.float64)  # (B, h, T, d_k)
    out = rope(x)
    assert_close(out, _rope_by_hand(x, torch.arange(40)), atol=1e-12)
    assert_close(out.norm(dim=-1), x.norm(dim=-1), atol=1e-12)
    assert_close(out[..., 0, :], x[..., 0, :], atol=0.0)  # position 0: no rotation
    assert_close(rope(x[..., 5:9, :], offset=5), out[..., 5:9, :], atol=1e-12)
    # the angles are those of the sinusoidal table
    assert_close(rope.sin, sinusoidal_positions(40, 8, dtype=torch.float64)[:, 0::2], atol=0.0)


def test_rope_scores_depend_only_on_the_offset():
    rope = RotaryEmbedding(16, 64, dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(16, generator=g, dtype=torch.float64), torch.randn(16, generator=g,
                                                                           dtype=torch.float64)
    q_rot = rope(q.expand(64, 16))  # the same query at every position (64, 16)
    k_rot = rope(k.expand(64, 16))
    scores = q_rot @ k_rot.T  # (64, 64): query position p, key position s
    for offset in (-20, -3, 0, 1, 7, 30):
        along = torch.diagonal(scores, offset=offset)
        assert along.std().item() < 1e-10 * scores.std().item()
    assert not_close(torch.diagonal(scores, 1)[:1], torch.diagonal(scores, 2)[:1])
    # without the rotation, the same experiment with added sinusoids is not relative
    pe = sinusoidal_positions(64, 16).double()
    added = (q + pe) @ (k + pe).T
    assert torch.diagonal(added, 3).std() > 1e-2


def test_rope_rotates_queries_and_keys_never_values():
    torch.manual_seed(0)
    rotary = RotaryEmbedding(D // H, 16)
    with_rope = GroupedQueryAttention(D, H, 2, rotary=rotary).eval()
    without = GroupedQueryAttention(D, H, 2).eval()
    without.load_state_dict(with_rope.state_dict())
    x = _inputs()
    mask = causal_mask(6)
    # Zero queries: every score is 0 whatever the rotation, so each output is the plain
    # average of the values it may see; rotated values would change it.
    with torch.no_grad():
        for m in (with_rope, without):
            m.q_proj.weight.zero_()
            m.q_proj.bias.zero_()
    assert_close(with_rope(x, x, x, mask=mask)[0], without(x, x, x, mask=mask)[0])
    # With real queries, the positions matter.
    torch.manual_seed(0)
    with_rope = GroupedQueryAttention(D, H, 2, rotary=rotary).eval()
    without.load_state_dict(with_rope.state_dict())
    assert not_close(with_rope(x, x, x, mask=mask)[0], without(x, x, x, mask=mask)[0])


def test_rope_checks_its_arguments():
    with pytest.raises(ValueError, match="even"):
        RotaryEmbedding(7)
    rope = RotaryEmbedding(8, 10)
    with pytest.raises(ValueError, match="expected"):
        rope(torch.zeros(3, 6))
    with pytest.raises(ValueError, match="max_len"):
        rope(torch.zeros(1, 4, 8), offset=8)
    assert "head_dim=8" in repr(rope)


# ---- RMSNorm and SwiGLU ---------------------------------------------------------------------

def test_rmsnorm_is_its_formula_and_torchs():
    norm = RMSNorm(6, eps=1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([0.5, 1.0, 2.0, -1.0, 3.0, 0.1]))
    x = torch.randn(2, 3, 6, generator=torch.Generator().manual_seed(0)) * 4 + 1
    # by hand, one vector at a time
    rows = []
    for vec in x.reshape(-1, 6).tolist():
        rms = math.sqrt(sum(v * v for v in vec) / 6 + 1e-5)
        rows.append([v / rms * w for v, w in zip(vec, norm.weight.tolist(), strict=True)])
    assert_close(norm(x), torch.tensor(rows).reshape(2, 3, 6))
    reference = nn.RMSNorm(6, eps=1e-5)
    reference.load_state_dict(norm.state_dict())
    assert_close(norm(x), reference(x))
    # no centring: a constant vector is not sent to zero, unlike LayerNorm
    assert_close(RMSNorm(4)(torch.full((1, 4), 3.0)), torch.ones(1, 4), atol=1e-5)
    assert "eps=1e-05" in repr(norm)
    with pytest.raises(ValueError):
        RMSNorm(0)


def test_swiglu_is_its_formula():
    torch.manual_seed(0)
    ffn = SwiGLU(D, F_)
    assert all(p.dim() == 2 for p in ffn.parameters())  # no biases
    assert ffn.gate_proj.weight.shape == ffn.up_proj.weight.shape == (F_, D)
    assert ffn.down_proj.weight.shape == (D, F_)
    x = _inputs()
    gate = x @ ffn.gate_proj.weight.T
    swish = gate * (1 / (1 + torch.exp(-gate)))  # SiLU(z) = z sigmoid(z)
    by_hand = (swish * (x @ ffn.up_proj.weight.T)) @ ffn.down_proj.weight.T
    out = ffn(x)
    assert out.shape == x.shape
    assert_close(out, by_hand)
    # gated: zero up-projection, zero output, whatever the gate
    with torch.no_grad():
        ffn.up_proj.weight.zero_()
    assert torch.equal(ffn(x), torch.zeros_like(x))


# ---- training -------------------------------------------------------------------------------

@pytest.mark.parametrize("modern", [False, True])
def test_a_tiny_language_model_learns_a_toy_sequence(modern):
    torch.manual_seed(0)
    model = LanguageModel(V, D, H, L, F_, 32, num_kv_heads=2 if modern else None,
                          **(LanguageModelConfig.MODERN if modern else {}))
    # a repeating pattern of 6 tokens, read in windows of 12 from random starts
    stream = torch.tensor([1, 2, 3, 4, 5, 6] * 20)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(40):
        starts = torch.randint(0, len(stream) - 12, (8,), generator=g)
        batch = torch.stack([stream[s : s + 12] for s in starts.tolist()])  # (8, 12)
        loss = model.loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.25 * losses[0]
