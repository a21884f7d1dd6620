"""``labformer evaluate``: BLEU, chrF and exact match on a split or a pairs file."""

from __future__ import annotations

import argparse
from typing import Any

from labformer.app.cli.common import (
    CORPUS_PAIRS,
    CORPUS_SEED,
    SPLITS,
    CLIError,
    check_folder_writable,
    positive,
    read_pairs_file,
    refuse_unsafe_text_output,
    write_atomically,
)
from labformer.app.cli.translate import add_decoding_options, load

OUTPUT_MARK = "labformer evaluate"  # what its --output files are marked with


def add_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    """The ``evaluate`` subcommand and its options."""
    text = "BLEU, chrF and exact match on a split or a pairs file"
    p = sub.add_parser("evaluate", help=text, description=text[0].upper() + text[1:] + ".",
                       parents=parents)
    p.add_argument("--split", choices=SPLITS, default="test",
                   help="split of the generated corpus (default test); for a model "
                        "trained on --pairs, valid: its held-out pairs")
    p.add_argument("--output", metavar="FILE",
                   help="write the translations there, one a line (default: not written); "
                        "an existing file is replaced only if evaluate wrote it (it marks its "
                        "files), never an input or any other file")
    p.add_argument("--pairs", metavar="FILE",
                   help="score on this pairs file instead (default: the split)")
    p.add_argument("--limit", type=positive, default=None,
                   help="score only the first N pairs (default all)")
    add_decoding_options(p)


def run(args: argparse.Namespace) -> int:
    """Score the checkpoint and print one line (and the sacreBLEU signature)."""
    from labformer.app.carry import Carry, translate_carried
    from labformer.app.translate import score
    from labformer.data import generate_corpus
    from labformer.train import load_checkpoint

    if args.output:  # before any work: a refused or unwritable --output changes nothing
        refuse_unsafe_text_output(args.output, "--output",
                                  {"--pairs": args.pairs, "--checkpoint": args.checkpoint},
                                  OUTPUT_MARK)
        check_folder_writable(args.output, "--output")
    translator = load(args)
    if args.pairs:
        langs = (translator.src_text.lang, translator.tgt_text.lang)
        lines = read_pairs_file(args, args.pairs, langs)
        pairs, name = [(p.src, p.tgt) for p in lines], args.pairs
    else:
        source = load_checkpoint(args.checkpoint).get("corpus", {})
        if "pairs_file" in source:
            if args.split != "valid" or "valid" not in source:
                held = (" or --split valid for its held-out pairs" if "valid" in source
                        else "")
                raise CLIError(f"{args.checkpoint} was trained on {source['pairs_file']}, not "
                               f"the generated corpus: pass --pairs FILE to evaluate it{held}")
            pairs = [(s, t) for s, t in source["valid"]]
            name = f"held-out pairs of {source.get('valid_file', source['pairs_file'])}"
        else:
            corpus = generate_corpus(num_pairs=source.get("num_pairs", CORPUS_PAIRS),
                                     seed=source.get("seed", CORPUS_SEED))
            pairs, name = getattr(corpus, args.split), f"{args.split} split"
    pairs = pairs[:args.limit]
    if not pairs:
        raise CLIError(f"{name}: no sentence pairs to evaluate")
    carry = Carry.of(translator, enabled=args.carry)
    hyps = [t.text for t in translate_carried(translator, [s for s, _ in pairs],
                                              beam=args.beam, carry=carry)]
    refs = [translator.tgt_text.normalize(t) for _, t in pairs]
    scores = score(hyps, refs)
    if args.output:
        refuse_unsafe_text_output(args.output, "--output",  # again: it may have changed
                                  {"--pairs": args.pairs, "--checkpoint": args.checkpoint},
                                  OUTPUT_MARK)
        write_atomically(args.output, "".join(h + "\n" for h in hyps).encode("utf-8"),
                         "--output", mark=OUTPUT_MARK)
    decoding = f"beam {args.beam}" if args.beam else "greedy"
    carried = "with carry-over" if args.carry else "the model alone (--no-carry)"
    case = "" if translator.cased else " (lower-cased: this model writes lower case)"
    print(f"{name}, {len(pairs)} pairs, {decoding}, {carried}: BLEU {scores['bleu']:.2f}, "
          f"chrF {scores['chrf']:.2f}, exact match {scores['exact']:.1f}%{case}")
    print(f"sacreBLEU signature: {_signature(hyps, refs)}")
    if args.output:
        print(f"translations: {args.output}")
    return 0


def _signature(hyps: list[str], refs: list[str]) -> str:
    from sacrebleu.metrics import BLEU

    bleu = BLEU()
    bleu.corpus_score(hyps, [refs])
    return str(bleu.get_signature())
