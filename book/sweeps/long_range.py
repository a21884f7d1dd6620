"""Where the Transformer wins, measured: step timings against length, and a long-range task.

    python book/sweeps/long_range.py timings --out book/data/14_step_timings.json  # 5 min, idle
    python book/sweeps/long_range.py sweep --out book/data/14_long_copy.json       # 35 min, 2 cores

**Timings.** Wall-clock seconds of one training step (forward, backward, AdamW) on a batch of
32 sequences, source and target each L tokens long, and of translating one sentence of L
tokens greedily (L tokens produced, the KV cache on for the Transformer), for L = 8 to 256,
at 1 and 2 threads, for chapter 14's two models: the translator's Transformer
(``MODEL_DEFAULTS``, dropout 0) and the GRU with additive attention (128 wide). Each
measurement is repeated three times, interleaved; the chapter reads their median.

**The long-range task.** Copying: the source is a sequence of 50 to 100 random digits, the
target the same digits. Both models get the same CPU time for training, counted by the
process clock (``time.process_time``, one thread): each trains batch after batch (32
sequences, fresh ones every step, from its seed) until its budget is spent, at a rate warmed
up over the first 100 steps and then held. A held-out set of 200 sequences (its own seed) is
then copied greedily; the score is the share of tokens copied right (position by position,
up to the reference's EOS), and of sequences copied exactly.

``tune``: each model's peak rate among three, on the mean token accuracy of seeds 101-103
(fixed in advance). ``sweep``: tunes, then the tuned rates train seeds 1-20, both models on
the same seeds; ``--rates`` skips the tuning.

**Protocol v2** (issue 55, registered in book/data/plans/14_long_copy_v2.json before it runs;
the stored 14_long_copy.json is v1, the default, and keeps its command):

    python book/sweeps/long_range.py sweep --protocol v2 --out book/data/14_long_copy_v2.json

- the warm-up is a share of each run's steps, 10 %: the rate rises linearly over the first
  tenth of the run's CPU budget (at a steady cost per step, its first tenth of steps; the
  steps taken during it are stored), not over a fixed 100 steps, which were most of the GRU's
  104-123 steps in v1;
- the GRU's rates are widened both ways, 3e-4 to 3e-2 (v1 chose 1e-3, the lowest of 1e-3,
  3e-3 and 1e-2, while its highest rate had the lower loss); the Transformer's stay 2e-3,
  4e-3 and 8e-3;
- each run is scored on two held-out sets: a validation set (200 sequences, seed 20,000),
  on which the tuning chooses (the best mean token accuracy of tuning seeds 304-306; ties:
  the lower mean validation loss), and the test set of v1 (seed 10,000), which the verdict
  reads; on both the token accuracy, the exact copies and the loss (teacher-forced
  cross-entropy per target token), and the training loss of the run's last tenth of steps;
- the chosen rates train seeds 221-240, both models on the same seeds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from labformer.app.runs import subnormals_flushed
from labformer.app.translate import MODEL_DEFAULTS
from labformer.data.batching import Batch
from labformer.decoding import greedy_decode
from labformer.rnn import Seq2SeqRNN, TeacherForcedRNN
from labformer.special import BOS_ID, EOS_ID, PAD_ID
from labformer.transformer import Transformer, TransformerConfig

ROOT = Path(__file__).resolve().parents[2]
MODELS = ("transformer", "gru")
DIGITS = 10
VOCAB = 4 + DIGITS  # the four special ids, then the digits
LENGTHS = (50, 100)  # a copied sequence's shortest and longest length
BATCH = 32
WARMUP = 100
CPU_BUDGET = 60.0  # training CPU seconds per run, one thread
HELD_OUT = 200
RATES = {"transformer": (2e-3, 4e-3, 8e-3), "gru": (1e-3, 3e-3, 1e-2)}
TUNING_SEEDS = (101, 102, 103)
SWEEP_SEEDS = range(1, 21)
# protocol v2 (issue 55)
WARMUP_SHARE_V2 = 0.1  # of each run's CPU budget, so of its steps
RATES_V2 = {"transformer": (2e-3, 4e-3, 8e-3), "gru": (3e-4, 1e-3, 3e-3, 1e-2, 3e-2)}
TUNING_SEEDS_V2 = (304, 305, 306)
SWEEP_SEEDS_V2 = range(221, 241)
VALID_SEED, TEST_SEED = 20_000, 10_000  # the held-out sets' generators
TIMING_LENGTHS = (8, 16, 32, 64, 128, 256)
TIMING_REPEATS = 3


def build(model: str, seed: int, max_len: int = 300) -> torch.nn.Module:
    """One of the two models, with ``seed``'s initial weights."""
    torch.manual_seed(seed)
    if model == "transformer":
        config = TransformerConfig(src_vocab_size=VOCAB, tgt_vocab_size=VOCAB,
                                   **{**MODEL_DEFAULTS, "dropout": 0.0, "max_len": max_len})
        return Transformer(config)
    return Seq2SeqRNN(VOCAB, VOCAB, emb_dim=128, hidden_dim=128, attention="additive",
                      max_len=max_len)


