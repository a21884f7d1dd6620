"""Tests for labformer.rnn: the GRU encoder-decoder with pluggable attention (chapter 1)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from labformer.app.runs import subnormals_flushed
from labformer.attention import AdditiveAttention
from labformer.rnn import ATTENTION_KINDS, RNNConfig, Seq2SeqRNN, TeacherForcedRNN

PAD, BOS, EOS = 0, 1, 2
V = 12
ATTENDING = ("source", "additive", "dot")


def make_model(kind: str, seed: int = 0, **kw) -> Seq2SeqRNN:
    torch.manual_seed(seed)
    return Seq2SeqRNN(V, V, emb_dim=8, hidden_dim=16, attention=kind, max_len=10, **kw).eval()


def padded_batch(lengths: list[int], seed: int = 1, total: int | None = None) -> torch.Tensor:
    """Right-padded random source tokens (ids 3..V-1), shape (B, max(lengths) or total)."""
    g = torch.Generator().manual_seed(seed)
    S = total or max(lengths)
    src = torch.randint(3, V, (len(lengths), S), generator=g)
    for i, n in enumerate(lengths):
        src[i, n:] = PAD
    return src


@pytest.mark.parametrize("kind", ATTENTION_KINDS)
def test_shapes(kind):
    model = make_model(kind)
    src, tgt = padded_batch([5, 3, 7]), torch.randint(3, V, (3, 4))
    logits, weights = model(src, tgt)
    assert logits.shape == (3, 4, V)
    if kind == "none":
        assert weights is None
    else:
        assert weights.shape == (3, 4, 7)
    tokens, w = model.greedy_decode(src, BOS, EOS, max_len=6)
    assert tokens.shape[0] == 3 and 1 <= tokens.shape[1] <= 6
    assert (w is None) == (kind == "none")
    if w is not None:
        assert w.shape == (3, tokens.shape[1], 7)


@pytest.mark.parametrize("kind", ATTENDING)
def test_weights_sum_to_one_over_real_tokens_and_zero_on_padding(kind):
    model = make_model(kind)
    lengths = [6, 2, 4]
    src = padded_batch(lengths)
    _, weights = model(src, torch.randint(3, V, (3, 5)))
    for i, n in enumerate(lengths):
        torch.testing.assert_close(weights[i, :, :n].sum(-1), torch.ones(5))
        assert torch.all(weights[i, :, n:] == 0)
        assert torch.all(weights[i, :, :n] > 0)


@pytest.mark.parametrize("kind", ATTENTION_KINDS)
def test_padding_content_and_extra_padding_do_not_change_outputs(kind):
    model = make_model(kind)
    src = padded_batch([5, 2, 4])
    tgt = torch.randint(3, V, (3, 4))
    logits, weights = model(src, tgt)
    # More padding columns: real-token outputs identical, extra columns get zero weight.
    wider = F.pad(src, (0, 3), value=PAD)
    logits2, weights2 = model(wider, tgt)
    torch.testing.assert_close(logits2, logits)
    if weights is not None:
        torch.testing.assert_close(weights2[..., :5], weights)
        assert torch.all(weights2[..., 5:] == 0)
    # A row's own length does not leak into the others: shorten row 1 and others are unchanged.
    other = src.clone()
    other[0, 4] = PAD
    logits3, _ = model(other, tgt)
    torch.testing.assert_close(logits3[1:], logits[1:])
    assert not torch.allclose(logits3[0], logits[0])


def test_pad_id_is_respected():
    torch.manual_seed(0)
    model = Seq2SeqRNN(V, V, 8, 16, "additive", max_len=10, pad_id=5).eval()
    src = torch.tensor([[3, 4, 6, 5, 5]])
    _, w = model(src, torch.tensor([[1, 3]]))
    assert torch.all(w[..., 3:] == 0)


@pytest.mark.parametrize("kind", ATTENTION_KINDS)
def test_teacher_forcing_equals_step_by_step(kind):
    model = make_model(kind)
    src = padded_batch([6, 3])
    tokens, w_dec = model.greedy_decode(src, BOS, EOS, max_len=7)
    tgt_in = torch.cat([torch.full((2, 1), BOS), tokens[:, :-1]], dim=1)
    logits, w_tf = model(src, tgt_in)
    # Same prefix fed -> same next-token choice at every step (up to each row's EOS).
    for i in range(2):
        hit = (tokens[i] == EOS).nonzero()
        n = int(hit[0]) + 1 if len(hit) else tokens.shape[1]
        assert torch.equal(logits[i, :n].argmax(-1), tokens[i, :n])
        if w_dec is not None:
            torch.testing.assert_close(w_tf[i, :n], w_dec[i, :n])
            assert torch.all(w_dec[i, n:] == 0)
    # And the logits themselves match a manual loop over step().
    enc = model.encode(src)
    hidden = enc.summary
    for t in range(tgt_in.shape[1]):
        step_logits, hidden, _ = model.step(tgt_in[:, t], hidden, enc)
        torch.testing.assert_close(step_logits, logits[:, t])


def test_special_ids_come_from_the_constructor():
    torch.manual_seed(0)
    model = Seq2SeqRNN(V, V, 8, 16, "dot", max_len=10, pad_id=4, bos_id=5, eos_id=6,
                       unk_id=7).eval()
    assert (model.pad_id, model.bos_id, model.eos_id, model.unk_id) == (4, 5, 6, 7)
    assert model.src_embed.padding_idx == 4 and model.tgt_embed.padding_idx == 4
    with torch.no_grad():  # the model's EOS (6) is always the arg-max
        model.out.weight.zero_()
        model.out.bias.zero_()
        model.out.bias[6] = 10.0
    src = torch.tensor([[3, 8, 4, 4], [9, 10, 11, 3]])
    tokens, _ = model.greedy_decode(src, max_len=5)  # no ids passed: the model's own
    assert tokens.tolist() == [[6], [6]]  # stopped at the model's EOS, not at 2
    # The BOS fed first is the model's too: the same as passing it explicitly.
    with torch.no_grad():
        model.out.bias[6] = 0.0
        model.out.weight.normal_()
    assert torch.equal(model.greedy_decode(src, max_len=5)[0],
                       model.greedy_decode(src, 5, 6, max_len=5)[0])
    assert not torch.equal(model.greedy_decode(src, max_len=5)[0],
                           model.greedy_decode(src, 1, 6, max_len=5)[0])


@pytest.mark.parametrize(
    "ids,message",
    [
        (dict(pad_id=1), "bos_id and pad_id are both 1"),
        (dict(eos_id=V), f"eos_id={V} is not a valid id for src_vocab_size={V}"),
        (dict(unk_id=-2), "unk_id=-2"),
    ],
)
def test_special_ids_are_checked(ids, message):
    with pytest.raises(ValueError, match=message):
        Seq2SeqRNN(V, V, 8, 16, **ids)


def test_additive_fast_path_equals_additive_attention_module():
    model = make_model("additive")
    assert isinstance(model.attn, AdditiveAttention)
    src = padded_batch([5, 3])
    enc = model.encode(src)
    hidden = torch.randn(2, 16)
    ctx, w = model.attend(torch.tensor([3, 4]), hidden, enc)
    ctx_ref, w_ref = model.attn(hidden, enc.memory, enc.memory, mask=enc.src_mask)
    torch.testing.assert_close(ctx, ctx_ref)
    torch.testing.assert_close(w, w_ref)


@pytest.mark.parametrize("kind", ATTENDING)
def test_claim_11_source_variant_never_reads_encoder_content(kind):
    """Same decoder input and state, two different sources of the same length: the source
    article's scorer gives identical weights; additive and dot attention do not."""
    model = make_model(kind)
    src_a, src_b = padded_batch([6, 4], seed=1), padded_batch([6, 4], seed=2)
    assert not torch.equal(src_a, src_b)
    assert torch.equal(src_a == PAD, src_b == PAD)
    enc_a, enc_b = model.encode(src_a), model.encode(src_b)
    assert not torch.allclose(enc_a.memory, enc_b.memory)
    prev, hidden = torch.tensor([3, 7]), torch.randn(2, 16)
    _, w_a = model.attend(prev, hidden, enc_a)
    _, w_b = model.attend(prev, hidden, enc_b)
    if kind == "source":
        torch.testing.assert_close(w_a, w_b, rtol=0, atol=1e-6)
    else:
        assert (w_a - w_b).abs().max() > 1e-3


