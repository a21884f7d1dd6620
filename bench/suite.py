"""Benchmarks of labformer against PyTorch's own modules, as ratios measured in one run.

Each comparison times both sides in the same process, alternating them, after a warm-up, and
quotes medians. A ratio is labformer's measurement over the peer's: for a time, below 1 means
labformer is faster; for a rate (the tokens/s of the language models, bench/lm.py), above 1
does. Absolute times depend on the machine and its load; ratios measured side by side mostly
do not.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from labformer import Transformer, TransformerConfig, sinusoidal_positions
from labformer.convert import mha_from_torch
from labformer.decoding import beam_search, greedy_decode

from .lm import bench_lm


@dataclass
class Row:
    """One line of the results table: labformer's measurement, the reference's, their ratio."""

    name: str
    ours: float  # labformer's measurement, in ``unit``
    peer: float | None  # the reference's (a PyTorch module, a peak rate), in ``unit``; None:
    # the peer is not installed (the row says so)
    target: str  # e.g. "<= 1.2"; empty when the row is only reported
    ok: bool | None  # None when there is no target
    note: str = ""
    unit: str = "ms"  # "ms" (a median time), "GFLOP/s", "tok/s" (rates), "nats" (a loss)

    @property
    def ratio(self) -> float:
        return math.nan if self.peer is None else self.ours / self.peer


def time_pair(ours: Callable[[], object], peer: Callable[[], object], repeats: int,
              warmup: int = 1) -> tuple[float, float]:
    """Median milliseconds of ``ours`` and ``peer``, run alternately so that load hits both."""
    for _ in range(warmup):
        ours()
        peer()
    a: list[float] = []
    b: list[float] = []
    for i in range(repeats):
        for fn, out in ((ours, a), (peer, b)) if i % 2 == 0 else ((peer, b), (ours, a)):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(a), statistics.median(b)


# --- multi-head attention -------------------------------------------------------------------

def bench_mha(T: int, B: int = 32, d_model: int = 256, num_heads: int = 8,
              repeats: int = 7) -> Row:
    """Self-attention forward + backward, no weights returned, against nn.MultiheadAttention."""
    torch.manual_seed(0)
    peer = nn.MultiheadAttention(d_model, num_heads, batch_first=True)
    ours = mha_from_torch(peer)
    x = torch.randn(B, T, d_model, requires_grad=True)

    def run_ours() -> None:
        out, _ = ours(x, x, x, need_weights=False)
        out.sum().backward()

    def run_peer() -> None:
        out, _ = peer(x, x, x, need_weights=False)
        out.sum().backward()

    o, p = time_pair(run_ours, run_peer, repeats)
    ratio = o / p
    return Row(f"MultiHeadAttention fwd+bwd, T={T}", o, p, "<= 1.2", ratio <= 1.2,
               f"B={B}, d_model={d_model}, h={num_heads}")


# --- a training step ------------------------------------------------------------------------

class TorchSeq2Seq(nn.Module):
    """The peer: embeddings, sinusoidal positions, ``nn.Transformer``, output layer."""

    pe: torch.Tensor  # (max_len, d_model) buffer

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.src_embed = nn.Embedding(cfg.src_vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        self.tgt_embed = nn.Embedding(cfg.tgt_vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        self.register_buffer("pe", sinusoidal_positions(cfg.max_len, cfg.d_model))
        self.transformer = nn.Transformer(
            cfg.d_model, cfg.num_heads, cfg.num_encoder_layers, cfg.num_decoder_layers,
            cfg.d_ff, cfg.dropout, batch_first=True, norm_first=cfg.norm_first,
        )
        self.generator = nn.Linear(cfg.d_model, cfg.tgt_vocab_size)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        scale = math.sqrt(self.cfg.d_model)
        s = self.src_embed(src) * scale + self.pe[: src.shape[1]]
        t = self.tgt_embed(tgt) * scale + self.pe[: tgt.shape[1]]
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], dtype=torch.bool)
        out = self.transformer(
            s, t, tgt_mask=causal, src_key_padding_mask=src == self.cfg.pad_id,
            tgt_key_padding_mask=tgt == self.cfg.pad_id,
            memory_key_padding_mask=src == self.cfg.pad_id, tgt_is_causal=True,
        )
        return self.generator(out)


def _train_step(model: nn.Module, opt: torch.optim.Optimizer, src, tgt_in, tgt_out,
                pad_id: int) -> None:
    logits = model(src, tgt_in)
    loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=pad_id,
                           label_smoothing=0.1)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def _batch(cfg: TransformerConfig, B: int, S: int, T: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, cfg.src_vocab_size, (B, S), generator=g)
    tgt = torch.randint(4, cfg.tgt_vocab_size, (B, T + 1), generator=g)
    src[: B // 4, S - S // 4:] = cfg.pad_id  # some padding, as in real batches
    return src, tgt[:, :-1], tgt[:, 1:]


def train_config(tiny: bool) -> tuple[TransformerConfig, int, int]:
    """The benchmarked configuration: (config, batch size, sequence length)."""
    if tiny:
        return TransformerConfig.preset("tiny", src_vocab_size=50, tgt_vocab_size=50), 4, 8
    cfg = TransformerConfig(src_vocab_size=1000, tgt_vocab_size=1000, d_model=256, num_heads=4,
                            num_encoder_layers=3, num_decoder_layers=3, d_ff=1024, dropout=0.1)
    return cfg, 32, 32


def bench_train_step(tiny: bool = False, repeats: int = 7) -> tuple[Row, Row]:
    """A full training step against nn.Transformer; and achieved FLOP/s against matmul peak."""
    cfg, B, T = train_config(tiny)
    torch.manual_seed(0)
    ours, peer = Transformer(cfg), TorchSeq2Seq(cfg)
    opt_o = torch.optim.AdamW(ours.parameters(), lr=1e-4)
    opt_p = torch.optim.AdamW(peer.parameters(), lr=1e-4)
    src, tgt_in, tgt_out = _batch(cfg, B, T, T)
    o, p = time_pair(lambda: _train_step(ours, opt_o, src, tgt_in, tgt_out, cfg.pad_id),
                     lambda: _train_step(peer, opt_p, src, tgt_in, tgt_out, cfg.pad_id), repeats)
    step = Row("Transformer training step", o, p, "<= 1.1", o / p <= 1.1,
               f"d_model={cfg.d_model}, layers={cfg.num_encoder_layers}+"
               f"{cfg.num_decoder_layers}, B={B}, T={T}")
    with FlopCounterMode(display=False) as counter:
        _train_step(ours, opt_o, src, tgt_in, tgt_out, cfg.pad_id)
    flops = counter.get_total_flops()
    peak = matmul_peak_flops(256 if tiny else 2048)
    achieved = flops / (o / 1e3)
    util = Row("Training step FLOP/s vs matmul peak", achieved / 1e9, peak / 1e9, "", None,
               f"{flops / 1e9:.2f} GFLOP per step; ratio = fraction of peak", unit="GFLOP/s")
    return step, util


def matmul_peak_flops(n: int = 2048, repeats: int = 5) -> float:
    """float32 FLOP/s of a large torch.mm on this machine, measured now (best of repeats)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n**3 / best


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# --- decoding -------------------------------------------------------------------------------

