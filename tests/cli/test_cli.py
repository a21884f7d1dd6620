"""The translator (labformer.app.translate) and the ``labformer`` command line
(labformer.app.cli)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import labformer.app.translate
from labformer.app.cli import main
from labformer.app.translate import (
    MODEL_DEFAULTS,
    TRAIN_DEFAULTS,
    Translation,
    Translator,
    build_model,
    score,
    train_translator,
)
from labformer.data import Vocab, everyday_pairs_path, generate_corpus, save_pairs
from labformer.train import TrainConfig, load_checkpoint, save_checkpoint

TINY = dict(d_model=32, num_heads=4, num_encoder_layers=1, num_decoder_layers=1, d_ff=64,
            dropout=0.0, max_len=40)
NUM_PAIRS = 2200  # 1000 valid + 1000 test + 200 training pairs: seconds to train


@pytest.fixture(scope="module")
def corpus():
    return generate_corpus(num_pairs=NUM_PAIRS, seed=0)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, corpus) -> Path:
    """A tiny translator trained for a few steps: behaviour, not quality, is tested here."""
    path = tmp_path_factory.mktemp("ck") / "tiny.pt"
    train_translator(corpus, epochs=2, batch_size=64, model_overrides=TINY, device="cpu",
                     checkpoint=path, progress=False, valid_size=8,
                     extra_state={"corpus": {"num_pairs": NUM_PAIRS, "seed": 0}})
    return path


@pytest.fixture(scope="module")
def translator(checkpoint) -> Translator:
    return Translator.from_checkpoint(checkpoint)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """Call the CLI in-process; (exit status, stdout, stderr)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------- the library level


def test_build_model_uses_the_defaults_and_the_seed():
    src, tgt = Vocab(["a", "b"]), Vocab(["x"])
    a, b = build_model(src, tgt, seed=3), build_model(src, tgt, seed=3)
    assert a.config.d_model == MODEL_DEFAULTS["d_model"]
    assert (a.config.src_vocab_size, a.config.tgt_vocab_size) == (6, 5)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert build_model(src, tgt, d_model=64, num_heads=2).config.d_model == 64


def test_build_model_takes_the_special_ids_from_the_vocabulary():
    class Shifted(Vocab):  # a vocabulary with other ids for its special tokens
        pad_id, bos_id, eos_id, unk_id = 3, 2, 1, 0

    cfg = build_model(Shifted(["a"]), Shifted(["x"]), **TINY).config
    assert (cfg.pad_id, cfg.bos_id, cfg.eos_id, cfg.unk_id) == (3, 2, 1, 0)
    with pytest.raises(ValueError, match="special ids"):
        build_model(Vocab(["a"]), Shifted(["x"]), **TINY)
    with pytest.raises(ValueError, match="pad_id is 0, the vocabulary's 3"):
        Translator(build_model(Vocab(["a"]), Vocab(["x"]), **TINY), Shifted(["a"]),
                   Shifted(["x"]))


def test_translator_checks_vocabulary_sizes():
    model = build_model(Vocab(["a"]), Vocab(["x"]), **TINY)
    with pytest.raises(ValueError, match="vocabulary sizes"):
        Translator(model, Vocab(["a", "b"]), Vocab(["x"]))


def test_translate_shapes_and_decoders_agree(translator, corpus):
    sources = [s for s, _ in corpus.test[:4]]
    greedy = translator.translate(sources)  # default length limit: the model is untrained
    assert isinstance(greedy, list) and len(greedy) == 4
    assert all(len(t.split()) <= 2 * 20 + 12 for t in greedy)
    short = translator.translate(sources, max_len=8)
    assert translator.translate(sources[0], max_len=8) == short[0]  # a string in, one out
    # batching and sorting by length do not change any sentence's translation
    assert [translator.translate(s, max_len=8) for s in sources] == short
    small_batches = translator.translate_detailed(sources, max_len=8, batch_size=2)
    assert [t.text for t in small_batches] == short
    assert translator.translate(sources, beam=1, max_len=8) == short  # a beam of one: greedy
    assert len(translator.translate(sources, beam=3, max_len=8, length_penalty=0.6)) == 4
    assert all(len(t.split()) <= 2 for t in translator.translate(sources, max_len=2))


def test_unknown_words_are_read_as_unk_and_reported(translator):
    (t,) = translator.translate_detailed(["je suis zorglub merci"])
    assert isinstance(t, Translation) and str(t) == t.text
    assert t.unknown == ("zorglub", "merci")
    assert translator.unknown_words("Je suis étudiant.") == []


@pytest.mark.parametrize("bad, match", [
    ([], "non-empty list"),
    ([""], "sentence 0 is empty"),
    (["le chat", "  ... "], None),  # punctuation is a token: this one is not empty
    (["   "], "is empty"),
    ([" ".join(["chat"] * 40)], "40 tokens, but this model reads at most 39"),
])
def test_bad_input_is_a_clear_value_error(translator, bad, match):
    if match is None:
        assert len(translator.translate(bad)) == 2
        return
    with pytest.raises(ValueError, match=match):
        translator.translate(bad)


def test_bad_decoding_options(translator):
    with pytest.raises(ValueError, match="max_len"):
        translator.translate("le chat", max_len=41)
    with pytest.raises(ValueError, match="beam"):
        translator.translate("le chat", beam=0)


