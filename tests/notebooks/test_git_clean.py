"""A chapter run and saved in JupyterLab, with no edit, leaves `git status` clean.

The chapter goes into a temporary git repository with the book's filter configuration (the
.gitattributes rule, and the clean command `make` installs: book/_ext/cell_metadata.py's
STRIP, the Makefile's NBSTRIP), and is saved back through the Jupyter server's save path
(jupyter_server's contents manager, which `PUT /api/contents` calls) with what JupyterLab 4
sends after opening it (an autosave) and after Run All: the notebook model's JSON, sources as
strings, `collapsed` mirrored from `jupyter.outputs_hidden` when loaded, every run cell
un-collapsed (JupyterLab drops `"outputs_hidden": true` and `collapsed`), outputs and
execution counts, the kernel's display name "Python 3 (ipykernel)" and `language_info`,
jupyterlab-myst's `user_expressions`, and the cell timings JupyterLab records when asked.

The server runs with `make lab`'s configuration (book/_ext/lab/jupyter_server_config.py), whose
post-save hook lets git see that a saved chapter's stored form did not change: git trusts a
changed file size without running the filter, so without it `git status` calls the chapter
modified while `git diff` is empty (test_without_the_hook_git_trusts_the_size).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = ("10_beam_search.ipynb", "15_language_model.ipynb")

pytest.importorskip("jupyter_server")
if shutil.which("git") is None:  # pragma: no cover - git comes with the checkout
    pytest.skip("git is not installed", allow_module_level=True)


def _tool() -> Any:
    spec = importlib.util.spec_from_file_location("cell_metadata",
                                                  ROOT / "book" / "_ext" / "cell_metadata.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _filter_command() -> str:
    """The clean command `make` installs (the Makefile's NBSTRIP), for this interpreter."""
    strip = _tool().STRIP
    assert strip[:2] == ["python", "book/_ext/cell_metadata.py"], strip
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "NBSTRIP := $(CURDIR)/$(VENV)/bin/python $(CURDIR)/book/_ext/cell_metadata.py " \
        f"{' '.join(strip[2:])}\n" in makefile, "the Makefile's NBSTRIP is not STRIP"
    return " ".join([sys.executable, str(ROOT / strip[1]), *strip[2:]])


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout


def _repo(tmp_path: Path, clean: str, chapters: tuple[str, ...] = CHAPTERS[:1]) -> Path:
    """A git repository holding ``chapters``, committed through the filter ``clean``."""
    repo = tmp_path / "repo"
    (repo / "book").mkdir(parents=True)
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "learner@example.org")
    _git(repo, "config", "user.name", "A learner")
    _git(repo, "config", "core.autocrlf", "false")
    _git(repo, "config", "filter.nbstripout.clean", clean)
    _git(repo, "config", "filter.nbstripout.smudge", "cat")
    for kept in (".gitattributes", ".gitignore"):  # as in a clone: .ipynb_checkpoints/ ignored
        shutil.copy(ROOT / kept, repo / kept)
    for name in chapters:
        shutil.copy(ROOT / "book" / name, repo / "book" / name)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "the chapters")
    assert _git(repo, "status", "--porcelain") == ""
    return repo


def _as_jupyterlab_loads(nb: dict[str, Any]) -> dict[str, Any]:
    """The notebook model JupyterLab 4 holds after opening the file: @jupyter/ydoc mirrors
    ``jupyter.outputs_hidden`` into ``collapsed``; the started kernel names itself."""
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        hidden = cell.get("metadata", {}).get("jupyter", {}).get("outputs_hidden")
        if hidden is not None:
            cell["metadata"]["collapsed"] = hidden
        cell["source"] = "".join(cell["source"])  # the model's JSON: one string
    nb["metadata"]["kernelspec"] = {"display_name": "Python 3 (ipykernel)",
                                    "language": "python", "name": "python3"}
    nb["metadata"]["language_info"] = {
        "codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py",
        "mimetype": "text/x-python", "name": "python", "nbconvert_exporter": "python",
        "pygments_lexer": "ipython3", "version": "3.11.7"}
    return nb


