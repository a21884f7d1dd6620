"""``labformer train`` never destroys a file: inputs, text files, another run's log, the old
model of an interrupted --overwrite; its saves are bounded; an unfinished model says so."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import labformer.app.translate
import labformer.train
from labformer.app.cli import main
from labformer.app.translate import Translator
from labformer.data import everyday_pairs_path
from labformer.train import load_checkpoint, save_checkpoint

EVERYDAY = everyday_pairs_path()


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def no_verdict_translations(monkeypatch):
    """The end-of-run BLEU translates hundreds of pairs with an untrained model: not what is
    tested here (tests/cli/test_cli.py covers it)."""
    import labformer.app.cli.train as train_command

    monkeypatch.setattr(train_command, "_scored", lambda translator, pairs: (0.0, ["x"] * len(
        pairs)))


def one_step(out: Path, *extra: str) -> list[str]:
    """A one-step run on the everyday pairs (seconds): behaviour, not quality."""
    return ["train", "--pairs", str(EVERYDAY), "--out", str(out), "--epochs", "1",
            "--batch-size", "400", "--device", "cpu", "--quiet", *extra]


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("model") / "m.pt"
    assert main(one_step(path)) in (0, 3)
    return path


def test_overwrite_onto_the_pairs_file_is_refused(capsys, tmp_path):
    pairs = tmp_path / "copy.tsv"
    pairs.write_bytes(EVERYDAY.read_bytes())
    before = pairs.read_bytes()
    for flags in ([], ["--overwrite"], ["--resume"]):
        code, _, err = run(capsys, "train", "--pairs", str(pairs), "--out", str(pairs),
                           "--device", "cpu", *flags)
        assert code == 1 and str(pairs) in err and "unchanged" in err, err
        assert pairs.read_bytes() == before
    held = tmp_path / "held.tsv"
    held.write_text("Merci.\tThanks.\n", encoding="utf-8")
    code, _, err = run(capsys, *one_step(held, "--valid", str(held), "--overwrite"))
    assert code == 1 and "is the --valid file" in err
    assert held.read_text(encoding="utf-8") == "Merci.\tThanks.\n"
    assert not list(tmp_path.glob("*.partial")) and not list(tmp_path.glob("*.lock"))


@pytest.mark.parametrize("flag", ["--overwrite", "--resume", None])
def test_a_text_file_is_never_taken_for_a_model(capsys, tmp_path, flag):
    notes = tmp_path / "notes.txt"
    notes.write_text("shopping: bread, milk\n", encoding="utf-8")
    code, _, err = run(capsys, *one_step(notes, *([flag] if flag else [])))
    assert code == 1 and f"{notes} exists and is a text file, not a labformer checkpoint" in err
    assert "trained model" not in err and "weights_only" not in err
    assert notes.read_text(encoding="utf-8") == "shopping: bread, milk\n"
    assert not Path(f"{notes}.log").exists() and not Path(f"{notes}.lock").exists()


def test_an_interrupted_overwrite_keeps_the_old_model(capsys, monkeypatch, tmp_path, model):
    out = tmp_path / "m.pt"
    out.write_bytes(model.read_bytes())
    before = out.read_bytes()
    real = labformer.app.translate.train_translator

    def interrupted(*args, **kwargs):
        real(*args, **kwargs)  # its epochs are saved to the side file
        raise KeyboardInterrupt

    monkeypatch.setattr(labformer.app.translate, "train_translator", interrupted)
    code, _, err = run(capsys, *one_step(out, "--overwrite", "--seed", "3", "--epochs", "2"))
    assert code == 130
    assert f"{out} is unchanged (the model it held is kept)" in err
    assert f"after epoch 2 of 2, is {out}.partial" in err and "--resume" in err
    assert out.read_bytes() == before  # the finished model, byte for byte
    Translator.from_checkpoint(out)  # and loadable
    assert load_checkpoint(f"{out}.partial")["train_config"]["seed"] == 3
    assert not Path(f"{out}.lock").exists()
    # Without --resume or --overwrite the side file is not thrown away either.
    monkeypatch.setattr(labformer.app.translate, "train_translator", real)
    code, _, err = run(capsys, *one_step(out, "--seed", "3", "--epochs", "2"))
    assert code == 1 and f"{out}.partial holds a finished model that did not replace" in err
    # --resume continues the side file, and only its end, once it passes the run's quality
    # check, replaces the old model (tests/cli/test_faults.py: a failed check keeps it).
    import labformer.app.cli.train as train_command

    monkeypatch.setattr(train_command, "_scored", lambda translator, pairs: (
        60.0, ["x"] * len(pairs)))
    code, out_text, err = run(capsys, *one_step(out, "--seed", "3", "--epochs", "2",
                                                "--resume"))
    assert code == 0, err
    assert f"resuming {out}.partial after epoch 2 (of 2)" in out_text
    assert out.read_bytes() != before and not Path(f"{out}.partial").exists()
    assert load_checkpoint(out)["train_config"]["seed"] == 3


def test_an_unfinished_model_says_so(capsys, tmp_path, model):
    state = load_checkpoint(model)
    state["epochs"] = state["epoch"] + 6  # saved after epoch 1 of 6
    unfinished = tmp_path / "early.pt"
    save_checkpoint(unfinished, state)
    for command in (["translate", "Merci."], ["evaluate", "--split", "valid"]):
        code, _, err = run(capsys, *command, "--checkpoint", str(unfinished))
        assert code == 0, err
        assert f"{unfinished} is an unfinished run (saved after epoch 1 of 6)" in err
        assert "--resume" in err
    code, _, err = run(capsys, "translate", "Merci.", "--checkpoint", str(model))
    assert code == 0 and "unfinished" not in err


def test_a_refused_run_leaves_the_running_jobs_files_alone(capsys, tmp_path):
    out = tmp_path / "m.pt"
    log, partial = Path(f"{out}.log"), Path(f"{out}.partial")
    log.write_text("\n2026-01-01 10:00:00 ---- labformer train --out m.pt\n"
                   "2026-01-01 10:05:00 epoch 12/267: loss 2.000\n", encoding="utf-8")
    Path(f"{out}.lock").write_text(str(os.getppid()))  # a live process: the running job
    log_before = log.read_bytes()
    code, out_text, err = run(capsys, *one_step(out, "--overwrite"))
    assert code == 1 and f"another run (pid {os.getppid()}) is writing {out}" in err
    assert log.read_bytes() == log_before and not out.exists() and not partial.exists()
    assert Path(f"{out}.lock").read_text() == str(os.getppid())


def test_a_lock_file_that_is_not_ours_is_left_alone(capsys, tmp_path):
    out = tmp_path / "m.pt"
    Path(f"{out}.lock").write_text("my notes")
    code, _, err = run(capsys, *one_step(out))
    assert code == 1 and "is not a labformer lock" in err
    assert Path(f"{out}.lock").read_text() == "my notes"


def test_each_checkpoint_has_its_own_log(capsys, tmp_path):
    keep_log = tmp_path / "keep.log"
    keep_log.write_text("my own log\n", encoding="utf-8")
    for name in ("keep.pt", "keep.pth"):
        code, _, err = run(capsys, *one_step(tmp_path / name))
        assert code in (0, 3), err
    assert keep_log.read_text(encoding="utf-8") == "my own log\n"
    pt, pth = (tmp_path / "keep.pt.log").read_text(), (tmp_path / "keep.pth.log").read_text()
    assert "--out" in pt and str(tmp_path / "keep.pt ") in pt + " "
    assert str(tmp_path / "keep.pth") in pth and str(tmp_path / "keep.pt ") not in pth
    # A second run appends to its log: an earlier run's lines stay.
    code, _, _ = run(capsys, *one_step(tmp_path / "keep.pt", "--overwrite"))
    assert (tmp_path / "keep.pt.log").read_text().startswith(pt)


@pytest.mark.parametrize("every, expected", [(1e9, [0, 5]), (0.0, list(range(6)))])
def test_saves_are_bounded_in_time(capsys, monkeypatch, tmp_path, every, expected):
    import labformer.app.cli.runs as runs

    saves = []
    real = labformer.train.save_checkpoint
    monkeypatch.setattr(labformer.train, "save_checkpoint",
                        lambda path, state: saves.append(state["epoch"]) or real(path, state))
    assert runs.SAVE_EVERY == 60.0  # the command's: at most one save a minute
    monkeypatch.setattr(runs, "SAVE_EVERY", every)
    code, _, err = run(capsys, *one_step(tmp_path / "m.pt", "--epochs", "6"))
    assert code in (0, 3), err
    # the first and the last epoch are saved, and in between at most one every `every` s
    assert saves == expected
    state = load_checkpoint(tmp_path / "m.pt")
    assert (state["epoch"], state["epochs"]) == (5, 6)


def test_resume_onto_a_text_file_is_one_clear_line(capsys, tmp_path):
    text = tmp_path / "m.pt"
    text.write_text("not a model\n", encoding="utf-8")
    code, _, err = run(capsys, *one_step(text, "--resume"))
    assert code == 1 and "is a text file, not a labformer checkpoint" in err
    assert "weights_only" not in err and len(err.strip().splitlines()) == 1
