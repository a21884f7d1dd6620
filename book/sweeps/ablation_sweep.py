"""Chapter 13's seed sweep: its trainings for several seeds and CPU kernels, paired drops.

    python book/sweeps/ablation_sweep.py                  # the sweep stored in the chapter
    python book/sweeps/ablation_sweep.py --runs 1:avx2 4:default --out /tmp/sweep.jsonl
    python book/sweeps/ablation_sweep.py --runs ... --write book/data/13_ablations.json  # data file

What it runs: for every ``SEED:KERNEL`` of ``--runs`` a fresh process with
``LABFORMER_SEED=SEED``, ``ATEN_CPU_CAPABILITY=KERNEL`` and ``OMP_NUM_THREADS=1`` executes the
visible code cells of ``book/13_ablations.ipynb`` (the teaching code: every training and every
measurement, and the collapsed imports; the collapsed check, figure and solution cells are
skipped), and appends one JSON
line of per-variant measurements to ``--out`` (a finished run is not redone). Runs go one at a
time, about four and a half minutes each on one idle core.

Then it prints ``SWEEP = {...}``, the literal that the chapter's cell "The sweep" holds: per
quantity and ablation, each run's *paired drop*, the full model's value minus the variant's
for the same seed and kernel (they share the batch order, and the initial weights where the
shapes agree): token accuracy, BLEU, test NLL, training loss of the last 50 steps, gradient
norms and the other quantities the chapter's checks use; and, for the English-to-French pair
with and without label smoothing, their paired differences and the split of probability
between the two readings of "you". The default runs (seeds 1-20) leave out seed 0, the
chapter's default; two processes with disjoint ``--runs`` and ``--out`` files, merged with one
more call, halve the wait.

With ``--write PATH`` it also writes the chapter's data file (``book/data/13_ablations.json``,
which the chapter reads): the command, the code version (``git describe``), each run's seconds
and measurements, and ``sweep``, the paired drops above. The chapter reads its verdicts from
that sweep and checks its own run against the sweep's t-predictive intervals (book/checking.md);
the sweep runs outside CI.
"""

from __future__ import annotations

import argparse
import json
import os
import pprint
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "book" / "13_ablations.ipynb"
#: The chapter's sweep: seeds 1-20, odd ones on the plain kernels, even ones on AVX2.
DEFAULT_RUNS = [f"{s}:{'default' if s % 2 else 'avx2'}" for s in range(1, 21)]

# Executed in the child: the notebook's visible code cells, then a summary of the namespace.
CHILD = r"""
import json, sys
import matplotlib
matplotlib.use("Agg")
import numpy as np
nb = json.load(open(sys.argv[1]))
ns = {"__name__": "__main__"}
for cell in nb["cells"]:
    tags = cell.get("metadata", {}).get("tags", [])
    if cell["cell_type"] != "code" or "solution" in tags or (
            "hide-input" in tags and "imports" not in tags):
        continue
    exec("".join(cell["source"]), ns)
    matplotlib.pyplot.close("all")
results, histories = ns["results"], ns["histories"]
out = {"variants": {}}
for name, r in results.items():
    h = histories[name]
    g = np.array(h.step_grad_norm)
    out["variants"][name] = {
        **{k: float(v) for k, v in r.items()},
        "late": float(np.mean(h.step_loss[-50:])),
        "early": float(np.mean(h.step_loss[:50])),
        "grad_median": float(np.median(g)), "grad_max": float(g.max()),
        "grad_late": float(np.median(g[60:])),
    }
out["en_fr"] = {n: {k: float(v) for k, v in r.items()} for n, r in ns["en_fr"].items()}
out["readings"] = {n: [float(np.mean(a)) for a in r] for n, r in ns["readings"].items()}
for extra in ("gap", "changed", "cross_spread", "twins", "share_monotone"):
    if extra in ns:
        v = ns[extra]
        out[extra] = {k: float(x) for k, x in v.items()} if isinstance(v, dict) else float(v)
print("SWEEP-RESULT " + json.dumps(out))
"""


