"""Shared helpers for the command line's tests (tests/cli): run it in-process, read a refusal."""

from __future__ import annotations

from labformer.app.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """The CLI in-process: (exit status, stdout, stderr)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


def assert_short_error(code: int, err: str, *words: str, status: int = 1) -> None:
    """A refusal: the exit status, at most two lines, no traceback, the words it must say."""
    assert code == status, err
    assert 1 <= len(lines(err)) <= 2, err
    assert "Traceback" not in err and "[Errno" not in err and "weights_only" not in err, err
    for word in words:
        assert word in err, (word, err)
