"""labformer.positional: the sinusoidal table, its rotation property, the learned table, none."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from labformer.positional import (
    LearnedPositionalEncoding,
    NoPositionalEncoding,
    PositionalEncoding,
    sinusoidal_positions,
)

from _helpers import assert_close


def _closed_form(max_len: int, d_model: int) -> np.ndarray:
    """PE straight from the paper's formula, one entry at a time, in float64."""
    pe = np.zeros((max_len, d_model), dtype=np.float64)
    for pos in range(max_len):
        for i in range(d_model // 2):
            angle = pos / 10000.0 ** (2 * i / d_model)
            pe[pos, 2 * i] = math.sin(angle)
            pe[pos, 2 * i + 1] = math.cos(angle)
    return pe


def _rotation(k: int, d_model: int) -> np.ndarray:
    """Block-diagonal R_k with PE(pos + k) = R_k PE(pos), from the frequencies only."""
    r = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        a = k / 10000.0 ** (2 * i / d_model)
        c, s = math.cos(a), math.sin(a)
        # (sin(x + a), cos(x + a)) = (sin x cos a + cos x sin a, cos x cos a - sin x sin a)
        r[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c, s], [-s, c]]
    return r


@pytest.mark.parametrize("max_len,d_model", [(50, 16), (7, 2), (128, 64)])
def test_table_matches_closed_form(max_len, d_model):
    pe = sinusoidal_positions(max_len, d_model)
    assert pe.shape == (max_len, d_model) and pe.dtype == torch.float32
    np.testing.assert_allclose(pe.numpy(), _closed_form(max_len, d_model), atol=1e-6, rtol=0)
    assert pe.abs().max() <= 1.0
    assert torch.equal(pe[0, 0::2], torch.zeros(d_model // 2))  # sin(0)
    assert torch.equal(pe[0, 1::2], torch.ones(d_model // 2))  # cos(0)


def test_table_dtype_and_device():
    pe64 = sinusoidal_positions(128, 64, dtype=torch.float64, device="cpu")
    assert pe64.dtype == torch.float64
    # Exact in float64 (computed there, not up-cast from float32, which errs by ~1e-8).
    np.testing.assert_allclose(pe64.numpy(), _closed_form(128, 64), atol=1e-12, rtol=0)
    assert PositionalEncoding(8, max_len=4, dtype=torch.float64).pe.dtype == torch.float64
    learned = LearnedPositionalEncoding(8, max_len=4, dtype=torch.float64)
    assert learned.embedding.weight.dtype == torch.float64
    assert sinusoidal_positions(4, 8).dtype == torch.get_default_dtype()


@pytest.mark.parametrize("k", [1, 3, 10])
def test_shift_is_a_fixed_rotation(k):
    d_model = 16
    pe = sinusoidal_positions(60, d_model).double().numpy()
    r = _rotation(k, d_model)
    for pos in (0, 5, 17, 40):
        np.testing.assert_allclose(r @ pe[pos], pe[pos + k], atol=1e-5)
    assert not np.allclose(r @ pe[5], pe[5 + k + 1], atol=1e-3)  # R_k is specific to k
    np.testing.assert_allclose(r @ r.T, np.eye(d_model), atol=1e-12)  # a rotation


def test_dot_product_depends_only_on_offset():
    pe = sinusoidal_positions(80, 32).double()
    for k in (1, 4, 9):
        dots = torch.stack([pe[p] @ pe[p + k] for p in (0, 7, 20, 50)])
        expected = sum(math.cos(k / 10000.0 ** (2 * i / 32)) for i in range(16))
        assert_close(dots, torch.full((4,), expected, dtype=torch.float64), atol=1e-5)
    assert abs(float(pe[3] @ pe[4]) - float(pe[3] @ pe[8])) > 1e-2  # but it does depend on k


def test_positional_encoding_adds_table_with_offset():
    pos = PositionalEncoding(8, max_len=20)
    x = torch.randn(2, 5, 8)
    assert_close(pos(x), x + sinusoidal_positions(20, 8)[:5])
    assert_close(pos(x, offset=7), x + pos.pe[7:12])
    # Step-by-step with offset equals slicing the full result.
    long = torch.randn(1, 6, 8)
    full = pos(long)
    for t in range(6):
        assert_close(pos(long[:, t : t + 1], offset=t), full[:, t : t + 1])
    assert "pe" not in pos.state_dict() and not any(p.numel() for p in pos.parameters())


def test_positional_dropout_only_in_training():
    pos = PositionalEncoding(8, max_len=10, dropout=0.5)
    x = torch.ones(4, 10, 8)
    pos.eval()
    assert_close(pos(x), x + pos.pe)
    pos.train()
    torch.manual_seed(0)
    assert (pos(x) == 0).any()


def test_positional_errors():
    with pytest.raises(ValueError, match="d_model=7"):
        sinusoidal_positions(10, 7)
    with pytest.raises(ValueError, match="max_len=0"):
        sinusoidal_positions(0, 8)
    with pytest.raises(ValueError, match="d_model=5"):
        PositionalEncoding(5)
    pos = PositionalEncoding(8, max_len=10)
    with pytest.raises(ValueError, match="max_len=10"):
        pos(torch.zeros(1, 11, 8))
    with pytest.raises(ValueError, match=r"positions 8\.\.10 exceed max_len=10"):
        pos(torch.zeros(1, 3, 8), offset=8)
    with pytest.raises(ValueError, match="exceed"):
        pos(torch.zeros(1, 3, 8), offset=-1)
    with pytest.raises(ValueError, match=r"expected \(B, T, 8\), got \(1, 3, 6\)"):
        pos(torch.zeros(1, 3, 6))
    with pytest.raises(ValueError, match=r"got \(3, 8\)"):
        pos(torch.zeros(3, 8))


def test_learned_positional_encoding():
    pos = LearnedPositionalEncoding(6, max_len=12)
    assert pos.embedding.weight.shape == (12, 6)
    x = torch.randn(2, 4, 6)
    out = pos(x, offset=3)
    assert out.shape == (2, 4, 6)
    assert_close(out, x + pos.embedding.weight[3:7].detach())
    out.sum().backward()
    grad = pos.embedding.weight.grad
    assert (grad[3:7] == 2.0).all()  # batch of two, each position used once per row
    assert (grad[:3] == 0).all() and (grad[7:] == 0).all()
    with pytest.raises(ValueError, match="exceed max_len=12"):
        pos(torch.zeros(1, 13, 6))
    with pytest.raises(ValueError, match="0, 6"):
        LearnedPositionalEncoding(6, max_len=0)
    LearnedPositionalEncoding(5, max_len=4)  # odd widths are fine for a learned table


def test_no_positional_encoding_adds_nothing_and_keeps_dropout_and_checks():
    pos = NoPositionalEncoding(6, max_len=5, dropout=0.5).eval()
    assert list(pos.parameters()) == [] and list(pos.buffers()) == []
    x = torch.randn(2, 4, 6)
    assert torch.equal(pos(x, offset=1), x)  # no position signal at all
    pos.train()
    torch.manual_seed(0)
    assert (pos(x) == 0).any()  # dropout on the embeddings, as in the other two
    with pytest.raises(ValueError, match="max_len=5"):
        pos(x, offset=2)
    with pytest.raises(ValueError, match=r"expected \(B, T, 6\)"):
        pos(torch.zeros(1, 3, 4))
