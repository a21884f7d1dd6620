"""Train the translator with the command line's defaults on the shipped 300-pair file; check it.

    python book/sweeps/train_everyday.py      # about a minute on one thread
    python book/sweeps/train_everyday.py --seed 3

This is the README's "your own file" recipe, end to end: ``labformer train --pairs
labformer/data/fr-en-everyday.tsv`` with nothing else set, then the trained model translates its
own training sentences back. The check: cased BLEU >= 80 on them (sacreBLEU on detokenised
text), no empty translation, and a 3-pair file refused before any work. Too slow for the unit
tests (a few minutes of CPU), so it is a script; it exits non-zero when a check fails.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import resource
import sys
import tempfile
import time
from pathlib import Path

MIN_BLEU = 80.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    args = parser.parse_args()

    from labformer.app.cli import _split_pairs
    from labformer.app.cli import main as cli
    from labformer.app.translate import Translator
    from labformer.data import everyday_pairs_path, read_pairs

    with tempfile.TemporaryDirectory() as tmp:
        three = Path(tmp) / "three.tsv"
        three.write_text("Bonjour !\tHello!\nMerci.\tThank you.\nOui.\tYes.\n", "utf-8")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            refused = cli(["train", "--pairs", str(three), "--out", f"{tmp}/three.pt"])
        print(f"3 pairs: exit {refused}: {err.getvalue().strip()}")

        out = f"{tmp}/everyday.pt"
        cpu0, wall0 = time.process_time(), time.perf_counter()
        everyday = everyday_pairs_path()
        code = cli(["train", "--pairs", str(everyday), "--out", out,
                    "--seed", str(args.seed), "--quiet"])
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        translator = Translator.from_checkpoint(out)
        train_lines, valid_lines = _split_pairs(read_pairs(everyday))
        own = [(p.src, p.tgt) for p in train_lines]
        scores = translator.evaluate(own)
        held_out = translator.evaluate([(p.src, p.tgt) for p in valid_lines])
        empty = sum(not t for t in translator.translate([s for s, _ in own]))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"train exit {code}; {len(translator.history.step_loss)} steps, "
          f"{len(translator.history.epoch_loss)} epochs; CPU {cpu:.0f} s, wall {wall:.0f} s, "
          f"peak memory {rss:.0f} MiB")
    print(f"own {len(own)} training sentences: cased BLEU {scores['bleu']:.1f}, chrF "
          f"{scores['chrf']:.1f}, exact {scores['exact']:.1f}%, {empty} empty")
    print(f"{len(valid_lines)} held-out sentences: BLEU {held_out['bleu']:.1f} (a 300-pair "
          f"file teaches phrases, not French)")
    failures = []
    if refused != 1:
        failures.append("the 3-pair file was not refused")
    if code != 0:
        failures.append(f"train exited {code}")
    if scores["bleu"] < MIN_BLEU or empty:
        failures.append(f"BLEU {scores['bleu']:.1f} < {MIN_BLEU} or {empty} empty outputs")
    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
