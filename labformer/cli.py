"""The ``labformer`` command: look at the toy corpus, train the translator, use it, score it.

    labformer corpus --num 5                  # sample pairs (tab-separated) of the corpus
    labformer train --out runs/fr-en.pt       # train, with a progress bar on a terminal
    labformer train --pairs my.tsv --out runs/mine.pt   # your own source<TAB>target file
    labformer translate "je suis étudiant"    # greedy, or --beam 4; no sentence: stdin lines
    labformer evaluate --split test           # BLEU, chrF and exact match

Bad input (an empty sentence, a missing, corrupt or mismatched checkpoint, a malformed pairs
file, an unusable device or --out) ends with one line on stderr and exit status 1, never a
traceback, and is found before the first training step. A run that learns nothing (validation
BLEU near 0, empty translations) says so and exits with status 3, after writing its
checkpoint. ``train`` never overwrites a checkpoint unless asked (--resume, --overwrite): it
writes OUT.partial and moves it onto OUT when the run ends or is interrupted. ``translate``
carries numbers, clock times and words the model never saw over to the output
(labformer.carry), and a line it cannot translate gives an empty line and a warning with its
line number, while the others go on. Under ``torchrun``, ``labformer train`` trains
data-parallel; only rank 0 prints and writes, and a failure ends every rank with one line. Each
command imports what it needs when it runs: ``labformer --help`` does not load torch.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import random
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

if TYPE_CHECKING:
    from .carry import Carried, Carry
    from .data.pairs import PairLine
    from .train import History
    from .translate import Translator


class Say(Protocol):
    """Where a message goes: the screen (stdout, or stderr for notes), and the run's log."""

    def __call__(self, message: str, err: bool = False) -> None: ...

