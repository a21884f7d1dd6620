"""The diagrams in the built book (_build/html and _build/html/zh): each is a numbered figure
with the class ``lf-diagram``, alt text and a caption, drawn as SVG with labels in its edition's
language, and large enough to read at 1280 px and on a 400 px phone.

`make book` builds both editions first. Like tests/book/test_book_html.py these tests never skip: a
missing build, Playwright or Chromium is a failure. Screenshots of every diagram land in
_build/screenshots/diagrams/ (en-1280, zh-1280, en-400, zh-400, each also in dark mode:
en-1280-dark and so on).
"""

from __future__ import annotations

import contextlib
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_book_html import _LAID_OUT_JS, SCREENSHOTS, chromium, save_shot

from labformer.book.diagrams import MIN_FONT

#: Chapters and the diagrams each must hold (at least), by figure name.
DIAGRAMS = {
    "book/01_seq2seq_attention.html": ["fig-ch1-bottleneck"],
    "book/02_self_attention.html": ["fig-ch2-qkv", "fig-ch2-walk", "fig-ch2-matrix"],
    "book/03_scaling.html": ["fig-ch3-scaling"],
    "book/04_multi_head.html": ["fig-ch4-heads"],
    "book/05_positional_encoding.html": ["fig-ch5-clocks", "fig-ch5-rows"],
    "book/06_residual_norm.html": ["fig-ch6-blocks"],
    "book/07_transformer.html": ["fig-ch7-stack", "fig-ch7-ffn"],
    "book/08_decoder_masks.html": ["fig-ch8-masks", "fig-ch8-forcing"],
    "book/09_loss.html": ["fig-ch9-word"],
    "book/10_beam_search.html": ["fig-ch10-beam-step"],
    "book/11_translator.html": ["fig-ch11-pipeline"],
    "book/12_own_pairs.html": ["fig-ch12-carry"],
    "book/13_ablations.html": ["fig-ch13-ablations"],
    "book/14_recipe_baseline.html": ["fig-14-steps"],
    "book/15_language_model.html": ["fig-ch15-layers", "fig-ch15-block"],
}
ZH = "zh"
CJK = re.compile(r"[\u4e00-\u9fff]")
SVG = "{http://www.w3.org/2000/svg}"
#: The smallest text a reader gets on a 1x screen, in CSS px.
READABLE_PX = 11
SHOTS = SCREENSHOTS / "diagrams"


@dataclass
class Figure:
    name: str
    classes: list[str]
    images: list[tuple[str, str]] = field(default_factory=list)  # (src, alt)
    caption: str = ""


