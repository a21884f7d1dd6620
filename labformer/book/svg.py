"""The book's SVG toolkit: colours, text measurement, labels in both editions, and a
:class:`Diagram` of cells, boxes and arrows written out as SVG. It knows no figure: the figures
are drawn with it in :mod:`labformer.book.diagrams`.

One visual language for every chapter. A vector is a row of cells filled with its role's colour
(:data:`ROLE_COLOURS`: embedding, position, query, key, value, output, ...), taken from the
palette of the book's plots (seaborn's "deep", which :func:`labformer.book.plot.apply_style` sets),
so a query is the same green in a diagram and in a plot. Shapes are written on arrows.

Every label is a :class:`Label`, an English text and its Chinese twin from the diagrams'
catalogue (:data:`DIAGRAM_WORDS`), and :meth:`Diagram.render` picks one. What a diagram shows can
be read back from its SVG (:func:`read_values`, :func:`read_texts`), so a chapter's checks
compare the picture with what the module computes: values in cells, shapes on arrows, the order
of the steps.

Text is at least :data:`MIN_FONT` px at the SVG's own size, and a diagram is at most
:data:`MAX_WIDTH` px wide, so it shows at its own size (never enlarged) in the book's column at
1280 px. The background is transparent; the book shows figures on a white panel in dark mode.
"""

from __future__ import annotations

import functools
import html
import json
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = [
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
    "as_label",
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
    "text_width",
    "vector_width",
]

#: seaborn's "deep" palette, the colour cycle of the book's plots (C0 to C9).
DEEP = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3",
        "#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd")
#: One colour per role, the same in every diagram and plot.
ROLE_COLOURS: dict[str, str] = {
    "embedding": DEEP[0], "position": DEEP[1], "query": DEEP[2], "key": DEEP[3],
    "value": DEEP[4], "output": DEEP[5], "weight": DEEP[6], "neutral": DEEP[7],
    "hidden": DEEP[8], "logit": DEEP[9],
    "norm": "#4f6d7a",  # a slate of its own: layer norms appear in no plot
}
#: Smallest text in a diagram, in px at the SVG's own size (the book shows it at that size).
MIN_FONT = 13
#: Widest diagram, in px: narrower than the book's content column at a 1280 px window.
MAX_WIDTH = 640
INK = "#222222"
#: Opacity of a vector's cells over the white panel: light enough that INK written in them keeps
#: a contrast of at least :data:`MIN_CONTRAST` in every role's colour (WCAG's ratio for text).
CELL_OPACITY = 0.7
MIN_CONTRAST = 4.5
#: Fonts of the diagrams' text: the book's system fonts, with a CJK font for the Chinese edition.
FONTS = "DejaVu Sans, WenQuanYi Micro Hei, Noto Sans CJK SC, Microsoft YaHei, sans-serif"
MUTED = "#555555"
Lang = Literal["en", "zh"]
#: The Chinese edition's words for the diagrams' texts (labels, titles, alt texts), by their
#: English text. A key with fields (``"head {n}"``) is a :meth:`str.format` template whose
#: fields both editions fill with the same values; a key without fields is taken as it is.
DIAGRAM_WORDS = Path(__file__).with_name("diagrams_zh.json")


@functools.cache
def diagram_words() -> dict[str, str]:
    """:data:`DIAGRAM_WORDS`, read once."""
    table: dict[str, str] = json.loads(DIAGRAM_WORDS.read_text(encoding="utf-8"))
    return table