DEFAULT_CHECKPOINT = "runs/fr-en.pt"
CORPUS_PAIRS = 30000  # generated pairs (train + 1000 valid + 1000 test)
CORPUS_SEED = 0  # the data set is fixed: `train --seed` changes the training, not the data
SPLITS = ("train", "valid", "test")
MIN_PAIRS = 100  # fewer pairs than this teach a translator nothing: refuse (--min-pairs)
NEAR_ZERO_BLEU = 1.0  # a final validation BLEU below this: the run learned nothing
MEMORISED_BLEU = 50.0  # ... unless its training pairs come back this well: it memorised them
VALID_SEEN = 200  # training pairs translated for that check
MEMORISED_GAP = 20.0  # training BLEU this far above validation BLEU: a warning
FEW_VALID = 50  # fewer held-out pairs than this give a rough score
MAX_SEED = 2**32 - 1


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C: the last save is kept and named, the lock removed."""


class CLIError(Exception):
    """A problem to report in one line, without a traceback."""


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def _positive(text: str) -> int:
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text}")
    return value


def _count(text: str) -> int:
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {text}")
    return value


def _seed(text: str) -> int:
    value = _whole(text)
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"a seed is a whole number from 0 to {MAX_SEED}, "
                                         f"got {text}")
    return value


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("labformer")
    except PackageNotFoundError:  # run from a source tree that is not installed
        from . import __version__

        return __version__


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="labformer",
        description="The labformer toy translator (French -> English by default): corpus, "
                    "train, translate, evaluate.")
    parser.add_argument("--version", action="version", version=f"labformer {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # The translator is small: a second thread gains little, and on a busy machine threads wait
    # on each other. (Numbers still differ across CPUs: each runs its own float kernels.)
    threads = argparse.ArgumentParser(add_help=False)
    threads.add_argument("--threads", type=_positive, default=1,
                         help="CPU threads for torch (default 1)")
    columns = argparse.ArgumentParser(add_help=False)
    columns.add_argument("--src-col", type=_positive, default=None, metavar="N",
                         help="1-based column of the source sentence in --pairs (default 1)")
    columns.add_argument("--tgt-col", type=_positive, default=None, metavar="N",
                         help="1-based column of the target sentence in --pairs (default 2)")
    columns.add_argument("--reverse", action="store_true",
                         help="the target comes first (default off): columns 2 and 1, as in "
                              "the Anki/manythings fra.txt")

    p = sub.add_parser("corpus", help="print sample pairs of the generated corpus",
                       description="Print pairs of the generated corpus, tab-separated (the "
                                   "format 'train --pairs' reads).")
    p.add_argument("--num", type=_positive, default=10, help="pairs to print (default 10)")
    p.add_argument("--split", choices=SPLITS, default="train", help="which split (default train)")
    p.add_argument("--seed", type=_seed, default=0, help="corpus seed (default 0)")
    p.add_argument("--num-pairs", type=_positive, default=CORPUS_PAIRS,
                   help=f"corpus size (default {CORPUS_PAIRS})")
    p.add_argument("--stats", action="store_true", help="print the corpus summary first "
                                                        "(default off)")

    p = sub.add_parser("train", help="train the translator and write a checkpoint",
                       parents=[threads, columns],
                       description="Train the translator on the generated corpus or on your "
                                   "own tab-separated pairs file; works under torchrun, where "
                                   "each optimiser step takes one batch per process (a global "
                                   "batch of N x --batch-size, N times fewer steps an epoch).")
    p.add_argument("--out", default=DEFAULT_CHECKPOINT,
                   help=f"checkpoint to write (default {DEFAULT_CHECKPOINT}); an existing "
                        f"one is kept unless --resume or --overwrite; OUT.partial holds the "
                        f"run until it ends, OUT.lock marks it, a .log beside it records it")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --out with a new run (default off: refuse)")
    p.add_argument("--epochs", type=_positive, default=None,
                   help="exactly this many passes over the training data (default: enough "
                        "whole epochs, 3 at least, for --steps)")
    p.add_argument("--steps", type=_positive, default=None,
                   help="at least this many optimiser steps (default 800); warm-up is 200 "
                        "steps or a quarter of a shorter run")
    p.add_argument("--seed", type=_seed, default=0,
                   help="training seed: initial weights, batches, dropout (default 0); the "
                        "corpus and the validation split keep their own fixed seed")
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda, mps")
    p.add_argument("--pairs", metavar="FILE",
                   help="train on this UTF-8 file of 'source<TAB>target' lines instead "
                        "(default: the generated corpus); repeats are dropped, then 5%% (at "
                        "most 500) validate unless --valid")
    p.add_argument("--valid", metavar="FILE",
                   help="held-out pairs for validation, in the --pairs layout (default: 5%% "
                        "of --pairs)")
    p.add_argument("--src-lang", default="fr", help="source language, for the tokenizer "
                                                    "(default fr)")
    p.add_argument("--tgt-lang", default="en", help="target language (default en)")
    p.add_argument("--min-pairs", type=_count, default=MIN_PAIRS,
                   help=f"refuse a --pairs file with fewer pairs (default {MIN_PAIRS})")
    p.add_argument("--num-pairs", type=_positive, default=CORPUS_PAIRS,
                   help=f"generated corpus size (default {CORPUS_PAIRS})")
    p.add_argument("--batch-size", type=_positive, default=None,
                   help="pairs per step (default 96)")
    p.add_argument("--resume", action="store_true",
                   help="continue from --out if it exists (default off; same result as one "
                        "long run; the file must hold the same data and model)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar, only one line an epoch (default off)")

    for name, text in (("translate", "translate sentences with a trained checkpoint"),
                       ("evaluate", "BLEU, chrF and exact match on a split or a pairs file")):
        p = sub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".",
                           parents=[threads] if name == "translate" else [threads, columns])
        if name == "translate":
            p.add_argument("sentences", nargs="*", metavar="SENTENCE",
                           help="sentence(s) to translate, one argument each (default, or "
                                "'-': one per line from standard input)")
            p.add_argument("--scores", action="store_true",
                           help="print each translation's mean log-probability per token "
                                "and a tab before it (default off)")
            p.add_argument("--max-length", type=_positive, default=None, metavar="N",
                           help="crop sentences to their first N tokens (default: a longer "
                                "sentence than the model reads is an empty line and a "
                                "warning)")
        else:
            p.add_argument("--split", choices=SPLITS, default="test",
                           help="split of the generated corpus (default test); for a model "
                                "trained on --pairs, valid: its held-out pairs")
            p.add_argument("--output", metavar="FILE",
                           help="write the translations there, one a line (default: not "
                                "written)")
            p.add_argument("--pairs", metavar="FILE",
                           help="score on this pairs file instead (default: the split)")
            p.add_argument("--limit", type=_positive, default=None,
                           help="score only the first N pairs (default all)")
        p.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT,
                       help=f"default {DEFAULT_CHECKPOINT}")
        p.add_argument("--beam", type=_beam, default=None,
                       help="beam search with N hypotheses, 1 to 64 (default: greedy)")
        p.add_argument("--device", default="cpu", help="cpu (default), auto, cuda, mps")
        p.add_argument("--no-carry", dest="carry", action="store_false",
                       help="the model's output as it is (default: numbers, times and "
                            "unknown words of the source carried over, case matched)")
    return parser


def _beam(text: str) -> int:
    from .translate import MAX_BEAM  # light: translate is imported by every decoding command

    value = _whole(text)
    if not 1 <= value <= MAX_BEAM:
        raise argparse.ArgumentTypeError(f"a beam holds 1 to {MAX_BEAM} hypotheses, got "
                                         f"{value}")
    return value


def _columns(args: argparse.Namespace) -> tuple[int, int]:
    """0-based (source, target) columns of --src-col / --tgt-col / --reverse."""
    src, tgt = (2, 1) if args.reverse else (1, 2)
    src, tgt = args.src_col or src, args.tgt_col or tgt
    if src == tgt:
        raise CLIError(f"--src-col and --tgt-col are both {src}: choose two columns")
    return src - 1, tgt - 1


def _corpus(args: argparse.Namespace) -> int:
    from .data import generate_corpus

    corpus = generate_corpus(num_pairs=args.num_pairs, seed=args.seed)
    if args.stats:
        print(corpus.describe())
    for src, tgt in getattr(corpus, args.split)[:args.num]:
        print(f"{src}\t{tgt}")
    return 0


def _read_pairs_file(args: argparse.Namespace, path: str | None = None,
                     langs: tuple[str, str] | None = None, say: Say | None = None
                     ) -> list[PairLine]:
    """A pairs file's pairs with line numbers (``path``, default --pairs), checked the same
    way for ``train`` and ``evaluate``: a header line skipped with a note, a binary file or
    swapped languages an error."""
    from .data import guess_language, read_pairs

    path = path or args.pairs
    src_lang, tgt_lang = langs or (args.src_lang, args.tgt_lang)
    src_col, tgt_col = _columns(args)
    notes: list[str] = []
    pairs = read_pairs(path, src_col, tgt_col, notes=notes)
    for note in notes:
        (say or _note)(f"labformer: note: {note}", err=True)
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
    return pairs


def _note(message: str, err: bool = False) -> None:
    print(message, file=sys.stderr if err else sys.stdout, flush=True)


def _split_pairs(pairs: list[PairLine], seed: int = CORPUS_SEED
                 ) -> tuple[list[PairLine], list[PairLine]]:
    """Training and validation pairs of a user's file: a seeded 5% (at most 500) validates."""
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    n_valid = min(500, len(pairs) // 20)
    return [pairs[i] for i in order[n_valid:]], [pairs[i] for i in order[:n_valid]]


def _check_lengths(path: str, pairs: list[PairLine], src_lang: str, tgt_lang: str,
                   max_len: int) -> None:
    """Every pair fits the model's positions; else the first one that does not, by its line."""
    from .translate import text_codecs

    src_text, tgt_text = text_codecs([p.src for p in pairs], src_lang, tgt_lang)
    for p in pairs:
        for side, codec, text in (("source", src_text, p.src), ("target", tgt_text, p.tgt)):
            n = len(codec.tokenize(text))
            if n >= max_len:
                raise CLIError(f"{path}:{p.line}: the {side} sentence has {n} tokens; the model "
                               f"reads at most {max_len - 1}: shorten or remove it")


def _check_writable(out: str) -> None:
    """--out can be written (its folder exists or can be made, and takes a file)."""
    path = Path(out)
    if path.is_dir():
        raise CLIError(f"--out {out} is a directory: name a checkpoint file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=path.name + ".", suffix=".probe", dir=path.parent)
        os.close(fd)
        os.unlink(probe)
    except (FileExistsError, NotADirectoryError):
        raise CLIError(f"cannot write the checkpoint {out}: a folder on its path is a "
                       f"file") from None
    except OSError as e:
        raise CLIError(f"cannot write the checkpoint {out}: {e.strerror or e}") from None


@contextlib.contextmanager
def _lock(out: str) -> Iterator[None]:
    """OUT.lock while this process writes OUT; refuse when another live process holds it."""
    lock = Path(out + ".lock")
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            break
        except FileExistsError:
            try:
                pid = int(lock.read_text().strip() or 0)
            except (OSError, ValueError):
                pid = 0
            if pid and _alive(pid):
                raise CLIError(f"another run (pid {pid}) is writing {out}; wait for it, or "
                               f"choose another --out (remove {lock} if that run is gone)"
                               ) from None
            print(f"labformer: note: removing the stale lock {lock} (pid {pid} has ended)",
                  file=sys.stderr)
            lock.unlink(missing_ok=True)
    else:  # pragma: no cover - another process took the lock between unlink and open
        raise CLIError(f"another run is writing {out}")
    try:
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        yield
    finally:
        lock.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


class _Log:
    """Lines for the user (stdout, or stderr for notes and warnings), also kept in a log file
    beside the checkpoint."""

    def __init__(self, path: Path | None, append: bool) -> None:
        self.file = None
        if path is not None:
            self.file = open(path, "a" if append else "w", encoding="utf-8")  # noqa: SIM115
            self.path = path

    def __call__(self, message: str, err: bool = False, screen: bool = True) -> None:
        if screen:
            _note(message, err)
        if self.file is not None:
            self.file.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}\n")
            self.file.flush()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


def _log_path(out: str) -> Path:
    path = Path(out).with_suffix(".log")
    return path if path != Path(out) else Path(out + ".log")


def _resume_command(argv: Sequence[str]) -> str:
    """The command line of this run, with --resume instead of --overwrite."""
    args = [a for a in argv if a != "--overwrite"]
    if "--resume" not in args:
        args.append("--resume")
    return shlex.join(["labformer", *args])


def _saved_epoch(path: str) -> int | None:
    """The epochs a checkpoint holds, or None when it cannot be read."""
    from .train import load_checkpoint

    try:
        return int(load_checkpoint(path)["epoch"]) + 1
    except (OSError, ValueError, KeyError):
        return None


def _publish(partial: str, out: str) -> bool:
    """Move the finished (or interrupted) run onto --out, readable as the umask allows."""
    if not os.path.isfile(partial):
        return False
    os.replace(partial, out)  # atomic: readers see the old model or the new one
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(out, 0o666 & ~umask)
    return True


def _num_batches(n: int, batch_size: int) -> int:
    """Batches make_batches cuts n pairs into (windows of 50 batches, each rounded up)."""
    window = batch_size * 50
    return sum(math.ceil(min(window, n - start) / batch_size) for start in range(0, n, window))


def _train(args: argparse.Namespace) -> int:
    from .data import Vocab, generate_corpus
    from .data.pairs import dedupe_pairs
    from .train import pick_device, planned_schedule
    from .translate import (
        BATCH_SIZE,
        MODEL_DEFAULTS,
        TRAIN_DEFAULTS,
        build_model,
        text_codecs,
        train_translator,
    )

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    out, partial = args.out, args.out + ".partial"
    if args.resume and args.overwrite:
        raise CLIError("--resume continues --out and --overwrite replaces it: choose one")
    if args.valid and not args.pairs:
        raise CLIError("--valid goes with --pairs (the generated corpus has its own split)")
    if os.path.isfile(out) and not (args.resume or args.overwrite):
        raise CLIError(f"{out} exists (a trained model is kept): continue it with --resume, "
                       f"replace it with --overwrite, or choose another --out")
    device = pick_device(args.device)  # an unusable device fails now, not after the data
    say = _Log(None, False)  # until --out is known to be writable: the screen only
    if args.pairs:
        pairs = _read_pairs_file(args, say=say)
        pairs, repeats = dedupe_pairs(pairs)
        if repeats:
            say(f"labformer: note: {args.pairs}: dropped {repeats} repeated pair(s) before "
                f"the split; {len(pairs)} distinct pairs remain", err=True)
        if len(pairs) < args.min_pairs:
            raise CLIError(f"{args.pairs}: {len(pairs)} pair(s) are too few to learn a "
                           f"translation from (at least {args.min_pairs}; a few thousand "
                           f"translate new sentences); --min-pairs 1 trains anyway")
        _check_lengths(args.pairs, pairs, args.src_lang, args.tgt_lang,
                       MODEL_DEFAULTS["max_len"])
        if args.valid:
            held, _ = dedupe_pairs(_read_pairs_file(args, args.valid, say=say))
            _check_lengths(args.valid, held, args.src_lang, args.tgt_lang,
                           MODEL_DEFAULTS["max_len"])
            seen = {(p.src, p.tgt) for p in pairs}
            valid_lines = [p for p in held if (p.src, p.tgt) not in seen]
            if len(valid_lines) < len(held):
                say(f"labformer: note: {args.valid}: {len(held) - len(valid_lines)} pair(s) "
                    f"are also training pairs: left out of validation", err=True)
            train_lines, split = pairs, f"validation: {len(valid_lines)} pairs of {args.valid}"
        else:
            train_lines, valid_lines = _split_pairs(pairs)
            split = f"validation: {len(valid_lines)} pairs held out of the file (5%)"
        data = [(p.src, p.tgt) for p in train_lines]
        valid = [(p.src, p.tgt) for p in valid_lines]
        source: dict[str, object] = {"pairs_file": os.path.abspath(args.pairs),
                                     "columns": list(_columns(args)),
                                     "valid": [list(pair) for pair in valid]}
        if args.valid:
            source["valid_file"] = os.path.abspath(args.valid)
        read = f"{len(pairs) + repeats} pairs read from {args.pairs}"
    else:
        corpus = generate_corpus(num_pairs=args.num_pairs, seed=CORPUS_SEED)
        data, valid = corpus.train, corpus.valid
        source = {"num_pairs": args.num_pairs, "seed": CORPUS_SEED}
        read = f"{args.num_pairs} generated pairs"
        split = f"validation: {len(valid)} pairs, test: {len(corpus.test)} pairs"
    _check_writable(out)
    config = TRAIN_DEFAULTS
    if args.epochs:
        config = config.__class__(**{**_fields(config), "epochs": args.epochs, "min_steps": 0})
    if args.steps:
        config = config.__class__(**{**_fields(config), "min_steps": args.steps})
    config = config.__class__(**{**_fields(config), "seed": args.seed})
    batch_size = args.batch_size or BATCH_SIZE
    steps_per_epoch = max(1, _num_batches(len(data), batch_size) // world)
    epochs, _ = planned_schedule(config, steps_per_epoch)

    # Where the run starts: afresh, from --out, or from the side file of a run that was
    # killed before it could move it onto --out.
    copied = False
    if rank == 0 and not args.resume and os.path.exists(partial):
        os.unlink(partial)  # a killed run's leftovers: this run starts afresh
    if args.resume:
        newer = os.path.isfile(partial) and (
            not os.path.isfile(out) or os.path.getmtime(partial) >= os.path.getmtime(out))
        if newer:
            origin = partial
        elif os.path.isfile(out):
            origin = out
            if rank == 0:
                shutil.copyfile(out, partial)
                copied = True
        else:
            origin = None
            if rank == 0:
                print(f"labformer: note: --resume, but there is no checkpoint at {out}: "
                      f"starting a fresh run", file=sys.stderr)
    if world > 1:  # the other ranks wait for rank 0's copy
        import torch.distributed as dist

        from .train import setup_distributed

        setup_distributed("nccl" if device.type == "cuda" else "gloo")
        dist.barrier()
    if rank == 0:
        say = _Log(_log_path(out), append=bool(args.resume))
    else:
        say = _Log(None, False)
    live_lines = args.quiet or not sys.stdout.isatty()

    # The setup banner: what is trained on what, where, for how long.
    kind = "moses" if args.pairs else "words"
    src_text, tgt_text = text_codecs([s for s, _ in data], args.src_lang, args.tgt_lang, kind)
    src_vocab = Vocab.build(src_text.tokenize(s) for s, _ in data)
    tgt_vocab = Vocab.build(tgt_text.tokenize(t) for _, t in data)
    n_params = build_model(src_vocab, tgt_vocab).num_parameters()
    if rank == 0:
        say(f"data: {read}; training: {len(data)} pairs, {split}")
        say(f"vocabulary: {len(src_vocab)} {args.src_lang} and {len(tgt_vocab)} "
            f"{args.tgt_lang} tokens; model: {n_params:,} parameters; device: {device}"
            f"{f' x {world} processes' if world > 1 else ''}; {epochs} epochs of "
            f"{steps_per_epoch} steps ({epochs * steps_per_epoch} steps), batch {batch_size}")
        if args.resume and origin is not None:
            done = _saved_epoch(origin)
            at = f"after epoch {done}" if done else "where it stopped"
            say(f"resuming {origin} {at} (of {epochs})")
        say(f"checkpoint: {out} (written as {partial} until the run ends); log: "
            f"{_log_path(out)}")

    bar = None
    if rank == 0 and not args.quiet and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=epochs * steps_per_epoch, unit="step", dynamic_ncols=True,
                   desc="training", smoothing=0.1)

    shown = {"epoch": f"1/{epochs}", "loss": "", "lr": ""}

    def step_tick(step: int, lr: float, loss: float | None) -> None:
        """One step of the run's one bar: tqdm adds the rate (steps/s) and the ETA."""
        if bar is None:
            return
        shown["lr"] = f"{lr:.2e}"
        if loss is not None:
            shown["loss"] = f"{loss:.3f}"
        bar.n = step
        bar.set_postfix({k: v for k, v in shown.items() if v}, refresh=False)
        bar.update(0)  # redraws at most every tqdm.mininterval

    def epoch_line(epoch: int, epochs: int, h: History) -> None:
        if bar is not None:
            shown.update(epoch=f"{min(epoch + 1, epochs)}/{epochs}",
                         loss=f"{h.epoch_loss[-1]:.3f}")
            bar.n = len(h.step_loss)
            bar.set_postfix(shown, refresh=False)
            bar.refresh()
        # About 20-25 lines whatever the run's length: the validated epochs, or every k-th.
        scored = bool(h.valid_epoch) and h.valid_epoch[-1] == epoch
        due = scored if valid else epoch % max(1, epochs // 25) == 0
        if not (due or epoch == epochs):
            return
        bleu = f", valid BLEU {h.valid_score[-1]:.1f}" if scored else ""
        say(f"epoch {epoch}/{epochs}: loss {h.epoch_loss[-1]:.3f}{bleu}", screen=live_lines)

    start = time.perf_counter()
    old_term = None
    if rank == 0:
        def terminated(signum: int, frame: object) -> NoReturn:
            raise Terminated

        try:
            old_term = signal.signal(signal.SIGTERM, terminated)
        except ValueError:  # pragma: no cover - not the main thread: no handler
            old_term = None
    try:
        with _lock(out) if rank == 0 else contextlib.nullcontext():
            try:
                translator = train_translator(
                    data, valid, seed=args.seed, train_config=config,
                    batch_size=batch_size, device=device, checkpoint=partial,
                    resume=args.resume, progress=False, extra_state={"corpus": source},
                    src_lang=args.src_lang, tgt_lang=args.tgt_lang, tokenizer=kind,
                    on_epoch=epoch_line, on_step=step_tick)
            except KeyboardInterrupt as e:
                if bar is not None:
                    bar.close()
                if rank == 0:
                    done = _saved_epoch(partial)
                    if done and _publish(partial, out):
                        say(f"labformer: interrupted; the last save, after epoch {done} of "
                            f"{epochs}, is {out}; continue with: "
                            f"{_resume_command(args.argv)}", err=True)
                    else:
                        kept = f"; {out} is unchanged" if os.path.isfile(out) else ""
                        say(f"labformer: interrupted before the first epoch ended: nothing "
                            f"was saved{kept}", err=True)
                    e.reported = True  # type: ignore[attr-defined]
                raise
            except Exception as e:
                if copied and rank == 0:
                    Path(partial).unlink(missing_ok=True)
                if isinstance(e, ValueError) and partial in str(e):
                    raise ValueError(str(e).replace(partial, out)) from None
                raise
            if rank == 0:
                _publish(partial, out)
    finally:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
        if bar is not None:
            bar.close()
    if rank != 0:
        return 0
    h = translator.history
    if not live_lines:  # a terminal: the summary once the bar has gone
        scores = dict(zip(h.valid_epoch, h.valid_score, strict=True))
        for i, loss in enumerate(h.epoch_loss, start=1):
            if i in scores or i == len(h.epoch_loss):
                bleu = f", valid BLEU {scores[i]:.1f}" if i in scores else ""
                print(f"epoch {i}: loss {loss:.3f}{bleu}")
    say(f"trained {len(h.step_loss)} steps in {time.perf_counter() - start:.0f} s; "
        f"checkpoint: {out}")
    try:
        return _verdict(translator, valid, data, say)
    finally:
        say.close()


def _fields(config: Any) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


def _verdict(translator: Translator, valid: list[tuple[str, str]],
             data: Sequence[tuple[str, str]] = (), say: Say | None = None) -> int:
    """0, or 3 with a loud message when the run learned nothing (BLEU ~ 0, empty outputs).

    Prints the training BLEU (on up to VALID_SEEN training pairs) beside the validation
    BLEU, and warns when the first is far above the second: the model has memorised its
    pairs. A model that translates its own pairs well but held-out ones at BLEU ~ 0 has
    learned its data, not the language: a warning, not a failure.
    """
    from .translate import VALID_SENTENCES

    say = say or _note
    if not valid or not translator.history.valid_score:
        say("labformer: warning: no validation pairs (fewer than 20 in the file): the "
            "model's quality is unknown", err=True)
        return 0
    bleu = translator.history.valid_score[-1]
    n_valid = min(len(valid), VALID_SENTENCES)
    empty = sum(not t for t in translator.translate([s for s, _ in valid]))
    seen = translator.evaluate(list(data[:VALID_SEEN]))["bleu"] if data else None
    rough = (f" (only {n_valid} pairs: a rough estimate; --valid FILE holds out more)"
             if n_valid < FEW_VALID else "")
    trained = f"training BLEU {seen:.1f} ({min(len(data), VALID_SEEN)} pairs), " \
        if seen is not None else ""
    say(f"{trained}validation BLEU {bleu:.1f} ({n_valid} held-out pairs){rough}")
    if seen is not None and seen - bleu >= MEMORISED_GAP and not empty:
        say(f"labformer: warning: the model translates its training pairs (BLEU {seen:.1f}) "
            f"far better than held-out ones (validation BLEU {bleu:.1f}): it has memorised "
            f"them, too little data to generalise; more pairs help, more steps do not",
            err=True)
        if bleu < NEAR_ZERO_BLEU and seen >= MEMORISED_BLEU:
            return 0
    if bleu < NEAR_ZERO_BLEU or empty:
        say(f"labformer: error: this model learned nothing useful: validation BLEU "
            f"{bleu:.1f}, {empty} of {len(valid)} validation sentences translate to "
            f"nothing. More data (thousands of pairs) or more --steps may help.", err=True)
        return 3
    return 0


def _load(args: argparse.Namespace) -> Translator:
    from .translate import Translator

    return Translator.from_checkpoint(args.checkpoint, device=args.device)


def _translate_lines(translator: Translator, carry: Carry, lines: list[str], first: int,
                     args: argparse.Namespace, what: str = "line") -> int:
    """Translate and print one line per input line; returns how many lines failed.

    A blank line stays blank. A line that cannot be translated (longer than the model reads,
    unless --max-length crops it; or any other error) prints an empty line and a warning
    with its 1-based number, and the others go on.
    """
    from .carry import translate_carried

    texts = [""] * len(lines)
    scores: list[float | None] = [None] * len(lines)
    failed = 0
    limit = translator.max_source_tokens
    crop = min(args.max_length, limit) if getattr(args, "max_length", None) else None
    todo = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        n = len(translator.src_text.tokenize(line))
        if n > limit and crop is None:
            print(f"labformer: warning: {what} {first + i} has {n} tokens, but this model "
                  f"reads at most {limit}: not translated (an empty line); --max-length "
                  f"{limit} crops such lines instead", file=sys.stderr)
            failed += 1
            continue
        if crop is not None and n > crop:
            print(f"labformer: warning: {what} {first + i} has {n} tokens: cropped to its "
                  f"first {crop}", file=sys.stderr)
        todo.append(i)
    carry.crop = crop

    def run(rows: list[int]) -> list[Carried]:
        return translate_carried(translator, [lines[i] for i in rows], beam=args.beam,
                                 carry=carry)

    results: dict[int, Carried] = {}
    if todo:
        try:
            results = dict(zip(todo, run(todo), strict=True))
        except (ValueError, RuntimeError):  # find the line that fails; the others go on
            for i in todo:
                try:
                    results[i] = run([i])[0]
                except (ValueError, RuntimeError) as e:
                    first_line = (str(e).splitlines() or [type(e).__name__])[0]
                    print(f"labformer: warning: {what} {first + i} could not be "
                          f"translated ({first_line}): an empty line", file=sys.stderr)
                    failed += 1
    unknown = sorted({w for t in results.values() for w in t.unknown})
    if unknown:
        print(f"labformer: warning: not in the vocabulary, read as <unk>: "
              f"{', '.join(unknown)}", file=sys.stderr)
    if args.scores and results:
        from .carry import sentence_scores

        rows = sorted(results)
        values = sentence_scores(translator, [results[i].prepared for i in rows],
                                 [results[i].raw for i in rows])
        for i, value in zip(rows, values, strict=True):
            scores[i] = value
    for i, t in sorted(results.items()):
        texts[i] = t.text
        if t.lost:
            print(f"labformer: warning: {what} {first + i}: not carried over to the "
                  f"translation: {', '.join(t.lost)}", file=sys.stderr)
        if not t.text:
            print(f"labformer: warning: {what} {first + i} translated to nothing (an "
                  f"empty line): the model has not learned to translate it",
                  file=sys.stderr)
    for text, score in zip(texts, scores, strict=True):
        if args.scores:
            print(f"{'' if score is None else f'{score:.4f}'}\t{text}", flush=True)
        else:
            print(text, flush=True)
    return failed


def _translate(args: argparse.Namespace) -> int:
    from .carry import Carry

    if args.sentences and args.sentences != ["-"]:
        for i, sentence in enumerate(args.sentences):
            if not sentence.strip():
                raise CLIError(f"sentence {i + 1} is empty: nothing to translate")
        translator = _load(args)
        carry = Carry.of(translator, enabled=args.carry)
        failed = _translate_lines(translator, carry, args.sentences, 1, args, "sentence")
        return 1 if failed else 0
    translator = _load(args)  # standard input: one sentence a line, in chunks for pipes
    carry = Carry.of(translator, enabled=args.carry)
    chunk: list[str] = []
    first, failed = 1, 0
    interactive = sys.stdin.isatty()
    for line in sys.stdin:
        chunk.append(line.rstrip("\n"))
        if interactive or len(chunk) == 100:
            failed += _translate_lines(translator, carry, chunk, first, args)
            first, chunk = first + len(chunk), []
    if chunk:
        failed += _translate_lines(translator, carry, chunk, first, args)
    if failed:
        print(f"labformer: error: {failed} line(s) could not be translated (empty lines in "
              f"the output; the warnings name them)", file=sys.stderr)
    return 1 if failed else 0


def _evaluate(args: argparse.Namespace) -> int:
    from .carry import Carry, translate_carried
    from .data import generate_corpus
    from .train import load_checkpoint
    from .translate import score

    translator = _load(args)
    if args.pairs:
        langs = (translator.src_text.lang, translator.tgt_text.lang)
        lines = _read_pairs_file(args, args.pairs, langs)
        pairs, name = [(p.src, p.tgt) for p in lines], args.pairs
    else:
        source = load_checkpoint(args.checkpoint).get("corpus", {})
        if "pairs_file" in source:
            if args.split != "valid" or "valid" not in source:
                held = (" or --split valid for its held-out pairs" if "valid" in source
                        else "")
                raise CLIError(f"{args.checkpoint} was trained on {source['pairs_file']}, not "
                               f"the generated corpus: pass --pairs FILE to evaluate it{held}")
            pairs = [(s, t) for s, t in source["valid"]]
            name = f"held-out pairs of {source.get('valid_file', source['pairs_file'])}"
        else:
            corpus = generate_corpus(num_pairs=source.get("num_pairs", CORPUS_PAIRS),
                                     seed=source.get("seed", CORPUS_SEED))
            pairs, name = getattr(corpus, args.split), f"{args.split} split"
    pairs = pairs[:args.limit]
    if not pairs:
        raise CLIError(f"{name}: no sentence pairs to evaluate")
    carry = Carry.of(translator, enabled=args.carry)
    hyps = [t.text for t in translate_carried(translator, [s for s, _ in pairs],
                                              beam=args.beam, carry=carry)]
    refs = [translator.tgt_text.normalize(t) for _, t in pairs]
    scores = score(hyps, refs)
    if args.output:
        Path(args.output).write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    decoding = f"beam {args.beam}" if args.beam else "greedy"
    case = "" if translator.cased else " (lower-cased: this model writes lower case)"
    print(f"{name}, {len(pairs)} pairs, {decoding}: BLEU {scores['bleu']:.2f}, "
          f"chrF {scores['chrf']:.2f}, exact match {scores['exact']:.1f}%{case}")
    print(f"sacreBLEU signature: {_signature(hyps, refs)}")
    if args.output:
        print(f"translations: {args.output}")
    return 0


def _signature(hyps: list[str], refs: list[str]) -> str:
    from sacrebleu.metrics import BLEU

    bleu = BLEU()
    bleu.corpus_score(hyps, [refs])
    return str(bleu.get_signature())


COMMANDS = {"corpus": _corpus, "train": _train, "translate": _translate, "evaluate": _evaluate}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``labformer`` console script; returns the exit status."""
    args = _parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if getattr(args, "threads", None):
        import torch

        torch.set_num_threads(args.threads)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    where = f" (rank {os.environ.get('RANK', '0')})" if world > 1 else ""
    try:
        return COMMANDS[args.command](args)
    except BrokenPipeError:  # `labformer corpus | head`: the reader has gone; end quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout
        return 0
    except (CLIError, ValueError, OSError) as e:
        print(f"labformer: error{where}: {e}", file=sys.stderr)
        return 1
    except RuntimeError as e:  # pragma: no cover - under torchrun, another rank has failed
        if world == 1:
            raise
        first = str(e).strip().splitlines()[0][:120] if str(e).strip() else type(e).__name__
        print(f"labformer: error{where}: lost the other processes ({first}); another rank "
              f"failed, its message says why", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        if not getattr(e, "reported", False):
            print("labformer: interrupted", file=sys.stderr)
        return 143 if isinstance(e, Terminated) else 130


if __name__ == "__main__":  # python -m labformer.cli (and torchrun -m labformer.cli)
    sys.exit(main())
