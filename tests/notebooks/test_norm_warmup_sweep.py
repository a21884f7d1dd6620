"""book/sweeps/norm_warmup_sweep.py runs the cells of chapter 13 that its data file describes."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "sweeps"))
import norm_warmup_sweep as sweep  # noqa: E402

CHAPTER = json.loads(sweep.NOTEBOOK.read_text(encoding="utf-8"))
CELLS = {c["id"]: "".join(c["source"]) for c in CHAPTER["cells"]}


def _literal(name: str) -> object:
    """A constant the grid's cell assigns (PEAKS, NORMS), read without running it."""
    for node in ast.parse(CELLS["ch13-28b"]).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name:
            return ast.literal_eval(node.value)
    raise AssertionError(f"the grid's cell no longer assigns {name}")


def test_the_sweep_runs_cells_the_chapter_has_in_the_chapters_order():
    order = [c["id"] for c in CHAPTER["cells"]]
    assert all(i in CELLS for i in sweep.CELLS), set(sweep.CELLS) - set(CELLS)
    assert [order.index(i) for i in sweep.CELLS] == sorted(order.index(i) for i in sweep.CELLS)
    assert "grid[key]" in CELLS[sweep.CELLS[-1]]  # the last one trains the grid


def test_the_data_file_holds_every_cell_of_the_chapters_grid_for_twenty_runs():
    data = json.loads((ROOT / "book" / "data" / "13_norm_warmup.json").read_text("utf-8"))
    peaks, norms = _literal("PEAKS"), _literal("NORMS")
    wanted = {sweep.key(n, w, p) for n in norms for w in (True, False) for p in peaks}
    assert len(data["runs"]) >= 20
    assert len({r["run"] for r in data["runs"]}) == len(data["runs"])  # no seed twice
    assert {r["run"].split(":")[1] for r in data["runs"]} == {"default", "avx2"}
    for run in data["runs"]:
        assert set(run["cells"]) == wanted, run["run"]
        assert all(0 <= c["acc"] <= 100 for c in run["cells"].values())
    # the sweeps moved from tests/ to book/sweeps/: a stored file keeps the command it ran
    assert data["command"].startswith(
        ("python tests/norm_warmup_sweep.py", "python book/sweeps/norm_warmup_sweep.py"))


def test_bad_runs_are_refused_with_the_reason(capsys):
    with pytest.raises(SystemExit):
        sweep.main(["--runs", "1:fast"])
    assert "SEED:KERNEL" in capsys.readouterr().err
