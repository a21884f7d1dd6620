"""The graders: each exercise's properties, checked over several random sizes and seeds.

A grader ``grade_<name>(attempt, counter)`` returns when every check passes (``counter[0]``
counts them) and raises :class:`~labformer.book.exercises.messages.Fail` at the first that
fails, with the message id of the property and the small input it fails on; the words are
:mod:`labformer.book.exercises.messages`' business. Where a wrong result equals that of a
classic mistake (a Pre-LN layer, a beam pruned per parent, dropped logits set to 0), the
message names that mistake.
"""

from __future__ import annotations

import linecache
import math
import random
import sys
import sysconfig
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from labformer.book.exercises.messages import Fail as _Fail
from labformer.book.exercises.messages import t as _t

# ---------------------------------------------------------------------------------- helpers


def _not_the_readers() -> tuple[str, ...]:
    """The folders whose code is not the reader's: labformer, the standard library, packages."""
    paths = {str(Path(__file__).resolve().parents[2])}  # labformer/
    paths.update(str(Path(p).resolve()) for k, p in sysconfig.get_paths().items()
                 if k in ("stdlib", "platstdlib", "purelib", "platlib"))
    paths.update(str(Path(p).resolve()) for p in sys.path
                 if p.endswith(("site-packages", "dist-packages")))
    return tuple(sorted(paths))


_LIBRARY_PATHS = _not_the_readers()


def readers_line(err: BaseException) -> str:
    """Where the reader's own code raised: the last frame outside labformer, the standard
    library and installed packages (in a notebook, the reader's cell), as "name, line n:
    source"; "" when no frame is the reader's."""
    found = ""
    tb = err.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        filename = code.co_filename
        readers = not filename.startswith("<frozen") and not str(
            Path(filename).resolve() if filename[:1] not in "<" else filename
        ).startswith(_LIBRARY_PATHS)
        if readers:
            source = linecache.getline(filename, tb.tb_lineno, tb.tb_frame.f_globals).strip()
            found = f"{code.co_name}, line {tb.tb_lineno}" + (f": {source}" if source else "")
        tb = tb.tb_next
    return found


def _error(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return type(err).__name__ + (f" ({text[0][:160]})" if text else "")


def _call(fn: Callable[..., Any], *args: Any, inp: str = "", **kwargs: Any) -> Any:
    """Run the reader's code; an error other than NotImplementedError fails "raised", with
    the reader's line that raised."""
    try:
        return fn(*args, **kwargs)
    except (NotImplementedError, _Fail):
        raise
    except Exception as err:  # the reader's bug, reported as a failed property
        raise _Fail("raised", inp, fields={"error": _error(err)},
                    line=readers_line(err)) from None


def _name(cls: Any) -> str:
    """The reader's class by its own name, for the input line: MyDecoderLayer(d_model=8, ...)."""
    name = getattr(cls, "__name__", "")
    return name if name.isidentifier() and name != "<lambda>" else "C"


def _shape(x: Tensor | Sequence[int]) -> str:
    return str(tuple(x.shape if isinstance(x, Tensor) else x))


def _num(x: float) -> str:
    return f"{x:.4g}"


def _show(t: Tensor) -> str:
    """A small tensor's values, rounded; a large one's shape and first values."""
    if t.dtype == torch.bool:
        if t.dim() == 2:
            return " / ".join("".join("1" if v else "0" for v in row) for row in t.tolist())
        return str(t.int().tolist())
    values = t.detach().double()
    if values.numel() <= 12:
        return str([float(_num(v)) for v in values.flatten().tolist()]) if values.dim() <= 1 \
            else str(values.round(decimals=4).tolist())
    head = ", ".join(_num(v) for v in values.flatten()[:6].tolist())
    return _t("first_values", shape=_shape(t), head=head)


def _tensor(x: Any, inp: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise _Fail("returns_tensor", inp, fields={"type": type(x).__name__})
    return x


def _check_shape(x: Tensor, expected: Sequence[int], what: str, inp: str) -> None:
    if tuple(x.shape) != tuple(expected):
        raise _Fail("shape", inp, _shape(expected), _shape(x), {"what": what})


def _worst(got: Tensor, expected: Tensor) -> tuple[tuple[int, ...], float, float]:
    """Where got and expected differ most (NaN counts as the largest difference)."""
    diff = (got.double() - expected.double()).abs()
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, math.inf), diff)
    flat = int(diff.flatten().argmax())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape))
    return index, float(expected.double()[index]), float(got.double()[index])


