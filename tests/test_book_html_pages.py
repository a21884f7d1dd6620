"""The built book in Chromium, page by page: the attention explorers (drawn, hover, selectors)
and every page at 400 px on a phone and in dark mode. Split from tests/test_book_html.py (whose
helpers it uses) so that the two slowest browser walks run on different test workers.
Like it, these tests never skip: a missing build or Chromium is a failure."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_book_html import (
    _DARK_FILTERS_JS,
    _WIDEST_JS,
    MOBILE,
    SCREENSHOTS,
    _report,
    _screenshot_name,
    _watched_context,
    book_pages,
    chromium,
    tap_a_figure,
)


def explorer_pages(html_dir: Path) -> list[Path]:
    """Pages holding an attention explorer (labformer.plot.attention_explorer)."""
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
                    "(labformer.plot.attention_explorer)", pytrace=False)
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
                            page.screenshot(path=str(SCREENSHOTS / "explorer-hover.png"))
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
                                page.screenshot(path=str(SCREENSHOTS / "explorer-selected.png"))
                        shot = True
                except Exception as exc:  # noqa: BLE001 (report which page, go on)
                    problems.append(f"{rel}: {type(exc).__name__}: {exc}")
        finally:
            context.close()
    _report(problems, "with the attention explorers")


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


def test_pages_fit_a_phone_keep_figures_on_the_page_and_read_in_dark_mode(
        html_dir: Path, server: str) -> None:
    """At 400 px no page scrolls sideways, and a tap on a figure keeps the reader on the page
    (one load per page on the phone for both); in dark mode figures sit unfiltered on white
    and every claim reads at 4.5:1 contrast or more."""
    pages = book_pages(html_dir)
    problems: list[str] = []
    where = ["(none)"]
    shots = {"tap": False}
    for sub in ("mobile", "dark"):
        (SCREENSHOTS / sub).mkdir(parents=True, exist_ok=True)
    with chromium() as browser:
        mobile, phone = _watched_context(browser, server, problems, where, viewport=MOBILE,
                                         device_scale_factor=2, is_mobile=True,
                                         has_touch=True)
        dark, night = _watched_context(browser, server, problems, where,
                                       viewport={"width": 1280, "height": 900},
                                       color_scheme="dark")
        try:
            for path in pages:
                rel = where[0] = path.relative_to(html_dir).as_posix()
                name = _screenshot_name(path, html_dir, pages)
                try:
                    phone.goto(f"{server}/{rel}", wait_until="load")
                    phone.wait_for_timeout(300)  # MathJax and the explorers lay out
                    width = phone.evaluate(_WIDEST_JS)
                    if width["scroll"] > width["client"] + 1:
                        problems.append(f"{rel}: at {MOBILE['width']} px the page scrolls "
                                        f"sideways ({width['scroll']} px wide); widest: "
                                        f"{', '.join(width['wide']) or '?'}")
                    phone.screenshot(path=str(SCREENSHOTS / "mobile" / name))
                    try:
                        tap_a_figure(phone, rel, problems, shots)
                    except Exception as exc:  # noqa: BLE001 (report, go on to dark mode)
                        problems.append(f"{rel}: a tap on a figure: {type(exc).__name__}: {exc}")
                    night.goto(f"{server}/{rel}", wait_until="load")
                    theme = night.evaluate("document.documentElement.dataset.theme")
                    if theme != "dark":
                        problems.append(f"{rel}: a reader who prefers dark mode gets {theme!r}")
                    for text in night.evaluate(_DARK_FILTERS_JS):
                        problems.append(f"{rel}: in dark mode a figure is dimmed or on grey: "
                                        f"{text}")
                    worst = night.evaluate(_EVIDENCE_CONTRAST_JS)
                    if worst["ratio"] < 4.5:
                        problems.append(f"{rel}: in dark mode a claim reads at "
                                        f"{worst['ratio']:.1f}:1 contrast (under 4.5:1): "
                                        f"{worst['text']!r}")
                    figure = night.locator(".bd-content div.cell_output img")
                    if figure.count():
                        figure.first.scroll_into_view_if_needed()
                    night.screenshot(path=str(SCREENSHOTS / "dark" / name))
                except Exception as exc:  # noqa: BLE001 (report which page, go on)
                    problems.append(f"{rel}: {type(exc).__name__}: {exc}")
        finally:
            mobile.close()
            dark.close()
    _report(problems, "on a phone (width, figure taps) or in dark mode")