def test_evaluate_and_score(translator, corpus):
    scores = translator.evaluate(corpus.test[:10])
    assert set(scores) == {"bleu", "chrf", "exact"}
    assert all(0.0 <= v <= 100.0 for v in scores.values())
    refs = [t for _, t in corpus.test[:4]]
    assert score(refs, refs) == pytest.approx({"bleu": 100.0, "chrf": 100.0, "exact": 100.0})
    with pytest.raises(ValueError, match="no pairs"):
        translator.evaluate([])


def test_checkpoint_holds_history_vocab_and_corpus(checkpoint, translator):
    state = load_checkpoint(checkpoint)
    assert state["corpus"] == {"num_pairs": NUM_PAIRS, "seed": 0}
    assert len(translator.history.epoch_loss) == len(translator.history.valid_score) == 2
    assert translator.src_vocab == Vocab.from_dict(state["src_vocab"])
    assert translator.max_source_tokens == TINY["max_len"] - 1


def test_translator_checkpoint_errors(tmp_path, checkpoint):
    plain = tmp_path / "plain.pt"
    save_checkpoint(plain, {"model": {}})
    with pytest.raises(ValueError, match="missing model_config"):
        Translator.from_checkpoint(plain)
    state = load_checkpoint(checkpoint)
    state["model_config"]["d_model"] = 64  # the weights no longer fit the configuration
    broken = tmp_path / "broken.pt"
    save_checkpoint(broken, state)
    with pytest.raises(ValueError, match="inconsistent"):
        Translator.from_checkpoint(broken)


def test_train_translator_on_pairs(corpus):
    pairs = corpus.train[:40]
    t = train_translator(pairs, epochs=1, batch_size=16, model_overrides=TINY, device="cpu",
                         progress=False)
    assert len(t.history.epoch_loss) == 1 and t.history.valid_score == []  # no valid pairs
    with pytest.raises(ValueError, match="no training pairs"):
        train_translator([], model_overrides=TINY)
    long_pair = [(" ".join(["chat"] * 45), "cat")]
    with pytest.raises(ValueError, match="max_len"):
        train_translator(pairs + long_pair, model_overrides=TINY)


def test_train_translator_seed_and_epochs_have_one_source(monkeypatch, corpus):
    seen = []
    monkeypatch.setattr(labformer.app.translate, "train",
                        lambda model, batches, config, **kw: seen.append(config))
    pairs = corpus.train[:20]
    train_translator(pairs, model_overrides=TINY)
    train_translator(pairs, seed=5, epochs=2, model_overrides=TINY)
    mine = TrainConfig(epochs=1, seed=7)
    train_translator(pairs, train_config=mine, seed=7, epochs=1, model_overrides=TINY)
    # an explicit epochs= means exactly that many epochs: no minimum number of steps
    assert seen == [TRAIN_DEFAULTS,
                    dataclasses.replace(TRAIN_DEFAULTS, seed=5, epochs=2, min_steps=0), mine]
    with pytest.raises(ValueError, match=r"seed=3 contradicts train_config.seed=7"):
        train_translator(pairs, train_config=mine, seed=3, model_overrides=TINY)
    with pytest.raises(ValueError, match=r"epochs=4 contradicts train_config.epochs=1"):
        train_translator(pairs, train_config=mine, epochs=4, model_overrides=TINY)
    with pytest.raises(ValueError, match="must be positive"):
        train_translator(pairs, epochs=0, model_overrides=TINY)
    assert len(seen) == 3


# --------------------------------------------------------------------------- the commands


def test_corpus_prints_tab_separated_pairs(capsys, corpus):
    code, out, err = run(capsys, "corpus", "--num", "3", "--split", "test", "--num-pairs",
                         str(NUM_PAIRS), "--stats")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("toy corpus fr-en")
    assert lines[-3:] == [f"{s}\t{t}" for s, t in corpus.test[:3]]


def test_train_writes_a_checkpoint_and_resumes(capsys, tmp_path):
    ck = tmp_path / "run.pt"
    args = ["train", "--out", str(ck), "--num-pairs", "2100", "--seed", "1", "--device",
            "cpu", "--batch-size", "50", "--quiet"]
    code, out, err = run(capsys, *args, "--epochs", "1")
    # 2 steps teach nothing: the checkpoint is written, and the run says so and fails
    assert code == 3 and "learned nothing useful: validation BLEU" in err, err
    assert "epoch 1/1: loss" in out and "valid BLEU" in out and str(ck) in out
    state = load_checkpoint(ck)
    assert state["corpus"] == {"num_pairs": 2100, "seed": 0}  # the data set keeps its seed
    assert state["train_config"]["seed"] == 1
    code, out, err = run(capsys, *args, "--epochs", "2", "--resume")
    assert code == 3 and "no checkpoint" not in err, err
    assert "epoch 2/2: loss" in out and load_checkpoint(ck)["epoch"] == 1


