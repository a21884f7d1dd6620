"""The toy translator: one model configuration, training it, translating and scoring with it.

The command line (``labformer train / translate / evaluate``) and the book's last chapter both
go through :func:`train_translator` and :class:`Translator`, so they build the same model,
train it the same way and decode the same way.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .data import (
    Corpus,
    SentencePair,
    Vocab,
    build_vocabs,
    detokenize,
    encode_pairs,
    make_batches,
    tokenize,
)
from .decoding import beam_search, greedy_decode
from .metrics import corpus_bleu, corpus_chrf, exact_match
from .train import History, TrainConfig, load_checkpoint, pick_device, train
from .transformer import Transformer, TransformerConfig

__all__ = [
    "BATCH_SIZE",
    "MODEL_DEFAULTS",
    "TRAIN_DEFAULTS",
    "Translation",
    "Translator",
    "build_model",
    "score",
    "train_translator",
]


# The toy translator's sizes: small enough to train on two CPU cores in about two minutes,
# large enough to reach BLEU > 90 on the generated corpus. Pre-LN trains stably at this rate.
MODEL_DEFAULTS: dict[str, Any] = {
    "d_model": 128, "num_heads": 4, "num_encoder_layers": 2, "num_decoder_layers": 2,
    "d_ff": 256, "dropout": 0.1, "max_len": 64, "norm_first": True,
}
TRAIN_DEFAULTS = TrainConfig(epochs=3, lr=2e-3, warmup_steps=200, label_smoothing=0.1,
                             clip_norm=1.0, seed=0)
BATCH_SIZE = 96  # sentence pairs per optimiser step
VALID_SENTENCES = 200  # validation pairs decoded after each epoch for the BLEU curve


def build_model(src_vocab: Vocab, tgt_vocab: Vocab, seed: int = 0, **overrides) -> Transformer:
    """The translator's Transformer (MODEL_DEFAULTS, with overrides) for these vocabularies.

    The special ids (PAD, BOS, EOS, UNK) are the vocabulary's, written into the model's config:
    training and decoding read them from there.
    """
    if src_vocab.special_ids() != tgt_vocab.special_ids():
        raise ValueError("source and target vocabularies must share their special ids")
    config = TransformerConfig(src_vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab),
                               **{**MODEL_DEFAULTS, **tgt_vocab.special_ids(), **overrides})
    torch.manual_seed(seed)  # the same seed gives the same initial weights
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
                 history: History | None = None) -> None:
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
        self.history = history if history is not None else History()

    @property
    def device(self) -> torch.device:
        """Where the model's parameters live."""
        return next(self.model.parameters()).device

    @property
    def max_source_tokens(self) -> int:
        """Longest input, in tokens, the model can read (its positions, less one for EOS)."""
        return self.model.config.max_len - 1

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike, device: str | torch.device = "cpu"
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
        except (TypeError, RuntimeError, KeyError) as e:
            raise ValueError(f"{path}: inconsistent translator checkpoint ({e})") from e
        history = History(**state["history"]) if "history" in state else None
        device = pick_device(device) if isinstance(device, str) else device
        return cls(model.to(device), src_vocab, tgt_vocab, history)

    def unknown_words(self, sentence: str) -> list[str]:
        """The words of ``sentence`` outside the source vocabulary (they are read as UNK)."""
        return self.src_vocab.lookup_unknown(tokenize(sentence))

    def _encode(self, sentences: Sequence[str]) -> list[list[int]]:
        if isinstance(sentences, str) or not sentences:
            raise ValueError("expected a non-empty list of sentences")
        ids = []
        for i, sentence in enumerate(sentences):
            tokens = tokenize(sentence)
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
        if beam is not None and beam < 1:
            raise ValueError(f"beam must be a positive number of hypotheses, got {beam}")
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
            # Each sentence's own limit, so that its output does not depend on its batch.
            limits = [max_len or min(cfg_max, 2 * len(ids[i]) + 10) for i in rows]
            limit = max(limits)
            if beam is None:
                out = greedy_decode(self.model, src, max_len=limit).tolist()
            else:
                hyps = beam_search(self.model, src, beam_size=beam, max_len=limit,
                                   length_penalty=length_penalty)
                out = [h[0].tokens for h in hyps]
            for r, i in enumerate(rows):
                outputs[i] = out[r][:limits[r]]
        return [Translation(s, detokenize(self.tgt_vocab.decode(o)),
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
        """Corpus BLEU, chrF and exact match (0-100) on (source, reference) pairs."""
        if not pairs:
            raise ValueError("no pairs to evaluate")
        hyps = self.translate([s for s, _ in pairs], beam=beam, length_penalty=length_penalty)
        return score(hyps, [t for _, t in pairs])


def train_translator(
    data: Corpus | Sequence[SentencePair],
    valid_pairs: Sequence[SentencePair] | None = None,
    *,
    epochs: int | None = None,
    seed: int | None = None,
    batch_size: int = BATCH_SIZE,
    model_overrides: dict | None = None,
    train_config: TrainConfig | None = None,
    device: str | torch.device = "auto",
    checkpoint: str | os.PathLike | None = None,
    resume: bool = False,
    progress: bool | None = None,
    valid_size: int = VALID_SENTENCES,
    extra_state: dict | None = None,
) -> Translator:
    """Build the vocabularies and the model, train it, return the :class:`Translator`.

    ``data`` is a :class:`Corpus` (its train split is used, its valid split scored after every
    epoch) or a list of (source, target) pairs, with ``valid_pairs`` optional. The first
    ``valid_size`` validation pairs give the per-epoch BLEU in ``translator.history``.
    ``train_config`` defaults to TRAIN_DEFAULTS; ``epochs`` and ``seed`` are shortcuts that
    replace its fields (a value that contradicts a ``train_config`` you pass is an error). The
    seed sets the initial weights, the batches, dropout and the batch order.
    """
    changes: dict[str, Any] = {}
    for name, value in (("epochs", epochs), ("seed", seed)):
        if value is None:
            continue
        if train_config is not None and value != getattr(train_config, name):
            raise ValueError(f"{name}={value} contradicts train_config.{name}="
                             f"{getattr(train_config, name)}: set it in one place")
        changes[name] = value
    config = dataclasses.replace(train_config or TRAIN_DEFAULTS, **changes)  # epochs=0: error
    if isinstance(data, Corpus):
        train_pairs, valid_pairs = data.train, valid_pairs if valid_pairs else data.valid
    else:
        train_pairs = list(data)
    if not train_pairs:
        raise ValueError("no training pairs")
    src_vocab, tgt_vocab = build_vocabs(train_pairs)
    model = build_model(src_vocab, tgt_vocab, seed=config.seed, **(model_overrides or {}))
    too_long = [i for i, (s, t) in enumerate(train_pairs)
                if max(len(tokenize(s)), len(tokenize(t))) >= model.config.max_len]
    if too_long:
        raise ValueError(f"{len(too_long)} training pairs (first: {too_long[0]}) have "
                         f">= {model.config.max_len} tokens, the model's max_len")
    batches = make_batches(encode_pairs(train_pairs, src_vocab, tgt_vocab), batch_size,
                           shuffle=True, seed=config.seed)
    translator = Translator(model, src_vocab, tgt_vocab)
    valid = list(valid_pairs or [])[:valid_size]

    def valid_bleu(_: nn.Module) -> float:
        hyps = translator.translate([s for s, _ in valid])
        return corpus_bleu(hyps, [t for _, t in valid])

    state = {
        "model_config": dataclasses.asdict(model.config),
        "src_vocab": src_vocab.to_dict(),
        "tgt_vocab": tgt_vocab.to_dict(),
        **(extra_state or {}),
    }
    translator.history = train(model, batches, config, valid_fn=valid_bleu if valid else None,
                               checkpoint=checkpoint, resume=resume, extra_state=state,
                               device=device, progress=progress)
    return translator
