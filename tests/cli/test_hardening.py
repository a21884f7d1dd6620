"""The probes of issue 58, one test each: outputs written only where the command made them
before, checkpoints whose every entry is checked, a lock two runs cannot both take, carry-over
that loses nothing without a word, and one clear line for each bad input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from cli_helpers import assert_short_error, run

import labformer.app.cli.train as train_command
from labformer.app.cli import main
from labformer.app.export import MODEL_FILE
from labformer.app.translate import train_translator
from labformer.data import everyday_pairs_path, read_pairs
from labformer.train import CHECKSUMS, load_checkpoint

EVERYDAY = everyday_pairs_path()
TINY = dict(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32,
            dropout=0.0, max_len=40)

@pytest.fixture(autouse=True)
def quick_verdict(monkeypatch):
    """The end-of-run check translates hundreds of pairs: a stub that fails it (BLEU 0)."""
    monkeypatch.setattr(train_command, "_scored",
                        lambda translator, pairs: (0.0, ["x"] * len(pairs)))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A tiny translator of the everyday pairs (well under a second to train)."""
    path = tmp_path_factory.mktemp("tiny") / "tiny.pt"
    pairs = [(p.src, p.tgt) for p in read_pairs(EVERYDAY)]
    train_translator(pairs[:200], pairs[200:208], epochs=1, batch_size=100,
                     model_overrides=TINY, device="cpu", checkpoint=path, progress=False,
                     extra_state={"corpus": {"pairs_file": str(EVERYDAY)}})
    return path


def one_step(out: Path, *extra: str) -> list[str]:
    """A one-step run on the everyday pairs (a few seconds)."""
    return ["train", "--pairs", str(EVERYDAY), "--out", str(out), "--epochs", "1",
            "--batch-size", "400", "--device", "cpu", "--quiet", *extra]


# ------------------------------------------------ 2. every entry of a checkpoint is checked


def _swap(tokens: list[str], a: str, b: str) -> list[str]:
    i, j = tokens.index(a), tokens.index(b)
    tokens = list(tokens)
    tokens[i], tokens[j] = tokens[j], tokens[i]
    return tokens


ALTERATIONS = {
    # what is changed: (how, the words the refusal names)
    "vocabulary word": (lambda s: s["src_vocab"].update(
        tokens=[("bl4ck" if t == "est" else t) for t in s["src_vocab"]["tokens"]]),
        "source vocabulary (src_vocab) does not match"),
    "vocabulary swap": (lambda s: s["tgt_vocab"].update(
        tokens=_swap(s["tgt_vocab"]["tokens"], s["tgt_vocab"]["tokens"][0],
                     s["tgt_vocab"]["tokens"][1])),
        "target vocabulary (tgt_vocab) does not match"),
    "num_heads": (lambda s: s["model_config"].update(num_heads=1),
                  "model configuration (model_config) does not match"),
    "special tokens": (lambda s: s["src_vocab"].update(
        specials=list(reversed(s["src_vocab"]["specials"]))),
        "source vocabulary (src_vocab) does not match"),
    "epoch": (lambda s: s.update(epoch=-4), "epoch count (epoch) does not match"),
    "history": (lambda s: s["history"]["epoch_loss"].append(0.0),
                "training history (history) does not match"),
    "tokenizer": (lambda s: s.update(src_text={**s["src_text"], "lowercase": True}),
                  "source tokenizer settings (src_text) does not match"),
    "entry removed": (lambda s: s.pop("corpus"), "training data description (corpus) is "
                                                 "missing"),
    "entry added": (lambda s: s.update(note="mine"), "'note' is not among the entries"),
}


@pytest.mark.parametrize("what", ALTERATIONS)
def test_an_altered_checkpoint_entry_is_refused_and_named(capsys, tmp_path, tiny, what):
    state = load_checkpoint(tiny)
    alter, words = ALTERATIONS[what]
    alter(state)
    altered = tmp_path / "altered.pt"
    torch.save(state, altered)  # its stored checksums left as they were
    for argv in (["translate", "--checkpoint", str(altered), "Il est là."],
                 ["export", "--checkpoint", str(altered), "--out", str(tmp_path / "site")],
                 ["evaluate", "--checkpoint", str(altered), "--pairs", str(EVERYDAY),
                  "--limit", "2"]):
        code, out, err = run(capsys, *argv)
        assert_short_error(code, err, str(altered), "is damaged", words)
        assert out == ""
    assert not (tmp_path / "site" / MODEL_FILE).exists()
    with pytest.raises(ValueError, match="is damaged"):
        load_checkpoint(altered)


