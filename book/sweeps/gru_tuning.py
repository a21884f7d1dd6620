"""Chapter 14's baseline comparison: each model's learning rate tuned at equal CPU time.

What it runs. On the generated corpus (``generate_corpus()``, the chapter's data), the
Transformer of ``labformer.app.translate`` (MODEL_DEFAULTS) and chapter 1's GRU with additive
attention (``Seq2SeqRNN``, 128-dimensional, as chapter 14 builds it) are trained on the same
96-pair batches, loss (label smoothing 0.1), AdamW (betas 0.9/0.98, decay 0.01), clipping
and schedule shape (linear warm-up, then 1/sqrt(step)), for the SAME CPU time:

- the Transformer for one epoch, 292 optimiser steps, warm-up 200 (TRAIN_DEFAULTS: the
  chapter's first-epoch checkpoint is exactly such a run at peak 2e-3);
- the GRU for as many steps as the same CPU seconds buy: 292 x (CPU per Transformer step) /
  (CPU per GRU step), both measured at the start on 30 steps of each (one thread), warm-up 50
  steps (chapter 1 trained it at a constant rate, with no warm-up).

Peak rates: Transformer 1e-3, 2e-3, 4e-3, 8e-3; GRU 3e-3, 1e-2, 3e-2; seeds 0, 1, 2 (the seed sets
the initial weights, the batches, their order and dropout). Each run is scored by greedy
corpus BLEU on the 1000 validation pairs (the tuning criterion) and on the 1000 test pairs
(reported only). One process, one thread: about 20 minutes on an idle core.

Reproduce the table that chapter 14 stores:

    cd /work/main && OMP_NUM_THREADS=1 .venv/bin/python book/sweeps/gru_tuning.py

``--gru-steps N`` fixes the GRU's step count instead of measuring the cost ratio (the chapter
states the count this machine measured); ``--out FILE`` also writes every run as JSON lines.

**Protocol v2** (issue 55): ``--cpu-budget S`` trains every run, both models, until ``S``
seconds of this process's CPU clock are spent (:func:`train_for_cpu`, the budget measured in
the process that trains, as the copying task of ``long_range.py`` does), with the schedule in
CPU time (a linear warm-up over ``--warmup-share`` of the budget, then linearly down to zero
at its end); both models are then tuned at the budget they are compared at. Each run also
records its losses (:func:`held_out_loss`: the validation and test cross-entropy per target
token, teacher-forced, and the training loss of its last tenth of steps) beside its BLEU.
``book/sweeps/baseline_curves.py --protocol v2`` is the sweep chapter 14 reads; this script's
``--cpu-budget`` mode is the same training for a quick table.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import statistics
import sys
import time

import torch

from labformer.app.runs import subnormals_flushed
from labformer.app.translate import (
    BATCH_SIZE,
    MODEL_DEFAULTS,
    TRAIN_DEFAULTS,
    Translator,
    build_model,
)
from labformer.data import Vocab, detokenize, generate_corpus, make_batches, tokenize
from labformer.loss import label_smoothed_cross_entropy
from labformer.metrics import corpus_bleu
from labformer.rnn import Seq2SeqRNN, TeacherForcedRNN
from labformer.train import TrainConfig, optimizer_groups, train

TF_RATES = (1e-3, 2e-3, 4e-3, 8e-3)
GRU_RATES = (3e-3, 1e-2, 3e-2)
SEEDS = (0, 1, 2)
TF_STEPS, TF_WARMUP, GRU_WARMUP = 292, 200, 50
MIN_STEP_CPU = 0.01  # CPU seconds: no step of either model is cheaper (they take ~0.075)


def config(lr: float, warmup: int, seed: int) -> TrainConfig:
    return TrainConfig(epochs=1, lr=lr, warmup_steps=warmup, betas=TRAIN_DEFAULTS.betas,
                       weight_decay=TRAIN_DEFAULTS.weight_decay,
                       label_smoothing=TRAIN_DEFAULTS.label_smoothing,
                       clip_norm=TRAIN_DEFAULTS.clip_norm, seed=seed)


class Setup:
    def __init__(self) -> None:
        self.corpus = generate_corpus(seed=0)
        src = [tokenize(s) for s, _ in self.corpus.train]
        tgt = [tokenize(t) for _, t in self.corpus.train]
        self.sv, self.tv = Vocab.build(src), Vocab.build(tgt)
        self.ids = [(self.sv.encode(s), self.tv.encode(t)) for s, t in zip(src, tgt, strict=True)]

    def batches(self, seed: int, steps: int) -> list:
        """``steps`` batches: the translator's epoch for this seed, then a reshuffled one."""
        out = make_batches(self.ids, BATCH_SIZE, shuffle=True, seed=seed)
        while len(out) < steps:
            out += make_batches(self.ids, BATCH_SIZE, shuffle=True, seed=seed + 1000 * len(out))
        return out[:steps]

    def transformer(self, seed: int) -> torch.nn.Module:
        return build_model(self.sv, self.tv, seed=seed)

    def gru(self, seed: int) -> Seq2SeqRNN:
        torch.manual_seed(seed)
        return Seq2SeqRNN(len(self.sv), len(self.tv), emb_dim=128, hidden_dim=128,
                          attention="additive", max_len=MODEL_DEFAULTS["max_len"],
                          **self.tv.special_ids())

    def translate(self, model: torch.nn.Module, pairs: list) -> list[str]:
        sources = [s for s, _ in pairs]
        if not isinstance(model, Seq2SeqRNN):
            return Translator(model, self.sv, self.tv).translate(sources)
        out: dict[int, str] = {}
        order = sorted(range(len(sources)), key=lambda i: len(tokenize(sources[i])))
        model.eval()
        for start in range(0, len(order), 200):
            rows = order[start:start + 200]
            seqs = [self.sv.encode(tokenize(sources[i])) for i in rows]
            src = torch.full((len(rows), max(map(len, seqs))), self.sv.pad_id)
            for r, s in enumerate(seqs):
                src[r, :len(s)] = torch.tensor(s)
            tokens, _ = model.greedy_decode(src, max_len=min(64, 2 * src.shape[1] + 10))
            for i, t in zip(rows, tokens.tolist(), strict=True):
                out[i] = detokenize(self.tv.decode(t))
        return [out[i] for i in range(len(sources))]

    def bleu(self, model: torch.nn.Module, pairs: list) -> float:
        return corpus_bleu(self.translate(model, pairs), [t for _, t in pairs])

    def encoded(self, pairs: list) -> list:
        """``pairs`` in the training vocabularies' ids (unknown words as UNK)."""
        return [(self.sv.encode(tokenize(s)), self.tv.encode(tokenize(t))) for s, t in pairs]


