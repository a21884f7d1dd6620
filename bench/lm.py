"""The book's language model trained side by side with peers of the same size (`make bench`).

Each pair trains, in one process, on the same character-level token stream (the shipped
Shakespeare, split by play: *The Tempest* is the validation text), with the same windows at
every step, the same AdamW and schedule (:func:`labformer.lmtrain.lm_step` drives every
model) and the same number of steps:

* labformer's :class:`~labformer.LanguageModel` in its 2017 block (Post-LN, ReLU, sinusoidal
  positions) against PyTorch's own ``nn.TransformerEncoder`` under a causal mask, with the
  same embedding, positions and output layer (:class:`TorchEncoderLM`). The peer starts from
  labformer's weights (:func:`torch_peer_from`), so the two validation losses should agree to
  rounding: a gap is a bug on one side, not a difference of initialisation;
* labformer in GPT-2's block (Pre-LN with a final norm, learned positions, tied embeddings)
  against Hugging Face's ``transformers.GPT2LMHeadModel`` built from a ``GPT2Config`` of the
  same size, ReLU in both (labformer has no GELU), each with its own initialisation. Hugging
  Face is a bench-only dependency (``requirements-bench.lock``, installed by `make bench` into
  ``.venv-bench``); without it the row says "not installed". Nothing is downloaded: the model
  is built from its config, and ``HF_HUB_OFFLINE=1`` is set before the import.

The steps run in rounds; in every round each model takes the same ``round_steps`` steps, the
order of the models rotating from round to round so that a burst of load on the machine hits
all of them. The first round is warm-up and is not timed; tokens per second come from the
median round. The ratio is labformer's tokens per second over the peer's: above 1 means
labformer trains faster.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from labformer import LanguageModel
from labformer.lmtrain import LMTrainConfig, batch_starts, held_out_loss, lm_step, windows_at
from labformer.positional import sinusoidal_positions

if TYPE_CHECKING:
    from .suite import Row


@dataclass(frozen=True)
class LMBenchConfig:
    """Sizes and schedule shared by every model of the comparison."""

    d_model: int = 128
    num_heads: int = 4
    num_layers: int = 4
    d_ff: int = 512
    context: int = 64  # tokens each window predicts (the model's max_len)
    batch_size: int = 16
    steps: int = 200
    round_steps: int = 20  # steps per model per round; the first round is warm-up, untimed
    lr: float = 3e-3
    seed: int = 0
    eval_windows: int = 64  # validation windows scored after the last step
    text_chars: int | None = None  # cut the texts to this many characters (tiny runs)

    @classmethod
    def tiny(cls) -> LMBenchConfig:
        """Toy sizes for the tests: two rounds of two steps."""
        return cls(d_model=16, num_heads=2, num_layers=1, d_ff=32, context=8, batch_size=2,
                   steps=4, round_steps=2, eval_windows=4, text_chars=20_000)

    @property
    def train(self) -> LMTrainConfig:
        """The optimiser's schedule: as `labformer lm train`'s (warm-up 5 % of the steps)."""
        return LMTrainConfig(steps=self.steps, batch_size=self.batch_size, length=self.context,
                             lr=self.lr, warmup=max(1, self.steps // 20))


# --- the token stream -------------------------------------------------------------------------

def char_streams(cfg: LMBenchConfig) -> tuple[int, Tensor, Tensor]:
    """(vocabulary size, training ids, validation ids) of the shipped Shakespeare, one token per
    character, the validation text a whole play (*The Tempest*)."""
    from labformer.data.text_corpus import CharTokenizer, shakespeare_split

    train, valid = shakespeare_split()
    if cfg.text_chars is not None:
        train, valid = train[: cfg.text_chars], valid[: cfg.text_chars // 4]
    tokenizer = CharTokenizer.train(train + valid)
    ids = [torch.tensor(tokenizer.encode(t), dtype=torch.long) for t in (train, valid)]
    return len(tokenizer), ids[0], ids[1]


# --- the models ---------------------------------------------------------------------------------

class _LMLoss(nn.Module):
    """``loss(tokens)`` as :meth:`LanguageModel.loss`: what lm_step and held_out_loss call."""

    def loss(self, tokens: Tensor) -> Tensor:
        logits = self(tokens[:, :-1])  # (B, T - 1, V)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def labformer_lm(vocab_size: int, cfg: LMBenchConfig, block: str) -> LanguageModel:
    """The book's model in the block of a peer: "2017" (nn.TransformerEncoder's) or "gpt2"."""
    switches: dict[str, object] = {}
    if block == "gpt2":
        switches = dict(norm_first=True, positional="learned", tie_embeddings=True)
    elif block != "2017":
        raise ValueError(f"no block {block!r}: '2017' or 'gpt2'")
    torch.manual_seed(cfg.seed)
    return LanguageModel(vocab_size, cfg.d_model, cfg.num_heads, cfg.num_layers, cfg.d_ff,
                         cfg.context, **switches)  # type: ignore[arg-type]


class TorchEncoderLM(_LMLoss):
    """PyTorch's peer: embedding * sqrt(d_model) + sinusoidal positions, ``nn.TransformerEncoder``
    (Post-LN, ReLU, no dropout) under a causal mask, a linear output layer."""

    pe: Tensor  # (max_len, d_model) buffer

    def __init__(self, vocab_size: int, cfg: LMBenchConfig) -> None:
        super().__init__()
        self.d_model = cfg.d_model
        self.embed = nn.Embedding(vocab_size, cfg.d_model)
        self.register_buffer("pe", sinusoidal_positions(cfg.context, cfg.d_model))
        layer = nn.TransformerEncoderLayer(cfg.d_model, cfg.num_heads, cfg.d_ff, dropout=0.0,
                                           batch_first=True, norm_first=False)
        self.encoder = nn.TransformerEncoder(layer, cfg.num_layers, enable_nested_tensor=False)
        self.generator = nn.Linear(cfg.d_model, vocab_size)

    def forward(self, tokens: Tensor) -> Tensor:
        T = tokens.shape[1]
        x = self.embed(tokens) * math.sqrt(self.d_model) + self.pe[:T]
        mask = nn.Transformer.generate_square_subsequent_mask(T, device=tokens.device)
        out: Tensor = self.generator(self.encoder(x, mask=mask, is_causal=True))
        return out


def torch_peer_from(ours: LanguageModel, cfg: LMBenchConfig) -> TorchEncoderLM:
    """A :class:`TorchEncoderLM` holding the weights of ``ours`` (a 2017-block LanguageModel):
    the two compute the same function and start training from the same point."""
    peer = TorchEncoderLM(ours.config.vocab_size, cfg)
    with torch.no_grad():
        peer.embed.weight.copy_(ours.embed.weight)
        peer.generator.load_state_dict(ours.generator.state_dict())
        for mine, theirs in zip(ours.layers, peer.encoder.layers, strict=True):
            a, b = mine.self_attn, theirs.self_attn
            b.in_proj_weight.copy_(torch.cat([a.q_proj.weight, a.k_proj.weight,
                                              a.v_proj.weight]))
            b.in_proj_bias.copy_(torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias]))
            b.out_proj.load_state_dict(a.out_proj.state_dict())
            theirs.linear1.load_state_dict(mine.ffn.linear1.state_dict())
            theirs.linear2.load_state_dict(mine.ffn.linear2.state_dict())
            theirs.norm1.load_state_dict(mine.sublayer1.norm.state_dict())
            theirs.norm2.load_state_dict(mine.sublayer2.norm.state_dict())
    return peer


def transformers_missing() -> str | None:
    """Why Hugging Face's peer cannot run here (None when ``transformers`` imports)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # build from a config; never download
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        import transformers  # noqa: F401
    except ImportError as error:
        return (f"not installed ({error.name or 'transformers'} missing: `make bench` installs "
                f"requirements-bench.lock into .venv-bench)")
    return None


