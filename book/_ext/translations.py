"""Checks of the Chinese edition's catalogues (book/locales/zh_CN/LC_MESSAGES/book/*.po).

    python book/_ext/translations.py                 # every catalogue: a report, exit 1 on problems
    python book/_ext/translations.py 03_scaling ...  # some pages only
    python book/_ext/translations.py export 03_scaling > 03.json   # messages as JSON to edit
    python book/_ext/translations.py import 03_scaling 03.json     # translations back in

A message is complete when it is translated and not fuzzy; it is faithful to its markup when the
translation keeps every glued value, citation, cross-reference, glossary target, formula, inline
code span and link target of the English text (the text around them is free). A page keeps the
terminology of record when, for every glossary term its English text marks with {term} (or uses,
for a term of several words), its Chinese text uses the glossary's Chinese term
(book/glossary.md, the Chinese in black lenticular brackets of each entry). Known
mistranslations of the field's words (book/locales/zh_CN/prose.json) never appear.
tests/book/test_translations.py runs the same checks.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[2]
CATALOGUES = ROOT / "book" / "locales" / "zh_CN" / "LC_MESSAGES" / "book"
GLOSSARY = ROOT / "book" / "glossary.md"

#: The rules of the Chinese prose (also read by claims.py, which writes its numbers).
PROSE = json.loads((ROOT / "book" / "locales" / "zh_CN" / "prose.json").read_text(
    encoding="utf-8"))
#: Words that look like translations of the field's terms but are wrong, with the right one.
MISTRANSLATIONS: dict[str, str] = PROSE["mistranslations"]
#: Correct Chinese that an earlier list banned, kept so that a test proves each passes: d2l-zh's
#: terms, which the glossary gives beside the book's (layer normalisation, batch normalisation,
#: dropout, teacher forcing, masking, position-wise feed-forward network, hidden state), the
#: glossary's own word for a skip connection, a common name of beam search, a learned position
#: embedding (which is not a positional encoding) and the everyday "the start of".
ACCEPTED: tuple[str, ...] = tuple(PROSE["accepted"])
#: Glossary terms that are also everyday English words, used so in the prose (a page that says
#: "the memory of a laptop" need not say the glossary's word for memory): not checked page
#: by page.
EVERYDAY = {"memory", "head", "baseline", "temperature", "alignment", "token", "value", "key",
            "query", "gradient", "mask", "padding", "entropy", "look-ahead", "checkpoint",
            "embedding", "encoder", "decoder", "vocabulary", "sublayer", "bottleneck",
            "exact match", "parameter count", "empty row", "optimiser step", "saturation",
            "tokenisation", "tokenizer", "detokenisation", "detokenizer", "one-hot", "softmax",
            "logits", "logit", "ablation", "dropout", "gradient clipping", "BOS", "EOS"}

ROLE = re.compile(r"\{([a-z:-]+)\}`([^`]*)`")
MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.DOTALL)
CODE = re.compile(r"``([^`]+)``|`([^`]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
CJK = re.compile(r"[\u3400-\u9fff]")
#: Roles whose whole text must survive translation; {term} and {ref} keep their target only.
EXACT_ROLES = {"eval", "glue:text", "glue:any", "glue:md", "glue", "cite", "cite:p", "cite:t",
               "numref", "eq", "doc", "download"}


def role_target(text: str) -> str:
    """`shown <target>` -> target; `target` -> target."""
    match = re.fullmatch(r"(?s)(.*?)\s*<([^<>]+)>", text)
    return (match.group(2) if match else text).strip()


def markup(text: str) -> Counter[str]:
    """What a translation must keep: roles (or their targets), formulas, code, link targets."""
    kept: Counter[str] = Counter()
    for name, body in ROLE.findall(text):
        if name in EXACT_ROLES:
            kept[f"{{{name}}}`{body}`"] += 1
        elif name in {"term", "ref", "numref"}:
            kept[f"{{{name}}}<{role_target(body).lower()}>"] += 1
    rest = ROLE.sub(" ", text)
    for formula in MATH.findall(rest):
        kept[formula.strip()] += 1
    rest = MATH.sub(" ", rest)
    for double, single in CODE.findall(rest):
        kept["`" + (double or single) + "`"] += 1
    for target in LINK.findall(rest):
        kept["(" + target + ")"] += 1
    return kept


def is_formula(text: str) -> bool:
    """A display formula's message (extracted without its $$): LaTeX, no inline maths."""
    return "$" not in text and re.search(r"\\[A-Za-z]+", text) is not None


