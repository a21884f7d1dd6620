"""labformer.sampling: the filtered distributions, greedy limits, the KV cache, EOS, and a
chi-square test that the draws follow softmax(logits / temperature) (and that wrong samplers
fail it)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor, nn

import labformer
from labformer.lm import LanguageModel
from labformer.sampling import _chi_square_tail, chi_square_test, next_token_probs, sample

V = 13
P_MIN = 1e-4  # a correct sampler fails with probability 1e-4, whatever the seed


class FixedLogits(nn.Module):
    """A stub language model whose next-token logits are the same at every position."""

    def __init__(self, logits: list[float]) -> None:
        super().__init__()
        self.logits = torch.tensor(logits)
        self.calls = 0

    def new_cache(self) -> dict[str, int]:
        return {"offset": 0}

    def forward(self, tokens: Tensor, *, cache: dict[str, int] | None = None) -> Tensor:
        self.calls += 1
        B, T = tokens.shape
        return self.logits.expand(B, T, len(self.logits))


LOGITS = [2.0, 1.5, 1.4, 0.3, 0.0, -0.5, -1.0, -3.0]


def _expected(logits: list[float], temperature: float = 1.0, top_k: int | None = None,
              top_p: float | None = None) -> list[float]:
    """The distribution by hand, in float64: softmax(logits / T), top-k, then top-p."""
    weights = [math.exp(z / temperature) for z in logits]
    order = sorted(range(len(logits)), key=lambda i: (-logits[i], i))
    kept = order[: top_k or len(order)]
    if top_p is not None:
        mass = sum(weights[i] for i in kept)
        nucleus, before = [], 0.0
        for i in kept:
            if before >= top_p:
                break
            nucleus.append(i)
            before += weights[i] / mass
        kept = nucleus
    total = sum(weights[i] for i in kept)
    return [weights[i] / total if i in kept else 0.0 for i in range(len(logits))]


def _draw_counts(model: nn.Module, n: int, seed: int, **options) -> list[int]:
    """Counts of n one-token draws (n rows of a one-token prompt)."""
    g = torch.Generator().manual_seed(seed)
    prompt = torch.zeros(n, 1, dtype=torch.long)
    drawn = sample(model, prompt, 1, generator=g, **options)[:, 1]
    return torch.bincount(drawn, minlength=len(LOGITS)).tolist()


def _model(seed=0, **switches):
    torch.manual_seed(seed)
    return LanguageModel(V, 16, 4, 2, 32, max_len=48, **switches).eval()


def _greedy(model, prompt: Tensor, steps: int) -> Tensor:
    """Greedy decoding by hand: argmax of the whole prefix's last logits, no cache."""
    out = prompt
    for _ in range(steps):
        out = torch.cat([out, model(out)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return out


def _prompt(B=3, T=4, seed=2):
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


# ---- the distribution -----------------------------------------------------------------------

@pytest.mark.parametrize("options", [
    dict(), dict(temperature=0.5), dict(temperature=2.5), dict(top_k=3), dict(top_k=1),
    dict(top_k=100), dict(top_p=0.5), dict(top_p=0.9), dict(top_p=1.0), dict(top_p=1e-9),
    dict(temperature=0.7, top_k=4, top_p=0.8),
])
def test_next_token_probs_are_the_hand_formula(options):
    probs = next_token_probs(torch.tensor(LOGITS, dtype=torch.float64), **options)
    expected = torch.tensor(_expected(LOGITS, **options), dtype=torch.float64)
    torch.testing.assert_close(probs, expected, atol=1e-12, rtol=0)
    assert torch.equal(probs == 0, expected == 0)  # dropped tokens are exactly 0


def test_top_k_keeps_exactly_k_and_top_p_the_smallest_nucleus():
    logits = torch.randn(50, V, generator=torch.Generator().manual_seed(0))
    for k in (1, 2, 5, V):
        assert torch.all((next_token_probs(logits, top_k=k) > 0).sum(-1) == k)
    probs = next_token_probs(logits, top_p=0.6)
    full = logits.softmax(-1)
    kept = probs > 0
    assert torch.all(full[kept.nonzero(as_tuple=True)] > 0)
    # the kept mass reaches 0.6, and without the least probable kept token it would not
    mass = (full * kept).sum(-1)
    least = torch.where(kept, full, torch.inf).min(-1).values
    assert torch.all(mass >= 0.6 - 1e-6) and torch.all(mass - least < 0.6)


def test_ties_rank_the_smaller_id_first_as_argmax_does():
    logits = torch.tensor([[0.0, 1.0, 3.0, 3.0, 3.0, 1.0]])
    assert torch.equal(next_token_probs(logits, top_k=1)[0].nonzero().flatten(),
                       torch.tensor([2]))
    assert torch.equal(next_token_probs(logits, top_p=1e-6)[0].nonzero().flatten(),
                       torch.tensor([2]))
    assert next_token_probs(logits, top_k=2)[0].nonzero().flatten().tolist() == [2, 3]
    half = next_token_probs(logits.half())
    assert half.dtype == torch.float32


# ---- greedy limits, cache, reproducibility --------------------------------------------------

@pytest.mark.parametrize("switches", [dict(), dict(positional="rope", norm_first=True,
                                                   norm="rmsnorm", ffn="swiglu",
                                                   num_kv_heads=2)])
def test_top_k_1_and_a_tiny_top_p_are_exactly_greedy(switches):
    model = _model(**switches)
    prompt = _prompt()
    greedy = _greedy(model, prompt, 12)
    g = torch.Generator().manual_seed(0)
    for options in (dict(top_k=1), dict(top_p=1e-9), dict(top_k=1, temperature=5.0),
                    dict(top_p=1e-9, temperature=0.1)):
        assert torch.equal(sample(model, prompt, 12, generator=g, **options), greedy)


@pytest.mark.parametrize("options", [dict(top_k=1), dict(), dict(temperature=0.8, top_k=5),
                                     dict(top_p=0.9)])
def test_the_cache_changes_nothing_but_the_cost(options):
    model = _model(positional="rope", num_kv_heads=1)
    prompt = _prompt()
    cached = sample(model, prompt, 20, generator=torch.Generator().manual_seed(3), **options)
    full = sample(model, prompt, 20, generator=torch.Generator().manual_seed(3),
                  use_cache=False, **options)
    assert cached.shape == (3, 24) and torch.equal(cached[:, :4], prompt)
    assert torch.equal(cached, full)


def test_the_cache_feeds_one_token_per_step():
    stub = FixedLogits(LOGITS)
    sample(stub, torch.zeros(2, 5, dtype=torch.long), 7)
    assert stub.calls == 7  # the prompt once, then one call per new token but the last


def test_a_generator_makes_draws_reproducible():
    model = _model()
    prompt = _prompt()

    def run(seed):
        return sample(model, prompt, 20, generator=torch.Generator().manual_seed(seed))

    assert torch.equal(run(1), run(1))
    assert not torch.equal(run(1), run(2))
    torch.manual_seed(5)
    a = sample(model, prompt, 20)
    torch.manual_seed(5)
    assert torch.equal(a, sample(model, prompt, 20))  # the global generator, seeded
    assert labformer.sample is sample


def test_after_eos_a_row_keeps_emitting_eos():
    eos = 4
    logits = [0.0] * 8
    logits[eos] = 1.0  # EOS likely but not certain: rows end at different steps
    stub = FixedLogits(logits)
    out = sample(stub, torch.zeros(64, 2, dtype=torch.long), 30, eos_id=eos,
                 generator=torch.Generator().manual_seed(0))
    assert out.shape == (64, 32)
    new = out[:, 2:]
    first = (new == eos).int().argmax(-1)
    assert (new == eos).any(-1).all()  # every row ended (1 - (1 - 1/8 e)^30 each, ~1)
    assert len(set(first.tolist())) > 3  # at different steps
    for row, t in zip(new, first.tolist(), strict=True):
        assert torch.all(row[t:] == eos) and torch.all(row[:t] != eos)
    # all rows done: generation stops early, the rest is EOS padding
    stub.calls = 0
    certain = [0.0] * 8
    certain[eos] = 50.0
    stub.logits = torch.tensor(certain)
    out = sample(stub, torch.zeros(3, 2, dtype=torch.long), 10, eos_id=eos)
    assert stub.calls == 1 and torch.all(out[:, 2:] == eos)


def test_zero_new_tokens_returns_the_prompt():
    prompt = _prompt()
    assert torch.equal(sample(_model(), prompt, 0), prompt)


@pytest.mark.parametrize("bad", [
    dict(temperature=0.0), dict(temperature=-1.0), dict(temperature=math.inf),
    dict(temperature=True), dict(top_k=0), dict(top_k=2.0), dict(top_k=True), dict(top_p=0.0),
    dict(top_p=1.5), dict(top_p=-0.1), dict(top_p=True),
])
def test_bad_options_are_refused(bad):
    with pytest.raises(ValueError):
        sample(_model(), _prompt(), 3, **bad)
    with pytest.raises(ValueError):
        next_token_probs(torch.zeros(V), **bad)


@pytest.mark.parametrize("prompt", [
    torch.zeros(5, dtype=torch.long), torch.zeros(1, 2, 3, dtype=torch.long),
    torch.zeros(2, 3), torch.zeros(0, 3, dtype=torch.long), torch.zeros(2, 0, dtype=torch.long),
    torch.zeros(2, 3, dtype=torch.bool), [[1, 2]],
])
def test_bad_prompts_are_refused(prompt):
    with pytest.raises(ValueError, match="prompt"):
        sample(_model(), prompt, 3)


def test_bad_lengths_are_refused():
    for n in (-1, 2.0, True):
        with pytest.raises(ValueError, match="max_new_tokens"):
            sample(_model(), _prompt(), n)
    with pytest.raises(ValueError, match="max_len"):  # the model's own limit
        sample(_model(), _prompt(T=40), 20)
    for eos in (-1, V, 2.0, True):
        with pytest.raises(ValueError, match="eos_id"):
            sample(_model(), _prompt(), 3, eos_id=eos)


# ---- the chi-square test --------------------------------------------------------------------

N = 20_000


@pytest.mark.parametrize("options", [
    dict(), dict(temperature=0.7), dict(temperature=1.8), dict(top_k=3),
    dict(temperature=0.7, top_k=4), dict(top_p=0.8), dict(temperature=1.3, top_k=5, top_p=0.9),
])
def test_draws_follow_the_distribution(options):
    counts = _draw_counts(FixedLogits(LOGITS), N, seed=11, **options)
    stat, p = chi_square_test(counts, _expected(LOGITS, **options))
    assert p > P_MIN, (counts, stat, p)


@pytest.mark.parametrize(("drawn_with", "claimed"), [
    (dict(temperature=1.0), dict(temperature=0.7)),  # a sampler that ignores the temperature
    (dict(temperature=0.7, top_k=4), dict(temperature=0.7, top_k=3)),  # top-k keeps k + 1
    (dict(top_k=2), dict(top_k=3)),  # top-k keeps k - 1
    (dict(top_p=0.95), dict(top_p=0.8)),  # a nucleus too wide
    (dict(temperature=1 / 0.7), dict(temperature=0.7)),  # multiplies instead of dividing
])
def test_a_wrong_sampler_fails_the_same_test(drawn_with, claimed):
    counts = _draw_counts(FixedLogits(LOGITS), N, seed=11, **drawn_with)
    stat, p = chi_square_test(counts, _expected(LOGITS, **claimed))
    assert p < 1e-10, (counts, stat, p)


def test_a_language_models_draws_follow_its_own_softmax():
    model = _model(positional="rope", num_kv_heads=2)
    prompt = _prompt(1, 5).expand(N, 5)
    with torch.no_grad():
        logits = model(prompt[:1])[0, -1].double()  # (V,)
    for temperature in (1.0, 0.6):
        drawn = sample(model, prompt, 1, temperature=temperature,
                       generator=torch.Generator().manual_seed(4))[:, -1]
        expected = (logits / temperature).softmax(-1)
        assert expected.min() * N > 5  # every cell large enough for the test
        stat, p = chi_square_test(torch.bincount(drawn, minlength=V), expected)
        assert p > P_MIN, (stat, p)
        wrong = (logits / (temperature * 1.3)).softmax(-1)
        assert chi_square_test(torch.bincount(drawn, minlength=V), wrong)[1] < P_MIN


def test_chi_square_tail_matches_tabulated_values():
    # 5 % critical values of the chi-square distribution, df = 1..5, 10, 30
    for df, x in ((1, 3.841459), (2, 5.991465), (3, 7.814728), (4, 9.487729), (5, 11.070498),
                  (10, 18.307038), (30, 43.772972)):
        assert abs(_chi_square_tail(x, df) - 0.05) < 1e-6, df
    assert abs(_chi_square_tail(6.634897, 1) - 0.01) < 1e-6
    assert _chi_square_tail(0.0, 3) == 1.0 and _chi_square_tail(5.0, 0) == 1.0


def test_chi_square_test_by_hand_and_its_checks():
    stat, p = chi_square_test([30, 20, 50], [0.25, 0.25, 0.5])
    assert stat == pytest.approx((30 - 25) ** 2 / 25 + (20 - 25) ** 2 / 25 + 0)
    assert p == pytest.approx(math.exp(-stat / 2))  # df = 2
    assert chi_square_test([5, 1], [1.0, 0.0]) == (math.inf, 0.0)
    assert chi_square_test([5, 0], [1.0, 0.0]) == (0.0, 1.0)
    for counts, probs in (([1, 2], [1.0]), ([-1, 2], [0.5, 0.5]), ([0, 0], [0.5, 0.5]),
                          ([1, 2], [0.5, 0.6])):
        with pytest.raises(ValueError):
            chi_square_test(counts, probs)
