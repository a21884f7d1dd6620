"""labformer.book.exercises: right attempts pass, classic mistakes are rejected with their property.

The attempts are in tests/exercise_attempts.py, written from the exercises' statements alone;
tests/mutants.py (make test-mutants) grades the same wrong attempts and prints their messages.
"""

from __future__ import annotations

import inspect
import math
import re
import string
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from labformer.book import exercises
from labformer.book.exercises import graders

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import exercise_attempts as attempts  # noqa: E402

ISSUE_NAMES = ("attention", "causal_mask", "padding_mask", "sinusoidal_positions", "layer_norm",
               "multi_head_attention", "label_smoothed_cross_entropy", "greedy_decode",
               "beam_search", "encoder_layer", "decoder_layer", "lm_causal_mask",
               "top_k_filter")


def _mismatch(name: str, attempt: Any, lang: str | None = None) -> exercises.Mismatch:
    with pytest.raises(exercises.Mismatch) as info:
        exercises.check(name, attempt, lang=lang, quiet=True)
    return info.value


@pytest.fixture(autouse=True)
def _no_transpose_warning():
    with warnings.catch_warnings():  # attention_k_dot_T's x.T on a batch, on purpose
        warnings.filterwarnings("ignore", message="The use of `x.T`", category=UserWarning)
        yield


def test_names_are_the_issues_and_every_one_has_attempts():
    assert exercises.NAMES == ISSUE_NAMES
    assert set(attempts.RIGHT) == set(exercises.NAMES)
    per_exercise = Counter(w.exercise for w in attempts.WRONG)
    assert set(per_exercise) == set(exercises.NAMES)
    assert min(per_exercise.values()) >= 3, per_exercise


@pytest.mark.parametrize("name", ISSUE_NAMES)
def test_a_right_attempt_passes(name, capsys):
    assert exercises.check(name, attempts.RIGHT[name]) is None  # no Out: line in a notebook
    assert exercises.passes(name, attempts.RIGHT[name], quiet=True) is True
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"✓ {name}: all ") and line.endswith(" checks passed.")
    assert int(line.split("all ")[1].split()[0]) >= 10  # many checks, not one fixed input


@pytest.mark.parametrize("wrong", attempts.WRONG, ids=lambda w: f"{w.exercise}-{w.mistake}")
def test_a_classic_mistake_is_rejected_with_its_property(wrong):
    err = _mismatch(wrong.exercise, wrong.attempt)
    assert isinstance(err, AssertionError)
    assert err.exercise == wrong.exercise
    assert err.property == wrong.property, str(err)
    lines = str(err).splitlines()
    prop_key = wrong.property
    sentence = exercises.MESSAGES["en"][prop_key].split("{")[0]
    assert lines[0].startswith(f"{wrong.exercise}: ") and sentence in lines[0]
    assert lines[0].endswith(".")
    assert lines[1].startswith("  input:") and len(lines[1]) > len("  input:  ") + 2
    if wrong.property == "raised":  # the reader's code raised: the reader's line is shown
        assert lines[-1].startswith("  your line: ") and ", line " in lines[-1], str(err)
    else:
        assert any(ln.startswith("  expected:") for ln in lines)
        assert any(ln.startswith("  got:") for ln in lines)


def test_every_wrong_attempt_also_fails_in_chinese():
    for wrong in attempts.WRONG:
        err = _mismatch(wrong.exercise, wrong.attempt, lang="zh")
        assert err.property == wrong.property
        assert exercises.MESSAGES["zh"]["input"] in str(err), str(err)
        first = str(err).splitlines()[0]
        assert any("\u4e00" <= c <= "\u9fff" for c in first), first


def test_total_grading_time_is_under_ten_seconds():
    start = time.perf_counter()
    for name in ISSUE_NAMES:
        exercises.passes(name, attempts.RIGHT[name], quiet=True)
    assert time.perf_counter() - start < 10.0