def prose_words(text: str) -> int:
    """English words outside markup: a message with none needs no Chinese."""
    if is_formula(text):
        return 0
    rest = CODE.sub(" ", MATH.sub(" ", ROLE.sub(" ", text)))
    return len(re.findall(r"[A-Za-z]{2,}", rest))


#: The glossary's markup of an entry's Chinese: the term of record and its alternatives in
#: black lenticular brackets, the alternatives in full-width parentheses, separated by
#: full-width commas, enumeration commas or commas.
TERMS = ("\N{LEFT BLACK LENTICULAR BRACKET}", "\N{RIGHT BLACK LENTICULAR BRACKET}")
ALTERNATIVES = ("\N{FULLWIDTH LEFT PARENTHESIS}", "\N{FULLWIDTH RIGHT PARENTHESIS}")
SEPARATORS = "\N{FULLWIDTH COMMA}\N{IDEOGRAPHIC COMMA},"


@dataclass(frozen=True)
class Term:
    english: tuple[str, ...]
    chinese: tuple[str, ...]


def glossary_terms(path: Path = GLOSSARY) -> list[Term]:
    """Each glossary entry's English spellings and its Chinese forms from its markup
    (:data:`TERMS`, :data:`ALTERNATIVES`)."""
    text = path.read_text(encoding="utf-8")
    body = text[text.index("```{glossary}"):]
    terms = []
    for block in body.split("\n\n"):
        names = [line for line in block.strip("\n").split("\n")
                 if line and not line.startswith((" ", "```", ":"))]
        match = re.search(f"{TERMS[0]}([^{TERMS[1]}]*){TERMS[1]}", block)
        if not names or not match:
            continue
        main, _, alts = match.group(1).partition(ALTERNATIVES[0])
        forms = [main.strip()] + [a.strip() for a in
                                  re.split(f"[{SEPARATORS}]", alts.rstrip(ALTERNATIVES[1]))]
        terms.append(Term(tuple(names), tuple(f for f in forms if f)))
    return terms


def uses(text: str, english: str) -> bool:
    """Whether English text uses a term (whole words; acronyms and 'Pre-LN' by case)."""
    flags = 0 if re.search(r"[A-Z].*[A-Z]", english) else re.IGNORECASE
    return re.search(rf"(?<![\w-]){re.escape(english)}(?:s|es)?(?![\w-])", text, flags) is not None


@dataclass
class Report:
    page: str
    problems: list[str]


