"""``labformer export``: the files the book's live translator page loads, from a checkpoint.

The page (``book/_static/labformer-live.js``) runs labformer's forward pass in the browser;
:mod:`labformer.export` writes the one script file it loads. Put the written file beside the
built page's ``_static`` folder in place of the book's own to run your model in the page.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import DEFAULT_CHECKPOINT, CLIError, note


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
    from ..export import export_checkpoint

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CLIError(f"--out {out} is a file, not a folder: nothing was written")
    translator_file = Path(args.checkpoint)
    if not translator_file.is_file():
        raise CLIError(f"{translator_file}: no such checkpoint (train one with labformer train "
                       f"--out {translator_file})")
    for path in export_checkpoint(translator_file, out, dtype=args.dtype):
        note(f"{path} ({path.stat().st_size / 2**20:.1f} MiB)")
    return 0
