"""Plot helpers return Figures with what they were given, and reject what does not fit."""

import matplotlib

matplotlib.use("Agg")

import json  # noqa: E402
import re  # noqa: E402
import warnings  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.text  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from labformer.book import plot  # noqa: E402
from labformer.book.plot import (  # noqa: E402
    EXPLORER_CLASS,
    PLOTLY_MIME,
    attention_explorer,
    attention_heads,
    attention_heatmap,
    training_curves,
)


def test_heatmap_draws_the_weights_with_labels():
    w = torch.tensor([[0.9, 0.1, 0.0], [0.2, 0.3, 0.5]])
    fig = attention_heatmap(w, ["a", "b"], ["x", "y", "z"], title="t", annotate=True)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y", "z"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    drawn = ax.collections[0].get_array().reshape(2, 3)
    np.testing.assert_allclose(drawn, w.numpy())
    assert ax.get_title() == "t"


def test_heatmap_rejects_bad_shapes_and_labels():
    with pytest.raises(ValueError, match=r"\(3,\)"):
        attention_heatmap(np.ones(3))
    with pytest.raises(ValueError, match="1 queries labels"):
        attention_heatmap(np.ones((2, 2)), ["a"], ["x", "y"])


def test_heads_one_panel_per_head_and_blank_rest():
    fig = attention_heads(torch.rand(3, 4, 5), cols=2, title="heads")
    panels = [ax for ax in fig.axes if ax.axison]
    assert len(panels) == 3 and len(fig.axes) == 4
    assert [ax.get_title() for ax in panels] == ["head 1", "head 2", "head 3"]  # as in the text
    with pytest.raises(ValueError, match=r"\(4, 5\)"):
        attention_heads(torch.rand(4, 5))


def test_training_curves_smooths_and_labels():
    fig = training_curves({"a": [4.0, 2.0, 0.0, 2.0], "b": [1.0, 1.0]}, smooth=2, logy=True)
    ax = fig.axes[0]
    lines = {line.get_label(): line.get_ydata() for line in ax.get_lines()}
    np.testing.assert_allclose(lines["a"], [3.0, 1.0, 1.0])
    np.testing.assert_allclose(lines["b"], [1.0])
    assert ax.get_yscale() == "log"
    with pytest.raises(ValueError, match="no curves"):
        training_curves({})
    with pytest.raises(ValueError, match="smooth"):
        training_curves({"a": [1.0]}, smooth=0)


# --------------------------------------------------------------------------- explorers

def _payload(html_block: str) -> dict:
    start = html_block.index('class="lf-explorer-data">') + len('class="lf-explorer-data">')
    end = html_block.index("</script>", start)
    return json.loads(html_block[start:end].replace("<\\/", "</"))


def test_explorer_normalises_every_shape_to_layers_and_heads():
    tokens = ["a", "b", "c"]
    for shape, views in (((3, 3), 1), ((2, 3, 3), 2), ((4, 2, 3, 3), 8)):
        ex = attention_explorer(torch.rand(shape), tokens)
        assert ex.panels[""].shape == (*(1,) * (4 - len(shape)), *shape)
        assert len(ex.views()) == views
        assert ex.keys[""] == tokens  # self-attention: keys default to the queries


