"""Chapter 14's baseline as curves: both models tuned at each of three CPU budgets.

    python book/sweeps/baseline_curves.py --out book/data/14_baseline_curves.json  # 38 min alone

The budgets are half, one and two of the Transformer's epochs in CPU time: 146, 292 and 584
Transformer steps, and as many GRU steps as buy the same CPU time. For the tuning runs that
count comes from a cost ratio measured at the start, in the conditions of the sweep (two
worker processes at once, one thread each, each alternating 30 steps of one model and 30 of
the other, three rounds; the median of the six ratios). Those 30 steps proved a poor guide
(the GRU's tuning runs took 10-16 % more CPU than the Transformer's), so the seeds train at
the ratio of the tuning runs' own median CPU per step. Every run stores the CPU seconds it
took; the chapter shows both models' CPU time and checks that they match within 5 %.
``--tuned FILE`` reuses the tuning runs of an earlier output and runs the seeds again. Both models
train as chapter 14 trains them (``gru_tuning.Setup``: the same corpus, vocabularies,
96-pair batches, loss, AdamW and clipping, subnormals flushed), with the same schedule shape:
a linear warm-up, then the linear decay to zero of ``labformer train``'s quick recipe, which
suits short runs better than the paper's 1/sqrt (README).

1. Tuning, seeds 101, 102 and 103 (fixed before the run, and apart from the seeds that
   decide), plain kernels: at each budget every setting of the model's grid, scored by the
   mean greedy BLEU of the three seeds on the 1000 validation pairs. The grid: peak rate
   (Transformer 2, 4, 8e-3; GRU 3e-3, 1e-2, 3e-2) x warm-up share (10 % or 25 % of the run,
   the chapter's cap). Dropout stays 0: at two epochs or less the model underfits (with 0.1
   a step also costs about a fifth more CPU).
2. Each model's best setting at each budget then trains seeds 1 and 2, and at the smallest
   budget seeds 1-20 (odd seeds on the plain kernels, even ones on AVX2): the chapter trains
   that budget's pair itself (the cheapest point, about 20 s of CPU) and checks its run
   against these twenty.
3. Wall-clock seconds per step of each model's one-epoch setting at 1 and 2 threads.

Every run reports its training CPU seconds (one thread) and greedy BLEU on the validation and
the test pairs. Runs go in two worker processes, one core each (``--jobs``).

**Protocol v2** (issue 55, registered in book/data/plans/14_baseline_curves_v2.json before it
runs; the stored 14_baseline_curves.json is protocol v1, the default, and keeps its command):

    python book/sweeps/baseline_curves.py --protocol v2 --out book/data/14_baseline_curves_v2.json

- Budgets are process CPU time, measured in the process that trains (``time.process_time``,
  one thread), as the copying task of long_range.py counts them: every run, tuning and seeds,
  both models, trains until its budget is spent (``gru_tuning.train_for_cpu``): 11, 22 and 44
  CPU seconds, about half, one and two Transformer epochs on the machine of the v1 sweep. No
  step counts, no cost ratio: the steps a run takes are what its budget bought, and are stored.
- The schedule runs in CPU time: a linear warm-up over a share of the budget (at a steady cost
  per step, that share of the run's steps), then linearly down to zero at the budget's end.
- Both models are tuned at the budget they are compared at, by the same code: at each budget
  the setting with the best mean validation BLEU of tuning seeds 301-303 (ties: the lower mean
  validation loss, then grid order). The grid: peak rate as in v1 x warm-up share 10, 25 or
  40 % (v1's Transformer chose its grid's edge, 25 %, at every budget), for both models.
- The chosen settings train seeds 201-220 at the half and the one-epoch budget (odd seeds on
  the plain kernels, even ones on AVX2) and seeds 201-202 at two epochs.
- Every run stores, beside its BLEU, its losses: validation and test cross-entropy per target
  token (teacher-forced, no smoothing) and the training loss of its last tenth of steps.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BUDGETS = {"half": 0.5, "one": 1.0, "two": 2.0}  # in Transformer epochs of CPU time
TF_STEPS = 292  # one Transformer epoch; the GRU's steps come from the measured cost ratio
GRID = {
    "transformer": {"lr": [2e-3, 4e-3, 8e-3], "warmup_share": [0.1, 0.25], "dropout": [0.0]},
    "gru": {"lr": [3e-3, 1e-2, 3e-2], "warmup_share": [0.1, 0.25], "dropout": [None]},
}
MODELS = tuple(GRID)
TUNING_SEEDS = (101, 102, 103)  # fixed in advance; the setting with the best mean wins
CHECKED = "half"  # the budget the chapter trains itself, swept over CHECKED_SEEDS
CHECKED_SEEDS = range(1, 21)

# Protocol v2 (issue 55): budgets in process CPU seconds, tuned where compared, wider warm-up.
BUDGETS_V2 = {"half": 11.0, "one": 22.0, "two": 44.0}  # CPU seconds, one thread
GRID_V2 = {
    "transformer": {"lr": [2e-3, 4e-3, 8e-3], "warmup_share": [0.1, 0.25, 0.4],
                    "dropout": [0.0]},
    "gru": {"lr": [3e-3, 1e-2, 3e-2], "warmup_share": [0.1, 0.25, 0.4], "dropout": [None]},
}
TUNING_SEEDS_V2 = (301, 302, 303)
SEEDS_V2 = {"half": list(range(201, 221)), "one": list(range(201, 221)), "two": [201, 202]}
DECIDED_V2 = ("half", "one")  # the budgets whose 20 paired seeds decide a verdict each


def kernel_of(seed: int) -> str:
    """Odd seeds on the plain kernels, even ones on AVX2."""
    return "default" if seed % 2 else "avx2"

CALIBRATE = r"""
import json, sys, time, torch
sys.path.insert(0, "book/sweeps")
from gru_tuning import Setup
from labformer.rnn import TeacherForcedRNN
from labformer.app.runs import subnormals_flushed
from labformer.train import TrainConfig, train
from labformer.app.translate import build_model
torch.set_num_threads(1)
setup = Setup()
ratios = []
for rnd in range(3):
    cpu = {}
    for model in ("transformer", "gru"):
        net = (build_model(setup.sv, setup.tv, seed=rnd, dropout=0.0) if model == "transformer"
               else TeacherForcedRNN(setup.gru(rnd)))
        config = TrainConfig(epochs=1, lr=1e-3, warmup_steps=5, decay="linear")
        batches = setup.batches(rnd, 35)
        with subnormals_flushed():
            train(net, batches[:5], config, device="cpu", progress=False)  # warm-up
            start = time.process_time()
            train(net, batches[5:], config, device="cpu", progress=False)
            cpu[model] = time.process_time() - start
    ratios.append(cpu["transformer"] / cpu["gru"])
