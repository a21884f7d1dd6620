"""Figures the chapters share: attention heatmaps and training curves.

Every function returns a ``matplotlib.figure.Figure`` (or draws on the ``ax`` it is given) and
knows nothing about models: it takes tensors or arrays and labels. matplotlib and seaborn are
imported here only, so the models never depend on a plotting library.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

__all__ = ["attention_heads", "attention_heatmap", "training_curves"]


def _figure(ax: Axes) -> Figure:
    fig = ax.get_figure(root=True)
    if fig is None:
        raise ValueError("the axes belong to no figure")
    return fig


def _as_matrix(weights: torch.Tensor | np.ndarray, name: str = "weights") -> np.ndarray:
    w = weights.detach().cpu().float().numpy() if isinstance(weights, torch.Tensor) else weights
    w = np.asarray(w, dtype=float)
    if w.ndim != 2:
        raise ValueError(f"{name} must be a (T_q, T_k) matrix, got shape {w.shape}")
    return w


def attention_heatmap(
    weights: torch.Tensor | np.ndarray,
    queries: Sequence[str] | None = None,
    keys: Sequence[str] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    annotate: bool = False,
    cbar: bool = True,
) -> Figure:
    """Heatmap of one (T_q, T_k) weight matrix: a row per query, a column per key."""
    w = _as_matrix(weights)
    for labels, size, what in ((queries, w.shape[0], "queries"), (keys, w.shape[1], "keys")):
        if labels is not None and len(labels) != size:
            raise ValueError(f"{len(labels)} {what} labels for a weight matrix of shape {w.shape}")
    if ax is None:
        _, ax = plt.subplots(figsize=(0.45 * w.shape[1] + 2.2, 0.4 * w.shape[0] + 1.2))
    sns.heatmap(
        w, ax=ax, cmap="viridis", vmin=0.0, vmax=max(float(w.max()), 1e-9), square=False,
        annot=annotate, fmt=".2f", cbar=cbar, annot_kws={"fontsize": 7},
        xticklabels=list(keys) if keys is not None else "auto",
        yticklabels=list(queries) if queries is not None else "auto",
    )
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.tick_params(axis="x", labelrotation=90)
    ax.tick_params(axis="y", labelrotation=0)
    if title:
        ax.set_title(title)
    return _figure(ax)


def attention_heads(
    weights: torch.Tensor | np.ndarray,
    queries: Sequence[str] | None = None,
    keys: Sequence[str] | None = None,
    *,
    cols: int = 4,
    title: str | None = None,
) -> Figure:
    """One heatmap per head of (h, T_q, T_k) weights, on a shared colour scale."""
    w = weights.detach().cpu().float().numpy() if isinstance(weights, torch.Tensor) else weights
    w = np.asarray(w, dtype=float)
    if w.ndim != 3:
        raise ValueError(f"weights must be (h, T_q, T_k), got shape {w.shape}")
    h = w.shape[0]
    cols = min(cols, h)
    rows = -(-h // cols)  # ceiling division
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.0 * rows), squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i >= h:
            ax.axis("off")
            continue
        attention_heatmap(w[i], queries, keys, ax=ax, title=f"head {i}", cbar=False)
        if i % cols:
            ax.set_ylabel("")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def training_curves(
    curves: Mapping[str, Sequence[float]],
    *,
    xlabel: str = "step",
    ylabel: str = "loss",
    ax: Axes | None = None,
    logy: bool = False,
    smooth: int = 1,
) -> Figure:
    """Line plot of named curves (e.g. {"Post-LN": losses, ...}); ``smooth`` = moving average."""
    if not curves:
        raise ValueError("no curves to plot")
    if smooth < 1:
        raise ValueError(f"smooth must be >= 1, got {smooth}")
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.6))
    for name, ys in curves.items():
        y = np.asarray(ys, dtype=float)
        if smooth > 1 and len(y) >= smooth:
            y = np.convolve(y, np.ones(smooth) / smooth, mode="valid")
        ax.plot(np.arange(len(y)) + (smooth - 1 if len(y) < len(ys) else 0), y, label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    ax.legend()
    return _figure(ax)
