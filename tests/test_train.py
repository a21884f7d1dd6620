"""The training loop: schedule, device choice, atomic checkpoints, exact resumption, progress."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from labformer import train as train_mod
from labformer.train import (
    History,
    TrainConfig,
    load_checkpoint,
    lr_factor,
    pick_device,
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


def _model(seed: int = 0, dropout: float = 0.1) -> Transformer:
    torch.manual_seed(seed)
    cfg = TransformerConfig.preset("tiny", src_vocab_size=V, tgt_vocab_size=V, dropout=dropout)
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
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert setup_distributed() == (0, 1)


# --------------------------------------------------------------------------- checkpoints


def test_checkpoint_round_trip_is_atomic(tmp_path):
    path = tmp_path / "sub" / "ck.pt"
    save_checkpoint(path, {"x": torch.arange(3), "epoch": 2, "names": ["a", "b"]})
    state = load_checkpoint(path)
    assert torch.equal(state["x"], torch.arange(3)) and state["epoch"] == 2
    assert [p.name for p in path.parent.iterdir()] == ["ck.pt"]  # no temporary file left


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
    unsafe = tmp_path / "unsafe.pt"
    torch.save({"format": train_mod.CHECKPOINT_FORMAT, "obj": SimpleNamespace(a=1)}, unsafe)
    with pytest.raises(ValueError, match="corrupt"):  # weights_only refuses arbitrary objects
        load_checkpoint(unsafe)


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


def test_same_seed_same_result_and_clipping_off():
    a, b = _model(), _model()
    ha = train(a, _copy_batches(), _config(1, clip_norm=0.0), device="cpu", progress=False)
    hb = train(b, _copy_batches(), _config(1, clip_norm=0.0), device="cpu", progress=False)
    assert ha.step_loss == hb.step_loss
    for p, q in zip(a.parameters(), b.parameters()):
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
    for (name, p), q in zip(straight.named_parameters(), resumed.parameters()):
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
