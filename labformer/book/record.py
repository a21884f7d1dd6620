"""Recording the attention weights of a model during a forward pass, for the book's pictures.

``with record_attention(model) as maps: model(src, tgt)`` fills ``maps`` with the weights
(B, h, T_q, T_k) of every :class:`~labformer.multihead.MultiHeadAttention` in ``model``,
grouped-query attention included, under the module's name (``"decoder.layers.0.cross_attn"``).
Hooks do it from outside the model: each attention is asked for its weights (taking the
explicit path, even where the layer asked for PyTorch's fused kernel with ``need_weights=False``),
and the caller gets back what it asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

from labformer.multihead import MultiHeadAttention

__all__ = ["record_attention"]


@contextmanager
def record_attention(model: nn.Module) -> Iterator[dict[str, Tensor]]:
    """Collect the attention weights of every MultiHeadAttention in ``model`` during the block.

    Yields a dict filled on each forward, ``{module name: weights (B, h, T_q, T_k)}``, e.g.
    ``maps["decoder.layers.0.cross_attn"]``. The weights are detached; the outputs are those
    of the explicit path (``need_weights=True``) whatever the caller asked.
    """
    maps: dict[str, Tensor] = {}
    names: dict[nn.Module, str] = {
        m: n for n, m in model.named_modules() if isinstance(m, MultiHeadAttention)}
    asked: dict[nn.Module, bool] = {}  # whether the caller itself wanted the weights

    def ask_for_weights(module: nn.Module, args: tuple[Any, ...],
                        kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        asked[module] = kwargs.get("need_weights", True)
        return args, {**kwargs, "need_weights": True}

    def keep_weights(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                     output: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor | None]:
        out, weights = output
        maps[names[module]] = weights.detach()
        return out, weights if asked.pop(module) else None

    handles: list[RemovableHandle] = []
    for m in names:
        handles.append(m.register_forward_pre_hook(ask_for_weights, with_kwargs=True))
        handles.append(m.register_forward_hook(keep_weights, with_kwargs=True))
    try:
        yield maps
    finally:
        for handle in handles:
            handle.remove()
