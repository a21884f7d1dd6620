"""A training run's bookkeeping: its files beside --out, its lock, its log, signals, resuming.

For ``--out OUT`` a run owns four paths, all named from OUT so that two checkpoints never share
one (``a.pt`` and ``a.pth`` are two runs) and no file of the user's is taken for a run's:

- ``OUT``: the finished model. Replaced only by a labformer checkpoint, only when a new run
  has finished (``--overwrite``) or continued it (``--resume``), by an atomic rename.
- ``OUT.partial``: the run in progress, saved after its first and last epochs and in between
  at most once a minute and once every quarter of the run (at most 6 saves). An interrupted
  ``--overwrite`` or ``--resume`` leaves it beside the model it would replace.
- ``OUT.lock``: the process id of the run writing OUT, and its OS lock (flock), created
  whole by an atomic link before anything else is touched; a second run is refused and
  changes nothing, and of two runs that find a stale lock only one takes it over.
- ``OUT.log``: what the run printed, appended to (never truncated), one header per run; only
  a file that starts with such a header is appended to, never an input, and its last line
  says why a run stopped.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shlex
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, NoReturn

from labformer.app.cli.common import CLIError, Terminated, note, os_reason, special_file

SAVE_EVERY = 60.0  # seconds between two saves of a run (plus its first and last epochs)


def partial_path(out: str) -> str:
    """The side file of the run that writes ``out``."""
    return out + ".partial"


def log_path(out: str) -> Path:
    """The log of ``out``: ``OUT.log``, its own whatever the suffix (a.pt, a.pth)."""
    return Path(out + ".log")


# The header line RunLog writes for each run: "\n2026-01-31 12:00:00 ---- labformer train ...".
_LOG_HEADER = re.compile(rb"\A\n*\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ---- labformer ")


def is_run_log(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a run's log (it starts with RunLog's header line) or empty:
    the only files a run appends its log to."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return not head or bool(_LOG_HEADER.match(head))


def not_a_checkpoint(path: str) -> str | None:
    """None when ``path`` is a labformer checkpoint (a damaged one included: it is still
    ours to replace); else what it is, in a few words. A FIFO or a device is never opened."""
    from labformer.train import file_kind, load_checkpoint

    kind = file_kind(path)
    if kind is not None:
        return kind
    try:
        load_checkpoint(path)
    except ValueError as e:
        ours = ("is damaged", "written by an earlier labformer", "another labformer version",
                "not a checkpoint labformer wrote")  # damaged, old or edited: still a run's
        if any(words in str(e) for words in ours):
            return None
        return "a zip archive"
    return None


def saved_epoch(path: str) -> tuple[int, int | None] | None:
    """(epochs saved, epochs planned or None) of a checkpoint, or None when unreadable."""
    from labformer.train import load_checkpoint

    try:
        state = load_checkpoint(path)
        planned = state.get("epochs")
        return int(state["epoch"]) + 1, None if planned is None else int(planned)
    except (OSError, ValueError, KeyError):
        return None


def check_writable(out: str) -> None:
    """--out can be written (its folder exists or can be made, and takes a file)."""
    path = Path(out)
    if path.is_dir():
        raise CLIError(f"--out {out} is a directory: name a checkpoint file")
    special = special_file(out)
    if special:
        raise CLIError(f"--out {out} is {special}: name a checkpoint file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=path.name + ".", suffix=".probe", dir=path.parent)
        os.close(fd)
        os.unlink(probe)
    except (FileExistsError, NotADirectoryError):
        raise CLIError(f"cannot write the checkpoint {out}: a folder on its path is a "
                       f"file") from None
    except OSError as e:
        raise CLIError(f"cannot write the checkpoint {out}: {os_reason(e)}") from None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def _lock_holder(path: Path) -> int:
    """The process id a lock file of ours holds; CLIError for a file that is not one."""
    try:
        text = ("" if special_file(str(path)) or path.is_dir()
                else path.read_text(encoding="utf-8", errors="replace").strip())
    except OSError:
        text = ""
    if not text.isdigit():
        raise CLIError(f"{path} exists and is not a labformer lock (it holds no process "
                       f"id): remove it or choose another --out")
    return int(text)


def _refuse_held(out: str, path: Path, pid: int | None = None) -> NoReturn:
    who = f" (pid {pid})" if pid is not None else ""
    raise CLIError(f"another run{who} is writing {out}; wait for it, or choose another --out "
                   f"(remove {path} if that run is gone)")


@contextlib.contextmanager
def lock(out: str) -> Iterator[None]:
    """OUT.lock while this process writes OUT; refuse when another live process holds it.

    The lock file holds the writer's process id and, where the platform has one, an OS lock
    (fcntl.flock) that the writer holds for the whole run and that ends with it. A new lock
    appears complete, its id written and its OS lock taken, by an atomic link(); a stale one
    (its process has ended) is taken over under its OS lock, which only one process can hold:
    two runs can never both take it. A file of that name that does not hold a process id is
    not a lock of ours, and is left alone; a refused run changes no file.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: create exclusively, no takeover race
        fcntl = None  # type: ignore[assignment]
    path = Path(out + ".lock")
    fd = -1
    for _ in range(20):
        fd = _new_lock(path, fcntl)
        if fd >= 0:
            break
        pid = _lock_holder(path)
        if fcntl is None:  # pragma: no cover
            if _alive(pid):
                _refuse_held(out, path, pid)
            path.unlink(missing_ok=True)
            continue
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            continue  # its run has just ended: try again
        except OSError as e:
            raise CLIError(f"cannot open the lock {path}: {os_reason(e)}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            _refuse_held(out, path, pid)
        # The OS lock is ours: no other process can take over this file now. It must still
        # be the file at that name (its run may have removed it meanwhile), and stale.
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except OSError:
            same = False
        if not same:
            os.close(fd)
            continue
        pid = _lock_holder(path)
        if _alive(pid):
            os.close(fd)
            _refuse_held(out, path, pid)
        note(f"labformer: note: taking over the stale lock {path} (pid {pid} has ended)",
             err=True)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        except OSError as e:
            os.close(fd)
            raise CLIError(f"cannot write the lock {path}: {os_reason(e)}; nothing was "
                           f"changed") from None
        break
    else:  # pragma: no cover - the lock changed hands twenty times while we looked
        raise CLIError(f"another run is writing {out}")
    try:
        yield
    finally:
        path.unlink(missing_ok=True)  # still under the OS lock: no one has taken it over
        os.close(fd)


def _new_lock(path: Path, fcntl: object) -> int:
    """A new lock file at ``path``, complete (this process's id, its OS lock held) from the
    moment it appears; its descriptor, or -1 when ``path`` exists."""
    try:
        fd, side = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=path.parent)
    except OSError as e:
        raise CLIError(f"cannot write the lock {path}: {os_reason(e)}; nothing was "
                       f"changed") from None
    try:
        os.write(fd, str(os.getpid()).encode())
        os.fchmod(fd, 0o644)
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)  # type: ignore[attr-defined]
        os.link(side, path)  # atomic, and refused when the name exists
    except FileExistsError:
        os.close(fd)
        return -1
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            return _exclusive_lock(path, fcntl)  # a file system without hard links
        raise CLIError(f"cannot write the lock {path}: {os_reason(e)}; nothing was "
                       f"changed") from None
    finally:
        Path(side).unlink(missing_ok=True)
    return fd