print(json.dumps(ratios))
"""

WORKER = r"""
import json, sys, time, torch
sys.path.insert(0, "book/sweeps")
from gru_tuning import Setup
from labformer.rnn import TeacherForcedRNN
from labformer.app.runs import subnormals_flushed
from labformer.train import TrainConfig, train
from labformer.app.translate import TRAIN_DEFAULTS, build_model
torch.set_num_threads(1)
setup = Setup()
for job in json.loads(sys.argv[1]):
    steps, seed = job["steps"], job["seed"]
    if job["model"] == "transformer":
        model = build_model(setup.sv, setup.tv, seed=seed, dropout=job["dropout"])
        net = model
    else:
        model = setup.gru(seed)
        net = TeacherForcedRNN(model)
    config = TrainConfig(epochs=1, lr=job["lr"], warmup_steps=max(1, round(
        job["warmup_share"] * steps)), decay="linear", betas=TRAIN_DEFAULTS.betas,
        weight_decay=TRAIN_DEFAULTS.weight_decay,
        label_smoothing=TRAIN_DEFAULTS.label_smoothing, clip_norm=TRAIN_DEFAULTS.clip_norm,
        seed=seed)
    with subnormals_flushed():
        start = time.process_time()
        train(net, setup.batches(seed, steps), config, device="cpu", progress=False)
        cpu = time.process_time() - start
    print(json.dumps({**job, "cpu_s": round(cpu, 2),
                      "valid_bleu": round(setup.bleu(model, setup.corpus.valid), 3),
                      "test_bleu": round(setup.bleu(model, setup.corpus.test), 3)}), flush=True)
