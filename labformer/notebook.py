"""One call at the top of every chapter: reproducible seeds, compact printing, one plot style."""

from __future__ import annotations

import random

import numpy as np
import torch

__all__ = ["setup_notebook"]


def setup_notebook(seed: int = 0, precision: int = 4, threads: int | None = 1) -> None:
    """Seed Python, NumPy and torch; set print precision, torch's threads and the plot style.

    The book's models are small: on them a second thread costs more in start-up and waiting
    than it saves, and one thread gives the same numbers on every machine. ``threads=None``
    keeps torch's default.
    """
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be a positive int or None, got {threads}")
        torch.set_num_threads(threads)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_printoptions(precision=precision, sci_mode=False)
    np.set_printoptions(precision=precision, suppress=True)
    # Imported here so that models never depend on a plotting library.
    import matplotlib
    import seaborn as sns

    sns.set_theme(context="notebook", style="whitegrid", palette="deep")
    matplotlib.rcParams.update({"figure.dpi": 110, "savefig.dpi": 110, "figure.figsize": (6, 4)})
