"""Execute the book's notebooks N at a time into the build's execution cache.

    python book/_ext/execute_notebooks.py [--jobs 2] [--cache _build/.jupyter_cache] [NOTEBOOK ...]

`make book` runs this before `jupyter-book build`. Each chapter runs on one thread
(`labformer.setup_notebook`), so on a 2-core machine two chapters at a time take about half
the time of Sphinx's one-after-another execution. The build then finds every notebook in the
cache (jupyter-cache matches a notebook by the hash of its code cells and kernelspec, so a
notebook read here and one read by myst-nb give the same key) and executes nothing itself.

A notebook that fails is printed with its traceback and not cached, so the next build runs it
again; the exit status is 1 when any notebook failed. Longest chapters start first: their
execution times from the last run are kept in the cache folder (`times.json`). A chapter
whose metadata names chapters to wait for (`"labformer": {"after": ["11_translator"]}`) starts
when they have finished.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 900  # seconds per cell, as execute.timeout in _config.yml
#: Where each chapter's untranslated plot texts go (tests/book/test_book_editions.py reads them).
PLOT_MISSING = ROOT / "_build" / "plot_missing"


def book_notebooks() -> list[Path]:
    """The notebooks the table of contents names, in its order."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "file" in node:
                files.append(str(node["file"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc)
    return [ROOT / f"{name}.ipynb" for name in files if (ROOT / f"{name}.ipynb").is_file()]


def _after(path: Path) -> list[str]:
    """The chapters whose run this notebook reads (its metadata "labformer": {"after": [...]})."""
    meta = json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
    return list(meta.get("labformer", {}).get("after", []))


def queue(todo: list[Path], times: dict[str, float],
          after: Callable[[Path], list[str]] = _after) -> list[Path]:
    """The order to start notebooks in: longest first (last run's times; unknown ones count as
    long), so the two queues end together instead of one chapter running alone at the end; a
    chapter that reads another's run goes after every chapter that reads none."""
    return sorted(todo, key=lambda p: (bool(after(p)), -times.get(p.name, 1e9)))


def next_ready(pending: list[Path], unfinished: set[str], idle: bool,
               after: Callable[[Path], list[str]] = _after) -> Path | None:
    """The first pending notebook whose chapters to wait for (``after``) are all finished.

    ``unfinished`` holds the names (file stems) of the notebooks still pending or running. None
    when every pending notebook waits on one of those, unless ``idle`` (no notebook runs): then
    the first pending one starts anyway, so that a cycle or a missing chapter cannot hang.
    """
    for path in pending:
        if not set(after(path)) & (unfinished - {path.stem}):
            return path
    return pending[0] if pending and idle else None


def _execute(path: str) -> dict[str, Any]:
    """Run one notebook in its own folder (a worker process); return it executed, or the error."""
    import nbformat
    from jupyter_cache.executors.utils import single_nb_execution

    # The texts of this chapter's plots that the Chinese twins could not translate
    # (labformer.book.notebook.glue), one file per chapter, rewritten at each execution.
    missing = PLOT_MISSING / f"{Path(path).stem}.jsonl"
    missing.parent.mkdir(parents=True, exist_ok=True)
    missing.unlink(missing_ok=True)
    os.environ["LABFORMER_PLOT_MISSING"] = str(missing)
    nb = nbformat.read(path, as_version=4)
    result = single_nb_execution(nb, cwd=str(Path(path).parent), timeout=TIMEOUT,
                                 allow_errors=False, meta_override=True)
    return {"path": path, "notebook": nbformat.writes(nb), "seconds": result.time,
            "error": None if result.err is None else result.exc_string}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks to execute (default: every notebook in _toc.yml)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="notebooks executed at once (default: 2, or 1 on one core)")
    parser.add_argument("--cache", type=Path, default=ROOT / "_build" / ".jupyter_cache")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, not {args.jobs}")

    import nbformat
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache = get_cache(str(args.cache))
    times_file = Path(args.cache) / "times.json"
    try:
        times: dict[str, float] = json.loads(times_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        times = {}

    notebooks = [p.resolve() for p in (args.notebooks or book_notebooks())]
    missing = [str(p) for p in notebooks if not p.is_file()]
    if missing:
        parser.error("no such notebook: " + ", ".join(missing))
    todo = []
    for path in notebooks:
        try:
            cache.match_cache_notebook(nbformat.read(str(path), as_version=4))
        except KeyError:
            todo.append(path)
    if not todo:
        print(f"execute: all {len(notebooks)} notebooks are in the cache")
        return 0
    # A chapter that reads another's run (metadata "labformer": {"after": [...]}) starts once
    # that chapter has finished, so the run it reads is there: not trained twice, and no
    # worker held while it waits.
    pending = queue(todo, times)
    print(f"execute: {len(todo)} of {len(notebooks)} notebooks, {args.jobs} at a time",
          flush=True)

    failed: list[str] = []
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        running: dict[Future[dict[str, Any]], Path] = {}
        while pending or running:
            while pending and len(running) < args.jobs:
                unfinished = {p.stem for p in pending} | {p.stem for p in running.values()}
                path = next_ready(pending, unfinished, idle=not running)
                if path is None:
                    break
                pending.remove(path)
                running[pool.submit(_execute, str(path))] = path
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                path = running.pop(future)
                name = path.relative_to(ROOT)
                try:
                    out = future.result()
                except Exception as exc:  # the worker itself died (memory, a signal)
                    out = {"error": f"{type(exc).__name__}: {exc}", "seconds": 0.0}
                if out["error"] is not None:
                    failed.append(str(name))
                    print(f"execute: FAILED {name} after {out['seconds']:.0f} s\n{out['error']}",
                          file=sys.stderr, flush=True)
                    continue
                nb = nbformat.reads(out["notebook"], as_version=4)
                cache.cache_notebook_bundle(
                    CacheBundleIn(nb, str(path), data={"execution_seconds": out["seconds"]}),
                    check_validity=False, overwrite=True)
                times[path.name] = round(out["seconds"], 1)
                print(f"execute: {name} {out['seconds']:.0f} s", flush=True)
    times_file.write_text(json.dumps(times, indent=1, sort_keys=True), encoding="utf-8")
    wall = time.perf_counter() - start
    total = sum(times.get(p.name, 0.0) for p in todo)
    print(f"execute: {len(todo) - len(failed)} notebooks in {wall:.0f} s "
          f"({total:.0f} s of notebook time, {args.jobs} at a time)", flush=True)
    if failed:
        print("execute: failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
