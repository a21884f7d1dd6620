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
  chapter and for ``book/sweeps/lm_sweep.py``, which trains them all for seeds fixed in advance;
* for ``labformer lm`` (any text, one step at a time, resumable, data-parallel):
  :func:`batch_starts`, :func:`windows_at`, :func:`lm_step`, :func:`held_out_loss`,
  :func:`generate`, and :func:`tokenizer_state` / :func:`tokenizer_from_state`.
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
           "BLOCKS", "block_config", "LMTrainConfig", "tokenizer_state", "tokenizer_from_state",
           "batch_starts", "windows_at", "lm_step", "held_out_loss", "generate"]


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


# --- Training on any text: what `labformer lm train` runs, one step at a time -------------------


def tokenizer_state(tokenizer: BPE | Any) -> dict[str, Any]:
    """What a checkpoint stores of a tokenizer: ``{"kind": "bpe", "merges": [[a, b], ...]}`` or
    ``{"kind": "char", "chars": "..."}`` (a :class:`~labformer.data.text_corpus.CharTokenizer`)."""
    from .data.text_corpus import CharTokenizer

    if isinstance(tokenizer, BPE):
        return {"kind": "bpe", "merges": [list(pair) for pair in tokenizer.merges]}
    if isinstance(tokenizer, CharTokenizer):
        return {"kind": "char", "chars": "".join(tokenizer.chars)}
    raise TypeError(f"no stored form for a {type(tokenizer).__name__}")


def tokenizer_from_state(state: dict[str, Any]) -> Any:
    """The tokenizer that :func:`tokenizer_state` stored (a BPE or a CharTokenizer)."""
    from .data.text_corpus import CharTokenizer

    kind = state.get("kind") if isinstance(state, dict) else None
    if kind == "bpe":
        return BPE((int(a), int(b)) for a, b in state["merges"])
    if kind == "char":
        return CharTokenizer(state["chars"])
    raise ValueError(f"unknown tokenizer {kind!r} (this version reads 'bpe' and 'char')")


def batch_starts(generator: torch.Generator, stream_len: int, length: int, batch_size: int,
                 rank: int = 0, world: int = 1) -> list[int]:
    """Where this rank's ``batch_size`` windows of ``length + 1`` tokens start: every rank
    draws the starts of the whole batch (``world * batch_size``, from generators in the same
    state) and keeps its own slice, so ``world`` processes see, together, the windows that one
    process with ``world`` times the batch would see."""
    last = stream_len - length - 1
    if last < 0:
        raise ValueError(f"a stream of {stream_len} tokens holds no window of {length + 1}")
    starts = torch.randint(0, last + 1, (world * batch_size,), generator=generator).tolist()
    return starts[rank * batch_size:(rank + 1) * batch_size]


def windows_at(stream: Tensor, starts: Sequence[int], length: int) -> Tensor:
    """The windows ``stream[s : s + length + 1]`` for each start: (len(starts), length + 1)."""
    return torch.stack([stream[s:s + length + 1] for s in starts])


def lm_step(model: LanguageModel, opt: torch.optim.Optimizer, windows: Tensor,
            train: LMTrainConfig, step: int, world: int = 1) -> float:
    """One AdamW step of ``train``'s schedule on ``windows`` (B, length + 1); returns the mean
    next-token loss of the step. Under torch.distributed (``world`` > 1) the gradients and the
    loss are averaged over the ranks, each holding a batch of the same size: the step of one
    process with the ranks' windows together."""
    for group in opt.param_groups:
        group["lr"] = train.lr_at(step)
    model.train()
    loss = model.loss(windows)
    opt.zero_grad(set_to_none=True)
    loss.backward()  # type: ignore[no-untyped-call]
    logged = loss.detach().clone()
    if world > 1:
        import torch.distributed as dist

        grads = [p.grad for p in model.parameters() if p.grad is not None]
        flat = torch.cat([g.reshape(-1) for g in grads] + [logged.reshape(1)])
        dist.all_reduce(flat)
        flat /= world
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()
        logged = flat[-1]
    torch.nn.utils.clip_grad_norm_(model.parameters(), train.clip)
    opt.step()
    value = float(logged)
    if not math.isfinite(value):
        raise FloatingPointError(f"the loss became {value} at step {step}")
    return value


@torch.no_grad()
def held_out_loss(model: LanguageModel, stream: Tensor, length: int,
                  max_windows: int = 64) -> float:
    """Mean next-token loss (nats) on up to ``max_windows`` windows of ``stream`` that do not
    overlap, spread evenly over it (all of them when there are fewer): a quick, fixed
    validation score to print during training. :func:`perplexity` scores every window."""
    windows = _windows(stream, length)  # (n, length + 1)
    if windows.shape[0] > max_windows:
        pick = torch.linspace(0, windows.shape[0] - 1, max_windows).round().long()
        windows = windows[pick]
    was_training = model.training
    model.eval()
    total = 0.0
    for chunk in torch.split(windows, 64):
        total += float(model.loss(chunk)) * chunk.shape[0]
    model.train(was_training)
    return total / windows.shape[0]


@torch.no_grad()
def generate(model: LanguageModel, prompt: Sequence[int], max_new_tokens: int, *,
             temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
             generator: torch.Generator | None = None) -> list[int]:
    """``prompt`` followed by ``max_new_tokens`` sampled tokens, as long as asked for: when
    the text outgrows the model's ``max_len``, sampling goes on from its last ``max_len // 2``
    tokens (a sliding context, with the KV cache inside each stretch). The same generator
    state gives the same tokens."""
    from .sampling import sample

    if not prompt:
        raise ValueError("the prompt holds no token")
    max_len = model.config.max_len
    if max_len < 2:
        raise ValueError(f"a model of max_len {max_len} has no room for a context")
    out = list(prompt)
    model.eval()
    while max_new_tokens > 0:
        context = out[-(max_len // 2):] if len(out) >= max_len else out
        take = min(max_new_tokens, max_len - len(context))
        rows = sample(model, torch.tensor([context]), take, temperature=temperature,
                      top_k=top_k, top_p=top_p, generator=generator)
        out += rows[0, len(context):].tolist()
        max_new_tokens -= take
    return out
