"""Byte-level byte-pair encoding (Sennrich et al. 2016; byte-level as in GPT-2), standard library
only.

The base vocabulary is the 256 byte values, so every Unicode text has an encoding (its UTF-8
bytes) and ``decode(encode(text)) == text`` always, for words never seen included. Training
repeats one step: count every pair of adjacent tokens in the training text, and merge the most
frequent pair into a new token (id 256, 257, ...). Ties go to the smallest pair of ids,
``(a, b) < (c, d)`` as tuples, so training is deterministic and a tie can be broken by hand.
Training stops at ``vocab_size`` tokens, or earlier when no pair occurs twice.

Pairs are counted inside chunks only, never across them: the text is first cut into runs of
letters, of digits, of other symbols, each with the one space before it (``" lower"``), and
runs of spaces. So a merge never glues the end of one word to the next.

Encoding a chunk repeats: among its adjacent pairs, take the one merged earliest in training
(the lowest rank) and merge all its occurrences, until no pair of the chunk was ever merged.
That reproduces how training cut its own text; applying the merges in another order does not.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

__all__ = ["BPE", "split_chunks"]

# One space (optional), then a run of letters, of digits, or of other non-space symbols; or a
# run of whitespace (all but its last character when a chunk follows: that one goes with it).
# Every character is whitespace, a letter, a digit, "_" or one of [^\s\w], so the chunks
# always join back into the text.
_CHUNK = re.compile(r" ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+")


def split_chunks(text: str) -> list[str]:
    """The chunks BPE counts pairs in: ``"low lower, 42"`` -> ``["low", " lower", ",", " 42"]``."""
    return _CHUNK.findall(text)


def _merge(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every occurrence of ``pair`` in ``ids`` by ``new_id``, left to right."""
    out: list[int] = []
    i = 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


class BPE:
    """A byte-level BPE tokenizer: ``BPE.train(texts, vocab_size)``, then encode and decode.

    ``merges[i]`` is the pair of ids (a, b) merged into token ``256 + i``, in merge order;
    ``BPE(merges)`` rebuilds the tokenizer from that list alone.
    """

    def __init__(self, merges: Iterable[tuple[int, int]] = ()) -> None:
        self.merges: list[tuple[int, int]] = []
        self.vocab: dict[int, bytes] = {i: bytes([i]) for i in range(256)}  # id -> its bytes
        self.ranks: dict[tuple[int, int], int] = {}  # pair -> its new id (= 256 + rank)
        for a, b in merges:
            new_id = len(self.vocab)
            if a not in self.vocab or b not in self.vocab or (a, b) in self.ranks:
                raise ValueError(f"merge {len(self.merges)} ({a}, {b}) refers to an unknown id "
                                 "or repeats an earlier merge")
            self.merges.append((a, b))
            self.ranks[(a, b)] = new_id
            self.vocab[new_id] = self.vocab[a] + self.vocab[b]
        self._cache: dict[str, list[int]] = {}

    def __len__(self) -> int:
        """The vocabulary size: 256 bytes plus one token per merge."""
        return len(self.vocab)

    @classmethod
    def train(cls, texts: str | Iterable[str], vocab_size: int) -> BPE:
        """Learn ``vocab_size - 256`` merges (fewer if no pair occurs twice) from ``texts``
        (one string or several; pairs never span two texts)."""
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 256:
            raise ValueError(f"vocab_size must be an int >= 256 (the byte tokens), got "
                             f"{vocab_size!r}")
        if isinstance(texts, str):
            texts = [texts]
        words: Counter[str] = Counter()  # chunk -> how often it occurs
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"BPE trains on str texts, got {type(text).__name__}")
            words.update(split_chunks(text))
        # Each distinct chunk as ids, with its count: pairs are counted once per distinct chunk.
        pieces = [(list(word.encode("utf-8")), n) for word, n in words.items()]
        merges: list[tuple[int, int]] = []
        for new_id in range(256, vocab_size):
            counts: Counter[tuple[int, int]] = Counter()
            for ids, n in pieces:
                for pair in zip(ids, ids[1:], strict=False):
                    counts[pair] += n
            if not counts:
                break
            # Most frequent; ties: the smallest pair of ids.
            best, n_best = min(counts.items(), key=lambda item: (-item[1], item[0]))
            if n_best < 2:
                break
            merges.append(best)
            pieces = [(_merge(ids, best, new_id) if len(ids) > 1 else ids, n)
                      for ids, n in pieces]
        return cls(merges)

    def _encode_chunk(self, chunk: str) -> list[int]:
        ids = list(chunk.encode("utf-8"))
        while len(ids) > 1:
            # The pair of this chunk merged earliest in training; none left: done.
            pair = min(zip(ids, ids[1:], strict=False),
                       key=lambda p: self.ranks.get(p, len(self.vocab)))
            if pair not in self.ranks:
                break
            ids = _merge(ids, pair, self.ranks[pair])
        return ids

    def encode(self, text: str) -> list[int]:
        """text -> token ids, merges applied in merge order (by rank) inside each chunk."""
        if not isinstance(text, str):
            raise TypeError(f"encode takes a str, got {type(text).__name__}")
        out: list[int] = []
        for chunk in split_chunks(text):
            ids = self._cache.get(chunk)
            if ids is None:
                ids = self._cache[chunk] = self._encode_chunk(chunk)
            out.extend(ids)
        return out

    def decode(self, ids: Sequence[int] | Iterable[int]) -> str:
        """token ids -> text: the tokens' bytes joined and read as UTF-8 (a sequence cut inside
        a character shows U+FFFD there)."""
        chunks = []
        for i in ids:
            piece = self.vocab.get(int(i)) if not isinstance(i, bool) else None
            if piece is None:
                raise ValueError(f"token id {i!r} is not in the vocabulary [0, {len(self)})")
            chunks.append(piece)
        return b"".join(chunks).decode("utf-8", errors="replace")

    def pieces(self, text: str) -> list[str]:
        """The tokens of ``text`` as strings (bytes read as UTF-8; a token holding part of a
        character shows as U+FFFD), e.g. ``["low", "er"]``, to show a segmentation."""
        return [self.vocab[i].decode("utf-8", errors="replace") for i in self.encode(text)]
