"""The book's diagrams: one function per figure, each drawn from numbers that ``labformer``
computed on a small example, with the toolkit of :mod:`labformer.book.svg` (vectors as rows of
coloured cells, boxes, arrows with shapes, labels in both editions).

A chapter draws a diagram in a few lines and renders it once per edition
(:meth:`~labformer.book.svg.Diagram.render`); its checks read back what the picture shows
(:func:`~labformer.book.svg.read_values`, :func:`~labformer.book.svg.read_texts`) and compare it
with what the module computes. Every text a figure writes is a
:meth:`Label.of <labformer.book.svg.Label.of>` key of the diagrams' catalogue,
``diagrams_zh.json`` (``tests/book/test_catalogues.py`` reads them here).

The toolkit's names are re-exported (``from labformer.book import diagrams as dg``: ``dg.Label``,
``dg.ROLE_COLOURS``, ``dg.read_texts``, ...), so a chapter imports one module.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from labformer.book.svg import (
    CELL_OPACITY,
    DEEP,
    DIAGRAM_WORDS,
    FONTS,
    INK,
    MAX_WIDTH,
    MIN_CONTRAST,
    MIN_FONT,
    MUTED,
    ROLE_COLOURS,
    Diagram,
    Label,
    Lang,
    Picture,
    as_label,
    cell_text_contrasts,
    contrast,
    diagram_words,
    has_chinese,
    over_white,
    read_angles,
    read_masks,
    read_shapes,
    read_texts,
    read_values,
    shape_text,
    text_width,
    vector_width,
)

__all__ = [
    # the figures
    "ABLATION_PARTS",
    "MAP_PARTS",
    "STEP_LABELS",
    "SUBLAYER_NAMES",
    "TRAINING_PARTS",
    "ablation_map",
    "attention_walk",
    "beam_step",
    "block_map",
    "bottleneck",
    "carry_numbers",
    "clock_hands",
    "decoder_only",
    "decoding_modes",
    "encoder_decoder_stack",
    "ffn_per_position",
    "intro_map",
    "masks_in_model",
    "matrix_product",
    "model_map",
    "multi_head",
    "output_to_word",
    "positional_rows",
    "qkv_projection",
    "residual_blocks",
    "residual_order",
    "scaling_softmax",
    "step_structure",
    "translation_pipeline",
    # the toolkit (labformer.book.svg), re-exported
    "CELL_OPACITY",
    "DEEP",
    "DIAGRAM_WORDS",
    "FONTS",
    "INK",
    "MAX_WIDTH",
    "MIN_CONTRAST",
    "MIN_FONT",
    "MUTED",
    "ROLE_COLOURS",
    "Diagram",
    "Label",
    "Lang",
    "Picture",
    "cell_text_contrasts",
    "contrast",
    "diagram_words",
    "has_chinese",
    "over_white",
    "read_angles",
    "read_masks",
    "read_shapes",
    "read_texts",
    "read_values",
    "shape_text",
    "vector_width",
]


def _floats(rows: Sequence[Sequence[float]]) -> list[list[float]]:
    return [[float(v) for v in row] for row in rows]


def attention_walk(words: Sequence[str], x: Sequence[Sequence[float]],
                   q: Sequence[Sequence[float]], k: Sequence[Sequence[float]],
                   v: Sequence[Sequence[float]], i: int = 0) -> Diagram:
    """Self-attention for word ``i``, step by step, with the numbers of a worked example.

    One column per word: its embedding x, query q, key k and value v (rows of ``x``, ``q``...),
    then the score q_i . k_j, the score divided by sqrt(d_k), the softmax over the words, the
    weighted value, and at the bottom their sum z_i. The steps are computed here, in the order
    drawn, so a chapter can check them against its attention function. Vectors are named
    ``x0``, ``q0``, ``score0``, ``scaled0``, ``weight0``, ``wv0``, ... and ``z``.
    """
    T = len(words)
    xs, qs, ks, vs = _floats(x), _floats(q), _floats(k), _floats(v)
    if not 2 <= T <= 3 or not len(xs) == len(qs) == len(ks) == len(vs) == T:
        raise ValueError(f"the walk draws 2 or 3 words with one x, q, k, v each; got {T} words")
    if not 0 <= i < T:
        raise ValueError(f"word {i} is not one of the {T} words")
    d_k = len(qs[0])
    root = math.sqrt(d_k)
    score = [sum(a * b for a, b in zip(qs[i], ks[j], strict=True)) for j in range(T)]
    scaled = [s / root for s in score]
    top = max(scaled)
    e = [math.exp(s - top) for s in scaled]
    weight = [ej / sum(e) for ej in e]
    wv = [[weight[j] * c for c in vs[j]] for j in range(T)]
    z = [sum(wv[j][c] for j in range(T)) for c in range(len(vs[0]))]
    left, row, top_y = 168.0, 34.0, 26.0
    colw = (MAX_WIDTH - left) / T
    steps: list[tuple[Label, str, list[list[float]] | None, str]] = [
        (Label.of("embedding x"), "x", xs, "embedding"),
        (Label.of("query q"), "q", qs, "query"),
        (Label.of("key k"), "k", ks, "key"),
        (Label.of("value v"), "v", vs, "value"),
        (Label.of("score q{n}·k", n=i + 1), "score", [[s] for s in score],
         "weight"),
        (Label.of("÷ √d_k = {root:.2f}", root=root), "scaled",
         [[s] for s in scaled], "weight"),
        (Label.of("softmax"), "weight", [[w] for w in weight], "weight"),
        (Label.of("softmax × value"), "wv", wv, "value"),
    ]
    height = top_y + row * (len(steps) + 2) + 8
    d = Diagram(MAX_WIDTH, height, Label.of(
        "Self-attention of the word '{word}' step by step: each word's embedding, query, key and "
        "value as cells, the scores, their division by the square root of {d_k}, the softmax "
        "weights, the weighted values and their sum z.", word=words[i], d_k=d_k))
    d.text(4, top_y - 6, Label.of("word"), anchor="start", kind="step", bold=True)
    for j, w in enumerate(words):
        d.text(left + (j + 0.5) * colw, top_y - 6, w, bold=True, kind="word")
    for r, (label, name, values, role) in enumerate(steps):
        y = top_y + 6 + r * row
        d.text(4, y + 17, label, anchor="start", kind="step")
        assert values is not None
        for j in range(T):
            width = vector_width(values[j])
            d.vector(left + (j + 0.5) * colw - width / 2, y, values[j], role=role,
                     name=f"{name}{j}")
    y = top_y + 6 + len(steps) * row + 10
    d.text(4, y + 17, Label.of("sum z{n}", n=i + 1), anchor="start", kind="step")
    width = vector_width(z)
    d.vector(left + (MAX_WIDTH - left) / 2 - width / 2, y, z, role="output", name="z")
    for j in range(T):
        d.arrow(left + (j + 0.5) * colw, y - 8, left + (MAX_WIDTH - left) / 2, y - 1,
                colour=ROLE_COLOURS["value"])
    return d


def qkv_projection(words: Sequence[str], d_model: int, d_k: int, d_v: int) -> Diagram:
    """Each word's embedding (d_model cells) turned into a smaller query, key and value, and
    the first word's output z as the weighted sum of the values. Vectors are named ``x0``,
    ``q0``, ``k0``, ``v0``, ... and ``z``; the shapes are written on the arrows."""
    T = len(words)
    if T != 2:
        raise ValueError(f"the picture draws two words, got {T}")
    cell, gap = 20.0, 180.0
    d = Diagram(MAX_WIDTH, 322, Label.of(
        "Two words, each an embedding of {d_model} cells; multiplied by W^Q, W^K and W^V it "
        "gives a query and a key of {d_k} cells and a value of {d_v}. The first word's output "
        "z is the sum of the two values, weighted by the softmax of its query against each key.",
        d_model=d_model, d_k=d_k, d_v=d_v))
    xw = d_model * cell
    for j, word in enumerate(words):
        cy = 52.0 + j * 112
        d.text(4, cy + 5, word, anchor="start", bold=True, kind="word")
        x0 = 96.0
        d.vector(x0, cy - 12, d_model, role="embedding", name=f"x{j}", cell=cell)
        d.text(x0 + xw / 2, cy + 30, f"x{j + 1} {shape_text((d_model,))}", kind="shape",
               size=13, colour=MUTED)
        x1, xb = x0 + xw + gap, x0 + xw + 36  # the projections branch off at xb
        d.line(x0 + xw + 4, cy, xb, cy)
        d.line(xb, cy - 40 + 12, xb, cy - 40 + 2 * 34 + 12)
        for r, (sym, role, n, name) in enumerate((("Q", "query", d_k, "q{n}"),
                                                   ("K", "key", d_k, "k{n}"),
                                                   ("V", "value", d_v, "v{n}"))):
            y = cy - 40 + r * 34
            d.arrow(xb, y + 12, x1 - 6, y + 12, f"× W^{sym} {shape_text((d_model, n))}",
                    side=-5)
            d.vector(x1, y, n, role=role, name=f"{sym.lower()}{j}", cell=cell)
            d.text(x1 + n * cell + 8, y + 17, Label.of(name, n=j + 1), anchor="start",
                   kind="label")
    y = 290.0
    d.text(4, y + 17, Label.of("output of word 1"), anchor="start", kind="step")
    x = 170.0
    for j in range(T):
        d.text(x, y + 17, f"{'+ ' if j else ''}w1{j + 1} ×", anchor="start", kind="label")
        x += 66 if j else 48
        d.vector(x, y, d_v, role="value", name=f"wv{j}", cell=cell)
        x += d_v * cell + 12
    d.text(x, y + 17, "=", anchor="start")
    d.vector(x + 18, y, d_v, role="output", name="z", cell=cell)
    d.text(x + 18 + d_v * cell + 8, y + 17, f"z1 {shape_text((d_v,))}", anchor="start",
           kind="shape", colour=MUTED)
    d.text(170, y - 10, Label.of("w1j = softmax_j(q1·kj / √d_k)"),
           anchor="start", kind="label", colour=MUTED)
    return d


Term = tuple[str | Label, tuple[int, int], str]


def matrix_product(lines: Sequence[Sequence[Term | str]], titles: Sequence[Label],
                   alt: Label, cell: float = 18) -> Diagram:
    """Matrices as grids of cells with operators between them, one equation a line, each
    line under its title (what it computes, in words).

    A term is (name, (rows, cols), role); a string is an operator ("×", "=", "→ softmax →").
    Each grid carries its name and shape below it; names are read back by :func:`read_shapes`.
    """
    if len(titles) != len(lines):
        raise ValueError(f"{len(lines)} equations need {len(lines)} titles, got {len(titles)}")
    heights = [max((t[1][0] for t in line if not isinstance(t, str)), default=1) * cell
               for line in lines]
    height = sum(h + 76 for h in heights) + 8
    d = Diagram(MAX_WIDTH, height, alt)
    y = 10.0
    for line, h, title in zip(lines, heights, titles, strict=True):
        d.text(6, y + 14, title, anchor="start", kind="title", bold=True)
        y += 24
        x = 6.0
        for term in line:
            if isinstance(term, str):
                d.text(x + 4, y + h / 2 + 5, term, anchor="start", kind="op")
                x += text_width(term, 14) + 12
                continue
            name, (rows, cols), role = term
            label = as_label(name)
            w, gh = d.matrix(x, y + (h - rows * cell) / 2, rows, cols, role=role,
                             name=label.en, cell=cell)
            d.text(x + w / 2, y + h + 18, label, kind="label")
            d.text(x + w / 2, y + h + 36, shape_text((rows, cols)), kind="shape",
                   colour=MUTED)
            x += max(w, text_width(shape_text((rows, cols)), 13)) + 10
        if x > MAX_WIDTH:
            raise ValueError(f"the equation is {x:.0f} px wide, more than {MAX_WIDTH}")
        y += h + 52
    return d


def multi_head(T: int, d_model: int, heads: int, d_k: int) -> Diagram:
    """X split into ``heads`` heads, each attending on its own, the outputs Z_i concatenated
    and multiplied by W^O, with the shapes. Steps (class ``step``) in the order they run."""
    if heads * d_k != d_model:
        raise ValueError(f"{heads} heads of {d_k} do not make d_model {d_model}")
    if heads > 8:
        raise ValueError(f"the picture draws at most 8 heads, got {heads}")
    c = min(12.0, 96.0 / d_model)
    hh = T * c
    band = hh + (30 if heads <= 4 else 22)
    mid = 40 + heads * band / 2 - 15
    wo_y = mid + hh / 2 + 30  # W^O's top, under the concatenation
    height = max(40 + heads * band + 20, wo_y + d_model * c / 2 + 34)
    d = Diagram(MAX_WIDTH, height, Label.of(
        "Multi-head attention: the input X of shape ({T}, {d_model}) is projected and split "
        "into {heads} heads of width {d_k}; each head attends on its own and gives Z_i of "
        "shape ({T}, {d_k}); the Z_i are concatenated into ({T}, {d_model}) and multiplied by "
        "W^O.", T=T, d_model=d_model, heads=heads, d_k=d_k))
    steps = [Label.of("split"), Label.of("attend per head"),
             Label.of("concatenate"), Label.of("× W^O")]
    xs = [6.0, 132.0, 262.0, 420.0, 540.0]
    d.matrix(xs[0], mid - hh / 2, T, d_model, role="embedding", name="X", cell=c)
    d.text(xs[0] + d_model * c / 2, mid + hh / 2 + 18, "X", kind="label")
    d.text(xs[0] + d_model * c / 2, mid + hh / 2 + 35, shape_text((T, d_model)), kind="shape",
           colour=MUTED)
    for n, label in enumerate(steps):
        d.text((xs[n] + xs[n + 1]) / 2 + 30, 18, label, kind="step", bold=True)
    for hd in range(heads):
        y = 40 + hd * band
        d.arrow(xs[0] + d_model * c + 4, mid, xs[1] - 4, y + hh / 2)
        d.matrix(xs[1], y, T, d_k, role="query", name=f"Q{hd + 1}", cell=c)
        d.text(xs[1] + d_k * c + 6, y + hh / 2 + 5,
               Label.of("head {n}", n=hd + 1), anchor="start", kind="label")
        d.arrow(xs[1] + d_k * c + 62, y + hh / 2, xs[2] - 4, y + hh / 2)
        d.matrix(xs[2], y, T, d_k, role="output", name=f"Z{hd + 1}", cell=c)
        d.text(xs[2] + d_k * c + 4, y + hh / 2 + 5, f"Z{hd + 1} {shape_text((T, d_k))}",
               anchor="start", kind="shape", colour=MUTED)
    ccol = xs[3] - 20
    cy = mid - hh / 2
    merge = ccol - 16  # the Z_i's lines meet here, then one arrow enters the concatenation
    for hd in range(heads):
        d.line(xs[2] + d_k * c + 4 + text_width(f"Z{hd + 1} {shape_text((T, d_k))}", 13) + 4,
               40 + hd * band + hh / 2, merge, cy + hh / 2)
    d.arrow(merge, cy + hh / 2, ccol - 4, cy + hh / 2)
    d.matrix(ccol, cy, T, d_model, role="output", name="concat", cell=c)
    d.text(ccol + d_model * c / 2, cy + hh + 18,
           Label.of("concat {shape}", shape=shape_text((T, d_model))),
           kind="shape", colour=MUTED)
    # W^O under the product's arrow, joining it from below
    jx = (ccol + d_model * c + xs[4]) / 2
    d.matrix(jx - d_model * c / 4, wo_y, d_model, d_model, role="neutral", name="W^O",
             cell=c / 2)
    d.text(jx, wo_y + d_model * c / 2 + 16, f"W^O {shape_text((d_model, d_model))}",
           kind="shape", colour=MUTED)
    d.arrow(jx, wo_y - 3, jx, cy + hh / 2 + 4)
    d.arrow(ccol + d_model * c + 4, cy + hh / 2, xs[4] - 4, cy + hh / 2)
    d.matrix(xs[4], cy, T, d_model, role="output", name="out", cell=c)
    d.text(xs[4], cy + hh + 18, Label.of("output {shape}", shape=shape_text((T, d_model))),
           anchor="start", kind="shape", colour=MUTED)
    return d


def ffn_per_position(words: Sequence[str], z: Sequence[Sequence[float]],
                     r: Sequence[Sequence[float]], d_ff: int) -> Diagram:
    """Source 001's per-position flow: each position's attention output z_t (vectors ``z1``,
    ``z2``, ...) goes through the same feed-forward network on its own and gives r_t (``r1``,
    ...). One row a position; the FFN boxes (class ``step``) are joined by a dashed line, the
    one set of weights they share."""
    zs, rs = _floats(z), _floats(r)
    if not 2 <= len(words) <= 4 or len(zs) != len(words) or len(rs) != len(words):
        raise ValueError(f"need 2 to 4 words with one z and one r each, got {len(words)} "
                         f"words, {len(zs)} z, {len(rs)} r")
    d_model = len(zs[0])
    rowh, top = 52.0, 58.0
    d = Diagram(MAX_WIDTH, top + len(words) * rowh + 8, Label.of(
        "The position-wise feed-forward network: each of the {positions} positions' attention "
        "outputs z (vectors of {d_model} numbers) goes through the same network on its own, "
        "widened to {d_ff} and back, and gives r. No row reads another, so the rows can be "
        "computed in parallel.", positions=len(words), d_model=d_model, d_ff=d_ff))
    left = 4 + max(text_width(w, 14) for w in words) + 10
    cell = max(vector_width([v]) for row in zs + rs for v in row)  # one width for all
    z_w = d_model * cell
    box_x, box_w = left + z_w + 34, 112.0
    r_x = box_x + box_w + 34
    if r_x + d_model * cell > MAX_WIDTH:
        raise ValueError("the vectors are too wide for the picture: use fewer dimensions")
    d.text(left + z_w / 2, 18, Label.of("attention output z"), kind="title",
           bold=True)
    d.text(box_x + box_w / 2, 18, Label.of("one FFN"), kind="title", bold=True)
    d.text(box_x + box_w / 2, 36, f"{d_model} → {d_ff} → {d_model}", kind="shape",
           colour=MUTED, size=13)
    d.text(r_x + z_w / 2, 18, Label.of("its output r"), kind="title", bold=True)
    for t, word in enumerate(words):
        y = top + t * rowh
        d.text(4, y + 17, word, anchor="start", kind="word")
        d.vector(left, y, zs[t], role="output", name=f"z{t + 1}", cell=cell, fixed=True)
        d.arrow(left + z_w + 4, y + 12, box_x - 4, y + 12)
        d.box(box_x, y - 4, box_w, 32, "FFN", role="hidden", kind="step", size=14)
        d.arrow(box_x + box_w + 4, y + 12, r_x - 4, y + 12)
        d.vector(r_x, y, rs[t], role="hidden", name=f"r{t + 1}", cell=cell, fixed=True)
        if t:  # the dashed link: one set of weights
            d.line(box_x + box_w / 2, y - 4 - (rowh - 32), box_x + box_w / 2, y - 4,
                   colour=ROLE_COLOURS["hidden"], dashed=True)
    return d


def clock_hands(table: Sequence[Sequence[float]], positions: int = 4) -> Diagram:
    """The sinusoidal encoding as clock hands: one clock per pair of columns (sin, cos), one
    row per position; a hand points at the angle whose sine and cosine are the pair's values,
    so each pair turns at its own speed as the position grows. Hands are named ``p{pos}i{pair}``.
    """
    rows = _floats(table)[:positions]
    d_model = len(rows[0])
    pairs = d_model // 2
    if pairs > 5 or d_model % 2:
        raise ValueError(f"the picture draws an even d_model of at most 10, got {d_model}")
    r, left, colw, rowh = 22.0, 96.0, 104.0, 62.0
    height = 52 + len(rows) * rowh
    d = Diagram(min(MAX_WIDTH, left + pairs * colw), height, Label.of(
        "The positional encoding as clock hands: {pairs} clocks per position, one for each "
        "pair of sine and cosine columns; from position to position the first hand turns "
        "fastest and the last hardly moves.", pairs=pairs))
    for i in range(pairs):
        cx = left + (i + 0.5) * colw
        d.text(cx, 18, Label.of("dims {even}, {odd}", even=2 * i, odd=2 * i + 1),
               kind="label")
        speed = Label.of("fast") if i == 0 else Label.of("slow") if i == pairs - 1 else ""
        if as_label(speed).en:
            d.text(cx, 36, speed, kind="label", colour=MUTED, size=13)
    for p, row in enumerate(rows):
        cy = 52 + p * rowh + r + 4
        d.text(4, cy + 5, Label.of("position {p}", p=p), anchor="start", kind="step")
        for i in range(pairs):
            cx = left + (i + 0.5) * colw
            d.circle(cx, cy, r, role="position")
            d.hand(cx, cy, r - 3, math.atan2(row[2 * i], row[2 * i + 1]), role="position",
                   name=f"p{p}i{i}")
    return d


def positional_rows(x: Sequence[Sequence[float]], pe: Sequence[Sequence[float]],
                    out: Sequence[Sequence[float]]) -> Diagram:
    """Row by row: each position's embedding plus its row of the encoding gives the input of
    the first layer. Vectors ``x{p}``, ``pe{p}``, ``in{p}``, values written in the cells."""
    xs, ps, os_ = _floats(x), _floats(pe), _floats(out)
    if not len(xs) == len(ps) == len(os_) or len(xs) > 6:
        raise ValueError("x, pe and out need the same number of rows (at most 6)")
    rowh = 36.0
    d = Diagram(MAX_WIDTH, 40 + len(xs) * rowh, Label.of(
        "A {dims}-dimensional example row by row: each position's word embedding plus that "
        "position's row of the encoding table gives the vector the first layer reads.",
        dims=len(xs[0])))
    left, gap, n = 58.0, 28.0, len(xs[0])
    # three vectors side by side within the picture: the cells narrow to fit, down to the
    # width of their widest number
    wx = min(max(vector_width(r) for r in xs + ps + os_),
             (MAX_WIDTH - 4 - left - 2 * gap) / 3)
    widest = max(text_width(f"{v:.2f}", 13) for r in xs + ps + os_ for v in r)
    if wx / n < widest + 2:
        raise ValueError(f"{n} numbers a row do not fit three rows side by side")
    cols = [left, left + wx + gap, left + 2 * wx + 2 * gap]
    for c, label in zip(cols, (Label.of("embedding"), Label.of("+ position"),
                               Label.of("= input")), strict=True):
        d.text(c + wx / 2, 18, label, kind="step", bold=True)
    for p in range(len(xs)):
        y = 32 + p * rowh
        d.text(4, y + 17, Label.of("pos {p}", p=p), anchor="start", kind="label")
        for c, values, role, name in ((cols[0], xs[p], "embedding", "x"),
                                      (cols[1], ps[p], "position", "pe"),
                                      (cols[2], os_[p], "output", "in")):
            d.vector(c, y, values, role=role, name=f"{name}{p}", cell=wx / n, fixed=True)
        d.text(cols[1] - gap / 2, y + 17, "+")
        d.text(cols[2] - gap / 2, y + 17, "=")
    return d


#: The names of the steps a residual block draws, per edition.
STEP_LABELS = {"sublayer": Label.of("self-attention"),
               "norm": Label.of("LayerNorm"), "add": Label.of("add (+)")}


def residual_blocks(post: Sequence[str], pre: Sequence[str]) -> Diagram:
    """Post-LN and Pre-LN side by side, bottom to top in the order given (steps ``sublayer``,
    ``norm``, ``add``), the residual path dashed from the block's input to the add."""
    for order in (post, pre):
        if sorted(order) != ["add", "norm", "sublayer"]:
            raise ValueError(f"a block is sublayer, norm and add in some order, got {order}")
    bw, bh, gap = 170.0, 34.0, 26.0
    height = 60 + 4 * (bh + gap)
    d = Diagram(MAX_WIDTH, height, Label.of(
        "Two residual blocks side by side, read from bottom to top. Post-LN: self-attention, "
        "add the input, then layer normalization. Pre-LN: layer normalization, self-attention, "
        "then add the input; the residual path (dashed) skips the norm."))
    for col, (title, order) in enumerate(((Label.of("Post-LN"), post),
                                          (Label.of("Pre-LN"), pre))):
        x = 60 + col * 300.0
        d.text(x + bw / 2, 20, title, kind="title", bold=True)
        y_in = height - 16
        d.text(x + bw / 2, y_in, "x", kind="label")
        prev = y_in - 16
        add_y = 0.0
        for n, step in enumerate(order):
            y = height - 40 - (n + 1) * (bh + gap) + gap
            d.arrow(x + bw / 2, prev, x + bw / 2, y + bh + 2)
            role = {"sublayer": "query", "norm": "norm", "add": "neutral"}[step]
            d.box(x, y, bw, bh, STEP_LABELS[step], role=role, kind="step")
            if step == "add":
                add_y = y + bh / 2
            prev = y
        d.arrow(x + bw / 2, prev, x + bw / 2, 30)
        # The residual path: from the input, up the right side, into the add.
        rx = x + bw + 30
        d.items.append(("line", {"x1": x + bw / 2 + 8, "y1": y_in - 10, "x2": rx,
                                 "y2": y_in - 10, "dashed": True, "colour": MUTED}))
        d.arrow(rx, y_in - 10, rx, add_y, Label.of("residual"), dashed=True)
        d.arrow(rx, add_y, x + bw + 3, add_y, dashed=True)
    return d


