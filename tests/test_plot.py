"""The shared figures show what they are given: each function draws small known inputs, and the
test reads back the plotted data (line data, image arrays, colour limits, labels, panels).

Inputs are chosen so that a wrong picture cannot pass: matrices are not square (a transposed
image has the wrong shape) and not symmetric, every head or run differs from the others (a
swapped or repeated one is seen), and no expected curve is all zeros.
"""

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402
from matplotlib.contour import ContourSet  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from mixers import plot  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def looks(lines):
    return [
        (line.get_linestyle(), line.get_marker())
        for line in lines
        if line.get_label()[:1] != "_"
    ]


def curves(ax):
    """Label -> (x, y) of each labelled line, in drawing order (reference lines are unlabelled)."""
    return {
        line.get_label(): xy(line)
        for line in ax.lines
        if line.get_label()[:1] != "_"
    }


def xy(line):
    """A line's data as float arrays (``errorbar`` keeps its points as objects)."""
    return np.asarray(line.get_xdata(), float), np.asarray(
        line.get_ydata(), float
    )


def line(ax, label):
    return next(line for line in ax.lines if line.get_label() == label)


def ticks(labels):
    return [label.get_text() for label in labels]


def vertical_lines(ax):
    """The x of each unlabelled vertical reference line (``axvline``)."""
    return [
        line.get_xdata()[0]
        for line in ax.lines
        if line.get_label()[:1] == "_"
        and len(set(line.get_xdata())) == 1
        and len(line.get_xdata()) == 2
    ]


def colorbar_of(image):
    assert image.colorbar is not None, "the image has no colour bar"
    return image.colorbar


def run(offset):
    steps = list(range(0, 100, 10))
    return {
        "steps": steps,
        "val_loss": [2.0 - s / 100 + offset for s in steps],
        "train_loss": [2.1 - s / 100 + offset for s in steps],
    }


def test_style_differs_in_line_and_marker_for_the_first_eight_curves():
    styles = [plot.style(i) for i in range(8)]
    assert len({(s["linestyle"], s["marker"]) for s in styles}) == 8
    assert len({s["marker"] for s in styles}) == 8
    assert "marker" not in plot.style(0, markers=False)


@pytest.mark.parametrize(
    "draw",
    [
        lambda ax: plot.loss_curves(
            {"a": run(0), "b": run(0.1), "c": run(0.2)}, ax=ax, train=False
        ),
        lambda ax: plot.loss_bands(
            {"a": [run(0), run(0.01)], "b": [run(0.1)], "c": [run(0.2)]}, ax=ax
        ),
        lambda ax: plot.activation_curves(["relu", "gelu", "swish"], ax=ax),
        lambda ax: plot.extrapolation_curves(
            {
                k: [
                    {"length": 64, "loss": 1.0 + i},
                    {"length": 128, "loss": 1.1 + i},
                ]
                for i, k in enumerate("abc")
            },
            train_length=64,
            ax=ax,
        ),
        lambda ax: plot.diagonal_profile(
            {k: [0.1 * i, 0.2, 0.0] for i, k in enumerate("abc")}, ax=ax
        ),
        lambda ax: plot.per_position_curves(
            {k: [float(i)] * 64 for i, k in enumerate("abc")},
            train_length=32,
            ax=ax,
        ),
    ],
    ids=[
        "loss_curves",
        "loss_bands",
        "activation_curves",
        "extrapolation_curves",
        "diagonal_profile",
        "per_position_curves",
    ],
)
def test_curves_of_one_plot_differ_in_more_than_colour(draw):
    _, ax = plt.subplots()
    draw(ax)
    styles = looks(ax.lines)
    assert len(styles) == 3 and len(set(styles)) == 3, styles


# ---- loss curves ----


def test_loss_curves_plot_each_runs_validation_and_training_loss_against_step():
    runs = {"a": run(0.0), "b": run(0.5)}
    fig, ax = plt.subplots()
    plot.loss_curves(runs, ax=ax, title="two runs")
    shown = curves(ax)
    assert list(shown) == ["a (val)", "a (train)", "b (val)", "b (train)"]
    for label, result in runs.items():
        for kind, key in (("val", "val_loss"), ("train", "train_loss")):
            x, y = shown[f"{label} ({kind})"]
            np.testing.assert_allclose(x, result["steps"])
            np.testing.assert_allclose(y, result[key])
        # validation solid, training dashed, in the run's one colour
        assert line(ax, f"{label} (val)").get_linestyle() == "-"
        assert line(ax, f"{label} (train)").get_linestyle() == "--"
        assert (
            line(ax, f"{label} (val)").get_color()
            == line(ax, f"{label} (train)").get_color()
        )
    assert line(ax, "a (val)").get_color() != line(ax, "b (val)").get_color()
    assert ax.get_xlabel() == "step" and "nats" in ax.get_ylabel()
    assert ax.get_title() == "two runs"
    assert ticks(ax.get_legend().get_texts()) == list(shown)
    # The right-hand axis reads the same loss in bits: its limits are the left's divided by ln 2.
    (bits,) = ax.child_axes
    fig.draw_without_rendering()
    assert "bits" in bits.get_ylabel()
    np.testing.assert_allclose(
        bits.get_ylim(), np.array(ax.get_ylim()) / math.log(2)
    )


