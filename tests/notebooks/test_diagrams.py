"""labformer.book.diagrams: the pictures carry what they were given, in both editions, and the
numbers a chapter reads back are the numbers the module computes."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import seaborn as sns
import torch

from labformer import attention_with_weights, sinusoidal_positions
from labformer.book import diagrams as dg
from labformer.layers import ResidualSublayer

SVG = "{http://www.w3.org/2000/svg}"


def test_roles_use_the_palette_of_the_plots() -> None:
    assert list(dg.DEEP) == sns.color_palette("deep").as_hex()
    assert len(set(dg.ROLE_COLOURS.values())) == len(dg.ROLE_COLOURS)  # one colour per role
    for role in ("embedding", "position", "query", "key", "value", "output"):
        assert dg.ROLE_COLOURS[role] in dg.DEEP


def _sizes(svg: str) -> list[float]:
    return [float(t.get("font-size") or 0) for t in ET.fromstring(svg).iter(f"{SVG}text")]


def _all_pictures() -> dict[str, dg.Diagram]:
    g = torch.Generator().manual_seed(0)
    x, q, k, v = (torch.randn(2, n, generator=g) for n in (4, 3, 3, 3))
    pe = sinusoidal_positions(5, 8)
    return {
        "walk": dg.attention_walk(["thinking", "machines"], x.tolist(), q.tolist(),
                                  k.tolist(), v.tolist()),
        "qkv": dg.qkv_projection(["thinking", "machines"], 4, 3, 3),
        "matrix": dg.matrix_product([[("X", (2, 4), "embedding"), "×",
                                      ("W^Q", (4, 3), "neutral"), "=", ("Q", (2, 3), "query")]],
                                    [dg.Label("all queries", "全部查询")],
                                    dg.Label("Q = X W^Q", "Q = X W^Q 的矩阵形式")),
        "heads": dg.multi_head(3, 8, 2, 4),
        "heads8": dg.multi_head(3, 16, 8, 2),
        "block": dg.block_map([(dg.Label("the norm", "归一化"), ["LayerNorm"], ["RMSNorm"],
                                ["RMSNorm"]),
                               (dg.Label("positions", "位置"), ["sinusoidal"], ["rotary"],
                                ["RoPE"])], roles=["norm", "position"]),
        "ffn": dg.ffn_per_position(["a", "b"], [[0.5, -1.25, 2.0, 0.0]] * 2,
                                   [[0.1, 0.2, -0.3, 0.4], [1.0, -2.0, 3.0, -4.0]], 16),
        "clocks": dg.clock_hands(pe.tolist(), 5),
        "rows": dg.positional_rows(x.tolist(), pe[:2, :4].tolist(),
                                   (x + pe[:2, :4]).tolist()),
        "blocks": dg.residual_blocks(["sublayer", "add", "norm"], ["norm", "sublayer", "add"]),
        "bottleneck": dg.bottleneck(4, 4),
        "stack": dg.encoder_decoder_stack(["self_attn", "ffn"],
                                          ["self_attn", "cross_attn", "ffn"], 2, 2),
        "masks": dg.masks_in_model(["a", "b", "PAD"], ["BOS", "c"], [[True, True, False]] * 3,
                                   [[True, False], [True, True]], [[True, True, False]] * 2),
        "forcing": dg.decoding_modes(["BOS", "a", "b", "EOS"], [3], [1, 2, 3]),
        "word": dg.output_to_word([0.5] * 4, [1.0, 2.0, 0.5], ["x", "y", "z"],
                                  [0.05, 0.9, 0.05], 0.15),
        "scaling": dg.scaling_softmax([(4, [1.2, -0.5, 2.0, 0.1, -1.0]),
                                       (256, [12.0, -30.5, 25.0, 3.0, -8.0])]),
        "beam": dg.beam_step([(["i", "am"], 0.36), (["a", "student"], 0.18)],
                             [(0, "a", 0.288), (0, "student", 0.072), (1, "<eos>", 0.108),
                              (1, "a", 0.0721)], 2, "<eos>"),
        "pipeline": dg.translation_pipeline("je suis étudiant", ["je", "suis", "étudiant",
                                                                 "<eos>"], [5, 9, 231, 2],
                                            (1, 4, 64), [7, 8, 12, 90, 2],
                                            ["i", "am", "a", "student", "<eos>"],
                                            "i am a student"),
        "carry": dg.carry_numbers(["Il", "a", "37", "ans", "."], ["Il", "a", "40", "ans", "."],
                                  ["He", "is", "40", "."], ["He", "is", "37", "."]),
        "steps": dg.step_structure(8, 256, 2400.0, 410.0),
        "ablations": dg.ablation_map([
            (dg.Label("no positions", "无位置编码"), {"positional": "none"}),
            (dg.Label("no scale", "不缩放"), {"scale_scores": False}),
            (dg.Label("Post-LN, no warm-up", "后置层归一化，无预热"),
             {"norm_first": False, "warmup": False})]),
    }


@pytest.mark.parametrize("name", sorted(_all_pictures()))
def test_every_picture_is_valid_svg_sized_for_the_column_in_both_editions(name: str) -> None:
    diagram = _all_pictures()[name]
    en, zh = diagram.render("en"), diagram.render("zh")
    for pic in (en, zh):
        root = ET.fromstring(pic.svg)  # well-formed
        width = float(root.get("width") or 0)
        assert 0 < width <= dg.MAX_WIDTH
        assert min(_sizes(pic.svg)) >= dg.MIN_FONT
        assert pic.alt and root.find(f"{SVG}title") is not None
        assert 'fill="white"' not in pic.svg and "<rect x=\"0\" y=\"0\"" not in pic.svg
    assert not dg.has_chinese(en.svg), "the English picture has Chinese text"
    assert dg.has_chinese(zh.svg), "the Chinese picture has no Chinese label"
    assert dg.has_chinese(zh.alt) and not dg.has_chinese(en.alt)


def test_the_walk_draws_the_steps_of_attention_in_order_and_its_numbers() -> None:
    g = torch.Generator().manual_seed(3)
    x, q, k, v = (torch.randn(2, n, generator=g) for n in (4, 3, 3, 3))
    pic = dg.attention_walk(["a", "b"], x.tolist(), q.tolist(), k.tolist(), v.tolist()).render()
    z, w = attention_with_weights(q, k, v)
    drawn_w = [dg.read_values(pic, f"weight{j}")[0] for j in range(2)]
    assert drawn_w == pytest.approx(w[0].tolist(), abs=0.006)
    assert dg.read_values(pic, "z") == pytest.approx(z[0].tolist(), abs=0.006)
    assert dg.read_values(pic, "score1")[0] == pytest.approx(float(q[0] @ k[1]), abs=0.006)
    assert dg.read_values(pic, "x0") == pytest.approx(x[0].tolist(), abs=0.006)
    steps = dg.read_texts(pic, "step")
    assert [s.split()[0] for s in steps[1:]] == ["embedding", "query", "key", "value", "score",
                                                 "÷", "softmax", "softmax", "sum"]


def test_reading_back_finds_what_was_drawn_and_names_what_is_missing() -> None:
    pic = dg.multi_head(3, 8, 2, 4).render()
    shapes = dg.read_shapes(pic)
    assert shapes["X"] == (3, 8) and shapes["Z2"] == (3, 4) and shapes["concat"] == (3, 8)
    assert shapes["W^O"] == (8, 8) and shapes["out"] == (3, 8)
    assert dg.read_texts(pic, "step") == ["split", "attend per head", "concatenate", "× W^O"]
    with pytest.raises(KeyError, match="no vector named 'nope'"):
        dg.read_values(pic, "nope")


def test_ffn_per_position_draws_each_row_with_its_own_values() -> None:
    pic = dg.ffn_per_position(["a", "b", "c"], [[0.5, -1.0], [2.0, 0.0], [1.0, 1.0]],
                              [[0.1, 0.2], [0.3, 0.4], [-0.5, 0.6]], 8).render()
    assert dg.read_values(pic, "z2") == [2.0, 0.0]
    assert dg.read_values(pic, "r3") == [-0.5, 0.6]
    assert dg.read_texts(pic, "step") == ["FFN"] * 3
    assert "2 → 8 → 2" in dg.read_texts(pic, "shape")
    with pytest.raises(ValueError, match="one z and one r each"):
        dg.ffn_per_position(["a", "b"], [[1.0]], [[1.0], [2.0]], 4)
    with pytest.raises(ValueError, match="too wide"):
        dg.ffn_per_position(["a", "b"], [[1.0] * 8] * 2, [[1.0] * 8] * 2, 4)


def test_block_map_draws_each_part_in_its_roles_colour() -> None:
    rows = [(dg.Label("the norm"), ["LayerNorm"], ["RMSNorm"], ["RMSNorm"]),
            (dg.Label("attention"), ["8 heads"], ["GQA"], ["GQA"])]
    svg = dg.block_map(rows, roles=["norm", "query"]).render().svg
    strokes = [r.get("stroke") for r in ET.fromstring(svg).iter(f"{SVG}rect")
               if r.get("stroke") in dg.ROLE_COLOURS.values()]
    assert strokes == [dg.ROLE_COLOURS["norm"]] * 3 + [dg.ROLE_COLOURS["query"]] * 3
    assert dg.read_texts(svg, "new") == ["RMSNorm", "GQA"]
    with pytest.raises(ValueError, match="one known role a row"):
        dg.block_map(rows, roles=["norm"])
    with pytest.raises(ValueError, match="one known role a row"):
        dg.block_map(rows, roles=["norm", "attention"])


def test_multi_head_draws_up_to_the_papers_eight_heads() -> None:
    pic = dg.multi_head(3, 16, 8, 2).render()
    shapes = dg.read_shapes(pic)
    assert [shapes[f"Z{i}"] for i in range(1, 9)] == [(3, 2)] * 8
    assert shapes["concat"] == (3, 16) and shapes["W^O"] == (16, 16)
    with pytest.raises(ValueError, match="at most 8 heads"):
        dg.multi_head(3, 18, 9, 2)


def test_clock_hands_point_at_position_times_frequency() -> None:
    pe = sinusoidal_positions(4, 8, dtype=torch.float64)
    angles = dg.read_angles(dg.clock_hands(pe.tolist(), 4).render())
    assert len(angles) == 16
    for p in range(4):
        for i in range(4):
            want = p / 10000 ** (2 * i / 8)
            gap = math.remainder(angles[f"p{p}i{i}"] - want, 2 * math.pi)
            assert abs(gap) < 1e-5


def test_residual_blocks_draw_the_order_given() -> None:
    pic = dg.residual_blocks(["sublayer", "add", "norm"], ["norm", "sublayer", "add"]).render()
    assert dg.read_texts(pic, "step") == ["self-attention", "add (+)", "LayerNorm",
                                          "LayerNorm", "self-attention", "add (+)"]
    with pytest.raises(ValueError, match="sublayer, norm and add"):
        dg.residual_blocks(["sublayer", "norm"], ["norm", "sublayer", "add"])


def test_residual_order_is_read_from_the_running_module() -> None:
    for norm_first, want in ((False, ["sublayer", "add", "norm"]),
                             (True, ["norm", "sublayer", "add"])):
        block = ResidualSublayer(4, norm_first=norm_first)
        assert dg.residual_order(block) == want


def test_masks_and_passes_read_back_as_drawn() -> None:
    dec = [[j <= i for j in range(3)] for i in range(3)]
    pic = dg.masks_in_model(["a", "b"], ["BOS", "c", "d"], [[True, True]] * 2, dec,
                            [[True, False]] * 3).render()
    masks = dg.read_masks(pic)
    assert masks["decoder"] == dec and masks["cross"] == [[True, False]] * 3
    shapes = dg.read_shapes(dg.decoding_modes(["BOS", "a", "b", "EOS"], [3],
                                              [1, 2, 3]).render())
    assert [shapes[f"step{k}"] for k in range(3)] == [(1,), (2,), (3,)]
    assert shapes["forced0"] == (3,) and shapes["forced0_out"] == (3,)
    with pytest.raises(ValueError, match="decoder mask is"):
        dg.masks_in_model(["a"], ["b", "c"], [[True]], [[True]], [[True], [True]])


def test_output_to_word_takes_the_softmax_and_the_most_probable_word() -> None:
    logits = torch.tensor([0.3, 2.0, -1.0, 0.9])
    pic = dg.output_to_word([0.0, 1.0], logits.tolist(), ["a", "b", "c", "d"],
                            [0.1, 0.7, 0.1, 0.1], 0.4).render()
    assert dg.read_values(pic, "probs") == pytest.approx(logits.softmax(-1).tolist(),
                                                         abs=0.006)
    assert dg.read_texts(pic, "word") == ["b"]
    assert dg.read_texts(pic, "vocab") == ["a", "b", "c", "d"]


def test_scaling_softmax_draws_the_softmax_of_raw_and_scaled_scores() -> None:
    g = torch.Generator().manual_seed(1)
    rows = []
    for dk in (4, 64):
        q, k = torch.randn(1, dk, generator=g), torch.randn(5, dk, generator=g)
        rows.append((dk, q, k, (q @ k.T)[0]))
    pic = dg.scaling_softmax([(dk, s.tolist()) for dk, _, _, s in rows]).render()
    for dk, q, k, s in rows:
        _, w_raw = attention_with_weights(q, k, k, scale=1.0)
        _, w_scaled = attention_with_weights(q, k, k)
        assert dg.read_values(pic, f"raw{dk}") == pytest.approx(s.tolist(), abs=0.06)
        assert dg.read_values(pic, f"scaled{dk}") == pytest.approx(
            (s / math.sqrt(dk)).tolist(), abs=0.06)
        assert dg.read_values(pic, f"w_raw{dk}") == pytest.approx(w_raw[0].tolist(), abs=0.006)
        assert dg.read_values(pic, f"w_scaled{dk}") == pytest.approx(w_scaled[0].tolist(),
                                                                     abs=0.006)
    assert dg.read_texts(pic, "title") == ["d_k = 4", "d_k = 64"]
    with pytest.raises(ValueError, match="same 2 to 5 scores"):
        dg.scaling_softmax([(4, [1.0, 2.0]), (8, [1.0])])


def test_beam_step_follows_the_rule_of_beam_search() -> None:
    prefixes = [(["i", "am"], 0.36), (["a", "student"], 0.18)]
    cands = [(0, "a", 0.288), (0, "student", 0.0719), (1, "<eos>", 0.108), (1, "a", 0.0721)]
    pic = dg.beam_step(prefixes, cands, 2, "<eos>").render()
    assert dg.read_texts(pic, "kept") == ["i am a", "a student a"]
    assert dg.read_texts(pic, "finished") == ["a student <eos>"]
    assert dg.read_texts(pic, "dropped") == ["i am student"]
    # an EOS below the beam's worst kept candidate is dropped, not finished
    low = dg.beam_step(prefixes, [(0, "a", 0.3), (1, "a", 0.2), (1, "<eos>", 0.01)], 2,
                       "<eos>").render()
    assert dg.read_texts(low, "finished") == [] and dg.read_texts(low, "dropped") == [
        "a student <eos>"]
    with pytest.raises(ValueError, match="parent"):
        dg.beam_step(prefixes, [(2, "a", 0.1)], 2, "<eos>")


def test_pipeline_and_carry_read_back_as_drawn() -> None:
    pic = _all_pictures()["pipeline"].render()
    assert dg.read_texts(pic, "src_token") == ["je", "suis", "étudiant", "<eos>"]
    assert dg.read_values(pic, "src_ids") == [5, 9, 231, 2]
    assert dg.read_values(pic, "out_ids") == [7, 8, 12, 90, 2]
    assert dg.read_texts(pic, "translation") == ["i am a student"]
    assert "memory (1, 4, 64)" in dg.read_texts(pic, "shape")
    with pytest.raises(ValueError, match="one id per token"):
        dg.translation_pipeline("a", ["a"], [4, 2], (1, 2, 8), [2], ["<eos>"], "")
    carry = _all_pictures()["carry"].render()
    assert dg.read_texts(carry, "prepared") == ["Il", "a", "40", "ans", "."]
    assert dg.read_texts(carry, "carried") == ["He", "is", "37", "."]
    assert "37 → 40" in dg.read_texts(carry, "step")[0]
    assert dg.has_chinese(_all_pictures()["carry"].render("zh"))


def test_ablation_map_puts_each_change_beside_its_part() -> None:
    pic = _all_pictures()["ablations"].render()
    assert dg.read_texts(pic, "change-positions") == ["positional='none'"]
    assert dg.read_texts(pic, "change-norm") == ["norm_first=False"]
    assert dg.read_texts(pic, "change-warmup") == ["warmup=False"]
    assert dg.read_texts(pic, "change-heads") == []
    assert len(dg.read_texts(pic, "part")) == len(dg.ABLATION_PARTS)
    with pytest.raises(ValueError, match="no part of the map for the field 'd_ff'"):
        dg.ablation_map([(dg.Label("wide"), {"d_ff": 256})])


def test_the_intro_map_in_the_book_is_the_one_the_model_draws() -> None:
    """book/diagrams holds the map as labformer draws it now (`python -m labformer.book.diagrams
    book/diagrams` redraws it): a change to the model's layers changes the map or fails here."""
    picture = dg.intro_map()
    folder = Path(__file__).resolve().parents[2] / "book" / "diagrams"
    for lang, name in (("en", "intro_map.svg"), ("zh", "intro_map.zh_CN.svg")):
        assert (folder / name).read_text(encoding="utf-8") == picture.render(lang).svg + "\n"
    steps = dg.read_texts(picture.render(), "step")
    assert steps.count("cross-attention") == 1 and steps.count("add & layer norm") == 5
    assert dg.read_texts(picture.render(), "chapter")[:2] == ["ch. 7", "ch. 5"]


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="wide"):
        dg.Diagram(dg.MAX_WIDTH + 1, 10, dg.Label("x"))
    d = dg.Diagram(100, 100, dg.Label("x"))
    with pytest.raises(ValueError, match="below the 13 px minimum"):
        d.text(0, 0, "tiny", size=9)
    with pytest.raises(ValueError, match="2 or 3 words"):
        dg.attention_walk(["a"], [[1.0]], [[1.0]], [[1.0]], [[1.0]])
    with pytest.raises(ValueError, match="do not make d_model"):
        dg.multi_head(3, 8, 3, 4)
    with pytest.raises(ValueError, match="unknown sublayer 'attn'"):
        dg.encoder_decoder_stack(["attn"], ["ffn"], 1, 1)
    with pytest.raises(ValueError, match="lang must be"):
        d.render("fr")  # type: ignore[arg-type]


