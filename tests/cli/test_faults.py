"""Fault injection for the ``labformer`` command (issue 48): every writing command pointed at
every kind of existing file, damaged checkpoints, signals at each phase of a run, a closed
pipe, a full disk, FIFOs and directories as paths, a read-only folder, absurd thread counts.

Each error is one or two lines on stderr with a non-zero exit status, and no file the user
had changes unless the command was asked to replace exactly that file. The models are tiny
(a few seconds to train): behaviour, not quality, is tested here.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from cli_helpers import assert_short_error, lines, run

import labformer.app.cli.train as train_command
import labformer.app.translate
import labformer.train
from labformer.app.cli import main
from labformer.app.cli.common import Terminated
from labformer.app.export import MODEL_FILE, read_model_file
from labformer.app.translate import Translator, train_translator
from labformer.data import everyday_pairs_path, read_pairs
from labformer.train import WEIGHTS_HASH, load_checkpoint, save_checkpoint, weights_sha256

EVERYDAY = everyday_pairs_path()
TINY = dict(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32,
            dropout=0.0, max_len=40)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))

@contextlib.contextmanager
def no_hang(seconds: int = 30) -> Iterator[None]:
    """Fail, rather than block the suite, when a command waits forever (a FIFO opened)."""
    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"the command did not end within {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture(autouse=True)
def quick_verdict(monkeypatch):
    """The end-of-run check translates hundreds of pairs: a stub that fails it (BLEU 0), as a
    one-step run would; tests that need a passing model set ``_scored`` again."""
    monkeypatch.setattr(train_command, "_scored",
                        lambda translator, pairs: (0.0, ["x"] * len(pairs)))


def passing(monkeypatch) -> None:
    monkeypatch.setattr(train_command, "_scored",
                        lambda translator, pairs: (40.0, ["x"] * len(pairs)))


def one_step(out: Path, *extra: str) -> list[str]:
    """A one-step run on the everyday pairs (a few seconds)."""
    return ["train", "--pairs", str(EVERYDAY), "--out", str(out), "--epochs", "1",
            "--batch-size", "400", "--device", "cpu", "--quiet", *extra]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A tiny translator of the everyday pairs (well under a second to train)."""
    path = tmp_path_factory.mktemp("tiny") / "tiny.pt"
    pairs = [(p.src, p.tgt) for p in read_pairs(EVERYDAY)]
    train_translator(pairs[:200], pairs[200:208], epochs=1, batch_size=100,
                     model_overrides=TINY, device="cpu", checkpoint=path, progress=False,
                     extra_state={"corpus": {"pairs_file": str(EVERYDAY)}})
    return path


@pytest.fixture(scope="module")
def cli_model(tmp_path_factory) -> Path:
    """A model written by `labformer train` (one step)."""
    path = tmp_path_factory.mktemp("cli") / "m.pt"
    assert main(one_step(path)) in (0, 3)
    return path


def make_kind(kind: str, path: Path, tiny: Path) -> bytes | None:
    """An existing file of ``kind`` at ``path``; its bytes (None for a FIFO or directory)."""
    if kind == "pairs":
        path.write_bytes(EVERYDAY.read_bytes())
    elif kind == "checkpoint":
        path.write_bytes(tiny.read_bytes())
    elif kind == "notes":
        path.write_text("shopping: bread, milk\tcheese\n", encoding="utf-8")
    elif kind == "png":
        path.write_bytes(PNG)
    elif kind == "zip":
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("readme.txt", "a zip of mine")
    elif kind == "fifo":
        os.mkfifo(path)
        return None
    elif kind == "directory":
        path.mkdir()
        (path / "keep.txt").write_text("mine")
        return None
    return path.read_bytes()


def unchanged(kind: str, path: Path, before: bytes | None) -> bool:
    if kind == "fifo":
        return path.is_fifo()
    if kind == "directory":
        return path.is_dir() and (path / "keep.txt").read_text() == "mine"
    return path.read_bytes() == before


KINDS = ["pairs", "checkpoint", "notes", "png", "zip", "fifo", "directory"]


# ------------------------------------------------ every writing command, every kind of file


