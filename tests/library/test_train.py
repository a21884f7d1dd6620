"""The training loop: schedule, device choice, atomic checkpoints, exact resumption, progress."""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from labformer import train as train_mod
from labformer.multihead import MultiHeadAttention
from labformer.train import (
    History,
    TrainConfig,
    load_checkpoint,
    lr_factor,
    optimizer_groups,
    pick_device,
    planned_schedule,
    save_checkpoint,
    setup_distributed,
    train,
)
from labformer.transformer import Transformer, TransformerConfig

V = 12  # PAD, BOS, EOS, UNK and 8 words


def _copy_batches(num: int = 6, B: int = 8, S: int = 6, seed: int = 0) -> list:
    """A copy task: the target is the source (a task a tiny Transformer learns in steps)."""
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(num):
        words = torch.randint(4, V, (B, S), generator=g)
        src = torch.cat([words, torch.full((B, 1), 2)], 1)  # (B, S + 1) ends with EOS
        tgt_in = torch.cat([torch.full((B, 1), 1), words], 1)  # BOS + words
        batches.append(SimpleNamespace(src=src, tgt_in=tgt_in, tgt_out=src.clone()))
    return batches


def _model(seed: int = 0, dropout: float = 0.1, **config) -> Transformer:
    torch.manual_seed(seed)
    cfg = TransformerConfig.preset("tiny", src_vocab_size=V, tgt_vocab_size=V, dropout=dropout,
                                   **config)
    return Transformer(cfg)


def _config(epochs: int, **kw) -> TrainConfig:
    return TrainConfig(epochs=epochs, lr=3e-3, warmup_steps=5, seed=1, **kw)


# ------------------------------------------------------------------------- schedule, devices


def test_lr_factor_warms_up_linearly_then_decays_as_inverse_sqrt():
    w = 10
    assert [lr_factor(s, w) for s in (1, 5, 10)] == pytest.approx([0.1, 0.5, 1.0])
    assert lr_factor(40, w) == pytest.approx(math.sqrt(10 / 40))
    assert lr_factor(0, w) == lr_factor(1, w)  # step 0 is clamped, never a zero rate
    peak = max(range(1, 100), key=lambda s: lr_factor(s, w))
    assert peak == w


def test_train_config_rejects_bad_values():
    with pytest.raises(ValueError, match="positive"):
        TrainConfig(epochs=0)
    with pytest.raises(ValueError, match="label_smoothing"):
        TrainConfig(label_smoothing=1.0)
    with pytest.raises(ValueError, match="weight_decay"):
        TrainConfig(weight_decay=-0.1)
    assert not hasattr(TrainConfig(), "pad_id")  # the padding id is the model's


def test_pick_device(monkeypatch):
    assert pick_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="unknown device"):
        pick_device("toaster")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="CUDA is not available"):
        pick_device("cuda")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert pick_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert pick_device("auto") == torch.device("mps")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert pick_device("auto") == torch.device("cuda")


def test_setup_distributed_single_process(monkeypatch):
    joined = []
    monkeypatch.setattr(train_mod.dist, "init_process_group",
                        lambda backend: joined.append(backend))
    for world in (None, "1"):  # no torchrun, or torchrun with one process: no group joined
        if world is None:
            monkeypatch.delenv("WORLD_SIZE", raising=False)
        else:
            monkeypatch.setenv("WORLD_SIZE", world)
        assert setup_distributed() == (0, 1)
    assert joined == [] and not train_mod.dist.is_initialized()


@pytest.mark.parametrize("cuda", [False, True])
def test_setup_distributed_joins_the_group_under_torchrun(monkeypatch, cuda):
    joined, devices = [], []
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "set_device", devices.append)
    monkeypatch.setattr(train_mod.dist, "init_process_group",
                        lambda backend: joined.append(backend))
    monkeypatch.setattr(train_mod.dist, "is_initialized", lambda: bool(joined))
    monkeypatch.setattr(train_mod.dist, "get_rank", lambda: 1)
    monkeypatch.setattr(train_mod.dist, "get_world_size", lambda: 2)
    assert setup_distributed() == (1, 2)
    # NCCL runs collectives on the current GPU: each process selects its own first.
    assert joined == (["nccl"] if cuda else ["gloo"]) and devices == ([1] if cuda else [])


