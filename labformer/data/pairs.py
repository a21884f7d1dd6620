"""Reading and writing tab-separated sentence-pair files (Tatoeba / Anki export formats).

The layouts users have, and the columns to read (0-based here, 1-based on the command line):

- ``source<TAB>target``: columns 0 and 1, the default (``labformer corpus`` writes it).
- The Anki / manythings.org ``fra.txt``: ``English<TAB>French<TAB>attribution``; for
  French -> English read columns 1 and 0 (``--reverse``).
- A Tatoeba pairs export: ``id<TAB>text<TAB>id<TAB>text``; read columns 1 and 3
  (``--src-col 2 --tgt-col 4``).
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from labformer.data.text import SentencePair

__all__ = ["PairLine", "dedupe_pairs", "guess_language", "is_header", "load_pairs", "pair_key",
           "read_pairs", "save_pairs"]

# Column titles a header line holds ("French<TAB>English", "source<TAB>target"), lower-case.
HEADER_WORDS = frozenset(
    "source target src tgt text sentence translation original fr en fra eng french english "
    "français francais anglais german deutsch spanish español italian de es it".split())
# The first bytes of files that are not text: a zip archive (a PyTorch / labformer
# checkpoint), gzip, a PyTorch legacy pickle.
_BINARY_MAGIC = {b"PK\x03\x04": "a zip archive (a PyTorch or labformer checkpoint?)",
                 b"\x1f\x8b": "a gzip archive", b"\x80\x02": "a Python pickle"}


class PairLine(NamedTuple):
    """One pair of a file, with the 1-based line it came from (for error messages)."""

    line: int
    src: str
    tgt: str


def is_header(src: str, tgt: str) -> bool:
    """Whether a first line's two columns are titles (``French<TAB>English``), not a pair."""
    return all(side.strip().lower() in HEADER_WORDS for side in (src, tgt))


