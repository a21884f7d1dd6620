"""Run one chapter for many seeds and CPU kernel settings; summarise every claim it checks.

    python book/sweeps/claim_sweep.py book/07_transformer.ipynb --seeds 1-16
    python book/sweeps/claim_sweep.py book/09_loss.ipynb --seeds 1-12 --kernels default,avx2 \\
        --out /tmp/ch9.jsonl

    python book/sweeps/claim_sweep.py book/01_seq2seq_attention.ipynb --seeds 1-20 --jobs 2 \\
        --write book/data/01_seq2seq_attention.json

This is how a chapter's bounds are sized: each run executes the chapter's code cells in a
fresh process (``LABFORMER_SEED`` and ``ATEN_CPU_CAPABILITY`` set, one thread) with
``Evidence.check`` recording every claim instead of stopping at a false one. The summary gives,
for each claim in the order the chapter checks them, how many runs it held in, and for each
number in its measured text (the same count in every run) the mean, standard deviation, least
and largest value.

With ``--write PATH`` the sweep becomes the chapter's data file: after each run it evaluates
the file's ``quantities`` (name -> a Python expression in the chapter's namespace, given with
``--quantity NAME=EXPR`` or kept from the file already at PATH) and stores every run's values
with the command and the code version. The chapter reads the file with
``labformer.book.notebook.Sweep`` and holds its own run to the sweep's t-predictive intervals
(book/checking.md). With ``--kernels auto`` (the default with ``--write``) odd seeds run on
the plain kernels and even ones on AVX2.
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
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")

# Runs in the child: the chapter's code, every claim recorded (and taken as holding).
CHILD = r"""
import json, sys
import matplotlib
matplotlib.use("Agg")
import myst_nb
import nbformat
import labformer.book.notebook as notebook

out, path, wanted = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
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
ns = {"__name__": "__main__"}
values = {}
try:
    exec(compile(source, path, "exec"), ns)
    values = {name: float(eval(expr, ns)) for name, expr in wanted.items()}
finally:
    with open(out, "w") as handle:
        json.dump({"claims": records, "values": values}, handle)
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


def run(notebook: Path, seed: int, kernel: str,
        quantities: dict[str, str] | None = None) -> dict[str, object]:
    """One run: its claims in order (``claims``), the quantities' values (``values``) and its
    wall-clock ``seconds``; RuntimeError (with the traceback) if it crashed."""
    if kernel == "auto":
        kernel = "default" if seed % 2 else "avx2"
    start = time.perf_counter()
    env = dict(os.environ, LABFORMER_SEED=str(seed), OMP_NUM_THREADS="1", TQDM_DISABLE="1",
               MPLBACKEND="Agg")
    env.pop("ATEN_CPU_CAPABILITY", None)
    if kernel != "native":
        env["ATEN_CPU_CAPABILITY"] = kernel
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "claims.json"
        result = subprocess.run([sys.executable, "-c", CHILD, str(out), str(notebook),
                                 json.dumps(quantities or {})],
                                cwd=notebook.parent, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"seed {seed} {kernel}: the chapter crashed\n"
                               + result.stderr[-2000:])
        record: dict[str, object] = json.loads(out.read_text())
    return {"seed": seed, "kernel": kernel, "seconds": round(time.perf_counter() - start),
            **record}


def parse_quantity(text: str) -> tuple[str, str]:
    """"near=on_diag['dot']" -> ("near", "on_diag['dot']")."""
    name, sep, expr = text.partition("=")
    if not sep or not name.isidentifier() or not expr.strip():
        raise argparse.ArgumentTypeError(f"a quantity is NAME=EXPRESSION, got {text!r}")
    return name, expr.strip()


def write_data(path: Path, notebook: Path, quantities: dict[str, str],
               runs: list[dict[str, object]], command: str, seconds: float, jobs: int,
               settings: dict[str, object] | None = None) -> None:
    """The chapter's data file (the format ``labformer.book.notebook.Sweep`` reads). ``settings``:
    the values of the chapter's settings the sweep was made at (``Sweep.differs`` compares a
    reader's run with them), kept from the data file that is rewritten."""
    sys.path.insert(0, str(Path(__file__).parent))
    from ablation_sweep import code_version

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "chapter": notebook.stem,
        "what": f"{notebook.name} run for each seed: the numbers it holds to this sweep",
        "quantities": quantities,
        **({"settings": settings} if settings else {}),
        "command": command,
        "code_version": code_version(),
        "duration": f"{seconds:.0f} s for {len(runs)} runs, {jobs} at a time",
        "runs": [{"seed": r["seed"], "kernel": r["kernel"], "seconds": r["seconds"],
                  **r["values"],  # type: ignore[dict-item]
                  "false_claims": [c["claim"] for c in r["claims"]  # type: ignore[attr-defined]
                                   if not c["holds"]]}
                 for r in runs],
    }, indent=1) + "\n", encoding="utf-8")


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
    parser.add_argument("--kernels",
                        help="comma-separated ATEN_CPU_CAPABILITY settings, native = unset, "
                             "auto = default for odd seeds and avx2 for even ones (the default "
                             "with --write; default,avx2 without)")
    parser.add_argument("--out", type=Path, help="also write every run's claims (JSON lines)")
    parser.add_argument("--write", type=Path,
                        help="write the chapter's data file (book/data/NN_name.json)")
    parser.add_argument("--quantity", type=parse_quantity, action="append", default=[],
                        metavar="NAME=EXPR", help="a number to store for every run (repeat)")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    args = parser.parse_args(argv)
    notebook = args.notebook.resolve()
    if not notebook.is_file() or notebook.suffix != ".ipynb":
        parser.error(f"not a notebook: {args.notebook}")
    quantities: dict[str, str] = {}
    settings: dict[str, object] = {}
    if args.write and args.write.is_file():
        previous = json.loads(args.write.read_text(encoding="utf-8"))
        quantities, settings = previous.get("quantities", {}), previous.get("settings", {})
    quantities.update(args.quantity)
    if args.write and not quantities:
        parser.error("--write needs quantities: --quantity NAME=EXPR, or a data file that "
                     "names them")
    kernels = (args.kernels or ("auto" if args.write else "default,avx2")).split(",")
    jobs = [(seed, kernel) for seed in args.seeds for kernel in kernels]
    start = time.perf_counter()

    def one(job: tuple[int, str]) -> dict[str, object]:
        record = run(notebook, *job, quantities)
        claims: list[dict[str, object]] = record["claims"]  # type: ignore[assignment]
        failed = [c["claim"] for c in claims if not c["holds"]]
        print(f"seed {record['seed']} {record['kernel']}: {len(claims)} claims, "
              f"{len(failed)} false ({record['seconds']} s)"
              + "".join(f"\n    false: {c}" for c in failed), flush=True)
        return record

    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        records = list(pool.map(one, jobs))
    if args.out:
        with args.out.open("a") as handle:
            for r in records:
                for i, c in enumerate(r["claims"]):  # type: ignore[arg-type]
                    handle.write(json.dumps({"seed": r["seed"], "kernel": r["kernel"],
                                             "index": i, **c}) + "\n")
    print("\n".join(summary([r["claims"] for r in records])))  # type: ignore[misc]
    if args.write:
        command = "python book/sweeps/claim_sweep.py " + " ".join(argv or sys.argv[1:])
        write_data(args.write, notebook, quantities, records, command,
                   time.perf_counter() - start, args.jobs, settings)
        print(f"wrote {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