def test_labels_are_escaped() -> None:
    d = dg.Diagram(200, 50, dg.Label("a <b> & c"))
    d.text(10, 20, "x < y & z")
    svg = d.render().svg
    ET.fromstring(svg)
    assert re.search(r">x &lt; y &amp; z<", svg)


def test_numbers_in_cells_keep_a_readable_contrast_in_every_role():
    """WCAG's 4.5:1 for every text written in a cell, whatever the role's colour."""
    for role, colour in dg.ROLE_COLOURS.items():
        cell = dg.over_white(colour, dg.CELL_OPACITY)
        assert dg.contrast(dg.INK, cell) >= dg.MIN_CONTRAST, role
    d = dg.Diagram(400, 200, dg.Label("cells"))
    for row, role in enumerate(dg.ROLE_COLOURS):
        d.vector(4, 4 + 18 * row, [0.5, -1.25], role=role, name=role)
    texts = dg.cell_text_contrasts(d.render())
    assert len(texts) == 2 * len(dg.ROLE_COLOURS)
    assert min(ratio for _, ratio in texts) >= dg.MIN_CONTRAST
    # the check bites: white numbers, as the cells once had, fail it
    white = d.render().svg.replace(f'fill="{dg.INK}" class="lf-value"',
                                   'fill="#ffffff" class="lf-value"')
    assert max(ratio for _, ratio in dg.cell_text_contrasts(white)) < dg.MIN_CONTRAST