def test_the_checksums_cover_every_entry_in_a_fixed_order(tiny):
    state = load_checkpoint(tiny)
    stored = state[CHECKSUMS]
    assert set(stored) == set(state) - {CHECKSUMS}
    from labformer.train import checksums, entry_sha256

    assert checksums(dict(reversed(list(state.items())))) == stored  # order-free
    assert entry_sha256({"a": 1, "b": [1.0, "x"]}) == entry_sha256({"b": [1.0, "x"], "a": 1})
    # a number, its float, its bool and its string are different values
    assert len({entry_sha256(v) for v in (1, 1.0, True, "1", [1], (1,))}) == 6


# ------------------------------------------------ 4. a stale lock taken over by one run only

RACER = """
import sys, time
import labformer.app.cli.runs as runs
from labformer.app.cli.common import CLIError
alive = runs._alive
def slow(pid):  # a pause between looking at the stale lock and taking it over
    time.sleep(0.3)
    return alive(pid)
runs._alive = slow
try:
    with runs.lock(sys.argv[1]):
        print("held", flush=True)
        time.sleep(1.5)
except CLIError as e:
    print("refused:", e, flush=True)
"""


def test_two_runs_cannot_both_take_over_a_stale_lock(tmp_path):
    out = tmp_path / "m.pt"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    for _ in range(2):
        Path(f"{out}.lock").write_text(dead)  # a stale lock: its process has ended
        racers = [subprocess.Popen([sys.executable, "-c", RACER, str(out)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                  for _ in range(2)]
        said = [r.communicate(timeout=60)[0].strip() for r in racers]
        assert sorted(s.split(":")[0] for s in said) == ["held", "refused"], said
        assert any("another run (pid" in s for s in said), said
        assert not Path(f"{out}.lock").exists()


# ------------------------------------------------ 1. outputs only where the command wrote them


@pytest.mark.parametrize("name, text", [
    ("script.py", "print('my script')\n"),
    ("thesis.md", "# My thesis\n\nThree years of work.\n"),
    ("m.pt.log", "\n2026-01-01 10:00:00 ---- labformer train --out m.pt\n"
                 "2026-01-01 10:00:01 data: 309 pairs read\n"),
])
def test_evaluate_output_replaces_no_text_file_it_did_not_write(capsys, tmp_path, tiny, name,
                                                                 text):
    target = tmp_path / name
    target.write_text(text, encoding="utf-8")
    code, out, err = run(capsys, "evaluate", "--checkpoint", str(tiny), "--pairs",
                         str(EVERYDAY), "--limit", "3", "--output", str(target))
    assert_short_error(code, err, str(target), "replaces only a file it wrote itself",
                       "unchanged")
    assert out == "" and target.read_text(encoding="utf-8") == text
    # its own output it replaces, as often as asked
    hyps = tmp_path / "hyps.txt"
    for limit in ("2", "3"):
        code, out, err = run(capsys, "evaluate", "--checkpoint", str(tiny), "--pairs",
                             str(EVERYDAY), "--limit", limit, "--output", str(hyps))
        assert code == 0, err
        assert len(hyps.read_text(encoding="utf-8").splitlines()) == int(limit)


def test_train_never_appends_its_log_to_an_input_or_a_file_of_the_user(capsys, tmp_path):
    pairs = tmp_path / "m.log"  # --out m: the run's log would be m.log
    pairs.write_bytes(EVERYDAY.read_bytes())
    before = pairs.read_bytes()
    code, _, err = run(capsys, "train", "--pairs", str(pairs), "--out", str(tmp_path / "m"),
                       "--epochs", "1", "--device", "cpu", "--quiet")
    assert_short_error(code, err, f"{pairs} is the --pairs file", "unchanged")
    assert pairs.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.log"]
    notes = tmp_path / "n.pt.log"
    notes.write_text("my notes about n.pt\n", encoding="utf-8")
    code, _, err = run(capsys, *one_step(tmp_path / "n.pt"))
    assert_short_error(code, err, f"{notes} exists and is not the log of a labformer run",
                       "unchanged")
    assert notes.read_text(encoding="utf-8") == "my notes about n.pt\n"
    assert not (tmp_path / "n.pt").exists()


# ------------------------------------------------ 6. one clear line for each bad input


@pytest.mark.parametrize("command, least", [("train", 2100), ("corpus", 2001)])
def test_a_corpus_too_small_is_a_usage_error(capsys, command, least):
    with pytest.raises(SystemExit) as stop:
        main([command, "--num-pairs", "1"])
    err = capsys.readouterr().err
    assert stop.value.code == 2, err
    assert f"--num-pairs is at least {least}" in err and "Traceback" not in err


@pytest.mark.parametrize("flag", ["--pairs", "--valid"])
def test_dev_zero_as_a_pairs_file_is_one_line(capsys, tmp_path, flag):
    pairs = "/dev/zero" if flag == "--pairs" else str(EVERYDAY)
    valid = ["--valid", "/dev/zero"] if flag == "--valid" else []
    code, _, err = run(capsys, "train", "--pairs", pairs, *valid, "--out",
                       str(tmp_path / "m.pt"), "--epochs", "1", "--device", "cpu", "--quiet")
    assert_short_error(code, err, "/dev/zero is a binary file")
    assert list(tmp_path.iterdir()) == []


def test_a_pairs_stream_past_the_size_limit_stops_there(capsys, monkeypatch, tmp_path):
    import threading

    import labformer.app.cli.common as common

    monkeypatch.setattr(common, "MAX_INPUT", 50_000)
    fifo = tmp_path / "endless"
    os.mkfifo(fifo)

    def endless() -> None:  # a stream of text pairs that never ends (until read no more)
        try:
            with open(fifo, "w", encoding="utf-8") as f:
                while True:
                    f.write("Bonjour.\tHello.\n" * 1000)
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=endless, daemon=True)
    writer.start()
    code, _, err = run(capsys, "train", "--pairs", str(fifo), "--out", str(tmp_path / "m.pt"),
                       "--device", "cpu")
    assert_short_error(code, err, f"{fifo} is larger than 0 GiB", "never ends")
    big = tmp_path / "big.tsv"
    big.write_text("Bonjour.\tHello.\n" * 5000, encoding="utf-8")
    code, _, err = run(capsys, "evaluate", "--checkpoint", str(tmp_path / "none.pt"),
                       "--pairs", str(big))
    assert code == 1 and "Traceback" not in err


def test_dev_zero_on_standard_input_stops_at_the_line_limit(capsys, monkeypatch, tiny):
    import io

    import labformer.app.cli.translate as translate_command

    monkeypatch.setattr(translate_command, "MAX_LINE", 4096)
    with open("/dev/zero", "rb") as zero:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(zero))
        code, out, err = run(capsys, "translate", "--checkpoint", str(tiny))
    assert_short_error(code, err, "line 1 is longer than 4 KiB", "/dev/zero")