@pytest.mark.parametrize("kind", KINDS)
def test_evaluate_output_never_replaces_a_file_of_another_kind(capsys, tmp_path, tiny, kind):
    target = tmp_path / "target"
    before = make_kind(kind, target, tiny)
    with no_hang():
        code, out, err = run(capsys, "evaluate", "--checkpoint", str(tiny), "--pairs",
                             str(EVERYDAY), "--limit", "3", "--output", str(target))
    assert_short_error(code, err, str(target), "unchanged")
    assert out == "" and unchanged(kind, target, before)
    assert not [p for p in tmp_path.iterdir() if p.name != "target"]  # no side file left


@pytest.mark.parametrize("kind", KINDS)
def test_export_never_replaces_a_file_of_another_kind(capsys, tmp_path, tiny, kind):
    target = tmp_path / MODEL_FILE
    before = make_kind(kind, target, tiny)
    with no_hang():
        code, _, err = run(capsys, "export", "--checkpoint", str(tiny), "--out",
                           str(tmp_path))
    assert_short_error(code, err, str(target), "unchanged")
    assert unchanged(kind, target, before)
    # --out itself a FIFO or a file: not a folder
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with no_hang():
        code, _, err = run(capsys, "export", "--checkpoint", str(tiny), "--out", str(fifo))
    assert_short_error(code, err, "named pipe (FIFO), not a folder")


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "checkpoint"])
@pytest.mark.parametrize("flag", [None, "--overwrite", "--resume"])
def test_train_out_never_replaces_a_file_of_another_kind(capsys, tmp_path, tiny, kind, flag):
    target = tmp_path / "target"
    before = make_kind(kind, target, tiny)
    with no_hang():
        code, _, err = run(capsys, *one_step(target, *([flag] if flag else [])))
    assert code == 1 and "Traceback" not in err and len(lines(err)) <= 2, err
    assert err.count("not a labformer checkpoint") <= 1, err  # said once
    assert unchanged(kind, target, before)
    assert not Path(f"{target}.lock").exists() and not Path(f"{target}.partial").exists()


def test_evaluate_output_replaces_its_own_earlier_output(capsys, tmp_path, tiny):
    hyps = tmp_path / "hyps.txt"
    code, out, err = run(capsys, "evaluate", "--checkpoint", str(tiny), "--pairs",
                         str(EVERYDAY), "--limit", "2", "--output", str(hyps))
    assert code == 0 and len(hyps.read_text(encoding="utf-8").splitlines()) == 2, err
    hyps.chmod(0o640)
    code, out, err = run(capsys, "evaluate", "--checkpoint", str(tiny), "--pairs",
                         str(EVERYDAY), "--limit", "3", "--output", str(hyps))
    assert code == 0, err
    assert f"translations: {hyps}" in out
    assert len(hyps.read_text(encoding="utf-8").splitlines()) == 3
    assert hyps.stat().st_mode & 0o777 == 0o640  # the file's mode is kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hyps.txt"]


def test_evaluate_output_is_never_an_input(capsys, tmp_path, tiny):
    pairs = tmp_path / "mine.tsv"
    pairs.write_bytes(EVERYDAY.read_bytes())
    before = pairs.read_bytes()
    code, _, err = run(capsys, "evaluate", "--checkpoint", str(tiny), "--pairs", str(pairs),
                       "--output", str(pairs))
    assert_short_error(code, err, "is the --pairs file", "unchanged")
    assert pairs.read_bytes() == before
    ck = tmp_path / "ck.pt"
    ck.write_bytes(tiny.read_bytes())
    code, _, err = run(capsys, "evaluate", "--checkpoint", str(ck), "--pairs", str(pairs),
                       "--output", str(ck))
    assert_short_error(code, err, "is the --checkpoint file")
    assert ck.read_bytes() == tiny.read_bytes()