def test_source_variant_weights_depend_on_decoder_state():
    model = make_model("source")
    enc = model.encode(padded_batch([6]))
    _, w1 = model.attend(torch.tensor([3]), torch.zeros(1, 16), enc)
    _, w2 = model.attend(torch.tensor([3]), torch.ones(1, 16), enc)
    _, w3 = model.attend(torch.tensor([4]), torch.zeros(1, 16), enc)
    assert not torch.allclose(w1, w2) and not torch.allclose(w1, w3)


def test_greedy_decode_stops_at_eos_and_pads_after():
    model = make_model("additive")
    with torch.no_grad():  # force EOS as the arg-max at every step
        model.out.weight.zero_()
        model.out.bias.zero_()
        model.out.bias[EOS] = 10.0
    tokens, w = model.greedy_decode(padded_batch([4, 2]), BOS, EOS, max_len=8)
    assert tokens.shape == (2, 1) and torch.all(tokens == EOS)
    assert w.shape == (2, 1, 4)


def test_greedy_decode_runs_to_max_len_without_eos():
    model = make_model("dot")
    with torch.no_grad():  # token 5 is always the arg-max, so EOS never comes
        model.out.weight.zero_()
        model.out.bias.zero_()
        model.out.bias[5] = 1.0
    tokens, _ = model.greedy_decode(padded_batch([3, 3]), BOS, EOS, max_len=5)
    assert tokens.shape == (2, 5) and torch.all(tokens == 5)  # no EOS: runs to max_len