def bottleneck(T: int, hidden: int) -> Diagram:
    """An RNN encoder-decoder twice: above, the decoder sees only the encoder's last state (one
    fixed vector of ``hidden`` cells); below, each decoder step attends to all ``T`` states."""
    cell = min(14.0, 84.0 / hidden)
    d = Diagram(MAX_WIDTH, 330, Label.of(
        "Two encoder-decoders. Above, the encoder's {T} states are reduced to its last one, a "
        "single fixed vector of {hidden} numbers that the decoder must start from. Below, at "
        "every step the decoder attends to all {T} states and takes a weighted sum.",
        T=T, hidden=hidden))
    w = hidden * cell
    for panel, (title, attend) in enumerate(((Label.of("fixed vector"), False),
                                             (Label.of("with attention"), True))):
        y0 = 28 + panel * 160
        d.text(4, y0, title, anchor="start", kind="title", bold=True)
        d.text(4, y0 + 40, Label.of("encoder"), anchor="start", kind="label")
        d.text(4, y0 + 122, Label.of("decoder"), anchor="start", kind="label")
        xs = [80 + j * (w + 16) for j in range(T)]
        for j, x in enumerate(xs):
            d.vector(x, y0 + 24, hidden, role="hidden", name=f"h{panel}_{j}", cell=cell)
            if j:
                d.arrow(x - 15, y0 + 36, x - 2, y0 + 36)
        dx = [xs[-1] + w + 44 + j * (w + 24) for j in range(3)]
        if not attend:
            d.arrow(xs[-1] + w + 4, y0 + 36, dx[0] - 20, y0 + 100,
                    f"c {shape_text((hidden,))}", side=-10)
        for n, x in enumerate(dx):
            if x + w > MAX_WIDTH:
                raise ValueError(f"{T} states of {hidden} cells do not fit the width")
            d.vector(x, y0 + 106, hidden, role="hidden", name=f"s{panel}_{n}", cell=cell)
            if n:
                d.arrow(x - 22, y0 + 118, x - 2, y0 + 118)
        if attend:
            for x in xs:
                d.arrow(x + w / 2, y0 + 50, dx[1] + w / 2, y0 + 104,
                        colour=ROLE_COLOURS["weight"])
            for k, line in enumerate((Label.of("weights α"),
                                      Label.of("over all states"))):
                d.text(dx[1] + w / 2 + 8, y0 + 74 + 16 * k, line, anchor="start",
                       kind="label", colour=MUTED)
    return d


