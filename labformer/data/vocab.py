"""Token <-> id mapping with the special tokens every sequence model here relies on."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from labformer.special import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID

SPECIALS = SPECIAL_TOKENS


class Vocab:
    """Word vocabulary. Ids 0-3 are PAD, BOS, EOS, UNK; words follow by decreasing count."""

    pad_id, bos_id, eos_id, unk_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID
    pad, bos, eos, unk = SPECIALS

    def __init__(self, tokens: Sequence[str]) -> None:
        """``tokens``: the words, in id order, without the special tokens."""
        self.itos: list[str] = [*SPECIALS, *tokens]
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            dupes = sorted(t for t, n in Counter(self.itos).items() if n > 1)
            raise ValueError(f"duplicate or reserved tokens in vocabulary: {dupes}")

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], min_freq: int = 1) -> Vocab:
        """Vocabulary of the tokens seen at least ``min_freq`` times (ties: alphabetical)."""
        if min_freq < 1:
            raise ValueError(f"min_freq must be >= 1, got {min_freq}")
        counts = Counter(t for tokens in token_lists for t in tokens)
        for special in SPECIALS:  # never a word, even if a text contains "<unk>"
            counts.pop(special, None)
        kept = sorted((t for t, n in counts.items() if n >= min_freq),
                      key=lambda t: (-counts[t], t))
        return cls(kept)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: object) -> bool:
        return token in self.stoi

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    def __repr__(self) -> str:
        return f"Vocab(size={len(self)})"

    def special_ids(self) -> dict[str, int]:
        """PAD, BOS, EOS, UNK by name, as a model's config takes them: ``{"pad_id": 0, ...}``."""
        return {"pad_id": self.pad_id, "bos_id": self.bos_id, "eos_id": self.eos_id,
                "unk_id": self.unk_id}

    def token_to_id(self, token: str) -> int:
        """Id of ``token``, or UNK."""
        return self.stoi.get(token, self.unk_id)

    def id_to_token(self, index: int) -> str:
        """Token with id ``index`` (ValueError when out of range)."""
        if not 0 <= index < len(self.itos):
            raise ValueError(f"id {index} out of range for a vocabulary of {len(self)}")
        return self.itos[index]

    def encode(self, tokens: Sequence[str], add_bos: bool = False, add_eos: bool = True
               ) -> list[int]:
        """Ids of ``tokens`` (unknown words -> UNK), optionally framed by BOS / EOS."""
        ids = [self.stoi.get(t, self.unk_id) for t in tokens]
        return [self.bos_id] * add_bos + ids + [self.eos_id] * add_eos

    def decode(self, ids: Iterable[int], strip_special: bool = True) -> list[str]:
        """Tokens of ``ids`` up to the first EOS; PAD/BOS/EOS dropped if ``strip_special``.

        ``ids`` may be a list or a 1-D tensor; UNK is kept as ``"<unk>"``.
        """
        out: list[str] = []
        for index in ids:
            index = int(index)
            if index == self.eos_id:
                if not strip_special:
                    out.append(self.eos)
                break
            if strip_special and index in (self.pad_id, self.bos_id):
                continue
            out.append(self.id_to_token(index))
        return out

    def lookup_unknown(self, tokens: Iterable[str]) -> list[str]:
        """The tokens of ``tokens`` that are not in the vocabulary, in order."""
        return [t for t in tokens if t not in self.stoi]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data for a checkpoint; :meth:`from_dict` reads it back."""
        return {"specials": list(SPECIALS), "tokens": self.itos[len(SPECIALS):]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Vocab:
        """Rebuild a vocabulary saved by :meth:`to_dict`."""
        if not isinstance(data, dict) or "tokens" not in data:
            raise ValueError("expected a dict with a 'tokens' list, as written by to_dict()")
        specials = tuple(data.get("specials", SPECIALS))
        if specials != SPECIALS:
            raise ValueError(f"special tokens {specials} differ from this version's {SPECIALS}")
        return cls(list(data["tokens"]))
