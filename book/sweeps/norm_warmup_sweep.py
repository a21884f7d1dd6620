"""Chapter 13's 2 x 2 of norm place and warm-up at three peak rates, for many seeds.

    python book/sweeps/norm_warmup_sweep.py --jobs 2 --write book/data/13_norm_warmup.json
    python book/sweeps/norm_warmup_sweep.py --runs 1:default 2:avx2 --out /tmp/grid.jsonl

For every ``SEED:KERNEL`` of ``--runs`` (default: seeds 1-20, odd ones on the plain kernels,
even ones on AVX2; seed 0 is the chapter's own run) a fresh process with
``LABFORMER_SEED=SEED``, ``ATEN_CPU_CAPABILITY=KERNEL`` and ``OMP_NUM_THREADS=1`` executes the
cells of ``book/13_ablations.ipynb`` that the grid needs (the imports, the corpus and
configuration, ``evaluate``, ``train_variant`` and the grid's training cell) and appends the
twelve trainings' test scores to ``--out`` as one JSON line (a finished run is not redone).
One run trains twelve small models: about two minutes on one idle core.

With ``--write PATH`` the runs become the chapter's data file: the command, the code version
(``git describe``), the seconds and every run's token accuracy and BLEU per cell, keyed
``NORM|warm-up|PEAK`` or ``NORM|none|PEAK``. The chapter reads its verdicts from it and holds
its own run to the runs' t-predictive intervals (book/checking.md). The sweep runs outside CI.
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
NOTEBOOK = ROOT / "book" / "13_ablations.ipynb"
#: The cells the grid needs, by id: imports, configuration, evaluate, train_variant, the grid.
CELLS = ("ch13-01", "ch13-03", "ch13-06", "ch13-08", "ch13-28b")
DEFAULT_RUNS = [f"{s}:{'default' if s % 2 else 'avx2'}" for s in range(1, 21)]

CHILD = r"""
import json, sys
import matplotlib
matplotlib.use("Agg")
nb = json.load(open(sys.argv[1]))
wanted = json.loads(sys.argv[2])
cells = {c["id"]: "".join(c["source"]) for c in nb["cells"]}
missing = [i for i in wanted if i not in cells]
if missing:
    raise SystemExit(f"cells not in the notebook: {missing}")
ns = {"__name__": "__main__", "results": {}, "histories": {}}
for cell_id in wanted:
    source = cells[cell_id]
    if cell_id == "ch13-01":
        source = source.replace("from myst_nb import glue", "glue = lambda *a, **k: None")
    exec(source, ns)
out = {f"{norm}|{'warm-up' if warm else 'none'}|{peak:g}":
       {"acc": float(r["acc"]), "bleu": float(r["bleu"])}
       for (norm, warm, peak), r in ns["grid"].items()}
print("GRID-RESULT " + json.dumps(out))
"""


def key(norm: str, warm: bool, peak: float) -> str:
    """The data file's key of one cell of the grid."""
    return f"{norm}|{'warm-up' if warm else 'none'}|{peak:g}"


def run_one(spec: str, notebook: str) -> dict[str, Any]:
    """One fresh process: the grid's cells under this seed and kernel."""
    seed, kernel = spec.split(":")
    env = {**os.environ, "LABFORMER_SEED": seed, "ATEN_CPU_CAPABILITY": kernel,
           "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1", "MPLBACKEND": "Agg"}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, notebook, json.dumps(CELLS)],
                          env=env, cwd=ROOT / "book", capture_output=True, text=True,
                          check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("GRID-RESULT "):
            return {"run": spec, "seconds": round(time.perf_counter() - start),
                    "cells": json.loads(line.removeprefix("GRID-RESULT "))}
    raise RuntimeError(f"run {spec} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def code_version() -> str:
    """``git describe --always --dirty`` of the repository, or "unknown" outside a checkout."""
    proc = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    return proc.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", default=DEFAULT_RUNS, help="SEED:KERNEL ...")
    parser.add_argument("--out", default="/tmp/norm_warmup_sweep.jsonl")
    parser.add_argument("--notebook", default=str(NOTEBOOK), help="a copy to run instead")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (one core each)")
    parser.add_argument("--write", help="also write the chapter's data file here")
    args = parser.parse_args(argv)
    for spec in args.runs:
        seed, _, kernel = spec.partition(":")
        if not seed.isdigit() or kernel not in ("default", "avx2", "avx512"):
            parser.error(f"--runs takes SEED:KERNEL (kernel default, avx2 or avx512), "
                         f"not {spec!r}")
    out = Path(args.out)
    done = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    todo = [s for s in args.runs if not any(r["run"] == s for r in done)]
    print(f"{len(todo)} of {len(args.runs)} runs to do, {args.jobs} at a time", flush=True)
    start = time.perf_counter()

    def one(spec: str) -> None:
        record = run_one(spec, args.notebook)
        with out.open("a") as f:
            f.write(json.dumps(record) + "\n")
        done.append(record)
        print(f"{spec}: {record['seconds']} s ({len(done)} of {len(args.runs)} done, "
              f"{time.perf_counter() - start:.0f} s)", flush=True)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(one, todo))
    runs = [r for spec in args.runs for r in done if r["run"] == spec]
    if args.write:
        data = {
            "chapter": NOTEBOOK.stem,
            "what": "the 2 x 2 of norm place (Pre-LN, Post-LN) and warm-up (60 steps, or "
                    "none at an equal total learning rate) at three peak rates: token "
                    "accuracy (%) under teacher forcing on the 500 test pairs and greedy BLEU "
                    "on the first 100, per run and cell",
            "command": "python book/sweeps/norm_warmup_sweep.py "
                       + " ".join(argv if argv is not None else sys.argv[1:]),
            "code_version": code_version(),
            "duration": f"{sum(r['seconds'] for r in runs)} s for {len(runs)} runs, "
                        f"{args.jobs} at a time",
            "runs": runs,
        }
        Path(args.write).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
