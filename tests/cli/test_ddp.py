"""Data-parallel training: the same loop under torchrun, two CPU processes, gloo."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
# Two training processes of their own (marked solo; make test runs this file among the first).
pytestmark = pytest.mark.solo
EPOCHS, FIRST = 6, 3  # the interrupted run stops after FIRST epochs, then resumes

WORKER = textwrap.dedent(f"""
    import os, sys
    from types import SimpleNamespace

    import torch
    import torch.distributed as dist

    from labformer.train import TrainConfig, train
    from labformer.transformer import Transformer, TransformerConfig

    out, mode = sys.argv[1], sys.argv[2]
    rank = int(os.environ["RANK"])
    g = torch.Generator().manual_seed(0)  # every rank builds the same 8 batches of a copy task
    batches = []
    for _ in range(8):
        words = torch.randint(4, 12, (8, 6), generator=g)
        src = torch.cat([words, torch.full((8, 1), 2)], 1)
        batches.append(SimpleNamespace(src=src, tgt_in=torch.cat([torch.ones(8, 1).long(),
                                                                   words], 1), tgt_out=src))

    def model(seed):
        torch.manual_seed(seed + rank)  # different weights per rank: DDP must broadcast rank 0's
        cfg = TransformerConfig.preset("tiny", src_vocab_size=12, tgt_vocab_size=12,
                                       dropout=0.1)
        return Transformer(cfg)

    def run(name, seed, epochs, resume=False):
        m = model(seed)
        config = TrainConfig(epochs=epochs, lr=5e-3, warmup_steps=4, seed=0)
        h = train(m, batches, config, device="cpu", checkpoint=os.path.join(out, name + ".pt"),
                  resume=resume, valid_fn=lambda m: 42.0, progress=False)
        torch.save({{"state": m.state_dict(), "loss": h.epoch_loss, "steps": h.step_loss,
                    "valid": h.valid_score, "world": dist.get_world_size()}},
                   os.path.join(out, f"{{name}}-rank{{rank}}.pt"))

    if mode == "first":
        run("straight", 100, {EPOCHS})
        run("interrupted", 100, {FIRST})
    else:  # new processes, other initial weights: everything must come from the checkpoint
        run("interrupted", 999, {EPOCHS}, resume=True)
    dist.destroy_process_group()
