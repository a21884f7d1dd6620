"""One call at the top of every chapter (the run's seed, compact printing, one plot style), and
the way a chapter shows what it checked: :func:`evidence`, a list of claims with their measured
values that fails the build when a claim does not hold."""

from __future__ import annotations

import html
import json
import math
import os
import random
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["SEED_ENV", "ClaimFailed", "Evidence", "Sweep", "book_file", "decide", "evidence",
           "glue", "human_number", "measured_text", "predictive_interval", "registration",
           "repo_root", "resolve_seed", "setup_notebook", "shape_text", "t_quantile",
           "t_two_sided_p", "table"]

#: Environment variable that overrides the seed a chapter asks for, so that the whole book can
#: be re-run with another seed without editing a notebook: ``LABFORMER_SEED=3 make test``.
SEED_ENV = "LABFORMER_SEED"

#: The smallest text a figure may show, in CSS px on a 1x screen (at 96 px per inch a point is
#: 4/3 px, so 11 px is 8.25 pt): a chapter whose figure holds smaller text fails to build.
MIN_TEXT_PX = 11.0
#: Width of the book's content column in CSS px at a 1280 px window (the narrow end of its
#: 720-896 px): a figure whose saved width is wider is shrunk by COLUMN_PX / width, its text
#: with it.
COLUMN_PX = 720.0
#: CSS px per inch and per point: a figure shows at its size in inches.
_PX_PER_INCH = 96.0


def resolve_seed(seed: int = 0) -> int:
    """``seed``, or the integer in ``$LABFORMER_SEED`` when that variable is set and not empty."""
    text = os.environ.get(SEED_ENV, "").strip()
    if not text:
        return seed
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{SEED_ENV} must be a non-negative integer, got {text!r}") from None
    if value < 0:
        raise ValueError(f"{SEED_ENV} must be a non-negative integer, got {value}")
    return value


def repo_root() -> Path:
    """The book's repository: the first folder holding ``_config.yml`` and ``book/``, looked for
    from the working directory up, then from the installed package's own folder up (an editable
    install from the repository), so a chapter runs from ``book/``, the repository root,
    VS Code or ``jupyter execute`` started anywhere. Raises FileNotFoundError in one sentence
    when neither place is inside the repository."""
    here = Path(__file__).resolve().parent
    for start in (Path.cwd().resolve(), here):
        for folder in (start, *start.parents):
            if (folder / "_config.yml").is_file() and (folder / "book").is_dir():
                return folder
    raise FileNotFoundError(
        "this chapter needs the labformer book's repository (its _config.yml and book/ folder), "
        "but neither the working directory nor the installed labformer package lies inside it: "
        "open the chapter from the repository's book/ folder, or install labformer from the "
        "repository with `pip install -e .`")


def book_file(relative: str | os.PathLike[str]) -> Path:
    """A file the chapters read, such as ``data/03_scaling.json``: relative to the working
    directory when it exists there (a chapter run from ``book/``), else relative to the
    repository's ``book/`` folder (:func:`repo_root`). An absolute path is kept as it is.

    Raises FileNotFoundError in one sentence naming the file and where it was looked for."""
    path = Path(relative)
    if path.exists():
        return path
    if path.is_absolute():
        raise FileNotFoundError(f"this chapter needs {path}, but it does not exist")
    try:
        candidate = repo_root() / "book" / path
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"this chapter needs {path.as_posix()}, which ships in the book's "
                                f"repository under book/; {exc}") from None
    if not candidate.exists():
        raise FileNotFoundError(f"this chapter needs {path.as_posix()}, but it is neither in the "
                                f"working directory nor at {candidate}")
    return candidate


