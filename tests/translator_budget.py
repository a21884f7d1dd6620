"""What the toy translator reaches in a shorter training: test BLEU against training CPU time.

    python tests/translator_budget.py                      # the configurations below, seeds 0 1
    python tests/translator_budget.py --configs 96:1:4e-3:50 48:1:3e-3:100 --seeds 0 1 2

Each run is a fresh process on one thread: ``train_translator`` on the generated corpus with
``TRAIN_DEFAULTS`` changed to ``BATCH:EPOCHS:PEAK:WARMUP`` (exactly that many epochs, no
``min_steps``), then greedy BLEU on the 1000 validation and the 1000 test pairs. It prints one
JSON line per run with the CPU seconds of the training (the validation scoring after each epoch
included, as in ``labformer train``). The defaults take about 99 s for test BLEU 97.4-98.1
(README); this is how a faster default is searched for (choose on validation, report test).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

RUN = """
import dataclasses, json, sys, time, torch
from labformer import train_translator
from labformer.data import generate_corpus
from labformer.translate import TRAIN_DEFAULTS
torch.set_num_threads(1)
seed, batch, epochs, lr, warmup = json.loads(sys.argv[1])
corpus = generate_corpus()
config = dataclasses.replace(TRAIN_DEFAULTS, epochs=epochs, lr=lr, warmup_steps=warmup,
                             min_steps=0, seed=seed)
start = time.process_time()
translator = train_translator(corpus, train_config=config, batch_size=batch, device="cpu",
                              progress=False)
cpu = time.process_time() - start
print(json.dumps({"seed": seed, "batch": batch, "epochs": epochs, "lr": lr, "warmup": warmup,
                  "steps": len(translator.history.step_loss), "cpu_s": round(cpu, 1),
                  "valid_bleu": round(translator.evaluate(corpus.valid)["bleu"], 2),
                  "test_bleu": round(translator.evaluate(corpus.test)["bleu"], 2)}))
"""

DEFAULT_CONFIGS = ["96:1:4e-3:50", "96:1:6e-3:50", "48:1:3e-3:100", "48:1:4e-3:100",
                   "32:1:3e-3:150"]


def parse_config(text: str) -> tuple[int, int, float, int]:
    """"48:1:3e-3:100" -> (48, 1, 0.003, 100): batch, epochs, peak rate, warm-up steps."""
    try:
        batch, epochs, lr, warmup = text.split(":")
        parsed = int(batch), int(epochs), float(lr), int(warmup)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a configuration is BATCH:EPOCHS:PEAK:WARMUP, like 48:1:3e-3:100, not {text!r}"
        ) from None
    if min(parsed) <= 0:
        raise argparse.ArgumentTypeError(f"every field of {text!r} must be positive")
    return parsed


def run(seed: int, config: tuple[int, int, float, int]) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", TQDM_DISABLE="1")
    out = subprocess.run([sys.executable, "-c", RUN, json.dumps([seed, *config])], env=env,
                         check=True, capture_output=True, text=True)
    result: dict = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", type=parse_config, nargs="+",
                        default=[parse_config(c) for c in DEFAULT_CONFIGS],
                        help="BATCH:EPOCHS:PEAK:WARMUP ... (default: five one-epoch runs)")
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
