"""``labformer corpus``: pairs of the generated corpus, tab-separated."""

from __future__ import annotations

import argparse
from typing import Any

from labformer.app.cli.common import (
    CORPUS_HELD,
    CORPUS_PAIRS,
    SPLITS,
    corpus_size,
    positive,
    seed,
)


def add_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    """The ``corpus`` subcommand and its options."""
    p = sub.add_parser("corpus", help="print sample pairs of the generated corpus",
                       parents=parents,
                       description="Print pairs of the generated corpus, tab-separated (the "
                                   "format 'train --pairs' reads).")
    p.add_argument("--num", type=positive, default=10, help="pairs to print (default 10)")
    p.add_argument("--split", choices=SPLITS, default="train", help="which split (default train)")
    p.add_argument("--seed", type=seed, default=0, help="corpus seed (default 0)")
    p.add_argument("--num-pairs", type=corpus_size(CORPUS_HELD + 1), default=CORPUS_PAIRS,
                   help=f"corpus size (default {CORPUS_PAIRS})")
    p.add_argument("--stats", action="store_true", help="print the corpus summary first "
                                                        "(default off)")


def run(args: argparse.Namespace) -> int:
    """Print the pairs."""
    from labformer.data import generate_corpus

    corpus = generate_corpus(num_pairs=args.num_pairs, seed=args.seed)
    if args.stats:
        print(corpus.describe())
    for src, tgt in getattr(corpus, args.split)[:args.num]:
        print(f"{src}\t{tgt}")
    return 0
