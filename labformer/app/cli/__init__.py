"""The ``labformer`` command: look at the toy corpus, train the translator, use it, score it.

    labformer corpus --num 5                  # sample pairs (tab-separated) of the corpus
    labformer train --out runs/fr-en.pt       # train, with a progress bar on a terminal
    labformer train --pairs my.tsv --out runs/mine.pt   # your own source<TAB>target file
    labformer translate "je suis étudiant"    # greedy, or --beam 4; no sentence: stdin lines
    labformer evaluate --split test           # BLEU, chrF and exact match
    labformer export --out site/_static       # the model file the book's live page loads
    labformer lm train --text FILE --out M.pt # a small GPT on any UTF-8 text (see .lm)

One module per command (``corpus``, ``train``, ``translate``, ``evaluate``, ``export``), each
with its ``add_parser`` and ``run``; ``runs`` keeps a training run's files (side file, lock, log,
signals, resuming); ``common`` holds what they share.

Bad input (an empty sentence, a missing, corrupt or mismatched checkpoint, a malformed pairs
file, an unusable device or --out) ends with one line on stderr and exit status 1, never a
traceback, and is found before the first training step. A run that learns nothing (validation
BLEU near 0, empty translations) says so and exits with status 3; it writes its checkpoint
when there was none, but never replaces a model (--overwrite) with one that failed: the new
model stays in OUT.partial. Usage errors exit with 2, Ctrl-C with 130, SIGTERM with 143, at
any moment (one line that names what happened to each file; the lock is removed). ``train``
never replaces a file that is not a labformer checkpoint, and replaces a checkpoint only when
asked (--resume, --overwrite) and only once the new run has finished (see :mod:`.runs`).

Every command that writes a file refuses one of another kind and writes through a side file
in the same folder, renamed into place when complete, so a full disk or a signal leaves the
old file as it was: ``evaluate --output`` replaces only a file it wrote (marked with an
extended attribute) or an empty one, never any other file or an input; ``export --out``
replaces only a model file it wrote. FIFOs, devices and directories are named as such without
being opened. Checkpoints store a SHA-256 of every entry (weights, vocabularies,
configuration, training state), checked on every load (and export): a changed file is
refused in one line naming what differs. --threads is 1 to the machine's CPU count.
``translate`` carries numbers, clock times and words the model never saw over to the output
(labformer.app.carry), translates a line of several sentences sentence by sentence, and a line it
cannot translate gives an empty line and a warning with its line number, while the others go
on. Under ``torchrun``, ``labformer train`` trains data-parallel; only rank 0 prints and
writes, and a failure ends every rank with one line. Each command imports what it needs when it
runs: ``labformer --help`` does not load torch.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence

from labformer.app.cli import corpus, evaluate, export, lm, translate
from labformer.app.cli import train as train_command
from labformer.app.cli.common import CLIError, Terminated, note, os_sentence, threads
from labformer.app.cli.runs import sigterm_as_interrupt
from labformer.app.cli.train import split_pairs as _split_pairs  # noqa: F401 - book/sweeps/train_everyday.py uses it
from labformer.app.cli.train import verdict as _verdict  # noqa: F401 - the tests call it with stubs

__all__ = ["COMMANDS", "CLIError", "main"]

# The subcommands, in the order --help lists them: name -> run(args) -> exit status.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "corpus": corpus.run,
    "train": train_command.run,
    "translate": translate.run,
    "evaluate": evaluate.run,
    "export": export.run,
    "lm": lm.run,
}


def _version() -> str:
    """labformer.__version__: the one source of the version (pyproject.toml reads it too, so
    an installed package's metadata says the same, until the source changes without a
    reinstall; the source is what runs)."""
    from labformer import __version__

    return __version__


def _parser() -> argparse.ArgumentParser:
    from labformer.app.cli.common import columns_parser

    parser = argparse.ArgumentParser(
        prog="labformer",
        description="The labformer toy translator (French -> English by default): corpus, "
                    "train, translate, evaluate.")
    parser.add_argument("--version", action="version", version=f"labformer {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # The translator is small: a second thread gains little, and on a busy machine threads wait
    # on each other. (Numbers still differ across CPUs: each runs its own float kernels.)
    threads_option = argparse.ArgumentParser(add_help=False)
    threads_option.add_argument("--threads", type=threads, default=1,
                                help="CPU threads for torch, 1 to this machine's CPU count "
                                     "(default 1)")
    columns = columns_parser()
    corpus.add_parser(sub, [])
    train_command.add_parser(sub, [threads_option, columns])
    translate.add_parser(sub, [threads_option])
    evaluate.add_parser(sub, [threads_option, columns])
    export.add_parser(sub, [])
    lm.add_parser(sub, [threads_option])
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``labformer`` console script; returns the exit status.

    Ctrl-C at any moment of a command, while it parses its arguments or loads torch too, ends
    it with one line and status 130 (SIGTERM: 143): an error raised while an import was being
    interrupted (numpy turns the interrupt into an ImportError) counts as the interrupt.
    """
    seen: list[int] = []

    def interrupted(signum: int, frame: object) -> None:
        seen.append(signum)
        raise KeyboardInterrupt

    old = None
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        try:
            old = signal.signal(signal.SIGINT, interrupted)
        except ValueError:  # pragma: no cover - not the main thread: no handler
            old = None
    try:
        return _main(argv)
    except KeyboardInterrupt as e:
        if not getattr(e, "reported", False):
            note("labformer: interrupted", err=True)
        return 143 if isinstance(e, Terminated) else 130
    except Exception:
        if not seen:
            raise
        note("labformer: interrupted", err=True)
        return 130
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old)


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    where = f" (rank {os.environ.get('RANK', '0')})" if world > 1 else ""
    try:
        # SIGTERM is Ctrl-C in every command (one line, files named; under torchrun, rank 0's).
        with sigterm_as_interrupt(os.environ.get("RANK", "0") == "0"):
            if getattr(args, "threads", None):
                import torch

                torch.set_num_threads(args.threads)
            return COMMANDS[args.command](args)
    except BrokenPipeError:  # `labformer corpus | head`: the reader has gone; end quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout
        return 0
    except OSError as e:
        note(f"labformer: error{where}: {os_sentence(e)}", err=True)
        return 1
    except (CLIError, ValueError) as e:
        note(f"labformer: error{where}: {e}", err=True)
        return 1
    except RuntimeError as e:  # pragma: no cover - under torchrun, another rank has failed
        if world == 1:
            raise
        first = str(e).strip().splitlines()[0][:120] if str(e).strip() else type(e).__name__
        note(f"labformer: error{where}: lost the other processes ({first}); another rank "
             f"failed, its message says why", err=True)
        return 1