def test_explorer_kinds_with_their_own_tokens():
    src, tgt = ["ich", "bin", "</s>"], ["<bos>", "i", "am", "here"]
    ex = attention_explorer(
        {"encoder self": torch.rand(2, 4, 3, 3), "decoder self": torch.rand(2, 4, 4, 4),
         "cross": torch.rand(2, 4, 4, 3)},
        {"encoder self": src, "decoder self": tgt, "cross": tgt},
        {"encoder self": src, "decoder self": tgt, "cross": src}, title="trained")
    assert ex.kinds == ["encoder self", "decoder self", "cross"]
    assert len(ex.views()) == 3 * 2 * 4
    bundle = ex._repr_mimebundle_()
    assert set(bundle) == {PLOTLY_MIME, "text/html", "text/plain"}
    # The book's block: the class the extension looks for, and the weights as JSON.
    block = bundle["text/html"]
    assert f'class="{EXPLORER_CLASS}"' in block and "plotly" not in block.lower()
    assert "</s>" not in block  # escaped, or it would end the script element early
    data = _payload(block)
    cross = data["kinds"][2]
    assert cross["name"] == "cross" and cross["queries"] == tgt and cross["keys"] == src
    np.testing.assert_allclose(cross["weights"], ex.panels["cross"], atol=5e-5)
    # JupyterLab's figure: a heatmap per view, one visible, a dropdown button per view.
    fig = bundle[PLOTLY_MIME]
    assert len(fig["data"]) == 24 and sum(t["visible"] for t in fig["data"]) == 1
    buttons = fig["layout"]["updatemenus"][0]["buttons"]
    assert [b["label"] for b in buttons][:2] == ["encoder self · layer 1 · head 1",
                                                 "encoder self · layer 1 · head 2"]
    assert buttons[-1]["args"][0]["visible"] == [False] * 23 + [True]
    assert fig["data"][8]["text"][0][0].startswith("query 1: &lt;bos&gt;")  # counted from 1
    assert fig["data"][0]["zmin"] == 0 and fig["data"][0]["zmax"] == 1  # one scale: weights
    assert json.loads(json.dumps(fig)) == fig  # plain JSON, no numpy scalars
    assert "cross" in repr(ex) and "24 views" in repr(ex)


def test_explorer_carries_its_chinese_title_and_kind_names():
    weights = {"encoder self": torch.rand(1, 2, 3, 3), "cross": torch.rand(1, 2, 3, 3)}
    ex = attention_explorer(weights, ["a", "b", "c"], title="trained", title_zh="训练后",
                            names_zh={"encoder self": "编码器自注意力", "cross": "交叉注意力"})
    data = _payload(ex.to_html())
    assert (data["title"], data["title_zh"]) == ("trained", "训练后")
    assert [(k["name"], k["name_zh"]) for k in data["kinds"]] == [
        ("encoder self", "编码器自注意力"), ("cross", "交叉注意力")]
    with pytest.raises(ValueError, match="names_zh names the kinds"):
        attention_explorer(weights, ["a", "b", "c"], names_zh={"cross": "交叉注意力"})
    plain = _payload(attention_explorer(torch.rand(3, 3), ["a", "b", "c"]).to_html())
    assert plain["title_zh"] == "" and plain["kinds"][0]["name_zh"] == ""


def test_explorer_scale_is_zero_to_one_for_weights_and_the_data_range_otherwise():
    assert attention_explorer(torch.full((2, 2), 0.25), ["a", "b"]).data()["zmax"] == 1
    scores = attention_explorer(torch.tensor([[-2.0, 3.0], [0.0, 1.0]]), ["a", "b"]).data()
    assert (scores["zmin"], scores["zmax"]) == (-2.0, 3.0)


def test_explorer_duplicate_tokens_stay_separate_rows():
    ex = attention_explorer(torch.rand(4, 4), ["the", "cat", "the", "mat"])
    trace = ex.to_plotly()["data"][0]
    assert trace["y"] == [0, 1, 2, 3]  # numeric axes: two "the" rows are not merged
    assert ex.to_plotly()["layout"]["yaxis"]["ticktext"] == ["the", "cat", "the", "mat"]
    assert "updatemenus" not in ex.to_plotly()["layout"]  # one view: nothing to select


def test_explorer_rejects_what_does_not_fit():
    with pytest.raises(ValueError, match=r"\(5,\)"):
        attention_explorer(torch.rand(5), ["a"] * 5)
    with pytest.raises(ValueError, match=r"\(1, 1, 1, 2, 2\)"):
        attention_explorer(torch.rand(1, 1, 1, 2, 2), ["a", "b"])
    with pytest.raises(ValueError, match="3 query tokens for weights with 2"):
        attention_explorer(torch.rand(2, 2), ["a", "b", "c"])
    with pytest.raises(ValueError, match="pass key_tokens"):
        attention_explorer(torch.rand(2, 3), ["a", "b"])
    with pytest.raises(ValueError, match="no entry for kind 'cross'"):
        attention_explorer({"cross": torch.rand(2, 2)}, {"self": ["a", "b"]})
    with pytest.raises(ValueError, match="NaN"):
        attention_explorer(torch.tensor([[float("nan")]]), ["a"])
    with pytest.raises(ValueError, match="empty dict"):
        attention_explorer({}, [])
    with pytest.raises(ValueError, match="one string"):
        attention_explorer(torch.rand(2, 2), "ab")