def encoder_decoder_stack(encoder: Sequence[str], decoder: Sequence[str], n_enc: int,
                          n_dec: int) -> Diagram:
    """A stack of ``n_enc`` encoder layers and ``n_dec`` decoder layers, each layer a box
    listing its sublayers (``encoder``, ``decoder``: their names, bottom to top); the last
    encoder's output feeds every decoder layer's cross-attention."""
    names = {"self_attn": Label.of("self-attention"),
             "cross_attn": Label.of("cross-attention"),
             "ffn": Label.of("feed-forward")}
    for sub in list(encoder) + list(decoder):
        if sub not in names:
            raise ValueError(f"unknown sublayer {sub!r}; known: {sorted(names)}")
    sh, bw = 26.0, 210.0
    layer_h = [len(encoder) * (sh + 6) + 14, len(decoder) * (sh + 6) + 14]
    height = 70 + max(n_enc * (layer_h[0] + 24), n_dec * (layer_h[1] + 24))
    d = Diagram(MAX_WIDTH, height, Label.of(
        "A stack of {n_enc} encoder layers and {n_dec} decoder layers. Each encoder layer has "
        "{enc_sublayers} sublayers, each decoder layer {dec_sublayers}; the output of the last "
        "encoder layer goes to the cross-attention of every decoder layer.",
        enc_sublayers=len(encoder), dec_sublayers=len(decoder), n_enc=n_enc, n_dec=n_dec))
    tops: list[list[float]] = [[], []]
    cross_y: list[float] = []
    for col, (subs, n_layers, title) in enumerate(
            ((encoder, n_enc, Label.of("encoder")),
             (decoder, n_dec, Label.of("decoder")))):
        x = 40 + col * 330.0
        d.text(x + bw / 2, 18, title, kind="title", bold=True)
        for n in range(n_layers):
            y = height - 20 - (n + 1) * (layer_h[col] + 24)
            d.box(x, y, bw, layer_h[col], role="neutral", dashed=True)
            for s, sub in enumerate(subs):
                sy = y + layer_h[col] - 10 - (s + 1) * (sh + 6) + 3
                role = {"self_attn": "query", "cross_attn": "key", "ffn": "hidden"}[sub]
                d.box(x + 12, sy, bw - 24, sh, names[sub], role=role, kind="step", size=13)
                if sub == "cross_attn":
                    cross_y.append(sy + sh / 2)
            if n:
                d.arrow(x + bw / 2, y + layer_h[col] + 22, x + bw / 2, y + layer_h[col] + 2)
            tops[col].append(y)
        d.arrow(x + bw / 2, tops[col][-1] - 2, x + bw / 2, 28)
    top_enc = tops[0][-1]
    for cy in cross_y:
        d.arrow(40 + bw, top_enc + 6, 370 - 3, cy, colour=ROLE_COLOURS["key"])
    return d


