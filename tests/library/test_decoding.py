"""Greedy decoding and beam search: KV cache, exhaustive search, EOS, ordering, bad input."""

import itertools
import math
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from labformer.book.testing import PrefixTableModel, TableConfig
from labformer.decoding import (
    BeamStep,
    beam_search,
    greedy_decode,
    length_penalty_factor,
    sequence_log_prob,
)
from labformer.transformer import Transformer, TransformerConfig

PAD, BOS, EOS = 0, 1, 2
V_TGT = 6  # PAD, BOS, EOS, UNK and two words: 4 tokens may be generated


def _model(seed: int, tgt_vocab: int = V_TGT, scale: float = 1.0) -> Transformer:
    torch.manual_seed(seed)
    cfg = TransformerConfig.preset("tiny", src_vocab_size=9, tgt_vocab_size=tgt_vocab)
    model = Transformer(cfg).eval()
    with torch.no_grad():  # a sharper output layer makes the search problem less flat
        model.generator.weight.mul_(scale)
    return model


def _src(seed: int, B: int = 2, S: int = 5) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 9, (B, S), generator=g)
    src[-1, -2:] = PAD  # one padded row
    return src


def _exhaustive(model, src_row, max_len, alpha=0.0):
    """Every output: up to max_len tokens ending in EOS, or max_len tokens without EOS."""
    words = [t for t in range(V_TGT) if t not in (PAD, BOS, EOS)]
    seqs = []
    for n in range(max_len):
        seqs += [list(p) + [EOS] for p in itertools.product(words, repeat=n)]
    seqs += [list(p) for p in itertools.product(words, repeat=max_len)]
    padded = torch.tensor([s + [PAD] * (max_len - len(s)) for s in seqs])
    lp = sequence_log_prob(model, src_row.expand(len(seqs), -1), padded)
    scores = [float(lp[i]) / length_penalty_factor(len(s), alpha) for i, s in enumerate(seqs)]
    order = sorted(range(len(seqs)), key=lambda i: scores[i], reverse=True)
    return [(seqs[i], scores[i], float(lp[i])) for i in order]


def test_cached_and_uncached_logits_equal_at_every_step():
    model = _model(0)
    src = _src(0)
    memory, memory_mask = model.encode(src), model.src_mask(src)
    g = torch.Generator().manual_seed(1)
    tgt = torch.cat([torch.full((2, 1), BOS), torch.randint(3, V_TGT, (2, 7), generator=g)], 1)
    cache = model.new_cache()
    with torch.no_grad():
        for t in range(tgt.shape[1]):
            assert cache.offset == t  # the next position is numbered t
            step = model.decode(tgt[:, t:t + 1], memory, memory_mask, cache)[:, 0]  # (B, V)
            full = model.decode(tgt[:, :t + 1], memory, memory_mask)[:, -1]
            torch.testing.assert_close(step, full, atol=1e-5, rtol=0)
        # a wrong offset (every token at position 0) changes the logits
        wrong = model.new_cache()
        for t in range(3):
            wrong.offset = 0
            step = model.decode(tgt[:, t:t + 1], memory, memory_mask, wrong)[:, 0]
        full = model.decode(tgt[:, :3], memory, memory_mask)[:, -1]
        assert (step - full).abs().max() > 1e-3


@pytest.mark.parametrize("seed", range(3))
def test_greedy_cached_equals_uncached(seed):
    model, src = _model(seed, scale=3.0), _src(seed)
    a = greedy_decode(model, src, max_len=8)
    b = greedy_decode(model, src, max_len=8, use_cache=False)
    assert torch.equal(a, b)
    assert a.shape[0] == 2 and a.shape[1] <= 8
    assert not (a == BOS).any()  # BOS is never generated


