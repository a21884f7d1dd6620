"""Everything the book takes from myst-nb (and Sphinx) beyond their public interfaces, in one place.

The book reads glued values through its own ``{eval}`` role and ``figure`` directive
(``labformer_book.py``), which Sphinx's public API registers (``app.add_role``,
``app.add_directive``). What those two need from myst-nb, and how each part used to be done:

- ``renderer for translations``: a translated paragraph is parsed by Sphinx as a small document
  of its own (its source ends in ``<translated>``), which holds no notebook outputs. myst-nb
  keeps the notebook's renderer on the page's document while it parses the page
  (``document["nb_renderer"]``); the book's role records it then, and lends it to the
  translations of the same page. This used to wrap two private functions of myst-nb,
  ``myst_nb.sphinx_.load_renderer`` and ``myst_nb.sphinx_.Parser.parse``.
- ``edition keys``: a translation, and a figure in the Chinese edition, reads ``KEY_zh`` when
  the notebook glued one (``myst_nb.ext.glue.utils.retrieve_glue_data``). This used to replace
  ``retrieve_glue_data`` in ``myst_nb.ext.glue.roles`` and ``myst_nb.ext.glue.directives``;
  the book's role and directive now choose the key before they call myst-nb.
- ``glued text``: ``{eval}`` renders through myst-nb's ``PasteTextRole`` and
  ``PasteMarkdownRole`` (``myst_nb.ext.glue.roles``), as ``{glue:text}`` and ``{glue:md}`` do.
- ``glued figure``: a ``figure`` of a glued value is myst-nb's ``PasteFigureDirective``, given
  its alt text by the book's directive before it runs. This used to replace
  ``PasteFigureDirective.run``.

No function or class of myst-nb or Sphinx is replaced any more. What stays is the use of
myst-nb's undocumented glue module and of the ``nb_renderer`` attribute, each written against
the version in ``USES``: :func:`check_versions` (called by ``labformer_book.setup``) stops a
build with one line that names the part and both versions when another myst-nb is installed,
so that a release of myst-nb cannot silently change the Chinese edition. Read the part again
against the new release, then update its version here and in requirements.txt.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
from collections.abc import Iterator
from typing import Any, NamedTuple

from sphinx.errors import ExtensionError

#: The myst-nb that requirements.txt pins; every part below was written against it.
MYST_NB_VERSION = "1.4.0"
#: Sphinx, for the source name it gives a translated message (sphinx.transforms.i18n).
SPHINX_VERSION = "7.4.7"


class Use(NamedTuple):
    """One reliance on a package's internals: what it reads, and the version it was written for."""

    package: str
    version: str
    what: str


USES = {
    "renderer for translations": Use(
        "myst-nb", MYST_NB_VERSION,
        'document["nb_renderer"], set by myst_nb.sphinx_.Parser.parse while a page is parsed'),
    "translated source": Use(
        "sphinx", SPHINX_VERSION,
        "a translated message's source ends in <translated> (sphinx.transforms.i18n)"),
    "edition keys": Use(
        "myst-nb", MYST_NB_VERSION,
        "myst_nb.ext.glue.utils.retrieve_glue_data and RetrievalError"),
    "glued text": Use(
        "myst-nb", MYST_NB_VERSION, "myst_nb.ext.glue.roles.PasteTextRole, PasteMarkdownRole"),
    "glued figure": Use(
        "myst-nb", MYST_NB_VERSION, "myst_nb.ext.glue.directives.PasteFigureDirective"),
}


class VersionMismatch(ExtensionError):
    """A part of this module meets a version of myst-nb or Sphinx it was not written for
    (Sphinx prints it as "Extension error:" and the message, without a traceback)."""


