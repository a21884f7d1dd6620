"""Plant bugs in a copy of labformer, one at a time; the chapter that teaches each part must fail.

    python tests/mutants.py                  # every mutant (make test-mutants)
    python tests/mutants.py scaling kv-cache # only the named ones
    python tests/mutants.py --list           # with the known gaps, which run only when named
    python tests/mutants.py --skip-baseline NAME  # when the chapter just passed unmutated
    python tests/mutants.py --attempts       # only the exercises' wrong attempts (seconds)

A mutant is a (file, exact old text, new text) edit of one labformer source file. For each, the
package is copied into a temporary directory, the edit is applied there (the old text must occur
exactly once, so a refactor that moves it fails loudly), and the chapter runs under nbval with
that directory first on PYTHONPATH; the real package is never touched. Where the code that a
chapter checks is the chapter's own (a function defined in a cell), the mutant's file is the
notebook, ``book/NAME.ipynb``: the edit is applied to the code cells of a copy written next to
it (``book/_mutant_NAME.ipynb``, removed afterwards), and that copy runs against an unmutated
copy of the package. Every chapter used also
runs once unmutated, and must pass: a chapter that fails anyway catches nothing. Prints a table
(bug, chapter, caught or survived, the first failing line) and exits non-zero if a bug survives
or a baseline fails.

Before the chapters (unless mutants are named), the graders of ``labformer.book.exercises`` meet
the planted wrong attempts of tests/exercise_attempts.py, classic mistakes at each exercise:
every one must be rejected with a ``Mismatch`` (its message's first line is printed), and every
right attempt there must pass. This takes seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "labformer"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
IMPORT_PROBE = "import labformer; print(labformer.__file__)"


@dataclass(frozen=True)
class Mutant:
    name: str  # short id, also the command-line selector
    bug: str  # what is wrong, in words
    chapter: str  # the notebook under book/ that teaches this part
    file: str  # relative to labformer/, or book/NAME.ipynb for the chapter's own code
    old: str
    new: str


MUTANTS: list[Mutant] = [
    # 02, not 03: chapter 3 passes its scale explicitly; chapter 2 checks labformer's default
    # against F.scaled_dot_product_attention.
    Mutant("scaling", "scores divided by d_k, not sqrt(d_k)", "02_self_attention",
           "attention.py",
           "scale = 1.0 / math.sqrt(d_k) if scale is None else scale",
           "scale = 1.0 / d_k if scale is None else scale"),
    Mutant("causal-mask", "causal mask off by one: each position sees the next", "08_decoder_masks",
           "masks.py",
           "return torch.ones(size, size, dtype=torch.bool, device=device).tril()",
           "return torch.ones(size, size, dtype=torch.bool, device=device).tril(1)"),
    Mutant("positional", "sin and cos columns swapped", "05_positional_encoding",
           "positional.py",
           "table[:, 0::2] = torch.sin(pos * freq)  # (max_len, d_model / 2)\n"
           "    table[:, 1::2] = torch.cos(pos * freq)",
           "table[:, 0::2] = torch.cos(pos * freq)  # (max_len, d_model / 2)\n"
           "    table[:, 1::2] = torch.sin(pos * freq)"),
    Mutant("smoothing", "label smoothing spreads eps over V - 1 classes", "09_loss", "loss.py",
           "p = p + smoothing / num_classes",
           "p = p + smoothing / (num_classes - 1)"),
    Mutant("pad-loss", "padding positions counted in the loss", "09_loss", "loss.py",
           "else target != ignore_index",
           "else torch.ones_like(target, dtype=torch.bool)"),
    Mutant("length-penalty", "length penalty multiplies instead of divides", "10_beam_search",
           "decoding.py",
           "return log_prob / float(length_penalty_factor(length, length_penalty))",
           "return log_prob * float(length_penalty_factor(length, length_penalty))"),
    Mutant("pre-post-ln", "Pre-LN and Post-LN swapped", "06_residual_norm", "layers.py",
           "    if norm_first:\n        branch = dropout(sublayer(norm(x), *args))",
           "    if not norm_first:\n        branch = dropout(sublayer(norm(x), *args))"),
    Mutant("eval-dropout", "attention dropout active in eval mode", "07_transformer",
           "multihead.py",
           "p = self.dropout.p if self.dropout.training else 0.0",
           "p = self.dropout.p"),
    Mutant("ffn-mixes-positions", "the feed-forward network adds the sentence's mean to each "
           "position", "07_transformer", "layers.py",
           "out: Tensor = self.linear2(self.dropout(F.relu(self.linear1(x))))",
           "out: Tensor = self.linear2(self.dropout(F.relu(self.linear1(\n"
           "            x + x.mean(dim=-2, keepdim=True)))))"),
    Mutant("head-merge", "heads merged without the transpose", "04_multi_head", "multihead.py",
           "out = out.transpose(1, 2).reshape(B, T_q, self.d_model)",
           "out = out.reshape(B, T_q, self.d_model)"),
    Mutant("weight-tying", "output layer not tied to the target embedding", "07_transformer",
           "transformer.py",
           "self.generator.weight = self.tgt_embed.weight  # (|V|, d_model) shared",
           "pass  # the output layer keeps its own matrix"),
    Mutant("kv-cache", "self-attention cache keeps only the newest position", "08_decoder_masks",
           "multihead.py",
           "if self.k is None or self.v is None or self.static:",
           "if self.k is None or self.v is None or not self.static:"),
    Mutant("warmup", "decay after warm-up 1/step instead of 1/sqrt(step)", "11_translator",
           "train.py",
           "return min(rise, math.sqrt(warmup_steps / step))",
           "return min(rise, warmup_steps / step)"),
    Mutant("beam-greedy", "beam search keeps one hypothesis whatever beam_size says",
           "14_recipe_baseline", "decoding.py",
           "B, K, device = src.shape[0], beam_size, src.device",
           "B, K, device = src.shape[0], 1, src.device"),
    Mutant("penalty-ignored", "beam search ignores the length penalty", "14_recipe_baseline",
           "decoding.py",
           "return log_prob / float(length_penalty_factor(length, length_penalty))",
           "return log_prob"),
    Mutant("average-last", "checkpoint averaging returns the last checkpoint",
           "14_recipe_baseline", "book/14_recipe_baseline.ipynb",
           "first.model.load_state_dict({k: sum(s[k] for s in states) / len(states)",
           "first.model.load_state_dict({k: states[-1][k]"),
    Mutant("curve-batches", "the curves' pair trains on the rest of the epoch, batches[steps:]",
           "14_recipe_baseline", "book/14_recipe_baseline.ipynb",
           "train(net, batches[:steps], linear_config(setting, steps),",
           "train(net, batches[steps:], linear_config(setting, steps),"),
    Mutant("scale-noop", "scale_scores=False still divides by sqrt(d_k)", "13_ablations",
           "layers.py",
           "scale=None if scale_scores else 1.0,",
           "scale=None,"),
    Mutant("warmup-anyway", "a schedule without warm-up warms up all the same", "13_ablations",
           "train.py",
           "rise = step / warmup_steps if warmup else 1.0",
           "rise = step / warmup_steps"),
    Mutant("mha-scale", "multi-head attention divides its scores by d_k, not sqrt(d_k)",
           "03_scaling", "multihead.py",
           "self.scale = scale  # None: 1/sqrt(d_k), decided where the scores are computed",
           "self.scale = 1.0 / self.d_k if scale is None else scale"),
    Mutant("dropout-after-add", "dropout on the residual sum, not on the sublayer's branch",
           "07_transformer", "layers.py",
           "        branch = dropout(sublayer(norm(x), *args))\n"
           "        return x + branch if skip else branch",
           "        branch = sublayer(norm(x), *args)\n"
           "        return dropout(x + branch if skip else branch)"),
    # Chapter 10 decodes a batch whose rows end at different steps.
    Mutant("greedy-eos", "greedy decoding forgets rows that already ended", "10_beam_search",
           "decoding.py",
           "done = done | (token == ids.eos)",
           "done = token == ids.eos"),
    Mutant("greedy-argmin", "greedy decoding picks the least probable token", "10_beam_search",
           "decoding.py",
           "token = log_p.argmax(dim=-1)  # (B,)",
           "token = log_p.argmin(dim=-1)  # (B,)"),
    Mutant("flags-unsure-and", "a translation is flagged as unsure only when both its least "
           "and its mean token probability are low", "12_own_pairs", "app/carry.py",
           "if score < low_score or least < low_token:",
           "if score < low_score and least < low_token:"),
    Mutant("flags-lost", "a source word that could not be carried over does not flag the "
           "translation", "12_own_pairs", "app/carry.py",
           "        if c.lost:\n            reasons.append(",
           "        if c.lost and not c.text:\n            reasons.append("),
    # The chapters' exercises: each mutant breaks the book's own solution (or chapter 7's
    # model on the page), and the chapter's grader must reject it.
    Mutant("solution-attention-queries", "the book's attention takes the softmax over the "
           "queries", "02_self_attention", "book/02_self_attention.ipynb",
           "    weights = torch.softmax(scores, dim=-1)\n    return weights @ v, weights",
           "    weights = torch.softmax(scores, dim=-2)\n    return weights @ v, weights"),
    Mutant("solution-heads-no-transpose", "the book's multi-head attention merges the heads "
           "without the transpose", "04_multi_head", "book/04_multi_head.ipynb",
           "out = out.transpose(1, 2).reshape(B, T_q, d_model)",
           "out = out.reshape(B, T_q, d_model)"),
    Mutant("solution-sin-cos-swapped", "the book's sinusoidal table swaps sin and cos",
           "05_positional_encoding", "book/05_positional_encoding.ipynb",
           "pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)",
           "pe[:, 0::2], pe[:, 1::2] = torch.cos(angle), torch.sin(angle)"),
    Mutant("solution-unbiased-variance", "the book's LayerNorm divides by n - 1",
           "06_residual_norm", "book/06_residual_norm.ipynb",
           "var = (x - mean).pow(2).mean(-1, keepdim=True)  # biased, as nn.LayerNorm",
           "var = x.var(-1, keepdim=True)  # biased, as nn.LayerNorm"),
    Mutant("page-pre-ln", "the page's AddNorm normalises before the sublayer (Pre-LN)",
           "07_transformer", "book/07_transformer.ipynb",
           "return self.norm(x + self.dropout(sublayer(x)))",
           "return x + self.dropout(sublayer(self.norm(x)))"),
    Mutant("page-unscaled-embedding", "the page's Transformer does not multiply the "
           "embeddings by sqrt(d_model)", "07_transformer", "book/07_transformer.ipynb",
           "x = table(tokens) * math.sqrt(self.cfg.d_model)",
           "x = table(tokens)"),
    Mutant("page-memory-unmasked", "the page's decoder attends to the source's padding",
           "07_transformer", "book/07_transformer.ipynb",
           "x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=src_mask)",
           "x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=None)"),
    Mutant("solution-causal-upper", "the book's causal mask keeps the upper triangle",
           "08_decoder_masks", "book/08_decoder_masks.ipynb",
           "return torch.ones(T, T, dtype=torch.bool).tril()",
           "return torch.ones(T, T, dtype=torch.bool).triu()"),
    Mutant("solution-loss-pads-counted", "the book's loss divides by every position, padding "
           "included", "09_loss", "book/09_loss.ipynb",
           "return (per_position * keep).sum() / keep.sum()",
           "return (per_position * keep).sum() / keep.numel()"),
    Mutant("solution-beam-past-eos", "the book's beam search extends hypotheses after EOS",
           "10_beam_search", "book/10_beam_search.ipynb",
           "(finished if ids[-1] == eos_id else alive).append((log_p, ids))",
           "alive.append((log_p, ids))"),
    Mutant("solution-numbers-comma", "the book's number finder keeps the French decimal comma",
           "12_own_pairs", "book/12_own_pairs.ipynb",
           'out.append(f"{units}.{cents}")',
           'out.append(f"{units},{cents}")'),
    Mutant("solution-schedule-no-warmup", "the book's schedule starts at its peak",
           "14_recipe_baseline", "book/14_recipe_baseline.ipynb",
           "return min(step / warmup, (warmup / step) ** 0.5)",
           "return min(1.0, (warmup / step) ** 0.5)"),
    # Chapter 15, the language model: the package's parts it checks, and its own solutions.
    Mutant("lm-causal-mask", "the language model's causal mask is off by one: each position "
           "sees the next", "15_language_model", "lm.py",
           "mask = causal_mask(offset + T, tokens.device)[offset:]  # (T, offset + T)",
           "mask = torch.ones(T, offset + T, dtype=torch.bool,\n"
           "                              device=tokens.device).tril(offset + 1)"),
    Mutant("top-k-plus-one", "top-k sampling keeps k + 1 tokens", "15_language_model",
           "sampling.py",
           "keep[..., top_k:] = False",
           "keep[..., top_k + 1:] = False"),
    Mutant("bpe-merge-order", "BPE encodes with the merges latest first, not in the order "
           "learned", "15_language_model", "data/bpe.py",
           "key=lambda p: self.ranks.get(p, len(self.vocab)))",
           "key=lambda p: -self.ranks.get(p, -1))"),
    Mutant("rope-values", "rotary positions rotate the values too", "15_language_model",
           "modern.py",
           "q, k = self.rotary(q, offset), self.rotary(k, offset)",
           "q, k, v = self.rotary(q, offset), self.rotary(k, offset), self.rotary(v, offset)"),
    Mutant("solution-lm-mask-first-rows", "the book's language-model mask takes the first T "
           "rows, not the last", "15_language_model", "book/15_language_model.ipynb",
           "return torch.ones(offset + T, offset + T, dtype=torch.bool).tril()[offset:]",
           "return torch.ones(offset + T, offset + T, dtype=torch.bool).tril()[:T]"),
    Mutant("solution-top-k-plus-one", "the book's top-k filter keeps k + 1 tokens",
           "15_language_model", "book/15_language_model.ipynb",
           "keep = keep.scatter(-1, order[..., :k], True)",
           "keep = keep.scatter(-1, order[..., :k + 1], True)"),
]

# Real bugs that no chapter catches yet: run only when named (python tests/mutants.py NAME).
# Move one into MUTANTS once a chapter checks what it breaks.
KNOWN_GAPS: list[Mutant] = []


def in_chapter(m: Mutant) -> bool:
    """Whether the mutant edits a chapter's own code rather than the package."""
    return m.file.endswith(".ipynb")