def residual_order(block: Any) -> list[str]:
    """The order in which a residual block (``labformer.layers.ResidualSublayer``) runs its
    steps, observed: ``sublayer``, ``norm`` and ``add`` (where the input joins the branch).

    The block runs once on a small random input with a stand-in sublayer; a hook sees what
    reaches its LayerNorm. The add comes before the norm when the norm reads input + branch,
    and last when the block's output is input + branch.
    """
    import torch

    width = int(block.norm.normalized_shape[0])
    x = torch.randn(1, 3, width, generator=torch.Generator().manual_seed(0))
    events: list[tuple[str, Any]] = []
    branch: list[Any] = []

    def sublayer(y: Any) -> Any:
        events.append(("sublayer", y.clone()))
        branch.append(torch.tanh(y) + 1.0)
        return branch[-1]

    def on_norm(module: Any, inputs: tuple[Any, ...]) -> None:
        events.append(("norm", inputs[0].clone()))

    handle = block.norm.register_forward_pre_hook(on_norm)
    training = block.training
    try:
        block.eval()
        with torch.no_grad():
            out = block(x, sublayer)
    finally:
        handle.remove()
        block.train(training)
    order: list[str] = []
    for name, seen in events:
        if name == "norm" and branch and torch.allclose(seen, x + branch[0]):
            order.append("add")
        order.append(name)
    if branch and torch.allclose(out, x + branch[0]):
        order.append("add")
    return order


def output_to_word(h: Sequence[float], logits: Sequence[float], words: Sequence[str],
                   target: Sequence[float], smoothing: float) -> Diagram:
    """The decoder's output vector ``h`` through the final linear layer (``logits``, one per
    word), the softmax (computed here) and the choice of the most probable word; below, the
    smoothed training target. Vectors ``h``, ``logits``, ``probs``, ``target``; the chosen
    word is the text of class ``word``."""
    hs, zs, ps = [float(v) for v in h], [float(v) for v in logits], [float(v) for v in target]
    if not len(zs) == len(words) == len(ps) or not 2 <= len(zs) <= 8:
        raise ValueError(f"need 2 to 8 words with one logit and one target each, got "
                         f"{len(words)} words, {len(zs)} logits, {len(ps)} targets")
    top = max(zs)
    e = [math.exp(z - top) for z in zs]
    probs = [v / sum(e) for v in e]
    best = max(range(len(probs)), key=probs.__getitem__)
    left, rowh = 178.0, 46.0
    d = Diagram(MAX_WIDTH, 40 + 5 * rowh, Label.of(
        "The decoder's output vector of {numbers} numbers goes through the final linear layer, "
        "which gives one score (logit) per word of a {vocab}-word vocabulary; the softmax turns "
        "the scores into probabilities and the most probable word, '{best}', is the output. "
        "Below, the smoothed target the loss compares the probabilities with.", numbers=len(hs),
        vocab=len(words), best=words[best]))
    cell = max(max(text_width(w, 13) for w in words) + 6,
               max(vector_width([v], digits=2) for v in zs + probs + ps))
    rows: list[tuple[Label, str, list[float], str, int]] = [
        (Label.of("decoder output h"), "h", hs, "output", 2),
        (Label.of("linear: logits"), "logits", zs, "logit", 2),
        (Label.of("softmax"), "probs", probs, "weight", 2),
        (Label.of("target, ε = {smoothing:g}", smoothing=smoothing), "target", ps,
         "neutral", 2),
    ]
    for n, w in enumerate(words):  # the vocabulary over the first row with one cell a word
        d.text(left + (n + 0.5) * cell, 34 + rowh - 6, w, kind="vocab", size=13,
               colour=MUTED)
    for r, (label, name, values, role, digits) in enumerate(rows):
        y = 34 + r * rowh + (rowh if r == 3 else 0)
        d.text(4, y + 17, label, anchor="start", kind="step")
        if name == "h":
            d.vector(left, y, values, role=role, name=name, digits=digits, cell=30)
        else:
            d.vector(left, y, values, role=role, name=name, digits=digits, cell=cell,
                     fixed=True)
        if r in (1, 2):
            d.arrow(left - 10, y - 20, left - 10, y - 2)
    y_word = 34 + 3 * rowh
    d.arrow(left + (best + 0.5) * cell, y_word - 20, left + (best + 0.5) * cell, y_word + 2)
    d.text(left + (best + 0.5) * cell, y_word + 18, words[best], kind="word", bold=True)
    d.text(4, y_word + 18, Label.of("most probable word"), anchor="start",
           kind="step")
    return d


def masks_in_model(src: Sequence[str], tgt: Sequence[str], encoder: Sequence[Sequence[bool]],
                   decoder: Sequence[Sequence[bool]],
                   cross: Sequence[Sequence[bool]]) -> Diagram:
    """The three masks of an encoder-decoder where they act: the encoder's self-attention
    (source padding), the decoder's self-attention (causal and target padding) and its
    cross-attention (source padding), each a grid of queries (rows) by keys (columns) over
    the tokens ``src`` and ``tgt``. Masks ``encoder``, ``decoder``, ``cross``."""
    S, T = len(src), len(tgt)
    for name, m, shape in (("encoder", encoder, (S, S)), ("decoder", decoder, (T, T)),
                           ("cross", cross, (T, S))):
        got = (len(m), len(m[0]) if len(m) else 0)
        if got != shape:
            raise ValueError(f"the {name} mask is {got}, expected {shape} for {S} source and "
                             f"{T} target tokens")
    c = 34.0
    lab = max(text_width(w, 13) for w in list(src) + list(tgt)) + 10
    ex, dx = 8 + lab, 8 + lab + S * c + 60 + lab
    if dx + max(S, T) * c > MAX_WIDTH:
        raise ValueError("the sentences are too long for the picture")
    top = 62.0
    cross_y = top + T * c + 88
    height = max(top + S * c, cross_y + T * c) + 16
    d = Diagram(MAX_WIDTH, height, Label.of(
        "The three masks of the encoder-decoder, where they act. Encoder self-attention: the "
        "{S} source tokens may attend to every real source token, not to padding. Decoder "
        "self-attention: each of the {T} target positions may attend to itself and earlier "
        "real positions. Cross-attention: each target position may attend to every real source "
        "token. Filled cells are allowed, empty ones masked.", S=S, T=T))

    def grid(x: float, y: float, rows: Sequence[str], cols: Sequence[str],
             m: Sequence[Sequence[bool]], name: str, role: str, title: Label,
             sub: Label) -> None:
        d.text(x - lab, y - 40, title, anchor="start", kind="title", bold=True)
        d.text(x - lab, y - 22, sub, anchor="start", kind="label", colour=MUTED, size=13)
        for j, w in enumerate(cols):
            d.text(x + (j + 0.5) * c, y - 5, w, kind="token", size=13, colour=MUTED)
        for i, w in enumerate(rows):
            d.text(x - 6, y + (i + 0.5) * c + 5, w, anchor="end", kind="token", size=13,
                   colour=MUTED)
        d.mask(x, y, m, role=role, name=name, cell=c)

    grid(ex, top, src, src, encoder, "encoder", "embedding",
         Label.of("encoder self-attention"), Label.of("padding mask"))
    grid(dx, top, tgt, tgt, decoder, "decoder", "query",
         Label.of("decoder self-attention"),
         Label.of("causal and padding mask"))
    grid(dx, cross_y, tgt, src, cross, "cross", "key",
         Label.of("cross-attention"), Label.of("source padding mask"))
    d.arrow(ex + S * c / 2, top + S * c + 8, dx - lab - 8, cross_y + T * c / 2,
            Label.of("memory"), colour=ROLE_COLOURS["key"])
    return d


def decoding_modes(tokens: Sequence[str], forced: Sequence[int],
                   steps: Sequence[int]) -> Diagram:
    """Teacher forcing against step-by-step decoding. ``tokens``: the target with BOS first
    and EOS last. ``forced``: the lengths of the decoder's inputs when trained on the gold
    prefix (one pass: one length); ``steps``: their lengths when decoding one token at a
    time (one pass per token). Inputs are vectors ``forced{k}`` and ``step{k}``."""
    n = len(tokens) - 1
    if n < 1 or len(forced) != 1 or len(steps) > 4 or not steps:
        raise ValueError(f"need a target of 2+ tokens, one forced pass and 1 to 4 steps; got "
                         f"{len(tokens)} tokens, {len(forced)} forced, {len(steps)} steps")
    if max(list(forced) + list(steps)) > n:
        raise ValueError(f"a pass reads at most the {n} tokens before EOS")
    cell = max(max(text_width(t, 13) for t in tokens) + 8, 34.0)
    rowh, x_in = 40.0, 76.0
    x_dec = x_in + n * cell + 26
    x_out = x_dec + 96
    if x_out + n * cell > MAX_WIDTH:
        raise ValueError("the tokens are too long for the picture")
    height = 56 + rowh + 44 + len(steps) * rowh + 8
    d = Diagram(MAX_WIDTH, height, Label.of(
        "Teacher forcing against step-by-step decoding. Above, in training the decoder reads "
        "the whole gold prefix of {tokens} tokens in one pass and predicts every next token at "
        "once. Below, when it translates it runs {steps} passes, each on the tokens produced so "
        "far, and adds one token per pass.", tokens=forced[0], steps=len(steps)))

    def row(y: float, k: int, length: int, name: str, label: str | Label,
            outputs: Sequence[str]) -> None:
        d.text(4, y + 17, label, anchor="start", kind="step")
        d.vector(x_in, y, length, role="embedding", name=name, cell=cell)
        for j in range(length):
            d.text(x_in + (j + 0.5) * cell, y + 17, tokens[j], kind="token", size=13,
                   colour=INK)
        d.arrow(x_in + length * cell + 4, y + 12, x_dec - 4, y + 12)
        d.box(x_dec, y - 3, 70, 30, Label.of("decoder"), role="neutral", size=13)
        d.arrow(x_dec + 74, y + 12, x_out - 4, y + 12)
        d.vector(x_out, y, len(outputs), role="output", name=f"{name}_out", cell=cell)
        for j, t in enumerate(outputs):
            d.text(x_out + (j + 0.5) * cell, y + 17, t, kind="token", size=13,
                   colour=INK)

    d.text(4, 20, Label.of("teacher forcing: one pass over the gold prefix"), anchor="start",
           kind="title", bold=True)
    row(34, 0, forced[0], "forced0", Label.of("training"),
        tokens[1:forced[0] + 1])
    y0 = 34 + rowh + 36
    d.text(4, y0 - 12, Label.of("step by step: one pass per new token"), anchor="start",
           kind="title", bold=True)
    for k, length in enumerate(steps):
        row(y0 + k * rowh, k, length, f"step{k}", Label.of("pass {n}", n=k + 1),
            [tokens[length]])
    return d


