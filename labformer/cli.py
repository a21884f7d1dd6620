"""The ``labformer`` command: look at the toy corpus, train the translator, use it, score it.

    labformer corpus --num 5                  # sample pairs (tab-separated) of the corpus
    labformer train --out runs/fr-en.pt       # train, with a progress bar on a terminal
    labformer train --pairs my.tsv --out runs/mine.pt   # your own source<TAB>target file
    labformer translate "je suis étudiant"    # greedy, or --beam 4; no sentence: stdin lines
    labformer evaluate --split test           # BLEU, chrF and exact match

Bad input (an empty sentence, an over-long one, a missing, corrupt or mismatched checkpoint, a
malformed pairs file, an unusable device or --out) ends with one line on stderr and exit status
1, never a traceback, and is found before the first training step. A run that learns nothing
(validation BLEU near 0, empty translations) says so and exits with status 3, after writing its
checkpoint. Under ``torchrun``, ``labformer train`` trains data-parallel; only rank 0 prints and
writes, and a failure ends every rank with one line. Each command imports what it needs when it
runs: ``labformer --help`` does not load torch.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .translate import Translator

DEFAULT_CHECKPOINT = "runs/fr-en.pt"
CORPUS_PAIRS = 30000  # generated pairs (train + 1000 valid + 1000 test)
CORPUS_SEED = 0  # the data set is fixed: `train --seed` changes the training, not the data
SPLITS = ("train", "valid", "test")
MIN_PAIRS = 100  # fewer pairs than this teach a translator nothing: refuse (--min-pairs)
NEAR_ZERO_BLEU = 1.0  # a final validation BLEU below this: the run learned nothing
MEMORISED_BLEU = 50.0  # ... unless its training pairs come back this well: it memorised them
VALID_SEEN = 200  # training pairs translated for that check


class CLIError(Exception):
    """A problem to report in one line, without a traceback."""


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
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
    p.add_argument("--seed", type=int, default=0, help="corpus seed (default 0)")
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
                   help=f"checkpoint to write (default {DEFAULT_CHECKPOINT}); OUT.lock marks "
                        f"a run in progress")
    p.add_argument("--epochs", type=_positive, default=None,
                   help="exactly this many passes over the training data (default: enough "
                        "whole epochs, 3 at least, for --steps)")
    p.add_argument("--steps", type=_positive, default=None,
                   help="at least this many optimiser steps (default 800); warm-up is 200 "
                        "steps or a quarter of a shorter run")
    p.add_argument("--seed", type=int, default=0,
                   help="training seed: initial weights, batches, dropout (default 0); the "
                        "corpus and the validation split keep their own fixed seed")
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda, mps")
    p.add_argument("--pairs", metavar="FILE",
                   help="train on this UTF-8 file of 'source<TAB>target' lines instead "
                        "(default: the generated corpus); 5%% (at most 500) validate")
    p.add_argument("--src-lang", default="fr", help="source language, for the tokenizer "
                                                    "(default fr)")
    p.add_argument("--tgt-lang", default="en", help="target language (default en)")
    p.add_argument("--min-pairs", type=int, default=MIN_PAIRS,
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
        else:
            p.add_argument("--split", choices=SPLITS, default="test",
                           help="split of the generated corpus (default test)")
            p.add_argument("--pairs", metavar="FILE",
                           help="score on this pairs file instead (default: the split)")
            p.add_argument("--limit", type=_positive, default=None,
                           help="score only the first N pairs (default all)")
        p.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT,
                       help=f"default {DEFAULT_CHECKPOINT}")
        p.add_argument("--beam", type=_beam, default=None,
                       help="beam search with N hypotheses, 1 to 64 (default: greedy)")
        p.add_argument("--device", default="cpu", help="cpu (default), auto, cuda, mps")
    return parser


def _beam(text: str) -> int:
    from .translate import MAX_BEAM  # light: translate is imported by every decoding command

    value = _positive(text)
    if value > MAX_BEAM:
        raise argparse.ArgumentTypeError(f"at most {MAX_BEAM} hypotheses, got {value}")
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


def _read_pairs_file(args: argparse.Namespace) -> list:
    """The file's pairs with line numbers; errors for too few pairs or swapped languages."""
    from .data import guess_language, read_pairs

    src_col, tgt_col = _columns(args)
    pairs = read_pairs(args.pairs, src_col, tgt_col)
    if not pairs:
        raise CLIError(f"{args.pairs}: no sentence pairs in the file")
    langs = {args.src_lang, args.tgt_lang}
    if langs == {"fr", "en"}:
        src_guess = guess_language([p.src for p in pairs])
        tgt_guess = guess_language([p.tgt for p in pairs])
        if (src_guess, tgt_guess) == (args.tgt_lang, args.src_lang):
            raise CLIError(f"{args.pairs}: column {src_col + 1} reads as {src_guess} and column "
                           f"{tgt_col + 1} as {tgt_guess}, but you train {args.src_lang} -> "
                           f"{args.tgt_lang}: swap them with --reverse (the Anki fra.txt "
                           f"puts English first), or set --src-lang/--tgt-lang")
    return pairs


