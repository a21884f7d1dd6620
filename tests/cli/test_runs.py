"""Tests for labformer.app.runs: the translator trained once per code version and seed."""

from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path

import pytest
import torch

from labformer.app import runs
from labformer.app.translate import TRAIN_DEFAULTS, train_translator
from labformer.data import generate_corpus

TINY = dict(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32,
            dropout=0.0, max_len=40)


@pytest.fixture(scope="module")
def corpus():
    return generate_corpus(num_pairs=2150, seed=0)  # 150 training pairs


@pytest.fixture
def tiny_training(monkeypatch):
    """The real training loop on a tiny model for 3 short epochs; counts its calls."""
    calls = []

    def tiny(data, **kw):
        calls.append(kw["seed"])
        config = dataclasses.replace(TRAIN_DEFAULTS, epochs=3, min_steps=0, warmup_steps=2,
                                     seed=kw.pop("seed"))
        return train_translator(data, model_overrides=TINY, train_config=config,
                                batch_size=64, valid_size=4, **kw)

    monkeypatch.setattr(runs, "train_translator", tiny)
    return calls


def test_a_run_is_trained_once_then_read_identically(tmp_path, corpus, tiny_training):
    printed: list[str] = []
    first = runs.trained_translator(corpus, 3, cache=tmp_path, echo=printed.append)
    assert first.trained_now and tiny_training == [3]
    assert [p.name for p in sorted(first.folder.glob("*.pt"))] == [
        "epoch1.pt", "epoch2.pt", "last.pt"]
    assert len(first.log) == 3 and printed == first.log
    assert first.cpu_at_epoch[0] == 0.0 and len(first.cpu_at_epoch) == 4
    assert first.cpu_at_epoch == sorted(first.cpu_at_epoch)
    assert len(first.cpu_at_step) == len(first.translator.history.step_loss)

    printed.clear()
    again = runs.trained_translator(corpus, 3, cache=tmp_path, echo=printed.append)
    assert not again.trained_now and tiny_training == [3]  # not trained a second time
    assert again.folder == first.folder and again.log == first.log
    assert "read from the run cache" in printed[0] and printed[1:] == first.log
    assert str(tmp_path) not in printed[0]  # no path of the machine on the page
    assert again.cpu_at_step == first.cpu_at_step
    a, b = first.translator.model.state_dict(), again.translator.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    # the epochs' checkpoints are different models: epoch 1 is not the last
    e1 = again.translator.__class__.from_checkpoint(again.checkpoint(1)).model.state_dict()
    assert any(not torch.equal(e1[k], a[k]) for k in a)
    assert again.checkpoint(3).name == "last.pt"
    with pytest.raises(ValueError, match="epochs 1 to 3, not 4"):
        again.checkpoint(4)


def test_the_key_names_seed_kernels_and_code(corpus, monkeypatch):
    key = runs.run_key(corpus, 0)
    assert runs.run_key(corpus, 0) == key
    assert runs.run_key(corpus, 1) != key
    # another kernel setting than the one this test runs under (CI sets one)
    kernels = os.environ.get("ATEN_CPU_CAPABILITY", "")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2" if kernels == "default" else "default")
    assert runs.run_key(corpus, 0) != key
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", kernels)
    other = generate_corpus(num_pairs=2150, seed=1)
    assert runs.run_key(other, 0) != key
    # a change to any labformer module changes the key
    real = Path.read_bytes

    def edited(path: Path) -> bytes:
        data = real(path)
        return data + b"#" if path.name == "train.py" else data

    monkeypatch.setattr(Path, "read_bytes", edited)
    assert runs.run_key(corpus, 0) != key


def test_two_callers_at_once_share_one_training(tmp_path, corpus, tiny_training):
    out: list[runs.TrainedRun] = []
    threads = [threading.Thread(target=lambda: out.append(
        runs.trained_translator(corpus, 5, cache=tmp_path, echo=None))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert tiny_training == [5]
    assert sorted(r.trained_now for r in out) == [False, True]


def test_a_failed_training_leaves_nothing_behind(tmp_path, corpus, monkeypatch):
    def broken(data, **kw):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(runs, "train_translator", broken)
    with pytest.raises(RuntimeError, match="out of memory"):
        runs.trained_translator(corpus, 0, cache=tmp_path, echo=None)
    assert [p for p in tmp_path.iterdir() if p.is_dir()] == []


def test_old_runs_are_pruned_and_the_folder_comes_from_the_environment(tmp_path, monkeypatch):
    for i in range(runs.KEEP + 2):
        folder = tmp_path / f"translator-{i:020d}"
        folder.mkdir()
        os.utime(folder, (i, i))
    runs._prune(tmp_path)
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert len(kept) == runs.KEEP and "translator-00000000000000000000" not in kept
    monkeypatch.setenv("LABFORMER_CACHE", str(tmp_path / "x"))
    assert runs.cache_folder() == tmp_path / "x"
    monkeypatch.delenv("LABFORMER_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert runs.cache_folder() == tmp_path / "xdg" / "labformer"


def _tiny_is_zero() -> bool:
    """Whether a subnormal float32 computes as zero right now."""
    return (torch.tensor([1e-39], dtype=torch.float32) * 1.0).item() == 0.0


def test_the_run_trains_with_subnormals_flushed_and_restores_the_setting(tmp_path, corpus,
                                                                        monkeypatch):
    # Chapter 14 compares this run with a GRU trained under subnormals_flushed(): both models
    # must train under the same float settings, and nothing after the run may inherit it.
    seen = []

    def probe(data, **kw):
        seen.append(_tiny_is_zero())
        raise RuntimeError("stop after the probe")

    monkeypatch.setattr(runs, "train_translator", probe)
    assert not _tiny_is_zero()
    with pytest.raises(RuntimeError, match="after the probe"):
        runs.trained_translator(corpus, 0, cache=tmp_path, echo=None)
    supported = torch.set_flush_denormal(False)  # x86 with SSE3: True
    assert seen == [supported] and not _tiny_is_zero()
    with runs.subnormals_flushed() as flushed:
        assert flushed == supported and _tiny_is_zero() == supported
    assert not _tiny_is_zero()