def test_loss_curves_without_training_show_validation_only():
    _, ax = plt.subplots()
    plot.loss_curves({"a": run(0.0), "b": run(0.5)}, ax=ax, train=False)
    shown = curves(ax)
    assert list(shown) == ["a (val)", "b (val)"]
    np.testing.assert_allclose(shown["b (val)"][1], run(0.5)["val_loss"])


def test_loss_bands_plot_the_mean_over_seeds_in_a_band_of_one_standard_deviation():
    groups = {"a": [run(0.0), run(0.2)], "b": [run(1.0)]}
    _, ax = plt.subplots()
    plot.loss_bands(
        groups,
        ax=ax,
        colors={"a": "red"},
        linestyles={"b": ":"},
        title="bands",
    )
    shown = curves(ax)
    assert list(shown) == ["a (n=2)", "b (n=1)"]
    steps = np.array(run(0.0)["steps"], float)
    val = np.array(run(0.0)["val_loss"])
    means = {"a": val + 0.1, "b": val + 1.0}
    stds = {
        "a": np.full_like(val, 0.2 / math.sqrt(2)),
        "b": np.zeros_like(val),
    }  # sample std of 2 seeds
    bands = ax.collections
    assert len(bands) == 2
    for (label, band), mean, std in zip(
        zip(groups, bands), means.values(), stds.values()
    ):
        x, y = shown[f"{label} (n={len(groups[label])})"]
        np.testing.assert_allclose(x, steps)
        np.testing.assert_allclose(y, mean)
        vertices = band.get_paths()[
            0
        ].vertices  # the polygon between mean - std and mean + std
        for step, low, high in zip(steps, mean - std, mean + std):
            at = vertices[np.isclose(vertices[:, 0], step), 1]
            np.testing.assert_allclose(
                [at.min(), at.max()], [low, high], atol=1e-12
            )
    assert line(ax, "a (n=2)").get_color() == "red"
    assert to_rgba(bands[0].get_facecolor()[0], 1.0) == to_rgba("red")
    assert line(ax, "b (n=1)").get_linestyle() == ":"
    assert (
        ax.get_xlabel() == "step"
        and "nats" in ax.get_ylabel()
        and ax.get_title() == "bands"
    )


def test_loss_bands_draw_the_metric_asked_for_and_refuse_runs_at_different_steps():
    _, ax = plt.subplots()
    plot.loss_bands({"a": [run(0.0), run(0.2)]}, ax=ax, metric="train_loss")
    np.testing.assert_allclose(
        curves(ax)["a (n=2)"][1], np.array(run(0.0)["train_loss"]) + 0.1
    )
    other = {**run(0.0), "steps": list(range(1, 101, 10))}
    with pytest.raises(ValueError, match="share their evaluation steps"):
        plot.loss_bands({"a": [run(0.0), other]}, ax=ax)


def test_seed_spread_shows_each_seed_as_a_dot_and_the_mean_and_std_as_a_bar():
    values = {"x": [1.0, 2.0, 3.0], "y": [5.0]}
    _, ax = plt.subplots()
    plot.seed_spread(
        values, ax=ax, colors={"y": "red"}, ylabel="best loss", title="spread"
    )
    dots = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(dots) == 2
    for column, (dot, seeds) in enumerate(zip(dots, values.values())):
        offsets = np.asarray(dot.get_offsets())
        np.testing.assert_allclose(
            offsets[:, 1], seeds
        )  # every seed, in its label's column
        assert np.all(np.abs(offsets[:, 0] - column) <= 0.15)
    assert to_rgba(dots[1].get_facecolor()[0], 1.0) == to_rgba("red")
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 2
    for column, (bar, mean, std) in enumerate(
        zip(bars, [2.0, 5.0], [1.0, 0.0])
    ):
        x, y = xy(bar.lines[0])
        np.testing.assert_allclose(y, [mean])
        assert abs(x[0] - column) <= 0.35  # beside its column's dots
        (segment,) = bar.lines[2][0].get_segments()
        np.testing.assert_allclose(
            sorted(segment[:, 1]), [mean - std, mean + std]
        )
    assert ticks(ax.get_xticklabels()) == ["x", "y"] and list(
        ax.get_xticks()
    ) == [0, 1]
    assert ax.get_ylabel() == "best loss" and ax.get_title() == "spread"


# ---- heat maps ----