def registration(sweep: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A registered sweep's plan and data: ``data/plans/SWEEP.json``, fixed before its runs
    (seeds, margin, family, analysis), and the data file it names. Raises ValueError in one
    sentence when the plan was not registered before the runs or the data are not its sweep
    (another command); tests/notebooks/test_registrations.py checks the rest."""
    plan = json.loads(book_file(f"data/plans/{sweep}.json").read_text(encoding="utf-8"))
    if plan.get("registered") != "before the runs":
        raise ValueError(f"data/plans/{sweep}.json was registered {plan.get('registered')!r}, "
                         f"not before the runs")
    relative = Path(plan["data"]).relative_to("book")
    data = json.loads(book_file(relative).read_text(encoding="utf-8"))
    if data.get("command") != plan["command"]:
        raise ValueError(f"{relative.as_posix()} was made by {data.get('command')!r}, not by "
                         f"the registered {plan['command']!r}")
    return plan, data


def glue(name: str, value: Any, display: bool = False, *, twin: bool = True) -> None:
    """Makes ``value`` available to the chapter's prose under ``name``, in both places a chapter
    is read.

    The page: myst-nb's glue, which the book's ``{eval}`` roles and value figures read from the
    executed notebook. JupyterLab: ``name`` becomes a variable of the kernel, which
    jupyterlab-myst's ``{eval}`` roles show in the rendered text (``{eval}`ch3_z``` or, with a
    format, ``{eval}`f'{ch3_z:.1f}'```). Outside IPython (the sweeps run cells as plain Python)
    it does nothing. ``name`` must be a Python identifier: a name the prose can evaluate.

    A matplotlib figure also gets its Chinese twin, glued as ``NAME_zh``
    (:func:`labformer.book.plot.chinese_twin`), which the Chinese edition shows; ``twin=False``
    when the chapter glues its own. Texts the plot table cannot translate stay English in the
    twin, and are listed in the file ``$LABFORMER_PLOT_MISSING`` names, when set (the book's
    build sets it, and a test fails on any).
    """
    if not name.isidentifier():
        raise ValueError(f"a glued name must be a Python identifier, got {name!r}")
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover (IPython comes with ipykernel)
        return
    shell = get_ipython()
    if shell is None:
        return
    import myst_nb  # looked up at each call: the sweep scripts replace myst_nb.glue

    shell.user_ns[name] = value
    myst_nb.glue(name, value, display=display)
    from matplotlib.figure import Figure

    if twin and isinstance(value, Figure) and not name.endswith("_zh"):
        from labformer.book.plot import chinese_twin

        chinese, missing = chinese_twin(value)
        if chinese is not None:
            myst_nb.glue(f"{name}_zh", chinese, display=False)
            import matplotlib.pyplot as plt

            plt.close(chinese)
        report = os.environ.get("LABFORMER_PLOT_MISSING")
        if report and missing:
            with open(report, "a", encoding="utf-8") as f:
                for text in missing:
                    f.write(json.dumps({"figure": name, "text": text},
                                       ensure_ascii=False) + "\n")


def setup_notebook(seed: int = 0, precision: int = 4, threads: int | None = 1) -> int:
    """Seed Python, NumPy and torch; set print precision, torch's threads and the plot style.

    Returns the seed in use: ``seed``, unless ``$LABFORMER_SEED`` overrides it. A chapter
    derives every other seed it needs from the returned value (``SEED + 1``, ...), so that one
    variable changes every random draw of the chapter. The claims a chapter asserts must hold
    for any seed; the book is tested with several.

    The book's models are small: on them a second thread costs more in start-up and waiting
    than it saves. ``threads=None`` keeps torch's default. One thread does not make results
    identical across machines: CPUs with different vector units (AVX2, AVX-512, ARM) run
    different float kernels.
    """
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be a positive int or None, got {threads}")
        torch.set_num_threads(threads)
    seed = resolve_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_printoptions(precision=precision, sci_mode=False)  # type: ignore[no-untyped-call]
    # legacy="1.25": NumPy scalars print as 0.5, not np.float64(0.5), in outputs and in the
    # numbers a chapter glues into its prose (myst-nb parses the printed value).
    np.set_printoptions(precision=precision, suppress=True, legacy="1.25")
    # Imported here so that models never depend on a plotting library.
    from labformer.book.plot import apply_style

    apply_style()
    _inline_figures()
    return seed


def _inline_figures() -> None:
    """In IPython: figures as 2x PNGs shown at their size in inches, each exactly once, and
    none with text smaller than :data:`MIN_TEXT_PX` as shown in the column.

    "retina" PNGs carry their display size, so they are sharp on high-DPI screens and are
    not shrunk in the book's column. A Figure returned as a cell's last value is closed once
    drawn, so the inline backend does not draw it a second time at the end of the cell. A
    figure with too small a text raises ValueError (:func:`_check_text_sizes`) and fails its
    cell. Outside IPython (scripts, tests) nothing changes.
    """
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover (IPython comes with ipykernel)
        return
    shell = get_ipython()
    if shell is None:
        return
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
    from matplotlib_inline.backend_inline import set_matplotlib_formats

    set_matplotlib_formats("retina")  # type: ignore[no-untyped-call]
    png = shell.display_formatter.formatters["image/png"]
    draw = png.lookup_by_type(Figure)
    if getattr(draw, "_labformer_closes", False):
        return

    # A formatter's error is only printed (the cell still succeeds), so the first error of a
    # cell is also made the cell's own: after the cell, the kernel reports it as failed.
    errors: list[BaseException] = []

    def draw_once(fig: Figure) -> object:
        try:
            _check_text_sizes(fig)
            return draw(fig)
        except Exception as exc:
            errors.append(exc)
            raise
        finally:
            plt.close(fig)

    def fail_cell(result: Any) -> None:
        if errors and result.error_in_exec is None and result.error_before_exec is None:
            result.error_in_exec = errors[0]
        errors.clear()

    draw_once._labformer_closes = True  # type: ignore[attr-defined]
    png.for_type(Figure, draw_once)
    shell.events.register("pre_run_cell", lambda info: errors.clear())
    shell.events.register("post_run_cell", fail_cell)
    # The plain-text "<Figure size 672x403 with 1 Axes>" that sits beside the image.
    shell.display_formatter.formatters["text/plain"].for_type(Figure, lambda fig, p, cycle: None)


def _shown_width_px(fig: Any) -> float:
    """The width a figure shows at in CSS px, before the column shrinks it: its tight bounding
    box (as the inline backend saves it, with 0.1 in of padding), or its own width."""
    width = float(fig.get_figwidth())
    get_renderer = getattr(fig.canvas, "get_renderer", None)
    if get_renderer is not None:
        try:
            bbox = fig.get_tightbbox(get_renderer())
            width = float(bbox.width) + 2 * 0.1
        except Exception:  # pragma: no cover (a canvas without a usable renderer)
            pass
    return width * _PX_PER_INCH


def _shown_texts(artist: Any) -> Iterator[Any]:
    """Every Text artist under ``artist`` that is drawn: visible, with visible parents, not
    empty, and not an axis of axes whose axis lines and labels are switched off."""
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.text import Text

    for child in artist.get_children():
        if not child.get_visible():
            continue
        if isinstance(child, Axis) and not getattr(child.axes, "axison", True):
            continue
        if isinstance(child, Text) and child.get_text().strip():
            yield child
        if isinstance(child, Axes) or child.get_children():
            yield from _shown_texts(child)


def _figure_name(fig: Any) -> str:
    suptitle = getattr(fig, "_suptitle", None)
    if suptitle is not None and suptitle.get_text().strip():
        return repr(suptitle.get_text())
    for ax in fig.axes:
        for loc in ("center", "left", "right"):
            if ax.get_title(loc).strip():
                return repr(ax.get_title(loc))
    return f"an untitled figure with {len(fig.axes)} axes"


def _check_text_sizes(fig: Any, min_px: float = MIN_TEXT_PX, column_px: float = COLUMN_PX) -> None:
    """Raises ValueError naming ``fig`` and its texts that show smaller than ``min_px`` CSS px.

    A text of ``s`` points shows at ``s * 96 / 72`` px, times ``column_px / width`` when the
    figure's saved width (in CSS px) is wider than the column and is shrunk to fit it."""
    width = _shown_width_px(fig)
    scale = min(1.0, column_px / width) if width > 0 else 1.0
    small: list[tuple[str, float, float]] = []
    seen: set[int] = set()
    for text in _shown_texts(fig):
        if id(text) in seen:
            continue
        seen.add(id(text))
        points = float(text.get_fontsize())
        px = points * _PX_PER_INCH / 72 * scale
        if px < min_px - 1e-9:
            small.append((text.get_text(), points, px))
    if not small:
        return
    shown = "; ".join(f"{t!r} at {px:.1f} px ({pt:g} pt)" for t, pt, px in small[:5])
    more = f"; and {len(small) - 5} more" if len(small) > 5 else ""
    shrunk = (f" (the figure is {width:.0f} px wide, shrunk to the {column_px:.0f} px column)"
              if scale < 1 else "")
    raise ValueError(f"figure {_figure_name(fig)} has text smaller than the {min_px:g} px "
                     f"minimum{shrunk}: {shown}{more}")