""")


def _torchrun(tmp_path: Path, mode: str) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
           "2", str(script), str(tmp_path), mode]
    run = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """An uninterrupted run, and one stopped after FIRST epochs and resumed by new processes."""
    out = tmp_path_factory.mktemp("ddp")
    _torchrun(out, "first")
    _torchrun(out, "resume")
    return out


def _load(out: Path, name: str, rank: int) -> dict:
    return torch.load(out / f"{name}-rank{rank}.pt", weights_only=True)


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed missing")
def test_two_cpu_processes_stay_in_sync_and_learn(runs):
    r0, r1 = _load(runs, "straight", 0), _load(runs, "straight", 1)
    assert r0["world"] == r1["world"] == 2
    assert len(r0["steps"]) == len(r1["steps"]) == EPOCHS * 4  # 8 batches shared by 2 ranks
    for name, p in r0["state"].items():
        assert torch.equal(p, r1["state"][name]), name  # identical replicas after training
    assert r0["steps"] == pytest.approx(r1["steps"], abs=1e-6)  # both log the global loss
    assert r0["loss"][-1] < 0.9 * r0["loss"][0]
    assert r0["valid"] == [42.0] * EPOCHS and r1["valid"] == []  # validation on rank 0 only
    ck = torch.load(runs / "straight.pt", weights_only=True)  # written once, by rank 0
    assert ck["epoch"] == EPOCHS - 1 and len(ck["per_rank"]) == 2
    for name, p in r0["state"].items():
        assert torch.equal(p, ck["model"][name]), name


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed missing")
def test_an_interrupted_run_resumes_exactly_on_every_rank(runs):
    ck = torch.load(runs / "interrupted.pt", weights_only=True)
    assert ck["epoch"] == EPOCHS - 1
    rngs = [r["rng"]["cpu"] for r in ck["per_rank"]]
    assert len(rngs) == 2 and not torch.equal(rngs[0], rngs[1])  # one state per rank
    for rank in (0, 1):
        straight, resumed = _load(runs, "straight", rank), _load(runs, "interrupted", rank)
        for name, p in straight["state"].items():
            assert torch.equal(p, resumed["state"][name]), (rank, name)
        # Each rank's own history continues, dropout masks included: the same losses.
        assert resumed["steps"] == straight["steps"]
        assert resumed["valid"] == straight["valid"]


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed missing")
def test_a_failure_on_rank_0_ends_every_rank_with_one_line(tmp_path):
    out = tmp_path / "m.pt"
    Path(str(out) + ".lock").write_text(str(os.getpid()))  # this live process "holds" --out
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
           "2", "-m", "labformer.app.cli", "train", "--pairs",
           str(ROOT / "labformer" / "data" / "fr-en-everyday.tsv"), "--out", str(out),
           "--epochs", "1", "--device", "cpu"]
    run = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=180)
    assert run.returncode != 0
    assert f"labformer: error (rank 0): another run (pid {os.getpid()})" in run.stderr
    # no traceback from labformer's own processes (torchrun adds its own summary)
    assert 'File "' + str(ROOT / "labformer") not in run.stderr, run.stderr[-3000:]
    assert not out.exists()


def test_each_token_weighs_the_same_whatever_its_rank(monkeypatch):
    # Two ranks simulated in one process: rank 1 has few real tokens. DDP averages the ranks'
    # gradients; with token sums and the all-reduced token count, that average is the
    # gradient of the mean over every real token of the global batch, as on one process.
    from labformer import train as train_mod
    from labformer.loss import label_smoothed_cross_entropy

    g = torch.Generator().manual_seed(0)
    w = torch.randn(5, 7, generator=g, requires_grad=True)  # logits = x @ w
    xs = [torch.randn(2, 6, 5, generator=g) for _ in range(2)]
    ts = [torch.randint(1, 7, (2, 6), generator=g) for _ in range(2)]
    ts[1][:, 1:] = 0  # rank 1: two real tokens, the rest padding
    whole = label_smoothed_cross_entropy(torch.cat(xs) @ w, torch.cat(ts), 0.1, ignore_index=0)
    (want,) = torch.autograd.grad(whole, w)
    sums = [torch.stack([label_smoothed_cross_entropy(x @ w, t, 0.1, 0, "sum").detach(),
                         (t != 0).sum().float()]) for x, t in zip(xs, ts, strict=True)]
    grads, logged = [], []
    for rank in (0, 1):
        monkeypatch.setattr(train_mod.dist, "all_reduce",
                            lambda tensor, other=sums[1 - rank]: tensor.add_(other))
        loss, log = train_mod._token_mean(xs[rank] @ w, ts[rank], 0.1, 0, world=2)
        grads.append(torch.autograd.grad(loss, w)[0])
        logged.append(log)
    torch.testing.assert_close((grads[0] + grads[1]) / 2, want)
    for log in logged:  # every rank logs the loss of the whole step
        torch.testing.assert_close(log, whole.detach())
    # Per-rank means (the rule this replaces) would give rank 1's two tokens half the weight.
    per_rank = [torch.autograd.grad(label_smoothed_cross_entropy(x @ w, t, 0.1, 0), w)[0]
                for x, t in zip(xs, ts, strict=True)]
    assert not torch.allclose((per_rank[0] + per_rank[1]) / 2, want, atol=1e-3)


def test_one_process_loss_is_the_token_mean():
    from labformer import train as train_mod
    from labformer.loss import label_smoothed_cross_entropy

    g = torch.Generator().manual_seed(1)
    logits, target = torch.randn(3, 4, 9, generator=g), torch.randint(0, 9, (3, 4), generator=g)
    loss, logged = train_mod._token_mean(logits, target, 0.1, 0, world=1)
    assert torch.equal(loss, label_smoothed_cross_entropy(logits, target, 0.1, ignore_index=0))
    assert torch.equal(logged, loss)
