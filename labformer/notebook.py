"""One call at the top of every chapter: reproducible seeds, compact printing, one plot style."""

from __future__ import annotations

import random

import numpy as np
import torch

__all__ = ["setup_notebook"]


def setup_notebook(seed: int = 0, precision: int = 4) -> None:
    """Seed Python, NumPy and torch; set print precision and the book's plot style."""
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
