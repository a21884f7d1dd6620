"""Chapter 14's baseline as curves: both models tuned at each of three CPU budgets.

    python tests/baseline_curves.py --out book/data/14_baseline_curves.json   # 25 min alone

The budgets are half, one and two of the Transformer's epochs in CPU time: 146, 292 and 584
Transformer steps, and 181, 362 and 724 GRU steps. A GRU step costs 1/1.24 of a Transformer
step without dropout (100 steps of each, one thread: 74 against 92 ms on the plain kernels,
55 against 68 ms on AVX2), so these step counts buy both models the same CPU time; a
Transformer with dropout 0.1 costs about a fifth more per step, which the curves plot. Both
models train as chapter 14 trains them (``gru_tuning.Setup``: the same corpus, vocabularies,
96-pair batches, loss, AdamW and clipping, subnormals flushed), with the same schedule shape:
a linear warm-up, then the linear decay to zero of ``labformer train``'s quick recipe, which
suits short runs better than the paper's 1/sqrt (README).

1. Tuning, seed 0, plain kernels: at each budget every setting of the model's grid, scored by
   greedy BLEU on the 1000 validation pairs. The grid: peak rate (Transformer 2, 4, 8e-3; GRU
   3e-3, 1e-2, 3e-2) x warm-up share (10 % or 25 % of the run, the chapter's cap) x dropout
   (Transformer 0 or 0.1; the GRU has no dropout).
2. Each model's best setting at each budget then trains seeds 1 and 2, and at the smallest
   budget seeds 1-20 (odd seeds on the plain kernels, even ones on AVX2): the chapter trains
   that budget's pair itself (the cheapest point, about 25 s of CPU) and checks its run
   against these twenty.
3. Wall-clock seconds per step of each model's one-epoch setting at 1 and 2 threads.

Every run reports its training CPU seconds (one thread) and greedy BLEU on the validation and
the test pairs. Runs go in two worker processes, one core each (``--jobs``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BUDGETS = {"half": 0.5, "one": 1.0, "two": 2.0}  # in Transformer epochs of CPU time
COST_RATIO = 1.24  # CPU per Transformer step (no dropout) / CPU per GRU step, measured
STEPS = {"transformer": 292, "gru": round(292 * COST_RATIO)}  # one Transformer epoch of CPU
GRID = {
    "transformer": {"lr": [2e-3, 4e-3, 8e-3], "warmup_share": [0.1, 0.25], "dropout": [0.0, 0.1]},
    "gru": {"lr": [3e-3, 1e-2, 3e-2], "warmup_share": [0.1, 0.25], "dropout": [None]},
}
CHECKED = "half"  # the budget the chapter trains itself, swept over CHECKED_SEEDS
CHECKED_SEEDS = range(1, 21)

WORKER = r"""
import json, sys, time, torch
sys.path.insert(0, "tests")
from gru_tuning import Setup
from labformer.rnn import TeacherForcedRNN
from labformer.runs import subnormals_flushed
from labformer.train import TrainConfig, train
from labformer.translate import TRAIN_DEFAULTS, build_model
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

THREADS = r"""
import json, sys, time, torch
sys.path.insert(0, "tests")
from gru_tuning import Setup
from labformer.rnn import TeacherForcedRNN
from labformer.runs import subnormals_flushed
from labformer.train import TrainConfig, train
from labformer.translate import build_model
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


def _worker(code: str, jobs: list[dict[str, Any]], kernel: str) -> list[dict[str, Any]]:
    env = dict(os.environ, OMP_NUM_THREADS="1", TQDM_DISABLE="1", ATEN_CPU_CAPABILITY=kernel)
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(jobs)], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"a worker failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def run_jobs(jobs: list[dict[str, Any]], workers: int) -> list[dict[str, Any]]:
    """Each job in one of ``workers`` processes (by kernel, then in turn); results in order."""
    chunks: list[tuple[str, list[dict[str, Any]]]] = []
    for kernel in ("default", "avx2"):
        mine = [j for j in jobs if j["kernel"] == kernel]
        n = min(workers, len(mine))
        chunks += [(kernel, mine[i::n]) for i in range(n)]
    with ThreadPoolExecutor(max(1, workers)) as pool:
        done = [r for rs in pool.map(lambda c: _worker(WORKER, c[1], c[0]), chunks) for r in rs]
    found = {_key(r): r for r in done}
    return [found[_key(j)] for j in jobs]


def _key(job: dict[str, Any]) -> str:
    return json.dumps([job[k] for k in ("phase", "model", "budget", "steps", "seed", "kernel",
                                        "lr", "warmup_share", "dropout")])


def settings(model: str) -> list[dict[str, Any]]:
    g = GRID[model]
    return [{"lr": lr, "warmup_share": w, "dropout": d}
            for lr in g["lr"] for w in g["warmup_share"] for d in g["dropout"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (one core each)")
    args = parser.parse_args(argv)
    from ablation_sweep import code_version

    started = time.time()
    tuning = [{"phase": "tuning", "model": m, "budget": b, "steps": round(STEPS[m] * f),
               "seed": 0, "kernel": "default", **s}
              for m in STEPS for b, f in BUDGETS.items() for s in settings(m)]
    tuned = run_jobs(tuning, args.jobs)
    chosen = {m: {b: max((r for r in tuned if r["model"] == m and r["budget"] == b),
                         key=lambda r: r["valid_bleu"]) for b in BUDGETS} for m in STEPS}
    for m in chosen:
        for b, r in chosen[m].items():
            print(f"{m} {b}: lr {r['lr']:g}, warm-up share {r['warmup_share']}, dropout "
                  f"{r['dropout']}: valid {r['valid_bleu']:.2f}", flush=True)
    seeds = []
    for m in STEPS:
        for b in BUDGETS:
            best = {k: chosen[m][b][k] for k in ("model", "budget", "steps", "lr",
                                                 "warmup_share", "dropout")}
            for seed in (CHECKED_SEEDS if b == CHECKED else (1, 2)):
                seeds.append({"phase": "seeds", **best, "seed": seed,
                              "kernel": "default" if seed % 2 else "avx2"})
    seeded = run_jobs(seeds, args.jobs)
    wall = json.loads(subprocess.run(
        [sys.executable, "-c", THREADS, json.dumps([chosen[m]["one"] for m in STEPS])],
        cwd=ROOT, env=dict(os.environ, TQDM_DISABLE="1"), capture_output=True, text=True,
        check=True).stdout.strip().splitlines()[-1])
    data = {
        "chapter": "14_recipe_baseline",
        "what": "the recurrent baseline as curves: the Transformer and the GRU, each tuned on "
                "validation BLEU at each of three CPU budgets (half, one and two Transformer "
                "epochs), then the chosen settings over seeds; test BLEU is reported only",
        "command": "python tests/baseline_curves.py " + " ".join(argv or sys.argv[1:]),
        "code_version": code_version(),
        "duration": f"{(time.time() - started) / 60:.0f} minutes wall-clock, {args.jobs} "
                    f"worker processes",
        "cost_ratio": COST_RATIO,
        "budgets": {b: {m: round(STEPS[m] * f) for m in STEPS} for b, f in BUDGETS.items()},
        "checked_budget": CHECKED,
        "grid": GRID,
        "chosen": {m: {b: {k: r[k] for k in ("lr", "warmup_share", "dropout")}
                       for b, r in chosen[m].items()} for m in chosen},
        "wall_s_per_step": wall,
        "runs": tuned + seeded,
    }
    args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
