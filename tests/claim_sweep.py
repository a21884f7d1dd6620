"""Run one chapter for many seeds and CPU kernel settings; summarise every claim it checks.

    python tests/claim_sweep.py book/07_transformer.ipynb --seeds 1-16
    python tests/claim_sweep.py book/09_loss.ipynb --seeds 1-12 --kernels default,avx2 \\
        --out /tmp/ch9.jsonl

This is how a chapter's bounds are sized: each run executes the chapter's code cells in a
fresh process (``LABFORMER_SEED`` and ``ATEN_CPU_CAPABILITY`` set, one thread) with
``Evidence.check`` recording every claim instead of stopping at a false one. The summary gives,
for each claim in the order the chapter checks them, how many runs it held in, and for each
number in its measured text (the same count in every run) the mean, standard deviation, least
and largest value. A bound belongs at least five standard deviations beyond the mean (see the
introduction's "How the checks were sized").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")

# Runs in the child: the chapter's code, every claim recorded (and taken as holding).
CHILD = r"""
import json, sys
import matplotlib
matplotlib.use("Agg")
import myst_nb
import nbformat
import labformer.notebook as notebook

out, path = sys.argv[1], sys.argv[2]
records = []

def check(self, claim, holds, measured=""):
    records.append({"claim": claim, "holds": bool(holds), "measured": str(measured)})
    self.claims.append((claim, True, measured))
    return True

notebook.Evidence.check = check
notebook.Evidence.verify = lambda self: None
myst_nb.glue = lambda *args, **kwargs: None
cells = nbformat.read(path, as_version=4).cells
source = "\n\n".join(c.source for c in cells if c.cell_type == "code")
try:
    exec(compile(source, path, "exec"), {"__name__": "__main__"})
finally:
    with open(out, "w") as handle:
        json.dump(records, handle)
"""


def parse_seeds(text: str) -> list[int]:
    """"1-5,9" -> [1, 2, 3, 4, 5, 9]."""
    seeds: list[int] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            raise argparse.ArgumentTypeError(f"seeds are like 1-5,9, got {text!r}")
        seeds += range(int(first), int(last or first) + 1)
    return seeds


def run(notebook: Path, seed: int, kernel: str) -> list[dict[str, object]]:
    """The claims of one run, in order; RuntimeError (with the traceback) if it crashed."""
    env = dict(os.environ, LABFORMER_SEED=str(seed), OMP_NUM_THREADS="1", TQDM_DISABLE="1",
               MPLBACKEND="Agg")
    env.pop("ATEN_CPU_CAPABILITY", None)
    if kernel != "native":
        env["ATEN_CPU_CAPABILITY"] = kernel
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "claims.json"
        result = subprocess.run([sys.executable, "-c", CHILD, str(out), str(notebook)],
                                cwd=notebook.parent, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"seed {seed} {kernel}: the chapter crashed\n"
                               + result.stderr[-2000:])
        records: list[dict[str, object]] = json.loads(out.read_text())
        return records


def summary(runs: list[list[dict[str, object]]]) -> list[str]:
    """One block per claim: held in k of n runs, and each measured number's spread."""
    lines = []
    for i, claim in enumerate(runs[0]):
        same = [r[i] for r in runs if len(r) > i and r[i]["claim"] == claim["claim"]]
        held = sum(bool(r["holds"]) for r in same)
        lines.append(f"[{i}] {claim['claim']}: held in {held} of {len(same)} runs")
        numbers = [[float(x) for x in NUMBER.findall(str(r["measured"]))] for r in same]
        if numbers and numbers[0] and len({len(n) for n in numbers}) == 1:
            for j, values in enumerate(zip(*numbers, strict=True)):
                sd = statistics.stdev(values) if len(values) > 1 else 0.0
                lines.append(f"    number {j + 1}: mean {statistics.fmean(values):.4g}, sd "
                             f"{sd:.3g}, min {min(values):.4g}, max {max(values):.4g}")
        elif numbers:
            lines.append(f"    measured (first run): {same[0]['measured']}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("1-10"),
                        help="like 1-10 or 3,5,8 (default 1-10)")
    parser.add_argument("--kernels", default="default,avx2",
                        help="comma-separated ATEN_CPU_CAPABILITY settings, native = unset")
    parser.add_argument("--out", type=Path, help="also write every run's claims (JSON lines)")
    args = parser.parse_args(argv)
    notebook = args.notebook.resolve()
    if not notebook.is_file() or notebook.suffix != ".ipynb":
        parser.error(f"not a notebook: {args.notebook}")
    runs = []
    for seed in args.seeds:
        for kernel in args.kernels.split(","):
            claims = run(notebook, seed, kernel)
            failed = [c["claim"] for c in claims if not c["holds"]]
            print(f"seed {seed} {kernel}: {len(claims)} claims, {len(failed)} false"
                  + "".join(f"\n    false: {c}" for c in failed), flush=True)
            runs.append(claims)
            if args.out:
                with args.out.open("a") as handle:
                    for i, c in enumerate(claims):
                        handle.write(json.dumps({"seed": seed, "kernel": kernel, "index": i,
                                                 **c}) + "\n")
    print("\n".join(summary(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
