"""Sphinx extension of the labformer book: offline attention explorers, bibliography labels.

Pages whose HTML holds an attention explorer (``labformer.book.plot.attention_explorer``) get two
deferred scripts, ``_static/vendor/plotly-cartesian.min.js`` then
``_static/labformer-explorer.js``: plotly.js's cartesian bundle, shipped in book/_static, so no
page loads it from a CDN and no output inlines it.

The bibliography's labels read as the text cites: "[Cho et al., 2014]", not "[CvMerrienboerG+14]"
(``bibtex_default_style: labformer``, a pybtex style registered here). Search ranks a
glossary entry below the chapters that use the term (search_scorer.js).

Two editions, English and Chinese, come from the same notebooks (Sphinx's gettext catalogues in
``book/locales``; ``book/_ext/editions.py`` builds the Chinese one into ``_build/html/zh``).
Every page links to the same page in the other edition (``add_language_switch``), and numbers
glued into a translated paragraph come from the notebook's own outputs (``eval_role``). A glued
figure shows the twin of its edition, ``KEY_zh`` (a diagram with Chinese labels), when the
notebook glued one (``value_figure``). What these read of myst-nb beyond its public interface
is in ``mystnb_patches.py``, with the version it was written for (checked in ``setup``).
"""

from __future__ import annotations

import ast
import hashlib
import html
import json
import re
from pathlib import Path
from typing import Any

from pybtex.plugin import register_plugin
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle
from sphinx.application import Sphinx

#: The class that labformer.book.plot.EXPLORER_CLASS writes (not imported: that would load torch).
EXPLORER_MARKER = 'class="lf-explorer"'
#: plotly.js's cartesian bundle (heatmaps and the like, 1.4 MiB against 4.8 MiB for the full
#: bundle), from the npm package plotly.js-cartesian-dist-min at the version of plotly.js that
#: requirements.txt's plotly ships; vendored in book/_static/vendor with its MIT licence.
PLOTLY_JS = "vendor/plotly-cartesian.min.js"
PLOTLY_VERSION = "4.1.1"
EXPLORER_JS = "labformer-explorer.js"
#: The words that the build writes around the pages (the pages' own text is in
#: LC_MESSAGES/book/*.po): LOCALES/LANGUAGE/interface.json for the interface (the hidden cells'
#: toggles, the themes' hard-coded words, the language switch, links to chapters), and
#: LOCALES/LANGUAGE/scripts/NAME.json for the words of each page script NAME.js. The themes'
#: and Sphinx's own words are translated by LOCALES/LANGUAGE/LC_MESSAGES/sphinx.po, which
#: Sphinx reads before its own catalogue.
LOCALES = Path(__file__).resolve().parents[1] / "locales"


def catalogue(language: str | None, name: str) -> dict[str, Any]:
    """LOCALES/LANGUAGE/NAME, or {} for an edition without one (the English)."""
    path = LOCALES / (language or "en") / name
    table: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return table


def script_words(language: str | None, script: str) -> str:
    """A page script's words in the edition's language, as the JSON that the script reads
    from ``<script type="application/json" id="lf-words-NAME">``; "" for the English edition
    (the scripts hold their English words)."""
    words = catalogue(language, f"scripts/{Path(script).stem}.json")
    return json.dumps(words, ensure_ascii=False).replace("</", "<\\/") if words else ""


def add_script_words(app: Sphinx, script: str, priority: int) -> None:
    """:func:`script_words` on the page (on every page when called before the build), ahead
    of the script (a lower ``priority``)."""
    body = script_words(app.config.language, script)
    if body:
        app.add_js_file(None, priority=priority, body=body, type="application/json",
                        id=f"lf-words-{Path(script).stem}")


