"""Every sweep in book/data/ has a registration in book/data/plans/, written before it ran.

A registration (book/data/plans/README.md) fixes a sweep's seeds, kernels, settings, the
quantity compared, the margin, the family and the analysis. The checks, each a function that
returns what is wrong (an empty list when nothing is), so that the synthetic repositories at the
end of this file can plant each violation and see it caught:

- ``missing_registrations``: a data file with no registration;
- ``order_problems``: a registration not marked "after the fact" that was committed in the same
  commit as its data or after it, that the code version the sweep ran at does not contain, or
  whose data disagree with it as first committed (read from git: the repository's whole
  history is needed, and a shallow clone fails here with a message saying so, rather than
  passing unchecked);
- ``agreement_problems``: data that disagree with the registration (seeds, kernels, settings,
  quantities, command);
- ``version_problems``: a code version that is ``-dirty`` or missing, allowed only for a sweep
  registered after the fact whose registration lists it as a known defect;
- ``pending_problems``: a registration whose data have not come yet (a plan waiting for its
  run) passes, if it is marked "before the runs" and names its data file by its own name; its
  data, when they come, are held to it by the checks above (committed after it);
- ``fresh_seed_problems``: a sweep that replaces another (``replaces``) takes fresh seeds: none
  of its registered seeds may occur in any other stored data file.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "book" / "data"
PLANS = DATA / "plans"
AFTER = "after the fact"
BEFORE = "before the runs"
DIRTY, NO_VERSION = "dirty code version", "no code version"
# The stored sweeps whose code version is dirty or missing, as their registrations list them.
# A registration may list one only when it is marked "after the fact": a new sweep cannot.
GRANDFATHERED = {
    "01_seq2seq_attention": DIRTY, "02_self_attention": DIRTY, "03_scaling": DIRTY,
    "04_multi_head": DIRTY, "05_positional_encoding": DIRTY, "06_residual_norm": DIRTY,
    "07_transformer": DIRTY, "08_decoder_masks": DIRTY, "09_loss": DIRTY,
    "10_beam_search": DIRTY, "12_confidence": NO_VERSION, "13_ablations": DIRTY,
    "14_baseline_curves": DIRTY, "14_step_timings": DIRTY,
}


# --------------------------------------------------------------------------------- git access

def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {repo}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def history_problem(repo: Path) -> str | None:
    """None when ``repo`` is a git checkout with its whole history; else why the order of
    registrations and data cannot be read."""
    try:
        shallow = git(repo, "rev-parse", "--is-shallow-repository")
    except (RuntimeError, FileNotFoundError) as err:
        return (f"the registrations' order is read from git, and {repo} has no git history "
                f"to read ({err}); run the tests in a git clone")
    if shallow != "false":
        return (f"{repo} is a shallow clone: the commits of registrations and data cannot be "
                "compared. Fetch the whole history (git fetch --unshallow; in GitHub Actions "
                "actions/checkout with fetch-depth: 0)")
    return None


def first_commit(repo: Path, rel: str) -> str | None:
    """The first commit that has ``rel``, or None when it is not committed. Renames are not
    followed: a registration moved to a new name counts from its move (a stricter order)."""
    log = git(repo, "log", "--format=%H", "--", rel).splitlines()
    return log[-1] if log else None


def _content(data: dict[str, Any]) -> Any:
    """What a sweep measured: its runs (or timings), not the prose around them."""
    return data.get("runs"), data.get("timings")


def data_commit(repo: Path, rel: str) -> str | None:
    """The first commit in which ``rel`` holds the runs it holds now: a later commit that only
    rewords its description keeps this one, a re-run gets a new one. None when the runs in the
    working tree are not committed."""
    current = _content(json.loads((repo / rel).read_text(encoding="utf-8")))
    log = git(repo, "log", "--follow", "--format=%H", "--name-only", "--", rel).split()
    pairs = list(zip(log[::2], log[1::2], strict=True))  # (commit, the file's path there)
    found = None
    for commit, path in pairs:  # newest first
        try:
            then = json.loads(git(repo, "show", f"{commit}:{path}"))
        except (RuntimeError, json.JSONDecodeError):
            break
        if _content(then) != current:
            break
        found = commit
    return found


def is_ancestor(repo: Path, older: str, newer: str) -> bool:
    proc = subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", older, newer],
                          capture_output=True, check=False)
    return proc.returncode == 0


# ------------------------------------------------------------------------------------ checks

def missing_registrations(data_dir: Path) -> list[str]:
    """The data files of ``data_dir`` with no registration in ``data_dir/plans``."""
    return [f"{p.name} has no registration {p.parent.name}/plans/{p.name}"
            for p in sorted(data_dir.glob("*.json")) if not (data_dir / "plans" / p.name).exists()]


def order_problems(repo: Path, data_rel: str, plan_rel: str) -> list[str]:
    """A registration made before the runs must be committed before its data, and be in the code
    version the sweep ran at."""
    plan = json.loads((repo / plan_rel).read_text(encoding="utf-8"))
    if plan.get("registered") == AFTER:
        return []
    if plan.get("registered") != BEFORE:
        return [f"{plan_rel}: 'registered' is {plan.get('registered')!r}, neither "
                f"{BEFORE!r} nor {AFTER!r}"]
    registered = first_commit(repo, plan_rel)
    if registered is None:
        return [f"{plan_rel} is not committed: commit the registration before the sweep runs"]
    problems = []
    if (repo / data_rel).exists():  # held to the registration as first committed, not as edited
        first = json.loads(git(repo, "show", f"{registered}:{plan_rel}"))
        current = json.loads((repo / data_rel).read_text(encoding="utf-8"))
        problems += [f"{data_rel} disagrees with its registration as committed at "
                     f"{registered[:10]}: {p}" for p in agreement_problems(current, first)]
    data = data_commit(repo, data_rel) if (repo / data_rel).exists() else None
    if data is not None:
        if data == registered:
            problems.append(f"{data_rel} was committed in the same commit as its registration "
                            f"({registered[:10]}): the registration must come first")
        elif not is_ancestor(repo, registered, data):
            problems.append(f"{data_rel} ({data[:10]}) was committed before its registration "
                            f"({registered[:10]})")
    if (repo / data_rel).exists():
        version = str(json.loads((repo / data_rel).read_text("utf-8")).get("code_version", ""))
        commit = version.removesuffix("-dirty")
        try:
            resolved = git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
        except RuntimeError:
            resolved = ""
        if commit and not resolved:
            problems.append(f"{data_rel}: code version {version!r} is no commit of this history")
        elif resolved and not is_ancestor(repo, registered, resolved):
            problems.append(f"{data_rel} ran at {version}, which does not contain its "
                            f"registration ({registered[:10]}): registered after the runs")
    return problems


def parse_seeds(spec: str | list[int]) -> list[int]:
    """'1-20' or '1-3,9' or a list of ints."""
    if isinstance(spec, list):
        return [int(s) for s in spec]
    seeds: list[int] = []
    for part in str(spec).split(","):
        low, _, high = part.partition("-")
        seeds.extend(range(int(low), int(high or low) + 1))
    return seeds


def run_seed_kernel(run: Any) -> tuple[int, str | None]:
    """A run's seed and kernel, by the file's format: "SEED:KERNEL", {"run": "SEED:KERNEL"},
    or {"seed": SEED, "kernel": KERNEL} (no kernel recorded: None)."""
    if isinstance(run, str):
        seed, _, kernel = run.partition(":")
        return int(seed), kernel or None
    if "seed" in run:
        return int(run["seed"]), run.get("kernel")
    seed, _, kernel = str(run["run"]).partition(":")
    return int(seed), kernel or None


def _selects(run: Any, select: dict[str, Any]) -> bool:
    return all(isinstance(run, dict) and run.get(k) == v for k, v in select.items())


def agreement_problems(data: dict[str, Any], plan: dict[str, Any]) -> list[str]:
    """Where the data differ from their registration."""
    problems = []
    runs = data.get("runs", [])
    covered = [False] * len(runs)
    for group in plan.get("runs", []):
        select = group.get("select", {})
        name = ", ".join(f"{k}={v}" for k, v in select.items()) or "all runs"
        chosen = [i for i, r in enumerate(runs) if _selects(r, select)]
        for i in chosen:
            covered[i] = True
        got = [run_seed_kernel(runs[i]) for i in chosen]
        seeds = parse_seeds(group["seeds"])  # each run "repeats" times (a grid per seed)
        if sorted(s for s, _ in got) != sorted(seeds * group.get("repeats", 1)):
            problems.append(f"{name}: seeds {sorted(s for s, _ in got)} where the registration "
                            f"has {group['seeds']}")
        kernels = group.get("kernels")
        if isinstance(kernels, list):  # cycled over the seeds in order
            want = {s: kernels[i % len(kernels)] for i, s in enumerate(seeds)}
        elif isinstance(kernels, dict):
            want = {int(s): k for s, k in kernels.items()}
        else:
            want = {s: None for s in seeds}
        wrong = sorted({(s, k) for s, k in got if s in want and want[s] != k})
        if wrong:
            problems.append(f"{name}: kernels {wrong} (seed, kernel) differ from the "
                            f"registration's {kernels}")
    if plan.get("runs") is not None and not all(covered):
        problems.append(f"{covered.count(False)} runs belong to no registered group of runs")
    for key, value in plan.get("settings", {}).items():
        if data.get(key) != value:
            problems.append(f"setting {key}: {data.get(key)!r} in the data, {value!r} "
                            "registered")
    if "quantities" in plan and sorted(data.get("quantities", {})) != sorted(plan["quantities"]):
        problems.append(f"quantities {sorted(data.get('quantities', {}))} in the data, "
                        f"{sorted(plan['quantities'])} registered")
    if "command" in plan and data.get("command") != plan["command"]:
        problems.append(f"command {data.get('command')!r} in the data, {plan['command']!r} "
                        "registered")
    return problems


def version_problems(data: dict[str, Any], plan: dict[str, Any]) -> list[str]:
    """A dirty or missing code version fails unless the registration, made after the fact,
    lists it as a known defect; a listed defect the data do not have fails too."""
    version = data.get("code_version")
    has = NO_VERSION if not version else DIRTY if str(version).endswith("-dirty") else None
    listed = {d["kind"] for d in plan.get("known_defects", [])} & {DIRTY, NO_VERSION}
    problems = []
    if has and has not in listed:
        problems.append(f"{has} ({version!r}): a sweep must run from a clean commit and record it")
    if has and has in listed and plan.get("registered") != AFTER:
        problems.append(f"{has}: only a sweep registered after the fact may list it as a known "
                        "defect")
    for kind in listed - ({has} if has else set()):
        problems.append(f"the registration lists a {kind} the data do not have ({version!r})")
    return problems


def pending_registrations(data_dir: Path) -> list[Path]:
    """The registrations in ``data_dir/plans`` whose data file does not exist yet."""
    return [p for p in sorted((data_dir / "plans").glob("*.json"))
            if not (data_dir / p.name).exists()]


def pending_problems(plan: dict[str, Any], name: str) -> list[str]:
    """What is wrong with a registration that waits for its run: only one written before the
    runs can wait, and it names the data file it will be held to."""
    problems = []
    if plan.get("registered") != BEFORE:
        problems.append(f"{name}: no data, yet registered {plan.get('registered')!r}: only a "
                        f"registration {BEFORE!r} may wait for its run")
    stem = name.removesuffix(".json")
    if plan.get("sweep") != stem or plan.get("data") != f"book/data/{stem}.json":
        problems.append(f"{name}: sweep {plan.get('sweep')!r} and data {plan.get('data')!r} "
                        f"must name book/data/{stem}.json")
    return problems


def registered_seeds(plan: dict[str, Any]) -> set[int]:
    """Every seed a registration's groups of runs name."""
    return {s for group in plan.get("runs") or [] for s in parse_seeds(group["seeds"])}


