"""The checked claims as a reader meets them in the built book: one folded line per check cell,
opened on demand, readable in both editions, in light and dark mode; a figure opened from a
phone. Writes the screenshots of _build/screenshots/evidence/ (folded and opened, English and
Chinese, light and dark; the zoom layer on a phone).
"""

from __future__ import annotations

from pathlib import Path

from test_book_html import SCREENSHOTS, _report, _watched_context, chromium, save_shot

#: A chapter with many check cells and figures, in each edition.
PAGES = {"en": "book/06_residual_norm.html", "zh": "zh/book/06_residual_norm.html"}

#: Every check cell on the page: whether it is folded, how tall its line is (in lines of its
#: own text), what its line says, and whether any claim shows while it is folded.
_FOLDED_JS = """() => Array.from(document.querySelectorAll('details.lf-evidence')).map(d => {
  const s = d.querySelector(':scope > summary');
  const line = parseFloat(getComputedStyle(s).lineHeight) || 24;
  // a closed <details> lays its content out unseen (content-visibility): ask what shows
  const shown = Array.from(d.querySelectorAll(':scope > ul li'))
    .filter(li => li.checkVisibility()).length;
  return {open: d.open, lines: s.getBoundingClientRect().height / line,
          text: s.textContent.trim(), shown: shown,
          claims: d.querySelectorAll(':scope > ul li').length};
})"""


def test_claims_fold_to_one_line_and_open_on_demand(html_dir: Path, server: str) -> None:
    """Each check cell shows one line, "✓ N checks hold: first claim", in the page's language;
    a click opens its N claims with their measured values, in light and in dark mode."""
    problems: list[str] = []
    where = ["(none)"]
    out = SCREENSHOTS / "evidence"
    out.mkdir(parents=True, exist_ok=True)
    with chromium() as browser:
        # each page loaded once: read in light, then with the reader's preference turned dark
        context, page = _watched_context(browser, server, problems, where,
                                         viewport={"width": 1280, "height": 900},
                                         color_scheme="light")
        try:
            for lang, rel in PAGES.items():
                where[0] = rel
                page.goto(f"{server}/{rel}", wait_until="load")
                for scheme in ("light", "dark"):
                    where[0] = f"{rel} ({scheme})"
                    page.emulate_media(color_scheme=scheme)
                    page.wait_for_function("s => document.documentElement.dataset.theme === s",
                                           arg=scheme, timeout=10_000)
                    cells = page.evaluate(_FOLDED_JS)
                    if len(cells) < 5:
                        problems.append(f"{where[0]}: {len(cells)} check cells, expected many")
                        continue
                    for n, cell in enumerate(cells):
                        head = f"{where[0]}: check cell {n + 1}"
                        if cell["open"] or cell["shown"]:
                            problems.append(f"{head} is not folded ({cell['shown']} claims "
                                            "show)")
                        if cell["lines"] > 1.6:
                            problems.append(f"{head}: its line takes {cell['lines']:.1f} lines")
                        count = str(cell["claims"])
                        words = ("项检查" if lang == "zh" else "check")
                        if count not in cell["text"] or words not in cell["text"]:
                            problems.append(f"{head} says {cell['text'][:60]!r}, not how many "
                                            f"of its {count} checks hold")
                    first = page.locator("details.lf-evidence").first
                    first.scroll_into_view_if_needed()
                    save_shot(page, out / f"{lang}-{scheme}-folded.png")
                    first.locator("summary").click()
                    opened = page.evaluate(_FOLDED_JS)[0]
                    if not opened["open"] or opened["shown"] != opened["claims"]:
                        problems.append(f"{where[0]}: a click showed {opened['shown']} of "
                                        f"{opened['claims']} claims")
                    save_shot(page, out / f"{lang}-{scheme}-opened.png")
                    first.locator("summary").click()  # folded again for the next scheme
        finally:
            context.close()
        # a figure on a phone: a tap opens the zoom layer with its caption and close button
        context, phone = _watched_context(browser, server, problems, where,
                                          viewport={"width": 400, "height": 800},
                                          device_scale_factor=2, is_mobile=True,
                                          has_touch=True)
        try:
            where[0] = "book/02_self_attention.html (phone)"
            phone.goto(f"{server}/book/02_self_attention.html", wait_until="load")
            figure = phone.locator("figure img.lf-zoomable").first
            figure.scroll_into_view_if_needed()
            figure.tap()
            layer = phone.locator("dialog.lf-zoom[open]")
            layer.wait_for(state="visible")
            if not layer.locator(".lf-zoom-close").is_visible():
                problems.append(f"{where[0]}: the zoom layer has no visible close button")
            if not layer.locator(".lf-zoom-caption").inner_text().strip():
                problems.append(f"{where[0]}: the zoom layer shows no caption")
            save_shot(phone, out / "phone-zoom.png")
            phone.keyboard.press("Escape")
            if phone.locator("dialog.lf-zoom[open]").count():
                problems.append(f"{where[0]}: Escape did not close the zoom layer")
        finally:
            context.close()
    _report(problems, "with the folded claims")