def read_pairs(path: str | os.PathLike[str], src_col: int = 0, tgt_col: int = 1,
               notes: list[str] | None = None) -> list[PairLine]:
    """Sentence pairs, with their line numbers, from a UTF-8 file of tab-separated columns.

    Extra columns (an attribution, say) are ignored and blank lines skipped. A line with too
    few columns or an empty side raises ``ValueError`` naming the file and 1-based line; so
    does a column that holds only numbers (the ids of a Tatoeba export, read as sentences),
    and a binary file (a checkpoint given by mistake). A first line of column titles
    (``French<TAB>English``) is skipped, with a note appended to ``notes``.
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
    for magic, what in _BINARY_MAGIC.items():
        if raw.startswith(magic):
            raise ValueError(f"{path} is {what}, not a text file of sentence pairs")
    lines: list[str] = []
    utf16 = raw.startswith((b"\xff\xfe", b"\xfe\xff"))  # a byte-order mark: UTF-16
    if utf16:
        try:
            lines = raw.decode("utf-16").splitlines()
        except UnicodeDecodeError as err:
            raise ValueError(f"{path}: starts as UTF-16 (a byte-order mark) but is not valid "
                             f"UTF-16 ({err.reason} at byte {err.start})") from None
        if notes is not None:
            notes.append(f"{path}: read as UTF-16 (its byte-order mark says so)")
    elif b"\x00" in raw[:4096]:
        raise ValueError(f"{path} is a binary file, not a text file of sentence pairs")
    pairs: list[PairLine] = []
    needed = max(src_col, tgt_col) + 1
    for number, line_bytes in enumerate([] if utf16 else raw.splitlines(), start=1):
        try:
            lines.append(line_bytes.decode("utf-8"))
        except UnicodeDecodeError as err:
            raise ValueError(f"{path}:{number}: not valid UTF-8 ({err.reason} at byte "
                             f"{err.start})") from None
    for number, line in enumerate(lines, start=1):
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
        if not pairs and is_header(src, tgt):
            if notes is not None:
                notes.append(f"{path}:{number}: skipped a header line "
                             f"({src!r}, {tgt!r} are column titles, not a pair)")
            continue
        pairs.append(PairLine(number, src, tgt))
    for col, side in ((src_col, "source"), (tgt_col, "target")):
        texts = [p.src if side == "source" else p.tgt for p in pairs]
        if texts and all(t.isdigit() for t in texts):
            raise ValueError(f"{path}: the {side} column (column {col + 1}) holds numbers, not "
                             f"sentences; a Tatoeba export is id<TAB>text<TAB>id<TAB>text: "
                             f"read columns 2 and 4")
    return pairs


# Apostrophes and quotation marks of every kind, read as the ASCII ones.
_QUOTES = str.maketrans({c: "'" for c in "\u2019\u2018\u02bc\u2032\u00b4`"}
                        | {c: '"' for c in "\u201c\u201d\u201e\u00ab\u00bb\u2033"})
_SPACE_AROUND = re.compile(r"\s*([^\w\s])\s*")  # the spacing around punctuation varies


def pair_key(src: str, tgt: str) -> tuple[str, str]:
    """What two near-identical pairs share: NFC, apostrophes and quotes made ASCII, case
    folded, white space around punctuation dropped and runs of it made one space."""
    def key(text: str) -> str:
        text = unicodedata.normalize("NFC", text).translate(_QUOTES).casefold()
        return _SPACE_AROUND.sub(r"\1", " ".join(text.split()))

    return key(src), key(tgt)


def dedupe_pairs(pairs: Sequence[PairLine]) -> tuple[list[PairLine], int]:
    """The pairs without repeats (the first of each kept, in order), and how many went.

    Near-repeats count as repeats (:func:`pair_key`): an NFD accent, a typographic
    apostrophe, another case or other spacing do not make a pair new.
    """
    seen: set[tuple[str, str]] = set()
    kept = []
    for p in pairs:
        key = pair_key(p.src, p.tgt)
        if key not in seen:
            seen.add(key)
            kept.append(p)
    return kept, len(pairs) - len(kept)


def load_pairs(path: str | os.PathLike[str], src_col: int = 0, tgt_col: int = 1
               ) -> list[SentencePair]:
    """Sentence pairs ``(src, tgt)`` of a tab-separated file (see :func:`read_pairs`)."""
    return [(p.src, p.tgt) for p in read_pairs(path, src_col, tgt_col)]


def save_pairs(pairs: Iterable[tuple[str, str]], path: str | os.PathLike[str]) -> None:
    """Write pairs as ``src<TAB>tgt`` lines (UTF-8), the format :func:`load_pairs` reads."""
    lines = []
    for row, (src, tgt) in enumerate(pairs):
        if any(c in s for s in (src, tgt) for c in "\t\n\r"):
            raise ValueError(f"pair {row} contains a tab or a line break: {(src, tgt)!r}")
        lines.append(f"{src}\t{tgt}\n")
    Path(path).write_text("".join(lines), encoding="utf-8")


# Frequent short words of each language, none shared by both (a cheap guard, not a detector).
_MARKERS = {
    "fr": frozenset("le la les un une des du de et est je tu il elle nous vous ils sont "
                    "pas ne suis c' j' l' d' qu' n' au aux ce cette mon ma mes pour dans "
                    "avec sur qui que".split()),
    "en": frozenset("the and is are i you he she we they not am it's i'm don't "
                    "this that my your of to with for in at what who".split()),
}
_WORD = re.compile(r"\w+'?")


def guess_language(sentences: Sequence[str], min_hits: int = 20) -> str | None:
    """"fr" or "en" when ``sentences`` clearly read as French or English, else None.

    Counts frequent function words of each language; a language wins with at least
    ``min_hits`` hits and three times the other's. Used to catch swapped columns.
    """
    hits = dict.fromkeys(_MARKERS, 0)
    for sentence in sentences:
        for word in _WORD.findall(sentence.lower().replace("\u2019", "'")):
            for lang, markers in _MARKERS.items():
                hits[lang] += word in markers
    (best, n), (_, m) = sorted(hits.items(), key=lambda kv: -kv[1])
    return best if n >= min_hits and n >= 3 * m else None