def test_train_and_evaluate_on_a_pairs_file(capsys, tmp_path, corpus):
    pairs = tmp_path / "pairs.tsv"
    save_pairs(corpus.train[:60], pairs)
    ck = tmp_path / "mine.pt"
    code, out, err = run(capsys, "train", "--pairs", str(pairs), "--out", str(ck), "--epochs",
                         "1", "--batch-size", "30", "--device", "cpu", "--quiet")
    assert code == 1 and "60 pair(s) are too few" in err and not ck.exists()
    code, out, err = run(capsys, "train", "--pairs", str(pairs), "--out", str(ck), "--epochs",
                         "1", "--batch-size", "30", "--device", "cpu", "--quiet",
                         "--min-pairs", "1")
    assert code == 3 and "learned nothing useful" in err, err
    corpus_entry = load_checkpoint(ck)["corpus"]
    assert {k: corpus_entry[k] for k in ("pairs_file", "columns")} == {
        "pairs_file": str(pairs.resolve()), "columns": [0, 1]}
    assert len(corpus_entry["valid"]) == 3  # 5 % of 60: the split is in the checkpoint
    code, out, err = run(capsys, "evaluate", "--checkpoint", str(ck), "--pairs", str(pairs),
                         "--limit", "5")
    assert code == 0, err
    assert out.startswith(f"{pairs}, 5 pairs, greedy, with carry-over: BLEU")
    # without --pairs, there is no split to regenerate, but its held-out pairs are stored
    code, out, err = run(capsys, "evaluate", "--checkpoint", str(ck))
    assert code == 1 and "pass --pairs FILE" in err and "--split valid" in err
    code, out, err = run(capsys, "evaluate", "--checkpoint", str(ck), "--split", "valid")
    assert code == 0 and out.startswith(f"held-out pairs of {pairs.resolve()}, 3 pairs"), err


@pytest.mark.parametrize("content, match", [
    ("le chat\tthe cat\nle chien the dog\n", ":2: expected at least 2 tab-separated"),
    ("le chat\t\n", ":1: empty target"),
    ("\n\n", "no sentence pairs"),
])
def test_train_rejects_a_malformed_pairs_file(capsys, tmp_path, content, match):
    bad = tmp_path / "bad.tsv"
    bad.write_text(content, encoding="utf-8")
    code, out, err = run(capsys, "train", "--pairs", str(bad), "--out", str(tmp_path / "x.pt"))
    assert code == 1 and out == ""
    assert err.startswith("labformer: error: ") and str(bad) in err and match in err
    assert "Traceback" not in err and not (tmp_path / "x.pt").exists()


def test_train_seed_sets_the_training_seed_only(capsys, monkeypatch, tmp_path):
    import labformer.app.cli as cli

    calls = []

    def fake_train(data, valid, **kw):
        calls.append((data[:3], kw["seed"]))
        return Translator(build_model(Vocab(["a"]), Vocab(["x"]), **TINY), Vocab(["a"]),
                          Vocab(["x"]))

    monkeypatch.setattr(labformer.app.translate, "train_translator", fake_train)
    out = str(tmp_path / "x.pt")
    for extra in ([], ["--seed", "7"]):
        code, _, err = run(capsys, "train", "--num-pairs", "2100", "--out", out, *extra)
        assert code == 0, err
    (data0, seed0), (data7, seed7) = calls
    assert (seed0, seed7) == (0, 7)
    assert data0 == data7  # the same corpus whatever the training seed
    assert cli._parser().parse_args(["train"]).seed == 0


def test_train_recipes_quick_by_default_and_paper_on_request(capsys, monkeypatch, tmp_path):
    import labformer.app.cli as cli
    from labformer.app.cli.train import RECIPE_HELP
    from labformer.app.translate import QUICK_TRAIN, RECIPES

    # the help's lines, written out to keep torch out of `labformer --help`, are the recipes'
    assert {name: r.summary() for name, r in RECIPES.items()} == RECIPE_HELP
    assert RECIPES["paper"].train == TRAIN_DEFAULTS and RECIPES["paper"].model == {}
    assert RECIPES["quick"].train == QUICK_TRAIN and QUICK_TRAIN.decay == "linear"
    calls = []

    def fake_train(data, valid, **kw):
        calls.append((kw["train_config"], kw["model_overrides"], kw["batch_size"]))
        return Translator(build_model(Vocab(["a"]), Vocab(["x"]), **TINY), Vocab(["a"]),
                          Vocab(["x"]))

    monkeypatch.setattr(labformer.app.translate, "train_translator", fake_train)
    out = str(tmp_path / "x.pt")
    for extra in ([], ["--recipe", "paper", "--overwrite"], ["--seed", "3", "--steps", "900",
                                                           "--overwrite"]):
        code, stdout, err = run(capsys, "train", "--num-pairs", "2100", "--out", out, *extra)
        assert code == 0, err
        name = "paper" if "paper" in extra else "quick"
        assert f"recipe: {name} ({RECIPES[name].summary()})" in stdout
    assert calls[0] == (QUICK_TRAIN, {"dropout": 0.0}, 48)
    assert calls[1] == (TRAIN_DEFAULTS, {}, 96)
    assert calls[2][0] == dataclasses.replace(QUICK_TRAIN, seed=3, min_steps=900)
    assert cli._parser().parse_args(["train"]).recipe == "quick"
    with pytest.raises(SystemExit) as stop:
        run(capsys, "train", "--recipe", "fast", "--out", out)
    assert stop.value.code == 2 and "invalid choice: 'fast'" in capsys.readouterr().err


def test_train_reports_a_missing_pairs_file_and_a_bad_device(capsys, tmp_path):
    code, _, err = run(capsys, "train", "--pairs", str(tmp_path / "none.tsv"))
    assert code == 1 and "pairs file not found" in err
    code, _, err = run(capsys, "train", "--num-pairs", "2100", "--device", "toaster",
                       "--out", str(tmp_path / "x.pt"))
    assert code == 1 and "unknown device" in err


def test_translate_prints_one_line_per_sentence(capsys, checkpoint, translator):
    code, out, err = run(capsys, "translate", "--checkpoint", str(checkpoint),
                         "je suis étudiant.", "le chat dort.")
    assert code == 0 and err == ""
    assert out.splitlines() == translator.translate(["je suis étudiant.", "le chat dort."])
    code, out, err = run(capsys, "translate", "--checkpoint", str(checkpoint), "--beam", "2",
                         "je suis étudiant")
    assert code == 0 and len(out.splitlines()) == 1


