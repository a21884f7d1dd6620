"""One home per kind of text: every word a reader sees in Chinese comes from a catalogue, one per
surface, never from a literal in the book's Python or JavaScript.

The catalogues, by surface:

* the pages' prose: book/locales/zh_CN/LC_MESSAGES/book/*.po (gettext), their checked claims
  (claims/*.json), the figures' alt texts (alt.json);
* the interface the build writes around the pages (title, toggles, the themes' hard-coded words,
  the language switch, the footer, links to chapters): interface.json; the words that Sphinx and
  the themes translate with gettext: LC_MESSAGES/sphinx.po;
* the rules of the Chinese prose (how it writes numbers, the words it must not use):
  prose.json;
* each page script's words: scripts/NAME.json, which the build writes into the page;
* the plots' texts: labformer/book/plot_zh.json; the diagrams' texts:
  labformer/book/diagrams_zh.json; the exercises' texts: their own catalogue;
* the chapters' own Chinese sentences and tables (the values glued as ``KEY_zh``):
  chapters/NAME.json, read by labformer.book.words.chapter_words. The chapters' code cells
  hold no Chinese either.
"""

from __future__ import annotations

import ast
import json
import re
import string
from pathlib import Path

import book_ext
from babel.messages.pofile import read_po

from labformer.book import diagrams
from labformer.book.words import CHAPTERS, chapter_words

ROOT = Path(__file__).resolve().parents[2]
ZH = ROOT / "book" / "locales" / "zh_CN"
#: The source a catalogue replaces: the library and the book's machinery (labformer/), the
#: book's extensions, page scripts and sweeps (book/: _ext, _static, sweeps), the benchmarks
#: (third-party files in book/_static/vendor aside).
SOURCES = ("labformer", "book", "bench")
#: CJK ideographs (with extension A and the compatibility block), CJK symbols and punctuation,
#: full-width and half-width forms.
CHINESE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]")

book = book_ext.load("labformer_book")
live = book_ext.load("labformer_live")
editions = book_ext.load("editions")
release = book_ext.load("labformer_release")


def source_files() -> list[Path]:
    return sorted(path for folder in SOURCES for pattern in ("*.py", "*.js")
                  for path in (ROOT / folder).rglob(pattern)
                  if "vendor" not in path.relative_to(ROOT).parts)


def test_no_chinese_in_python_or_javascript_source() -> None:
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()[:80]}"
             for path in source_files()
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if CHINESE.search(line)]
    assert len(source_files()) > 30, "the scan found too few files: have the folders moved?"
    assert not found, ("Chinese in source; move it to its surface's catalogue "
                       "(tests/book/test_catalogues.py names them):\n" + "\n".join(found))


def code_cells() -> list[tuple[str, int, str]]:
    """(chapter file, cell index, source) of each code cell of the book's chapters."""
    return [(path.name, index, "".join(cell["source"]))
            for path in sorted((ROOT / "book").glob("*.ipynb"))
            for index, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"])
            if cell["cell_type"] == "code"]


def test_no_chinese_in_the_chapters_code_cells() -> None:
    cells = code_cells()
    found = [f"book/{name}:{index}:{n}: {line.strip()[:80]}"
             for name, index, source in cells
             for n, line in enumerate(source.splitlines(), 1) if CHINESE.search(line)]
    assert len({name for name, _, _ in cells}) >= 15, "the scan found too few chapters"
    assert not found, ("Chinese in a chapter's code (chapter:cell:line); move it to its "
                       "catalogue: diagrams_zh.json (dg.Label.of), plot_zh.json (plot_zh) or "
                       "the chapter's chapters/NAME.json (chapter_words):\n" + "\n".join(found))


