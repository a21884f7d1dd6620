"""labformer.loss against F.cross_entropy, plus padding, zero probabilities and CE = H + KL."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from labformer.loss import (
    LabelSmoothingLoss,
    entropy,
    kl_divergence,
    label_smoothed_cross_entropy,
    smoothed_targets,
    soft_cross_entropy,
)


def _batch(B=3, T=5, V=7, seed=0, pad_every=3):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, V, generator=g) * 3
    target = torch.randint(1, V, (B, T), generator=g)
    target[:, ::pad_every] = 0  # some padding in every row
    return logits, target


@pytest.mark.parametrize("smoothing", [0.0, 0.05, 0.1, 0.3, 0.9])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_equals_torch_3d(smoothing, reduction):
    logits, target = _batch()
    V = logits.shape[-1]
    ours = label_smoothed_cross_entropy(logits, target, smoothing, 0, reduction)
    ref = F.cross_entropy(logits.reshape(-1, V), target.reshape(-1), ignore_index=0,
                          label_smoothing=smoothing, reduction=reduction)
    torch.testing.assert_close(ours.reshape(ref.shape), ref, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.5])
def test_equals_torch_2d_and_no_ignore(smoothing):
    logits, target = _batch(B=1, T=11, V=5)
    logits, target = logits[0], target[0]
    for ignore in (0, None):
        ours = label_smoothed_cross_entropy(logits, target, smoothing, ignore)
        ref = F.cross_entropy(logits, target, label_smoothing=smoothing,
                              ignore_index=-100 if ignore is None else ignore)
        torch.testing.assert_close(ours, ref)


@settings(max_examples=30, deadline=None)
@given(B=st.integers(1, 4), T=st.integers(1, 6), V=st.integers(2, 9),
       smoothing=st.floats(0.0, 0.99), seed=st.integers(0, 10_000))
def test_equals_torch_property(B, T, V, smoothing, seed):
    logits, target = _batch(B, T, V, seed, pad_every=2)
    target[0, -1] = 1  # at least one real token
    ours = label_smoothed_cross_entropy(logits, target, smoothing)
    ref = F.cross_entropy(logits.reshape(-1, V), target.reshape(-1), ignore_index=0,
                          label_smoothing=smoothing)
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)


def test_gradients_match_torch():
    logits, target = _batch()
    a = logits.clone().requires_grad_()
    b = logits.clone().requires_grad_()
    label_smoothed_cross_entropy(a, target, 0.1).backward()
    F.cross_entropy(b.reshape(-1, 7), target.reshape(-1), ignore_index=0,
                    label_smoothing=0.1).backward()
    torch.testing.assert_close(a.grad, b.grad)
    assert a.grad[target == 0].abs().max() == 0  # padding gets no gradient


def test_padding_excluded():
    logits, target = _batch()
    before = label_smoothed_cross_entropy(logits, target, 0.1)
    changed = logits.clone()
    changed[target == 0] = torch.randn_like(changed[target == 0]) * 100
    changed[0, 0, :] = float("nan")  # even garbage at a padded position stays out
    assert target[0, 0] == 0
    after = label_smoothed_cross_entropy(changed, target, 0.1)
    torch.testing.assert_close(before, after)
    # mean over the real tokens only: the sum divided by their count
    total = label_smoothed_cross_entropy(logits, target, 0.1, reduction="sum")
    torch.testing.assert_close(before, total / (target != 0).sum())


def test_all_padding_is_zero_not_nan():
    logits = torch.randn(2, 3, 5)
    target = torch.zeros(2, 3, dtype=torch.long)
    assert label_smoothed_cross_entropy(logits, target, 0.1).item() == 0.0


def test_finite_with_zero_probability_targets():
    # The model gives probability exactly 0 (logit -inf) to classes the target gives 0 too.
    logits = torch.tensor([[0.0, 1.0, -math.inf, 2.0], [-math.inf, 3.0, 0.5, -math.inf]])
    target = torch.tensor([1, 2])
    loss = label_smoothed_cross_entropy(logits, target, 0.0, ignore_index=None)
    assert torch.isfinite(loss)
    torch.testing.assert_close(loss, F.cross_entropy(logits, target))
    p = smoothed_targets(target, 4, 0.0, ignore_index=None)
    log_q = F.log_softmax(logits, dim=-1)
    for f in (entropy(p), soft_cross_entropy(p, log_q), kl_divergence(p, log_q)):
        assert torch.isfinite(f).all()
    # The naive formula multiplies 0 by -inf and gives NaN; the helpers avoid it.
    assert torch.isnan((p * log_q).sum(-1)).any()


def test_half_precision_loss_is_summed_in_float32():
    # 16384 tokens at about log(200) = 5.3 nats each: their sum, 87000, is past float16's
    # largest value (65504). Summed in float32 and divided first, the mean is fine.
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(16, 1024, 200, generator=g).half()
    target = torch.randint(1, 200, (16, 1024), generator=g)
    loss = label_smoothed_cross_entropy(logits, target, smoothing=0.1)
    assert loss.dtype == torch.float16 and torch.isfinite(loss)
    exact = label_smoothed_cross_entropy(logits.float(), target, smoothing=0.1)
    assert float(loss) == pytest.approx(float(exact), rel=1e-3)
    none = label_smoothed_cross_entropy(logits, target, smoothing=0.1, reduction="none")
    assert none.dtype == torch.float16 and none.shape == target.shape


def test_ce_equals_entropy_plus_kl():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(6, 10, generator=g)
    target = torch.randint(1, 10, (6,), generator=g)
    for eps in (0.0, 0.1, 0.4):
        p = smoothed_targets(target, 10, eps)
        log_q = F.log_softmax(logits, dim=-1)
        ce = soft_cross_entropy(p, log_q)
        torch.testing.assert_close(ce, entropy(p) + kl_divergence(p, log_q))
        assert (kl_divergence(p, log_q) >= 0).all()
        # and it is the per-token loss of label_smoothed_cross_entropy
        torch.testing.assert_close(
            ce, label_smoothed_cross_entropy(logits, target, eps, reduction="none"))
    # KL is 0 when q = p
    assert kl_divergence(p, torch.log(p)).abs().max() < 1e-6


def test_smoothed_targets():
    target = torch.tensor([[3, 1, 0]])
    p = smoothed_targets(target, 5, 0.1)
    assert p.shape == (1, 3, 5)
    torch.testing.assert_close(p[0, :2].sum(-1), torch.ones(2))
    assert p[0, 2].abs().sum() == 0  # padding row
    assert p[0, 0, 3].item() == pytest.approx(0.9 + 0.02)
    assert p[0, 0, 0].item() == pytest.approx(0.02)
    assert torch.equal(smoothed_targets(target, 5, 0.0, None)[0], F.one_hot(target[0], 5).float())


def test_module_wrapper():
    logits, target = _batch()
    crit = LabelSmoothingLoss(0.1)
    assert "smoothing=0.1" in repr(crit)
    torch.testing.assert_close(crit(logits, target),
                               label_smoothed_cross_entropy(logits, target, 0.1))


def test_bad_arguments():
    logits, target = _batch()
    with pytest.raises(ValueError, match="smoothing"):
        label_smoothed_cross_entropy(logits, target, 1.0)
    with pytest.raises(ValueError, match="smoothing"):
        label_smoothed_cross_entropy(logits, target, -0.1)
    with pytest.raises(ValueError, match=r"\(3, 4\)"):
        label_smoothed_cross_entropy(logits, target[:, :4])
    with pytest.raises(ValueError, match="integer"):
        label_smoothed_cross_entropy(logits, target.float())
    with pytest.raises(ValueError, match="floating"):
        label_smoothed_cross_entropy(target, target)
    with pytest.raises(ValueError, match="reduction"):
        label_smoothed_cross_entropy(logits, target, reduction="avg")
    with pytest.raises(ValueError, match=r"\[0, 7\)"):
        label_smoothed_cross_entropy(logits, target + 7)
    with pytest.raises(ValueError, match="smoothing"):
        LabelSmoothingLoss(1.5)
    with pytest.raises(ValueError, match="reduction"):
        LabelSmoothingLoss(0.1, reduction="avg")
    with pytest.raises(ValueError, match="integer"):
        smoothed_targets(target.float(), 7)
    with pytest.raises(ValueError, match="num_classes"):
        smoothed_targets(target, 0)
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        smoothed_targets(target, 3)
    with pytest.raises(ValueError, match="same shape"):
        kl_divergence(torch.ones(3), torch.zeros(4))
    with pytest.raises(ValueError, match="same shape"):
        soft_cross_entropy(torch.ones(3), torch.zeros(4))
