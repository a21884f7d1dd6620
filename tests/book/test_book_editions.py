"""The two editions of the built book: English in _build/html, Chinese in _build/html/zh.

Both come from the same notebooks, executed once: the Chinese pages must have every page of
the English book with the same figures (the same image files; a diagram, `<figure
class="lf-diagram">`, is drawn once per edition with labels in its language), be written in
Chinese, carry
`lang="zh-CN"`, and link to the same page in the other edition, both ways. In a browser the
switch works, the Chinese text is set in a CJK font, no page scrolls sideways at 1280 px, and
a search in either edition lists first the chapter whose title holds the query (自注意力, 注意力:
the self-attention chapter) with snippets that show the query. (Phone widths, dark mode and
the explorers are checked on both editions by tests/book/test_book_html.py.)
"""

from __future__ import annotations

import html
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import book_ext
import pytest
from test_book_html import (
    SCREENSHOTS,
    _report,
    _watched_context,
    book_pages,
    chromium,
    save_shot,
    search,
)

ZH = "zh"
CJK = re.compile(r"[\u3400-\u9fff]")
#: The share of a Chinese page's prose paragraphs that must be Chinese.
MIN_CHINESE_SHARE = 0.85
#: Fonts the Chinese pages may be set in on this machine (`make browser` installs WenQuanYi).
CJK_FONTS = ("WenQuanYi Micro Hei", "Noto Sans CJK SC", "Source Han Sans SC")


def editions(html_dir: Path) -> tuple[list[str], list[str]]:
    """The content pages of each edition, as paths relative to the edition's root."""
    pages = book_pages(html_dir)
    english = [p.relative_to(html_dir).as_posix() for p in pages
               if p.relative_to(html_dir).parts[0] != ZH]
    chinese = [p.relative_to(html_dir / ZH).as_posix() for p in pages
               if p.relative_to(html_dir).parts[0] == ZH]
    return english, chinese


class _PageText(HTMLParser):
    """The article's prose paragraphs (not code, outputs or maths), images and switch links."""

    SKIP = ("cell_output", "highlight", "cell_input", "math", "MathJax")

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lang = ""
        self.paragraphs: list[str] = []
        self.images: list[str] = []
        self.diagrams: list[str] = []  # images inside <figure class="lf-diagram">
        self.plots: list[str] = []  # images inside any other <figure>: a plot per edition
        self._figure: list[str] | None = None  # where this figure's images go
        self.switch: list[str] = []
        self._stack: list[tuple[str, bool]] = []
        self._paragraph: list[str] | None = None
        self._in_switch = False

    def _skipping(self) -> bool:
        return any(skip for _, skip in self._stack)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "html":
            self.lang = a.get("lang", "")
        if tag in {"img", "br", "meta", "link", "input", "hr", "source"}:
            if tag == "img" and "_images/" in a.get("src", ""):
                name = a["src"].rsplit("_images/", 1)[1]
                (self.images if self._figure is None else self._figure).append(name)
            return
        classes = a.get("class", "")
        if tag == "figure":
            kinds = classes.split()
            self._figure = self.diagrams if "lf-diagram" in kinds else self.plots
        skip = tag in {"pre", "code", "script", "style"} or any(s in classes for s in self.SKIP)
        self._stack.append((tag, skip))
        if tag == "p" and "lf-language-switch" in classes:
            self._in_switch = True
        elif tag == "a" and self._in_switch:
            self.switch.append(a.get("href", ""))
        elif tag == "p" and not self._skipping() and self._paragraph is None:
            self._paragraph = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "figure":
            self._figure = None
        while self._stack:
            open_tag, _ = self._stack.pop()
            if open_tag == tag:
                break
        if tag == "p":
            self._in_switch = False
            if self._paragraph is not None:
                self.paragraphs.append(" ".join("".join(self._paragraph).split()))
                self._paragraph = None

    def handle_data(self, data: str) -> None:
        if self._paragraph is not None and not self._skipping():
            self._paragraph.append(data)