def test_export_replaces_its_own_model_file_and_stores_checksums(capsys, tmp_path, tiny):
    code, _, err = run(capsys, "export", "--checkpoint", str(tiny), "--out", str(tmp_path))
    assert code == 0, err
    first = (tmp_path / MODEL_FILE).read_bytes()
    payload = read_model_file(tmp_path / MODEL_FILE)
    assert payload["weights_sha256"] == load_checkpoint(tiny)[WEIGHTS_HASH]
    code, _, err = run(capsys, "export", "--checkpoint", str(tiny), "--out", str(tmp_path),
                       "--dtype", "float16")
    assert code == 0, err
    assert (tmp_path / MODEL_FILE).read_bytes() != first
    assert sorted(p.name for p in tmp_path.iterdir()) == [MODEL_FILE]
    # A damaged model file is refused when read, and export may replace it.
    text = (tmp_path / MODEL_FILE).read_text(encoding="ascii")
    at = text.index('"data":"') + 20
    damaged = text[:at] + ("A" if text[at] != "A" else "B") + text[at + 1:]
    (tmp_path / MODEL_FILE).write_text(damaged, encoding="ascii")
    with pytest.raises(ValueError, match="is damaged"):
        read_model_file(tmp_path / MODEL_FILE)
    code, _, err = run(capsys, "export", "--checkpoint", str(tiny), "--out", str(tmp_path))
    assert code == 0, err
    read_model_file(tmp_path / MODEL_FILE)
    for bad, match in (("/* other */\n", "not a labformer model file"),
                       ("/* labformer: x */\nwindow.LABFORMER_LIVE_MODEL = {", "damaged"),
                       ('/* labformer: x */\nwindow.LABFORMER_LIVE_MODEL = {"format":9};',
                        "another format")):
        (tmp_path / "x.js").write_text(bad, encoding="ascii")
        with pytest.raises(ValueError, match=match):
            read_model_file(tmp_path / "x.js")
    (tmp_path / "x.js").write_bytes("é".encode())
    with pytest.raises(ValueError, match="not ASCII"):
        read_model_file(tmp_path / "x.js")


# -------------------------------------------------------------- a failed retrain keeps the model


def test_a_retrain_that_fails_its_check_keeps_the_old_model(capsys, tmp_path, cli_model):
    out = tmp_path / "m.pt"
    out.write_bytes(cli_model.read_bytes())
    before = out.read_bytes()
    code, stdout, err = run(capsys, *one_step(out, "--overwrite", "--seed", "4"))
    assert code == 3, err
    assert f"{out} is unchanged (the model it held is kept" in err
    assert f"the new model is {out}.partial" in err
    assert out.read_bytes() == before and f"checkpoint: {out}\n" not in stdout
    assert load_checkpoint(f"{out}.partial")["train_config"]["seed"] == 4
    assert not Path(f"{out}.lock").exists()
    # A plain run now names the side file for what it is.
    code, _, err = run(capsys, *one_step(out))
    assert_short_error(code, err, "holds a finished model that did not replace")
    # A fresh run that fails its check writes its model all the same (nothing to keep).
    fresh = tmp_path / "fresh.pt"
    code, stdout, _ = run(capsys, *one_step(fresh))
    assert code == 3 and fresh.exists() and f"checkpoint: {fresh}\n" in stdout


def test_resume_with_another_batch_size_is_refused(capsys, tmp_path, cli_model):
    out = tmp_path / "m.pt"
    out.write_bytes(cli_model.read_bytes())
    before = out.read_bytes()
    code, _, err = run(capsys, "train", "--pairs", str(EVERYDAY), "--out", str(out),
                       "--epochs", "2", "--batch-size", "7", "--device", "cpu", "--quiet",
                       "--resume")
    assert_short_error(code, err, "steps an epoch", "--batch-size")
    assert out.read_bytes() == before
    assert not Path(f"{out}.partial").exists() and not Path(f"{out}.lock").exists()


def test_valid_equal_to_pairs_is_refused(capsys, tmp_path):
    out = tmp_path / "m.pt"
    code, _, err = run(capsys, *one_step(out, "--valid", str(EVERYDAY)))
    assert_short_error(code, err, "is the --pairs file")
    assert not out.exists()


# ------------------------------------------------------------ signals at each phase of a run