#: The parts of the model on the map of the whole book, by module kind: (label, chapters).
MAP_PARTS: dict[str, tuple[Label, str]] = {
    "embed": (Label.of("embedding × √d_model"), "7"),
    "positions": (Label.of("+ positional encoding"), "5"),
    "self_attn": (Label.of("multi-head self-attention"), "2–4"),
    "masked_attn": (Label.of("masked self-attention"), "8"),
    "cross_attn": (Label.of("cross-attention"), "8"),
    "norm": (Label.of("add & layer norm"), "6"),
    "ffn": (Label.of("feed-forward network"), "7"),
    "generator": (Label.of("linear + softmax"), "9"),
    "search": (Label.of("greedy or beam search"), "10"),
}


def model_map(encoder: Sequence[str], decoder: Sequence[str], shapes: dict[str, str],
              layers: int) -> Diagram:
    """The whole model with, in each box, the chapter that explains it (:data:`MAP_PARTS`).

    ``encoder``, ``decoder``: the sublayer kinds of one layer, bottom to top (``self_attn``,
    ``masked_attn``, ``cross_attn``, ``ffn``), each followed on the map by add & norm.
    ``shapes``: shapes written on the arrows (``src``, ``tgt``, ``memory``, ``logits``).
    Boxes are texts of class ``step``; their chapters, texts of class ``chapter``.
    """
    for kind in list(encoder) + list(decoder):
        if kind not in MAP_PARTS:
            raise ValueError(f"unknown part {kind!r}; known: {sorted(MAP_PARTS)}")
    bh, gap, bw = 26.0, 8.0, 236.0
    n_rows = 2 + 2 * max(len(encoder), len(decoder)) + 2
    height = 70 + n_rows * (bh + gap) + 60
    d = Diagram(MAX_WIDTH, height, Label.of(
        "A map of the whole Transformer. The encoder (left) embeds the source, adds positions "
        "and runs {layers} layers of self-attention and a feed-forward network, each with add "
        "and layer norm. The decoder (right) does the same on the target with masked "
        "self-attention and cross-attention to the encoder's output, then a linear layer and "
        "softmax give the next word, chosen by greedy or beam search. Each box names the "
        "chapter that explains it.", layers=layers))

    def part(x: float, y: float, kind: str, role: str) -> None:
        label, chapter = MAP_PARTS[kind]
        d.box(x, y, bw, bh, role=role)
        d.text(x + 10, y + bh / 2 + 5, label, anchor="start", kind="step", size=13)
        d.text(x + bw - 8, y + bh / 2 + 5, Label.of("ch. {chapter}", chapter=chapter),
               anchor="end", kind="chapter", size=13, colour=MUTED)

    roles = {"self_attn": "query", "masked_attn": "query", "cross_attn": "key",
             "ffn": "hidden", "norm": "norm"}
    tops = []
    for col, (subs, title, _inp) in enumerate(((encoder, Label.of("encoder"), "src"),
                                              (decoder, Label.of("decoder"), "tgt"))):
        x = 40 + col * 324.0
        y = height - 40
        ids = (Label.of("source ids {shape}", shape=shapes["src"]) if col == 0 else
               Label.of("target prefix ids {shape}", shape=shapes["tgt"]))
        d.text(x + bw / 2, y + 26, ids, kind="shape", colour=MUTED)
        for kind in ("embed", "positions"):
            y -= bh + gap
            part(x, y, kind, "embedding" if kind == "embed" else "position")
        layer_bottom = y - 6
        for kind in subs:
            for k in (kind, "norm"):
                y -= bh + gap
                part(x, y, k, roles[k])
        layer_top = y - 6
        d.box(x - 8, layer_top, bw + 16, layer_bottom - layer_top, role="neutral",
              dashed=True)
        d.text(x - 8 + 4, layer_top - 6,
               Label.of("{title} layer × {layers} · ch. 7", title=title, layers=layers),
               anchor="start", kind="title", bold=True, size=13)
        tops.append((x, y))
    (ex, ey), (dx, dy) = tops
    cross = [i for i, k in enumerate(decoder) if k == "cross_attn"]
    if cross:
        cy = height - 40 - 2 * (bh + gap) - (2 * cross[0] + 1) * (bh + gap) + bh / 2
        # the memory leaves the top of the encoder's stack, runs up, across the channel
        # between the columns and down, into the cross-attention's box
        key = ROLE_COLOURS["key"]
        mx, ry, channel = ex + bw - 16, ey - 30, (ex + bw + dx) / 2
        d.line(mx, ey - 6, mx, ry, colour=key)
        d.line(mx, ry, channel, ry, colour=key)
        d.line(channel, ry, channel, cy, colour=key)
        d.arrow(channel, cy, dx - 2, cy, colour=key)
        d.text(mx - 6, ry - 6, Label.of("memory {shape}", shape=shapes["memory"]),
               anchor="end", kind="shape", colour=MUTED, size=13)
    y = dy - 80
    d.arrow(dx + bw / 2, dy - 30, dx + bw / 2, y + bh + 3, shapes["logits"])
    part(dx, y, "generator", "logit")
    part(dx, y - (bh + gap), "search", "output")
    return d


def intro_map() -> Diagram:
    """The map of the whole model for the book's first page, from a forward pass of the
    ``tiny`` Transformer: the sublayers each layer calls, in order, and the shapes between
    the parts. ``python -m labformer.book.diagrams DIR`` writes it as DIR/intro_map.svg and its
    Chinese twin DIR/intro_map.zh_CN.svg (the name Sphinx looks for in the Chinese edition)."""
    import torch

    from labformer.layers import FeedForward
    from labformer.multihead import MultiHeadAttention
    from labformer.transformer import Transformer, TransformerConfig

    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = Transformer(TransformerConfig.preset("tiny", src_vocab_size=12,
                                                     tgt_vocab_size=12)).eval()
    calls: dict[str, list[str]] = {"encoder": [], "decoder": []}
    hooks = []
    for side in calls:
        layer = getattr(model, side).layers[0]
        for name, module in layer.named_children():
            if isinstance(module, (MultiHeadAttention, FeedForward)):
                kind = "masked_attn" if (side, name) == ("decoder", "self_attn") else name
                hooks.append(module.register_forward_hook(
                    lambda m, i, o, side=side, kind=kind: calls[side].append(kind)))
    src, tgt = torch.tensor([[4, 5, 6, 7, 8]]), torch.tensor([[1, 9, 10, 11]])
    try:
        with torch.no_grad():
            memory = model.encode(src)
            logits = model(src, tgt)
    finally:
        for hook in hooks:
            hook.remove()
    shapes = {"src": shape_text(src.shape), "tgt": shape_text(tgt.shape),
              "memory": shape_text(memory.shape), "logits": shape_text(logits.shape)}
    return model_map(calls["encoder"][:2], calls["decoder"][:3], shapes,
                     len(model.encoder.layers))


def _softmax(values: Sequence[float]) -> list[float]:
    top = max(values)
    e = [math.exp(v - top) for v in values]
    return [v / sum(e) for v in e]


def scaling_softmax(rows: Sequence[tuple[int, Sequence[float]]]) -> Diagram:
    """One query's raw scores q·k_j against a few keys, at each d_k of ``rows`` (pairs of d_k
    and the scores, 1 to 3 of them), left as they are and divided by sqrt(d_k), each with the
    softmax it gives (computed here) as cells and as bars. Vectors ``raw{d_k}``,
    ``scaled{d_k}``, ``w_raw{d_k}``, ``w_scaled{d_k}``; panel titles, texts of class
    ``title``."""
    panels = [(int(dk), [float(s) for s in scores]) for dk, scores in rows]
    if not 1 <= len(panels) <= 3:
        raise ValueError(f"the picture draws 1 to 3 values of d_k, got {len(panels)}")
    T = len(panels[0][1])
    if not 2 <= T <= 5 or any(len(s) != T for _, s in panels):
        raise ValueError(f"each d_k needs the same 2 to 5 scores, got "
                         f"{[len(s) for _, s in panels]}")
    if any(dk < 1 for dk, _ in panels):
        raise ValueError(f"d_k must be positive, got {[dk for dk, _ in panels]}")
    cell, left, bar_h, pitch = 48.0, 96.0, 40.0, 150.0
    xs = (left, left + T * cell + 36)
    if xs[1] + T * cell > MAX_WIDTH:  # pragma: no cover - T <= 5 fits
        raise ValueError("the scores do not fit the width")
    dks = ", ".join(str(dk) for dk, _ in panels)
    d = Diagram(MAX_WIDTH, 40 + len(panels) * pitch, Label.of(
        "The scores of one query against {T} random keys at d_k = {dks}, left: as they are, "
        "right: divided by the square root of d_k, each with the softmax weights they give, as "
        "numbers and as bars. Unscaled, the scores spread further as d_k grows and the softmax "
        "sharpens towards a single key; divided by the square root of d_k they keep the same "
        "spread at every d_k.", T=T, dks=dks))
    d.text(xs[0] + T * cell / 2, 18, Label.of("unscaled: q·k"), kind="step",
           bold=True)
    d.text(xs[1] + T * cell / 2, 18, Label.of("scaled: q·k / √d_k"),
           kind="step", bold=True)
    for p, (dk, raw) in enumerate(panels):
        y0 = 30 + p * pitch
        root = math.sqrt(dk)
        scaled = [s / root for s in raw]
        d.text(4, y0 + 16, f"d_k = {dk}", anchor="start", kind="title", bold=True)
        d.text(xs[1], y0 + 16, Label.of("÷ √d_k = {root:g}", root=root),
               anchor="start", kind="label", colour=MUTED)
        y = y0 + 24
        d.text(4, y + 17, Label.of("scores"), anchor="start", kind="label")
        y_w = y + 34 + bar_h + 6
        d.text(4, y_w + 17, Label.of("softmax"), anchor="start", kind="label")
        for x, values, name in ((xs[0], raw, "raw"), (xs[1], scaled, "scaled")):
            d.vector(x, y, values, role="logit", name=f"{name}{dk}", cell=cell, digits=1,
                     fixed=True)
            weights = _softmax(values)
            for j, w in enumerate(weights):
                h = max(bar_h * w, 1.0)
                d.bar(x + j * cell + 10, y_w - 4 - h, cell - 20, h, role="weight")
            d.vector(x, y_w, weights, role="weight",
                     name=f"w_{name}{dk}", cell=cell, digits=2, fixed=True)
    return d


