"""book/sweeps/baseline_curves.py and the data file chapter 14 reads: every grid point tuned, twenty
paired seeds on both kernels where the chapter checks its run, the choice made on validation;
and protocol v2 (issue 55), registered before it runs, on its parts and with fake workers."""

from __future__ import annotations

import importlib.util
import json
import math
import statistics
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "sweeps"))
import baseline_curves as curves  # noqa: E402
import gru_tuning  # noqa: E402

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


# ------------------------------------------------------------------ protocol v2 (issue 55)
PLAN = ROOT / "book" / "data" / "plans" / "14_baseline_curves_v2.json"


def _registrations():
    """tests/notebooks/test_registrations.py's checks, to hold a v2 file to its plan."""
    spec = importlib.util.spec_from_file_location(
        "registrations", ROOT / "tests" / "notebooks" / "test_registrations.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def setup():
    torch.set_num_threads(1)
    return gru_tuning.Setup()


def test_v2_widens_the_warm_up_past_v1s_edge_for_both_models():
    for model in curves.MODELS:
        v1, v2 = curves.GRID[model], curves.GRID_V2[model]
        assert max(v2["warmup_share"]) > max(v1["warmup_share"]) == 0.25
        assert set(v1["warmup_share"]) < set(v2["warmup_share"])
        assert v2["lr"] == v1["lr"]
    assert curves.GRID_V2["gru"]["warmup_share"] == curves.GRID_V2["transformer"]["warmup_share"]


def test_v2_tunes_both_models_at_every_budget_they_are_compared_at():
    jobs = curves.v2_jobs(curves.BUDGETS_V2, curves.TUNING_SEEDS_V2, curves.GRID_V2)
    for model in curves.MODELS:
        for budget, cpu in curves.BUDGETS_V2.items():
            mine = [j for j in jobs if (j["model"], j["budget"]) == (model, budget)]
            assert sorted((j["lr"], j["warmup_share"], str(j["dropout"]), j["seed"])
                          for j in mine) == sorted(
                (s["lr"], s["warmup_share"], str(s["dropout"]), seed)
                for s in curves.settings(model, curves.GRID_V2)
                for seed in curves.TUNING_SEEDS_V2)
            assert all(j["cpu_budget"] == cpu and j["kernel"] == "default" for j in mine)
    # the models alternate, so that both workers train both
    assert [j["model"] for j in jobs[:4]] == ["transformer", "gru"] * 2
    # fresh seeds: the tuning seeds decide nothing and no v1 run used any of them
    deciding = {s for seeds in curves.SEEDS_V2.values() for s in seeds}
    assert not deciding & set(curves.TUNING_SEEDS_V2)
    assert not (deciding | set(curves.TUNING_SEEDS_V2)) & {r["seed"] for r in DATA["runs"]}
    assert all(len(curves.SEEDS_V2[b]) >= 20 for b in curves.DECIDED_V2)


def test_v2_seeds_pair_both_models_on_the_same_seeds_kernels_and_budget():
    chosen = {m: {b: curves.settings(m, curves.GRID_V2)[-1] for b in curves.BUDGETS_V2}
              for m in curves.MODELS}
    jobs = curves.v2_seed_jobs(curves.BUDGETS_V2, curves.SEEDS_V2, chosen)
    for budget, seeds in curves.SEEDS_V2.items():
        by_model = {m: sorted((j["seed"], j["kernel"], j["cpu_budget"]) for j in jobs
                              if (j["model"], j["budget"]) == (m, budget))
                    for m in curves.MODELS}
        assert by_model["transformer"] == by_model["gru"]
        assert [s for s, *_ in by_model["gru"]] == seeds
        assert all(k == ("default" if s % 2 else "avx2") for s, k, _ in by_model["gru"])
    assert all({k: j[k] for k in curves.SETTING} == chosen[j["model"]][j["budget"]]
               for j in jobs)


def test_choose_breaks_a_tie_in_bleu_by_the_lower_validation_loss():
    grid = {"gru": {"lr": [1e-3, 1e-2], "warmup_share": [0.1], "dropout": [None]}}
    runs = [{"phase": "tuning", "model": "gru", "budget": "half", "lr": lr, "warmup_share": 0.1,
             "dropout": None, "valid_bleu": 50.0, "valid_loss": loss}
            for lr, loss in ((1e-3, 2.0), (1e-2, 1.5)) for _ in range(3)]
    assert curves.choose(runs, "gru", "half", grid)["lr"] == 1e-2
    runs[0]["valid_bleu"] = 53.0  # a better mean BLEU wins whatever the loss
    best = curves.choose(runs, "gru", "half", grid)
    assert best["lr"] == 1e-3 and best["n"] == 3 and best["valid_loss"] == 2.0


def test_the_schedule_in_cpu_time_warms_up_then_falls_to_zero():
    f = gru_tuning.cpu_lr_factor
    assert f(0.0, 10.0, 0.25) == 1e-3 and f(10.0, 10.0, 0.25) == 1e-3
    assert f(1.25, 10.0, 0.25) == pytest.approx(0.5) and f(2.5, 10.0, 0.25) == 1.0
    assert f(6.25, 10.0, 0.25) == pytest.approx(0.5)
    values = [f(t / 10, 10.0, 0.4) for t in range(101)]
    peak = values.index(max(values))
    assert peak == 40 and values[:peak + 1] == sorted(values[:peak + 1])
    assert values[peak:] == sorted(values[peak:], reverse=True)
    with pytest.raises(ValueError):
        f(1.0, 10.0, 0.0)


def test_a_run_trains_until_its_cpu_budget_is_spent(setup):
    done = gru_tuning.train_for_cpu(setup, setup.gru(0), 0, 1e-2, 0.25, 0.3)
    assert done["steps"] >= 1 and 0.3 <= done["cpu_s"] < 0.3 + 2
    assert 0 <= done["warmup_steps"] <= done["steps"] and math.isfinite(done["train_loss"])


def test_the_held_out_loss_is_the_mean_cross_entropy_per_target_token(setup):
    pairs = setup.corpus.valid[:7]
    model = setup.gru(0)
    got = gru_tuning.held_out_loss(setup, model, pairs)
    total, tokens = 0.0, 0
    net = gru_tuning.TeacherForcedRNN(model).eval()
    with torch.no_grad():
        for src, tgt in setup.encoded(pairs):
            tgt_in = torch.tensor([[setup.tv.bos_id] + tgt[:-1]])
            logits = net(torch.tensor([src]), tgt_in)
            total += float(torch.nn.functional.cross_entropy(
                logits[0], torch.tensor(tgt), reduction="sum"))
            tokens += len(tgt)
    assert got == pytest.approx(total / tokens, rel=1e-4)


def _fake_runs(jobs, workers, code=None):
    """What a worker returns for each job: scores that favour one setting per model."""
    return [{**j, "steps": int(j["cpu_budget"] * 13), "cpu_s": j["cpu_budget"] + 0.04,
             "warmup_steps": int(j["cpu_budget"] * 13 * j["warmup_share"]),
             "train_loss": 1.0, "valid_bleu": 100 * j["lr"] + j["warmup_share"],
             "valid_loss": 1.0, "test_bleu": 90.0 + j["seed"] % 3, "test_loss": 1.1}
            for j in jobs]


class _Threads:
    stdout = json.dumps({f"{m}_{t}": 0.1 for m in curves.MODELS for t in (1, 2)})


def test_the_v2_sweep_writes_what_its_registration_holds(tmp_path, monkeypatch):
    """The file protocol v2 writes, with the workers replaced by fakes, agrees with
    book/data/plans/14_baseline_curves_v2.json: seeds, kernels, settings, quantities and the
    command (so that the registered run will pass tests/notebooks/test_registrations.py)."""
    plan = json.loads(PLAN.read_text("utf-8"))
    monkeypatch.setattr(curves, "run_jobs", _fake_runs)
    monkeypatch.setattr(curves.subprocess, "run", lambda *a, **k: _Threads())
    monkeypatch.chdir(tmp_path)
    (tmp_path / "book" / "data").mkdir(parents=True)
    argv = plan["command"].split()[2:]
    assert curves.main(argv) == 0
    data = json.loads((tmp_path / plan["data"]).read_text("utf-8"))
    assert _registrations().agreement_problems(data, plan) == []
    assert data["protocol"] == "v2" and data["seeds"] == curves.SEEDS_V2
    for model in curves.MODELS:
        for budget in curves.BUDGETS_V2:  # the fakes favour the highest rate and warm-up
            assert data["chosen"][model][budget] == {
                "lr": max(curves.GRID_V2[model]["lr"]), "warmup_share": 0.4,
                "dropout": curves.GRID_V2[model]["dropout"][0]}
            assert data["median_steps"][model][budget] == int(curves.BUDGETS_V2[budget] * 13)


def test_v2_results_come_back_in_the_order_of_their_jobs(monkeypatch):
    """run_jobs matches each result to its job although a v2 result adds the steps it took."""
    jobs = curves.v2_jobs({"half": 0.5}, (301, 302), curves.GRID_V2)
    jobs += curves.v2_seed_jobs({"half": 0.5}, {"half": [201, 202]},
                                {m: {"half": curves.settings(m, curves.GRID_V2)[0]}
                                 for m in curves.MODELS})
    seen = []

    def worker(code, chunk, kernel):
        seen.append((kernel, len(chunk)))
        return [{**j, **_fake_runs([j], 1)[0]} for j in reversed(chunk)]

    monkeypatch.setattr(curves, "_worker", worker)
    got = curves.run_jobs(jobs, 2, curves.WORKER_V2)
    assert [{k: r[k] for k in j} for r, j in zip(got, jobs, strict=True)] == jobs
    assert all("steps" in r for r in got)
    assert sorted(seen) == [("avx2", 1), ("avx2", 1), ("default", 19), ("default", 19)]


def test_v2_refuses_to_reuse_v1_tuning_runs(capsys):
    with pytest.raises(SystemExit):
        curves.main(["--protocol", "v2", "--out", "x.json", "--tuned", "y.json"])
    assert "--tuned" in capsys.readouterr().err


def test_the_v2_worker_trains_and_scores_in_its_own_process():
    job = {"phase": "tuning", "model": "gru", "budget": "half", "cpu_budget": 0.3, "seed": 301,
           "kernel": "default", "lr": 1e-2, "warmup_share": 0.25, "dropout": None}
    (run,) = curves._worker(curves.WORKER_V2, [job], "default")
    assert {k: run[k] for k in job} == job and 0.3 <= run["cpu_s"] < 2.3
    assert set(run) - set(job) == {"steps", "cpu_s", "warmup_steps", "train_loss", "valid_bleu",
                                   "test_bleu", "valid_loss", "test_loss"}
