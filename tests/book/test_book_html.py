"""Checks on the built HTML book (_build/html): hermetic offline, and sound in a real browser.

`make test` builds the book first. These tests never skip: a missing build, Playwright or
Chromium is a failure, because CI must not pass without having looked at the book.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    # Nothing can leave 127.0.0.1: every other host name fails to resolve.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]
# Generated pages that are not chapters: no screenshot, no per-page checks (search: own check).
NOT_PAGES = {"genindex.html", "search.html", "index.html"}  # index.html only redirects
# Other editions of the book live in subfolders of the English one (zh/: the Chinese edition).
EDITIONS = {"zh"}
REMOTE = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)  # http://, https://, //
CSS_URL = re.compile(r"""url\(\s*['"]?([^'")\s]+)|@import\s+['"]([^'"]+)""", re.IGNORECASE)
MATHJAX_SCRIPT = re.compile(r'<script[^>]*\ssrc="[^"]*mathjax[^"]*\.js', re.IGNORECASE)
# Link relations that make the browser fetch something (as opposed to next/prev/search).
FETCHING_RELS = {"stylesheet", "preload", "modulepreload", "prefetch", "icon", "shortcut",
                 "apple-touch-icon", "manifest", "preconnect", "dns-prefetch", "mask-icon"}


def book_pages(html_dir: Path) -> list[Path]:
    """The content pages of both editions (English, and Chinese under zh/): every built .html
    except Sphinx's generated and vendored files."""

    def in_edition(page: Path) -> tuple[str, ...]:
        parts = page.relative_to(html_dir).parts
        return parts[1:] if parts[0] in EDITIONS else parts

    pages = [p for p in sorted(html_dir.rglob("*.html"))
             if in_edition(p)[0] not in {"_static", "_sources", "_images"}
             and "/".join(in_edition(p)) not in NOT_PAGES]
    assert pages, f"no content pages found under {html_dir}"
    return pages


# --------------------------------------------------------------------------- offline (static)

class _AssetCollector(HTMLParser):
    """Collects every URL the browser would fetch on its own: scripts, styles, fonts, images."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.urls: list[tuple[str, str]] = []  # (what, url)
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "script" and a.get("src"):
            self.urls.append(("<script src>", a["src"]))
        elif tag == "link" and FETCHING_RELS & set(a.get("rel", "").lower().split()):
            self.urls.append((f"<link rel={a.get('rel')}>", a.get("href", "")))
        elif tag in {"img", "source", "iframe", "embed", "video", "audio", "input", "track"}:
            for key in ("src", "poster"):
                if a.get(key):
                    self.urls.append((f"<{tag} {key}>", a[key]))
            for part in a.get("srcset", "").split(","):
                if part.strip():
                    self.urls.append((f"<{tag} srcset>", part.split()[0]))
        elif tag == "object" and a.get("data"):
            self.urls.append(("<object data>", a["data"]))
        if a.get("style"):
            self.urls += [("style attribute", u) for u in _css_urls(a["style"])]
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.urls += [("<style>", u) for u in _css_urls(data)]


def _css_urls(css: str) -> list[str]:
    """Every url(...) and @import target in a piece of CSS."""
    return [m.group(1) or m.group(2) for m in CSS_URL.finditer(css)]


def test_book_loads_nothing_from_the_network(html_dir: Path) -> None:
    """No page, and no stylesheet, points a script, style, font or image at a remote host."""
    remote: list[str] = []
    for page in sorted(html_dir.rglob("*.html")):
        collector = _AssetCollector()
        collector.feed(page.read_text(encoding="utf-8", errors="replace"))
        remote += [f"{page.relative_to(html_dir)}: {what} {url}"
                   for what, url in collector.urls if REMOTE.match(url)]
    for css in sorted(html_dir.rglob("*.css")):
        remote += [f"{css.relative_to(html_dir)}: url() {url}"
                   for url in _css_urls(css.read_text(encoding="utf-8", errors="replace"))
                   if REMOTE.match(url)]
    assert not remote, "remote assets in the built book:\n" + "\n".join(remote)


# --------------------------------------------------------------------------- browser

@contextlib.contextmanager
def chromium() -> Iterator[object]:
    """Debian's Chromium driven by Playwright; fail (do not skip) when either is missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        pytest.fail(f"Playwright's Python package is missing ({exc}): "
                    "`.venv/bin/pip install --no-deps -r requirements.lock`.", pytrace=False)
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"Chromium not found at {CHROMIUM}: run `make browser` "
                    "(apt-get install chromium) or set CHROMIUM=/path/to/chromium.",
                    pytrace=False)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


#: Screenshots are pictures for a person to look at, not checks: no test reads them. `make
#: screenshots` takes them (LABFORMER_SCREENSHOTS=1, into _build/screenshots/); `make test`
#: does not, which spares the browser tests about a third of their time.
SCREENSHOTS_ON = os.environ.get("LABFORMER_SCREENSHOTS") == "1"


def save_shot(target: Any, path: Path) -> None:
    """``target.screenshot`` (a page or a locator) into ``path``, when screenshots are on."""
    if SCREENSHOTS_ON:
        target.screenshot(path=str(path))


# Runs in the page once MathJax is done: what a reader would see broken.
_PAGE_REPORT_JS = """
() => {
  const out = {};
  const maths = Array.from(document.querySelectorAll('.math'));
  out.math_nodes = maths.length;
  out.mjx = document.querySelectorAll('mjx-container').length;
  out.untypeset = maths.filter(m => !m.querySelector('mjx-container'))
                       .map(m => m.textContent.trim().slice(0, 80));
  out.tex_errors = Array.from(document.querySelectorAll('mjx-merror'))
                        .map(e => e.textContent.slice(0, 80));
  const main = (document.querySelector('main') || document.body).cloneNode(true);
  main.querySelectorAll('pre, code, .highlight, .cell_input, script, style')
      .forEach(e => e.remove());
  out.raw_dollars = main.textContent.includes('$$');
  out.broken_images = Array.from(document.images)
      .filter(i => !(i.complete && i.naturalWidth > 0))
      .map(i => i.getAttribute('src'));
  // Cells tagged raises-exception show their error on purpose.
  const shown = sel => Array.from(document.querySelectorAll(sel))
      .filter(e => !e.closest('.tag_raises-exception'));
  out.error_outputs = shown('.output.error, .output.traceback, .cell_output .traceback')
      .map(e => e.textContent.trim().slice(0, 200));
  out.tracebacks = shown('.cell_output')
      .filter(e => e.textContent.includes('Traceback (most recent call last)'))
      .map(e => e.textContent.trim().slice(0, 200));
  out.stderr_errors = shown('.output.stderr')
      .filter(e => /Error\\b/.test(e.textContent))
      .map(e => e.textContent.trim().slice(0, 200));
  // Quiet outputs: no warnings, no "<Figure size ...>" text, no progress bars.
  const outputs = shown('.cell_output .output');
  out.warnings = outputs.filter(e => /\\bWarning\\b|warnings\\.warn/.test(e.textContent))
      .map(e => e.textContent.trim().slice(0, 200));
  out.figure_reprs = outputs.filter(e => /<Figure size \\d/.test(e.textContent))
      .map(e => e.textContent.trim().slice(0, 120));
  out.progress_bars = outputs.filter(e => /\\d+it\\/s\\]|s\\/it\\]|\\|[█▏▎▍▌▋▊▉ ]{5,}\\|/
      .test(e.textContent)).map(e => e.textContent.trim().slice(0, 120));
  // Figures: the scale they are shown at, against the size their PNG asks for (2x PNGs carry
  // it as a style width); below MIN_FIGURE_SCALE their text is smaller than the body text.
  out.figures = Array.from(document.querySelectorAll(
      '.bd-content div.cell_output img, .bd-content figure img'))
      .filter(i => i.naturalWidth > 0)
      .map(i => {
        const asked = parseFloat(i.style.width) || i.naturalWidth;
        return {src: i.getAttribute('src'), alt: i.getAttribute('alt') || '',
                scale: i.getBoundingClientRect().width / asked, asked: asked};
      });
  return out;
}
"""

# Code boxes whose lines are wider than the box (they would scroll sideways).
_OVERFLOWING_CODE_JS = """
() => Array.from(document.querySelectorAll('.bd-content div.cell_input pre'))
    .filter(p => p.scrollWidth > p.clientWidth + 1)
    .map(p => p.textContent.split('\\n').reduce((a, b) => b.length > a.length ? b : a, '')
                .slice(0, 100))
"""

# Below this display scale a figure's 12 pt text (16 px, the body text) drops under 13 px.
MIN_FIGURE_SCALE = 0.8
# What pages are opened on a phone, in the dark, and what they measure there.
MOBILE = {"width": 400, "height": 800}
_WIDEST_JS = """
() => {
  const W = document.documentElement.clientWidth;
  const clipped = e => { for (let a = e.parentElement; a; a = a.parentElement) {
      const o = getComputedStyle(a).overflowX; if (o === 'auto' || o === 'scroll' ||
      o === 'hidden') return a !== document.documentElement && a !== document.body; }
    return false; };
  const wide = Array.from(document.querySelectorAll('.bd-content *'))
      .filter(e => e.getBoundingClientRect().right > W + 1 && !clipped(e))
      .map(e => e.tagName.toLowerCase() + (e.className && typeof e.className === 'string'
           ? '.' + e.className.trim().split(/\\s+/).join('.') : ''));
  return {scroll: document.documentElement.scrollWidth, client: W, wide: wide.slice(0, 3)};
}
"""
# True once the page has laid out what moves its layout after `load`: MathJax has typeset every
# formula and every attention explorer has drawn.
_LAID_OUT_JS = """
() => Array.from(document.querySelectorAll('.math'))
        .every(m => m.querySelector('mjx-container') || !window.MathJax)
    && Array.from(document.querySelectorAll('.lf-explorer'))
        .every(e => e.hasAttribute('data-lf-ready'))
"""
_DARK_FILTERS_JS = """
() => Array.from(document.querySelectorAll(
        '.bd-content div.cell_output img, .bd-content figure img'))
    .filter(i => getComputedStyle(i).filter !== 'none'
                 || !/^rgb\\(255, 255, 255/.test(getComputedStyle(i).backgroundColor))
    .map(i => i.getAttribute('src') + ' filter=' + getComputedStyle(i).filter
              + ' background=' + getComputedStyle(i).backgroundColor)
"""


#: The page and figure of the "now against before" picture (a heatmap), and the size its
#: smallest text showed at before figures were held to MIN_TEXT_PX (6-7 px at 1x).
NOW_VS_BEFORE = ("book/02_self_attention.html", "img[alt*='heatmaps']", 6.5)
# Lays the figure out twice on a white panel over the page: as the book shows it, and scaled so
# that its smallest text shows at `before` px; returns the widths shown, or null.
_NOW_VS_BEFORE_JS = """
([selector, minPx, before]) => {
  const img = document.querySelector('.bd-content ' + selector);
  if (!img || !img.naturalWidth) return null;
  const now = img.getBoundingClientRect().width, asked = parseFloat(img.style.width) || now;
  const panel = document.createElement('div');
  panel.id = 'lf-now-vs-before';
  panel.style.cssText = 'position:fixed;left:0;top:0;z-index:9999;display:flex;gap:24px;' +
    'align-items:flex-start;padding:16px;background:#fff;color:#222;font:14px sans-serif';
  const cell = (width, label) => { const d = document.createElement('div');
    const i = img.cloneNode(); i.removeAttribute('style'); i.style.width = width + 'px';
    i.style.maxWidth = 'none'; i.loading = 'eager';
    const p = document.createElement('p'); p.textContent = label; p.style.margin = '0 0 8px';
    d.append(p, i); panel.append(d); return i; };
  const text = (minPx * now / asked).toFixed(1);
  cell(now, `now: ${Math.round(now)} px wide, smallest text ${text} px`);
  const old = asked * before / minPx;
  cell(old, `before: ${Math.round(old)} px wide, smallest text ${before} px`);
  document.body.append(panel);
  return {now: now, before: old, text: minPx * now / asked};
}
"""


#: The claims' text against the background it is drawn on: the lowest WCAG contrast ratio of
#: every claim and measured value on the page, with the text of the worst.
_EVIDENCE_CONTRAST_JS = """() => {
  const rgb = s => (s.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map(v => { v /= 255;
    return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); })
    .reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i], 0);
  const background = el => { for (; el; el = el.parentElement) {
      const c = rgb(getComputedStyle(el).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c.slice(0, 3); }
    return [255, 255, 255]; };
  let worst = {ratio: 99, text: ""};
  for (const el of document.querySelectorAll('.lf-evidence .lf-claim, .lf-evidence .lf-measured')) {
    const a = lum(rgb(getComputedStyle(el).color)), b = lum(background(el));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < worst.ratio) worst = {ratio, text: el.textContent.slice(0, 60)};
  }
  return worst;
}"""


def _screenshot_name(page: Path, html_dir: Path, all_pages: list[Path]) -> str:
    """`intro.png`, or the path joined with '__' when two pages share a stem."""
    if sum(p.stem == page.stem for p in all_pages) == 1:
        return page.stem + ".png"
    return "__".join(page.relative_to(html_dir).with_suffix("").parts) + ".png"


@pytest.fixture(scope="module")
def walk(html_dir: Path, server: str) -> dict[str, list[str]]:
    """One walk through every page of both editions, each loaded once, at 1280 px: what is wrong
    there ("render"), at 1024 px after a resize of the same page ("narrow": code width and
    solutions) and in dark mode after the reader's preference turns dark ("dark")."""
    pages = book_pages(html_dir)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    (SCREENSHOTS / "dark").mkdir(parents=True, exist_ok=True)
    found: dict[str, list[str]] = {"render": [], "narrow": [], "dark": []}
    # Playwright runs inside the fixture and is closed before pytest reports: a failure report
    # written while its greenlet is alive can crash pytest's traceback formatting (3.11.7).
    with chromium() as browser:
        _check_pages(browser, html_dir, server, pages, found)
        _dark_at_load(browser, server, found["dark"])
    return found


def test_book_renders_offline_in_chromium(walk: dict[str, list[str]]) -> None:
    """Every page: maths typeset, images load, no cell errors, no console errors, no network."""
    _report(walk["render"], "in the built book")


def test_pages_read_in_dark_mode(walk: dict[str, list[str]]) -> None:
    """In dark mode figures sit unfiltered on white and every claim reads at 4.5:1 contrast or
    more; a reader who prefers dark mode gets it from the first load."""
    _report(walk["dark"], "in dark mode")


def _check_pages(browser, html_dir: Path, server: str, pages: list[Path],
                 found: dict[str, list[str]]) -> None:
    """Opens each page and the search page; appends what is wrong to `found`'s lists."""
    local_host = urlsplit(server).netloc
    problems, narrow, dark = found["render"], found["narrow"], found["dark"]
    shots = {"solution": False}

    context = browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
    context.set_default_timeout(60_000)  # a busy 2-core machine is slow

    # Requests are watched, not routed: routing turns off the browser's cache, so every page
    # would fetch MathJax, plotly.js and the fonts again through the driver. The browser's
    # resolver rules (CHROMIUM_ARGS) make a remote request fail anyway; here it is reported.
    def request(r) -> None:
        url = r.url
        if urlsplit(url).netloc != local_host and not url.startswith(("data:", "blob:")):
            problems.append(f"{current}: request to a remote host blocked: {url}")

    current = "(none)"
    context.on("request", request)
    page = context.new_page()
    page.on("console", lambda m: m.type == "error"
            and problems.append(f"{current}: console error: {m.text}"))
    page.on("pageerror", lambda e: problems.append(f"{current}: uncaught exception: {e}"))
    page.on("response", lambda r: r.status >= 400
            and problems.append(f"{current}: HTTP {r.status} for {r.url}"))

    try:
        for path in pages:
            rel = path.relative_to(html_dir).as_posix()
            current = rel
            try:
                source = path.read_text(encoding="utf-8", errors="replace")
                page.set_viewport_size(WIDE)
                page.goto(f"{server}/{rel}", wait_until="load")
                if MATHJAX_SCRIPT.search(source):
                    # A predicate returning the promise itself would resolve to undefined: use !!.
                    page.wait_for_function(
                        "() => !!(window.MathJax && MathJax.startup && MathJax.startup.promise)")
                    page.evaluate("() => MathJax.startup.promise.then(() => true)")
                # Lazy images load only near the viewport: make them load now, then wait.
                page.evaluate("""() => Promise.all(Array.from(document.images).map(i => {
                    i.loading = 'eager';
                    return i.complete ? null : new Promise(r => { i.onload = i.onerror = r; });
                }))""")
                report = page.evaluate(_PAGE_REPORT_JS)
                for box in page.evaluate(_OVERFLOWING_CODE_JS):
                    problems.append(f"{rel}: at 1280 px a code box scrolls sideways: {box!r}")
                has_math = 'class="math' in source
                if has_math and not report["mjx"]:
                    problems.append(f"{rel}: has maths but MathJax typeset nothing")
                for text in report["untypeset"]:
                    problems.append(f"{rel}: maths left untypeset: {text!r}")
                for text in report["tex_errors"]:
                    problems.append(f"{rel}: TeX error: {text!r}")
                if report["raw_dollars"]:
                    problems.append(f"{rel}: raw $$ left in the visible text")
                for src in report["broken_images"]:
                    problems.append(f"{rel}: image did not load: {src}")
                for key in ("error_outputs", "tracebacks", "stderr_errors"):
                    for text in report[key]:
                        problems.append(f"{rel}: cell output shows an error ({key}): {text!r}")
                for key, what in (("warnings", "a warning"), ("figure_reprs", "<Figure> text"),
                                  ("progress_bars", "a progress bar")):
                    for text in report[key]:
                        problems.append(f"{rel}: cell output shows {what}: {text!r}")
                for fig in report["figures"]:
                    if fig["scale"] < MIN_FIGURE_SCALE:
                        problems.append(
                            f"{rel}: figure {fig['src']} is shown at {fig['scale']:.0%} of its "
                            f"size ({fig['asked']:.0f} px asked): its text is smaller than "
                            f"{MIN_FIGURE_SCALE:.0%} of the body text; make it at most "
                            "labformer.book.plot.FIGURE_WIDTH inches wide")
                    if not fig["alt"].strip() or re.search(r"[0-9a-f]{16}|_images/", fig["alt"]):
                        problems.append(f"{rel}: figure {fig['src']} has no meaningful alt "
                                        f"text ({fig['alt']!r})")
                # What a reader sees first, then the first figure in view. (Full-page shots of
                # long pages come out shifted in headless Chromium, so none are taken.)
                name = _screenshot_name(path, html_dir, pages)
                save_shot(page, SCREENSHOTS / name)
                figure = page.locator("img[src*='_images/']")
                if figure.count():
                    figure.first.scroll_into_view_if_needed()
                    save_shot(page, SCREENSHOTS / name.replace(".png", ".figure.png"))
                if rel == NOW_VS_BEFORE[0]:
                    _now_vs_before(page, rel, problems)
            except Exception as exc:  # noqa: BLE001 (a timeout on one page: report it)
                problems.append(f"{rel}: {type(exc).__name__}: {exc}")
                continue
            try:
                _in_the_dark(page, rel, name, dark)
            except Exception as exc:  # noqa: BLE001 (report which page, go on)
                dark.append(f"{rel}: {type(exc).__name__}: {exc}")
            try:
                page.set_viewport_size(NARROW)  # the same page, laid out again at 1024 px
                _code_and_solutions(page, rel, narrow, shots)
            except Exception as exc:  # noqa: BLE001 (report which page, go on)
                narrow.append(f"{rel}: {type(exc).__name__}: {exc}")

        # The search page runs on the local search index: a common word must find pages.
        # (Explorers, mobile and dark mode are checked by their own tests below.)
        current = "search.html"
        page.set_viewport_size(WIDE)
        page.goto(f"{server}/search.html?q=attention", wait_until="load")
        try:
            page.wait_for_selector("#search-results ul.search li", timeout=30_000)
            page.wait_for_function(  # results are added one by one until the summary appears
                "() => /found/i.test((document.querySelector('#search-results "
                "p.search-summary') || {}).textContent || '')", timeout=30_000)
            hits = page.eval_on_selector_all(
                "#search-results ul.search li > a",
                "links => links.map(a => a.getAttribute('href') || '')")
            glossary = [n for n, href in enumerate(hits) if "glossary" in href]
            chapters = [n for n, href in enumerate(hits) if "glossary" not in href]
            # A glossary entry ranks below the chapters that teach its term.
            if glossary and chapters and glossary[0] < chapters[-1]:
                problems.append(f"search.html: for 'attention' a glossary entry ranks above a "
                                f"chapter (hits in order: {hits[:12]})")
        except Exception:  # noqa: BLE001 (Playwright's TimeoutError; report, don't crash)
            problems.append("search.html: searching for 'attention' found no page")
    finally:
        context.close()


def search(page, url: str, timeout: float = 60_000) -> list[tuple[str, str, str]]:
    """Opens a search page (`url` ends in ?q=...) and waits for every result's snippet;
    returns (href, title, snippet) per result, best first."""
    page.goto(url, wait_until="load")
    page.wait_for_function(  # results are added one by one until the summary says how many
        "() => /\\d/.test((document.querySelector('#search-results "
        "p.search-summary') || {}).textContent || '')", timeout=timeout)
    # Snippets are fetched page by page after the list is shown: wait for them all.
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('#search-results ul.search li'))"
        ".every(li => li.querySelector('p.context'))", timeout=timeout)
    return [tuple(hit) for hit in page.eval_on_selector_all(
        "#search-results ul.search li",
        "items => items.map(li => [li.querySelector('a').getAttribute('href'), "
        "li.querySelector('a').textContent, "
        "(li.querySelector('p.context') || {}).textContent || ''])")]