def plotly_js_path() -> Path:
    """The vendored plotly.js bundle, checked against the plotly.js of the plotly package."""
    path = Path(__file__).resolve().parents[1] / "_static" / PLOTLY_JS
    if not path.is_file():
        raise RuntimeError(f"{path} is missing: the explorers need it")
    head = path.read_text(encoding="utf-8", errors="replace")[:200]
    if f"v{PLOTLY_VERSION}" not in head:
        raise RuntimeError(f"{path} is not plotly.js v{PLOTLY_VERSION}: {head[:80]!r}")
    return path


def add_explorer_scripts(app: Sphinx, pagename: str, templatename: str,
                         context: dict[str, Any], doctree: Any) -> None:
    """On pages that hold an explorer: plotly.js, then the explorer script (both deferred)."""
    if EXPLORER_MARKER in context.get("body", ""):
        app.add_js_file(PLOTLY_JS, priority=600, defer="defer")
        add_script_words(app, EXPLORER_JS, priority=601)
        app.add_js_file(EXPLORER_JS, priority=601, defer="defer")


def _last_name(person: Any) -> str:
    """A person's last name as printed, braces of BibTeX's {Source 000} removed."""
    name = " ".join(person.prelast_names + person.last_names) or " ".join(person.first_names)
    return name.replace("{", "").replace("}", "")


class AuthorYearLabels(BaseLabelStyle):
    """Labels as the author-year citations in the text: "Cho et al., 2014", "Ba et al., 2016"."""

    def format_labels(self, sorted_entries: Any) -> Any:
        for entry in sorted_entries:
            people = entry.persons.get("author") or entry.persons.get("editor") or []
            names = [_last_name(p) for p in people]
            if not names:
                who = entry.fields.get("title", entry.key)[:24]
            elif len(names) == 1:
                who = names[0]
            elif len(names) == 2:
                who = f"{names[0]} and {names[1]}"
            else:
                who = f"{names[0]} et al."
            year = entry.fields.get("year", "n.d.")
            # An undated post is labelled by the site it was published on ("Source 000, Zhihu").
            yield f"{who}, {entry.fields.get('site', year) if year == 'n.d.' else year}"


class LabformerStyle(PlainStyle):
    """pybtex's plain style (sorted by author, year, title) with author-year labels."""

    default_label_style = "labformer-author-year"


register_plugin("pybtex.style.labels", "labformer-author-year", AuthorYearLabels)
register_plugin("pybtex.style.formatting", "labformer", LabformerStyle)


def add_page_words(app: Sphinx, config: Any) -> None:
    """labformer.js, on every page (_config.yml's html_js_files), finds its words ahead of it."""
    add_script_words(app, "labformer.js", priority=400)


def use_search_scorer(app: Sphinx, config: Any) -> None:
    """Search ranks glossary entries below chapters (search_scorer.js, by absolute path).

    The Chinese index is cut into words by jieba, which splits the book's terms
    (self-attention into "self" and "attention"): its word list (search_words.zh_CN.txt) keeps
    each term whole, so that a search for self-attention finds the pages that use it, not
    every page about attention."""
    config.html_search_scorer = str(Path(__file__).with_name("search_scorer.js"))
    words = Path(__file__).with_name(f"search_words.{config.language}.txt")
    if words.is_file():
        config.html_search_options = {**(config.html_search_options or {}), "dict": str(words)}


#: Where each edition lives, relative to the English site's root.
EDITIONS = {"en": "", "zh_CN": "zh/"}


def switch_label(language: str) -> str:
    """The switch's label on an edition's pages: the other edition's name, in its own language
    (the Chinese edition's: its interface catalogue's "edition_name")."""
    if language != "en":
        return "English"
    return str(catalogue("zh_CN", "interface.json").get("edition_name", "zh_CN"))


#: On the switch: land on the section the reader is reading (both editions share section ids).
KEEP_PLACE = ("var s = window.scrollY > 50 && Array.from(document.querySelectorAll("
              "'section[id]')).filter(function (e) { return e.getBoundingClientRect().top "
              "< 120; }).pop(); if (s) this.hash = s.id;")


