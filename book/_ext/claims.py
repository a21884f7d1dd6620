"""The claims' catalogue: each chapter's checked claims and measured values, in Chinese.

    python book/_ext/claims.py extract          # after `make book`: add new claims, drop gone ones
    python book/_ext/claims.py check [PAGE ...] # every claim translated, placeholders kept
    python book/_ext/claims.py missing          # the claims still to translate, as JSON

A chapter's check cells run once and their output (``labformer.book.notebook.evidence``: a line
``<span class="lf-tally">`` that counts the checks, then a list of ``<span class="lf-claim">``
and ``<span class="lf-measured">``) is the same in both editions.
The Chinese edition translates it while Sphinx writes each page (the extension ``setup`` below,
active only when the book's language is Chinese): every number of the English text becomes a
placeholder ``{0}``, ``{1}``, ... (a *template*), the template is looked up in
``book/locales/zh_CN/claims/PAGE.json`` and the run's numbers go back into the Chinese template,
so a re-run with another seed needs no new translation. The cells of the chapters' tables
(``labformer.book.notebook.table``: ``<table class="... lf-table">``) are the same kind of
output and
go through the same catalogue (kind ``cell``); a cell that shows data or code (a French
sentence, ``norm_first=False``) keeps its text, written as its own translation. A translated
span or cell gets ``lang="zh-CN"``; the completeness gate (tests/book/test_translations.py against
the catalogue, and tests/book/test_book_editions.py against the built pages) fails while any claim
or cell of the English book lacks one.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = ROOT / "book" / "locales" / "zh_CN" / "claims"
ENGLISH_HTML = ROOT / "_build" / "html" / "book"

#: A number in running text; digits inside a name (float32, W_1, sublayer2) stay text, but a
#: factor such as x1939 is a number.
NUMBER = re.compile(r"(?<![A-Za-wyz_\d.])[-+−]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
PLACEHOLDER = re.compile(r"\{(\d+)\}")
SPAN = re.compile(r'<span class="(lf-claim|lf-measured|lf-tally)">(.*?)</span>', re.S)
#: A chapter's table (labformer.book.notebook.table), and a cell of it that holds text only.
TABLE = re.compile(r'<table [^>]*\blf-table\b[^>]*>.*?</table>', re.S)
CELL = re.compile(r'<(th|td)\b([^>]*)>([^<]*)</(?:th|td)>')
WORD = re.compile(r"[A-Za-z]{2,}")


def template(text: str) -> tuple[str, list[str]]:
    """"max gap 6.0e-08 (bound 1e-6)" -> ("max gap {0} (bound {1})", ["6.0e-08", "1e-6"])."""
    numbers: list[str] = []

    def hole(match: re.Match[str]) -> str:
        numbers.append(match.group(0))
        return f"{{{len(numbers) - 1}}}"

    return NUMBER.sub(hole, text), numbers


#: A number in scientific notation, as Python's format writes it ("2.7e-40", "0e+00").
SCIENTIFIC = re.compile(r"([-+−]?)(\d+(?:\.\d*)?)[eE]([-+]?)(\d+)")
NEGATIVE_ZERO = re.compile(r"[-−]0(?:\.0*)?")
SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def chinese_number(text: str) -> str:
    """A number as the Chinese edition writes it: scientific notation as a power of ten
    ("2.7e-40" -> "2.7×10⁻⁴⁰", "1e-6" -> "10⁻⁶"), zero as 0 ("0e+00", "0.0e+00" -> "0") and
    no sign on a zero ("-0.00" -> "0.00"). Any other text is returned as it is."""
    if NEGATIVE_ZERO.fullmatch(text):
        return text[1:]
    match = SCIENTIFIC.fullmatch(text)
    if match is None:
        return text
    sign, mantissa, exp_sign, exponent = match.groups()
    if float(mantissa) == 0:
        return "0"
    power = int(exponent)
    if power == 0:
        return sign + mantissa
    ten = "10" + (("-" if exp_sign == "-" else "") + str(power)).translate(SUPERSCRIPT)
    return f"{sign}{ten}" if mantissa == "1" else f"{sign}{mantissa}×{ten}"


#: "12.5 %" in Chinese text: no space before the percent sign.
PERCENT_SPACE = re.compile(r"(\d)(</span>)? %")
#: The rules of the Chinese edition's prose (book/locales/zh_CN/prose.json).
PROSE = json.loads((CATALOGUE.parent / "prose.json").read_text(encoding="utf-8"))
#: "one part in 3324" in Chinese words (prose.json's "part_of"): written 1/3324, as Chinese
#: technical prose does.
PART_OF = re.compile(r'(<span class="pasted-text">)?(\d[\d.,]*)(</span>)?\s*'
                     + re.escape(PROSE["part_of"].split("{n}")[1].strip()) + r"\s*")
PASTED = re.compile(r'<span class="pasted-text">([^<]*)</span>')
PRE = re.compile(r"(<pre\b.*?</pre>)", re.S)


def chinese_prose(body: str) -> str:
    """A Chinese page's HTML with its numbers written the Chinese way outside code blocks:
    glued values through :func:`chinese_number`, no space before %, "one part in N" as 1/N
    (:data:`PART_OF`)."""

    def prose(part: str) -> str:
        part = PASTED.sub(lambda m: f'<span class="pasted-text">{chinese_number(m.group(1))}'
                                    "</span>", part)
        part = PART_OF.sub(lambda m: f"{m.group(1) or ''}1/{m.group(2)}{m.group(3) or ''}",
                           part)
        return PERCENT_SPACE.sub(lambda m: f"{m.group(1)}{m.group(2) or ''}%", part)

    return "".join(p if p.startswith("<pre") else prose(p) for p in PRE.split(body))


def fill(chinese: str, numbers: list[str]) -> str:
    """A Chinese template with this run's numbers put back, each written the Chinese way
    (:func:`chinese_number`; the page's :func:`chinese_prose` then drops the space before %)."""
    return PLACEHOLDER.sub(lambda m: chinese_number(numbers[int(m.group(1))]), chinese)


def needs_words(text: str) -> bool:
    """Whether a claim has words to translate (not only numbers, symbols and reprs)."""
    return WORD.search(text) is not None


def load(directory: Path = CATALOGUE) -> dict[str, str]:
    """Every page's translations, English template -> Chinese template (translated ones)."""
    table: dict[str, str] = {}
    for path in sorted(directory.glob("*.json")):
        for entry in json.loads(path.read_text(encoding="utf-8")):
            if entry.get("zh"):
                table[entry["en"]] = entry["zh"]
    return table


def translate_body(body: str, table: dict[str, str], missing: list[str] | None = None) -> str:
    """A page's HTML with every claim span in Chinese where the catalogue has it."""

    def one(match: re.Match[str]) -> str:
        kind, inner = match.group(1), match.group(2)
        text = html.unescape(inner)
        english, numbers = template(text)
        if PLACEHOLDER.search(NUMBER.sub("", text)):
            chinese = None  # literal {n} in the text: cannot be templated safely
        else:
            chinese = table.get(english) if needs_words(text) else english
        if chinese is None:
            if missing is not None:
                missing.append(english)
            return match.group(0)
        shown = html.escape(fill(chinese, numbers), quote=False)
        return f'<span class="{kind}" lang="zh-CN">{shown}</span>'

    def cell(match: re.Match[str]) -> str:
        tag, attrs, inner = match.groups()
        text = html.unescape(inner).strip()
        if not needs_words(text) or 'lang="' in attrs:
            return match.group(0)
        english, numbers = template(text)
        chinese = table.get(english)
        if chinese is None or chinese == english:  # untranslated, or data kept as it is
            if chinese is None and missing is not None:
                missing.append(english)
            return match.group(0)
        shown = html.escape(fill(chinese, numbers), quote=False)
        return f'<{tag}{attrs} lang="zh-CN">{shown}</{tag}>'

    body = SPAN.sub(one, body)
    return TABLE.sub(lambda t: CELL.sub(cell, t.group(0)), body)


#: A grader's line (labformer.book.exercises.GraderLine): its message id and fields, in English.
GRADER = re.compile(r'<span class="lf-grader" data-key="([^"]+)" data-fields="([^"]*)">'
                    r'(.*?)</span>', re.S)


def translate_graders(body: str) -> str:
    """A page's HTML with every grader line worded from the Chinese catalogue of
    labformer.book.exercises (the same message id and fields as the English line)."""
    from labformer.book.exercises import MESSAGES

    def one(match: re.Match[str]) -> str:
        key, fields = match.group(1), json.loads(html.unescape(match.group(2)))
        if key not in MESSAGES["zh"]:
            return match.group(0)
        shown = html.escape(MESSAGES["zh"][key].format(**fields), quote=False)
        return (f'<span class="lf-grader" data-key="{key}" data-fields="{match.group(2)}" '
                f'lang="zh-CN">{shown}</span>')

    return GRADER.sub(one, body)


def table_cells(text: str) -> list[str]:
    """The texts with words of a page's table cells, in order."""
    return [plain for t in TABLE.findall(text) for _, _, inner in CELL.findall(t)
            if needs_words(plain := html.unescape(inner).strip())]


def english_claims(html_dir: Path = ENGLISH_HTML) -> dict[str, list[dict[str, str]]]:
    """Per page of the built English book, its claim and table-cell templates in order, each
    once."""
    pages: dict[str, list[dict[str, str]]] = {}
    for path in sorted(html_dir.glob("*.html")):
        text = path.read_text(encoding="utf-8")
        seen: dict[str, dict[str, str]] = {}
        for kind, inner in SPAN.findall(text):
            plain = html.unescape(inner)
            if not needs_words(plain):
                continue
            english, _ = template(plain)
            seen.setdefault(english, {"kind": kind.removeprefix("lf-"), "en": english})
        for plain in table_cells(text):
            english, _ = template(plain)
            seen.setdefault(english, {"kind": "cell", "en": english})
        if seen:
            pages[path.stem] = list(seen.values())
    return pages


def problems(entries: list[dict[str, Any]]) -> list[str]:
    """Untranslated entries and translations that lost or invented a placeholder; a claim's
    translation must hold Chinese, a table cell's may keep its text (data, code, names)."""
    out = []
    for entry in entries:
        english, chinese = entry["en"], entry.get("zh") or ""
        if not chinese.strip():
            out.append(f"untranslated: {english[:90]!r}")
        elif sorted(PLACEHOLDER.findall(english)) != sorted(PLACEHOLDER.findall(chinese)):
            out.append(f"placeholders differ: {english[:70]!r} -> {chinese[:70]!r}")
        elif (needs_words(english) and entry.get("kind") != "cell"
              and not re.search(r"[\u3400-\u9fff]", chinese)):
            out.append(f"no Chinese in the translation of {english[:70]!r}")
    return out


def extract(html_dir: Path = ENGLISH_HTML, directory: Path = CATALOGUE) -> int:
    """Bring the catalogue in line with the built English book; keep every translation."""
    if not html_dir.is_dir():
        raise SystemExit(f"{html_dir} does not exist: run `make book` first")
    directory.mkdir(parents=True, exist_ok=True)
    known = load(directory)
    pages = english_claims(html_dir)
    for page, entries in pages.items():
        for entry in entries:
            entry["zh"] = known.get(entry["en"], "")
        (directory / f"{page}.json").write_text(
            json.dumps(entries, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    for stale in directory.glob("*.json"):
        if stale.stem not in pages:
            stale.unlink()
    todo = sum(not e["zh"] for entries in pages.values() for e in entries)
    print(f"{sum(map(len, pages.values()))} claim templates on {len(pages)} pages, "
          f"{todo} to translate")
    return 0


def check(pages: list[str], directory: Path = CATALOGUE) -> int:
    failed = 0
    for path in sorted(directory.glob("*.json")):
        if pages and path.stem not in pages:
            continue
        found = problems(json.loads(path.read_text(encoding="utf-8")))
        failed += bool(found)
        print(f"{path.stem}: " + ("ok" if not found else f"{len(found)} problems"))
        for problem in found[:20]:
            print(f"  - {problem}")
    return 1 if failed else 0


# ---------------------------------------------------------------------------- the extension

def setup(app: Any) -> dict[str, Any]:
    """Sphinx: translate the claims of each page of the Chinese edition as it is written."""
    state: dict[str, Any] = {}

    def page_context(app: Any, pagename: str, templatename: str, context: dict[str, Any],
                     doctree: Any) -> None:
        if not str(app.config.language or "").startswith("zh") or "body" not in context:
            return
        if "table" not in state:
            state["table"] = load()
        missing: list[str] = []
        context["body"] = chinese_prose(translate_graders(translate_body(
            context["body"], state["table"], missing)))
        for english in missing:
            print(f"labformer claims: no Chinese for {english[:80]!r} on {pagename} "
                  "(python book/_ext/claims.py extract, then translate)", file=sys.stderr)

    def outdated(app: Any, env: Any, added: Any, changed: Any, removed: Any) -> list[str]:
        # a changed catalogue re-renders every page: no page keeps a stale translation
        if not str(app.config.language or "").startswith("zh"):
            return []
        digest = hashlib.sha256(b"".join(p.read_bytes() for p in
                                         sorted(CATALOGUE.glob("*.json")))).hexdigest()
        if getattr(env, "labformer_claims_digest", None) == digest:
            return []
        env.labformer_claims_digest = digest
        return sorted(env.found_docs)

    app.connect("env-get-outdated", outdated)
    app.connect("html-page-context", page_context)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def main(argv: list[str]) -> int:
    if argv[:1] == ["extract"]:
        return extract()
    if argv[:1] == ["check"]:
        return check(argv[1:])
    if argv[:1] == ["missing"]:
        table = load()
        todo = {page: [e["en"] for e in entries if e["en"] not in table]
                for page, entries in english_claims().items()}
        print(json.dumps({p: t for p, t in todo.items() if t}, ensure_ascii=False, indent=1))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