def _now_vs_before(page, rel: str, problems: list[str]) -> None:
    """_build/screenshots/figure-1x-now-vs-before.png: a heatmap at 1280 px and 1x as the book
    shows it, beside the same figure at the scale that showed its smallest text at 6-7 px."""
    from labformer.book.notebook import MIN_TEXT_PX

    got = page.evaluate(_NOW_VS_BEFORE_JS, [NOW_VS_BEFORE[1], MIN_TEXT_PX, NOW_VS_BEFORE[2]])
    if got is None:
        problems.append(f"{rel}: no heatmap figure {NOW_VS_BEFORE[1]} for the 1x screenshot")
        return
    if got["text"] < MIN_TEXT_PX - 0.05:
        problems.append(f"{rel}: at 1280 px the heatmap's text shows at {got['text']:.1f} px")
    panel = page.locator("#lf-now-vs-before")
    page.wait_for_function("() => Array.from(document.querySelectorAll('#lf-now-vs-before img'))"
                           ".every(i => i.complete && i.naturalWidth > 0)")
    save_shot(panel, SCREENSHOTS / "figure-1x-now-vs-before.png")
    page.evaluate("() => document.getElementById('lf-now-vs-before').remove()")


# --------------------------------------------------------------------------- reader checks

def _watched_context(browser, server: str, problems: list[str], where: list[str], **options):
    """A browser context that reports remote requests, console errors and HTTP >= 400.

    Requests are watched, not intercepted (interception would pipe the 4.6 MB plotly.js
    through the driver); the browser's resolver rules make any remote request fail anyway.
    """
    local_host = urlsplit(server).netloc
    context = browser.new_context(service_workers="block", **options)
    context.set_default_timeout(60_000)

    def request(r) -> None:
        url = r.url
        if urlsplit(url).netloc != local_host and not url.startswith(("data:", "blob:")):
            problems.append(f"{where[0]}: request to a remote host: {url}")

    context.on("request", request)
    page = context.new_page()
    page.on("console", lambda m: m.type == "error"
            and problems.append(f"{where[0]}: console error: {m.text}"))
    page.on("pageerror", lambda e: problems.append(f"{where[0]}: uncaught exception: {e}"))
    page.on("response", lambda r: r.status >= 400
            and problems.append(f"{where[0]}: HTTP {r.status} for {r.url}"))
    return context, page


