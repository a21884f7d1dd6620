"""Figures the chapters share: attention heatmaps, training curves, attention explorers.

Every static helper returns a ``matplotlib.figure.Figure`` (or draws on the ``ax`` it is given)
and knows nothing about models: it takes tensors or arrays and labels. matplotlib and seaborn are
imported here only, so the models never depend on a plotting library.

``attention_explorer`` returns an interactive plotly view instead. It needs no plotly import:
the output carries the figure as plotly JSON (JupyterLab's plotly renderer draws it) and as a
small HTML block that the book's ``labformer-explorer.js`` draws with the one local copy of
``plotly.js`` (the cartesian bundle shipped in book/_static/vendor: no CDN, nothing inline).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

__all__ = [
    "FIGURE_WIDTH",
    "AttentionExplorer",
    "apply_style",
    "attention_grid",
    "attention_explorer",
    "attention_heads",
    "attention_heatmap",
    "chinese_font",
    "chinese_twin",
    "edition_style",
    "panels",
    "signed_heatmap",
    "training_curves",
]


#: Width of every figure, in inches: at 96 dpi it fills the book's content column (720 CSS px at
#: a 1280 px window) without being scaled, so 12 pt text shows at 16 px, the body text's size.
FIGURE_WIDTH = 7.0
#: Screen pixels per inch of a figure (CSS's 96): a figure shows at its size in inches.
FIGURE_DPI = 96
#: The smallest token label of :func:`attention_grid`, in points: 11 CSS px at 96 px per inch,
#: the smallest text a figure may show (labformer.book.notebook.MIN_TEXT_PX).
GRID_MIN_LABEL_PT = 8.5
#: The book's one plot style (seaborn "whitegrid", text as large as the body text).
STYLE: dict[str, object] = {
    "figure.figsize": (FIGURE_WIDTH, 4.2),
    "figure.dpi": FIGURE_DPI,
    "savefig.dpi": 2 * FIGURE_DPI,
    "figure.facecolor": "white",  # the dark theme shows figures on their own white panel
    "savefig.facecolor": "white",
    "font.size": 12,
    "axes.titlesize": 13,
    "axes.labelsize": 12,
    "xtick.labelsize": 12,
    "ytick.labelsize": 12,
    "legend.fontsize": 12,
    "legend.title_fontsize": 12,
    "figure.titlesize": 14,
}


def apply_style() -> None:
    """The book's plot style: seaborn's whitegrid theme with :data:`STYLE` on top."""
    sns.set_theme(context="notebook", style="whitegrid", palette="deep", rc=STYLE)


#: Fonts with Chinese glyphs, in the order tried: the book's build installs the first
#: (Debian's fonts-wqy-microhei, as the browser test does); the others are common on laptops.
CHINESE_FONTS = ("WenQuanYi Micro Hei", "Noto Sans CJK SC", "Source Han Sans SC",
                 "Microsoft YaHei", "PingFang SC", "Heiti SC")


def chinese_font() -> str | None:
    """The first of :data:`CHINESE_FONTS` that matplotlib can use, or None if none is installed.

    matplotlib lists a machine's fonts once, in a cache; a font installed after that is missing
    from the list, so the system's font files whose names mark them as one of these fonts are
    added first."""
    from matplotlib import font_manager

    def listed() -> str | None:
        found = {f.name for f in font_manager.fontManager.ttflist}
        return next((name for name in CHINESE_FONTS if name in found), None)

    if listed() is None:
        for path in font_manager.findSystemFonts():
            if any(mark in path.lower() for mark in _CHINESE_FILE_MARKS):
                try:
                    font_manager.fontManager.addfont(path)
                except (OSError, RuntimeError, ValueError):  # a file FreeType cannot read
                    continue
    return listed()


#: Parts of the file names of :data:`CHINESE_FONTS` (lower case).
_CHINESE_FILE_MARKS = ("wqy-microhei", "notosanscjk", "sourcehansans", "msyh", "pingfang",
                       "stheiti")


def edition_style(language: str) -> Any:
    """A ``with`` block in which figures draw text in one edition's language: for ``"zh"``
    DejaVu Sans first (Latin letters, digits, minus signs look as in the English figures), then
    :func:`chinese_font` for the Chinese characters; for ``"en"`` the book's style unchanged.

    Raises ``RuntimeError`` for ``"zh"`` when no Chinese font is installed (a figure would show
    empty boxes): callers check :func:`chinese_font` first and keep the English figure.
    """
    if language == "en":
        return plt.rc_context({})
    if language != "zh":
        raise ValueError(f"edition_style: language must be 'en' or 'zh', got {language!r}")
    font = chinese_font()
    if font is None:
        raise RuntimeError("no Chinese font found; install one of " + ", ".join(CHINESE_FONTS))
    # a list of families, not "sans-serif": matplotlib falls back glyph by glyph along it
    return plt.rc_context({"font.family": ["DejaVu Sans", font]})


#: The Chinese edition's words for the texts of the book's plots: ``book`` translations of the
#: English texts the chapters draw (titles, axis labels, legends, annotations). A key may hold
#: ``{}`` where a text has a number or a token that stays as it is (``"d_k = {}"``).
PLOT_WORDS = Path(__file__).with_name("plot_zh.json")
def _plot_words() -> list[tuple[re.Pattern[str], str]]:
    table = json.loads(PLOT_WORDS.read_text(encoding="utf-8")) if PLOT_WORDS.is_file() else {}
    out = []
    for english, chinese in table.items():
        pattern = "(.+?)".join(re.escape(part) for part in english.split("{}"))
        out.append((re.compile(f"^{pattern}$", re.S), chinese))
    return out


def translate_text(text: str, words: list[tuple[re.Pattern[str], str]] | None = None
                   ) -> str | None:
    """A plot's text in Chinese from :data:`PLOT_WORDS` (``{}`` in the Chinese takes what the
    English ``{}`` matched, in order), the text itself when it reads the same in both editions
    (numbers, symbols, short names), or None when the table has no entry."""
    stripped = text.strip()
    words_only = re.sub(r"\$[^$]*\$", "", stripped)  # math reads the same in both
    if not re.search(r"[A-Za-z]{3,}", words_only) or _keeps(words_only):
        return text
    for pattern, chinese in words if words is not None else _plot_words():
        match = pattern.match(stripped)
        if match:  # each "{}" takes the next matched part (other braces are LaTeX's)
            parts = chinese.split("{}")
            return "".join(part + (match.group(k + 1) if k < len(parts) - 1 else "")
                           for k, part in enumerate(parts))
    return None


def plot_zh(text: str) -> str:
    """``text`` in Chinese for a chapter that draws its own Chinese edition of a plot (an
    explorer's title, a figure's legend): the entry of :data:`PLOT_WORDS` for exactly ``text``,
    else :func:`translate_text`. Raises KeyError naming the table when it has none."""
    table: dict[str, str] = json.loads(PLOT_WORDS.read_text(encoding="utf-8"))
    chinese = table.get(text, translate_text(text))
    if chinese is None:
        raise KeyError(f"{PLOT_WORDS.name} has no entry for {text!r}")
    return chinese


#: Words that stay English in the Chinese edition too (the book's glossary keeps them).
KEPT_WORDS = frozenset({
    "BLEU", "GRU", "RNN", "LSTM", "Transformer", "softmax", "argmax", "logit", "logits",
    "LayerNorm", "BatchNorm", "RMSNorm", "Pre-LN", "Post-LN", "AdamW", "ReLU", "GELU",
    "SwiGLU", "BOS", "EOS", "PAD", "UNK", "EOS>", "<eos>", "<bos>", "<pad>", "<unk>", "NLL",
    "FFN", "KV", "PE", "AVX2", "CPU", "GPU", "tiny", "labformer", "nats", "log", "exp", "std",
    "var", "mean", "max", "min", "sqrt", "RoPE", "ALiBi", "GQA", "MQA", "top-k", "top-p"})


def _keeps(text: str) -> bool:
    """Whether every run of three or more Latin letters in ``text`` is a kept word (or part of
    a symbol such as d_model)."""
    for word in re.findall(r"[A-Za-z][A-Za-z_<>-]*[A-Za-z>]|[A-Za-z]", text):
        bare = word.strip("<>")
        if len(re.sub(r"[^A-Za-z]", "", bare)) >= 3 and word not in KEPT_WORDS \
                and bare not in KEPT_WORDS and "_" not in word:
            return False
    return True


CJK_TEXT = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def chinese_twin(fig: Figure) -> tuple[Figure | None, list[str]]:
    """A copy of ``fig`` with its texts in Chinese (:func:`translate_text`) and a Chinese font
    for them, and the texts the table could not translate (left in English). None instead of
    the copy when no Chinese font is installed or the figure cannot be copied."""
    import pickle

    from matplotlib.text import Text

    font = chinese_font()
    if font is None:
        return None, []
    try:
        twin = pickle.loads(pickle.dumps(fig))
    except Exception:  # noqa: BLE001 (a figure holding something unpicklable keeps its English)
        return None, []
    words = _plot_words()
    # tick labels are mostly data (tokens, sentences of the corpus): translated where the
    # table has them, never reported missing
    ticks = {id(label) for ax in twin.axes for axis in (ax.xaxis, ax.yaxis)
             for tick in axis.get_major_ticks() + axis.get_minor_ticks()
             for label in (tick.label1, tick.label2)}
    missing = []
    for artist in twin.findobj(Text):
        text = artist.get_text()
        if not text:
            continue
        chinese = translate_text(text, words)
        if chinese is None and id(artist) not in ticks:
            missing.append(text)
        elif chinese != text:
            artist.set_text(chinese)
        # a text with $...$ is set by mathtext, which takes the first family only: the
        # Chinese font first there (it has Latin letters too), else its Chinese shows as boxes
        shown = artist.get_text()
        artist.set_fontfamily([font, "DejaVu Sans"] if "$" in shown and CJK_TEXT.search(shown)
                              else ["DejaVu Sans", font])
    return twin, missing


def _figure(ax: Axes) -> Figure:
    fig = ax.get_figure(root=True)
    if fig is None:
        raise ValueError("the axes belong to no figure")
    return fig


def _as_matrix(weights: torch.Tensor | np.ndarray, name: str = "weights") -> np.ndarray:
    w = weights.detach().cpu().float().numpy() if isinstance(weights, torch.Tensor) else weights
    w = np.asarray(w, dtype=float)
    if w.ndim != 2:
        raise ValueError(f"{name} must be a (T_q, T_k) matrix, got shape {w.shape}")
    return w


def attention_heatmap(
    weights: torch.Tensor | np.ndarray,
    queries: Sequence[str] | None = None,
    keys: Sequence[str] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    annotate: bool = False,
    cbar: bool = True,
    vmax: float | None = None,
) -> Figure:
    """Heatmap of one (T_q, T_k) weight matrix: a row per query, a column per key.

    The colour scale runs from 0 to ``vmax`` (default: the largest weight).
    """
    w = _as_matrix(weights)
    for labels, size, what in ((queries, w.shape[0], "queries"), (keys, w.shape[1], "keys")):
        if labels is not None and len(labels) != size:
            raise ValueError(f"{len(labels)} {what} labels for a weight matrix of shape {w.shape}")
    if ax is None:
        width = min(FIGURE_WIDTH, 0.45 * w.shape[1] + 2.6)
        _, ax = plt.subplots(figsize=(width, min(7.0, 0.4 * w.shape[0] + 1.6)))
    top = max(float(w.max()), 1e-9) if vmax is None else vmax
    sns.heatmap(
        w, ax=ax, cmap="viridis", vmin=0.0, vmax=top, square=False,
        annot=annotate, fmt=".2f", cbar=cbar, annot_kws={"fontsize": 10},
        xticklabels=list(keys) if keys is not None else "auto",
        yticklabels=list(queries) if queries is not None else "auto",
    )
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.tick_params(axis="x", labelrotation=90)
    ax.tick_params(axis="y", labelrotation=0)
    if title:
        ax.set_title(title)
    return _figure(ax)


Share = bool | Literal["none", "all", "row", "col"]


def panels(rows: int = 1, cols: int = 1, *, height: float | None = None,
           sharex: Share = False, sharey: Share = False) -> tuple[Figure, np.ndarray]:
    """A figure of ``rows`` x ``cols`` axes, :data:`FIGURE_WIDTH` wide: the book's one width.

    ``height`` is the figure's height in inches (default: 2.8 per row, 3.8 for one row).
    Returns ``(fig, axes)`` with ``axes`` always a 2-D array (``axes[r, c]``). Stack panels in
    rows rather than widening the figure: a wider figure is shrunk to fit the column, and
    its text with it.
    """
    if rows < 1 or cols < 1:
        raise ValueError(f"rows and cols must be >= 1, got {rows} x {cols}")
    if height is None:
        height = 3.8 if rows == 1 else 2.8 * rows
    fig, axes = plt.subplots(rows, cols, figsize=(FIGURE_WIDTH, height), squeeze=False,
                             sharex=sharex, sharey=sharey)
    return fig, axes


def _heads_columns(h: int, t_k: int) -> int:
    """Panels per row that keep every key label legible at FIGURE_WIDTH."""
    panel = 1.0 + 0.24 * t_k  # inches: tick labels plus a cell per key
    return max(1, min(h, int(FIGURE_WIDTH // panel)))


def attention_heads(
    weights: torch.Tensor | np.ndarray,
    queries: Sequence[str] | None = None,
    keys: Sequence[str] | None = None,
    *,
    cols: int | None = None,
    title: str | None = None,
) -> Figure:
    """One heatmap per head of (h, T_q, T_k) weights, on a shared colour scale.

    ``cols`` panels per row (default: as many as fit :data:`FIGURE_WIDTH` legibly).
    """
    w = weights.detach().cpu().float().numpy() if isinstance(weights, torch.Tensor) else weights
    w = np.asarray(w, dtype=float)
    if w.ndim != 3:
        raise ValueError(f"weights must be (h, T_q, T_k), got shape {w.shape}")
    h, t_q, t_k = w.shape
    cols = min(cols or _heads_columns(h, t_k), h)
    rows = -(-h // cols)  # ceiling division
    panel_h = (FIGURE_WIDTH / cols - 0.9) * t_q / max(t_k, 1) + 1.1
    fig, axes = panels(rows, cols, height=min(9.0, rows * max(panel_h, 1.8)))
    vmax = max(float(w.max()), 1e-9)
    for i, ax in enumerate(axes.flat):
        if i >= h:
            ax.axis("off")
            continue
        attention_heatmap(w[i], queries, keys, ax=ax, title=f"head {i + 1}", cbar=False,
                          vmax=vmax)
        if i % cols:
            ax.set_ylabel("")
            ax.set_yticklabels([])
        if i < h - cols:
            ax.set_xlabel("")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def attention_grid(
    weights: torch.Tensor | np.ndarray,
    queries: Sequence[str] | None = None,
    keys: Sequence[str] | None = None,
    *,
    title: str | None = None,
) -> Figure:
    """(N, h, T_q, T_k) weights as a grid: a row per layer, a column per head, one colour scale
    (0 to 1 for attention weights, the data's range otherwise) with its colour bar.

    Layers and heads are counted from 1, as in the text. Token labels shrink with the panels,
    down to :data:`GRID_MIN_LABEL_PT` (11 px on screen, the book's smallest text); where a
    token has less room than that, every 2nd (3rd, ...) token is labelled instead, so that
    neighbouring labels never overlap."""
    w = weights.detach().cpu().float().numpy() if isinstance(weights, torch.Tensor) else weights
    w = np.asarray(w, dtype=float)
    if w.ndim != 4:
        raise ValueError(f"weights must be (N, h, T_q, T_k), got shape {w.shape}")
    n, h, t_q, t_k = w.shape
    cell = FIGURE_WIDTH / h
    fig, axes = panels(n, h, height=min(10.0, n * (cell * t_q / max(t_k, 1) * 0.8 + 0.9)))
    lo, hi = float(w.min()), float(w.max())
    vmin, vmax = (0.0, 1.0) if lo >= 0.0 and hi <= 1.0 else (min(lo, 0.0), max(hi, 1e-9))
    # A label's height is its font size: at most 80 % of the room a token has on either axis.
    room = 72 * 0.8 * min(cell * 0.85 / max(t_k, 1), fig.get_figheight() / n * 0.7 / max(t_q, 1))
    size = float(np.clip(room, GRID_MIN_LABEL_PT, 10.0))
    every = max(1, int(np.ceil(size / room - 1e-9)))  # label every ``every``-th token

    def thinned(tokens: Sequence[str] | None, show: bool) -> list[str] | bool:
        if tokens is None or not show:
            return False
        return [t if i % every == 0 else "" for i, t in enumerate(tokens)]

    for layer in range(n):
        for head in range(h):
            ax = axes[layer, head]
            sns.heatmap(w[layer, head], ax=ax, cmap="viridis", vmin=vmin, vmax=vmax, cbar=False,
                        xticklabels=thinned(keys, layer == n - 1),
                        yticklabels=thinned(queries, head == 0))
            ax.tick_params(axis="x", labelrotation=90, labelsize=size)
            ax.tick_params(axis="y", labelrotation=0, labelsize=size)
            if layer == 0:
                ax.set_title(f"head {head + 1}", fontsize=11)
            if head == 0:
                ax.set_ylabel(f"layer {layer + 1}", fontsize=11)
    fig.colorbar(axes[0, 0].collections[0], ax=axes.ravel().tolist(), fraction=0.025,
                 pad=0.02, label="attention weight")
    if title:
        fig.suptitle(title)
    return fig


def signed_heatmap(
    values: torch.Tensor | np.ndarray,
    rows: Sequence[str] | None = None,
    cols: Sequence[str] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    cbar_label: str | None = None,
) -> Figure:
    """Heatmap of signed values on a diverging map centred at 0 (white = 0, red > 0, blue < 0)."""
    v = _as_matrix(values, "values")
    if ax is None:
        _, ax = plt.subplots(figsize=(FIGURE_WIDTH, min(6.0, 0.3 * v.shape[0] + 1.6)))
    m = max(float(np.abs(v).max()), 1e-12)
    sns.heatmap(v, ax=ax, cmap="RdBu_r", vmin=-m, vmax=m, center=0.0,
                xticklabels=list(cols) if cols is not None else "auto",
                yticklabels=list(rows) if rows is not None else "auto",
                cbar_kws={"label": cbar_label} if cbar_label else None)
    if title:
        ax.set_title(title)
    return _figure(ax)


def training_curves(
    curves: Mapping[str, Sequence[float]],
    *,
    xlabel: str = "step",
    ylabel: str = "loss",
    ax: Axes | None = None,
    logy: bool = False,
    smooth: int = 1,
) -> Figure:
    """Line plot of named curves (e.g. {"Post-LN": losses, ...}); ``smooth`` = moving average."""
    if not curves:
        raise ValueError("no curves to plot")
    if smooth < 1:
        raise ValueError(f"smooth must be >= 1, got {smooth}")
    if ax is None:
        _, ax = plt.subplots(figsize=(FIGURE_WIDTH, 3.8))
    for name, ys in curves.items():
        y = np.asarray(ys, dtype=float)
        if smooth > 1 and len(y) >= smooth:
            y = np.convolve(y, np.ones(smooth) / smooth, mode="valid")
        ax.plot(np.arange(len(y)) + (smooth - 1 if len(y) < len(ys) else 0), y, label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    ax.legend()
    return _figure(ax)


# --------------------------------------------------------------------------- explorers

#: Mime type of plotly figures: JupyterLab's plotly extension renders it.
PLOTLY_MIME = "application/vnd.plotly.v1+json"
#: CSS class of the HTML block that the book's labformer-explorer.js turns into a plot.
EXPLORER_CLASS = "lf-explorer"
_DIGITS = 4  # weights are rounded to 4 decimals in the output: smaller pages, same picture

WeightsLike = torch.Tensor | np.ndarray
Tokens = Sequence[str]


def _as_stack(weights: WeightsLike, kind: str) -> np.ndarray:
    """(T_q, T_k) | (h, T_q, T_k) | (N, h, T_q, T_k) -> float array (N, h, T_q, T_k)."""
    w = weights.detach().cpu().float().numpy() if isinstance(weights, torch.Tensor) else weights
    w = np.asarray(w, dtype=float)
    name = f"weights[{kind!r}]" if kind else "weights"
    if w.ndim not in (2, 3, 4) or 0 in w.shape:
        raise ValueError(f"{name} must be (T_q, T_k), (h, T_q, T_k) or (N, h, T_q, T_k), "
                         f"got shape {w.shape}")
    if not np.isfinite(w).all():
        raise ValueError(f"{name} holds NaN or infinite values")
    while w.ndim < 4:
        w = w[None]
    return w


def _tokens_for(tokens: Tokens | Mapping[str, Tokens] | None, kind: str, size: int,
                what: str) -> list[str] | None:
    if tokens is None:
        return None
    if isinstance(tokens, Mapping):
        if kind not in tokens:
            raise ValueError(f"{what} has no entry for kind {kind!r} (has {sorted(tokens)})")
        tokens = tokens[kind]
    if isinstance(tokens, str):
        raise ValueError(f"{what} must be a list of tokens, not one string")
    out = [str(t) for t in tokens]
    if len(out) != size:
        label = f" for kind {kind!r}" if kind else ""
        raise ValueError(f"{len(out)} {what}{label} for weights with {size} positions")
    return out


class AttentionExplorer:
    """An interactive view of attention weights: one heatmap, selectors for kind, layer, head.

    Built by :func:`attention_explorer`; the last expression of a notebook cell displays it.
    ``panels[kind]`` holds the weights as an (N, h, T_q, T_k) array; ``queries[kind]`` and
    ``keys[kind]`` the token labels of the rows and the columns.
    """

    def __init__(self, panels: dict[str, np.ndarray], queries: dict[str, list[str]],
                 keys: dict[str, list[str]], title: str = "", side_by_side: bool = False,
                 title_zh: str = "", names_zh: Mapping[str, str] | None = None) -> None:
        self.panels = panels
        self.queries = queries
        self.keys = keys
        self.title = title
        self.side_by_side = side_by_side
        self.title_zh = title_zh
        self.names_zh = dict(names_zh or {})

    @property
    def kinds(self) -> list[str]:
        return list(self.panels)

    def views(self) -> list[tuple[str, int, int]]:
        """Every (kind, layer, head) the selectors reach, in selector order."""
        return [(kind, n, i) for kind, w in self.panels.items()
                for n in range(w.shape[0]) for i in range(w.shape[1])]

    def _zrange(self) -> tuple[float, float]:
        """0 to 1 for attention weights, so every explorer reads on one colour scale; the data's
        range for anything else."""
        lo = min(float(w.min()) for w in self.panels.values())
        hi = max(float(w.max()) for w in self.panels.values())
        if lo >= 0.0 and hi <= 1.0:
            return 0.0, 1.0
        return min(lo, 0.0), max(hi, min(lo, 0.0) + 1e-9)

    @staticmethod
    def view_name(kind: str, layer: int, head: int, n_layers: int, n_heads: int) -> str:
        parts = [kind] if kind else []
        parts += [f"layer {layer + 1}"] if n_layers > 1 else []  # counted from 1, as in the text
        parts += [f"head {head + 1}"] if n_heads > 1 else []
        return " · ".join(parts) or "weights"

    def data(self) -> dict[str, Any]:
        """The compact description that labformer-explorer.js draws (JSON-serialisable)."""
        zmin, zmax = self._zrange()
        return {
            "title": self.title, "title_zh": self.title_zh,
            "zmin": round(zmin, _DIGITS), "zmax": round(zmax, _DIGITS),
            "side": self.side_by_side,
            "kinds": [{"name": kind, "name_zh": self.names_zh.get(kind, ""),
                       "queries": self.queries[kind], "keys": self.keys[kind],
                       "weights": np.round(w, _DIGITS).tolist()}
                      for kind, w in self.panels.items()],
        }

    def to_plotly(self) -> dict[str, Any]:
        """A plotly figure (dict) with one heatmap per view and a dropdown to pick it."""
        zmin, zmax = self._zrange()
        traces: list[dict[str, Any]] = []
        labels: list[str] = []
        for kind, layer, head in self.views():
            w = self.panels[kind]
            q, k = self.queries[kind], self.keys[kind]
            traces.append({
                "type": "heatmap", "z": np.round(w[layer, head], _DIGITS).tolist(),
                "x": list(range(len(k))), "y": list(range(len(q))),
                "text": [[f"query {a}: {html.escape(qa)}<br>key {b}: {html.escape(kb)}"
                          for b, kb in enumerate(k, 1)] for a, qa in enumerate(q, 1)],
                "hovertemplate": "%{text}<br>weight %{z:.3f}<extra></extra>",
                "colorscale": "Viridis", "zmin": zmin, "zmax": zmax,
                "visible": not traces, "colorbar": {"title": {"text": "weight"}},
            })
            labels.append(self.view_name(kind, layer, head, w.shape[0], w.shape[1]))
        first = self.kinds[0]
        q, k = self.queries[first], self.keys[first]
        layout: dict[str, Any] = {
            "title": {"text": html.escape(self.title)} if self.title else None,
            "xaxis": {"title": {"text": "key"}, "tickmode": "array", "tickangle": -90,
                      "tickvals": list(range(len(k))), "ticktext": [html.escape(t) for t in k]},
            "yaxis": {"title": {"text": "query"}, "tickmode": "array", "autorange": "reversed",
                      "tickvals": list(range(len(q))), "ticktext": [html.escape(t) for t in q]},
            "height": min(720, 200 + 26 * max(len(q), 6)),
            "font": {"size": 14}, "paper_bgcolor": "white", "plot_bgcolor": "white",
            "margin": {"t": 60 if self.title or len(traces) > 1 else 20},
        }
        if len(traces) > 1:
            buttons = []
            for n, ((kind, _, _), label) in enumerate(zip(self.views(), labels, strict=True)):
                kq, kk = self.queries[kind], self.keys[kind]
                buttons.append({"label": label, "method": "update", "args": [
                    {"visible": [j == n for j in range(len(traces))]},
                    {"xaxis.tickvals": list(range(len(kk))),
                     "xaxis.ticktext": [html.escape(t) for t in kk],
                     "yaxis.tickvals": list(range(len(kq))),
                     "yaxis.ticktext": [html.escape(t) for t in kq]}]})
            layout["updatemenus"] = [{"buttons": buttons, "x": 0, "xanchor": "left",
                                      "y": 1.02, "yanchor": "bottom", "showactive": True}]
        layout = {key: value for key, value in layout.items() if value is not None}
        return {"data": traces, "layout": layout,
                "config": {"displaylogo": False, "responsive": True}}

    def to_html(self) -> str:
        """The HTML block of the book: data for labformer-explorer.js and a fallback note."""
        payload = json.dumps(self.data(), separators=(",", ":"), ensure_ascii=False)
        payload = payload.replace("</", "<\\/")  # a token "</s>" must not close the script
        label = html.escape(self.title or "attention weights", quote=True)
        return (
            f'<div class="{EXPLORER_CLASS}" role="figure" aria-label="{label}">'
            f'<p class="lf-explorer-fallback">An interactive view of the attention weights '
            f"is shown here in the book's HTML pages and in JupyterLab.</p>"
            f'<script type="application/json" class="lf-explorer-data">{payload}</script>'
            "</div>"
        )

    def __repr__(self) -> str:
        n_views = len(self.views())
        kinds = ", ".join(repr(k) for k in self.kinds if k) or "one kind"
        return f"AttentionExplorer({kinds}; {n_views} view{'s' * (n_views != 1)})"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {PLOTLY_MIME: self.to_plotly(), "text/html": self.to_html(),
                "text/plain": repr(self)}


def attention_explorer(
    weights: WeightsLike | Mapping[str, WeightsLike],
    query_tokens: Tokens | Mapping[str, Tokens],
    key_tokens: Tokens | Mapping[str, Tokens] | None = None,
    *,
    title: str = "",
    side_by_side: bool = False,
    title_zh: str = "",
    names_zh: Mapping[str, str] | None = None,
) -> AttentionExplorer:
    """An interactive heatmap of attention weights, with selectors for kind, layer and head.

    ``weights``: (T_q, T_k), (h, T_q, T_k) or (N, h, T_q, T_k), or a dict {kind name: such a
    tensor} (e.g. {"encoder self": ..., "decoder self": ..., "cross": ...}). ``query_tokens``
    label the rows, ``key_tokens`` the columns (default: the query tokens, as in
    self-attention); each is a list of strings or a dict {kind: list}. Hovering a cell shows
    the query, the key and the weight. The last expression of a cell displays the explorer.
    ``side_by_side=True`` shows all heads of a layer next to each other (in the book's pages;
    JupyterLab's plotly view keeps one head at a time). The book's Chinese edition shows
    ``title_zh`` and the kinds' names from ``names_zh`` ({kind: Chinese name}), with its
    controls in Chinese; every kind of a dict needs a Chinese name once one is given.
    """
    if isinstance(weights, Mapping):
        if not weights:
            raise ValueError("weights is an empty dict: no attention to show")
        items = [(str(kind), w) for kind, w in weights.items()]
    else:
        items = [("", weights)]
    panels: dict[str, np.ndarray] = {}
    queries: dict[str, list[str]] = {}
    keys: dict[str, list[str]] = {}
    for kind, w in items:
        stack = _as_stack(w, kind)
        t_q, t_k = stack.shape[-2:]
        q = _tokens_for(query_tokens, kind, t_q, "query tokens")
        if q is None:
            raise ValueError("query_tokens are required: one label per query row")
        k = _tokens_for(key_tokens, kind, t_k, "key tokens")
        if k is None:
            if t_q != t_k:
                raise ValueError(f"weights{f'[{kind!r}]' if kind else ''} are {t_q} x {t_k}: "
                                 "pass key_tokens when queries and keys differ")
            k = q
        panels[kind], queries[kind], keys[kind] = stack, q, k
    if names_zh is not None and set(names_zh) != {k for k, _ in items}:
        raise ValueError(f"names_zh names the kinds {sorted(names_zh)}, the weights have "
                         f"{sorted(k for k, _ in items)}")
    return AttentionExplorer(panels, queries, keys, title=title, side_by_side=side_by_side,
                             title_zh=title_zh, names_zh=names_zh)
