"""Checks on the built HTML book (_build/html): hermetic offline, and sound in a real browser.

`make test` builds the book first. These tests never skip: a missing build, Playwright or
Chromium is a failure, because CI must not pass without having looked at the book.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import re
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
# Generated pages that are not chapters: no screenshot, no per-page checks (search: own check).
NOT_PAGES = {"genindex.html", "search.html", "index.html"}  # index.html only redirects
REMOTE = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)  # http://, https://, //
CSS_URL = re.compile(r"""url\(\s*['"]?([^'")\s]+)|@import\s+['"]([^'"]+)""", re.IGNORECASE)
MATHJAX_SCRIPT = re.compile(r'<script[^>]*\ssrc="[^"]*mathjax[^"]*\.js', re.IGNORECASE)
# Link relations that make the browser fetch something (as opposed to next/prev/search).
FETCHING_RELS = {"stylesheet", "preload", "modulepreload", "prefetch", "icon", "shortcut",
                 "apple-touch-icon", "manifest", "preconnect", "dns-prefetch", "mask-icon"}


@pytest.fixture(scope="module")
def html_dir() -> Path:
    """The built book; fail (do not skip) when it is missing."""
    if not (HTML / "index.html").is_file():
        pytest.fail(f"{HTML / 'index.html'} is missing: build the book first "
                    "(`make book`, or `jupyter-book build . -W -n --keep-going`).",
                    pytrace=False)
    return HTML


def book_pages(html_dir: Path) -> list[Path]:
    """The content pages: every built .html except Sphinx's generated and vendored files."""
    pages = [p for p in sorted(html_dir.rglob("*.html"))
             if p.relative_to(html_dir).parts[0] not in {"_static", "_sources", "_images"}
             and p.relative_to(html_dir).as_posix() not in NOT_PAGES]
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

class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (stdlib name)
        pass


@pytest.fixture(scope="module")
def server(html_dir: Path) -> Iterator[str]:
    """Serves _build/html on 127.0.0.1 at a free port; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(html_dir))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@contextlib.contextmanager
def chromium() -> Iterator[object]:
    """Debian's Chromium driven by Playwright; fail (do not skip) when either is missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        pytest.fail(f"Playwright's Python package is missing ({exc}): "
                    "`.venv/bin/pip install -r requirements.txt`.", pytrace=False)
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
  return out;
}
"""


def _screenshot_name(page: Path, html_dir: Path, all_pages: list[Path]) -> str:
    """`intro.png`, or the path joined with '__' when two pages share a stem."""
    if sum(p.stem == page.stem for p in all_pages) == 1:
        return page.stem + ".png"
    return "__".join(page.relative_to(html_dir).with_suffix("").parts) + ".png"


def test_book_renders_offline_in_chromium(html_dir: Path, server: str) -> None:
    """Every page: maths typeset, images load, no cell errors, no console errors, no network."""
    pages = book_pages(html_dir)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    # Playwright runs inside the test and is closed before pytest reports: a failure report
    # written while its greenlet is alive can crash pytest's traceback formatting (3.11.7).
    with chromium() as browser:
        _check_pages(browser, html_dir, server, pages, problems)
    if problems:
        pytest.fail(f"{len(problems)} problem(s) in the built book:\n" + "\n".join(problems),
                    pytrace=False)


def _check_pages(browser, html_dir: Path, server: str, pages: list[Path],
                 problems: list[str]) -> None:
    """Opens each page and the search page; appends what is wrong to `problems`."""
    local_host = urlsplit(server).netloc

    context = browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
    context.set_default_timeout(20_000)

    def route(r) -> None:
        url = r.request.url
        if urlsplit(url).netloc == local_host or url.startswith(("data:", "blob:")):
            r.continue_()
        else:
            problems.append(f"{current}: request to a remote host blocked: {url}")
            r.abort()

    context.route("**/*", route)
    current = "(none)"
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
                # What a reader sees first, then the first figure in view. (Full-page shots of
                # long pages come out shifted in headless Chromium, so none are taken.)
                name = _screenshot_name(path, html_dir, pages)
                page.screenshot(path=str(SCREENSHOTS / name))
                figure = page.locator("img[src*='_images/']")
                if figure.count():
                    figure.first.scroll_into_view_if_needed()
                    page.screenshot(path=str(SCREENSHOTS / name.replace(".png", ".figure.png")))
            except Exception as exc:  # noqa: BLE001 (a timeout on one page: report it)
                problems.append(f"{rel}: {type(exc).__name__}: {exc}")

        # The search page runs on the local search index: a common word must find pages.
        current = "search.html"
        page.goto(f"{server}/search.html?q=attention", wait_until="load")
        try:
            page.wait_for_selector("#search-results ul.search li", timeout=10_000)
        except Exception:  # noqa: BLE001 (Playwright's TimeoutError; report, don't crash)
            problems.append("search.html: searching for 'attention' found no page")
    finally:
        context.close()