def test_translate_warns_about_unknown_words(capsys, checkpoint):
    code, out, err = run(capsys, "translate", "--checkpoint", str(checkpoint), "merci xyzzy")
    assert code == 0 and len(out.splitlines()) == 1
    assert err.startswith("labformer: warning:") and "merci, xyzzy" in err


@pytest.mark.parametrize("sentence, match", [
    ("", "sentence 1 is empty"),
    ("   ", "is empty"),
    (" ".join(["chat"] * 50), "sentence 1 has 50 tokens, but this model reads at most 39"),
])
def test_translate_rejects_bad_input(capsys, checkpoint, sentence, match):
    code, out, err = run(capsys, "translate", "--checkpoint", str(checkpoint), sentence)
    # an empty argument is refused; an over-long one is an empty output line and a warning
    assert code == 1 and out.strip() == "" and match in err and "Traceback" not in err


def test_missing_or_corrupt_checkpoint(capsys, tmp_path):
    code, _, err = run(capsys, "translate", "--checkpoint", str(tmp_path / "no.pt"), "salut")
    assert code == 1 and "checkpoint not found" in err
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"\x00garbage" * 10)
    for command in (["translate", "le chat"], ["evaluate"]):
        code, _, err = run(capsys, *command, "--checkpoint", str(corrupt))
        assert code == 1 and "corrupt" in err and "Traceback" not in err


def test_evaluate_a_split(capsys, checkpoint):
    code, out, err = run(capsys, "evaluate", "--checkpoint", str(checkpoint), "--split",
                         "valid", "--limit", "12", "--beam", "2")
    assert code == 0, err
    assert out.startswith("valid split, 12 pairs, beam 2, with carry-over: BLEU ")
    assert "exact match" in out


