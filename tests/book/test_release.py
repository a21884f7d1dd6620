"""What a reader may do with the book, and how to cite it: licences, citation, changelog,
the version from one source, the workflow for forks, the vendored files' licences."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

import labformer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import labformer_release  # noqa: E402  (book/_ext is not a package)

CFF_SCHEMA = ROOT / "tests" / "data" / "citation-file-format-1.2.0.schema.json"


def _citation() -> dict:
    return yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))


def test_citation_file_is_valid_cff_1_2_0() -> None:
    schema = json.loads(CFF_SCHEMA.read_text(encoding="utf-8"))
    citation = _citation()
    # YAML reads an unquoted date as a date; the schema wants the string CFF files hold.
    jsonschema.validate(json.loads(json.dumps(citation, default=str)), schema)
    assert citation["cff-version"] == "1.2.0"


def test_the_validation_bites() -> None:
    schema = json.loads(CFF_SCHEMA.read_text(encoding="utf-8"))
    broken = {k: v for k, v in _citation().items() if k != "authors"}  # authors is required
    with pytest.raises(jsonschema.ValidationError, match="authors"):
        jsonschema.validate(json.loads(json.dumps(broken, default=str)), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**json.loads(json.dumps(_citation(), default=str)),
                             "version-of-the-book": "x"}, schema)  # no unknown keys


def test_one_version_everywhere() -> None:
    version = labformer.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), version
    assert _citation()["version"] == version
    assert labformer_release.version() == version  # the book's footer
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    first = re.search(r"^## (\d+\.\d+\.\d+)", changelog, re.MULTILINE)
    assert first and first.group(1) == version, "CHANGELOG.md's newest entry is not the version"
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'dynamic = ["version"]' in pyproject and "labformer.__version__" in pyproject
    command = Path(sys.executable).parent / "labformer"  # the installed console script
    cli = subprocess.run([str(command), "--version"], capture_output=True, text=True, cwd=ROOT)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.split() == ["labformer", version]


def test_footer_names_version_and_licences_in_each_language() -> None:
    en = labformer_release.footer("en", "../_static/")
    zh = labformer_release.footer("zh_CN", "_static/")
    for html in (en, zh):
        assert labformer.__version__ in html and "MIT" in html and "CC BY 4.0" in html
    assert 'href="../_static/LICENSE.txt"' in en and "cite this book" in en
    assert "引用本书" in zh and "cite" not in zh


def test_licence_files() -> None:
    mit = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert mit.startswith("MIT License") and "WITHOUT WARRANTY" in mit
    content = (ROOT / "LICENSE-CONTENT").read_text(encoding="utf-8")
    assert "Creative Commons Attribution 4.0 International Public License" in content
    assert "Section 3 -- License Conditions." in content  # the legal code, not a summary
    for readme, words in [("README.md", ("LICENSE", "LICENSE-CONTENT", "CC BY 4.0", "MIT")),
                          ("README.zh-CN.md", ("LICENSE", "LICENSE-CONTENT", "CC BY 4.0",
                                               "MIT", "许可"))]:
        text = (ROOT / readme).read_text(encoding="utf-8")
        missing = [w for w in words if w not in text]
        assert not missing, f"{readme} does not name {missing}"
    intro = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    assert "CC BY 4.0" in intro and "MIT" in intro, "the front page does not state the licences"


def test_every_vendored_file_has_its_licence_listed() -> None:
    listing = (ROOT / "THIRD_PARTY.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([^`]+)` \|[^|]+\|[^|]+\| `([^`]+)` \|$", listing, re.MULTILINE)
    assert len(rows) >= 3
    for path, licence in rows:
        assert (ROOT / path).is_file(), f"THIRD_PARTY.md lists {path}, which is missing"
        assert (ROOT / licence).is_file(), f"{path}: its licence file {licence} is missing"
    listed = {path for path, _ in rows}
    vendored = {str(p.relative_to(ROOT)) for folder in ("book/_static/vendor",
                                                         "book/_static/scripts")
                for p in (ROOT / folder).iterdir()
                if p.suffix == ".js"}
    assert vendored <= listed, f"vendored but not in THIRD_PARTY.md: {sorted(vendored - listed)}"


def test_workflow_for_forks_runs_the_ci_entry_point() -> None:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text("utf-8"))
    steps = workflow["jobs"]["book"]["steps"]
    runs = [step.get("run", "") for step in steps]
    assert any(run.strip() == "bash .ci/run" for run in runs)
    setup = next(s for s in steps if s.get("uses", "").startswith("actions/setup-python"))
    assert setup["with"]["python-version"] == "3.11"
    cache = next(s for s in steps if s.get("uses", "").startswith("actions/cache"))
    assert cache["with"]["path"] == ".venv" and "requirements.txt" in cache["with"]["key"]
    assert workflow["jobs"]["book"]["runs-on"].startswith("ubuntu")