"""

WORKER_V2 = r"""
import json, sys, torch
sys.path.insert(0, "book/sweeps")
from gru_tuning import Setup, run_cpu
torch.set_num_threads(1)
setup = Setup()
for job in json.loads(sys.argv[1]):
    print(json.dumps({**job, **run_cpu(setup, job["model"], job["seed"], job["lr"],
                                       job["warmup_share"], job["cpu_budget"],
                                       job["dropout"])}), flush=True)
"""

THREADS = r"""
import json, sys, time, torch
sys.path.insert(0, "book/sweeps")
from gru_tuning import Setup
from labformer.rnn import TeacherForcedRNN
from labformer.app.runs import subnormals_flushed
from labformer.train import TrainConfig, train
from labformer.app.translate import build_model
setup = Setup()
out = {}
for job in json.loads(sys.argv[1]):
    for threads in (1, 2):
        torch.set_num_threads(threads)
        if job["model"] == "transformer":
            net = build_model(setup.sv, setup.tv, seed=0, dropout=job["dropout"])
        else:
            net = TeacherForcedRNN(setup.gru(0))
        config = TrainConfig(epochs=1, lr=job["lr"], warmup_steps=5, decay="linear")
        batches = setup.batches(0, 40)
        with subnormals_flushed():
            train(net, batches[:5], config, device="cpu", progress=False)  # warm-up
            start = time.perf_counter()
            train(net, batches[5:], config, device="cpu", progress=False)
            out[f"{job['model']}_{threads}"] = (time.perf_counter() - start) / 35
print(json.dumps(out))
"""


def cost_ratio(workers: int) -> tuple[float, list[float]]:
    """CPU per Transformer step / CPU per GRU step, measured in ``workers`` processes at once
    (as the sweep runs): the median of their ratios, and the ratios."""
    env = dict(os.environ, OMP_NUM_THREADS="1", TQDM_DISABLE="1", ATEN_CPU_CAPABILITY="default")
    procs = [subprocess.Popen([sys.executable, "-c", CALIBRATE], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(max(1, workers))]
    ratios: list[float] = []
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"the cost measurement failed:\n{err[-3000:]}")
        ratios += json.loads(out.strip().splitlines()[-1])
    return statistics.median(ratios), ratios


def _worker(code: str, jobs: list[dict[str, Any]], kernel: str | None) -> list[dict[str, Any]]:
    """Run ``code`` (it reads the jobs from argv[1]) in a one-thread process on ``kernel`` (None:
    the machine's own); the JSON lines it prints."""
    env = dict(os.environ, OMP_NUM_THREADS="1", TQDM_DISABLE="1")
    if kernel is not None:
        env["ATEN_CPU_CAPABILITY"] = kernel
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(jobs)], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"a worker failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def run_jobs(jobs: list[dict[str, Any]], workers: int, code: str = WORKER
             ) -> list[dict[str, Any]]:
    """Each job in one of ``workers`` processes (by kernel, then in turn); results in order."""
    chunks: list[tuple[str, list[dict[str, Any]]]] = []
    for kernel in ("default", "avx2"):
        mine = [j for j in jobs if j["kernel"] == kernel]
        n = min(workers, len(mine))
        chunks += [(kernel, mine[i::n]) for i in range(n)]
    with ThreadPoolExecutor(max(1, workers)) as pool:
        done = [r for rs in pool.map(lambda c: _worker(code, c[1], c[0]), chunks) for r in rs]
    found = {_key(r): r for r in done}
    return [found[_key(j)] for j in jobs]


def _key(job: dict[str, Any]) -> str:
    """What names a job, in its result too: v1's step count, or v2's CPU budget (a v2 result
    adds the steps its budget bought, which the job did not name)."""
    size = "cpu_budget" if "cpu_budget" in job else "steps"
    return json.dumps([job[k] for k in ("phase", "model", "budget", size, "seed", "kernel",
                                        *SETTING)])