def _edited(state: dict, tmp_path: Path) -> Path:
    """The state saved with its checksums made to match: an edit by someone who knew how."""
    from labformer.train import checksums

    state = {k: v for k, v in state.items() if k != CHECKSUMS}
    state[CHECKSUMS] = checksums(state)
    path = tmp_path / "edited.pt"
    torch.save(state, path)
    return path


@pytest.mark.parametrize("edit, words", [
    (lambda s: s["src_vocab"]["tokens"].__setitem__(0, 42), "token 0 of its src_vocab is 42"),
    (lambda s: s.update(epoch=-4), "its epoch is -4"),
    (lambda s: s.update(epoch=7), "saved after epoch 8 of a run of 1 epochs"),
    (lambda s: s["model_config"].update(d_ff=-1), "model configuration's d_ff is -1"),
])
def test_a_hand_edited_checkpoint_field_is_one_line(capsys, tmp_path, tiny, edit, words):
    state = load_checkpoint(tiny)
    edit(state)
    path = _edited(state, tmp_path)
    code, out, err = run(capsys, "translate", "--checkpoint", str(path), "Merci.")
    assert_short_error(code, err, str(path), words)
    assert out == ""


def test_resume_advice_for_a_side_file_names_the_run(capsys, tmp_path, tiny):
    state = load_checkpoint(tiny)
    state.update(epochs=3)  # saved after epoch 1 of 3: unfinished
    partial = tmp_path / "m.pt.partial"
    partial.write_bytes(_edited(state, tmp_path).read_bytes())
    code, out, err = run(capsys, "translate", "--checkpoint", str(partial), "Merci.")
    assert code == 0, err
    assert f"labformer train --out {tmp_path / 'm.pt'} --resume" in err
    assert ".partial --resume" not in err