def _exclusive_lock(path: Path, fcntl: object) -> int:
    """:func:`_new_lock` where hard links are not possible: created exclusively, then filled."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return -1
    except OSError as e:
        raise CLIError(f"cannot write the lock {path}: {os_reason(e)}; nothing was "
                       f"changed") from None
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)  # type: ignore[attr-defined]
        os.write(fd, str(os.getpid()).encode())
    except OSError as e:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise CLIError(f"cannot write the lock {path}: {os_reason(e)}; nothing was "
                       f"changed") from None
    return fd


class RunLog:
    """Lines for the user (stdout, or stderr for notes and warnings), also appended to the
    run's log file (``None``: the screen only)."""

    def __init__(self, path: Path | None = None, header: str = "") -> None:
        self.file: IO[str] | None = None
        self.path = path
        self.stdout_closed = self.stderr_closed = False
        if path is not None:
            self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
            if header:
                self.file.write(f"\n{time.strftime('%Y-%m-%d %H:%M:%S')} ---- {header}\n")

    def __call__(self, message: str, err: bool = False, screen: bool = True) -> None:
        if screen and not (self.stderr_closed if err else self.stdout_closed):
            try:
                note(message, err)
            except BrokenPipeError:
                # `labformer train 2>&1 | head -1`: the reader has gone. With a log the run
                # goes on (its lines are in the log); without one, the command ends quietly.
                if self.file is None:
                    raise
                self._lose(err)
        self.log(message)

    def log(self, message: str) -> None:
        """A line in the log file only."""
        if self.file is not None:
            self.file.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}\n")
            self.file.flush()

    def _lose(self, err: bool) -> None:
        """Point the closed stream at /dev/null (no second error when Python flushes it) and
        say once, in the log and on the other stream while it is open, where the run's lines
        go now."""
        import sys

        stream = sys.stderr if err else sys.stdout
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
        if err:
            self.stderr_closed = True
        else:
            self.stdout_closed = True
        name = "standard error" if err else "standard output"
        message = (f"labformer: note: {name} was closed (the program reading it has ended): "
                   f"training goes on, and its lines go to {self.path}"
                   f"{'' if self.stdout_closed and self.stderr_closed else ' only'}")
        self.log(message)
        if not (self.stdout_closed and self.stderr_closed):
            with contextlib.suppress(BrokenPipeError):
                note(message, err=not err)
                return
            self._lose(not err)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


