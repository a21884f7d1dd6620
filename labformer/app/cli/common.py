"""What every command shares: errors, messages, argument types, the pairs-file checks."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from labformer.data.pairs import PairLine

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


CORPUS_HELD = 2000  # pairs the generated corpus takes out of --num-pairs: 1000 valid + 1000 test


def corpus_size(minimum: int) -> Callable[[str], int]:
    """argparse type: a generated corpus size, at least ``minimum`` pairs (its 1000
    validation and 1000 test pairs, and some to train on)."""
    def checked(text: str) -> int:
        value = whole(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(
                f"the generated corpus takes {CORPUS_HELD} of its pairs for validation and "
                f"test: --num-pairs is at least {minimum} ({minimum - CORPUS_HELD} left to "
                f"train on), got {text}")
        return value

    checked.__name__ = "corpus_size"
    return checked


def seed(text: str) -> int:
    """argparse type: a seed, 0 to 2**32 - 1."""
    value = whole(text)
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"a seed is a whole number from 0 to {MAX_SEED}, "
                                         f"got {text}")
    return value


def beam(text: str) -> int:
    """argparse type: a beam width, 1 to MAX_BEAM."""
    from labformer.app.translate import (
        MAX_BEAM,  # light: translate is imported by every decoding command
    )

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
    from labformer.data import guess_language, read_pairs

    path = path or args.pairs
    src_lang, tgt_lang = langs or (args.src_lang, args.tgt_lang)
    src_col, tgt_col = columns(args)
    notes: list[str] = []
    with _bounded(path) as readable:
        try:
            pairs = read_pairs(readable, src_col, tgt_col, notes=notes)
        except ValueError as e:
            if readable != path:
                raise ValueError(str(e).replace(readable, path)) from None
            if "not valid UTF-8" not in str(e):
                raise
            raise CLIError(_encoding_hint(path)) from None
    notes = [line.replace(readable, path) for line in notes]
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


MAX_INPUT = 2**30  # bytes: a pairs file, or standard input, is read whole up to this size


def too_big(what: str) -> CLIError:
    return CLIError(f"{what} is larger than {MAX_INPUT // 2**30} GiB, the most labformer reads "
                    f"(a pairs file is held in memory whole; an endless stream such as "
                    f"/dev/zero never ends): split it, or give a smaller file")


@contextlib.contextmanager
def _bounded(path: str) -> Iterator[str]:
    """``path`` itself when it is a regular file within :data:`MAX_INPUT`; a stream (a FIFO,
    a device, /dev/stdin) is copied, up to that size, into a temporary file whose path is
    yielded instead; CLIError past it."""
    import stat
    import tempfile

    try:
        info = os.stat(path)
    except OSError:
        yield path  # read_pairs says what is wrong
        return
    if stat.S_ISREG(info.st_mode):
        if info.st_size > MAX_INPUT:
            raise too_big(path)
        yield path
        return
    if stat.S_ISDIR(info.st_mode):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="labformer-") as folder:
        copy = os.path.join(folder, "pairs")
        total = 0
        with open(path, "rb") as source, open(copy, "wb") as target:
            while block := source.read(2**20):
                total += len(block)
                if total > MAX_INPUT:
                    raise too_big(path)
                target.write(block)
                if total == len(block) and b"\0" in block[:4096] \
                        and not block.startswith((b"\xff\xfe", b"\xfe\xff")):
                    break  # binary from its start (/dev/zero): read_pairs says so
        yield copy


# What an OSError's errno means, in words (the rest: its strerror, lower-cased).
_ERRNO_WORDS = {
    "ENOSPC": "the disk is full",
    "EDQUOT": "the disk quota is used up",
    "EFBIG": "the file would be larger than this system allows",
    "EROFS": "the file system is read-only",
    "EACCES": "permission denied",
    "EPERM": "permission denied",
    "ENOENT": "no such file or folder",
    "ENOTDIR": "a folder on its path is a file",
    "EISDIR": "it is a directory",
    "EIO": "an input/output error (a failing disk or a lost network drive?)",
    "ENAMETOOLONG": "the name is too long",
    "ELOOP": "too many symbolic links on its path",
    "EXDEV": "it is on another file system",
}


def os_reason(error: OSError) -> str:
    """Why an OSError happened, in words, without Python's ``[Errno N]``."""
    import errno

    name = errno.errorcode.get(error.errno or -1, "")
    if name in _ERRNO_WORDS:
        return _ERRNO_WORDS[name]
    if error.strerror:
        return error.strerror[0].lower() + error.strerror[1:]
    text = str(error)
    return text or type(error).__name__


def os_sentence(error: OSError) -> str:
    """An OSError as one sentence: what could not be done to which file, and why."""
    if error.errno is None and not error.filename:
        return str(error) or type(error).__name__  # our own message, already a sentence
    where = f"{error.filename}: " if error.filename else ""
    return f"{where}{os_reason(error)}"


def special_file(path: str) -> str | None:
    """What ``path`` is when it exists and is neither a regular file nor a directory (a FIFO,
    a device, a socket), checked with stat so that nothing is opened (a FIFO would block)."""
    from labformer.train import special_mode  # torch: imported only when a file is checked

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return special_mode(mode)