@pytest.fixture(autouse=True)
def _ctrl_c_raises():
    """Ctrl-C raises KeyboardInterrupt in these tests however pytest was started: a process
    started in the background by a non-interactive shell inherits SIGINT ignored, and Python
    then installs no handler for it (as it should for `labformer train &`)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _kill(sig: signal.Signals) -> None:
    os.kill(os.getpid(), sig)
    time.sleep(1)  # the handler runs at the next bytecode: it raises before this ends


PHASES = ["reading", "locked", "training", "checking"]


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_at_each_phase_is_one_line_and_leaves_no_lock(capsys, monkeypatch, tmp_path,
                                                                cli_model, phase, sig, status):
    out = tmp_path / "m.pt"
    out.write_bytes(cli_model.read_bytes())
    before = out.read_bytes()
    if phase == "reading":
        real_read = train_command.read_pairs_file
        monkeypatch.setattr(train_command, "read_pairs_file",
                            lambda *a, **k: (_kill(sig), real_read(*a, **k))[1])
    elif phase in ("locked", "training"):
        real = labformer.app.translate.train_translator

        def train(*args, **kwargs):
            if phase == "training":
                real(*args, **kwargs)  # its epoch is saved first
            _kill(sig)

        monkeypatch.setattr(labformer.app.translate, "train_translator", train)
    else:
        monkeypatch.setattr(train_command, "verdict", lambda *a, **k: _kill(sig))
    code, _, err = run(capsys, *one_step(out, "--overwrite", "--seed", "5"))
    assert code == status, err
    assert 1 <= len(lines(err)) <= 2 and "Traceback" not in err, err
    assert out.read_bytes() == before  # --overwrite: the old model until the new one passed
    assert not Path(f"{out}.lock").exists()
    if phase == "checking":
        assert "the new model is complete (1 epochs)" in err and "--resume" in err


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_after_the_save_says_the_model_is_complete(capsys, monkeypatch, tmp_path,
                                                            sig, status):
    out = tmp_path / "m.pt"
    monkeypatch.setattr(train_command, "verdict", lambda *a, **k: _kill(sig))
    code, _, err = run(capsys, *one_step(out))
    assert code == status and len(lines(err)) == 1, err
    assert f"the model is complete (1 epochs) and saved as {out}" in err
    assert out.exists() and not Path(f"{out}.partial").exists()
    assert not Path(f"{out}.lock").exists()
    Translator.from_checkpoint(out)


def test_resume_finishes_a_check_that_was_stopped(capsys, monkeypatch, tmp_path, cli_model):
    out = tmp_path / "m.pt"
    out.write_bytes(cli_model.read_bytes())
    monkeypatch.setattr(train_command, "verdict", lambda *a, **k: _kill(signal.SIGINT))
    assert run(capsys, *one_step(out, "--overwrite", "--seed", "6"))[0] == 130
    monkeypatch.undo()
    passing(monkeypatch)
    code, stdout, err = run(capsys, *one_step(out, "--resume", "--seed", "6"))
    assert code == 0, err
    assert f"checkpoint: {out} (it replaces the previous model)" in stdout
    assert load_checkpoint(out)["train_config"]["seed"] == 6


def test_sigterm_is_one_line_in_every_command(capsys, monkeypatch, tiny):
    import labformer.app.cli as cli

    monkeypatch.setitem(cli.COMMANDS, "corpus", lambda args: _kill(signal.SIGTERM))
    code, _, err = run(capsys, "corpus")
    assert code == 143 and lines(err) == ["labformer: interrupted"]
    assert isinstance(Terminated(), KeyboardInterrupt)


def _cli(*argv: str, **kwargs) -> subprocess.Popen:
    # `ready` once main has begun (the console script's import of labformer.app.cli before it,
    # and Python's own start-up, are not the command's to handle).
    child = ("import sys; import labformer.app.cli as c; real = c._main\n"
             "def started(argv):\n    print('ready', flush=True)\n    return real(argv)\n"
             "c._main = started; sys.exit(c.main(sys.argv[1:]))")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # SIGINT at its default in the child whatever this process inherited (see _ctrl_c_raises)
    return subprocess.Popen([sys.executable, "-c", child, *argv], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            **kwargs)


@pytest.mark.parametrize("delay", [0.0, 0.3, 1.0])
def test_ctrl_c_while_the_command_starts_is_one_line(tmp_path, tiny, delay):
    proc = _cli("translate", "--checkpoint", str(tiny), "Merci.")
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:  # it finished first: nothing to interrupt
        return
    assert proc.returncode == 130, err
    assert lines(err) == ["labformer: interrupted"], err


def test_a_closed_stdout_does_not_stop_the_run(tmp_path):
    out = tmp_path / "m.pt"
    proc = _cli(*one_step(out), "--min-pairs", "1")
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    first = proc.stdout.readline()  # `| head -1`: one line read, then the reader is gone
    proc.stdout.close()
    assert proc.stderr is not None
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert first.startswith("data:")
    assert proc.returncode in (0, 3), err
    assert "standard output was closed" in err and "Traceback" not in err
    assert out.exists() and not Path(f"{out}.partial").exists()
    assert not Path(f"{out}.lock").exists()
    assert "trained 1 steps" in Path(f"{out}.log").read_text(encoding="utf-8")


# ------------------------------------------------------------------------ damaged checkpoints


def _tensor_offsets(path: Path) -> list[tuple[int, int]]:
    """(offset, size) in the file of each stored tensor's bytes (torch's zip: stored, not
    compressed; a local header of 30 bytes + name + extra before each entry's data)."""
    raw = path.read_bytes()
    spans = []
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            if "/data/" in info.filename and info.file_size >= 64:
                start = info.header_offset
                name_len = int.from_bytes(raw[start + 26:start + 28], "little")
                extra_len = int.from_bytes(raw[start + 28:start + 30], "little")
                spans.append((start + 30 + name_len + extra_len, info.file_size))
    return spans


