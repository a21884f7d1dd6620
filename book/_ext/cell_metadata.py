"""Keep what JupyterLab collapses in step with what the book's page hides; the git filter.

    python book/_ext/cell_metadata.py sync     # write the metadata into every chapter
    python book/_ext/cell_metadata.py check    # list the cells out of step; exit 1 if any
    python book/_ext/cell_metadata.py clean    # the git filter: a notebook on stdin, stored
                                               # form on stdout (clean -t FILE: FILE's)

Jupyter Book hides cells by their tags (``hide-input``, ``hide-cell``, ...), which JupyterLab
ignores; JupyterLab collapses a cell's code or outputs by ``metadata.jupyter.source_hidden``
and ``metadata.jupyter.outputs_hidden``, which the page ignores. This tool derives the second
from the first, so that a learner who opens a chapter in JupyterLab sees what the page shows:
the checking code and the plumbing collapsed, every solution closed (code and outputs) until
opened. ``tests/notebooks/test_book_cells.py`` fails when the two drift.

The same derivation makes the git filter (:data:`STRIP`) robust to JupyterLab: a run, a save
or an autosave with no edit rewrites metadata that is no learner's change (it un-collapses
every cell it runs, dropping ``"outputs_hidden": true``; it adds ``collapsed``; it names the
kernel "Python 3 (ipykernel)"; it records ``language_info``), and the filter stores each of
them in its canonical form: the flags from the tags, the kernel :data:`KERNELSPEC`, the rest
removed. ``tests/notebooks/test_git_clean.py`` saves a chapter through the Jupyter server's
save path as JupyterLab does, and checks that ``git status`` stays clean.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: Tags whose cell shows its code collapsed on the page (or not at all).
HIDES_SOURCE = {"hide-input", "hide-cell", "remove-input", "remove-cell", "solution"}
#: Tags whose cell shows its outputs collapsed on the page (or not at all).
HIDES_OUTPUTS = {"hide-output", "hide-cell", "remove-output", "remove-cell", "solution"}
#: What a solution's toggle says on the page (the Chinese edition translates it).
SOLUTION_PROMPTS = {"code_prompt_show": "Show solution", "code_prompt_hide": "Hide solution"}


#: The git filter's command, run from the repository's root with the venv's python (``make``
#: installs it as the Makefile's NBSTRIP, .gitattributes applies it to the chapters): what git
#: stores of a chapter is its cells without outputs, execution counts, the results of
#: JupyterLab's inline expressions or the Python version, with the collapse flags its tags ask
#: for and the kernel :data:`KERNELSPEC`, so a learner's run and save (or JupyterLab's
#: autosave) leaves ``git status`` clean while their own file keeps what they ran. ``-t FILE``
#: (git's textconv) prints FILE's stored form.
STRIP = ["python", "book/_ext/cell_metadata.py", "clean"]

#: The kernel every chapter names, as JupyterLab writes it once the venv's kernel started.
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}

#: What the filter removes besides outputs and execution counts: nbstripout's own defaults
#: (timings, classic-notebook collapse and scroll state, widget state), JupyterLab's output
#: collapse (``collapsed``: the flags come from the tags instead), jupyterlab-myst's inline
#: expression results and the Python version.
EXTRA_KEYS = ["metadata.signature", "metadata.widgets", "metadata.language_info",
              "cell.metadata.collapsed", "cell.metadata.ExecuteTime",
              "cell.metadata.execution", "cell.metadata.heading_collapsed",
              "cell.metadata.hidden", "cell.metadata.scrolled",
              "cell.metadata.trusted", "cell.metadata.user_expressions"]


def normal_form(nb: dict[str, Any]) -> str:
    """A notebook as the filter writes it (sorted keys, one-space indent), so that a committed
    chapter passes through the filter unchanged."""
    return json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def chapters() -> list[Path]:
    return sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))


def wanted(cell: dict[str, Any]) -> dict[str, bool]:
    """The ``metadata.jupyter`` flags a cell must carry for its tags (none: an empty dict)."""
    if cell["cell_type"] != "code":
        return {}
    tags = set(cell.get("metadata", {}).get("tags", []))
    flags = {}
    if tags & HIDES_SOURCE:
        flags["source_hidden"] = True
    if tags & HIDES_OUTPUTS:
        flags["outputs_hidden"] = True
    return flags


def drift(cell: dict[str, Any]) -> tuple[dict[str, bool], dict[str, bool]] | None:
    """(has, wants) when the cell's JupyterLab flags are not those its tags ask for."""
    has = {k: v for k, v in cell.get("metadata", {}).get("jupyter", {}).items()
           if k in ("source_hidden", "outputs_hidden") and v}
    want = wanted(cell)
    return None if has == want else (has, want)


def prompt_drift(cell: dict[str, Any]) -> dict[str, str] | None:
    """The toggle labels a solution cell lacks (None when it has them or is no solution)."""
    if "solution" not in cell.get("metadata", {}).get("tags", []):
        return None
    has = cell["metadata"].get("mystnb", {})
    missing = {k: v for k, v in SOLUTION_PROMPTS.items() if has.get(k) != v}
    return missing or None


def set_flags(cell: dict[str, Any]) -> None:
    """Gives ``cell`` the ``metadata.jupyter`` flags its tags ask for, and only those."""
    meta = cell.setdefault("metadata", {})
    jupyter = {k: v for k, v in meta.get("jupyter", {}).items()
               if k not in ("source_hidden", "outputs_hidden")}
    jupyter.update(wanted(cell))
    if jupyter:
        meta["jupyter"] = jupyter
    else:
        meta.pop("jupyter", None)


