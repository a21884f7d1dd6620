"""Sphinx extension of the labformer book: offline attention explorers, bibliography labels.

Pages whose HTML holds an attention explorer (``labformer.plot.attention_explorer``) get two
deferred scripts, ``_static/plotly.min.js`` then ``_static/labformer-explorer.js``. The first is
the copy of plotly.js that the plotly Python package ships; it is copied into the built book's
``_static`` once per build, so no page loads it from a CDN and no output inlines it.

The bibliography's labels read as the text cites: "[Cho et al., 2014]", not "[CvMerrienboerG+14]"
(``bibtex_default_style: labformer``, a pybtex style registered here). Search ranks a
glossary entry below the chapters that use the term (search_scorer.js).
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import Any

from pybtex.plugin import register_plugin
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle
from sphinx.application import Sphinx

#: The class that labformer.plot.EXPLORER_CLASS writes (not imported: that would load torch).
EXPLORER_MARKER = 'class="lf-explorer"'
PLOTLY_JS = "plotly.min.js"
EXPLORER_JS = "labformer-explorer.js"


def plotly_js_path() -> Path:
    """plotly.min.js inside the installed plotly package (found without importing plotly)."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the plotly package is not installed: pip install -r requirements.txt")
    path = Path(next(iter(spec.submodule_search_locations))) / "package_data" / PLOTLY_JS
    if not path.is_file():
        raise RuntimeError(f"{path} is missing from the plotly package")
    return path


def add_explorer_scripts(app: Sphinx, pagename: str, templatename: str,
                         context: dict[str, Any], doctree: Any) -> None:
    """On pages that hold an explorer: plotly.js, then the explorer script (both deferred)."""
    if EXPLORER_MARKER in context.get("body", ""):
        app.add_js_file(PLOTLY_JS, priority=600, defer="defer")
        app.add_js_file(EXPLORER_JS, priority=601, defer="defer")


def copy_plotly_js(app: Sphinx, exception: Exception | None) -> None:
    """Copies plotly.min.js into the HTML output's _static, when it is missing or outdated."""
    if exception is not None or app.builder.format != "html":
        return
    source = plotly_js_path()
    target = Path(app.outdir) / "_static" / PLOTLY_JS
    if not target.is_file() or target.stat().st_size != source.stat().st_size:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def _last_name(person: Any) -> str:
    """A person's last name as printed, braces of BibTeX's {Source 000} removed."""
    name = " ".join(person.prelast_names + person.last_names) or " ".join(person.first_names)
    return name.replace("{", "").replace("}", "")


class AuthorYearLabels(BaseLabelStyle):
    """Labels as the author-year citations in the text: "Cho et al., 2014", "Ba et al., 2016"."""

    def format_labels(self, sorted_entries: Any) -> Any:
        for entry in sorted_entries:
            people = entry.persons.get("author") or entry.persons.get("editor") or []
            names = [_last_name(p) for p in people]
            if not names:
                who = entry.fields.get("title", entry.key)[:24]
            elif len(names) == 1:
                who = names[0]
            elif len(names) == 2:
                who = f"{names[0]} and {names[1]}"
            else:
                who = f"{names[0]} et al."
            yield f"{who}, {entry.fields.get('year', 'n.d.')}"


class LabformerStyle(PlainStyle):
    """pybtex's plain style (sorted by author, year, title) with author-year labels."""

    default_label_style = "labformer-author-year"


register_plugin("pybtex.style.labels", "labformer-author-year", AuthorYearLabels)
register_plugin("pybtex.style.formatting", "labformer", LabformerStyle)


def use_search_scorer(app: Sphinx, config: Any) -> None:
    """Search ranks glossary entries below chapters (search_scorer.js, by absolute path)."""
    config.html_search_scorer = str(Path(__file__).with_name("search_scorer.js"))


def setup(app: Sphinx) -> dict[str, Any]:
    plotly_js_path()  # fail at the start of a build, not at its end
    app.connect("config-inited", use_search_scorer)
    app.connect("html-page-context", add_explorer_scripts)
    app.connect("build-finished", copy_plotly_js)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
