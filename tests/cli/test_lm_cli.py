"""`labformer lm train` / `labformer lm sample` on a text the repository does not ship, and the
held-out split of the shipped Shakespeare."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from labformer.app.cli import main
from labformer.data.text_corpus import (
    PLAYS,
    CharTokenizer,
    plays,
    shakespeare,
    shakespeare_path,
    shakespeare_split,
    split_text,
)

ROOT = Path(__file__).resolve().parents[2]
# Not shipped: written here, with non-ASCII letters, so the tokenizer is trained on new text.
VERSE = ("Über den Bergen, où l'été s'attarde,\n"
         "le café est noir — und die Nacht ist lang.\n"
         "Ça chante: naïve, façade, fiancée, Ærø.\n")
TINY = ["--steps", "6", "--context", "16", "--d-model", "16", "--layers", "1", "--heads", "2",
        "--batch-size", "4", "--eval-every", "3", "--quiet"]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse's usage errors
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def text(tmp_path: Path) -> Path:
    path = tmp_path / "verse.txt"
    path.write_text(VERSE * 20, encoding="utf-8")
    return path


@pytest.fixture
def trained(tmp_path: Path, text: Path, capsys) -> Path:
    out = tmp_path / "m.pt"
    code, stdout, err = run(capsys, "lm", "train", "--text", str(text), "--out", str(out), *TINY)
    assert code == 0, err
    assert "valid loss" in stdout and "step 6/6" in stdout
    return out


# --- the shipped text and its split -----------------------------------------------------------


def test_the_shipped_text_is_eight_plays_of_about_a_megabyte():
    data = shakespeare()
    assert 1_000_000 < len(data.encode("utf-8")) < 1_100_000
    assert [title for title, _ in plays()] == list(PLAYS)
    assert "".join(t for _, t in plays()) == data
    assert "Gutenberg" not in data and "*** START" not in data  # the boilerplate is gone
    assert shakespeare_path().with_suffix(".md").is_file()  # its provenance


def _blocks(text: str, k: int = 3) -> set[str]:
    """Every run of k consecutive non-blank lines (a line alone repeats: "[Exit.]")."""
    lines = [line for line in text.splitlines() if line.strip()]
    return {"\n".join(lines[i:i + k]) for i in range(len(lines) - k + 1)}


def test_no_held_out_block_of_lines_is_in_the_training_text():
    train, valid = shakespeare_split()
    assert valid.startswith("THE TEMPEST") and 0.08 < len(valid) / len(shakespeare()) < 0.11
    leaked = _blocks(valid) & _blocks(train)
    assert not leaked, sorted(leaked)[:3]
    long_lines = {line for line in valid.splitlines() if len(line) > 30}
    assert len(long_lines) > 1500 and not long_lines & set(train.splitlines())
    train, valid = split_text(shakespeare(), 0.1)
    assert train + valid == shakespeare()  # contiguous: the end of the text, whole lines
    assert not _blocks(valid) & _blocks(train)


@pytest.mark.parametrize("blocks", [1, 3, 7])
def test_split_text_keeps_every_line_once_in_contiguous_blocks(blocks):
    lines = [f"line {i}\n" for i in range(500)]
    train, valid = split_text("".join(lines), 0.2, blocks)
    t, v = train.splitlines(keepends=True), valid.splitlines(keepends=True)
    assert sorted(t + v) == sorted(lines) and not set(t) & set(v)
    assert 0.15 < len(v) / len(lines) < 0.25
    # Held out: `blocks` runs of consecutive lines. (Lines drawn at random -- the planted bug
    # -- would give about as many runs as held-out lines, each with its neighbours in training.)
    numbers = [int(line.split()[1]) for line in v]
    runs = 1 + sum(b != a + 1 for a, b in zip(numbers, numbers[1:], strict=False))
    assert runs == blocks


def test_char_tokenizer_round_trips_and_names_unknown_characters():
    tok = CharTokenizer.train(VERSE)
    assert tok.decode(tok.encode(VERSE)) == VERSE
    with pytest.raises(ValueError, match="'Z'"):
        tok.encode("Zebra")


# --- labformer lm train / sample -------------------------------------------------------------


def test_same_seed_same_text_other_seed_other_text(trained, capsys):
    sample = ["lm", "sample", "--checkpoint", str(trained), "--prompt", "Über", "--max-new",
              "60"]
    code, a, err = run(capsys, *sample, "--seed", "1")
    assert code == 0, err
    _, b, _ = run(capsys, *sample, "--seed", "1")
    _, c, _ = run(capsys, *sample, "--seed", "2")
    assert a == b and a != c
    assert a.startswith("Über") and len(a.rstrip("\n")) == 4 + 60  # characters: 1 token each
    # Longer than the model's context (16): it slides, still reproducible.
    _, d, _ = run(capsys, *sample[:-1], "100", "--seed", "3", "--top-k", "5", "--top-p", "0.9")
    _, e, _ = run(capsys, *sample[:-1], "100", "--seed", "3", "--top-k", "5", "--top-p", "0.9")
    assert d == e and len(d.rstrip("\n")) == 104


def test_resume_continues_exactly(tmp_path, text, capsys):
    straight, sliced = tmp_path / "a.pt", tmp_path / "b.pt"
    assert run(capsys, "lm", "train", "--text", str(text), "--out", str(straight), *TINY)[0] == 0
    code, out, err = run(capsys, "lm", "train", "--text", str(text), "--out", str(sliced),
                         *TINY, "--stop-after", "4")
    assert code == 0, err
    assert "2 steps left" in out
    code, out, err = run(capsys, "lm", "train", "--text", str(text), "--out", str(sliced),
                         *TINY, "--resume")
    assert code == 0, err
    assert "resuming" in out and "trained 6 of 6 steps" in out
    a = torch.load(straight, weights_only=True)
    b = torch.load(sliced, weights_only=True)
    assert a["losses"] == b["losses"] and len(a["losses"]) == 6
    for name, p in a["model"].items():
        assert torch.equal(p, b["model"][name]), name
    # A finished run asked to go on to the same total says what to do.
    code, _, err = run(capsys, "lm", "train", "--text", str(text), "--out", str(sliced), *TINY,
                       "--resume")
    assert code == 1 and "already trained 6 steps" in err and len(err.splitlines()) == 1


def test_a_stopped_run_keeps_its_last_save_and_resumes(tmp_path, text, capsys):
    out = tmp_path / "m.pt"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "labformer.app.cli", "lm", "train", "--text", str(text),
           "--out", str(out), "--steps", "100000", "--context", "16", "--d-model", "16",
           "--layers", "1", "--heads", "2", "--batch-size", "4", "--eval-every", "5", "--quiet"]
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    partial = Path(str(out) + ".partial")
    deadline = time.monotonic() + 120
    while not partial.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert len(err.strip().splitlines()) == 1, err
    assert "interrupted; the last save, after step" in err and "--resume" in err
    assert out.is_file() and not partial.exists() and not Path(str(out) + ".lock").exists()
    saved = int(torch.load(out, weights_only=True)["step"])
    assert saved >= 5
    code, stdout, err = run(capsys, "lm", "train", *cmd[cmd.index("--text"):], "--resume",
                            "--stop-after", "3")
    assert code == 0, err
    assert f"resuming {out} after step {saved}" in stdout
    assert int(torch.load(out, weights_only=True)["step"]) == saved + 3


def test_refuses_to_replace_a_file_it_did_not_write(tmp_path, text, capsys):
    foreign = tmp_path / "notes.pt"
    foreign.write_text("my notes, not a model\n")
    for extra in ([], ["--overwrite"]):
        code, _, err = run(capsys, "lm", "train", "--text", str(text), "--out", str(foreign),
                           *TINY, *extra)
        assert code == 1 and "not a labformer checkpoint" in err and len(err.splitlines()) == 1
    assert foreign.read_text() == "my notes, not a model\n"
    code, _, err = run(capsys, "lm", "train", "--text", str(text), "--out", str(text), *TINY)
    assert code == 1 and len(err.splitlines()) == 1
    assert text.read_text(encoding="utf-8") == VERSE * 20


def test_an_existing_model_is_kept_unless_asked(trained, text, capsys):
    before = trained.read_bytes()
    code, _, err = run(capsys, "lm", "train", "--text", str(text), "--out", str(trained), *TINY)
    assert code == 1 and "--resume" in err and "--overwrite" in err
    assert trained.read_bytes() == before
    code, _, err = run(capsys, "lm", "train", "--text", str(text), "--out", str(trained), *TINY,
                       "--overwrite", "--seed", "5")
    assert code == 0, err
    assert trained.read_bytes() != before


def test_a_translator_checkpoint_is_not_sampled(trained, tmp_path, capsys):
    from labformer.train import load_checkpoint, save_checkpoint

    state = load_checkpoint(trained)
    state.pop("weights_sha256"), state.pop("state_sha256"), state.pop("format")
    state["kind"] = "translator"
    other = tmp_path / "other.pt"
    save_checkpoint(other, state)
    code, _, err = run(capsys, "lm", "sample", "--checkpoint", str(other), "--seed", "0")
    assert code == 1 and "not a language model" in err and len(err.splitlines()) == 1


def test_bad_input_is_one_line(tmp_path, text, trained, capsys):
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("café au lait\n".encode("latin-1") * 50)
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    short = tmp_path / "short.txt"
    short.write_text("To be.\n")
    out = str(tmp_path / "x.pt")
    for argv, words in (
            (["--text", str(tmp_path / "missing.txt")], "no such file"),
            (["--text", str(tmp_path)], "is a directory"),
            (["--text", str(latin1)], "not valid UTF-8 (line 1"),
            (["--text", str(empty)], "is empty"),
            (["--text", str(short)], "too short"),
            (["--text", str(trained)], "not a UTF-8 text file"),
            (["--text", str(text), "--heads", "3"], "not a multiple of --heads")):
        code, _, err = run(capsys, "lm", "train", "--out", out, *TINY, *argv)
        assert code == 1, (argv, err)
        assert words in err and len(err.splitlines()) == 1, err
        assert err.startswith("labformer: error: ") and "Traceback" not in err
    assert not os.path.exists(out)
    code, _, err = run(capsys, "lm", "sample", "--checkpoint", str(trained), "--prompt", "Zzz",
                       "--seed", "0")
    assert code == 1 and "never saw" in err and len(err.splitlines()) == 1
    code, _, err = run(capsys, "lm", "sample", "--checkpoint", str(tmp_path / "none.pt"))
    assert code == 1 and "not found" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("argv, words", [
    (["train", "--text", "t.txt", "--out", "m.pt", "--steps", "many"], "expected a whole number"),
    (["train", "--text", "t.txt", "--out", "m.pt", "--steps", "0"], "expected a positive"),
    (["train", "--text", "t.txt", "--out", "m.pt", "--lr", "-1"], "expected a positive number"),
    (["train", "--text", "t.txt", "--out", "m.pt", "--valid-fraction", "1.5"], "between 0 and 1"),
    (["sample", "--checkpoint", "m.pt", "--temperature", "0"], "expected a positive number"),
    (["sample", "--checkpoint", "m.pt", "--top-p", "1.2"], "top-p is a probability mass"),
    (["sample", "--checkpoint", "m.pt", "--seed", "-3"], "a seed is a whole number"),
])
def test_bad_numbers_are_usage_errors(argv, words, capsys):
    code, _, err = run(capsys, "lm", *argv)
    assert code == 2 and words in err
    assert err.splitlines()[-1].startswith("labformer lm ")  # usage, then one error line
    assert "Traceback" not in err


def test_bpe_tokenizer_trains_and_samples(tmp_path, text, capsys):
    out = tmp_path / "bpe.pt"
    code, stdout, err = run(capsys, "lm", "train", "--text", str(text), "--out", str(out),
                            *TINY, "--tokenizer", "bpe", "--vocab-size", "300")
    assert code == 0, err
    assert "byte-level BPE" in stdout
    sample = ["lm", "sample", "--checkpoint", str(out), "--prompt", "Ça", "--max-new", "20"]
    a, b = run(capsys, *sample, "--seed", "4")[1], run(capsys, *sample, "--seed", "4")[1]
    assert a == b and a.startswith("Ça")


# --- data-parallel ----------------------------------------------------------------------------


@pytest.mark.solo
@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed missing")
def test_two_processes_train_as_one_with_the_doubled_batch(tmp_path, text):
    """torchrun, 2 CPU processes (gloo), --batch-size 4 each, against one process with
    --batch-size 8: the same windows, the gradients averaged. The step losses and the weights
    agree to 1e-5 (float sums in another order; measured here: 2.4e-7 and 1.9e-7)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    common = ["--text", str(text), "--steps", "6", "--context", "16", "--d-model", "16",
              "--layers", "1", "--heads", "2", "--eval-every", "3", "--quiet"]
    two = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
           "2", "-m", "labformer.app.cli", "lm", "train", *common, "--batch-size", "4",
           "--out", str(tmp_path / "two.pt")]
    one = [sys.executable, "-m", "labformer.app.cli", "lm", "train", *common, "--batch-size",
           "8", "--out", str(tmp_path / "one.pt")]
    for cmd in (two, one):
        done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=240)
        assert done.returncode == 0, done.stderr[-3000:]
    a = torch.load(tmp_path / "two.pt", weights_only=True)
    b = torch.load(tmp_path / "one.pt", weights_only=True)
    assert a["world"] == 2 and b["world"] == 1
    assert a["losses"] == pytest.approx(b["losses"], abs=1e-5)
    for name, p in a["model"].items():
        torch.testing.assert_close(p, b["model"][name], atol=1e-5, rtol=0)
