"""Plot helpers return Figures with what they were given, and reject what does not fit."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from labformer.plot import attention_heads, attention_heatmap, training_curves  # noqa: E402


def test_heatmap_draws_the_weights_with_labels():
    w = torch.tensor([[0.9, 0.1, 0.0], [0.2, 0.3, 0.5]])
    fig = attention_heatmap(w, ["a", "b"], ["x", "y", "z"], title="t", annotate=True)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y", "z"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    drawn = ax.collections[0].get_array().reshape(2, 3)
    np.testing.assert_allclose(drawn, w.numpy())
    assert ax.get_title() == "t"


def test_heatmap_rejects_bad_shapes_and_labels():
    with pytest.raises(ValueError, match=r"\(3,\)"):
        attention_heatmap(np.ones(3))
    with pytest.raises(ValueError, match="1 queries labels"):
        attention_heatmap(np.ones((2, 2)), ["a"], ["x", "y"])


def test_heads_one_panel_per_head_and_blank_rest():
    fig = attention_heads(torch.rand(3, 4, 5), cols=2, title="heads")
    panels = [ax for ax in fig.axes if ax.axison]
    assert len(panels) == 3 and len(fig.axes) == 4
    assert [ax.get_title() for ax in panels] == ["head 0", "head 1", "head 2"]
    with pytest.raises(ValueError, match=r"\(4, 5\)"):
        attention_heads(torch.rand(4, 5))


def test_training_curves_smooths_and_labels():
    fig = training_curves({"a": [4.0, 2.0, 0.0, 2.0], "b": [1.0, 1.0]}, smooth=2, logy=True)
    ax = fig.axes[0]
    lines = {line.get_label(): line.get_ydata() for line in ax.get_lines()}
    np.testing.assert_allclose(lines["a"], [3.0, 1.0, 1.0])
    np.testing.assert_allclose(lines["b"], [1.0])
    assert ax.get_yscale() == "log"
    with pytest.raises(ValueError, match="no curves"):
        training_curves({})
    with pytest.raises(ValueError, match="smooth"):
        training_curves({"a": [1.0]}, smooth=0)