# --------------------------------------------------------------------------- checkpoints


def test_checkpoint_round_trip_is_atomic(tmp_path):
    path = tmp_path / "sub" / "ck.pt"
    save_checkpoint(path, {"x": torch.arange(3), "epoch": 2, "names": ["a", "b"]})
    state = load_checkpoint(path)
    assert torch.equal(state["x"], torch.arange(3)) and state["epoch"] == 2
    assert [p.name for p in path.parent.iterdir()] == ["ck.pt"]  # no temporary file left


def test_checkpoint_mode_follows_the_umask(tmp_path):
    import os

    old = os.umask(0o027)
    try:
        save_checkpoint(tmp_path / "a.pt", {"x": 1})
    finally:
        os.umask(old)
    assert (tmp_path / "a.pt").stat().st_mode & 0o777 == 0o640  # group-readable, not 0600


def test_failed_save_keeps_the_old_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ck.pt"
    save_checkpoint(path, {"epoch": 1})

    def broken_save(obj, f):
        with open(f, "wb") as fh:
            fh.write(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, {"epoch": 2})
    monkeypatch.undo()
    assert load_checkpoint(path)["epoch"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["ck.pt"]


def test_load_checkpoint_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        load_checkpoint(tmp_path / "missing.pt")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a zip file at all")
    with pytest.raises(ValueError, match="corrupt"):
        load_checkpoint(junk)
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    with pytest.raises(ValueError, match="not a labformer checkpoint"):
        load_checkpoint(foreign)
    other = tmp_path / "other.pt"
    torch.save({"format": "labformer-checkpoint-0"}, other)
    with pytest.raises(ValueError, match="another labformer version.*checkpoint-0"):
        load_checkpoint(other)
    unsafe = tmp_path / "unsafe.pt"
    torch.save({"format": train_mod.CHECKPOINT_FORMAT, "obj": SimpleNamespace(a=1)}, unsafe)
    with pytest.raises(ValueError, match="corrupt"):  # weights_only refuses arbitrary objects
        load_checkpoint(unsafe)


def test_every_state_train_writes_loads_back(tmp_path):
    # Everything train() puts in a checkpoint (weights, AdamW's and the scheduler's state,
    # random states, history, configuration, a translator's extra state) must load with
    # weights_only=True, or a healthy run writes a file it cannot resume from.
    import numpy as np

    from labformer.app.translate import Translator
    from labformer.data import Vocab

    model = _model(dropout=0.1)
    vocab = Vocab([f"w{i}" for i in range(V - 4)])
    extra = {**Translator(model, vocab, vocab).checkpoint_state(), "corpus": {"seed": 0},
             "note": np.float32(0.5), "counts": np.arange(3), "steps": np.int64(7)}
    ck = tmp_path / "run.pt"
    train(model, _copy_batches(num=2), _config(2), checkpoint=ck, extra_state=extra,
          device="cpu", progress=False)
    state = load_checkpoint(ck)
    assert {"model", "optimizer", "scheduler", "epoch", "per_rank", "history",
            "train_config", "model_config", "src_vocab"} <= set(state)
    assert state["note"] == 0.5 and type(state["note"]) is float  # NumPy made plain
    assert state["steps"] == 7 and type(state["steps"]) is int
    assert torch.equal(state["counts"], torch.arange(3))
    resumed = train(_model(), _copy_batches(num=2), _config(3), checkpoint=ck, resume=True,
                    extra_state=extra, device="cpu", progress=False)
    assert len(resumed.epoch_loss) == 3
    assert Translator.from_checkpoint(ck).src_vocab == vocab


def test_save_refuses_what_load_cannot_read_and_names_the_key(tmp_path):
    path = tmp_path / "ck.pt"
    save_checkpoint(path, {"epoch": 1})
    with pytest.raises(TypeError, match=r"state\['extra'\]\['obj'\].*SimpleNamespace"):
        save_checkpoint(path, {"epoch": 2, "extra": {"obj": SimpleNamespace(a=1)}})
    assert load_checkpoint(path)["epoch"] == 1  # the old file is untouched


def test_load_error_keeps_the_reason(tmp_path):
    import numpy as np

    path = tmp_path / "numpy.pt"  # written by torch.save directly, past save_checkpoint
    torch.save({"format": train_mod.CHECKPOINT_FORMAT, "x": np.float32(1.0)}, path)
    with pytest.raises(ValueError, match="UnpicklingError: WeightsUnpickler error: "
                                         "Unsupported global.*numpy"):
        load_checkpoint(path)


def test_resuming_a_cpu_checkpoint_on_cuda_says_dropout_will_differ():
    with pytest.warns(UserWarning, match="no CUDA random state"):
        train_mod._set_rng_state({"cpu": torch.get_rng_state()}, torch.device("cuda"))


# ------------------------------------------------------------------------------ training


def test_training_lowers_the_loss_and_calls_valid_fn_each_epoch():
    model, calls = _model(), []

    def valid_fn(m):
        calls.append(m.training)
        return 10.0 * len(calls)

    h = train(model, _copy_batches(), _config(4), valid_fn=valid_fn, device="cpu",
              progress=False)
    assert isinstance(h, History)
    assert len(h.step_loss) == len(h.step_lr) == 4 * 6
    assert len(h.epoch_loss) == len(h.epoch_seconds) == 4
    assert h.epoch_loss[-1] < 0.8 * h.epoch_loss[0]
    assert h.valid_score == [10.0, 20.0, 30.0, 40.0]
    assert calls == [False] * 4  # validation runs in eval mode
    assert not model.training
    # the schedule: warm-up to the peak at step 5, then 1/sqrt decay
    assert h.step_lr[4] == pytest.approx(3e-3)
    assert h.step_lr[0] == pytest.approx(3e-3 / 5)
    assert h.step_lr[19] == pytest.approx(3e-3 * math.sqrt(5 / 20))


def test_on_step_ticks_every_step_with_its_rate_and_reads_the_loss_rarely(monkeypatch):
    monkeypatch.setattr(train_mod, "LOG_EVERY", 4)
    ticks: list[tuple[int, float, float | None]] = []
    h = train(_model(), _copy_batches(), _config(2), device="cpu", progress=False,
              on_step=lambda step, lr, loss: ticks.append((step, lr, loss)))
    assert [step for step, _, _ in ticks] == list(range(1, 13))  # counted over the run
    assert [lr for _, lr, _ in ticks] == h.step_lr
    read = [(step, loss) for step, _, loss in ticks if loss is not None]
    # every 4th step of each epoch (6 steps an epoch): steps 4 and 10, their logged losses
    assert [step for step, _ in read] == [4, 10]
    assert [loss for _, loss in read] == pytest.approx([h.step_loss[3], h.step_loss[9]])


def test_same_seed_same_result_and_clipping_off():
    a, b = _model(), _model()
    ha = train(a, _copy_batches(), _config(1, clip_norm=0.0), device="cpu", progress=False)
    hb = train(b, _copy_batches(), _config(1, clip_norm=0.0), device="cpu", progress=False)
    assert ha.step_loss == hb.step_loss
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q)


