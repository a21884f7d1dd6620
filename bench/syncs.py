"""`python -m bench.syncs`: how often labformer's code reads a tensor back to the host.

On a GPU every such read (``.item()``, ``float(t)``, ``bool(t)``, ``.tolist()``, ``.cpu()``,
...) waits for every queued kernel: the host stops feeding the device. This counts them per
training step (:func:`labformer.train.train`) and per beam-search step.

On the CPU, the reads are counted by patching those ``torch.Tensor`` methods and keeping the
calls made from labformer's own files (PyTorch's internals read CPU-side tensors, such as
Adam's step counter, that never sync a GPU). Where CUDA exists, the same runs are repeated on
the GPU under ``torch.cuda.set_sync_debug_mode("warn")``, which flags every synchronising call
PyTorch makes, labformer's or not.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

_PACKAGE = str(Path(__file__).resolve().parents[1] / "labformer")
# Tensor methods that copy a value to the host (a synchronisation when the tensor is on a GPU).
HOST_READS = ("item", "tolist", "cpu", "numpy", "__float__", "__int__", "__bool__", "__index__")


# labformer functions that read tensors only when they are on the CPU (on CUDA they assert on
# the device instead, or skip): their reads are counted apart, as they cost a GPU run nothing.
CPU_ONLY = frozenset({"_check_ids_on_host", "_right_padded",
                      "_epoch_order"})  # (a permutation drawn from a CPU generator)


@contextlib.contextmanager
def count_host_reads() -> Iterator[dict[str, int]]:
    """Count host reads made from labformer's files inside the block.

    Yields ``{"function:method": calls}`` keyed by the labformer function that made them.
    """
    counts: dict[str, int] = {}
    originals = {name: getattr(torch.Tensor, name) for name in HOST_READS}

    def patched(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def read(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            code = sys._getframe(1).f_code
            if code.co_filename.startswith(_PACKAGE):
                key = f"{code.co_name}:{name}"
                counts[key] = counts.get(key, 0) + 1
            return original(self, *args, **kwargs)
        return read

    for name, original in originals.items():
        setattr(torch.Tensor, name, patched(name, original))
    try:
        yield counts
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)


@contextlib.contextmanager
def count_cuda_syncs() -> Iterator[list[str]]:
    """Every synchronising CUDA call inside the block (``set_sync_debug_mode('warn')``)."""
    caught: list[str] = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield caught
        finally:
            torch.cuda.set_sync_debug_mode("default")
            caught.extend(str(x.message) for x in w if "synchroniz" in str(x.message))


def _toy(device: str, dropout: float = 0.1) -> tuple[Any, list[Any]]:
    from labformer.data import Batch
    from labformer.transformer import Transformer, TransformerConfig

    cfg = TransformerConfig.preset("tiny", src_vocab_size=40, tgt_vocab_size=40,
                                   dropout=dropout)
    g = torch.Generator().manual_seed(0)
    batches = []
    for i in range(4):
        src = torch.randint(4, 40, (8, 7), generator=g)
        tgt = torch.randint(4, 40, (8, 6), generator=g)
        tgt[:, -1] = cfg.eos_id
        tgt[:3, 3:] = cfg.pad_id  # some padded rows
        tgt[:3, 2] = cfg.eos_id
        tgt_in = torch.cat([torch.full((8, 1), cfg.bos_id), tgt[:, :-1]], dim=1)
        tgt_in[tgt_in == cfg.eos_id] = cfg.pad_id
        batches.append(Batch(src, tgt_in, tgt, torch.arange(8) + 8 * i))
    torch.manual_seed(0)
    return Transformer(cfg, device=device), batches


def _per_step(seen: dict[str, int] | list[str], steps: int, gpu_path: bool) -> float:
    if isinstance(seen, list):
        return len(seen) / steps
    kept = {k: n for k, n in seen.items() if not gpu_path or k.split(":")[0] not in CPU_ONLY}
    return sum(kept.values()) / steps


def training_step_reads(device: str = "cpu", steps: int = 8, gpu_path: bool = True) -> float:
    """Host reads per optimiser step of :func:`labformer.train.train` (2 epochs of 4 steps).

    ``gpu_path``: leave out the reads of checks that run on CPU tensors only (CPU_ONLY).
    """
    from labformer.train import TrainConfig, train

    model, batches = _toy(device)
    config = TrainConfig(epochs=steps // len(batches), warmup_steps=2)
    counter = count_host_reads() if device == "cpu" else count_cuda_syncs()
    with counter as seen:
        train(model, batches, config, device=device, progress=False)
    return _per_step(seen, steps, gpu_path)


def beam_step_reads(device: str = "cpu", steps: int = 12, beam: int = 4,
                    gpu_path: bool = True) -> float:
    """Host reads per step of :func:`labformer.decoding.beam_search` (EOS never ends a row)."""
    from labformer.decoding import beam_search

    model, batches = _toy(device, dropout=0.0)
    model.eval()
    src = batches[0].src.to(device)
    counter = count_host_reads() if device == "cpu" else count_cuda_syncs()
    with counter as seen:
        beam_search(model, src, beam, max_len=steps, eos_id=-1)
    return _per_step(seen, steps, gpu_path)


def measure() -> dict[str, float]:
    """Reads per training step and per beam step, on the CPU and, if present, on CUDA."""
    out = {"train step (cpu, labformer's reads, all)": training_step_reads("cpu", gpu_path=False),
           "train step (cpu, labformer's reads on a GPU path)": training_step_reads("cpu"),
           "beam step (cpu, labformer's reads, all)": beam_step_reads("cpu", gpu_path=False),
           "beam step (cpu, labformer's reads on a GPU path)": beam_step_reads("cpu")}
    if torch.cuda.is_available():
        out["train step (cuda, every sync)"] = training_step_reads("cuda")
        out["beam step (cuda, every sync)"] = beam_step_reads("cuda")
    return out


def main() -> int:
    for name, value in measure().items():
        print(f"{name}: {value:.2f} host reads per step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