def test_usage_errors_exit_with_status_2(capsys):
    for argv in ([], ["translate", "--beam", "0", "x"], ["translate", "--beam", "65", "x"],
                 ["corpus", "--num", "x"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
    assert "usage: labformer" in capsys.readouterr().err


def test_interrupt_exits_130(capsys, monkeypatch):
    import labformer.app.cli as cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, "corpus", interrupted)
    code, _, err = run(capsys, "corpus")
    assert code == 130 and "interrupted" in err


def test_console_script_help():
    script = Path(sys.executable).with_name("labformer")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "labformer.app.cli"]
    done = subprocess.run([*cmd, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == ""
    for command in ("corpus", "train", "translate", "evaluate"):
        assert command in done.stdout


# ------------------------------------------------------------- real files, checks, pipes

DATA = Path(__file__).parents[1] / "data"
EVERYDAY = everyday_pairs_path()  # package data, not tests/data


def _train_args(tmp_path, *extra: str) -> list[str]:
    return ["train", "--out", str(tmp_path / "m.pt"), "--epochs", "1", "--batch-size", "400",
            "--device", "cpu", "--quiet", *extra]


def test_version_and_every_default_in_help(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("labformer ")
    import labformer.app.cli as cli

    parser = cli._parser()
    subs = next(a for a in parser._actions if a.dest == "command").choices
    for name, sub in subs.items():
        for action in sub._actions:
            if action.dest in ("help", "sentences") or not action.option_strings:
                continue
            assert "default" in (action.help or ""), (name, action.option_strings)


def test_a_three_pair_file_is_refused_before_any_work(capsys, tmp_path):
    three = tmp_path / "three.tsv"
    three.write_text("Bonjour !\tHello!\nMerci.\tThanks.\nOui.\tYes.\n", encoding="utf-8")
    code, out, err = run(capsys, *_train_args(tmp_path, "--pairs", str(three)))
    assert code == 1 and out == "" and "3 pair(s) are too few" in err
    assert not (tmp_path / "m.pt").exists()


def test_anki_file_needs_reverse_and_tatoeba_needs_columns(capsys, tmp_path):
    code, _, err = run(capsys, *_train_args(tmp_path, "--pairs", str(DATA / "anki-fra.txt"),
                                            "--min-pairs", "1"))
    assert code == 1 and "column 1 reads as en and column 2 as fr" in err
    assert "--reverse" in err
    code, _, err = run(capsys, *_train_args(tmp_path, "--pairs",
                                            str(DATA / "tatoeba-fra-eng.tsv")))
    assert code == 1 and "holds numbers" in err
    code, _, err = run(capsys, *_train_args(tmp_path, "--pairs", str(EVERYDAY),
                                            "--src-col", "2", "--tgt-col", "2"))
    assert code == 1 and "both 2" in err


@pytest.mark.parametrize("layout, flags", [
    ("anki-fra.txt", ["--reverse"]),
    ("tatoeba-fra-eng.tsv", ["--src-col", "2", "--tgt-col", "4"]),
])
def test_train_reads_the_anki_and_tatoeba_layouts(capsys, tmp_path, layout, flags):
    code, out, err = run(capsys, *_train_args(tmp_path, "--pairs", str(DATA / layout),
                                              "--min-pairs", "1", *flags))
    assert code in (0, 3), err  # one step: it need not have learned anything
    state = load_checkpoint(tmp_path / "m.pt")
    assert state["src_text"] == {"lang": "fr", "kind": "moses", "lowercase": False}
    src_vocab = Vocab.from_dict(state["src_vocab"])
    assert "Bonjour" in src_vocab or "Elle" in src_vocab  # French, cased, on the source side
    assert "the" not in src_vocab


def test_a_too_long_pair_is_reported_by_file_and_line(capsys, tmp_path):
    lines = EVERYDAY.read_text(encoding="utf-8").splitlines()
    lines[140] = " ".join(["très"] * 70) + " bien.\tVery good."
    bad = tmp_path / "long.tsv"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, err = run(capsys, *_train_args(tmp_path, "--pairs", str(bad)))
    assert code == 1 and f"{bad}:141: the source sentence has 72 tokens" in err


def test_out_must_be_writable_and_not_locked(capsys, tmp_path, monkeypatch):
    code, _, err = run(capsys, "train", "--pairs", str(EVERYDAY), "--out", str(tmp_path))
    assert code == 1 and "is a directory" in err
    blocked = tmp_path / "file"
    blocked.write_text("x")
    code, _, err = run(capsys, "train", "--pairs", str(EVERYDAY), "--out",
                       str(blocked / "m.pt"))
    assert code == 1 and "cannot write the checkpoint" in err and "is a file" in err
    out = tmp_path / "m.pt"
    Path(str(out) + ".lock").write_text(str(os.getppid()))  # a live process holds it
    code, _, err = run(capsys, *_train_args(tmp_path, "--pairs", str(EVERYDAY)))
    assert code == 1 and f"another run (pid {os.getppid()}) is writing {out}" in err
    assert not out.exists()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    Path(str(out) + ".lock").write_text(dead)  # a stale lock: taken over, then removed
    code, _, err = run(capsys, *_train_args(tmp_path, "--pairs", str(EVERYDAY)))
    assert code in (0, 3) and "stale lock" in err and out.exists()
    assert not Path(str(out) + ".lock").exists()


def test_resume_checks_the_checkpoint_before_any_step(capsys, tmp_path):
    code, _, err = run(capsys, *_train_args(tmp_path, "--pairs", str(EVERYDAY), "--resume"))
    assert code in (0, 3) and "no checkpoint at" in err and "starting a fresh run" in err
    anki = _train_args(tmp_path, "--pairs", str(DATA / "anki-fra.txt"), "--reverse",
                       "--min-pairs", "1", "--resume")
    code, _, err = run(capsys, *anki)
    assert code == 1 and "was trained on other data or settings (its training data" in err
    state = load_checkpoint(tmp_path / "m.pt")  # a history field from another version
    state["history"]["from_the_future"] = [1.0]
    save_checkpoint(tmp_path / "m.pt", state)
    code, out, err = run(capsys, "translate", "--checkpoint", str(tmp_path / "m.pt"), "Merci.")
    assert code == 0 and len(out.splitlines()) == 1


@pytest.mark.parametrize("device, match", [("meta", "cannot run the model here"),
                                            ("mps", "MPS is not available")])
def test_unusable_devices_are_one_line(capsys, tmp_path, checkpoint, device, match):
    code, _, err = run(capsys, "translate", "--checkpoint", str(checkpoint), "--device",
                       device, "le chat")
    assert code == 1 and match in err and "Traceback" not in err
    code, _, err = run(capsys, "train", "--pairs", str(EVERYDAY), "--device", device,
                       "--out", str(tmp_path / "x.pt"))
    assert code == 1 and match in err


def test_translate_reads_standard_input(capsys, monkeypatch, checkpoint, translator):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("je suis étudiant.\n\nle chat dort.\n"))
    code, out, err = run(capsys, "translate", "--checkpoint", str(checkpoint))
    assert code == 0
    expected = translator.translate(["je suis étudiant.", "le chat dort."])
    assert out.split("\n")[:3] == [expected[0], "", expected[1]]
    monkeypatch.setattr(sys, "stdin", io.StringIO("je suis étudiant.\n"))
    code, out, _ = run(capsys, "translate", "--checkpoint", str(checkpoint), "-")
    assert code == 0 and out.splitlines() == expected[:1]


def test_an_empty_translation_comes_with_a_warning(capsys, monkeypatch, checkpoint):
    monkeypatch.setattr(Translator, "translate_detailed",
                        lambda self, s, beam=None: [Translation(x, "") for x in s])
    code, out, err = run(capsys, "translate", "--checkpoint", str(checkpoint), "le chat")
    assert code == 0 and out == "\n"
    assert "sentence 1 translated to nothing" in err


def test_corpus_into_a_closed_pipe_ends_quietly(tmp_path):
    cmd = (f"{sys.executable} -m labformer.app.cli corpus --num 3000 --num-pairs 5000 | head -2")
    done = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).parents[2])
    assert len(done.stdout.splitlines()) == 2
    assert "Traceback" not in done.stderr and "Broken pipe" not in done.stderr, done.stderr


def test_the_cased_model_is_scored_cased(capsys, monkeypatch, tmp_path):
    code, _, err = run(capsys, *_train_args(tmp_path, "--pairs", str(EVERYDAY)))
    translator = Translator.from_checkpoint(tmp_path / "m.pt")
    assert translator.cased and translator.tgt_text.lang == "en"
    refs = ["I live in Paris.", "It's 7:30."]
    monkeypatch.setattr(Translator, "translate", lambda self, s, **kw: list(refs))
    sources = ["a", "b"]
    cased = translator.evaluate(list(zip(sources, refs, strict=True)))
    assert cased["bleu"] == pytest.approx(100.0)
    lower = translator.evaluate(list(zip(sources, [r.upper() for r in refs], strict=True)))
    assert lower["exact"] == 0.0  # case counts