def test_resume_equals_an_uninterrupted_run(tmp_path):
    batches = _copy_batches()
    straight = _model()
    h_straight = train(straight, batches, _config(4), device="cpu", progress=False)

    ck = tmp_path / "run.pt"
    first = _model()
    train(first, batches, _config(2), checkpoint=ck, device="cpu", progress=False,
          extra_state={"note": "hello"})
    state = load_checkpoint(ck)
    assert state["epoch"] == 1 and state["note"] == "hello"
    resumed = _model(seed=123)  # different initial weights: everything must come from the file
    h_resumed = train(resumed, batches, _config(4), checkpoint=ck, resume=True, device="cpu",
                      progress=False)
    for (name, p), q in zip(straight.named_parameters(), resumed.parameters(), strict=True):
        assert torch.equal(p, q), name  # bitwise: same batches, dropout masks and Adam state
    assert h_resumed.step_loss == h_straight.step_loss
    assert h_resumed.epoch_loss == h_straight.epoch_loss
    assert load_checkpoint(ck)["epoch"] == 3
    # resuming a finished run trains nothing more
    again = train(resumed, batches, _config(4), checkpoint=ck, resume=True, device="cpu",
                  progress=False)
    assert again.epoch_loss == h_straight.epoch_loss


def test_resume_without_a_checkpoint_starts_fresh(tmp_path):
    h = train(_model(), _copy_batches(num=2), _config(1), checkpoint=tmp_path / "new.pt",
              resume=True, device="cpu", progress=False)
    assert len(h.epoch_loss) == 1 and (tmp_path / "new.pt").is_file()