def human_number(x: Any, digits: int = 3) -> str:
    """A number as a reader wants it: 142,606,336; 0.125; 3.2e-05; other values as str()."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer,
                                                              np.floating)):
        return str(x)
    if isinstance(x, (int, np.integer)):
        return f"{int(x):,}"
    x = float(x)
    if not math.isfinite(x) or x == 0:
        return f"{x:g}" if x != 0 else "0"
    if abs(x) >= 10 ** 6 or abs(x) < 10 ** -digits:
        if abs(x) >= 10 ** 6 and x.is_integer():
            return f"{x:,.0f}"
        return f"{x:.{digits}g}"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def table(data: Any, *, digits: int = 3, index: bool = False) -> Any:
    """A pandas table formatted for reading: thousands separators, ``digits`` decimals.

    ``data``: a DataFrame or anything ``pandas.DataFrame`` accepts (a dict of columns, a
    list of dicts). Returns a Styler, which a notebook shows as an HTML table with numbers
    right-aligned; the index is hidden unless ``index=True``.
    """
    import pandas as pd

    frame = data if isinstance(data, pd.DataFrame) else pd.DataFrame(data)
    styler = frame.style.format(lambda x: human_number(x, digits))
    styler = styler.set_table_attributes('class="dataframe lf-table"')
    return styler if index else styler.hide(axis="index")


def shape_text(shape: Any) -> str:
    """A shape as a reader writes it: ``(28000, 1000, 1000)`` -> "28000 × 1000 × 1000"; a
    tensor or array gives its own shape; a shape of no dimensions is "a scalar"."""
    dims = tuple(getattr(shape, "shape", shape))
    return " × ".join(str(int(d)) for d in dims) if dims else "a scalar"


#: Separators of a collection's items: the first that no item's own text holds, so that
#: [[1, 2], [3, 4]] reads "1, 2; 3, 4" and [1000, 2000] reads "1,000; 2,000".
_SEPARATORS = (", ", "; ", " | ")


def _joined(texts: list[str]) -> str:
    for sep in _SEPARATORS:
        if not any(sep.strip() in t for t in texts):
            return sep.join(texts)
    return _SEPARATORS[-1].join(texts)


def measured_text(value: Any, digits: int = 3) -> str:
    """A measured value as a reader expects it, never a Python repr.

    A string is kept as it is. Numbers go through :func:`human_number` (``digits``
    significant decimals); a bool reads "yes" or "no", None and an empty collection "none". A
    list, tuple or set shows its items joined by ", " (strings unquoted), a nested one its rows
    joined by "; " (as are numbers with a thousands separator); a dict shows "key: value"
    pairs; a NumPy array or a tensor shows its
    values the same way (one value alone as a number); a ``torch.Size`` shows as a shape,
    "2 × 4 × 5" (:func:`shape_text`; a plain tuple meant as a shape is better passed through
    it at the call site).
    """
    if isinstance(value, str):
        return value
    if value is None:
        return "none"
    if isinstance(value, torch.Size):
        return shape_text(value)
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        value = value.item() if value.ndim == 0 else value.tolist()
    elif isinstance(value, np.ndarray):
        value = value.item() if value.ndim == 0 else value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return human_number(value, digits)
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        if not value:
            return "none"
        if isinstance(value, dict):
            return _joined([f"{measured_text(k, digits)}: {measured_text(v, digits)}"
                            for k, v in value.items()])
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return _joined([measured_text(v, digits) for v in items])
    return str(value)


#: What a reader can try when a claim fails, shown under the failed claims.
WHAT_TO_TRY = ("What to try: if you changed a setting above, the claim may not hold at your "
               "setting (restore it to see the claim hold); else rerun the chapter with another "
               "seed (LABFORMER_SEED) to see whether this run was unusual.")


class ClaimFailed(AssertionError):
    """A claim a chapter makes did not hold on this run: the message names it and its values.

    In IPython the error shows as one block (the claims, their measured values and bounds, and
    what to try) instead of a traceback through the book's helpers."""

    def _render_traceback_(self) -> list[str]:
        return [f"ClaimFailed: {self}", "", WHAT_TO_TRY]