def _decoding_model(tiny: bool) -> tuple[Transformer, torch.Tensor, int]:
    if tiny:
        cfg = TransformerConfig.preset("tiny", src_vocab_size=50, tgt_vocab_size=50)
        steps, B, S = 8, 2, 6
    else:
        cfg = TransformerConfig(src_vocab_size=1000, tgt_vocab_size=1000, d_model=256,
                                num_heads=4, num_encoder_layers=3, num_decoder_layers=3,
                                d_ff=1024, dropout=0.0, max_len=128)
        steps, B, S = 64, 8, 24
    torch.manual_seed(0)
    model = Transformer(cfg).eval()
    src = torch.randint(4, cfg.src_vocab_size, (B, S))
    return model, src, steps


def bench_decoding(tiny: bool = False, repeats: int = 5) -> tuple[Row, Row]:
    """Greedy with the KV cache against recomputing the prefix; beam 4 against greedy."""
    model, src, steps = _decoding_model(tiny)
    # EOS id -1 never matches, so every run decodes exactly `steps` tokens.
    with torch.no_grad():
        o, p = time_pair(lambda: greedy_decode(model, src, steps, use_cache=True, eos_id=-1),
                         lambda: greedy_decode(model, src, steps, use_cache=False, eos_id=-1),
                         repeats)
        cache = Row(f"Greedy {steps} tokens: KV cache vs recompute", o, p, "speed-up >= 3x",
                    p / o >= 3.0, f"speed-up {p / o:.1f}x; B={src.shape[0]}")
        b, g = time_pair(lambda: beam_search(model, src, 4, max_len=steps, eos_id=-1),
                         lambda: greedy_decode(model, src, steps, use_cache=True, eos_id=-1),
                         repeats)
        beam = Row(f"Beam search (4) vs greedy, {steps} tokens", b, g, "<= 2.5", b / g <= 2.5,
                   "both cached")
    return cache, beam