def _stub_scores(monkeypatch, valid_bleu: float, seen_bleu: float):
    """verdict's BLEU: ``valid_bleu`` on the held-out pairs, ``seen_bleu`` on training ones."""
    import labformer.app.cli.train as train_command
    from labformer.train import History

    def scored(translator, pairs):
        bleu = valid_bleu if pairs and pairs[0] == ("a", "b") else seen_bleu
        return bleu, ["x" for _ in pairs]

    monkeypatch.setattr(train_command, "_scored", scored)

    class Stub:
        history = History(valid_score=[valid_bleu])

    return Stub()


def test_verdict_tells_memorising_from_learning_nothing(capsys, monkeypatch):
    import labformer.app.cli as cli

    valid, data = [("a", "b")], [("c", "d")] * 3
    stub = _stub_scores(monkeypatch, 0.4, 99.0)
    assert cli._verdict(stub, valid, data) == 0  # type: ignore[arg-type]
    assert "too little data to generalise" in capsys.readouterr().err
    stub = _stub_scores(monkeypatch, 0.4, 3.0)
    assert cli._verdict(stub, valid, data) == 3  # type: ignore[arg-type]
    assert "learned nothing useful" in capsys.readouterr().err


def test_resume_reads_a_configuration_saved_before_the_newer_fields() -> None:
    """A checkpoint's model_config from before scale_scores/residual existed, with the old
    boolean tie_embeddings, matches the configuration it stands for, and only that one."""
    from labformer import TransformerConfig
    from labformer.app.translate import _same_entry

    new = dataclasses.asdict(TransformerConfig(src_vocab_size=12, tgt_vocab_size=12,
                                               tie_embeddings="output"))
    old = {k: v for k, v in new.items() if k not in ("scale_scores", "residual")}
    old["tie_embeddings"] = True
    assert _same_entry("model_config", old, new)
    assert not _same_entry("model_config", {**old, "d_model": 64}, new)
    assert not _same_entry("model_config", {**old, "no_such_field": 1}, new)


# ------------------------------------------- work kept, data checked, lines carried over


@pytest.fixture(scope="module")
def everyday(tmp_path_factory) -> Path:
    """A one-step model of the everyday file (cased, Moses): behaviour, not quality."""
    path = tmp_path_factory.mktemp("everyday") / "m.pt"
    code = main(["train", "--pairs", str(EVERYDAY), "--out", str(path), "--epochs", "1",
                 "--batch-size", "400", "--device", "cpu", "--quiet"])
    assert code in (0, 3) and path.exists()
    return path


def test_a_finished_model_is_never_overwritten_unasked(capsys, monkeypatch, tmp_path,
                                                       everyday):
    out = tmp_path / "m.pt"
    out.write_bytes(everyday.read_bytes())
    before = out.read_bytes()
    code, _, err = run(capsys, *_train_args(tmp_path, "--pairs", str(EVERYDAY)))
    assert code == 1 and f"{out} exists" in err and "--resume" in err and "--overwrite" in err
    assert out.read_bytes() == before  # byte-identical
    assert not Path(f"{out}.partial").exists() and not Path(f"{out}.lock").exists()
    code, _, err = run(capsys, *_train_args(tmp_path, "--pairs", str(EVERYDAY), "--resume",
                                            "--overwrite"))
    assert code == 1 and "choose one" in err and out.read_bytes() == before
    _stub_scores(monkeypatch, 30.0, 30.0)  # the new model passes the run's check
    code, stdout, err = run(capsys, *_train_args(tmp_path, "--pairs", str(EVERYDAY),
                                                 "--overwrite", "--seed", "3"))
    assert code == 0 and out.read_bytes() != before, err
    assert f"checkpoint: {out} (it replaces the previous model)" in stdout
    assert not Path(f"{out}.partial").exists()
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # readable by the group, as usual


@pytest.mark.parametrize("how, status", [("ctrl-c", 130), ("sigterm", 143)])
def test_an_interrupted_run_keeps_its_last_save_and_says_how_to_resume(
        capsys, monkeypatch, tmp_path, how, status):
    import signal

    real = labformer.app.translate.train_translator

    def interrupted(*args, **kwargs):
        real(*args, **kwargs)  # one epoch, saved to the side file
        assert str(kwargs["checkpoint"]).endswith(".partial")
        if how == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
        raise KeyboardInterrupt

    monkeypatch.setattr(labformer.app.translate, "train_translator", interrupted)
    out = tmp_path / "m.pt"
    args = _train_args(tmp_path, "--pairs", str(EVERYDAY))
    code, _, err = run(capsys, *args)
    assert code == status, err
    assert f"the last save, after epoch 1 of 1, is {out}" in err
    assert f"continue with: labformer train --out {out}" in err and "--resume" in err
    assert out.exists() and not Path(f"{out}.partial").exists()
    assert not Path(f"{out}.lock").exists()
    assert signal.getsignal(signal.SIGTERM) is not None


def test_resume_says_where_it_starts(capsys, tmp_path):
    args = _train_args(tmp_path, "--pairs", str(EVERYDAY))
    code, _, _ = run(capsys, *args)
    code, out, err = run(capsys, *args, "--epochs", "2", "--resume")
    assert code in (0, 3), err
    assert f"resuming {tmp_path / 'm.pt'} after epoch 1 (of 2)" in out
    assert load_checkpoint(tmp_path / "m.pt")["epoch"] == 1
    log = (tmp_path / "m.pt.log").read_text()
    assert "resuming" in log and "vocabulary:" in log and "trained 2 steps" in log


