"""The toy translator: one model configuration, training it, translating and scoring with it.

The command line (``labformer train / translate / evaluate``) and the book's chapters both go
through :func:`train_translator` and :class:`Translator`, so they build the same model, train it
the same way and decode the same way. ``RECIPES`` names the two ways to train it: "paper", the
book's translator of chapter 11 (``TRAIN_DEFAULTS``: three epochs, the paper's warm-up and
1/sqrt decay, dropout 0.1), and "quick", ``labformer train``'s default (``QUICK_TRAIN``: one
epoch of smaller batches, a linear decay to zero, no dropout), which reaches test BLEU above 97
on the generated corpus in about a third of the CPU time (README).

Text goes through a :class:`~labformer.data.TextCodec` on each side: the Moses tokenizer and
detokenizer (sacremoses) with NFC normalisation for real, cased text, or the generated corpus's
own lower-case tokenizer for a :class:`~labformer.data.Corpus`. The codecs are saved in the
checkpoint, so that translation reads and writes text exactly as training did.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from labformer.data import Corpus, SentencePair, TextCodec, Vocab, make_batches
from labformer.decoding import beam_search, greedy_decode
from labformer.metrics import corpus_bleu, corpus_chrf, exact_match
from labformer.train import (
    History,
    TrainConfig,
    checkpoint_unfinished,
    checkpoint_verified,
    load_checkpoint,
    pick_device,
    planned_schedule,
    train,
)
from labformer.transformer import Transformer, TransformerConfig

__all__ = [
    "BATCH_SIZE",
    "MAX_BEAM",
    "MIN_STEPS",
    "MODEL_DEFAULTS",
    "QUICK_TRAIN",
    "RECIPES",
    "Recipe",
    "TRAIN_DEFAULTS",
    "Translation",
    "Translator",
    "build_model",
    "check_resumable",
    "score",
    "text_codecs",
    "train_translator",
]


# The toy translator's sizes: small enough to train on two CPU cores in about two minutes,
# large enough to reach BLEU > 90 on the generated corpus. Pre-LN trains stably at this rate.
MODEL_DEFAULTS: dict[str, Any] = {
    "d_model": 128, "num_heads": 4, "num_encoder_layers": 2, "num_decoder_layers": 2,
    "d_ff": 256, "dropout": 0.1, "max_len": 64, "norm_first": True,
}
# Training length in optimiser steps: at least MIN_STEPS, in whole epochs, 3 at least. On the
# generated corpus 3 epochs are 876 steps already; a 300-pair file (3 batches an epoch) gets
# 267 epochs. The warm-up is 200 steps, or a quarter of a shorter run.
MIN_STEPS = 800
TRAIN_DEFAULTS = TrainConfig(epochs=3, lr=2e-3, warmup_steps=200, label_smoothing=0.1,
                             clip_norm=1.0, seed=0, min_steps=MIN_STEPS, max_warmup_share=0.25)
BATCH_SIZE = 96  # sentence pairs per optimiser step
# `labformer train`'s default, chosen on validation BLEU among shorter schedules
# (book/sweeps/translator_budget.py, README): the paper's 1/sqrt decay keeps the rate high to
# the end of a short run; a linear decay to zero anneals it instead, and without dropout a step
# costs about a fifth less CPU. One epoch of 48-pair batches on the generated corpus (584
# steps); a small file gets 500 steps.
QUICK_TRAIN = TrainConfig(epochs=1, lr=4e-3, warmup_steps=50, decay="linear",
                          label_smoothing=0.1, clip_norm=1.0, seed=0, min_steps=500,
                          max_warmup_share=0.25)
QUICK_BATCH = 48


@dataclass(frozen=True)
class Recipe:
    """One way to train the translator: the schedule, the model's changes to MODEL_DEFAULTS and
    the batch size."""

    train: TrainConfig
    model: dict[str, Any]
    batch_size: int

    def summary(self) -> str:
        """One line, e.g. for ``labformer train --help`` and its banner."""
        t = self.train
        decay = "1/sqrt" if t.decay == "rsqrt" else t.decay
        dropout = {**MODEL_DEFAULTS, **self.model}["dropout"]
        epochs = f"{t.epochs} epoch{'s' if t.epochs != 1 else ''}"
        return (f"{epochs} ({t.min_steps} steps at least), warm-up {t.warmup_steps}, "
                f"{decay} decay from {t.lr:g}, dropout {dropout:g}, batch {self.batch_size}")


RECIPES: dict[str, Recipe] = {
    "quick": Recipe(QUICK_TRAIN, {"dropout": 0.0}, QUICK_BATCH),
    "paper": Recipe(TRAIN_DEFAULTS, {}, BATCH_SIZE),  # the book's translator (chapter 11)
}
VALID_SENTENCES = 200  # validation pairs decoded after each epoch for the BLEU curve
VALID_POINTS = 20  # at most about this many validation scores in a long run
MAX_BEAM = 64  # hypotheses: a wider beam costs memory and time and does not translate better
BEAM_ROWS = 1024  # sentences x hypotheses decoded at once with beam search


def build_model(src_vocab: Vocab, tgt_vocab: Vocab, seed: int = 0, **overrides: Any
                ) -> Transformer:
    """The translator's Transformer (MODEL_DEFAULTS, with overrides) for these vocabularies.

    The special ids (PAD, BOS, EOS, UNK) are the vocabulary's, written into the model's config:
    training and decoding read them from there.
    """
    if src_vocab.special_ids() != tgt_vocab.special_ids():
        raise ValueError("source and target vocabularies must share their special ids")
    config = TransformerConfig(src_vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab),
                               **{**MODEL_DEFAULTS, **tgt_vocab.special_ids(), **overrides})
    # The same seed gives the same initial weights; the caller's random stream is left as it was.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return Transformer(config)


def score(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """Corpus BLEU, chrF and exact match (all 0-100) of hypotheses against references."""
    return {"bleu": corpus_bleu(hypotheses, references),
            "chrf": corpus_chrf(hypotheses, references),
            "exact": exact_match(hypotheses, references)}


@dataclass(frozen=True)
class Translation:
    """One translated sentence, and the source words the model did not know (read as UNK)."""

    source: str
    text: str
    unknown: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.text


class Translator:
    """A trained Transformer with its source and target vocabularies."""

    def __init__(self, model: Transformer, src_vocab: Vocab, tgt_vocab: Vocab,
                 history: History | None = None, *, src_text: TextCodec | None = None,
                 tgt_text: TextCodec | None = None) -> None:
        """``src_text``/``tgt_text``: how text becomes tokens and back (default: the generated
        corpus's lower-case word tokenizer, French -> English)."""
        cfg = model.config
        if cfg.src_vocab_size != len(src_vocab) or cfg.tgt_vocab_size != len(tgt_vocab):
            raise ValueError(f"vocabulary sizes {len(src_vocab)}, {len(tgt_vocab)} do not match "
                             f"the model's {cfg.src_vocab_size}, {cfg.tgt_vocab_size}")
        for vocab in (src_vocab, tgt_vocab):
            for name, value in vocab.special_ids().items():
                if getattr(cfg, name) != value:
                    raise ValueError(f"the model's {name} is {getattr(cfg, name)}, the "
                                     f"vocabulary's {value}")
        self.model = model.eval()
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.src_text = src_text or TextCodec("fr", "words")
        self.tgt_text = tgt_text or TextCodec("en", "words")
        self.history = history if history is not None else History()
        # (epochs saved, epochs planned) of a checkpoint whose run stopped before its end.
        self.unfinished: tuple[int, int] | None = None
        # Whether the checkpoint it came from held a checksum of its weights (and so was
        # checked on loading); None for a translator that was not loaded from a file.
        self.verified: bool | None = None

    @property
    def device(self) -> torch.device:
        """Where the model's parameters live."""
        return next(self.model.parameters()).device

    @property
    def max_source_tokens(self) -> int:
        """Longest input, in tokens, the model can read (its positions, less one for EOS)."""
        return self.model.config.max_len - 1

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike[str], device: str | torch.device = "cpu"
                        ) -> Translator:
        """Load a checkpoint written by :func:`train_translator` (or ``labformer train``)."""
        state = load_checkpoint(path, map_location="cpu")
        missing = [k for k in ("model", "model_config", "src_vocab", "tgt_vocab")
                   if k not in state]
        if missing:
            raise ValueError(f"{path} is a labformer checkpoint but not a translator's: "
                             f"missing {', '.join(missing)}")
        try:
            model = Transformer(TransformerConfig(**state["model_config"]))
            model.load_state_dict(state["model"])
            src_vocab = Vocab.from_dict(state["src_vocab"])
            tgt_vocab = Vocab.from_dict(state["tgt_vocab"])
            # Files of an earlier version hold no codecs: they were trained on the corpus.
            src_text = TextCodec.from_dict(state.get("src_text", {"lang": "fr", "kind": "words"}))
            tgt_text = TextCodec.from_dict(state.get("tgt_text", {"lang": "en", "kind": "words"}))
        except (TypeError, RuntimeError, KeyError, ValueError) as e:
            raise ValueError(f"{path}: inconsistent translator checkpoint "
                             f"({_first_line(e)})") from None
        history = History.from_dict(state["history"]) if "history" in state else None
        device = pick_device(device) if isinstance(device, str) else device
        translator = cls(model.to(device), src_vocab, tgt_vocab, history, src_text=src_text,
                         tgt_text=tgt_text)
        translator.unfinished = checkpoint_unfinished(state)
        translator.verified = checkpoint_verified(state)
        return translator

    def checkpoint_state(self) -> dict[str, Any]:
        """What identifies this translator's data and model in a checkpoint (no weights)."""
        return {"model_config": dataclasses.asdict(self.model.config),
                "src_vocab": self.src_vocab.to_dict(), "tgt_vocab": self.tgt_vocab.to_dict(),
                "src_text": self.src_text.to_dict(), "tgt_text": self.tgt_text.to_dict()}

    def unknown_words(self, sentence: str) -> list[str]:
        """The words of ``sentence`` outside the source vocabulary (they are read as UNK)."""
        return self.src_vocab.lookup_unknown(self.src_text.tokenize(sentence))

    def _encode(self, sentences: Sequence[str]) -> list[list[int]]:
        if isinstance(sentences, str) or not sentences:
            raise ValueError("expected a non-empty list of sentences")
        ids = []
        for i, sentence in enumerate(sentences):
            tokens = self.src_text.tokenize(sentence)
            if not tokens:
                raise ValueError(f"sentence {i} is empty: {sentence!r}")
            if len(tokens) > self.max_source_tokens:
                raise ValueError(f"sentence {i} has {len(tokens)} tokens, but this model reads "
                                 f"at most {self.max_source_tokens} (its max_len is "
                                 f"{self.model.config.max_len}, EOS included)")
            ids.append(self.src_vocab.encode(tokens))  # ends with EOS
        return ids

    @torch.no_grad()
    def translate_detailed(self, sentences: Sequence[str], beam: int | None = None,
                           max_len: int | None = None, length_penalty: float = 0.0,
                           batch_size: int = 200) -> list[Translation]:
        """Translate each sentence: greedy (beam=None) or beam search with ``beam`` hypotheses.

        max_len caps the output tokens (default: twice the input's tokens plus 12, within the
        model's positions). Unknown source words become UNK, listed in ``Translation.unknown``.
        """
        ids = self._encode(sentences)
        cfg_max = self.model.config.max_len
        if max_len is not None and not 1 <= max_len <= cfg_max:
            raise ValueError(f"max_len must be in [1, {cfg_max}] for this model, got {max_len}")
        if beam is not None and not 1 <= beam <= MAX_BEAM:
            raise ValueError(f"beam must be between 1 and {MAX_BEAM} hypotheses, got {beam}")
        if beam is not None:  # a batch of sentences x hypotheses that fits in memory
            batch_size = max(1, min(batch_size, BEAM_ROWS // beam))
        self.model.eval()
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # similar lengths together
        outputs: list[list[int]] = [[] for _ in ids]
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            src = torch.full((len(rows), max(len(ids[i]) for i in rows)),
                             self.model.config.pad_id, dtype=torch.long)
            for r, i in enumerate(rows):
                src[r, :len(ids[i])] = torch.tensor(ids[i])
            src = src.to(self.device)  # (B, S)
            # Each sentence's own limit, so that its output does not depend on its batch:
            # greedy rows are independent (cut to the limit), beam search takes one per row.
            limits = [max_len or min(cfg_max, 2 * len(ids[i]) + 10) for i in rows]
            if beam is None:
                out = greedy_decode(self.model, src, max_len=max(limits)).tolist()
            else:
                hyps = beam_search(self.model, src, beam_size=beam, max_len=limits,
                                   length_penalty=length_penalty)
                out = [h[0].tokens for h in hyps]
            for r, i in enumerate(rows):
                outputs[i] = out[r][:limits[r]]
        return [Translation(s, self.tgt_text.detokenize(self.tgt_vocab.decode(o)),
                            tuple(self.unknown_words(s)))
                for s, o in zip(sentences, outputs, strict=True)]

    def translate(self, sentences: str | Sequence[str], beam: int | None = None,
                  max_len: int | None = None, length_penalty: float = 0.0
                  ) -> str | list[str]:
        """Translated text: a string for a string, a list for a list of sentences."""
        batch = [sentences] if isinstance(sentences, str) else sentences
        texts = [t.text for t in self.translate_detailed(batch, beam, max_len, length_penalty)]
        return texts[0] if isinstance(sentences, str) else texts

    def evaluate(self, pairs: Sequence[SentencePair], beam: int | None = None,
                 length_penalty: float = 0.0) -> dict[str, float]:
        """Corpus BLEU, chrF and exact match (0-100) on (source, reference) pairs.

        The detokenised output is scored against the references read as training read its
        targets (NFC, ASCII apostrophes): cased, unless the model was trained on lower case.
        """
        if not pairs:
            raise ValueError("no pairs to evaluate")
        hyps = self.translate([s for s, _ in pairs], beam=beam, length_penalty=length_penalty)
        return score(hyps, [self.tgt_text.normalize(t) for _, t in pairs])

    @property
    def cased(self) -> bool:
        """Whether the output keeps case (False for a model trained on lower-case targets)."""
        return self.tgt_text.kind != "words" and not self.tgt_text.lowercase


def _first_line(error: Exception) -> str:
    """An error's first line, and how many more it had: load_state_dict lists every
    mismatched tensor, dozens of lines for a checkpoint of another configuration."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    if lines[0].startswith("Error(s) in loading state_dict") and len(lines) > 1:
        mismatches = [line for line in lines[1:] if line.startswith(
            ("size mismatch", "Missing", "Unexpected"))]
        first = (mismatches or lines[1:])[0]
        more = f"; {len(mismatches) - 1} more like it" if len(mismatches) > 1 else ""
        return f"the weights do not fit its model configuration: {first[:160]}{more}"
    return lines[0][:200]


def text_codecs(sources: Sequence[str], src_lang: str = "fr", tgt_lang: str = "en",
                tokenizer: str = "moses") -> tuple[TextCodec, TextCodec]:
    """The source and target codecs for training sentences ``sources``.

    The source side folds case when every training source is lower-case (as in the generated
    corpus), so that a capitalised input still finds its words; the target keeps its case.
    """
    lower = all(s == s.lower() for s in sources)
    return (TextCodec(src_lang, tokenizer, lowercase=lower and tokenizer == "moses"),
            TextCodec(tgt_lang, tokenizer))


def _same_entry(key: str, saved: Any, value: Any) -> bool:
    """Whether a checkpoint entry matches the new run's; configurations compare as
    TransformerConfig, so a file written before a field existed (or with the old boolean
    ``tie_embeddings``) still matches the configuration it stands for."""
    if key != "model_config":
        return bool(saved == value)
    try:
        return TransformerConfig(**saved) == TransformerConfig(**value)
    except (TypeError, ValueError):
        return False


def check_resumable(checkpoint: str | os.PathLike[str], expected: dict[str, Any]) -> None:
    """ValueError unless ``checkpoint`` was trained on the same data, model and settings.

    ``expected``: the entries of the new run's checkpoint state (vocabularies, configuration,
    codecs, corpus description); each present in the file must be equal.
    """
    state = load_checkpoint(checkpoint)
    # In this order: the most telling difference first (other data changes the vocabulary,
    # which changes the model's configuration).
    labels = {"corpus": "training data", "src_text": "source tokenizer",
              "tgt_text": "target tokenizer", "src_vocab": "source vocabulary",
              "tgt_vocab": "target vocabulary", "model_config": "model configuration"}
    for key in sorted(expected, key=lambda k: list(labels).index(k) if k in labels else -1):
        value = expected[key]
        if key != "train_config" and key in state and not _same_entry(key, state[key], value):
            what = labels.get(key, key)
            if key.endswith("vocab"):
                what += (f": {len(state[key].get('tokens', []))} words in the file, "
                         f"{len(value['tokens'])} in this data")
            if key == "model_config":
                what += "; on the command line, resume with the file's --recipe"
            raise ValueError(f"{checkpoint} was trained on other data or settings (its "
                             f"{what} differs): write to another --out, or train afresh "
                             f"without --resume")
    saved = state.get("train_config", {})
    for key in ("lr", "warmup_steps", "decay", "label_smoothing", "weight_decay", "clip_norm",
                "seed"):
        if key in saved and key in expected.get("train_config", {}) \
                and saved[key] != expected["train_config"][key]:
            raise ValueError(f"{checkpoint} was trained with {key}={saved[key]}, this run has "
                             f"{expected['train_config'][key]}: resume with the same "
                             f"settings (on the command line, the same --recipe)")


def train_translator(
    data: Corpus | Sequence[SentencePair],
    valid_pairs: Sequence[SentencePair] | None = None,
    *,
    epochs: int | None = None,
    seed: int | None = None,
    batch_size: int = BATCH_SIZE,
    model_overrides: dict[str, Any] | None = None,
    train_config: TrainConfig | None = None,
    device: str | torch.device = "auto",
    checkpoint: str | os.PathLike[str] | None = None,
    resume: bool = False,
    progress: bool | None = None,
    valid_size: int = VALID_SENTENCES,
    extra_state: dict[str, Any] | None = None,
    src_lang: str = "fr",
    tgt_lang: str = "en",
    tokenizer: str | None = None,
    on_epoch: Any = None,
    on_step: Any = None,
    save_every: float = 0.0,
) -> Translator:
    """Build the vocabularies and the model, train it, return the :class:`Translator`.

    ``data`` is a :class:`Corpus` (its train split is used, its valid split scored after every
    epoch) or a list of (source, target) pairs, with ``valid_pairs`` optional. The first
    ``valid_size`` validation pairs give the validation BLEU in ``translator.history``.
    ``train_config`` defaults to TRAIN_DEFAULTS: at least MIN_STEPS optimiser steps, in whole
    epochs (3 at least). ``epochs`` and ``seed`` are shortcuts that replace its fields; an
    explicit ``epochs`` means exactly that many epochs (a value that contradicts a
    ``train_config`` you pass is an error). The seed sets the initial weights, the batches,
    dropout and the batch order.

    ``tokenizer``: "moses" (real, cased text: NFC, sacremoses) or "words" (the generated
    corpus's lower-case tokenizer); None picks "words" for a Corpus, "moses" otherwise.
    ``src_lang``/``tgt_lang`` choose Moses's language rules. Sentence pairs too long for the
    model, in training or validation, are an error before any step. With ``resume`` and an
    existing ``checkpoint``, the file must have been trained on the same data and model.
    ``on_epoch(epoch, epochs, history)`` is called after each epoch, ``on_step(step, lr, loss)``
    after each optimiser step (see :func:`train`). ``save_every``: seconds between two saves
    of ``checkpoint`` (0: after every epoch; the first and the last epoch are always saved).
    """
    changes: dict[str, Any] = {}
    for name, value in (("epochs", epochs), ("seed", seed)):
        if value is None:
            continue
        if train_config is not None and value != getattr(train_config, name):
            raise ValueError(f"{name}={value} contradicts train_config.{name}="
                             f"{getattr(train_config, name)}: set it in one place")
        changes[name] = value
    if epochs is not None and train_config is None:
        changes["min_steps"] = 0  # epochs=N: exactly N passes
    config = dataclasses.replace(train_config or TRAIN_DEFAULTS, **changes)  # epochs=0: error
    if isinstance(data, Corpus):
        train_pairs, valid_pairs = data.train, valid_pairs if valid_pairs else data.valid
    else:
        train_pairs = list(data)
    if not train_pairs:
        raise ValueError("no training pairs")
    kind = tokenizer or ("words" if isinstance(data, Corpus) else "moses")
    src_text, tgt_text = text_codecs([s for s, _ in train_pairs], src_lang, tgt_lang, kind)
    src_tokens = [src_text.tokenize(s) for s, _ in train_pairs]  # each sentence read once
    tgt_tokens = [tgt_text.tokenize(t) for _, t in train_pairs]
    src_vocab, tgt_vocab = Vocab.build(src_tokens), Vocab.build(tgt_tokens)
    model = build_model(src_vocab, tgt_vocab, seed=config.seed, **(model_overrides or {}))
    max_len = model.config.max_len
    too_long = [i for i, (s, t) in enumerate(zip(src_tokens, tgt_tokens, strict=True))
                if max(len(s), len(t)) >= max_len]
    if too_long:
        raise ValueError(f"{len(too_long)} training pairs (first: {too_long[0]}) have "
                         f">= {max_len} tokens, the model's max_len")
    valid = list(valid_pairs or [])[:valid_size]
    too_long = [i for i, (s, _) in enumerate(valid) if len(src_text.tokenize(s)) >= max_len]
    if too_long:
        raise ValueError(f"{len(too_long)} validation pairs (first: {too_long[0]}) have "
                         f">= {max_len} source tokens, the model's max_len")
    ids = [(src_vocab.encode(s), tgt_vocab.encode(t))
           for s, t in zip(src_tokens, tgt_tokens, strict=True)]
    batches = make_batches(ids, batch_size, shuffle=True, seed=config.seed)
    translator = Translator(model, src_vocab, tgt_vocab, src_text=src_text, tgt_text=tgt_text)

    def valid_bleu(_: nn.Module) -> float:
        hyps = translator.translate([s for s, _ in valid])
        return corpus_bleu(hyps, [tgt_text.normalize(t) for _, t in valid])

    state = {**translator.checkpoint_state(), **(extra_state or {})}
    if resume and checkpoint is not None and os.path.isfile(checkpoint):
        check_resumable(checkpoint, {**state, "train_config": dataclasses.asdict(config)})
    world = int(os.environ.get("WORLD_SIZE", "1"))
    planned, _ = planned_schedule(config, max(1, len(batches) // world))
    translator.history = train(model, batches, config, valid_fn=valid_bleu if valid else None,
                               checkpoint=checkpoint, resume=resume, extra_state=state,
                               device=device, progress=progress,
                               valid_every=max(1, math.ceil(planned / VALID_POINTS)),
                               on_epoch=on_epoch, on_step=on_step, save_every=save_every)
    return translator
