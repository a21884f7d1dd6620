"""book/sweeps/baseline_curves.py and the data file chapter 14 reads: every grid point tuned, twenty
paired seeds on both kernels where the chapter checks its run, the choice made on validation."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "sweeps"))
import baseline_curves as curves  # noqa: E402

DATA = json.loads((ROOT / "book" / "data" / "14_baseline_curves.json").read_text("utf-8"))


def test_every_setting_of_each_grid_was_tuned_at_every_budget_on_three_seeds():
    tuning = [r for r in DATA["runs"] if r["phase"] == "tuning"]
    assert DATA["tuning_seeds"] == list(curves.TUNING_SEEDS) and len(curves.TUNING_SEEDS) >= 3
    for model in curves.MODELS:
        wanted = {(s["lr"], s["warmup_share"], s["dropout"], seed)
                  for s in curves.settings(model) for seed in curves.TUNING_SEEDS}
        for budget in curves.BUDGETS:
            got = [(r["lr"], r["warmup_share"], r["dropout"], r["seed"]) for r in tuning
                   if r["model"] == model and r["budget"] == budget]
            assert sorted(got, key=str) == sorted(wanted, key=str), (model, budget)
    # the seeds that choose are not seeds that decide
    assert not {r["seed"] for r in tuning} & set(curves.CHECKED_SEEDS)


def test_the_chosen_setting_is_the_best_on_validation_and_trains_the_seeds():
    for model, by_budget in DATA["chosen"].items():
        for budget, chosen in by_budget.items():
            best = curves.choose(DATA["runs"], model, budget)
            assert best["n"] == len(curves.TUNING_SEEDS)
            assert chosen == {k: best[k] for k in curves.SETTING}
            seeds = [r for r in DATA["runs"] if r["phase"] == "seeds" and r["model"] == model
                     and r["budget"] == budget]
            assert seeds and all({k: r[k] for k in chosen} == chosen for r in seeds)


def test_the_checked_budget_has_twenty_paired_seeds_on_both_kernels():
    checked = DATA["checked_budget"]
    runs = {m: {r["seed"]: r for r in DATA["runs"] if r["phase"] == "seeds"
                and r["model"] == m and r["budget"] == checked} for m in curves.MODELS}
    assert set(runs["transformer"]) == set(runs["gru"]) and len(runs["gru"]) >= 20
    assert {r["kernel"] for r in runs["gru"].values()} == {"default", "avx2"}
    assert all(0 <= r["test_bleu"] <= 100 and r["cpu_s"] > 0
               for by_seed in runs.values() for r in by_seed.values())
    # the sweeps moved from tests/ to book/sweeps/: a stored file keeps the command it ran
    assert DATA["command"].startswith(
        ("python tests/baseline_curves.py", "python book/sweeps/baseline_curves.py"))
    assert set(DATA["wall_s_per_step"]) == {f"{m}_{t}" for m in curves.MODELS for t in (1, 2)}


def test_a_missing_out_is_refused(capsys):
    with pytest.raises(SystemExit):
        curves.main([])
    assert "--out" in capsys.readouterr().err


def test_each_budget_buys_both_models_the_same_cpu_time():
    """The seeds' GRU step counts come from the tuning runs' own CPU per step: at every budget
    both models' seeds took about the same mean CPU time, within 15 % (CPU time on a shared
    machine moves with load and kernels; chapter 14 scales its verdict to the difference)."""
    def cpu(model: str, budget: str) -> float:
        return statistics.mean(r["cpu_s"] for r in DATA["runs"] if r["phase"] == "seeds"
                               and r["model"] == model and r["budget"] == budget)

    assert DATA["cost_ratio"] == round(statistics.median(DATA["cost_ratios"]), 4)
    tuning = [r for r in DATA["runs"] if r["phase"] == "tuning"]
    per_step = {m: statistics.median(r["cpu_s"] / r["steps"] for r in tuning if r["model"] == m)
                for m in curves.MODELS}
    assert DATA["seed_cost_ratio"] == round(per_step["transformer"] / per_step["gru"], 4)
    for budget, share in curves.BUDGETS.items():
        steps = DATA["budgets"][budget]
        assert steps["transformer"] == round(curves.TF_STEPS * share)
        assert steps["gru"] == round(round(curves.TF_STEPS * DATA["seed_cost_ratio"]) * share)
        assert all(r["steps"] == steps[r["model"]] for r in DATA["runs"]
                   if r["phase"] == "seeds" and r["budget"] == budget)
        ratio = cpu("gru", budget) / cpu("transformer", budget)
        assert 0.85 < ratio < 1.15, (budget, ratio)