class _Countdown(nn.Module):
    """Row n outputs word 4 src[n, 0] times, then EOS, and EOS again whenever asked after it.

    So rows of one batch end at different steps, and a decoder that kept feeding a finished
    row would write EOS, not PAD, after its end. Uncached decoding only.
    """

    config = TableConfig(V_TGT)

    def encode(self, src):
        return src[:, :1, None].float()  # (B, 1, 1): the number of words row b wants

    def src_mask(self, src):
        return torch.ones(src.shape[0], 1, 1, 1, dtype=torch.bool)

    def decode(self, tgt, memory, memory_mask=None, cache=None):
        N, T = tgt.shape
        words_so_far = torch.arange(T).expand(N, T)  # position i follows i generated tokens
        stop = words_so_far >= memory[:, :, 0]  # (N, T)
        logits = torch.zeros(N, T, V_TGT)
        logits[..., 4] = torch.where(stop, 0.0, 10.0)
        logits[..., EOS] = torch.where(stop, 10.0, 0.0)
        return logits


def test_greedy_pads_rows_that_end_early():
    out = greedy_decode(_Countdown(), torch.tensor([[1], [3], [0]]), max_len=10,
                        use_cache=False)
    assert out.tolist() == [[4, EOS, PAD, PAD], [4, 4, 4, EOS], [EOS, PAD, PAD, PAD]]
    out = greedy_decode(_Countdown(), torch.tensor([5]), max_len=2, use_cache=False)
    assert out.tolist() == [[4, 4]]  # a 1-D source is one row; max_len cuts before EOS


def test_decoders_read_the_special_ids_from_the_model():
    # Here 2 is an ordinary word, EOS is 5, BOS 4 and PAD 3: defaults of 0, 1, 2 would be wrong.
    table = {(): {2: 0.6, 5: 0.4}, (2,): {2: 0.7, 5: 0.3}, (2, 2): {5: 1.0}}
    model = PrefixTableModel(table, 6, bos_id=4, eos_id=5, pad_id=3)
    src = torch.ones(1, 2, dtype=torch.long)
    assert greedy_decode(model, src, max_len=6).tolist() == [[2, 2, 5]]
    best = beam_search(model, src, beam_size=2, max_len=6)[0][0]
    assert best.tokens == [2, 2, 5] and best.finished
    assert best.log_prob == pytest.approx(math.log(0.42))
    assert float(sequence_log_prob(model, src, torch.tensor([[2, 5, 3]]))) == \
        pytest.approx(math.log(0.18))  # the PAD (3) after EOS is not counted
    # An explicit override still wins: with EOS = 2 the first word ends the output.
    assert greedy_decode(model, src, max_len=6, eos_id=2).tolist() == [[2]]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("use_cache", [True, False])
def test_beam_size_one_is_greedy(seed, use_cache):
    model, src = _model(seed, scale=3.0), _src(seed)
    greedy = greedy_decode(model, src, max_len=8)
    beams = beam_search(model, src, beam_size=1, max_len=8, use_cache=use_cache)
    lp = sequence_log_prob(model, src, greedy)
    for b in range(src.shape[0]):
        row = [t for t in greedy[b].tolist() if t != PAD]
        assert beams[b][0].tokens == row
        assert beams[b][0].log_prob == pytest.approx(float(lp[b]), abs=1e-4)


@pytest.mark.parametrize("seed,alpha", [(0, 0.0), (1, 0.0), (2, 0.6), (3, 1.0)])
def test_wide_beam_equals_exhaustive_search(seed, alpha):
    max_len = 4
    model, src = _model(seed, scale=3.0), _src(seed)
    # 3 non-EOS words: at most 3**3 = 27 live prefixes, 27 * 4 = 108 candidates per step.
    beams = beam_search(model, src, beam_size=108, top_beams=5, max_len=max_len,
                        length_penalty=alpha)
    for b in range(src.shape[0]):
        best = _exhaustive(model, src[b:b + 1], max_len, alpha)
        for hyp, (seq, score, lp) in zip(beams[b], best[:5], strict=True):
            assert hyp.tokens == seq
            assert hyp.score == pytest.approx(score, abs=1e-4)
            assert hyp.log_prob == pytest.approx(lp, abs=1e-4)
            assert hyp.finished == (seq[-1] == EOS)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_beam_holding_every_prefix_never_worse_than_greedy(seed):
    # With room for every candidate (4 per live prefix, at most 27 live prefixes at max_len 4)
    # nothing is ever dropped, so greedy's output is among the hypotheses beam search ranks.
    model, src = _model(seed % 50, scale=3.0), _src(seed)
    greedy = greedy_decode(model, src, max_len=4)
    g_lp = sequence_log_prob(model, src, greedy)
    beams = beam_search(model, src, beam_size=108, max_len=4)
    for b in range(src.shape[0]):
        assert beams[b][0].log_prob >= float(g_lp[b]) - 1e-4