def copy_batch(gen: torch.Generator, size: int = BATCH, lengths: tuple[int, int] = LENGTHS
               ) -> Batch:
    """``size`` random digit sequences and their copies, right-padded."""
    lens = torch.randint(lengths[0], lengths[1] + 1, (size,), generator=gen)
    width = int(lens.max())
    src = torch.full((size, width), PAD_ID)
    tgt_in = torch.full((size, width + 1), PAD_ID)
    tgt_out = torch.full((size, width + 1), PAD_ID)
    for row, n in enumerate(lens.tolist()):
        seq = torch.randint(4, VOCAB, (n,), generator=gen)
        src[row, :n] = seq
        tgt_in[row, 0], tgt_in[row, 1:n + 1] = BOS_ID, seq
        tgt_out[row, :n], tgt_out[row, n] = seq, EOS_ID
    return Batch(src, tgt_in, tgt_out, torch.arange(size))


def logits_of(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
    if isinstance(model, Seq2SeqRNN):
        return TeacherForcedRNN(model)(batch.src, batch.tgt_in)
    return model(batch.src, batch.tgt_in)


def warmup_factor(steps: int, spent: float, cpu_budget: float,
                  warmup_share: float | None) -> float:
    """The rate's multiplier at the step after ``steps`` steps and ``spent`` CPU seconds: v1
    (``warmup_share`` None) rises over the first WARMUP steps; v2 over the first
    ``warmup_share`` of the CPU budget (at a steady cost per step, that share of the run's
    steps), from at least 1e-3 so that no step is wasted at rate 0; then held."""
    if warmup_share is None:
        return min(1.0, (steps + 1) / WARMUP)
    return max(1e-3, min(1.0, spent / (warmup_share * cpu_budget)))


def train_for(model: torch.nn.Module, seed: int, lr: float, cpu_budget: float,
              warmup_share: float | None = None) -> dict[str, Any]:
    """Train until ``cpu_budget`` process-clock seconds are spent; the steps and seconds (and
    with ``warmup_share``, protocol v2, the steps of the warm-up and the mean training loss of
    the last tenth of steps)."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
    model.train()
    steps, warm, losses, start = 0, 0, [], time.process_time()
    with subnormals_flushed():
        while (spent := time.process_time() - start) < cpu_budget:
            batch = copy_batch(gen)
            factor = warmup_factor(steps, spent, cpu_budget, warmup_share)
            warm += factor < 1.0
            for group in opt.param_groups:
                group["lr"] = lr * factor
            logits = logits_of(model, batch)
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, VOCAB), batch.tgt_out.reshape(-1), ignore_index=PAD_ID)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            steps += 1
            losses.append(float(loss.detach()))
    out = {"steps": steps, "cpu_s": round(time.process_time() - start, 2),
           "last_loss": round(losses[-1], 4)}
    if warmup_share is not None:
        tail = losses[-max(1, len(losses) // 10):]
        out.update(warmup_steps=warm, train_loss=round(statistics.mean(tail), 4))
    return out


@torch.no_grad()
def held_out_loss(model: torch.nn.Module, seed: int) -> float:
    """Teacher-forced cross-entropy per target token (nats) on the HELD_OUT sequences of
    ``seed``: the loss beside the accuracy."""
    model.eval()
    batch = copy_batch(torch.Generator().manual_seed(seed), HELD_OUT)
    logits = logits_of(model, batch)
    return round(float(torch.nn.functional.cross_entropy(
        logits.reshape(-1, VOCAB), batch.tgt_out.reshape(-1), ignore_index=PAD_ID)), 4)


@torch.no_grad()
def score(model: torch.nn.Module, seed: int = TEST_SEED) -> dict[str, float]:
    """Greedy copies of HELD_OUT sequences: the share copied exactly, and of tokens right."""
    model.eval()
    batch = copy_batch(torch.Generator().manual_seed(seed), HELD_OUT)
    width = batch.tgt_out.shape[1]
    if isinstance(model, Seq2SeqRNN):
        out, _ = model.greedy_decode(batch.src, max_len=width)
    else:
        out = greedy_decode(model, batch.src, max_len=width)
    got = torch.full_like(batch.tgt_out, PAD_ID)
    got[:, :out.shape[1]] = out[:, :width]
    real = batch.tgt_out != PAD_ID
    right = (got == batch.tgt_out) | ~real
    return {"exact": round(100 * float(right.all(dim=1).float().mean()), 2),
            "token_acc": round(100 * float(((got == batch.tgt_out) & real).sum()
                                           / real.sum()), 2)}


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    model = build(job["model"], job["seed"])
    share = job.get("warmup_share")  # protocol v2's jobs have one
    trained = train_for(model, job["seed"], job["lr"], job["cpu_budget"], share)
    if share is None:
        return {**job, **trained, **score(model)}
    valid = {f"valid_{k}": v for k, v in score(model, VALID_SEED).items()}
    return {**job, **trained, **valid, "valid_loss": held_out_loss(model, VALID_SEED),
            **score(model, TEST_SEED), "test_loss": held_out_loss(model, TEST_SEED)}


WORKER = ("import json, sys, torch; sys.path.insert(0, 'book/sweeps'); torch.set_num_threads(1)\n"
          "import long_range as lr\n"
          "for job in json.loads(sys.argv[1]):\n"
          "    print(json.dumps(lr.run_one(job)), flush=True)\n")


def _worker(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from baseline_curves import _worker as run_worker  # one process's jobs, JSON lines back

    return run_worker(WORKER, jobs, None)


def run_jobs(jobs: list[dict[str, Any]], workers: int) -> list[dict[str, Any]]:
    chunks = [jobs[i::workers] for i in range(workers) if jobs[i::workers]]
    with ThreadPoolExecutor(len(chunks)) as pool:
        return [r for rs in pool.map(_worker, chunks) for r in rs]


def best_rates(tuned: list[dict[str, Any]], rates: dict[str, tuple[float, ...]] | None = None
               ) -> dict[str, float]:
    """Each model's rate with the best mean token accuracy (then exact-copy share): v1. With
    ``rates`` (protocol v2): the best mean validation token accuracy, then the lower mean
    validation loss, then the grid's order."""
    out = {}
    for m in MODELS:
        def mean(lr: float, key: str, m: str = m) -> float:
            return statistics.mean(r[key] for r in tuned if r["model"] == m and r["lr"] == lr)
        if rates is None:
            out[m] = max(RATES[m], key=lambda lr: (mean(lr, "token_acc"), mean(lr, "exact")))
        else:
            grid = rates[m]
            out[m] = max(grid, key=lambda lr: (mean(lr, "valid_token_acc"),
                                               -mean(lr, "valid_loss"), -grid.index(lr)))
    return out


# ------------------------------------------------------------------------------- timings
@torch.no_grad()
def _translate_seconds(model: torch.nn.Module, length: int) -> float:
    src = copy_batch(torch.Generator().manual_seed(length), 1, (length, length)).src
    model.eval()
    start = time.perf_counter()
    if isinstance(model, Seq2SeqRNN):
        model.greedy_decode(src, eos_id=-1, max_len=length)
    else:
        greedy_decode(model, src, max_len=length, eos_id=-1)
    return time.perf_counter() - start


def _step_seconds(model: torch.nn.Module, length: int, steps: int = 3) -> float:
    gen = torch.Generator().manual_seed(length)
    batches = [copy_batch(gen, BATCH, (length, length)) for _ in range(steps + 1)]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model.train()
    times = []
    for batch in batches:
        start = time.perf_counter()
        logits = logits_of(model, batch)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, VOCAB), batch.tgt_out.reshape(-1), ignore_index=PAD_ID)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])  # the first step warms the kernels up