def read_page(path: Path) -> _PageText:
    parser = _PageText()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def is_prose(paragraph: str) -> bool:
    """A paragraph a translator writes: a few words of text, not a number or a formula."""
    return len(re.findall(r"[A-Za-z]{2,}", paragraph)) + len(CJK.findall(paragraph)) // 2 >= 4


# ----------------------------------------------------------------------------------- static

def test_chinese_edition_has_every_page_with_the_same_figures(html_dir: Path) -> None:
    english, chinese = editions(html_dir)
    assert chinese, f"no Chinese edition under {html_dir / ZH}: `make book` builds it"
    assert sorted(chinese) == sorted(english)
    problems, plots = [], 0
    for rel in english:
        en, zh = read_page(html_dir / rel), read_page(html_dir / ZH / rel)
        plots += len(en.plots)
        if en.images != zh.images:
            problems.append(f"{rel}: figures differ: {en.images} vs {zh.images}")
        for name in zh.images:
            same = (html_dir / "_images" / name).read_bytes() == \
                (html_dir / ZH / "_images" / name).read_bytes()
            if not same:
                problems.append(f"{rel}: {name} is not the English edition's image file")
        if len(en.diagrams) != len(zh.diagrams):
            problems.append(f"{rel}: {len(en.diagrams)} diagrams in English, "
                            f"{len(zh.diagrams)} in Chinese")
        for root, names, want_cjk in ((html_dir, en.diagrams, False),
                                      (html_dir / ZH, zh.diagrams, True)):
            for name in names:
                text = (root / "_images" / name).read_text(encoding="utf-8", errors="replace")
                if bool(CJK.search(text)) != want_cjk:
                    problems.append(f"{root.name}/{rel}: diagram {name} "
                                    f"{'lacks' if want_cjk else 'has'} Chinese labels")
        # a plot drawn per edition (its Chinese twin, labformer.book.plot.chinese_twin, or its own
        # drawing under labformer.book.plot.edition_style): the Chinese one is another image
        if len(en.plots) != len(zh.plots):
            problems.append(f"{rel}: {len(en.plots)} plots per edition in English, "
                            f"{len(zh.plots)} in Chinese")
        for en_name, zh_name in zip(en.plots, zh.plots, strict=False):
            if (html_dir / "_images" / en_name).read_bytes() == \
                    (html_dir / ZH / "_images" / zh_name).read_bytes():
                problems.append(f"{rel}: the Chinese edition shows the English plot {en_name} "
                                "(no Chinese font when it was drawn?)")
    assert plots, "no page has a plot drawn per edition"
    # every text of every chapter's plots was translated in its twin (make book's execution
    # writes what was not, one file per chapter: book/_ext/execute_notebooks.py)
    missing = html_dir.parent / "plot_missing"
    assert missing.is_dir(), f"{missing} is missing: the notebooks ran outside `make book`"
    for report in sorted(missing.glob("*.jsonl")):
        for line in report.read_text(encoding="utf-8").splitlines():
            problems.append(f"{report.stem}: a plot text without a Chinese twin in "
                            f"labformer/plot_zh.json: {line}")
    assert not problems, "\n".join(problems)


def test_chinese_pages_are_written_in_chinese(html_dir: Path) -> None:
    _, chinese = editions(html_dir)
    problems = []
    for rel in chinese:
        page = read_page(html_dir / ZH / rel)
        if page.lang != "zh-CN":
            problems.append(f"zh/{rel}: <html lang={page.lang!r}>, not zh-CN")
        prose = [p for p in page.paragraphs if is_prose(p)]
        english = [p for p in prose if not CJK.search(p)]
        share = 1 - len(english) / max(1, len(prose))
        if share < MIN_CHINESE_SHARE:
            problems.append(f"zh/{rel}: {share:.0%} of {len(prose)} paragraphs are Chinese; "
                            f"English ones: {[p[:60] for p in english[:5]]}")
    assert not problems, "\n".join(problems)


#: Words of sentences that chapters generate from data (glued as KEY and, in Chinese, KEY_zh).
GENERATED = {"book/14_recipe_baseline.html": ("about the same CPU time", "runs of the sweep",
                                                "the slower one"),
             "book/13_ablations.html": ("points over",)}


