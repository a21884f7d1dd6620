"""``labformer translate``: sentences from the command line or standard input, one line each."""

from __future__ import annotations

import argparse
import codecs
import os
import shlex
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from labformer.app.cli.common import (
    DEFAULT_CHECKPOINT,
    MAX_INPUT,
    CLIError,
    beam,
    note,
    positive,
    too_big,
)

if TYPE_CHECKING:
    from labformer.app.carry import Carried, Carry
    from labformer.app.translate import Translator

CHUNK = 100  # lines of a pipe translated together


def add_decoding_options(p: argparse.ArgumentParser) -> None:
    """Options that translate and evaluate share."""
    p.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT,
                   help=f"default {DEFAULT_CHECKPOINT}")
    p.add_argument("--beam", type=beam, default=None,
                   help="beam search with N hypotheses, 1 to 64 (default: greedy)")
    p.add_argument("--device", default="cpu", help="cpu (default), auto, cuda, mps")
    p.add_argument("--no-carry", dest="carry", action="store_false",
                   help="the model's output as it is (default: numbers, times and "
                        "unknown words of the source carried over, case matched)")


def add_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    """The ``translate`` subcommand and its options."""
    text = "translate sentences with a trained checkpoint"
    p = sub.add_parser("translate", help=text, description=text[0].upper() + text[1:] + ".",
                       parents=parents)
    p.add_argument("sentences", nargs="*", metavar="SENTENCE",
                   help="sentence(s) to translate, one argument each (default, or "
                        "'-': one per line from standard input)")
    p.add_argument("--scores", action="store_true",
                   help="print each translation's score (its mean log-probability per "
                        "token) and a tab before it, and a warning for each translation "
                        "that is likely wrong (default off)")
    p.add_argument("--max-length", type=positive, default=None, metavar="N",
                   help="crop each sentence to its first N tokens (default: a sentence "
                        "longer than the model reads is an empty line and a warning; a "
                        "line of several sentences is translated sentence by sentence)")
    add_decoding_options(p)


def load(args: argparse.Namespace) -> Translator:
    """The checkpoint's translator, with a warning when its run did not finish."""
    from labformer.app.translate import Translator

    translator = Translator.from_checkpoint(args.checkpoint, device=args.device)
    warn_unverified(args.checkpoint, translator)
    if translator.unfinished is not None:
        done, planned = translator.unfinished
        # A run's side file (OUT.partial) is continued by naming the run's --out.
        out = str(args.checkpoint).removesuffix(".partial")
        note(f"labformer: warning: {args.checkpoint} is an unfinished run (saved after epoch "
             f"{done} of {planned}): it translates worse than the finished model would; "
             f"finish it with labformer train --out {shlex.quote(out)} --resume (and the "
             f"same options)", err=True)
    return translator


def warn_unverified(path: str | os.PathLike[str], translator: Translator) -> None:
    """A warning for a checkpoint without a checksum of its weights (written before labformer
    stored one): it loads, but a damaged file would not be noticed."""
    if translator.verified is False:
        note(f"labformer: warning: {path} holds no checksum of its weights (it was written by "
             f"an older labformer): it cannot be checked for damage (a model trained by "
             f"this version stores one)", err=True)


