"""setup_notebook makes a chapter reproducible: seeds, threads, printing."""

import base64
import math
import random

import numpy as np
import pytest
import torch

from labformer import setup_notebook
from labformer.book.notebook import (
    SEED_ENV,
    Evidence,
    Sweep,
    decide,
    predictive_interval,
    registration,
    t_quantile,
    t_two_sided_p,
)


@pytest.fixture
def restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_same_seed_same_numbers(restore_threads, monkeypatch):
    monkeypatch.delenv(SEED_ENV, raising=False)
    setup_notebook(seed=3)
    first = (random.random(), np.random.rand(), torch.rand(2))
    setup_notebook(seed=3)
    again = (random.random(), np.random.rand(), torch.rand(2))
    assert first[0] == again[0] and first[1] == again[1] and torch.equal(first[2], again[2])
    setup_notebook(seed=4)
    assert random.random() != first[0]


def test_threads_default_one_and_none_keeps(restore_threads):
    torch.set_num_threads(2)
    setup_notebook(seed=0, threads=None)
    assert torch.get_num_threads() == 2
    setup_notebook(seed=0)
    assert torch.get_num_threads() == 1
    with pytest.raises(ValueError, match="threads"):
        setup_notebook(threads=0)


def test_environment_overrides_the_seed(restore_threads, monkeypatch):
    monkeypatch.setenv(SEED_ENV, "7")
    assert setup_notebook(seed=0) == 7
    drawn = torch.rand(3)
    monkeypatch.delenv(SEED_ENV)
    assert setup_notebook(seed=7) == 7
    assert torch.equal(torch.rand(3), drawn)  # the same stream as asking for 7 directly
    assert setup_notebook(seed=0) == 0
    assert not torch.equal(torch.rand(3), drawn)
    monkeypatch.setenv(SEED_ENV, "")
    assert setup_notebook(seed=5) == 5  # empty means unset


@pytest.mark.parametrize("bad", ["one", "1.5", "-2"])
def test_bad_seed_in_environment_is_named(restore_threads, monkeypatch, bad):
    monkeypatch.setenv(SEED_ENV, bad)
    with pytest.raises(ValueError, match=SEED_ENV):
        setup_notebook(seed=0)


def test_numpy_scalars_print_as_numbers(restore_threads):
    setup_notebook(seed=0)
    try:
        # myst-nb's glue parses the printed value: "np.float64(0.25)" would not format.
        assert repr(np.float64(0.25)) == "0.25" and repr(np.int64(3)) == "3"
    finally:
        np.set_printoptions(legacy=False)


def test_plot_style_text_as_large_as_the_body(restore_threads):
    import matplotlib

    from labformer.book.plot import FIGURE_WIDTH

    setup_notebook(seed=0)
    rc = matplotlib.rcParams
    assert rc["figure.dpi"] == 96 and rc["figure.figsize"][0] == FIGURE_WIDTH
    # 12 pt at 96 dpi is 16 CSS px, the book's body text.
    assert min(rc["font.size"], rc["xtick.labelsize"], rc["legend.fontsize"]) >= 12
    assert rc["figure.facecolor"] == "white"


def test_in_ipython_a_returned_figure_shows_once_as_a_sharp_png(restore_threads):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.run_cell("from labformer import setup_notebook; setup_notebook(seed=0)")
        fig, ax = plt.subplots(figsize=(5, 3))
        ax.plot([0, 1])
        data, meta = shell.display_formatter.format(fig)
        png = data["image/png"]
        png = base64.b64decode(png) if isinstance(png, str) else png
        width = meta["image/png"]["width"]
        assert data.get("text/plain", "") == ""  # no "<Figure size ...>" beside the image
        # Retina: twice the pixels, shown at the figure's own size (about 5 in x 96 px).
        pixels = int.from_bytes(png[16:20], "big")  # the PNG header's width
        assert 380 <= width <= 480 and abs(pixels - 2 * width) <= 2, (width, pixels)
        assert not plt.fignum_exists(fig.number)  # closed: the cell's end will not redraw it
    finally:
        InteractiveShell.clear_instance()