def test_generated_sentences_come_in_the_edition_language(html_dir: Path) -> None:
    """A verdict a chapter writes from its data reads in Chinese in the Chinese edition."""
    for rel, phrases in GENERATED.items():
        english = [p for p in read_page(html_dir / rel).paragraphs if is_prose(p)]
        chinese = [p for p in read_page(html_dir / ZH / rel).paragraphs if is_prose(p)]
        for words in phrases:
            assert any(words in p for p in english), f"{rel}: no generated sentence ({words!r})"
            left = [p[:120] for p in chinese if words in p]
            assert not left, f"zh/{rel}: generated sentences still in English: {left}"


#: Words of the interface that Sphinx, its theme and extensions write in English by default.
UI_WORDS = ("Click to show", "Click to hide", "Show code cell", "Hide code cell",
            "Search this book")
BADGE = re.compile(r'<span class="sd-sphinx-override sd-badge[^"]*">([^<]*)</span>')
#: Tooltips and screen-reader labels the themes write in English (book/_ext/labformer_book.py).
INTERFACE_ATTR = re.compile(r'\b(title|aria-label|data-bs-title)="([^"]*)"')
INTERFACE_WORDS = ("Link to this heading", "Link to this image", "Toggle primary sidebar",
                   "Toggle secondary sidebar", "Color mode", "System Settings", "Main", "Page")
INDEX_ENTRY = re.compile(r'<a href="[^"]*glossary\.html#term-[^"]*"><strong>([^<]+)</strong></a>'
                         r'(（[^）<]+）)?')


def test_chinese_pages_have_no_english_interface_words(html_dir: Path) -> None:
    """Toggle hints, hidden cells' prompts, the search box and verdict badges, on every page."""
    _, chinese = editions(html_dir)
    problems = []
    for rel in chinese + ["search.html"]:
        text = (html_dir / ZH / rel).read_text(encoding="utf-8")
        problems += [f"zh/{rel}: {w!r}" for w in UI_WORDS if w in text]
        problems += [f"zh/{rel}: badge {b!r}" for b in BADGE.findall(text) if not CJK.search(b)]
        problems += [f"zh/{rel}: {a}={v!r}" for a, v in INTERFACE_ATTR.findall(text)
                     if v in INTERFACE_WORDS]
        problems += [f"zh/{rel}: 列印成 PDF"] if "列印成 PDF" in text else []
    english_ch13 = (html_dir / "book" / "13_ablations.html").read_text(encoding="utf-8")
    assert "Show code cell" in english_ch13 and BADGE.search(english_ch13), \
        "the English pages no longer show the words this test looks for"
    shown = {v for a, v in INTERFACE_ATTR.findall(english_ch13)}
    assert {"Link to this heading", "Toggle primary sidebar", "Color mode"} <= shown, \
        "the English pages no longer show the tooltips this test looks for"
    # the index page: every glossary term under its Chinese term of record
    index = (html_dir / ZH / "genindex.html").read_text(encoding="utf-8")
    entries = INDEX_ENTRY.findall(index)
    assert len(entries) > 100, f"only {len(entries)} glossary terms on the Chinese index page"
    kept = {name.lower() for name, chinese in glossary_terms().items()
            if chinese.lower() == name.lower()}  # BLEU, softmax: the same in Chinese
    problems += [f"zh/genindex.html: {name!r} without its Chinese term"
                 for name, after in entries
                 if name.lower() not in kept and (not CJK.search(name) or not after)]
    assert any(name.lower() in kept for name, _ in entries), "no term kept as it is"
    assert not problems, "English interface words on Chinese pages:\n" + "\n".join(problems)


def glossary_terms() -> dict[str, str]:
    """Each English name of a glossary entry and its Chinese term of record
    (book/_ext/translations.py reads book/glossary.md)."""
    return {name: term.chinese[0] for term in book_ext.load("translations").glossary_terms()
            for name in term.english}


#: Chinese prose writes 12.5%, 1/3324, 2.7×10⁻⁴⁰ (book/_ext/claims.py chinese_prose).
NUMBER_FORMS = {"a space before %": re.compile(r"\d %"),
                "N 分之一": re.compile(r"\d\s*分之一"),
                "e-notation": re.compile(r"(?<![\w.])\d+(?:\.\d+)?e[-+]\d+\b"),
                "a signed zero": re.compile(r"(?<![\w.])-0\.0+(?![\d])")}