def test_heatmap_shows_the_matrix_rows_as_queries_and_columns_as_keys():
    matrix = torch.tensor(
        [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    )  # 2 queries, 3 keys
    _, ax = plt.subplots()
    plot.heatmap(
        matrix,
        ax=ax,
        x_labels=["k0", "k1", "k2"],
        y_labels=["q0", "q1"],
        title="scores",
        colorbar_label="weight",
        vmin=-1.0,
        vmax=10.0,
    )
    (image,) = ax.images
    np.testing.assert_array_equal(image.get_array(), matrix.numpy())
    assert image.get_clim() == (-1.0, 10.0)
    assert ticks(ax.get_xticklabels()) == ["k0", "k1", "k2"] and ticks(
        ax.get_yticklabels()
    ) == ["q0", "q1"]
    assert (
        ax.get_xlabel() == "key"
        and ax.get_ylabel() == "query"
        and ax.get_title() == "scores"
    )
    assert colorbar_of(image).ax.get_ylabel() == "weight"


def test_heatmap_takes_its_axis_labels_and_can_leave_out_the_colour_bar():
    fig, ax = plt.subplots()
    plot.heatmap(
        torch.tensor([[1.0, -1.0]]),
        ax=ax,
        colorbar=False,
        xlabel="j",
        ylabel=None,
    )
    assert ax.images[0].colorbar is None and fig.axes == [ax]
    assert ax.get_xlabel() == "j" and ax.get_ylabel() == ""
    np.testing.assert_array_equal(ax.images[0].get_array(), [[1.0, -1.0]])


def test_attention_heads_draw_each_heads_weights_on_one_scale_from_0_to_1():
    weights = torch.rand(
        3, 2, 4, generator=torch.Generator().manual_seed(0)
    ).softmax(-1)  # 2 queries, 4 keys
    axes = plot.attention_heads(weights, ["q0", "q1"], key_tokens=list("abcd"))
    fig = axes[0].figure
    assert (
        len(axes) == 3 and len(fig.axes) == 4
    )  # a panel per head and one shared colour bar
    assert fig.get_size_inches()[0] <= plot.MAX_WIDTH + 1e-9
    for h, ax in enumerate(axes):
        (image,) = ax.images
        np.testing.assert_allclose(
            image.get_array(), weights[h].numpy(), rtol=1e-6
        )
        assert image.get_clim() == (0.0, 1.0)
        assert ax.get_title() == f"head {h}"
        assert ticks(ax.get_xticklabels()) == list("abcd") and ticks(
            ax.get_yticklabels()
        ) == ["q0", "q1"]
        assert ax.get_xlabel() == "key" and ax.get_ylabel() == "query"
    bar = colorbar_of(axes[-1].images[0])
    assert bar.ax in fig.axes and bar.ax.get_ylabel() == "attention weight"
    np.testing.assert_allclose(bar.ax.get_ylim(), (0.0, 1.0))


def test_attention_heads_of_one_matrix_are_one_panel_with_the_titles_given():
    weights = torch.tensor([[1.0, 0.0, 0.0], [0.25, 0.75, 0.0]])
    (ax,) = plot.attention_heads(
        weights,
        ["x", "y", "z"][:2],
        key_tokens=["x", "y", "z"],
        titles=["T = 1"],
        colorbar=False,
    )
    np.testing.assert_array_equal(ax.images[0].get_array(), weights.numpy())
    assert ax.get_title() == "T = 1" and len(ax.figure.axes) == 1
    (ax,) = plot.attention_heads(
        weights[:, :2], ["a", "b"]
    )  # key_tokens default to tokens
    assert ticks(ax.get_xticklabels()) == ["a", "b"] and ax.get_title() == ""


def test_spatial_weights_draw_each_W_with_rows_reading_and_a_symmetric_shared_scale():
    weights = torch.tensor(
        [
            [[1.0, -2.0, 0.0], [0.5, 0.0, 0.0], [0.0, 0.0, 0.25]],
            [[0.0, 4.0, 0.0], [-1.0, 3.0, 0.0], [0.0, 0.0, 0.0]],
        ]
    )
    axes = plot.spatial_weights(weights, titles=["first", "second"])
    fig = axes[0].figure
    assert len(axes) == 2 and len(fig.axes) == 3
    assert fig.get_size_inches()[0] <= plot.MAX_WIDTH + 1e-9
    for k, (ax, title) in enumerate(zip(axes, ["first", "second"])):
        (image,) = ax.images
        np.testing.assert_array_equal(
            image.get_array(), weights[k].numpy()
        )  # W[i, j]: row i, column j
        assert image.get_clim() == (
            -4.0,
            4.0,
        )  # the largest |W| of all maps, both ways
        assert ax.get_title() == title
        assert ax.get_xlabel() == "j (read)" and ax.get_ylabel() == "i (reads)"
    bar = colorbar_of(axes[-1].images[0])
    assert bar.ax.get_ylabel() == "W[i, j]"
    np.testing.assert_allclose(bar.ax.get_ylim(), (-4.0, 4.0))


def test_spatial_weights_take_a_list_a_scale_and_given_axes():
    weights = [
        torch.tensor([[1.0, 0.0], [2.0, 3.0]]),
        torch.tensor([[0.0, 0.0], [-0.5, 0.5]]),
    ]
    fig, grid = plt.subplots(1, 2)
    axes = plot.spatial_weights(weights, axes=grid, vmax=10.0, colorbar=False)
    assert list(axes) == list(grid) and len(fig.axes) == 2
    for ax, w in zip(axes, weights):
        np.testing.assert_array_equal(ax.images[0].get_array(), w.numpy())
        assert ax.images[0].get_clim() == (-10.0, 10.0)
    (ax,) = plot.spatial_weights(
        torch.zeros(2, 2)
    )  # all zero: a scale of ±1, not a division by 0
    assert ax.images[0].get_clim() == (-1.0, 1.0)
    with pytest.raises(ValueError, match="weights must be"):
        plot.spatial_weights(torch.zeros(2, 3))


def test_bias_heads_draw_each_heads_bias_with_the_mask_left_blank():
    inf = float("inf")
    bias = torch.tensor(
        [
            [[0.0, -inf, -inf], [-1.0, 0.0, -inf]],
            [[0.0, -inf, -inf], [-4.0, 0.0, -inf]],
        ]
    )  # 2 heads, 2 queries, 3 keys
    axes = plot.bias_heads(bias, titles=["m = 1", "m = 4"])
    fig = axes[0].figure
    assert len(axes) == 2 and len(fig.axes) == 3
    assert fig.get_size_inches()[0] <= plot.MAX_WIDTH + 1e-9
    for h, (ax, title) in enumerate(zip(axes, ["m = 1", "m = 4"])):
        (image,) = ax.images
        shown = image.get_array()
        np.testing.assert_array_equal(
            np.ma.getmaskarray(shown), ~torch.isfinite(bias[h]).numpy()
        )
        finite = torch.isfinite(bias[h]).numpy()
        np.testing.assert_array_equal(
            np.asarray(shown)[finite], bias[h].numpy()[finite]
        )
        assert image.get_clim() == (
            -4.0,
            0.0,
        )  # shared: the most negative finite value to 0
        assert image.cmap.get_bad() == pytest.approx(to_rgba("#d9d9d9"))
        # One row of panels: each names its key axis; only the first, on the
        # left edge, its query axis (Axes.label_outer).
        assert (
            ax.get_title() == title
            and ax.get_xlabel() == "key j"
            and ax.get_ylabel() == ("query i" if h == 0 else "")
        )
    bar = colorbar_of(axes[-1].images[0])
    assert bar.ax.get_ylabel() == "bias"
    (ax,) = plot.bias_heads(
        torch.tensor([[0.0, 0.0], [0.0, 0.0]])
    )  # nothing negative: the scale is [-1, 0]
    assert (
        ax.images[0].get_clim() == (-1.0, 0.0) and ax.get_title() == "head 0"
    )


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 8])
def test_panels_wrap_into_rows_no_wider_than_a_phone_can_show(count):
    # A row of eight heat maps, 26 inches wide, is shown on a phone at an eighth of its size; the
    # panels wrap instead, and an odd count leaves no empty frame behind.
    for draw in (
        lambda: plot.attention_heads(
            torch.rand(count, 4, 4).softmax(-1), list("abcd")
        ),
        lambda: plot.spatial_weights(torch.randn(count, 5, 5)),
        lambda: plot.bias_heads(torch.randn(count, 4, 4)),
    ):
        axes = draw()
        figure = axes[0].figure
        assert figure.get_size_inches()[0] <= plot.MAX_WIDTH + 1e-9
        assert (
            len(figure.axes) == count + 1
        )  # the panels and the shared colour bar, no spare frame
        tops = [
            round(ax.get_position().y0, 3) for ax in axes
        ]  # one value per row of panels
        per_row = tops.count(max(tops))
        assert len(set(tops)) == -(
            -count // per_row
        )  # full rows, then what is left
        plt.close(figure)