def test_a_stub_is_not_attempted_yet_rather_than_wrong(capsys):
    def stub(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    class StubLayer(nn.Module):
        def __init__(self, *args: Any) -> None:
            super().__init__()
            raise NotImplementedError("write me")

    for name in ISSUE_NAMES:
        attempt = StubLayer if name.endswith(("layer", "multi_head_attention")) else stub
        assert exercises.passes(name, attempt) is False
        out = capsys.readouterr().out
        assert out.startswith(f"· {name}: not attempted yet"), out
    assert exercises.check("attention", stub, lang="zh") is None
    zh = exercises.MESSAGES["zh"]
    assert zh["not_attempted"].format(name="attention") in capsys.readouterr().out
    assert exercises.passes("attention", stub, quiet=True) is False
    assert capsys.readouterr().out == ""


def test_an_unknown_name_is_refused_with_the_list():
    with pytest.raises(ValueError, match="unknown exercise 'atention'") as info:
        exercises.check("atention", attempts.attention)
    for name in ISSUE_NAMES:
        assert name in str(info.value)


def test_the_language_comes_from_the_argument_or_the_environment(monkeypatch, capsys):
    wrong = attempts.causal_mask_upper
    monkeypatch.delenv("LABFORMER_LANG", raising=False)
    assert "True on and below" in str(_mismatch("causal_mask", wrong))
    monkeypatch.setenv("LABFORMER_LANG", "zh_CN")
    assert exercises.MESSAGES["zh"]["causal_mask.causal"] in str(_mismatch("causal_mask", wrong))
    assert "True on and below" in str(_mismatch("causal_mask", wrong, lang="en"))
    exercises.check("causal_mask", attempts.causal_mask)
    assert exercises.MESSAGES["zh"]["ok"].split("{n}")[1] in capsys.readouterr().out
    unknown = exercises.MESSAGES["zh"]["unknown"].split("{")[0]
    with pytest.raises(ValueError, match=re.escape(unknown)):
        exercises.check("nope", wrong)


def test_the_two_catalogues_hold_the_same_messages_with_the_same_fields():
    en, zh = exercises.MESSAGES["en"], exercises.MESSAGES["zh"]
    assert set(en) == set(zh)

    def fields(text: str) -> set[str]:
        return {f for _, f, _, _ in string.Formatter().parse(text) if f}

    for key in en:
        assert fields(en[key]) == fields(zh[key]), key


def test_an_error_in_the_attempt_is_reported_as_such():
    def broken(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Any:
        return q.view(-1, 7)  # a shape that cannot be
    err = _mismatch("attention", broken)
    assert err.property == "raised"
    assert "RuntimeError" in str(err).splitlines()[0]
    assert "q (2, 3, 4)" in str(err)
    line = inspect.getsourcelines(broken)[1] + 1
    assert str(err).splitlines()[-1] == \
        f"  your line: broken, line {line}: return q.view(-1, 7)  # a shape that cannot be"


def test_results_of_the_wrong_kind_are_named():
    assert _mismatch("causal_mask", lambda T: [[1]]).property == "returns_tensor"
    assert _mismatch("attention", lambda q, k, v, mask=None: q).property == \
        "attention.returns_pair"
    assert _mismatch("sinusoidal_positions",
                     lambda n, d: torch.zeros(n, d, dtype=torch.long)).property == "dtype"
    assert _mismatch("sinusoidal_positions", lambda n, d: torch.zeros(n, d + 1)).property == \
        "shape"
    assert _mismatch("label_smoothed_cross_entropy",
                     lambda lg, t, s, i: lg.sum(-1)).property == \
        "label_smoothed_cross_entropy.scalar"
    assert _mismatch("greedy_decode", lambda step, b, e, n: "abc").property == "returns_ids"
    assert _mismatch("beam_search", lambda step, b, e, k, n, a: None).property == "returns_ids"
    assert _mismatch("greedy_decode", lambda step, b, e, n: step("x")).property == "prefix"
    wide = attempts.attention
    assert _mismatch("attention",
                     lambda q, k, v, mask=None: (wide(q, k, v, mask)[0][..., :1],
                                                 wide(q, k, v, mask)[1])).property == "shape"


def test_other_right_forms_are_accepted():
    def greedy_tensor(step: Any, bos: int, eos: int, max_len: int) -> Tensor:
        return torch.tensor(attempts.greedy_decode(step, bos, eos, max_len))

    def beam_tuple(*args: Any) -> tuple[int, ...]:
        return tuple(attempts.beam_search(*args))

    class WithWeights(attempts.MultiHead):
        def forward(self, query: Tensor, key: Tensor, value: Tensor,  # type: ignore[override]
                    mask: Tensor | None = None) -> tuple[Tensor, None]:
            return super().forward(query, key, value, mask), None

    def attention_list(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> list:
        return list(attempts.attention(q, k, v, mask))

    def attention_large_negative(q: Tensor, k: Tensor, v: Tensor,
                                 mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, -1e9)
        w = scores.softmax(-1)
        return w @ v, w

    def fused_cross_entropy(lg: Tensor, t: Tensor, s: float, i: int) -> Tensor:
        return torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]), t.reshape(-1),
                                                 label_smoothing=s, ignore_index=i)

    def cross_entropy_float64(lg: Tensor, t: Tensor, s: float, i: int) -> Tensor:
        return attempts.label_smoothed_cross_entropy(lg.double(), t, s, i)

    def layer_norm_second_moment(x: Tensor, w: Tensor, b: Tensor, eps: float = 1e-5) -> Tensor:
        mean = x.mean(-1, keepdim=True)
        var = (x * x).mean(-1, keepdim=True) - mean * mean  # E[x²] - mean², in float32
        return (x - mean) * torch.rsqrt(var + eps) * w + b

    class EncoderMaskRequired(attempts.Encoder):
        def __init__(self, d_model: int, num_heads: int, d_ff: int) -> None:
            super().__init__(d_model, num_heads, d_ff)
            self.register_buffer("spare", torch.zeros(3))  # a buffer of its own is fine

        def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:  # type: ignore[override]
            return super().forward(x, mask)

    class DecoderMasksRequired(attempts.Decoder):
        def forward(self, x: Tensor, memory: Tensor,  # type: ignore[override]
                    tgt_mask: Tensor | None, memory_mask: Tensor | None) -> Tensor:
            return super().forward(x, memory, tgt_mask, memory_mask)

    assert exercises.passes("layer_norm", layer_norm_second_moment, quiet=True)
    assert exercises.passes("encoder_layer", EncoderMaskRequired, quiet=True)
    assert exercises.passes("decoder_layer", DecoderMasksRequired, quiet=True)
    assert exercises.passes("greedy_decode", greedy_tensor, quiet=True)
    assert exercises.passes("beam_search", beam_tuple, quiet=True)
    assert exercises.passes("label_smoothed_cross_entropy", fused_cross_entropy, quiet=True)
    assert exercises.passes("multi_head_attention", WithWeights, quiet=True)
    assert exercises.passes("attention", attention_list, quiet=True)
    assert exercises.passes("attention", attention_large_negative, quiet=True)
    assert exercises.passes("label_smoothed_cross_entropy", cross_entropy_float64, quiet=True)