def _translate_lines(translator: Translator, carry: Carry, lines: list[str | None], first: int,
                     args: argparse.Namespace, what: str = "line") -> int:
    """Translate and print one line per input line; returns how many lines failed.

    A blank line stays blank, and a line without a letter or digit is printed as it is, with
    a warning. A line that cannot be translated (``None``: not decodable; longer than the
    model reads, unless --max-length crops it; or any other error) prints an empty line and
    a warning with its 1-based number, and the others go on.
    """
    from labformer.app.carry import assess, has_word, split_sentences, translate_carried

    texts = [""] * len(lines)
    scores: list[float | None] = [None] * len(lines)
    failed = 0
    limit = translator.max_source_tokens
    crop = min(args.max_length, limit) if getattr(args, "max_length", None) else None
    todo = []
    for i, line in enumerate(lines):
        if line is None:
            failed += 1
            continue
        if not line.strip():
            continue
        if not has_word(line):
            note(f"labformer: warning: {what} {first + i} holds no word ({line.strip()!r}): "
                 f"not translated, printed as it is", err=True)
            texts[i] = line.strip()
            continue
        # A line of several sentences is translated sentence by sentence (with carry-over):
        # the model's limit applies to each sentence, and --max-length crops each one.
        pieces = split_sentences(line) if carry.enabled else [line]
        sizes = [len(translator.src_text.tokenize(p)) for p in pieces] or [0]
        n, longest = max(sizes), sizes.index(max(sizes)) + 1
        which = f"{what} {first + i}" + (f", sentence {longest} of {len(pieces)}," if
                                         len(pieces) > 1 else "")
        if n > limit and crop is None:
            note(f"labformer: warning: {which} has {n} tokens, but this model reads at most "
                 f"{limit}: not translated (an empty line); --max-length {limit} crops "
                 f"such sentences instead", err=True)
            failed += 1
            continue
        if crop is not None and n > crop:
            cropped = sum(size > crop for size in sizes)
            if len(pieces) == 1:
                note(f"labformer: warning: {what} {first + i} has {n} tokens: cropped to "
                     f"its first {crop}", err=True)
            else:
                note(f"labformer: warning: {what} {first + i}: {cropped} of its "
                     f"{len(pieces)} sentences have more than {crop} tokens: each cropped "
                     f"to its first {crop}", err=True)
        todo.append(i)
    carry.crop = crop

    def run(rows: list[int]) -> list[Carried]:
        return translate_carried(translator, [lines[i] or "" for i in rows], beam=args.beam,
                                 carry=carry)

    results: dict[int, Carried] = {}
    if todo:
        try:
            results = dict(zip(todo, run(todo), strict=True))
        except (ValueError, RuntimeError):  # find the line that fails; the others go on
            for i in todo:
                try:
                    results[i] = run([i])[0]
                except (ValueError, RuntimeError) as e:
                    first_line = (str(e).splitlines() or [type(e).__name__])[0]
                    note(f"labformer: warning: {what} {first + i} could not be "
                         f"translated ({first_line}): an empty line", err=True)
                    failed += 1
    unknown = sorted({w for t in results.values() for w in t.unknown})
    if unknown:
        note(f"labformer: warning: not in the vocabulary, read as <unk>: "
             f"{', '.join(unknown)}", err=True)
    rows = sorted(results) if args.scores else []
    confidence = assess(translator, [results[i] for i in rows]) if rows else []
    for i, value in zip(rows, confidence, strict=True):
        scores[i] = value.score
        if value.flagged:
            note(f"labformer: warning: {what} {first + i} is likely wrong: "
                 f"{'; '.join(value.reasons)}", err=True)
    for i, t in sorted(results.items()):
        texts[i] = t.text
        if t.names:
            note(f"labformer: warning: {what} {first + i}: not in the model's vocabulary, "
                 f"carried over as written (as a name): {', '.join(dict.fromkeys(t.names))}",
                 err=True)
        if t.lost:
            note(f"labformer: warning: {what} {first + i}: not carried over to the "
                 f"translation: {', '.join(t.lost)}", err=True)
        for remark in t.notes:
            note(f"labformer: note: {what} {first + i}: {remark}", err=True)
        if not t.text:
            note(f"labformer: warning: {what} {first + i} translated to nothing (an "
                 f"empty line): the model has not learned to translate it", err=True)
    for text, score in zip(texts, scores, strict=True):
        if args.scores:
            print(f"{'' if score is None else f'{score:.4f}'}\t{text}", flush=True)
        else:
            print(text, flush=True)
    return failed


MAX_LINE = 2**20  # bytes: a line of standard input longer than this is not a sentence


def _stdin_lines() -> Iterator[tuple[str | None, str]]:
    """Standard input a line at a time: (text, or None when the line is not valid UTF-8
    (nor UTF-16 with its byte-order mark), and why)."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # a text stream (a test's StringIO): already decoded
        for line in sys.stdin:
            yield line.rstrip("\r\n"), ""
        return
    first = stream.readline(MAX_LINE + 1)
    if first.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        rest = stream.read(MAX_INPUT + 1 - len(first))
        if len(first) + len(rest) > MAX_INPUT:
            raise too_big("standard input (UTF-16)")
        text = (first + rest).decode("utf-16", errors="replace")
        for line in text.splitlines():
            yield line, ""
        return
    raw = first
    number = 0
    while raw:
        number += 1
        if len(raw) > MAX_LINE:
            raise CLIError(f"standard input: line {number} is longer than {MAX_LINE // 2**10} "
                           f"KiB without a line break, the most labformer reads as one "
                           f"sentence (binary data such as /dev/zero?): stopped there")
        try:
            yield raw.decode("utf-8").removeprefix("\ufeff" if number == 1 else "").rstrip(
                "\r\n"), ""
        except UnicodeDecodeError as e:
            byte = raw[e.start:e.start + 1].hex().upper()
            yield None, f"byte 0x{byte} at position {e.start + 1} (Latin-1 or Windows-1252?)"
        raw = stream.readline(MAX_LINE + 1)


def run(args: argparse.Namespace) -> int:
    """Translate the arguments, or standard input line by line; 1 when a line failed."""
    from labformer.app.carry import Carry

    if args.sentences and args.sentences != ["-"]:
        for i, sentence in enumerate(args.sentences):
            if not sentence.strip():
                raise CLIError(f"sentence {i + 1} is empty: nothing to translate")
        translator = load(args)
        carry = Carry.of(translator, enabled=args.carry)
        failed = _translate_lines(translator, carry, list(args.sentences), 1, args, "sentence")
        return 1 if failed else 0
    translator = load(args)  # standard input: one sentence a line, in chunks for pipes
    carry = Carry.of(translator, enabled=args.carry)
    chunk: list[str | None] = []
    first, failed = 1, 0
    interactive = sys.stdin.isatty()
    for line, why in _stdin_lines():
        if line is None:
            note(f"labformer: error: line {first + len(chunk)} is not valid UTF-8 ({why}): "
                 f"not translated (an empty line); the other lines are", err=True)
        chunk.append(line)
        if interactive or len(chunk) == CHUNK:
            failed += _translate_lines(translator, carry, chunk, first, args)
            first, chunk = first + len(chunk), []
    if chunk:
        failed += _translate_lines(translator, carry, chunk, first, args)
    if failed:
        note(f"labformer: error: {failed} line(s) could not be translated (empty lines in "
             f"the output; the messages above name them)", err=True)
    return 1 if failed else 0
