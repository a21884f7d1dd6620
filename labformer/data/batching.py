"""Padded tensor batches for teacher forcing, with length bucketing."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import NamedTuple

import torch

from labformer.data.text import SentencePair, tokenize
from labformer.data.vocab import Vocab
from labformer.special import BOS_ID, EOS_ID, PAD_ID

IdPair = tuple[list[int], list[int]]


class Batch(NamedTuple):
    """One batch. ``tgt_in`` = BOS + target, ``tgt_out`` = target + EOS; PAD fills."""

    src: torch.Tensor  # (B, S) long
    tgt_in: torch.Tensor  # (B, T) long, starts with BOS
    tgt_out: torch.Tensor  # (B, T) long, ends with EOS (before padding)
    # (B,) long, position of each row in the ``pairs_ids`` given (shadows tuple.index)
    index: torch.Tensor  # type: ignore[assignment]

    def to(self, device: torch.device | str) -> Batch:
        """The same batch on ``device``."""
        return Batch(*(t.to(device) for t in self))

    @property
    def num_tokens(self) -> int:
        """Number of real (non-PAD) target tokens, the denominator of a per-token loss."""
        return int((self.tgt_out != PAD_ID).sum())


def pad_sequences(seqs: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> torch.Tensor:
    """Stack id lists into a (B, max_len) long tensor, right-padded with ``pad_id``."""
    if not seqs:
        raise ValueError("pad_sequences needs at least one sequence")
    out = torch.full((len(seqs), max(len(s) for s in seqs)), pad_id, dtype=torch.long)
    for row, seq in enumerate(seqs):
        out[row, :len(seq)] = torch.as_tensor(seq, dtype=torch.long)
    return out


def encode_pairs(pairs: Sequence[SentencePair], src_vocab: Vocab, tgt_vocab: Vocab
                 ) -> list[IdPair]:
    """Tokenise and encode sentence pairs; both sides end with EOS."""
    return [(src_vocab.encode(tokenize(s)), tgt_vocab.encode(tokenize(t))) for s, t in pairs]


def build_vocabs(pairs: Sequence[SentencePair], min_freq: int = 1) -> tuple[Vocab, Vocab]:
    """Source and target vocabularies of tokenised sentence pairs."""
    return (Vocab.build((tokenize(s) for s, _ in pairs), min_freq),
            Vocab.build((tokenize(t) for _, t in pairs), min_freq))


def _teacher_forcing(tgt: Sequence[int], row: int) -> tuple[list[int], list[int]]:
    """(tgt_in, tgt_out) of one target: BOS y1..yn and y1..yn EOS."""
    tgt = list(tgt)
    if tgt and tgt[0] == BOS_ID:  # encoded with add_bos=True: drop it, we add our own
        tgt = tgt[1:]
    if not tgt or tgt[-1] != EOS_ID:
        raise ValueError(f"target {row} must end with EOS ({EOS_ID}), got {tgt}")
    return [BOS_ID, *tgt[:-1]], tgt


def make_batches(pairs_ids: Sequence[IdPair], batch_size: int, shuffle: bool = True,
                 seed: int = 0, *, sort_window: int = 50) -> list[Batch]:
    """Cut encoded (src, tgt) pairs into padded batches, similar lengths together.

    Pairs are (optionally) shuffled, then sorted by length within windows of
    ``sort_window * batch_size`` pairs, so a batch holds sentences of similar length and
    little padding, while the batch order stays random. ``sort_window=1`` turns bucketing off.
    Targets must end with EOS (``Vocab.encode`` default). Same seed, same batches.
    """
    if batch_size < 1 or sort_window < 1:
        raise ValueError(f"batch_size and sort_window must be >= 1, got {batch_size}, "
                         f"{sort_window}")
    rng = random.Random(seed)
    order = list(range(len(pairs_ids)))
    if shuffle:
        rng.shuffle(order)
    window = batch_size * sort_window
    groups: list[list[int]] = []
    for start in range(0, len(order), window):
        chunk = sorted(order[start:start + window],
                       key=lambda i: (len(pairs_ids[i][0]), len(pairs_ids[i][1])))
        groups += [chunk[j:j + batch_size] for j in range(0, len(chunk), batch_size)]
    if shuffle:
        rng.shuffle(groups)
    batches = []
    for rows in groups:
        tgt = [_teacher_forcing(pairs_ids[i][1], i) for i in rows]
        batches.append(Batch(src=pad_sequences([pairs_ids[i][0] for i in rows]),
                             tgt_in=pad_sequences([t_in for t_in, _ in tgt]),
                             tgt_out=pad_sequences([t_out for _, t_out in tgt]),
                             index=torch.tensor(rows, dtype=torch.long)))
    return batches


def padding_fraction(batches: Sequence[Batch]) -> float:
    """Share of PAD positions in all ``src`` and ``tgt_out`` tensors of ``batches``."""
    pads = sum(int((b.src == PAD_ID).sum() + (b.tgt_out == PAD_ID).sum())
               for b in batches)
    total = sum(b.src.numel() + b.tgt_out.numel() for b in batches)
    return pads / total if total else 0.0