class HFGPT2LM(_LMLoss):
    """Hugging Face's peer: ``GPT2LMHeadModel`` from a ``GPT2Config`` of the same size (ReLU, no
    dropout, no key/value cache while training), returning its logits."""

    def __init__(self, vocab_size: int, cfg: LMBenchConfig) -> None:
        super().__init__()
        if (why := transformers_missing()) is not None:
            raise RuntimeError(f"transformers is {why}")
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(vocab_size=vocab_size, n_positions=cfg.context, n_embd=cfg.d_model,
                            n_layer=cfg.num_layers, n_head=cfg.num_heads, n_inner=cfg.d_ff,
                            activation_function="relu", resid_pdrop=0.0, embd_pdrop=0.0,
                            attn_pdrop=0.0, bos_token_id=0, eos_token_id=0, use_cache=False)
        torch.manual_seed(cfg.seed)
        self.model = GPT2LMHeadModel(config)

    def forward(self, tokens: Tensor) -> Tensor:
        out: Tensor = self.model(input_ids=tokens, use_cache=False).logits
        return out


def num_parameters(model: nn.Module) -> int:
    """Trainable parameters, tied ones counted once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# --- training side by side ----------------------------------------------------------------------

@dataclass
class Trained:
    """What one model's run measured."""

    model: nn.Module
    round_seconds: list[float] = field(default_factory=list)  # timed rounds only
    losses: list[float] = field(default_factory=list)  # training loss of every step
    valid_loss: float = math.nan  # after the last step

    def tokens_per_second(self, cfg: LMBenchConfig) -> float:
        """Predicted tokens per second in the median timed round."""
        return cfg.round_steps * cfg.batch_size * cfg.context / statistics.median(
            self.round_seconds)


