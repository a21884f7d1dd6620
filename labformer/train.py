"""Training loop: AdamW, warm-up then inverse square root, label smoothing, gradient clipping.

The loop knows nothing about the model beyond ``model(src, tgt_in) -> logits`` and its padding
id ``model.config.pad_id`` (left out of the loss), and nothing about the data beyond a list of
:class:`labformer.data.Batch`-like objects (``src``, ``tgt_in``, ``tgt_out``). Weight decay
applies to weight matrices only; biases, norms and embeddings are not decayed (minGPT's rule;
see :func:`optimizer_groups`). Checkpoints are written atomically and hold everything needed to
resume, the random state of every process included: a resumed run continues exactly as an
uninterrupted one would (same seed, same numbers). Under ``torchrun`` the same loop runs
data-parallel (DistributedDataParallel; gloo on CPU, NCCL on GPU).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import inspect
import io
import math
import os
import stat
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import torch
import torch.distributed as dist
from torch import nn

from .loss import label_smoothed_cross_entropy

__all__ = [
    "History",
    "TrainConfig",
    "checkpoint_unfinished",
    "checkpoint_verified",
    "checksums",
    "entry_sha256",
    "file_kind",
    "load_checkpoint",
    "lr_factor",
    "optimizer_groups",
    "pick_device",
    "planned_schedule",
    "save_checkpoint",
    "setup_distributed",
    "train",
    "weights_sha256",
]

CHECKPOINT_FORMAT = "labformer-checkpoint-2"  # 2: a checksum of every entry
_P = ParamSpec("_P")
_R = TypeVar("_R")
LOG_EVERY = 50  # optimiser steps between two loss values on the progress bar
DECAYS = ("rsqrt", "linear")  # TrainConfig.decay: the rate after the warm-up


@dataclass(frozen=True)
class TrainConfig:
    """How to train; the model's sizes live in TransformerConfig."""

    epochs: int = 10  # passes over the training batches
    lr: float = 1e-3  # peak learning rate, reached at the end of warm-up
    warmup_steps: int = 200  # linear warm-up, then decay as 1/sqrt(step) (Vaswani et al. 5.3)
    betas: tuple[float, float] = (0.9, 0.98)  # Adam's betas, as in the paper
    weight_decay: float = 0.01  # AdamW's decoupled weight decay
    label_smoothing: float = 0.1  # epsilon_ls; the paper uses 0.1
    clip_norm: float = 1.0  # max global gradient norm; 0 disables clipping
    seed: int = 0  # seeds dropout and the batch order of every epoch
    # At least this many optimiser steps: on small data, more epochs than ``epochs`` (whole
    # epochs, enough to reach it). 0: exactly ``epochs``.
    min_steps: int = 0
    # Warm-up at most this share of the run's steps (a short run still reaches its peak
    # rate); None: ``warmup_steps`` whatever the run's length.
    max_warmup_share: float | None = None
    # False: no warm-up, the same decay: the peak rate until step ``warmup_steps``, then
    # peak * sqrt(warmup_steps / step), so a run with and one without warm-up differ only in
    # their first ``warmup_steps`` steps (chapter 13's 2x2 of norm place and warm-up).
    warmup: bool = True
    # After the peak: "rsqrt", peak * sqrt(warmup_steps / step), the paper's decay, made for
    # runs of 100,000 steps; "linear", down in a straight line to almost 0 at the run's last
    # step, which anneals a short run (``labformer train``'s quick recipe).
    decay: str = "rsqrt"

    def __post_init__(self) -> None:
        if self.decay not in DECAYS:
            raise ValueError(f"decay must be one of {', '.join(DECAYS)}, got {self.decay!r}")
        if self.epochs < 1 or self.warmup_steps < 1 or self.lr <= 0:
            raise ValueError(f"epochs, warmup_steps and lr must be positive: {self}")
        if self.min_steps < 0:
            raise ValueError(f"min_steps must be >= 0, got {self.min_steps}")
        if self.max_warmup_share is not None and not 0.0 < self.max_warmup_share <= 1.0:
            raise ValueError(f"max_warmup_share must be in (0, 1], got {self.max_warmup_share}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.weight_decay < 0 or self.clip_norm < 0:
            raise ValueError(f"weight_decay and clip_norm must be >= 0: {self}")


@dataclass
class History:
    """What happened during training, one entry per step or per epoch."""

    step_loss: list[float] = field(default_factory=list)  # mean loss of each optimiser step
    step_lr: list[float] = field(default_factory=list)  # learning rate used at each step
    step_grad_norm: list[float] = field(default_factory=list)  # global norm before clipping
    epoch_loss: list[float] = field(default_factory=list)  # mean training loss of each epoch
    valid_score: list[float] = field(default_factory=list)  # valid_fn's score after each epoch
    epoch_seconds: list[float] = field(default_factory=list)  # wall time of each epoch
    valid_epoch: list[int] = field(default_factory=list)  # 1-based epoch of each valid_score

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> History:
        """A History from ``dataclasses.asdict`` data; fields of other versions are ignored.

        A file without ``valid_epoch`` (an older version) scored after every epoch.
        """
        if not isinstance(data, dict):
            raise ValueError(f"expected a dict of training-history lists, got {type(data)}")
        known = {f.name for f in dataclasses.fields(cls)}
        history = cls(**{k: list(v) for k, v in data.items() if k in known})
        if not history.valid_epoch and history.valid_score:
            history.valid_epoch = list(range(1, len(history.valid_score) + 1))
        return history


def planned_schedule(config: TrainConfig, steps_per_epoch: int) -> tuple[int, int]:
    """(epochs, warm-up steps) of a run with ``steps_per_epoch`` optimiser steps per epoch.

    ``config.epochs``, or more epochs to reach ``config.min_steps``; the warm-up is
    ``config.warmup_steps``, capped at ``config.max_warmup_share`` of the run's steps.
    """
    if steps_per_epoch < 1:
        raise ValueError(f"steps_per_epoch must be positive, got {steps_per_epoch}")
    epochs = max(config.epochs, -(-config.min_steps // steps_per_epoch))
    warmup = config.warmup_steps
    if config.max_warmup_share is not None:
        warmup = min(warmup, max(1, int(config.max_warmup_share * epochs * steps_per_epoch)))
    return epochs, warmup


def lr_factor(step: int, warmup_steps: int, warmup: bool = True, *, decay: str = "rsqrt",
              total_steps: int | None = None) -> float:
    """Multiplier of the peak rate at optimiser step ``step`` (1-based).

    With ``warmup``, min(s/w, sqrt(w/s)): linear up to the peak at step w, then 1/sqrt
    (Vaswani et al. 5.3). Without, min(1, sqrt(w/s)): the peak from the first step, and the
    same decay after step w. ``decay="linear"`` replaces sqrt(w/s) by (T - s + 1) / (T - w + 1)
    for a run of T = ``total_steps`` steps: 1 at step w, 1 / (T - w + 1) at the last step.
    """
    step = max(step, 1)
    rise = step / warmup_steps if warmup else 1.0
    if decay == "rsqrt":
        return min(rise, math.sqrt(warmup_steps / step))
    if decay != "linear":
        raise ValueError(f"decay must be one of {', '.join(DECAYS)}, got {decay!r}")
    if total_steps is None or total_steps < 1:
        raise ValueError(f"a linear decay needs the run's total_steps, got {total_steps}")
    tail = max(1, total_steps - warmup_steps + 1)
    return min(rise, 1.0, max(total_steps - step + 1, 1) / tail)


def pick_device(name: str = "auto") -> torch.device:
    """'auto' picks CUDA, then Apple's MPS, then the CPU; otherwise the named device.

    Only devices that can train and run a model here are accepted: 'cpu', 'cuda' (or
    'cuda:N') when CUDA is available, 'mps' on a Mac that has it.
    """
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"unknown device {name!r}: use auto, cpu, cuda or mps") from e
    if device.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device {name!r} cannot run the model here: use auto, cpu, cuda "
                         f"or mps")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("device 'cuda' was asked for, but CUDA is not available here")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"device {name!r} does not exist: this machine has "
                             f"{torch.cuda.device_count()} CUDA device(s)")
    mps = getattr(torch.backends, "mps", None)
    if device.type == "mps" and not (mps and mps.is_available()):
        raise ValueError("device 'mps' was asked for, but Apple's MPS is not available here")
    return device


