"""Keep what JupyterLab collapses in step with what the book's page hides.

    python book/_ext/cell_metadata.py sync     # write the metadata into every chapter
    python book/_ext/cell_metadata.py check    # list the cells out of step; exit 1 if any

Jupyter Book hides cells by their tags (``hide-input``, ``hide-cell``, ...), which JupyterLab
ignores; JupyterLab collapses a cell's code or outputs by ``metadata.jupyter.source_hidden``
and ``metadata.jupyter.outputs_hidden``, which the page ignores. This tool derives the second
from the first, so that a learner who opens a chapter in JupyterLab sees what the page shows:
the checking code and the plumbing collapsed, every solution closed (code and outputs) until
opened. ``tests/notebooks/test_book_cells.py`` fails when the two drift.
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


#: The git filter's command (``make`` installs it, .gitattributes applies it to the chapters):
#: what git stores of a chapter is its cells without outputs, execution counts, the results of
#: JupyterLab's inline expressions or the Python version, so a learner's run and save leaves
#: ``git status`` clean while their own file keeps what they ran.
STRIP = ["nbstripout", "--keep-id", "--extra-keys",
         "cell.metadata.user_expressions metadata.language_info"]


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
        meta = cell.setdefault("metadata", {})
        jupyter = {k: v for k, v in meta.get("jupyter", {}).items()
                   if k not in ("source_hidden", "outputs_hidden")}
        jupyter.update(wanted(cell))
        if jupyter:
            meta["jupyter"] = jupyter
        else:
            meta.pop("jupyter", None)
        changed += 1
    if changed:
        path.write_text(normal_form(nb), encoding="utf-8")
    return changed


def problems() -> list[str]:
    """One line per cell whose JupyterLab flags differ from its tags."""
    lines = []
    for path in chapters():
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
    if argv[1:] == ["check"]:
        lines = problems()
        print("\n".join(lines) or "every chapter's JupyterLab flags follow its tags")
        return 1 if lines else 0
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