def data_seeds(data: dict[str, Any]) -> set[int]:
    """Every seed the runs of a data file name (runs without a seed are skipped)."""
    seeds = set()
    for run in data.get("runs") or []:
        try:
            seeds.add(run_seed_kernel(run)[0])
        except (KeyError, ValueError, TypeError):
            continue
    return seeds


def fresh_seed_problems(plan: dict[str, Any], data_dir: Path) -> list[str]:
    """A registration that replaces a sweep must take seeds no other stored sweep used."""
    if not plan.get("replaces"):
        return []
    mine, problems = registered_seeds(plan), []
    for path in sorted(data_dir.glob("*.json")):
        if path.stem == plan.get("sweep"):
            continue
        used = mine & data_seeds(json.loads(path.read_text(encoding="utf-8")))
        if used:
            problems.append(f"{plan.get('sweep')} replaces {plan['replaces']} but reuses "
                            f"seeds {sorted(used)} of {path.name}: a replacement takes fresh "
                            "seeds")
    if plan["replaces"] and not (data_dir / f"{plan['replaces']}.json").exists():
        problems.append(f"{plan.get('sweep')} replaces {plan['replaces']}, which has no data "
                        "file: a superseded sweep is kept")
    return problems


# ----------------------------------------------------------------------------- the book's data

