"""What a reader sees of the chapters' code: the lesson in view, the plumbing collapsed.

A code cell is visible unless its tags hide it (hide-input, remove-input, remove-cell,
hide-cell). Experiment plumbing (imports, seed sweeps, tuning loops, timing harnesses, tables)
is collapsed with ``hide-input`` and a prompt that says what it hides, and every prompt has its
Chinese in book/locales/zh_CN/interface.json ("toggles", read by book/_ext/labformer_book.py's
TOGGLE_WORDS), which the Chinese edition shows instead.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
HIDDEN = {"hide-input", "remove-input", "remove-cell", "hide-cell"}
#: Hidden code lines the book may hold per visible one: the page shows the code a chapter
#: teaches, the checks and the plumbing stay collapsed or move into labformer.book. A ratchet:
#: 3.06 when the cap on visible lines gave way to this one, 2.23 after the first pass; the
#: target is 2.0. Lower it as plumbing leaves the chapters, never raise it.
MAX_HIDDEN_PER_VISIBLE = 2.25
TARGET_HIDDEN_PER_VISIBLE = 2.0
#: A line of checking or plumbing code: an assert, a claim checked or noted, a value glued
#: for the prose, a sweep's check. The exercises' own ``exercises.check(...)`` is the
#: reader's, and stays in view.
PLUMBING = re.compile(r"^\s*assert\b|\bglue\(|\bev\.(check|note)\(|\bevidence\(|"
                      r"\bSWEEP\.check\(|\.verify\(\)")
CJK = re.compile(r"[\u4e00-\u9fff]")


def _code_cells() -> list[tuple[str, int, dict]]:
    """(notebook, index, cell) for every code cell of the chapters."""
    assert len(CHAPTERS) >= 13
    return [(path.name, n, cell) for path in CHAPTERS
            for n, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"])
            if cell["cell_type"] == "code"]


def _tags(cell: dict) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def _lines(cell: dict) -> int:
    return len("".join(cell["source"]).splitlines())


def _book_extension():
    spec = importlib.util.spec_from_file_location(
        "labformer_book", ROOT / "book" / "_ext" / "labformer_book.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("labformer_book", module)
    spec.loader.exec_module(module)
    return module


def _toggle_words() -> dict[str, str]:
    return _book_extension().TOGGLE_WORDS["zh_CN"]


def _visible(cell: dict) -> bool:
    return not _tags(cell) & HIDDEN


def test_no_check_or_plumbing_line_is_in_view() -> None:
    """What a reader sees of a chapter's code is what it teaches: every assert, claim, glue
    and sweep check sits in a collapsed cell."""
    found = [f"{name}:{n}:{k} {line.strip()}"
             for name, n, cell in _code_cells() if _visible(cell)
             for k, line in enumerate("".join(cell["source"]).splitlines(), start=1)
             if PLUMBING.search(line)]
    assert not found, ("checks or plumbing in view (chapter:cell:line); move them into a "
                       "collapsed cell:\n" + "\n".join(found))


def test_the_pattern_finds_plumbing() -> None:
    for line in ("assert x", "    assert ev.check('a', True)", 'glue("ch1_x", x)',
                 "with evidence() as ev:", "ev.note('n')", 'SWEEP.check(ev, "c", "n", 1)'):
        assert PLUMBING.search(line), line
    for line in ('exercises.check("attention", my_attention)', "glued = 1",
                 "# assert nothing", "evidence_of = 2"):
        assert not PLUMBING.search(line), line


def test_hidden_code_stays_within_its_ratio_to_the_visible() -> None:
    """The book shows the code it teaches: the collapsed code (checks, figures, plumbing,
    solutions, imports) is at most MAX_HIDDEN_PER_VISIBLE times the code in view (the target:
    TARGET_HIDDEN_PER_VISIBLE)."""
    visible = hidden = 0
    per_chapter: dict[str, list[int]] = {}
    for name, _, cell in _code_cells():
        counts = per_chapter.setdefault(name, [0, 0])
        if _visible(cell):
            visible += _lines(cell)
            counts[0] += _lines(cell)
        else:
            hidden += _lines(cell)
            counts[1] += _lines(cell)
    print(f"{visible} visible and {hidden} hidden code lines: {hidden / visible:.2f} "
          f"hidden per visible (cap {MAX_HIDDEN_PER_VISIBLE:g}, target "
          f"{TARGET_HIDDEN_PER_VISIBLE:g})")
    assert visible > 1000, "the count found no code"
    most = ", ".join(f"{name} ({h} hidden, {v} visible)" for name, (v, h) in sorted(
        per_chapter.items(), key=lambda kv: kv[1][1] / max(kv[1][0], 1), reverse=True)[:4])
    assert hidden <= MAX_HIDDEN_PER_VISIBLE * visible, (
        f"{hidden} hidden code lines against {visible} visible ({hidden / visible:.2f} to 1, "
        f"at most {MAX_HIDDEN_PER_VISIBLE:g}): show the code a chapter teaches, move "
        f"plumbing into labformer.book. Most hidden per visible: {most}")


def test_import_cells_are_collapsed_as_imports() -> None:
    """A cell that starts with imports is collapsed with the imports tag and its prompt."""
    problems = []
    for name, n, cell in _code_cells():
        first = "".join(cell["source"]).lstrip()
        if "solution" in _tags(cell) or not first.startswith(("import ", "from ")):
            continue
        prompts = cell.get("metadata", {}).get("mystnb", {})
        if not {"hide-input", "imports"} <= _tags(cell):
            problems.append(f"{name} cell {n}: tags {sorted(_tags(cell))}")
        elif not prompts.get("code_prompt_show", "").startswith("Show the imports"):
            problems.append(f"{name} cell {n}: prompt {prompts.get('code_prompt_show')!r}")
    assert not problems, "import cells not collapsed as imports:\n" + "\n".join(problems)


def test_every_prompt_of_a_collapsed_cell_has_its_chinese() -> None:
    words = _toggle_words()
    problems = []
    for name, n, cell in _code_cells():
        prompts = cell.get("metadata", {}).get("mystnb", {})
        show, hide = prompts.get("code_prompt_show"), prompts.get("code_prompt_hide")
        if (show is None) != (hide is None):
            problems.append(f"{name} cell {n}: a show prompt without its hide prompt")
        if show and "hide-input" in _tags(cell) and not show.startswith("Show "):
            problems.append(f"{name} cell {n}: {show!r} does not start with 'Show '")
        for prompt in (show, hide):
            if prompt is None:
                continue
            chinese = words.get(prompt, "")
            if not CJK.search(chinese):
                problems.append(f"{name} cell {n}: {prompt!r} has no Chinese in interface.json")
            elif re.search(r"[A-Za-z]{2,}", chinese.replace("Transformer", "")):
                problems.append(f"{name} cell {n}: {chinese!r} keeps English words")
            if re.search(r"[<>&\"']", prompt):  # escaped in HTML: translate_toggles misses it
                problems.append(f"{name} cell {n}: {prompt!r} holds a character HTML escapes")
    assert not problems, "\n".join(problems)


def _cell_metadata():
    spec = importlib.util.spec_from_file_location("cell_metadata",
                                                  ROOT / "book" / "_ext" / "cell_metadata.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_jupyterlab_collapses_what_the_page_hides():
    """A chapter opened in JupyterLab collapses the cells the page collapses: the flags
    JupyterLab reads (metadata.jupyter) follow the tags the book reads, in every chapter."""
    tool = _cell_metadata()
    assert tool.problems() == [], "run: python book/_ext/cell_metadata.py sync"
    solutions = [cell for _, _, cell in _code_cells() if "solution" in _tags(cell)]
    assert len(solutions) >= 40
    for cell in solutions:  # a solution stays closed, its code and its outputs
        assert cell["metadata"]["jupyter"] == {"source_hidden": True, "outputs_hidden": True}
    checks = [cell for _, _, cell in _code_cells() if _tags(cell) == {"hide-input"}]
    assert checks and all(c["metadata"]["jupyter"] == {"source_hidden": True} for c in checks)


def test_the_drift_check_bites():
    """A cell whose flags were lost, or set where the page shows the code, is reported."""
    tool = _cell_metadata()
    hidden = {"cell_type": "code", "metadata": {"tags": ["hide-input"]}, "source": []}
    assert tool.drift(hidden) == ({}, {"source_hidden": True})
    shown = {"cell_type": "code", "metadata": {"jupyter": {"source_hidden": True}},
             "source": []}
    assert tool.drift(shown) == ({"source_hidden": True}, {})
    synced = {"cell_type": "code", "metadata": {"tags": ["solution", "hide-cell"],
                                                "jupyter": {"source_hidden": True,
                                                            "outputs_hidden": True}}}
    assert tool.drift(synced) is None
    # a solution without its toggle labels would read "Show code cell content" on the page
    assert tool.prompt_drift(synced) == tool.SOLUTION_PROMPTS
    synced["metadata"]["mystnb"] = dict(tool.SOLUTION_PROMPTS)
    assert tool.prompt_drift(synced) is None


def _strip(text: str) -> str:
    import subprocess

    tool = _cell_metadata()
    exe = Path(sys.executable).parent / tool.STRIP[0]
    done = subprocess.run([str(exe), *tool.STRIP[1:], "-t"], input=text, capture_output=True,
                          text=True, check=True, cwd=ROOT)
    return done.stdout


def test_chapters_are_committed_as_the_git_filter_stores_them():
    """Each chapter passes through the git filter unchanged (no outputs, the filter's key
    order), so the filter changes nothing a learner did not change."""
    tool = _cell_metadata()
    for path in CHAPTERS:
        text = path.read_text(encoding="utf-8")
        nb = json.loads(text)
        assert tool.normal_form(nb) == text, f"{path.name}: run book/_ext/cell_metadata.py sync"
        assert "language_info" not in nb["metadata"], path.name
        for cell in nb["cells"]:
            assert "user_expressions" not in cell["metadata"], path.name
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [] and cell["execution_count"] is None, path.name
    # the normal form is the filter's own (one chapter through the real filter suffices)
    text = CHAPTERS[-1].read_text(encoding="utf-8")
    assert _strip(text) == text


def test_a_run_and_save_leaves_git_clean():
    """What JupyterLab saves after a run (outputs, execution counts, inline expressions'
    results, the Python version) is what git sees removed: the stored chapter is unchanged."""
    path = CHAPTERS[2]
    committed = path.read_text(encoding="utf-8")
    nb = json.loads(committed)
    nb["metadata"]["language_info"] = {"name": "python", "version": "3.11.7"}
    for n, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            cell["execution_count"] = n
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["ran\n"]}]
        else:
            cell["metadata"]["user_expressions"] = [
                {"expression": "x", "result": {"status": "ok", "data": {"text/plain": "1"}}}]
    saved = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    assert saved != committed
    assert _strip(saved) == committed


def test_strict_nbval_is_refused_with_what_to_run() -> None:
    """The chapters carry no stored outputs, so strict --nbval would check nothing more than
    --nbval-lax: it stops with a usage error naming --nbval-lax; --nbval-lax collects."""
    import subprocess

    def collect(flag: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pytest", flag, "--collect-only", "-q",
                               "-p", "no:cacheprovider", "book/01_seq2seq_attention.ipynb"],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)

    strict = collect("--nbval")
    assert strict.returncode == 4 and "--nbval-lax" in strict.stderr, strict.stderr[-500:]
    lax = collect("--nbval-lax")
    assert lax.returncode == 0 and "tests collected" in lax.stdout, lax.stdout[-500:]


def test_chinese_links_to_chapters_read_as_chinese_names_them():
    from docutils import nodes
    from docutils.frontend import get_default_settings
    from docutils.parsers.rst import Parser
    from docutils.utils import new_document

    ext = _book_extension()

    def page(before: str, target: str, title: str, after: str) -> nodes.paragraph:
        link = nodes.reference("", "", nodes.inline("", title, classes=["doc"]),
                               internal=True, refuri=target)
        return nodes.paragraph("", "", nodes.Text(before), link, nodes.Text(after))

    def built(language: str, *paragraphs: nodes.paragraph) -> list[str]:
        doc = new_document("test", get_default_settings(Parser))
        doc.extend(paragraphs)
        app = type("App", (), {"config": type("C", (), {"language": language})()})()
        ext.chinese_chapter_links(app, doc, "book/07_transformer")
        return [p.astext() for p in doc.children]

    chapter = page("编码器的各个子层是 ", "08_decoder_masks.html#x", "解码器及其掩码", " 的主题")
    other = page("见 ", "../book/checking.html", "检查是怎样做的", "。")
    english = page("is the subject of ", "08_decoder_masks.html", "The decoder", ", then")
    assert built("zh_CN", chapter, other) == [
        "编码器的各个子层是第 8 章《解码器及其掩码》的主题", "见《检查是怎样做的》。"]
    assert built("en", english) == ["is the subject of The decoder, then"]
