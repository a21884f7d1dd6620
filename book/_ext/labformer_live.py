"""Sphinx extension: the live translator's files, on the pages that hold it.

The translator chapter's last code cell exports the model it trained into ``_build/live/``
(``labformer.app.export.export_model``) and shows ``labformer.app.export.live_widget_html``: a
``<div class="lf-live" data-lf-model="FILE" data-lf-model-sha256="...">`` with precomputed
examples. Here:

* a page that holds such a container gets ``labformer-live.js`` and ``labformer-live.css``
  (deferred; no other page loads them);
* at the end of the build, each model file a page names is copied from ``_build/live/`` into
  the built site's ``_static/``, after checking its SHA-256 against the one the page recorded.
  A cached build (the notebook not executed again) still finds the file the last execution
  wrote; a file that is missing or belongs to another run stops the build with a message
  that says how to make it again, instead of a page whose button loads the wrong model.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

MARKER = 'class="lf-live"'
LIVE_JS = "labformer-live.js"
LIVE_CSS = "labformer-live.css"
#: The widget's text for readers without JavaScript, as labformer.app.export writes it; a
#: translated edition's is its interface catalogue's "live_fallback".
FALLBACK = '<p class="lf-live-fallback">{}</p>'
FALLBACK_EN = "The live translator needs JavaScript."
LOCALES = Path(__file__).resolve().parents[1] / "locales"


def fallback(language: str | None) -> str:
    """The text for readers without JavaScript in the edition's language."""
    path = LOCALES / (language or "en") / "interface.json"
    words = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return FALLBACK.format(words.get("live_fallback", FALLBACK_EN))
MODEL = re.compile(r'data-lf-model="([^"/\\]+\.js)" data-lf-model-sha256="([0-9a-f]{64})"')


def live_dir(app: Sphinx) -> Path:
    """Where the chapter writes the model file: _build/live under the book's root."""
    return Path(app.srcdir) / "_build" / "live"


def add_live_files(app: Sphinx, pagename: str, templatename: str,
                   context: dict[str, Any], doctree: Any) -> None:
    """On pages that hold the live translator: its script, its words in the edition's language
    (labformer_book.add_script_words) and style sheet, and the text for readers without
    JavaScript in the edition's language."""
    if MARKER in context.get("body", ""):
        import labformer_book

        context["body"] = context["body"].replace(FALLBACK.format(FALLBACK_EN),
                                                  fallback(app.config.language))
        labformer_book.add_script_words(app, LIVE_JS, priority=610)
        app.add_js_file(LIVE_JS, priority=610, defer="defer")
        app.add_css_file(LIVE_CSS, priority=610)


def copy_models(app: Sphinx, exception: Exception | None) -> None:
    """Copy every model file a built page names into _static, checked by its SHA-256."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    wanted: dict[str, tuple[str, str]] = {}  # file -> (sha256, first page naming it)
    for page in sorted(out.rglob("*.html")):
        if "/_static/" in page.as_posix():
            continue
        for name, sha in MODEL.findall(page.read_text(encoding="utf-8", errors="replace")):
            wanted.setdefault(name, (sha, str(page.relative_to(out))))
    for name, (sha, page) in wanted.items():
        source = live_dir(app) / name
        if not source.is_file():
            raise ExtensionError(f"{page} loads {name}, but {source} is missing: execute the "
                                 "translator chapter again (remove _build/.jupyter_cache)")
        found = hashlib.sha256(source.read_bytes()).hexdigest()
        if found != sha:
            raise ExtensionError(f"{source} is not the model {page} was built with (SHA-256 "
                                 f"{found[:12]}, the page expects {sha[:12]}): execute the "
                                 "translator chapter again (remove _build/.jupyter_cache)")
        (out / "_static").mkdir(exist_ok=True)
        shutil.copyfile(source, out / "_static" / name)


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("html-page-context", add_live_files)
    app.connect("build-finished", copy_models)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
