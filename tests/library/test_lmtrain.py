"""labformer.lmtrain: the text, the training loop, perplexity and its baselines, the blocks."""

from __future__ import annotations

import math

import pytest
import torch

from labformer.lm import LanguageModel
from labformer.lmtrain import (
    BLOCKS,
    LMTrainConfig,
    _windows,
    block_config,
    ngram_perplexity,
    perplexity,
    text_data,
    train_language_model,
)


@pytest.fixture(scope="module")
def data():
    return text_data(num_sentences=600, vocab_size=300, held_out=50)


def test_text_data_splits_and_round_trips(data) -> None:
    train, valid, test = data.sentences
    assert (len(train), len(valid), len(test)) == (500, 50, 50)
    assert not set(test) & set(train)  # the corpus never repeats a sentence
    assert data.vocab_size == 300
    assert data.bpe.decode(data.test.tolist()) == "".join(s + "\n" for s in test)
    with pytest.raises(ValueError, match="held_out"):
        text_data(num_sentences=100, held_out=50)


def test_windows_cover_each_prediction_once() -> None:
    w = _windows(torch.arange(11), 5)
    assert w.tolist() == [[0, 1, 2, 3, 4, 5], [5, 6, 7, 8, 9, 10]]
    with pytest.raises(ValueError, match="no window"):
        _windows(torch.arange(3), 5)


def test_schedule_warms_up_then_decays() -> None:
    cfg = LMTrainConfig(steps=100, warmup=10, lr=1.0)
    assert cfg.lr_at(0) == pytest.approx(0.1) and cfg.lr_at(9) == pytest.approx(1.0)
    assert cfg.lr_at(10) == pytest.approx(1.0)
    assert cfg.lr_at(100) == pytest.approx(0.1)


def test_training_lowers_perplexity_below_the_baselines(data) -> None:
    cfg = block_config("2017", data.vocab_size, d_model=32, d_ff=64)
    untrained = LanguageModel.from_config(cfg)
    before = perplexity(untrained, data.test, length=16)
    model, losses = train_language_model(cfg, data, LMTrainConfig(steps=150, length=16),
                                         seed=3, progress=False)
    after = perplexity(model, data.test, length=16)
    assert len(losses) == 150 and all(math.isfinite(x) for x in losses)
    assert after < before / 5
    assert after < ngram_perplexity(data.train, data.test, data.vocab_size, 1)
    # same seed, same model
    again, _ = train_language_model(cfg, data, LMTrainConfig(steps=5, length=16), seed=3,
                                    progress=False)
    third, _ = train_language_model(cfg, data, LMTrainConfig(steps=5, length=16), seed=3,
                                    progress=False)
    assert all(torch.equal(a, b) for a, b in zip(again.parameters(), third.parameters(),
                                                 strict=True))
    with pytest.raises(ValueError, match="max_len"):
        train_language_model(cfg.replace(max_len=8), data, LMTrainConfig(length=16))


def test_perplexity_is_exp_of_the_mean_loss(data) -> None:
    torch.manual_seed(0)
    model = LanguageModel(data.vocab_size, d_model=16, num_heads=2, d_ff=32, max_len=32)
    windows = _windows(data.test, 16)
    with torch.no_grad():
        expected = math.exp(float(model.loss(windows)))
    assert perplexity(model, data.test, length=16) == pytest.approx(expected, rel=1e-5)


def test_ngram_baselines_by_hand() -> None:
    train = torch.tensor([0, 1, 0, 1, 0, 2])
    test = torch.tensor([0, 1, 0])
    # unigram, add-one over V = 3: counts 3, 2, 1 -> (4, 3, 2) / 9; predictions 1 then 0
    assert ngram_perplexity(train, test, 3, 1) == pytest.approx((9 / 3 * 9 / 4) ** 0.5)
    # bigram, weight 0.5: after 0 comes 1 twice of three, after 1 comes 0 always
    p1 = 0.5 * 2 / 3 + 0.5 * 3 / 9
    p0 = 0.5 * 1.0 + 0.5 * 4 / 9
    assert ngram_perplexity(train, test, 3, 2, 0.5) == pytest.approx((p1 * p0) ** -0.5)
    # a token never followed by anything falls back on the unigram: still a distribution
    assert ngram_perplexity(train, torch.tensor([2, 0]), 3, 2, 0.5) == pytest.approx(9 / 4)
    with pytest.raises(ValueError, match="order"):
        ngram_perplexity(train, test, 3, 3)


def test_blocks_switch_one_part_each() -> None:
    base = block_config("2017", 100)
    assert (base.norm_first, base.norm, base.ffn, base.positional, base.num_kv_heads) == (
        False, "layernorm", "relu", "sinusoidal", 4)
    assert block_config("Pre-LN", 100).norm_first
    assert block_config("RMSNorm", 100).norm == "rmsnorm"
    assert block_config("RoPE", 100).positional == "rope"
    assert block_config("GQA", 100).num_kv_heads == 2
    swiglu = block_config("SwiGLU", 100)
    assert swiglu.ffn == "swiglu" and swiglu.d_ff == round(2 * base.d_ff / 3)
    # SwiGLU's width keeps the feed-forward parameters within 2 % of ReLU's
    ff = [sum(p.numel() for n, p in LanguageModel.from_config(c).named_parameters()
              if "ff" in n) for c in (base, swiglu)]
    assert abs(ff[1] - ff[0]) / ff[0] < 0.02, ff
    modern = block_config("modern", 100)
    assert (modern.norm_first, modern.norm, modern.ffn, modern.positional,
            modern.num_kv_heads) == (True, "rmsnorm", "swiglu", "rope", 2)
    assert set(BLOCKS) == {"2017", "Pre-LN", "RMSNorm", "SwiGLU", "RoPE", "GQA", "modern"}
    with pytest.raises(ValueError, match="no block"):
        block_config("ALiBi", 100)
