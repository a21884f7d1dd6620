"""The book's translator, trained once per code version and seed and shared between chapters.

Chapter 11 trains the translator with ``TRAIN_DEFAULTS`` and reads it; chapter 14 measures the
paper's recipe on the same run (its per-epoch checkpoints, its CPU time per step). Training it
twice would double the book's longest computation, so :func:`trained_translator` keeps the
run in a cache folder under a key that names everything the run depends on: the source of
every labformer module, torch's version, the CPU kernels (``ATEN_CPU_CAPABILITY``), torch's
thread count, the seed and the corpus. A change to any of them trains afresh; a chapter that
finds the run checks it like one it trained. Two chapters started at once (``make book`` runs
two notebooks at a time) share one training: the second waits for the first's lock.

The run trains with subnormal floats flushed to zero (:func:`subnormals_flushed`), like chapter
14's recurrent baseline and ``book/sweeps/gru_tuning.py``, so that both models of that comparison
run under the same float settings.

The cache folder is ``$LABFORMER_CACHE``, else ``$XDG_CACHE_HOME/labformer`` (``~/.cache``);
the newest :data:`KEEP` runs are kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from labformer.app.translate import MODEL_DEFAULTS, TRAIN_DEFAULTS, Translator, train_translator
from labformer.data import Corpus

KEEP = 6  # runs kept in the cache folder, newest first
FORMAT = 1  # of the folder's contents


@dataclass
class TrainedRun:
    """A finished run: its folder and what was measured while it trained."""

    folder: Path  # epoch1.pt ... epoch{E-1}.pt, last.pt, run.json
    log: list[str]  # the lines printed while it trained, one per epoch
    cpu_at_epoch: list[float]  # CPU seconds since the start, at each epoch's end (0.0 first)
    cpu_at_step: list[float]  # CPU seconds since the start, at each optimiser step's end
    trained_now: bool  # False: read from the cache

    @property
    def translator(self) -> Translator:
        """The trained translator (the last checkpoint), loaded afresh on each access."""
        return Translator.from_checkpoint(self.folder / "last.pt")

    def checkpoint(self, epoch: int) -> Path:
        """The checkpoint written after ``epoch`` (1-based); the last epoch's is last.pt."""
        epochs = len(self.cpu_at_epoch) - 1
        if not 1 <= epoch <= epochs:
            raise ValueError(f"this run has epochs 1 to {epochs}, not {epoch}")
        return self.folder / ("last.pt" if epoch == epochs else f"epoch{epoch}.pt")


def cache_folder() -> Path:
    """Where runs are kept: $LABFORMER_CACHE, else $XDG_CACHE_HOME/labformer, else ~/.cache."""
    if os.environ.get("LABFORMER_CACHE"):
        return Path(os.environ["LABFORMER_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "labformer"


def run_key(corpus: Corpus, seed: int) -> str:
    """A hash of everything the run depends on (see the module's docstring)."""
    h = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    for path in sorted(package.rglob("*.py")):
        h.update(str(path.relative_to(package)).encode())
        h.update(path.read_bytes())
    for part in (FORMAT, torch.__version__, os.environ.get("ATEN_CPU_CAPABILITY", ""),
                 torch.get_num_threads(), seed, MODEL_DEFAULTS, asdict(TRAIN_DEFAULTS),
                 corpus.train, corpus.valid):
        h.update(json.dumps(part, sort_keys=True, default=str).encode())
    return h.hexdigest()[:20]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` where the platform has one (fcntl), else none."""
    try:
        import fcntl
    except ImportError:  # Windows: no second notebook shares the folder at once, in practice
        yield
        return
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def subnormals_flushed() -> Iterator[bool]:
    """Inside the block, subnormal floats (below about 1.2e-38 in float32) read and compute as
    zero, where the CPU supports it (x86 with SSE3); yields whether it does. Trained attention
    can produce such tiny weights, and many CPUs process them very slowly. Afterwards the
    setting is off again, torch's default."""
    supported = torch.set_flush_denormal(True)
    try:
        yield supported
    finally:
        torch.set_flush_denormal(False)


def _read(folder: Path) -> TrainedRun:
    meta = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    return TrainedRun(folder, meta["log"], meta["cpu_at_epoch"], meta["cpu_at_step"], False)


def trained_translator(corpus: Corpus, seed: int, *,
                       cache: str | os.PathLike[str] | None = None,
                       echo: Callable[[str], Any] | None = print) -> TrainedRun:
    """Train the book's translator on ``corpus`` with ``seed`` and ``TRAIN_DEFAULTS``, or read
    the identical run from the cache. Each epoch's line is passed to ``echo`` (print) as it
    trains, or all of them from the cache, after a line that says so."""
    root = Path(cache) if cache is not None else cache_folder()
    root.mkdir(parents=True, exist_ok=True)
    key = run_key(corpus, seed)
    folder = root / f"translator-{key}"
    with _locked(root / f"translator-{key}.lock"):
        if (folder / "run.json").is_file():
            run = _read(folder)
            os.utime(folder)
            if echo is not None:
                # the folder's name, not its path: a page must not show the building
                # machine's home directory (labformer.app.runs.cache_folder says where it is)
                echo(f"(the run of seed {seed} for this code version, read from the run cache: "
                     f"{folder.name})")
                for line in run.log:
                    echo(line)
            return run
        work = Path(tempfile.mkdtemp(prefix=f"translator-{key}.", dir=root))
        try:
            run = _train(corpus, seed, work, echo)
            os.replace(work, folder)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    _prune(root)
    run.folder = folder
    return run


def _train(corpus: Corpus, seed: int, work: Path, echo: Callable[[str], Any] | None
           ) -> TrainedRun:
    start = time.process_time()
    cpu_at_epoch, cpu_at_step, log = [0.0], [], []

    def on_epoch(epoch: int, epochs: int, history: Any) -> None:
        cpu_at_epoch.append(time.process_time() - start)
        if epoch < epochs:
            shutil.copy(work / "last.pt", work / f"epoch{epoch}.pt")
        valid = ""
        if history.valid_score and history.valid_epoch[-1] == epoch:
            valid = f", validation BLEU {history.valid_score[-1]:.2f}"
        log.append(f"epoch {epoch}/{epochs}: loss {history.epoch_loss[-1]:.3f}{valid} "
                   f"({cpu_at_epoch[-1] - cpu_at_epoch[-2]:.0f} s CPU)")
        if echo is not None:
            echo(log[-1])

    def on_step(step: int, lr: float, loss: float) -> None:
        cpu_at_step.append(time.process_time() - start)

    with subnormals_flushed():
        train_translator(corpus, seed=seed, device="cpu", progress=False,
                         checkpoint=work / "last.pt", on_epoch=on_epoch, on_step=on_step)
    meta = {"seed": seed, "log": log, "cpu_at_epoch": cpu_at_epoch,
            "cpu_at_step": cpu_at_step}
    (work / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    return TrainedRun(work, log, cpu_at_epoch, cpu_at_step, True)


def _prune(root: Path) -> None:
    """Keep the newest KEEP runs."""
    runs = sorted((p for p in root.glob("translator-*") if p.is_dir() and "." not in p.name),
                  key=lambda p: p.stat().st_mtime, reverse=True)
    for old in runs[KEEP:]:
        shutil.rmtree(old, ignore_errors=True)
        (root / f"{old.name}.lock").unlink(missing_ok=True)
