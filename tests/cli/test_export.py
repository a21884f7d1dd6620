"""labformer.app.export: the page's model file holds the model's exact weights, its vocabularies,
configuration and tokeniser rules; a checkpoint exports as the model in memory does."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from labformer.app import cli
from labformer.app.carry import Carry
from labformer.app.export import (
    FORMAT,
    GLOBAL,
    MODEL_FILE,
    export_checkpoint,
    export_model,
    live_examples,
    live_widget_html,
    model_payload,
    model_script,
    moses_tables,
    read_model_file,
)
from labformer.app.translate import Translator, build_model, train_translator
from labformer.data import TextCodec, Vocab, generate_corpus
from labformer.train import weights_sha256

TINY = {"d_model": 16, "num_heads": 2, "num_encoder_layers": 1, "num_decoder_layers": 2,
        "d_ff": 32, "dropout": 0.0, "max_len": 32}


@pytest.fixture(scope="module")
def vocabs() -> tuple[Vocab, Vocab]:
    return (Vocab(["le", "chat", "dort", ".", "l'", "homme"]),
            Vocab(["the", "cat", "sleeps", ".", "man"]))


def _read(path: Path) -> dict:
    """The payload back from the .js file: one assignment to window.GLOBAL."""
    text = path.read_text(encoding="ascii")
    match = re.fullmatch(rf"/\*[^\n]*\*/\nwindow\.{GLOBAL} = (\{{.*\}});\n", text, re.DOTALL)
    assert match, text[:200]
    payload: dict = json.loads(match.group(1))
    return payload


def _tensors(payload: dict) -> dict[str, torch.Tensor]:
    dtype = {"float32": "<f4", "float16": "<f2"}[payload["dtype"]]
    flat = np.frombuffer(base64.b64decode(payload["data"]), dtype=dtype)
    out = {}
    for name, shape, offset in payload["tensors"]:
        n = int(np.prod(shape)) if shape else 1
        out[name] = torch.from_numpy(flat[offset:offset + n].astype(np.float32).copy()
                                     ).view(shape)
    return out


@pytest.mark.parametrize("overrides", [{}, {"norm_first": False, "positional": "learned",
                                            "tie_embeddings": "output"}])
def test_the_file_holds_the_exact_weights(tmp_path: Path, vocabs: tuple[Vocab, Vocab],
                                          overrides: dict) -> None:
    src, tgt = vocabs
    model = build_model(src, tgt, seed=3, **{**TINY, **overrides})
    (path,) = export_model(model, src, tgt, tmp_path)
    assert path == tmp_path / MODEL_FILE
    payload = _read(path)
    assert payload["format"] == FORMAT and payload["dtype"] == "float32"
    assert payload["src_vocab"] == src.itos and payload["tgt_vocab"] == tgt.itos
    assert payload["config"] == {**model.config.__dict__}
    assert payload["src_text"] == TextCodec("fr", "words").to_dict()
    assert payload["parameters"] == model.num_parameters()
    state = model.state_dict()
    got = _tensors(payload)
    assert list(got) == list(state)
    for name, tensor in state.items():
        assert torch.equal(got[name], tensor), name  # bit for bit
    # A model rebuilt from the file alone computes the same logits.
    again = build_model(src, tgt, seed=99, **{**TINY, **overrides})
    again.load_state_dict(got)
    x, y = torch.tensor([[4, 5, 6, 2]]), torch.tensor([[1, 4, 5]])
    assert torch.equal(again.eval()(x, y), model.eval()(x, y))
    assert not list(tmp_path.glob(".*.tmp")), "a temporary file was left behind"


def test_the_file_holds_what_the_page_translates_with(tmp_path: Path) -> None:
    """The page translates as labformer translate: the file holds Carry's tables for its
    vocabularies (numbers, names, clock times, ordinals) and, for a Moses codec, sacremoses's
    non-breaking prefixes and character classes; a file of format 1 (without them) is refused
    with what to do."""
    src = Vocab(["Il", "est", "7", "h", "30", "Paris", "3e", "10,50", "."])
    tgt = Vocab(["It", "'s", "7:30", "Paris", "3rd", "10.50", "."])
    model = build_model(src, tgt, seed=0, **TINY)
    words = model_payload(model, src, tgt)
    assert words["moses"] == {}
    assert words["carry"] == Carry(src, tgt, TextCodec("fr", "words"),
                                   TextCodec("en", "words")).tables()
    payload = model_payload(model, src, tgt, src_text=TextCodec("fr"), tgt_text=TextCodec("en"))
    assert payload["carry"] == {"numbers": ["7", "30", "10,50"], "names": ["Paris"],
                                "clocks": [[7, "30"]], "decimal_comma": True,
                                "ordinals": [[3, "3e"]], "name_set": ["Paris"]}
    assert set(payload["moses"]) == {"fr", "en"} and payload["moses"] == moses_tables(["fr", "en"])
    fr = payload["moses"]["fr"]

    def holds(ranges: list[int], char: str) -> bool:
        return any(a <= ord(char) <= b for a, b in zip(ranges[::2], ranges[1::2], strict=True))

    assert "M" in fr["prefixes"] and "Mr" in payload["moses"]["en"]["prefixes"]
    assert payload["moses"]["en"]["numeric_only"] == ["No", "Art", "pp"]
    assert holds(fr["alpha"], "é") and not holds(fr["alpha"], "7") and holds(fr["n"], "7")
    assert holds(fr["lower"], "é") and not holds(fr["lower"], "É") and holds(fr["sc"], "€")
    assert json.loads(json.dumps(payload)) == payload
    (path,) = export_model(model, src, tgt, tmp_path, src_text=TextCodec("fr"),
                           tgt_text=TextCodec("en"))
    assert read_model_file(path)["carry"] == payload["carry"]
    old = tmp_path / "old.js"
    old.write_text(path.read_text(encoding="ascii").replace(f'"format":{FORMAT}', '"format":1'),
                   encoding="ascii")
    with pytest.raises(ValueError, match=r"another format \(format 1; this version reads "
                                         r"format 2\): export it again with labformer export"):
        read_model_file(old)


def test_float16_halves_the_weights_and_rounds_each_once(tmp_path: Path,
                                                         vocabs: tuple[Vocab, Vocab]) -> None:
    src, tgt = vocabs
    model = build_model(src, tgt, seed=1, **TINY)
    (p32,) = export_model(model, src, tgt, tmp_path / "a")
    (p16,) = export_model(model, src, tgt, tmp_path / "b", dtype="float16")
    payload = _read(p16)
    assert payload["dtype"] == "float16"
    n32, n16 = (len(base64.b64decode(_read(p)["data"])) for p in (p32, p16))
    assert n16 * 2 == n32
    for name, tensor in _tensors(payload).items():
        assert torch.equal(tensor, model.state_dict()[name].half().float()), name


def test_bad_requests_are_named(tmp_path: Path, vocabs: tuple[Vocab, Vocab]) -> None:
    src, tgt = vocabs
    model = build_model(src, tgt, **TINY)
    with pytest.raises(ValueError, match="dtype must be one of float32, float16"):
        model_payload(model, src, tgt, dtype="int8")
    with pytest.raises(ValueError, match="vocabulary sizes 7, 10 do not match"):
        model_payload(model, Vocab(["a", "b", "c"]), src)
    with pytest.raises(ValueError, match="plain file name ending in .js"):
        export_model(model, src, tgt, tmp_path, name="../x.js")
    with pytest.raises(FileNotFoundError, match="checkpoint not found"):
        export_checkpoint(tmp_path / "none.pt", tmp_path)
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot read checkpoint"):
        export_checkpoint(tmp_path / "junk.pt", tmp_path)
    assert not (tmp_path / MODEL_FILE).exists()


def test_a_checkpoint_exports_as_its_translator(tmp_path: Path) -> None:
    """export_checkpoint == export_model on the loaded translator, codecs included (a model
    trained on cased pairs keeps its Moses codec)."""
    pairs = [("Le chat dort.", "The cat sleeps."), ("L'homme dort.", "The man sleeps."),
             ("Le chat mange.", "The cat eats.")] * 4
    ckpt = tmp_path / "run.pt"
    translator = train_translator(pairs, epochs=1, seed=0, device="cpu", progress=False,
                                  checkpoint=ckpt, batch_size=4, model_overrides=TINY)
    (from_file,) = export_checkpoint(ckpt, tmp_path / "a")
    (in_memory,) = export_model(translator.model, translator.src_vocab, translator.tgt_vocab,
                                tmp_path / "b", src_text=translator.src_text,
                                tgt_text=translator.tgt_text)
    assert from_file.read_bytes() == in_memory.read_bytes()
    payload = _read(from_file)
    assert payload["src_text"]["kind"] == "moses" and payload["tgt_text"]["lang"] == "en"
    assert isinstance(Translator.from_checkpoint(ckpt), Translator)

    # The command line: `labformer export` writes the same file, in float16 when asked.
    assert cli.main(["export", "--checkpoint", str(ckpt), "--out", str(tmp_path / "c")]) == 0
    assert (tmp_path / "c" / MODEL_FILE).read_bytes() == from_file.read_bytes()
    assert cli.main(["export", "--checkpoint", str(ckpt), "--out", str(tmp_path / "d"),
                     "--dtype", "float16"]) == 0
    assert _read(tmp_path / "d" / MODEL_FILE)["dtype"] == "float16"


def test_export_command_names_bad_input_and_writes_nothing(tmp_path: Path, capsys) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a model\n")
    a_file = tmp_path / "out.txt"
    a_file.write_text("keep me\n")
    cases = [(["--checkpoint", str(tmp_path / "missing.pt"), "--out", str(tmp_path / "o")],
              "no such checkpoint"),
             (["--checkpoint", str(notes), "--out", str(tmp_path / "o")], "notes.txt"),
             (["--checkpoint", str(notes), "--out", str(a_file)], "is a file, not a folder")]
    for args, words in cases:
        assert cli.main(["export", *args]) == 1
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err, err
    assert not (tmp_path / "o" / MODEL_FILE).exists()
    assert a_file.read_text() == "keep me\n" and notes.read_text() == "not a model\n"


def test_examples_and_widget_html(tmp_path: Path) -> None:
    """The precomputed examples are the translator's own outputs; the container records the
    model file's SHA-256 and its JSON cannot close the <script> element."""
    corpus = generate_corpus(num_pairs=2600, seed=0)
    translator = train_translator(corpus, epochs=1, seed=0, device="cpu", progress=False,
                                  valid_size=0, model_overrides=TINY)
    sentences = ["le chat dort.", "l'homme </script> dort"]
    shown = live_examples(translator.model, translator.src_vocab, translator.tgt_vocab,
                          sentences, beam=3)
    cfg = translator.model.config
    for sentence, ex in zip(sentences, shown, strict=True):
        assert ex["greedy"] == translator.translate(sentence)
        assert ex["beam"]["hypotheses"][0]["text"] == translator.translate(sentence, beam=3)
        assert len(ex["beam"]["hypotheses"]) == 3
        assert len(ex["cross"]) == cfg.num_decoder_layers
        assert all(len(layer) == cfg.num_heads for layer in ex["cross"])
        rows = [row for layer in ex["cross"] for head in layer for row in head]
        assert all(len(row) == len(ex["src_tokens"]) for row in rows)
        assert all(abs(sum(row) - 1) < 1e-3 for row in rows)  # rounded to 4 places
        assert ex["src_tokens"][-1] == "<eos>"
    assert "<unk>" in shown[1]["src_tokens"] and "script" in shown[1]["unknown"]
    (path,) = export_model(translator.model, translator.src_vocab, translator.tgt_vocab,
                           tmp_path)
    html = live_widget_html(path, shown)
    assert f'data-lf-model-sha256="{hashlib.sha256(path.read_bytes()).hexdigest()}"' in html
    assert f'data-lf-model="{MODEL_FILE}"' in html
    # the weights the examples were made with, for a page to compare with the file it loads
    weights = weights_sha256(translator.model.state_dict())
    assert f'data-lf-weights-sha256="{weights}"' in html
    stand_in = tmp_path / "other.js"
    stand_in.write_text("window.X = 1;\n", encoding="ascii")
    assert "data-lf-weights-sha256" not in live_widget_html(stand_in, shown)
    assert html.count("</script>") == 1
    body = html.split('class="lf-live-examples">', 1)[1].split("</script>", 1)[0]
    assert json.loads(body) == json.loads(json.dumps(shown))
    assert model_script({"format": FORMAT}).startswith("/* labformer")
