"""The Chinese edition's catalogues: complete, current, faithful to the markup, one terminology.

The catalogues (book/locales/zh_CN/LC_MESSAGES/book/*.po) hold the Chinese of every message
that Sphinx extracts from the English pages. A change to the English prose that lands without
its translation fails here, naming the page and the messages (`make translations` updates the
catalogues; book/_ext/translations.py exports and imports a page's messages).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import book_ext
import pytest
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[2]
translations = book_ext.load("translations")
claims = book_ext.load("claims")

CATALOGUES = translations.CATALOGUES
PAGES = sorted(p.stem for p in CATALOGUES.glob("*.po"))


def _messages(path: Path) -> dict[str, str]:
    with path.open("rb") as handle:
        return {str(m.id): str(m.string or "") for m in read_po(handle) if m.id}


def test_every_page_of_the_book_has_a_catalogue() -> None:
    chapters = sorted(p.stem for p in (ROOT / "book").glob("*.ipynb"))
    pages = sorted(p.stem for p in (ROOT / "book").glob("*.md"))
    assert PAGES == sorted(chapters + pages)


@pytest.mark.parametrize("page", PAGES)
def test_catalogue_is_complete_faithful_and_uses_the_glossary(page: str) -> None:
    """No untranslated or fuzzy message, markup kept, glossary terms, no known mistranslation."""
    report = translations.check_catalogue(CATALOGUES / f"{page}.po")
    assert not report.problems, (
        f"book/locales/zh_CN/LC_MESSAGES/book/{page}.po has {len(report.problems)} problem(s):\n"
        + "\n".join(report.problems))


def test_catalogues_hold_the_current_english_text(tmp_path: Path) -> None:
    """Extract the English messages now: each must be in its page's catalogue, translated."""
    config = subprocess.run([sys.executable, "book/_ext/editions.py", "config", "gettext"],
                            cwd=ROOT, capture_output=True, text=True, check=True)
    jupyter_book = shutil.which("jupyter-book", path=str(Path(sys.executable).parent))
    assert jupyter_book, "jupyter-book is not installed beside this Python"
    result = subprocess.run(
        [jupyter_book, "build", str(ROOT), "--config", config.stdout.strip(), "--builder",
         "custom", "--custom-builder", "gettext", "--path-output", str(tmp_path), "-q"],
        cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    templates = sorted((tmp_path / "_build" / "gettext" / "book").glob("*.pot"))
    assert [p.stem for p in templates] == PAGES
    stale = []
    for template in templates:
        have = _messages(CATALOGUES / f"{template.stem}.po")
        missing = [m for m in _messages(template) if not have.get(m, "").strip()]
        stale += [f"{template.stem}: {m[:80]!r}" for m in missing]
    assert not stale, (f"{len(stale)} English message(s) have no Chinese translation; run "
                       "`make translations` and translate them:\n" + "\n".join(stale[:40]))


# ----------------------------------------------------------------------------- the checker bites

def test_markup_keeps_glue_citations_targets_formulas_and_code() -> None:
    english = ("At $d_k = 64$ the loss is {glue:text}`ch3_loss:.2f` {cite}`vaswani2017attention`,"
               " see {numref}`fig-a` and {term}`heads <head>`; call `attend(q, k, v)`.")
    good = ("在 $d_k = 64$ 时损失为 {glue:text}`ch3_loss:.2f` {cite}`vaswani2017attention`，"
            "见{numref}`fig-a`和{term}`注意力头 <head>`；调用 `attend(q, k, v)`。")
    assert translations.markup(english) == translations.markup(good)
    for broken in (good.replace(":.2f", ":.3f"), good.replace("$d_k = 64$", "$d_k=64$"),
                   good.replace("<head>", "<heads>"), good.replace("`attend(q, k, v)`", "attend"),
                   good.replace("{cite}`vaswani2017attention`", "")):
        assert translations.markup(english) != translations.markup(broken)


def _catalogue(tmp_path: Path, pairs: list[tuple[str, str]], fuzzy: bool = False) -> Path:
    lines = ['msgid ""', 'msgstr ""', '"Content-Type: text/plain; charset=UTF-8\\n"', ""]
    for msgid, msgstr in pairs:
        if fuzzy:
            lines.append("#, fuzzy")
        lines += [f'msgid "{msgid}"', f'msgstr "{msgstr}"', ""]
    path = tmp_path / "page.po"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def test_checker_finds_each_kind_of_problem(tmp_path: Path) -> None:
    terms = translations.glossary_terms()
    english = "Beam search keeps the best few partial outputs at every step."
    ok = _catalogue(tmp_path, [(english, "束搜索在每一步保留最好的几个部分输出。")])
    assert translations.check_catalogue(ok, terms).problems == []
    cases = {
        "untranslated": [(english, "")],
        "fuzzy": [(english, "束搜索在每一步保留最好的几个部分输出。")],
        "no Chinese": [(english, "Beam search keeps the best outputs.")],
        "terminology": [(english, "定向搜索在每一步保留最好的几个部分输出。")],
        "'变压器'": [("The Transformer model is an encoder-decoder.",
                      "变压器是一种编码器-解码器。")],
        "markup changed": [("Its loss is {glue:text}`x:.2f` here.", "损失为 x。")],
        "badge left in English": [("**Verdict.** {bdg-success}`holds` Always.",
                                   "**结论。** {bdg-success}`holds` 总是成立。")],
    }
    for kind, pairs in cases.items():
        problems = translations.check_catalogue(
            _catalogue(tmp_path, pairs, fuzzy=kind == "fuzzy"), terms).problems
        assert any(kind in p for p in problems), (kind, problems)


def test_checker_accepts_correct_terms_and_rejects_mistranslations(tmp_path: Path) -> None:
    terms = translations.glossary_terms()
    english = "The block adds its input back and normalises the sum."
    for word in translations.ACCEPTED:  # correct Chinese: no problem
        ok = _catalogue(tmp_path, [(english, f"这个块把输入加回来，再做归一化（{word}）。")])
        assert translations.check_catalogue(ok, terms).problems == [], word
    for wrong, right in (("变压器", "Transformer"), ("光束搜索", "束搜索"),
                         ("层标准化", "层归一化"), ("剩余连接", "残差连接"),
                         ("教师强迫", "教师强制"), ("令牌", "词元")):
        bad = _catalogue(tmp_path, [(english, f"这个块把输入加回来，再做归一化（{wrong}）。")])
        problems = translations.check_catalogue(bad, terms).problems
        assert any(repr(wrong) in p and right in p for p in problems), (wrong, problems)


def test_terminology_rule_follows_what_the_page_means(tmp_path: Path) -> None:
    terms = translations.glossary_terms()
    # "warm-up" of a benchmark, unmarked: its Chinese need not say 学习率预热
    plain = [("Each benchmark does a warm-up run, then alternates the two sides.",
              "每个基准测试先预热运行一次，然后交替运行双方。")]
    assert translations.check_catalogue(_catalogue(tmp_path, plain), terms).problems == []
    # marked as the glossary's term, it must
    marked = [("Post-LN needs {term}`warm-up` at this rate.", "在这个学习率下，Post-LN 需要预热。")]
    problems = translations.check_catalogue(_catalogue(tmp_path, marked), terms).problems
    assert any("terminology" in p and "学习率预热" in p for p in problems), problems
    # a term of several words counts wherever it stands
    several = [("Beam search keeps a few outputs.", "定向搜索保留几个输出。")]
    problems = translations.check_catalogue(_catalogue(tmp_path, several), terms).problems
    assert any("terminology" in p and "束搜索" in p for p in problems), problems


# ------------------------------------------------------------------------- the claims' catalogue

@pytest.mark.parametrize("page", sorted(p.stem for p in claims.CATALOGUE.glob("*.json")))
def test_claims_catalogue_is_complete_and_keeps_placeholders(page: str) -> None:
    import json

    entries = json.loads((claims.CATALOGUE / f"{page}.json").read_text(encoding="utf-8"))
    assert entries, f"{page}: an empty claims catalogue"
    assert claims.problems(entries) == []


def test_claims_are_templated_and_filled_with_this_runs_numbers() -> None:
    english, numbers = claims.template("head 2: max gap 6.0e-08 (bound 1e-6) in float32, -3.5 %")
    assert english == "head {0}: max gap {1} (bound {2}) in float32, {3} %"
    assert numbers == ["2", "6.0e-08", "1e-6", "-3.5"]
    assert claims.fill("第 {0} 个头：{3} %，最大差距 {1}（界限 {2}）", numbers) == \
        "第 2 个头：-3.5 %，最大差距 6.0×10⁻⁸（界限 10⁻⁶）"
    table = {"the weights sum to {0}": "权重之和为 {0}", "max gap {0}": "最大差距 {0}"}
    body = ('<li><span class="lf-claim">the weights sum to 1</span>'
            '<span class="lf-measured">max gap 2.0e-07</span></li>'
            '<li><span class="lf-claim">x &lt; y for 3 rows</span>'
            '<span class="lf-measured">(28, 4)</span></li>')
    missing: list[str] = []
    out = claims.translate_body(body, table, missing)
    assert '<span class="lf-claim" lang="zh-CN">权重之和为 1</span>' in out
    assert '<span class="lf-measured" lang="zh-CN">最大差距 2.0×10⁻⁷</span>' in out
    assert '<span class="lf-claim">x &lt; y for 3 rows</span>' in out  # not in the table
    assert '<span class="lf-measured" lang="zh-CN">(28, 4)</span>' in out  # no words
    assert missing == ["x < y for {0} rows"]
    # the folded line's count is a catalogue entry like any claim
    folded = claims.translate_body('<span class="lf-tally">7 checks hold</span>',
                                   {"{0} checks hold": "{0} 项检查全部成立"})
    assert folded == '<span class="lf-tally" lang="zh-CN">7 项检查全部成立</span>'
    wrong = [{"en": "a {0} b {1}", "zh": "甲 {0}"}, {"en": "a b", "zh": ""},
             {"en": "ab cd {0}", "zh": "ab cd {0}"}]
    found = claims.problems(wrong)
    assert [p.split(":")[0] for p in found] == ["placeholders differ", "untranslated",
                                                "no Chinese in the translation of 'ab cd {0}'"]



def test_chinese_pages_write_numbers_the_chinese_way() -> None:
    """Powers of ten instead of e-notation, no sign on zero, no space before %, 1/N for
    "N 分之一"; code blocks keep their text."""
    assert [claims.chinese_number(t) for t in
            ("2.7e-40", "0e+00", "0.0e+00", "1e-6", "1.3e+09", "-0.00", "-3.5", "float32")] \
        == ["2.7×10⁻⁴⁰", "0", "0", "10⁻⁶", "1.3×10⁹", "0.00", "-3.5", "float32"]
    body = ('<p>仅为论文的 <span class="pasted-text">3324</span> 分之一，'
            '<span class="pasted-text">12.5</span> % 的句子，p = '
            '<span class="pasted-text">2.7e-40</span></p><pre>x = "5 %"  # 1e-6</pre>')
    assert claims.chinese_prose(body) == (
        '<p>仅为论文的 <span class="pasted-text">1/3324</span>，'
        '<span class="pasted-text">12.5</span>% 的句子，p = '
        '<span class="pasted-text">2.7×10⁻⁴⁰</span></p><pre>x = "5 %"  # 1e-6</pre>')


def test_table_cells_are_translated_and_data_cells_keep_their_text() -> None:
    table = {"token accuracy %": "词元准确率 %", "one head (h = {0})": "单头（h = {0}）",
             "je suis là": "je suis là"}
    body = ('<p>token accuracy %</p><table id="T" class="dataframe lf-table"><thead><tr>'
            '<th class="col_heading" >token accuracy %</th><th>BLEU</th></tr></thead><tbody>'
            '<tr><td id="a" >one head (h = 1)</td><td>95.2</td><td>je suis là</td></tr>'
            '</tbody></table>')
    missing: list[str] = []
    out = claims.translate_body(body, table, missing)
    assert '<th class="col_heading"  lang="zh-CN">词元准确率 %</th>' in out
    assert '<td id="a"  lang="zh-CN">单头（h = 1）</td>' in out  # this run's number put back
    assert "<td>je suis là</td>" in out and "<td>95.2</td>" in out  # data and numbers stay
    assert out.startswith("<p>token accuracy %</p>")  # only the table's cells
    assert missing == ["BLEU"]
    assert claims.table_cells(body) == ["token accuracy %", "BLEU", "one head (h = 1)",
                                        "je suis là"]
    # a cell may keep its text; a claim may not
    assert claims.problems([{"kind": "cell", "en": "BLEU", "zh": "BLEU"}]) == []
    assert claims.problems([{"kind": "claim", "en": "BLEU", "zh": "BLEU"}]) != []


def test_glossary_gives_the_terms_of_record() -> None:
    terms = {name: term.chinese for term in translations.glossary_terms()
             for name in term.english}
    assert terms["self-attention"][0] == "自注意力"
    assert terms["logits"][0] == "logits" and "未归一化的对数概率" in terms["logits"]
    assert terms["greedy decoding"][0] == "贪心解码"
    assert terms["warm-up"][0] == "学习率预热"
    assert terms["Transformer"][0] == "Transformer"


def test_the_chinese_readme_comments_its_commands_in_chinese() -> None:
    import re

    text = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
    comments = [line[line.index("#"):] for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
                for line in block.splitlines() if "#" in line]
    assert len(comments) >= 10
    english = [c for c in comments if not re.search(r"[\u4e00-\u9fff]", c)]
    assert not english, f"README.zh-CN.md comments its commands in English: {english}"
