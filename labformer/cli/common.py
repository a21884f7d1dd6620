"""What every command shares: errors, messages, argument types, the pairs-file checks."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..data.pairs import PairLine

DEFAULT_CHECKPOINT = "runs/fr-en.pt"
CORPUS_PAIRS = 30000  # generated pairs (train + 1000 valid + 1000 test)
CORPUS_SEED = 0  # the data set is fixed: `train --seed` changes the training, not the data
SPLITS = ("train", "valid", "test")
MAX_SEED = 2**32 - 1


class Say(Protocol):
    """Where a message goes: the screen (stdout, or stderr for notes), and the run's log."""

    def __call__(self, message: str, err: bool = False) -> None: ...


class CLIError(Exception):
    """A problem to report in one line, without a traceback."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C: the last save is kept and named, the lock removed."""


def note(message: str, err: bool = False) -> None:
    """A line on stdout, or on stderr with ``err``."""
    print(message, file=sys.stderr if err else sys.stdout, flush=True)


def whole(text: str) -> int:
    """argparse type: a whole number."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def positive(text: str) -> int:
    """argparse type: a whole number >= 1."""
    value = whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text}")
    return value


def count(text: str) -> int:
    """argparse type: a whole number >= 0."""
    value = whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {text}")
    return value


def seed(text: str) -> int:
    """argparse type: a seed, 0 to 2**32 - 1."""
    value = whole(text)
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"a seed is a whole number from 0 to {MAX_SEED}, "
                                         f"got {text}")
    return value


def beam(text: str) -> int:
    """argparse type: a beam width, 1 to MAX_BEAM."""
    from ..translate import MAX_BEAM  # light: translate is imported by every decoding command

    value = whole(text)
    if not 1 <= value <= MAX_BEAM:
        raise argparse.ArgumentTypeError(f"a beam holds 1 to {MAX_BEAM} hypotheses, got "
                                         f"{value}")
    return value


def columns_parser() -> argparse.ArgumentParser:
    """--src-col, --tgt-col, --reverse: the columns of a pairs file (train and evaluate)."""
    columns = argparse.ArgumentParser(add_help=False)
    columns.add_argument("--src-col", type=positive, default=None, metavar="N",
                         help="1-based column of the source sentence in --pairs (default 1)")
    columns.add_argument("--tgt-col", type=positive, default=None, metavar="N",
                         help="1-based column of the target sentence in --pairs (default 2)")
    columns.add_argument("--reverse", action="store_true",
                         help="the target comes first (default off): columns 2 and 1, as in "
                              "the Anki/manythings fra.txt")
    return columns


def columns(args: argparse.Namespace) -> tuple[int, int]:
    """0-based (source, target) columns of --src-col / --tgt-col / --reverse."""
    src, tgt = (2, 1) if args.reverse else (1, 2)
    src, tgt = args.src_col or src, args.tgt_col or tgt
    if src == tgt:
        raise CLIError(f"--src-col and --tgt-col are both {src}: choose two columns")
    return src - 1, tgt - 1


def read_pairs_file(args: argparse.Namespace, path: str | None = None,
                    langs: tuple[str, str] | None = None, say: Say | None = None
                    ) -> list[PairLine]:
    """A pairs file's pairs with line numbers (``path``, default --pairs), checked the same
    way for ``train`` and ``evaluate``: a header line skipped with a note, a binary file or
    swapped languages an error, two columns in one language a warning."""
    from ..data import guess_language, read_pairs

    path = path or args.pairs
    src_lang, tgt_lang = langs or (args.src_lang, args.tgt_lang)
    src_col, tgt_col = columns(args)
    notes: list[str] = []
    pairs = read_pairs(path, src_col, tgt_col, notes=notes)
    for line in notes:
        (say or note)(f"labformer: note: {line}", err=True)
    if not pairs:
        raise CLIError(f"{path}: no sentence pairs in the file")
    if {src_lang, tgt_lang} == {"fr", "en"}:
        src_guess = guess_language([p.src for p in pairs])
        tgt_guess = guess_language([p.tgt for p in pairs])
        if (src_guess, tgt_guess) == (tgt_lang, src_lang):
            raise CLIError(f"{path}: column {src_col + 1} reads as {src_guess} and column "
                           f"{tgt_col + 1} as {tgt_guess}, but the model translates "
                           f"{src_lang} -> {tgt_lang}: swap them with --reverse (the Anki "
                           f"fra.txt puts English first), or set --src-lang/--tgt-lang")
        if src_guess is not None and src_guess == tgt_guess:
            (say or note)(f"labformer: warning: {path}: columns {src_col + 1} and "
                          f"{tgt_col + 1} both read as {src_guess}: is this a file of "
                          f"{src_lang} -> {tgt_lang} translations? (check --src-col/--tgt-col)",
                          err=True)
    return pairs