def test_chinese_prose_writes_numbers_the_chinese_way(html_dir: Path) -> None:
    """No "12.5 %", "3324 分之一", "2.7e-40" or "-0.00" in the prose and the checked claims of
    a Chinese page (code and printed output keep Python's forms)."""
    _, chinese = editions(html_dir)
    problems = []
    for rel in chinese:
        page = read_page(html_dir / ZH / rel)
        text = (html_dir / ZH / rel).read_text(encoding="utf-8")
        claims = [html.unescape(t) for t in re.findall(
            r'<span class="lf-(?:claim|measured)" lang="zh-CN">(.*?)</span>', text, re.S)]
        for where in page.paragraphs + claims:
            for name, form in NUMBER_FORMS.items():
                if form.search(where):
                    problems.append(f"zh/{rel}: {name}: {where[:100]!r}")
    english = read_page(html_dir / "book" / "06_residual_norm.html").paragraphs
    assert any(NUMBER_FORMS["e-notation"].search(p) for p in english), \
        "the English pages no longer show the numbers this test looks for"
    assert not problems, "\n".join(problems)


def test_claims_read_in_chinese_on_chinese_pages(html_dir: Path) -> None:
    """Every checked claim and measured value with words shows in Chinese (book/_ext/claims.py),
    and every claim of the English book has its Chinese in the catalogue."""
    claims = book_ext.load("claims")
    table = claims.load()
    # Claims are sentences the chapter writes: every one is translated. A measured value may
    # quote the run's data (a sentence the model translated, which this seed chose): at most
    # 2 % of them may be left as they are.
    untranslated: dict[str, list[str]] = {"claim": [], "measured": [], "tally": [],
                                          "cell": []}
    for page, entries in claims.english_claims(html_dir / "book").items():
        for c in entries:
            if c["en"] not in table:
                untranslated[c["kind"]].append(f"{page}: {c['en'][:80]!r}")
    # Table cells: every one in the catalogue, and on the Chinese pages either translated
    # (lang="zh-CN") or one the catalogue keeps as it is (data, code, a name).
    cells_left = list(untranslated["cell"])
    cells_shown = 0
    english, chinese = editions(html_dir)
    shown, on_page = 0, {"claim": [], "measured": []}
    for rel in chinese:
        text = (html_dir / ZH / rel).read_text(encoding="utf-8")
        for kind, inner in re.findall(r'<span class="lf-(claim|measured)">(.*?)</span>', text,
                                      re.S):
            if claims.needs_words(inner):
                on_page[kind].append(f"zh/{rel}: {inner[:80]!r}")
        shown += text.count('lang="zh-CN">')
        for block in claims.TABLE.findall(text):
            for _, attrs, inner in claims.CELL.findall(block):
                plain = html.unescape(inner).strip()
                if 'lang="zh-CN"' in attrs:
                    cells_shown += 1
                    continue
                english_cell, _ = claims.template(plain)
                if claims.needs_words(plain) and table.get(english_cell) != english_cell:
                    cells_left.append(f"zh/{rel}: {plain[:80]!r}")
    assert shown > 500, f"only {shown} claims in Chinese on the Chinese pages"
    assert not cells_left, ("table cells with no Chinese (python book/_ext/claims.py extract, "
                            "then translate):\n" + "\n".join(cells_left))
    assert cells_shown > 50, f"only {cells_shown} table cells in Chinese on the Chinese pages"
    for where, left in (("in book/locales/zh_CN/claims", untranslated),
                        ("on the Chinese pages", on_page)):
        assert not left["claim"], (f"claims with no Chinese {where} (python book/_ext/claims.py "
                                   "extract, then translate):\n" + "\n".join(left["claim"]))
        assert len(left["measured"]) <= 0.02 * shown, (
            f"measured values with no Chinese {where}:\n" + "\n".join(left["measured"]))
    for rel in english:
        assert 'class="lf-claim" lang="zh-CN"' not in (html_dir / rel).read_text(
            encoding="utf-8"), f"{rel}: a Chinese claim on an English page"