def test_panel_grid_gives_count_axes_in_rows_that_fit():
    fig, axes = plot.panel_grid(3, (3.2, 3.0), sharey=True)
    assert (
        len(axes) == 3 and len(fig.axes) == 3
    )  # the fourth place of the 2 x 2 grid is removed
    np.testing.assert_allclose(
        fig.get_size_inches(), (6.4, 6.0)
    )  # two 3.2-inch columns, two rows
    assert (
        axes[0].get_position().y0
        == axes[1].get_position().y0
        > axes[2].get_position().y0
    )
    assert (
        axes[0].get_position().x0 < axes[1].get_position().x0
    )  # reading order
    assert axes[2].get_position().x0 == pytest.approx(
        axes[0].get_position().x0
    )
    assert axes[1].get_shared_y_axes().joined(axes[0], axes[2])
    fig, axes = plot.panel_grid(
        3, (2.0, 2.0), pad=0.6
    )  # (6.5 - 0.6) // 2 = 2 to a row, then the pad
    np.testing.assert_allclose(fig.get_size_inches(), (4.6, 4.0))
    fig, axes = plot.panel_grid(1, (3.0, 2.0))
    assert len(axes) == 1 and tuple(fig.get_size_inches()) == (3.0, 2.0)


# ---- feed-forward chapter ----