def _report(problems: list[str], what: str) -> None:
    if problems:
        pytest.fail(f"{len(problems)} problem(s) {what}:\n" + "\n".join(problems),
                    pytrace=False)


# --------------------------------------------------------------------------- reading

#: A chapter, loaded with an empty cache, may transfer at most this much (scripts, styles,
#: fonts, figures, the page itself).
MAX_PAGE_BYTES = 5 * 2**20


def test_code_fits_and_solutions_stay_closed(walk: dict[str, list[str]]) -> None:
    """At 1024 px no code box scrolls sideways; a solution's answer stays hidden until opened.
    (On a phone a tap on a figure keeps the reader on the page: checked in the phone walk of
    tests/book/test_book_html_pages.py, which loads every page at 400 px anyway.)"""
    _report(walk["narrow"], "with code width or solutions")


WIDE = {"width": 1280, "height": 900}
NARROW = {"width": 1024, "height": 800}


def _code_and_solutions(page, rel: str, problems: list[str], shots: dict[str, bool]) -> None:
    """At 1024 px (`page` has `rel` loaded) no code box scrolls sideways; each solution hides
    its answer behind its toggle, and a click opens it."""
    for box in page.evaluate(_OVERFLOWING_CODE_JS):
        problems.append(f"{rel}: at 1024 px a code box scrolls sideways: {box!r}")
    solutions = page.locator(".tag_solution")
    for n in range(solutions.count()):
        solution = solutions.nth(n)
        answer = solution.locator(".cell_output, .cell_input")
        if answer.count() and answer.first.is_visible():
            problems.append(f"{rel}: solution {n + 1} shows its code or answer before a click")
        toggle = solution.locator("summary")
        if not toggle.count():
            problems.append(f"{rel}: solution {n + 1} has no toggle")
            continue
        label = toggle.first.inner_text().strip()
        if label not in {"Show solution", "显示答案"}:
            problems.append(f"{rel}: solution {n + 1}'s toggle reads {label!r}")
        if n == 0 and not shots["solution"]:
            solution.scroll_into_view_if_needed()
            save_shot(page, SCREENSHOTS / "solution-closed.png")
        toggle.first.click()
        if answer.count() and not answer.last.is_visible():
            problems.append(f"{rel}: solution {n + 1} does not open")
        if n == 0 and not shots["solution"]:
            save_shot(page, SCREENSHOTS / "solution-open.png")
            shots["solution"] = True


