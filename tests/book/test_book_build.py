"""`make book` on a copy of the book with a planted failing cell: a failed build stays failed.

Sphinx re-reads only pages whose source changed, so without care a second build after a failure
finds nothing to do, exits 0 and serves the failed page, traceback included. These tests build a
one-chapter copy of the book with the project's own Makefile and configuration.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARK = "labformer-build-check"


def notebook(code: str, prose: str = "") -> dict:
    cell = {"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {},
            "outputs": [], "source": code}
    title = {"cell_type": "markdown", "id": "m1", "metadata": {}, "source": "# A chapter"}
    text = [{"cell_type": "markdown", "id": "m2", "metadata": {}, "source": prose}] if prose else []
    return {"cells": [title, cell, *text], "metadata": {"kernelspec": {
        "display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5}


@pytest.fixture
def small_book(tmp_path: Path) -> Path:
    book = tmp_path / "book"
    (book / "book").mkdir(parents=True)
    for name in ("Makefile", "_config.yml"):
        shutil.copy2(ROOT / name, book / name)
    # tests/: the Makefile times its phases with tests/timed.sh; the licences and the
    # citation: every page's footer links them (book/_ext/labformer_release.py).
    for name in (".venv", "labformer", "requirements.txt", "requirements.lock", "pyproject.toml",
                 "tests", "LICENSE", "LICENSE-CONTENT", "CITATION.cff"):
        (book / name).symlink_to(ROOT / name)
    for folder in ("_static", "_ext"):  # the book's CSS/JS and its local Sphinx extension
        shutil.copytree(ROOT / "book" / folder, book / "book" / folder)
    # the Chinese edition's own words (its title, interface, prose rules: book/locales/zh_CN);
    # the pages' catalogues (LC_MESSAGES/book, claims, alt.json) are each test's own
    shutil.copytree(ROOT / "book" / "locales" / "zh_CN", book / "book" / "locales" / "zh_CN",
                    ignore=lambda folder, names: [n for n in names
                                                  if n in ("book", "claims", "alt.json")])
    shutil.copy2(ROOT / "book" / "references.bib", book / "book" / "references.bib")
    (book / "_toc.yml").write_text("format: jb-book\nroot: book/intro\n"
                                   "chapters:\n  - file: book/chapter\n")
    (book / "book" / "intro.md").write_text("# Intro\n\nA one-chapter book.\n")
    return book


def make_book(book: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    # -o: the venv is the project's own, already installed; never reinstall it here.
    return subprocess.run(["make", "--no-print-directory", "-o", ".venv/.installed", "book"],
                          cwd=book, env=env, capture_output=True, text=True, timeout=600)


def pages_with(book: Path, text: str) -> list[str]:
    html = book / "_build" / "html"
    return sorted(p.relative_to(html).as_posix() for p in html.rglob("*.html")
                  if text in p.read_text(errors="replace"))


def test_failed_build_stays_failed_until_the_notebook_is_fixed(small_book: Path) -> None:
    chapter = small_book / "book" / "chapter.ipynb"
    chapter.write_text(json.dumps(notebook(f'assert 1 + 1 == 3, "{MARK}: planted failure"')))

    for attempt in (1, 2, 3):
        run = make_book(small_book)
        output = run.stdout + run.stderr
        assert run.returncode != 0, f"build {attempt} of a failing notebook exited 0:\n{output}"
        assert "Open " not in output, f"build {attempt} announced a book after a failure"
        assert MARK in output, f"build {attempt} did not report the failing cell:\n{output}"
        html = small_book / "_build" / "html"
        assert not html.exists() or not pages_with(small_book, MARK), \
            f"build {attempt} left a page showing the failure"

    chapter.write_text(json.dumps(notebook(f'print("{MARK}: " + str(6 * 7))')))
    run = make_book(small_book)
    output = run.stdout + run.stderr
    assert run.returncode == 0, f"the fixed notebook did not build:\n{output}"
    assert "Open " in output
    # The page shows the fixed cell's fresh output, and no traceback anywhere.
    # Both editions (English, and the Chinese one under zh/) show the fresh output.
    assert pages_with(small_book, f"{MARK}: 42") == ["book/chapter.html", "zh/book/chapter.html"]
    assert not pages_with(small_book, "AssertionError")
    assert not pages_with(small_book, "Traceback")


#: A glued SVG, as labformer.book.diagrams writes one: its <title> is its alt text.
SVG = ('<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><title>{}</title>'
       '<rect width="40" height="20"/></svg>')
GLUE = f"""from IPython.display import SVG
from myst_nb import glue
glue("lf_n", 42, display=False)
glue("lf_word", 6, display=False)
glue("lf_word_zh", 7, display=False)
glue("lf_fig", SVG({SVG.format("A planted diagram")!r}), display=False)
glue("lf_fig_zh", SVG({SVG.format("植入的图")!r}), display=False)
"""
PROSE = "The answer is {eval}`lf_n` and the word is {eval}`lf_word`."
FIGURE = ":::{figure}\n{eval}`lf_fig`\n\nA planted caption.\n:::"
CATALOGUE = f"""msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"

msgid "{PROSE}"
msgstr "答案是 {{eval}}`lf_n`，词是 {{eval}}`lf_word`。"

msgid "A planted caption."
msgstr "植入的图注。"
"""


def test_glued_values_reach_both_editions(small_book: Path) -> None:
    """book/_ext/mystnb_patches.py through the book's {eval} role and figure: a translated
    paragraph reads the notebook's glued values (KEY_zh first), and a glued figure shows its
    edition's twin, with the <title> of its SVG as alt text."""
    chapter = small_book / "book" / "chapter.ipynb"
    chapter.write_text(json.dumps(notebook(GLUE, f"{PROSE}\n\n{FIGURE}\n")))
    catalogue = small_book / "book" / "locales" / "zh_CN" / "LC_MESSAGES" / "book" / "chapter.po"
    catalogue.parent.mkdir(parents=True)
    catalogue.write_text(CATALOGUE, encoding="utf-8")
    run = make_book(small_book)
    output = run.stdout + run.stderr
    assert run.returncode == 0, f"the book did not build:\n{output}"
    html = small_book / "_build" / "html"
    english = (html / "book" / "chapter.html").read_text(encoding="utf-8")
    chinese = (html / "zh" / "book" / "chapter.html").read_text(encoding="utf-8")
    assert "The answer is 42 and the word is 6." in re.sub(r"<[^>]+>", "", english)
    assert "答案是 42，词是 7。" in re.sub(r"<[^>]+>", "", chinese), \
        "the translation did not read the glued values (lf_n, then lf_word_zh)"
    assert 'alt="A planted diagram"' in english and "A planted caption." in english
    assert 'alt="植入的图"' in chinese and "植入的图注。" in chinese