def test_activation_curves_plot_each_named_activation_over_z():
    _, ax = plt.subplots()
    names = ["relu", "gelu", "swish", "sigmoid", "identity"]
    plot.activation_curves(
        names, ax=ax, z_range=(-2.0, 3.0), points=11, title="f"
    )
    shown = curves(ax)
    assert list(shown) == names
    z = np.linspace(-2.0, 3.0, 11)
    sigmoid = 1 / (1 + np.exp(-z))
    expected = {
        "relu": np.maximum(z, 0),
        "gelu": z * 0.5 * (1 + np.vectorize(math.erf)(z / math.sqrt(2))),
        "swish": z * sigmoid,
        "sigmoid": sigmoid,
        "identity": z,
    }
    for name in names:
        x, y = shown[name]
        np.testing.assert_allclose(x, z, atol=1e-6)
        np.testing.assert_allclose(y, expected[name], atol=1e-6)
    assert (
        ax.get_xlabel() == "z"
        and ax.get_ylabel() == "f(z)"
        and ax.get_title() == "f"
    )
    with pytest.raises(ValueError, match="names must be keys"):
        plot.activation_curves(["tanh"], ax=ax)


def test_activation_curves_default_to_the_papers_four():
    _, ax = plt.subplots()
    plot.activation_curves(ax=ax, points=5)
    assert list(curves(ax)) == ["relu", "gelu", "swish", "sigmoid"]
    np.testing.assert_allclose(
        curves(ax)["relu"][1], [0.0, 0.0, 0.0, 2.0, 4.0], atol=1e-6
    )


def test_gate_surface_shows_f_of_a_times_b_with_a_across_and_b_up():
    _, ax = plt.subplots()
    plot.gate_surface("relu", gated=True, ax=ax, extent=2.0, points=5)
    (image,) = ax.images
    axis = np.linspace(-2.0, 2.0, 5)
    expected = (
        axis[:, None] * np.maximum(axis, 0)[None, :]
    )  # row i: b = axis[i]; column j: a = axis[j]
    np.testing.assert_allclose(image.get_array(), expected, atol=1e-6)
    assert image.origin == "lower" and list(image.get_extent()) == [
        -2.0,
        2.0,
        -2.0,
        2.0,
    ]  # b grows upwards
    assert image.get_clim() == pytest.approx(
        (-4.0, 4.0)
    )  # symmetric about 0: the largest |f(a)·b|
    assert ax.get_xlabel().startswith("a = ") and ax.get_ylabel().startswith(
        "b = "
    )
    assert ax.get_title() == "relu(a)·b"
    assert colorbar_of(image).ax.get_ylabel() == "unit output"
    (contours,) = [c for c in ax.collections if isinstance(c, ContourSet)]
    assert (
        len(contours.levels) > 2
        and -4.0 <= min(contours.levels) < 0 < max(contours.levels) <= 4.0
    )


def test_gate_surface_ungated_ignores_b_and_takes_a_scale_and_title():
    _, ax = plt.subplots()
    plot.gate_surface(
        "sigmoid",
        gated=False,
        ax=ax,
        extent=3.0,
        points=7,
        vmax=2.0,
        title="σ",
        colorbar=False,
    )
    (image,) = ax.images
    axis = np.linspace(-3.0, 3.0, 7)
    np.testing.assert_allclose(
        image.get_array(), np.tile(1 / (1 + np.exp(-axis)), (7, 1)), atol=1e-6
    )
    assert (
        image.get_clim() == (-2.0, 2.0)
        and ax.get_title() == "σ"
        and image.colorbar is None
    )
    _, ax = plt.subplots()
    plot.gate_surface("sigmoid", gated=False, ax=ax, points=5, colorbar=False)
    assert ax.get_title() == "sigmoid(a)"
    with pytest.raises(ValueError, match="activation must be a key"):
        plot.gate_surface("tanh")


# ---- gMLP chapter ----


