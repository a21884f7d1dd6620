"""The order in which book/_ext/execute_notebooks.py starts the book's notebooks."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location(
    "execute_notebooks", ROOT / "book" / "_ext" / "execute_notebooks.py")
ex = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(ex)

AFTER = {"14_recipe": ["11_translator"]}


def after(path: Path) -> list[str]:
    return AFTER.get(path.stem, [])


def names(paths):
    return [p.stem for p in paths]


def test_longest_first_and_a_reader_of_another_run_last():
    todo = [Path(f"{n}.ipynb") for n in ("02_self", "14_recipe", "11_translator", "03_scaling")]
    times = {"02_self.ipynb": 20.0, "14_recipe.ipynb": 500.0, "11_translator.ipynb": 120.0}
    # 03_scaling has no time yet: it counts as long; 14 is the slowest but reads 11's run
    assert names(ex.queue(todo, times, after)) == [
        "03_scaling", "11_translator", "02_self", "14_recipe"]


def test_a_reader_waits_for_the_chapter_it_reads_while_others_run():
    pending = [Path("14_recipe.ipynb"), Path("02_self.ipynb")]
    # 11 still runs: 14 must wait, 02 may start
    assert ex.next_ready(pending, {"14_recipe", "02_self", "11_translator"}, idle=False,
                         after=after) == Path("02_self.ipynb")
    assert ex.next_ready(pending[:1], {"14_recipe", "11_translator"}, idle=False,
                         after=after) is None
    # 11 finished: 14 starts
    assert ex.next_ready(pending[:1], {"14_recipe"}, idle=False,
                         after=after) == Path("14_recipe.ipynb")
    # nothing runs and only a waiting chapter is left (11 was not asked for): it starts
    assert ex.next_ready(pending[:1], {"14_recipe", "11_translator"}, idle=True,
                         after=after) == Path("14_recipe.ipynb")


def test_the_book_declares_chapter_14_after_chapter_11():
    meta = json.loads((ROOT / "book" / "14_recipe_baseline.ipynb").read_text(encoding="utf-8"))
    assert ex._after(ROOT / "book" / "14_recipe_baseline.ipynb") == ["11_translator"]
    assert meta["metadata"]["labformer"]["after"] == ["11_translator"]
    assert (ROOT / "book" / "11_translator.ipynb").is_file()