@pytest.fixture
def inline_shell(restore_threads):
    """An IPython shell after a chapter's setup_notebook: figures go through _inline_figures."""
    import matplotlib

    matplotlib.use("Agg")
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.run_cell("from labformer import setup_notebook; setup_notebook(seed=0)")
        yield shell
    finally:
        InteractiveShell.clear_instance()


def test_a_figure_with_too_small_text_fails_naming_the_text(inline_shell):
    import matplotlib.pyplot as plt

    from labformer.book.notebook import MIN_TEXT_PX, _check_text_sizes

    fig, ax = plt.subplots()
    ax.plot([0, 1])
    ax.set_title("tiny ticks")
    ax.set_xticks([0, 1], ["left", "right"], fontsize=7)  # 7 pt: 9.3 px
    with pytest.raises(ValueError, match=r"'tiny ticks'.*'left' at 9\.3 px \(7 pt\)") as err:
        _check_text_sizes(fig)
    assert f"{MIN_TEXT_PX:g} px minimum" in str(err.value) and "'right'" in str(err.value)
    # Shown in a cell: the figure's error is the cell's, so the chapter fails to build.
    result = inline_shell.run_cell(
        "import matplotlib.pyplot as plt\n"
        "fig, ax = plt.subplots()\n"
        "ax.plot([0, 1], label='small legend')\n"
        "ax.legend(fontsize=6)\n"
        "fig")
    assert not result.success and isinstance(result.error_in_exec, ValueError)
    assert "'small legend' at 8.0 px" in str(result.error_in_exec)
    assert inline_shell.run_cell("1 + 1").success  # the next cell is not blamed for it
    plt.close("all")