DATA_FILES = sorted(DATA.glob("*.json"))


def _plan(path: Path) -> dict[str, Any]:
    return json.loads((PLANS / path.name).read_text(encoding="utf-8"))


def test_every_sweep_has_a_registration() -> None:
    assert DATA_FILES, "no sweep data in book/data"
    assert missing_registrations(DATA) == []


@pytest.mark.parametrize("path", DATA_FILES, ids=lambda p: p.stem)
def test_the_data_agree_with_the_registration(path: Path) -> None:
    data, plan = json.loads(path.read_text(encoding="utf-8")), _plan(path)
    assert plan["sweep"] == path.stem and plan["data"] == f"book/data/{path.name}"
    assert agreement_problems(data, plan) == []
    assert version_problems(data, plan) == []


def test_the_known_defects_are_the_stored_sweeps_ones() -> None:
    """The dirty or missing code versions that registrations excuse, shown here: only sweeps
    stored before registrations existed."""
    listed = {p.stem: d["kind"] for p in sorted(PLANS.glob("*.json"))
              for d in json.loads(p.read_text("utf-8")).get("known_defects", [])
              if d["kind"] in (DIRTY, NO_VERSION)}
    assert listed == GRANDFATHERED


def test_each_registration_came_before_its_data() -> None:
    problem = history_problem(ROOT)
    if problem:
        pytest.fail(problem)
    found = []
    for path in DATA_FILES:
        found += order_problems(ROOT, f"book/data/{path.name}", f"book/data/plans/{path.name}")
    assert found == []