@dataclass(frozen=True)
class Label:
    """A text in both editions: English and Chinese (numbers and symbols: the same in both)."""

    en: str
    zh: str | None = None

    def text(self, lang: Lang) -> str:
        return self.en if lang == "en" or self.zh is None else self.zh

    @classmethod
    def of(cls, english: str, *args: object, **fields: object) -> Label:
        """``english`` and its Chinese from :data:`DIAGRAM_WORDS`, their fields filled with
        ``args`` and ``fields`` (a :class:`Label` among them gives each edition its text)."""
        chinese = diagram_words().get(english)
        if chinese is None:
            raise KeyError(f"{DIAGRAM_WORDS.name} has no entry for {english!r}")
        if not args and not fields:
            return cls(english, chinese)

        def fill(template: str, lang: Lang) -> str:
            def value(v: object) -> object:
                return v.text(lang) if isinstance(v, Label) else v
            return template.format(*map(value, args),
                                   **{k: value(v) for k, v in fields.items()})
        return cls(fill(english, "en"), fill(chinese, "zh"))

    @classmethod
    def join(cls, separator: str, items: Sequence[str | Label]) -> Label:
        """``items`` joined by ``separator`` (a key of :data:`DIAGRAM_WORDS`: each edition
        writes a list its own way)."""
        sep = cls.of(separator)
        return cls(sep.en.join(as_label(i).en for i in items),
                   sep.text("zh").join(as_label(i).text("zh") for i in items))


def as_label(text: str | Label) -> Label:
    """``text`` as a :class:`Label` (a plain string: the same in both editions)."""
    return text if isinstance(text, Label) else Label(text)


@dataclass(frozen=True)
class Picture:
    """One rendered diagram: its SVG text, shown inline by Jupyter and glued by myst-nb."""

    svg: str
    alt: str

    def _repr_svg_(self) -> str:
        return self.svg


def _luminance(colour: str) -> float:
    """WCAG's relative luminance of a "#rrggbb" colour."""
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b)


