"""The table of contents opens from the visible ☰ button, on a phone and on a laptop.

The themes attach their handlers to the first ``.primary-toggle`` of a page, a hidden button in
the page header; the one a reader sees sits in the article header (labformer.js forwards it).
"""

from __future__ import annotations

from pathlib import Path

from test_book_html import chromium

PAGE = "book/07_transformer.html"

#: The visible ☰ button: the first .primary-toggle with a size on screen.
_TAP_VISIBLE = """() => {
  const b = [...document.querySelectorAll('.primary-toggle')]
    .find(e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; });
  if (!b) return false;
  b.click();
  return true;
}"""
_DRAWER_OPEN = "() => !!document.querySelector('#pst-primary-sidebar-modal[open]')"
_SIDEBAR_SHOWN = """() => { const s = document.querySelector('#pst-primary-sidebar');
  return !!s && !s.classList.contains('pst-sidebar-hidden')
    && s.getBoundingClientRect().width > 0; }"""


def _tap(page) -> None:
    assert page.evaluate(_TAP_VISIBLE), "no visible ☰ (.primary-toggle) button on the page"
    page.wait_for_timeout(300)


def test_the_menu_button_opens_the_contents_on_a_phone_and_a_laptop(html_dir: Path,
                                                                    server: str) -> None:
    with chromium() as browser:
        for edition in ("", "zh/"):
            url = f"{server}/{edition}{PAGE}"
            phone = browser.new_page(viewport={"width": 390, "height": 844}, has_touch=True)
            phone.goto(url, wait_until="load")
            assert not phone.evaluate(_DRAWER_OPEN)
            _tap(phone)
            assert phone.evaluate(_DRAWER_OPEN), f"☰ opened no drawer at 390 px: {url}"
            links = phone.locator("#pst-primary-sidebar-modal a.reference").count()
            assert links >= 15, f"the drawer lists {links} links, not the chapters: {url}"
            phone.keyboard.press("Escape")
            phone.wait_for_timeout(300)
            assert not phone.evaluate(_DRAWER_OPEN), f"Escape left the drawer open: {url}"
            phone.close()

            laptop = browser.new_page(viewport={"width": 1366, "height": 800})
            laptop.goto(url, wait_until="load")
            shown = laptop.evaluate(_SIDEBAR_SHOWN)
            _tap(laptop)
            assert laptop.evaluate(_SIDEBAR_SHOWN) != shown, \
                f"☰ did not show or hide the contents at 1366 px: {url}"
            _tap(laptop)
            assert laptop.evaluate(_SIDEBAR_SHOWN) == shown, \
                f"a second ☰ did not undo the first at 1366 px: {url}"
            laptop.close()