def mismatches(installed: dict[str, str] | None = None) -> list[str]:
    """One line for each part whose package is installed at another version than it was
    written for (``installed``: package -> version, else what importlib.metadata finds)."""
    lines = []
    for name, use in USES.items():
        version = (installed or {}).get(use.package) or importlib.metadata.version(use.package)
        if version != use.version:
            lines.append(f"book/_ext/mystnb_patches.py: '{name}' was written for {use.package} "
                         f"{use.version}, but {use.package} {version} is installed; check "
                         f"{use.what}, then update its version")
    return lines


def check_versions(installed: dict[str, str] | None = None) -> None:
    """Raise :class:`VersionMismatch` (its first line names the first part that does not fit)."""
    lines = mismatches(installed)
    if lines:
        raise VersionMismatch("\n".join(lines))


#: The renderer of each page whose notebook was parsed in this process, by docname.
_RENDERERS: dict[str, Any] = {}


def is_translation(document: Any) -> bool:
    """Whether ``document`` is a translated message that Sphinx parses on its own."""
    return str(getattr(document, "current_source", "") or "").endswith("<translated>")


def edition(document: Any) -> str:
    """The build's language, as the suffix of an edition's keys: "en", "zh"."""
    env = getattr(document.settings, "env", None)
    return ((env.config.language if env else None) or "en").split("_")[0]


@contextlib.contextmanager
def glue_source(document: Any) -> Iterator[None]:
    """Within this block, myst-nb finds the page's glued values from ``document``.

    On the page's own document, the renderer myst-nb keeps there is recorded for the page's
    translations; on a translation, the page's renderer is lent for the block only (the
    document is pickled later, and a renderer must not travel with it)."""
    env = getattr(document.settings, "env", None)
    docname = env.docname if env is not None else ""
    if "nb_renderer" in document:
        if not is_translation(document):
            _RENDERERS[docname] = document["nb_renderer"]
        yield
        return
    renderer = _RENDERERS.get(docname) if is_translation(document) else None
    if renderer is None:
        yield
        return
    document["nb_renderer"] = renderer
    try:
        yield
    finally:
        del document["nb_renderer"]


def glued(document: Any, key: str) -> Any | None:
    """The value glued as ``key`` (myst-nb's VariableOutput: ``.data`` is its MIME bundle), or
    None. Inside :func:`glue_source`."""
    from myst_nb.ext.glue.utils import RetrievalError, retrieve_glue_data

    try:
        return retrieve_glue_data(document, key)
    except RetrievalError:
        return None


def edition_key(document: Any, key: str, *, translations_only: bool) -> str:
    """``KEY_zh`` in the Chinese edition when the notebook glued one, else ``key``; with
    ``translations_only``, only in a translated message (a generated sentence glued in each
    language). Inside :func:`glue_source`."""
    language = edition(document)
    if language == "en" or (translations_only and not is_translation(document)):
        return key
    twin = f"{key}_{language}"
    return twin if glued(document, twin) is not None else key


def paste_text(markdown: bool, name: str, rawtext: str, text: str, lineno: int, inliner: Any,
               options: dict[str, Any], content: Any) -> tuple[list[Any], list[Any]]:
    """myst-nb's ``{glue:text}`` (or ``{glue:md}``) role on ``text`` ("KEY" or "KEY:SPEC").
    Inside :func:`glue_source`."""
    from myst_nb.ext.glue.roles import PasteMarkdownRole, PasteTextRole

    role = PasteMarkdownRole() if markdown else PasteTextRole()
    return role(name, rawtext, text, lineno, inliner, options, content)


def paste_figure(directive: Any, key: str, options: dict[str, Any], content: Any,
                 offset: int) -> list[Any]:
    """myst-nb's ``{glue:figure}`` of ``key``, in place of ``directive`` (its state, its line),
    with ``options`` (alt, figclass, name, ...) and ``content`` (the caption).
    Inside :func:`glue_source`."""
    from myst_nb.ext.glue.directives import PasteFigureDirective

    paste = PasteFigureDirective(
        "glue:figure", [key], options, content, directive.lineno, offset,
        directive.block_text, directive.state, directive.state_machine)
    return list(paste.run())