def contrast(foreground: str, background: str) -> float:
    """WCAG's contrast ratio of two "#rrggbb" colours, from 1 to 21."""
    high, low = sorted((_luminance(foreground), _luminance(background)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def over_white(colour: str, opacity: float) -> str:
    """The colour that ``colour`` at ``opacity`` shows on the white panel, as "#rrggbb"."""
    channels = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{round(opacity * c + (1 - opacity) * 255):02x}" for c in channels)


def text_width(text: str, size: float) -> float:
    """Approximate width of a text in px (wide characters count double)."""
    return sum(size * (1.0 if ord(c) > 0x2E80 else 0.6) for c in text)


@dataclass
class Diagram:
    """A drawing in px, built from cells, boxes, arrows and texts, rendered as SVG."""

    width: float
    height: float
    alt: Label
    items: list[tuple[str, dict[str, object]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0 < self.width <= MAX_WIDTH:
            raise ValueError(f"a diagram is 1 to {MAX_WIDTH} px wide, got {self.width}")
        if self.height <= 0:
            raise ValueError(f"a diagram needs a positive height, got {self.height}")

    # ------------------------------------------------------------------ primitives
    def text(self, x: float, y: float, label: str | Label, *, size: float = 14,
             anchor: str = "middle", kind: str = "label", bold: bool = False,
             colour: str = INK) -> None:
        """A text centred (``anchor``) at x, its baseline at y; ``kind`` names it for reading."""
        if size < MIN_FONT:
            raise ValueError(f"text of {size} px is below the {MIN_FONT} px minimum")
        self.items.append(("text", {"x": x, "y": y, "label": as_label(label), "size": size,
                                    "anchor": anchor, "kind": kind, "bold": bold,
                                    "colour": colour}))

    def box(self, x: float, y: float, w: float, h: float, label: str | Label = "", *,
            role: str = "neutral", size: float = 14, kind: str = "box",
            dashed: bool = False) -> None:
        """A rounded box outlined in ``role``'s colour, its label in the middle."""
        colour = ROLE_COLOURS[role]
        self.items.append(("rect", {"x": x, "y": y, "w": w, "h": h, "stroke": colour,
                                    "fill": colour, "opacity": 0.14, "dashed": dashed}))
        if as_label(label).en:
            self.text(x + w / 2, y + h / 2 + size * 0.35, label, size=size, kind=kind)

    def bar(self, x: float, y: float, w: float, h: float, *, role: str) -> None:
        """A filled bar in ``role``'s colour, its top-left corner at (x, y)."""
        colour = ROLE_COLOURS[role]
        self.items.append(("rect", {"x": x, "y": y, "w": w, "h": h, "stroke": colour,
                                    "fill": colour, "opacity": 0.85, "dashed": False,
                                    "rx": 1}))

    def vector(self, x: float, y: float, values: Sequence[float] | int, *, role: str,
               name: str, cell: float = 34, digits: int = 2, size: float = 13,
               fixed: bool = False) -> float:
        """A vector as a row of cells in ``role``'s colour, its values written in them.

        ``values``: the numbers to write, or a length (empty cells). Cells widen to fit their
        numbers unless ``fixed``. Returns the row's width.
        """
        n = values if isinstance(values, int) else len(values)
        if n < 1:
            raise ValueError(f"vector {name!r} needs at least one cell")
        texts = [""] * n if isinstance(values, int) else [f"{float(v):.{digits}f}"
                                                          for v in values]
        w = cell * (1.0 if isinstance(values, int) or fixed else max(
            1.0, max(text_width(t, size) for t in texts) / cell + 0.25))
        self.items.append(("cells", {"x": x, "y": y, "n": n, "w": w, "h": 24,
                                     "colour": ROLE_COLOURS[role], "texts": texts,
                                     "name": name, "size": size}))
        return n * w

    def matrix(self, x: float, y: float, rows: int, cols: int, *, role: str, name: str,
               cell: float = 14) -> tuple[float, float]:
        """A matrix as a grid of blank cells (its shape is what matters). Returns (w, h)."""
        if rows < 1 or cols < 1:
            raise ValueError(f"matrix {name!r} needs a positive shape, got ({rows}, {cols})")
        self.items.append(("grid", {"x": x, "y": y, "rows": rows, "cols": cols, "cell": cell,
                                    "colour": ROLE_COLOURS[role], "name": name}))
        return cols * cell, rows * cell

    def mask(self, x: float, y: float, allowed: Sequence[Sequence[bool]], *, role: str,
             name: str, cell: float = 28) -> tuple[float, float]:
        """A boolean mask as a grid: a filled cell where a query (row) may attend to a key
        (column), an empty one where it may not. Returns (w, h)."""
        rows = [[bool(v) for v in row] for row in allowed]
        if not rows or not rows[0] or any(len(r) != len(rows[0]) for r in rows):
            raise ValueError(f"mask {name!r} needs a non-empty rectangular grid")
        self.items.append(("mask", {"x": x, "y": y, "rows": rows, "cell": cell,
                                    "colour": ROLE_COLOURS[role], "name": name}))
        return len(rows[0]) * cell, len(rows) * cell

    def arrow(self, x1: float, y1: float, x2: float, y2: float, label: str | Label = "", *,
              kind: str = "shape", size: float = 13, side: float = -6,
              dashed: bool = False, colour: str = MUTED) -> None:
        """An arrow from (x1, y1) to (x2, y2); ``label`` (a shape, a step) beside its middle."""
        self.items.append(("line", {"x1": x1, "y1": y1, "x2": x2, "y2": y2,
                                    "dashed": dashed, "colour": colour, "head": True}))
        if as_label(label).en:
            dx, dy = x2 - x1, y2 - y1
            mx, my = (x1 + x2) / 2, (y1 + y2) / 2
            if abs(dy) <= 0.2 * abs(dx):  # about horizontal: the label above it
                self.text(mx, my + side, label, size=size, kind=kind, colour=MUTED)
            elif abs(dx) <= 0.2 * abs(dy):  # about vertical: the label to its right
                self.text(mx + 6, my + size * 0.35, label, size=size, kind=kind,
                          anchor="start", colour=MUTED)
            else:  # slanted: the label off its middle, on the side that keeps it clear
                length = math.hypot(dx, dy)
                nx, ny = dy / length, -dx / length  # a normal, turned to point up
                if ny > 0:
                    nx, ny = -nx, -ny
                self.text(mx + 8 * nx, my + 8 * ny + (size * 0.35 if ny > -0.5 else 0),
                          label, size=size, kind=kind, colour=MUTED,
                          anchor="start" if nx >= 0 else "end")

    def line(self, x1: float, y1: float, x2: float, y2: float, *,
             colour: str = MUTED, dashed: bool = False) -> None:
        """A line without an arrowhead (a branch that arrows leave from, or a dashed link)."""
        self.items.append(("line", {"x1": x1, "y1": y1, "x2": x2, "y2": y2,
                                    "dashed": dashed, "colour": colour, "head": False}))

    def circle(self, cx: float, cy: float, r: float, *, role: str = "neutral") -> None:
        self.items.append(("circle", {"cx": cx, "cy": cy, "r": r,
                                      "colour": ROLE_COLOURS[role]}))

    def hand(self, cx: float, cy: float, r: float, angle: float, *, role: str,
             name: str) -> None:
        """A clock hand from the centre at ``angle`` radians (0: 3 o'clock, counter-clockwise)."""
        self.items.append(("hand", {"cx": cx, "cy": cy, "r": r, "angle": angle,
                                    "colour": ROLE_COLOURS[role], "name": name}))

    # ------------------------------------------------------------------ output
    def render(self, lang: Lang = "en") -> Picture:
        """The diagram as SVG with the labels of ``lang`` ("en" or "zh")."""
        if lang not in ("en", "zh"):
            raise ValueError(f"lang must be 'en' or 'zh', got {lang!r}")
        alt = self.alt.text(lang)
        out = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width:g}" '
            f'height="{self.height:g}" viewBox="0 0 {self.width:g} {self.height:g}" '
            f'role="img" aria-label="{html.escape(alt)}" class="lf-diagram-svg" '
            f'font-family="{FONTS}">',
            f"<title>{html.escape(alt)}</title>",
            '<defs><marker id="lf-arrow" viewBox="0 0 10 10" refX="9" refY="5" '
            'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
            f'<path d="M0,0 L10,5 L0,10 z" fill="{MUTED}"/></marker></defs>',
        ]
        for kind, a in self.items:
            out.append(_svg_item(kind, a, lang))
        out.append("</svg>")
        return Picture("\n".join(out), alt)


def _f(x: object) -> str:
    return f"{float(x):.1f}".rstrip("0").rstrip(".")  # type: ignore[arg-type]


def _svg_item(kind: str, a: dict[str, object], lang: Lang) -> str:
    if kind == "text":
        label = a["label"]
        assert isinstance(label, Label)
        weight = ' font-weight="bold"' if a["bold"] else ""
        return (f'<text x="{_f(a["x"])}" y="{_f(a["y"])}" font-size="{a["size"]}" '
                f'text-anchor="{a["anchor"]}" fill="{a["colour"]}" '
                f'class="lf-{a["kind"]}"{weight}>{html.escape(label.text(lang))}</text>')
    if kind == "rect":
        dash = ' stroke-dasharray="5 3"' if a["dashed"] else ""
        return (f'<rect x="{_f(a["x"])}" y="{_f(a["y"])}" width="{_f(a["w"])}" '
                f'height="{_f(a["h"])}" rx="{a.get("rx", 6)}" fill="{a["fill"]}" '
                f'fill-opacity="{a["opacity"]}" stroke="{a["stroke"]}" '
                f'stroke-width="1.6"{dash}/>')
    if kind == "cells":
        x, y, w, h = (float(a[k]) for k in ("x", "y", "w", "h"))  # type: ignore[arg-type]
        texts = a["texts"]
        assert isinstance(texts, list)
        parts = [f'<g class="lf-vector" data-name="{html.escape(str(a["name"]))}">']
        for i, t in enumerate(texts):
            parts.append(f'<rect x="{_f(x + i * w)}" y="{_f(y)}" width="{_f(w)}" '
                         f'height="{_f(h)}" fill="{a["colour"]}" '
                         f'fill-opacity="{CELL_OPACITY}" stroke="#ffffff" stroke-width="1.5"/>')
            if t:
                parts.append(f'<text x="{_f(x + (i + 0.5) * w)}" y="{_f(y + h / 2 + 4.5)}" '
                             f'font-size="{a["size"]}" text-anchor="middle" fill="{INK}" '
                             f'class="lf-value">{t}</text>')
        parts.append("</g>")
        return "".join(parts)
    if kind == "grid":
        x, y, c = float(a["x"]), float(a["y"]), float(a["cell"])  # type: ignore[arg-type]
        rows, cols = int(a["rows"]), int(a["cols"])  # type: ignore[call-overload]
        parts = [f'<g class="lf-matrix" data-name="{html.escape(str(a["name"]))}" '
                 f'data-shape="{rows},{cols}">']
        for r in range(rows):
            for col in range(cols):
                parts.append(f'<rect x="{_f(x + col * c)}" y="{_f(y + r * c)}" '
                             f'width="{_f(c)}" height="{_f(c)}" fill="{a["colour"]}" '
                             'fill-opacity="0.8" stroke="#ffffff" stroke-width="1"/>')
        parts.append("</g>")
        return "".join(parts)
    if kind == "mask":
        x, y, c = float(a["x"]), float(a["y"]), float(a["cell"])  # type: ignore[arg-type]
        grid = a["rows"]
        assert isinstance(grid, list)
        bits = ";".join("".join("1" if v else "0" for v in row) for row in grid)
        parts = [f'<g class="lf-mask" data-name="{html.escape(str(a["name"]))}" '
                 f'data-mask="{bits}">']
        for r, row in enumerate(grid):
            for col, v in enumerate(row):
                fill = (f'fill="{a["colour"]}" fill-opacity="0.85"' if v
                        else 'fill="#ffffff" fill-opacity="0"')
                parts.append(f'<rect x="{_f(x + col * c)}" y="{_f(y + r * c)}" '
                             f'width="{_f(c)}" height="{_f(c)}" {fill} stroke="{MUTED}" '
                             'stroke-width="0.8"/>')
        parts.append("</g>")
        return "".join(parts)
    if kind == "line":
        dash = ' stroke-dasharray="5 3"' if a["dashed"] else ""
        return (f'<line x1="{_f(a["x1"])}" y1="{_f(a["y1"])}" x2="{_f(a["x2"])}" '
                f'y2="{_f(a["y2"])}" stroke="{a["colour"]}" stroke-width="1.6"{dash}'
                + (' marker-end="url(#lf-arrow)"' if a.get("head", True) else "") + "/>")
    if kind == "circle":
        return (f'<circle cx="{_f(a["cx"])}" cy="{_f(a["cy"])}" r="{_f(a["r"])}" '
                f'fill="{a["colour"]}" fill-opacity="0.1" stroke="{a["colour"]}" '
                'stroke-width="1.4"/>')
    if kind == "hand":
        cx, cy, radius, t = (float(a[k])  # type: ignore[arg-type]
                             for k in ("cx", "cy", "r", "angle"))
        x2, y2 = cx + radius * math.cos(t), cy - radius * math.sin(t)
        return (f'<line class="lf-hand" data-name="{html.escape(str(a["name"]))}" '
                f'data-angle="{t:.6f}" x1="{_f(cx)}" y1="{_f(cy)}" x2="{x2:.2f}" '
                f'y2="{y2:.2f}" stroke="{a["colour"]}" stroke-width="3" '
                'stroke-linecap="round"/>')
    raise ValueError(f"unknown item {kind!r}")  # pragma: no cover


# ---------------------------------------------------------------------- reading a picture back
def _root(picture: Picture | str) -> ET.Element:
    text = picture.svg if isinstance(picture, Picture) else picture
    return ET.fromstring(text)


_NS = "{http://www.w3.org/2000/svg}"


def read_values(picture: Picture | str, name: str) -> list[float]:
    """The numbers written in the cells of the vector ``name``, as drawn."""
    for g in _root(picture).iter(f"{_NS}g"):
        if g.get("data-name") == name and g.get("class") == "lf-vector":
            return [float(t.text or "nan") for t in g.iter(f"{_NS}text")]
    raise KeyError(f"no vector named {name!r} in the diagram")


def cell_text_contrasts(picture: Picture | str) -> list[tuple[str, float]]:
    """Every text written in a vector's cell, with its contrast against the cell's colour on
    the white panel (the cell that holds the text's anchor point)."""
    root = _root(picture)
    cells = []
    for group in root.iter(f"{_NS}g"):
        if group.get("class") != "lf-vector":
            continue
        for rect in group.iter(f"{_NS}rect"):
            x, y, w, h = (float(rect.get(k, "0")) for k in ("x", "y", "width", "height"))
            cells.append((x, y, w, h, over_white(rect.get("fill", "#ffffff"),
                                                 float(rect.get("fill-opacity", "1")))))
    out = []
    for text in root.iter(f"{_NS}text"):
        tx, ty = float(text.get("x", "0")), float(text.get("y", "0")) - 4
        inside = [c for c in cells if c[0] <= tx <= c[0] + c[2] and c[1] <= ty <= c[1] + c[3]]
        if inside and text.text:
            out.append((text.text, contrast(text.get("fill", INK), inside[-1][4])))
    return out


def read_texts(picture: Picture | str, kind: str) -> list[str]:
    """The texts of class ``lf-KIND`` (``shape``, ``step``, ``label``, ...) in drawing order."""
    return [t.text or "" for t in _root(picture).iter(f"{_NS}text")
            if t.get("class") == f"lf-{kind}"]


def read_shapes(picture: Picture | str) -> dict[str, tuple[int, ...]]:
    """Every matrix and vector drawn, by name: its shape as drawn (rows, cols) or (cells,)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for g in _root(picture).iter(f"{_NS}g"):
        name = g.get("data-name")
        if name is None:
            continue
        if g.get("class") == "lf-matrix":
            shapes[name] = tuple(int(s) for s in (g.get("data-shape") or "").split(","))
        elif g.get("class") == "lf-vector":
            shapes[name] = (sum(1 for _ in g.iter(f"{_NS}rect")),)
    return shapes


def read_masks(picture: Picture | str) -> dict[str, list[list[bool]]]:
    """Every mask drawn, by name: True where a cell is filled (the query may attend)."""
    return {g.get("data-name") or "": [[c == "1" for c in row]
                                       for row in (g.get("data-mask") or "").split(";")]
            for g in _root(picture).iter(f"{_NS}g") if g.get("class") == "lf-mask"}


def read_angles(picture: Picture | str) -> dict[str, float]:
    """Every clock hand drawn, by name: its angle in radians."""
    return {h.get("data-name") or "": float(h.get("data-angle") or "nan")
            for h in _root(picture).iter(f"{_NS}line") if h.get("class") == "lf-hand"}


def shape_text(shape: Sequence[int]) -> str:
    """A shape as the diagrams write it on arrows: ``(2, 4)``."""
    return "(" + ", ".join(str(int(s)) for s in shape) + ")"


def has_chinese(picture: Picture | str) -> bool:
    """Whether any text of the diagram is written in Chinese characters."""
    text = picture.svg if isinstance(picture, Picture) else picture
    return re.search(r"[\u4e00-\u9fff]", text) is not None


def vector_width(values: Sequence[float] | int, cell: float = 34, size: float = 13,
                 digits: int = 2) -> float:
    """Width in px of :meth:`Diagram.vector` for these values (to centre a row)."""
    if isinstance(values, int):
        return values * cell
    widest = max(text_width(f"{float(v):.{digits}f}", size) for v in values)
    return len(values) * cell * max(1.0, widest / cell + 0.25)