def test_classes_that_do_not_fit_are_named():
    class Narrow(attempts.MultiHead):
        def __init__(self, d_model: int, num_heads: int) -> None:
            super().__init__(d_model, num_heads)
            self.out_proj = nn.Linear(d_model, 1)  # type: ignore[assignment]

    class FixedFFN(attempts.Encoder):
        def __init__(self, d_model: int, num_heads: int, d_ff: int) -> None:
            super().__init__(d_model, num_heads, 2 * d_model)  # ignores d_ff

    class NoBias(attempts.MultiHead):
        def __init__(self, d_model: int, num_heads: int) -> None:
            super().__init__(d_model, num_heads)
            self.q_proj = nn.Linear(d_model, d_model, bias=False)

    assert "q_proj = Linear(in_features=8, out_features=8, bias=False)" in \
        str(_mismatch("multi_head_attention", NoBias))
    err = _mismatch("multi_head_attention", Narrow)
    assert err.property == "multi_head_attention.projections"
    assert "out_proj = nn.Linear(8, 8)" in str(err)
    assert _mismatch("multi_head_attention", lambda d, h: object()).property == \
        "multi_head_attention.projections"
    err = _mismatch("encoder_layer", FixedFFN)
    assert err.property == "parameter_names" and "ffn.linear1.weight" in str(err)
    assert _mismatch("decoder_layer", lambda d, h, f: 3).property == "parameter_names"
    assert mutants_main_attempts() == 0