def _damaged(tiny: Path, tmp_path: Path, how: str) -> Path:
    raw = bytearray(tiny.read_bytes())
    spans = sorted(_tensor_offsets(tiny), key=lambda s: -s[1])
    offset, size = spans[0]
    if how == "flip-start":
        raw[offset] ^= 0xFF
    elif how == "flip-42-middle":
        for i in range(42):
            raw[offset + size // 2 + i] ^= 0x5A
    elif how == "0x7f-400":
        raw[offset:offset + 400] = b"\x7f" * 400
    elif how == "flip-small-tensor":
        small_offset, _ = spans[-1]
        raw[small_offset + 1] ^= 0x01
    elif how == "hash":
        digest = load_checkpoint(tiny)[WEIGHTS_HASH].encode()
        at = bytes(raw).index(digest)
        raw[at] = ord("0") if raw[at] != ord("0") else ord("1")
    elif how == "pickle":
        with zipfile.ZipFile(tiny) as z:
            info = next(i for i in z.infolist() if i.filename.endswith("data.pkl"))
        raw[info.header_offset + 60:info.header_offset + 90] = b"\x00" * 30
    elif how == "truncated":
        raw = raw[:len(raw) * 2 // 3]
    elif how == "central-directory":
        at = bytes(raw).rindex(b"PK\x01\x02")
        raw[at:at + 4] = b"XXXX"
    path = tmp_path / f"{how}.pt"
    path.write_bytes(bytes(raw))
    return path


DAMAGE = ["flip-start", "flip-42-middle", "0x7f-400", "flip-small-tensor", "hash", "pickle",
          "truncated", "central-directory"]


@pytest.mark.parametrize("how", DAMAGE)
def test_a_damaged_checkpoint_never_speaks(capsys, tmp_path, tiny, how):
    damaged = _damaged(tiny, tmp_path, how)
    code, out, err = run(capsys, "translate", "--checkpoint", str(damaged), "Merci.")
    assert_short_error(code, err, str(damaged))
    assert out == ""
    if how in ("flip-start", "flip-42-middle", "0x7f-400", "flip-small-tensor", "hash"):
        assert "is damaged" in err and "checksum" in err
    site = tmp_path / "site"
    code, _, err = run(capsys, "export", "--checkpoint", str(damaged), "--out", str(site))
    assert_short_error(code, err, str(damaged))
    assert not (site / MODEL_FILE).exists()
    code, out, err = run(capsys, "evaluate", "--checkpoint", str(damaged), "--pairs",
                         str(EVERYDAY), "--limit", "2")
    assert_short_error(code, err, str(damaged))


def test_the_checksum_covers_every_weight_in_a_fixed_order(tiny):
    weights = load_checkpoint(tiny)["model"]
    digest = weights_sha256(weights)
    assert digest == load_checkpoint(tiny)[WEIGHTS_HASH]
    assert weights_sha256(dict(reversed(list(weights.items())))) == digest  # order-free
    for name in list(weights)[:3]:
        changed = dict(weights)
        changed[name] = weights[name].clone()
        changed[name].view(-1)[0] += 1e-3
        assert weights_sha256(changed) != digest
    renamed = {("x" + k if i == 0 else k): v for i, (k, v) in enumerate(weights.items())}
    assert weights_sha256(renamed) != digest
    with pytest.raises(TypeError, match="not a tensor"):
        weights_sha256({"a": [1.0]})


def test_a_checkpoint_without_checksums_is_refused(capsys, tmp_path, tiny):
    state = load_checkpoint(tiny)
    del state[labformer.train.CHECKSUMS]
    bare = tmp_path / "bare.pt"
    torch.save(state, bare)  # the checksums taken out
    old = tmp_path / "old.pt"
    torch.save({**state, "format": "labformer-checkpoint-1"}, old)  # an earlier format
    for path, words in ((bare, "holds no checksums"), (old, "written by an earlier labformer")):
        for argv in (["translate", "--checkpoint", str(path), "Merci."],
                     ["export", "--checkpoint", str(path), "--out", str(tmp_path / "site")]):
            code, out, err = run(capsys, *argv)
            assert_short_error(code, err, str(path), words)
            assert out == ""
    assert not (tmp_path / "site" / MODEL_FILE).exists()
    code, _, err = run(capsys, "translate", "--checkpoint", str(tiny), "Merci.")
    assert code == 0 and "checksum" not in err


# ------------------------------------------------------------- paths that are not checkpoints


@pytest.mark.parametrize("content, kind", [
    (b"my shopping list\n", "a text file"),
    (b"x", "a text file"),
    (b"", "an empty file"),
    (PNG, "a PNG image"),
    (b"\x00\x01\x02garbage" * 5, "a binary file"),
    ("héllo\n".encode("utf-16"), "a text file (UTF-16)"),
])
def test_a_file_that_is_not_a_checkpoint_is_named(capsys, tmp_path, content, kind):
    path = tmp_path / "model.pt"
    path.write_bytes(content)
    code, _, err = run(capsys, "translate", "--checkpoint", str(path), "Merci.")
    assert_short_error(code, err, f"it is {kind}, not a labformer checkpoint")
    assert "IndexError" not in err


def test_fifos_and_directories_as_checkpoints(capsys, tmp_path):
    fifo = tmp_path / "pipe.pt"
    os.mkfifo(fifo)
    with no_hang():
        for command in (["translate", "Merci."], ["evaluate"], ["export", "--out",
                                                                str(tmp_path / "site")]):
            code, _, err = run(capsys, *command, "--checkpoint", str(fifo))
            assert_short_error(code, err, "named pipe (FIFO)")
            assert "not found" not in err
        code, _, err = run(capsys, "translate", "--checkpoint", str(tmp_path), "Merci.")
        assert_short_error(code, err, "it is a directory")
        code, _, err = run(capsys, *one_step(fifo))
        assert_short_error(code, err, "named pipe (FIFO), not a labformer checkpoint")
        code, _, err = run(capsys, *one_step(Path(os.devnull), "--overwrite"))
        assert_short_error(code, err, "is a device")
        assert "text file" not in err
    assert fifo.is_fifo()


def test_a_fifo_beside_out_is_refused(capsys, tmp_path):
    out = tmp_path / "m.pt"
    os.mkfifo(f"{out}.log")
    with no_hang():
        code, _, err = run(capsys, *one_step(out))
    assert_short_error(code, err, f"{out}.log exists and is a named pipe")
    os.unlink(f"{out}.log")
    os.mkfifo(f"{out}.lock")
    with no_hang():
        code, _, err = run(capsys, *one_step(out))
    assert_short_error(code, err, f"{out}.lock exists and is a named pipe")


def test_a_checkpoint_of_another_configuration_is_one_short_line(capsys, tmp_path, tiny):
    state = load_checkpoint(tiny)
    state["model_config"]["d_model"] = 32
    other = tmp_path / "other.pt"
    save_checkpoint(other, state)
    code, _, err = run(capsys, "translate", "--checkpoint", str(other), "Merci.")
    assert_short_error(code, err, "do not fit its model configuration", "more like it")
    assert len(err) < 400


# ---------------------------------------------------------------------- threads, usage errors


@pytest.mark.parametrize("value", ["0", "20000", "99999", "-3", "lots"])
def test_absurd_thread_counts_are_usage_errors(capsys, value):
    with pytest.raises(SystemExit) as e:
        main(["translate", "--threads", value, "Merci."])
    err = capsys.readouterr().err
    # argparse's usage, then one line that says what is wrong (no crash, no libgomp error)
    assert e.value.code == 2 and "Traceback" not in err, err
    assert lines(err)[-1].startswith("labformer translate: error: argument --threads: "), err
    if value in ("20000", "99999"):
        assert f"choose 1 to {os.cpu_count()}" in err


# ------------------------------------------------------------- a full disk, a read-only folder


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_during_training_keeps_the_old_model(capsys, monkeypatch, tmp_path,
                                                         cli_model):
    out = tmp_path / "m.pt"
    out.write_bytes(cli_model.read_bytes())
    before = out.read_bytes()
    real_save = torch.save

    def full(obj, f, *args, **kwargs):  # torch's own error names no cause
        if isinstance(f, (str, os.PathLike)):
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos")
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", full)
    monkeypatch.setattr(labformer.train, "_write_all", _enospc)
    code, _, err = run(capsys, *one_step(out, "--overwrite"))
    assert_short_error(code, err, "the disk is full", f"{out} is unchanged")
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pt", "m.pt.log"]


def test_a_full_disk_while_writing_outputs(capsys, monkeypatch, tmp_path, tiny):
    hyps = tmp_path / "hyps.txt"
    code, _, err = run(capsys, "evaluate", "--checkpoint", str(tiny), "--pairs",
                       str(EVERYDAY), "--limit", "1", "--output", str(hyps))
    assert code == 0, err
    earlier = hyps.read_text(encoding="utf-8")  # an earlier output, the one to replace
    monkeypatch.setattr(os, "fsync", _enospc)
    code, out, err = run(capsys, "evaluate", "--checkpoint", str(tiny), "--pairs",
                         str(EVERYDAY), "--limit", "2", "--output", str(hyps))
    assert_short_error(code, err, "the disk is full", f"{hyps} is unchanged")
    assert hyps.read_text(encoding="utf-8") == earlier
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hyps.txt"]
    monkeypatch.undo()
    site = tmp_path / "site"
    monkeypatch.setattr(Path, "write_text", _enospc)
    code, _, err = run(capsys, "export", "--checkpoint", str(tiny), "--out", str(site))
    assert_short_error(code, err, "the disk is full", "was not written")
    assert list(site.iterdir()) == []


@pytest.fixture
def small_tmpfs(tmp_path) -> Iterator[Path]:
    """A 1 MiB tmpfs, where root may mount one (else the test is skipped; the injected
    ENOSPC tests above hold the same behaviour)."""
    where = tmp_path / "small"
    where.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_a_real_full_disk(capsys, tmp_path, small_tmpfs, tiny, cli_model):
    out = small_tmpfs / "tiny.pt"  # a small model there; the new run's does not fit
    out.write_bytes(tiny.read_bytes())
    before = out.read_bytes()
    code, _, err = run(capsys, *one_step(out, "--overwrite"))
    assert_short_error(code, err, "the disk is full", f"{out} is unchanged")
    assert out.read_bytes() == before
    assert not Path(f"{out}.lock").exists() and not Path(f"{out}.partial").exists()
    filler = small_tmpfs / "filler"
    with contextlib.suppress(OSError), open(filler, "wb") as f:
        f.write(b"\0" * 2**20)
    hyps = small_tmpfs / "hyps.txt"
    code, _, err = run(capsys, "evaluate", "--checkpoint", str(tiny), "--pairs",
                       str(EVERYDAY), "--limit", "50", "--output", str(hyps))
    assert code == 1 and "the disk is full" in err and len(lines(err)) <= 2, err
    code, _, err = run(capsys, "export", "--checkpoint", str(tiny), "--out",
                       str(small_tmpfs / "site"))
    assert code == 1 and "the disk is full" in err and len(lines(err)) <= 2, err
    assert out.read_bytes() == before


@pytest.fixture
def readonly_dir(tmp_path) -> Iterator[Path]:
    """A folder nothing can be written into: chmod for a user, a read-only mount for root."""
    where = tmp_path / "ro"
    where.mkdir()
    if os.geteuid() != 0:
        where.chmod(0o555)
        yield where
        where.chmod(0o755)
        return
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(where)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip("root, and no read-only mount here")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_a_read_only_folder(capsys, readonly_dir, tiny):
    code, _, err = run(capsys, *one_step(readonly_dir / "m.pt"))
    assert_short_error(code, err, "cannot write the checkpoint")
    code, out, err = run(capsys, "evaluate", "--checkpoint", str(tiny), "--pairs",
                         str(EVERYDAY), "--output", str(readonly_dir / "hyps.txt"))
    assert_short_error(code, err, "cannot write --output", "nothing was written")
    assert out == ""  # refused before the evaluation, not after it
    code, _, err = run(capsys, "export", "--checkpoint", str(tiny), "--out", str(readonly_dir))
    assert_short_error(code, err, "cannot write --out")
    assert list(readonly_dir.iterdir()) == []


# ----------------------------------------------------------------- input that is not as expected


def test_a_latin1_pairs_file_names_its_lines_and_the_encoding(capsys, tmp_path):
    latin = tmp_path / "latin.tsv"
    latin.write_bytes("Café crème.\tCoffee.\nBonjour.\tHello.\nDéjà vu.\tAlready.\n"
                      .encode("latin-1"))
    code, _, err = run(capsys, *one_step(tmp_path / "m.pt")[:2], str(latin), "--out",
                       str(tmp_path / "m.pt"))
    assert_short_error(code, err, "not valid UTF-8 on 2 line(s) (line 1, 3)",
                       "iconv -f WINDOWS-1252 -t UTF-8")
    code, _, err = run(capsys, "evaluate", "--checkpoint", str(tmp_path / "none.pt"),
                       "--pairs", str(latin))
    assert code == 1 and "checkpoint not found" in err


def test_every_unknown_word_is_named(capsys, tiny):
    translator = Translator.from_checkpoint(tiny)
    sentence = "Pierre et Zorglub visitent Lyon ou Quimperlé."
    unknown = [w for w in ("Pierre", "Zorglub", "visitent", "Lyon", "Quimperlé")
               if translator.unknown_words(w)]
    assert "Zorglub" in unknown
    code, out, err = run(capsys, "translate", "--checkpoint", str(tiny), sentence)
    assert code == 0 and out.strip(), err
    for word in unknown:  # carried over as a name with a warning, or read as <unk> and named
        assert word in err or word.lower() in err, (word, err)


def test_a_full_disk_while_copying_for_resume(capsys, monkeypatch, tmp_path, cli_model):
    out = tmp_path / "m.pt"
    out.write_bytes(cli_model.read_bytes())
    before = out.read_bytes()
    monkeypatch.setattr(shutil, "copyfile", _enospc)
    code, _, err = run(capsys, *one_step(out, "--resume", "--epochs", "2"))
    assert_short_error(code, err, "the disk is full", f"{out} is unchanged")
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pt"]


# ---------------------------------------------------------------------- the helpers, directly


def test_os_errors_read_as_sentences(tmp_path):
    from labformer.app.cli.common import os_reason, os_sentence

    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "a.pt"))
    assert os_sentence(full) == f"{tmp_path / 'a.pt'}: the disk is full"
    assert os_reason(OSError(errno.ECONNRESET, "Connection reset by peer")) == \
        "connection reset by peer"
    assert os_sentence(OSError("my own sentence")) == "my own sentence"
    assert os_reason(OSError()) == "OSError"


