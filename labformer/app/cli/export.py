"""``labformer export``: the files the book's live translator page loads, from a checkpoint.

The page (``book/_static/labformer-live.js``) runs labformer's forward pass in the browser;
:mod:`labformer.app.export` writes the one script file it loads. Put the written file beside the
built page's ``_static`` folder in place of the book's own to run your model in the page.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from labformer.app.cli.common import (
    DEFAULT_CHECKPOINT,
    CLIError,
    check_folder_writable,
    note,
    os_reason,
    special_file,
)


def add_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    """The ``export`` subcommand and its options."""
    text = "write a checkpoint as the file the book's live translator page loads"
    p = sub.add_parser("export", help=text, description=text[0].upper() + text[1:] + ".",
                       parents=parents)
    p.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT,
                   help=f"default {DEFAULT_CHECKPOINT}")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="folder to write into, created if missing (required: no default)")
    p.add_argument("--dtype", choices=("float32", "float16"), default="float32",
                   help="weights as float32 (default: the page computes what PyTorch "
                        "computes) or float16 (half the size, each weight rounded)")


def run(args: argparse.Namespace) -> int:
    """Write the model file; print each path written with its size."""
    from labformer.app.cli.translate import warn_unverified
    from labformer.app.export import MODEL_FILE, export_model, read_model_file
    from labformer.app.translate import Translator
    from labformer.train import file_kind

    out = Path(args.out)
    special = special_file(str(out))
    if special or (out.exists() and not out.is_dir()):
        raise CLIError(f"--out {out} is {special or 'a file'}, not a folder: nothing was "
                       f"written")
    target = out / MODEL_FILE
    kind = file_kind(target)
    if kind not in ("missing", "a text file"):
        raise CLIError(f"{target} exists and is {kind or 'a zip archive'}, not a labformer "
                       f"model file: export replaces only one; choose another --out (the "
                       f"file is unchanged)")
    if kind == "a text file":
        try:
            read_model_file(target)
        except ValueError as e:
            if "damaged" not in str(e) and "another format" not in str(e):
                raise CLIError(f"{target} exists and is not a labformer model file: export "
                               f"replaces only one; choose another --out (the file is "
                               f"unchanged)") from None
    translator_file = Path(args.checkpoint)
    kind = file_kind(translator_file)
    if kind == "missing":
        raise CLIError(f"{translator_file}: no such checkpoint (train one with labformer train "
                       f"--out {translator_file})")
    check_folder_writable(str(target), "--out")
    translator = Translator.from_checkpoint(translator_file, device="cpu")  # checksum checked
    warn_unverified(translator_file, translator)
    try:
        written = export_model(translator.model, translator.src_vocab, translator.tgt_vocab,
                               out, src_text=translator.src_text, tgt_text=translator.tgt_text,
                               dtype=args.dtype)
    except OSError as e:
        kept = "is unchanged" if target.exists() else "was not written"
        raise CLIError(f"cannot write {target}: {os_reason(e)}; {target} {kept}") from None
    for path in written:
        note(f"{path} ({path.stat().st_size / 2**20:.1f} MiB)")
    return 0