def test_greedy_decode_mixed_finish():
    model = make_model("source")
    src = padded_batch([3, 3])
    tokens, _ = model.greedy_decode(src, BOS, EOS, max_len=6)
    # Rerun with EOS defined as the first token of row 0: row 0 stops at once, then PAD.
    eos = int(tokens[0, 0])
    t2, w2 = model.greedy_decode(src, BOS, eos, max_len=6)
    assert t2[0, 0] == eos
    if t2.shape[1] > 1:
        assert torch.all(t2[0, 1:] == PAD) and torch.all(w2[0, 1:] == 0)


def test_bad_inputs_raise_value_error():
    with pytest.raises(ValueError, match="attention must be one of"):
        Seq2SeqRNN(V, V, attention="luong")
    model = make_model("source")
    tgt = torch.randint(3, V, (2, 3))
    with pytest.raises(ValueError, match=r"\(B, S\)"):
        model(torch.randint(3, V, (6,)), tgt)
    with pytest.raises(ValueError, match="integer"):
        model(torch.rand(2, 4), tgt)
    with pytest.raises(ValueError, match=r"tgt_in"):
        model(padded_batch([3, 2]), torch.randint(3, V, (2, 3, 1)))
    with pytest.raises(ValueError, match="batch size"):
        model(padded_batch([3, 2, 3]), tgt)
    with pytest.raises(ValueError, match="max_len"):
        model(torch.randint(3, V, (2, 11)), tgt)
    with pytest.raises(ValueError, match="right-padded"):
        model(torch.tensor([[3, 0, 4], [3, 4, 5]]), tgt)
    with pytest.raises(ValueError, match="at least one real token"):
        model(torch.tensor([[0, 0], [3, 4]]), tgt)
    with pytest.raises(ValueError, match="max_len"):
        model.greedy_decode(padded_batch([3, 2]), BOS, EOS, max_len=0)
    none = make_model("none")
    with pytest.raises(ValueError, match="no attention"):
        none.attend(torch.tensor([3]), torch.zeros(1, 16), none.encode(padded_batch([3])))
    # Other variants accept sources longer than max_len: they have no position slots.
    logits, _ = make_model("additive")(torch.randint(3, V, (2, 11)), tgt)
    assert logits.shape == (2, 3, V)


