"""Shared test settings, and the built book (_build/html) served on 127.0.0.1 for the browser
tests (tests/book/test_book_html.py, tests/book/test_book_editions.py)."""

import functools
import http.server
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from hypothesis import settings

# Tests are grouped by what they test (library/, cli/, book/, notebooks/); the helpers they share
# live here in tests/ (on the path as this file's folder), the browser's in book/test_book_html.
sys.path.insert(0, str(Path(__file__).resolve().parent / "book"))

# In CI every property test draws the same examples on every run, so a result can be
# reproduced; locally hypothesis explores new examples each time.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """One intra-op thread: the test models are tiny, and on a busy machine threads spin."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


HTML = Path(__file__).resolve().parents[1] / "_build" / "html"


@pytest.fixture(scope="module")
def html_dir() -> Path:
    """The built book; fail (do not skip) when it is missing."""
    if not (HTML / "index.html").is_file():
        pytest.fail(f"{HTML / 'index.html'} is missing: build the book first "
                    "(`make book`, or `jupyter-book build . -W -n --keep-going`).",
                    pytrace=False)
    return HTML


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
