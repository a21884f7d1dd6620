"""Train the toy translator for several seeds and CPU kernel settings; print its scores' ranges.

    python book/sweeps/translator_seeds.py           # seeds 0-4 x (native, avx2): the README's
    python book/sweeps/translator_seeds.py --recipe paper  # the book's chapter 11 translator
    python book/sweeps/translator_seeds.py --seeds 0 1 --kernels default

Each run is ``train_translator`` with a recipe of ``labformer train`` (default: its default,
quick) on the generated corpus (its seed is fixed: it is the data set), then greedy and beam-4
decoding of the 1000-sentence test split. A run is a fresh process on one thread, so
``ATEN_CPU_CAPABILITY`` takes effect; ``--jobs`` runs go at once, one core each. The training's
CPU seconds are the process's (``time.process_time``), about 44 s a run for quick and 99 s for
paper on this 2-core machine; about 6 minutes for the ten quick runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor

from _train_child import run_child

from labformer.app.cli.train import RECIPE_NAMES

RUN = """
import dataclasses, json, sys, time, torch
from labformer import train_translator
from labformer.data import generate_corpus
from labformer.app.translate import RECIPES
torch.set_num_threads(1)
seed, name = json.loads(sys.argv[1])
recipe = RECIPES[name]
corpus = generate_corpus()
start = time.process_time()
translator = train_translator(corpus, train_config=dataclasses.replace(recipe.train, seed=seed),
                              model_overrides=recipe.model, batch_size=recipe.batch_size,
                              device="cpu", progress=False)
cpu = time.process_time() - start
greedy = translator.evaluate(corpus.test)
beam = translator.evaluate(corpus.test, beam=4)
print(json.dumps({"cpu_s": cpu, "steps": len(translator.history.step_loss),
                  "greedy": greedy, "beam": beam}))
"""

FIELDS = [("greedy", "bleu", "BLEU"), ("greedy", "exact", "exact %"), ("greedy", "chrf", "chrF"),
          ("beam", "bleu", "beam-4 BLEU"), ("beam", "exact", "beam-4 exact %")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", choices=RECIPE_NAMES, default="quick")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--kernels", nargs="+", default=["native", "avx2"],
                        choices=["native", "default", "avx2", "avx512"])
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (one core each)")
    args = parser.parse_args(argv)
    todo = [(seed, kernel) for kernel in args.kernels for seed in args.seeds]
    print(f"recipe {args.recipe}")
    print("| seed | kernel | steps | CPU s | " + " | ".join(f[2] for f in FIELDS) + " |")
    print("|---" * (4 + len(FIELDS)) + "|")
    results = []
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for (seed, kernel), r in zip(todo, pool.map(
                lambda job: run_child(RUN, [job[0], args.recipe], job[1]), todo), strict=True):
            results.append(r)
            values = " | ".join(f"{r[part][key]:.2f}" for part, key, _ in FIELDS)
            print(f"| {seed} | {kernel} | {r['steps']} | {r['cpu_s']:.0f} | {values} |",
                  flush=True)
    print(f"\nover {len(results)} runs: min / median / max")
    for part, key, name in FIELDS:
        xs = [r[part][key] for r in results]
        print(f"  {name:15} {min(xs):6.2f} / {statistics.median(xs):6.2f} / {max(xs):6.2f}")
    xs = [r["cpu_s"] for r in results]
    print(f"  {'training CPU s':15} {min(xs):6.0f} / {statistics.median(xs):6.0f} / "
          f"{max(xs):6.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