def _in_the_dark(page, rel: str, name: str, problems: list[str]) -> None:
    """The reader's preference turns dark on the loaded page (the theme follows it): figures
    unfiltered on white, claims at 4.5:1 or more; a screenshot; then back to light."""
    page.emulate_media(color_scheme="dark")
    try:
        page.wait_for_function("() => document.documentElement.dataset.theme === 'dark'",
                               timeout=10_000)
    except Exception:  # noqa: BLE001 (Playwright's TimeoutError)
        theme = page.evaluate("document.documentElement.dataset.theme")
        problems.append(f"{rel}: a reader who turns to dark mode gets {theme!r}")
    for text in page.evaluate(_DARK_FILTERS_JS):
        problems.append(f"{rel}: in dark mode a figure is dimmed or on grey: {text}")
    worst = page.evaluate(_EVIDENCE_CONTRAST_JS)
    if worst["ratio"] < 4.5:
        problems.append(f"{rel}: in dark mode a claim reads at {worst['ratio']:.1f}:1 contrast "
                        f"(under 4.5:1): {worst['text']!r}")
    save_shot(page, SCREENSHOTS / "dark" / name)
    page.emulate_media(color_scheme="light")
    page.wait_for_function("() => document.documentElement.dataset.theme === 'light'",
                           timeout=10_000)


