"""The book's two editions from one set of notebooks: English, and Chinese from gettext catalogues.

    python book/_ext/editions.py config zh_CN   # _build/_config.zh_CN.yml: the Chinese edition
    python book/_ext/editions.py config gettext # _build/_config.gettext.yml: message extraction
    python book/_ext/editions.py config zh_CN-draft  # the Chinese edition, nothing executed

Both files are ``_config.yml`` with a few settings changed, so the editions cannot drift apart:
the Chinese one reads the catalogues in ``book/locales`` and shares the English build's
execution cache (jupyter-cache keys on code cells only, so no notebook runs twice); so does the
gettext one, since figure captions kept in code cells' metadata and glued figures only exist
once a notebook has run (after `make book` nothing runs again). The draft edition executes
nothing: a quick look at a translation, with empty glued numbers. Paths become absolute
because jupyter-book reads some of them relative to the configuration file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
LOCALE_DIR = ROOT / "book" / "locales"
#: One gettext catalogue per page, no source line numbers (they churn on every edit).
GETTEXT = {"gettext_compact": False, "gettext_location": False, "gettext_uuid": False}


def interface(language: str) -> dict[str, Any]:
    """A translated edition's words that its configuration holds, from
    LOCALE_DIR/LANGUAGE/interface.json ({} for an edition without one, which keeps the
    defaults): its "title" and "author" (the footer's author line; the word before it is the
    theme's), the table of contents' part "captions" (_toc.yml, which no catalogue holds), the
    "search_bar" text, and "sphinx_config": Sphinx settings that hold words the reader sees (the
    toggle hints; labformer_book.py translates hidden cells' prompts). Everything else on a
    translated edition's pages comes from the catalogues."""
    path = LOCALE_DIR / language / "interface.json"
    words: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return words


def edition_config(edition: str) -> dict[str, Any]:
    """_config.yml for one edition: "zh_CN" (the Chinese book) or "gettext" (extraction)."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    sphinx = config["sphinx"]
    sphinx["local_extensions"] = {
        name: str(ROOT / path) for name, path in sphinx["local_extensions"].items()}
    sphinx["config"]["html_static_path"] = [
        str(ROOT / path) for path in sphinx["config"]["html_static_path"]]
    config["bibtex_bibfiles"] = [str(ROOT / path) for path in config["bibtex_bibfiles"]]
    config["html"]["favicon"] = str(ROOT / config["html"]["favicon"])
    config["execute"]["cache"] = str(ROOT / config["execute"]["cache"])
    sphinx["config"].update(GETTEXT)
    language, _, draft = edition.partition("-")
    if draft == "draft":
        config["execute"]["execute_notebooks"] = "off"
    words = interface(language)
    if words and draft in {"", "draft"}:
        config["title"] = words["title"]
        config["author"] = words["author"]
        sphinx["config"]["language"] = language
        sphinx["config"]["locale_dirs"] = [str(LOCALE_DIR)]
        sphinx["config"].update(words["sphinx_config"])
        # sphinx.config replaces html_theme_options whole: start from what _config.yml's html
        # section makes of them, as jupyter-book converts it
        from jupyter_book.config import yaml_to_sphinx

        theme = json.loads(json.dumps(yaml_to_sphinx(config)[0].get("html_theme_options", {})))
        sphinx["config"]["html_theme_options"] = {**theme,
                                                  "search_bar_text": words["search_bar"]}
    elif edition != "gettext":
        raise SystemExit(f"unknown edition {edition!r}: choose zh_CN, zh_CN-draft or gettext")
    return config


def edition_toc(language: str) -> dict[str, Any]:
    """_toc.yml with the part captions in the edition's language (the pages are the same)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    words = interface(language).get("captions", {})
    for part in toc.get("parts", []):
        if part.get("caption") not in words:
            raise SystemExit(f"_toc.yml: no {language} caption for {part.get('caption')!r} "
                             f"in book/locales/{language}/interface.json's captions")
        part["caption"] = words[part["caption"]]
    return toc


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "config":
        print(__doc__, file=sys.stderr)
        return 2
    out = ROOT / "_build" / f"_config.{argv[1]}.yml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(edition_config(argv[1]), allow_unicode=True,
                                  sort_keys=False), encoding="utf-8")
    language = argv[1].partition("-")[0]
    if "captions" in interface(language):
        toc = ROOT / "_build" / f"_toc.{language}.yml"
        toc.write_text(yaml.safe_dump(edition_toc(language), allow_unicode=True,
                                      sort_keys=False), encoding="utf-8")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