def language_switch_href(language: str, pagename: str) -> str:
    """The same page in the other edition, as a link relative to this page."""
    up = "../" * pagename.count("/")
    if language == "en":
        return f"{up}{EDITIONS['zh_CN']}{pagename}.html"
    return f"{up}../{pagename}.html"


def add_language_switch(app: Sphinx, pagename: str, templatename: str,
                        context: dict[str, Any], doctree: Any) -> None:
    """A link to this page in the other edition, at the top of every page's article."""
    if doctree is None or "body" not in context:
        return
    language = app.config.language if app.config.language in EDITIONS else "en"
    other = "zh-CN" if language == "en" else "en"
    href = language_switch_href(language, pagename)
    context["body"] = (
        f'<p class="lf-language-switch"><a href="{href}" hreflang="{other}" lang="{other}" '
        f'rel="alternate" onclick="{KEEP_PLACE}">{switch_label(language)}</a></p>\n'
        + context["body"])


#: The words of myst-nb's toggles over hidden cells, which no catalogue of myst-nb holds, per
#: edition: interface.json's "toggles", with the prompts of collapsed cells (their
#: code_prompt_show and code_prompt_hide), each chapter's in turn;
#: tests/notebooks/test_book_cells.py holds that list to the notebooks.
TOGGLE_WORDS: dict[str, dict[str, str]] = {
    language: words for language in EDITIONS
    if (words := catalogue(language, "interface.json").get("toggles"))}


def translate_toggles(app: Sphinx, pagename: str, templatename: str,
                      context: dict[str, Any], doctree: Any) -> None:
    """The toggles' words in the page's language (their paragraphs and aria labels)."""
    words = TOGGLE_WORDS.get(app.config.language or "")
    if not words or "body" not in context:
        return
    body = context["body"]
    for english, translated in words.items():
        body = body.replace(f"admonition-title\">{english}</p>",
                            f"admonition-title\">{translated}</p>")
        body = body.replace(f'aria-label="{english}"', f'aria-label="{translated}"')
    context["body"] = body


#: A diagram's alt text: the <title> of its SVG (labformer.book.diagrams writes it in the edition's
#: language).
SVG_TITLE = re.compile(r"<title>(.*?)</title>", re.S)


#: The Chinese edition's alt texts of the figures that give one (``:alt:``): English -> Chinese.
ALT_ZH = Path(__file__).resolve().parents[1] / "locales" / "zh_CN" / "alt.json"


def chinese_alt(english: str) -> str:
    """A figure's alt text in the Chinese edition: its translation in book/locales/zh_CN/
    alt.json, or the English when it has none (tests/book/test_book_editions.py fails on that)."""
    import json

    table = json.loads(ALT_ZH.read_text(encoding="utf-8")) if ALT_ZH.is_file() else {}
    return table.get(" ".join(english.split()), english)


#: ``{eval}`` in the chapters names a value the notebook glued (``labformer.book.notebook.glue``):
#: ``{eval}`ch3_z``` or, formatted, ``{eval}`f'{ch3_z:.1f}'```. JupyterLab (jupyterlab-myst)
#: evaluates it in the learner's kernel; the page reads the same value from the executed
#: notebook, as ``{glue:text}`` does, so the two show the same text.
EVAL_NAME = re.compile(r"(?P<key>[A-Za-z_]\w*)")
EVAL_FORMAT = re.compile(r"f(?P<q>['\"])\{(?P<key>[A-Za-z_]\w*)(?::(?P<spec>[^{}'\"]*))?\}(?P=q)")
#: The first line of a figure that shows a glued value: ``{eval}`ch3_scaling```.
EVAL_FIGURE = re.compile(r"\{eval\}`(?P<key>[A-Za-z_]\w*)`")


def eval_key(text: str) -> tuple[str, str] | None:
    """(key, format spec) of an ``{eval}`` role's text, or None when it is not one the book
    reads (a name, or an f-string of one name and a format spec)."""
    text = text.strip()
    match = EVAL_NAME.fullmatch(text) or EVAL_FORMAT.fullmatch(text)
    if match is None:
        return None
    return match.group("key"), (match.groupdict().get("spec") or "")