def _dark_at_load(browser, server: str, problems: list[str]) -> None:
    """A reader who prefers dark mode gets it on the first load, in each edition."""
    where = ["(none)"]
    context, page = _watched_context(browser, server, problems, where, viewport=WIDE,
                                     color_scheme="dark")
    try:
        for rel in ("book/intro.html", "zh/book/intro.html"):
            where[0] = rel
            page.goto(f"{server}/{rel}", wait_until="load")
            theme = page.evaluate("document.documentElement.dataset.theme")
            if theme != "dark":
                problems.append(f"{rel}: a reader who prefers dark mode gets {theme!r}")
    finally:
        context.close()


#: The smallest figure text a phone shows without a tap, in CSS px. A figure's text is drawn
#: at MIN_TEXT_PX or more at its own size (labformer.book.notebook, checked as each chapter runs);
#: shrunk to a 400 px screen it fell to 5-6 px, and a wide figure now pans instead.
PHONE_TEXT_PX = 9.0
# Every raster figure on the page (a 2x PNG with its size as a style width): its smallest text
# as shown (MIN_TEXT_PX times shown / own width); whether its box pans, and the hint under it.
_PHONE_FIGURES_JS = """
(minPx) => Array.from(document.querySelectorAll(
        '.bd-content div.cell_output img, .bd-content figure img'))
    .filter(i => i.naturalWidth > 0 && parseFloat(i.style.width) > 0)
    .map(i => { const pan = i.closest('.lf-figure-pan');
      const box = pan && pan.firstElementChild;
      return {src: i.getAttribute('src'), asked: parseFloat(i.style.width),
              shown: i.getBoundingClientRect().width,
              text: minPx * i.getBoundingClientRect().width / parseFloat(i.style.width),
              pans: !!box && box.scrollWidth > box.clientWidth + 1,
              hint: pan ? getComputedStyle(pan, '::after').content : ''}; })
"""