class _Figures(HTMLParser):
    """Every <figure> of a page: its id, classes, images and caption text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.figures: list[Figure] = []
        self._open: Figure | None = None
        self._in_caption = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "figure":
            self._open = Figure(a.get("id", ""), a.get("class", "").split())
            self.figures.append(self._open)
        elif self._open is not None and tag == "img":
            self._open.images.append((a.get("src", ""), a.get("alt", "")))
        elif self._open is not None and tag == "figcaption":
            self._in_caption = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "figcaption":
            self._in_caption = False
        elif tag == "figure":
            self._open = None

    def handle_data(self, data: str) -> None:
        if self._open is not None and self._in_caption:
            self._open.caption += data


def words(text: str) -> int:
    """Words of English, or of Chinese counted as two characters a word."""
    return len(CJK.sub(" ", text).split()) + len(CJK.findall(text)) // 2


def figures(page: Path) -> dict[str, Figure]:
    parser = _Figures()
    parser.feed(page.read_text(encoding="utf-8"))
    return {f.name: f for f in parser.figures}


def diagrams(html_dir: Path, edition: str = "") -> list[tuple[str, Figure, Path]]:
    """(page, figure, the SVG file it shows) for every diagram of an edition."""
    out = []
    root = html_dir / edition if edition else html_dir
    for rel in DIAGRAMS:
        for fig in figures(root / rel).values():
            if "lf-diagram" in fig.classes:
                src = fig.images[0][0] if fig.images else ""
                out.append((rel, fig, (root / rel).parent / src))
    return out


@pytest.mark.parametrize("edition", ["", ZH])
def test_every_chapter_has_its_diagrams_as_numbered_figures(html_dir: Path,
                                                            edition: str) -> None:
    problems = []
    root = html_dir / edition if edition else html_dir
    for rel, names in DIAGRAMS.items():
        found = figures(root / rel)
        for name in names:
            fig = found.get(name)
            if fig is None:
                problems.append(f"{edition}/{rel}: no figure {name}")
                continue
            if "lf-diagram" not in fig.classes:
                problems.append(f"{edition}/{rel}: {name} lacks the class lf-diagram")
            if len(fig.images) != 1 or not fig.images[0][0].endswith(".svg"):
                problems.append(f"{edition}/{rel}: {name} shows {fig.images}, not one SVG")
            elif words(fig.images[0][1]) < 8:
                problems.append(f"{edition}/{rel}: {name}: alt text {fig.images[0][1]!r} "
                                "does not say what the picture shows")
            number = re.match(r"\s*(Fig\.|图)\s*\d+(\.\d+)?", fig.caption)
            if number is None or len(fig.caption.split()) < 5 and not CJK.search(fig.caption):
                problems.append(f"{edition}/{rel}: {name}: caption {fig.caption[:60]!r} "
                                "is not numbered or is empty")
    assert not problems, "\n".join(problems)


def _texts(svg: Path) -> tuple[float, list[float], str]:
    root = ET.fromstring(svg.read_text(encoding="utf-8"))
    texts = list(root.iter(f"{SVG}text"))
    sizes = [float(t.get("font-size") or 0) for t in texts]
    return float(root.get("width") or 0), sizes, " ".join(t.text or "" for t in texts)


def test_each_edition_shows_its_own_labels(html_dir: Path) -> None:
    """English diagrams have no Chinese; each Chinese twin has Chinese labels and alt text."""
    english, chinese = diagrams(html_dir), diagrams(html_dir, ZH)
    assert len(english) == len(chinese) >= sum(len(v) for v in DIAGRAMS.values())
    problems = []
    for (rel, fig_en, svg_en), (_, fig_zh, svg_zh) in zip(english, chinese, strict=True):
        _, _, text_en = _texts(svg_en)
        _, _, text_zh = _texts(svg_zh)
        if CJK.search(text_en):
            problems.append(f"{rel}: {fig_en.name}: Chinese labels in the English diagram")
        if not CJK.search(text_zh):
            problems.append(f"zh/{rel}: {fig_zh.name}: no Chinese label in the diagram")
        if not CJK.search(fig_zh.images[0][1]):
            problems.append(f"zh/{rel}: {fig_zh.name}: alt text not in Chinese")
        if not CJK.search(fig_zh.caption):
            problems.append(f"zh/{rel}: {fig_zh.name}: caption not in Chinese")
    assert not problems, "\n".join(problems)


def test_diagram_text_is_large_enough_for_the_column(html_dir: Path) -> None:
    """At their own size every text is >= MIN_FONT px, and no diagram is wider than the
    content column at 1280 px (656 px at its narrowest), so none is shrunk there."""
    problems = []
    for rel, fig, svg in diagrams(html_dir) + diagrams(html_dir, ZH):
        width, sizes, _ = _texts(svg)
        if not sizes or min(sizes) < MIN_FONT:
            problems.append(f"{rel}: {fig.name}: text of {min(sizes, default=0)} px")
        if width > 656:
            problems.append(f"{rel}: {fig.name}: {width} px wide, wider than the column")
    assert not problems, "\n".join(problems)


_MEASURE_JS = """
(id) => { const f = document.getElementById(id); const img = f && f.querySelector('img');
          if (!img) return null; img.scrollIntoView();
          const r = img.getBoundingClientRect();
          const box = img.closest('.lf-figure-scroll');
          return {shown: r.width, natural: img.naturalWidth,
                  right: (box || img).getBoundingClientRect().right, pans: Boolean(box),
                  zoomable: img.classList.contains('lf-zoomable'),
                  viewport: document.documentElement.clientWidth,
                  scroll: document.documentElement.scrollWidth}; }
