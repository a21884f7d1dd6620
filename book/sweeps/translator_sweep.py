"""The sweep behind chapters 11 and 14: the translator, trained and read for many seeds.

    python book/sweeps/translator_sweep.py                # seeds 1-20, two runs at a time
    python book/sweeps/translator_sweep.py --seeds 1-4 --out /tmp/sweep.json

Each run is a fresh process on one thread that executes chapter 11's code cells up to its
section "The translator in your browser" (the training, the test scores, attention and errors),
then chapter 14's up to "The recurrent baseline" (beam search and checkpoint averaging, on the
same run), with every check recorded instead of asserted, and keeps the numbers that the
chapters hold to the sweep (``QUANTITIES``). Odd seeds run on PyTorch's plain kernels
(``ATEN_CPU_CAPABILITY=default``), even seeds on AVX2, so the sweep holds the spread a reader's
CPU adds. Both chapters read ``book/data/11_translator.json`` and check their own run against the
sweep's t-predictive intervals (book/checking.md); about two minutes of CPU a run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ablation_sweep import code_version
from claim_sweep import parse_seeds

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "book" / "11_translator.ipynb"
OUT = ROOT / "book" / "data" / "11_translator.json"
# (notebook, the section before which its run stops), executed in this order in one namespace
PARTS = ((NOTEBOOK, "## The translator in your browser"),
         (ROOT / "book" / "14_recipe_baseline.ipynb", "## The recurrent baseline"))

# name in the chapter's namespace -> what it is
QUANTITIES = {
    "floor_gap": "mean training loss of the last 50 steps minus the smoothed target's entropy",
    "held_gap": "exact-match points lost on held-out combinations against ordinary sentences",
    "beam_gain": "test BLEU of beam 4 (length penalty 0.6) minus greedy",
    "differ": "test outputs (of 1000) that beam 4 changes",
    "nll2": "test NLL per token, mean of the last two checkpoints minus the last",
    "bleu2": "test BLEU, mean of the last two checkpoints minus the last",
    "test_bleu": "greedy test BLEU",
    "test_exact": "greedy test exact match, %",
}

# Runs in the child: the chapter's code cells up to STOP, checks recorded, glue silenced.
CHILD = r"""
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import myst_nb
import nbformat
import labformer.book.notebook as notebook

parts, names = json.loads(sys.argv[1]), sys.argv[2].split(",")
false = []

def check(self, claim, holds, measured=""):
    if not holds:
        false.append(claim)
    self.claims.append((claim, True, measured))
    return True

notebook.Evidence.check = check
notebook.Evidence.verify = lambda self: None
myst_nb.glue = lambda *args, **kwargs: None
ns = {"__name__": "__main__"}
for path, stop in parts:
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown" and cell.source.startswith(stop):
            break
        if cell.cell_type == "code" and "solution" not in cell.metadata.get("tags", []):
            exec(compile(cell.source, path, "exec"), ns)
            plt.close("all")
ns["test_bleu"], ns["test_exact"] = ns["test_scores"]["bleu"], ns["test_scores"]["exact"]
print("SWEEP-RESULT " + json.dumps({"values": {n: float(ns[n]) for n in names},
                                    "false": false}))
"""


def run(seed: int, notebook: Path = NOTEBOOK, second: Path = PARTS[1][0]) -> dict[str, object]:
    """One fresh process: the chapters' cells under this seed; their QUANTITIES."""
    kernel = "default" if seed % 2 else "avx2"
    start = time.perf_counter()
    parts = [(str(notebook), PARTS[0][1]), (str(second), PARTS[1][1])]
    with tempfile.TemporaryDirectory(prefix="translator-sweep-") as cache:
        env = dict(os.environ, LABFORMER_SEED=str(seed), OMP_NUM_THREADS="1",
                   TQDM_DISABLE="1", MPLBACKEND="Agg", ATEN_CPU_CAPABILITY=kernel,
                   LABFORMER_CACHE=cache)
        result = subprocess.run([sys.executable, "-c", CHILD, json.dumps(parts),
                                 ",".join(QUANTITIES)],
                                env=env, capture_output=True, text=True, cwd=NOTEBOOK.parent)
    lines = [x for x in result.stdout.splitlines() if x.startswith("SWEEP-RESULT ")]
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"seed {seed} ({kernel}) failed:\n{result.stderr[-3000:]}")
    record = json.loads(lines[-1].removeprefix("SWEEP-RESULT "))
    seconds = round(time.perf_counter() - start)
    print(f"seed {seed:3} {kernel:7}: {json.dumps(record['values'])} ({seconds} s)"
          + "".join(f"\n    false: {c}" for c in record["false"]), flush=True)
    return {"seed": seed, "kernel": kernel, "seconds": seconds, **record["values"],
            "false_claims": record["false"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("1-20"),
                        help="like 1-20 or 3,5,8 (default 1-20)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (default 2)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"default {OUT.relative_to(ROOT)}")
    parser.add_argument("--notebook", type=Path, default=NOTEBOOK,
                        help="a copy of the chapter to run instead (each run reads it when it "
                             "starts, so edit the chapter only in a copy while a sweep runs)")
    parser.add_argument("--second", type=Path, default=PARTS[1][0],
                        help="a copy of chapter 14 to run after it instead")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        runs = list(pool.map(
            lambda seed: run(seed, args.notebook.resolve(), args.second.resolve()), args.seeds))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "chapter": NOTEBOOK.stem,
        "what": "chapter 11's translator for each seed, read by chapters 11 and 14 up to "
                "the recurrent baseline: the numbers the chapters hold to this sweep",
        "quantities": QUANTITIES,
        "command": "python book/sweeps/translator_sweep.py " + " ".join(argv or sys.argv[1:]),
        "code_version": code_version(),
        "duration": f"{time.perf_counter() - start:.0f} s for {len(runs)} runs, "
                    f"{args.jobs} at a time",
        "runs": runs,
    }, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