def test_diagonal_profile_plots_each_diagonal_mean_against_its_offset():
    means = {
        "layer 0": [0.5, -0.25, 0.125, 0.0625],
        "layer 1": torch.tensor([1.0, 2.0, 3.0, 4.0]),
    }
    _, ax = plt.subplots()
    plot.diagonal_profile(means, ax=ax, max_offset=2, title="profile")
    shown = curves(ax)
    assert list(shown) == ["layer 0", "layer 1"]
    for label, values in means.items():
        x, y = shown[label]
        np.testing.assert_array_equal(x, [0, 1, 2])  # offsets 0 .. max_offset
        np.testing.assert_allclose(y, list(values)[:3])
    assert ticks(ax.get_legend().get_texts()) == ["layer 0", "layer 1"]
    assert (
        "offset" in ax.get_xlabel()
        and "diagonal" in ax.get_ylabel()
        and ax.get_title() == "profile"
    )
    _, ax = plt.subplots()
    plot.diagonal_profile(
        {"only": [1.0, 0.5]}, ax=ax
    )  # one curve: every offset, and no legend
    np.testing.assert_allclose(curves(ax)["only"][1], [1.0, 0.5])
    assert ax.get_legend() is None


# ---- ALiBi chapter ----


def test_alibi_slope_grid_shows_minus_log2_of_each_heads_slope():
    _, ax = plt.subplots()
    plot.alibi_slope_grid([1, 3, 8, 12], ax=ax, title="slopes")
    (image,) = ax.images
    nan = float("nan")
    expected = np.array(
        [
            [8] + [nan] * 11,  # one head: 2^-8
            [4, 8, 2]
            + [nan]
            * 9,  # the 2 heads of n = 2, then the first in-between slope of n = 4
            list(range(1, 9)) + [nan] * 4,  # 1/2, 1/4, ..., 1/256
            list(range(1, 9))
            + [
                0.5,
                1.5,
                2.5,
                3.5,
            ],  # 8 heads, then 4 of the 16-head series' in-between ones
        ]
    )
    shown = image.get_array()
    np.testing.assert_array_equal(
        np.ma.getmaskarray(shown), np.isnan(expected)
    )  # no head: blank
    np.testing.assert_allclose(np.ma.filled(shown, nan), expected, atol=1e-5)
    assert image.get_clim() == (0.0, 8.0)
    written = {(text.get_position(), text.get_text()) for text in ax.texts}

    def halves(value):  # 3 -> "3", 3.5 -> "3½", 0.5 -> "½": two characters
        whole, half = int(value), value % 1 == 0.5
        return (str(whole) if whole or not half else "") + (
            "½" if half else ""
        )

    assert all(text.get_fontsize() == plot.TEXT_POINTS for text in ax.texts)
    assert written == {
        ((h, row), halves(value))
        for row, values in enumerate(expected)
        for h, value in enumerate(values)
        if not math.isnan(value)
    }
    assert ticks(ax.get_xticklabels()) == [str(h) for h in range(12)]
    assert ticks(ax.get_yticklabels()) == ["1", "3", "8", "12"]
    assert (
        ax.get_xlabel() == "head h"
        and ax.get_ylabel() == "number of heads n"
        and ax.get_title() == "slopes"
    )
    assert colorbar_of(image).ax.get_ylabel() == "-log2(slope)"
    _, ax = plt.subplots()
    plot.alibi_slope_grid([2], ax=ax, annotate=False)
    assert len(ax.texts) == 0


def test_extrapolation_curves_plot_loss_against_length_and_mark_where_a_scheme_stops():
    runs = {
        "alibi": [
            {"length": 64, "loss": 1.0},
            {"length": 128, "loss": 1.2},
            {"length": 256, "loss": 1.5},
        ],
        "learned": [
            {"length": 64, "loss": 1.1},
            {"length": 128, "loss": None},
            {"length": 256, "loss": None},
        ],
    }
    _, ax = plt.subplots()
    plot.extrapolation_curves(runs, 64, ax=ax, title="extrapolation")
    shown = curves(ax)
    assert list(shown) == ["alibi", "learned"]
    np.testing.assert_allclose(shown["alibi"][0], [64, 128, 256])
    np.testing.assert_allclose(shown["alibi"][1], [1.0, 1.2, 1.5])
    np.testing.assert_allclose(shown["learned"][0], [64])
    np.testing.assert_allclose(shown["learned"][1], [1.1])
    # an x at the last length where "learned" is defined, in its colour, with the words saying so
    (stop,) = [line for line in ax.lines if line.get_marker() == "x"]
    assert (list(stop.get_xdata()), list(stop.get_ydata())) == ([64], [1.1])
    assert stop.get_color() == line(ax, "learned").get_color()
    (note,) = ax.texts
    assert note.get_text() == "learned: not defined past L" and note.xy == (
        64,
        1.1,
    )
    assert vertical_lines(ax) == [64]  # the training length
    assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2
    assert (
        ax.get_xlabel() == "evaluation length (tokens)"
        and ax.get_ylabel() == "validation loss (nats / char)"
    )
    assert ax.get_title() == "extrapolation"