def target(m: Mutant) -> Path:
    """The file the mutant edits."""
    return ROOT / m.file if in_chapter(m) else PACKAGE / m.file


def mutate(text: str, m: Mutant) -> str:
    """The file's text with the mutant's edit; ValueError unless the old text occurs once."""
    count = text.count(m.old)
    if count != 1:
        where = m.file if in_chapter(m) else f"labformer/{m.file}"
        raise ValueError(f"mutant {m.name}: the old text occurs {count} times in "
                         f"{where}, expected once: {m.old!r}")
    return text.replace(m.old, m.new)


def mutate_notebook(text: str, m: Mutant) -> tuple[str, str]:
    """A notebook's JSON with the edit applied to its code cells, and the edited cell's code.

    The old text must occur exactly once over all code cells (ValueError otherwise)."""
    nb = json.loads(text)
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    mutate("\n".join("".join(c["source"]) for c in code), m)  # exactly once overall
    for cell in code:
        source = "".join(cell["source"])
        if m.old in source:
            edited = source.replace(m.old, m.new)
            cell["source"] = edited.splitlines(keepends=True)
            return json.dumps(nb, indent=1, ensure_ascii=False) + "\n", edited
    raise AssertionError("unreachable: mutate() found the text")


def check_applies(m: Mutant) -> str:
    """The edited source (the whole file, or the notebook cell); ValueError if it cannot apply."""
    text = target(m).read_text(encoding="utf-8")
    return mutate_notebook(text, m)[1] if in_chapter(m) else mutate(text, m)


