"""A chapter's Chinese sentences and tables, from its catalogue.

The Chinese edition's twin of a value a chapter glues (``glue("x_zh", ...)``) is written from
``book/locales/zh_CN/chapters/NAME.json``, never from a literal in the chapter's code::

    zh = chapter_words("13_ablations")
    zh("sentence", label=..., verdict=..., n=8)   # a template, its named fields filled
    zh.table("rule")                              # a list or a table of them, as stored

A template's fields are named (``{mean:+.1f}``), so each edition orders them its own way; a
missing key raises KeyError naming the chapter and the key.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from labformer.book.notebook import repo_root

#: The folder of the chapters' catalogues, one JSON object per chapter.
CHAPTERS = Path("book") / "locales" / "zh_CN" / "chapters"


class ChapterWords:
    """One chapter's catalogue: ``words(key, **fields)`` is its template ``key`` filled."""

    def __init__(self, chapter: str, table: dict[str, Any]) -> None:
        self.chapter = chapter
        self._table = table

    def table(self, key: str) -> Any:
        """The entry ``key`` as stored: a template, a list or a table of them."""
        try:
            return self._table[key]
        except KeyError:
            raise KeyError(f"{CHAPTERS.as_posix()}/{self.chapter}.json has no entry {key!r}"
                           ) from None

    def __call__(self, key: str, **fields: Any) -> str:
        template = self.table(key)
        if not isinstance(template, str):
            raise TypeError(f"{self.chapter}.json: {key!r} is a {type(template).__name__}, "
                            "not a template: read it with .table()")
        return template.format(**fields)


@functools.cache
def chapter_words(chapter: str) -> ChapterWords:
    """The catalogue of ``chapter`` ("13_ablations"), read once."""
    path = repo_root() / CHAPTERS / f"{chapter}.json"
    if not path.is_file():
        raise FileNotFoundError(f"the chapter {chapter!r} has no catalogue at {path}")
    return ChapterWords(chapter, json.loads(path.read_text(encoding="utf-8")))