def test_explorer_marker_matches_the_book_extension():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "book" / "_ext" / "labformer_book.py"
    spec = importlib.util.spec_from_file_location("labformer_book", path)
    assert spec is not None and spec.loader is not None
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    block = attention_explorer(torch.rand(2, 2), ["a", "b"]).to_html()
    assert ext.EXPLORER_MARKER in block
    bundle = ext.plotly_js_path()  # the real plotly.js cartesian bundle, at plotly's version
    assert 1_000_000 < bundle.stat().st_size < 2_000_000
    import plotly

    shipped = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    assert f"plotly.js v{ext.PLOTLY_VERSION}" in shipped.read_text(encoding="utf-8")[:200]


def test_panels_one_width_and_helpers_fit_it():
    from labformer.book.plot import (
        FIGURE_WIDTH,
        GRID_MIN_LABEL_PT,
        attention_grid,
        panels,
        signed_heatmap,
    )

    fig, axes = panels(2, 3)
    assert axes.shape == (2, 3) and fig.get_figwidth() == FIGURE_WIDTH
    with pytest.raises(ValueError, match="rows and cols"):
        panels(0, 1)
    grid = attention_grid(torch.rand(2, 4, 5, 6).softmax(-1), list("abcde"), list("uvwxyz"))
    assert len(grid.axes) == 9 and grid.get_figwidth() == FIGURE_WIDTH  # 8 panels, colour bar
    assert [t.get_text() for t in grid.axes[4].get_xticklabels()] == list("uvwxyz")
    assert grid.axes[0].get_title() == "head 1" and grid.axes[0].get_ylabel() == "layer 1"
    assert grid.axes[0].collections[0].get_clim() == (0.0, 1.0)  # weights: one scale, 0 to 1
    assert grid.axes[-1].get_ylabel() == "attention weight"
    # Many tokens on narrow panels: labels shrink, but not below 8.5 pt (11 px); where a
    # token has less room, every 2nd token is labelled, so neighbours cannot overlap.
    crowded = attention_grid(torch.rand(2, 4, 14, 14).softmax(-1), list("abcdefghijklmn"),
                             list("abcdefghijklmn"))
    labels = crowded.axes[4].get_xticklabels()
    size = labels[0].get_fontsize()
    room = 72 * FIGURE_WIDTH / 4 * 0.85 / 14  # points per column
    every = next(i for i, t in enumerate(labels[1:], 1) if t.get_text())
    assert size == GRID_MIN_LABEL_PT and size <= 0.8 * room * every + 1e-9
    assert [t.get_text() for t in labels] == [c if i % every == 0 else ""
                                              for i, c in enumerate("abcdefghijklmn")]
    assert every == 2
    roomy = attention_grid(torch.rand(1, 2, 5, 5).softmax(-1), list("abcde"), list("abcde"))
    assert all(t.get_text() for t in roomy.axes[0].get_yticklabels())  # room: all labelled
    with pytest.raises(ValueError, match=r"\(N, h, T_q, T_k\)"):
        attention_grid(torch.rand(4, 5, 6))
    heads = attention_heads(torch.rand(8, 10, 10))
    assert heads.get_figwidth() == FIGURE_WIDTH
    sig = signed_heatmap(np.array([[-2.0, 1.0], [0.5, 0.0]]), ["r0", "r1"], ["c0", "c1"])
    mesh = sig.axes[0].collections[0]
    assert mesh.get_clim() == (-2.0, 2.0)  # symmetric: zero sits at the map's white centre
    for fig in (grid, heads, sig):
        assert fig.get_figwidth() <= FIGURE_WIDTH


def test_explorer_side_by_side_heads_flag_reaches_the_page():
    ex = attention_explorer(torch.rand(4, 3, 3), ["a", "b", "c"], side_by_side=True)
    assert _payload(ex.to_html())["side"] is True
    one = attention_explorer(torch.rand(3, 3), ["a", "b", "c"])
    assert _payload(one.to_html())["side"] is False