def test_empty_training_set_is_an_error():
    with pytest.raises(ValueError, match="empty"):
        train(_model(), [], _config(1))


def test_progress_bar_and_epoch_lines_go_to_stderr(capsys):
    train(_model(), _copy_batches(num=2), _config(2), valid_fn=lambda m: 1.5, device="cpu",
          progress=True)
    err = capsys.readouterr().err
    assert "epoch 1: loss" in err and "valid 1.50" in err and "epoch 2/2" in err


def test_quiet_when_not_on_a_terminal(capsys):
    train(_model(), _copy_batches(num=2), _config(1), device="cpu")  # progress=None
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


# ----------------------------------------------------------------- what one step computes


def _padded_batch(pad: int, words: list[int], seed: int = 0) -> SimpleNamespace:
    """Rows of different lengths, right-padded with ``pad``; about a third of tgt_out is PAD."""
    g = torch.Generator().manual_seed(seed)
    B, T = 6, 7
    pick = torch.tensor(words)[torch.randint(len(words), (B, T), generator=g)]
    lengths = [7, 2, 4, 1, 5, 3]
    src, tgt_in, tgt_out = (torch.full((B, T + 1), pad) for _ in range(3))
    for b, n in enumerate(lengths):
        src[b, :n + 1] = torch.cat([pick[b, :n], torch.tensor([2])])  # words, EOS
        tgt_in[b, :n + 1] = torch.cat([torch.tensor([1]), pick[b, :n]])  # BOS, words
        tgt_out[b, :n + 1] = src[b, :n + 1]
    return SimpleNamespace(src=src, tgt_in=tgt_in, tgt_out=tgt_out)


@pytest.mark.parametrize("pad", [0, 4])
def test_the_loss_counts_real_tokens_only(pad):
    # pad = 4 makes 0 an ordinary word: the padding id comes from the model, not a default.
    words = [w for w in range(V) if w not in (1, 2, 3, pad)]
    model = _model(dropout=0.0, pad_id=pad, unk_id=3)
    batch = _padded_batch(pad, words)
    assert (batch.tgt_out == pad).float().mean() > 0.3
    with torch.no_grad():
        logits = copy.deepcopy(model)(batch.src, batch.tgt_in).flatten(0, 1)  # (B*T, V)
    target = batch.tgt_out.flatten()
    real = F.cross_entropy(logits, target, ignore_index=pad, label_smoothing=0.1)
    every = F.cross_entropy(logits, target, label_smoothing=0.1)
    assert abs(float(real - every)) > 1e-3  # counting the padding would change the loss
    h = train(model, [batch], _config(1, label_smoothing=0.1), device="cpu", progress=False)
    assert h.step_loss[0] == pytest.approx(float(real), abs=1e-5)


