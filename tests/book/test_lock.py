"""The venv holds exactly what requirements.lock pins, and the lock agrees with requirements.txt;
what the book reads of myst-nb's internals (book/_ext/mystnb_patches.py) fits the pinned myst-nb.

`make` installs .venv from requirements.lock (every package at an exact version, with
``--no-deps``); `make lock` writes the lock from the venv after an edit to requirements.txt. A
package installed by hand, an upgrade, or a lock left behind by an edit to requirements.txt
fails here, naming the package. labformer itself (installed editable) is not in the lock.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
import sysconfig
from pathlib import Path

import book_ext
import pytest
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.lock"
DIRECT = ROOT / "requirements.txt"
#: A line of a requirements file: a name, ``==`` and a version (comments and blanks aside).
PIN = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(?P<version>\S+)")
NOT_LOCKED = {"labformer"}
FIX = "run `make lock` after an edit to requirements.txt, or `rm -rf .venv && make venv`"


def pins(path: Path) -> dict[str, str]:
    """NAME -> version of a requirements file whose every requirement is ``NAME==VERSION``."""
    found: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = PIN.fullmatch(line)
        assert match, f"{path.name}:{number}: {raw!r} is not pinned to one version (NAME==VERSION)"
        name = canonicalize_name(match["name"])
        assert name not in found, f"{path.name}:{number}: {match['name']} is pinned twice"
        found[name] = match["version"]
    return found


def installed() -> dict[str, str]:
    """NAME -> version of every distribution in the venv's site-packages."""
    folders = sorted({sysconfig.get_paths()[key] for key in ("purelib", "platlib")})
    return {canonicalize_name(dist.metadata["Name"]): dist.version
            for dist in importlib.metadata.distributions(path=folders)}


def test_the_venv_holds_exactly_the_locked_packages() -> None:
    assert sys.prefix != sys.base_prefix, "run the tests with .venv/bin/python"
    locked = pins(LOCK)
    venv = {name: version for name, version in installed().items() if name not in NOT_LOCKED}
    missing = sorted(f"{name}=={locked[name]}" for name in locked.keys() - venv.keys())
    extra = sorted(f"{name}=={venv[name]}" for name in venv.keys() - locked.keys())
    # ==2.13.0 admits 2.13.0+cpu: the lock leaves torch's local label to the index it comes from.
    differ = sorted(f"{name}: {venv[name]} installed, {locked[name]} locked"
                    for name in locked.keys() & venv.keys()
                    if venv[name] not in SpecifierSet(f"=={locked[name]}"))
    assert not (missing or extra or differ), (
        f"the venv differs from requirements.lock ({FIX}):\n"
        f"  missing: {missing}\n  extra: {extra}\n  different: {differ}")


def test_requirements_txt_pins_what_the_lock_holds() -> None:
    direct, locked = pins(DIRECT), pins(LOCK)
    for name in ("torch", "jupyter-book", "myst-nb"):
        assert name in direct, f"requirements.txt does not pin {name}"
    assert direct["torch"] == "2.13.0", "torch is pinned as 2.13.0 (the CPU build's version)"
    wrong = sorted(f"{name}: requirements.txt {version}, requirements.lock "
                   f"{locked.get(name, 'nothing')}" for name, version in direct.items()
                   if locked.get(name) != version)
    assert not wrong, f"requirements.txt and requirements.lock disagree ({FIX}): {wrong}"


def test_the_lock_holds_labformers_own_dependencies() -> None:
    # `make` installs labformer with --no-deps: what pyproject.toml declares comes from the lock.
    from packaging.requirements import Requirement

    declared = {canonicalize_name(Requirement(line).name)
                for line in importlib.metadata.requires("labformer") or []}
    assert declared and declared <= pins(LOCK).keys(), sorted(declared - pins(LOCK).keys())


def test_the_lock_names_no_local_build_of_torch() -> None:
    # A local label (+cpu, +cu121) would tie the lock to one index: pip finds the CPU build
    # from the CPU index (CI) or the local wheel, as requirements.txt's comment says.
    assert "+" not in pins(LOCK)["torch"]


def test_ci_caches_the_venv_on_the_lock() -> None:
    workflow = (ROOT / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8")
    key = next(line for line in workflow.splitlines() if line.strip().startswith("key: venv-"))
    assert "'requirements.lock'" in key and LOCK.is_file(), key


def test_mystnb_patches_fit_the_pinned_myst_nb() -> None:
    patches = book_ext.load("mystnb_patches")
    patches.check_versions()  # the installed myst-nb and Sphinx are the ones written for
    direct = pins(DIRECT)
    assert patches.MYST_NB_VERSION == direct["myst-nb"], "mystnb_patches and requirements.txt"
    assert patches.SPHINX_VERSION == pins(LOCK)["sphinx"]
    with pytest.raises(patches.VersionMismatch) as raised:
        patches.check_versions({"myst-nb": "9.9.9"})
    first = str(raised.value).splitlines()[0]
    assert "'renderer for translations'" in first and f"myst-nb {direct['myst-nb']}" in first
    assert "myst-nb 9.9.9 is installed" in first