def test_the_setup_banner_and_the_log_file(capsys, tmp_path):
    code, out, err = run(capsys, *_train_args(tmp_path, "--pairs", str(EVERYDAY)))
    assert code in (0, 3), err
    assert "data: 309 pairs read from" in out and "validation: 15 pairs held out" in out
    assert "parameters; device: cpu; 1 epochs of 1 steps (1 steps), batch 400" in out
    assert "training BLEU" in out and "validation BLEU" in out
    log = (tmp_path / "m.pt.log").read_text()
    assert "vocabulary:" in log and "epoch 1/1: loss" in log and "validation BLEU" in log


def test_duplicates_and_a_header_line_are_reported(capsys, tmp_path):
    lines = EVERYDAY.read_text(encoding="utf-8").splitlines()
    doubled = tmp_path / "doubled.tsv"
    doubled.write_text("French\tEnglish\n" + "\n".join(lines + lines[:100]) + "\n",
                       encoding="utf-8")
    code, out, err = run(capsys, *_train_args(tmp_path, "--pairs", str(doubled)))
    assert code in (0, 3), err
    assert f"{doubled}:1: skipped a header line ('French', 'English'" in err
    assert "merged 100 repeated pair(s)" in err
    state = load_checkpoint(tmp_path / "m.pt")
    valid = {tuple(p) for p in state["corpus"]["valid"]}
    assert len(valid) == 15 and ("French", "English") not in valid
    train_pairs = lines and {tuple(line.split("\t")[:2]) for line in lines} - valid
    assert len(train_pairs) == 294  # no held-out pair is also a training pair


def test_evaluate_checks_the_file_as_train_does(capsys, tmp_path, everyday):
    anki = str(DATA / "anki-fra.txt")
    code, out, err = run(capsys, "evaluate", "--checkpoint", str(everyday), "--pairs", anki)
    assert code == 1 and out == "" and "column 1 reads as en and column 2 as fr" in err
    assert "--reverse" in err
    code, out, err = run(capsys, "evaluate", "--checkpoint", str(everyday), "--pairs", anki,
                         "--reverse")
    assert code == 0 and "BLEU" in out, err
    header = tmp_path / "header.tsv"
    header.write_text("source\ttarget\nMerci.\tThanks.\n", encoding="utf-8")
    code, out, err = run(capsys, "evaluate", "--checkpoint", str(everyday), "--pairs",
                         str(header))
    assert code == 0 and "skipped a header line" in err and ", 1 pairs," in out


def test_a_checkpoint_given_as_pairs_is_named_as_such(capsys, tmp_path, everyday):
    for command in (_train_args(tmp_path, "--pairs", str(everyday)),
                    ["evaluate", "--checkpoint", str(everyday), "--pairs", str(everyday)]):
        code, out, err = run(capsys, *command)
        assert code == 1 and f"{everyday} is a zip archive (a PyTorch or labformer " \
                             f"checkpoint?), not a text file of sentence pairs" in err
        assert err.isascii() and "\\x" not in err and "PK" not in err


def test_valid_file_and_evaluate_split_valid(capsys, tmp_path):
    held = tmp_path / "held.tsv"
    held.write_text("Il est 10 h 15.\tIt's 10:15.\nJe suis là.\tI'm here.\n"
                    "Bonjour !\tHello!\n", encoding="utf-8")  # the last is a training pair
    code, out, err = run(capsys, *_train_args(tmp_path, "--pairs", str(EVERYDAY), "--valid",
                                              str(held)))
    assert code in (0, 3), err
    assert f"validation: 2 pairs of {held}" in out and "1 pair(s) are also training" in err
    assert "only 2 pairs: a rough estimate" in out
    state = load_checkpoint(tmp_path / "m.pt")
    assert state["corpus"]["valid"] == [["Il est 10 h 15.", "It's 10:15."],
                                        ["Je suis là.", "I'm here."]]
    code, out, err = run(capsys, "evaluate", "--checkpoint", str(tmp_path / "m.pt"),
                         "--split", "valid", "--output", str(tmp_path / "hyps.txt"))
    assert code == 0, err
    assert out.startswith(f"held-out pairs of {held}, 2 pairs, greedy, with carry-over: BLEU")
    assert "sacreBLEU signature: nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in out
    assert len((tmp_path / "hyps.txt").read_text().splitlines()) == 2
    code, _, err = run(capsys, *_train_args(tmp_path, "--valid", str(held)))
    assert code == 1 and "--valid goes with --pairs" in err


def test_training_bleu_far_above_validation_is_a_warning(capsys, monkeypatch):
    import labformer.app.cli as cli

    stub = _stub_scores(monkeypatch, 30.0, 95.0)
    assert cli._verdict(stub, [("a", "b")] * 60, [("c", "d")] * 3) == 0  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert "training BLEU 95.0 (3 pairs), validation BLEU 30.0 (60 held-out pairs; greedy, " \
           "with carry-over, as `labformer evaluate --split valid`)" in out
    assert "far better than held-out ones" in err and "memorised" in err
    stub = _stub_scores(monkeypatch, 90.0, 95.0)
    assert cli._verdict(stub, [("a", "b")] * 60, [("c", "d")] * 3) == 0  # type: ignore[arg-type]
    assert capsys.readouterr().err == ""


