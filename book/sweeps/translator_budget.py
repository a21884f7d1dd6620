"""What the toy translator reaches in a shorter training: test BLEU against training CPU time.

    python book/sweeps/translator_budget.py                # the configurations below, seeds 0 1
    python book/sweeps/translator_budget.py --configs 96:2:4e-3:50:linear:0 --seeds 0 1 2

Each run is a fresh process on one thread: ``train_translator`` on the generated corpus with
the paper recipe (``TRAIN_DEFAULTS``) changed to ``BATCH:EPOCHS:PEAK:WARMUP[:DECAY[:DROPOUT]]``
(exactly that many epochs, no ``min_steps``; DECAY ``rsqrt`` or ``linear``, default rsqrt;
DROPOUT default 0.1), then greedy BLEU on the 1000 validation and the 1000 test pairs. It prints
one JSON line per run with the CPU seconds of the training (the validation scoring after each
epoch included, as in ``labformer train``). Choose on validation, report test: this is how
``labformer train``'s quick recipe was found (README); a run takes 25 to 45 s of CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor

from _train_child import run_child

RUN = """
import dataclasses, json, sys, time, torch
from labformer import train_translator
from labformer.data import generate_corpus
from labformer.app.translate import TRAIN_DEFAULTS
torch.set_num_threads(1)
seed, batch, epochs, lr, warmup, decay, dropout = json.loads(sys.argv[1])
corpus = generate_corpus()
config = dataclasses.replace(TRAIN_DEFAULTS, epochs=epochs, lr=lr, warmup_steps=warmup,
                             decay=decay, min_steps=0, seed=seed)
start = time.process_time()
translator = train_translator(corpus, train_config=config, batch_size=batch, device="cpu",
                              progress=False, model_overrides={"dropout": dropout})
cpu = time.process_time() - start
print(json.dumps({"seed": seed, "batch": batch, "epochs": epochs, "lr": lr, "warmup": warmup,
                  "decay": decay, "dropout": dropout,
                  "steps": len(translator.history.step_loss), "cpu_s": round(cpu, 1),
                  "valid_bleu": round(translator.evaluate(corpus.valid)["bleu"], 2),
                  "test_bleu": round(translator.evaluate(corpus.test)["bleu"], 2)}))
"""

# One epoch with the paper's decay, then the quick recipe and its neighbours.
DEFAULT_CONFIGS = ["96:1:4e-3:50", "48:1:3e-3:100", "96:2:3e-3:50:linear:0",
                   "96:2:4e-3:50:linear:0", "96:2:6e-3:50:linear:0", "96:2:4e-3:100:linear:0"]
Config = tuple[int, int, float, int, str, float]


def parse_config(text: str) -> Config:
    """"96:2:4e-3:50:linear:0" -> (96, 2, 0.004, 50, "linear", 0.0): batch, epochs, peak rate,
    warm-up steps, decay, dropout."""
    fields = text.split(":")
    if not 4 <= len(fields) <= 6:
        raise argparse.ArgumentTypeError(
            f"a configuration is BATCH:EPOCHS:PEAK:WARMUP[:DECAY[:DROPOUT]], like "
            f"96:2:4e-3:50:linear:0, not {text!r}")
    fields += ["rsqrt", "0.1"][len(fields) - 4:]
    try:
        batch, epochs, lr, warmup = int(fields[0]), int(fields[1]), float(fields[2]), int(fields[3])
        dropout = float(fields[5])
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"BATCH, EPOCHS and WARMUP are whole numbers, PEAK and DROPOUT numbers: {text!r}"
        ) from None
    if min(batch, epochs, lr, warmup) <= 0:
        raise argparse.ArgumentTypeError(f"BATCH, EPOCHS, PEAK and WARMUP of {text!r} must be "
                                         f"positive")
    if fields[4] not in ("rsqrt", "linear"):
        raise argparse.ArgumentTypeError(f"DECAY is rsqrt or linear, not {fields[4]!r}")
    if not 0.0 <= dropout < 1.0:
        raise argparse.ArgumentTypeError(f"DROPOUT must be in [0, 1), not {dropout}")
    return batch, epochs, lr, warmup, fields[4], dropout


def run(seed: int, config: Config) -> dict:
    return run_child(RUN, [seed, *config])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", type=parse_config, nargs="+",
                        default=[parse_config(c) for c in DEFAULT_CONFIGS],
                        help="BATCH:EPOCHS:PEAK:WARMUP[:DECAY[:DROPOUT]] ... (default: six)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (one core each)")
    args = parser.parse_args(argv)
    todo = [(s, c) for c in args.configs for s in args.seeds]
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for result in pool.map(lambda job: run(*job), todo):
            print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