def translation_pipeline(sentence: str, src_tokens: Sequence[str], src_ids: Sequence[int],
                         memory_shape: Sequence[int], out_ids: Sequence[int],
                         out_tokens: Sequence[str], translation: str,
                         search: Label | None = None) -> Diagram:
    """One sentence through a trained translator, top to bottom: the text, its tokens, their
    ids (EOS last), the encoder and the shape of its memory, the decoder's ``search``, the ids
    it writes, their tokens and the detokenised text. ``search`` names the decoding (default:
    greedy).

    Vectors ``src_ids`` and ``out_ids`` hold the ids; the tokens over the cells of
    ``src_tokens`` and ``out_tokens`` are texts of class ``src_token`` and ``tgt_token``; the
    texts of class ``sentence`` and ``translation``, the two sentences; the memory's shape,
    class ``shape``; the steps between the rows, class ``step``.
    """
    if len(src_tokens) != len(src_ids) or len(out_tokens) != len(out_ids):
        raise ValueError(f"one id per token: {len(src_tokens)} source tokens for "
                         f"{len(src_ids)} ids, {len(out_tokens)} output tokens for "
                         f"{len(out_ids)} ids")
    if not src_ids or not out_ids:
        raise ValueError("the source and the output need at least one token each")
    search = search or Label.of("greedy")
    left, pitch = 96.0, 50.0
    texts = [*src_tokens, *out_tokens, *(str(int(i)) for i in [*src_ids, *out_ids])]
    cell = max(34.0, max(text_width(t, 13) for t in texts) + 12)
    n = max(len(src_ids), len(out_ids))
    if left + n * cell > MAX_WIDTH - 4 or left + text_width(sentence, 14) > MAX_WIDTH - 4 \
            or left + text_width(translation, 14) > MAX_WIDTH - 4:
        raise ValueError(f"{n} tokens of up to {cell:.0f} px do not fit the picture; "
                         "take a shorter sentence")
    d = Diagram(MAX_WIDTH, 20 + 8 * pitch, Label.of(
        "One sentence through the trained translator, top to bottom. The French sentence "
        "'{sentence}' is split into {src_tokens} tokens (end of sentence included), each looked "
        "up in the source vocabulary as an id; the encoder turns the ids into its memory of "
        "shape {memory}; the decoder, by {search} search, writes {out_ids} ids, one per step; "
        "looked up in the target vocabulary they are tokens, joined into '{translation}'.",
        src_tokens=len(src_tokens), memory=shape_text(memory_shape), out_ids=len(out_ids),
        search=search, sentence=sentence, translation=translation))
    ys = [12 + k * pitch for k in range(8)]
    names = [Label.of("French"), Label.of("tokens"), Label.of("ids"),
             Label.of(""), Label.of(""), Label.of("ids"), Label.of("tokens"),
             Label.of("English")]
    for y, name in zip(ys, names, strict=True):
        if name.en:
            d.text(4, y + 17, name, anchor="start", kind="label", colour=MUTED)
    d.text(left, ys[0] + 17, sentence, anchor="start", kind="sentence", bold=True)

    def tokens(y: float, words: Sequence[str], name: str, kind: str, role: str) -> None:
        d.vector(left, y, len(words), role=role, name=name, cell=cell)
        for j, w in enumerate(words):
            d.text(left + (j + 0.5) * cell, y + 17, w, kind=kind, size=13, colour=INK)

    tokens(ys[1], src_tokens, "src_tokens", "src_token", "embedding")
    d.vector(left, ys[2], [float(i) for i in src_ids], role="embedding", name="src_ids",
             cell=cell, digits=0, fixed=True)
    d.box(left, ys[3] - 2, 220, 28, Label.of("encoder"), role="embedding", size=13,
          kind="part")
    d.box(left, ys[4] - 2, 220, 28, Label.of("decoder, {search}", search=search),
          role="output", size=13, kind="part")
    d.vector(left, ys[5], [float(i) for i in out_ids], role="output", name="out_ids",
             cell=cell, digits=0, fixed=True)
    tokens(ys[6], out_tokens, "out_tokens", "tgt_token", "output")
    d.text(left, ys[7] + 17, translation, anchor="start", kind="translation", bold=True)
    steps = [Label.of("tokenize"), Label.of("look up in the source vocabulary"),
             Label.of("{shape}", shape=shape_text((1, len(src_ids)))),
             Label.of("memory {shape}", shape=shape_text(memory_shape)),
             Label.of("one id per step"),
             Label.of("look up in the target vocabulary"),
             Label.of("detokenize")]
    for k, step in enumerate(steps):
        kind = "shape" if k in (2, 3) else "step"
        d.arrow(left + 14, ys[k] + 27, left + 14, ys[k + 1] - 3, step, kind=kind)
    return d


def _is_number(token: str) -> bool:
    return any(c.isdigit() for c in token)


def carry_numbers(source: Sequence[str], prepared: Sequence[str], raw: Sequence[str],
                  carried: Sequence[str]) -> Diagram:
    """A number the model never read, carried around it (``labformer.app.carry``), as four rows
    of tokens: the ``source``; what the model reads (``prepared``: each unknown number
    replaced by the nearest one it knows); what it writes (``raw``); and the output with the
    source's numbers put back (``carried``).

    Each token is a one-cell vector ``{row}{j}`` (rows ``source``, ``prepared``, ``raw``,
    ``carried``), its text of class ``{row}``; numbers of the source are drawn in the
    ``weight`` colour, the stand-ins the model reads and writes in grey.
    """
    rows = {"source": list(source), "prepared": list(prepared), "raw": list(raw),
            "carried": list(carried)}
    if any(not r for r in rows.values()):
        raise ValueError(f"each row needs a token, got {[len(r) for r in rows.values()]}")
    own = {t for t in source if _is_number(t)}
    left, pitch, gap = 118.0, 62.0, 6.0
    widths = {name: [text_width(t, 13) + 16 for t in r] for name, r in rows.items()}
    widest = max(sum(w) + gap * (len(w) - 1) for w in widths.values())
    if left + widest > MAX_WIDTH - 4:
        raise ValueError(f"the sentences are {widest:.0f} px wide; take shorter ones")
    src_nums = [t for t in source if _is_number(t)]
    read_nums = [t for t in prepared if _is_number(t)]
    swaps = ", ".join(f"{a} → {b}" for a, b in zip(src_nums, read_nums, strict=False)
                      if a != b) or "-"
    d = Diagram(MAX_WIDTH, 24 + 4 * pitch + 10, Label.of(
        "A number carried around the model, top to bottom. The source '{source}' holds a number "
        "the model never read; before translation it is replaced by the nearest number the model "
        "knows ({swaps}); the model translates that sentence; after translation the source's own "
        "number is put back: '{carried}'.", source=' '.join(source), carried=' '.join(carried),
        swaps=swaps))
    labels = {"source": Label.of("source"), "prepared": Label.of("model reads"),
              "raw": Label.of("model writes"), "carried": Label.of("output")}
    steps = [Label.of("prepare: {swaps}, the nearest known number", swaps=swaps),
             Label.of("translate: the model"),
             Label.of("restore: the source's numbers, in order")]
    for r, (name, tokens) in enumerate(rows.items()):
        y = 14 + r * pitch
        d.text(4, y + 17, labels[name], anchor="start", kind="label", colour=MUTED)
        x = left
        side = "embedding" if r < 2 else "output"
        for j, (t, w) in enumerate(zip(tokens, widths[name], strict=True)):
            number = _is_number(t)
            role = ("weight" if t in own else "neutral") if number else side
            d.vector(x, y, 1, role=role, name=f"{name}{j}", cell=w)
            d.text(x + w / 2, y + 17, t, kind=name, size=13, colour=INK, bold=number)
            x += w + gap
        if r < 3:
            d.arrow(left + 14, y + 28, left + 14, y + pitch - 4, steps[r], kind="step")
    return d


#: The parts of the model and its training an ablation can change, in the order drawn, and
#: the fields (of ``TransformerConfig`` or ``TrainConfig``) that change each.
ABLATION_PARTS: tuple[tuple[str, Label, tuple[str, ...]], ...] = (
    ("embed", Label.of("token embedding"), ()),
    ("positions", Label.of("+ positional encoding"),
     ("positional", "encoder_positions")),
    ("heads", Label.of("multi-head attention"), ("num_heads",)),
    ("scale", Label.of("scores ÷ √d_k"), ("scale_scores",)),
    ("residual", Label.of("residual connections"), ("residual",)),
    ("norm", Label.of("layer norm: Pre-LN"), ("norm_first",)),
    ("ffn", Label.of("feed-forward network"), ()),
    ("generator", Label.of("linear + softmax"), ()),
    ("smoothing", Label.of("label smoothing"), ("label_smoothing",)),
    ("warmup", Label.of("learning-rate warm-up"), ("warmup",)),
)
#: The parts of :data:`ABLATION_PARTS` set by the training recipe, not the model.
TRAINING_PARTS = ("smoothing", "warmup")