def mutants_main_attempts() -> int:
    import mutants

    return mutants.main(["--attempts"])


def test_a_beam_that_ends_too_late_is_told():
    def beam_too_long(step: Any, bos: int, eos: int, k: int, max_len: int, alpha: float
                      ) -> list[int]:
        return attempts.beam_search(step, bos, eos, k, max_len, alpha) + [bos] * (max_len + 1)

    assert _mismatch("beam_search", beam_too_long).property == "max_len"


def test_greedy_errors_that_fall_between_the_named_ones():
    def greedy_eos_inside(step: Any, bos: int, eos: int, max_len: int) -> list[int]:
        out = attempts.greedy_decode(step, bos, eos, max_len)
        return [eos, *out[1:]] if len(out) > 1 else out  # claims EOS first, then goes on

    def greedy_too_long(step: Any, bos: int, eos: int, max_len: int) -> list[int]:
        out = attempts.greedy_decode(step, bos, eos, max_len)
        return out + [out[-1]] * (max_len + 1 - len(out))

    def greedy_short(step: Any, bos: int, eos: int, max_len: int) -> list[int]:
        return attempts.greedy_decode(step, bos, eos, max_len)[:1] if max_len > 1 else \
            attempts.greedy_decode(step, bos, eos, max_len)

    # tokens that step never saw: the result was not decoded from the prefixes asked about
    assert _mismatch("greedy_decode", greedy_eos_inside).property == "prefix"
    err = _mismatch("greedy_decode", greedy_too_long)
    assert err.property == "prefix" and "calls step([" in str(err)
    err = _mismatch("greedy_decode", greedy_short)
    assert err.property == "greedy_decode.argmax" and "nothing" in str(err)


def test_the_beam_cases_tell_the_rules_apart():
    """Each case can fail a mistake: beams beat greedy, and the length penalty matters."""
    for seed, vocab, bos, eos, k, max_len, alpha, bias in graders._BEAM_CASES:
        step = graders._StepTable(seed, vocab, bos, eos, bias, max_len, "beam_search", "")
        ref = graders._beam_reference(step, k, max_len, alpha)
        if k > 1:
            assert ref.best != graders._greedy_reference(step, max_len), seed
        if alpha > 0:
            by_log_p = max(ref.pool, key=lambda t: step.score(list(t)))
            assert list(by_log_p) != ref.best, seed
    assert any(a == 0 for *_, a, _ in graders._BEAM_CASES)


def test_grading_leaves_the_global_random_state_alone():
    state = torch.get_rng_state()
    exercises.check("encoder_layer", attempts.Encoder, quiet=True)
    assert torch.equal(state, torch.get_rng_state())


def test_messages_show_small_inputs():
    assert graders._show(torch.tensor([[True, False], [True, True]])) == "10 / 11"
    assert graders._show(torch.tensor([True, False])) == "[1, 0]"
    assert graders._show(torch.tensor([[0.5, 1.0]])) == "[[0.5, 1.0]]"
    assert graders._show(torch.arange(20.0)).startswith("shape (20,), first values [0, 1,")


def test_make_test_mutants_grades_the_attempts(monkeypatch, capsys):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import mutants

    assert mutants.grade_attempts() == 0
    out = capsys.readouterr().out
    assert f"{len(attempts.WRONG)} wrong attempts" in out and "0 graded wrongly" in out
    assert "| attention | scaled after the softmax | attention.rows_sum_to_one |" in out

    def crashes(*args: Any) -> Any:
        raise NotImplementedError  # graded "not attempted", which a planted bug must not be

    survivor = attempts.Wrong("causal_mask", "right after all", attempts.causal_mask, "x")
    monkeypatch.setattr(attempts, "WRONG", [survivor])
    monkeypatch.setattr(attempts, "RIGHT", {"causal_mask": attempts.causal_mask_upper,
                                            "attention": crashes})
    assert mutants.grade_attempts() == 1
    out = capsys.readouterr().out
    assert "FAIL causal_mask, right after all: not rejected" in out
    assert "FAIL causal_mask, the right attempt: rejected: causal_mask: position i" in out
    assert "FAIL attention, the right attempt: graded as not attempted" in out
    monkeypatch.setattr(exercises, "check", lambda *a, **k: 1 / 0)
    monkeypatch.setattr(attempts, "RIGHT", {})
    assert mutants.grade_attempts() == 1
    assert "FAIL causal_mask, right after all: ZeroDivisionError" in capsys.readouterr().out