def _net(model: torch.nn.Module) -> torch.nn.Module:
    """What trains: the GRU through teacher forcing, the Transformer as it is."""
    return TeacherForcedRNN(model) if isinstance(model, Seq2SeqRNN) else model


def _logits(net: torch.nn.Module, batch: object) -> torch.Tensor:
    """The training loop's forward: a right-padded target takes the causal kernels, as
    ``labformer.train.train`` gives the Transformer."""
    pad = net.config.pad_id
    pads = batch.tgt_in == pad
    right = not bool((pads[:, :-1] & ~pads[:, 1:]).any())
    if right and "tgt_is_causal" in inspect.signature(net.forward).parameters:
        return net(batch.src, batch.tgt_in, tgt_is_causal=True)
    return net(batch.src, batch.tgt_in)


@torch.no_grad()
def held_out_loss(setup: Setup, model: torch.nn.Module, pairs: list) -> float:
    """Teacher-forced cross-entropy per target token (nats, no label smoothing) on ``pairs``."""
    net = _net(model)
    net.eval()
    pad = net.config.pad_id
    total, tokens = 0.0, 0
    for batch in make_batches(setup.encoded(pairs), BATCH_SIZE, shuffle=False):
        total += float(label_smoothed_cross_entropy(_logits(net, batch), batch.tgt_out,
                                                    smoothing=0.0, ignore_index=pad,
                                                    reduction="sum"))
        tokens += int((batch.tgt_out != pad).sum())
    return total / max(tokens, 1)


def cpu_lr_factor(spent: float, budget: float, warmup_share: float) -> float:
    """The multiplier of the peak rate after ``spent`` of ``budget`` CPU seconds: linear up
    over the first ``warmup_share`` of the budget, then linear down to 0 at its end (the
    CPU-time form of ``TrainConfig(decay="linear")``; at a steady cost per step the warm-up is
    that share of the run's steps). Never below 1e-3, so that no step is wasted at rate 0."""
    if not 0 < warmup_share < 1 or budget <= 0:
        raise ValueError(f"need 0 < warmup_share < 1 and budget > 0, got {warmup_share}, "
                         f"{budget}")
    frac = min(max(spent / budget, 0.0), 1.0)
    return max(1e-3, min(frac / warmup_share, (1.0 - frac) / (1.0 - warmup_share)))


