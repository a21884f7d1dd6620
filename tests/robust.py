"""Run every chapter under nbval for several seeds and CPU kernel settings; print a table.

    python tests/robust.py                      # the default sweep (make test-robust)
    python tests/robust.py --seeds 3            # 3 fresh random seeds (make test-robust SEEDS=3)
    python tests/robust.py --variants 5:avx2 book/03_scaling.ipynb
    python tests/robust.py --commit-seed        # print the seed CI derives from HEAD

A variant is ``SEED:KERNEL``: ``LABFORMER_SEED`` for the chapters' random draws, and
``ATEN_CPU_CAPABILITY`` for the float kernels PyTorch dispatches to (``default``, ``avx2``,
``avx512``; ``native`` leaves the variable unset, so the CPU's best is used). A chapter's
asserts must hold in every variant: they test claims, not one run.

Fresh seeds (``--seeds N``) are drawn from the operating system's entropy and printed, so a
failure can be reproduced with ``--variants SEED:KERNEL``; they cycle through the kernel
settings. CI runs one variant whose seed comes from the commit hash (``--commit-seed``): every
commit meets a seed that nobody chose, and the same commit always meets the same one.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;]*m|#x1B\[[0-9;]*m")
ROOT = Path(__file__).resolve().parent.parent
# Each seed 0-4 at least once, each kernel setting at least twice.
DEFAULT_VARIANTS = ["0:native", "1:default", "2:avx2", "3:native", "4:default", "3:avx2"]


def parse_variant(text: str) -> tuple[int, str]:
    seed, _, kernel = text.partition(":")
    if not seed.isdigit() or kernel not in {"native", "default", "avx2", "avx512"}:
        raise argparse.ArgumentTypeError(
            f"a variant is SEED:KERNEL with KERNEL in native|default|avx2|avx512, got {text!r}")
    return int(seed), kernel


#: Fresh and commit-derived seeds avoid 0-4, which the default sweep already covers.
FRESH_SEEDS = range(5, 1_000_000)
KERNELS = ["native", "default", "avx2"]


def fresh_variants(count: int) -> list[tuple[int, str]]:
    """``count`` random seeds, each with the next kernel setting in turn."""
    if count < 1:
        raise argparse.ArgumentTypeError(f"--seeds needs a positive count, got {count}")
    return [(FRESH_SEEDS[secrets.randbelow(len(FRESH_SEEDS))], KERNELS[i % len(KERNELS)])
            for i in range(count)]


def commit_seed(revision: str = "HEAD") -> int:
    """A seed from the commit hash: the same commit always gets the same seed."""
    result = subprocess.run(["git", "rev-parse", revision], cwd=ROOT, capture_output=True,
                            text=True)
    if result.returncode != 0:
        raise SystemExit(f"--commit-seed needs a git checkout: {result.stderr.strip()}")
    return FRESH_SEEDS[int(result.stdout.strip()[:12], 16) % len(FRESH_SEEDS)]


def run_variant(seed: int, kernel: str, notebooks: list[str], workers: int) -> dict[str, str]:
    """Map each notebook to "pass" or the first failing cell's error line."""
    env = dict(os.environ, LABFORMER_SEED=str(seed), OMP_NUM_THREADS="1")
    env.pop("ATEN_CPU_CAPABILITY", None)
    if kernel != "native":
        env["ATEN_CPU_CAPABILITY"] = kernel
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-cell-timeout=900",
               "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *notebooks]
        if workers > 1:
            cmd += ["-n", str(workers), "--dist", "loadfile"]
        subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        results = {nb: "not run" for nb in notebooks}
        if not report.exists():
            return results
        for case in ET.parse(report).iter("testcase"):
            name = Path(case.get("file") or case.get("classname", "").replace(".", "/")).name
            nb = next((n for n in notebooks if Path(n).stem in (case.get("classname") or "")
                       or Path(n).name == name), None)
            if nb is None:
                continue
            if results[nb] == "not run":
                results[nb] = "pass"
            bad = case.find("failure")
            if bad is None:
                bad = case.find("error")
            if bad is not None and results[nb] == "pass":
                text = ANSI.sub("", bad.text or bad.get("message", ""))
                where = [ln.strip() for ln in text.splitlines() if "-->" in ln]
                what = [ln.strip() for ln in text.splitlines() if "Error" in ln]
                results[nb] = "FAIL " + " | ".join(x[-1][:160] for x in (where, what) if x)
        return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", help="default: every book/*.ipynb")
    parser.add_argument("--variants", type=lambda s: [parse_variant(v) for v in s.split(",")],
                        default=[parse_variant(v) for v in DEFAULT_VARIANTS],
                        help="comma-separated SEED:KERNEL (default: %(default)s)")
    parser.add_argument("--seeds", type=int, metavar="N",
                        help="instead of --variants: N fresh random seeds, kernels in turn")
    parser.add_argument("--commit-seed", action="store_true",
                        help="print the seed derived from the commit hash (CI's) and exit")
    parser.add_argument("-n", "--workers", type=int, default=2, help="notebooks run at once")
    args = parser.parse_args(argv)
    if args.commit_seed:
        print(commit_seed())
        return 0
    if args.seeds is not None:
        try:
            args.variants = fresh_variants(args.seeds)
        except argparse.ArgumentTypeError as err:
            parser.error(str(err))
        print("fresh variants: " + ",".join(f"{s}:{k}" for s, k in args.variants)
              + "  (rerun one with --variants SEED:KERNEL)", flush=True)
    notebooks = args.notebooks or sorted(str(p.relative_to(ROOT))
                                         for p in (ROOT / "book").glob("*.ipynb"))
    table: dict[str, dict[str, str]] = {nb: {} for nb in notebooks}
    names = []
    for seed, kernel in args.variants:
        name = f"seed {seed} {kernel}"
        names.append(name)
        start = time.perf_counter()
        for nb, result in run_variant(seed, kernel, notebooks, args.workers).items():
            table[nb][name] = result
        failed = sum(table[nb][name] != "pass" for nb in notebooks)
        print(f"{name}: {len(notebooks) - failed}/{len(notebooks)} chapters pass "
              f"({time.perf_counter() - start:.0f} s)", flush=True)

    width = max(len(Path(nb).stem) for nb in notebooks)
    print("\n| " + "chapter".ljust(width) + " | " + " | ".join(names) + " |")
    print("|" + "-" * (width + 2) + "|" + "|".join("-" * (len(n) + 2) for n in names) + "|")
    for nb in notebooks:
        cells = [("pass" if table[nb][n] == "pass" else "FAIL").ljust(len(n)) for n in names]
        print(f"| {Path(nb).stem.ljust(width)} | " + " | ".join(cells) + " |")
    failures = [(nb, n, r) for nb in notebooks for n, r in table[nb].items() if r != "pass"]
    for nb, n, r in failures:
        print(f"{Path(nb).stem} [{n}]: {r}")
    print("all variants pass" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