def figure_text_on_a_phone(phone, rel: str, problems: list[str]) -> None:
    """On a phone (`phone` has `rel` loaded) every raster figure's text shows at PHONE_TEXT_PX
    or more without a tap; a figure wider than the screen pans, with a hint that says so."""
    from labformer.book.notebook import MIN_TEXT_PX

    for fig in phone.evaluate(_PHONE_FIGURES_JS, MIN_TEXT_PX):
        if fig["text"] < PHONE_TEXT_PX - 0.05:
            problems.append(f"{rel}: on a phone figure {fig['src']} is shown {fig['shown']:.0f} "
                            f"px wide of its {fig['asked']:.0f}: its text falls to "
                            f"{fig['text']:.1f} px (under {PHONE_TEXT_PX:g} px)")
        if fig["pans"] and len(fig["hint"].strip('"')) < 5:
            problems.append(f"{rel}: figure {fig['src']} pans sideways with no hint under it")


def tap_a_figure(phone, rel: str, problems: list[str], shots: dict[str, bool]) -> None:
    """On a phone (`phone` has `rel` loaded) a tap on the page's first figure keeps the reader
    on the page; the first zoom layer has a close button and a caption, and Escape closes it."""
    figure_text_on_a_phone(phone, rel, problems)
    figure = phone.locator(".bd-content figure img, .bd-content div.cell_output img")
    if not figure.count():
        return
    before = phone.url
    figure.first.scroll_into_view_if_needed()
    zoomable = "lf-zoomable" in (figure.first.get_attribute("class") or "")
    figure.first.tap()  # returns once a navigation it started has been committed
    if zoomable and phone.url == before:
        phone.wait_for_selector("dialog.lf-zoom[open]", timeout=10_000)
    if phone.url != before:
        problems.append(f"{rel}: a tap on a figure left the page for {phone.url}")
    elif not shots["tap"] and phone.locator("dialog.lf-zoom").count():
        save_shot(phone, SCREENSHOTS / "mobile-figure-tap.png")
        shots["tap"] = True
        layer = phone.locator("dialog.lf-zoom")
        if not layer.locator("button.lf-zoom-close").count():
            problems.append(f"{rel}: the zoomed figure has no close button")
        if figure.first.evaluate("e => !!e.closest('figure')") and not (
                layer.locator(".lf-zoom-caption").count()):
            problems.append(f"{rel}: the zoomed figure has no caption")
        phone.keyboard.press("Escape")
        try:
            phone.wait_for_selector("dialog.lf-zoom", state="detached", timeout=5_000)
        except Exception:  # noqa: BLE001 (Playwright's TimeoutError)
            problems.append(f"{rel}: Escape does not close the zoomed figure")
    elif phone.locator("dialog.lf-zoom[open]").count():
        phone.keyboard.press("Escape")  # the next page's checks start with no layer open