def test_a_registration_waiting_for_its_run_passes() -> None:
    """The re-runs of issue 55 are registered before they run: their plans have no data yet.
    Each waits as a registration made before the runs; when its data come, the tests above
    hold them to it (and fail if they are committed with or before it)."""
    found = []
    for path in pending_registrations(DATA):
        found += pending_problems(json.loads(path.read_text(encoding="utf-8")), path.name)
    assert found == []


def test_replacements_take_fresh_seeds() -> None:
    found = []
    for path in sorted(PLANS.glob("*.json")):
        found += fresh_seed_problems(json.loads(path.read_text(encoding="utf-8")), DATA)
    assert found == []


def test_registrations_name_their_analysis() -> None:
    required = {"sweep", "data", "chapter", "registered", "script", "command", "compared",
                "delta", "family", "analysis", "history"}
    for path in sorted(PLANS.glob("*.json")):
        plan = json.loads(path.read_text(encoding="utf-8"))
        assert required <= set(plan), f"{path.name} lacks {sorted(required - set(plan))}"
        assert plan["registered"] in (AFTER, BEFORE), path.name
        assert (ROOT / plan["script"]).exists(), f"{path.name}: no script {plan['script']}"
        assert Path(plan["script"]).name in str(plan["command"]), path.name


# -------------------------------------------------------- each check fails on a planted violation