def test_clipping_bounds_the_gradient_norm_the_optimizer_sees(monkeypatch):
    seen = []
    step = torch.optim.AdamW.step

    def recording_step(self, *args, **kwargs):
        grads = [p.grad for group in self.param_groups for p in group["params"]
                 if p.grad is not None]
        seen.append(float(torch.linalg.vector_norm(torch.stack(
            [torch.linalg.vector_norm(g) for g in grads]))))
        return step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", recording_step)
    clip = 0.05
    h = train(_model(), _copy_batches(num=4), _config(2, clip_norm=clip), device="cpu",
              progress=False)
    assert len(seen) == len(h.step_grad_norm) == 8
    assert min(h.step_grad_norm) > clip  # every step needed clipping...
    assert max(seen) <= clip * (1 + 1e-5)  # ...and got it
    assert seen == pytest.approx([clip] * 8, rel=1e-4)


def test_every_epoch_has_its_own_batch_order():
    class Recording(list):
        def __init__(self, items):
            super().__init__(items)
            self.calls = []

        def __getitem__(self, i):
            self.calls.append(i)
            return super().__getitem__(i)

    batches = Recording(_copy_batches(num=6))
    train(_model(), batches, _config(3), device="cpu", progress=False)
    epochs = [batches.calls[i:i + 6] for i in range(0, 18, 6)]
    assert all(sorted(e) == list(range(6)) for e in epochs)  # each batch once per epoch
    assert len({tuple(e) for e in epochs}) == 3  # and a new order every epoch


def _decays(model: nn.Module) -> set[str]:
    """Names of the parameters that should decay: Linear weights, nothing else."""
    return {f"{name}.weight" if name else "weight" for name, m in model.named_modules()
            if isinstance(m, nn.Linear)}


def test_weight_decay_shrinks_matrices_only():
    lr, wd = 1e-2, 0.5
    runs = {}
    for decay in (0.0, wd):  # one step each, from the same weights on the same batch
        model = _model(dropout=0.0)
        start = {n: p.detach().clone() for n, p in model.named_parameters()}
        cfg = TrainConfig(epochs=1, lr=lr, warmup_steps=1, weight_decay=decay, clip_norm=0.0)
        h = train(model, _copy_batches(num=1), cfg, device="cpu", progress=False)
        assert h.step_lr == [lr]
        runs[decay] = dict(model.named_parameters())
    should = _decays(model)
    assert any("embed" in n for n in runs[wd]) and any("norm" in n for n in runs[wd])
    assert should and should < set(runs[wd])
    for name, p in runs[wd].items():
        q = runs[0.0][name]
        if name in should:  # AdamW: p <- p (1 - lr wd) - update; the update is the same
            torch.testing.assert_close(p - q, -lr * wd * start[name], atol=1e-6, rtol=1e-4)
            assert (p - q).abs().max() > 1e-4, name
        else:  # biases, LayerNorm gains and shifts, embeddings
            assert torch.equal(p, q), name


def test_optimizer_groups_split_by_module_type_and_rank():
    model = _model(tie_embeddings=True, positional="learned")
    decay, no_decay = optimizer_groups(model, 0.1)
    assert (decay["weight_decay"], no_decay["weight_decay"]) == (0.1, 0.0)
    names = {id(p): n for n, p in model.named_parameters()}
    assert {names[id(p)] for p in decay["params"]} == _decays(model) - {"generator.weight"}
    no = {names[id(p)] for p in no_decay["params"]}
    assert "tgt_embed.weight" in no  # tied with the output layer: an embedding, not decayed
    assert "positions.embedding.weight" in no
    assert all(p.dim() < 2 for p in no_decay["params"] if "embed" not in names[id(p)])
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