"""
_ZOOMED_JS = """
() => { const d = document.querySelector('dialog.lf-zoom[open] img');
        return d ? d.getBoundingClientRect().width : null; }
"""
#: The smallest text a reader gets on a 400 px phone, in CSS px (the diagram pans sideways).
PHONE_PX = 9


def test_diagrams_read_at_1280_and_on_a_phone(html_dir: Path, server: str) -> None:
    """In Chromium: at 1280 px (both editions) text shows at >= 11 px; at 400 px (both
    editions) at >= 9 px, the diagram panning sideways inside its own box while the page does
    not, and a tap opens it at full size. A screenshot of each diagram in each setting, in
    light and in dark mode (the diagram keeps its white ground there, unfiltered). Each page is
    loaded once: measured at 1280 px, then laid out again at 400 px."""
    problems: list[str] = []
    # (edition, [(label, width), ...]): the widths each page of the edition is measured at
    settings = [("", [("en-1280", 1280), ("en-400", 400)]),
                (ZH, [("zh-1280", 1280), ("zh-400", 400)])]
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        try:
            for edition, widths in settings:
                for label, _ in widths:
                    (SHOTS / label).mkdir(parents=True, exist_ok=True)
                    (SHOTS / f"{label}-dark").mkdir(parents=True, exist_ok=True)
                by_page: dict[str, list[tuple[Figure, Path]]] = {}
                for rel, fig, svg in diagrams(html_dir, edition):
                    by_page.setdefault(rel, []).append((fig, svg))
                for rel, figs in by_page.items():
                    page.set_viewport_size({"width": widths[0][1], "height": 900})
                    page.goto(f"{server}/{edition + '/' if edition else ''}{rel}",
                              wait_until="load")
                    # MathJax and the explorers draw after `load`: at the first width, before
                    # the page is laid out again at the next
                    page.wait_for_function(_LAID_OUT_JS)
                    for label, width in widths:
                        if width != page.viewport_size["width"]:
                            page.set_viewport_size({"width": width, "height": 900})
                            _settle(page)
                        for fig, svg in figs:
                            _measure(page, f"{label} {rel} {fig.name}", fig, svg, width,
                                     SHOTS / label, problems)
                        _dark_shots(page, f"{label} {rel}", [f for f, _ in figs],
                                    SHOTS / f"{label}-dark", problems)
        finally:
            context.close()
    assert not problems, "\n".join(problems)


# A diagram's image in dark mode: any CSS filter on it or its figure, and its own background
_DARK_LOOK_JS = """
(name) => { const fig = document.getElementById(name); const img = fig && fig.querySelector('img');
  if (!img) return null;
  const filters = [img, fig].map(e => getComputedStyle(e).filter).filter(f => f && f !== 'none');
  return {filters: filters, theme: document.documentElement.dataset.theme}; }