def test_tokens_written_over_cells_keep_a_readable_contrast():
    picture = dg.translation_pipeline(
        "le chat dort", ["le", "chat", "dort", "</s>"], [5, 6, 7, 2], (1, 4, 128),
        [8, 9, 10, 2], ["the", "cat", "sleeps", "</s>"], "the cat sleeps",
        dg.Label("greedy", "贪心")).render()
    texts = dg.cell_text_contrasts(picture)
    assert {"chat", "cat"} <= {t for t, _ in texts}
    assert min(ratio for _, ratio in texts) >= dg.MIN_CONTRAST


def test_the_positional_rows_fit_their_picture_with_wide_numbers():
    """Four numbers of five characters a row: the three vectors narrow their cells to stay
    inside the 640 px picture, and the numbers read back."""
    rows = [[-1.73, 1.69, -0.29, 0.58]] * 4
    picture = dg.positional_rows(rows, rows, rows).render()
    root = ET.fromstring(picture.svg)
    width = float(root.get("width"))
    right = max(float(r.get("x")) + float(r.get("width"))
                for r in root.iter("{http://www.w3.org/2000/svg}rect"))
    assert right <= width - 2
    assert dg.read_values(picture, "in3") == rows[3]
    with pytest.raises(ValueError, match="do not fit"):
        dg.positional_rows([[-100.25] * 6] * 2, [[0.0] * 6] * 2, [[0.0] * 6] * 2)
