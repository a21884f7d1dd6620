"""Train and measure the decoder-only language model of the chapter "From the translator to GPT".

The text is the English side of the book's generated corpus, one sentence per line, cut into
byte-level BPE tokens (:class:`~labformer.data.bpe.BPE`) and read as one running stream. A
training step takes a batch of windows of ``length + 1`` tokens at random places in that
stream and asks the model for every next token (:meth:`LanguageModel.loss`). Held-out text is
scored on consecutive windows that do not overlap, so every held-out token is counted once.

* :func:`text_data`: the corpus, the tokenizer and the three token streams;
* :func:`train_language_model`: AdamW with a linear warm-up and decay, a progress bar;
* :func:`perplexity`: exp of the mean next-token cross-entropy on held-out text;
* :func:`ngram_perplexity`: the unigram and bigram baselines on the same tokens;
* :data:`BLOCKS` and :func:`block_config`: the 2017 block and each modern switch, for the
  chapter and for ``tests/lm_sweep.py``, which trains them all for seeds fixed in advance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .data.bpe import BPE
from .lm import LanguageModel, LanguageModelConfig

__all__ = ["TextData", "text_data", "train_language_model", "perplexity", "ngram_perplexity",
           "BLOCKS", "block_config", "LMTrainConfig"]


@dataclass(frozen=True)
class TextData:
    """A tokenizer and the token streams of the train, validation and test sentences."""

    bpe: BPE
    train: Tensor  # (N_train,) int64 token ids, the sentences joined by "\n"
    valid: Tensor  # (N_valid,) for choosing the bigram's weight, never for training
    test: Tensor  # (N_test,) held-out text, scored once
    sentences: tuple[list[str], list[str], list[str]]  # the same, as text

    @property
    def vocab_size(self) -> int:
        return len(self.bpe)


def _stream(bpe: BPE, sentences: Sequence[str]) -> Tensor:
    ids: list[int] = []
    for sentence in sentences:
        ids += bpe.encode(sentence + "\n")
    return torch.tensor(ids, dtype=torch.long)


def text_data(num_sentences: int = 6000, vocab_size: int = 456, seed: int = 0,
              held_out: int = 500) -> TextData:
    """The English sentences of ``generate_corpus(num_sentences, seed)``: ``held_out`` each for
    validation and test, the rest for training; a BPE of ``vocab_size`` tokens trained on the
    training sentences only."""
    from .data.corpus import generate_corpus

    if held_out < 1 or num_sentences <= 2 * held_out:
        raise ValueError(f"need 1 <= held_out < num_sentences / 2, got held_out={held_out}, "
                         f"num_sentences={num_sentences}")
    corpus = generate_corpus(num_pairs=num_sentences, seed=seed, valid_size=held_out,
                             test_size=held_out, num_heldout=0)
    train, valid, test = ([english for _, english in split]
                          for split in (corpus.train, corpus.valid, corpus.test))
    bpe = BPE.train(train, vocab_size)
    return TextData(bpe, _stream(bpe, train), _stream(bpe, valid), _stream(bpe, test),
                    (train, valid, test))


@dataclass(frozen=True)
class LMTrainConfig:
    """How :func:`train_language_model` trains: the same for every block compared."""

    steps: int = 400
    batch_size: int = 32
    length: int = 32  # tokens each window predicts (the window holds length + 1)
    lr: float = 3e-3  # peak learning rate of AdamW
    warmup: int = 40  # steps of linear warm-up, then linear decay to 10 % at the last step
    weight_decay: float = 0.01
    clip: float = 1.0  # gradient-norm clipping

    def lr_at(self, step: int) -> float:
        """The learning rate of step ``step`` (0-based)."""
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        done = (step - self.warmup) / max(1, self.steps - self.warmup)
        return self.lr * (1.0 - 0.9 * done)


def _windows(stream: Tensor, length: int) -> Tensor:
    """Consecutive windows of ``length + 1`` tokens that overlap by one: (n, length + 1)."""
    n = (len(stream) - 1) // length
    if n < 1:
        raise ValueError(f"a stream of {len(stream)} tokens holds no window of {length + 1}")
    return stream[: n * length + 1].unfold(0, length + 1, length)


def train_language_model(config: LanguageModelConfig, data: TextData,
                         train: LMTrainConfig | None = None, *, seed: int = 0,
                         progress: bool | None = None) -> tuple[LanguageModel, list[float]]:
    """A model of ``config`` trained on ``data.train``; returns it (in eval mode) and the loss
    of every step. ``seed`` fixes the initial weights and the batches."""
    from tqdm import tqdm

    train = train or LMTrainConfig()
    if config.max_len < train.length:
        raise ValueError(f"windows of {train.length} tokens need max_len >= {train.length}, "
                         f"got {config.max_len}")
    torch.manual_seed(seed)
    model = LanguageModel.from_config(config)
    batches = torch.Generator().manual_seed(seed + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=train.lr, weight_decay=train.weight_decay)
    last = len(data.train) - train.length - 1
    losses: list[float] = []
    model.train()
    bar = tqdm(range(train.steps), desc="training", disable=progress is False, leave=False,
               mininterval=1.0)
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = train.lr_at(step)
        starts = torch.randint(0, last + 1, (train.batch_size,), generator=batches)
        windows = torch.stack([data.train[s:s + train.length + 1] for s in starts.tolist()])
        loss = model.loss(windows)  # (B, length + 1) -> mean next-token loss
        opt.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(model.parameters(), train.clip)
        opt.step()
        losses.append(float(loss.detach()))
        if not math.isfinite(losses[-1]):
            raise FloatingPointError(f"the loss became {losses[-1]} at step {step}")
    bar.close()
    return model.eval(), losses


@torch.no_grad()
def perplexity(model: LanguageModel, stream: Tensor, length: int = 32) -> float:
    """exp(mean next-token cross-entropy) over ``stream``, read in consecutive windows of
    ``length`` predictions (each token after the first predicted once)."""
    windows = _windows(stream, length)  # (n, length + 1)
    model.eval()
    total = 0.0
    for chunk in torch.split(windows, 256):
        total += float(model.loss(chunk)) * chunk.shape[0]
    return math.exp(total / windows.shape[0])


def ngram_perplexity(train: Tensor, test: Tensor, vocab_size: int, order: int,
                     weight: float = 0.9) -> float:
    """Perplexity on ``test`` of a unigram (``order=1``, add-one smoothing) or bigram
    (``order=2``: ``weight`` * the bigram's relative frequency + (1 - ``weight``) * the
    unigram) model counted on ``train``. Scores the same predictions as :func:`perplexity`:
    every token of ``test`` after the first."""
    if order not in (1, 2) or not 0.0 <= weight < 1.0:
        raise ValueError(f"order must be 1 or 2 and 0 <= weight < 1, got {order}, {weight}")
    counts = torch.bincount(train, minlength=vocab_size).double()
    unigram = (counts + 1.0) / (counts.sum() + vocab_size)  # (V,)
    prev, nxt = test[:-1], test[1:]
    if order == 1:
        p = unigram[nxt]
    else:
        pairs = torch.zeros(vocab_size, vocab_size, dtype=torch.float64)
        pairs.index_put_((train[:-1], train[1:]), torch.ones(len(train) - 1,
                                                            dtype=torch.float64),
                         accumulate=True)
        rows = pairs.sum(1, keepdim=True)  # (V, 1)
        relative = torch.where(rows > 0, pairs / rows.clamp_min(1.0), unigram)  # (V, V)
        p = weight * relative[prev, nxt] + (1.0 - weight) * unigram[nxt]
    return float(torch.exp(-torch.log(p).mean()))


#: The blocks compared: the 2017 block, each modern part switched on alone, and all of them
#: together (LLaMA-style, with two key/value heads for four query heads). SwiGLU has three
#: matrices where ReLU's network has two, so its hidden width is two thirds of d_ff, which
#: keeps the parameter count (as LLaMA does).
BLOCKS: dict[str, dict[str, Any]] = {
    "2017": {},
    "Pre-LN": {"norm_first": True},
    "RMSNorm": {"norm": "rmsnorm"},
    "SwiGLU": {"ffn": "swiglu"},
    "RoPE": {"positional": "rope"},
    "GQA": {"num_kv_heads": 2},
    "modern": {**LanguageModelConfig.MODERN, "num_kv_heads": 2},
}


def block_config(name: str, vocab_size: int, *, d_model: int = 64, num_heads: int = 4,
                 num_layers: int = 2, d_ff: int = 128, max_len: int = 64) -> LanguageModelConfig:
    """The :class:`LanguageModelConfig` of block ``name`` (a key of :data:`BLOCKS`)."""
    if name not in BLOCKS:
        raise ValueError(f"no block {name!r}: the blocks are {', '.join(BLOCKS)}")
    switches = dict(BLOCKS[name])
    width = round(2 * d_ff / 3) if switches.get("ffn") == "swiglu" else d_ff
    return LanguageModelConfig(vocab_size, d_model, num_heads, num_layers, width, max_len,
                               **switches)
