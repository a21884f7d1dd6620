"""The planted bugs of tests/mutants.py (make test-mutants) still apply to labformer's sources.

Fast: no notebook runs. A refactor that moves or rewrites a mutated line fails here, instead of
silently disabling the mutant.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import mutants  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("m", mutants.MUTANTS + mutants.KNOWN_GAPS, ids=lambda m: m.name)
def test_mutant_applies_and_compiles(m: mutants.Mutant) -> None:
    source = mutants.target(m).read_text(encoding="utf-8")
    assert source.count(m.old) <= 1, f"{m.name}: old text repeated in {m.file}"
    mutated = mutants.check_applies(m)  # ValueError unless the old text occurs once
    assert m.new in mutated
    compile(mutated, str(mutants.target(m)), "exec")
    assert (ROOT / "book" / f"{m.chapter}.ipynb").exists(), f"{m.name}: no chapter {m.chapter}"


def test_mutants_cover_every_part() -> None:
    names = [m.name for m in mutants.MUTANTS + mutants.KNOWN_GAPS]
    assert len(names) == len(set(names))
    assert len(mutants.MUTANTS) >= 12


def test_mutate_refuses_a_missing_or_repeated_text() -> None:
    m = mutants.Mutant("x", "x", "02_self_attention", "masks.py", "ab", "ac")
    with pytest.raises(ValueError, match="occurs 0 times"):
        mutants.mutate("xyz", m)
    with pytest.raises(ValueError, match="occurs 2 times"):
        mutants.mutate("ab ab", m)


def test_chapter_mutant_edits_one_cell_of_a_copy() -> None:
    m = next(m for m in mutants.MUTANTS if mutants.in_chapter(m))
    text = mutants.target(m).read_text(encoding="utf-8")
    notebook, cell = mutants.mutate_notebook(text, m)
    assert m.new in cell and m.old not in notebook
    assert mutants.target(m).read_text(encoding="utf-8") == text
    with pytest.raises(ValueError, match="occurs 0 times"):
        mutants.mutate_notebook(notebook, m)


def test_planted_copy_changes_only_the_copy(tmp_path: Path) -> None:
    m = mutants.MUTANTS[0]
    before = (mutants.PACKAGE / m.file).read_text(encoding="utf-8")
    mutants.planted_copy(tmp_path, m)
    assert m.new in (tmp_path / "labformer" / m.file).read_text(encoding="utf-8")
    assert (mutants.PACKAGE / m.file).read_text(encoding="utf-8") == before