def train_for_cpu(setup: Setup, model: torch.nn.Module, seed: int, lr: float,
                  warmup_share: float, cpu_budget: float) -> dict[str, float | int]:
    """Train ``model`` on ``seed``'s batches until ``cpu_budget`` seconds of this process's CPU
    clock (``time.process_time``) are spent, with chapter 14's loss (label smoothing 0.1),
    AdamW (betas and weight decay of TRAIN_DEFAULTS, minGPT's groups), clipping and dropout
    seed; the rate follows :func:`cpu_lr_factor`. Returns the steps, the CPU seconds, the
    steps taken during the warm-up and the mean training loss of the last tenth of steps."""
    net = _net(model)
    cap = int(cpu_budget / MIN_STEP_CPU) + 1
    batches = setup.batches(seed, cap)  # built before the clock starts
    opt = torch.optim.AdamW(optimizer_groups(net, TRAIN_DEFAULTS.weight_decay), lr=lr,
                            betas=TRAIN_DEFAULTS.betas)
    pad = net.config.pad_id
    losses: list[float] = []
    warm = 0
    with subnormals_flushed(), torch.random.fork_rng():
        torch.manual_seed(seed)  # dropout, as train() seeds it
        net.train()
        start = time.process_time()
        for batch in batches:
            spent = time.process_time() - start
            if spent >= cpu_budget:
                break
            warm += spent < warmup_share * cpu_budget
            for group in opt.param_groups:
                group["lr"] = lr * cpu_lr_factor(spent, cpu_budget, warmup_share)
            loss_sum = label_smoothed_cross_entropy(
                _logits(net, batch), batch.tgt_out, smoothing=TRAIN_DEFAULTS.label_smoothing,
                ignore_index=pad, reduction="sum")
            loss = loss_sum / (batch.tgt_out != pad).sum().clamp(min=1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), TRAIN_DEFAULTS.clip_norm or math.inf)
            opt.step()
            losses.append(float(loss.detach()))
        else:
            raise RuntimeError(f"{cap} steps did not spend {cpu_budget} s of CPU: raise the cap")
        cpu = time.process_time() - start
    tail = losses[-max(1, len(losses) // 10):]
    return {"steps": len(losses), "cpu_s": round(cpu, 2), "warmup_steps": warm,
            "train_loss": round(statistics.mean(tail), 4)}


def run_cpu(setup: Setup, kind: str, seed: int, lr: float, warmup_share: float,
            cpu_budget: float, dropout: float | None = 0.0) -> dict[str, float | int]:
    """One protocol-v2 run: a fresh model of ``kind`` trained for ``cpu_budget`` CPU seconds
    (:func:`train_for_cpu`), then scored: greedy BLEU and teacher-forced loss on the validation
    and the test pairs."""
    model = (build_model(setup.sv, setup.tv, seed=seed, dropout=dropout or 0.0)
             if kind == "transformer" else setup.gru(seed))
    done = train_for_cpu(setup, model, seed, lr, warmup_share, cpu_budget)
    return {**done,
            "valid_bleu": round(setup.bleu(model, setup.corpus.valid), 3),
            "test_bleu": round(setup.bleu(model, setup.corpus.test), 3),
            "valid_loss": round(held_out_loss(setup, model, setup.corpus.valid), 4),
            "test_loss": round(held_out_loss(setup, model, setup.corpus.test), 4)}


def fit(setup: Setup, kind: str, lr: float, seed: int, steps: int) -> tuple[torch.nn.Module,
                                                                             float]:
    """Train one model; returns it and the CPU seconds of its training."""
    if kind == "transformer":
        model, net, warmup = setup.transformer(seed), None, TF_WARMUP
    else:
        model = setup.gru(seed)
        net, warmup = TeacherForcedRNN(model), GRU_WARMUP
    with subnormals_flushed():  # as the book's translator run trains
        start = time.process_time()
        train(net or model, setup.batches(seed, steps), config(lr, min(warmup, steps), seed),
              device="cpu", progress=False)
        cpu = time.process_time() - start
    return model, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gru-steps", type=int, default=None)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--out", default=None)
    parser.add_argument("--tf-rates", type=float, nargs="*", default=list(TF_RATES))
    parser.add_argument("--gru-rates", type=float, nargs="*", default=list(GRU_RATES))
    parser.add_argument("--cpu-budget", type=float, default=None, metavar="S",
                        help="protocol v2: train every run for S seconds of process CPU time "
                             "(both models), the schedule in CPU time")
    parser.add_argument("--warmup-share", type=float, default=0.25,
                        help="with --cpu-budget: the warm-up's share of the budget")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    setup = Setup()
    if args.cpu_budget is not None:
        return _main_cpu(setup, args)
    gru_steps = args.gru_steps
    if gru_steps is None:  # CPU per step of each model, on 30 steps
        _, tf_cpu = fit(setup, "transformer", 2e-3, 99, 30)
        _, gru_cpu = fit(setup, "gru", 1e-2, 99, 30)
        gru_steps = round(TF_STEPS * tf_cpu / gru_cpu)
        print(f"CPU per step: Transformer {tf_cpu / 30 * 1000:.0f} ms, GRU "
              f"{gru_cpu / 30 * 1000:.0f} ms -> GRU steps {gru_steps}", flush=True)
    runs = []
    out = open(args.out, "a") if args.out else None
    for kind, rates, steps in (("transformer", args.tf_rates, TF_STEPS),
                               ("gru", args.gru_rates, gru_steps)):
        for lr in rates:
            for seed in args.seeds:
                model, cpu = fit(setup, kind, lr, seed, steps)
                run = {"model": kind, "lr": lr, "seed": seed, "steps": steps, "cpu_s": cpu,
                       "valid_bleu": setup.bleu(model, setup.corpus.valid),
                       "test_bleu": setup.bleu(model, setup.corpus.test)}
                runs.append(run)
                print(json.dumps(run), flush=True)
                if out:
                    out.write(json.dumps(run) + "\n")
                    out.flush()
    print("\n| model | steps | peak lr | valid BLEU (mean ± SD over seeds) | test BLEU | CPU s |")
    print("|---|---|---|---|---|---|")
    for kind, rates in (("transformer", args.tf_rates), ("gru", args.gru_rates)):
        for lr in rates:
            rs = [r for r in runs if r["model"] == kind and r["lr"] == lr]
            if not rs:
                continue
            v, t = [r["valid_bleu"] for r in rs], [r["test_bleu"] for r in rs]
            sd = statistics.stdev(v) if len(v) > 1 else 0.0
            print(f"| {kind} | {rs[0]['steps']} | {lr:g} | {statistics.mean(v):.2f} ± "
                  f"{sd:.2f} | {statistics.mean(t):.2f} | "
                  f"{statistics.mean(r['cpu_s'] for r in rs):.0f} |")
    return 0


def _main_cpu(setup: Setup, args: argparse.Namespace) -> int:
    """``--cpu-budget``: every rate of both models for the same CPU seconds; a table."""
    out = open(args.out, "a") if args.out else None
    runs = []
    for kind, rates in (("transformer", args.tf_rates), ("gru", args.gru_rates)):
        for lr in rates:
            for seed in args.seeds:
                run = {"model": kind, "lr": lr, "seed": seed, "cpu_budget": args.cpu_budget,
                       "warmup_share": args.warmup_share,
                       **run_cpu(setup, kind, seed, lr, args.warmup_share, args.cpu_budget)}
                runs.append(run)
                print(json.dumps(run), flush=True)
                if out:
                    out.write(json.dumps(run) + "\n")
                    out.flush()
    print("\n| model | steps | peak lr | valid BLEU | valid loss | test BLEU | CPU s |")
    print("|---|---|---|---|---|---|---|")
    for kind, rates in (("transformer", args.tf_rates), ("gru", args.gru_rates)):
        for lr in rates:
            rs = [r for r in runs if r["model"] == kind and r["lr"] == lr]
            if rs:
                def mean(key: str, rs: list = rs) -> float:
                    return statistics.mean(r[key] for r in rs)
                print(f"| {kind} | {mean('steps'):.0f} | {lr:g} | {mean('valid_bleu'):.2f} | "
                      f"{mean('valid_loss'):.3f} | {mean('test_bleu'):.2f} | "
                      f"{mean('cpu_s'):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
