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
glued into a translated paragraph come from the notebook's own outputs (``glue_in_translations``).
A glued figure shows the twin of its edition, ``KEY_zh`` (a diagram with Chinese labels), when
the notebook glued one (``edition_figures``).
"""

from __future__ import annotations

import ast
import hashlib
import html
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


def use_search_scorer(app: Sphinx, config: Any) -> None:
    """Search ranks glossary entries below chapters (search_scorer.js, by absolute path).

    The Chinese index is cut into words by jieba, which splits the book's terms (自注意力 into
    自 and 注意力): its word list (search_words.zh_CN.txt) keeps each term whole, so that a
    search for 自注意力 finds the pages that use it, not every page about 注意力."""
    config.html_search_scorer = str(Path(__file__).with_name("search_scorer.js"))
    words = Path(__file__).with_name(f"search_words.{config.language}.txt")
    if words.is_file():
        config.html_search_options = {**(config.html_search_options or {}), "dict": str(words)}


#: Where each edition lives, relative to the English site's root.
EDITIONS = {"en": "", "zh_CN": "zh/"}
SWITCH_LABEL = {"en": "中文", "zh_CN": "English"}


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
        f'rel="alternate" onclick="{KEEP_PLACE}">{SWITCH_LABEL[language]}</a></p>\n'
        + context["body"])


#: The words of myst-nb's toggles over hidden cells, which no catalogue holds: per edition.
TOGGLE_WORDS = {
    "zh_CN": {
        "Show code cell source": "显示代码", "Hide code cell source": "隐藏代码",
        "Show code cell outputs": "显示输出", "Hide code cell outputs": "隐藏输出",
        "Show code cell content": "显示代码与输出", "Hide code cell content": "隐藏代码与输出",
        "Show solution": "显示答案", "Hide solution": "隐藏答案",
        "Toggle hidden content": "显示或隐藏",
        "Show the imports": "显示导入的模块", "Hide the imports": "隐藏导入的模块",
        # The prompts of collapsed cells (their code_prompt_show and code_prompt_hide), each
        # chapter's in turn; tests/notebooks/test_book_cells.py holds this list to the notebooks.
        "Show how 16 random layers are measured at each width":
            "显示如何在每个宽度上测量 16 个随机层",
        "Hide how 16 random layers are measured at each width":
            "隐藏如何在每个宽度上测量 16 个随机层",
        "Show how memory, depth and time are measured": "显示内存、深度与时间如何测量",
        "Hide how memory, depth and time are measured": "隐藏内存、深度与时间如何测量",
        "Show the comparison with the formula written out": "显示与展开写出的公式的比较",
        "Hide the comparison with the formula written out": "隐藏与展开写出的公式的比较",
        "Show the imports (Transformer, residual connection)":
            "显示导入的模块（Transformer、残差连接）",
        "Show how each setting is trained": "显示每种设置如何训练",
        "Hide how each setting is trained": "隐藏每种设置如何训练",
        "Show the imports (Transformer and its layers)": "显示导入的模块（Transformer 及其各层）",
        "Show how the dropouts are counted": "显示如何统计随机失活模块",
        "Hide how the dropouts are counted": "隐藏如何统计随机失活模块",
        "Show the imports (masks and layers)": "显示导入的模块（掩码与各层）",
        "Show the imports (losses, label smoothing)": "显示导入的模块（损失函数、标签平滑）",
        "Show the imports (greedy decoding, beam search)": "显示导入的模块（贪心解码、束搜索）",
        "Show the learning-rate tuning table": "显示学习率调优表",
        "Hide the learning-rate tuning table": "隐藏学习率调优表",
        "Show how the GRU is trained at equal CPU time":
            "显示门控循环单元如何以相同的处理器时间训练",
        "Hide how the GRU is trained at equal CPU time":
            "隐藏门控循环单元如何以相同的处理器时间训练",
    },
}


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


def glue_in_translations() -> None:
    """Lets a translated paragraph use {glue:text} like the paragraph it translates.

    Sphinx parses each translated message as a small document of its own, which myst-nb reads
    as Markdown without the notebook's outputs, so a glued number in a translation would find
    no value. The notebook's renderer, recorded while its page is read, is lent to them. A key
    with the edition's language appended (``KEY_zh``), when the notebook glued one, takes the
    place of ``KEY`` in a translation: sentences a chapter generates come in both languages.
    """
    import myst_nb.ext.glue.roles as glue_roles
    import myst_nb.ext.glue.utils as glue_utils
    import myst_nb.sphinx_ as nb_sphinx

    if getattr(nb_sphinx.load_renderer, "_records", False):
        return
    renderers: dict[str, Any] = {}
    reading: list[str] = [""]
    load_renderer, parse = nb_sphinx.load_renderer, nb_sphinx.Parser.parse
    retrieve = glue_roles.retrieve_glue_data

    def recording_load_renderer(name: str) -> Any:
        cls = load_renderer(name)

        def make(*args: Any, **kwargs: Any) -> Any:
            renderers[reading[0]] = renderer = cls(*args, **kwargs)
            return renderer
        return make

    def reading_parse(self: Any, inputstring: str, document: Any) -> None:
        env = getattr(document.settings, "env", None) or self.env
        if not document.current_source.endswith("<translated>"):
            reading[0] = env.docname
        parse(self, inputstring, document)

    def lending_retrieve(document: Any, key: str) -> Any:
        if not str(document.current_source).endswith("<translated>"):
            return retrieve(document, key)
        # A translation prefers the key's edition: "ch13_verdict_zh" over "ch13_verdict", so
        # a chapter can glue a generated sentence in each language.
        language = (document.settings.env.config.language or "").split("_")[0]
        lent = "nb_renderer" not in document
        if lent:
            renderer = renderers.get(document.settings.env.docname)
            if renderer is None:
                return retrieve(document, key)
            document["nb_renderer"] = renderer  # lent for this lookup only: the document
        try:                                    # is pickled later
            try:
                return retrieve(document, f"{key}_{language}")
            except glue_utils.RetrievalError:
                return retrieve(document, key)
        finally:
            if lent:
                del document["nb_renderer"]

    recording_load_renderer._records = True  # type: ignore[attr-defined]
    nb_sphinx.load_renderer = recording_load_renderer
    nb_sphinx.Parser.parse = reading_parse  # type: ignore[method-assign]
    glue_roles.retrieve_glue_data = lending_retrieve


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


def edition_figures() -> None:
    """A glued figure shows its edition's twin, with the picture's own alt text.

    ``{glue:figure} KEY`` in the Chinese edition shows ``KEY_zh`` when the notebook glued one
    (a diagram or a plot with Chinese labels), else ``KEY``. A figure given no ``:alt:`` takes
    the <title> of its SVG, which labformer.book.diagrams writes in the language of its labels, or
    else the text glued as ``KEY_alt`` (``KEY_alt_zh`` in the Chinese edition).
    """
    import myst_nb.ext.glue.directives as glue_directives
    import myst_nb.ext.glue.utils as glue_utils

    if getattr(glue_directives.retrieve_glue_data, "_edition", False):
        return
    retrieve = glue_directives.retrieve_glue_data

    def edition_retrieve(document: Any, key: str) -> Any:
        env = getattr(document.settings, "env", None)
        language = ((env.config.language if env else None) or "en").split("_")[0]
        if language != "en":
            try:
                return retrieve(document, f"{key}_{language}")
            except glue_utils.RetrievalError:
                pass
        return retrieve(document, key)

    figure_run = glue_directives.PasteFigureDirective.run

    def run_with_alt(self: Any) -> Any:
        env = getattr(self.state.document.settings, "env", None)
        language = ((env.config.language if env else None) or "en").split("_")[0]
        if "alt" in self.options and language == "zh":
            self.options["alt"] = chinese_alt(self.options["alt"])
        if "alt" not in self.options:
            try:
                data = edition_retrieve(self.document, self.arguments[0])
            except glue_utils.RetrievalError:
                data = None  # the directive reports the missing key itself
            svg = data.data.get("image/svg+xml") if data is not None else None
            title = SVG_TITLE.search(svg if isinstance(svg, str) else "")
            if title:
                self.options["alt"] = html.unescape(title.group(1)).strip()
            else:  # a plot: its alt text glued as KEY_alt (and KEY_alt_zh)
                try:
                    alt = edition_retrieve(self.document, f"{self.arguments[0]}_alt")
                except glue_utils.RetrievalError:
                    alt = None
                text = alt.data.get("text/plain") if alt is not None else None
                if isinstance(text, str):
                    self.options["alt"] = ast.literal_eval(text).strip()
        return figure_run(self)

    edition_retrieve._edition = True  # type: ignore[attr-defined]
    glue_directives.retrieve_glue_data = edition_retrieve
    glue_directives.PasteFigureDirective.run = run_with_alt  # type: ignore[method-assign]


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
    Markdown value (``IPython.display.Markdown``) is rendered as Markdown."""
    import myst_nb.ext.glue.roles as glue_roles
    import myst_nb.ext.glue.utils as glue_utils

    parsed = eval_key(text)
    if parsed is None:
        message = inliner.reporter.error(
            f"{{eval}} in this book names a glued value, `name` or `f'{{name:spec}}'`; got "
            f"{text!r}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, message)], [message]
    key, spec = parsed
    if not spec:
        try:
            data = glue_roles.retrieve_glue_data(inliner.document, key)
        except glue_utils.RetrievalError:
            data = None  # the text role reports the missing key itself
        if data is not None and "text/markdown" in data.data:
            return glue_roles.PasteMarkdownRole()(name, rawtext, key, lineno, inliner,
                                                   options or {}, content)
    glued = f"{key}:{spec}" if spec else key
    return glue_roles.PasteTextRole()(name, rawtext, glued, lineno, inliner, options or {},
                                      content)


def value_figure() -> type:
    """The ``figure`` directive, which also takes a glued value instead of an image file.

    ``:::{figure}`` with no argument and ``{eval}`KEY``` as the first line of its body shows
    the value the notebook glued as KEY (a diagram, a plot, an explorer), with the caption that
    follows: JupyterLab's MyST renderer draws the same cell from the learner's kernel. A
    figure with an argument is Sphinx's own. ``:class:`` is the figure's class here, as in
    MyST's own figure."""
    from docutils.parsers.rst import directives
    from myst_nb.ext.glue.directives import PasteFigureDirective
    from sphinx.directives.patches import Figure

    class ValueFigure(Figure):  # type: ignore[misc]
        required_arguments = 0
        optional_arguments = 1
        option_spec = {**Figure.option_spec, "class": directives.class_option}

        def run(self) -> list[Any]:
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
            paste = PasteFigureDirective(
                "glue:figure", [match.group("key")], options, self.content[rest:], self.lineno,
                self.content_offset + rest, self.block_text, self.state, self.state_machine)
            return list(paste.run())

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
    """In the Chinese edition a link to a chapter reads 第 N 章《标题》 (another page:
    《标题》), as Chinese prose names a chapter, and no space separates it from the Chinese
    characters beside it (the catalogues' messages keep the spaces that Markdown needs around
    a role)."""
    from docutils import nodes

    if not (app.config.language or "").startswith("zh"):
        return
    for ref in list(doctree.findall(nodes.reference)):
        inline = ref.children[0] if ref.children else None
        if not isinstance(inline, nodes.inline) or "doc" not in inline.get("classes", []):
            continue
        target = str(ref.get("refuri", "")).split("#")[0].removesuffix(".html")
        title = inline.astext().strip()
        if not title or title.startswith(("第", "《")):
            continue
        chapter = CHAPTER_FILE.search(target)
        text = f"第 {int(chapter['n'])} 章《{title}》" if chapter else f"《{title}》"
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


#: The interface words the themes write in English whatever the language (hard-coded in their
#: templates, or left untranslated in their catalogues), in the Chinese edition's words.
INTERFACE_ZH = {
    "Link to this heading": "链接到此标题", "Link to this image": "链接到此图",
    "Link to this table": "链接到此表", "Link to this code": "链接到此代码",
    "Link to this equation": "链接到此公式", "Link to this definition": "链接到此定义",
    "Toggle primary sidebar": "显示或隐藏目录栏", "Toggle secondary sidebar": "显示或隐藏本页目录",
    "Color mode": "颜色模式", "System Settings": "跟随系统设置", "Main": "主导航",
    "Page": "本页", "Section Navigation": "章节导航", "Site navigation": "网站导航",
}
INTERFACE_ATTR = re.compile(r'\b(title|aria-label|data-bs-title)="([^"]*)"')
#: An entry of the index page that names a glossary term (its English name, as Sphinx files it).
INDEX_TERM = re.compile(r'(<a href="[^"]*glossary\.html#term-[^"]*"><strong>)([^<]+)'
                        r'(</strong></a>)')


def chinese_interface(page: str, terms: dict[str, str]) -> str:
    """A Chinese page's HTML with the themes' English interface words (tooltips,
    screen-reader labels, the PDF button) in Chinese; on the index page each glossary term
    reads as its Chinese term of record, the English name after it. ``terms``: the glossary's
    English names, lower case, to their Chinese terms."""
    page = INTERFACE_ATTR.sub(
        lambda m: f'{m.group(1)}="{INTERFACE_ZH.get(m.group(2), m.group(2))}"', page)
    page = page.replace("列印成 PDF", "打印为 PDF")

    def term(match: re.Match[str]) -> str:
        english = html.unescape(match.group(2)).lower()
        chinese = terms.get(english)
        if not chinese or chinese.lower() == english:  # BLEU, softmax: kept as they are
            return match.group(0)
        return f"{match.group(1)}{html.escape(chinese)}{match.group(3)}（{match.group(2)}）"

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
        changed = chinese_interface(page, terms)
        if changed != page:
            path.write_text(changed, encoding="utf-8")


def extensions_digest() -> int:
    """A number that changes whenever a file of book/_ext changes. Sphinx re-reads every page
    when an extension's ``env_version`` changes, so an edit to an extension reaches pages that
    were built before it (without it, only changed sources are rebuilt)."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    return int(digest.hexdigest()[:12], 16)


def setup(app: Sphinx) -> dict[str, Any]:
    plotly_js_path()  # fail at the start of a build, not at its end
    glue_in_translations()
    edition_figures()
    app.add_role("eval", eval_role, override=True)
    app.add_directive("figure", value_figure(), override=True)
    app.connect("doctree-resolved", alt_from_svg_title)
    app.connect("doctree-resolved", chinese_chapter_links)
    app.connect("build-finished", translate_interface)
    app.connect("html-page-context", add_language_switch)
    app.connect("html-page-context", translate_toggles)
    app.connect("config-inited", use_search_scorer)
    app.connect("html-page-context", add_explorer_scripts)
    return {"version": "1.0", "env_version": extensions_digest(), "parallel_read_safe": True,
            "parallel_write_safe": True}
