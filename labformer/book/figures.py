"""Matplotlib figures the chapters draw from a running model.

The drawing code of a figure is plumbing: a chapter that kept it would collapse a long cell
around it. Here it is one call; the chapter keeps what it teaches (the model, the hooks that
read it) and its checks of what was drawn. The texts drawn are English: ``glue`` makes the
Chinese twin from ``plot_zh.json``, as for every figure.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from matplotlib.figure import Figure

#: What each kind of module is called in the module tree (chapter 7).
TREE_LABEL = {"Embedding": "embedding",
              "PositionalEncoding": "+ positional encoding",
              "MultiHeadAttention": "multi-head attention",
              "ResidualSublayer": "add & norm", "FeedForward": "feed-forward",
              "Linear": "linear -> logits",
              "Identity": "none in Post-LN (Identity)",
              "LayerNorm": "final LayerNorm"}
#: One colour per role, as in every diagram: attention as its queries (the cross-attention as
#: the keys it reads), add & norm and LayerNorm as norms.
TREE_ROLE = {"MultiHeadAttention": "query", "FeedForward": "hidden",
             "ResidualSublayer": "norm", "LayerNorm": "norm",
             "Embedding": "embedding",
             "PositionalEncoding": "position", "Linear": "logit"}

Row = tuple[str, str, int]  # (layer group or '', module name, parameter count)


def tree_rows(model: Any, names: list[str]) -> list[Row]:
    """The rows of one column of the module tree: (layer group or '', module name, parameter
    count). Keeps top-level modules, each stack's final norm and the first layer's
    sublayers."""
    rows = []
    for name in names:
        parts = name.split(".")
        if len(parts) == 1 and name not in ("encoder", "decoder"):
            group = ""
        elif len(parts) == 2 and parts[1] == "norm":
            group = ""
        elif len(parts) == 4 and parts[1] == "layers" and parts[2] == "0":
            group = ".".join(parts[:2])
        else:
            continue
        module = model.get_submodule(name)
        n_params = sum(p.numel() for p in module.parameters())
        rows.append((group, name, n_params))
    return rows


def _box_colour(kind: str, name: str) -> str:
    """A module's role colour, light enough for dark text on it."""
    from labformer.book import diagrams as dg

    role = "key" if name.endswith("cross_attn") else TREE_ROLE.get(kind, "neutral")
    return dg.over_white(dg.ROLE_COLOURS[role], 0.35)


def _draw_column(ax: Any, model: Any, rows: list[Row], x0: float, title: str,
                 width: float = 3.2, h: float = 0.5,
                 gap: float = 0.12) -> tuple[dict[str, float], float]:
    """Boxes from bottom to top, one per row; a dashed frame around the first layer."""
    from matplotlib.patches import Rectangle

    y = 0.0
    centres: dict[str, float] = {}
    frame: dict[str, tuple[float, float]] = {}
    for i, (group, name, n_params) in enumerate(rows):
        kind = type(model.get_submodule(name)).__name__
        ax.add_patch(Rectangle((x0 + 0.2, y), width - 0.4, h, edgecolor="0.3",
                               lw=0.8, facecolor=_box_colour(kind, name)))
        ax.text(x0 + 0.3, y + h / 2,
                f"{name.split('.')[-1]}: {TREE_LABEL.get(kind, kind)}",
                va="center", fontsize=8.5)
        ax.text(x0 + width - 0.3, y + h / 2, f"{n_params:,}", va="center",
                ha="right", fontsize=8.5, color="0.35")
        centres[name] = y + h / 2
        if group:
            frame[group] = (frame.get(group, (y, y))[0], y + h)
        y += h + gap
        if group and (i + 1 == len(rows) or rows[i + 1][0] != group):
            y += 0.35  # room for the frame's label
    for group, (lo, hi) in frame.items():
        ax.add_patch(Rectangle((x0 + 0.08, lo - 0.08), width - 0.16,
                               hi - lo + 0.16, fill=False, edgecolor="0.2",
                               lw=1.2, ls="--"))
        ax.text(x0 + width / 2, hi + 0.12,
                f"{group}: layer 0 of 6, separate weights",
                ha="center", va="bottom", fontsize=8.5)
    ax.text(x0 + width / 2, y + 0.1, title, ha="center", va="bottom",
            fontsize=10, weight="bold")
    return centres, y


