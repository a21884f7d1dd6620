"""The benchmarks still run (once, at toy sizes). Timing targets live in `make bench`, not here."""

from pathlib import Path

import torch

from bench.__main__ import main
from bench.suite import Row, to_markdown


def test_every_benchmark_runs_at_a_tiny_size(tmp_path, capsys):
    out = tmp_path / "results.md"
    assert main(["--tiny", "--out", str(out)]) == 0
    assert not out.exists()  # a smoke run never overwrites the real results
    table = capsys.readouterr().out
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    names = " ".join(rows)
    for expected in ("MultiHeadAttention", "Transformer training step", "FLOP/s",
                     "KV cache", "Beam search", "quick vs paper recipe"):
        assert expected in names
    for line in rows[1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        ours, peer, ratio = float(cells[1].split()[0]), float(cells[2].split()[0]), float(cells[3])
        assert ours > 0 and peer > 0 and abs(ratio - ours / peer) <= 0.02 * ratio


def test_a_missed_target_is_marked():
    row = Row("x", ours=3.0, peer=2.0, target="<= 1.1", ok=False)
    assert row.ratio == 1.5
    assert "**no**" in to_markdown([row])
    assert "yes" in to_markdown([Row("y", 1.0, 2.0, "<= 1.1", True)])


def test_each_row_states_its_own_unit():
    rate = Row("Training step FLOP/s vs matmul peak", ours=120.0, peer=200.0, target="",
               ok=None, unit="GFLOP/s")
    time = Row("a step", 3.0, 2.0, "", None)
    table = to_markdown([rate, time])
    assert "| 120 GFLOP/s | 200 GFLOP/s | 0.6 |" in table
    assert "| 3 ms | 2 ms | 1.5 |" in table
    assert "| benchmark | labformer | reference | ratio |" in table
    assert not hasattr(rate, "ours_ms")  # a rate is not a time
    results = (Path(__file__).parents[2] / "bench" / "results.md").read_text()
    assert table.splitlines()[2] in results  # the committed table has the same header


def test_no_host_read_per_step_on_a_gpu_path():
    # python -m bench.syncs: labformer's own reads of tensors back to the host. Training reads
    # its losses and norms once per epoch, beam search one (B, K, 4) tensor per step.
    from bench.syncs import beam_step_reads, count_host_reads, training_step_reads

    assert training_step_reads("cpu") < 1
    assert beam_step_reads("cpu") <= 1
    x = torch.ones(2)
    with count_host_reads() as seen:
        x.tolist()  # a read from outside labformer is not counted
    assert seen == {}