def test_english_pages_stay_english(html_dir: Path) -> None:
    english, _ = editions(html_dir)
    for rel in english:
        page = read_page(html_dir / rel)
        assert page.lang == "en", rel
        chinese = [p for p in page.paragraphs if is_prose(p) and len(CJK.findall(p)) > 20]
        assert len(chinese) <= 2, f"{rel}: Chinese paragraphs in the English book: {chinese}"


def test_every_page_links_to_itself_in_the_other_edition(html_dir: Path) -> None:
    english, _ = editions(html_dir)
    problems = []
    for rel in english:
        for here, there in ((html_dir / rel, html_dir / ZH / rel),
                            (html_dir / ZH / rel, html_dir / rel)):
            links = read_page(here).switch
            if len(links) != 1:
                problems.append(f"{here.relative_to(html_dir)}: {len(links)} language links")
            elif (here.parent / links[0]).resolve() != there.resolve():
                problems.append(f"{here.relative_to(html_dir)}: the language link {links[0]} "
                                f"does not lead to {there.relative_to(html_dir)}")
    assert not problems, "\n".join(problems)


# ----------------------------------------------------------------------------------- browser

_FONT_JS = """
() => { const p = document.querySelector('.bd-article p:not(.lf-language-switch)');
        return p ? getComputedStyle(p).fontFamily : ''; }
"""


_SWITCH_JS = """
() => { const s = document.querySelector('.lf-language-switch a');
        const bar = document.querySelector('.bd-header-article');
        if (!s || !bar) return null;
        const r = s.getBoundingClientRect(), b = bar.getBoundingClientRect();
        const under = Array.from(document.querySelectorAll(
            '.bd-article p, .bd-article figure, .bd-article pre, .bd-article li'))
          .filter(e => !e.closest('.lf-language-switch') && !e.closest('.bd-header-article'))
          .map(e => e.getBoundingClientRect())
          .filter(e => e.width && r.left < e.right && e.left < r.right
                       && r.top < e.bottom && e.top < r.bottom && e.top >= b.bottom).length;
        return {visible: r.width > 0 && r.top >= 0 && r.bottom <= innerHeight,
                in_bar: r.top >= b.top && r.bottom <= b.bottom && r.left >= b.left
                        && r.right <= b.right, under: under}; }
"""


def test_the_language_switch_stays_in_reach_and_covers_no_text(html_dir: Path,
                                                                 server: str) -> None:
    """Chapter 3 in both editions, at 1280 and 400 px, scrolled to 12 places from top to
    bottom: at each the switch is in view, in the article's header bar (which stays at the
    top), and over no paragraph, figure, code block or list item of the chapter."""
    problems: list[str] = []
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        try:
            for edition in ("", f"{ZH}/"):
                page.goto(f"{server}/{edition}book/03_scaling.html", wait_until="load")
                for width in (1280, 400):
                    page.set_viewport_size({"width": width, "height": 900})
                    height = page.evaluate("() => document.documentElement.scrollHeight")
                    for k in range(12):
                        y = round(k * (height - 900) / 11)
                        page.evaluate(f"() => window.scrollTo(0, {y})")
                        page.wait_for_timeout(50)
                        got = page.evaluate(_SWITCH_JS)
                        where = f"{edition}book/03_scaling.html at {width} px, y = {y}"
                        if got is None:
                            problems.append(f"{where}: no language switch")
                        elif not (got["visible"] and got["in_bar"]) or got["under"]:
                            problems.append(f"{where}: {got}")
        finally:
            context.close()
    assert not problems, "\n".join(problems[:12])