def check_catalogue(path: Path, terms: list[Term] | None = None) -> Report:
    """Every problem of one page's catalogue, each naming the message it is about."""
    terms = glossary_terms() if terms is None else terms
    with path.open("rb") as handle:
        catalogue = read_po(handle)
    problems: list[str] = []
    english, chinese, marked = [], [], set()
    names = {name for term in terms for name in term.english}
    for message in catalogue:
        if not message.id:
            continue
        msgid, msgstr = str(message.id), str(message.string or "")
        short = msgid[:70].replace("\n", " ")
        if not msgstr.strip():
            problems.append(f"untranslated: {short!r}")
            continue
        if message.fuzzy:
            problems.append(f"fuzzy: {short!r}")
        lost = markup(msgid) - markup(msgstr)
        added = markup(msgstr) - markup(msgid)
        if lost or added:
            problems.append(f"markup changed in {short!r}: lost {sorted(lost)} "
                            f"added {sorted(added)}")
        if is_formula(msgid) and msgstr != msgid:
            problems.append(f"a display formula must stay as it is (its translation would be "
                            f"read as reStructuredText): {short!r}")
        elif msgstr == msgid and msgid in names:
            pass  # a glossary entry's English term, shown as it is in both editions
        elif prose_words(msgid) >= 3 and not CJK.search(msgstr):
            problems.append(f"no Chinese in {short!r}")
        for name, body in ROLE.findall(msgstr):
            if name.startswith("bdg") and not CJK.search(body):
                problems.append(f"a badge left in English ({body!r}) in {short!r}")
        for wrong, right in MISTRANSLATIONS.items():
            if wrong in msgstr:
                problems.append(f"{wrong!r} (write {right}) in {short!r}")
        marked |= {role_target(m.group(2)).lower() for m in ROLE.finditer(msgid)
                   if m.group(1) == "term"}
        english.append(ROLE.sub(lambda m: m.group(2), msgid))
        chinese.append(msgstr)
    page_en, page_zh = "\n".join(english), "\n".join(chinese)
    for term in terms:
        if any(name in EVERYDAY for name in term.english):
            continue
        # A term counts as used where the page marks it ({term}`...`), or, for a name of
        # several words ("beam search"), where it stands in the text: a single word such as
        # "warm-up" or "UNK" may be meant in its everyday sense, and then needs no gloss.
        used = [name for name in term.english if name.lower() in marked
                or (" " in name and uses(page_en, name))]
        if used and not any(form in page_zh for form in term.chinese):
            problems.append(f"terminology: the English uses {used[0]!r}, the Chinese has "
                            f"none of {list(term.chinese)}")
    return Report(path.stem, problems)


def export(page: str) -> list[dict[str, object]]:
    """A page's messages, numbered, for translating: [{"n", "en", "zh", "fuzzy"}, ...]."""
    with (CATALOGUES / f"{page}.po").open("rb") as handle:
        catalogue = read_po(handle)
    return [{"n": n, "en": str(m.id), "zh": str(m.string or ""), "fuzzy": m.fuzzy}
            for n, m in enumerate(m for m in catalogue if m.id)]


def import_translations(page: str, entries: list[dict[str, object]]) -> int:
    """Writes each entry's "zh" into the page's catalogue (its "en" must still match)."""
    from babel.messages.pofile import write_po

    path = CATALOGUES / f"{page}.po"
    with path.open("rb") as handle:
        catalogue = read_po(handle)
    messages = [m for m in catalogue if m.id]
    changed = 0
    for entry in entries:
        message = messages[int(str(entry["n"]))]
        if str(message.id) != entry["en"]:
            raise SystemExit(f"{page}: message {entry['n']} is no longer {entry['en']!r}; "
                             "export again")
        if entry.get("zh"):
            message.string = str(entry["zh"])
            message.flags.discard("fuzzy")
            changed += 1
    with path.open("wb") as handle:
        write_po(handle, catalogue, width=0, omit_header=False)
    return changed


def main(pages: list[str]) -> int:
    if pages[:1] == ["export"] and len(pages) == 2:
        print(json.dumps(export(pages[1]), ensure_ascii=False, indent=1))
        return 0
    if pages[:1] == ["import"] and len(pages) == 3:
        entries = json.loads(Path(pages[2]).read_text(encoding="utf-8"))
        print(f"{pages[1]}: {import_translations(pages[1], entries)} messages written")
        return 0
    paths = [CATALOGUES / f"{page}.po" for page in pages] or sorted(CATALOGUES.glob("*.po"))
    terms = glossary_terms()
    failed = 0
    for path in paths:
        report = check_catalogue(path, terms)
        print(f"{report.page}: {len(report.problems) or 'ok'}"
              + ("" if not report.problems else " problems"))
        for problem in report.problems:
            print(f"  - {problem}")
        failed += bool(report.problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