SETTING = ("lr", "warmup_share", "dropout")


def choose(runs: list[dict[str, Any]], model: str, budget: str,
           grid: dict[str, Any] | None = None) -> dict[str, Any]:
    """The setting whose tuning runs at ``budget`` have the best mean validation BLEU (v1: the
    first in grid order on a tie; runs that record a ``valid_loss``, v2: the lower mean
    validation loss on a tie, then grid order), with that mean as ``valid_bleu``."""
    scores = []
    for setting in settings(model, grid):
        mine = [r for r in runs if r["phase"] == "tuning" and r["model"] == model
                and r["budget"] == budget and all(r[k] == setting[k] for k in SETTING)]
        if mine:
            score = {**setting, "valid_bleu": statistics.mean(r["valid_bleu"] for r in mine),
                     "n": len(mine)}
            if all("valid_loss" in r for r in mine):
                score["valid_loss"] = statistics.mean(r["valid_loss"] for r in mine)
            scores.append(score)
    if not scores:
        raise ValueError(f"no tuning runs of {model} at the {budget} budget")
    return max(scores, key=lambda s: (s["valid_bleu"], -s.get("valid_loss", 0.0)))


def settings(model: str, grid: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    g = (grid or GRID)[model]
    return [{"lr": lr, "warmup_share": w, "dropout": d}
            for lr in g["lr"] for w in g["warmup_share"] for d in g["dropout"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (one core each)")
    parser.add_argument("--tuned", type=Path, default=None,
                        help="a file this script wrote: reuse its tuning runs and cost ratio, "
                             "run the seeds again (protocol v1 only)")
    parser.add_argument("--protocol", choices=("v1", "v2"), default="v1",
                        help="v1: the stored sweep's steps scaled by a cost ratio; v2: budgets "
                             "in process CPU time, tuned where compared (issue 55)")
    args = parser.parse_args(argv)
    from ablation_sweep import code_version

    if args.protocol == "v2":
        if args.tuned is not None:
            parser.error("--tuned reuses a v1 sweep's tuning runs: protocol v2 tunes afresh")
        return main_v2(args, argv)

    started = time.time()
    partial = args.out.with_suffix(".partial.jsonl")  # each phase's runs, kept on a crash
    tuning_note = "tuning runs from this command"
    if args.tuned is None:
        ratio, ratios = cost_ratio(args.jobs)
        steps = {"transformer": TF_STEPS, "gru": round(TF_STEPS * ratio)}
        print(f"cost ratio {ratio:.3f} (from {', '.join(f'{r:.3f}' for r in ratios)}): "
              f"{steps['gru']} GRU steps per Transformer epoch", flush=True)
        tuning = [{"phase": "tuning", "model": m, "budget": b, "steps": round(steps[m] * f),
                   "seed": seed, "kernel": "default", **s}
                  for m in MODELS for b, f in BUDGETS.items() for s in settings(m)
                  for seed in TUNING_SEEDS]
        tuned = run_jobs(tuning, args.jobs)
        partial.write_text("".join(json.dumps(r) + "\n" for r in tuned), encoding="utf-8")
    else:
        before = json.loads(args.tuned.read_text(encoding="utf-8"))
        ratio, ratios = before["cost_ratio"], before["cost_ratios"]
        tuned = [r for r in before["runs"] if r["phase"] == "tuning"]
        tuning_note = (f"tuning runs from `{before['command']}` ({before['duration']}, "
                       f"code {before['code_version']})")
    # The seeds' budgets come from the tuning runs' own CPU per step (the median over each
    # model's runs): the short measurement at the start only sizes the tuning runs.
    per_step = {m: statistics.median(r["cpu_s"] / r["steps"] for r in tuned if r["model"] == m)
                for m in MODELS}
    seed_ratio = per_step["transformer"] / per_step["gru"]
    steps = {"transformer": TF_STEPS, "gru": round(TF_STEPS * seed_ratio)}
    print(f"the tuning runs' cost ratio {seed_ratio:.3f}: {steps['gru']} GRU steps per "
          "Transformer epoch for the seeds", flush=True)
    chosen = {m: {b: choose(tuned, m, b) for b in BUDGETS} for m in MODELS}
    for m in chosen:
        for b, best in chosen[m].items():
            print(f"{m} {b}: lr {best['lr']:g}, warm-up share {best['warmup_share']}: mean "
                  f"valid {best['valid_bleu']:.2f}", flush=True)
    seeds = []
    for m in MODELS:
        for b, f in BUDGETS.items():
            best = {"model": m, "budget": b, "steps": round(steps[m] * f),
                    **{k: chosen[m][b][k] for k in SETTING}}
            for seed in (CHECKED_SEEDS if b == CHECKED else (1, 2)):
                seeds.append({"phase": "seeds", **best, "seed": seed,
                              "kernel": "default" if seed % 2 else "avx2"})
    seeded = run_jobs(seeds, args.jobs)
    with partial.open("a", encoding="utf-8") as f:
        f.write("".join(json.dumps(r) + "\n" for r in seeded))
    wall = json.loads(subprocess.run(
        [sys.executable, "-c", THREADS, json.dumps([{**chosen[m]["one"], "model": m}
                                                     for m in MODELS])],
        cwd=ROOT, env=dict(os.environ, TQDM_DISABLE="1"), capture_output=True, text=True,
        check=True).stdout.strip().splitlines()[-1])
    data = {
        "chapter": "14_recipe_baseline",
        "what": "the recurrent baseline as curves: the Transformer and the GRU, each tuned on "
                "the mean validation BLEU of three seeds at each of three CPU budgets (half, "
                "one and two Transformer epochs), then the chosen settings over seeds; test "
                "BLEU is reported only",
        "command": "python book/sweeps/baseline_curves.py " + " ".join(argv or sys.argv[1:]),
        "code_version": code_version(),
        "tuning": tuning_note,
        "duration": f"{(time.time() - started) / 60:.0f} minutes wall-clock, {args.jobs} "
                    f"worker processes",
        "cost_ratio": round(ratio, 4),
        "cost_ratios": [round(r, 4) for r in ratios],
        "seed_cost_ratio": round(seed_ratio, 4),
        "tuning_seeds": list(TUNING_SEEDS),
        "budgets": {b: {m: round(steps[m] * f) for m in MODELS} for b, f in BUDGETS.items()},
        "checked_budget": CHECKED,
        "grid": GRID,
        "chosen": {m: {b: {k: r[k] for k in SETTING} for b, r in chosen[m].items()}
                   for m in chosen},
        "wall_s_per_step": wall,
        "runs": tuned + seeded,
    }
    args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    partial.unlink(missing_ok=True)
    print(f"written to {args.out}")
    return 0


def v2_jobs(budgets: dict[str, float], tuning_seeds: Any, grid: dict[str, Any]
            ) -> list[dict[str, Any]]:
    """Protocol v2's tuning jobs: every setting of each model's grid at every budget on every
    tuning seed (plain kernels), the two models alternating so that both share the load."""
    grids = {m: settings(m, grid) for m in MODELS}
    jobs = []
    for b, cpu in budgets.items():
        for i in range(max(map(len, grids.values()))):
            for seed in tuning_seeds:
                jobs += [{"phase": "tuning", "model": m, "budget": b, "cpu_budget": cpu,
                          "seed": seed, "kernel": "default", **grids[m][i]}
                         for m in MODELS if i < len(grids[m])]
    return jobs


def v2_seed_jobs(budgets: dict[str, float], seeds: dict[str, list[int]],
                 chosen: dict[str, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The chosen setting of each model at each budget, on that budget's seeds, paired."""
    return [{"phase": "seeds", "model": m, "budget": b, "cpu_budget": cpu, "seed": seed,
             "kernel": kernel_of(seed), **{k: chosen[m][b][k] for k in SETTING}}
            for b, cpu in budgets.items() for seed in seeds[b] for m in MODELS]


def main_v2(args: argparse.Namespace, argv: list[str] | None) -> int:
    """Protocol v2: tune both models at each CPU budget, then train the seeds (docstring)."""
    from ablation_sweep import code_version

    started = time.time()
    partial = args.out.with_suffix(".partial.jsonl")  # each phase's runs, kept on a crash
    tuned = run_jobs(v2_jobs(BUDGETS_V2, TUNING_SEEDS_V2, GRID_V2), args.jobs,
                     WORKER_V2)
    partial.write_text("".join(json.dumps(r) + "\n" for r in tuned), encoding="utf-8")
    best = {m: {b: choose(tuned, m, b, GRID_V2) for b in BUDGETS_V2} for m in MODELS}
    for m in best:
        for b, c in best[m].items():
            print(f"{m} {b}: lr {c['lr']:g}, warm-up share {c['warmup_share']}: mean valid "
                  f"BLEU {c['valid_bleu']:.2f}, loss {c['valid_loss']:.3f}", flush=True)
    chosen = {m: {b: {k: c[k] for k in SETTING} for b, c in best[m].items()} for m in MODELS}
    seeded = run_jobs(v2_seed_jobs(BUDGETS_V2, SEEDS_V2, chosen), args.jobs, WORKER_V2)
    with partial.open("a", encoding="utf-8") as f:
        f.write("".join(json.dumps(r) + "\n" for r in seeded))
    wall = json.loads(subprocess.run(
        [sys.executable, "-c", THREADS, json.dumps([{**chosen[m]["one"], "model": m}
                                                     for m in MODELS])],
        cwd=ROOT, env=dict(os.environ, TQDM_DISABLE="1"), capture_output=True, text=True,
        check=True).stdout.strip().splitlines()[-1])
    steps = {m: {b: statistics.median(r["steps"] for r in seeded
                                      if r["model"] == m and r["budget"] == b)
                 for b in BUDGETS_V2} for m in MODELS}
    data = {
        "chapter": "14_recipe_baseline",
        "protocol": "v2",
        "what": "the recurrent baseline at equal process CPU time (protocol v2, issue 55): the "
                "Transformer and the GRU each trained until 11, 22 or 44 CPU seconds of its own "
                "process are spent, the schedule in CPU time, each tuned at every budget on the "
                "mean validation BLEU of seeds 301-303, then the chosen settings over seeds "
                "201-220 (201-202 at 44 s); test BLEU and losses reported beside",
        "command": "python book/sweeps/baseline_curves.py " + " ".join(argv or sys.argv[1:]),
        "code_version": code_version(),
        "cpu": _cpu_name(),
        "duration": f"{(time.time() - started) / 60:.0f} minutes wall-clock, {args.jobs} "
                    f"worker processes",
        "budgets_cpu_s": BUDGETS_V2,
        "tuning_seeds": list(TUNING_SEEDS_V2),
        "seeds": SEEDS_V2,
        "decided_budgets": list(DECIDED_V2),
        "checked_budget": CHECKED,  # the budget the chapter trains its own pair at
        "grid": GRID_V2,
        "quantities": {"valid_bleu": "greedy corpus BLEU on the 1000 validation pairs",
                       "test_bleu": "greedy corpus BLEU on the 1000 test pairs",
                       "valid_loss": "teacher-forced cross-entropy per target token (nats, "
                                     "no smoothing), validation pairs",
                       "test_loss": "the same on the test pairs",
                       "train_loss": "mean training loss (label smoothing 0.1) of the run's "
                                     "last tenth of steps",
                       "steps": "optimiser steps the budget bought",
                       "warmup_steps": "steps taken during the warm-up",
                       "cpu_s": "training CPU seconds of the run's process"},
        "chosen": chosen,
        "median_steps": steps,
        "wall_s_per_step": wall,
        "runs": tuned + seeded,
    }
    args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    partial.unlink(missing_ok=True)
    print(f"written to {args.out}")
    return 0


def _cpu_name() -> str:
    from long_range import _cpu_name as name

    return name()


if __name__ == "__main__":
    sys.exit(main())