def timings() -> list[dict[str, Any]]:
    rows = []
    with subnormals_flushed():
        for repeat in range(TIMING_REPEATS):
            for threads in (1, 2):
                torch.set_num_threads(threads)
                for length in TIMING_LENGTHS:
                    for m in MODELS:
                        model = build(m, 0)
                        rows.append({"model": m, "length": length, "threads": threads,
                                     "repeat": repeat,
                                     "step_s": round(_step_seconds(model, length), 5),
                                     "translate_s": round(_translate_seconds(model, length),
                                                          5)})
                        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("timings", "tune", "sweep"))
    parser.add_argument("--out", type=Path, help="the JSON file to write")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (one core each)")
    parser.add_argument("--rates", type=float, nargs=2, metavar=("TRANSFORMER", "GRU"),
                        help="sweep: the tuned peak rates (default: tune first)")
    parser.add_argument("--protocol", choices=("v1", "v2"), default="v1",
                        help="tune/sweep: v1, the stored sweep's; v2, the warm-up a share of "
                             "each run's steps, the GRU's rates widened, losses (issue 55)")
    args = parser.parse_args(argv)
    from ablation_sweep import code_version

    started = time.time()
    common = {"command": "python book/sweeps/long_range.py " + " ".join(argv or sys.argv[1:]),
              "code_version": code_version()}
    if args.what == "timings":
        data: dict[str, Any] = {
            "what": "wall-clock seconds per training step (32 sequences of L tokens each side)"
                    " and per greedy translation of one L-token sentence, both models, 1 and "
                    "2 threads", **common, "cpu": _cpu_name(), "batch": BATCH,
            "repeats": TIMING_REPEATS, "timings": timings()}
    elif args.protocol == "v2":
        data = sweep_v2(args, common)
    else:
        tuned = [] if args.rates else run_jobs(
            [{"phase": "tuning", "model": m, "lr": lr, "seed": s, "cpu_budget": CPU_BUDGET}
             for m in MODELS for lr in RATES[m] for s in TUNING_SEEDS], args.jobs)
        rates = dict(zip(MODELS, args.rates, strict=True)) if args.rates else best_rates(tuned)
        print(f"tuned rates: {rates}", flush=True)
        runs = tuned
        if args.what == "sweep":
            runs = tuned + run_jobs([{"phase": "seeds", "model": m, "lr": rates[m], "seed": s,
                                      "cpu_budget": CPU_BUDGET}
                                     for s in SWEEP_SEEDS for m in MODELS], args.jobs)
        data = {"what": "copying 50-100 random digits after the same CPU time of training: "
                        "each model's rate tuned on seeds 101-103, then seeds 1-20",
                **common, "cpu_budget_s": CPU_BUDGET, "lengths": LENGTHS, "batch": BATCH,
                "warmup_steps": WARMUP, "held_out": HELD_OUT, "rates": RATES,
                "tuning_seeds": list(TUNING_SEEDS), "chosen": rates, "runs": runs}
    data["duration"] = f"{(time.time() - started) / 60:.0f} minutes wall-clock"
    if args.out:
        args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"written to {args.out}")
    return 0