def _reverse_batch(n: int, g: torch.Generator, lo: int = 3, hi: int = 8):
    lengths = torch.randint(lo, hi + 1, (n,), generator=g)
    S = int(lengths.max())
    src = torch.randint(3, V, (n, S), generator=g)
    pos = torch.arange(S)
    src = src.masked_fill(pos >= lengths[:, None], PAD)
    # Reverse the real part of each row: index L-1-j for j < L.
    idx = (lengths[:, None] - 1 - pos).clamp(min=0)
    rev = src.gather(1, idx).masked_fill(pos >= lengths[:, None], PAD)
    tgt = torch.cat([torch.full((n, 1), BOS), rev, torch.zeros(n, 1, dtype=torch.long)], 1)
    tgt[torch.arange(n), lengths + 1] = EOS
    return src, tgt[:, :-1], tgt[:, 1:]


@pytest.fixture
def flush_denormals():
    """Trained attention can produce weights below 1e-38, which CPUs handle very slowly.
    Flushing them to 0 is set per thread, so run this test on the calling thread only."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with subnormals_flushed():
            yield
    finally:
        torch.set_num_threads(threads)


def test_tiny_training_run_learns_reversal_with_additive_attention(flush_denormals):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = Seq2SeqRNN(V, V, emb_dim=16, hidden_dim=32, attention="additive", max_len=10)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(150):
        src, tgt_in, tgt_out = _reverse_batch(64, g)
        logits, _ = model(src, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, V), tgt_out.reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    src, _, tgt_out = _reverse_batch(200, torch.Generator().manual_seed(99))
    tokens, _ = model.greedy_decode(src, BOS, EOS, max_len=tgt_out.shape[1])
    tokens = F.pad(tokens, (0, tgt_out.shape[1] - tokens.shape[1]), value=PAD)
    real = tgt_out != PAD
    acc = (tokens == tgt_out)[real].float().mean().item()
    assert acc > 0.95, acc


def test_config_records_the_constructor_arguments():
    model = Seq2SeqRNN(V, V + 1, emb_dim=8, hidden_dim=16, attention="dot", max_len=10,
                       pad_id=3, bos_id=2, eos_id=1, unk_id=0)
    assert model.config == RNNConfig(V, V + 1, 8, 16, "dot", 10, 3, 2, 1, 0)
    assert (model.pad_id, model.bos_id, model.eos_id, model.unk_id) == (3, 2, 1, 0)


def test_teacher_forced_adapter_returns_the_models_logits_and_shares_its_parameters():
    rnn = make_model("additive")
    adapter = TeacherForcedRNN(rnn).eval()
    src, tgt = padded_batch([5, 3, 7]), torch.randint(3, V, (3, 4))
    torch.testing.assert_close(adapter(src, tgt), rnn(src, tgt)[0], rtol=0, atol=0)
    assert adapter.config.pad_id == rnn.pad_id
    assert {id(p) for p in adapter.parameters()} == {id(p) for p in rnn.parameters()}


def test_adapter_trains_with_the_shared_training_loop(flush_denormals):
    """labformer.train.train, the Transformer's loop, trains the GRU through the adapter."""
    from types import SimpleNamespace

    from labformer.train import TrainConfig, train

    g = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(30):
        src, tgt_in, tgt_out = _reverse_batch(64, g)
        batches.append(SimpleNamespace(src=src, tgt_in=tgt_in, tgt_out=tgt_out))
    torch.manual_seed(0)
    rnn = Seq2SeqRNN(V, V, emb_dim=16, hidden_dim=32, attention="additive", max_len=10)
    history = train(TeacherForcedRNN(rnn), batches,
                    TrainConfig(epochs=3, lr=1e-2, warmup_steps=10, label_smoothing=0.0),
                    device="cpu", progress=False)
    assert len(history.step_loss) == 90
    first, last = sum(history.step_loss[:10]) / 10, sum(history.step_loss[-10:]) / 10
    assert last < first / 2, f"the loss should fall by half or more: {first:.3f} -> {last:.3f}"
    assert not rnn.training, "train() leaves the model in eval mode"