def _as_jupyterlab_runs_all(nb: dict[str, Any]) -> dict[str, Any]:
    """The model after Run All: CodeCell.execute clears each cell's outputs and un-collapses
    it (deleteMetadata("collapsed"), which drops ``jupyter.outputs_hidden``), then the kernel's
    outputs arrive; jupyterlab-myst stores the inline expressions' results; with
    recordTiming on, the cells carry their timings."""
    nb = copy.deepcopy(nb)
    for n, cell in enumerate(nb["cells"], start=1):
        meta = cell["metadata"]
        if cell["cell_type"] == "code":
            meta.pop("collapsed", None)
            jupyter = {k: v for k, v in meta.get("jupyter", {}).items() if k != "outputs_hidden"}
            if jupyter:
                meta["jupyter"] = jupyter
            else:
                meta.pop("jupyter", None)
            cell["execution_count"] = n
            cell["outputs"] = [
                {"name": "stdout", "output_type": "stream", "text": f"cell {n} ran\n"},
                {"data": {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"},
                 "metadata": {}, "output_type": "display_data"}]
            meta["execution"] = {"iopub.execute_input": "2026-12-07T21:00:00.000Z",
                                 "iopub.status.idle": "2026-12-07T21:00:01.000Z"}
        else:
            meta["user_expressions"] = [{"expression": "x", "result": {
                "status": "ok", "data": {"text/plain": "1"}, "metadata": {}}}]
    return nb


def _lab_config() -> Any:
    """`make lab`'s server configuration, read as the server reads it."""
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("jupyter_server_config.py",
                              path=str(ROOT / "book" / "_ext" / "lab")).load_config()


def _save_as_jupyterlab(repo: Path, name: str, change: Any, hook: bool = True) -> str:
    """Load ``book/name`` and save it back through the Jupyter server's contents manager, as
    ``PUT /api/contents`` does with the model JupyterLab sends; the file's new text."""
    from jupyter_server.services.contents.filemanager import FileContentsManager

    manager = FileContentsManager(root_dir=str(repo), config=_lab_config() if hook else None)
    path = f"book/{name}"
    model = manager.get(path, content=True, type="notebook")
    content = change(json.loads(json.dumps(model["content"])))
    manager.save({"type": "notebook", "format": "json", "content": content}, path)
    return (repo / path).read_text(encoding="utf-8")


pytestmark = pytest.mark.filterwarnings("ignore:Overriding existing post_save_hook")


@pytest.fixture(autouse=True)
def _jupyter_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's notebook signatures go to a temporary folder, not the learner's home."""
    for var in ("JUPYTER_DATA_DIR", "JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))


def test_autosave_after_opening_leaves_git_clean(tmp_path: Path) -> None:
    repo = _repo(tmp_path, _filter_command())
    for name in CHAPTERS[:1]:
        saved = _save_as_jupyterlab(repo, name, _as_jupyterlab_loads)
        assert '"Python 3 (ipykernel)"' in saved and "language_info" in saved
    assert _git(repo, "status", "--porcelain") == ""


def test_run_all_and_save_leaves_git_clean(tmp_path: Path) -> None:
    repo = _repo(tmp_path, _filter_command(), CHAPTERS)
    for name in CHAPTERS:
        committed = (ROOT / "book" / name).read_text(encoding="utf-8")
        saved = _save_as_jupyterlab(
            repo, name, lambda nb: _as_jupyterlab_runs_all(_as_jupyterlab_loads(nb)))
        assert saved != committed and '"output_type": "stream"' in saved  # outputs kept
        solutions = [c for c in json.loads(saved)["cells"]
                     if "solution" in c["metadata"].get("tags", [])]
        assert solutions and all("outputs_hidden" not in c["metadata"].get("jupyter", {})
                                 for c in solutions)  # what JupyterLab does to them
    assert _git(repo, "status", "--porcelain") == ""
    assert _git(repo, "diff", "--stat") == ""


def test_a_real_edit_still_shows(tmp_path: Path) -> None:
    """The filter hides JupyterLab's bookkeeping, not the learner's work."""
    repo = _repo(tmp_path, _filter_command())

    def edit(nb: dict[str, Any]) -> dict[str, Any]:
        nb = _as_jupyterlab_runs_all(_as_jupyterlab_loads(nb))
        cell = next(c for c in nb["cells"] if c["cell_type"] == "code")
        cell["source"] += "\nbeam_size = 3"
        return nb

    _save_as_jupyterlab(repo, CHAPTERS[0], edit)
    assert _git(repo, "status", "--porcelain").split() == ["M", f"book/{CHAPTERS[0]}"]
    assert "+    \"beam_size = 3\"" in _git(repo, "diff")


def test_plain_nbstripout_would_not_keep_git_clean(tmp_path: Path) -> None:
    """The test bites: the former filter (nbstripout alone) shows the chapter modified."""
    nbstripout = Path(sys.executable).parent / "nbstripout"
    if not nbstripout.exists():  # pragma: no cover - nbstripout is in the lock file
        pytest.skip("nbstripout is not installed")
    repo = _repo(tmp_path, f"{nbstripout} --keep-id --extra-keys "
                           "'cell.metadata.user_expressions metadata.language_info'")
    _save_as_jupyterlab(repo, CHAPTERS[0],
                        lambda nb: _as_jupyterlab_runs_all(_as_jupyterlab_loads(nb)))
    assert _git(repo, "status", "--porcelain").split() == ["M", f"book/{CHAPTERS[0]}"]


def test_without_the_hook_git_trusts_the_size(tmp_path: Path) -> None:
    """Why `make lab` has a post-save hook: the filter alone makes `git diff` empty, but
    `git status` sees the size of a file with outputs and calls it modified."""
    repo = _repo(tmp_path, _filter_command())
    _save_as_jupyterlab(repo, CHAPTERS[0],
                        lambda nb: _as_jupyterlab_runs_all(_as_jupyterlab_loads(nb)), hook=False)
    assert _git(repo, "diff") == ""
    assert _git(repo, "status", "--porcelain").split() == ["M", f"book/{CHAPTERS[0]}"]
    tool = _tool()
    assert tool.refresh_git_index(repo / "book" / CHAPTERS[0])  # what the hook does
    assert _git(repo, "status", "--porcelain") == ""


def test_make_lab_reads_the_hook() -> None:
    """`make lab` puts book/_ext/lab on the server's config path."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    lab = makefile.split("\nlab:", 1)[1].split("\n\n", 1)[0]
    assert "$(CURDIR)/book/_ext/lab" in lab and "JUPYTER_CONFIG_PATH" in lab, lab
    config = _lab_config()
    assert config.FileContentsManager.post_save_hook.__name__ == "post_save"