def chapter_literals() -> set[str]:
    """The string literals of the chapters' code cells (IPython's magics left out)."""
    literals: set[str] = set()
    for _, _, source in code_cells():
        code = "\n".join(line for line in source.splitlines()
                         if not line.lstrip().startswith(("%", "!")))
        literals |= {node.value for node in ast.walk(ast.parse(code))
                     if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    return literals


def template_strings(entry: object) -> list[str]:
    if isinstance(entry, str):
        return [entry]
    assert isinstance(entry, (dict, list)), entry
    values = list(entry.values()) if isinstance(entry, dict) else entry
    return [t for value in values for t in template_strings(value)]


def test_each_chapter_catalogue_belongs_to_a_chapter_that_reads_it() -> None:
    """chapters/NAME.json: NAME is a chapter whose code calls chapter_words("NAME"), every
    entry holds Chinese (or a name kept in English), and a missing key names the chapter."""
    folder = ROOT / CHAPTERS
    catalogues = sorted(folder.glob("*.json"))
    assert catalogues, f"no chapter catalogue in {folder}"
    sources = {name.removesuffix(".ipynb"): "\n".join(s for n, _, s in code_cells() if n == name)
               for name, _, _ in code_cells()}
    for path in catalogues:
        chapter = path.stem
        assert chapter in sources, f"{path.name} names no chapter"
        assert f'chapter_words("{chapter}")' in sources[chapter], f"{chapter} does not read it"
        table = json.loads(path.read_text(encoding="utf-8"))
        for template in template_strings(table):
            assert CHINESE.search(template) or not re.search(r"[a-z]{4}", template), template
    words = chapter_words(catalogues[0].stem)
    try:
        words("a key the catalogue lacks")
    except KeyError as error:
        assert catalogues[0].stem in str(error) and "a key the catalogue lacks" in str(error)
    else:
        raise AssertionError("a missing entry must fail")


def fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def test_every_diagram_text_has_its_chinese_and_every_entry_is_used() -> None:
    """Each Label.of / Label.join key of diagrams.py is in diagrams_zh.json, with the same
    fields in both editions; each entry is a text diagrams.py or a chapter writes."""
    words = diagrams.diagram_words()
    tree = ast.parse(Path(diagrams.__file__).read_text(encoding="utf-8"))
    literals = {node.value for node in ast.walk(tree)
                if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    keys = [call.args[0].value for call in ast.walk(tree)
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name) and call.func.value.id == "Label"
            and call.func.attr in {"of", "join"} and call.args
            and isinstance(call.args[0], ast.Constant)]
    assert len(keys) > 150
    assert [k for k in keys if k not in words] == []
    literals |= chapter_literals()  # the chapters' own labels: dg.Label.of("...")
    assert [k for k in words if k not in literals] == [], "entries no diagram writes"
    assert [k for k, zh in words.items() if fields(zh) != fields(k)] == []
    assert all(CHINESE.search(zh) or zh == k or not re.search(r"[a-z]{4}", k)
               for k, zh in words.items() if k not in {"softmax", "Transformer"})


def test_diagram_labels_fill_both_editions() -> None:
    label = diagrams.Label.of("head {n}", n=3)
    assert (label.en, label.text("zh")) == ("head 3", diagrams.diagram_words()["head {n}"]
                                            .format(n=3))
    greedy = diagrams.Label.of("greedy")
    box = diagrams.Label.of("decoder, {search}", search=greedy)
    assert box.en == "decoder, greedy" and greedy.text("zh") in box.text("zh")
    listed = diagrams.Label.join(", ", ["a", diagrams.Label.of("encoder")])
    assert listed.en == "a, encoder" and listed.text("zh").startswith("a")
    try:
        diagrams.Label.of("a text the catalogue lacks")
    except KeyError as error:
        assert "diagrams_zh.json" in str(error)
    else:
        raise AssertionError("a missing entry must fail")


def english_keys(script: str, table: str) -> set[str]:
    """The keys of a script's English table ``var TABLE = { en: { ... } }``."""
    source = (ROOT / "book" / "_static" / script).read_text(encoding="utf-8")
    start = source.index(f"var {table} = {{")
    body = source[source.index("en:", start):source.index("\n  };", start)]
    body = re.sub(r'"(?:[^"\\]|\\.)*"', '""', body)  # keys only, not words inside strings
    return set(re.findall(r"(?:[{,]|^)\s*(\w+):", body[body.index("{") + 1:], re.M))


def test_each_page_script_has_its_words_in_the_catalogue() -> None:
    """The Chinese words of a script translate exactly its English table."""
    live_words = json.loads((ZH / "scripts" / "labformer-live.json").read_text(encoding="utf-8"))
    assert set(live_words["text"]) == english_keys("labformer-live.js", "TEXT") | {"date_note"}
    assert set(live_words["reasons"]) == english_keys("labformer-live.js", "REASONS")
    explorer = json.loads((ZH / "scripts" / "labformer-explorer.json").read_text("utf-8"))
    assert set(explorer) == english_keys("labformer-explorer.js", "WORDS")
    figure = json.loads((ZH / "scripts" / "labformer.json").read_text(encoding="utf-8"))
    assert set(figure) == {"close", "hint"}
    for name in ("labformer-live", "labformer-explorer", "labformer"):
        assert f'"lf-words-{name}"' in (ROOT / "book" / "_static" / f"{name}.js").read_text(
            encoding="utf-8"), f"{name}.js does not read its words"


def test_the_build_writes_a_script_s_words_into_the_page_as_json() -> None:
    words = book.script_words("zh_CN", "labformer-live.js")
    assert "</" not in words and json.loads(words) == json.loads(
        (ZH / "scripts" / "labformer-live.json").read_text(encoding="utf-8"))
    assert book.script_words("en", "labformer-live.js") == ""
    added: list[tuple[object, dict[str, object]]] = []
    app = type("App", (), {"config": type("C", (), {"language": "zh_CN"})(),
                           "add_js_file": lambda self, f, **kw: added.append((f, kw))})()
    book.add_script_words(app, "labformer.js", priority=400)
    ((filename, attributes),) = added
    assert filename is None and attributes["id"] == "lf-words-labformer"
    assert attributes["type"] == "application/json" and attributes["priority"] == 400


def test_the_interface_catalogue_covers_what_the_build_writes() -> None:
    interface = json.loads((ZH / "interface.json").read_text(encoding="utf-8"))
    assert book.TOGGLE_WORDS["zh_CN"] == interface["toggles"]
    assert book.switch_label("en") == interface["edition_name"]
    assert book.switch_label("zh_CN") == "English"
    assert live.fallback("zh_CN") == (f'<p class="lf-live-fallback">'
                                      f'{interface["live_fallback"]}</p>')
    assert live.fallback("en") == live.FALLBACK.format(live.FALLBACK_EN)
    assert release.footer("zh_CN").startswith("labformer ")
    config = editions.edition_config("zh_CN")
    assert config["title"] == interface["title"] and config["author"] == interface["author"]
    for setting, value in interface["sphinx_config"].items():
        assert config["sphinx"]["config"][setting] == value
    toc = editions.edition_toc("zh_CN")
    assert {p["caption"] for p in toc["parts"]} <= set(interface["captions"].values())
    page = ('<button title="Toggle primary sidebar"></button><nav aria-label="Main"></nav>'
            '<span>列印成 PDF</span><a href="glossary.html#term-mask"><strong>mask</strong></a>')
    chinese = book.chinese_interface(page, {"mask": "掩码"})
    for english in ("Toggle primary sidebar", "Main", "列印成 PDF"):
        assert english not in chinese
    assert "<strong>掩码</strong></a>（mask）" in chinese


def test_sphinx_and_the_themes_translated_words_come_from_the_book_s_gettext_catalogue() -> None:
    """Sphinx reads LC_MESSAGES/sphinx.po before its own catalogue and the themes': every
    interface word the built-book test looks for is there or in interface.json's "theme"
    (the words the themes hard-code in their templates)."""
    with (ZH / "LC_MESSAGES" / "sphinx.po").open("rb") as po:
        catalogue = {m.id: m.string for m in read_po(po) if m.id}
    assert catalogue and all(catalogue.values())
    theme = json.loads((ZH / "interface.json").read_text(encoding="utf-8"))["theme"]
    assert not set(catalogue) & set(theme), "a word in two catalogues"
    checked = re.search(r"INTERFACE_WORDS = \(([^)]*)\)",
                        (ROOT / "tests" / "book" / "test_book_editions.py").read_text("utf-8"))
    assert checked is not None
    for word in re.findall(r'"([^"]+)"', checked.group(1)):
        assert word in catalogue or word in theme, f"{word!r} has no Chinese"