@dataclass
class Evidence:
    """Claims checked in one cell, each with what was measured; shown folded to one line.

    ``check`` records a claim; ``verify`` raises :class:`ClaimFailed` naming every claim that
    does not hold, so a notebook with a false claim fails to build. Use it through
    :func:`evidence`, in a cell whose code is collapsed: the reader sees the claims and the
    numbers, the code that computes them is one click away.
    """

    title: str = ""
    claims: list[tuple[str, bool, str]] = field(default_factory=list)
    #: shown opened rather than folded to one line (a headline claim the prose leans on)
    opened: bool = False
    #: claims left out on this run, each with the one line that says why (:meth:`note`)
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> bool:
        """Records a claim left out on this run and why, in one line (for example a claim held
        to a stored sweep made at another setting than the reader's). Returns True, so that
        ``assert ev.note(...)`` reads like a check; a note never fails the block."""
        if not text.strip():
            raise ValueError("a note needs its text")
        self.notes.append(text)
        return True

    def check(self, claim: str, holds: object, measured: object = "") -> bool:
        """Records ``claim`` with whether it ``holds`` and the ``measured`` values behind it.

        ``holds`` must be a truth value: a bool, a NumPy bool or a one-element tensor (a
        tensor of several elements raises, as it would in an ``assert``). ``measured`` is the
        text shown, or a value that :func:`measured_text` writes for a reader (a number, a
        list, an array, a tensor, a shape).
        """
        if not claim.strip():
            raise ValueError("a check needs the claim it tests, in words")
        ok = bool(holds)
        self.claims.append((claim, ok, measured_text(measured)))
        return ok

    def failure(self) -> ClaimFailed | None:
        """The error that names every claim recorded as not holding, or None if all hold."""
        failed = [(c, m) for c, ok, m in self.claims if not ok]
        if not failed:
            return None
        lines = [f"- {c}" + (f" (measured: {m})" if m else "") for c, m in failed]
        where = f" in {self.title!r}" if self.title else ""
        return ClaimFailed(f"{len(failed)} of {len(self.claims)} claims{where} do not hold "
                           "on this run:\n" + "\n".join(lines))

    def verify(self) -> Evidence:
        """Raises :class:`ClaimFailed` listing the claims that do not hold; else ``self``."""
        if not self.claims and not self.notes:
            raise ValueError("evidence with no claim: check at least one")
        error = self.failure()
        if error is not None:
            raise error
        return self

    def __str__(self) -> str:
        head = [self.title] if self.title else []
        return "\n".join(head + [f"{'✓' if ok else '✗'} {c}" + (f": {m}" if m else "")
                                  for c, ok, m in self.claims]
                          + [f"○ {n}" for n in self.notes])

    def tally(self) -> str:
        """The folded line's count: "7 checks hold", "1 check holds", "2 of 7 checks fail"."""
        n, failed = len(self.claims), sum(not ok for _, ok, _ in self.claims)
        left = (f", {len(self.notes)} left out" if self.notes else "")
        if failed:
            return f"{failed} of {n} checks fail{left}"
        return (f"{n} check holds" if n == 1 else f"{n} checks hold") + left

    def _repr_html_(self) -> str:
        """One line that says what was checked and how it came out; the claims one click away.

        The line is a ``<details>`` summary: the count, then the title or the first claim
        (cut to one line by the stylesheet). A block with a failed claim, or one made with
        ``evidence(..., open=True)`` (a headline claim the prose leans on), shows opened.
        """
        items = "".join(
            f'<li class="{"lf-holds" if ok else "lf-fails"}"><span class="lf-claim">'
            f"{html.escape(c)}</span>"
            + (f'<span class="lf-measured">{html.escape(m)}</span>' if m else "") + "</li>"
            for c, ok, m in self.claims) + "".join(
            f'<li class="lf-notice"><span class="lf-claim">{html.escape(n)}</span></li>'
            for n in self.notes)
        ok = all(holds for _, holds, _ in self.claims)
        lead = (f'<span class="lf-evidence-title">{html.escape(self.title)}</span>' if self.title
                else f'<span class="lf-claim">{html.escape(self.claims[0][0])}</span>'
                if self.claims else "")
        summary = (f'<summary class="{"lf-holds" if ok else "lf-fails"}">'
                   f'<span class="lf-tally">{self.tally()}</span>'
                   f'<span class="lf-lead">{lead}</span></summary>')
        opened = " open" if self.opened or not ok or self.notes else ""
        return f'<details class="lf-evidence"{opened}>{summary}<ul>{items}</ul></details>'

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