def _close(got: Tensor, expected: Tensor, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    return bool(torch.allclose(got.double(), expected.double(), atol=atol, rtol=rtol))


def _compare(prop: str, got: Tensor, expected: Tensor, inp: str, name: str,
             atol: float = 1e-5, rtol: float = 1e-4) -> None:
    """Fail ``prop`` unless got == expected within tolerance, showing the worst entry."""
    if not _close(got, expected, atol, rtol):
        index, want, have = _worst(got, expected)
        where = f"{name}[{', '.join(map(str, index))}]" if index else name
        raise _Fail(prop, inp, f"{where} = {_num(want)}", f"{where} = {_num(have)}")


@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """torch's global generator seeded, for building modules (check() restores it after)."""
    torch.manual_seed(seed)
    yield


def _randn(g: torch.Generator, *shape: int, scale: float = 1.0) -> Tensor:
    return torch.randn(*shape, generator=g) * scale


# -------------------------------------------------------------------- attention and masks


def _grade_attention(f: Any, n: list[int]) -> None:
    from labformer.attention import attention_with_weights
    from labformer.masks import causal_mask

    # (leading dims, T_q, T_k, d_k, d_v, mask kind); d_k >= 2 so that the scale matters
    cases: list[tuple[tuple[int, ...], int, int, int, int, str]] = [
        ((2,), 3, 4, 4, 5, "none"),
        ((), 4, 3, 8, 2, "none"),
        ((2, 3), 2, 5, 2, 3, "none"),
        ((1,), 3, 1, 4, 4, "none"),  # a single key
        ((2,), 3, 3, 4, 2, "causal"),
        ((2, 2), 4, 5, 4, 3, "padding"),
        ((3,), 4, 6, 2, 2, "random"),
        ((2, 3), 3, 4, 4, 4, "one_key"),  # every row may attend exactly one key
        ((2,), 3, 5, 4, 3, "large"),
    ]
    for seed, (lead, tq, tk, dk, dv, kind) in enumerate(cases):
        g = torch.Generator().manual_seed(100 + seed)
        big = 40.0 if kind == "large" else 1.0
        q, k, v = _randn(g, *lead, tq, dk, scale=big), _randn(g, *lead, tk, dk, scale=big), \
            _randn(g, *lead, tk, dv)
        mask: Tensor | None = None
        if kind == "causal":
            mask = causal_mask(tq)
        elif kind == "padding":
            lengths = torch.randint(1, tk + 1, (lead[0],), generator=g)
            lengths[0] = tk - 2
            mask = (torch.arange(tk) < lengths[:, None])[:, None, None, :]  # (B, 1, 1, T_k)
        elif kind == "random":
            mask = torch.rand(*lead, tq, tk, generator=g) < 0.5
            mask[..., torch.randint(0, tk, (tq,), generator=g)[:, None] ==
                 torch.arange(tk)] = True  # one allowed key per row at least
        elif kind == "one_key":
            pick = torch.randint(0, tk, (tq,), generator=g)
            mask = pick[:, None] == torch.arange(tk)  # (T_q, T_k)
        inp = f"q {_shape(q)}, k {_shape(k)}, v {_shape(v)}, mask " + (
            "None" if mask is None else f"{_shape(mask)} ({_t('kind.' + kind)})")
        if mask is not None and mask.dim() == 2 and mask.numel() <= 36:
            inp += f" = {_show(mask)}"
        ref_out, ref_w = attention_with_weights(q.double(), k.double(), v.double(), mask)
        result = _call(f, q, k, v, mask, inp=inp)
        n[0] += 1
        if not isinstance(result, tuple | list) or len(result) != 2:
            raise _Fail("returns_pair", inp, fields={"type": type(result).__name__})
        out, weights = (_tensor(x, inp) for x in result)
        _check_shape(weights, ref_w.shape, _t("the_weights"), inp)
        _check_shape(out, ref_out.shape, _t("the_output"), inp)
        n[0] += 2
        if kind == "large" and not bool(torch.isfinite(out).all() and
                                        torch.isfinite(weights).all()):
            raise _Fail("stable", inp + _t("large_qk"), _t("finite"), _show(weights))
        if mask is not None:
            forbidden = ~mask.expand(ref_w.shape)
            leak = torch.where(forbidden, weights.double().abs().nan_to_num(1.0), 0.0)
            if bool((leak > 1e-6).any()):
                index, _, have = _worst(leak, torch.zeros_like(leak))
                where = f"weights[{', '.join(map(str, index))}]"
                raise _Fail("mask", inp, f"{where} = 0", f"{where} = {_num(have)}")
            n[0] += 1
        _compare("rows_sum_to_one", weights.sum(-1), torch.ones(ref_w.shape[:-1]), inp,
                 "weights.sum(-1)")
        _compare("weights", weights, ref_w, inp, "weights")
        _compare("output", out, ref_out, inp, "out", atol=1e-4)
        n[0] += 3


def _bool_result(f: Any, args: tuple[Any, ...], shape: tuple[int, ...], inp: str) -> Tensor:
    out = _tensor(_call(f, *args, inp=inp), inp)
    if out.dtype != torch.bool:
        raise _Fail("dtype", inp, "torch.bool", str(out.dtype), {"what": _t("the_mask"),
                                                                 "kind": "bool"})
    _check_shape(out, shape, _t("the_mask"), inp)
    return out


def _grade_causal_mask(f: Any, n: list[int]) -> None:
    for size in (1, 2, 3, 5, 8):
        inp = f"T = {size}"
        out = _bool_result(f, (size,), (size, size), inp)
        expected = torch.ones(size, size, dtype=torch.bool).tril()
        n[0] += 3
        if not torch.equal(out, expected):
            show = size <= 5
            raise _Fail("causal", inp, _show(expected) if show else "tril",
                        _show(out) if show else f"row 0 = {_show(out[0].int())}")


def _grade_padding_mask(f: Any, n: list[int]) -> None:
    # (B, T, pad_id): pad ids 0 and others, rows all real, all padding, pads inside a row
    for seed, (batch, length, pad) in enumerate([(2, 5, 4), (3, 4, 0), (1, 1, 7), (4, 6, 1),
                                                 (2, 3, 2)]):
        g = torch.Generator().manual_seed(200 + seed)
        tokens = torch.randint(0, 9, (batch, length), generator=g)
        tokens = torch.where(tokens == pad, tokens + 1, tokens)
        keep = torch.randint(0, length + 1, (batch,), generator=g)
        keep[0], keep[-1] = length, length - 1  # a row with no padding, one with some
        tokens[torch.arange(length) >= keep[:, None]] = pad
        if seed == 4:
            tokens[0, 1] = pad  # a pad id inside a row is padding too
        inp = f"tokens = {tokens.tolist()}, pad_id = {pad}"
        out = _bool_result(f, (tokens, pad), (batch, 1, 1, length), inp)
        n[0] += 3
        expected = (tokens != pad)[:, None, None, :]
        if not torch.equal(out, expected):
            raise _Fail("real_tokens", inp, str(expected.int().flatten(1).tolist()),
                        str(out.int().flatten(1).tolist()))


def _grade_sinusoidal_positions(f: Any, n: list[int]) -> None:
    from labformer.positional import sinusoidal_positions

    for max_len, d_model in ((1, 2), (6, 4), (12, 8), (40, 16), (7, 6), (30, 64)):
        inp = f"max_len = {max_len}, d_model = {d_model}"
        out = _tensor(_call(f, max_len, d_model, inp=inp), inp)
        if not out.is_floating_point():
            raise _Fail("dtype", inp, "float", str(out.dtype),
                        {"what": _t("the_table"), "kind": _t("floating")})
        _check_shape(out, (max_len, d_model), _t("the_table"), inp)
        expected = sinusoidal_positions(max_len, d_model, dtype=torch.float64)
        n[0] += 2
        if not _close(out[0], expected[0]):
            raise _Fail("position_zero", inp, f"PE[0] = {_show(expected[0, :8])}",
                        f"PE[0] = {_show(out[0, :8])}")
        _compare("values", out, expected, inp, "PE", atol=1e-4)
        n[0] += 2


# ------------------------------------------------------------------------------ layer norm


def _grade_layer_norm(f: Any, n: list[int]) -> None:
    shapes: list[tuple[int, ...]] = [(4, 8), (2, 3, 5), (3, 2), (2, 2, 2, 6)]
    for seed, shape in enumerate(shapes):
        g = torch.Generator().manual_seed(300 + seed)
        d = shape[-1]
        x = _randn(g, *shape, scale=3.0) + 2.0
        ones, zeros = torch.ones(d), torch.zeros(d)
        inp = f"x {_shape(x)}{_t('values_around')}, weight = ones({d}), bias = zeros({d})"
        out = _tensor(_call(f, x, ones, zeros, 1e-5, inp=inp), inp)
        _check_shape(out, shape, _t("the_output"), inp)
        _compare("zero_mean", out.mean(-1), torch.zeros(shape[:-1]), inp, "out.mean(-1)",
                 atol=1e-4)
        _compare("unit_variance", out.double().var(-1, unbiased=False),
                 torch.ones(shape[:-1]), inp, "out.var(-1, unbiased=False)", atol=1e-3)
        weight, bias = _randn(g, d) * 0.5 + 1.0, _randn(g, d) * 0.5
        inp = f"x {_shape(x)}, weight = {_show(weight)}, bias = {_show(bias)}"
        out = _tensor(_call(f, x, weight, bias, 1e-5, inp=inp), inp)
        expected = F.layer_norm(x.double(), (d,), weight.double(), bias.double(), 1e-5)
        _compare("affine", out, expected, inp, "out", atol=1e-4)
        n[0] += 4
    # eps: nearly constant rows (variance far below eps) and a constant row
    g = torch.Generator().manual_seed(310)
    # centred near 0, so that computing var as E[x²] - mean² loses no precision to float32
    x = 0.01 + _randn(g, 3, 4, scale=1e-3)
    x[1] = 0.25
    weight, bias = _randn(g, 4) * 0.5 + 1.0, _randn(g, 4) * 0.5
    for eps in (1e-5, 1e-2):
        inp = (f"x = {_show(x)}{_t('nearly_equal')}, weight = {_show(weight)}, "
               f"bias = {_show(bias)}, eps = {eps}")
        out = _tensor(_call(f, x, weight, bias, eps, inp=inp), inp)
        expected = F.layer_norm(x.double(), (4,), weight.double(), bias.double(), eps)
        _compare("eps", out, expected, inp, "out", atol=1e-4)
        n[0] += 1
    # a single feature: every vector is its own mean, the output is the bias
    x = _randn(g, 3, 1)
    inp = f"x = {_show(x)} (d = 1), weight = [2.0], bias = [0.5]"
    out = _tensor(_call(f, x, torch.tensor([2.0]), torch.tensor([0.5]), 1e-5, inp=inp), inp)
    _compare("matches", out, torch.full((3, 1), 0.5), inp, "out", atol=1e-4)
    n[0] += 1


# --------------------------------------------------------------------- multi-head attention


_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")


def _first_output(result: Any, inp: str) -> Tensor:
    if isinstance(result, tuple | list) and result:
        result = result[0]
    return _tensor(result, inp)


def _grade_multi_head_attention(cls: Any, n: list[int]) -> None:
    from labformer.masks import causal_mask
    from labformer.multihead import MultiHeadAttention

    # (d_model, heads, B, T_q, T_k, kind): one head first, then several, cross, masks
    cases = [(8, 1, 2, 3, 3, "self"), (4, 1, 1, 2, 2, "self"), (8, 2, 2, 4, 4, "self"),
             (12, 3, 1, 5, 5, "self"), (8, 2, 2, 3, 3, "cross"), (4, 1, 2, 2, 4, "cross"),
             (8, 4, 2, 3, 5, "cross"), (12, 2, 2, 4, 6, "padding"), (8, 2, 2, 4, 4, "causal")]
    for seed, (d, h, batch, tq, tk, kind) in enumerate(cases):
        with _seeded(400 + seed):
            ref = MultiHeadAttention(d, h).eval()
        inp = f"{_name(cls)}(d_model={d}, num_heads={h})"
        attempt = _call(cls, d, h, inp=inp)
        if not isinstance(attempt, nn.Module):
            raise _Fail("projections", inp, _t("an_nn_module"), type(attempt).__name__)
        for name in _PROJECTIONS:
            layer = getattr(attempt, name, None)
            if not isinstance(layer, nn.Linear) or layer.weight.shape != (d, d) \
                    or layer.bias is None:
                got = "missing" if layer is None else repr(layer)
                raise _Fail("projections", inp, f"{name} = nn.Linear({d}, {d})",
                            f"{name} = {got}")
            _call(layer.load_state_dict, getattr(ref, name).state_dict(), inp=inp)
        attempt.eval()
        n[0] += 1
        g = torch.Generator().manual_seed(450 + seed)
        query = _randn(g, batch, tq, d)
        key = query if kind in ("self", "causal") else _randn(g, batch, tk, d)
        value = query if kind in ("self", "causal") else _randn(g, batch, tk, d)
        mask: Tensor | None = None
        if kind == "causal":
            mask = causal_mask(tq)
        elif kind == "padding":
            lengths = torch.tensor([tk - 2, tk][:batch])
            mask = (torch.arange(tk) < lengths[:, None])[:, None, None, :]
        inp += (f"; query {_shape(query)}, " +
                (_t("key_value_query") if key is query else _t("key_value", shape=_shape(key))) +
                ("" if mask is None else f", mask {_shape(mask)} ({_t('kind.' + kind)})"))
        kwargs = {"mask": mask}
        out = _first_output(_call(attempt, query, key, value, inp=inp, **kwargs), inp)
        _check_shape(out, (batch, tq, d), _t("the_output"), inp)
        n[0] += 1
        expected = ref(query, key, value, mask=mask)[0]
        if mask is not None and kind == "padding":
            # keys (and values) the mask forbids must not matter
            noise = _randn(g, batch, tk, d, scale=3.0) * (~mask[:, 0, 0, :, None])
            changed = _first_output(_call(attempt, query, key + noise, value + noise,
                                          inp=inp, **kwargs), inp)
            _compare("mask", changed, out, inp + _t("changed_kv"),
                     "out", atol=1e-4)
            n[0] += 1
        prop = {"self": "one_head" if h == 1 else "heads", "causal": "mask",
                "padding": "mask", "cross": "cross"}[kind]
        _compare(prop, out, expected, inp, "out", atol=1e-4)
        n[0] += 1


# ---------------------------------------------------------------------------------- the loss


def _grade_label_smoothed_cross_entropy(f: Any, n: list[int]) -> None:
    # (shape of target, V, smoothing, ignore_index, with padding)
    cases: list[tuple[tuple[int, ...], int, float, int, bool]] = [
        ((6,), 5, 0.0, -100, False),
        ((2, 4), 7, 0.0, 0, False),
        ((2, 5), 6, 0.0, 0, True),
        ((8,), 4, 0.0, 3, True),
        ((2, 3), 5, 0.1, -100, False),
        ((7,), 3, 0.4, -100, False),
        ((3, 4), 6, 0.2, 0, True),
        ((2, 6), 9, 0.1, 2, True),
    ]
    for seed, (shape, vocab, eps, ignore, pads) in enumerate(cases):
        g = torch.Generator().manual_seed(500 + seed)
        logits = _randn(g, *shape, vocab, scale=2.0)
        target = torch.randint(0, vocab, shape, generator=g)
        if ignore >= 0:  # no accidental padding where there should be none
            target = torch.where(target == ignore, (target + 1) % vocab, target)
        if pads:
            where = torch.rand(shape, generator=g) < 0.4
            where.view(-1)[0], where.view(-1)[-1] = False, True
            target = torch.where(where, torch.full_like(target, ignore), target)
        inp = (f"logits {_shape(logits)}, target = {target.tolist()}, smoothing = {eps}, "
               f"ignore_index = {ignore}")
        loss = _tensor(_call(f, logits, target, eps, ignore, inp=inp), inp)
        if loss.numel() != 1 or loss.dim() > 1:
            raise _Fail("scalar", inp, "shape ()", f"shape {_shape(loss)}")
        n[0] += 1
        expected = F.cross_entropy(logits.reshape(-1, vocab).double(), target.reshape(-1),
                                   label_smoothing=eps, ignore_index=ignore)
        prop = "matches"
        if eps == 0.0:
            prop = "padding" if pads else "cross_entropy"
        elif not pads:
            prop = "smoothing"
        _compare(prop, loss.reshape(()), expected, inp, "loss", atol=1e-5)
        n[0] += 1
        if pads:  # logits at ignored positions must not matter
            noisy = logits + _randn(g, *shape, vocab, scale=5.0) * (target == ignore)[..., None]
            again = _tensor(_call(f, noisy, target, eps, ignore, inp=inp), inp)
            _compare("padding", again.reshape(()), expected, inp + _t("changed_logits"),
                     "loss", atol=1e-5)
            n[0] += 1


# -------------------------------------------------------------------------------- decoding


class _StepTable:
    """A fixed random language model over V tokens: log-probabilities keyed on the prefix.

    BOS is made very unlikely (so no right attempt depends on whether BOS may be generated);
    EOS gets ``eos_bias[len(prefix) - 1]`` added to its logit, which sets where outputs end.
    Every call is checked: the prefix starts with BOS, holds no EOS after it, and asks for
    token number ``limit`` at most.
    """

    def __init__(self, seed: int, vocab: int, bos: int, eos: int, eos_bias: Sequence[float],
                 limit: int, exercise: str, inp: str) -> None:
        self.seed, self.vocab, self.bos, self.eos = seed, vocab, bos, eos
        self.eos_bias, self.limit, self.exercise, self.inp = list(eos_bias), limit, exercise, inp
        self.table: dict[tuple[int, ...], list[float]] = {}
        self.asked: list[tuple[int, ...]] = []  # the prefixes step was called with, after BOS

    def log_probs(self, prefix: tuple[int, ...]) -> list[float]:
        if prefix not in self.table:
            r = random.Random(f"{self.seed}:{prefix}")
            logits = [r.gauss(0.0, 1.5) for _ in range(self.vocab)]
            logits[self.bos] -= 30.0
            logits[self.eos] += self.eos_bias[min(len(prefix) - 1, len(self.eos_bias) - 1)]
            top: float = max(logits)
            norm = top + math.log(sum(math.exp(v - top) for v in logits))
            self.table[prefix] = [v - norm for v in logits]
        return self.table[prefix]

    def __call__(self, prefix: Any) -> Tensor:
        ids = _ids(prefix, "prefix", self.inp)
        if not ids or ids[0] != self.bos:
            raise _Fail("prefix", self.inp, f"step([{self.bos}, ...])  (BOS = {self.bos})",
                        f"step({ids})")
        if self.eos in ids[1:]:
            prop = "eos_ends" if self.exercise == "beam_search" else "stops_at_eos"
            raise _Fail(prop, self.inp, _t("no_step_after_eos", eos=self.eos), f"step({ids})")
        if len(ids) - 1 >= self.limit:
            raise _Fail("max_len", self.inp, _t("at_most", n=self.limit),
                        _t("asks_for", ids=ids, n=len(ids)))
        self.asked.append(tuple(ids[1:]))
        return torch.tensor(self.log_probs(tuple(ids)), dtype=torch.float64)

    def score(self, tokens: Sequence[int]) -> float:
        """The summed log-probability of ``tokens`` after BOS."""
        prefix = [self.bos]
        total = 0.0
        for t in tokens:
            total += self.log_probs(tuple(prefix))[t]
            prefix.append(t)
        return total


def _ids(x: Any, what: str, inp: str) -> list[int]:
    """A list or tuple of ints, or a 1-D integer tensor, as a list of ints."""
    if isinstance(x, Tensor) and x.dim() == 1 and not x.is_floating_point():
        return [int(v) for v in x.tolist()]
    if isinstance(x, list | tuple) and all(isinstance(v, int) or (isinstance(v, Tensor) and
                                                                   v.numel() == 1) for v in x):
        return [int(v) for v in x]
    if what == "prefix":
        raise _Fail("prefix", inp, _t("list_of_ints"), type(x).__name__)
    raise _Fail("returns_ids", inp, fields={"type": type(x).__name__})


def _greedy_reference(step: _StepTable, max_len: int) -> list[int]:
    out: list[int] = []
    while len(out) < max_len:
        lp = step.log_probs((step.bos, *out))
        out.append(max(range(step.vocab), key=lambda t: lp[t]))
        if out[-1] == step.eos:
            break
    return out


def _grade_greedy_decode(f: Any, n: list[int]) -> None:
    # (V, BOS, EOS, max_len, EOS logit bias by length): some end early, some hit max_len
    cases = [(5, 1, 2, 6, [-2.0, -1.0, 0.5, 3.0]), (6, 0, 5, 4, [-9.0]),
             (4, 3, 0, 1, [-1.0]), (7, 2, 1, 7, [-1.0, 0.0, 1.0, 2.0, 3.0]),
             (5, 4, 3, 3, [5.0]), (8, 1, 6, 5, [-3.0, -3.0, 2.0])]
    for seed, (vocab, bos, eos, max_len, bias) in enumerate(cases):
        inp = _t("step_table", vocab=vocab, seed=600 + seed, bos=bos, eos=eos) + \
            f", max_len = {max_len}"
        step = _StepTable(600 + seed, vocab, bos, eos, bias, max_len, "greedy_decode", inp)
        expected = _greedy_reference(step, max_len)
        inp += _t("greedy_is", ids=expected)
        step.inp = inp
        got = _ids(_call(f, step, bos, eos, max_len, inp=inp), "result", inp)
        n[0] += 1
        if got == expected:
            n[0] += 1
            continue
        if got[:1] == [bos] and got[1:] == expected:
            raise _Fail("no_bos", inp, str(expected), str(got))
        if expected[-1] == eos and got == expected[:-1]:
            raise _Fail("keeps_eos", inp, str(expected), str(got))
        asked = set(step.asked)
        unasked = next((got[:i] for i in range(len(got)) if tuple(got[:i]) not in asked), None)
        if unasked is not None:  # a token chosen without the prefix before it
            calls = ", ".join(f"step({[bos, *p]})" for p in step.asked[:4])
            raise _Fail("prefix", inp, f"step({[bos, *unasked]})",
                        _t("calls", calls=calls, ids=got))
        # (a result past max_len, or going on after EOS, made step fail already)
        i = next((i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b),
                 min(len(got), len(expected)))
        lp = step.log_probs((bos, *expected[:i]))
        have = _t("nothing") if i >= len(got) else str(got[i]) if not 0 <= got[i] < vocab \
            else _t("token_lp", token=got[i], lp=_num(lp[got[i]]))
        raise _Fail("argmax", inp, _t("after_prefix", prefix=[bos, *expected[:i]],
                                      token=expected[i], lp=_num(lp[expected[i]])),
                    have + _t("result", ids=got))


@dataclass
class _BeamResult:
    best: list[int]
    pool: dict[tuple[int, ...], float]  # the finished and the last alive: their scores
    expanded: set[tuple[int, ...]]  # every hypothesis the beam extends, at any step


def _beam_reference(step: _StepTable, beam_size: int, max_len: int, alpha: float,
                    mistake: str = "") -> _BeamResult:
    """Beam search exactly as the exercise states it, or with one classic mistake:

    ``per_parent``: the beam_size best children of each hypothesis kept, no pruning across
    parents; ``finished_slots``: hypotheses ending in EOS stay in the beam (not extended),
    taking slots at every later step, and the result is the best of the final beam;
    ``length_penalty``: the result chosen by log p alone; ``eos_in_length``: L not counting
    the final EOS; ``forgets_finished``: the result chosen among the alive alone.
    """
    alive: list[tuple[list[int], float]] = [([], 0.0)]
    finished: list[tuple[list[int], float]] = []
    expanded: set[tuple[int, ...]] = set()
    for _ in range(max_len):
        expanded.update(tuple(tokens) for tokens, _ in alive)
        kept: list[tuple[list[int], float]] = []
        for tokens, lp in alive:
            children = [(tokens + [t], lp + step.log_probs((step.bos, *tokens))[t])
                        for t in range(step.vocab)]
            if mistake == "per_parent":
                children.sort(key=lambda c: c[1], reverse=True)
                children = children[:beam_size]
            kept += children
        if mistake == "finished_slots":
            kept += finished  # the finished compete for the slots again
            finished = []
        kept.sort(key=lambda c: c[1], reverse=True)
        if mistake != "per_parent":
            kept = kept[:beam_size]
        finished += [c for c in kept if c[0][-1] == step.eos]
        alive = [c for c in kept if c[0][-1] != step.eos]
        if not alive:
            break

    def score(tokens: Sequence[int], lp: float) -> float:
        if mistake == "length_penalty":
            return lp
        length = len(tokens) - (mistake == "eos_in_length" and tokens[-1:] == [step.eos])
        return lp / float(((5.0 + length) / 6.0) ** alpha)

    chosen = alive if mistake == "forgets_finished" and alive else finished + alive
    pool = {tuple(tokens): score(tokens, lp) for tokens, lp in chosen}
    best = max(pool, key=lambda tokens: pool[tokens])
    return _BeamResult(list(best), pool, expanded)


#: The classic beam mistakes whose result the grader recognises, in the order it tries them.
BEAM_MISTAKES = ("per_parent", "finished_slots", "length_penalty", "eos_in_length",
                 "forgets_finished")


# (table seed, V, BOS, EOS, beam_size, max_len, alpha, EOS logit bias by length). The seeds
# are chosen so that each case tells: with beam_size > 1 the beam's answer is not greedy's, nor
# that of a beam ranked by its last token; with alpha > 0 the length penalty changes the winner
# (tests/notebooks/test_exercises.py checks both); in the one but last, a beam pruned per parent
# (the beam_size best children of each hypothesis, no pruning across parents) finds another
# answer; in the last case EOS never makes it into the beam.
_BEAM_CASES: list[tuple[int, int, int, int, int, int, float, list[float]]] = [
    (1, 5, 1, 2, 1, 4, 0.0, [-1.0, 0.0, 1.0]),
    (6, 6, 0, 3, 3, 4, 0.0, [-1.0, -0.5, 0.5, 1.0]),
    (17, 5, 4, 2, 2, 5, 0.0, [0.0, 0.5, 1.0]),
    (12, 7, 1, 2, 4, 3, 0.0, [-1.5, 0.0, 0.0]),
    (332, 6, 1, 0, 3, 5, 1.0, [1.0, -1.0, 0.0, 1.0]),
    (563, 6, 2, 4, 2, 6, 0.8, [0.0, -0.5, 0.0, 0.5, 1.0]),
    (62, 6, 0, 5, 4, 4, 2.0, [0.5, 0.0, 0.5]),
    (289, 5, 3, 1, 3, 5, 1.5, [1.0, 0.0, 0.5, 1.0]),
    (4, 5, 1, 2, 2, 5, 0.0, [-0.5, 0.0, 0.5]),
    (24, 6, 1, 2, 3, 3, 0.0, [-6.0]),
]


def _grade_beam_search(f: Any, n: list[int]) -> None:
    for seed, vocab, bos, eos, k, max_len, alpha, bias in _BEAM_CASES:
        inp = _t("step_table", vocab=vocab, seed=seed, bos=bos, eos=eos) + \
            f", beam_size = {k}, max_len = {max_len}, alpha = {alpha}"
        step = _StepTable(seed, vocab, bos, eos, bias, max_len, "beam_search", inp)
        ref = _beam_reference(step, k, max_len, alpha)
        got = _ids(_call(f, step, bos, eos, k, max_len, alpha, inp=inp), "result", inp)
        n[0] += 1
        # however right the answer, no step may extend more than beam_size hypotheses
        widths = Counter(len(p) for p in set(step.asked))
        length, wide = min(((n_, w) for n_, w in widths.items() if w > k), default=(0, 0))
        if wide > k:  # the first step that extended too many
            raise _Fail("per_parent", inp, _t("beam_width", k=k),
                        _t("beam_grew", n=wide, length=length))
        n[0] += 1
        if got == ref.best:
            n[0] += 1
            continue
        want = _t("hypothesis", ids=ref.best, lp=_num(step.score(ref.best)),
                  score=_num(ref.pool[tuple(ref.best)]))
        if len(got) > max_len:
            raise _Fail("max_len", inp, want, str(got))
        # got with its log p and score where the beam holds it (its ids are then valid)
        scored = _t("hypothesis", ids=got, lp=_num(step.score(got)),
                    score=_num(ref.pool[tuple(got)])) if tuple(got) in ref.pool else str(got)
        asked = set(step.asked)
        for mistake in BEAM_MISTAKES:  # the search is that of a classic mistake: name it
            variant = _beam_reference(step, k, max_len, alpha, mistake)
            if variant.best == got and variant.expanded == asked:
                raise _Fail(mistake, inp, want, scored)
        stray = next((p for p in step.asked if p not in ref.expanded), None)
        if stray is not None or tuple(got) not in ref.pool:
            held = ", ".join(str(list(t)) for t in sorted(ref.pool, key=ref.pool.__getitem__,
                                                           reverse=True)[:4])
            extended = "" if stray is None else _t("extended", ids=list(stray))
            raise _Fail("pool", inp, want + _t("beam_holds", held=held), f"{got}{extended}")
        raise _Fail("final_choice", inp, want, scored)


# ---------------------------------------------------------------------------------- layers


def _randomise(module: nn.Module, g: torch.Generator) -> None:
    """Give the norms (and biases) values far from their defaults, so that mix-ups show."""
    for name, p in module.named_parameters():
        if p.dim() == 1:
            p.copy_(_randn(g, *p.shape, scale=0.5) + (1.0 if "norm" in name and
                                                       name.endswith("weight") else 0.0))


def _load_layer(cls: Any, ref: nn.Module, d: int, h: int, d_ff: int) -> nn.Module:
    inp = f"{_name(cls)}(d_model={d}, num_heads={h}, d_ff={d_ff})"
    attempt = _call(cls, d, h, d_ff, inp=inp)
    if not isinstance(attempt, nn.Module):
        raise _Fail("parameter_names", inp, _t("an_nn_module"), type(attempt).__name__)
    state = dict(ref.named_parameters())
    own = dict(attempt.named_parameters())  # the attempt's buffers, if any, are its own
    missing = sorted(set(state) - set(own))
    unexpected = sorted(set(own) - set(state))
    if missing or unexpected:
        none = _t("nothing_listed")
        raise _Fail("parameter_names", inp, f"{_t('missing')}: {', '.join(missing) or none}",
                    f"{_t('unexpected')}: {', '.join(unexpected) or none}")
    wrong = [f"{k} {tuple(own[k].shape)}, not {tuple(v.shape)}" for k, v in state.items()
             if own[k].shape != v.shape]
    if wrong:
        raise _Fail("parameter_names", inp, _t("param_shapes"),
                    "; ".join(wrong[:3]))
    _call(attempt.load_state_dict, state, strict=False, inp=inp)
    return attempt.eval()


def _variants(ref: nn.Module) -> Iterator[tuple[str, dict[str, str], nn.Module]]:
    """Copies of ``ref`` with a classic mistake: Pre-LN, or a sublayer without its residual."""
    import copy

    pre = copy.deepcopy(ref)
    subs = [name for name, _ in ref.named_children() if name.startswith("sublayer")]
    for name in subs:
        getattr(pre, name).norm_first = True
    yield "post_ln", {}, pre
    for which in [*subs, None]:
        variant = copy.deepcopy(ref)
        for other in subs if which is None else [which]:
            getattr(variant, other).residual = False
        yield "residual", {"which": which or _t("every_sublayer")}, variant


def _compare_layer(out: Tensor, expected: Tensor, run_ref: Callable[[nn.Module], Tensor],
                   ref: nn.Module, inp: str) -> None:
    if _close(out, expected, atol=1e-4):
        return
    for prop, fields, variant in _variants(ref):
        if _close(out, run_ref(variant), atol=1e-4):
            index, want, have = _worst(out, expected)
            where = f"out[{', '.join(map(str, index))}]"
            raise _Fail(prop, inp, f"{where} = {_num(want)}", f"{where} = {_num(have)}", fields)
    _compare("matches", out, expected, inp, "out", atol=1e-4)


def _grade_encoder_layer(cls: Any, n: list[int]) -> None:
    from labformer.layers import EncoderLayer

    for seed, (d, h, d_ff, batch, length) in enumerate([(8, 2, 16, 2, 4), (12, 3, 8, 1, 5),
                                                        (8, 1, 12, 3, 1), (16, 4, 24, 2, 6)]):
        g = torch.Generator().manual_seed(800 + seed)
        with _seeded(800 + seed):
            ref = EncoderLayer(d, h, d_ff).eval()
        _randomise(ref, g)
        attempt = _load_layer(cls, ref, d, h, d_ff)
        n[0] += 1
        x = _randn(g, batch, length, d)
        built = f"{_name(cls)}(d_model={d}, num_heads={h}, d_ff={d_ff})"
        inp = f"{built}; x {_shape(x)}, mask None"
        out = _first_output(_call(attempt, x, mask=None, inp=inp), inp)
        _check_shape(out, x.shape, _t("the_output"), inp)
        _compare_layer(out, ref(x), lambda m: m(x), ref, inp)  # noqa: B023 (used at once)
        n[0] += 2
        if length < 3:
            continue
        lengths = torch.tensor([length - 2, length, length - 1][:batch])
        mask = (torch.arange(length) < lengths[:, None])[:, None, None, :]  # (B, 1, 1, T)
        inp = f"{built}; x {_shape(x)}, mask {_shape(mask)} " \
              f"({_t('kind.padding')}) " \
              f"= {mask.int().flatten(1).tolist()}"
        out = _first_output(_call(attempt, x, mask=mask, inp=inp), inp)
        real = mask[:, 0, 0, :, None]
        noisy = x + _randn(g, *x.shape, scale=3.0) * ~real
        again = _first_output(_call(attempt, noisy, mask=mask, inp=inp), inp)
        _compare("mask", again * real, out * real, inp + _t("changed_x"), "out", atol=1e-4)
        expected = ref(x, mask=mask)
        _compare_layer(out, expected, lambda m: m(x, mask=mask), ref, inp)  # noqa: B023
        n[0] += 2


def _cross_attention_masked_by_tgt(attempt: nn.Module, ref: nn.Module, d: int, length: int,
                                   g: torch.Generator) -> bool:
    """Whether the attempt masks its cross-attention with tgt_mask (and perhaps its
    self-attention with memory_mask), tried on a memory as long as x, where that mix-up runs."""
    from labformer.masks import causal_mask

    x, memory = _randn(g, 2, length, d), _randn(g, 2, length, d)
    tgt_mask = causal_mask(length)
    memory_mask = (torch.arange(length) < torch.tensor([length - 1, length])[:, None]
                   )[:, None, None, :]
    try:
        out = _first_output(attempt(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask), "")
    except Exception:  # the probe is a guess: any failure means "not this mistake"
        return False
    if out.shape != x.shape or _close(out, ref(x, memory, tgt_mask=tgt_mask,
                                               memory_mask=memory_mask), atol=1e-4):
        return False
    mixed = (ref(x, memory, tgt_mask=tgt_mask, memory_mask=tgt_mask),  # cross gets tgt_mask
             ref(x, memory, tgt_mask=memory_mask, memory_mask=tgt_mask))  # the two swapped
    return any(_close(out, m, atol=1e-4) for m in mixed)


def _grade_decoder_layer(cls: Any, n: list[int]) -> None:
    from labformer.layers import DecoderLayer
    from labformer.masks import causal_mask

    for seed, (d, h, d_ff, batch, length, src) in enumerate([(8, 2, 16, 2, 4, 5),
                                                             (12, 3, 8, 1, 5, 3),
                                                             (8, 1, 12, 2, 3, 4),
                                                             (16, 4, 24, 2, 6, 6)]):
        g = torch.Generator().manual_seed(900 + seed)
        with _seeded(900 + seed):
            ref = DecoderLayer(d, h, d_ff).eval()
        _randomise(ref, g)
        attempt = _load_layer(cls, ref, d, h, d_ff)
        built = f"{_name(cls)}(d_model={d}, num_heads={h}, d_ff={d_ff})"
        n[0] += 1
        x, memory = _randn(g, batch, length, d), _randn(g, batch, src, d)
        inp = f"{built}; x {_shape(x)}, memory {_shape(memory)}, {_t('no_masks')}"
        nomask = {"tgt_mask": None, "memory_mask": None}
        out = _first_output(_call(attempt, x, memory, inp=inp, **nomask), inp)
        _check_shape(out, x.shape, _t("the_output"), inp)
        other = _first_output(_call(attempt, x, _randn(g, batch, src, d), inp=inp, **nomask),
                              inp)
        if _close(other, out, atol=1e-4):
            raise _Fail("uses_memory", inp + _t("another_memory"), _t("another_output"),
                        _t("same_output"))
        _compare_layer(out, ref(x, memory), lambda m: m(x, memory), ref, inp)  # noqa: B023
        n[0] += 3
        # the causal mask: changing the last position changes no earlier output
        tgt_mask = causal_mask(length)
        lengths = torch.tensor([src - 1, src][:batch])
        memory_mask = (torch.arange(src) < lengths[:, None])[:, None, None, :]
        inp = (f"{built}; x {_shape(x)}, memory {_shape(memory)}, tgt_mask = "
               f"causal_mask({length}), memory_mask {_shape(memory_mask)} = "
               f"{memory_mask.int().flatten(1).tolist()}")
        masks = {"tgt_mask": tgt_mask, "memory_mask": memory_mask}
        probe = torch.Generator().manual_seed(950 + seed)
        try:
            out = _first_output(_call(attempt, x, memory, inp=inp, **masks), inp)
            later = x.clone()
            later[:, -1] += _randn(g, batch, d, scale=3.0)
            again = _first_output(_call(attempt, later, memory, inp=inp, **masks), inp)
            _compare("causal", again[:, :-1], out[:, :-1], inp + _t("changed_last"), "out",
                     atol=1e-4)
            hidden = memory + _randn(g, *memory.shape, scale=3.0) * \
                ~memory_mask[:, 0, 0, :, None]
            again = _first_output(_call(attempt, x, hidden, inp=inp, **masks), inp)
            _compare("memory_mask", again, out, inp + _t("changed_memory"), "out", atol=1e-4)
            _compare_layer(out, ref(x, memory, **masks),
                           lambda m: m(x, memory, **masks), ref, inp)  # noqa: B023
        except _Fail as fail:  # a shape error, or a mask in the wrong place: which one?
            if fail.prop in ("raised", "causal", "memory_mask", "matches") and \
                    _cross_attention_masked_by_tgt(attempt, ref, d, length, probe):
                raise _Fail("cross_mask", fail.input,
                            "self_attn(x, x, x, tgt_mask), "
                            "cross_attn(x, memory, memory, memory_mask)",
                            fail.got or fail.fields.get("error", ""), line=fail.line) from None
            raise
        n[0] += 3


# ----------------------------------------------------------------------- the language model


def _grade_lm_causal_mask(f: Any, n: list[int]) -> None:
    from labformer.masks import causal_mask

    for size, offset in ((1, 0), (3, 0), (4, 2), (1, 5), (2, 3), (5, 1), (3, 4)):
        inp = f"T = {size}, offset = {offset}"
        out = _bool_result(f, (size, offset), (size, offset + size), inp)
        expected = causal_mask(offset + size)[offset:]
        n[0] += 3
        if not torch.equal(out, expected):
            prop = "offset" if offset and torch.equal(out, causal_mask(offset + size)[:size]) \
                else "causal"
            raise _Fail(prop, inp, _show(expected), _show(out))


def _grade_top_k_filter(f: Any, n: list[int]) -> None:
    from labformer.sampling import next_token_probs

    # (leading dims, V, k, kind): a tie at the last place, large logits, k = V, k = 1
    cases: list[tuple[tuple[int, ...], int, int, str]] = [
        ((), 5, 2, "random"), ((2,), 6, 1, "random"), ((3,), 8, 3, "random"),
        ((2, 2), 7, 7, "random"), ((), 6, 2, "tie"), ((2,), 9, 4, "large"),
        ((3,), 5, 4, "tie"),
    ]
    for seed, (lead, vocab, k, kind) in enumerate(cases):
        g = torch.Generator().manual_seed(1000 + seed)
        logits = _randn(g, *lead, vocab, scale=50.0 if kind == "large" else 2.0)
        if kind == "tie":  # the k-th and (k+1)-th largest are equal, at ids in either order
            flat = logits.reshape(-1, vocab)
            for row in flat:
                order = row.argsort(descending=True)
                row[order[k]] = row[order[k - 1]]
        inp = f"logits = {_show(logits)}, k = {k}"
        expected = next_token_probs(logits.double(), top_k=k)
        # the attempt gets a copy: one that writes -inf into its logits in place (as
        # nanoGPT's sampling does) is graded on what it returns
        out = _tensor(_call(f, logits.clone(), k, inp=inp), inp)
        _check_shape(out, logits.shape, _t("the_output"), inp)
        n[0] += 2
        got, want = out.double().reshape(-1, vocab), expected.reshape(-1, vocab)
        rows = logits.double().reshape(-1, vocab)
        for row, (o, e, lg) in enumerate(zip(got, want, rows, strict=True)):
            if abs(float(o.sum()) - 1.0) > 1e-5:
                raise _Fail("sums_to_one", inp, _t("row_sum", row=row, total=1),
                            _t("row_sum", row=row, total=_num(float(o.sum()))))
            kept = [int(i) for i in (o > 0).nonzero().flatten()]
            wanted = [int(i) for i in (e > 0).nonzero().flatten()]
            if len(kept) != len(wanted):
                kth = float(lg[wanted].min())
                tied = [int(i) for i in (lg >= kth).nonzero().flatten()]
                zeroed = lg.masked_fill(e == 0, 0.0).softmax(-1)
                prop = "count"
                if kept == tied:  # every token at least the k-th value: a threshold
                    prop = "ties_kept"
                elif _close(o, zeroed):  # the dropped logits set to 0, not to -inf
                    prop = "zero_logits"
                raise _Fail(prop, inp, _t("kept_count", n=len(wanted), row=row),
                            _t("kept_count", n=len(kept), row=row) + ": " + _show(o.float()))
            if kept != wanted:
                raise _Fail("ties" if kind == "tie" else "most_probable", inp,
                            _t("kept", ids=wanted), _t("kept", ids=kept))
        n[0] += 3
        _compare("matches", out, expected, inp, "probs", atol=1e-5)
        n[0] += 1


GRADERS: dict[str, Callable[[Any, list[int]], None]] = {
    "attention": _grade_attention,
    "causal_mask": _grade_causal_mask,
    "padding_mask": _grade_padding_mask,
    "sinusoidal_positions": _grade_sinusoidal_positions,
    "layer_norm": _grade_layer_norm,
    "multi_head_attention": _grade_multi_head_attention,
    "label_smoothed_cross_entropy": _grade_label_smoothed_cross_entropy,
    "greedy_decode": _grade_greedy_decode,
    "beam_search": _grade_beam_search,
    "encoder_layer": _grade_encoder_layer,
    "decoder_layer": _grade_decoder_layer,
    "lm_causal_mask": _grade_lm_causal_mask,
    "top_k_filter": _grade_top_k_filter,
}
NAMES: tuple[str, ...] = tuple(GRADERS)
"""The exercises, in the book's order."""