# A narrow beam can end below greedy: greedy's prefix (3, 4) ranks third at step 2, under two
# children of 4 that both end poorly. Probabilities of the full outputs are in the comments.
NARROW = {
    (): {3: 0.4, 4: 0.35, 5: 0.25},
    (3,): {4: 0.35, 5: 0.33, EOS: 0.32},  # greedy: 3, 4, EOS = 0.14
    (4,): {5: 0.55, 3: 0.45},  # (4, 5) = 0.1925 and (4, 3) = 0.1575 outrank (3, 4) = 0.14
    (4, 5): {3: 0.6, EOS: 0.4},  # 4, 5, 3, EOS = 0.1155; 4, 5, EOS = 0.077
    (4, 3): {EOS: 0.6, 5: 0.4},  # 4, 3, EOS = 0.0945; 4, 3, 5, EOS = 0.063
    (5,): {EOS: 0.4, 3: 0.2, 4: 0.2, 5: 0.2},  # 5, EOS = 0.1; longer outputs 0.05 at most
}


def test_narrow_beam_can_end_below_greedy():
    # Not a theorem for narrow beams: a beam of 2 drops greedy's prefix, and both survivors
    # end lower; a beam of 3 keeps it, and finds greedy's output again.
    model = PrefixTableModel(NARROW, vocab_size=6)
    src = torch.zeros(1, 3, dtype=torch.long)
    greedy = greedy_decode(model, src, max_len=6)
    assert greedy[0].tolist() == [3, 4, EOS]
    g_lp = float(sequence_log_prob(model, src, greedy)[0])
    assert g_lp == pytest.approx(math.log(0.14))
    narrow = beam_search(model, src, beam_size=2, max_len=6)[0][0]
    assert narrow.tokens == [4, 5, 3, EOS] and narrow.log_prob == pytest.approx(math.log(0.1155))
    assert narrow.log_prob < g_lp
    wide = beam_search(model, src, beam_size=3, max_len=6)[0][0]
    assert wide.tokens == [3, 4, EOS] and wide.log_prob == pytest.approx(g_lp)


def test_beam_cached_equals_uncached():
    model, src = _model(5, scale=3.0), _src(5)
    a = beam_search(model, src, beam_size=4, top_beams=4, max_len=6)
    b = beam_search(model, src, beam_size=4, top_beams=4, max_len=6, use_cache=False)
    for ra, rb in zip(a, b, strict=True):
        assert [h.tokens for h in ra] == [h.tokens for h in rb]
        assert [h.score for h in ra] == pytest.approx([h.score for h in rb], abs=1e-4)


# A hand-set table where greedy's first choice leads to a poor continuation.
TABLE = {
    (): {4: 0.5, 5: 0.4, EOS: 0.1},
    (4,): {4: 0.35, 5: 0.35, EOS: 0.3},
    (5,): {EOS: 0.9, 4: 0.1},
    (4, 4): {EOS: 1.0},
    (4, 5): {EOS: 1.0},
    (5, 4): {EOS: 1.0},
}


def test_beam_beats_greedy_on_table_and_stops_at_eos():
    model = PrefixTableModel(TABLE, V_TGT)
    src = torch.ones(1, 2, dtype=torch.long)
    assert greedy_decode(model, src, max_len=5).tolist() == [[4, 4, EOS]]  # 0.5*0.35 = 0.175
    trace: list[BeamStep] = []
    hyps = beam_search(model, src, beam_size=2, top_beams=2, max_len=5, trace=trace)[0]
    assert hyps[0].tokens == [5, EOS]  # 0.4 * 0.9 = 0.36
    assert hyps[0].log_prob == pytest.approx(math.log(0.36))
    assert all(h.finished and h.tokens[-1] == EOS for h in hyps)
    assert hyps[0].score >= hyps[1].score  # best first
    assert len(trace) < 5  # stopped before max_len: no live hypothesis could win any more
    assert trace[0].tokens == [4, 5] and trace[0].parents == [0, 0]
    assert any(lp == pytest.approx(math.log(0.36)) for _, lp in trace[1].finished)


