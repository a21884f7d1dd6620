"""Running text for a language model: the shipped Shakespeare, held-out splits, characters.

* :func:`shakespeare_path` / :func:`shakespeare`: eight plays of Shakespeare, 1.04 MB of
  public-domain English shipped with the package (``shakespeare.md`` says where they come
  from); nothing is downloaded.
* :func:`plays`: that text cut into its plays, in order; :func:`shakespeare_split` holds out
  the last play (*The Tempest*, 9.5 % of the text) as validation text.
* :func:`split_text`: any text cut into training and validation text by contiguous blocks of
  whole lines, never by random lines: a line drawn at random would leave its neighbours, and
  the verse and the speeches that run across it, on the training side.
* :class:`CharTokenizer`: one token per character of a text, for a character-level model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path

__all__ = ["PLAYS", "shakespeare_path", "shakespeare", "plays", "shakespeare_split",
           "split_text", "CharTokenizer"]

#: The plays of ``shakespeare.txt``, in the order they appear (roughly the order written).
PLAYS = ("ROMEO AND JULIET", "A MIDSUMMER NIGHT'S DREAM", "JULIUS CAESAR",
         "HAMLET, PRINCE OF DENMARK", "OTHELLO, THE MOOR OF VENICE", "THE TRAGEDY OF KING LEAR",
         "MACBETH", "THE TEMPEST")
_BYLINE = "by William Shakespeare"  # the second line of every play's opening


def shakespeare_path() -> Path:
    """Where the shipped ``shakespeare.txt`` is (inside the installed package)."""
    return Path(str(resources.files("labformer.data").joinpath("shakespeare.txt")))


def shakespeare() -> str:
    """The shipped text: eight plays, each opening with its title, separated by blank lines."""
    return shakespeare_path().read_text(encoding="utf-8")


def plays(text: str | None = None) -> list[tuple[str, str]]:
    """(title, text) of each play of ``text`` (default: :func:`shakespeare`), in order. A play
    starts at its title line, the line two above "by William Shakespeare"; the texts joined
    give ``text`` back."""
    text = shakespeare() if text is None else text
    lines = text.splitlines(keepends=True)
    starts = [i - 2 for i, line in enumerate(lines) if line.rstrip("\n") == _BYLINE and i >= 2]
    if not starts:
        raise ValueError("no play found: the text has no 'by William Shakespeare' line")
    starts[0] = 0  # anything before the first title belongs to the first play
    bounds = [*starts, len(lines)]
    return [(lines[a].strip(), "".join(lines[a:b])) for a, b in zip(bounds, bounds[1:],
                                                                      strict=False)]


def shakespeare_split(valid_plays: Sequence[str] = ("THE TEMPEST",)) -> tuple[str, str]:
    """(training text, validation text) of the shipped plays, split by play: the plays named
    in ``valid_plays`` (default the last, *The Tempest*) are the validation text."""
    parts = plays()
    unknown = set(valid_plays) - {title for title, _ in parts}
    if unknown:
        raise ValueError(f"no play {sorted(unknown)!r}: the plays are {', '.join(PLAYS)}")
    train = "".join(t for title, t in parts if title not in valid_plays)
    valid = "".join(t for title, t in parts if title in valid_plays)
    return train, valid


def split_text(text: str, valid_fraction: float = 0.1, blocks: int = 1) -> tuple[str, str]:
    """(training text, validation text): ``text`` cut at line ends into ``blocks`` contiguous
    parts of about equal length, the last ``valid_fraction`` of each part (whole lines, at
    least one) held out. ``blocks=1`` (the default) holds out the end of the text, as nanoGPT
    does. Every line goes to exactly one side, in its place; a text of one line is cut inside
    it, so that both sides hold something."""
    if not 0.0 < valid_fraction < 1.0:
        raise ValueError(f"valid_fraction must be in (0, 1), got {valid_fraction}")
    if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 1:
        raise ValueError(f"blocks must be an int >= 1, got {blocks!r}")
    if len(text) < 2:
        raise ValueError(f"a text of {len(text)} character(s) cannot be split")
    lines = text.splitlines(keepends=True)
    if len(lines) < 2 * blocks:  # too few lines: cut by characters instead
        cut = min(len(text) - 1, max(1, round(len(text) * (1.0 - valid_fraction))))
        return text[:cut], text[cut:]
    ends = [0]
    total, done = len(text), 0
    for i, line in enumerate(lines):  # block boundaries at the line ends nearest k/blocks
        done += len(line)
        if len(ends) < blocks and done >= total * len(ends) / blocks and i + 1 < len(lines):
            ends.append(i + 1)
    ends.append(len(lines))
    train: list[str] = []
    valid: list[str] = []
    for a, b in zip(ends, ends[1:], strict=False):
        part = lines[a:b]
        size = sum(map(len, part))
        held, k = 0, len(part)
        while k > 1 and (held < valid_fraction * size or k == len(part)):
            k -= 1
            held += len(part[k])
        train += part[:k]
        valid += part[k:]
    return "".join(train), "".join(valid)


class CharTokenizer:
    """One token per distinct character of a text: ids 0..V-1 in the order of the characters'
    code points (so the same alphabet gives the same ids)."""

    def __init__(self, chars: Iterable[str]) -> None:
        self.chars: list[str] = sorted(set(chars))
        if not self.chars or any(len(c) != 1 for c in self.chars):
            raise ValueError("a CharTokenizer needs one or more single characters")
        self.ids = {c: i for i, c in enumerate(self.chars)}

    @classmethod
    def train(cls, text: str) -> CharTokenizer:
        """The characters of ``text``."""
        return cls(text)

    def __len__(self) -> int:
        return len(self.chars)

    def unknown(self, text: str) -> list[str]:
        """The characters of ``text`` that have no token, in order of first appearance."""
        return list(dict.fromkeys(c for c in text if c not in self.ids))

    def encode(self, text: str) -> list[int]:
        """text -> ids; a ValueError names the characters that have no token."""
        missing = self.unknown(text)
        if missing:
            shown = " ".join(repr(c) for c in missing[:10])
            raise ValueError(f"{len(missing)} character(s) not in the vocabulary: {shown}")
        return [self.ids[c] for c in text]

    def decode(self, ids: Iterable[int]) -> str:
        """ids -> text."""
        out = []
        for i in ids:
            if not 0 <= int(i) < len(self.chars):
                raise ValueError(f"token id {int(i)} is outside [0, {len(self)})")
            out.append(self.chars[int(i)])
        return "".join(out)
