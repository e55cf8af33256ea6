"""mixers.plot checks its numbers, flags and names where they enter, naming them.

(tests/test_plot.py checks what the figures show; this file only that a bad argument is refused
instead of drawing a silently wrong figure.)
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from mixers import plot  # noqa: E402

NAN = float("nan")
RUN = {"steps": [0, 10], "val_loss": [2.0, 1.5], "train_loss": [2.1, 1.6]}


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize(
    "call, error, match",
    [
        # spatial_weights(vmax=-1) silently drew [-1, 1]; diagonal_profile(max_offset=-3) cropped from the end;
        # benchmark_curves(mode="backward") drew every implementation as "n/a"; bin_size past the curve drew nothing.
        (
            lambda: plot.spatial_weights(torch.randn(4, 4), vmax=-1.0),
            ValueError,
            "vmax must be a positive finite float",
        ),
        (
            lambda: plot.spatial_weights(torch.randn(4, 4), vmax=NAN),
            ValueError,
            "vmax",
        ),
        (
            lambda: plot.spatial_weights(torch.randn(2, 4, 4), titles=["one"]),
            ValueError,
            r"titles must be one per panel \(2\)",
        ),
        (
            lambda: plot.diagonal_profile(
                {"w": [1.0, 0.5, 0.2]}, max_offset=-3
            ),
            ValueError,
            "max_offset",
        ),
        (
            lambda: plot.benchmark_curves(
                [{"length": 8, "implementations": {"a": {}}}], mode="backward"
            ),
            ValueError,
            r"mode must be one of \('forward', 'forward_backward'\)",
        ),
        (
            lambda: plot.per_position_curves(
                {"a": [1.0] * 10}, 8, bin_size=16
            ),
            ValueError,
            "bin_size=16 is longer",
        ),
        (
            lambda: plot.per_position_curves({"a": [1.0] * 10}, 8, bin_size=0),
            ValueError,
            "bin_size",
        ),
        (
            lambda: plot.per_position_curves({"a": [1.0] * 10}, 0),
            ValueError,
            "train_length",
        ),
        (
            lambda: plot.extrapolation_curves(
                {"a": [{"length": 8, "loss": 1.0}]}, 8.5
            ),
            TypeError,
            "train_length",
        ),
        (
            lambda: plot.extrapolation_curves(
                {"a": [{"length": 8, "loss": 1.0}]}, 8, perplexity="no"
            ),
            TypeError,
            "perplexity must be a bool",
        ),
        (
            lambda: plot.gate_surface("gelu", extent=0.0),
            ValueError,
            "extent must be a positive finite float",
        ),
        (
            lambda: plot.gate_surface("gelu", points=1),
            ValueError,
            "points must be an int >= 2",
        ),
        (lambda: plot.gate_surface("gelu", vmax=0.0), ValueError, "vmax"),
        (
            lambda: plot.gate_surface("gelu", gated="no"),
            TypeError,
            "gated must be a bool",
        ),
        (
            lambda: plot.activation_curves(["relu"], z_range=(4.0, -4.0)),
            ValueError,
            "z_range must be two finite floats",
        ),
        (
            lambda: plot.activation_curves(["relu"], z_range=(-4.0, NAN)),
            ValueError,
            r"z_range\[1\]",
        ),
        (
            lambda: plot.activation_curves("relu"),
            TypeError,
            "names must be a sequence",
        ),
        (
            lambda: plot.activation_curves(["relu"], points=2.5),
            TypeError,
            "points",
        ),
        (
            lambda: plot.loss_bands({"a": [RUN]}, metric="loss"),
            ValueError,
            "metric must be one of",
        ),
        (
            lambda: plot.loss_curves({"a": RUN}, train="no"),
            TypeError,
            "train must be a bool",
        ),
        (
            lambda: plot.heatmap(torch.randn(3, 4), colorbar="no"),
            TypeError,
            "colorbar must be a bool",
        ),
        (
            lambda: plot.attention_heads(
                torch.rand(2, 3, 3), titles=["a", "b", "c"]
            ),
            ValueError,
            "titles",
        ),
        (
            lambda: plot.bias_heads(torch.randn(2, 3, 3), titles="ab"),
            ValueError,
            "titles",
        ),
        (
            lambda: plot.alibi_slope_grid(annotate=1),
            TypeError,
            "annotate must be a bool",
        ),
        (lambda: plot.style(-1), ValueError, "i must be a non-negative int"),
        (lambda: plot.style(1.0), TypeError, "i"),
        (lambda: plot.style(0, markers="no"), TypeError, "markers"),
        (
            lambda: plot.panel_grid(0, (3.0, 3.0)),
            ValueError,
            "count must be a positive int",
        ),
        (
            lambda: plot.panel_grid(2, (0.0, 3.0)),
            ValueError,
            r"size\[0\] must be a positive finite float",
        ),
        (
            lambda: plot.panel_grid(2, 3.0),
            ValueError,
            "size must be two positive floats",
        ),
        (lambda: plot.panel_grid(2, (3.0, 3.0), pad=-1.0), ValueError, "pad"),
    ],
)
def test_bad_arguments_are_refused_naming_them(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_valid_arguments_still_draw():
    plot.spatial_weights(torch.randn(2, 4, 4), vmax=0.5, titles=["a", "b"])
    plot.diagonal_profile({"w": [1.0, 0.5, 0.2]}, max_offset=0)
    plot.per_position_curves({"a": [1.0] * 16, "b": None}, 8, bin_size=16)
    fig, axes = plot.panel_grid(3, (2, 2), pad=0)
    assert len(axes) == 3