def test_chinese_edition_in_chromium(html_dir: Path, server: str) -> None:
    """The switch both ways on every page (from mid-chapter, to the same section), a CJK font,
    no sideways scroll. (Chinese search: test_search_ranks_the_titled_chapter_first...)"""
    english, _ = editions(html_dir)
    installed = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True,
                               text=True).stdout
    problems: list[str] = []
    if not any(font in installed for font in CJK_FONTS):
        problems.append(f"no CJK font installed ({', '.join(CJK_FONTS)}): `make browser`")
    where = ["(none)"]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with chromium() as browser:
        context, page = _watched_context(browser, server, problems, where,
                                         viewport={"width": 1280, "height": 900})
        try:
            for rel in english:
                where[0] = rel
                try:
                    # The English page need only be parsed to follow its switch, and the way
                    # back only has to reach the right address: the Chinese page, measured,
                    # is the one load that must finish.
                    page.goto(f"{server}/{rel}", wait_until="domcontentloaded")
                    page.click(".lf-language-switch a")
                    page.wait_for_url(f"{server}/{ZH}/{rel}")
                    where[0] = f"{ZH}/{rel}"
                    fonts = page.evaluate(_FONT_JS)
                    if not any(font in fonts for font in CJK_FONTS):
                        problems.append(f"{ZH}/{rel}: text set in {fonts!r}, no CJK font")
                    width = page.evaluate("() => [document.documentElement.scrollWidth, "
                                          "document.documentElement.clientWidth]")
                    if width[0] > width[1] + 1:
                        problems.append(f"{ZH}/{rel}: at 1280 px the page scrolls sideways "
                                        f"({width[0]} px wide)")
                    if rel.endswith("02_self_attention.html"):
                        save_shot(page, SCREENSHOTS / "zh-chapter-1280.png")
                        # mid-chapter, the switch is in reach and keeps the reader's section
                        section = page.locator("section[id] section[id]").nth(2)
                        section.scroll_into_view_if_needed()
                        wanted = section.get_attribute("id")
                        page.click(".lf-language-switch a")
                        page.wait_for_url(f"{server}/{rel}#{wanted}", wait_until="commit")
                        continue
                    page.click(".lf-language-switch a")
                    page.wait_for_url(f"{server}/{rel}", wait_until="commit")
                except Exception as exc:  # noqa: BLE001 (report which page, go on)
                    problems.append(f"{where[0]}: the language switch: "
                                    f"{type(exc).__name__}: {exc}")
            # the attention explorers speak Chinese: controls, axes, title and kinds
            for rel in [r for r in english if "11_translator" in r]:
                where[0] = f"{ZH}/{rel}"
                page.goto(f"{server}/{ZH}/{rel}", wait_until="load")
                try:
                    page.wait_for_selector(".lf-explorer[data-lf-ready]", timeout=30_000)
                    shown = page.evaluate(
                        "() => Array.from(document.querySelectorAll('.lf-explorer')).map(e => "
                        "[e.getAttribute('aria-label'), ...Array.from(e.querySelectorAll("
                        "'.lf-explorer-control > span, .lf-explorer-control option, "
                        ".lf-explorer-view, .gtitle, .xtitle, .ytitle'), n => n.textContent)])")
                    english_words = [t for ex in shown for t in ex
                                     if t and re.search(r"[A-Za-z]{3,}", t)
                                     and not re.search(r"[\u4e00-\u9fff]", t)]
                    if english_words or not shown:
                        problems.append(f"{ZH}/{rel}: the explorer shows English: "
                                        f"{english_words[:6]}")
                except Exception as exc:  # noqa: BLE001
                    problems.append(f"{ZH}/{rel}: the explorer: {type(exc).__name__}: {exc}")
        finally:
            context.close()
    _report(problems, "in the Chinese edition")


@pytest.mark.parametrize("viewport", [{"width": 400, "height": 800}])
def test_chinese_glossary_and_a_phone_page_screenshots(html_dir: Path, server: str,
                                                       viewport: dict[str, int]) -> None:
    """Screenshots to look at: the Chinese glossary at 1280 px and a chapter on a phone."""
    problems: list[str] = []
    where = [f"{ZH}/book/glossary.html"]
    with chromium() as browser:
        context, page = _watched_context(browser, server, problems, where,
                                         viewport={"width": 1280, "height": 900})
        phone_context, phone = _watched_context(browser, server, problems, where,
                                                viewport=viewport, is_mobile=True,
                                                has_touch=True, device_scale_factor=2)
        try:
            page.goto(f"{server}/{ZH}/book/glossary.html", wait_until="load")
            save_shot(page, SCREENSHOTS / "zh-glossary-1280.png")
            where[0] = f"{ZH}/book/03_scaling.html"
            phone.goto(f"{server}/{ZH}/book/03_scaling.html", wait_until="load")
            save_shot(phone, SCREENSHOTS / "zh-phone.png")
            if not CJK.search(phone.inner_text("h1")):
                problems.append(f"{where[0]}: its title is not Chinese")
        finally:
            context.close()
            phone_context.close()
    _report(problems, "on the Chinese screenshots")