def test_extrapolation_curves_in_perplexity_show_exp_of_the_loss():
    _, ax = plt.subplots()
    plot.extrapolation_curves(
        {"a": [{"length": 32, "loss": 1.0}, {"length": 64, "loss": 2.0}]},
        32,
        ax=ax,
        perplexity=True,
    )
    np.testing.assert_allclose(curves(ax)["a"][1], [math.e, math.e**2])
    assert ax.get_ylabel() == "perplexity per character" and len(ax.texts) == 0


def test_per_position_curves_plot_the_mean_loss_of_each_bin_at_its_centre():
    _, ax = plt.subplots()
    plot.per_position_curves(
        {"alibi": [2.0 * p for p in range(40)], "learned": None},
        24,
        ax=ax,
        bin_size=16,
        title="positions",
    )
    shown = curves(ax)
    assert list(shown) == ["alibi", "learned (not defined past L)"]
    x, y = shown["alibi"]
    np.testing.assert_allclose(
        x, [7.5, 23.5]
    )  # positions 0-15 and 16-31; the 8 left over are dropped
    np.testing.assert_allclose(y, [15.0, 47.0])  # their mean losses
    assert (
        shown["learned (not defined past L)"][0].size == 0
    )  # in the legend, with nothing drawn
    assert vertical_lines(ax) == [24]
    assert (
        "16" in ax.get_xlabel()
        and "nats" in ax.get_ylabel()
        and ax.get_title() == "positions"
    )


def benchmark_row(length, eager, flex):
    return {
        "length": length,
        "implementations": {"eager": eager, "flex": flex},
    }


def test_benchmark_curves_plot_median_time_with_a_min_max_bar_and_peak_memory():
    results = [
        benchmark_row(
            256,
            {
                "forward": {
                    "median_s": 0.002,
                    "min_s": 0.001,
                    "max_s": 0.005,
                    "peak_bytes": 2 * 2**20,
                }
            },
            {"forward": {"error": "NotImplementedError: no"}},
        ),
        benchmark_row(
            512,
            {
                "forward": {
                    "median_s": 0.008,
                    "min_s": 0.007,
                    "max_s": 0.010,
                    "peak_bytes": 6 * 2**20,
                },
                "forward_backward": {
                    "median_s": 0.1,
                    "min_s": 0.1,
                    "max_s": 0.1,
                    "peak_bytes": None,
                },
            },
            {"forward": {"error": "NotImplementedError: no"}},
        ),
    ]
    _, ax = plt.subplots()
    plot.benchmark_curves(results, "forward", "time", ax=ax, title="time")
    eager, flex = ax.containers
    assert (eager.get_label(), flex.get_label()) == ("eager", "flex (n/a)")
    x, y = xy(eager.lines[0])
    np.testing.assert_allclose(x, [256, 512])
    np.testing.assert_allclose(y, [2.0, 8.0])  # milliseconds
    bars = [
        sorted(segment[:, 1]) for segment in eager.lines[2][0].get_segments()
    ]
    np.testing.assert_allclose(
        bars, [[1.0, 5.0], [7.0, 10.0]]
    )  # from min to max
    assert len(flex.lines[0].get_xdata()) == 0
    assert (
        ax.get_xscale() == "log"
        and ax.xaxis.get_transform().base == 2
        and ax.get_yscale() == "log"
    )
    assert (
        ax.get_xlabel() == "sequence length L"
        and ax.get_ylabel() == "median time (ms)"
    )
    assert ax.get_title() == "time"
    assert ticks(ax.get_legend().get_texts()) == ["eager", "flex (n/a)"]

    _, ax = plt.subplots()
    plot.benchmark_curves(results, "forward", "memory", ax=ax)
    eager = ax.containers[0]
    np.testing.assert_allclose(xy(eager.lines[0])[1], [2.0, 6.0])  # MiB
    assert ax.get_ylabel() == "peak memory (MiB)"

    _, ax = plt.subplots()
    plot.benchmark_curves(
        results, "forward_backward", "memory", ax=ax
    )  # timed, but no memory measured
    assert ax.containers[0].get_label() == "eager (n/a)"
    with pytest.raises(ValueError, match="metric"):
        plot.benchmark_curves(results, metric="speed")


def test_the_book_style_sets_all_text_to_text_points_and_the_smallest_is_found():
    with plt.rc_context():
        plot.use_book_style()  # outside a notebook: the style alone
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 1], label="a line")
        ax.set(title="title", xlabel="x", ylabel="y")
        ax.legend()
        assert plot.smallest_text_points(fig) == plot.TEXT_POINTS
        ax.text(0.5, 0.5, "too small", fontsize=8)
        ax.text(0.5, 0.5, "   ", fontsize=4)  # blank: nothing to read
        assert plot.smallest_text_points(fig) == 8
        plt.close(fig)
    empty = plt.figure()
    assert plot.smallest_text_points(empty) is None
    plt.close(empty)