def test_an_edit_to_a_book_extension_rebuilds_every_page(tmp_path, monkeypatch):
    """The book's extension reports a Sphinx env_version drawn from every file of book/_ext,
    so that Sphinx re-reads all pages when one of them changes."""
    import importlib.util
    import shutil
    from pathlib import Path

    ext_dir = Path(__file__).resolve().parents[2] / "book" / "_ext"
    for path in ext_dir.glob("*.py"):
        shutil.copy(path, tmp_path / path.name)
    spec = importlib.util.spec_from_file_location("labformer_book_copy",
                                                  tmp_path / "labformer_book.py")
    assert spec is not None and spec.loader is not None
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    before = ext.extensions_digest()
    assert isinstance(before, int) and before == ext.extensions_digest()
    claims = tmp_path / "claims.py"
    claims.write_text(claims.read_text() + "\n# an edit\n")
    assert ext.extensions_digest() != before


def test_edition_style_draws_chinese_with_a_chinese_font_or_refuses():
    font = plot.chinese_font()
    assert font is None or font in plot.CHINESE_FONTS
    with plot.edition_style("en"):
        assert "DejaVu Sans" in plt.rcParams["font.sans-serif"]
    with pytest.raises(ValueError, match="'fr'"):
        plot.edition_style("fr")
    if font is None:
        with pytest.raises(RuntimeError, match="no Chinese font"):
            plot.edition_style("zh")
        return
    before = list(plt.rcParams["font.family"])
    with plot.edition_style("zh"):
        assert plt.rcParams["font.family"] == ["DejaVu Sans", font]
        fig, ax = plt.subplots()
        ax.set_title("注意力")  # no "Glyph missing" warning: the font has the characters
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fig.canvas.draw()
        plt.close(fig)
    assert plt.rcParams["font.family"] == before  # restored after the block


def test_a_plot_text_is_translated_from_the_table_with_its_numbers():
    words = [(re.compile(p), zh) for p, zh in (
        (r"^training loss$", "训练损失"), (r"^word (.+?) \+ PE$", "词 {} + 位置编码"))]
    assert plot.translate_text("training loss", words) == "训练损失"
    assert plot.translate_text("word 3 + PE", words) == "词 3 + 位置编码"
    assert plot.translate_text("validation loss", words) is None  # not in the table
    for same in ("0.25", "BLEU", "d_k = 64", "$q \\cdot k$", "Transformer, GRU", ""):
        assert plot.translate_text(same, words) == same  # reads the same in both


def test_every_entry_of_the_plot_table_keeps_its_placeholders():
    table = json.loads(plot.PLOT_WORDS.read_text(encoding="utf-8"))
    assert table, "labformer/plot_zh.json is empty"
    for english, chinese in table.items():
        assert english.count("{}") == chinese.count("{}"), english
        assert english.count("\n") == chinese.count("\n"), english
        # Chinese words, or Chinese punctuation (", " -> "，"), or a text kept as it is
        assert re.search(r"[\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]", chinese) \
            or chinese == english, english


def test_plot_zh_gives_a_chapter_s_own_plot_words():
    assert plot.plot_zh("1 thread") == "1 个线程"
    assert plot.plot_zh(", ") == "，"  # an exact entry before the texts kept as they are
    assert plot.plot_zh("Transformer") == "Transformer"
    with pytest.raises(KeyError, match="plot_zh.json"):
        plot.plot_zh("a text the table lacks")


def test_a_figure_gets_a_chinese_twin_and_keeps_its_english(monkeypatch, tmp_path):
    table = tmp_path / "plot_zh.json"
    table.write_text(json.dumps({"training loss": "训练损失", "step {}": "第 {} 步"},
                                ensure_ascii=False), encoding="utf-8")
    monkeypatch.setattr(plot, "PLOT_WORDS", table)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0], label="step 3")
    ax.set_ylabel("training loss")
    ax.set_title("something new")
    ax.legend()
    twin, missing = plot.chinese_twin(fig)
    if plot.chinese_font() is None:
        assert twin is None and missing == []
        return
    texts = {t.get_text() for t in twin.findobj(matplotlib.text.Text)}
    assert {"训练损失", "第 3 步"} <= texts and missing == ["something new"]
    assert ax.get_ylabel() == "training loss"  # the English figure is unchanged
    plt.close(twin)
    plt.close(fig)
