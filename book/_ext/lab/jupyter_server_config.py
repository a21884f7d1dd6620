"""The Jupyter server's configuration under `make lab` (the Makefile puts this folder on
JUPYTER_CONFIG_PATH): after each save, a chapter whose stored form did not change (a run, or
an autosave, with no edit) leaves `git status` clean (book/_ext/cell_metadata.py's
post_save)."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "labformer_cell_metadata", Path(__file__).resolve().parents[1] / "cell_metadata.py")
assert _spec is not None and _spec.loader is not None
_cell_metadata = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cell_metadata)

c = get_config()  # type: ignore[name-defined]  # noqa: F821
c.FileContentsManager.post_save_hook = _cell_metadata.post_save