def resume_command(argv: Sequence[str]) -> str:
    """The command line of this run, with --resume instead of --overwrite."""
    args = [a for a in argv if a != "--overwrite"]
    if "--resume" not in args:
        args.append("--resume")
    return shlex.join(["labformer", *args])


def copy_atomically(source: str, target: str) -> None:
    """Copy ``source`` to ``target`` through a side file renamed into place: an interrupted
    copy leaves no half file at ``target``."""
    side = f"{target}.{os.getpid()}.copy"
    try:
        shutil.copyfile(source, side)
        os.replace(side, target)
    finally:
        Path(side).unlink(missing_ok=True)


def publish(partial: str, out: str) -> bool:
    """Move a run's side file onto --out (atomically), readable as the umask allows."""
    if not os.path.isfile(partial):
        return False
    os.replace(partial, out)  # atomic: readers see the old model or the new one
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(out, 0o666 & ~umask)
    return True


@contextlib.contextmanager
def sigterm_as_interrupt(active: bool = True) -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` (a KeyboardInterrupt) while the block runs."""
    old = None
    if active:
        def terminated(signum: int, frame: object) -> NoReturn:
            raise Terminated

        try:
            old = signal.signal(signal.SIGTERM, terminated)
        except ValueError:  # pragma: no cover - not the main thread: no handler
            old = None
    try:
        yield
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def refuse_unsafe_out(out: str, inputs: Sequence[str | None], overwrite: bool,
                      resume: bool) -> None:
    """Refuse an --out that would destroy something: an input file, or a file that is not a
    labformer checkpoint; an existing checkpoint unless --resume or --overwrite."""
    for name, path in zip(("--pairs", "--valid"), inputs, strict=False):
        if path and os.path.exists(out) and os.path.exists(path) \
                and os.path.samefile(out, path):
            raise CLIError(f"--out {out} is the {name} file: it would be replaced by a "
                           f"checkpoint; choose another --out (the file is unchanged)")
    partial = partial_path(out)
    for path, role in ((out, "--out"), (partial, "the run's side file")):
        if not os.path.exists(path) or os.path.isdir(path) and path == out:
            continue
        what = not_a_checkpoint(path)
        if what is not None:
            raise CLIError(f"{path} exists and is {what}, not a labformer checkpoint: "
                           f"{role} replaces only a checkpoint; choose another --out (the "
                           f"file is unchanged)")
    for path in (str(log_path(out)), out + ".lock"):
        what = special_file(path) or ("a directory" if os.path.isdir(path) else None)
        if what:
            raise CLIError(f"{path} exists and is {what}: the run writes its log and lock "
                           f"beside --out; choose another --out (nothing was changed)")
    log = str(log_path(out))
    for name, path in zip(("--pairs", "--valid"), inputs, strict=False):
        if path and os.path.exists(log) and os.path.exists(path) \
                and os.path.samefile(log, path):
            raise CLIError(f"{log} is the {name} file, and the run's log for --out {out}: "
                           f"the run would append its lines to it; choose another --out "
                           f"(the file is unchanged)")
    if os.path.isfile(log) and not is_run_log(log):
        raise CLIError(f"{log} exists and is not the log of a labformer run (it starts with "
                       f"no run's header): the run appends its log there; choose another "
                       f"--out, or move that file (it is unchanged)")
    if os.path.isfile(partial) and not (resume or overwrite):
        done = saved_epoch(partial)
        if done is not None and done[0] == done[1]:
            raise CLIError(f"{partial} holds a finished model that did not replace {out} (it "
                           f"failed its quality check, or the run stopped before it; "
                           f"{log_path(out)} says which): --resume checks it again and lets "
                           f"it replace {out} if it passes, --overwrite starts afresh, or "
                           f"choose another --out")
        at = f" (saved after epoch {done[0]} of {done[1] or '?'})" if done else ""
        raise CLIError(f"{partial} holds an interrupted run{at}: continue it with --resume, "
                       f"start afresh with --overwrite (it is then replaced), or choose "
                       f"another --out")
    if os.path.isfile(out) and not (resume or overwrite):
        raise CLIError(f"{out} exists (a trained model is kept): continue it with --resume, "
                       f"replace it with --overwrite, or choose another --out")


def stop_message(out: str, partial: str, epochs: int, existed: bool) -> str:
    """What an interrupted run says, after moving its last save where it belongs.

    A run that replaces a model (--overwrite) leaves the old one in place and its own last
    save in the side file; otherwise the last save becomes --out (a resumable checkpoint, which
    ``translate`` and ``evaluate`` call unfinished)."""
    done = saved_epoch(partial)
    if done is None:
        kept = f"; {out} is unchanged" if os.path.isfile(out) else ""
        return f"labformer: interrupted before the first epoch ended: nothing was saved{kept}"
    if existed:
        return (f"labformer: interrupted; {out} is unchanged (the model it held is kept); this "
                f"run's last save, after epoch {done[0]} of {epochs}, is {partial}")
    publish(partial, out)
    return f"labformer: interrupted; the last save, after epoch {done[0]} of {epochs}, is {out}"


def write_failure(out: str, partial: str, epochs: int, error: OSError, existed: bool,
                  resume: str) -> str:
    """What a run that could not write its files (a full disk) says about each file."""
    kept = (f"{out} is unchanged (the model it held is kept)" if existed and os.path.isfile(out)
            else f"{out} was not written")
    done = saved_epoch(partial)
    side = (f"; the last save, after epoch {done[0]} of {epochs}, is {partial} (free some "
            f"space, then continue with: {resume})" if done else "")
    return (f"writing the run's files beside {out} failed ({os_reason(error)}): {kept}"
            f"{side}")
