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
"""

from __future__ import annotations

import argparse
import json
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
from labformer.metrics import corpus_bleu
from labformer.rnn import Seq2SeqRNN, TeacherForcedRNN
from labformer.train import TrainConfig, train

TF_RATES = (1e-3, 2e-3, 4e-3, 8e-3)
GRU_RATES = (3e-3, 1e-2, 3e-2)
SEEDS = (0, 1, 2)
TF_STEPS, TF_WARMUP, GRU_WARMUP = 292, 200, 50


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
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    setup = Setup()
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


if __name__ == "__main__":
    sys.exit(main())