def _split_pairs(pairs: list, seed: int = CORPUS_SEED) -> tuple[list, list]:
    """Training and validation pairs of a user's file: a seeded 5% (at most 500) validates."""
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    n_valid = min(500, len(pairs) // 20)
    return [pairs[i] for i in order[n_valid:]], [pairs[i] for i in order[:n_valid]]


def _check_lengths(path: str, pairs: list, src_lang: str, tgt_lang: str, max_len: int
                   ) -> None:
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


def _train(args: argparse.Namespace) -> int:
    from .data import generate_corpus
    from .train import pick_device
    from .translate import BATCH_SIZE, MODEL_DEFAULTS, TRAIN_DEFAULTS, train_translator

    rank = int(os.environ.get("RANK", "0"))
    pick_device(args.device)  # an unusable device fails now, not after loading the data
    if args.pairs:
        pairs = _read_pairs_file(args)
        if len(pairs) < args.min_pairs:
            raise CLIError(f"{args.pairs}: {len(pairs)} pair(s) are too few to learn a "
                           f"translation from (at least {args.min_pairs}; a few thousand "
                           f"translate new sentences); --min-pairs 1 trains anyway")
        _check_lengths(args.pairs, pairs, args.src_lang, args.tgt_lang,
                       MODEL_DEFAULTS["max_len"])
        train_lines, valid_lines = _split_pairs(pairs)
        data = [(p.src, p.tgt) for p in train_lines]
        valid = [(p.src, p.tgt) for p in valid_lines]
        source: dict[str, object] = {"pairs_file": os.path.abspath(args.pairs),
                                     "columns": list(_columns(args))}
    else:
        corpus = generate_corpus(num_pairs=args.num_pairs, seed=CORPUS_SEED)
        data, valid = corpus.train, corpus.valid
        source = {"num_pairs": args.num_pairs, "seed": CORPUS_SEED}
    _check_writable(args.out)
    if args.resume and not os.path.isfile(args.out) and rank == 0:
        print(f"labformer: note: --resume, but there is no checkpoint at {args.out}: "
              f"starting a fresh run", file=sys.stderr)
    config = TRAIN_DEFAULTS
    if args.epochs:
        config = config.__class__(**{**_fields(config), "epochs": args.epochs, "min_steps": 0})
    if args.steps:
        config = config.__class__(**{**_fields(config), "min_steps": args.steps})
    config = config.__class__(**{**_fields(config), "seed": args.seed})
    # Off a terminal (a log, a pipe) or with --quiet, one line an epoch as it ends; on a
    # terminal the progress bar shows the run, and the lines follow at the end.
    live_lines = args.quiet or not sys.stdout.isatty()

    def epoch_line(epoch: int, epochs: int, h) -> None:
        # About 20-25 lines whatever the run's length: the validated epochs, or every k-th.
        scored = bool(h.valid_epoch) and h.valid_epoch[-1] == epoch
        due = scored if valid else epoch % max(1, epochs // 25) == 0
        if not live_lines or not (due or epoch == epochs):
            return
        bleu = f", valid BLEU {h.valid_score[-1]:.1f}" if scored else ""
        print(f"epoch {epoch}/{epochs}: loss {h.epoch_loss[-1]:.3f}{bleu}", flush=True)

    start = time.perf_counter()
    with _lock(args.out) if rank == 0 else contextlib.nullcontext():
        translator = train_translator(
            data, valid, seed=args.seed, train_config=config,
            batch_size=args.batch_size or BATCH_SIZE, device=args.device, checkpoint=args.out,
            resume=args.resume, progress=False if args.quiet else None,
            extra_state={"corpus": source}, src_lang=args.src_lang, tgt_lang=args.tgt_lang,
            tokenizer="moses" if args.pairs else "words", on_epoch=epoch_line)
    if rank != 0:
        return 0
    h = translator.history
    if not live_lines:  # a terminal: the summary once the bar has gone
        scores = dict(zip(h.valid_epoch, h.valid_score, strict=True))
        for i, loss in enumerate(h.epoch_loss, start=1):
            if i in scores or i == len(h.epoch_loss):
                bleu = f", valid BLEU {scores[i]:.1f}" if i in scores else ""
                print(f"epoch {i}: loss {loss:.3f}{bleu}")
    print(f"trained {len(h.step_loss)} steps in {time.perf_counter() - start:.0f} s; "
          f"checkpoint: {args.out}")
    return _verdict(translator, valid, data)


def _fields(config) -> dict:
    import dataclasses

    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


def _verdict(translator: Translator, valid: list, data: Sequence = ()) -> int:
    """0, or 3 with a loud message when the run learned nothing (BLEU ~ 0, empty outputs).

    A model that translates its own training pairs well but held-out ones at BLEU ~ 0 has
    learned its data, not the language: a warning, not a failure.
    """
    if not valid or not translator.history.valid_score:
        print("labformer: warning: no validation pairs (fewer than 20 in the file): the "
              "model's quality is unknown", file=sys.stderr)
        return 0
    bleu = translator.history.valid_score[-1]
    empty = sum(not t for t in translator.translate([s for s, _ in valid]))
    if bleu < NEAR_ZERO_BLEU and not empty and data:
        seen = translator.evaluate(list(data[:VALID_SEEN]))["bleu"]
        if seen >= MEMORISED_BLEU:
            print(f"labformer: warning: the model translates its training pairs (BLEU "
                  f"{seen:.1f}) but not held-out ones (validation BLEU {bleu:.1f}): too "
                  f"little data to generalise", file=sys.stderr)
            return 0
    if bleu < NEAR_ZERO_BLEU or empty:
        print(f"labformer: error: this model learned nothing useful: validation BLEU "
              f"{bleu:.1f}, {empty} of {len(valid)} validation sentences translate to "
              f"nothing. More data (thousands of pairs) or more --steps may help.",
              file=sys.stderr)
        return 3
    return 0


def _load(args: argparse.Namespace) -> Translator:
    from .translate import Translator

    return Translator.from_checkpoint(args.checkpoint, device=args.device)


def _print_translations(translator: Translator, sentences: list[str], first: int,
                        beam: int | None) -> None:
    """Translate and print one line per sentence; blank input lines stay blank."""
    todo = [i for i, s in enumerate(sentences) if s.strip()]
    texts = [""] * len(sentences)
    if todo:
        out = translator.translate_detailed([sentences[i] for i in todo], beam=beam)
        unknown = sorted({w for t in out for w in t.unknown})
        if unknown:
            print(f"labformer: warning: not in the vocabulary, read as <unk>: "
                  f"{', '.join(unknown)}", file=sys.stderr)
        for i, t in zip(todo, out, strict=True):
            texts[i] = t.text
            if not t.text:
                print(f"labformer: warning: sentence {first + i} translated to nothing (an "
                      f"empty line): the model has not learned to translate it",
                      file=sys.stderr)
    for text in texts:
        print(text, flush=True)


def _translate(args: argparse.Namespace) -> int:
    if args.sentences and args.sentences != ["-"]:
        for i, sentence in enumerate(args.sentences):
            if not sentence.strip():
                raise CLIError(f"sentence {i + 1} is empty: nothing to translate")
        _print_translations(_load(args), args.sentences, 1, args.beam)
        return 0
    translator = _load(args)  # standard input: one sentence a line, in chunks for pipes
    chunk: list[str] = []
    first = 1
    interactive = sys.stdin.isatty()
    for line in sys.stdin:
        chunk.append(line.rstrip("\n"))
        if interactive or len(chunk) == 100:
            _print_translations(translator, chunk, first, args.beam)
            first, chunk = first + len(chunk), []
    if chunk:
        _print_translations(translator, chunk, first, args.beam)
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from .data import generate_corpus, load_pairs

    translator = _load(args)
    if args.pairs:
        pairs, name = load_pairs(args.pairs, *_columns(args)), args.pairs
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
    case = "" if translator.cased else " (lower-cased: this model writes lower case)"
    print(f"{name}, {len(pairs)} pairs, {decoding}: BLEU {scores['bleu']:.2f}, "
          f"chrF {scores['chrf']:.2f}, exact match {scores['exact']:.1f}%{case}")
    return 0


COMMANDS = {"corpus": _corpus, "train": _train, "translate": _translate, "evaluate": _evaluate}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``labformer`` console script; returns the exit status."""
    args = _parser().parse_args(argv)
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
    except KeyboardInterrupt:
        print("labformer: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # python -m labformer.cli (and torchrun -m labformer.cli)
    sys.exit(main())