def test_chapters_are_light_and_search_snippets_read_as_text(
        html_dir: Path, server: str) -> None:
    """Every chapter transfers under MAX_PAGE_BYTES cold; search snippets show no TeX source
    and a glossary hit shows its definition."""
    chapters = [p for p in book_pages(html_dir) if p.parent.name == "book"
                and re.match(r"\d\d_", p.name) and p.relative_to(html_dir).parts[0] == "book"]
    assert chapters, "no chapter pages"
    problems: list[str] = []
    where = ["(none)"]
    with chromium() as browser:
        for path in chapters:
            rel = where[0] = path.relative_to(html_dir).as_posix()
            context, page = _watched_context(browser, server, problems, where,
                                             viewport={"width": 1280, "height": 900})
            sizes: list[int] = []
            page.on("requestfinished",
                    lambda r, sizes=sizes: sizes.append(r.sizes()["responseBodySize"]))
            try:
                page.goto(f"{server}/{rel}", wait_until="networkidle")
                total = sum(sizes)
                if total > MAX_PAGE_BYTES:
                    problems.append(f"{rel}: {total / 2**20:.1f} MiB on a cold load "
                                    f"(at most {MAX_PAGE_BYTES / 2**20:.0f} MiB)")
            finally:
                context.close()
        where[0] = "search.html"
        context, page = _watched_context(browser, server, problems, where,
                                         viewport={"width": 1280, "height": 900})
        try:
            page.goto(f"{server}/search.html?q=scaled%20dot-product", wait_until="load")
            page.wait_for_function(
                "() => /found/i.test((document.querySelector('#search-results "
                "p.search-summary') || {}).textContent || '')", timeout=60_000)
            # Snippets are fetched page by page after the list is shown: wait for them all.
            page.wait_for_function(
                "() => Array.from(document.querySelectorAll('#search-results ul.search li'))"
                ".every(li => li.querySelector('p.context'))", timeout=60_000)
            snippets = page.eval_on_selector_all(
                "#search-results ul.search li",
                "items => items.map(li => [li.querySelector('a').getAttribute('href'), "
                "(li.querySelector('p.context') || {}).textContent || ''])")
            for href, text in snippets:
                if "\\(" in text or "\\)" in text:
                    problems.append(f"search: the snippet of {href} shows TeX: {text[:120]!r}")
                if "#term-" in href and len(text.split()) < 6:
                    problems.append(f"search: the glossary hit {href} shows no definition: "
                                    f"{text!r}")
            save_shot(page, SCREENSHOTS / "search.png")
        finally:
            context.close()
    _report(problems, "in page weight or search snippets")