def sweep_v2(args: argparse.Namespace, common: dict[str, str]) -> dict[str, Any]:
    """``tune`` or ``sweep`` under protocol v2 (the module's docstring)."""
    job = {"cpu_budget": CPU_BUDGET, "warmup_share": WARMUP_SHARE_V2}
    tuned = [] if args.rates else run_jobs(
        [{"phase": "tuning", "model": m, "lr": lr, "seed": s, **job}
         for s in TUNING_SEEDS_V2 for i in range(max(map(len, RATES_V2.values())))
         for m in MODELS for lr in RATES_V2[m][i:i + 1]], args.jobs)
    rates = (dict(zip(MODELS, args.rates, strict=True)) if args.rates
             else best_rates(tuned, RATES_V2))
    print(f"tuned rates: {rates}", flush=True)
    runs = tuned
    if args.what == "sweep":
        # the models' order alternates from seed to seed, so that each worker trains both
        runs = tuned + run_jobs([{"phase": "seeds", "model": m, "lr": rates[m], "seed": s,
                                  **job} for s in SWEEP_SEEDS_V2
                                 for m in (MODELS if s % 2 else MODELS[::-1])], args.jobs)
    return {"what": "copying 50-100 random digits after the same CPU time of training "
                    "(protocol v2, issue 55): the warm-up 10 % of each run's budget, each "
                    "model's rate tuned on the validation set for seeds 304-306, then seeds "
                    "221-240 scored on the test set; losses beside the accuracies",
            **common, "protocol": "v2", "cpu": _cpu_name(), "cpu_budget_s": CPU_BUDGET,
            "lengths": LENGTHS, "batch": BATCH, "warmup_share": WARMUP_SHARE_V2,
            "held_out": HELD_OUT, "valid_seed": VALID_SEED, "test_seed": TEST_SEED,
            "rates": RATES_V2, "tuning_seeds": list(TUNING_SEEDS_V2),
            "seeds": list(SWEEP_SEEDS_V2),
            "quantities": {
                "token_acc": "test set: share of tokens copied right (%)",
                "exact": "test set: share of sequences copied exactly (%)",
                "test_loss": "test set: teacher-forced cross-entropy per target token (nats)",
                "valid_token_acc": "validation set: token accuracy (%), the tuning criterion",
                "valid_exact": "validation set: exact copies (%)",
                "valid_loss": "validation set: teacher-forced cross-entropy per token (nats)",
                "train_loss": "mean training loss of the run's last tenth of steps",
                "steps": "optimiser steps the budget bought",
                "warmup_steps": "steps taken during the warm-up",
                "cpu_s": "training CPU seconds of the run's process"},
            "chosen": rates, "runs": runs}


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or platform.machine()


if __name__ == "__main__":
    sys.exit(main())