def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "book" / "data" / "plans").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "test")
    git(repo, "config", "user.email", "test@example.invalid")
    git(repo, "config", "commit.gpgsign", "false")
    return repo


def _commit(repo: Path, message: str, files: dict[str, Any]) -> str:
    for rel, content in files.items():
        (repo / rel).write_text(json.dumps(content), encoding="utf-8")
        git(repo, "add", rel)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


DATA_REL, PLAN_REL = "book/data/x.json", "book/data/plans/x.json"
KERNELS = ["default", "avx2"]


def _runs(seeds: range) -> list[dict[str, Any]]:
    return [{"seed": s, "kernel": KERNELS[i % 2], "acc": 0.5} for i, s in enumerate(seeds)]


def _registration(**extra: Any) -> dict[str, Any]:
    return {"sweep": "x", "data": DATA_REL, "registered": BEFORE, "command": "python sweep.py",
            "runs": [{"seeds": "1-20", "kernels": KERNELS}], "settings": {"lr": 0.004}, **extra}


def _data(version: str | None, seeds: range = range(1, 21), **extra: Any) -> dict[str, Any]:
    data = {"command": "python sweep.py", "settings_note": "", "lr": 0.004,
            "runs": _runs(seeds), **extra}
    if version is not None:
        data["code_version"] = version
    return data


