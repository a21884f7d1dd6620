"""The seed sweep's own logic: fresh seeds, the commit's seed, the variant syntax."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "book" / "sweeps"))
import robust  # noqa: E402


def test_fresh_variants_are_new_seeds_cycling_the_kernels() -> None:
    variants = robust.fresh_variants(6)
    assert [k for _, k in variants] == robust.KERNELS * 2
    assert all(seed >= 5 for seed, _ in variants)  # 0-4 are the default sweep's
    assert len({s for s, _ in robust.fresh_variants(6)} | {s for s, _ in variants}) > 6
    with pytest.raises(argparse.ArgumentTypeError, match="positive count"):
        robust.fresh_variants(0)


def test_commit_seed_follows_the_commit() -> None:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=robust.ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()
    assert robust.commit_seed() == robust.commit_seed(head) >= 5
    if subprocess.run(["git", "rev-parse", "HEAD~1"], cwd=robust.ROOT,
                      capture_output=True).returncode == 0:
        assert robust.commit_seed("HEAD~1") != robust.commit_seed()
    with pytest.raises(SystemExit, match="git checkout"):
        robust.commit_seed("no-such-revision")


def test_variants_name_seed_and_kernel() -> None:
    assert robust.parse_variant("7:avx2") == (7, "avx2")
    for bad in ("7", "x:avx2", "7:sse"):
        with pytest.raises(argparse.ArgumentTypeError, match="SEED:KERNEL"):
            robust.parse_variant(bad)


# ----------------------------------------------------------------------- book/sweeps/claim_sweep.py

import claim_sweep  # noqa: E402


def test_seed_ranges_parse() -> None:
    assert claim_sweep.parse_seeds("1-3,9") == [1, 2, 3, 9]
    with pytest.raises(argparse.ArgumentTypeError, match="like 1-5,9"):
        claim_sweep.parse_seeds("1-x")


def test_claim_sweep_records_false_claims_and_spreads(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import os\nfrom labformer.book.notebook import evidence\n"
        "seed = int(os.environ['LABFORMER_SEED'])\n"
        "with evidence() as ev:\n"
        "    assert ev.check('the seed is even', seed % 2 == 0, f'seed {seed}, half {seed / 2}')\n"
        "    assert ev.check('always', True)\n")]
    path = tmp_path / "chapter.ipynb"
    nbformat.write(nb, path)
    assert claim_sweep.main([str(path), "--seeds", "1-3", "--kernels", "native"]) == 0
    out = capsys.readouterr().out
    assert "seed 1 native: 2 claims, 1 false" in out and "seed 2 native: 2 claims, 0 false" in out
    assert "[0] the seed is even: held in 1 of 3 runs" in out
    assert "number 1: mean 2, sd 1, min 1, max 3" in out
    assert "[1] always: held in 3 of 3 runs" in out


def test_claim_sweep_writes_the_chapters_data_file(tmp_path: Path) -> None:
    import nbformat

    from labformer.book.notebook import Sweep

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import os\nseed = int(os.environ['LABFORMER_SEED'])\n"
        "kernel = os.environ.get('ATEN_CPU_CAPABILITY')\nhalf = {'x': seed / 2}\n")]
    path = tmp_path / "chapter.ipynb"
    nbformat.write(nb, path)
    data = tmp_path / "data.json"
    with pytest.raises(SystemExit):  # --write with nothing to store
        claim_sweep.main([str(path), "--seeds", "1-3", "--write", str(data)])
    assert claim_sweep.main([str(path), "--seeds", "1-3", "--jobs", "2", "--write", str(data),
                             "--quantity", "half=half['x']"]) == 0
    stored = json.loads(data.read_text())
    assert stored["quantities"] == {"half": "half['x']"}
    assert [(r["seed"], r["kernel"], r["half"]) for r in stored["runs"]] == [
        (1, "default", 0.5), (2, "avx2", 1.0), (3, "default", 1.5)]
    assert "--write" in stored["command"] and stored["code_version"]
    assert list(Sweep(data).values("half")) == [0.5, 1.0, 1.5]
    # a second sweep reuses the file's quantities
    assert claim_sweep.main([str(path), "--seeds", "4", "--write", str(data)]) == 0
    assert [(r["seed"], r["half"]) for r in json.loads(data.read_text())["runs"]] == [(4, 2.0)]
    with pytest.raises(argparse.ArgumentTypeError, match="NAME=EXPRESSION"):
        claim_sweep.parse_quantity("no equals sign")


# ------------------------------------------------------------------ book/sweeps/translator_sweep.py

import translator_sweep  # noqa: E402


def test_translator_sweep_stops_at_the_baseline_and_stores_runs(tmp_path: Path) -> None:
    import nbformat

    values = "\n".join(f"{name} = seed + {i} / 10" for i, name in
                       enumerate(translator_sweep.QUANTITIES) if not name.startswith("test_"))
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import os\nfrom labformer.book.notebook import evidence\n"
            "seed = int(os.environ['LABFORMER_SEED'])\n" + values + "\n"
            "test_scores = {'bleu': 90.0 + seed, 'exact': 80.0}\n"
            "with evidence() as ev:\n"
            "    assert ev.check('the seed is odd', seed % 2 == 1)\n"),
        nbformat.v4.new_markdown_cell(translator_sweep.PARTS[0][1] + " (chapter 11)"),
        nbformat.v4.new_code_cell("raise RuntimeError('past the first stop')")]
    # the second chapter runs in the same namespace, after the first, up to its own stop
    second = nbformat.v4.new_notebook()
    second.cells = [
        nbformat.v4.new_code_cell("beam_gain = seed + 0.5"),
        nbformat.v4.new_markdown_cell(translator_sweep.PARTS[1][1] + ", in the same CPU time"),
        nbformat.v4.new_code_cell("raise RuntimeError('past the second stop')")]
    path, path2 = tmp_path / "chapter.ipynb", tmp_path / "second.ipynb"
    out = tmp_path / "sweep.json"
    nbformat.write(nb, path)
    nbformat.write(second, path2)
    assert translator_sweep.main(["--seeds", "1-3", "--notebook", str(path),
                                  "--second", str(path2), "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    runs = data["runs"]
    assert [(r["seed"], r["kernel"]) for r in runs] == [(1, "default"), (2, "avx2"),
                                                         (3, "default")]
    assert [r["floor_gap"] for r in runs] == [1.0, 2.0, 3.0]
    assert [r["held_gap"] for r in runs] == [1.1, 2.1, 3.1]
    assert [r["beam_gain"] for r in runs] == [1.5, 2.5, 3.5]  # set by the second chapter
    assert [r["test_bleu"] for r in runs] == [91.0, 92.0, 93.0]
    assert [r["false_claims"] for r in runs] == [[], ["the seed is odd"], []]
    assert set(data["quantities"]) == set(translator_sweep.QUANTITIES)
    assert "--seeds 1-3" in data["command"] and data["code_version"]