def test_early_stopping_bound_uses_the_longest_length_penalty():
    # After step 1, EOS (p = .5, L = 1) is finished and 4 (p = .5) lives. With alpha = 1, the
    # live one can still win: (4, EOS) has the same probability and a larger length penalty.
    # A bound from the current length, or one without the penalty, stops here with [EOS].
    model = PrefixTableModel({(): {EOS: 0.5, 4: 0.5}, (4,): {EOS: 1.0}}, V_TGT)
    src = torch.ones(1, 1, dtype=torch.long)
    for max_len in (2, 5):
        best = beam_search(model, src, beam_size=1, max_len=max_len, length_penalty=1.0)[0][0]
        assert best.tokens == [4, EOS]
        assert best.score == pytest.approx(math.log(0.5) / (7 / 6))
    # Without a length penalty the two tie on log-probability and the shorter one, found
    # first, is kept: the bound is tight there, and the search stops after one step.
    trace: list[BeamStep] = []
    plain = beam_search(model, src, beam_size=1, max_len=5, trace=trace)[0][0]
    assert plain.tokens == [EOS] and len(trace) == 1


def _random_table(seed: int, max_len: int, words: tuple[int, ...] = (4, 5)) -> dict:
    """A random 'language model': a random distribution over EOS and words for every prefix."""
    rng = random.Random(seed)
    table = {}
    for n in range(max_len):
        for prefix in itertools.product(words, repeat=n):
            w = [rng.expovariate(1.0) for _ in range(1 + len(words))]  # Dirichlet(1, ..., 1)
            table[prefix] = {tok: x / sum(w) for tok, x in zip((EOS, *words), w, strict=True)}
    return table


@pytest.mark.parametrize("alpha", [0.6, 1.0])
def test_narrow_beam_stops_early_with_the_same_result_as_running_to_max_len(alpha):
    max_len, src, stopped_early = 8, torch.ones(1, 1, dtype=torch.long), 0
    for seed in range(10):
        model = PrefixTableModel(_random_table(seed, max_len), V_TGT)
        trace: list[BeamStep] = []
        early = beam_search(model, src, beam_size=2, top_beams=2, max_len=max_len,
                            length_penalty=alpha, trace=trace)[0]
        full = beam_search(model, src, beam_size=2, top_beams=2, max_len=max_len,
                           length_penalty=alpha, early_stopping=False)[0]
        assert [h.tokens for h in early] == [h.tokens for h in full], seed
        assert [h.score for h in early] == pytest.approx([h.score for h in full])
        stopped_early += len(trace) < max_len
    assert stopped_early >= 5  # the stopping rule is reached, not only max_len


def test_top_beams_ordering_and_count():
    model, src = _model(7, scale=3.0), _src(7)
    hyps = beam_search(model, src, beam_size=5, top_beams=5, max_len=5, length_penalty=0.6)
    for row in hyps:
        assert len(row) == 5
        scores = [h.score for h in row]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(h.tokens) for h in row}) == 5  # distinct hypotheses
        for h in row:
            assert h.score == pytest.approx(h.log_prob / length_penalty_factor(len(h.tokens),
                                                                               0.6))
    one = beam_search(model, src, beam_size=5, top_beams=1, max_len=5, length_penalty=0.6)
    assert [r[0].tokens for r in one] == [r[0].tokens for r in hyps]


def test_unfinished_when_max_len_reached():
    table = {(): {4: 1.0}, (4,): {4: 1.0}, (4, 4): {4: 1.0}}
    model = PrefixTableModel(table, V_TGT)
    hyps = beam_search(model, torch.ones(1, 1, dtype=torch.long), beam_size=3, top_beams=1,
                       max_len=3)[0]
    assert hyps[0].tokens == [4, 4, 4] and not hyps[0].finished
    assert hyps[0].log_prob == 0.0