@contextmanager
def evidence(title: str = "", *, open: bool = False) -> Iterator[Evidence]:
    """Checks claims and shows them: ``with evidence() as ev: assert ev.check(claim, holds,
    measured)``.

    ``check`` returns whether the claim holds, so each claim is an ``assert`` of its own; a
    failed one ends the block with :class:`ClaimFailed`, the claim and its values in the
    message (so does any claim recorded false without an assert). Otherwise the list is shown:
    in a notebook as one line ("✓ 7 checks hold: the first claim …") that opens to the ✓ lines,
    each followed by its measured values (``open=True``: shown opened); elsewhere printed.
    """
    ev = Evidence(title, opened=open)
    try:
        yield ev
    except AssertionError as exc:
        # ``assert ev.check(...)`` stops at the first false claim: name it, not a bare assert.
        error = ev.failure()
        if error is None or isinstance(exc, ClaimFailed):
            raise
        raise error from exc
    ev.verify()
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover (IPython comes with ipykernel)
        print(ev)
        return
    if get_ipython() is None:
        print(ev)
    else:
        display(ev)  # type: ignore[no-untyped-call]


def _same_setting(a: Any, b: Any) -> bool:
    """Whether a chapter's setting equals the one stored in a sweep's JSON (tuples are lists
    there, and numbers may have become floats)."""
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same_setting(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float, np.number)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0.0)
    return bool(a == b)


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h


