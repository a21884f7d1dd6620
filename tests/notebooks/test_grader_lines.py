"""A grader's line reads in the page's language: the Chinese edition words it from the Chinese
catalogue of labformer.book.exercises, although the notebooks run once, in English."""

from __future__ import annotations

import json
from pathlib import Path

import book_ext
import torch

from labformer.book import exercises

ROOT = Path(__file__).resolve().parents[2]


def _claims():
    return book_ext.load("claims")


def _right_causal_mask(T: int) -> torch.Tensor:
    return torch.ones(T, T, dtype=torch.bool).tril()


def test_the_line_carries_its_message_id_and_fields() -> None:
    line = exercises.GraderLine("en", "ok", name="causal_mask", n=12)
    assert repr(line) == "✓ causal_mask: all 12 checks passed."
    html = line._repr_html_()
    assert 'data-key="ok"' in html and "✓ causal_mask: all 12 checks passed." in html
    fields = json.loads(html.split('data-fields="')[1].split('"')[0].replace("&quot;", '"'))
    assert fields == {"n": 12, "name": "causal_mask"}


def test_the_chinese_edition_words_the_line_from_the_chinese_catalogue() -> None:
    claims = _claims()
    for key, fields in (("ok", {"name": "attention", "n": 7}),
                        ("not_attempted", {"name": "beam_search"})):
        english = exercises.GraderLine("en", key, **fields)._repr_html_()
        page = f"<div>{english}</div>"
        chinese = claims.translate_graders(page)
        want = exercises.MESSAGES["zh"][key].format(**fields)
        assert want in chinese and 'lang="zh-CN"' in chinese, chinese
        assert exercises.MESSAGES["en"][key].format(**fields) not in chinese
    # an id the catalogue lacks is left as it is, not dropped
    odd = '<span class="lf-grader" data-key="nope" data-fields="{}">x</span>'
    assert claims.translate_graders(odd) == odd


def test_check_prints_outside_a_notebook_and_displays_inside(capsys, monkeypatch) -> None:
    assert exercises.check("causal_mask", _right_causal_mask) is None
    assert capsys.readouterr().out.startswith("✓ causal_mask: all ")
    shown = []
    import IPython
    import IPython.display

    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setattr(IPython.display, "display", shown.append)
    assert exercises.check("causal_mask", _right_causal_mask, lang="zh") is None
    assert capsys.readouterr().out == ""
    assert len(shown) == 1 and isinstance(shown[0], exercises.GraderLine)
    assert shown[0].text.startswith(
        exercises.MESSAGES["zh"]["ok"].split("{n}")[0].format(name="causal_mask"))