def test_sockets_and_devices_are_named_without_opening_them(capsys, tmp_path):
    import socket

    from labformer.app.cli.common import special_file
    from labformer.train import file_kind

    where = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(where))
        assert file_kind(where) == "a socket" and special_file(str(where)) == "a socket"
        code, _, err = run(capsys, "evaluate", "--checkpoint", str(tmp_path / "x.pt"),
                           "--output", str(where))
        assert_short_error(code, err, "is a socket")
    assert file_kind(os.devnull) == "a device" and special_file(os.devnull) == "a device"
    assert special_file(str(tmp_path / "missing")) is None


def test_a_folder_on_the_output_path_that_is_a_file(capsys, tmp_path, tiny):
    blocker = tmp_path / "notes.txt"
    blocker.write_text("mine\n")
    code, out, err = run(capsys, "evaluate", "--checkpoint", str(tiny), "--pairs",
                         str(EVERYDAY), "--output", str(blocker / "hyps.txt"))
    assert_short_error(code, err, "a folder on its path is a file")
    assert out == "" and blocker.read_text() == "mine\n"


def test_an_interrupted_write_leaves_no_side_file(monkeypatch, tmp_path):
    from labformer.app.cli.common import write_atomically

    target = tmp_path / "hyps.txt"
    target.write_text("old\n")
    monkeypatch.setattr(os, "fsync", lambda fd: _kill(signal.SIGINT))
    with pytest.raises(KeyboardInterrupt):
        write_atomically(str(target), b"new\n", "--output")
    assert target.read_text() == "old\n" and sorted(tmp_path.iterdir()) == [target]