def check_folder_writable(path: str, flag: str) -> None:
    """The folder that will hold ``path`` exists (or is made) and takes a new file; else a
    CLIError that says why, before any work."""
    import tempfile

    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".labformer-", suffix=".probe", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except (FileExistsError, NotADirectoryError):
        raise CLIError(f"cannot write {flag} {path}: a folder on its path is a file; nothing "
                       f"was written") from None
    except OSError as e:
        raise CLIError(f"cannot write {flag} {path}: {os_reason(e)}; nothing was "
                       f"written") from None


# The mark a command leaves on a file it writes (an extended attribute, where the file system
# keeps them): its next run replaces that file, and no other, since a file's contents alone
# cannot say who wrote it. Copies (cp, an editor's save) lose it: a copy is the user's file.
OUTPUT_MARK = "user.labformer.output"


def marked_output(path: str, mark: str) -> bool:
    """Whether ``path`` is a regular file that a labformer command wrote with ``mark``."""
    try:
        return os.path.isfile(path) and os.getxattr(path, OUTPUT_MARK) == mark.encode()
    except (OSError, AttributeError):  # no such attribute, no xattrs here (or on this OS)
        return False


def _mark(fd: int, mark: str) -> None:
    """Mark an open file as ``mark``'s output, where the file system keeps marks."""
    with contextlib.suppress(OSError, AttributeError):
        os.setxattr(fd, OUTPUT_MARK, mark.encode())


def write_atomically(path: str, data: bytes, flag: str, mark: str | None = None) -> None:
    """Write ``data`` to ``path`` through a side file in the same folder, renamed into place
    only once it is complete: a failure (a full disk) leaves the file that was there as it
    was, and says so in one line. ``mark``: the file is marked as that command's output
    (:func:`marked_output`), so that the command's next run knows it may replace it."""
    import tempfile

    folder = os.path.dirname(os.path.abspath(path))
    old_mode = None
    try:
        old_mode = os.stat(path).st_mode & 0o777
    except OSError:
        pass
    try:
        fd, side = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                                    dir=folder)
    except OSError as e:
        raise CLIError(f"cannot write {flag} {path}: {os_reason(e)}; nothing was "
                       f"written") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if mark is not None:
                _mark(f.fileno(), mark)
            os.fsync(f.fileno())
        if old_mode is None:
            umask = os.umask(0)
            os.umask(umask)
            old_mode = 0o666 & ~umask
        os.chmod(side, old_mode)
        os.replace(side, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(side)
        kept = "is unchanged" if os.path.exists(path) else "was not written"
        raise CLIError(f"cannot write {flag} {path}: {os_reason(e)}; {path} {kept}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(side)
        raise


def threads(text: str) -> int:
    """argparse type: CPU threads for torch, 1 to this machine's CPU count (torch crashes on
    absurd counts rather than refusing them)."""
    value = positive(text)
    cap = os.cpu_count() or 1
    if value > cap:
        raise argparse.ArgumentTypeError(f"{value} threads, but this machine has {cap} CPU "
                                         f"thread(s): choose 1 to {cap}")
    return value


TEXT_SAMPLE = 2**20  # bytes of an existing --output file read to tell what it is


def refuse_unsafe_text_output(path: str, flag: str, inputs: dict[str, str | None],
                              mark: str) -> None:
    """Refuse a --output that is not this command's own earlier output: a file the command
    reads (``inputs``: flag -> path), a FIFO or device or directory, and any existing file
    that does not carry the command's ``mark`` (:func:`marked_output`), whatever it holds: a
    script, notes, a log, a pairs file, a checkpoint. An empty file (nothing to lose) may be
    replaced too. Nothing is touched here."""
    from labformer.train import file_kind

    unchanged = "choose another file, or remove it first (it is unchanged)"
    for name, other in inputs.items():
        if other and os.path.exists(path) and os.path.exists(other) \
                and os.path.samefile(path, other):
            raise CLIError(f"{flag} {path} is the {name} file: writing there would replace "
                           f"it; {unchanged}")
    kind = file_kind(path)
    if kind == "missing" or kind == "an empty file" or (
            kind is not None and kind.startswith("a text file") and marked_output(path, mark)):
        return
    if kind is None:
        kind = "a zip archive (a labformer checkpoint?)"
    elif kind == "a text file":
        with open(path, "rb") as f:
            sample = f.read(TEXT_SAMPLE)
        if b"\t" in sample:
            kind = "a tab-separated file (a pairs file?)"
        else:
            kind = "a text file that labformer did not write"
    raise CLIError(f"{flag} {path} exists and is {kind}: {flag} replaces only a file it wrote "
                   f"itself (marked as {mark}'s output); {unchanged}")


def _encoding_hint(path: str) -> str:
    """The error for a pairs file that is not UTF-8: every line that is not (the first five),
    and the likely encoding with the command that converts it."""
    with open(path, "rb") as f:
        raw = f.read()
    bad = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            bad.append(number)
    shown = ", ".join(str(n) for n in bad[:5]) + (", ..." if len(bad) > 5 else "")
    try:
        raw.decode("cp1252")
        guess = "WINDOWS-1252"
    except UnicodeDecodeError:
        guess = "LATIN1"
    return (f"{path}: not valid UTF-8 on {len(bad)} line(s) (line {shown}): the file looks "
            f"like {guess} (Latin-1); convert it with: iconv -f {guess} -t UTF-8 {path} > "
            f"{path}.utf8")
