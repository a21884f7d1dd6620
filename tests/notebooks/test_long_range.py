"""book/sweeps/long_range.py and the data chapter 14 reads from it: the step timings against length
(its copying task at equal CPU time is tested here on its parts)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "sweeps"))
import long_range as lr  # noqa: E402

from labformer.special import BOS_ID, EOS_ID, PAD_ID  # noqa: E402

DATA = ROOT / "book" / "data"


def test_a_copy_batch_is_the_source_shifted_into_the_target():
    batch = lr.copy_batch(torch.Generator().manual_seed(3), 6, (5, 9))
    again = lr.copy_batch(torch.Generator().manual_seed(3), 6, (5, 9))
    assert all(torch.equal(a, b) for a, b in zip(batch, again, strict=True))
    for src, tgt_in, tgt_out in zip(batch.src, batch.tgt_in, batch.tgt_out, strict=True):
        n = int((src != PAD_ID).sum())
        assert 5 <= n <= 9 and bool((src[:n] >= 4).all()) and bool((src[n:] == PAD_ID).all())
        assert tgt_in[0] == BOS_ID and torch.equal(tgt_in[1:n + 1], src[:n])
        assert torch.equal(tgt_out[:n], src[:n]) and tgt_out[n] == EOS_ID
        assert bool((tgt_out[n + 1:] == PAD_ID).all())


def test_the_score_counts_right_tokens_and_exact_copies(monkeypatch):
    held = lr.copy_batch(torch.Generator().manual_seed(10_000), lr.HELD_OUT)
    model = lr.build("transformer", 0, max_len=120)
    monkeypatch.setattr(lr, "greedy_decode", lambda m, src, max_len: held.tgt_out.clone())
    assert lr.score(model) == {"exact": 100.0, "token_acc": 100.0}
    wrong = held.tgt_out.clone()
    wrong[0, 0] = 4 if wrong[0, 0] != 4 else 5  # one token of one sequence
    monkeypatch.setattr(lr, "greedy_decode", lambda m, src, max_len: wrong)
    got = lr.score(model)
    real = int((held.tgt_out != PAD_ID).sum())
    assert got["exact"] == round(100 * (lr.HELD_OUT - 1) / lr.HELD_OUT, 2)
    assert got["token_acc"] == round(100 * (real - 1) / real, 2)
    short = held.tgt_out[:, :3].clone()  # stops early: the rest counts as wrong
    monkeypatch.setattr(lr, "greedy_decode", lambda m, src, max_len: short)
    assert lr.score(model)["exact"] == 0.0


def test_the_best_rate_is_the_best_mean_token_accuracy():
    runs = [{"model": m, "lr": rate, "token_acc": acc, "exact": 0.0}
            for m in lr.MODELS for rate, accs in zip(lr.RATES[m], ((50, 60), (70, 40), (10, 20)),
                                                     strict=True) for acc in accs]
    assert lr.best_rates(runs) == {m: lr.RATES[m][0] for m in lr.MODELS}


def test_training_stops_when_its_cpu_budget_is_spent():
    model = lr.build("transformer", 0, max_len=120)
    done = lr.train_for(model, seed=0, lr=1e-3, cpu_budget=0.5)
    assert done["steps"] >= 1 and 0.5 <= done["cpu_s"] < 0.5 + 5


def test_the_stored_timings_name_their_command_and_machine():
    data = json.loads((DATA / "14_step_timings.json").read_text("utf-8"))
    # the sweeps moved from tests/ to book/sweeps/: a stored file keeps the command it ran
    assert data["command"].startswith(
        ("python tests/long_range.py timings", "python book/sweeps/long_range.py timings"))
    assert data["cpu"] and data["batch"] == lr.BATCH


def test_the_timings_cover_every_length_thread_and_model():
    data = json.loads((DATA / "14_step_timings.json").read_text("utf-8"))
    got = {(r["model"], r["length"], r["threads"], r["repeat"]) for r in data["timings"]}
    want = {(m, n, t, k) for m in lr.MODELS for n in lr.TIMING_LENGTHS for t in (1, 2)
            for k in range(data["repeats"])}
    assert got == want and data["repeats"] >= 3
    assert all(r["step_s"] > 0 and r["translate_s"] > 0 for r in data["timings"])


def test_the_copy_sweep_is_tuned_on_its_own_seeds_and_paired_on_fixed_ones():
    """14_long_copy.json: every rate tried on the three tuning seeds, the chosen rates the
    best mean token accuracy among them, then both models on seeds 1-20 at those rates, each
    run within 5 % of the CPU budget (the chapter's verdict reads these runs)."""
    data = json.loads((DATA / "14_long_copy.json").read_text("utf-8"))
    # the sweeps moved from tests/ to book/sweeps/: a stored file keeps the command it ran
    assert data["command"].startswith(
        ("python tests/long_range.py sweep", "python book/sweeps/long_range.py sweep"))
    tuning = [r for r in data["runs"] if r["phase"] == "tuning"]
    assert {(r["model"], r["lr"], r["seed"]) for r in tuning} == {
        (m, rate, s) for m in lr.MODELS for rate in lr.RATES[m] for s in lr.TUNING_SEEDS}
    assert data["chosen"] == lr.best_rates(tuning)
    for m in lr.MODELS:
        seeds = [r for r in data["runs"] if r["phase"] == "seeds" and r["model"] == m]
        assert sorted(r["seed"] for r in seeds) == list(lr.SWEEP_SEEDS)
        assert all(r["lr"] == data["chosen"][m] for r in seeds)
    assert all(abs(r["cpu_s"] / data["cpu_budget_s"] - 1) < 0.05 for r in data["runs"])
