"""The release on every page: the version and the licences in the footer of both editions.

The version has one source, ``labformer.__version__`` (labformer/__init__.py): pyproject.toml
reads it for the package, ``labformer --version`` prints it, CITATION.cff states it (a test
checks they agree), and this extension puts it in the book's footer.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.config import Config

ROOT = Path(__file__).resolve().parents[2]

#: The footer in English; a translated edition's is its interface catalogue's "footer"
#: (book/locales/LANGUAGE/interface.json), with the same fields.
FOOTER = ('labformer {version} · code: <a href="{licence}">MIT</a> · text and figures: '
          '<a href="{content}">CC BY 4.0</a> · <a href="{citation}">cite this book</a>')
LOCALES = ROOT / "book" / "locales"


def version() -> str:
    """``__version__`` as written in labformer/__init__.py, read without importing torch."""
    tree = ast.parse((ROOT / "labformer" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets):
            value = ast.literal_eval(node.value)
            if isinstance(value, str):
                return value
    raise RuntimeError("labformer/__init__.py has no __version__ = '...' line")


def footer(language: str | None, static: str = "_static/") -> str:
    """The footer's HTML in the edition's language (English unless the edition is Chinese);
    ``static`` is the page's relative path to the site's _static folder."""
    path = LOCALES / (language or "en") / "interface.json"
    words = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    template = words.get("footer", FOOTER)
    return template.format(version=version(), licence=f"{static}LICENSE.txt",
                           content=f"{static}LICENSE-CONTENT.txt",
                           citation=f"{static}CITATION.cff.txt")


def _config_inited(app: Sphinx, config: Config) -> None:
    options = dict(config.html_theme_options or {})
    options["extra_footer"] = footer(config.language)
    config.html_theme_options = options


def _page_context(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any],
                  doctree: Any) -> None:
    """Each page's footer links with the page's own relative path (book/ pages sit deeper)."""
    static = context["pathto"]("_static/", 1)
    context["theme_extra_footer"] = footer(app.config.language, static)


def _copy_release_files(app: Sphinx, exception: Exception | None) -> None:
    """The licences and the citation beside the pages, so the footer's links work offline."""
    if exception is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    static.mkdir(parents=True, exist_ok=True)
    for name, target in [("LICENSE", "LICENSE.txt"), ("LICENSE-CONTENT", "LICENSE-CONTENT.txt"),
                         ("CITATION.cff", "CITATION.cff.txt")]:
        (static / target).write_bytes((ROOT / name).read_bytes())


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("config-inited", _config_inited)
    app.connect("html-page-context", _page_context)
    app.connect("build-finished", _copy_release_files)
    return {"version": version(), "parallel_read_safe": True, "parallel_write_safe": True}