"""


def _dark_shots(page, where: str, figs: list[Figure], shots: Path,
                problems: list[str]) -> None:
    """The reader's preference turns dark: every diagram of the page, unfiltered, is
    screenshotted; then back to light."""
    page.emulate_media(color_scheme="dark")
    try:
        page.wait_for_function("() => document.documentElement.dataset.theme === 'dark'",
                               timeout=10_000)
        for fig in figs:
            look = page.evaluate(_DARK_LOOK_JS, fig.name)
            if look is None:
                problems.append(f"{where} {fig.name}: no image in dark mode")
                continue
            if look["filters"]:
                problems.append(f"{where} {fig.name}: filtered in dark mode: {look['filters']}")
            save_shot(page.locator(f"#{fig.name}"), shots / f"{fig.name}.png")
    except Exception as exc:  # noqa: BLE001 (Playwright's TimeoutError)
        problems.append(f"{where}: dark mode: {type(exc).__name__}: {exc}")
    finally:
        page.emulate_media(color_scheme="light")
        page.wait_for_function("() => document.documentElement.dataset.theme === 'light'",
                               timeout=10_000)


def _settle(page) -> None:
    """After a resize the explorers redraw at the new width once plotly's resize handler runs:
    wait (at most 10 s) until the page no longer scrolls sideways; what still does is
    reported by the measure."""
    with contextlib.suppress(Exception):  # Playwright's TimeoutError
        page.wait_for_function("() => document.documentElement.scrollWidth <= "
                               "document.documentElement.clientWidth + 1", timeout=10_000)


def _measure(page, where: str, fig: Figure, svg: Path, width: int, shots: Path,
             problems: list[str]) -> None:
    got = page.evaluate(_MEASURE_JS, fig.name)
    if got is None or not got["natural"]:
        problems.append(f"{where}: the image did not load")
        return
    if abs(got["viewport"] - width) > 20:  # a scroll bar may take some
        problems.append(f"{where}: laid out {got['viewport']} px wide, not {width}")
    scale = got["shown"] / got["natural"]
    smallest = min(_texts(svg)[1]) * scale
    if smallest < (READABLE_PX if width == 1280 else PHONE_PX) - 0.05:
        problems.append(f"{where}: text shows at {smallest:.1f} px")
    if got["right"] > got["viewport"] + 1 or got["scroll"] > got["viewport"] + 1:
        problems.append(f"{where}: sticks out of the screen ({got})")
    save_shot(page.locator(f"#{fig.name}"), shots / f"{fig.name}.png")
    if width < 1280:  # a tap opens it at its full size; Escape closes it
        if not got["pans"] or not got["zoomable"]:
            problems.append(f"{where}: does not pan in its box or open on a tap ({got})")
            return
        page.locator(f"#{fig.name} img").first.click()
        zoomed = page.evaluate(_ZOOMED_JS)
        if zoomed is None or abs(zoomed - got["natural"]) > 1:
            problems.append(f"{where}: a tap opened {zoomed} px, not {got['natural']} px")
        page.keyboard.press("Escape")


_OUTSIDE_JS = """
() => { const svg = document.querySelector('svg');
        const w = svg.width.baseVal.value, h = svg.height.baseVal.value;
        return Array.from(svg.querySelectorAll('text')).map(t => {
            const b = t.getBBox();
            return [t.textContent, b.x, b.y, b.x + b.width, b.y + b.height, w, h]; })
          .filter(([, x0, y0, x1, y1, w, h]) => x0 < -0.5 || y0 < -0.5 || x1 > w + 0.5
                                                || y1 > h + 0.5); }
"""


def test_no_drawn_text_lies_outside_its_picture(html_dir: Path, server: str) -> None:
    """Every text of every diagram, both editions, measured by Chromium in the SVG file the
    page shows (getBBox, in the picture's own px): none reaches past the picture's edges,
    where a page would cut it off."""
    problems = []
    with chromium() as browser:
        page = browser.new_page()
        for edition in ("", ZH):
            for rel, fig, svg in diagrams(html_dir, edition):
                page.goto(f"{server}/{svg.resolve().relative_to(html_dir.resolve())}")
                for text, x0, y0, x1, y1, w, h in page.evaluate(_OUTSIDE_JS):
                    problems.append(f"{edition or 'en'} {rel} {fig.name}: {text!r} spans x "
                                    f"{x0:.0f} to {x1:.0f}, y {y0:.0f} to {y1:.0f} in a "
                                    f"{w:.0f} x {h:.0f} picture")
    assert not problems, "\n".join(problems)