def module_tree(model: Any, enc_rows: list[Row], dec_rows: list[Row],
                reads_memory: Iterable[str]) -> Figure:
    """Chapter 7's module tree: the modules ``encode`` and ``decode`` call, one box each in
    the order they finish (rows from ``tree_rows``), the first layer of each stack
    framed, and an arrow from the encoder's output to the cross-attention that reads it."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch

    from labformer.book import diagrams as dg

    fig, ax = plt.subplots(figsize=(7, 6.2))
    enc_centres, enc_height = _draw_column(ax, model, enc_rows, 0.0, "encode(src)")
    dec_centres, dec_height = _draw_column(ax, model, dec_rows, 3.5,
                                           "decode(tgt, memory)")
    target = min(reads_memory)  # decoder.layers.0.cross_attn stands for all six
    start, end = (3.0, enc_centres["encoder.norm"]), (3.7, dec_centres[target])
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12,
                                 color=dg.ROLE_COLOURS["key"], lw=1.4,
                                 connectionstyle="arc3,rad=-0.3"))
    ax.text(1.6, enc_height + 0.55, "memory: keys and values\nof every cross_attn",
            ha="center", va="bottom", fontsize=9,
            color=dg.ROLE_COLOURS["key"])
    ax.set(xlim=(-0.1, 6.8), ylim=(-0.2, max(enc_height, dec_height) + 0.6))
    ax.axis("off")
    fig.subplots_adjust(left=0, right=1, bottom=0, top=1)  # all 7 in for text
    return fig


def beam_tree(trace: list[Any], words: list[str], title: str = "") -> Figure:
    """Chapter 10's beam search tree, from ``beam_search(..., trace=trace)``: one column per
    step, each kept prefix's last word with its probability (blue), each hypothesis set aside
    with EOS (red), an edge from every node to the prefix it extends."""
    import math

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.4))
    prev = {0: (0, 0.0)}  # slot -> (x, y) of the node in the last step
    ax.scatter([0], [0.0], s=300, c="0.6", zorder=3)
    ax.annotate("<bos>", (0, 0.0), xytext=(0, -14), textcoords="offset points",
                ha="center", va="top")  # below: clear of the edges to step 1
    for t, step in enumerate(trace, start=1):
        for parent, lp in step.finished:  # EOS candidates set aside at this step
            y = prev[parent][1] - 0.5
            ax.plot([prev[parent][0], t], [prev[parent][1], y], c="C3", lw=1,
                    zorder=1)
            ax.scatter([t], [y], marker="s", s=120, c="C3", zorder=3)
            ax.annotate(f"<eos>\n{math.exp(lp):.3f}", (t, y), xytext=(0, -26),
                        textcoords="offset points", ha="center", fontsize=9,
                        color="C3")
        new = {}
        kept = zip(step.parents, step.tokens, step.log_probs, strict=True)
        for slot, (parent, tok, lp) in enumerate(kept):
            if lp == -math.inf:
                continue
            y = 1.0 - slot
            ax.plot([prev[parent][0], t], [prev[parent][1], y], c="C0", lw=2,
                    zorder=1)
            ax.scatter([t], [y], s=300, c="C0", zorder=3)
            ax.annotate(f"{words[tok]}\n{math.exp(lp):.3f}", (t, y),
                        xytext=(0, 12), textcoords="offset points", ha="center",
                        fontsize=9)
            new[slot] = (t, y)
        prev = new
    ax.set_xlabel("step")
    ax.set_yticks([])
    ax.set_xlim(-0.6, len(trace) + 0.5)
    ax.set_ylim(-1.6, 1.8)
    ax.set_title(title)
    return fig