def ablation_map(variants: Sequence[tuple[Label, dict[str, Any]]]) -> Diagram:
    """The parts of the model and its training (:data:`ABLATION_PARTS`) with, beside each, the
    variants that change it: a variant is its name and its changes (a config field and the
    value it takes). A part some variant changes is drawn dashed. Each change is a text of
    class ``change-{part}``, ``field=value``, followed by its variant's name (class
    ``variant``)."""
    part_of = {f: part for part, _, fields in ABLATION_PARTS for f in fields}
    tags: dict[str, list[tuple[str, Label]]] = {part: [] for part, _, _ in ABLATION_PARTS}
    for name, changes in variants:
        for field_name, value in changes.items():
            if field_name not in part_of:
                raise ValueError(f"no part of the map for the field {field_name!r}; known: "
                                 f"{sorted(part_of)}")
            tags[part_of[field_name]].append((f"{field_name}={value!r}", name))
    bw, bh, line, x_tag = 184.0, 26.0, 20.0, 224.0
    x_name = x_tag + max((text_width(c, 13) for t in tags.values() for c, _ in t), default=0) + 14
    for t in tags.values():
        for change, name in t:
            if x_name + max(text_width(name.text(lang), 13) for lang in ("en", "zh")) > MAX_WIDTH:
                raise ValueError(f"the change {change!r} of {name.en!r} is too wide")
    heights = {p: max(bh, len(t) * line + 6) for p, t in tags.items()}
    height = 40 + sum(h + 8 for h in heights.values()) + 30
    changed = [p for p, t in tags.items() if t]
    d = Diagram(MAX_WIDTH, height, Label.of(
        "The parts of the translator and its training, top to bottom, with the {variants} "
        "ablations of the chapter beside the part each one changes; the {changed} parts that "
        "some ablation switches off or changes are dashed, and each change is written as the "
        "setting it makes.", variants=len(variants), changed=len(changed)))
    d.text(4, 18, Label.of("part"), anchor="start", kind="title", bold=True)
    d.text(x_tag, 18, Label.of("ablation: the one change"), anchor="start",
           kind="title", bold=True)
    y = 32.0
    for part, label, _ in ABLATION_PARTS:
        if part == TRAINING_PARTS[0]:
            y += 14
            d.text(4, y, Label.of("training"), anchor="start", kind="title", bold=True,
                   size=13)
            y += 8
        h = heights[part]
        role = "neutral" if part in TRAINING_PARTS else "embedding"
        d.box(4, y + (h - bh) / 2, bw, bh, label, role=role, size=13, kind="part",
              dashed=bool(tags[part]))
        for n, (change, name) in enumerate(tags[part]):
            ty = y + (h - len(tags[part]) * line) / 2 + n * line + 15
            d.text(x_tag, ty, change, anchor="start", kind=f"change-{part}", size=13)
            d.text(x_name, ty, name, anchor="start", kind="variant", size=13, colour=MUTED)
        if tags[part]:
            d.arrow(x_tag - 6, y + h / 2, bw + 8, y + h / 2)
        y += h + 8
    return d


def beam_step(prefixes: Sequence[tuple[Sequence[str], float]],
              candidates: Sequence[tuple[int, str, float]], beam_size: int,
              eos: str) -> Diagram:
    """One step of beam search: the live ``prefixes`` (words, probability), every candidate
    extension (index of its prefix, the token added, the probability of the longer prefix) and
    what becomes of each, decided here by beam search's rule: rank all candidates; an ``eos``
    candidate among the best ``beam_size`` is finished and set aside; the best ``beam_size`` of
    the others are kept; the rest are dropped.

    Each candidate's words are a text of class ``kept``, ``finished`` or ``dropped``, its
    probability a text of class ``prob``, drawn grouped by prefix and best first within one;
    the live prefixes are texts of class ``prefix``.
    """
    if beam_size < 1 or not 1 <= len(prefixes) <= beam_size:
        raise ValueError(f"a beam of {beam_size} holds 1 to {beam_size} prefixes, got "
                         f"{len(prefixes)}")
    if not 1 <= len(candidates) <= 8:
        raise ValueError(f"the picture draws 1 to 8 candidates, got {len(candidates)}")
    if any(not 0 <= parent < len(prefixes) for parent, _, _ in candidates):
        raise ValueError("each candidate's parent must be one of the prefixes")
    ranked = sorted(range(len(candidates)), key=lambda c: -candidates[c][2])
    kth = candidates[ranked[min(beam_size, len(ranked)) - 1]][2]
    outcome: dict[int, str] = {}
    for c in ranked:
        if candidates[c][1] == eos:
            outcome[c] = "finished" if candidates[c][2] >= kth else "dropped"
    live = [c for c in ranked if c not in outcome]
    for n, c in enumerate(live):
        outcome[c] = "kept" if n < beam_size else "dropped"
    order = sorted(range(len(candidates)), key=lambda c: (candidates[c][0], -candidates[c][2]))
    words = [" ".join([*prefixes[p][0], t]) for p, t, _ in candidates]
    pw, cw, rowh = 150.0, 220.0, 34.0
    xc, xo = pw + 70, pw + 70 + cw + 24
    if xo + 150 > MAX_WIDTH or max(text_width(w, 13) for w in words) + 70 > cw or max(
            text_width(" ".join(p), 13) for p, _ in prefixes) + 70 > pw:
        raise ValueError("the candidates' words are too long for the picture")
    height = 40 + len(candidates) * rowh + 8
    kept = Label.join("; ", [words[c] for c in ranked if outcome[c] == "kept"])
    d = Diagram(MAX_WIDTH, height, Label.of(
        "One step of beam search with a beam of {beam_size}. Left, the {prefixes} prefixes kept "
        "so far; middle, each extended by every token the model gives a non-zero probability, "
        "{candidates} candidates with the probability of the longer prefix; right, what beam "
        "search does with each: the best {beam_size} are kept ({kept}), an end of sentence "
        "ranked among the best {beam_size} is set aside as a finished output, the rest are "
        "dropped.", prefixes=len(prefixes), candidates=len(candidates), beam_size=beam_size,
        kept=kept))
    d.text(4, 18, Label.of("beam so far"), anchor="start", kind="title", bold=True)
    d.text(xc, 18, Label.of("candidates"), anchor="start", kind="title", bold=True)
    d.text(xo, 18, Label.of("kept or not"), anchor="start", kind="title", bold=True)
    rows_of: dict[int, list[int]] = {}
    for r, c in enumerate(order):
        rows_of.setdefault(candidates[c][0], []).append(r)
    for p, (prefix, prob) in enumerate(prefixes):
        rows = rows_of.get(p, [])
        mid = 30 + rowh * (sum(rows) / len(rows) + 0.5) if rows else 30 + rowh * (p + 0.5)
        d.box(4, mid - 14, pw, 28, role="query")
        d.text(12, mid + 5, " ".join(prefix), anchor="start", kind="prefix", size=13)
        d.text(pw - 4, mid + 5, f"{prob:.4f}", anchor="end", kind="prefix_prob", size=13,
               colour=MUTED)
        for r in rows:
            d.arrow(pw + 8, mid, xc - 4, 30 + rowh * (r + 0.5), colour=MUTED)
    names = {"kept": Label.of("kept"), "finished": Label.of("finished: set aside"),
             "dropped": Label.of("dropped")}
    roles = {"kept": "query", "finished": "output", "dropped": "neutral"}
    for r, c in enumerate(order):
        y = 30 + rowh * r + 3
        what = outcome[c]
        d.box(xc, y, cw, rowh - 6, role=roles[what], dashed=what == "dropped")
        d.text(xc + 8, y + 19, words[c], anchor="start", kind=what, size=13,
               bold=what != "dropped")
        d.text(xc + cw - 6, y + 19, f"{candidates[c][2]:.4f}", anchor="end", kind="prob",
               size=13, colour=MUTED)
        d.text(xo, y + 19, names[what], anchor="start", kind="outcome", size=13,
               colour=INK if what != "dropped" else MUTED)
    return d


#: The sublayers of :func:`decoder_only`, by kind: their labels in both editions.
SUBLAYER_NAMES: dict[str, Label] = {
    "self_attn": Label.of("self-attention"),
    "masked_attn": Label.of("masked self-attention"),
    "cross_attn": Label.of("cross-attention"),
    "ffn": Label.of("feed-forward network"),
}


