"""The built book in Chromium, page by page: the attention explorers (drawn, hover, selectors)
and every page at 400 px on a phone (width, figure text, figure taps). Split from
tests/book/test_book_html.py (whose helpers it uses; its 1280 px walk checks dark mode) so that the
two slowest browser walks run on different test workers.
Like it, these tests never skip: a missing build or Chromium is a failure."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_book_html import (
    _LAID_OUT_JS,
    _WIDEST_JS,
    MOBILE,
    SCREENSHOTS,
    _report,
    _screenshot_name,
    _watched_context,
    book_pages,
    chromium,
    save_shot,
    tap_a_figure,
)


def explorer_pages(html_dir: Path) -> list[Path]:
    """Pages holding an attention explorer (labformer.book.plot.attention_explorer)."""
    return [p for p in book_pages(html_dir)
            if 'class="lf-explorer"' in p.read_text(encoding="utf-8", errors="replace")]


# The heatmap's picture: plotly draws a heatmap as one <image> whose data URL holds the cells.
_HEATMAP_JS = """
root => { const i = root.querySelector('.heatmaplayer image');
          return i ? (i.getAttribute('href') || i.getAttribute('xlink:href') || '') : ''; }
"""


def test_attention_explorers_work_offline(html_dir: Path, server: str) -> None:
    """Each explorer draws, shows query, key and weight on hover, and redraws on a selector."""
    pages = explorer_pages(html_dir)
    if not pages:
        pytest.fail("no page of the book holds an attention explorer "
                    "(labformer.book.plot.attention_explorer)", pytrace=False)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    where = ["(none)"]
    shot = False
    with chromium() as browser:
        context, page = _watched_context(browser, server, problems, where,
                                         viewport={"width": 1280, "height": 900})
        try:
            for path in pages:
                rel = where[0] = path.relative_to(html_dir).as_posix()
                try:
                    page.goto(f"{server}/{rel}", wait_until="load")
                    explorers = page.locator(".lf-explorer")
                    count = explorers.count()
                    page.wait_for_function(
                        f"() => document.querySelectorAll('.lf-explorer[data-lf-ready] "
                        f".main-svg').length >= {count}")
                    for n in range(count):
                        ex = explorers.nth(n)
                        ex.scroll_into_view_if_needed()
                        grid = ex.locator(".nsewdrag").first
                        box = grid.bounding_box()
                        assert box, "the explorer drew no plot area"
                        page.mouse.move(box["x"] + box["width"] * 0.3,
                                        box["y"] + box["height"] * 0.3)
                        hover = ex.locator(".hoverlayer .hovertext")
                        hover.first.wait_for(state="attached", timeout=5_000)
                        text = hover.first.text_content() or ""
                        # in the page's language: query/key/weight, or 查询/键/权重
                        words = (("查询", "键", "权重") if rel.startswith("zh/")
                                 else ("query", "key", "weight"))
                        if not re.search(r"{} \d+: .+{} \d+: .+{} \d\.\d{{3}}".format(*words),
                                         text):
                            problems.append(f"{rel}: explorer {n}: hover shows {text!r}, "
                                            "not its query, key and weight")
                        if not shot:
                            save_shot(page, SCREENSHOTS / "explorer-hover.png")
                        before = ex.evaluate(_HEATMAP_JS)
                        selects = ex.locator("label.lf-explorer-control:not([hidden]) select")
                        if selects.count():
                            select = selects.first
                            select.select_option(index=1)
                            page.wait_for_function(
                                "([root, old]) => { const i = root.querySelector("
                                "'.heatmaplayer image'); return i && (i.getAttribute('href')"
                                " || '') !== old; }", arg=[ex.element_handle(), before],
                                timeout=5_000)
                            if not shot:
                                save_shot(page, SCREENSHOTS / "explorer-selected.png")
                        shot = True
                except Exception as exc:  # noqa: BLE001 (report which page, go on)
                    problems.append(f"{rel}: {type(exc).__name__}: {exc}")
        finally:
            context.close()
    _report(problems, "with the attention explorers")


def test_pages_fit_a_phone_and_keep_figures_on_the_page(html_dir: Path, server: str) -> None:
    """At 400 px no page scrolls sideways, every figure's text reads without a tap, and a tap on
    a figure keeps the reader on the page (one load per page on the phone). Dark mode is checked
    by tests/book/test_book_html.py's walk at 1280 px."""
    pages = book_pages(html_dir)
    problems: list[str] = []
    where = ["(none)"]
    shots = {"tap": False}
    (SCREENSHOTS / "mobile").mkdir(parents=True, exist_ok=True)
    with chromium() as browser:
        mobile, phone = _watched_context(browser, server, problems, where, viewport=MOBILE,
                                         device_scale_factor=2, is_mobile=True,
                                         has_touch=True)
        try:
            for path in pages:
                rel = where[0] = path.relative_to(html_dir).as_posix()
                name = _screenshot_name(path, html_dir, pages)
                try:
                    phone.goto(f"{server}/{rel}", wait_until="load")
                    phone.wait_for_function(_LAID_OUT_JS)  # MathJax and the explorers lay out
                    width = phone.evaluate(_WIDEST_JS)
                    if width["scroll"] > width["client"] + 1:
                        problems.append(f"{rel}: at {MOBILE['width']} px the page scrolls "
                                        f"sideways ({width['scroll']} px wide); widest: "
                                        f"{', '.join(width['wide']) or '?'}")
                    save_shot(phone, SCREENSHOTS / "mobile" / name)
                    tap_a_figure(phone, rel, problems, shots)
                except Exception as exc:  # noqa: BLE001 (report which page, go on)
                    problems.append(f"{rel}: {type(exc).__name__}: {exc}")
        finally:
            mobile.close()
    _report(problems, "on a phone (width, figure text, figure taps)")
