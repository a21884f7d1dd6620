"""Train the toy translator for several seeds and CPU kernel settings; print its scores' ranges.

    python tests/translator_seeds.py                 # seeds 0-4 x (native, avx2): the README's
    python tests/translator_seeds.py --seeds 0 1 --kernels default

Each run is ``train_translator`` with the defaults that ``labformer train`` uses, on the
generated corpus (its seed is fixed: it is the data set), then greedy and beam-4 decoding of the
1000-sentence test split. A run is a fresh process, so ``ATEN_CPU_CAPABILITY`` takes effect.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

RUN = """
import json, time, torch
from labformer import train_translator
from labformer.data import generate_corpus
torch.set_num_threads(1)
corpus = generate_corpus()
start = time.perf_counter()
translator = train_translator(corpus, seed={seed}, device="cpu", progress=False)
seconds = time.perf_counter() - start
greedy = translator.evaluate(corpus.test)
beam = translator.evaluate(corpus.test, beam=4)
print(json.dumps({{"train_s": seconds, "greedy": greedy, "beam": beam}}))
"""

FIELDS = [("greedy", "bleu", "BLEU"), ("greedy", "exact", "exact %"), ("greedy", "chrf", "chrF"),
          ("beam", "bleu", "beam-4 BLEU"), ("beam", "exact", "beam-4 exact %")]


def run(seed: int, kernel: str) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("ATEN_CPU_CAPABILITY", None)
    if kernel != "native":
        env["ATEN_CPU_CAPABILITY"] = kernel
    out = subprocess.run([sys.executable, "-c", RUN.format(seed=seed)], env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--kernels", nargs="+", default=["native", "avx2"],
                        choices=["native", "default", "avx2", "avx512"])
    args = parser.parse_args(argv)
    results = []
    print("| seed | kernel | train s | " + " | ".join(f[2] for f in FIELDS) + " |")
    print("|---" * (3 + len(FIELDS)) + "|")
    for kernel in args.kernels:
        for seed in args.seeds:
            r = run(seed, kernel)
            results.append(r)
            values = " | ".join(f"{r[part][key]:.2f}" for part, key, _ in FIELDS)
            print(f"| {seed} | {kernel} | {r['train_s']:.0f} | {values} |", flush=True)
    print(f"\nover {len(results)} runs: min / median / max")
    for part, key, name in FIELDS:
        xs = [r[part][key] for r in results]
        print(f"  {name:15} {min(xs):6.2f} / {statistics.median(xs):6.2f} / {max(xs):6.2f}")
    xs = [r["train_s"] for r in results]
    print(f"  {'training s':15} {min(xs):6.0f} / {statistics.median(xs):6.0f} / {max(xs):6.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
