"""The ``labformer`` command: look at the toy corpus, train the translator, use it, score it.

    labformer corpus --num 5                  # sample pairs (tab-separated) of the corpus
    labformer train --out runs/fr-en.pt       # train, with a progress bar on a terminal
    labformer translate "je suis étudiant"    # greedy, or --beam 4
    labformer evaluate --split test           # BLEU, chrF and exact match

Bad input (an empty sentence, an over-long one, a missing or corrupt checkpoint, a malformed
pairs file) ends with one line on stderr and exit status 1, never a traceback. Under
``torchrun``, ``labformer train`` trains data-parallel; only rank 0 prints and writes.
Each command imports what it needs when it runs: ``labformer --help`` does not load torch.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .translate import Translator

DEFAULT_CHECKPOINT = "runs/fr-en.pt"
CORPUS_PAIRS = 30000  # generated pairs (train + 1000 valid + 1000 test)
CORPUS_SEED = 0  # the data set is fixed: `train --seed` changes the training, not the data
SPLITS = ("train", "valid", "test")


class CLIError(Exception):
    """A problem to report in one line, without a traceback."""


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="labformer",
        description="The labformer toy translator (French -> English): corpus, train, "
                    "translate, evaluate.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # The translator is small: a second thread gains little, and on a busy machine threads wait
    # on each other. (Numbers still differ across CPUs: each runs its own float kernels.)
    threads = argparse.ArgumentParser(add_help=False)
    threads.add_argument("--threads", type=_positive, default=1,
                         help="CPU threads for torch (default 1)")

    p = sub.add_parser("corpus", help="print sample pairs of the generated corpus",
                       description="Print pairs of the generated corpus, tab-separated (the "
                                   "format 'train --pairs' reads).")
    p.add_argument("--num", type=_positive, default=10, help="pairs to print (default 10)")
    p.add_argument("--split", choices=SPLITS, default="train", help="which split")
    p.add_argument("--seed", type=int, default=0, help="corpus seed (default 0)")
    p.add_argument("--num-pairs", type=_positive, default=CORPUS_PAIRS,
                   help=f"corpus size (default {CORPUS_PAIRS})")
    p.add_argument("--stats", action="store_true", help="print the corpus summary first")

    p = sub.add_parser("train", help="train the translator and write a checkpoint",
                       parents=[threads],
                       description="Train the translator on the generated corpus or on your "
                                   "own tab-separated pairs file; works under torchrun.")
    p.add_argument("--out", default=DEFAULT_CHECKPOINT,
                   help=f"checkpoint to write (default {DEFAULT_CHECKPOINT})")
    p.add_argument("--epochs", type=_positive, default=None,
                   help="passes over the training data (default: the translator's)")
    p.add_argument("--seed", type=int, default=0,
                   help="training seed: initial weights, batches, dropout (default 0); the "
                        "corpus and the validation split keep their own fixed seed")
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda, mps")
    p.add_argument("--pairs", metavar="FILE",
                   help="train on this UTF-8 file of 'source<TAB>target' lines instead")
    p.add_argument("--num-pairs", type=_positive, default=CORPUS_PAIRS,
                   help=f"generated corpus size (default {CORPUS_PAIRS})")
    p.add_argument("--batch-size", type=_positive, default=None, help="pairs per step")
    p.add_argument("--resume", action="store_true",
                   help="continue from --out if it exists (same result as one long run)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    for name, text in (("translate", "translate sentences with a trained checkpoint"),
                       ("evaluate", "BLEU, chrF and exact match on a split or a pairs file")):
        p = sub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".",
                           parents=[threads])
        if name == "translate":
            p.add_argument("sentences", nargs="+", metavar="SENTENCE",
                           help="French sentence(s), one argument each")
        else:
            p.add_argument("--split", choices=SPLITS, default="test",
                           help="split of the generated corpus (default test)")
            p.add_argument("--pairs", metavar="FILE", help="score on this pairs file instead")
            p.add_argument("--limit", type=_positive, default=None,
                           help="score only the first N pairs")
        p.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT,
                       help=f"default {DEFAULT_CHECKPOINT}")
        p.add_argument("--beam", type=_positive, default=None,
                       help="beam search with N hypotheses (default: greedy)")
        p.add_argument("--device", default="cpu", help="cpu (default), auto, cuda, mps")
    return parser


def _corpus(args: argparse.Namespace) -> int:
    from .data import generate_corpus

    corpus = generate_corpus(num_pairs=args.num_pairs, seed=args.seed)
    if args.stats:
        print(corpus.describe())
    for src, tgt in getattr(corpus, args.split)[:args.num]:
        print(f"{src}\t{tgt}")
    return 0


def _split_pairs(path: str, seed: int = CORPUS_SEED) -> tuple[list, list]:
    """Training and validation pairs of a user's file: a seeded 5% (at most 500) validates."""
    from .data import load_pairs

    pairs = load_pairs(path)
    if not pairs:
        raise CLIError(f"{path}: no sentence pairs in the file")
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    n_valid = min(500, len(pairs) // 20)
    return [pairs[i] for i in order[n_valid:]], [pairs[i] for i in order[:n_valid]]


def _train(args: argparse.Namespace) -> int:
    from .data import generate_corpus
    from .translate import BATCH_SIZE, train_translator

    rank = int(os.environ.get("RANK", "0"))
    if args.pairs:
        data, valid = _split_pairs(args.pairs)
        source: dict[str, object] = {"pairs_file": os.path.abspath(args.pairs)}
    else:
        corpus = generate_corpus(num_pairs=args.num_pairs, seed=CORPUS_SEED)
        data, valid = corpus.train, corpus.valid
        source = {"num_pairs": args.num_pairs, "seed": CORPUS_SEED}
    start = time.perf_counter()
    translator = train_translator(
        data, valid, epochs=args.epochs, seed=args.seed,
        batch_size=args.batch_size or BATCH_SIZE, device=args.device, checkpoint=args.out,
        resume=args.resume, progress=False if args.quiet else None,
        extra_state={"corpus": source})
    if rank == 0:
        h = translator.history
        for i, loss in enumerate(h.epoch_loss):
            bleu = f", valid BLEU {h.valid_score[i]:.1f}" if i < len(h.valid_score) else ""
            print(f"epoch {i + 1}: loss {loss:.3f}{bleu}")
        print(f"trained in {time.perf_counter() - start:.0f} s; checkpoint: {args.out}")
    return 0


def _load(args: argparse.Namespace) -> Translator:
    from .translate import Translator

    return Translator.from_checkpoint(args.checkpoint, device=args.device)


def _translate(args: argparse.Namespace) -> int:
    for i, sentence in enumerate(args.sentences):
        if not sentence.strip():
            raise CLIError(f"sentence {i + 1} is empty: nothing to translate")
    translator = _load(args)
    out = translator.translate_detailed(args.sentences, beam=args.beam)
    unknown = sorted({w for t in out for w in t.unknown})
    if unknown:
        print(f"labformer: warning: not in the vocabulary, read as <unk>: {', '.join(unknown)}",
              file=sys.stderr)
    for t in out:
        print(t.text)
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from .data import generate_corpus, load_pairs

    translator = _load(args)
    if args.pairs:
        pairs, name = load_pairs(args.pairs), args.pairs
    else:
        from .train import load_checkpoint

        source = load_checkpoint(args.checkpoint).get("corpus", {})
        if "pairs_file" in source:
            raise CLIError(f"{args.checkpoint} was trained on {source['pairs_file']}, not the "
                           f"generated corpus: pass --pairs FILE to evaluate it")
        corpus = generate_corpus(num_pairs=source.get("num_pairs", CORPUS_PAIRS),
                                 seed=source.get("seed", CORPUS_SEED))
        pairs, name = getattr(corpus, args.split), f"{args.split} split"
    pairs = pairs[:args.limit]
    if not pairs:
        raise CLIError(f"{name}: no sentence pairs to evaluate")
    scores = translator.evaluate(pairs, beam=args.beam)
    decoding = f"beam {args.beam}" if args.beam else "greedy"
    print(f"{name}, {len(pairs)} pairs, {decoding}: BLEU {scores['bleu']:.2f}, "
          f"chrF {scores['chrf']:.2f}, exact match {scores['exact']:.1f}%")
    return 0


COMMANDS = {"corpus": _corpus, "train": _train, "translate": _translate, "evaluate": _evaluate}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``labformer`` console script; returns the exit status."""
    args = _parser().parse_args(argv)
    if getattr(args, "threads", None):
        import torch

        torch.set_num_threads(args.threads)
    try:
        return COMMANDS[args.command](args)
    except (CLIError, ValueError, OSError) as e:
        print(f"labformer: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("labformer: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # python -m labformer.cli (and torchrun -m labformer.cli)
    sys.exit(main())
