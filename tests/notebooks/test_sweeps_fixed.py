"""Every sweep that decides a verdict has seeds fixed before it ran (book/checking.md).

A sweep's seeds are one contiguous range chosen in advance, at least 20 seeds: 1 to N (0 to
N - 1 where the chapter's own seed 0 belongs to it), or new seeds such as 21 to 40 for a sweep
that replaces another. A run is never appended because its result disagreed. When a run
outside the range turns up something the sweep did not see, the sweep is run again on a new
range fixed in advance, and the page says so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "book" / "data"
MIN_SEEDS = 20


def _seed(spec: object) -> int:
    """A run's seed: an int, or the SEED of a "SEED:KERNEL" spec."""
    if isinstance(spec, int):
        return spec
    return int(str(spec).split(":")[0])


def verdict_seeds(data: dict) -> dict[str, list[int]]:
    """The seeds of each group of runs that decides a verdict, by the file's format."""
    if "timings" in data:  # repeated timings of untrained models: no seed decides them
        return {}
    runs = data["runs"]
    if "checked_budget" in data:  # chapter 14's curves: the paired seeds at one budget
        return {f"{model} at the {data['checked_budget']} budget":
                [r["seed"] for r in runs if r["phase"] == "seeds" and r["model"] == model
                 and r["budget"] == data["checked_budget"]] for model in ("transformer", "gru")}
    if runs and all(isinstance(r, dict) and "phase" in r for r in runs):
        # tuning runs on their own seeds, then each model's seeds that decide
        return {f"{model}'s {phase} runs": [r["seed"] for r in runs if r["phase"] == phase
                                            and r["model"] == model]
                for model in sorted({r["model"] for r in runs})
                for phase in ("seeds",)}
    seeds = [_seed(r if not isinstance(r, dict) else r.get("seed", r.get("run")))
             for r in runs]
    return {"runs": seeds}


def fixed_in_advance(seeds: list[int]) -> str | None:
    """None when ``seeds`` are one contiguous range of at least MIN_SEEDS, each once; else what
    is wrong."""
    if len(set(seeds)) != len(seeds):
        return f"a seed repeats: {sorted(s for s in set(seeds) if seeds.count(s) > 1)}"
    if len(seeds) < MIN_SEEDS:
        return f"{len(seeds)} seeds, fewer than {MIN_SEEDS}"
    low = min(seeds)
    if sorted(seeds) != list(range(low, low + len(seeds))):
        ordered = sorted(seeds)
        gap = next(i for i, s in enumerate(ordered) if s != low + i)
        outside = ordered[gap:]  # the seeds after the range's first gap
        return (f"seeds {low} to {max(seeds)} are not one range fixed in advance: "
                f"{outside} lie outside a range")
    return None


@pytest.mark.parametrize("path", sorted(DATA.glob("*.json")), ids=lambda p: p.name)
def test_each_sweep_is_a_range_fixed_in_advance(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    for group, seeds in verdict_seeds(data).items():
        problem = fixed_in_advance(seeds)
        assert problem is None, f"{path.name}, {group}: {problem}"


def test_the_rule_catches_an_appended_seed() -> None:
    assert fixed_in_advance(list(range(1, 21))) is None
    assert fixed_in_advance(list(range(0, 20))) is None
    appended = fixed_in_advance(list(range(1, 21)) + [130670])
    assert appended is not None and "[130670] lie outside a range" in appended
    assert fixed_in_advance(list(range(21, 41))) is None  # new seeds for a replaced sweep
    assert "fewer than 20" in str(fixed_in_advance(list(range(1, 12))))
    assert "repeats" in str(fixed_in_advance(list(range(1, 21)) + [5]))
    assert "not one range" in str(fixed_in_advance(list(range(1, 20)) + [22]))
    assert verdict_seeds({"runs": ["1:default", "2:avx2"]}) == {"runs": [1, 2]}
    assert verdict_seeds({"runs": [{"run": "7:avx2"}]}) == {"runs": [7]}
    tuned = [{"phase": "tuning", "model": "gru", "seed": s} for s in (101, 102, 103)]
    swept = [{"phase": "seeds", "model": "gru", "seed": s} for s in range(1, 21)]
    assert verdict_seeds({"runs": tuned + swept}) == {"gru's seeds runs": list(range(1, 21))}
    late = verdict_seeds({"runs": tuned + swept + [{"phase": "seeds", "model": "gru",
                                                      "seed": 77}]})
    assert "[77] lie outside" in str(fixed_in_advance(late["gru's seeds runs"]))
    assert verdict_seeds({"timings": [], "runs": []}) == {}