def run_one(seed: int, kernel: str, notebook: str) -> dict[str, Any]:
    """One fresh process: the chapter's visible cells under this seed and kernel."""
    env = {**os.environ, "LABFORMER_SEED": str(seed), "ATEN_CPU_CAPABILITY": kernel,
           "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1", "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, "-c", CHILD, notebook], env=env, cwd=ROOT,
                          capture_output=True, text=True, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("SWEEP-RESULT "):
            result: dict[str, Any] = json.loads(line.removeprefix("SWEEP-RESULT "))
            return result
    raise RuntimeError(f"seed {seed} ({kernel}) failed:\n{proc.stdout[-3000:]}\n"
                       f"{proc.stderr[-3000:]}")


def sweep_literal(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The chapter's ``SWEEP``: per quantity and ablation, each run's paired drop."""
    res = [r["result"] for r in runs]
    variants = [n for n in res[0]["variants"] if n != "full"]
    kernels = {"avx2": "AVX2", "default": "plain"}
    out: dict[str, Any] = {
        "runs": [r["run"] for r in runs],
        "desc": "; ".join(
            f"seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)} with {kernels[k]} kernels"
            for k in kernels
            if (seeds := [r["run"].split(":")[0] for r in runs if r["run"].endswith(":" + k)])),
        "full_acc": [round(x["variants"]["full"]["acc"], 3) for x in res],
    }
    for key in ("acc", "bleu", "nll", "p_ref", "p_above_99", "late", "enc_entropy",
                "grad_median", "grad_late"):
        out[key] = {n: [round(x["variants"]["full"][key] - x["variants"][n][key], 4)
                        for x in res] for n in variants}
    for key in ("nll", "bleu", "acc"):
        out[f"en_fr_{key}"] = [round(x["en_fr"]["full"][key] - x["en_fr"]["no_smoothing"][key], 4)
                               for x in res]
    for i, side in enumerate(("same", "other")):
        for n in ("full", "no_smoothing"):
            out[f"reading_{side}_{n}"] = [round(x["readings"][n][i], 4) for x in res]
    for key in ("gap", "changed", "cross_spread"):
        if key in res[0]:
            out[key] = {n: [round(x[key][n], 6) for x in res] for n in res[0][key]}
    return out


def format_literal(sweep: dict[str, Any]) -> str:
    """``sweep`` as a Python literal whose lines fit the notebook's 80 columns."""
    text = pprint.pformat(sweep, width=72, compact=True, sort_dicts=False)
    return text.replace("\n", "\n" + " " * len("SWEEP = "))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", default=DEFAULT_RUNS, help="SEED:KERNEL ...")
    parser.add_argument("--out", default="/tmp/ablation_sweep.jsonl")
    parser.add_argument("--notebook", default=str(NOTEBOOK), help="a copy to run instead")
    parser.add_argument("--write", help="also write the chapter's data file here")
    args = parser.parse_args()
    out = Path(args.out)
    done = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    for spec in args.runs:
        seed, kernel = spec.split(":")
        if any(r["run"] == spec for r in done):
            continue
        print(f"running seed {seed} with {kernel} kernels ...", flush=True)
        start = time.perf_counter()
        result = run_one(int(seed), kernel, args.notebook)
        record = {"run": spec, "seconds": round(time.perf_counter() - start),
                  "result": result}
        done.append(record)
        with out.open("a") as f:
            f.write(json.dumps(record) + "\n")
    runs = [r for r in done if r["run"] in args.runs]
    print("SWEEP = " + format_literal(sweep_literal(runs)))
    if args.write:
        write_data(Path(args.write), runs, sys.argv[1:])
        print(f"wrote {args.write}")


def code_version() -> str:
    """``git describe --always --dirty`` of the repository, or "unknown" outside a checkout."""
    proc = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    return proc.stdout.strip() or "unknown"


def write_data(path: Path, runs: list[dict[str, Any]], argv: list[str]) -> None:
    """The chapter's data file: the command, the code version, the runs and the sweep."""
    data = {
        "chapter": NOTEBOOK.stem,
        "command": "OMP_NUM_THREADS=1 python book/sweeps/ablation_sweep.py " + " ".join(argv),
        "code_version": code_version(),
        "duration": f"{sum(r.get('seconds', 0) for r in runs)} s for {len(runs)} runs",
        "runs": [r["run"] for r in runs],
        "sweep": sweep_literal(runs),
    }
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