def decoder_only(encoder: Sequence[str], decoder: Sequence[str], lm: Sequence[str],
                 shapes: dict[str, str]) -> Diagram:
    """The translator's encoder and decoder layers beside a language model's layer.

    ``encoder``, ``decoder``, ``lm``: the sublayer kinds each layer runs, bottom to top
    (:data:`SUBLAYER_NAMES`: ``self_attn``, ``masked_attn``, ``cross_attn``, ``ffn``). The
    language model's sublayers must be the decoder's with some left out: each one left out is
    drawn in its row as a dashed box (class ``removed``). ``shapes``: the shapes written at
    the inputs and outputs (``src``, ``memory``, ``tgt``, ``logits``, ``text``,
    ``lm_logits``). A column's sublayers are texts of class ``step-encoder``,
    ``step-decoder``, ``step-lm``, bottom to top.
    """
    for kind in list(encoder) + list(decoder) + list(lm):
        if kind not in SUBLAYER_NAMES:
            raise ValueError(f"unknown sublayer {kind!r}; known: {sorted(SUBLAYER_NAMES)}")
    rows_lm: list[str | None] = []
    rest = list(lm)
    for kind in decoder:  # the decoder's rows: the language model keeps some, in order
        if rest and rest[0] == kind:
            rows_lm.append(rest.pop(0))
        else:
            rows_lm.append(None)
    if rest:
        raise ValueError(f"the language model's sublayers {list(lm)} are not the decoder's "
                         f"{list(decoder)} with some left out")
    removed = [k for k, kept in zip(decoder, rows_lm, strict=True) if kept is None]
    removed_names = Label.join(", ", [SUBLAYER_NAMES[k] for k in removed])
    bw, bh, gap, x0 = 196.0, 30.0, 10.0, 8.0
    n_rows = max(len(encoder), len(decoder))
    layer_h = n_rows * (bh + gap) + gap + 22
    top, bottom = 64.0, 50.0
    height = top + layer_h + bottom
    layer_y = top
    d = Diagram(MAX_WIDTH, height, Label.of(
        "Three layers side by side, read from the bottom. The translator's encoder layer runs "
        "{enc} sublayers and its decoder layer {dec}, the second of which, cross-attention, reads "
        "the encoder's output. The language model's layer is the decoder layer with "
        "{removed_names} removed: {lm} sublayers, and no encoder at all.",
        enc=len(encoder), dec=len(decoder), lm=len(lm), removed_names=removed_names))
    columns: tuple[tuple[str, Label, Sequence[str | None], Label, Label], ...] = (
        ("encoder", Label.of("translator: encoder"), list(encoder),
         Label.of("source ids {shape}", shape=shapes["src"]),
         Label.of("memory {shape}", shape=shapes["memory"])),
        ("decoder", Label.of("translator: decoder"), list(decoder),
         Label.of("target prefix {shape}", shape=shapes["tgt"]),
         Label.of("logits {shape}", shape=shapes["logits"])),
        ("lm", Label.of("language model"), rows_lm,
         Label.of("text ids {shape}", shape=shapes["text"]),
         Label.of("logits {shape}", shape=shapes["lm_logits"])),
    )
    roles = {"self_attn": "query", "masked_attn": "query", "cross_attn": "key", "ffn": "hidden"}
    cross_rows: list[float] = []
    for c, (name, title, kinds, below, above) in enumerate(columns):
        x = x0 + c * (bw + 16)
        d.text(x + bw / 2, 18, title, kind="title", bold=True)
        d.text(x + bw / 2, 40, above, kind="shape", colour=MUTED, size=13)
        d.arrow(x + bw / 2, layer_y - 2, x + bw / 2, 46)
        d.box(x, layer_y, bw, layer_h, role="neutral", dashed=True)
        d.text(x + 8, layer_y + 17, Label.of("layer × N"), anchor="start",
               kind="layer", size=13, colour=MUTED)
        for r, sub in enumerate(kinds):
            y = layer_y + layer_h - gap - (r + 1) * (bh + gap) + gap
            if sub is None:
                gone = decoder[r]
                d.box(x + 10, y, bw - 20, bh, role="neutral", dashed=True)
                d.text(x + bw / 2, y + bh / 2 + 5,
                       Label.of("no {sublayer}", sublayer=SUBLAYER_NAMES[gone]),
                    kind="removed", size=13, colour=MUTED)
                continue
            d.box(x + 10, y, bw - 20, bh, SUBLAYER_NAMES[sub], role=roles[sub], size=13,
                  kind=f"step-{name}")
            if sub == "cross_attn":
                cross_rows.append(y + bh / 2)
        d.arrow(x + bw / 2, height - 26, x + bw / 2, layer_y + layer_h + 2)
        d.text(x + bw / 2, height - 8, below, kind="shape", colour=MUTED, size=13)
    for cy in cross_rows:  # the encoder's memory feeds the decoder's cross-attention
        d.arrow(x0 + bw / 2 + 40, 46, x0 + bw + 16 + 8, cy, colour=ROLE_COLOURS["key"])
    return d


def block_map(rows: Sequence[tuple[Label, Sequence[Label | str], Sequence[Label | str],
                                   Sequence[Label | str]]],
              roles: Sequence[str] | None = None) -> Diagram:
    """Each part of the 2017 block beside the same part of the modern block and its name in
    LLaMA-style open models. ``rows``: (part, 2017 lines, modern lines, open-model lines);
    each cell is one to three lines. ``roles``: each row's role (:data:`ROLE_COLOURS`; a norm
    is ``"norm"``, positions ``"position"``), its three boxes drawn in that colour, the same
    as the part has in every diagram. Texts of class ``part``, ``old``, ``new`` and ``open``,
    row by row and line by line, so that a chapter reads back what it drew."""
    if not rows:
        raise ValueError("a block map needs at least one part")
    roles = list(roles) if roles is not None else ["neutral"] * len(rows)
    if len(roles) != len(rows) or any(r not in ROLE_COLOURS for r in roles):
        raise ValueError(f"need one known role a row ({len(rows)} rows), got {roles}; known: "
                         f"{sorted(ROLE_COLOURS)}")
    bw, gapx, line, x0 = 196.0, 20.0, 17.0, 6.0
    heights = [max(len(old), len(new), len(open_)) * line + 12 for _, old, new, open_ in rows]
    height = 44 + sum(h + 30 for h in heights)
    for _, *cells in rows:
        for lines in cells:
            if not 1 <= len(lines) <= 3:
                raise ValueError(f"a cell holds one to three lines, got {len(lines)}")
            for text in lines:
                for lang in ("en", "zh"):
                    if text_width(as_label(text).text(lang), 13) > bw - 12:
                        raise ValueError(f"{as_label(text).text(lang)!r} is too wide for a "
                                         "cell")
    d = Diagram(MAX_WIDTH, height, Label.of(
        "{rows} parts of a Transformer block, one row each: on the left as the 2017 paper built "
        "them, in the middle as this chapter's modern block builds them (with the switch of "
        "LanguageModel that turns each on), on the right the name the same part has in "
        "LLaMA-style open models.", rows=len(rows)))
    heads = (Label.of("2017 block"), Label.of("modern block (labformer)"),
             Label.of("LLaMA-style open model"))
    for c, head in enumerate(heads):
        d.text(x0 + c * (bw + gapx) + bw / 2, 18, head, kind="title", bold=True)
    y = 36.0
    for (part, *cells), h, role in zip(rows, heights, roles, strict=True):
        d.text(x0, y + 14, part, anchor="start", kind="part", size=13, bold=True, colour=MUTED)
        y += 22
        for c, (lines, kind) in enumerate(zip(cells, ("old", "new", "open"), strict=True)):
            x = x0 + c * (bw + gapx)
            d.box(x, y, bw, h, role=role)
            for k, text in enumerate(lines):  # the lines centred in the box
                d.text(x + bw / 2, y + h / 2 + (k - (len(lines) - 1) / 2) * line + 5, text,
                       kind=kind, size=13)
        d.arrow(x0 + bw + 2, y + h / 2, x0 + bw + gapx - 2, y + h / 2)
        d.arrow(x0 + 2 * bw + gapx + 2, y + h / 2, x0 + 2 * bw + 2 * gapx - 2, y + h / 2,
                dashed=True)
        y += h + 8
    return d


def step_structure(positions: int, length: int, gru_ms: float, tf_ms: float) -> Diagram:
    """Chapter 14's picture of where a Transformer's step is cheaper: above, a recurrent layer
    walks through ``positions`` positions one after another (each waits for the state before
    it); below, a Transformer layer computes every position in one matrix product. Under them,
    the measured wall-clock time of one training step at ``length`` tokens (one thread), as
    texts of class ``time``."""
    if not 2 <= positions <= 10:
        raise ValueError(f"the picture draws 2 to 10 positions, got {positions}")
    if not (gru_ms > 0 and tf_ms > 0):
        raise ValueError(f"step times must be positive, got {gru_ms} and {tf_ms} ms")
    left, cell, gap = 150.0, 30.0, 16.0
    d = Diagram(MAX_WIDTH, 262, Label.of(
        "Above, a recurrent layer over {positions} positions: each position's state needs the "
        "state before it, so the steps run one after another. Below, a Transformer layer: the "
        "{positions} positions go through one matrix product at once. Measured on one thread "
        "at {length} tokens, a training step took {gru_ms:.0f} ms for the GRU and {tf_ms:.0f} "
        "ms for the Transformer.",
        positions=positions, length=length, gru_ms=gru_ms, tf_ms=tf_ms))
    d.text(4, 22, Label.of("recurrent (GRU): one position after another"), anchor="start",
           kind="title", bold=True)
    y = 44.0
    d.text(4, y + 17, Label.of("states"), anchor="start", kind="label", colour=MUTED)
    for p in range(positions):
        x = left + p * (cell + gap)
        d.vector(x, y, 1, role="hidden", name=f"h{p}", cell=cell)
        if p:
            d.arrow(x - gap + 2, y + 12, x - 2, y + 12)
    d.text(left + positions * (cell + gap) + 4, y + 17,
           Label.of("{positions} steps in a row", positions=positions), anchor="start",
           kind="label", colour=MUTED)
    d.text(4, 122, Label.of("Transformer layer: all positions at once"), anchor="start",
           kind="title", bold=True)
    width = positions * (cell + gap) - gap
    d.box(left, 134, width, 28, Label.of("one matrix product"), role="query",
          size=13)
    y = 190.0
    d.text(4, y + 17, Label.of("outputs"), anchor="start", kind="label", colour=MUTED)
    for p in range(positions):
        x = left + p * (cell + gap)
        d.arrow(x + cell / 2, 164, x + cell / 2, y - 2)
        d.vector(x, y, 1, role="output", name=f"z{p}", cell=cell)
    d.text(left + positions * (cell + gap) + 4, y + 17,
           Label.of("side by side"), anchor="start", kind="label", colour=MUTED)
    d.text(4, 248, Label.of("one training step at {length} tokens, one thread:", length=length),
           anchor="start", kind="label", size=13)
    d.text(MAX_WIDTH - 4, 248, Label.of(
        "GRU {gru_ms:.0f} ms · Transformer {tf_ms:.0f} ms", gru_ms=gru_ms, tf_ms=tf_ms),
           anchor="end", kind="time", size=13, bold=True)
    return d


if __name__ == "__main__":  # pragma: no cover
    import sys
    from pathlib import Path

    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    picture = intro_map()
    (out / "intro_map.svg").write_text(picture.render("en").svg + "\n", encoding="utf-8")
    (out / "intro_map.zh_CN.svg").write_text(picture.render("zh").svg + "\n",
                                             encoding="utf-8")
