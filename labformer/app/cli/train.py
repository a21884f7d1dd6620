"""``labformer train``: train the translator on the generated corpus or on a pairs file."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import random
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from labformer.app.cli import runs
from labformer.app.cli.common import (
    CORPUS_HELD,
    CORPUS_PAIRS,
    CORPUS_SEED,
    DEFAULT_CHECKPOINT,
    CLIError,
    Say,
    columns,
    corpus_size,
    count,
    note,
    os_reason,
    positive,
    read_pairs_file,
    seed,
)

if TYPE_CHECKING:
    from labformer.app.translate import Translator
    from labformer.data.pairs import PairLine
    from labformer.train import History

# labformer.app.translate.RECIPES, written out so that `labformer --help` does not load torch
# (tests/cli/test_cli.py checks that these lines are the recipes' own summaries).
RECIPE_HELP = {
    "quick": "1 epoch (500 steps at least), warm-up 50, linear decay from 0.004, dropout 0, "
             "batch 48",
    "paper": "3 epochs (800 steps at least), warm-up 200, 1/sqrt decay from 0.002, dropout "
             "0.1, batch 96",
}
RECIPE_NAMES = tuple(RECIPE_HELP)
MIN_PAIRS = 100  # fewer pairs than this teach a translator nothing: refuse (--min-pairs)
NEAR_ZERO_BLEU = 1.0  # a final validation BLEU below this: the run learned nothing
MEMORISED_BLEU = 50.0  # ... unless its training pairs come back this well: it memorised them
VALID_SEEN = 200  # training pairs translated for that check
MEMORISED_GAP = 20.0  # training BLEU this far above validation BLEU: a warning
FEW_VALID = 50  # fewer held-out pairs than this give a rough score
BIG_FILE = 5 * 2**20  # bytes: above this, reading a pairs file says what it is doing


def add_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    """The ``train`` subcommand and its options."""
    p = sub.add_parser("train", help="train the translator and write a checkpoint",
                       parents=parents,
                       description="Train the translator on the generated corpus or on your "
                                   "own tab-separated pairs file; works under torchrun, where "
                                   "each optimiser step takes one batch per process (a global "
                                   "batch of N x --batch-size, N times fewer steps an epoch).")
    p.add_argument("--out", default=DEFAULT_CHECKPOINT,
                   help=f"checkpoint to write (default {DEFAULT_CHECKPOINT}); an existing "
                        f"one is kept unless --resume or --overwrite, and a file that is not "
                        f"a checkpoint is never replaced; OUT.partial holds the run until it "
                        f"ends, OUT.lock marks it, OUT.log records it")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing checkpoint --out with a new run, once the new "
                        "run has finished (default off: refuse)")
    p.add_argument("--recipe", choices=RECIPE_NAMES, default="quick",
                   help="how to train. " + "; ".join(
                       f"{name}: {line}" for name, line in RECIPE_HELP.items())
                   + " (default quick; paper trains the book's chapter 11 translator)")
    p.add_argument("--epochs", type=positive, default=None,
                   help="exactly this many passes over the training data (default: the "
                        "recipe's whole epochs, or more for its --steps)")
    p.add_argument("--steps", type=positive, default=None,
                   help="at least this many optimiser steps, in whole epochs (default: the "
                        "recipe's, 500 quick, 800 paper); the warm-up is at most a quarter "
                        "of the run")
    p.add_argument("--seed", type=seed, default=0,
                   help="training seed: initial weights, batches, dropout (default 0); the "
                        "corpus and the validation split keep their own fixed seed")
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda, mps")
    p.add_argument("--pairs", metavar="FILE",
                   help="train on this UTF-8 file of 'source<TAB>target' lines instead "
                        "(default: the generated corpus); repeats and near-repeats are "
                        "merged, then 5%% (at most 500) validate unless --valid")
    p.add_argument("--valid", metavar="FILE",
                   help="held-out pairs for validation, in the --pairs layout (default: 5%% "
                        "of --pairs)")
    p.add_argument("--src-lang", default="fr", help="source language, for the tokenizer "
                                                    "(default fr)")
    p.add_argument("--tgt-lang", default="en", help="target language (default en)")
    p.add_argument("--min-pairs", type=count, default=MIN_PAIRS,
                   help=f"refuse a --pairs file with fewer pairs (default {MIN_PAIRS})")
    p.add_argument("--num-pairs", type=corpus_size(CORPUS_HELD + MIN_PAIRS), default=CORPUS_PAIRS,
                   help=f"generated corpus size (default {CORPUS_PAIRS})")
    p.add_argument("--batch-size", type=positive, default=None,
                   help="pairs per step (default: the recipe's: 48 quick, 96 paper)")
    p.add_argument("--resume", action="store_true",
                   help="continue from --out (or its side file) if it exists (default off; "
                        "same result as one long run; the file must hold the same data and "
                        "model)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar, only one line an epoch (default off)")


def split_pairs(pairs: list[PairLine], seed: int = CORPUS_SEED
                ) -> tuple[list[PairLine], list[PairLine]]:
    """Training and validation pairs of a user's file: a seeded 5% (at most 500) validates."""
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    n_valid = min(500, len(pairs) // 20)
    return [pairs[i] for i in order[n_valid:]], [pairs[i] for i in order[:n_valid]]


def _check_lengths(path: str, pairs: list[PairLine], src_lang: str, tgt_lang: str,
                   max_len: int) -> None:
    """Every pair fits the model's positions; else the first one that does not, by its line."""
    from labformer.app.translate import text_codecs

    src_text, tgt_text = text_codecs([p.src for p in pairs], src_lang, tgt_lang)
    for p in pairs:
        for side, codec, text in (("source", src_text, p.src), ("target", tgt_text, p.tgt)):
            n = len(codec.tokenize(text))
            if n >= max_len:
                raise CLIError(f"{path}:{p.line}: the {side} sentence has {n} tokens; the model "
                               f"reads at most {max_len - 1}: shorten or remove it")


def _num_batches(n: int, batch_size: int) -> int:
    """Batches make_batches cuts n pairs into (windows of 50 batches, each rounded up)."""
    window = batch_size * 50
    return sum(math.ceil(min(window, n - start) / batch_size) for start in range(0, n, window))


def _check_batch(origin: str, out: str, batch_size: int, steps_per_epoch: int,
                 source: dict[str, object]) -> None:
    """A resumed run continues with the batches of the file's run: the same batch size, so
    the same steps an epoch (the file records its steps and epochs). Other data (a smaller
    pairs file) makes other steps too: that is for the resume check to name, not the batch."""
    from labformer.train import load_checkpoint

    try:
        state = load_checkpoint(origin)
        done = int(state["epoch"]) + 1
        steps = len(state["history"]["step_loss"])
    except (OSError, ValueError, KeyError, TypeError):
        return  # resuming reads the file again, and says what is wrong with it
    if state.get("corpus") != source:
        return  # other data: resuming says "its training data differs"
    if done > 0 and steps % done == 0 and steps // done != steps_per_epoch:
        raise CLIError(f"{origin} was trained with {steps // done} steps an epoch, this run "
                       f"makes {steps_per_epoch} (batch {batch_size}): resume with the "
                       f"file's --batch-size (and as many processes); nothing was changed")


def _fields(config: Any) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


def _read(args: argparse.Namespace, path: str, say: Say) -> tuple[list[PairLine], int]:
    """A pairs file's pairs, near-repeats merged, and how many were read; a big file says
    what takes its time."""
    from labformer.data.pairs import dedupe_pairs

    size = os.path.getsize(path) if os.path.isfile(path) else 0
    if size > BIG_FILE:
        say(f"labformer: reading {path} ({size / 2**20:.0f} MiB) ...", err=True)
    pairs = read_pairs_file(args, path, say=say)
    kept, merged = dedupe_pairs(pairs)
    if merged:
        say(f"labformer: note: {path}: merged {merged} repeated pair(s) (equal up to Unicode "
            f"form, apostrophes and quotes, case and spacing) before the split; {len(kept)} "
            f"distinct pairs remain", err=True)
    if size > BIG_FILE:
        say(f"labformer: checking the lengths of {len(kept)} pairs ...", err=True)
    return kept, len(pairs)


def run(args: argparse.Namespace) -> int:
    """Train; 0, 3 when the run learned nothing (see :func:`verdict`)."""
    from labformer.app.translate import MODEL_DEFAULTS, RECIPES, build_model, text_codecs
    from labformer.data import Vocab, generate_corpus
    from labformer.data.pairs import pair_key
    from labformer.train import pick_device, planned_schedule

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    out, partial = args.out, runs.partial_path(args.out)
    if args.resume and args.overwrite:
        raise CLIError("--resume continues --out and --overwrite replaces it: choose one")
    if args.valid and not args.pairs:
        raise CLIError("--valid goes with --pairs (the generated corpus has its own split)")
    if args.valid and os.path.isfile(args.valid) and os.path.isfile(args.pairs) \
            and os.path.samefile(args.valid, args.pairs):
        raise CLIError(f"--valid {args.valid} is the --pairs file: the model would be "
                       f"validated on its own training pairs; leave out --valid (5% of "
                       f"--pairs are then held out) or give a file of other pairs")
    # Early, before the data is read; again under the lock.
    runs.refuse_unsafe_out(out, (args.pairs, args.valid), args.overwrite, args.resume)
    device = pick_device(args.device)  # an unusable device fails now, not after the data
    screen = runs.RunLog()  # until the lock is held: the screen only
    if args.pairs:
        pairs, total = _read(args, args.pairs, screen)
        if len(pairs) < args.min_pairs:
            raise CLIError(f"{args.pairs}: {len(pairs)} pair(s) are too few to learn a "
                           f"translation from (at least {args.min_pairs}; a few thousand "
                           f"translate new sentences); --min-pairs 1 trains anyway")
        _check_lengths(args.pairs, pairs, args.src_lang, args.tgt_lang,
                       MODEL_DEFAULTS["max_len"])
        if args.valid:
            held, _ = _read(args, args.valid, screen)
            _check_lengths(args.valid, held, args.src_lang, args.tgt_lang,
                           MODEL_DEFAULTS["max_len"])
            seen = {pair_key(p.src, p.tgt) for p in pairs}
            valid_lines = [p for p in held if pair_key(p.src, p.tgt) not in seen]
            if len(valid_lines) < len(held):
                screen(f"labformer: note: {args.valid}: {len(held) - len(valid_lines)} "
                       f"pair(s) are also training pairs: left out of validation", err=True)
            train_lines, split = pairs, f"validation: {len(valid_lines)} pairs of {args.valid}"
        else:
            train_lines, valid_lines = split_pairs(pairs)
            split = f"validation: {len(valid_lines)} pairs held out of the file (5%)"
        data = [(p.src, p.tgt) for p in train_lines]
        valid = [(p.src, p.tgt) for p in valid_lines]
        source: dict[str, object] = {"pairs_file": os.path.abspath(args.pairs),
                                     "columns": list(columns(args)),
                                     "valid": [list(pair) for pair in valid]}
        if args.valid:
            source["valid_file"] = os.path.abspath(args.valid)
        read = f"{total} pairs read from {args.pairs}"
    else:
        corpus = generate_corpus(num_pairs=args.num_pairs, seed=CORPUS_SEED)
        data, valid = corpus.train, corpus.valid
        source = {"num_pairs": args.num_pairs, "seed": CORPUS_SEED}
        read = f"{args.num_pairs} generated pairs"
        split = f"validation: {len(valid)} pairs, test: {len(corpus.test)} pairs"
    runs.check_writable(out)
    recipe = RECIPES[args.recipe]
    config = recipe.train
    if args.epochs:
        config = config.__class__(**{**_fields(config), "epochs": args.epochs, "min_steps": 0})
    if args.steps:
        config = config.__class__(**{**_fields(config), "min_steps": args.steps})
    config = config.__class__(**{**_fields(config), "seed": args.seed})
    batch_size = args.batch_size or recipe.batch_size
    steps_per_epoch = max(1, _num_batches(len(data), batch_size) // world)
    epochs, _ = planned_schedule(config, steps_per_epoch)
    kind = "moses" if args.pairs else "words"
    src_text, tgt_text = text_codecs([s for s, _ in data], args.src_lang, args.tgt_lang, kind)
    src_vocab = Vocab.build(src_text.tokenize(s) for s, _ in data)
    tgt_vocab = Vocab.build(tgt_text.tokenize(t) for _, t in data)
    n_params = build_model(src_vocab, tgt_vocab).num_parameters()
    banner = (f"data: {read}; training: {len(data)} pairs, {split}",
              f"vocabulary: {len(src_vocab)} {args.src_lang} and {len(tgt_vocab)} "
              f"{args.tgt_lang} tokens; model: {n_params:,} parameters; device: {device}"
              f"{f' x {world} processes' if world > 1 else ''}; {epochs} epochs of "
              f"{steps_per_epoch} steps ({epochs * steps_per_epoch} steps), batch {batch_size}",
              f"recipe: {args.recipe} ({recipe.summary()})")

    # SIGTERM is Ctrl-C from here on: whenever it comes, the lock goes and the files are named.
    with runs.sigterm_as_interrupt(rank == 0), \
            runs.lock(out) if rank == 0 else contextlib.nullcontext():
        # The lock is held: nothing of another run is touched from here on.
        existed = os.path.isfile(out)
        copied, origin = False, None
        if rank == 0:
            runs.refuse_unsafe_out(out, (args.pairs, args.valid), args.overwrite, args.resume)
            if not args.resume and os.path.exists(partial):
                os.unlink(partial)  # --overwrite: a side file of an earlier run (checked)
        if args.resume:
            newer = os.path.isfile(partial) and (
                not existed or os.path.getmtime(partial) >= os.path.getmtime(out))
            if newer:
                origin = partial
            elif existed:
                origin = out
            if origin is not None and rank == 0:  # before any file is touched
                _check_batch(origin, out, batch_size, steps_per_epoch, source)
            if origin == out and rank == 0:
                try:
                    runs.copy_atomically(out, partial)
                except OSError as e:
                    raise CLIError(f"cannot copy {out} to {partial} to continue it there: "
                                   f"{os_reason(e)}; {out} is unchanged") from None
                copied = True
            elif origin is None and rank == 0:
                note(f"labformer: note: --resume, but there is no checkpoint at {out}: "
                     f"starting a fresh run", err=True)
        if world > 1:  # the other ranks wait for rank 0's copy
            import torch.distributed as dist

            from labformer.train import setup_distributed

            setup_distributed("nccl" if device.type == "cuda" else "gloo")
            dist.barrier()
        say = (runs.RunLog(runs.log_path(out), header=shlex.join(["labformer", *args.argv]))
               if rank == 0 else runs.RunLog())
        try:
            return _train(args, data, valid, source, config, batch_size, device, epochs,
                          steps_per_epoch, banner, origin, copied, existed, say, rank)
        except BaseException as e:
            # Whatever ends the run, its log says why (the screen may be gone: a closed pipe).
            if not getattr(e, "reported", False):
                say.log(f"labformer: the run stopped: {_why(e)}")
            raise
        finally:
            say.close()


def _why(error: BaseException) -> str:
    """Why a run stopped, in one line, for its log."""
    if isinstance(error, KeyboardInterrupt):
        return "interrupted (Ctrl-C or SIGTERM)"
    if isinstance(error, CLIError):
        return str(error)
    if isinstance(error, OSError):
        return f"{error.filename + ': ' if error.filename else ''}{os_reason(error)}"
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"



def _train(args: argparse.Namespace, data: list[tuple[str, str]], valid: list[tuple[str, str]],
           source: dict[str, object], config: Any, batch_size: int, device: Any, epochs: int,
           steps_per_epoch: int, banner: tuple[str, ...], origin: str | None, copied: bool,
           existed: bool, say: runs.RunLog, rank: int) -> int:
    """The run itself, under the lock, with its log open."""
    from labformer.app import translate as translate_module

    out, partial = args.out, runs.partial_path(args.out)
    live_lines = args.quiet or not sys.stdout.isatty()
    if rank == 0:
        for line in banner:
            say(line)
        if args.resume and origin is not None:
            done = runs.saved_epoch(origin)
            at = f"after epoch {done[0]}" if done else "where it stopped"
            say(f"resuming {origin} {at} (of {epochs})")
        say(f"checkpoint: {out} (written as {partial} until the run ends); log: "
            f"{runs.log_path(out)}")
        say("valid BLEU after an epoch: the model alone (greedy); the final validation "
            "BLEU: with carry-over, as `labformer evaluate` reports it")
    bar = None
    if rank == 0 and not args.quiet and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=epochs * steps_per_epoch, unit="step", dynamic_ncols=True,
                   desc="training", smoothing=0.1)
    shown = {"epoch": f"1/{epochs}", "loss": "", "lr": ""}

    def step_tick(step: int, lr: float, loss: float | None) -> None:
        """One step of the run's one bar: tqdm adds the rate (steps/s) and the ETA."""
        if bar is None:
            return
        shown["lr"] = f"{lr:.2e}"
        if loss is not None:
            shown["loss"] = f"{loss:.3f}"
        bar.n = step
        bar.set_postfix({k: v for k, v in shown.items() if v}, refresh=False)
        bar.update(0)  # redraws at most every tqdm.mininterval

    def epoch_line(epoch: int, epochs: int, h: History) -> None:
        if bar is not None:
            shown.update(epoch=f"{min(epoch + 1, epochs)}/{epochs}",
                         loss=f"{h.epoch_loss[-1]:.3f}")
            bar.n = len(h.step_loss)
            bar.set_postfix(shown, refresh=False)
            bar.refresh()
        # About 20-25 lines whatever the run's length: the validated epochs, or every k-th.
        scored = bool(h.valid_epoch) and h.valid_epoch[-1] == epoch
        due = scored if valid else epoch % max(1, epochs // 25) == 0
        if not (due or epoch == epochs):
            return
        bleu = f", valid BLEU {h.valid_score[-1]:.1f}" if scored else ""
        say(f"epoch {epoch}/{epochs}: loss {h.epoch_loss[-1]:.3f}{bleu}", screen=live_lines)

    start = time.perf_counter()
    try:
        try:
            translator = translate_module.train_translator(
                data, valid, seed=args.seed, train_config=config,
                model_overrides=translate_module.RECIPES[args.recipe].model,
                batch_size=batch_size, device=device, checkpoint=partial,
                resume=args.resume, progress=False, extra_state={"corpus": source},
                src_lang=args.src_lang, tgt_lang=args.tgt_lang,
                tokenizer="moses" if args.pairs else "words",
                on_epoch=epoch_line, on_step=step_tick, save_every=runs.SAVE_EVERY)
        except KeyboardInterrupt as e:
            if bar is not None:
                bar.close()
            if rank == 0:
                message = runs.stop_message(out, partial, epochs, existed)
                if "nothing was saved" not in message:
                    message += f"; continue with: {runs.resume_command(args.argv)}"
                say(message, err=True)
                e.reported = True  # type: ignore[attr-defined]
            raise
        except Exception as e:
            if copied and rank == 0:
                Path(partial).unlink(missing_ok=True)
            if isinstance(e, OSError) and rank == 0:  # a full disk, a lost drive
                raise CLIError(runs.write_failure(out, partial, epochs, e, existed,
                                                  runs.resume_command(args.argv))) from None
            if isinstance(e, ValueError) and partial in str(e):
                raise ValueError(str(e).replace(partial, out)) from None
            raise
    finally:
        if bar is not None:
            bar.close()
    if rank != 0:
        return 0
    h = translator.history
    if not live_lines:  # a terminal: the summary once the bar has gone
        scores = dict(zip(h.valid_epoch, h.valid_score, strict=True))
        for i, loss in enumerate(h.epoch_loss, start=1):
            if i in scores or i == len(h.epoch_loss):
                bleu = f", valid BLEU {scores[i]:.1f}" if i in scores else ""
                print(f"epoch {i}: loss {loss:.3f}{bleu}")
    say(f"trained {len(h.step_loss)} steps in {time.perf_counter() - start:.0f} s")
    # The new model is complete in the side file. It replaces --out now, unless it would
    # replace another model (--overwrite, or resuming an interrupted --overwrite) and fails
    # the run's quality check, or the check is stopped: then the old model stays.
    replaces_other = existed and origin != out
    try:
        status = verdict(translator, valid, data, say)
    except KeyboardInterrupt as e:
        if replaces_other:
            say(f"labformer: interrupted while checking the new model: {out} is unchanged "
                f"(the model it held is kept); the new model is complete ({epochs} epochs) "
                f"in {partial}; check it and let it replace {out} with: "
                f"{runs.resume_command(args.argv)}", err=True)
        else:
            runs.publish(partial, out)
            say(f"labformer: interrupted while checking the model: the model is complete "
                f"({epochs} epochs) and saved as {out}; its quality check did not run "
                f"(labformer evaluate --checkpoint {out} scores it)", err=True)
        e.reported = True  # type: ignore[attr-defined]
        raise
    if status != 0 and replaces_other:
        say(f"labformer: {out} is unchanged (the model it held is kept, not replaced by one "
            f"that failed the check); the new model is {partial} (try it with --checkpoint "
            f"{partial}; the next --overwrite replaces it)", err=True)
        return status
    runs.publish(partial, out)
    replaced = " (it replaces the previous model)" if existed else ""
    say(f"checkpoint: {out}{replaced}")
    return status


def verdict(translator: Translator, valid: Sequence[tuple[str, str]],
            data: Sequence[tuple[str, str]] = (), say: Say | None = None) -> int:
    """0, or 3 with a loud message when the run learned nothing (BLEU ~ 0, empty outputs).

    The validation BLEU is computed as ``labformer evaluate`` computes it (greedy, with
    carry-over, cased unless the model writes lower case), on up to VALID_SENTENCES held-out
    pairs; the training BLEU the same way on up to VALID_SEEN training pairs. A training BLEU
    far above the validation BLEU is a warning: the model has memorised its pairs. A model
    that translates its own pairs well but held-out ones at BLEU ~ 0 has learned its data,
    not the language: a warning, not a failure.
    """
    from labformer.app.translate import VALID_SENTENCES

    say = say or note
    if not valid or not translator.history.valid_score:
        say("labformer: warning: no validation pairs (fewer than 20 in the file): the "
            "model's quality is unknown", err=True)
        return 0
    held = list(valid[:VALID_SENTENCES])
    bleu, texts = _scored(translator, held)
    empty = sum(not t for t in texts)
    seen_pairs = list(data[:VALID_SEEN])
    seen = _scored(translator, seen_pairs)[0] if seen_pairs else None
    rough = (f" (only {len(held)} pairs: a rough estimate; --valid FILE holds out more)"
             if len(held) < FEW_VALID else "")
    trained = f"training BLEU {seen:.1f} ({len(seen_pairs)} pairs), " \
        if seen is not None else ""
    say(f"{trained}validation BLEU {bleu:.1f} ({len(held)} held-out pairs; greedy, with "
        f"carry-over, as `labformer evaluate --split valid`){rough}")
    if seen is not None and seen - bleu >= MEMORISED_GAP and not empty:
        say(f"labformer: warning: the model translates its training pairs (BLEU {seen:.1f}) "
            f"far better than held-out ones (validation BLEU {bleu:.1f}): it has memorised "
            f"them, too little data to generalise; more pairs help, more steps do not",
            err=True)
        if bleu < NEAR_ZERO_BLEU and seen >= MEMORISED_BLEU:
            return 0
    if bleu < NEAR_ZERO_BLEU or empty:
        say(f"labformer: error: this model learned nothing useful: validation BLEU "
            f"{bleu:.1f}, {empty} of {len(held)} validation sentences translate to "
            f"nothing. More data (thousands of pairs) or more --steps may help.", err=True)
        return 3
    return 0


def _scored(translator: Translator, pairs: list[tuple[str, str]]) -> tuple[float, list[str]]:
    """BLEU of the translations of ``pairs`` as ``evaluate`` computes it, and the
    translations."""
    from labformer.app.carry import translate_carried
    from labformer.app.translate import score

    texts = [t.text for t in translate_carried(translator, [s for s, _ in pairs])]
    refs = [translator.tgt_text.normalize(t) for _, t in pairs]
    return score(texts, refs)["bleu"], texts