def _ipython_cell(code: str) -> tuple[Any, str]:
    """Run ``code`` as a notebook cell in a fresh IPython shell: its result and what it shows."""
    import io
    from contextlib import redirect_stdout

    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shown = io.StringIO()
        with redirect_stdout(shown):
            result = shell.run_cell(code, store_history=True)
        return result, re.sub(r"\x1b\[[0-9;]*m", "", shown.getvalue())  # no colours
    finally:
        InteractiveShell.clear_instance()


def test_in_a_notebook_a_failure_is_one_short_block_with_the_readers_line():
    result, shown = _ipython_cell(
        "from labformer.book import exercises\n"
        "import torch\n"
        "def my_attention(q, k, v, mask=None):\n"
        "    scores = q @ k.T\n"
        "    return scores.softmax(-1) @ v, scores.softmax(-1)\n"
        "\n"
        "exercises.check('attention', my_attention)\n")
    assert isinstance(result.error_in_exec, exercises.Mismatch)
    assert "Traceback" not in shown and "exercises/" not in shown and ".py" not in shown, shown
    lines = [ln for ln in shown.splitlines() if ln.strip()]
    assert lines[0].startswith("✗ attention: your code raised RuntimeError"), shown
    assert lines[-1] == "  your line: my_attention, line 4: scores = q @ k.T", shown
    assert len(lines) == 3, shown


def test_in_a_notebook_a_wrong_attempt_shows_no_traceback_and_a_pass_no_out_line():
    result, shown = _ipython_cell(
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})\n"
        "import exercise_attempts as attempts\n"
        "from labformer.book import exercises\n"
        "exercises.check('beam_search', attempts.beam_per_parent)\n")
    assert isinstance(result.error_in_exec, exercises.Mismatch)
    assert "Traceback" not in shown and "graders.py" not in shown, shown
    assert shown.splitlines()[0].startswith("✗ beam_search: each step should keep"), shown
    result, shown = _ipython_cell(
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})\n"
        "import exercise_attempts as attempts\n"
        "from labformer.book import exercises\n"
        "exercises.check('causal_mask', attempts.causal_mask)\n")
    assert result.success and result.result is None  # nothing for an Out: line
    assert "Out[" not in shown and "True" not in shown, shown
    assert shown.startswith("✓ causal_mask: all "), shown


def test_no_chinese_in_the_graders_python():
    """Every Chinese string of the exercises lives in the catalogue zh.json."""
    folder = Path(exercises.__file__).parent
    for path in folder.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert not any("\u4e00" <= c <= "\u9fff" or "\u3000" <= c <= "\u303f" or
                       "\uff00" <= c <= "\uffef" for c in text), path
    assert (folder / "zh.json").is_file()


def test_the_issues_mistakes_get_messages_that_name_them():
    """Issue 57: each of these had a message that missed it (or passed)."""
    messages = {w.mistake: str(_mismatch(w.exercise, w.attempt)) for w in attempts.WRONG}
    per_parent = messages["the best beam_size children of each parent, no global pruning"]
    assert "best children of each parent" in per_parent and "beam_size²" in per_parent
    slots = messages["finished hypotheses take beam slots"]
    penalty = messages["no length penalty"]
    assert slots.splitlines()[0] != penalty.splitlines()[0]
    assert "take slots" in slots and "length penalty was ignored" in penalty
    for mistake, text in messages.items():  # -inf used: never told to use -inf
        if mistake.startswith("nanoGPT"):
            assert "not to 0" not in text and "-inf, not" not in text, text
    assert "-inf before the softmax, not to 0" in messages["dropped logits set to 0, not -inf"]
    for mistake in ("tgt_mask passed to the cross-attention", "tgt_mask and memory_mask swapped"):
        assert messages[mistake].startswith("decoder_layer: the cross-attention"), mistake
    layer = messages["one LayerNorm shared by both sublayers"]
    assert "input:    EncoderOneNorm(d_model=8, num_heads=2, d_ff=16)" in layer
    assert "C(" not in "".join(messages.values())
