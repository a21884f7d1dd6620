"""The modern block against the 2017 block, for seeds fixed before the sweep runs.

    python book/sweeps/lm_sweep.py --jobs 2 --write book/data/15_modern_block.json
    python book/sweeps/lm_sweep.py --runs 1:default 2:avx2 --out /tmp/blocks.jsonl
    python book/sweeps/lm_sweep.py --jobs 2 --seeds 241-260 --out _build/lm_sweep_v2.jsonl \
        --write book/data/15_modern_block_v2.json      # the re-run registered in issue 55

For every ``SEED:KERNEL`` of ``--runs`` (default: seeds 1-20, odd ones on the plain kernels,
even ones on AVX2; seed 0 is the chapter's own run) a fresh process with
``ATEN_CPU_CAPABILITY=KERNEL`` and one thread trains every block of
``labformer.lmtrain.BLOCKS`` (the 2017 block, each modern part alone, all of them together)
on the chapter's text with that seed, and appends their held-out perplexities to ``--out`` as
one JSON line (a finished run is not redone; a run is never added after the sweep is written).
One run trains seven small models: about two minutes on one idle core.

``--seeds A-B`` names the runs by a range of seeds instead, odd seeds on the plain kernels
and even ones on AVX2 (as the default). Every run records the code version it ran at; a run
on record from another code version is not reused: ``--write`` refuses to mix versions, so
a re-run starts from a fresh ``--out`` (or the old one moved away).

With ``--write PATH`` the runs become the chapter's data file, which
``labformer.book.notebook.Sweep`` reads: the command, the code version, the settings the sweep was
made at, and every run's perplexity per block (``ppl_2017``, ``ppl_Pre-LN``, ...). The chapter
decides its verdicts from it and holds its own run to the runs' t-predictive intervals
(book/checking.md). The sweep runs outside CI.
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

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_RUNS = [f"{s}:{'default' if s % 2 else 'avx2'}" for s in range(1, 21)]

CHILD = r"""
import json, sys, time
import torch
torch.set_num_threads(1)
from labformer.lmtrain import BLOCKS, block_config, perplexity, text_data, train_language_model
seed = int(sys.argv[1])
data = text_data()
out = {}
for name in BLOCKS:
    start = time.perf_counter()
    model, _ = train_language_model(block_config(name, data.vocab_size), data, seed=seed,
                                    progress=False)
    out["ppl_" + name] = perplexity(model, data.test)
    out["seconds_" + name] = round(time.perf_counter() - start, 1)
print("LM-RESULT " + json.dumps(out))
"""


def settings() -> dict[str, Any]:
    """What the sweep fixes: the chapter compares its own settings with these."""
    from labformer.lmtrain import LMTrainConfig, block_config, text_data

    cfg = block_config("2017", len(text_data().bpe))
    train = LMTrainConfig()
    return {"d_model": cfg.d_model, "num_layers": cfg.num_layers, "num_heads": cfg.num_heads,
            "d_ff": cfg.d_ff, "steps": train.steps, "batch_size": train.batch_size,
            "length": train.length, "lr": train.lr, "vocab_size": cfg.vocab_size}


def seed_runs(spec: str) -> list[str]:
    """'241-260' -> ['241:default', '242:avx2', ...]: odd seeds plain, even ones AVX2."""
    low, _, high = spec.partition("-")
    seeds = range(int(low), int(high or low) + 1)
    if not seeds:
        raise ValueError(f"--seeds {spec!r} names no seed")
    return [f"{s}:{'default' if s % 2 else 'avx2'}" for s in seeds]


def _code_version() -> str:
    sys.path.insert(0, str(Path(__file__).parent))
    from ablation_sweep import code_version

    return code_version()


def run_one(run: str, version: str | None = None) -> dict[str, Any]:
    seed, _, kernel = run.partition(":")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": kernel or "default", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT)}
    start = time.time()
    proc = subprocess.run([sys.executable, "-c", CHILD, seed], env=env, cwd=ROOT,
                          capture_output=True, text=True, check=False)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("LM-RESULT ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"run {run} failed:\n{proc.stderr[-3000:]}")
    record = {"run": run, "seed": int(seed), "kernel": kernel or "default",
              "seconds": round(time.time() - start), **json.loads(lines[-1][len("LM-RESULT "):])}
    return record if version is None else {**record, "code_version": version}


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", nargs="+", default=None, help="SEED:KERNEL ...")
    parser.add_argument("--seeds", default=None, metavar="A-B",
                        help="the runs as a range of seeds, odd ones plain, even ones AVX2")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "lm_sweep.jsonl")
    parser.add_argument("--write", type=Path, help="the chapter's data file to write")
    args = parser.parse_args(args_list)
    if args.runs is not None and args.seeds is not None:
        parser.error("give --runs or --seeds, not both")
    args.runs = seed_runs(args.seeds) if args.seeds else args.runs or DEFAULT_RUNS
    version = _code_version()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = {}
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            record = json.loads(line)
            done[record["run"]] = record
    todo = [r for r in args.runs if r not in done]
    print(f"{len(done)} runs on record, {len(todo)} to run, {args.jobs} at a time", flush=True)
    start = time.time()
    with ThreadPoolExecutor(args.jobs) as pool:
        for record in pool.map(lambda r: run_one(r, version), todo):
            done[record["run"]] = record
            with args.out.open("a") as handle:
                handle.write(json.dumps(record) + "\n")
            print(f"{record['run']}: {record['seconds']} s, perplexity 2017 "
                  f"{record['ppl_2017']:.3f}, modern {record['ppl_modern']:.3f}", flush=True)
    if args.write:
        runs = [done[r] for r in args.runs]  # exactly the runs asked for, in their order
        seeds = [r["seed"] for r in runs]
        other = sorted({str(r.get("code_version")) for r in runs} - {version})
        if other:
            raise SystemExit(f"{args.out} holds runs made at code version(s) {other}, not at "
                             f"{version}: run the sweep again into a fresh --out")
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(json.dumps({
            "chapter": "15_language_model",
            "what": (f"held-out perplexity of the chapter's language model for each block of "
                     f"labformer.lmtrain.BLOCKS, trained for seeds {min(seeds)}-{max(seeds)} "
                     "(a range fixed before the sweep ran; the chapter's own run is seed 0)"),
            "quantities": {key: f"held-out perplexity of the {key[4:]} block"
                           for key in runs[0] if key.startswith("ppl_")},
            "settings": settings(),
            "command": "python book/sweeps/lm_sweep.py " + " ".join(args_list),
            "code_version": version,
            "duration": (f"{sum(r['seconds'] for r in runs)} s of run time for {len(runs)} "
                         f"runs, {args.jobs} at a time ({time.time() - start:.0f} s this call)"),
            "runs": runs,
        }, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
