"""The book's Sphinx extensions (book/_ext/*.py) as modules the tests can import.

Sphinx puts book/_ext on its path; the tests load a module from its file instead, once per
name, and register it in ``sys.modules`` so that the modules find each other as they do in a
build (labformer_book imports translations)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXT = Path(__file__).resolve().parents[1] / "book" / "_ext"


def load(name: str) -> ModuleType:
    """book/_ext/NAME.py as a module (the one already loaded, if any)."""
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(
            EXT / f"{name}.py"):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXT / f"{name}.py")
    assert spec and spec.loader, f"no extension {name!r} in {EXT}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