def test_a_long_line_amid_others(capsys, monkeypatch, everyday):
    import io

    long_line = " ".join(["très"] * 70) + " bien."
    lines = ["Merci beaucoup.", long_line, "", "Bonjour !"]
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(lines) + "\n"))
    code, out, err = run(capsys, "translate", "--checkpoint", str(everyday))
    assert code == 1
    got = out.split("\n")[:4]
    translator = Translator.from_checkpoint(everyday)
    from labformer.app.carry import translate_carried

    expected = [t.text for t in translate_carried(translator, [lines[0], lines[3]])]
    assert got == [expected[0], "", "", expected[1]]
    assert "line 2 has 72 tokens, but this model reads at most 63" in err
    assert "1 line(s) could not be translated" in err and "Traceback" not in err
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(lines) + "\n"))
    code, out, err = run(capsys, "translate", "--checkpoint", str(everyday), "--max-length",
                         "20")
    assert code == 0 and "line 2 has 72 tokens: cropped to its first 20" in err
    assert len(out.split("\n")[:4]) == 4


def test_a_failing_line_does_not_stop_the_others(capsys, monkeypatch, everyday):
    real = Translator.translate_detailed

    def fragile(self, sentences, beam=None):
        if any("Bonsoir" in s for s in sentences):
            raise RuntimeError("out of memory\nmore")
        return real(self, sentences, beam=beam)

    from labformer.app.carry import translate_carried

    expected = [t.text for t in translate_carried(Translator.from_checkpoint(everyday),
                                                  ["Merci.", "Oui."])]
    monkeypatch.setattr(Translator, "translate_detailed", fragile)
    code, out, err = run(capsys, "translate", "--checkpoint", str(everyday), "Merci.",
                         "Bonsoir, madame.", "Oui.")
    assert code == 1 and out.split("\n")[:3] == [expected[0], "", expected[1]]
    assert "sentence 2 could not be translated (out of memory)" in err


def test_je_Je_and_JE_translate_alike(capsys, everyday):
    from labformer.app.carry import Carry

    sources = ["je suis là.", "Je suis là.", "JE SUIS LÀ."]
    carry = Carry.of(Translator.from_checkpoint(everyday))
    assert {carry.prepare(s).text for s in sources} == {"Je suis là."}
    code, out, _ = run(capsys, "translate", "--checkpoint", str(everyday), *sources)
    assert code == 0 and len(set(out.splitlines())) == 1


def test_translate_scores(capsys, everyday):
    code, out, err = run(capsys, "translate", "--checkpoint", str(everyday), "--scores",
                         "Merci.", "Bonjour !")
    assert code == 0, err
    for line in out.splitlines():
        value, _, text = line.partition("\t")
        assert float(value) <= 0.0


def test_unseen_numbers_in_known_phrases_are_kept(tmp_path):
    """A model that learned a few numbers in a few phrases keeps every number it never
    saw, in English form; without carrying over, it writes the ones it knows."""
    from labformer.app.carry import translate_carried

    seen_hours, seen_prices = (7, 8, 9), ("2,50", "3", "12")
    pairs = []
    for h in seen_hours:
        for m in ("15", "30", "45"):
            pairs += [(f"Il est {h} h {m}.", f"It's {h}:{m}."),
                      (f"Le bus part à {h} h {m}.", f"The bus leaves at {h}:{m}.")]
    for p in seen_prices:
        pairs += [(f"Ça coûte {p} euros.", f"It costs {p.replace(',', '.')} euros."),
                  (f"Le billet coûte {p} euros.", f"The ticket costs {p.replace(',', '.')} "
                                                   f"euros.")]
    t = train_translator(pairs * 8, epochs=40, batch_size=32, model_overrides=TINY,
                         device="cpu", progress=False)
    probe = {"Il est 10 h 20.": "It's 10:20.", "Le bus part à 6 h 05.": "The bus leaves at 6:05.",
             "Ça coûte 7,25 euros.": "It costs 7.25 euros.",
             "Le billet coûte 40 euros.": "The ticket costs 40 euros."}
    assert t.translate("Il est 8 h 30.") == "It's 8:30."  # it learned the phrases
    carried = [c.text for c in translate_carried(t, list(probe))]
    assert carried == list(probe.values())
    assert t.translate(list(probe)) != list(probe.values())  # the model alone does not


def test_usage_errors_speak_the_users_words(capsys):
    for argv, words in ((["translate", "--beam", "x", "y"],
                         "argument --beam: expected a whole number, got 'x'"),
                        (["translate", "--beam", "65", "y"],
                         "a beam holds 1 to 64 hypotheses, got 65"),
                        (["train", "--seed", "99999999999999999999"],
                         "a seed is a whole number from 0 to 4294967295"),
                        (["train", "--seed", "-1"], "a seed is a whole number"),
                        (["train", "--min-pairs", "many"], "expected a whole number")):
        with pytest.raises(SystemExit) as e:
            main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and words in err
        assert "_beam" not in err and "invalid" not in err


def test_resuming_a_checkpoint_of_the_other_recipe_is_refused_with_the_reason(capsys, tmp_path):
    ck = tmp_path / "run.pt"
    args = ["train", "--out", str(ck), "--num-pairs", "2100", "--device", "cpu",
            "--batch-size", "50", "--quiet", "--epochs", "1"]
    code, _, err = run(capsys, *args, "--recipe", "paper")
    assert code == 3, err  # 2 steps learn nothing; the file is written all the same
    before = ck.read_bytes()
    code, _, err = run(capsys, *args, "--resume")  # the default recipe is quick
    assert code != 0 and "resume with the file's --recipe" in err, err
    assert ck.read_bytes() == before
