"""book/sweeps/lm_sweep.py, chapter 15's sweep: the runs named by a range of seeds, the code
version of every run, and the re-run registered before it runs (issue 55) written as its
registration holds, with the training replaced by a fake."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "sweeps"))
import lm_sweep  # noqa: E402

PLAN = ROOT / "book" / "data" / "plans" / "15_modern_block_v2.json"


def _registrations():
    spec = importlib.util.spec_from_file_location(
        "registrations", ROOT / "tests" / "notebooks" / "test_registrations.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_range_of_seeds_names_the_runs_odd_plain_even_avx2():
    assert lm_sweep.seed_runs("241-244") == ["241:default", "242:avx2", "243:default",
                                             "244:avx2"]
    assert lm_sweep.seed_runs("7") == ["7:default"]
    assert lm_sweep.DEFAULT_RUNS == lm_sweep.seed_runs("1-20")  # v1's runs, as stored
    with pytest.raises(ValueError):
        lm_sweep.seed_runs("5-4")


def _fake_run(run, version=None):
    seed, _, kernel = run.partition(":")
    record = {"run": run, "seed": int(seed), "kernel": kernel, "seconds": 1,
              **{f"ppl_{b}": 10.0 + int(seed) % 3 for b in
                 ("2017", "Pre-LN", "RMSNorm", "SwiGLU", "RoPE", "GQA", "modern")}}
    return record if version is None else {**record, "code_version": version}


def test_the_registered_rerun_writes_what_its_registration_holds(tmp_path, monkeypatch):
    plan = json.loads(PLAN.read_text("utf-8"))
    monkeypatch.setattr(lm_sweep, "run_one", _fake_run)
    monkeypatch.setattr(lm_sweep, "_code_version", lambda: "abc1234")
    monkeypatch.chdir(tmp_path)
    assert lm_sweep.main(plan["command"].split()[2:]) == 0
    data = json.loads((tmp_path / plan["data"]).read_text("utf-8"))
    assert _registrations().agreement_problems(data, plan) == []
    assert data["code_version"] == "abc1234"
    assert all(r["code_version"] == "abc1234" for r in data["runs"])


def test_runs_of_another_code_version_are_not_written(tmp_path, monkeypatch):
    monkeypatch.setattr(lm_sweep, "run_one", _fake_run)
    monkeypatch.setattr(lm_sweep, "_code_version", lambda: "new1234")
    out = tmp_path / "runs.jsonl"
    out.write_text(json.dumps(_fake_run("1:default", "old1234")) + "\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="old1234"):
        lm_sweep.main(["--seeds", "1-2", "--out", str(out), "--write",
                       str(tmp_path / "data.json")])
    assert not (tmp_path / "data.json").exists()


def test_runs_and_seeds_cannot_both_name_the_runs(capsys):
    with pytest.raises(SystemExit):
        lm_sweep.main(["--runs", "1:default", "--seeds", "1-2"])
    assert "not both" in capsys.readouterr().err