# --- the whole suite ------------------------------------------------------------------------

def bench_recipes(tiny: bool = False) -> Row:
    """``labformer train``'s quick recipe against the paper recipe it replaced as the default:
    the training's CPU seconds on one thread, one after the other in this process, and the
    greedy test BLEU each reaches (README: the table over ten runs). ``tiny``: 300 pairs, one
    epoch each, a smoke test of the row."""
    import dataclasses

    from labformer import train_translator
    from labformer.app.translate import RECIPES
    from labformer.data import generate_corpus

    corpus = generate_corpus(num_pairs=300 if tiny else 30_000, seed=0,
                             valid_size=20 if tiny else 1000, test_size=20 if tiny else 1000)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    cpu, bleu = {}, {}
    try:
        for name in ("quick", "paper"):
            recipe = RECIPES[name]
            config = (dataclasses.replace(recipe.train, epochs=1, min_steps=0) if tiny
                      else recipe.train)
            start = time.process_time()
            translator = train_translator(corpus, train_config=config,
                                          model_overrides=recipe.model,
                                          batch_size=recipe.batch_size, device="cpu",
                                          progress=False)
            cpu[name] = time.process_time() - start
            bleu[name] = translator.evaluate(corpus.test)["bleu"]
    finally:
        torch.set_num_threads(threads)
    ratio = cpu["quick"] / cpu["paper"]
    return Row("Translator training: quick vs paper recipe", cpu["quick"], cpu["paper"],
               "<= 0.5, BLEU >= 97", None if tiny else ratio <= 0.5 and bleu["quick"] >= 97,
               f"CPU s, one thread; test BLEU {bleu['quick']:.1f} vs {bleu['paper']:.1f}",
               unit="s")


def machine() -> str:
    """One line describing where the numbers come from."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        pass
    return (f"{cpu}; {os.cpu_count()} cores; torch {torch.__version__} "
            f"({torch.get_num_threads()} threads); Python {platform.python_version()}")


def run_all(tiny: bool = False, progress: Callable[[str], None] | None = None) -> list[Row]:
    """Every benchmark; ``tiny`` runs each once at a toy size (what the tests do)."""
    say = progress or (lambda _msg: None)
    reps = 1 if tiny else 7
    rows: list[Row] = []
    for T in (8,) if tiny else (32, 128, 512):
        say(f"multi-head attention, T={T}")
        rows.append(bench_mha(T, B=2 if tiny else 32, d_model=32 if tiny else 256,
                              num_heads=4 if tiny else 8, repeats=reps))
    say("training step")
    rows.extend(bench_train_step(tiny, repeats=reps))
    say("decoding")
    rows.extend(bench_decoding(tiny, repeats=1 if tiny else 5))
    say("the translator's two recipes (about 2.5 minutes)")
    rows.append(bench_recipes(tiny))
    rows.extend(bench_lm(tiny, say))
    return rows


def to_markdown(rows: list[Row]) -> str:
    """The results as a Markdown table, with the machine they were measured on."""
    lines = [
        f"Measured on: {machine()}",
        "",
        "| benchmark | labformer | reference | ratio | target | met | notes |",
        "|---|---:|---:|---:|---|---|---|",
    ]
    for r in rows:
        met = "" if r.ok is None else ("yes" if r.ok else "**no**")
        if r.peer is None:  # a peer that is not installed: nothing measured
            lines.append(f"| {r.name} | – | not installed | – | {r.target} |  | {r.note} |")
            continue
        lines.append(f"| {r.name} | {r.ours:.3g} {r.unit} | {r.peer:.3g} {r.unit} | "
                     f"{r.ratio:.3g} | {r.target} | {met} | {r.note} |")
    return "\n".join(lines) + "\n"