def test_a_closed_pipe_leaves_the_log_saying_why_and_the_run_finishes(tmp_path):
    out = tmp_path / "m.pt"
    argv = " ".join(one_step(out))
    done = subprocess.run(f"{sys.executable} -m labformer.app.cli {argv} 2>&1 | head -1",
                          shell=True, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert len(done.stdout.splitlines()) == 1
    log = Path(f"{out}.log").read_text(encoding="utf-8")
    assert "standard output was closed" in log, log
    assert f"checkpoint: {out}" in log.splitlines()[-1] or "learned nothing" in log, log
    assert out.exists() and not Path(f"{out}.partial").exists()
    assert not Path(f"{out}.lock").exists()


# ------------------------------------------------ 5. carry-over: nothing disappears unsaid

CARRY_SRC = ("Le chat noir dort . Il est h 7 30 10 50 8 Ça coûte 234,50 euros Tom").split()
CARRY_TGT = ("The black cat sleeps . It 's 7:30 10:50 8:30 costs 234.50 euros Tom").split()


@pytest.fixture(scope="module")
def moses_carry():
    from labformer.app.carry import Carry
    from labformer.data import TextCodec, Vocab

    return Carry(Vocab(CARRY_SRC), Vocab(CARRY_TGT), TextCodec("fr", "moses"),
                 TextCodec("en", "moses"))


@pytest.mark.parametrize("source, output, text, unknown, notes", [
    # a symbol the model does not know is named (it read it as <unk>)
    ("Le chat € noir dort.", "The black cat sleeps.", "The black cat sleeps.", ("€",), ()),
    ("Le chat 😀 dort.", "The cat sleeps.", "The cat sleeps.", ("😀",), ()),
    # invisible marks: left out for the model, and said; the full stop survives them
    ("Le chat dort.\u200b", "The cat sleeps.", "The cat sleeps.", (),
     ("left out an invisible character (U+200B)",)),
    ("Le chat dort\u200f.", "The cat sleeps.", "The cat sleeps.", (),
     ("left out an invisible character (U+200F)",)),
    # the sign of a time is kept
    ("Il est -7 h 30.", "It's 7:30.", "It's -7:30.", (), ()),
    # a space-grouped number with decimals is one number
    ("Ça coûte 1 234,56 euros.", "It costs 234.50 euros.", "It costs 1,234.56 euros.", (),
     ()),
    # the usual French spelling of a time is a time
    ("Il est 14h30.", "It's 10:50.", "It's 14:30.", (), ()),
    ("Il est 7h30.", "It's 7:30.", "It's 7:30.", (), ()),
])
def test_carry_over_loses_nothing_without_a_word(moses_carry, source, output, text, unknown,
                                                 notes):
    prepared = moses_carry.prepare(source)
    carried = moses_carry.restore(prepared, output)
    assert (carried.text, carried.unknown, carried.notes, carried.lost) == \
        (text, unknown, notes, ()), (prepared.text, carried)


def test_a_glued_time_reads_as_the_spaced_one(moses_carry):
    assert moses_carry.prepare("Il est 14h30.").text == moses_carry.prepare(
        "Il est 14 h 30.").text
    assert moses_carry.prepare("Il est -7 h 30.").text == "Il est 7 h 30."


def test_resume_with_a_smaller_pairs_file_names_the_data_not_the_batch(capsys, tmp_path):
    lines = EVERYDAY.read_text(encoding="utf-8").splitlines(keepends=True)
    small = tmp_path / "small.tsv"
    small.write_text("".join(lines[:160]), encoding="utf-8")
    out = tmp_path / "m.pt"
    argv = ["--out", str(out), "--batch-size", "50", "--device", "cpu", "--quiet"]
    code, _, err = run(capsys, "train", "--pairs", str(EVERYDAY), "--epochs", "1", *argv)
    assert code in (0, 3), err
    code, _, err = run(capsys, "train", "--pairs", str(small), "--epochs", "2", "--resume",
                       *argv)
    assert_short_error(code, err, "training data", "differs")
    assert "batch" not in err


def test_a_full_disk_while_taking_the_lock_names_the_lock(capsys, monkeypatch, tmp_path):
    import errno
    import tempfile

    import labformer.app.cli.runs as runs

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    out = tmp_path / "m.pt"
    monkeypatch.setattr(tempfile, "mkstemp", full)
    with pytest.raises(runs.CLIError, match=f"cannot write the lock {out}.lock: the disk is "
                                            f"full; nothing was changed"):
        with runs.lock(str(out)):
            pass
    assert list(tmp_path.iterdir()) == []


def test_a_checkpoint_of_the_earlier_format_can_be_overwritten(capsys, monkeypatch, tmp_path,
                                                              tiny):
    monkeypatch.setattr(train_command, "_scored",  # a new model that passes its check
                        lambda translator, pairs: (40.0, ["x"] * len(pairs)))
    state = load_checkpoint(tiny)
    out = tmp_path / "m.pt"
    torch.save({**state, "format": "labformer-checkpoint-1"}, out)
    code, _, err = run(capsys, "translate", "--checkpoint", str(out), "Merci.")
    assert_short_error(code, err, "written by an earlier labformer", "train it again")
    code, _, err = run(capsys, *one_step(out, "--overwrite"))
    assert code == 0, err
    assert load_checkpoint(out)["format"] != "labformer-checkpoint-1"
