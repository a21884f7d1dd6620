"""Test doubles: hand-written models with the decoding interface, for tests and teaching.

``from labformer.book.testing import PrefixTableModel``. Nothing in the package depends on this
module; it depends on torch only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from labformer.special import BOS_ID, EOS_ID, PAD_ID

__all__ = ["PrefixTableModel", "TableConfig"]


@dataclass(frozen=True)
class TableConfig:
    """The part of a model's configuration that decoding reads: sizes and special ids."""

    tgt_vocab_size: int  # ids 0 .. tgt_vocab_size - 1
    pad_id: int = PAD_ID  # padding, never generated
    bos_id: int = BOS_ID  # starts every output prefix, never generated
    eos_id: int = EOS_ID  # ends an output


class _PrefixCache:
    """The 'cache' of :class:`PrefixTableModel`: the tokens fed so far, (N, t)."""

    def __init__(self) -> None:
        self.tokens: Tensor | None = None
        self.offset = 0

    def reorder(self, index: Tensor) -> None:
        if self.tokens is not None:
            self.tokens = self.tokens.index_select(0, index)


class PrefixTableModel(nn.Module):
    """A hand-written 'language model' with the decoding interface, for teaching and tests.

    ``table`` maps an output prefix (a tuple of ids, BOS excluded) to {next id: probability};
    a prefix missing from the table ends the output (EOS gets probability 1). The source is
    ignored except for its batch size. ``config`` holds the special ids the decoders read.
    """

    def __init__(self, table: Mapping[tuple[int, ...], Mapping[int, float]], vocab_size: int,
                 bos_id: int = BOS_ID, eos_id: int = EOS_ID, pad_id: int = PAD_ID) -> None:
        super().__init__()
        for prefix, dist in table.items():
            if any(not 0 <= i < vocab_size for i in dist) or abs(sum(dist.values()) - 1) > 1e-6:
                raise ValueError(f"table[{prefix}] must be a distribution over ids < "
                                 f"{vocab_size}, got {dict(dist)}")
        self.table = {tuple(k): dict(v) for k, v in table.items()}
        self.config = TableConfig(vocab_size, pad_id=pad_id, bos_id=bos_id, eos_id=eos_id)
        self.vocab_size = vocab_size

    def encode(self, src: Tensor) -> Tensor:
        """src (B, S) -> a dummy memory (B, S, 1)."""
        return torch.zeros(*src.shape, 1)

    def src_mask(self, src: Tensor) -> Tensor:
        """src (B, S) -> (B, 1, 1, S), all True."""
        return torch.ones(src.shape[0], 1, 1, src.shape[1], dtype=torch.bool)

    def new_cache(self) -> _PrefixCache:
        """A cache that just remembers the prefix."""
        return _PrefixCache()

    def decode(self, tgt: Tensor, memory: Tensor, memory_mask: Tensor | None = None,
               cache: _PrefixCache | None = None) -> Tensor:
        """tgt (N, T) -> logits (N, T, V): log of the table's probabilities (-inf for 0)."""
        if cache is not None:
            tgt = tgt if cache.tokens is None else torch.cat([cache.tokens, tgt], dim=1)
            new = tgt.shape[1] - cache.offset
            cache.tokens, cache.offset = tgt, tgt.shape[1]
        else:
            new = tgt.shape[1]
        N, T = tgt.shape
        probs = torch.zeros(N, new, self.vocab_size)  # only the positions asked for
        rows = tgt.tolist()
        for n in range(N):
            for j, i in enumerate(range(T - new, T)):
                prefix = tuple(rows[n][1:i + 1])  # drop BOS
                for tok, p in self.table.get(prefix, {self.config.eos_id: 1.0}).items():
                    probs[n, j, tok] = p
        return probs.log()