def test_length_penalty_favours_longer_outputs():
    # EOS now: 0.4. Two more tokens: 0.6 * 0.6 * 0.9 = 0.324 -> raw log-prob prefers short.
    table = {(): {EOS: 0.4, 4: 0.6}, (4,): {4: 0.6, 5: 0.4}, (4, 4): {EOS: 0.9, 5: 0.1}}
    model = PrefixTableModel(table, V_TGT)
    src = torch.ones(1, 1, dtype=torch.long)
    raw = beam_search(model, src, beam_size=2, max_len=6)[0][0]
    assert raw.tokens == [EOS]
    normed = beam_search(model, src, beam_size=2, max_len=6, length_penalty=1.0)[0][0]
    assert normed.tokens == [4, 4, EOS]
    assert length_penalty_factor(1, 0.0) == 1.0
    assert length_penalty_factor(7, 1.0) == pytest.approx(2.0)


def test_bad_arguments():
    model = _model(0)
    src = _src(0)
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model, src, beam_size=0)
    with pytest.raises(ValueError, match="top_beams"):
        beam_search(model, src, beam_size=2, top_beams=3)
    with pytest.raises(ValueError, match="top_beams"):
        beam_search(model, src, beam_size=2, top_beams=0)
    with pytest.raises(ValueError, match="length_penalty"):
        beam_search(model, src, length_penalty=-1.0)
    with pytest.raises(ValueError, match=r"\(1, 2, 5\)"):
        beam_search(model, src[None])
    with pytest.raises(ValueError, match="integer"):
        greedy_decode(model, src.float())
    with pytest.raises(ValueError, match="max_len"):
        greedy_decode(model, src, max_len=0)
    with pytest.raises(ValueError, match="tokens"):
        sequence_log_prob(model, src, torch.ones(3, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="distribution"):
        PrefixTableModel({(): {4: 0.5}}, V_TGT)
    with pytest.raises(ValueError, match="distribution"):
        PrefixTableModel({(): {9: 1.0}}, V_TGT)


def _eos_shy_model(seed: int, bias: float) -> Transformer:
    """A random tiny model whose output layer is biased against EOS: many hypotheses run to
    their length limit, where a batch-wide limit would rank them differently."""
    model = _model(seed, tgt_vocab=8, scale=2.0)
    with torch.no_grad():
        model.generator.bias[EOS] -= bias
    return model


def _sentences(seed: int, n: int = 4) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, 9) for _ in range(rng.randint(1, 6))] for _ in range(n)]


def _padded(rows: list[list[int]]) -> torch.Tensor:
    out = torch.full((len(rows), max(map(len, rows))), PAD, dtype=torch.long)
    for r, row in enumerate(rows):
        out[r, :len(row)] = torch.tensor(row)
    return out


@pytest.mark.parametrize("seed", range(20))
def test_beam_output_of_a_row_does_not_depend_on_its_batch(seed):
    # Each sentence has its own limit (here its length + 2); alone or beside longer and
    # shorter sentences, in any order, its hypotheses must be the same.
    model = _eos_shy_model(seed, bias=1.0 + seed % 3)
    sentences = _sentences(seed)
    limits = [len(s) + 2 for s in sentences]
    alone = [beam_search(model, _padded([s]), beam_size=3, top_beams=3, max_len=lim)[0]
             for s, lim in zip(sentences, limits, strict=True)]
    orders = [list(range(len(sentences))), list(reversed(range(len(sentences)))), [0, 2], [3, 1]]
    for order in orders:
        batch = beam_search(model, _padded([sentences[i] for i in order]), beam_size=3,
                            top_beams=3, max_len=[limits[i] for i in order])
        for row, i in enumerate(order):
            assert [h.tokens for h in batch[row]] == [h.tokens for h in alone[i]], (order, i)
            assert [h.finished for h in batch[row]] == [h.finished for h in alone[i]]
            assert [h.score for h in batch[row]] == pytest.approx(
                [h.score for h in alone[i]], abs=1e-4)


def test_beam_limits_per_row_are_checked():
    model, src = _model(0), _src(0)
    with pytest.raises(ValueError, match="one limit per row"):
        beam_search(model, src, max_len=[3])
    with pytest.raises(ValueError, match="at least 1"):
        beam_search(model, src, max_len=[3, 0])
    # A shared limit and the same limit per row are one search.
    a = beam_search(model, src, beam_size=3, max_len=4)
    assert [h[0].tokens for h in a] == [h[0].tokens for h in
                                        beam_search(model, src, beam_size=3, max_len=[4, 4])]