#: Searches and what they must find first: the page whose title holds the query (the one
#: the query fills most), and a snippet on every result that shows the query's text.
#: (edition, query, the first result's page, screenshot)
SEARCHES = [("zh/", "注意力", "book/02_self_attention.html", "zh-search.png"),
            ("zh/", "自注意力", "book/02_self_attention.html", "zh-search-self-attention.png"),
            ("", "attention", "book/02_self_attention.html", "search-attention.png")]


def test_search_ranks_the_titled_chapter_first_and_shows_the_query(
        html_dir: Path, server: str) -> None:
    """In each edition a search lists first the chapter whose title holds the query, and
    every result's snippet shows the query (in Chinese the whole query; in English a word
    of it), not the page title and an empty table of contents."""
    problems: list[str] = []
    where = ["(none)"]
    with chromium() as browser:
        context, page = _watched_context(browser, server, problems, where,
                                         viewport={"width": 1280, "height": 900})
        try:
            for edition, query, first, shot in SEARCHES:
                where[0] = f"{edition}search.html?q={query}"
                hits = search(page, f"{server}/{edition}search.html?q={query}")
                if not hits:
                    problems.append(f"{where[0]}: no result")
                    continue
                href, title, _ = hits[0]
                if href.split("#")[0] != first or query.lower() not in title.lower():
                    problems.append(f"{where[0]}: the first result is {href} ({title!r}), "
                                    f"not {first} whose title holds the query")
                # a page's own title, not the section's ("2. Self-attention > The idea")
                chapters = [t.split(" > ")[0] for h, t, _ in hits if "glossary" not in h]
                titled = [n for n, t in enumerate(chapters) if query.lower() in t.lower()]
                if titled != list(range(len(titled))):
                    problems.append(f"{where[0]}: a chapter whose title lacks the query ranks "
                                    f"above one whose title holds it: {chapters[:8]}")
                stem = query[:6].lower()  # "attention" is indexed as "attent"
                for h, title, snippet in hits:
                    # the query in the page's text, not only in its title shown again
                    text = snippet.strip()
                    for part in title.split(" > "):
                        heading = re.sub(r"^[\d.]+\s+", "", part).strip()
                        text = re.sub(r"^(\.\.\.)?\s*" + re.escape(heading), "", text)
                    if stem not in text.lower():
                        problems.append(f"{where[0]}: the snippet of {h} shows no {query!r} "
                                        f"beside the title: {snippet[:120]!r}")
                save_shot(page, SCREENSHOTS / shot)
        finally:
            context.close()
    _report(problems, "in search results")


FIGURE_BLOCK = re.compile(r"<figure\b.*?</figure>", re.S)
IMG_ALT = re.compile(r'<img [^>]*\balt="([^"]*)"')


def test_every_figure_on_a_chinese_page_has_chinese_alt_text(html_dir: Path) -> None:
    """A screen reader on a Chinese page reads each figure's description in Chinese: the
    alt text of every image in a figure (a plot's from book/locales/zh_CN/alt.json, a
    diagram's from its Chinese SVG)."""
    _, chinese = editions(html_dir)
    problems = []
    for rel in chinese:
        page = (html_dir / ZH / rel).read_text(encoding="utf-8")
        for block in FIGURE_BLOCK.findall(page):
            for alt in IMG_ALT.findall(block):
                if not CJK.search(html.unescape(alt)):
                    problems.append(f"{ZH}/{rel}: {html.unescape(alt)[:80]!r}")
    assert not problems, "\n".join(problems)
