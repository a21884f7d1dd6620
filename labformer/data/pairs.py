"""Reading and writing tab-separated sentence-pair files (Tatoeba / Anki export format)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from labformer.data.text import SentencePair


def load_pairs(path: str | os.PathLike[str], src_col: int = 0, tgt_col: int = 1
               ) -> list[SentencePair]:
    """Sentence pairs from a UTF-8 file with one tab-separated pair per line.

    Extra columns (an attribution, say) are ignored and blank lines skipped. A line with too
    few columns or an empty side raises ``ValueError`` naming the file and 1-based line.
    """
    if min(src_col, tgt_col) < 0 or src_col == tgt_col:
        raise ValueError(f"src_col and tgt_col must be distinct and >= 0, got {src_col}, "
                         f"{tgt_col}")
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"pairs file not found: {path}") from None
    except IsADirectoryError:
        raise IsADirectoryError(f"pairs path is a directory, not a file: {path}") from None
    pairs: list[tuple[str, str]] = []
    needed = max(src_col, tgt_col) + 1
    for number, line_bytes in enumerate(raw.splitlines(), start=1):
        try:
            line = line_bytes.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"{path}:{number}: not valid UTF-8 ({err.reason} at byte "
                             f"{err.start})") from None
        if number == 1:
            line = line.removeprefix("\ufeff")  # byte-order mark written by some editors
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) < needed:
            raise ValueError(f"{path}:{number}: expected at least {needed} tab-separated "
                             f"columns, found {len(cols)}: {line[:60]!r}")
        src, tgt = cols[src_col].strip(), cols[tgt_col].strip()
        if not src or not tgt:
            side = "source" if not src else "target"
            raise ValueError(f"{path}:{number}: empty {side} sentence: {line[:60]!r}")
        pairs.append((src, tgt))
    return pairs


def save_pairs(pairs: Iterable[tuple[str, str]], path: str | os.PathLike[str]) -> None:
    """Write pairs as ``src<TAB>tgt`` lines (UTF-8), the format :func:`load_pairs` reads."""
    lines = []
    for row, (src, tgt) in enumerate(pairs):
        if any(c in s for s in (src, tgt) for c in "\t\n\r"):
            raise ValueError(f"pair {row} contains a tab or a line break: {(src, tgt)!r}")
        lines.append(f"{src}\t{tgt}\n")
    Path(path).write_text("".join(lines), encoding="utf-8")