def test_the_book_style_passes_the_text_size_check(inline_shell):
    import matplotlib.pyplot as plt

    from labformer.book.notebook import _check_text_sizes
    from labformer.book.plot import attention_heatmap, panels

    fig, axes = panels(1, 2)
    for ax in axes.flat:
        ax.plot([0, 1], label="a curve")
        ax.set(title="a title", xlabel="x", ylabel="y")
        ax.legend(title="legend")
        ax.annotate("a note", (0.5, 0.5))
    fig.suptitle("a suptitle")
    _check_text_sizes(fig)
    heat = attention_heatmap(np.eye(4), list("abcd"), list("wxyz"), annotate=True)
    _check_text_sizes(heat)  # annotations, tick labels and the colour bar's ticks
    result = inline_shell.run_cell(
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([0, 1])\nfig")
    assert result.success
    # Hidden texts do not count: an invisible label, and the ticks of axes switched off.
    off, ax = plt.subplots()
    ax.set_xlabel("hidden", fontsize=5, visible=False)
    ax.set_xticks([0, 1], ["a", "b"], fontsize=5)
    ax.axis("off")
    _check_text_sizes(off)
    plt.close("all")


def test_a_wide_figure_is_judged_at_its_shrunk_size(inline_shell):
    import matplotlib.pyplot as plt

    from labformer.book.notebook import COLUMN_PX, _check_text_sizes

    # 12 pt is 16 px at full size; a 14-inch figure (about 1100 px once its margins are
    # cropped) is shrunk to the column and its 12 pt text shows at about 10.5 px.
    fig, ax = plt.subplots(figsize=(14, 3))
    ax.plot([0, 1])
    ax.set_title("wide")
    with pytest.raises(ValueError, match=r"'wide'.*shrunk to the 720 px column") as err:
        _check_text_sizes(fig)
    assert "'0.0' at 10.5 px (12 pt)" in str(err.value)
    _check_text_sizes(fig, column_px=2 * COLUMN_PX)  # in a column twice as wide it passes
    fig.set_size_inches(7, 3)  # the book's width: shown unscaled
    _check_text_sizes(fig)
    plt.close("all")


def test_numbers_and_tables_for_humans():
    from labformer.book.notebook import human_number, table

    assert human_number(142606336) == "142,606,336"
    assert human_number(np.int64(65_000_000)) == "65,000,000"
    assert human_number(0.125) == "0.125" and human_number(3.2e-05) == "3.2e-05"
    assert human_number(1234.56) == "1,235"
    assert human_number(2.5e7) == "25,000,000" and human_number(0.0) == "0"
    assert human_number(True) == "True" and human_number("BLEU") == "BLEU"
    html = table({"part": ["embeddings", "encoder"], "parameters": [19_000_000, 18_912_256],
                  "share": [0.292, 0.291]}).to_html()
    assert "18,912,256" in html and "0.292" in html and "lf-table" in html
    assert "142606336" not in table({"n": [142606336]}).to_html()


def test_evidence_shows_claims_with_their_values(capsys):
    from labformer.book.notebook import evidence

    with evidence("Scaling") as ev:
        ev.check("the variance is d_k", np.float64(63.8) > 60, "63.8 at d_k = 64")
        ev.check("the weights sum to 1", torch.tensor(True))
    out = capsys.readouterr().out
    assert out.splitlines() == ["Scaling", "✓ the variance is d_k: 63.8 at d_k = 64",
                                "✓ the weights sum to 1"]
    html_list = ev._repr_html_()
    assert html_list.count('<li class="lf-holds"') == 2 and "63.8 at d_k = 64" in html_list
    # folded to one line: the count and the title, the claims one click away
    assert html_list.startswith('<details class="lf-evidence"><summary class="lf-holds">')
    assert '<span class="lf-tally">2 checks hold</span>' in html_list
    assert '<span class="lf-lead"><span class="lf-evidence-title">Scaling</span>' in html_list


def test_evidence_folds_to_a_line_that_names_what_was_checked():
    from labformer.book.notebook import Evidence, evidence

    with evidence() as ev:
        ev.check("the weights sum to 1", True, "max gap 2.0e-07")
    one = ev._repr_html_()
    assert "<details class=\"lf-evidence\"><summary" in one and " open" not in one
    assert '<span class="lf-tally">1 check holds</span>' in one
    assert '<span class="lf-lead"><span class="lf-claim">the weights sum to 1</span>' in one
    with evidence(open=True) as headline:
        headline.check("the model learns the task", True)
    assert headline._repr_html_().startswith('<details class="lf-evidence" open>')
    # a block with a false claim is never folded: it says how many failed
    failed = Evidence(claims=[("a", True, ""), ("b", False, "x"), ("c", False, "")])
    assert failed.tally() == "2 of 3 checks fail"
    assert failed._repr_html_().startswith('<details class="lf-evidence" open><summary '
                                           'class="lf-fails">')


def test_a_false_claim_fails_with_the_claim_in_the_message():
    from labformer.book.notebook import ClaimFailed, evidence

    with pytest.raises(ClaimFailed, match=r"1 of 2 claims in 'Masks'.*\n- no future "
                                          r"position is attended \(measured: weight 0.2\)"):
        with evidence("Masks") as ev:
            ev.check("rows sum to 1", True)
            ev.check("no future position is attended", False, "weight 0.2")
    assert issubclass(ClaimFailed, AssertionError)


def test_an_assert_on_a_false_claim_names_the_claim():
    from labformer.book.notebook import ClaimFailed, evidence

    with pytest.raises(ClaimFailed, match=r"1 of 2 claims do not hold.*\n- the mask is causal "
                                          r"\(measured: 3 future weights\)") as caught:
        with evidence() as ev:
            assert ev.check("rows sum to 1", True)
            assert ev.check("the mask is causal", False, "3 future weights")
            ev.check("never reached", True)
    assert isinstance(caught.value.__cause__, AssertionError)
    # An assert that is not about a claim is not dressed up as one.
    with pytest.raises(AssertionError) as plain:
        with evidence() as ev:
            assert ev.check("rows sum to 1", True)
            assert 1 == 2
    assert not isinstance(plain.value, ClaimFailed)


def test_evidence_refuses_empty_claims_and_ambiguous_truth():
    from labformer.book.notebook import Evidence, evidence

    with pytest.raises(ValueError, match="no claim"):
        with evidence():
            pass
    with pytest.raises(ValueError, match="claim it tests"):
        Evidence().check("  ", True)
    with pytest.raises(RuntimeError, match="ambiguous"):
        Evidence().check("all positive", torch.tensor([1.0, 2.0]) > 0)


@pytest.mark.parametrize(("value", "shown"), [
    (["sublayer", "add", "norm"], "sublayer, add, norm"),
    ([], "none"), ((), "none"), ({}, "none"), (None, "none"),
    (True, "yes"), (np.bool_(False), "no"), (torch.tensor(True), "yes"),
    ((7, 4, 9), "7, 4, 9"),
    ((28000, 1000, 1000), "28,000; 1,000; 1,000"),  # a shape: shape_text at the call site
    (np.array([0.3214, 0.42, 0.6251]), "0.321, 0.420, 0.625"),
    (torch.tensor([[0.33, 0.67], [0.5, 0.5]]), "0.330, 0.670; 0.500, 0.500"),
    ([[2], [4, 2], []], "2; 4, 2; none"),
    ({"full": 239218, "one_head": 239218}, "full: 239,218; one_head: 239,218"),
    ({"full": [4], "one_head": [1]}, "full: 4, one_head: 1"),
    (torch.Size([2, 4, 5, 5]), "2 × 4 × 5 × 5"),
    (np.float32(0.5), "0.500"), (torch.tensor(3), "3"), (1.2e-07, "1.2e-07"),
    ({"b", "a"}, "a, b"),
    ("weights 0.33, 0.67", "weights 0.33, 0.67"),  # a text is kept as written
])
def test_measured_values_read_as_text(value, shown):
    from labformer.book.notebook import Evidence, measured_text

    assert measured_text(value) == shown
    ev = Evidence()
    ev.check("a claim", True, value)
    assert ev.claims[-1][2] == shown
    assert f'<span class="lf-measured">{shown}</span>' in ev._repr_html_()


def test_measured_values_never_show_a_repr():
    """The reprs a chapter used to show, passed as values: none of them comes back."""
    from labformer.book.notebook import Evidence, measured_text

    values = [["sublayer", "add", "norm"], [], (28000, 1000, 1000), np.array([0.32, 0.42]),
              torch.tensor([0.5, 0.25]), True, False, None, {"attention": 1, "LayerNorm": 2},
              [("encoder.norm", "Identity", "LayerNorm")], np.array([[1, 0], [0, 1]])]
    ev = Evidence()
    for value in values:
        ev.check("a claim", True, value)
    shown = [m for _, _, m in ev.claims] + [measured_text(v, digits=4) for v in values]
    for text in shown:
        for mark in ("[", "]", "(", ")", "{", "'", "array", "tensor", "True", "False", "None"):
            assert mark not in text, (mark, text)
    assert ev.claims[0][2] == "sublayer, add, norm" and ev.claims[1][2] == "none"
    assert measured_text(np.array([0.32, 0.42]), digits=2) == "0.32, 0.42"


def test_shapes_read_with_times_signs():
    from labformer.book.notebook import measured_text, shape_text

    assert shape_text((28000, 1000, 1000)) == "28000 × 1000 × 1000"
    assert shape_text(torch.zeros(2, 3)) == "2 × 3" and shape_text(np.zeros(4)) == "4"
    assert shape_text(()) == "a scalar" and shape_text(torch.zeros(2, 3).shape) == "2 × 3"
    assert measured_text(torch.zeros(1, 4).shape) == "1 × 4"


@pytest.mark.parametrize(("p", "df", "expected"), [
    (0.975, 19, 2.093024054), (0.975, 5, 2.570581836), (0.995, 1, 63.65674116),
    (0.95, 2, 2.919985580), (0.025, 19, -2.093024054), (0.975, 1e6, 1.959966)])
def test_t_quantile_matches_tables(p, df, expected):
    assert t_quantile(p, df) == pytest.approx(expected, abs=2e-6)


def test_t_quantile_far_tail_by_integration():
    """The quantile used for bounds (1 - 5e-6): the density integrated beyond it is 5e-6."""
    df, t = 19, t_quantile(1 - 5e-6, 19)
    x = np.linspace(t, 400, 2_000_001)
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    assert np.trapezoid(c * (1 + x * x / df) ** (-(df + 1) / 2), x) == pytest.approx(5e-6,
                                                                                    rel=1e-4)


def test_predictive_interval_and_bad_input():
    lo, hi = predictive_interval([1, 2, 3, 4, 5], alpha=0.05)
    half = 2.776445105 * math.sqrt(2.5) * math.sqrt(1.2)  # t(0.975, 4) s sqrt(1 + 1/n)
    assert (lo, hi) == pytest.approx((3 - half, 3 + half))
    for bad in ([1, 2], [1, 2, float("nan")]):
        with pytest.raises(ValueError, match="at least 3 finite"):
            predictive_interval(bad)
    with pytest.raises(ValueError, match="0 < p < 1"):
        t_quantile(1.0, 3)


def test_decide_follows_the_rule_at_its_edges():
    # 20 differences with mean m and SE exactly 0.1: the two-sided t at 0.05 / 2 and 19 df
    # is 2.4334, the one-sided one 2.0930 (tables)
    base = np.array([1.0, -1.0] * 10)
    scale = 0.1 * np.sqrt(20) / base.std(ddof=1)
    for m, delta, k, want in ((0.25, 1.0, 2, "higher"), (-0.25, 1.0, 2, "lower"),
                              (0.24, 1.0, 2, "within"), (0.24, 0.45, 2, "within"),
                              (0.24, 0.44, 2, "open"), (0.23, 1.0, 1, "higher")):
        verdict, mean, se = decide(m + scale * base, delta, k)
        assert (verdict, round(mean, 9), round(se, 9)) == (want, m, 0.1), (m, delta, k)


def test_decide_rejects_bad_input():
    for bad in ([1.0, 2.0], [1.0, np.nan, 2.0], [[1.0, 2.0, 3.0]]):
        with pytest.raises(ValueError, match="at least 3 finite"):
            decide(bad, 1.0)
    with pytest.raises(ValueError, match="delta > 0"):
        decide([1.0, 2.0, 3.0], 0.0)


def test_sweep_holds_a_run_to_its_interval(tmp_path):
    import json

    values = [0.8, 0.9, 0.85, 0.95, 0.75]
    runs = [{"seed": s, "kernel": "default", "near": v} for s, v in enumerate(values)]
    path = tmp_path / "01_x.json"
    path.write_text(json.dumps({"quantities": {"near": "on_diag"}, "runs": runs}))
    sweep = Sweep(path, alpha=0.05)
    assert sweep.n == 5
    assert sweep.interval("near") == pytest.approx(predictive_interval(values, alpha=0.05))
    lo, hi = sweep.interval("near")
    ev = Evidence()
    assert sweep.check(ev, "inside", "near", (lo + hi) / 2)
    assert not sweep.check(ev, "below", "near", lo - 0.01)  # a run unlike the sweep fails
    assert not sweep.check(ev, "above", "near", hi + 0.01)
    assert not sweep.check(ev, "inside but false", "near", 0.85, holds=False)
    assert [ok for _, ok, _ in ev.claims] == [True, False, False, False]
    assert ev.claims[0][2] == (f"decided by 5 runs: mean 0.85; this run {(lo + hi) / 2:.2f} "
                               f"(sanity range for one run: {lo:.2f} to {hi:.2f})")
    # the verdict: mean 0.85, SE 0.0354, one-sided t(0.95, 4) = 2.132 -> margin 0.0754
    assert sweep.mean_beyond("near", above=0.774) and not sweep.mean_beyond("near", above=0.776)
    assert sweep.mean_beyond("near", below=0.926) and not sweep.mean_beyond("near", below=0.924)
    assert not sweep.check(ev, "mean above 0.8", "near", 0.85, above=0.8)
    # shared by 3 verdicts: t(1 - 0.05 / 3, 4) = 3.186 -> margin 0.1127
    three = Sweep(path, verdicts=3)
    assert three.mean_beyond("near", above=0.737) and not three.mean_beyond("near", above=0.738)
    logs = tmp_path / "logs.json"
    logs.write_text(json.dumps({"runs": [{"seed": s, "log_gap": v}
                                         for s, v in enumerate([-6.0, -5.0, -4.0])]}))
    ev = Evidence()
    Sweep(logs, alpha=0.05).check(ev, "log scale", "log_gap", -5.0, fmt="10^")
    Sweep(logs).check(ev, "wide", "log_gap", -5.0, fmt="10^")  # no overflow at 10^(+-1000)
    assert ev.claims[0][2].startswith("decided by 3 runs: geometric mean 1e-05; this run 1e-05 "
                                      "(sanity range for one run: ")
    with pytest.raises(KeyError, match="no quantity 'far'"):
        sweep.values("far")
    with pytest.raises(FileNotFoundError, match="missing.json, but it does not exist"):
        Sweep(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a sweep"):
        Sweep(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="verdicts >= 1"):
        Sweep(path, verdicts=0)


def _settings_sweep(tmp_path):
    import json

    runs = [{"seed": s, "near": v} for s, v in enumerate([0.8, 0.9, 0.85, 0.95, 0.75], 1)]
    path = tmp_path / "05_x.json"
    path.write_text(json.dumps({"command": "python tests/claim_sweep.py book/05_x.ipynb",
                                "settings": {"d_model": 128, "widths": [1, 2]}, "runs": runs}))
    return Sweep(path, alpha=0.05)


def test_a_sweep_holds_a_run_at_its_own_settings(tmp_path):
    sweep = _settings_sweep(tmp_path)
    ev = Evidence()
    # the same setting (a tuple where the JSON has a list): held to the sweep, both ways
    assert sweep.check(ev, "near the sweep", "near", 0.85, settings={"d_model": 128,
                                                                     "widths": (1, 2)})
    assert not sweep.check(ev, "far from the sweep", "near", 9.0, settings={"d_model": 128})
    assert [ok for _, ok, _ in ev.claims] == [True, False] and not ev.notes


def test_a_sweep_at_another_setting_leaves_the_claim_out_in_one_line(tmp_path):
    sweep = _settings_sweep(tmp_path)
    ev = Evidence()
    # a planted wrong value would fail at the sweep's setting, but the reader's width differs:
    # the comparison is left out, with one line that names both settings and what to do
    assert sweep.check(ev, "near the sweep", "near", 9.0, settings={"d_model": 64})
    assert ev.claims == []
    (line,) = ev.notes
    assert "\n" not in line
    assert line == ("near the sweep: this run uses d_model = 64; the stored sweep was made at "
                    "128, so this claim is not held to it: restore d_model = 128, or make a "
                    "sweep at your setting with "
                    "`python book/sweeps/claim_sweep.py book/05_x.ipynb`")
    # a condition on the run alone is still checked
    assert not sweep.check(ev, "positive", "near", 9.0, holds=False, settings={"d_model": 64})
    assert ev.claims[-1][1] is False
    assert ev.tally() == "1 of 1 checks fail, 2 left out"
    assert "○ near the sweep: this run uses d_model = 64" in str(ev)
    assert '<li class="lf-notice">' in ev._repr_html_()
    with pytest.raises(KeyError, match="does not record the settings \\['heads'\\]"):
        sweep.differs({"heads": 4})


def test_a_block_of_notes_only_verifies_and_opens(tmp_path):
    ev = Evidence()
    ev.note("left out: another setting")
    assert ev.verify() is ev
    assert ev.tally() == "0 checks hold, 1 left out"
    assert ev._repr_html_().startswith('<details class="lf-evidence" open>')
    with pytest.raises(ValueError, match="needs its text"):
        ev.note(" ")


def test_a_failed_claim_renders_as_one_block_not_a_traceback():
    from labformer.book.notebook import ClaimFailed, evidence

    with pytest.raises(ClaimFailed) as failed:
        with evidence("Masks") as ev:
            assert ev.check("the mask is causal", False, "row 2 sees 3")
    lines = failed.value._render_traceback_()
    assert lines[0].startswith("ClaimFailed: 1 of 1 claims in 'Masks' do not hold")
    assert "- the mask is causal (measured: row 2 sees 3)" in lines[0]
    assert lines[-1].startswith("What to try:") and len(lines) == 3


def test_book_files_resolve_from_anywhere(tmp_path, monkeypatch):
    from labformer.book.notebook import book_file, repo_root

    root = repo_root()
    assert (root / "_config.yml").is_file()
    monkeypatch.chdir(tmp_path)  # outside the repository: found through the package
    assert book_file("data/03_scaling.json") == root / "book" / "data" / "03_scaling.json"
    monkeypatch.chdir(root)  # the repository root (nbclient, VS Code)
    assert book_file("data/03_scaling.json").is_file()
    with pytest.raises(FileNotFoundError, match="needs data/none.json, but it is neither"):
        book_file("data/none.json")


def test_a_chapter_outside_the_repository_stops_in_one_sentence(tmp_path, monkeypatch):
    import labformer.book.notebook as nb

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(nb, "__file__", str(tmp_path / "site" / "labformer" / "notebook.py"))
    with pytest.raises(FileNotFoundError) as missing:
        nb.book_file("data/03_scaling.json")
    text = str(missing.value)
    assert text.startswith("this chapter needs data/03_scaling.json, which ships in the book's")
    assert "\n" not in text and "pip install -e ." in text


def test_t_two_sided_p_inverts_t_quantile() -> None:
    """p(|T| >= t_{1 - p/2}) = p, for the degrees of freedom the sweeps use."""
    for df in (2, 9, 19, 39):
        for p in (0.5, 0.05, 0.05 / 34, 1e-6):
            assert t_two_sided_p(t_quantile(1 - p / 2, df), df) == pytest.approx(p, rel=1e-8)
    assert t_two_sided_p(0.0, 19) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="finite t"):
        t_two_sided_p(float("nan"), 19)


def test_registration_reads_a_plan_and_refuses_what_is_not_its_sweep(tmp_path, monkeypatch):
    """registration(): the plan and its data; a plan made after the fact, or data of another
    command, is refused in one sentence."""
    import json

    plans = tmp_path / "data" / "plans"
    plans.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    command = "python book/sweeps/x.py --protocol v2"
    plan = {"sweep": "x", "data": "book/data/x.json", "registered": "before the runs",
            "command": command}
    (plans / "x.json").write_text(json.dumps(plan))
    (tmp_path / "data" / "x.json").write_text(json.dumps({"command": command, "runs": []}))
    got_plan, got_data = registration("x")
    assert got_plan == plan and got_data["runs"] == []
    (tmp_path / "data" / "x.json").write_text(json.dumps({"command": command + " --seeds 1"}))
    with pytest.raises(ValueError, match="not by the registered"):
        registration("x")
    (plans / "x.json").write_text(json.dumps({**plan, "registered": "after the fact"}))
    with pytest.raises(ValueError, match="not before the runs"):
        registration("x")
