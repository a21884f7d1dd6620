"""The toy French -> English corpus: generation, splits and a summary for the chapters.

Held-out test design. Before any sentence is drawn, ``num_heldout`` adjective-noun
combinations (e.g. *vieux* + *homme*) are set aside, each adjective and each noun in at most
one of them. Train and validation sentences never contain them, attributively
("un vieil homme") or predicatively ("l'homme est vieux"); a share of the test split is built
around them. Every adjective and every noun still occurs hundreds of times in training, so
translating a held-out combination needs composition, not memory.

Sentence length is *not* held out: test sentences come from the same 2-20 token range as
training. A model with sinusoidal positions that never saw a position cannot be expected to
translate there, and that would measure position extrapolation, not the compositional
generalisation this split is about. Every French sentence occurs at most once in the whole
corpus, so no test sentence is seen in training.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field

from labformer.data import lexicon as lx
from labformer.data.grammar import Pair, SentenceGenerator
from labformer.data.text import SentencePair, detokenize, tokenize

DIRECTIONS = ("fr-en", "en-fr")


@dataclass(frozen=True)
class Corpus:
    """Train / validation / test sentence pairs ``(src, tgt)`` and what the test holds out."""

    train: list[SentencePair]
    valid: list[SentencePair]
    test: list[SentencePair]
    heldout_pairs: tuple[Pair, ...]  # (adjective, noun) French lemmas absent from train/valid
    test_heldout: list[bool] = field(default_factory=list)  # test[i] holds a held-out pair
    direction: str = "fr-en"
    seed: int = 0

    @property
    def stats(self) -> dict[str, object]:
        """Split sizes, vocabulary sizes (train) and token lengths (all splits)."""
        all_pairs = self.train + self.valid + self.test
        src_lens = [len(tokenize(s)) for s, _ in all_pairs]
        tgt_lens = [len(tokenize(t)) for _, t in all_pairs]
        return {
            "direction": self.direction,
            "seed": self.seed,
            "train": len(self.train),
            "valid": len(self.valid),
            "test": len(self.test),
            "test_heldout": sum(self.test_heldout),
            "heldout_pairs": len(self.heldout_pairs),
            "src_vocab": len({w for s, _ in self.train for w in tokenize(s)}),
            "tgt_vocab": len({w for _, t in self.train for w in tokenize(t)}),
            "src_len": (min(src_lens), max(src_lens), round(statistics.mean(src_lens), 2)),
            "tgt_len": (min(tgt_lens), max(tgt_lens), round(statistics.mean(tgt_lens), 2)),
        }

    def describe(self) -> str:
        """A few lines summarising :attr:`stats`, for printing in a notebook."""
        s = self.stats
        pairs = ", ".join(f"{adj}+{noun}" for adj, noun in self.heldout_pairs)
        return "\n".join([
            f"toy corpus {s['direction']}, seed {s['seed']}",
            (f"  pairs: train {s['train']}, valid {s['valid']}, test {s['test']} "
             f"({s['test_heldout']} with a held-out adjective-noun pair)"),
            f"  train vocabulary: {s['src_vocab']} source, {s['tgt_vocab']} target words",
            ("  tokens per sentence (min, max, mean): "
             f"source {s['src_len']}, target {s['tgt_len']}"),
            f"  held-out pairs: {pairs}",
        ])


def candidate_pairs() -> list[Pair]:
    """Every adjective-noun combination the grammar can produce (attributive or predicative)."""
    return [(adj.lemma, noun.fr) for adj in lx.ADJECTIVES for noun in lx.NOUNS
            if noun.cls in adj.classes]


def choose_heldout_pairs(num_heldout: int, rng: random.Random) -> tuple[Pair, ...]:
    """``num_heldout`` compatible pairs, no adjective and no noun used twice."""
    candidates = candidate_pairs()
    rng.shuffle(candidates)
    chosen: list[Pair] = []
    adjectives: set[str] = set()
    nouns: set[str] = set()
    for adj, noun in candidates:
        if len(chosen) == num_heldout:
            break
        if adj not in adjectives and noun not in nouns:
            chosen.append((adj, noun))
            adjectives.add(adj)
            nouns.add(noun)
    if len(chosen) < num_heldout:
        raise ValueError(f"num_heldout={num_heldout} is more than the lexicon allows "
                         f"({len(chosen)} pairs with distinct adjectives and nouns)")
    return tuple(chosen)


def generate_corpus(num_pairs: int = 30000, seed: int = 0, direction: str = "fr-en", *,
                    valid_size: int = 1000, test_size: int = 1000, num_heldout: int = 12,
                    heldout_share: float = 0.5) -> Corpus:
    """Generate the toy corpus: ``num_pairs`` distinct pairs split into train/valid/test.

    ``valid_size`` and ``test_size`` are taken out of ``num_pairs``; ``heldout_share`` of the
    test split is built around the held-out adjective-noun pairs, the rest is ordinary unseen
    sentences. ``direction="fr-en"`` gives (French, English) pairs, and the English side is a
    function of the French one; ``"en-fr"`` swaps them, and is ambiguous in places
    (English "you" is French tu or vous). The same arguments always give the same corpus.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if min(valid_size, test_size, num_heldout) < 0 or not 0.0 <= heldout_share <= 1.0:
        raise ValueError(f"sizes must be >= 0 and heldout_share in [0, 1], got valid_size="
                         f"{valid_size}, test_size={test_size}, num_heldout={num_heldout}, "
                         f"heldout_share={heldout_share}")
    if num_pairs <= valid_size + test_size:
        raise ValueError(f"num_pairs={num_pairs} leaves no training pairs after valid_size="
                         f"{valid_size} and test_size={test_size}")
    num_test_heldout = round(test_size * heldout_share) if num_heldout else 0
    rng = random.Random(seed)
    heldout = choose_heldout_pairs(num_heldout, rng)
    generator = SentenceGenerator(rng, banned=frozenset(heldout))
    seen: set[str] = set()
    budget = 50 * num_pairs + 10_000  # guards against asking for more than the grammar has

    def draw(forced: Pair | None) -> SentencePair:
        nonlocal budget
        while budget > 0:
            budget -= 1
            fr, en, _ = generator.sentence(forced)
            src = detokenize(fr)
            if src not in seen:
                seen.add(src)
                return src, detokenize(en)
        raise RuntimeError(f"the grammar could not produce {num_pairs} distinct sentences")

    test = [draw(heldout[i % len(heldout)]) for i in range(num_test_heldout)]
    flags = [True] * num_test_heldout
    ordinary = [draw(None) for _ in range(num_pairs - num_test_heldout)]
    num_plain_test = test_size - num_test_heldout
    test += ordinary[:num_plain_test]
    flags += [False] * num_plain_test
    valid = ordinary[num_plain_test:num_plain_test + valid_size]
    train = ordinary[num_plain_test + valid_size:]
    order = list(range(len(test)))
    rng.shuffle(order)  # interleave held-out and ordinary test sentences
    test = [test[i] for i in order]
    flags = [flags[i] for i in order]
    if direction == "en-fr":
        train, valid, test = ([(t, s) for s, t in split] for split in (train, valid, test))
    return Corpus(train, valid, test, heldout, flags, direction, seed)
