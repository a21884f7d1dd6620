"""tests/baseline_curves.py and the data file chapter 14 reads: every grid point tuned, twenty
paired seeds on both kernels where the chapter checks its run, the choice made on validation."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import baseline_curves as curves  # noqa: E402

DATA = json.loads((ROOT / "book" / "data" / "14_baseline_curves.json").read_text("utf-8"))


def test_every_setting_of_each_grid_was_tuned_at_every_budget_on_one_seed():
    tuning = [r for r in DATA["runs"] if r["phase"] == "tuning"]
    for model in curves.STEPS:
        wanted = {(s["lr"], s["warmup_share"], s["dropout"]) for s in curves.settings(model)}
        for budget in curves.BUDGETS:
            got = [(r["lr"], r["warmup_share"], r["dropout"]) for r in tuning
                   if r["model"] == model and r["budget"] == budget]
            assert sorted(got, key=str) == sorted(wanted, key=str), (model, budget)
    assert {r["seed"] for r in tuning} == {0}


def test_the_chosen_setting_is_the_best_on_validation_and_trains_the_seeds():
    for model, by_budget in DATA["chosen"].items():
        for budget, chosen in by_budget.items():
            grid = [r for r in DATA["runs"] if r["phase"] == "tuning" and r["model"] == model
                    and r["budget"] == budget]
            best = max(grid, key=lambda r: r["valid_bleu"])
            assert chosen == {k: best[k] for k in ("lr", "warmup_share", "dropout")}
            seeds = [r for r in DATA["runs"] if r["phase"] == "seeds" and r["model"] == model
                     and r["budget"] == budget]
            assert seeds and all({k: r[k] for k in chosen} == chosen for r in seeds)


def test_the_checked_budget_has_twenty_paired_seeds_on_both_kernels():
    checked = DATA["checked_budget"]
    runs = {m: {r["seed"]: r for r in DATA["runs"] if r["phase"] == "seeds"
                and r["model"] == m and r["budget"] == checked} for m in curves.STEPS}
    assert set(runs["transformer"]) == set(runs["gru"]) and len(runs["gru"]) >= 20
    assert {r["kernel"] for r in runs["gru"].values()} == {"default", "avx2"}
    assert all(0 <= r["test_bleu"] <= 100 and r["cpu_s"] > 0
               for by_seed in runs.values() for r in by_seed.values())
    assert DATA["command"].startswith("python tests/baseline_curves.py")
    assert set(DATA["wall_s_per_step"]) == {f"{m}_{t}" for m in curves.STEPS for t in (1, 2)}


def test_a_missing_out_is_refused(capsys):
    with pytest.raises(SystemExit):
        curves.main([])
    assert "--out" in capsys.readouterr().err


def test_each_budget_buys_both_models_the_same_cpu_time():
    """The GRU's step counts come from the measured cost ratio (COST_RATIO): at every budget its
    tuning runs took about the CPU time of the Transformer's runs without dropout (seed 0, the
    same kernels, one thread)."""
    def cpu(model: str, budget: str) -> float:
        return statistics.median(r["cpu_s"] for r in DATA["runs"] if r["phase"] == "tuning"
                                 and r["model"] == model and r["budget"] == budget
                                 and not r["dropout"])

    assert DATA["cost_ratio"] == curves.COST_RATIO
    for budget in curves.BUDGETS:
        ratio = cpu("gru", budget) / cpu("transformer", budget)
        assert 0.85 < ratio < 1.15, (budget, ratio)
