"""The Chinese edition reads as one book: one label per box kind, one term per notion, one title,
and a README whose paragraphs are not broken by hard line breaks.

The catalogues are book/locales/zh_CN/LC_MESSAGES/book/*.po (msgstr = Chinese); the glossary's
中文 column (book/glossary.md) is the terminology of record.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[2]
CATALOGUES = ROOT / "book" / "locales" / "zh_CN" / "LC_MESSAGES" / "book"
README = ROOT / "README.zh-CN.md"

#: English bold label at the start of a paragraph -> the one Chinese label (with its punctuation).
LABELS = {
    "Measured.": "**实测。**",
    "Verdict.": "**结论。**",
    "Source.": "**来源。**",
    "Sources.": "**来源。**",
    "What you will learn.": "**本章内容。**",
    "What you will learn": "**本章内容**",
}
#: Forms that were replaced, with the canonical form (a regex, and what it should read).
BANNED = {
    r"测量结果\*\*|\*\*测量结果": "**实测。**",
    r"\*\*判定": "**结论。**",
    r"\*\*(?:资料来源|参考来源|原文出处)": "**来源。**",
    r"学习目标": "本章内容",
    r"\*\*(?:实测|结论|来源|本章内容)\*\*[：:]": "**X。** (full stop inside the bold)",
    r"标准误(?!差)": "标准误差",
    r"优化器步": "优化步 (glossary)",
    r"结束标记": "句尾标记 (glossary: 句首/句尾标记)",
    r"得分": "分数 (score)",
    r"(?:\d|`)\s*百万": "万/亿, or × 10⁶ after a glued value in millions",
    r"有多常": "多频繁 / 出现的比例",
    r"变换器": "Transformer, untranslated and without a gloss",
    r"像 ?\$?T[^，。；]{0,8}一样增长": "与 T 成正比 / 随 T 线性增长",
    r"饿死": "(say what vanishes: 梯度几乎消失)",
    r"文法": "语法 (grammar)",
    r"语料级": "语料库级",
    r"挂钟|实际时间": "墙钟时间 (wall-clock time)",
    r"注意力浏览器": "注意力查看器 (an explorer of attention, not a web browser)",
    r"(?<=[0-9`}]) %": "12.5% (no space before % in Chinese text)",
}
#: The Chinese title of the book (book/locales/zh_CN/interface.json's "title", the intro's
#: heading, the README).
TITLE = "注意力机制与 Transformer，逐段执行"


def messages() -> list[tuple[str, str, str]]:
    found = []
    for path in sorted(CATALOGUES.glob("*.po")):
        with path.open("rb") as handle:
            for message in read_po(handle):
                if not message.id or not message.string:
                    continue
                english = message.id if isinstance(message.id, str) else message.id[0]
                chinese = message.string if isinstance(message.string, str) else message.string[0]
                found.append((path.stem, english, chinese))
    return found


MESSAGES = messages()


def test_catalogues_are_found():
    assert len(MESSAGES) > 500


@pytest.mark.parametrize("english", sorted(LABELS))
def test_one_label_per_box_kind(english):
    wrong = []
    for page, source, chinese in MESSAGES:
        match = re.match(r"\s*\*\*([^*]+)\*\*", source)
        if match and match.group(1) == english:
            label = LABELS[english]
            rest = chinese[len(label):]
            if not chinese.startswith(label) or (rest and not rest.startswith(" ")):
                wrong.append(f"{page}: {chinese[:40]}")
    assert not wrong, (f"{english!r} must read {LABELS[english]!r} then a space:\n"
                       + "\n".join(wrong))


@pytest.mark.parametrize("pattern", sorted(BANNED))
def test_one_term_per_notion(pattern):
    found = [f"{page}: …{m.string[max(0, m.start() - 15):m.end() + 10]}…"
             for page, _, chinese in MESSAGES for m in re.finditer(pattern, chinese)]
    readme = README.read_text(encoding="utf-8")
    found += [f"README.zh-CN.md: …{readme[max(0, m.start() - 15):m.end() + 10]}…"
              for m in re.finditer(pattern, readme)]
    assert not found, f"use {BANNED[pattern]}:\n" + "\n".join(found)


def test_one_title():
    titles = [chinese for page, english, chinese in MESSAGES
              if english == "Attention and the Transformer, executed"]
    assert titles == [TITLE]
    assert README.read_text(encoding="utf-8").splitlines()[0] == f"# labformer：{TITLE}"
    interface = json.loads((ROOT / "book" / "locales" / "zh_CN" / "interface.json").read_text(
        encoding="utf-8"))
    assert interface["title"] == f"labformer：{TITLE}"


CJK = r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef“”]"


def broken_paragraph_lines(text: str) -> list[int]:
    """Lines of prose that continue the line above (CJK at the end of one, at the start of the
    next), outside code blocks, lists, tables, headings and quotes."""
    broken, fenced, previous = [], False, ""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced, previous = not fenced, ""
            continue
        if fenced:
            continue
        block = re.match(r"\s*(?:[-*+] |\d+[.)] |\||#|>)", line)
        if (previous and not block and re.search(CJK + r"$", previous)
                and re.match(CJK, line)):
            broken.append(number)
        previous = line if line.strip() else ""
    return broken


def test_readme_paragraphs_are_one_line_each():
    broken = broken_paragraph_lines(README.read_text(encoding="utf-8"))
    assert not broken, f"README.zh-CN.md breaks a paragraph before lines {broken}"


def test_the_readme_check_sees_a_broken_paragraph():
    assert broken_paragraph_lines("第一行的文字，\n第二行的文字。\n") == [2]
    assert broken_paragraph_lines("```\n代码里的中文\n代码里的中文\n```\n") == []
    assert broken_paragraph_lines("- 列表项\n- 列表项\n") == []


def test_terms_lists_read_chinese_then_english():
    """A chapter's list of terms gives each as {term}`中文 <english>`（english…）, not
    中文 / english."""
    wrong = [f"{page}: {chinese}" for page, english, chinese in MESSAGES
             if re.match(r"\{term\}`[^`]*` / ", english) and " / " in chinese]
    assert not wrong, "\n".join(wrong)
