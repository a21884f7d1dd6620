"""Reading a trained translator's attention: teacher-forced batches, attention maps, alignment.

The generated corpus knows which French word gives each English content word
(``labformer.data.lexicon.align_content_words``). These functions ask how often an attention
view puts its largest weight on that word, the statistic of chapters 11 and 14.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from labformer.book.record import record_attention
from labformer.data import SentencePair, Vocab, lexicon, tokenize


def padded(rows: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
    """Right-padded (B, L) tensor of id lists."""
    if not rows:
        raise ValueError("padded: no rows to pad")
    out = torch.full((len(rows), max(map(len, rows))), pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, :len(r)] = torch.tensor(list(r), dtype=torch.long)
    return out


def teacher_forced(pairs: Sequence[SentencePair], src_vocab: Vocab, tgt_vocab: Vocab
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded sources (B, S) ending with EOS, and target inputs (B, T) starting with BOS."""
    src = [src_vocab.encode(tokenize(s)) for s, _ in pairs]
    tgt = [tgt_vocab.encode(tokenize(t)) for _, t in pairs]
    tgt_in = [[tgt_vocab.bos_id] + t[:-1] for t in tgt]
    return padded(src, src_vocab.pad_id), padded(tgt_in, tgt_vocab.pad_id)


def attention_maps(model: torch.nn.Module, src_vocab: Vocab, tgt_vocab: Vocab,
                   pairs: Sequence[SentencePair]) -> dict[str, torch.Tensor]:
    """{kind: (N, B, h, T_q, T_k)} weights while the model reads ``pairs``, teacher forced.

    Kinds: "encoder self", "decoder self", "cross"; layers in forward order, the first first.
    """
    src, tgt_in = teacher_forced(pairs, src_vocab, tgt_vocab)
    with torch.no_grad(), record_attention(model) as maps:
        model(src, tgt_in)

    def layers(prefix: str, suffix: str) -> torch.Tensor:
        return torch.stack([w for n, w in maps.items()
                            if n.startswith(prefix) and n.endswith(suffix)])

    return {"encoder self": layers("encoder.", "self_attn"),
            "decoder self": layers("decoder.", "self_attn"),
            "cross": layers("decoder.", "cross_attn")}


def cross_attention_views(translator: object, pairs: Sequence[SentencePair]) -> torch.Tensor:
    """A translator's cross-attention as views (N + N*h, B, T, S): each layer's mean over its
    heads, layer by layer, then every head (layer 1's heads first)."""
    cross = attention_maps(translator.model, translator.src_vocab,  # type: ignore[attr-defined]
                           translator.tgt_vocab, pairs)["cross"]  # type: ignore[attr-defined]
    per_layer = cross.mean(2)                          # (N, B, T, S)
    per_head = cross.transpose(1, 2).flatten(0, 1)     # (N * h, B, T, S)
    return torch.cat([per_layer, per_head])


def alignment_table(views_of: Callable[[Sequence[SentencePair]], torch.Tensor],
                    pairs: Sequence[SentencePair], batch_size: int = 200
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Hits of each attention view on the aligned source word of every aligned target word.

    ``views_of(pairs)`` returns (views, B, T, S) weights, teacher forced. Returns ``hits``
    (views, words), a bool per view and word; and per word: the chance that a random source
    position is the aligned one (1/S, EOS counted), whether the diagonal guess (the source
    position proportional to the target's) hits, and whether its alignment crosses another.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    hits, chance, diagonal, crossing = [], [], [], []
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start:start + batch_size]
        guess = views_of(chunk).argmax(-1)                 # (views, B, T)
        for b, (s, t) in enumerate(chunk):
            s_tok, t_tok = tokenize(s), tokenize(t)
            S, T = len(s_tok) + 1, len(t_tok) + 1          # EOS included
            links = lexicon.align_content_words(s_tok, t_tok)
            for i, j in links:
                hits.append((guess[:, b, i] == j).numpy())
                chance.append(1 / S)
                diagonal.append(round(i * (S - 1) / (T - 1)) == j)
                crossing.append(any((i2 - i) * (j2 - j) < 0 for i2, j2 in links))
    return (np.array(hits).T, np.array(chance), np.array(diagonal), np.array(crossing))