def eval_role(name: str, rawtext: str, text: str, lineno: int, inliner: Any,
              options: dict[str, Any] | None = None,
              content: Any = ()) -> tuple[list[Any], list[Any]]:
    """``{eval}`` on the page: the glued value's text, formatted as the f-string asks; a glued
    Markdown value (``IPython.display.Markdown``) is rendered as Markdown.

    A translated paragraph uses ``{eval}`` like the paragraph it translates (Sphinx parses it
    without the notebook's outputs: mystnb_patches.glue_source lends it the page's), and
    prefers the key of its edition, ``KEY_zh``, when the notebook glued one: a chapter can
    glue a generated sentence in each language."""
    import mystnb_patches as nb

    parsed = eval_key(text)
    if parsed is None:
        message = inliner.reporter.error(
            f"{{eval}} in this book names a glued value, `name` or `f'{{name:spec}}'`; got "
            f"{text!r}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, message)], [message]
    key, spec = parsed
    document = inliner.document
    with nb.glue_source(document):
        key = nb.edition_key(document, key, translations_only=True)
        data = None if spec else nb.glued(document, key)  # a missing key: the role reports it
        markdown = data is not None and "text/markdown" in data.data
        return nb.paste_text(markdown, name, rawtext, f"{key}:{spec}" if spec else key,
                             lineno, inliner, options or {}, content)


def figure_alt(document: Any, key: str) -> str | None:
    """The alt text of a glued figure given no ``:alt:``: the <title> of its SVG, which
    labformer.book.diagrams writes in the language of its labels, or else the text glued as
    ``KEY_alt`` (``KEY_alt_zh`` in the Chinese edition). Inside mystnb_patches.glue_source."""
    import mystnb_patches as nb

    data = nb.glued(document, nb.edition_key(document, key, translations_only=False))
    svg = data.data.get("image/svg+xml") if data is not None else None
    title = SVG_TITLE.search(svg if isinstance(svg, str) else "")
    if title:
        return html.unescape(title.group(1)).strip()
    alt = nb.glued(document, nb.edition_key(document, f"{key}_alt", translations_only=False))
    text = alt.data.get("text/plain") if alt is not None else None
    return ast.literal_eval(text).strip() if isinstance(text, str) else None


def value_figure() -> type:
    """The ``figure`` directive, which also takes a glued value instead of an image file.

    ``:::{figure}`` with no argument and ``{eval}`KEY``` as the first line of its body shows
    the value the notebook glued as KEY (a diagram, a plot, an explorer), with the caption that
    follows: JupyterLab's MyST renderer draws the same cell from the learner's kernel. A
    figure with an argument is Sphinx's own. ``:class:`` is the figure's class here, as in
    MyST's own figure. The Chinese edition shows ``KEY_zh`` when the notebook glued one (a
    diagram or a plot with Chinese labels); the alt text is ``:alt:`` (in the Chinese edition
    its translation, :func:`chinese_alt`), else :func:`figure_alt`."""
    from docutils.parsers.rst import directives
    from sphinx.directives.patches import Figure

    class ValueFigure(Figure):  # type: ignore[misc]
        required_arguments = 0
        optional_arguments = 1
        option_spec = {**Figure.option_spec, "class": directives.class_option}

        def run(self) -> list[Any]:
            import mystnb_patches as nb

            if self.arguments:
                return list(super().run())
            lines = list(self.content)
            first = next((i for i, line in enumerate(lines) if line.strip()), None)
            match = EVAL_FIGURE.fullmatch(lines[first].strip()) if first is not None else None
            if match is None:
                return [self.state.document.reporter.error(
                    "a figure without an image file shows a glued value: its body's first "
                    "line must be {eval}`NAME`", line=self.lineno)]
            options = {k: v for k, v in self.options.items() if k not in ("class", "target")}
            if "class" in self.options:
                options["figclass"] = list(self.options["class"])
            rest = first + 1
            while rest < len(lines) and not lines[rest].strip():
                rest += 1
            document = self.state.document
            key = match.group("key")
            with nb.glue_source(document):
                if "alt" in options and nb.edition(document) == "zh":
                    options["alt"] = chinese_alt(options["alt"])
                if "alt" not in options:
                    alt = figure_alt(document, key)
                    if alt:
                        options["alt"] = alt
                return nb.paste_figure(
                    self, nb.edition_key(document, key, translations_only=False), options,
                    self.content[rest:], self.content_offset + rest)

    return ValueFigure


def alt_from_svg_title(app: Sphinx, doctree: Any, docname: str) -> None:
    """A figure of the book's own SVG files (book/diagrams) given no ``:alt:`` takes the
    <title> of the SVG it shows: in the Chinese edition the ``.zh_CN.svg`` twin that Sphinx's
    ``figure_language_filename`` picks, so the alt text is in the edition's language."""
    from docutils import nodes

    for image in doctree.findall(nodes.image):
        uri = str(image.get("uri", ""))
        if not uri.endswith(".svg") or image.get("alt"):
            continue
        path = Path(app.srcdir) / uri
        title = SVG_TITLE.search(path.read_text(encoding="utf-8")) if path.is_file() else None
        if title:
            image["alt"] = html.unescape(title.group(1)).strip()


#: A chapter's file name: its number and its stem.
CHAPTER_FILE = re.compile(r"(?:^|/)(?P<n>\d\d)_[\w-]+$")
CJK_CHAR = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def chinese_chapter_links(app: Sphinx, doctree: Any, docname: str) -> None:
    """In the Chinese edition a link to a chapter reads as Chinese prose names a chapter
    ("chapter N" and the title in title marks: interface.json's "chapter_link"; another page:
    its "page_link"), and no space separates it from the Chinese characters beside it (the
    catalogues' messages keep the spaces that Markdown needs around a role)."""
    from docutils import nodes

    if not (app.config.language or "").startswith("zh"):
        return
    words = catalogue(app.config.language, "interface.json")
    # a title that already reads so (a link written by hand): as it is
    written = tuple(words[k].split("{")[0].strip() for k in ("chapter_link", "page_link"))
    for ref in list(doctree.findall(nodes.reference)):
        inline = ref.children[0] if ref.children else None
        if not isinstance(inline, nodes.inline) or "doc" not in inline.get("classes", []):
            continue
        target = str(ref.get("refuri", "")).split("#")[0].removesuffix(".html")
        title = inline.astext().strip()
        if not title or title.startswith(written):
            continue
        chapter = CHAPTER_FILE.search(target)
        text = (words["chapter_link"].format(n=int(chapter["n"]), title=title) if chapter
                else words["page_link"].format(title=title))
        inline.children = [nodes.Text(text)]
        parent, index = ref.parent, ref.parent.index(ref)
        for neighbour, side in ((index - 1, "end"), (index + 1, "start")):
            if not 0 <= neighbour < len(parent.children):
                continue
            node = parent.children[neighbour]
            if not isinstance(node, nodes.Text):
                continue
            value = str(node)
            stripped = value.rstrip(" ") if side == "end" else value.lstrip(" ")
            beside = stripped[-1:] if side == "end" else stripped[:1]
            if stripped != value and CJK_CHAR.match(beside or ""):
                parent.replace(node, nodes.Text(stripped))


#: The interface words the themes write in English whatever the language, hard-coded in their
#: templates (interface.json's "theme"; the words they translate, LC_MESSAGES/sphinx.po does),
#: the words of their catalogues that the edition writes otherwise ("theme_text"; the themes'
#: own catalogues, such as sphinx-book-theme's, cannot be overridden from the book's) and an
#: index entry of a glossary term ("index_term").
INTERFACE_WORDS: dict[str, dict[str, Any]] = {
    language: {key: words[key] for key in ("theme", "theme_text", "index_term")}
    for language in EDITIONS if (words := catalogue(language, "interface.json"))}
INTERFACE_ATTR = re.compile(r'\b(title|aria-label|data-bs-title)="([^"]*)"')
#: An entry of the index page that names a glossary term (its English name, as Sphinx files it).
INDEX_TERM = re.compile(r'(<a href="[^"]*glossary\.html#term-[^"]*"><strong>)([^<]+)'
                        r'(</strong></a>)')


def chinese_interface(page: str, terms: dict[str, str], language: str = "zh_CN") -> str:
    """A Chinese page's HTML with the themes' English interface words (tooltips,
    screen-reader labels, the PDF button) in Chinese; on the index page each glossary term
    reads as its Chinese term of record, the English name after it. ``terms``: the glossary's
    English names, lower case, to their Chinese terms."""
    words = INTERFACE_WORDS[language]
    page = INTERFACE_ATTR.sub(
        lambda m: f'{m.group(1)}="{words["theme"].get(m.group(2), m.group(2))}"', page)
    for theirs, ours in words["theme_text"].items():
        page = page.replace(theirs, ours)

    def term(match: re.Match[str]) -> str:
        english = html.unescape(match.group(2)).lower()
        chinese = terms.get(english)
        if not chinese or chinese.lower() == english:  # BLEU, softmax: kept as they are
            return match.group(0)
        entry = f"{match.group(1)}{html.escape(chinese)}{match.group(3)}"
        return str(words["index_term"]).format(term=entry, english=match.group(2))

    return INDEX_TERM.sub(term, page)


def translate_interface(app: Sphinx, exception: Exception | None) -> None:
    """After a Chinese build: :func:`chinese_interface` over every page it wrote."""
    if exception is not None or not (app.config.language or "").startswith("zh"):
        return
    import translations

    glossary = Path(app.srcdir) / "book" / "glossary.md"  # a book without one: no index terms
    terms = {name.lower(): term.chinese[0] for term in
             (translations.glossary_terms(glossary) if glossary.is_file() else [])
             for name in term.english}
    for path in Path(app.outdir).rglob("*.html"):
        page = path.read_text(encoding="utf-8")
        changed = chinese_interface(page, terms, app.config.language)
        if changed != page:
            path.write_text(changed, encoding="utf-8")


def extensions_digest() -> int:
    """A number that changes whenever a file of book/_ext or an interface catalogue
    (LOCALES/*/interface.json, LOCALES/*/scripts/*.json, LOCALES/*/LC_MESSAGES/sphinx.po)
    changes. Sphinx re-reads every page
    when an extension's ``env_version`` changes, so an edit to an extension reaches pages that
    were built before it (without it, only changed sources are rebuilt)."""
    digest = hashlib.sha256()
    for path in [*sorted(Path(__file__).parent.glob("*.py")),
                 *sorted(LOCALES.glob("*/interface.json")),
                 *sorted(LOCALES.glob("*/scripts/*.json")),
                 *sorted(LOCALES.glob("*/LC_MESSAGES/sphinx.po"))]:
        digest.update(path.name.encode() + path.read_bytes())
    return int(digest.hexdigest()[:12], 16)


def setup(app: Sphinx) -> dict[str, Any]:
    import mystnb_patches

    plotly_js_path()  # fail at the start of a build, not at its end
    mystnb_patches.check_versions()  # what the book reads of myst-nb's internals still fits
    app.add_role("eval", eval_role, override=True)
    app.add_directive("figure", value_figure(), override=True)
    app.connect("doctree-resolved", alt_from_svg_title)
    app.connect("doctree-resolved", chinese_chapter_links)
    app.connect("build-finished", translate_interface)
    app.connect("html-page-context", add_language_switch)
    app.connect("html-page-context", translate_toggles)
    app.connect("config-inited", use_search_scorer)
    app.connect("config-inited", add_page_words)
    app.connect("html-page-context", add_explorer_scripts)
    return {"version": "1.0", "env_version": extensions_digest(), "parallel_read_safe": True,
            "parallel_write_safe": True}
