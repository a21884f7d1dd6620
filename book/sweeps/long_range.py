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


def train_for(model: torch.nn.Module, seed: int, lr: float, cpu_budget: float
              ) -> dict[str, Any]:
    """Train until ``cpu_budget`` process-clock seconds are spent; the steps and seconds."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
    model.train()
    steps, start = 0, time.process_time()
    with subnormals_flushed():
        while time.process_time() - start < cpu_budget:
            batch = copy_batch(gen)
            for group in opt.param_groups:
                group["lr"] = lr * min(1.0, (steps + 1) / WARMUP)
            logits = logits_of(model, batch)
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, VOCAB), batch.tgt_out.reshape(-1), ignore_index=PAD_ID)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            steps += 1
    return {"steps": steps, "cpu_s": round(time.process_time() - start, 2),
            "last_loss": round(float(loss.detach()), 4)}


@torch.no_grad()
def score(model: torch.nn.Module, seed: int = 10_000) -> dict[str, float]:
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
    trained = train_for(model, job["seed"], job["lr"], job["cpu_budget"])
    return {**job, **trained, **score(model)}


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


def best_rates(tuned: list[dict[str, Any]]) -> dict[str, float]:
    """Each model's rate with the best mean token accuracy (then exact-copy share)."""
    out = {}
    for m in MODELS:
        def mean(lr: float, key: str, m: str = m) -> float:
            return statistics.mean(r[key] for r in tuned if r["model"] == m and r["lr"] == lr)
        out[m] = max(RATES[m], key=lambda lr: (mean(lr, "token_acc"), mean(lr, "exact")))
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