def test_a_data_file_without_registration_is_caught(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _commit(repo, "data", {DATA_REL: _data("abc")})
    assert missing_registrations(repo / "book" / "data") == [
        "x.json has no registration data/plans/x.json"]
    _commit(repo, "plan", {PLAN_REL: _registration(registered=AFTER)})
    assert missing_registrations(repo / "book" / "data") == []


def test_registration_first_then_data_passes(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    registered = _commit(repo, "plan", {PLAN_REL: _registration()})
    assert order_problems(repo, DATA_REL, PLAN_REL) == []  # no data yet
    (repo / DATA_REL).write_text(json.dumps(_data(registered[:7])), encoding="utf-8")
    assert order_problems(repo, DATA_REL, PLAN_REL) == []  # the runs, not yet committed
    _commit(repo, "data", {DATA_REL: _data(registered[:7])})
    assert order_problems(repo, DATA_REL, PLAN_REL) == []
    # a later commit that rewords the data's description keeps the runs' commit
    _commit(repo, "reword", {PLAN_REL: _registration(analysis="reworded"),
                             DATA_REL: _data(registered[:7], what="reworded")})
    assert order_problems(repo, DATA_REL, PLAN_REL) == []


def test_registration_in_the_same_commit_as_its_data_is_caught(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    base = _commit(repo, "code", {"book/data/plans/other.json": {}})
    _commit(repo, "both", {PLAN_REL: _registration(), DATA_REL: _data(base[:7])})
    problems = order_problems(repo, DATA_REL, PLAN_REL)
    assert any("same commit as its registration" in p for p in problems), problems


def test_registration_after_its_data_is_caught(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    base = _commit(repo, "data", {DATA_REL: _data("0000000")})
    _commit(repo, "data at its code", {DATA_REL: _data(base[:7])})
    _commit(repo, "plan", {PLAN_REL: _registration()})
    problems = order_problems(repo, DATA_REL, PLAN_REL)
    assert any("committed before its registration" in p for p in problems), problems
    assert any("does not contain its registration" in p for p in problems), problems
    # the same order is allowed when the registration says it was written after the fact
    _commit(repo, "after", {PLAN_REL: _registration(registered=AFTER)})
    assert order_problems(repo, DATA_REL, PLAN_REL) == []


def test_uncommitted_registration_and_rerun_before_it_are_caught(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    old = _commit(repo, "code", {"book/data/plans/other.json": {}})
    (repo / PLAN_REL).write_text(json.dumps(_registration()), encoding="utf-8")
    (repo / DATA_REL).write_text(json.dumps(_data(old[:7])), encoding="utf-8")
    assert order_problems(repo, DATA_REL, PLAN_REL) == [
        f"{PLAN_REL} is not committed: commit the registration before the sweep runs"]
    # registered first, but the sweep ran at a commit older than the registration
    _commit(repo, "plan", {PLAN_REL: _registration()})
    (repo / DATA_REL).write_text(json.dumps(_data(old[:7])), encoding="utf-8")
    problems = order_problems(repo, DATA_REL, PLAN_REL)
    assert len(problems) == 1 and "does not contain its registration" in problems[0]


def test_a_registration_edited_to_fit_its_data_is_caught(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    registered = _commit(repo, "plan", {PLAN_REL: _registration()})
    moved = _data(registered[:7], seeds=range(21, 41))
    _commit(repo, "data", {DATA_REL: moved})
    refit = _registration(runs=[{"seeds": "21-40", "kernels": KERNELS}])
    _commit(repo, "plan edited after the data", {PLAN_REL: refit})
    assert agreement_problems(moved, refit) == []  # the edited registration fits
    problems = order_problems(repo, DATA_REL, PLAN_REL)
    assert len(problems) == 1 and "as committed at" in problems[0] and "seeds" in problems[0]


def test_a_shallow_clone_is_refused_with_a_reason(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _commit(repo, "one", {PLAN_REL: _registration()})
    _commit(repo, "two", {DATA_REL: _data("abc")})
    assert history_problem(repo) is None
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)],
                   check=True, capture_output=True)
    problem = history_problem(shallow)
    assert problem is not None and "shallow clone" in problem and "unshallow" in problem
    assert "no git history" in str(history_problem(tmp_path / "not-a-repo"))


def test_data_that_disagree_with_the_registration_are_caught() -> None:
    plan = _registration()
    assert agreement_problems(_data("abc"), plan) == []
    appended = _data("abc", seeds=range(1, 22))
    assert any("seeds" in p for p in agreement_problems(appended, plan))
    other_range = _data("abc", seeds=range(21, 41))
    assert any("seeds" in p for p in agreement_problems(other_range, plan))
    swapped = _data("abc")
    swapped["runs"][0]["kernel"] = "avx2"
    assert any("kernels [(1, 'avx2')]" in p for p in agreement_problems(swapped, plan))
    changed = _data("abc", lr=0.008)
    assert agreement_problems(changed, plan) == [
        "setting lr: 0.008 in the data, 0.004 registered"]
    moved = _data("abc", command="python sweep.py --seeds 2-21")
    assert any("command" in p for p in agreement_problems(moved, plan))
    quantities = _data("abc", quantities={"acc": "accuracy", "bleu": "BLEU"})
    assert any("quantities" in p
               for p in agreement_problems(quantities, {**plan, "quantities": ["acc"]}))
    # groups of runs selected by their fields; a run in no group is caught
    tuned = [{"phase": "tuning", "seed": s} for s in (101, 102, 103)]
    grouped = {**plan, "runs": [{"select": {"phase": "tuning"}, "seeds": "101-103"}]}
    assert agreement_problems({"lr": 0.004, "command": "python sweep.py", "runs": tuned},
                              grouped) == []
    grid = {**plan, "runs": [{"select": {"phase": "tuning"}, "seeds": "101-103", "repeats": 2}]}
    assert agreement_problems({"lr": 0.004, "command": "python sweep.py",
                               "runs": tuned + tuned}, grid) == []
    assert any("seeds" in p for p in agreement_problems(
        {"lr": 0.004, "command": "python sweep.py", "runs": tuned + tuned[:2]}, grid))
    extra = tuned + [{"phase": "seeds", "seed": 1}]
    assert "1 runs belong to no registered group of runs" in agreement_problems(
        {"lr": 0.004, "command": "python sweep.py", "runs": extra}, grouped)
    assert run_seed_kernel("7:avx2") == (7, "avx2")
    assert run_seed_kernel({"run": "21:default"}) == (21, "default")
    assert parse_seeds("1-3,9") == [1, 2, 3, 9]


def test_a_plan_without_data_passes_until_its_data_break_it(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    data_dir = repo / "book" / "data"
    registered = _commit(repo, "plan", {PLAN_REL: _registration()})
    assert pending_registrations(data_dir) == [repo / PLAN_REL]
    assert pending_problems(_registration(), "x.json") == []
    assert missing_registrations(data_dir) == []
    # an after-the-fact registration has no business waiting for a run, nor a misnamed one
    assert any("only a registration" in p
               for p in pending_problems(_registration(registered=AFTER), "x.json"))
    assert any("must name" in p for p in pending_problems(_registration(), "y.json"))
    # the data come, in a later commit, and are held to the registration
    _commit(repo, "data", {DATA_REL: _data(registered[:7])})
    assert pending_registrations(data_dir) == []
    assert order_problems(repo, DATA_REL, PLAN_REL) == []


def test_a_replacement_on_used_seeds_is_caught(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "old.json").write_text(json.dumps(_data("abc")), encoding="utf-8")
    (data_dir / "other.json").write_text(json.dumps({"runs": ["205:avx2", "9:default"]}),
                                         encoding="utf-8")
    fresh = _registration(sweep="x", replaces="old",
                          runs=[{"seeds": "301-303"}, {"seeds": "201-204"}])
    assert fresh_seed_problems(fresh, data_dir) == []
    reused = _registration(sweep="x", replaces="old", runs=[{"seeds": "15-34"}])
    assert any("reuses seeds [15, 16, 17, 18, 19, 20] of old.json" in p
               for p in fresh_seed_problems(reused, data_dir))
    elsewhere = _registration(sweep="x", replaces="old", runs=[{"seeds": "201-210"}])
    assert any("[205] of other.json" in p for p in fresh_seed_problems(elsewhere, data_dir))
    gone = _registration(sweep="x", replaces="lost", runs=[{"seeds": "301"}])
    assert any("has no data file" in p for p in fresh_seed_problems(gone, data_dir))
    # its own data do not count against it
    (data_dir / "x.json").write_text(json.dumps(_data("abc", seeds=range(301, 304))),
                                     encoding="utf-8")
    assert fresh_seed_problems(_registration(sweep="x", replaces="old",
                                             runs=[{"seeds": "301-303"}]), data_dir) == []


def test_a_dirty_or_missing_code_version_is_caught() -> None:
    new = _registration()
    assert version_problems(_data("abc1234"), new) == []
    assert any("dirty code version" in p for p in version_problems(_data("abc-dirty"), new))
    assert any("no code version" in p for p in version_problems(_data(None), new))
    # a new sweep cannot excuse it as a known defect
    excused = _registration(known_defects=[{"kind": DIRTY, "detail": "edited while running"}])
    assert any("only a sweep registered after the fact" in p
               for p in version_problems(_data("abc-dirty"), excused))
    # a stored sweep registered after the fact can, and must say so
    stored = {**excused, "registered": AFTER}
    assert version_problems(_data("abc-dirty"), stored) == []
    assert version_problems(_data("abc-dirty"), {**new, "registered": AFTER}) != []
    # a listed defect the data do not have is stale
    assert any("do not have" in p for p in version_problems(_data("abc1234"), stored))


def test_checking_md_states_the_registered_family() -> None:
    """book/checking.md names the book-wide family the registrations fix (its K and level),
    so the page and the plans cannot drift apart: every plan registered before its runs
    shares one K, and the page states it and 0.05 / K."""
    import re

    ks = {json.loads(p.read_text("utf-8"))["family"]["k"] for p in sorted(PLANS.glob("*.json"))
          if json.loads(p.read_text("utf-8")).get("registered") == "before the runs"}
    assert len(ks) == 1, f"the registrations name several book-wide K: {sorted(ks)}"
    (k,) = ks
    page = (ROOT / "book" / "checking.md").read_text("utf-8")
    stated = {int(m) for m in re.findall(r"the (\d+) verdicts of chapters", page)}
    assert stated == {k}, f"checking.md states K = {sorted(stated)}, the plans {k}"
    assert f"$0.05/{k} \\approx {0.05 / k:.4f}$" in page
