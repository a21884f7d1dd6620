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

#: The longest test files (seconds on 2 workers, `make test DURATIONS=0`), longest first.
#: `make test` hands whole files to its two workers in collection order (--dist loadfile), so
#: these go first and the many short files fill in after them: the two workers then finish
#: together instead of one waiting for the other's last long file.
LONGEST_FIRST = ["book/test_book_html.py", "notebooks/test_diagrams_html.py",
                 "book/test_lab.py", "book/test_book_editions.py",
                 "book/test_book_html_pages.py", "cli/test_live.py", "cli/test_ddp.py",
                 "book/test_book_build.py", "notebooks/test_robust.py",
                 "cli/test_cli.py", "cli/test_faults.py", "cli/test_hardening.py",
                 "book/test_navigation.py", "cli/test_cli_files.py"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files of LONGEST_FIRST first, in its order; the rest as collected."""
    tests = Path(__file__).resolve().parent
    gone = [name for name in LONGEST_FIRST if not (tests / name).is_file()]
    if gone:  # a renamed file would silently lose its place
        raise pytest.UsageError(f"tests/conftest.py LONGEST_FIRST names missing files: {gone}")
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def key(item: pytest.Item) -> int:
        try:
            rel = item.path.resolve().relative_to(tests).as_posix()
        except ValueError:  # a notebook under nbval, outside tests/
            return len(rank)
        return rank.get(rel, len(rank))

    items.sort(key=key)  # stable: the order within a file, and among the rest, is kept



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