def test_eval_mode_is_deterministic_with_dropout():
    model = _model(dropout=0.1)
    b = _copy_batches(num=1)[0]
    model.train()
    assert not torch.equal(model(b.src, b.tgt_in), model(b.src, b.tgt_in))  # dropout is on
    model.eval()
    with torch.no_grad():
        first = model(b.src, b.tgt_in)
        assert torch.equal(first, model(b.src, b.tgt_in))
        memory = model.encode(b.src)
        assert torch.equal(memory, model.encode(b.src))
    assert any(isinstance(m, MultiHeadAttention) for m in model.modules())


def test_train_needs_the_models_padding_id():
    class NoConfig(nn.Module):
        def forward(self, src, tgt_in):
            return torch.zeros(*tgt_in.shape, V, requires_grad=True)

    with pytest.raises(TypeError, match="model.config.pad_id"):
        train(NoConfig(), _copy_batches(num=1), _config(1), device="cpu", progress=False)


def test_resume_restores_the_random_state_of_every_device(tmp_path, monkeypatch):
    ck = tmp_path / "ck.pt"
    train(_model(), _copy_batches(num=2), _config(1), checkpoint=ck, device="cpu",
          progress=False)
    state = load_checkpoint(ck)
    assert len(state["per_rank"]) == 1
    rng = state["per_rank"][0]["rng"]
    assert set(rng) == {"cpu"} and rng["cpu"].dtype == torch.uint8
    loaded = []
    real = train_mod.load_checkpoint

    def spy(path, map_location="cpu"):
        loaded.append(map_location)
        return real(path, map_location)

    monkeypatch.setattr(train_mod, "load_checkpoint", spy)
    train(_model(), _copy_batches(num=2), _config(2), checkpoint=ck, resume=True,
          device="cpu", progress=False)
    assert loaded == ["cpu"]  # RNG states must reach set_rng_state as CPU tensors


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_resume_on_cuda_equals_an_uninterrupted_run(tmp_path):
    # Dropout draws from the CUDA generator here: it must be saved, and loaded via the CPU.
    batches = _copy_batches()
    straight = _model()
    h_straight = train(straight, batches, _config(4), device="cuda", progress=False)
    ck = tmp_path / "run.pt"
    train(_model(), batches, _config(2), checkpoint=ck, device="cuda", progress=False)
    assert "cuda" in load_checkpoint(ck)["per_rank"][0]["rng"]
    resumed = _model(seed=123)
    h_resumed = train(resumed, batches, _config(4), checkpoint=ck, resume=True,
                      device="cuda", progress=False)
    for (name, p), q in zip(straight.named_parameters(), resumed.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-5, rtol=0, msg=name)
    assert h_resumed.step_loss == pytest.approx(h_straight.step_loss, abs=1e-5)


# ------------------------------------------------------- steps, warm-up, history versions


def test_planned_schedule_reaches_min_steps_in_whole_epochs():
    plain = TrainConfig(epochs=3, warmup_steps=200)
    assert planned_schedule(plain, 292) == (3, 200)  # no minimum: the epochs given
    assert planned_schedule(plain, 3) == (3, 200)  # and no cap on the warm-up
    cfg = TrainConfig(epochs=3, warmup_steps=200, min_steps=800, max_warmup_share=0.25)
    assert planned_schedule(cfg, 292) == (3, 200)  # 876 steps already: unchanged
    assert planned_schedule(cfg, 3) == (267, 200)  # 801 steps; a quarter is 200
    assert planned_schedule(cfg, 1) == (800, 200)
    short = TrainConfig(epochs=1, warmup_steps=200, min_steps=40, max_warmup_share=0.25)
    assert planned_schedule(short, 4) == (10, 10)  # the warm-up shrinks with the run
    with pytest.raises(ValueError, match="steps_per_epoch"):
        planned_schedule(cfg, 0)
    with pytest.raises(ValueError, match="min_steps"):
        TrainConfig(min_steps=-1)
    with pytest.raises(ValueError, match="max_warmup_share"):
        TrainConfig(max_warmup_share=0.0)