def train_side_by_side(models: dict[str, nn.Module], train: Tensor, valid: Tensor,
                       cfg: LMBenchConfig) -> dict[str, Trained]:
    """Train every model for ``cfg.steps`` steps on the same windows, in interleaved rounds;
    then score each on the same validation windows."""
    if cfg.steps % cfg.round_steps or cfg.steps < 2 * cfg.round_steps:
        raise ValueError("steps must be a multiple of round_steps, two rounds at least")
    schedule = cfg.train
    batches = torch.Generator().manual_seed(cfg.seed + 1)
    all_windows = [windows_at(train, batch_starts(batches, len(train), cfg.context,
                                                  cfg.batch_size), cfg.context)
                   for _ in range(cfg.steps)]  # drawn once: every model sees the same
    runs = {name: Trained(model) for name, model in models.items()}
    opts = {name: torch.optim.AdamW(model.parameters(), lr=cfg.lr,
                                    weight_decay=schedule.weight_decay)
            for name, model in models.items()}
    names = list(models)
    for r in range(cfg.steps // cfg.round_steps):
        steps = range(r * cfg.round_steps, (r + 1) * cfg.round_steps)
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            run = runs[name]
            t0 = time.perf_counter()
            for step in steps:
                run.losses.append(lm_step(run.model, opts[name],  # type: ignore[arg-type]
                                          all_windows[step], schedule, step))
            if r > 0:
                run.round_seconds.append(time.perf_counter() - t0)
    for run in runs.values():
        run.valid_loss = held_out_loss(run.model, valid, cfg.context,  # type: ignore[arg-type]
                                       max_windows=cfg.eval_windows)
    return runs


# --- the rows of the results table --------------------------------------------------------------

def check_causal(model: nn.Module, vocab: int, name: str, T: int = 8, at: int = 5) -> None:
    """Changing token ``at`` must leave the logits of positions < at as they were and change
    position ``at``'s; raises AssertionError naming the model otherwise. The bench runs it on
    every model before timing it (Hugging Face's peer included, which only .venv-bench has)."""
    was_training = model.training
    model.eval()
    tokens = torch.randint(0, vocab, (2, T), generator=torch.Generator().manual_seed(0))
    changed = tokens.clone()
    changed[:, at] = (changed[:, at] + 1) % vocab
    with torch.no_grad():
        a, b = model(tokens), model(changed)
    model.train(was_training)
    if a.shape != (2, T, vocab):
        raise AssertionError(f"{name}: logits of shape {tuple(a.shape)}, not {(2, T, vocab)}")
    if (a[:, :at] - b[:, :at]).abs().max() > 1e-6:
        raise AssertionError(f"{name}: a later token changed earlier logits (not causal)")
    if (a[:, at] - b[:, at]).abs().max() <= 1e-4:
        raise AssertionError(f"{name}: its own token did not change its logits")


def bench_lm(tiny: bool = False, say: Callable[[str], None] | None = None) -> list[Row]:
    """bench.suite's rows: for each peer, labformer's tokens/s over the peer's, and the two
    validation losses after the same steps; a peer that is not installed gets one row that
    says so. ``tiny``: toy sizes, four steps (what the tests run)."""
    from .suite import Row

    say = say or (lambda _msg: None)
    cfg = LMBenchConfig.tiny() if tiny else LMBenchConfig()
    vocab, train, valid = char_streams(cfg)
    size = (f"char-level Shakespeare (V={vocab}), d_model={cfg.d_model}, layers="
            f"{cfg.num_layers}, h={cfg.num_heads}, d_ff={cfg.d_ff}, context={cfg.context}, "
            f"B={cfg.batch_size}, {cfg.steps} AdamW steps")
    models: dict[str, nn.Module] = {}
    models["ours-2017"] = labformer_lm(vocab, cfg, "2017")
    models["torch"] = torch_peer_from(models["ours-2017"], cfg)  # type: ignore[arg-type]
    missing = transformers_missing()
    if missing is None:
        models["ours-gpt2"] = labformer_lm(vocab, cfg, "gpt2")
        models["hf"] = HFGPT2LM(vocab, cfg)
    for name, model in models.items():  # a peer that sees the future is not a peer
        check_causal(model, vocab, name)
    say(f"language models side by side ({', '.join(models)}): {size}")
    runs = train_side_by_side(models, train, valid, cfg)

    def pair(peer: str, ours: str, other: str, what: str) -> list[Row]:
        o, p = runs[ours].tokens_per_second(cfg), runs[other].tokens_per_second(cfg)
        lo, lp = runs[ours].valid_loss, runs[other].valid_loss
        params = (f"{num_parameters(runs[ours].model):,} vs "
                  f"{num_parameters(runs[other].model):,} parameters")
        return [Row(f"LM training tokens/s vs {peer}", o, p, ">= 1.0",
                    None if tiny else o / p >= 1.0, f"{what}; {params}; {size}", unit="tok/s"),
                Row(f"LM validation loss after {cfg.steps} steps vs {peer}", lo, lp, "", None,
                    "nats per character on The Tempest, the same windows", unit="nats")]

    # The same function from the same weights: the training losses agree to rounding, until
    # rounding's differences grow (training is chaotic: by 1e-3 within 20 steps at this lr), so
    # the gap of the two validation losses is what rounding alone makes of 200 steps.
    pairs = zip(runs["ours-2017"].losses, runs["torch"].losses, strict=True)
    agree = next((i for i, (a, b) in enumerate(pairs) if abs(a - b) > 1e-4), cfg.steps)
    rows = pair("nn.TransformerEncoder", "ours-2017", "torch",
                f"2017 block (Post-LN, ReLU, sinusoidal), the same initial weights: training "
                f"losses within 1e-4 for the first {agree} steps, then rounding's differences "
                f"grow")
    if missing is None:
        rows += pair("HF GPT2LMHeadModel", "ours-gpt2", "hf",
                     "GPT-2 block (Pre-LN, learned positions, tied embeddings, ReLU), each "
                     "its own initialisation; labformer's output layer has a bias, GPT-2's not")
    else:
        rows.append(Row("LM training tokens/s vs HF GPT2LMHeadModel", math.nan, None, ">= 1.0",
                        None, f"transformers {missing}", unit="tok/s"))
    return rows