def setup_distributed(backend: str | None = None) -> tuple[int, int]:
    """Join the process group when launched by torchrun; returns (rank, world_size).

    backend: "gloo" or "nccl"; None picks NCCL when CUDA is available. With NCCL, each process
    first selects its own GPU (``LOCAL_RANK``): NCCL runs collectives on the current device.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend=backend)
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


_NORMS = (nn.LayerNorm, nn.RMSNorm, nn.GroupNorm, nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def optimizer_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Two AdamW parameter groups: weight matrices decay; biases, norms, embeddings do not.

    Decay pulls weights towards 0. For an embedding row or a norm's gain that is a bias, not a
    regulariser. This is minGPT's ``configure_optimizers`` rule (only Linear weights decay);
    nanoGPT's decays every parameter of 2 or more dimensions, embeddings included.

    Tied embeddings (``TransformerConfig.tie_embeddings``): the output layer's weight *is* the
    target embedding, an embedding, so it does not decay either. Tying therefore takes weight
    decay off the output layer, which an untied model decays (nanoGPT, which ties, decays the
    shared matrix).
    """
    no_decay: set[int] = set()
    for module in model.modules():
        for p in module.parameters(recurse=False):
            if isinstance(module, (nn.Embedding, *_NORMS)) or p.dim() < 2:
                no_decay.add(id(p))
    params = [p for p in model.parameters() if p.requires_grad]  # each shared tensor once
    return [
        {"params": [p for p in params if id(p) not in no_decay], "weight_decay": weight_decay},
        {"params": [p for p in params if id(p) in no_decay], "weight_decay": 0.0},
    ]


