"""The seed sweep's own logic: fresh seeds, the commit's seed, the variant syntax."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
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
