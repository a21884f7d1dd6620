"""The notebook is the book: chapters opened in JupyterLab read, run and check like the page.

JupyterLab (with jupyterlab-myst, as `make lab` starts it) is started from the repository root,
three chapters are opened in Chromium and run from top to bottom, and what a learner sees is
checked: the prose's numbers and figures filled in from the kernel, no raw MyST markup, every
cell the page hides collapsed, every figure of the page present and no error output. Nothing is
saved (autosave off), so the chapters in the checkout are left as they are. Screenshots at
1366 px go to _build/screenshots/lab/ under `make screenshots`.

Chapter 11 reads the translator that `make book` trained (labformer.app.runs caches it), so this
test, which `make test` runs after the book and among its first files, takes about a minute
and a half. Only the chapter on screen is read: JupyterLab keeps every notebook it has
opened in the page, hidden, and would reopen the last one, so each chapter opens in a reset
workspace and the counts come from the visible notebook panel.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from test_book_html import chromium, save_shot

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = ["03_scaling", "07_transformer", "11_translator"]
SHOTS = ROOT / "_build" / "screenshots" / "lab"
#: How long a chapter may run in JupyterLab here (chapter 11 without its cache: ~3 minutes).
RUN_TIMEOUT = 420
#: MyST a renderer did not understand, or a value the kernel never filled in.
RAW_MARKUP = re.compile(r"\{[a-z]+(?::[a-z-]+)?\}`|^:::|^```\{|Unknown (?:Directive|Role)|"
                        r"\{glue", re.M)
EVAL = re.compile(r"\{eval\}`([^`]+)`")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _lab_settings(folder: Path) -> None:
    """A learner's JupyterLab, less what would write into the checkout or reach the network."""
    settings = {
        "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
        # as `make lab` sets it (.venv/share/jupyter/lab/settings/overrides.json)
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings":
            {"autoStartDefaultKernel": True, "windowingMode": "none"},
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
            {"fetchNews": "false", "checkForUpdates": False},
    }
    for name, value in settings.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value), encoding="utf-8")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory):
    """JupyterLab serving the repository root, as `make lab` runs it; its URL."""
    tmp = tmp_path_factory.mktemp("lab")
    _lab_settings(tmp / "settings")
    # as `make lab`: the book's styles for JupyterLab in the user config folder's custom/
    (tmp / "config" / "custom").mkdir(parents=True)
    shutil.copy(ROOT / "book" / "_ext" / "lab" / "custom.css", tmp / "config" / "custom")
    port = _free_port()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp / "config"),
           "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"), "TQDM_DISABLE": "1"}
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}",
               "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=",
               "--ServerApp.password=", f"--ServerApp.root_dir={ROOT}",
               f"--LabApp.user_settings_dir={tmp / 'settings'}",
               f"--LabApp.workspaces_dir={tmp / 'workspaces'}", "--LabApp.news_url=",
               # as `make lab`: the book's styles for JupyterLab (book/_ext/lab/custom.css)
               "--custom-css"]
    if os.geteuid() == 0:
        command.append("--allow-root")
    log = (tmp / "lab.log").open("w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            if server.poll() is not None:
                pytest.fail(f"JupyterLab stopped: {(tmp / 'lab.log').read_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"{url}/lab", timeout=1)
                break
            except OSError:
                time.sleep(0.25)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def _hidden_counts(nb: dict) -> tuple[int, int, int]:
    """(code cells collapsed, outputs collapsed, figures) the chapter's file asks for."""
    flags = [c.get("metadata", {}).get("jupyter", {}) for c in nb["cells"]]
    figures = sum("".join(c["source"]).count(":::{figure}") for c in nb["cells"]
                  if c["cell_type"] == "markdown")
    return (sum(bool(f.get("source_hidden")) for f in flags),
            sum(bool(f.get("outputs_hidden")) for f in flags), figures)


READ_PAGE = """() => {
  // the chapter on screen only: JupyterLab keeps other open notebooks in the page, hidden
  const root = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
  if (!root) return {cells: 0, running: 0, markdown: [], unrendered: 1, codes: [],
                     inputsCollapsed: 0, outputsCollapsed: 0, figures: 0, errors: [],
                     smallFigures: [], tallies: []};
  const cells = [...root.querySelectorAll('.jp-Cell')];
  const markdown = cells.filter(c => c.classList.contains('jp-MarkdownCell'));
  return {
    cells: cells.length,
    running: cells.filter(c => (c.querySelector('.jp-InputPrompt') || {}).textContent
                               === '[*]:').length,
    markdown: markdown.map(c => c.querySelector('.jp-RenderedMarkdown, .myst') ?
                                c.querySelector('.jp-RenderedMarkdown, .myst').innerText : ''),
    unrendered: markdown.filter(c => !c.querySelector('.jp-RenderedMarkdown, .myst')).length,
    codes: markdown.flatMap(c => [...c.querySelectorAll('code')].map(e => e.textContent)),
    inputsCollapsed: root.querySelectorAll('.jp-InputPlaceholder').length,
    outputsCollapsed: root.querySelectorAll('.jp-OutputPlaceholder').length,
    figures: markdown.flatMap(c => [...c.querySelectorAll('figure')])
                     .filter(f => f.querySelector('img, svg')).length,
    // a figure's picture drawn as a picture, not as an icon: an image at least half the
    // figure's width (up to 640 px), an explorer (HTML) at least 100 px high
    smallFigures: markdown.flatMap(c => [...c.querySelectorAll('figure')]).filter(f => {
      const img = f.querySelector('.jp-RenderedSVG > img, .jp-RenderedImage > img');
      if (img) return img.getBoundingClientRect().width
                      < 0.5 * Math.min(f.getBoundingClientRect().width, 640);
      const value = f.querySelector('.myst-RenderedExpression');
      return !value || value.getBoundingClientRect().height < 100;
    }).map(f => f.id || '?'),
    // a block of checks reads "✓ 7 checks hold: the first claim" (the tally set off)
    // (the tick and the colon are the stylesheet's generated content, which innerText omits)
    tallies: [...root.querySelectorAll('details.lf-evidence > summary')].slice(0, 3).map(s => {
      const tally = s.querySelector('.lf-tally'), lead = s.querySelector('.lf-lead');
      const css = (e, p) => (getComputedStyle(e, p).content || '').replace(/^"|"$/g, '');
      const after = css(tally, '::after');
      return css(tally, '::before') + tally.innerText +
             (lead && lead.offsetParent ? (after === 'none' ? '' : after) + lead.innerText : '');
    }),
    errors: [...root.querySelectorAll(
      '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
      .map(e => e.innerText).filter(t => /Traceback|Error/.test(t)),
  };
}"""


def _session_state(url: str, chapter: str) -> str | None:
    """The execution state of the chapter's kernel from JupyterLab's REST API, or None."""
    with urllib.request.urlopen(f"{url}/api/sessions", timeout=10) as reply:
        sessions = json.loads(reply.read())
    for session in sessions:
        if session.get("path", "").endswith(f"book/{chapter}.ipynb"):
            return str((session.get("kernel") or {}).get("execution_state"))
    return None


def _run_all(page, url: str, chapter: str) -> dict:
    # ?reset: a workspace with only this chapter open (JupyterLab would reopen the last one)
    page.goto(f"{url}/lab/tree/book/{chapter}.ipynb?reset")
    page.wait_for_selector(".jp-Notebook .jp-Cell", state="attached", timeout=90_000)
    # The kernel has started once JupyterLab's server reports it idle. A kernel that starts
    # while the kernel list still loads may ask which kernel to use: the chapter's own.
    deadline = time.monotonic() + 120
    while _session_state(url, chapter) != "idle":
        if page.locator(".jp-Dialog .jp-mod-accept").count():
            page.click(".jp-Dialog .jp-mod-accept")
        if time.monotonic() > deadline:
            pytest.fail(f"{chapter}: its kernel never started")
        page.wait_for_timeout(500)
    opened = page.evaluate(READ_PAGE)  # as the chapter opens, before it runs
    page.click(".lm-MenuBar-itemLabel:text-is('Run')")
    page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
    return opened


def _finished(state: dict, expressions: list[str]) -> bool:
    """All code cells done and every {eval} shown as its value, not its source."""
    return (state["running"] == 0 and state["unrendered"] == 0
            and not set(state["codes"]) & set(expressions))


@pytest.mark.solo
def test_chapters_read_run_and_check_in_jupyterlab(lab: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    files = {c: (ROOT / "book" / f"{c}.ipynb").read_bytes() for c in CHAPTERS}
    with chromium() as browser:
        for chapter in CHAPTERS:  # one after the other, as a learner would
            page = browser.new_page(viewport={"width": 1366, "height": 900})
            nb = json.loads(files[chapter])  # the file as JupyterLab opens it
            expressions = [m.group(1) for c in nb["cells"] if c["cell_type"] == "markdown"
                           for m in EVAL.finditer("".join(c["source"]))]
            assert expressions, f"{chapter} has no {{eval}} in its prose"
            opened = _run_all(page, lab, chapter)
            deadline = time.monotonic() + RUN_TIMEOUT
            page.wait_for_timeout(3000)  # Run All has queued every cell
            while True:
                if page.locator(".jp-Dialog .jp-mod-accept").count():
                    page.click(".jp-Dialog .jp-mod-accept")  # the kernel to start: Python 3
                state = page.evaluate(READ_PAGE)
                if (_finished(state, expressions) and _session_state(lab, chapter) == "idle"
                        or time.monotonic() > deadline):
                    break
                page.wait_for_timeout(1000)
            page.wait_for_timeout(1000)
            state = page.evaluate(READ_PAGE)
            save_shot(page, SHOTS / f"{chapter}.png")
            figure = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) "
                                  ".jp-MarkdownCell figure:has(img)").first
            if figure.count():  # a second screenshot at the chapter's first figure
                figure.evaluate("node => node.scrollIntoView()")
                page.wait_for_timeout(500)
                save_shot(page, SHOTS / f"{chapter}-figure.png")
            want_inputs, want_outputs, want_figures = _hidden_counts(nb)
            text = "\n\n".join(state["markdown"])
            assert state["running"] == 0, f"{chapter}: still running after {RUN_TIMEOUT} s"
            assert not state["errors"], f"{chapter}: error output: {state['errors'][:2]}"
            raw = sorted({m.group(0) for m in RAW_MARKUP.finditer(text)})
            assert not raw, f"{chapter}: raw MyST in the rendered prose: {raw}"
            unfilled = sorted(set(state["codes"]) & set(expressions))
            assert not unfilled, f"{chapter}: values never filled in: {unfilled[:5]}"
            assert "NameError" not in text and "Error:" not in text, chapter
            assert state["inputsCollapsed"] == want_inputs, (
                f"{chapter}: {state['inputsCollapsed']} code cells collapsed, the page hides "
                f"{want_inputs}")
            # The solutions open closed, code and output. (Running a cell shows its new
            # output in JupyterLab, collapsed or not; the solution's code stays collapsed.)
            assert opened["outputsCollapsed"] == want_outputs, (
                f"{chapter}: {opened['outputsCollapsed']} outputs collapsed, the page hides "
                f"{want_outputs}")
            assert opened["inputsCollapsed"] == want_inputs, chapter
            assert state["figures"] == want_figures > 0, (
                f"{chapter}: {state['figures']} figures drawn of {want_figures}")
            assert not state["smallFigures"], (
                f"{chapter}: figures drawn as icons, not pictures: {state['smallFigures']}")
            tally = re.compile(r"[✓✗] \d+ (?:of \d+ )?checks? (?:holds?|fail)"
                               r"(?:, \d+ left out)?(?:$|: \S)")
            assert state["tallies"] and all(tally.match(t) for t in state["tallies"]), (
                f"{chapter}: a block of checks does not read '✓ N checks hold: ...': "
                f"{state['tallies']}")
            page.close()
    # Nothing was written into the checkout.
    assert files == {c: (ROOT / "book" / f"{c}.ipynb").read_bytes() for c in CHAPTERS}