def _pad_id(model: nn.Module) -> int:
    pad_id = getattr(getattr(model, "config", None), "pad_id", None)
    if not isinstance(pad_id, int):
        raise TypeError(f"train() reads the padding id from model.config.pad_id; "
                        f"{type(model).__name__} has none")
    return pad_id


def _rng_state(device: torch.device) -> dict[str, torch.Tensor]:
    """This process's random state: the CPU generator, and the GPU's when training on one."""
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    elif device.type == "mps":
        state["mps"] = torch.mps.get_rng_state()
    return state


def _set_rng_state(state: dict[str, torch.Tensor], device: torch.device) -> None:
    # set_rng_state wants a CPU ByteTensor, whichever device the states were saved from.
    torch.set_rng_state(state["cpu"].cpu())
    if device.type == "cuda" and "cuda" not in state:
        # Saved on the CPU (or MPS): dropout on the GPU draws from the GPU's own generator,
        # which the file cannot restore, so the resumed run differs from an uninterrupted one.
        warnings.warn("the checkpoint holds no CUDA random state (it was not written on a "
                      "GPU): training resumes on CUDA, but dropout masks differ from an "
                      "uninterrupted run", stacklevel=3)
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"].cpu(), device)
    elif device.type == "mps" and "mps" in state:
        torch.mps.set_rng_state(state["mps"].cpu())


def _rank0_decides(flag: bool, device: torch.device) -> bool:
    """Rank 0's ``flag`` on every rank (a broadcast)."""
    value = torch.tensor([int(flag)], device=device)
    dist.broadcast(value, src=0)
    return bool(value.item())


def checkpoint_unfinished(state: dict[str, Any]) -> tuple[int, int] | None:
    """(epochs saved, epochs planned) of a checkpoint that stopped before the end of its
    schedule; None for a finished one (or a file older than the ``"epochs"`` entry)."""
    if "epoch" not in state or "epochs" not in state:
        return None
    done, planned = int(state["epoch"]) + 1, int(state["epochs"])
    return (done, planned) if done < planned else None


def _gather(obj: Any, rank: int, world: int) -> list[Any] | None:
    """Every rank's ``obj`` as a list on rank 0 (None elsewhere); [obj] in a single process."""
    if world == 1:
        return [obj]
    out: list[Any] | None = [None] * world if rank == 0 else None
    dist.gather_object(obj, out, dst=0)
    return out


# What torch.load(weights_only=True) reads back: plain Python data, tensors, a few torch types.
_LEAVES = (type(None), bool, int, float, complex, str, bytes, torch.Tensor, torch.Size,
           torch.device, torch.dtype)