def test_train_runs_min_steps_with_a_scaled_warm_up_and_sparse_validation():
    calls = []
    config = TrainConfig(epochs=1, lr=3e-3, warmup_steps=100, min_steps=12,
                         max_warmup_share=0.5, seed=1)
    lines = []
    h = train(_model(), _copy_batches(num=2), config, valid_fn=lambda m: calls.append(1) or 5.0,
              device="cpu", progress=False, valid_every=4,
              on_epoch=lambda e, n, hist: lines.append((e, n, len(hist.epoch_loss))))
    assert len(h.step_loss) == 12 and len(h.epoch_loss) == 6
    assert h.step_lr[5] == pytest.approx(3e-3) and max(h.step_lr) == pytest.approx(3e-3)
    assert h.valid_epoch == [4, 6] and h.valid_score == [5.0, 5.0] and len(calls) == 2
    assert lines == [(e, 6, e) for e in range(1, 7)]
    with pytest.raises(ValueError, match="valid_every"):
        train(_model(), _copy_batches(num=2), config, valid_every=0)


def test_history_from_another_version_loads():
    data = {"step_loss": [1.0], "epoch_loss": [1.0], "valid_score": [3.0, 4.0],
            "a_field_of_the_future": [1, 2]}
    h = History.from_dict(data)
    assert h.step_loss == [1.0] and h.valid_epoch == [1, 2]  # scored after every epoch
    assert not hasattr(h, "a_field_of_the_future")
    with pytest.raises(ValueError, match="expected a dict"):
        History.from_dict([1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize("name, match", [
    ("meta", "cannot run the model here"),
    ("cuda:7", "CUDA"),
    ("mps", "MPS is not available"),
    ("", "unknown device"),
])
def test_pick_device_refuses_devices_that_cannot_run_here(monkeypatch, name, match):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(ValueError, match=match):
        pick_device(name)


def _padded_batches(left: bool = False) -> list:
    batches = _copy_batches(num=3)
    for b in batches:
        b.tgt_in[:3, 4:], b.tgt_out[:3, 3:] = 0, 0  # three shorter targets, right-padded
        b.tgt_out[:3, 3] = 2
        if left:
            b.tgt_in = b.tgt_in.flip(1)
    return batches


def test_right_padded_targets_train_on_the_causal_path_with_the_same_numbers(monkeypatch):
    flags = []
    real_forward = Transformer.forward

    def spy(self, src, tgt_in, *, tgt_is_causal=False):
        flags.append(tgt_is_causal)
        return real_forward(self, src, tgt_in, tgt_is_causal=tgt_is_causal)

    monkeypatch.setattr(Transformer, "forward", spy)
    h_causal = train(_model(), _padded_batches(), _config(2), device="cpu", progress=False)
    assert flags == [True] * 6
    flags.clear()
    monkeypatch.setattr(train_mod, "_right_padded", lambda tgt_in, pad_id: False)
    h_masked = train(_model(), _padded_batches(), _config(2), device="cpu", progress=False)
    assert flags == [False] * 6
    assert h_causal.step_loss == pytest.approx(h_masked.step_loss, abs=1e-6)
    assert h_causal.step_grad_norm == pytest.approx(h_masked.step_grad_norm, abs=1e-5)
    monkeypatch.undo()
    assert not train_mod._right_padded(_padded_batches(left=True)[0].tgt_in, 0)
    assert train_mod._right_padded(_padded_batches()[0].tgt_in, 0)


def test_each_step_sees_only_its_own_gradient():
    # Two steps on one batch, no clipping: the gradient the optimiser sees at step 2 is the
    # fresh gradient of that step's loss, not the sum with step 1's (zero_grad every step).
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    model, batch = _model(dropout=0.0), _copy_batches(num=1)
    config = _config(2, clip_norm=0.0, label_smoothing=0.1)
    seen, fresh = [], []

    def before_step(optimizer, args, kwargs):
        seen.append([p.grad.clone() for p in model.parameters()])
        twin = copy.deepcopy(model)
        twin.zero_grad(set_to_none=True)
        b = batch[0]
        train_mod.label_smoothed_cross_entropy(twin(b.src, b.tgt_in), b.tgt_out, 0.1,
                                               ignore_index=0).backward()
        fresh.append([p.grad for p in twin.parameters()])

    handle = register_optimizer_step_pre_hook(before_step)
    try:
        train(model, batch, config, device="cpu", progress=False)
    finally:
        handle.remove()
    assert len(seen) == 2
    for got, want in zip(seen[1], fresh[1], strict=True):
        torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)


def test_training_leaves_the_callers_random_state_alone():
    model, twin = _model(), _model()  # (_model seeds the generator itself)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    h = train(model, _copy_batches(num=2), _config(1), device="cpu", progress=False)
    assert torch.equal(torch.get_rng_state(), before)
    # ... while the run itself is still seeded by its config: the same numbers again.
    torch.manual_seed(999)
    again = train(twin, _copy_batches(num=2), _config(1), device="cpu", progress=False)
    assert again.step_loss == h.step_loss


def test_lr_factor_without_warmup_starts_at_the_peak_and_decays_the_same():
    w = 10
    assert [lr_factor(s, w, warmup=False) for s in (1, 5, 10)] == [1.0, 1.0, 1.0]
    for s in (10, 11, 40, 1000):  # after the warm-up both schedules are one curve
        assert lr_factor(s, w, warmup=False) == lr_factor(s, w)
    h = train(_model(), _copy_batches(), _config(2, warmup=False), device="cpu",
              progress=False)
    assert h.step_lr[:5] == pytest.approx([3e-3] * 5)  # the peak from the first step
    assert h.step_lr[11] == pytest.approx(3e-3 * math.sqrt(5 / 12))


def test_linear_decay_falls_in_a_straight_line_to_the_last_step():
    w, total = 10, 50
    f = [lr_factor(s, w, decay="linear", total_steps=total) for s in range(1, total + 1)]
    assert f[:w] == pytest.approx([s / w for s in range(1, w + 1)])  # the same warm-up
    assert f[w - 1] == 1.0 and f[-1] == pytest.approx(1 / (total - w + 1))
    steps = [a - b for a, b in zip(f[w - 1:-1], f[w:], strict=True)]
    assert steps == pytest.approx([1 / (total - w + 1)] * (total - w))  # one slope
    assert lr_factor(total + 5, w, decay="linear", total_steps=total) > 0  # never 0 or below
    assert lr_factor(1, w, warmup=False, decay="linear", total_steps=total) == 1.0
    with pytest.raises(ValueError, match="total_steps"):
        lr_factor(3, w, decay="linear")
    with pytest.raises(ValueError, match="decay must be one of rsqrt, linear"):
        lr_factor(3, w, decay="cosine", total_steps=total)
    with pytest.raises(ValueError, match="decay must be one of rsqrt, linear, got 'cosine'"):
        TrainConfig(decay="cosine")


def test_a_linear_run_ends_at_its_smallest_rate_over_all_epochs():
    # 2 epochs of 6 batches: the decay spans the whole run, not each epoch
    h = train(_model(), _copy_batches(), _config(2, decay="linear"), device="cpu",
              progress=False)
    total, w, peak = 12, 5, 3e-3
    assert len(h.step_lr) == total
    assert h.step_lr[w - 1] == pytest.approx(peak)
    assert h.step_lr[-1] == pytest.approx(peak / (total - w + 1))
    assert all(a > b for a, b in zip(h.step_lr[w - 1:], h.step_lr[w:], strict=False))