def close_results(n_runs, profile):
    """A chapter's results with ``n_runs`` runs whose curves end within
    0.01 of each other (labels at their ends would overlap) and two runs
    that lie on one another (as gMLP and aMLP do)."""
    steps = [100, 200, 300]
    runs = {
        f"run {i}": {
            "steps": steps,
            "val_loss": [3.0 - 0.1 * i, 2.0 - 0.01 * i, 1.5 - 0.001 * i],
            "train_loss": [2.9, 1.9, 1.4],
        }
        for i in range(n_runs)
    }
    runs["twin"] = dict(runs["run 0"])
    provenance = {"profile": profile, "device_type": "cpu"}
    return {"runs": runs, "provenance": provenance}


def test_live_beside_committed_names_every_run_at_its_line_end_without_overlap():
    live, committed = close_results(7, "smoke"), close_results(7, "cpu")
    fig = plot.live_beside_committed(live, committed, lambda r: r["runs"])
    left, right = fig.axes
    assert not fig.legends and right.get_legend() is None
    names = {text.get_text(): text for text in right.texts}
    assert sorted(names) == sorted(committed["runs"])  # no " (val)"
    assert not left.texts
    fig.draw_without_rendering()

    def box(text):  # the name's own box, without its leader
        return Text.get_window_extent(text)

    boxes = [box(text) for text in names.values()]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b), "two names overlap"
    for label, text in names.items():
        drawn = line(right, f"{label} (val)")
        assert text.get_color() == drawn.get_color()
        assert text.xy == (drawn.get_xdata()[-1], drawn.get_ydata()[-1])
        # right of the panel, beside its own point's height where it can
        assert box(text).x0 > right.get_window_extent().x1
    lowest = min(names.values(), key=lambda t: box(t).y0)
    assert lowest.get_text() == "run 6"  # the lowest end, the lowest name


def test_live_beside_committed_tells_runs_apart_by_more_than_colour():
    results = close_results(7, "cpu")
    fig = plot.live_beside_committed(results, results, lambda r: r["runs"])
    for ax in fig.axes:
        drawn = list(ax.get_lines())
        # colour, line style and marker: no two runs alike in all three,
        # and no two in line style and marker alone among the first four
        looks_of = [
            (ln.get_color(), ln.get_linestyle(), ln.get_marker())
            for ln in drawn
        ]
        assert len(set(looks_of)) == len(drawn) == 8
        assert len({(s, m) for _, s, m in looks_of[:4]}) == 4
        assert len({s for _, s, _ in looks_of[:4]}) == 4
        # the twin drawn last and thinnest: the run it covers shows around it
        widths = [ln.get_linewidth() for ln in drawn]
        assert (
            widths == sorted(widths, reverse=True) and widths[0] > widths[-1]
        )
        sizes = [ln.get_markersize() for ln in drawn]
        assert sizes[0] > sizes[-1]


def test_live_beside_committed_with_training_keeps_training_dashed():
    results = close_results(1, "cpu")
    del results["runs"]["twin"]
    fig = plot.live_beside_committed(
        results, results, lambda r: r["runs"], train=True
    )
    right = fig.axes[1]
    assert line(right, "run 0 (val)").get_linestyle() == "-"
    assert line(right, "run 0 (train)").get_linestyle() == "--"
    assert sorted(t.get_text() for t in right.texts) == [
        "run 0",
        "run 0 (train)",
    ]


@pytest.mark.parametrize(
    "targets, expected",
    [
        ([0.1, 0.5, 0.9], [0.1, 0.5, 0.9]),  # far apart: left where they are
        ([0.5, 0.5], [0.45, 0.55]),  # centred on their mean
        ([0.1, 0.5, 0.52, 0.9], [0.1, 0.46, 0.56, 0.9]),
        ([0.40, 0.45, 0.50], [0.35, 0.45, 0.55]),  # a group grows
    ],
)
def test_spread_keeps_names_a_gap_apart_and_as_near_their_lines_as_it_can(
    targets, expected
):
    np.testing.assert_allclose(plot._spread(targets, 0.1), expected)


def test_no_function_of_plot_has_more_than_50_lines_of_code_after_its_docstring():
    import ast
    import inspect

    source = inspect.getsource(plot)
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef):
            continue
        body = node.body
        has_doc = (
            isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        )
        start = body[1].lineno if has_doc and len(body) > 1 else body[0].lineno
        code = [
            text
            for text in lines[start - 1 : node.end_lineno]
            if text.strip() and not text.strip().startswith("#")
        ]
        assert len(code) <= 50, f"{node.name}: {len(code)} lines of code"
