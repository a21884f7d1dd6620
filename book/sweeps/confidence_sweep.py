"""The sweep behind chapter 12's confidence checks: its model, trained for many seeds.

    python book/sweeps/confidence_sweep.py                # seeds 1-20, two runs at a time
    python book/sweeps/confidence_sweep.py --seeds 1-4 --out /tmp/sweep.json

Each run is a fresh process on one thread that trains chapter 12's model (the everyday pairs
but every tenth, ``TRAIN_DEFAULTS`` with 300 steps at least, the run's seed) and counts with
``labformer.app.carry.count_flags`` how the warnings of ``labformer translate --scores`` fall on
the chapter's two held-out sets together: every tenth pair of the file and
``fr-en-everyday-heldout.tsv``. Odd seeds run on PyTorch's plain kernels
(``ATEN_CPU_CAPABILITY=default``), even seeds on AVX2, so the sweep holds the spread a
reader's CPU adds. The chapter reads ``book/data/12_confidence.json``; about 40 s of CPU a run.
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

from claim_sweep import parse_seeds

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "book" / "data" / "12_confidence.json"

# Chapter 12's cells 3 and its confidence cell, in one process.
RUN = """
import dataclasses, json, sys, torch
from labformer import train_translator
from labformer.app.carry import count_flags
from labformer.data import everyday_pairs_path, load_pairs
from labformer.app.translate import TRAIN_DEFAULTS
torch.set_num_threads(1)
seed = int(sys.argv[1])
everyday = load_pairs(everyday_pairs_path())
held_out = everyday[::10]
own_train = [pair for i, pair in enumerate(everyday) if i % 10]
fresh = load_pairs(everyday_pairs_path().with_name("fr-en-everyday-heldout.tsv"))
config = dataclasses.replace(TRAIN_DEFAULTS, min_steps=300, seed=seed)
mine = train_translator(own_train, train_config=config, device="cpu", progress=False)
counts = count_flags(mine, held_out) + count_flags(mine, fresh)
print(json.dumps({**dataclasses.asdict(counts), "caught": counts.caught,
                  "spared": counts.spared, "lift": counts.lift}))
"""


def run(seed: int) -> dict[str, object]:
    kernel = "default" if seed % 2 else "avx2"
    env = dict(os.environ, OMP_NUM_THREADS="1", TQDM_DISABLE="1", ATEN_CPU_CAPABILITY=kernel)
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", RUN, str(seed)], env=env,
                            capture_output=True, text=True, cwd=ROOT)
    if result.returncode != 0:
        raise RuntimeError(f"seed {seed} ({kernel}) failed:\n{result.stderr[-2000:]}")
    values = json.loads(result.stdout.strip().splitlines()[-1])
    print(f"seed {seed:3} {kernel:7}: {json.dumps(values)} "
          f"({time.perf_counter() - start:.0f} s)", flush=True)
    return {"seed": seed, "kernel": kernel, **values}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("1-20"),
                        help="like 1-20 or 3,5,8 (default 1-20)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (default 2)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"default {OUT.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        runs = list(pool.map(run, args.seeds))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "what": "chapter 12's model for each seed: the warnings of `labformer translate "
                "--scores` on its two held-out sets together (labformer.app.carry.count_flags)",
        "command": "python book/sweeps/confidence_sweep.py " + " ".join(argv or sys.argv[1:]),
        "runs": runs}, indent=1) + "\n", encoding="utf-8")
    print(f"{len(runs)} runs in {time.perf_counter() - start:.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
