"""nbval on the chapters: `pytest --nbval-lax book` runs every cell and every claim's assert.

The chapters are stored without outputs (the git filter strips them, so that a learner's run
leaves git clean), so strict `--nbval`, which compares each cell's output with the stored one,
would compare nothing and pass as `--nbval-lax` does while seeming stricter. It is refused with
a sentence that says what to run instead.
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "nbval", False):
        raise pytest.UsageError(
            "the chapters are stored without outputs, so strict --nbval has nothing to compare "
            "and would check no more than --nbval-lax: run `pytest --nbval-lax book` (every "
            "cell runs and every claim's assert is checked), or `make test-notebooks`")