def planted_copy(dest: Path, m: Mutant | None) -> None:
    """Copy labformer into dest/labformer and apply the mutant there (None: unmutated)."""
    shutil.copytree(PACKAGE, dest / "labformer",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if m is not None and not in_chapter(m):
        path = dest / "labformer" / m.file
        path.write_text(mutate(path.read_text(encoding="utf-8"), m), encoding="utf-8")


def first_failure(output: str) -> str:
    """The first failing claim (or the exception line) of an nbval run's output."""
    lines = [ANSI.sub("", ln).strip() for ln in output.splitlines()]
    for i, ln in enumerate(lines):
        if ln.startswith("ClaimFailed: "):  # "ClaimFailed: 1 of 5 claims ...", then "- claim"
            claims = [c[2:] for c in lines[i + 1:] if c.startswith("- ")]
            return (claims[0] if claims else ln)[:200]
    for pattern in (r"^(?:[A-Za-z_]+\.)*Mismatch: .*",  # a grader rejected a solution
                    r"^[A-Za-z_.]*(Error|Exception|Failed|Interrupt)\b: .*",
                    r"\b[A-Za-z_.]*(Error|Exception)\b.*"):
        for ln in lines:
            hit = re.search(pattern, ln)
            if hit:
                return hit.group(0)[:200]
    tail = [ln for ln in lines if ln]
    return tail[-1][:200] if tail else "(no output)"


def run_chapter(chapter: str, m: Mutant | None) -> tuple[bool, str, float]:
    """(passed, first failing line, seconds) of one chapter against a planted copy."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="labformer-mutant-") as tmp:
        planted_copy(Path(tmp), m)
        env = dict(os.environ, OMP_NUM_THREADS="1", TQDM_DISABLE="1",
                   PYTHONPATH=os.pathsep.join([tmp, os.environ.get("PYTHONPATH", "")]))
        probe = subprocess.run([sys.executable, "-c", IMPORT_PROBE],
                               cwd=ROOT / "book", env=env, capture_output=True, text=True,
                               check=False).stdout.strip()
        if not probe.startswith(tmp):  # the harness is broken, not the chapter: stop loudly
            raise RuntimeError(f"labformer imports from {probe!r}, not from the copy in {tmp}")
        notebook = ROOT / "book" / f"{chapter}.ipynb"
        if m is not None and in_chapter(m):  # next to the chapter: it reads files from book/
            notebook = ROOT / "book" / f"_mutant_{m.name}.ipynb"
            notebook.write_text(mutate_notebook(target(m).read_text(encoding="utf-8"), m)[0],
                                encoding="utf-8")
        cmd = [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-cell-timeout=900", "-x",
               "-q", "-p", "no:cacheprovider", str(notebook.relative_to(ROOT))]
        try:
            done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                                  check=False)
        finally:
            if notebook.name.startswith("_mutant_"):
                notebook.unlink()
    passed = done.returncode == 0
    line = "" if passed else first_failure(done.stdout + "\n" + done.stderr)
    return passed, line, time.perf_counter() - start


def grade_attempts() -> int:
    """Grade every planted wrong attempt and every right one; 1 if any is graded wrongly."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import exercise_attempts

    from labformer.book import exercises

    start = time.perf_counter()
    failures: list[str] = []
    print("| exercise | wrong attempt | property | message (first line) |")
    print("|---|---|---|---|")
    for w in exercise_attempts.WRONG:
        try:
            exercises.check(w.exercise, w.attempt, quiet=True)
        except exercises.Mismatch as err:
            first = str(err).splitlines()[0].replace("|", "/")
            print(f"| {w.exercise} | {w.mistake} | {err.property} | {first} |", flush=True)
            continue
        except Exception as err:  # a grader that breaks is a failure too, not a crash
            failures.append(f"{w.exercise}, {w.mistake}: {type(err).__name__}: {err}")
            continue
        failures.append(f"{w.exercise}, {w.mistake}: not rejected")
    for name, attempt in exercise_attempts.RIGHT.items():
        try:
            if not exercises.passes(name, attempt, quiet=True):
                failures.append(f"{name}, the right attempt: graded as not attempted")
        except Exception as err:
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            failures.append(f"{name}, the right attempt: rejected: {first}")
    wrong, right = len(exercise_attempts.WRONG), len(exercise_attempts.RIGHT)
    print(f"\n{wrong} wrong attempts at {len(exercises.NAMES)} exercises, {right} right ones; "
          f"{len(failures)} graded wrongly; {time.perf_counter() - start:.1f} s")
    for line in failures:
        print(f"FAIL {line}")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
    parser.add_argument("-n", "--workers", type=int, default=2, help="chapters run at once")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--skip-baseline", action="store_true",
                        help="do not run the chapters unmutated (only after they just passed)")
    parser.add_argument("--attempts", action="store_true",
                        help="only grade the exercises' planted wrong attempts (seconds)")
    args = parser.parse_args(argv)
    if args.list:
        for m in MUTANTS + KNOWN_GAPS:
            gap = "  (known gap: not run by default)" if m in KNOWN_GAPS else ""
            print(f"{m.name:17} {m.chapter:22} {m.bug}{gap}")
        return 0
    if args.attempts:
        return grade_attempts()
    unknown = set(args.names) - {m.name for m in MUTANTS + KNOWN_GAPS}
    if unknown:
        parser.error(f"unknown mutants {sorted(unknown)}; see --list")
    mutants = [m for m in MUTANTS + KNOWN_GAPS if m.name in args.names] if args.names \
        else MUTANTS
    for m in mutants:  # fail before running anything if a mutant no longer applies
        check_applies(m)
    attempts_failed = 0 if args.names else grade_attempts()
    chapters = sorted({m.chapter for m in mutants})
    # the slowest chapters first, so that the short ones fill in around them
    jobs: list[tuple[str, Mutant | None]] = \
        [] if args.skip_baseline else [(c, None) for c in chapters]
    jobs += [(m.chapter, m) for m in mutants]
    jobs.sort(key=lambda j: not j[0].startswith(("11", "13")))
    start = time.perf_counter()

    def one(job: tuple[str, Mutant | None]) -> tuple[bool, str, float]:
        chapter, m = job
        result = run_chapter(chapter, m)
        what = "baseline" if m is None else m.name
        status = ("pass" if result[0] else "FAIL") if m is None else \
            ("survived" if result[0] else "caught")
        print(f"  {what:17} {chapter:22} {status:8} {result[2]:5.0f} s", flush=True)
        return result

    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        results = dict(zip(jobs, pool.map(one, jobs), strict=True))
    wall = time.perf_counter() - start

    broken = [c for c in chapters if (c, None) in results and not results[(c, None)][0]]
    print("\n| bug | chapter | result | first failing line | s |")
    print("|---|---|---|---|---|")
    for m in mutants:
        passed, line, secs = results[(m.chapter, m)]
        verdict = "survived" if passed else "caught"
        if m.chapter in broken:
            verdict = "baseline fails"
        print(f"| {m.name}: {m.bug} | {m.chapter} | {verdict} | {line.replace('|', '/')} "
              f"| {secs:.0f} |")
    for c in broken:
        print(f"baseline {c} FAILS unmutated: {results[(c, None)][1]}")
    survived = [m.name for m in mutants if results[(m.chapter, m)][0]]
    caught = len(mutants) - len(survived)
    baselines = 0 if args.skip_baseline else len(chapters)
    print(f"\n{caught}/{len(mutants)} bugs caught; {baselines} baselines, "
          f"{len(broken)} failing; wall time {wall:.0f} s")
    if survived:
        print("survived: " + ", ".join(survived))
    if not args.names and KNOWN_GAPS:
        print("known gaps, not run (no chapter catches them yet): "
              + ", ".join(m.name for m in KNOWN_GAPS))
    if attempts_failed:
        print("exercise attempts graded wrongly: see FAIL above")
    return 1 if survived or broken or attempts_failed else 0


if __name__ == "__main__":
    sys.exit(main())
