"""The benchmarks still run (once, at toy sizes). Timing targets live in `make bench`, not here."""

import math
import re
from pathlib import Path

import pytest
import torch

from bench.__main__ import main
from bench.lm import (
    LMBenchConfig,
    char_streams,
    check_causal,
    labformer_lm,
    torch_peer_from,
    train_side_by_side,
    transformers_missing,
)
from bench.suite import Row, to_markdown

ROOT = Path(__file__).parents[2]


def test_every_benchmark_runs_at_a_tiny_size(tmp_path, capsys):
    out = tmp_path / "results.md"
    assert main(["--tiny", "--out", str(out)]) == 0
    assert not out.exists()  # a smoke run never overwrites the real results
    table = capsys.readouterr().out
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    names = " ".join(rows)
    for expected in ("MultiHeadAttention", "Transformer training step", "FLOP/s",
                     "KV cache", "Beam search", "quick vs paper recipe",
                     "LM training tokens/s vs nn.TransformerEncoder",
                     "LM training tokens/s vs HF GPT2LMHeadModel",
                     "LM validation loss after 4 steps vs nn.TransformerEncoder"):
        assert expected in names
    for line in rows[1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[2] == "not installed":  # Hugging Face's peer, outside .venv-bench
            assert transformers_missing() is not None and "not installed" in cells[6]
            continue
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


# --- the language models side by side (bench/lm.py) ------------------------------------------

TINY = LMBenchConfig.tiny()


def test_a_peer_that_is_not_installed_says_so():
    row = Row("LM training tokens/s vs HF GPT2LMHeadModel", math.nan, None, ">= 1.0", None,
              "transformers not installed", unit="tok/s")
    assert math.isnan(row.ratio)
    assert "| – | not installed | – | >= 1.0 |" in to_markdown([row])


def test_the_lm_bench_reads_shakespeare_by_characters():
    vocab, train, valid = char_streams(TINY)
    assert 60 <= vocab <= 100  # letters, digits, punctuation, newline
    assert len(train) == TINY.text_chars and 0 < len(valid) <= TINY.text_chars
    assert int(train.max()) < vocab and int(valid.max()) < vocab


def _changes_only_later_logits(model: torch.nn.Module, vocab: int) -> None:
    """The bench's own check: changing a token leaves earlier logits as they were."""
    check_causal(model, vocab, type(model).__name__)


def test_the_torch_peer_is_causal_and_computes_what_labformer_computes():
    vocab = 20
    ours = labformer_lm(vocab, TINY, "2017")
    peer = torch_peer_from(ours, TINY)
    _changes_only_later_logits(peer, vocab)
    tokens = torch.randint(0, vocab, (3, TINY.context))
    ours.eval()
    with torch.no_grad():  # the same weights: the same logits
        torch.testing.assert_close(peer(tokens), ours(tokens), rtol=1e-5, atol=1e-5)
    # A mask that let position t see t + 1 would fail the check above.
    leaky = torch_peer_from(ours, TINY)
    leaky.forward = lambda x: leaky.generator(leaky.encoder(  # type: ignore[method-assign]
        leaky.embed(x) * math.sqrt(leaky.d_model) + leaky.pe[: x.shape[1]]))
    with pytest.raises(AssertionError):
        _changes_only_later_logits(leaky, vocab)


def _one_step_each(models: dict[str, torch.nn.Module]) -> None:
    """Every model takes the same steps on the same windows; each learns something."""
    vocab, train, valid = char_streams(TINY)
    before = {name: [p.detach().clone() for p in m.parameters()] for name, m in models.items()}
    runs = train_side_by_side(models, train, valid, TINY)
    for name, run in runs.items():
        assert len(run.losses) == TINY.steps and all(map(math.isfinite, run.losses)), name
        assert len(run.round_seconds) == TINY.steps // TINY.round_steps - 1  # warm-up untimed
        assert run.tokens_per_second(TINY) > 0 and math.isfinite(run.valid_loss)
        assert any(not torch.equal(p, q) for p, q in zip(before[name],
                                                           run.model.parameters(),
                                                           strict=True)), name


def test_labformer_and_the_torch_peer_train_side_by_side():
    vocab, _, _ = char_streams(TINY)
    ours = labformer_lm(vocab, TINY, "2017")
    _one_step_each({"ours": ours, "torch": torch_peer_from(ours, TINY)})


def test_the_gpt2_block_of_labformer_is_causal():
    _changes_only_later_logits(labformer_lm(20, TINY, "gpt2"), 20)


# Hugging Face's peer runs only in .venv-bench (make bench), which checks it with
# bench.lm.check_causal before timing it; here the same check must catch a leak.
def test_the_bench_refuses_a_peer_that_sees_the_future():
    vocab = 20
    leaky = labformer_lm(vocab, TINY, "gpt2")
    leaky.forward = lambda tokens: torch.nn.functional.one_hot(  # type: ignore[method-assign]
        tokens.roll(-1, dims=1), vocab).float()
    with pytest.raises(AssertionError, match="not causal"):
        check_causal(leaky, vocab, "leaky")
    check_causal(labformer_lm(vocab, TINY, "gpt2"), vocab, "ours")


def _pins(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            found[re.sub(r"[-_.]+", "-", name).lower()] = version
    return found


def test_the_bench_lock_adds_to_the_main_lock_without_overriding_it():
    # .venv-bench reads .venv's packages after its own: a package pinned in both would shadow
    # the version requirements.lock pins.
    bench, main_lock = _pins(ROOT / "requirements-bench.lock"), _pins(ROOT / "requirements.lock")
    assert "transformers" in bench and "tokenizers" in bench and "safetensors" in bench
    assert not bench.keys() & main_lock.keys()
    assert "torch" in main_lock  # the peer trains with .venv's torch
    assert ".venv-bench" in (ROOT / ".gitignore").read_text()
