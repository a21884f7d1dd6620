"""Data-parallel training: the same loop under torchrun, two CPU processes, gloo."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]

WORKER = textwrap.dedent("""
    import os, sys
    from types import SimpleNamespace

    import torch
    import torch.distributed as dist

    from labformer.train import TrainConfig, train
    from labformer.transformer import Transformer, TransformerConfig

    out = sys.argv[1]
    rank = int(os.environ["RANK"])
    g = torch.Generator().manual_seed(0)  # every rank builds the same 8 batches of a copy task
    batches = []
    for _ in range(8):
        words = torch.randint(4, 12, (8, 6), generator=g)
        src = torch.cat([words, torch.full((8, 1), 2)], 1)
        batches.append(SimpleNamespace(src=src, tgt_in=torch.cat([torch.ones(8, 1).long(),
                                                                   words], 1), tgt_out=src))
    torch.manual_seed(100 + rank)  # different initial weights: DDP must broadcast rank 0's
    cfg = TransformerConfig.preset("tiny", src_vocab_size=12, tgt_vocab_size=12, dropout=0.1)
    model = Transformer(cfg)
    config = TrainConfig(epochs=6, lr=5e-3, warmup_steps=4, seed=0)
    h = train(model, batches, config, device="cpu", checkpoint=os.path.join(out, "ck.pt"),
              valid_fn=lambda m: 42.0, progress=False)
    torch.save({"state": model.state_dict(), "loss": h.epoch_loss, "steps": len(h.step_loss),
                "valid": h.valid_score, "world": dist.get_world_size()},
               os.path.join(out, f"rank{rank}.pt"))
    dist.destroy_process_group()
""")


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed missing")
def test_two_cpu_processes_stay_in_sync_and_learn(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
           "2", str(script), str(tmp_path)]
    run = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    r0 = torch.load(tmp_path / "rank0.pt", weights_only=True)
    r1 = torch.load(tmp_path / "rank1.pt", weights_only=True)
    assert r0["world"] == r1["world"] == 2
    assert r0["steps"] == r1["steps"] == 6 * 4  # 8 batches shared by 2 ranks, 6 epochs
    for name, p in r0["state"].items():
        assert torch.equal(p, r1["state"][name]), name  # identical replicas after training
    for r in (r0, r1):
        assert r["loss"][-1] < 0.9 * r["loss"][0]  # each rank's share of the loss falls
    assert r0["valid"] == [42.0] * 6 and r1["valid"] == []  # validation on rank 0 only
    ck = torch.load(tmp_path / "ck.pt", weights_only=True)  # written once, by rank 0
    assert ck["epoch"] == 5
    for name, p in r0["state"].items():
        assert torch.equal(p, ck["model"][name]), name