def _pop(d: dict[str, Any], dotted: str) -> None:
    """Removes the key at ``dotted`` ("metadata.language_info") from ``d``, if there."""
    *parents, last = dotted.split(".")
    for key in parents:
        d = d.get(key)  # type: ignore[assignment]
        if not isinstance(d, dict):
            return
    d.pop(last, None)


def stored_form(text: str) -> str:
    """A notebook's text as git stores it (the filter's work): outputs, execution counts and
    the :data:`EXTRA_KEYS` removed (what ``nbstripout --keep-id`` does, with json alone, so
    that the filter starts fast), the collapse flags from the tags, the kernel
    :data:`KERNELSPEC`, sources as lists of lines, :func:`normal_form`. Text that is no
    notebook (a merge conflict's) passes unchanged."""
    try:
        nb = json.loads(text)
        cells = nb["cells"]
        metadata = nb["metadata"]
    except (ValueError, KeyError, TypeError):
        return text
    for key in EXTRA_KEYS:
        scope, dotted = key.split(".", 1)
        if scope == "metadata":
            _pop(metadata, dotted)
        else:
            for cell in cells:
                _pop(cell, dotted)
    if "kernelspec" in metadata:
        metadata["kernelspec"] = dict(KERNELSPEC)
    for cell in cells:
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        set_flags(cell)
        if isinstance(cell.get("source"), str):
            cell["source"] = cell["source"].splitlines(keepends=True)
    return normal_form(nb)


def refresh_git_index(os_path: str | Path) -> bool:
    """After JupyterLab saved ``os_path``: if its stored form is the blob git's index holds
    (the save changed nothing but what the filter strips), mark the index entry for a fresh
    look, so that ``git status`` stays clean. Returns whether it did.

    Git trusts a changed file size without running the filter (``git status`` says modified
    while ``git diff`` is empty); an entry given again by ``update-index --cacheinfo`` (the
    same mode and blob, no size) makes the next ``git status`` compare the content through
    the filter, and find it unchanged. A file that really changed, is untracked or in a
    merge, or lies outside a git checkout, is left alone.
    """
    import hashlib
    import subprocess

    path = Path(os_path).resolve()

    def git(*args: str, cwd: Path) -> str:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              check=True, timeout=60).stdout

    try:
        top = Path(git("rev-parse", "--show-toplevel", cwd=path.parent).strip())
        rel = path.relative_to(top.resolve()).as_posix()
        entries = git("ls-files", "--stage", "--", rel, cwd=top).splitlines()
        if len(entries) != 1:
            return False
        mode, blob, stage = entries[0].split("\t")[0].split()
        data = stored_form(path.read_text(encoding="utf-8")).encode("utf-8")
        ours = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        if stage != "0" or ours != blob:
            return False
        git("update-index", "--cacheinfo", f"{mode},{blob},{rel}", cwd=top)
    except (OSError, ValueError, subprocess.SubprocessError):
        return False
    return True


def post_save(model: dict[str, Any], os_path: str, contents_manager: Any = None,
              **kwargs: Any) -> None:
    """The Jupyter server's post-save hook (book/_ext/lab/jupyter_server_config.py, which
    ``make lab`` reads): a notebook saved with no edit leaves ``git status`` clean."""
    if model.get("type") != "notebook":
        return
    try:
        refresh_git_index(os_path)
    except Exception:  # noqa: BLE001 - a hook that fails would fail the learner's save
        return


def sync(path: Path) -> int:
    """Writes the flags and the solutions' toggle labels into ``path``; returns how many cells
    changed."""
    text = path.read_text(encoding="utf-8")
    nb = json.loads(text)
    changed = 0
    for cell in nb["cells"]:
        labels = prompt_drift(cell)
        if labels:
            cell["metadata"].setdefault("mystnb", {}).update(labels)
            changed += 1
        if drift(cell) is None:
            continue
        set_flags(cell)
        changed += 1
    if nb.get("metadata", {}).get("kernelspec") != KERNELSPEC:
        nb.setdefault("metadata", {})["kernelspec"] = dict(KERNELSPEC)
        changed += 1
    if changed:
        path.write_text(normal_form(nb), encoding="utf-8")
    return changed


def problems() -> list[str]:
    """One line per cell whose JupyterLab flags differ from its tags."""
    lines = []
    for path in chapters():
        kernel = json.loads(path.read_text(encoding="utf-8"))["metadata"].get("kernelspec")
        if kernel != KERNELSPEC:
            lines.append(f"{path.name}: kernelspec {kernel}, not {KERNELSPEC}")
        for n, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
            labels = prompt_drift(cell)
            if labels:
                lines.append(f"{path.name} cell {n} ({cell.get('id', '?')}): a solution "
                             f"whose toggle lacks {labels}")
            found = drift(cell)
            if found is not None:
                lines.append(f"{path.name} cell {n} ({cell.get('id', '?')}): tags "
                             f"{sorted(cell.get('metadata', {}).get('tags', []))} want "
                             f"{found[1] or 'nothing collapsed'}, the cell has {found[0]}")
    return lines


def main(argv: list[str]) -> int:
    if argv[1:] == ["sync"]:
        for path in chapters():
            n = sync(path)
            if n:
                print(f"{path.name}: {n} cells updated")
        return 0
    if argv[1:2] == ["clean"]:  # the git filter; -t FILE: git's textconv
        files = [a for a in argv[2:] if a != "-t"]
        texts = [Path(f).read_text(encoding="utf-8") for f in files] if files else \
            [sys.stdin.buffer.read().decode("utf-8")]
        for text in texts:
            sys.stdout.buffer.write(stored_form(text).encode("utf-8"))
        return 0
    if argv[1:] == ["check"]:
        lines = problems()
        print("\n".join(lines) or "every chapter's JupyterLab flags follow its tags")
        return 1 if lines else 0
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
