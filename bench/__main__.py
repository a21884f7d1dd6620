"""`python -m bench [--tiny]`: print the results table and write bench/results.md; then the host
reads per training step and per beam-search step (`python -m bench.syncs` alone)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import syncs
from .suite import run_all, to_markdown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--tiny", action="store_true", help="toy sizes, one repeat (smoke test)")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("results.md"),
                        help="where to write the Markdown table (default: bench/results.md)")
    args = parser.parse_args(argv)
    rows = run_all(tiny=args.tiny, progress=lambda m: print(f"  running: {m}", file=sys.stderr))
    table = to_markdown(rows)
    print(table)
    if not args.tiny:
        args.out.write_text(table)
        print(f"written to {args.out}")
    print("Host reads (GPU synchronisations) per step:")
    for name, value in syncs.measure().items():
        print(f"  {name}: {value:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