def _loadable(value: Any, where: str) -> Any:
    """``value`` with NumPy scalars (and 0-d arrays) made Python numbers and NumPy arrays made
    tensors; TypeError naming ``where`` for anything else ``load_checkpoint`` could not read."""
    if isinstance(value, _LEAVES):
        return value
    if isinstance(value, dict):
        items = {k: _loadable(v, f"{where}[{k!r}]") for k, v in value.items()}
        return collections.OrderedDict(items) if isinstance(value, collections.OrderedDict) \
            else items
    if isinstance(value, (list, tuple, set, frozenset)):  # a named tuple becomes a tuple
        seq = [_loadable(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, (set, frozenset)):
            return set(seq)
        return seq if isinstance(value, list) else tuple(seq)
    module = type(value).__module__
    if module == "numpy" and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return value.item()  # np.float32(0.5) -> 0.5
    if module == "numpy" and hasattr(value, "shape"):
        return torch.as_tensor(value)
    raise TypeError(f"checkpoint entry {where} is a {type(value).__module__}."
                    f"{type(value).__qualname__}, which load_checkpoint cannot read back "
                    f"(weights_only): store plain data (numbers, strings, lists, dicts) or tensors")


WEIGHTS_HASH = "weights_sha256"  # the checkpoint entry that holds weights_sha256(state["model"])
STATE_HASH = "state_sha256"  # and the one that holds state_sha256(state): its other tensors
_ZIP = b"PK\x03\x04"  # torch.save writes a zip archive
_KINDS = ((b"\x89PNG", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"),
          (b"%PDF", "a PDF document"), (b"GIF8", "a GIF image"), (b"\x1f\x8b", "a gzip file"),
          (b"SQLite format 3", "an SQLite database"), (b"\x7fELF", "a program (ELF)"))


def weights_sha256(weights: Any) -> str:
    """Hex SHA-256 of a model's weights (a state dict): for each entry, in the order of its
    sorted names, the name, the dtype, the shape and the tensor's bytes (little-endian on
    every machine labformer runs on). A changed byte in any weight changes it."""
    digest = hashlib.sha256()
    for name in sorted(weights):
        tensor = weights[name]
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"weights entry {name!r} is a {type(tensor).__name__}, not a tensor")
        flat = tensor.detach().to("cpu").contiguous().reshape(-1)
        digest.update(f"{name}\0{str(flat.dtype).removeprefix('torch.')}\0"
                      f"{list(tensor.shape)}\0".encode())
        digest.update(flat.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _tensors_in(value: Any, where: str) -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor inside ``value`` (dicts, lists, tuples), with its path, in a fixed order."""
    if isinstance(value, torch.Tensor):
        yield where, value
    elif isinstance(value, dict):
        for key in sorted(value, key=repr):
            yield from _tensors_in(value[key], f"{where}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _tensors_in(item, f"{where}[{i}]")


def state_sha256(state: dict[str, Any]) -> str:
    """Hex SHA-256, as :func:`weights_sha256` computes it, of every other tensor of a
    checkpoint: the optimiser's moments, the random states (what resuming reads)."""
    return weights_sha256(dict(_tensors_in(
        {k: v for k, v in state.items() if k not in ("model", WEIGHTS_HASH, STATE_HASH,
                                                     CHECKSUMS)},
        "state")))


CHECKSUMS = "sha256"  # the entry that holds entry_sha256 of every other entry, by name


def _canonical(value: Any, out: list[bytes]) -> None:
    """Append the canonical bytes of ``value`` to ``out``: a type tag, then the value, so that
    equal data gives equal bytes whatever the order a dict was built in, and 1, 1.0, True and
    "1" all differ. Dict entries are sorted by their keys' canonical bytes."""
    if value is None:
        out.append(b"N")
    elif isinstance(value, bool):
        out.append(b"B1" if value else b"B0")
    elif isinstance(value, int):
        out.append(b"I%d;" % value)
    elif isinstance(value, float):
        out.append(b"F" + value.hex().encode() + b";")
    elif isinstance(value, complex):
        out.append(b"C" + value.real.hex().encode() + b"," + value.imag.hex().encode() + b";")
    elif isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        out.append(b"S%d:" % len(data) + data)
    elif isinstance(value, bytes):
        out.append(b"Y%d:" % len(value) + value)
    elif isinstance(value, torch.Tensor):
        flat = value.detach().to("cpu").contiguous().reshape(-1)
        head = f"{str(flat.dtype).removeprefix('torch.')}{list(value.shape)}".encode()
        out.append(b"X%d:" % len(head) + head)
        out.append(flat.view(torch.uint8).numpy().tobytes())
    elif isinstance(value, torch.Size):
        out.append(b"Z")
        _canonical(list(value), out)
    elif isinstance(value, (torch.device, torch.dtype)):
        out.append(b"V")
        _canonical(str(value), out)
    elif isinstance(value, dict):
        entries = []
        for key, item in value.items():
            k: list[bytes] = []
            _canonical(key, k)
            entries.append((b"".join(k), item))
        entries.sort(key=lambda e: e[0])
        out.append(b"D%d;" % len(entries))
        for key_bytes, item in entries:
            out.append(key_bytes)
            _canonical(item, out)
    elif isinstance(value, (list, tuple)):
        out.append((b"L%d;" if isinstance(value, list) else b"T%d;") % len(value))
        for item in value:
            _canonical(item, out)
    elif isinstance(value, (set, frozenset)):
        items = []
        for item in value:
            b: list[bytes] = []
            _canonical(item, b)
            items.append(b"".join(b))
        out.append(b"E%d;" % len(items) + b"".join(sorted(items)))
    else:
        raise TypeError(f"a checkpoint cannot hold a {type(value).__qualname__}")


def entry_sha256(value: Any) -> str:
    """Hex SHA-256 of one checkpoint entry's canonical bytes (see :func:`_canonical`): its
    tensors, numbers, strings, lists and dicts (in the order of their sorted keys)."""
    digest = hashlib.sha256()
    parts: list[bytes] = []
    _canonical(value, parts)
    for part in parts:
        digest.update(part)
    return digest.hexdigest()


def checksums(state: dict[str, Any]) -> dict[str, str]:
    """{entry name: :func:`entry_sha256`} for every entry of a checkpoint but the checksums."""
    return {str(key): entry_sha256(state[key]) for key in sorted(state, key=str)
            if key != CHECKSUMS}


# What each entry of a translator's checkpoint is, in words, for the message that names it.
ENTRY_WORDS = {
    "model": "weights", "model_config": "model configuration",
    "src_vocab": "source vocabulary", "tgt_vocab": "target vocabulary",
    "src_text": "source tokenizer settings", "tgt_text": "target tokenizer settings",
    "optimizer": "optimiser state", "scheduler": "learning-rate schedule",
    "epoch": "epoch count", "epochs": "planned epochs", "per_rank": "random states",
    "history": "training history", "train_config": "training configuration",
    "corpus": "training data description", "format": "format",
    WEIGHTS_HASH: "weights checksum", STATE_HASH: "training state checksum",
}


def _altered(state: dict[str, Any]) -> list[str]:
    """The entries of a loaded checkpoint that differ from its stored checksums, in words."""
    stored = state[CHECKSUMS]
    now = checksums(state)
    names = sorted(set(stored) | set(now))
    changed = [n for n in names if stored.get(n) != now.get(n)]
    words = []
    for name in changed:
        what = f"{ENTRY_WORDS[name]} ({name})" if name in ENTRY_WORDS else f"entry {name!r}"
        if name not in stored:
            words.append(f"its {what} is not among the entries its checksums list")
        elif name not in now:
            words.append(f"its {what} is missing")
        else:
            words.append(f"its {what} does not match its checksum")
    return words


def checkpoint_verified(state: dict[str, Any]) -> bool:
    """Whether a loaded checkpoint carried a checksum of its entries (checked on load);
    every checkpoint :func:`load_checkpoint` returns does."""
    return CHECKSUMS in state or WEIGHTS_HASH in state


def _weights_of(state: dict[str, Any]) -> Any:
    """The state's weights (its ``"model"`` entry) when it is a state dict of tensors."""
    model = state.get("model")
    if isinstance(model, dict) and model and all(isinstance(v, torch.Tensor)
                                                 for v in model.values()):
        return model
    return None


def special_mode(mode: int) -> str | None:
    """What a file of stat ``mode`` is when it is a FIFO, a device or a socket; else None."""
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return None


def file_kind(path: str | os.PathLike[str]) -> str | None:
    """What ``path`` is when it cannot be a checkpoint, in a few words ("a directory", "a
    named pipe (FIFO)", "an empty file", "a text file", "a PNG image", ...); None for a
    regular file that starts as a zip archive (a checkpoint, or another zip). Never opens
    anything but a regular file, so a FIFO never blocks."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):  # (a file where a folder should be)
        return "missing"
    except OSError as e:
        return f"a path that cannot be read ({(e.strerror or str(e)).lower()})"
    if stat.S_ISDIR(mode):
        return "a directory"
    special = special_mode(mode)
    if special is not None:
        return special
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        return f"a file that cannot be read ({(e.strerror or str(e)).lower()})"
    if head.startswith(_ZIP):
        return None
    if not head:
        return "an empty file"
    for magic, kind in _KINDS:
        if head.startswith(magic):
            return kind
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "a text file (UTF-16)"
    if b"\0" in head:
        return "a binary file"
    try:
        head.decode("utf-8")
        return "a text file"
    except UnicodeDecodeError as e:
        if e.start > len(head) - 4 and len(head) == 4096:  # a character cut at the sample's end
            return "a text file"
    return "a binary file"


def _serialized(state: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def _write_all(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` with Python's own writes: a failure is an OSError that
    names its cause (ENOSPC, EFBIG, EDQUOT, EIO)."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def save_checkpoint(path: str | os.PathLike[str], state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically: a temporary file in the same folder, then rename.

    Only what :func:`load_checkpoint` can read back is written: NumPy numbers and arrays are
    stored as Python numbers and tensors, and any other object is a TypeError naming its key,
    before the file is touched. Every entry's :func:`entry_sha256` is stored (``"sha256"``),
    and a state with weights (a ``"model"`` state dict) also stores their
    :func:`weights_sha256`; :func:`load_checkpoint` checks both. A failed write (a full
    disk) is an OSError that says why, and leaves an earlier file at ``path`` as it was.
    """
    state = _loadable({"format": CHECKPOINT_FORMAT, **state}, "state")
    weights = _weights_of(state)
    if weights is not None:
        state[WEIGHTS_HASH] = weights_sha256(weights)
        state[STATE_HASH] = state_sha256(state)
    state[CHECKSUMS] = checksums(state)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        try:
            torch.save(state, tmp)
        except RuntimeError:
            # torch's zip writer reports a failed write without its cause ("unexpected pos"):
            # write the same bytes again with Python, which says why (or succeeds).
            _write_all(tmp, _serialized(state))
        # mkstemp makes the file private (0600); a checkpoint gets a new file's usual mode.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)  # atomic on POSIX: readers see the old file or the new one
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_checkpoint(path: str | os.PathLike[str], map_location: str | torch.device = "cpu"
                    ) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (tensors and plain data only).

    FileNotFoundError for a missing file; ValueError, in one line naming the file, for
    anything else that is not a readable labformer checkpoint: a directory, a FIFO, a text
    file or an image, a damaged archive, a file written by an earlier format, and any entry
    (weights, vocabularies, configuration, special tokens, training state) that no longer
    matches the checksum stored with it, named in the message.
    """
    path = Path(path)
    kind = file_kind(path)
    if kind == "missing":
        raise FileNotFoundError(f"checkpoint not found: {path}")
    if kind is not None:
        raise ValueError(f"cannot read checkpoint {path}: it is {kind}, not a labformer "
                         f"checkpoint (a zip archive written by labformer train): the wrong "
                         f"file, or a corrupt one")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # torch raises several types for truncated or foreign files
        raise ValueError(f"cannot read checkpoint {path}: the file is corrupt or not a "
                         f"labformer checkpoint ({type(e).__name__}: {_reason(e)})") from None
    if not isinstance(state, dict) or "format" not in state:
        raise ValueError(f"{path} is not a labformer checkpoint (format {CHECKPOINT_FORMAT})")
    if state["format"] != CHECKPOINT_FORMAT:
        if state["format"] == "labformer-checkpoint-1":
            raise ValueError(f"{path} was written by an earlier labformer (format "
                             f"labformer-checkpoint-1, whose checksum covers only its "
                             f"tensors); this version reads only checkpoints whose every entry "
                             f"is checked ({CHECKPOINT_FORMAT}): train it again")
        raise ValueError(f"{path} is a checkpoint of another labformer version (format "
                         f"{state['format']!r}; this version reads {CHECKPOINT_FORMAT})")
    if not isinstance(state.get(CHECKSUMS), dict):
        raise ValueError(f"{path} is damaged: it holds no checksums of its entries (labformer "
                         f"writes them with every checkpoint; the file changed after it was "
                         f"written); use a copy or train it again")
    try:
        altered = _altered(state)
    except TypeError as e:
        altered = [f"it holds what no checksum covers ({e})"]
    if altered:
        raise ValueError(f"{path} is damaged: {', '.join(altered)} (the file changed after "
                         f"labformer wrote it); use a copy or train it again")
    problem = _invalid_entry(state)
    if problem:
        raise ValueError(f"{path} is not a checkpoint labformer wrote: {problem} (a file edited "
                         f"by hand?); use a copy or train it again")
    weights = _weights_of(state)
    if WEIGHTS_HASH in state and (weights is None
                                  or weights_sha256(weights) != state[WEIGHTS_HASH]):
        raise ValueError(f"{path} is damaged: its weights do not match the checksum "
                         f"stored with them (the file changed after labformer wrote it); "
                         f"use a copy or train it again")
    return state


def _whole(value: Any, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _invalid_entry(state: dict[str, Any]) -> str | None:
    """What is wrong with the entries every labformer checkpoint writes in one shape (the
    epochs, the vocabularies, the model's configuration), in words; None when nothing is."""
    if "epoch" in state and not _whole(state["epoch"], 0):
        return f"its epoch is {state['epoch']!r}, not a whole number from 0"
    if "epochs" in state and not _whole(state["epochs"], 1):
        return f"its planned epochs are {state['epochs']!r}, not a whole number from 1"
    if "epoch" in state and "epochs" in state and state["epoch"] >= state["epochs"]:
        return (f"it was saved after epoch {state['epoch'] + 1} of a run of "
                f"{state['epochs']} epochs")
    for key in ("src_vocab", "tgt_vocab"):
        if key not in state:
            continue
        vocab = state[key]
        tokens = vocab.get("tokens") if isinstance(vocab, dict) else None
        if not isinstance(tokens, list):
            return f"its {key} holds no list of tokens"
        for i, token in enumerate(tokens):
            if not isinstance(token, str) or not token:
                return f"token {i} of its {key} is {token!r}, not a word"
        if len(set(tokens)) != len(tokens):
            return f"its {key} lists a token twice"
        specials = vocab.get("specials", [])
        if not isinstance(specials, list) or not all(isinstance(t, str) for t in specials):
            return f"the special tokens of its {key} are {specials!r}, not a list of words"
    config = state.get("model_config")
    if config is not None:
        if not isinstance(config, dict):
            return "its model configuration is not a table of settings"
        for name, value in config.items():
            if isinstance(value, int) and not isinstance(value, bool) and value < 0:
                return f"its model configuration's {name} is {value}"
    return None


def _reason(error: Exception) -> str:
    """The telling line of torch.load's error (its weights_only message is a page long, and
    its advice to load with weights_only=False is not for a file that fails here)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    for line in lines:
        if line.startswith("WeightsUnpickler error:"):
            return line[:200]
    lines = [line for line in lines if "weights_only" not in line]
    return lines[0][:200] if lines else "no readable message"


def _token_mean(logits: torch.Tensor, tgt_out: torch.Tensor, smoothing: float, pad_id: int,
                world: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss to differentiate, loss to log): the mean over every real token of the step.

    Under DDP each rank sums its own tokens' losses and divides by the token count of the
    whole global batch (an all-reduce), times world_size because DDP averages the gradients:
    a rank with few tokens weighs as many tokens as it has, not 1/world_size of the step.
    The logged value is the same mean, all-reduced, so every rank logs the global loss.
    """
    loss_sum = label_smoothed_cross_entropy(logits, tgt_out, smoothing=smoothing,
                                            ignore_index=pad_id, reduction="sum")
    tokens = (tgt_out != pad_id).sum().clamp(min=1)  # as the "mean" reduction counts them
    if world == 1:
        loss = loss_sum / tokens
        return loss, loss.detach()
    summed = torch.stack([loss_sum.detach().float(), tokens.float()])
    dist.all_reduce(summed)  # [sum of every rank's token losses, every rank's tokens]
    total_tokens = summed[1].clamp(min=1)
    return loss_sum * world / total_tokens, summed[0] / total_tokens


def _right_padded(tgt_in: torch.Tensor, pad_id: int) -> bool:
    """Whether PAD only ever follows real tokens in each row (False for a tensor that is not
    on the CPU: reading it would wait for the device)."""
    if tgt_in.device.type != "cpu":
        return False
    pad = tgt_in == pad_id
    return not bool((pad[:, :-1] & ~pad[:, 1:]).any())


def _epoch_order(num_batches: int, seed: int, epoch: int) -> list[int]:
    # The order depends only on (seed, epoch), so a resumed run sees the same batches.
    g = torch.Generator().manual_seed(seed * 100_003 + epoch)
    return torch.randperm(num_batches, generator=g).tolist()


def _restores_global_rng(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run ``fn`` in a fork of torch's global random state (CPU, and the training GPU).

    Dropout draws from the global generator (``nn.Dropout`` takes no generator), so training
    seeds it; the fork gives the caller's state back afterwards, as if training drew nothing.
    """
    @functools.wraps(fn)
    def forked(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        device = kwargs.get("device", "auto")
        device = pick_device(device) if isinstance(device, str) else device
        gpus: list[int] = []
        if isinstance(device, torch.device) and device.type == "cuda":
            world = int(os.environ.get("WORLD_SIZE", "1"))
            gpus = [int(os.environ.get("LOCAL_RANK", "0")) if world > 1
                    else device.index if device.index is not None
                    else torch.cuda.current_device()]
        with torch.random.fork_rng(devices=gpus):
            return fn(*args, **kwargs)
    return forked


@_restores_global_rng
def train(
    model: nn.Module,
    batches: Sequence[Any],
    config: TrainConfig = TrainConfig(),
    *,
    valid_fn: Callable[[nn.Module], float] | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    resume: bool = False,
    extra_state: dict[str, Any] | None = None,
    device: str | torch.device = "auto",
    progress: bool | None = None,
    valid_every: int = 1,
    on_epoch: Callable[[int, int, History], None] | None = None,
    on_step: Callable[[int, float, float | None], None] | None = None,
    save_every: float = 0.0,
) -> History:
    """Train ``model`` on ``batches`` (objects with src, tgt_in, tgt_out).

    The run lasts config.epochs, or more epochs on small data to reach config.min_steps
    (:func:`planned_schedule`). Under torchrun each optimiser step takes one batch on every
    process: a global batch of world_size batches, and world_size times fewer steps per epoch.
    valid_fn(model) -> score is called after every ``valid_every``-th epoch and after the last
    (e.g. validation BLEU). on_epoch(epoch, epochs, history), 1-based, is called on rank 0
    after each epoch (and its checkpoint), e.g. to print a line. on_step(step, lr, loss), on
    rank 0 after each optimiser step (step counted from 1 over the run), e.g. for a progress
    bar: loss is the step's loss every LOG_EVERY steps and None otherwise (reading it every
    step would make the host wait for a GPU).
    checkpoint: written after every epoch (by rank 0, with every rank's random state), or with
    ``save_every`` > 0 after the first and the last epoch and in between at most once every
    ``save_every`` seconds and every quarter of the run (a run of many short epochs would
    otherwise write its size again every epoch: at most 6 saves); with
    resume=True and an existing file, training continues from the epoch after the saved one.
    The file records the planned epochs too (``"epochs"``): ``epoch + 1 < epochs`` is a run
    that did not finish its schedule (see :func:`checkpoint_unfinished`).
    extra_state (e.g. vocabularies) is stored alongside. progress: a tqdm bar; None shows it
    only when stderr is a terminal.
    """
    if len(batches) == 0:
        raise ValueError("no training batches: the training set is empty")
    if valid_every < 1:
        raise ValueError(f"valid_every must be >= 1, got {valid_every}")
    from tqdm import tqdm  # the plain bar: tqdm.auto warns in Jupyter without ipywidgets

    pad_id = _pad_id(model)
    device = pick_device(device) if isinstance(device, str) else device
    rank, world = setup_distributed("nccl" if device.type == "cuda" else "gloo")
    if world > 1 and device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
        torch.cuda.set_device(device)  # before any NCCL collective
    # Dropout differs between ranks; the batch order does not depend on the RNG at all. The
    # caller's random state comes back on return (_restores_global_rng).
    torch.manual_seed(config.seed + rank)
    model.to(device)
    steps = len(batches) // world  # equal step counts keep the ranks in lockstep
    if steps == 0:
        raise ValueError(f"{len(batches)} batches cannot be shared among {world} processes")
    epochs, warmup = planned_schedule(config, steps)
    optimizer = torch.optim.AdamW(
        optimizer_groups(model, config.weight_decay), lr=config.lr, betas=config.betas
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda i: lr_factor(i + 1, warmup, config.warmup, decay=config.decay,
                                       total_steps=epochs * steps)
    )
    history, start_epoch = History(), 0
    if resume and checkpoint is not None and Path(checkpoint).is_file():
        # On the CPU: the RNG states must be CPU tensors; weights and Adam's moments are copied
        # to the parameters' device by load_state_dict.
        state = load_checkpoint(checkpoint, map_location="cpu")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        start_epoch = state["epoch"] + 1
        saved = state.get("per_rank") or [  # an older file: one CPU state, rank 0's
            {"rng": {"cpu": state["rng"]}, "history": state["history"]}]
        if len(saved) != world:
            warnings.warn(f"{checkpoint} was written by {len(saved)} process(es), resumed "
                          f"by {world}: training continues, but not exactly as one run would",
                          stacklevel=2)
        if rank < len(saved):
            history = History.from_dict(saved[rank]["history"])
            _set_rng_state(saved[rank]["rng"], device)
        else:
            history = History.from_dict(state["history"])
    # Checked once, on the host copies: which batches' targets are right-padded, for a model
    # that can use it (Transformer.forward's tgt_is_causal).
    takes_causal = "tgt_is_causal" in inspect.signature(model.forward).parameters
    causal = [takes_causal and _right_padded(b.tgt_in, pad_id) for b in batches]
    net = model
    if world > 1:
        net = nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )
    tty = sys.stderr.isatty()
    show = (tty if progress is None else progress) and rank == 0
    last_save, last_saved_epoch = time.monotonic(), start_epoch - 1
    for epoch in range(start_epoch, epochs):
        net.train()
        order = _epoch_order(len(batches), config.seed, epoch)[rank::world][:steps]
        # Off a terminal (a notebook, a log file) every redraw is kept: redraw rarely there.
        bar = tqdm(order, desc=f"epoch {epoch + 1}/{epochs}", disable=not show,
                   leave=False, unit="batch", mininterval=0.1 if tty else 15.0, ncols=80)
        started = time.perf_counter()
        # Per-step values stay on the device and are read once per epoch (and for the bar
        # every LOG_EVERY steps): a read per step would make the host wait for the GPU.
        losses: list[torch.Tensor] = []
        norms: list[torch.Tensor] = []
        for n, i in enumerate(bar, start=1):
            b = batches[i]
            src, tgt_in, tgt_out = b.src.to(device), b.tgt_in.to(device), b.tgt_out.to(device)
            # A right-padded target needs no (B, 1, T, T) mask: the causal kernels suffice.
            logits = net(src, tgt_in, tgt_is_causal=True) if causal[i] else net(src, tgt_in)
            loss, logged = _token_mean(logits, tgt_out, config.label_smoothing, pad_id, world)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            # With max_norm = inf the gradients are only measured (scaled by exactly 1).
            norm = nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm or math.inf)
            norms.append(norm.detach())
            history.step_lr.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            scheduler.step()
            losses.append(logged)
            read = n % LOG_EVERY == 0 and (show or on_step is not None)
            value = logged.item() if read else None
            if show and value is not None:
                bar.set_postfix(loss=f"{value:.3f}", refresh=False)
            if on_step is not None and rank == 0:
                on_step(len(history.step_lr), history.step_lr[-1], value)
        bar.close()
        step_losses = torch.stack(losses).tolist()
        history.step_grad_norm.extend(torch.stack(norms).tolist())
        history.step_loss.extend(step_losses)
        history.epoch_loss.append(sum(step_losses) / steps)
        due = (epoch + 1) % valid_every == 0 or epoch + 1 == epochs
        if valid_fn is not None and rank == 0 and due:
            model.eval()
            with torch.no_grad():
                history.valid_score.append(float(valid_fn(model)))
            history.valid_epoch.append(epoch + 1)
        history.epoch_seconds.append(time.perf_counter() - started)
        if show:
            score = (f", valid {history.valid_score[-1]:.2f}"
                     if history.valid_epoch and history.valid_epoch[-1] == epoch + 1 else "")
            tqdm.write(f"epoch {epoch + 1}: loss {history.epoch_loss[-1]:.3f}{score}",
                       file=sys.stderr)
        # With save_every: the first and last epochs, and in between at most one save every
        # save_every seconds and every quarter of the run (at most 6 saves, however slow).
        save = checkpoint is not None and (
            epoch in (start_epoch, epochs - 1) or save_every <= 0
            or (time.monotonic() - last_save >= save_every
                and epoch - last_saved_epoch >= epochs / 4))
        if checkpoint is not None and world > 1:
            save = _rank0_decides(save, device)  # clocks differ: every rank saves or none
        if save:
            # Each rank draws its own dropout masks: every rank's RNG goes into the one file.
            per_rank = _gather({"rng": _rng_state(device),
                                "history": dataclasses.asdict(history)}, rank, world)
        if save and checkpoint is not None and rank == 0:
            save_checkpoint(checkpoint, {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "epoch": epoch,
                "epochs": epochs,  # the planned schedule: fewer saved epochs is unfinished
                "per_rank": per_rank,  # [rank] -> {"rng": {"cpu", "cuda"?}, "history"}
                "history": dataclasses.asdict(history),
                "train_config": dataclasses.asdict(config),
                **(extra_state or {}),
            })
            last_save, last_saved_epoch = time.monotonic(), epoch
        if on_epoch is not None and rank == 0:
            on_epoch(epoch + 1, epochs, history)
        if world > 1:
            dist.barrier()
    model.eval()
    return history