def _beta_inc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b), 0 <= x <= 1."""
    if x <= 0 or x >= 1:
        return float(x >= 1)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1 - front * _beta_fraction(b, a, 1 - x) / b


def t_quantile(p: float, df: float) -> float:
    """The quantile of Student's t with ``df`` degrees of freedom: the t below which a share
    ``p`` of the distribution lies (0 < p < 1). Exact to about 1e-10, by bisection on the
    distribution function, which is an incomplete beta function."""
    if not 0 < p < 1 or not df > 0:
        raise ValueError(f"t_quantile needs 0 < p < 1 and df > 0, got p={p}, df={df}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    tail = 1 - p  # wanted: P(T > t)

    def upper(t: float) -> float:
        return 0.5 * _beta_inc(df / 2, 0.5, df / (df + t * t))

    lo, hi = 0.0, 1.0
    while upper(hi) > tail:
        lo, hi = hi, 2 * hi
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if upper(mid) > tail else (lo, mid)
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2


def t_two_sided_p(t: float, df: float) -> float:
    """The two-sided p-value of Student's t statistic ``t`` with ``df`` degrees of freedom:
    the chance that ``|T| >= |t|`` (an incomplete beta function, exact to about 1e-12)."""
    if not df > 0 or not math.isfinite(t):
        raise ValueError(f"t_two_sided_p needs a finite t and df > 0, got t={t}, df={df}")
    return _beta_inc(df / 2, 0.5, df / (df + t * t))


def predictive_interval(values: Any, alpha: float = 1e-5) -> tuple[float, float]:
    """Where one more run of the process that gave ``values`` (a sweep, at least 3 runs) falls
    with probability ``1 - alpha``: the t-predictive interval ``m +- t s sqrt(1 + 1/n)``
    (exact for normal noise; the book's rule for a run against its stored sweep)."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or len(v) < 3 or not np.isfinite(v).all():
        raise ValueError(f"a predictive interval needs at least 3 finite values, got {v!r}")
    half = t_quantile(1 - alpha / 2, len(v) - 1) * v.std(ddof=1) * math.sqrt(1 + 1 / len(v))
    return float(v.mean() - half), float(v.mean() + half)


def decide(diffs: Any, delta: float, k: int = 1, family: float = 0.05) -> tuple[str, float, float]:
    """The book's rule for an effect (checking.md), read from a sweep's paired differences.

    Returns ``(verdict, mean, se)``, the verdict being ``"higher"`` or ``"lower"`` when the mean
    differs from zero by Student's t (two-sided, at ``family / k``: one of ``k`` verdicts),
    ``"within"`` when the two one-sided tests put it inside ``+-delta`` at ``family / k``
    (equivalence: ``|mean| + t SE < delta``), and ``"open"`` when neither test decides."""
    d = np.asarray(diffs, dtype=float)
    if d.ndim != 1 or len(d) < 3 or not np.isfinite(d).all():
        raise ValueError(f"a verdict needs at least 3 finite differences, got {d!r}")
    if not delta > 0 or k < 1 or not 0 < family < 1:
        raise ValueError(f"decide needs delta > 0, k >= 1, 0 < family < 1; got {delta}, {k}, "
                         f"{family}")
    mean, se = float(d.mean()), float(d.std(ddof=1) / math.sqrt(len(d)))
    level = family / k
    if abs(mean) > t_quantile(1 - level / 2, len(d) - 1) * se:
        return ("higher" if mean > 0 else "lower"), mean, se
    if abs(mean) + t_quantile(1 - level, len(d) - 1) * se < delta:
        return "within", mean, se
    return "open", mean, se


class Sweep:
    """A chapter's stored seed sweep: ``book/data/NN_name.json``, written by
    ``book/sweeps/claim_sweep.py --write`` (the command, the code version, and for every run its
    seed, CPU kernels and the chapter's quantities).

    A claim about a trained model is a claim about the process, so the sweep decides it and
    this run is held to the sweep: ``Sweep(path, verdicts=k).check(ev, claim, name, value,
    above=0)`` holds when the sweep's mean of quantity ``name`` lies above 0 by Student's t
    (one-sided, at the book's family-wise 5 % shared by the chapter's ``k`` verdicts) and this
    run's ``value`` lies in the sweep's t-predictive interval (:func:`predictive_interval`,
    alpha 5e-6: about a hundred such checks share the book's false-alarm budget of 1e-3 with
    chapters 11-13's), so a run unlike the ones the sweep saw fails the build
    (book/checking.md).
    """

    def __init__(self, path: str | os.PathLike[str], verdicts: int = 1, alpha: float = 5e-6,
                 family: float = 0.05) -> None:
        self.path = book_file(path)
        data = json.loads(self.path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
            raise ValueError(f"{self.path} is not a sweep: it needs a list of runs")
        if verdicts < 1 or not 0 < family < 1:
            raise ValueError(f"a sweep needs verdicts >= 1 and 0 < family < 1, got {verdicts}, "
                             f"{family}")
        self.data, self.runs, self.alpha = data, data["runs"], alpha
        self.verdicts, self.family = verdicts, family
        self.n = len(self.runs)
        #: the settings the sweep was made at (the data file's ``settings``): a run at other
        #: settings is not held to it (:meth:`differs`)
        self.settings: dict[str, Any] = dict(data.get("settings", {}))

    def differs(self, settings: dict[str, Any] | None) -> str | None:
        """None when this run's ``settings`` (name -> value, as the chapter's code has them)
        are the sweep's; else the one line that says which differ, that the claim is not held
        to the sweep, and how to restore it or make a sweep at the new setting. A setting the
        data file does not record raises KeyError (the chapter and its sweep disagree)."""
        if not settings:
            return None
        unknown = [k for k in settings if k not in self.settings]
        if unknown:
            raise KeyError(f"{self.path.name} does not record the settings {unknown} "
                           f"(it records {sorted(self.settings)})")
        changed = {k: v for k, v in settings.items() if not _same_setting(v, self.settings[k])}
        if not changed:
            return None
        run = ", ".join(f"{k} = {measured_text(v)}" for k, v in changed.items())
        made = ", ".join(measured_text(self.settings[k]) for k in changed)
        back = ", ".join(f"{k} = {measured_text(self.settings[k])}" for k in changed)
        # sweeps stored before the scripts left tests/ record the old path
        command = re.sub(r"\btests/(\w+\.py)", r"book/sweeps/\1",
                         self.data.get("command", "book/sweeps/claim_sweep.py"))
        return (f"this run uses {run}; the stored sweep was made at {made}, so this claim is "
                f"not held to it: restore {back}, or make a sweep at your setting with "
                f"`{command}`")

    def values(self, name: str) -> np.ndarray:
        """Every run's value of quantity ``name``."""
        missing = [r.get("seed") for r in self.runs if name not in r]
        if missing:
            raise KeyError(f"{self.path.name}: runs {missing} have no quantity {name!r}; "
                           f"it has {sorted(self.data.get('quantities', {}))}")
        return np.array([r[name] for r in self.runs], dtype=float)

    def interval(self, name: str) -> tuple[float, float]:
        """Where one more run's value of ``name`` falls with probability ``1 - alpha``."""
        return predictive_interval(self.values(name), self.alpha)

    def mean_beyond(self, name: str, above: float | None = None,
                    below: float | None = None) -> bool:
        """Whether the sweep's mean of ``name`` lies above ``above`` (and below ``below``) by a
        one-sided t-test at ``family / verdicts``."""
        v = self.values(name)
        if len(v) < 3:
            raise ValueError(f"{self.path.name}: a verdict needs at least 3 runs, got {len(v)}")
        margin = (t_quantile(1 - self.family / self.verdicts, len(v) - 1)
                  * v.std(ddof=1) / math.sqrt(len(v)))
        return ((above is None or v.mean() - margin > above)
                and (below is None or v.mean() + margin < below))

    def check(self, ev: Evidence, claim: str, name: str, value: float, fmt: str = "{:.2f}", *,
              above: float | None = None, below: float | None = None,
              holds: object = True, settings: dict[str, Any] | None = None) -> bool:
        """``ev.check`` of ``claim``: it holds when the sweep's mean lies beyond ``above`` /
        ``below`` (:meth:`mean_beyond`), this run's ``value`` lies in the sweep's interval, and
        ``holds`` (a condition on this run alone, if the claim has one) is true.

        ``settings``: the values this run used for what the sweep fixed (``{"d_model": 128}``).
        When they differ from the sweep's (:meth:`differs`), only ``holds`` is checked, and the
        comparison with the sweep is left out with a one-line note saying why.

        ``fmt`` formats the numbers shown; ``fmt="10^"`` (or any format that starts so) marks
        a quantity held on a log10 scale: the reader sees ``10 ** x`` to three significant
        digits, and the sweep's mean as a geometric mean."""
        other = self.differs(settings)
        if other is not None:
            ok = ev.check(claim + " (on this run alone)", holds, "") if holds is not True else True
            ev.note(f"{claim}: {other}")
            return ok
        lo, hi = self.interval(name)
        ok = bool(holds) and self.mean_beyond(name, above, below) and lo <= value <= hi
        mean = float(self.values(name).mean())
        if fmt.startswith("10^"):
            def show(x: float) -> str:
                return f"{10 ** x:.3g}" if abs(x) < 300 else f"10^{x:.0f}"
            average = "geometric mean"
        else:
            show, average = fmt.format, "mean"
        # The sweep decides the claim; this run's range is a sanity check, shown as such (it
        # is wide at alpha 5e-6 and may span the claim's opposite: it supports nothing).
        return ev.check(claim, ok, f"decided by {self.n} runs: {average} {show(mean)}; this run "
                                   f"{show(value)} (sanity range for one run: {show(lo)} to "
                                   f"{show(hi)})")
