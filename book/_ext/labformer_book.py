"""Sphinx extension of the labformer book: offline attention explorers.

Pages whose HTML holds an attention explorer (``labformer.plot.attention_explorer``) get two
deferred scripts, ``_static/plotly.min.js`` then ``_static/labformer-explorer.js``. The first is
the copy of plotly.js that the plotly Python package ships; it is copied into the built book's
``_static`` once per build, so no page loads it from a CDN and no output inlines it.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import Any

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


def setup(app: Sphinx) -> dict[str, Any]:
    plotly_js_path()  # fail at the start of a build, not at its end
    app.connect("html-page-context", add_explorer_scripts)
    app.connect("build-finished", copy_plotly_js)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
