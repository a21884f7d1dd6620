"""``labformer lm``: train a small GPT on any UTF-8 text file, and sample from it.

    labformer lm train --text labformer/data/shakespeare.txt --out runs/shakespeare.pt
    labformer lm sample --checkpoint runs/shakespeare.pt --prompt "ROMEO." --seed 1

``train`` cuts the text into training text and held-out text (the last tenth of its lines,
``--valid-fraction``: contiguous, never random lines), trains a tokenizer on it (characters by
default, or byte-level BPE), then a decoder-only :class:`~labformer.lm.LanguageModel` for
``--steps`` AdamW steps on random windows of the training text, printing the validation loss
every ``--eval-every`` steps. The run keeps the translator's files and guards
(:mod:`.runs`): OUT.partial while it runs (saved at every validation and at least once a
minute), OUT.lock, OUT.log; an existing OUT is kept unless --resume or --overwrite, a file
that is not a labformer checkpoint is never replaced, checkpoints carry checksums. Under
``torchrun`` it trains data-parallel: every rank takes ``--batch-size`` windows of a global
batch drawn from one shared generator, so N processes step as one process with N times the
batch; only rank 0 prints and writes.

Why characters by default: a character model works on any text at once (no tokenizer to
train, no unknown word), its 60 to 100 tokens keep the output layer small, and what it learns
is visible early (spelling, line breaks, speaker names) -- nanoGPT's first lesson. BPE
(``--tokenizer bpe``, 512 tokens by default) makes each window cover about twice as much text
(1.9 characters a token on the shipped Shakespeare), at the price of a larger output layer, of
words the model must learn to spell from rarer tokens, and of a tokenizer trained in pure
Python (10 s of one CPU for the 1 MB text).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from labformer.app.cli import runs
from labformer.app.cli.common import CLIError, note, os_reason, positive, seed, special_file

LM_KIND = "labformer-lm"  # the checkpoint entry "kind" of a language model
MIN_VALID_WINDOWS = 1  # the held-out text holds at least this many windows


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def _fraction(text: str) -> float:
    """argparse type: a number strictly between 0 and 1."""
    value = _positive_float(text)
    if not value < 1:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text}")
    return value


def _top_p(text: str) -> float:
    value = _positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"top-p is a probability mass in (0, 1], got {text}")
    return value


def add_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    """The ``lm`` subcommand, with its own two: ``train`` and ``sample``."""
    p = sub.add_parser("lm", help="train a small GPT on a text file, or sample from one",
                       description="A decoder-only language model on any UTF-8 text: "
                                   "`labformer lm train` and `labformer lm sample`.")
    lm_sub = p.add_subparsers(dest="lm_command", required=True, metavar="{train,sample}")
    t = lm_sub.add_parser("train", parents=parents, help="train on a UTF-8 text file",
                          description="Train a character-level (or BPE) GPT on a UTF-8 text "
                                      "file; works under torchrun (data-parallel, each "
                                      "process taking --batch-size windows of every step).")
    t.add_argument("--text", required=True, metavar="FILE",
                   help="UTF-8 text to learn (the shipped labformer/data/shakespeare.txt, "
                        "or your own); the last --valid-fraction of its lines is held out")
    t.add_argument("--out", required=True, metavar="M.pt",
                   help="checkpoint to write; an existing one is kept unless --resume or "
                        "--overwrite, and a file that is not a labformer checkpoint is never "
                        "replaced (OUT.partial holds the run until it ends, OUT.lock marks "
                        "it, OUT.log records it)")
    t.add_argument("--steps", type=positive, default=2000,
                   help="optimiser steps in all (default 2000); with --resume, the total to "
                        "reach")
    t.add_argument("--stop-after", type=positive, default=None, metavar="N",
                   help="stop after N steps of this run and save a checkpoint that --resume "
                        "continues (default: run to --steps), to train in slices")
    t.add_argument("--tokenizer", choices=("char", "bpe"), default="char",
                   help="char: one token per character (default); bpe: byte-level BPE "
                        "trained on the training text")
    t.add_argument("--vocab-size", type=positive, default=512,
                   help="BPE vocabulary, 256 bytes + merges (default 512; --tokenizer bpe)")
    t.add_argument("--context", type=positive, default=64,
                   help="tokens the model sees at once, the training window (default 64)")
    t.add_argument("--d-model", type=positive, default=128, help="width (default 128)")
    t.add_argument("--layers", type=positive, default=4, help="decoder layers (default 4)")
    t.add_argument("--heads", type=positive, default=4, help="attention heads (default 4)")
    t.add_argument("--block", choices=("modern", "2017"), default="modern",
                   help="modern: Pre-RMSNorm, SwiGLU, rotary positions (default); 2017: "
                        "Post-LN, ReLU, sinusoidal positions")
    t.add_argument("--batch-size", type=positive, default=16,
                   help="windows per step (per process under torchrun; default 16)")
    t.add_argument("--lr", type=_positive_float, default=3e-3,
                   help="peak AdamW learning rate (default 3e-3), after a warm-up of 5%% of "
                        "the steps, then a linear decay to a tenth")
    t.add_argument("--eval-every", type=positive, default=None, metavar="N",
                   help="print the validation loss every N steps (default: 10 times a run)")
    t.add_argument("--valid-fraction", type=_fraction, default=0.1,
                   help="the end of the text held out for validation (default 0.1)")
    t.add_argument("--seed", type=seed, default=0,
                   help="initial weights and batches (default 0)")
    t.add_argument("--resume", action="store_true",
                   help="continue the run in --out (or its side file) up to --steps; the "
                        "model, tokenizer and schedule come from the file")
    t.add_argument("--overwrite", action="store_true",
                   help="replace an existing checkpoint --out once the new run ends")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    s = lm_sub.add_parser("sample", parents=parents, help="continue a prompt",
                          description="Continue a prompt with a model of `labformer lm "
                                      "train`; the same --seed gives the same text.")
    s.add_argument("--checkpoint", required=True, metavar="M.pt",
                   help="a model written by `labformer lm train`")
    s.add_argument("--prompt", default="",
                   help="text to continue (default: a line break, i.e. a fresh start)")
    s.add_argument("--max-new", type=positive, default=500,
                   help="tokens to add (default 500; longer than the model's context is "
                        "fine: it then reads the last half context)")
    s.add_argument("--temperature", type=_positive_float, default=0.8,
                   help="divides the logits: below 1 safer, above 1 wilder (default 0.8)")
    s.add_argument("--top-k", type=positive, default=None,
                   help="draw only from the k most likely tokens (default: all)")
    s.add_argument("--top-p", type=_top_p, default=None,
                   help="draw only from the smallest set of tokens of this mass (default: "
                        "all)")
    s.add_argument("--seed", type=seed, default=None,
                   help="sampling seed: the same seed gives the same text (default: a new "
                        "one each time)")


def run(args: argparse.Namespace) -> int:
    if args.lm_command == "train":
        return train(args)
    return sample(args)


# --- reading the text --------------------------------------------------------------------------


def read_text(path: str) -> str:
    """The text of ``path`` (UTF-8, a BOM dropped, CRLF read as LF); a CLIError in one line
    for a missing, special, binary, non-UTF-8 or empty file."""
    from labformer.train import file_kind

    if os.path.isdir(path):
        raise CLIError(f"--text {path} is a directory: name a UTF-8 text file")
    special = special_file(path)
    if special:
        raise CLIError(f"--text {path} is {special}: name a UTF-8 text file")
    kind = file_kind(path)
    if kind == "missing":
        raise CLIError(f"--text {path}: no such file")
    # ("a binary file": no UTF-8 in its first 4 KiB, which may still be Latin-1 text.)
    if kind is None or kind not in ("a text file", "an empty file", "a binary file"):
        raise CLIError(f"--text {path} is {kind or 'a zip archive (a checkpoint?)'}, not a "
                       f"UTF-8 text file")
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise CLIError(f"cannot read --text {path}: {os_reason(e)}") from None
    if b"\0" in raw[:65536]:
        raise CLIError(f"--text {path} is a binary file (it holds NUL bytes), not a UTF-8 "
                       f"text file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise CLIError(f"--text {path} is not valid UTF-8 (line {line}, byte {e.start}): "
                       f"convert it first, e.g. iconv -f WINDOWS-1252 -t UTF-8 {path} > "
                       f"{path}.utf8") from None
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    if not text.strip():
        raise CLIError(f"--text {path} is empty{'' if not text else ' (only blank space)'}: "
                       f"nothing to learn")
    return text


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- train -------------------------------------------------------------------------------------


def _model_config(args: argparse.Namespace, vocab_size: int) -> Any:
    from labformer.lm import LanguageModelConfig

    if args.d_model % args.heads:
        raise CLIError(f"--d-model {args.d_model} is not a multiple of --heads {args.heads}")
    if (args.d_model // args.heads) % 2:
        raise CLIError(f"--d-model / --heads = {args.d_model // args.heads} is odd: each head "
                       f"needs an even width (rotary and sinusoidal positions turn pairs)")
    switches = dict(LanguageModelConfig.MODERN) if args.block == "modern" else {}
    d_ff = round(8 * args.d_model / 3) if args.block == "modern" else 4 * args.d_model
    return LanguageModelConfig(vocab_size, args.d_model, args.heads, args.layers, d_ff,
                               args.context, **switches)


def _tokenize(args: argparse.Namespace, text: str, train_text: str) -> Any:
    from labformer.data.bpe import BPE
    from labformer.data.text_corpus import CharTokenizer

    if args.tokenizer == "bpe":
        if args.vocab_size < 256:
            raise CLIError(f"--vocab-size {args.vocab_size}: a byte-level BPE has 256 byte "
                           f"tokens and then its merges: choose 256 or more")
        return BPE.train(train_text, args.vocab_size)
    # The alphabet of the whole file (characters only, not text): the held-out part encodes.
    return CharTokenizer.train(text)


def _check_schedule(args: argparse.Namespace) -> None:
    if args.resume and args.overwrite:
        raise CLIError("--resume continues --out and --overwrite replaces it: choose one")


def train(args: argparse.Namespace) -> int:
    import torch

    from labformer.data.text_corpus import split_text
    from labformer.lmtrain import LMTrainConfig, tokenizer_from_state
    from labformer.train import load_checkpoint, setup_distributed

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    out, partial = args.out, runs.partial_path(args.out)
    _check_schedule(args)
    if os.path.exists(out) and os.path.exists(args.text) and os.path.samefile(out, args.text):
        raise CLIError(f"--out {out} is the --text file: it would be replaced by a "
                       f"checkpoint; choose another --out (the file is unchanged)")
    runs.refuse_unsafe_out(out, (), args.overwrite, args.resume)
    text = read_text(args.text)
    digest = _digest(text)
    runs.check_writable(out)

    origin = None
    state: dict[str, Any] | None = None
    if args.resume:
        existed_out = os.path.isfile(out)
        if os.path.isfile(partial) and (not existed_out
                                        or os.path.getmtime(partial) >= os.path.getmtime(out)):
            origin = partial
        elif existed_out:
            origin = out
        if origin is not None:
            state = load_checkpoint(origin)
            if state.get("kind") != LM_KIND:
                raise CLIError(f"{origin} is not a language model of `labformer lm train` (a "
                               f"translator's checkpoint?): --resume continues only one of "
                               f"those; choose another --out")
            if state["text"]["sha256"] != digest:
                raise CLIError(f"--text {args.text} is not the text {origin} was trained on "
                               f"(its checksum differs): resume with that file, or start "
                               f"afresh with --overwrite")
            if int(state["step"]) >= args.steps:
                raise CLIError(f"{origin} has already trained {state['step']} steps: ask for "
                               f"more with --steps (the total), e.g. --steps "
                               f"{int(state['step']) + args.steps}")
        elif rank == 0:
            note(f"labformer: note: --resume, but there is no checkpoint at {out}: starting "
                 f"a fresh run", err=True)

    if state is not None:
        fraction = float(state["text"]["valid_fraction"])
        tokenizer = tokenizer_from_state(state["tokenizer"])
        from labformer.lm import LanguageModelConfig

        config = LanguageModelConfig(**state["config"])
        train_config = LMTrainConfig(**{**state["train"], "steps": args.steps})
        run_seed = int(state["seed"])
    else:
        fraction = args.valid_fraction
        run_seed = args.seed
    train_text, valid_text = split_text(text, fraction)
    if state is None:
        tokenizer = _tokenize(args, text, train_text)
        config = _model_config(args, len(tokenizer))
        train_config = LMTrainConfig(steps=args.steps, batch_size=args.batch_size,
                                     length=args.context, lr=args.lr,
                                     warmup=max(1, args.steps // 20))
    length = train_config.length
    train_ids = torch.tensor(tokenizer.encode(train_text), dtype=torch.long)
    valid_ids = torch.tensor(tokenizer.encode(valid_text), dtype=torch.long)
    if len(train_ids) < length + 2 or len(valid_ids) < length + 1:
        need = int((length + 2) / min(fraction, 1 - fraction)) + 1
        raise CLIError(f"--text {args.text} is too short: {len(text)} characters give "
                       f"{len(train_ids)} training and {len(valid_ids)} held-out tokens, and "
                       f"a window of --context {length} needs {length + 2} and {length + 1}: "
                       f"give about {need} characters or more, or a smaller --context")

    from labformer.data.text_corpus import CharTokenizer

    kind = "characters" if isinstance(tokenizer, CharTokenizer) else "byte-level BPE"
    banner = (f"text: {args.text}, {len(text):,} characters; training {len(train_ids):,} "
              f"tokens, held out {len(valid_ids):,} (the last {fraction:.0%} of the lines)",
              f"tokenizer: {kind}, {len(tokenizer)} tokens; model: {config.num_layers} "
              f"layers, d_model {config.d_model}, {config.num_heads} heads, context "
              f"{config.max_len}",
              f"{train_config.steps} steps of {train_config.batch_size} windows"
              f"{f' x {world} processes' if world > 1 else ''}, peak lr {train_config.lr:g}")
    with runs.sigterm_as_interrupt(rank == 0), \
            runs.lock(out) if rank == 0 else contextlib.nullcontext():
        existed = os.path.isfile(out)
        if rank == 0:
            runs.refuse_unsafe_out(out, (), args.overwrite, args.resume)
            if origin != partial and os.path.exists(partial):
                os.unlink(partial)  # an earlier run's side file (checked: a checkpoint)
        if world > 1:
            import torch.distributed as dist

            setup_distributed("gloo")
            dist.barrier()
        say = (runs.RunLog(runs.log_path(out), header=shlex.join(["labformer", *args.argv]))
               if rank == 0 else runs.RunLog())
        try:
            return _run(args, config, train_config, tokenizer, train_ids, valid_ids, state,
                        origin, existed, banner, say, rank, world, run_seed,
                        {"path": os.path.abspath(args.text), "sha256": digest,
                         "characters": len(text), "valid_fraction": fraction})
        finally:
            say.close()


def _run(args: argparse.Namespace, config: Any, train_config: Any, tokenizer: Any,
         train_ids: Any, valid_ids: Any, state: dict[str, Any] | None, origin: str | None,
         existed: bool, banner: tuple[str, ...], say: runs.RunLog, rank: int, world: int,
         run_seed: int, source: dict[str, Any]) -> int:
    import dataclasses

    import torch

    from labformer.lm import LanguageModel
    from labformer.lmtrain import (
        batch_starts,
        held_out_loss,
        lm_step,
        tokenizer_state,
        windows_at,
    )
    from labformer.train import optimizer_groups, save_checkpoint

    out, partial = args.out, runs.partial_path(args.out)
    torch.manual_seed(run_seed)  # the same initial weights on every rank
    model = LanguageModel.from_config(config)
    opt = torch.optim.AdamW(optimizer_groups(model, train_config.weight_decay),
                            lr=train_config.lr)
    batches = torch.Generator().manual_seed(run_seed + 1)  # the same on every rank
    losses: list[float] = []
    valid: list[list[float]] = []
    step = 0
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        batches.set_state(state["batches"])
        losses, valid, step = list(state["losses"]), [list(v) for v in state["valid"]], \
            int(state["step"])
    steps = train_config.steps
    stop = min(steps, step + args.stop_after) if args.stop_after else steps
    every = args.eval_every or max(1, steps // 10)
    length = train_config.length

    def save(done: int) -> None:
        if rank != 0:
            return
        save_checkpoint(partial, {
            "kind": LM_KIND, "model": model.state_dict(), "optimizer": opt.state_dict(),
            "config": dataclasses.asdict(config), "train": dataclasses.asdict(train_config),
            "tokenizer": tokenizer_state(tokenizer), "step": done, "steps": steps,
            "batches": batches.get_state(), "losses": losses, "valid": valid,
            "text": source, "seed": run_seed, "world": world,
            "batch_size": train_config.batch_size})

    if rank == 0:
        for line in banner:
            say(line)
        if origin is not None:
            say(f"resuming {origin} after step {step} (of {steps})")
        say(f"checkpoint: {out} (written as {partial} until the run ends); log: "
            f"{runs.log_path(out)}")
    bar = None
    if rank == 0 and not args.quiet and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=stop, initial=step, unit="step", dynamic_ncols=True, desc="training",
                   file=sys.stderr, smoothing=0.1)
    start = last_save = time.perf_counter()
    saved = step if state is not None else None

    def report(message: str) -> None:
        if bar is not None:
            bar.write(message, file=sys.stdout)
            say(message, screen=False)
        else:
            say(message)

    try:
        while step < stop:
            starts = batch_starts(batches, len(train_ids), length, train_config.batch_size,
                                  rank, world)
            losses.append(lm_step(model, opt, windows_at(train_ids, starts, length),
                                  train_config, step, world))
            step += 1
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
            if rank == 0 and (step % every == 0 or step == stop):  # (no random draw)
                v = held_out_loss(model, valid_ids, length)
                valid.append([step, v])
                recent = losses[-min(every, len(losses)):]
                report(f"step {step}/{steps}: train loss {sum(recent) / len(recent):.3f}, "
                     f"valid loss {v:.3f} ({time.perf_counter() - start:.0f} s)")
            if step % every == 0 or step == stop or time.perf_counter() - last_save > 60:
                save(step)
                saved, last_save = step, time.perf_counter()
    except KeyboardInterrupt as e:
        if bar is not None:
            bar.close()
        if rank == 0:
            if saved is None or not os.path.isfile(partial):
                kept = f"; {out} is unchanged" if existed else ""
                say(f"labformer: interrupted before the first save: nothing was saved{kept}",
                    err=True)
            elif existed and not args.resume:
                say(f"labformer: interrupted; {out} is unchanged (the model it held is kept); "
                    f"this run's last save, after step {saved} of {steps}, is {partial}; "
                    f"continue with: {runs.resume_command(args.argv)}", err=True)
            else:
                runs.publish(partial, out)
                say(f"labformer: interrupted; the last save, after step {saved} of {steps}, "
                    f"is {out}; continue with: {runs.resume_command(args.argv)}", err=True)
            e.reported = True  # type: ignore[attr-defined]
        raise
    finally:
        if bar is not None:
            bar.close()
    if rank != 0:
        return 0
    if saved != step:
        save(step)
    runs.publish(partial, out)
    took = time.perf_counter() - start
    left = f"; {steps - step} steps left: continue with --resume" if step < steps else ""
    say(f"trained {step} of {steps} steps ({took:.0f} s this run); checkpoint: {out}{left}")
    return 0


# --- sample ------------------------------------------------------------------------------------


def load_lm(path: str) -> tuple[Any, Any, dict[str, Any]]:
    """(model in eval mode, tokenizer, checkpoint) of a ``labformer lm train`` checkpoint."""
    from labformer.lm import LanguageModel, LanguageModelConfig
    from labformer.lmtrain import tokenizer_from_state
    from labformer.train import load_checkpoint

    state = load_checkpoint(path)
    if state.get("kind") != LM_KIND:
        raise CLIError(f"{path} is not a language model of `labformer lm train` (a "
                       f"translator's checkpoint? use labformer translate)")
    model = LanguageModel.from_config(LanguageModelConfig(**state["config"]))
    model.load_state_dict(state["model"])
    return model.eval(), tokenizer_from_state(state["tokenizer"]), state


def sample(args: argparse.Namespace) -> int:
    import torch

    from labformer.data.text_corpus import CharTokenizer
    from labformer.lmtrain import generate

    model, tokenizer, state = load_lm(args.checkpoint)
    if int(state["step"]) < int(state["steps"]):
        note(f"labformer: note: {args.checkpoint} is unfinished (step {state['step']} of "
             f"{state['steps']})", err=True)
    prompt = args.prompt or "\n"
    if isinstance(tokenizer, CharTokenizer) and tokenizer.unknown(prompt):
        missing = " ".join(repr(c) for c in tokenizer.unknown(prompt)[:10])
        raise CLIError(f"the prompt holds character(s) the model never saw in training "
                       f"({missing}): it knows only the {len(tokenizer)} characters of its "
                       f"text")
    ids = tokenizer.encode(prompt)
    generator = torch.Generator()
    if args.seed is None:
        generator.seed()
    else:
        generator.manual_seed(args.seed)
    out = generate(model, ids, args.max_new, temperature=args.temperature, top_k=args.top_k,
                   top_p=args.top_p, generator=generator)
    text = tokenizer.decode(out if args.prompt else out[len(ids):])
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()
    return 0
