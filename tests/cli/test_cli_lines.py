"""``labformer translate`` translates every sentence of every line it can, and names the rest:
several sentences on a line, a line without a word, bytes that are not UTF-8 on stdin;
``--scores`` flags likely-wrong lines; ``evaluate`` warns about a file in one language."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from labformer.app.carry import translate_carried
from labformer.app.cli import main
from labformer.app.translate import Translator
from labformer.data import everyday_pairs_path, save_pairs

EVERYDAY = everyday_pairs_path()


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def everyday(tmp_path_factory) -> Path:
    """A 30-step model of the everyday file: behaviour, not quality."""
    path = tmp_path_factory.mktemp("lines") / "m.pt"
    code = main(["train", "--pairs", str(EVERYDAY), "--out", str(path), "--steps", "30",
                 "--batch-size", "100", "--device", "cpu", "--quiet"])
    assert code in (0, 3) and path.exists()
    return path


class BytesStdin:
    """Standard input as a terminal-less pipe of raw bytes."""

    def __init__(self, data: bytes) -> None:
        self.buffer = io.BytesIO(data)

    def isatty(self) -> bool:
        return False


def test_a_latin1_line_amid_utf8_lines_fails_alone(capsys, monkeypatch, everyday):
    lines = ["Merci beaucoup.", "Où est la gare ?", "Bonjour !"]
    data = (lines[0] + "\n").encode() + lines[1].encode("latin-1") + b"\n" + \
        (lines[2] + "\n").encode()
    monkeypatch.setattr(sys, "stdin", BytesStdin(data))
    code, out, err = run(capsys, "translate", "--checkpoint", str(everyday))
    assert code == 1
    expected = [t.text for t in translate_carried(Translator.from_checkpoint(everyday),
                                                  [lines[0], lines[2]])]
    assert out.split("\n")[:3] == [expected[0], "", expected[1]]
    assert "line 2 is not valid UTF-8 (byte 0xF9" in err and "Latin-1" in err
    assert "1 line(s) could not be translated" in err


def test_utf16_on_stdin_is_read_as_utf16(capsys, monkeypatch, everyday):
    monkeypatch.setattr(sys, "stdin", BytesStdin("Merci.\nOui.\n".encode("utf-16")))
    code, out, err = run(capsys, "translate", "--checkpoint", str(everyday))
    assert code == 0 and len(out.splitlines()) == 2, err


def test_a_line_without_a_word_is_named_not_translated(capsys, monkeypatch, everyday):
    monkeypatch.setattr(sys, "stdin", io.StringIO("Merci.\n?!...\n"))
    code, out, err = run(capsys, "translate", "--checkpoint", str(everyday))
    assert code == 0 and out.split("\n")[1] == "?!..."
    assert "line 2 holds no word ('?!...'): not translated" in err


def test_each_sentence_of_a_line_is_translated(capsys, everyday):
    translator = Translator.from_checkpoint(everyday)
    alone = [t.text for t in translate_carried(translator, ["Je suis fatigué.", "J'ai faim."])]
    code, out, err = run(capsys, "translate", "--checkpoint", str(everyday),
                         "Je suis fatigué. J'ai faim.")
    assert code == 0, err
    assert out.strip() == " ".join(t for t in alone if t)


def test_scores_flag_a_likely_wrong_translation(capsys, everyday):
    code, out, err = run(capsys, "translate", "--checkpoint", str(everyday), "--scores",
                         "Merci.", "Le zorglub mange des xyzzies.")
    assert code == 0, err
    values = [float(line.split("\t")[0]) for line in out.splitlines()]
    assert len(values) == 2 and all(v <= 0 for v in values)
    assert "sentence 2 is likely wrong: " in err and "the model is unsure" in err


def test_evaluate_warns_when_both_columns_are_one_language(capsys, tmp_path, everyday):
    english = [line.split("\t")[1] for line in EVERYDAY.read_text("utf-8").splitlines()]
    both = tmp_path / "both-english.tsv"
    save_pairs(list(zip(english[:40], english[40:80], strict=True)), both)
    code, out, err = run(capsys, "evaluate", "--checkpoint", str(everyday), "--pairs",
                         str(both))
    assert code == 0 and "BLEU" in out
    assert f"{both}: columns 1 and 2 both read as en" in err


def test_train_warns_when_both_columns_are_one_language(capsys, tmp_path):
    english = [line.split("\t")[1] for line in EVERYDAY.read_text("utf-8").splitlines()]
    both = tmp_path / "both-english.tsv"
    save_pairs(list(zip(english[:40], english[40:80], strict=True)), both)
    code, _, err = run(capsys, "train", "--pairs", str(both), "--out", str(tmp_path / "m.pt"))
    assert code == 1 and f"{both}: columns 1 and 2 both read as en" in err
    assert "too few" in err and not (tmp_path / "m.pt").exists()


def test_a_long_line_of_short_sentences_is_translated_whole(capsys, everyday):
    """The model's limit is a sentence's, not a line's: twelve short sentences (more tokens
    than the model reads) are all translated, and --max-length crops each sentence, not the
    line (issue 48: the advice gave one sentence of twelve)."""
    translator = Translator.from_checkpoint(everyday)
    sentences = ["Il fait beau aujourd'hui, je pense."] * 12
    line = " ".join(sentences)
    assert len(translator.src_text.tokenize(line)) > translator.max_source_tokens
    expected = translate_carried(translator, [line])[0].text
    one = translate_carried(translator, [sentences[0]])[0].text
    code, out, err = run(capsys, "translate", "--checkpoint", str(everyday), line)
    assert code == 0 and "tokens" not in err, err
    assert out.strip() == expected and expected.count(one) == 12
    long_sentence = " ".join(["très"] * 70) + " bien."
    mixed = " ".join([*sentences[:3], long_sentence.capitalize(), *sentences[3:5]])
    code, out, err = run(capsys, "translate", "--checkpoint", str(everyday), mixed)
    assert code == 1 and "sentence 1, sentence 4 of 6, has 72 tokens" in err
    assert "--max-length 63 crops such sentences" in err
    code, out, err = run(capsys, "translate", "--checkpoint", str(everyday), "--max-length",
                         "63", mixed)
    assert code == 0 and "1 of its 6 sentences have more than 63 tokens" in err, err
    assert out.strip().count(one) == 5  # the five short sentences are all there
