"""What a computation costs, measured rather than counted by hand (chapter 2).

Both read PyTorch's autograd: what it saves for the backward pass, and how long the chain of
operations behind an output is. A chapter calls them around the layers it compares.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def saved_bytes(fn: Callable[[torch.Tensor], object], x: torch.Tensor) -> int:
    """Bytes of the tensors autograd saves for the backward pass of fn(x)."""
    total = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(x)
    return total


def graph_depth(out: torch.Tensor) -> int:
    """Longest chain of autograd nodes behind ``out``: operations that must
    run one after another, however many processors there are."""
    order: list[Any] = []
    seen: set[Any] = set()
    stack: list[tuple[Any, bool]] = [(out.grad_fn, False)]
    # iterative depth-first search: the GRU's graph is thousands deep
    while stack:
        node, finished = stack.pop()
        if finished:
            order.append(node)  # every input of ``node`` is already in order
        elif node is not None and node not in seen:
            seen.add(node)
            stack.append((node, True))
            stack.extend((child, False) for child, _ in node.next_functions)
    depth: dict[Any, int] = {}
    for node in order:
        inputs = [depth[c] for c, _ in node.next_functions if c is not None]
        depth[node] = 1 + max(inputs, default=0)
    return depth[out.grad_fn] if out.grad_fn is not None else 0
