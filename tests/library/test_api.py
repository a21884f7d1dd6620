"""The package's public surface: what ``import labformer`` offers, and what it costs."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import labformer

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("sacrebleu", "tqdm", "matplotlib", "seaborn")


def _modules_loaded_by(code: str) -> list[str]:
    """The modules of HEAVY + torch that ``code`` leaves in sys.modules, in a fresh process."""
    probe = f"{code}\nprint(sorted(m for m in {(*HEAVY, 'torch')!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", "import sys\n" + probe], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1].replace("'", '"'))


def test_import_labformer_loads_no_plotting_metrics_or_progress_library():
    assert _modules_loaded_by("import labformer") == []


def test_training_and_translating_modules_load_metrics_and_plots_on_use_only():
    loaded = _modules_loaded_by(
        "import labformer.app.translate, labformer.train, labformer.app.cli")
    assert "torch" in loaded  # (torch itself may load tqdm)
    assert not {"sacrebleu", "matplotlib", "seaborn"} & set(loaded)


def test_help_does_not_load_torch():
    code = ("sys.argv = ['labformer', '--help']\nfrom labformer.app.cli import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert e.code == 0")
    assert _modules_loaded_by(code) == []


def test_every_public_name_resolves_to_its_module():
    assert labformer.__all__ == sorted(labformer.__all__)
    for name in labformer.__all__:
        value = getattr(labformer, name)
        home = importlib.import_module(value.__module__)
        assert value.__module__.startswith("labformer.") and getattr(home, name) is value, name
    assert set(labformer.__all__) <= set(dir(labformer))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        labformer.nope  # noqa: B018


def test_very_generic_names_stay_in_their_modules():
    from labformer import layers, loss
    from labformer.app import translate

    for name, module in (("entropy", loss), ("residual", layers), ("score", translate)):
        assert name not in labformer.__all__ and name not in dir(labformer)
        assert callable(getattr(module, name))
        with pytest.raises(AttributeError, match=rf"use labformer(\.\w+)+\.{name}"):
            getattr(labformer, name)
    # torch's scaled_dot_product_attention returns the output only; labformer's, (out, weights)
    assert "scaled_dot_product_attention" not in labformer.__all__
    with pytest.raises(AttributeError, match="use labformer.attention_with_weights"):
        labformer.scaled_dot_product_attention  # noqa: B018


def test_type_checkers_see_every_public_name():
    # At run time names are imported on first use (__getattr__), which a type checker cannot
    # follow: the `if TYPE_CHECKING:` block must import each name of __all__ explicitly.
    tree = ast.parse((ROOT / "labformer" / "__init__.py").read_text())
    for package, names in (("labformer", labformer.__all__),):
        blocks = [node for node in tree.body if isinstance(node, ast.If)
                  and getattr(node.test, "id", None) == "TYPE_CHECKING"]
        seen = {alias.asname or alias.name for block in blocks for node in ast.walk(block)
                if isinstance(node, ast.ImportFrom) for alias in node.names}
        assert seen == set(names), (package, set(names) ^ seen)


def test_text_tools_do_not_load_torch():
    assert _modules_loaded_by("import labformer.data.text") == []
    assert _modules_loaded_by("import labformer.data, labformer.special, labformer.data.vocab, "
                              "labformer.data.corpus") == []
    assert "torch" in _modules_loaded_by("from labformer.data import make_batches")


def test_test_doubles_live_in_labformer_testing():
    from labformer import decoding
    from labformer.book import testing

    assert "PrefixTableModel" not in labformer.__all__
    assert not hasattr(decoding, "PrefixTableModel")
    assert testing.PrefixTableModel.__module__ == "labformer.book.testing"


def _book_imports() -> list[tuple[str, str, str]]:
    """(notebook, module, name) for every ``from labformer... import ...`` in the book, read
    with Python's own parser (so ``import a as b``, parentheses and comments all work)."""
    found = []
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "code":
                continue
            tree = ast.parse("".join(cell["source"]))  # the chapters hold no IPython magics
            found += [(path.name, node.module, alias.name) for node in ast.walk(tree)
                      if isinstance(node, ast.ImportFrom) and node.module
                      and node.module.split(".")[0] == "labformer" for alias in node.names]
    return found


def test_every_name_the_book_imports_is_importable_from_there():
    imports = _book_imports()
    assert len(imports) > 30  # the parser found the chapters' imports
    for notebook, module, name in imports:
        # ``from labformer.book import diagrams`` names a submodule: importable without being an
        # attribute until something has imported it (which depends on the tests run before)
        found = (hasattr(importlib.import_module(module), name)
                 or importlib.util.find_spec(f"{module}.{name}") is not None)
        assert found, (notebook, module, name)


def test_every_labformer_attribute_the_book_mentions_exists():
    # Text and code alike: "measure it with `labformer.AdditiveAttention`" must work.
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            for name in re.findall(r"\blabformer\.(\w+)", "".join(cell["source"])):
                assert (hasattr(labformer, name)
                        or importlib.util.find_spec(f"labformer.{name}")), (path.name, name)
