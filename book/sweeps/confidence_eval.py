"""How well ``labformer translate --scores`` flags wrong translations, on two held-out sets.

    python book/sweeps/confidence_eval.py           # trains runs/everyday.pt if missing
    python book/sweeps/confidence_eval.py --checkpoint runs/everyday.pt

The model is the README's: ``labformer train --pairs labformer/data/fr-en-everyday.tsv`` with
the defaults (a couple of CPU minutes; the checkpoint is reused when it exists, and the disk
the run wrote is printed). Two held-out sets: the 5 % of the everyday pairs that ``train``
holds out, and ``labformer/data/fr-en-everyday-heldout.tsv``, everyday sentences written for
this check and never trained on. A translation is right when it is the reference word for
word (after the reference is read as the model reads text); a flag is the warning
``translate --scores`` prints (labformer.app.carry.assess; labformer.app.carry.count_flags counts).
Printed: the share of wrong translations flagged and of right ones left unflagged, on each
set; the goal is 80 % for both.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOAL = 0.8


def _written_bytes() -> int:
    """Bytes this process has caused to be written to storage (Linux), or -1."""
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1


def train(checkpoint: Path) -> None:
    """The README's default run on the everyday pairs; prints its time and its disk use."""
    from labformer.app.cli import main as cli
    from labformer.data import everyday_pairs_path

    argv = ["train", "--pairs", str(everyday_pairs_path()), "--out", str(checkpoint),
            "--quiet"]
    print(f"$ labformer {shlex.join(argv)}", flush=True)
    written, cpu, wall = _written_bytes(), time.process_time(), time.perf_counter()
    code = cli(argv)
    written = _written_bytes() - written
    size = checkpoint.stat().st_size
    print(f"train exit {code}: {time.process_time() - cpu:.0f} s CPU, "
          f"{time.perf_counter() - wall:.0f} s wall; checkpoint {size / 2**20:.1f} MiB; "
          f"written to disk during the run {written / 2**20:.1f} MiB "
          f"({written / size:.1f} x the checkpoint)", flush=True)


def measure(checkpoint: Path) -> dict[str, dict[str, float]]:
    """Per set: wrong, right, flagged wrong, unflagged right, and the two shares."""
    from labformer.app.carry import count_flags
    from labformer.app.cli import _split_pairs
    from labformer.app.translate import Translator
    from labformer.data import read_pairs
    from labformer.train import load_checkpoint

    translator = Translator.from_checkpoint(checkpoint)
    valid = [tuple(p) for p in load_checkpoint(checkpoint)["corpus"]["valid"]]
    fresh = [(p.src, p.tgt) for p in read_pairs(
        ROOT / "labformer" / "data" / "fr-en-everyday-heldout.tsv")]
    train_lines, _ = _split_pairs(read_pairs(ROOT / "labformer" / "data" /
                                             "fr-en-everyday.tsv"))
    trained = {p.src for p in train_lines}
    assert not trained & {s for s, _ in fresh}, "a fresh sentence is a training sentence"
    results = {}
    for name, pairs in (("everyday held-out split", valid), ("fresh held-out set", fresh)):
        c = count_flags(translator, pairs)
        results[name] = {"pairs": c.pairs, "wrong": c.wrong, "right": c.right,
                         "wrong_flagged": c.wrong_flagged,
                         "right_unflagged": c.right - c.right_flagged,
                         "wrong_flagged_share": c.caught if c.wrong else 1.0,
                         "right_unflagged_share": c.spared if c.right else 1.0}
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "runs" / "everyday.pt",
                        help="the everyday model (default runs/everyday.pt; trained if "
                             "missing)")
    args = parser.parse_args()
    start = time.perf_counter()
    if not args.checkpoint.exists():
        train(args.checkpoint)
    print(f"$ python book/sweeps/confidence_eval.py --checkpoint {args.checkpoint}")
    results = measure(args.checkpoint)
    ok = True
    for name, r in results.items():
        print(f"{name}: {r['pairs']} pairs, {r['wrong']} wrong, {r['right']} right; "
              f"flagged {r['wrong_flagged']} of {r['wrong']} wrong "
              f"({100 * r['wrong_flagged_share']:.0f} %), left {r['right_unflagged']} of "
              f"{r['right']} right unflagged ({100 * r['right_unflagged_share']:.0f} %)")
        ok &= r["wrong_flagged_share"] >= GOAL and r["right_unflagged_share"] >= GOAL
    print(f"{time.perf_counter() - start:.0f} s; goal (80 % and 80 % on each set): "
          f"{'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
