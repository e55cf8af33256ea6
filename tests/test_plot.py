"""The shared figures: curves told apart by more than colour, heat maps with a colour bar and labels."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from mixers import plot  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def looks(lines):
    return [(line.get_linestyle(), line.get_marker()) for line in lines if line.get_label()[:1] != "_"]


def run(offset):
    steps = list(range(0, 100, 10))
    return {"steps": steps, "val_loss": [2.0 - s / 100 + offset for s in steps],
            "train_loss": [2.1 - s / 100 + offset for s in steps]}


def test_style_differs_in_line_and_marker_for_the_first_eight_curves():
    styles = [plot.style(i) for i in range(8)]
    assert len({(s["linestyle"], s["marker"]) for s in styles}) == 8
    assert len({s["marker"] for s in styles}) == 8
    assert "marker" not in plot.style(0, markers=False)


@pytest.mark.parametrize("draw", [
    lambda ax: plot.loss_curves({"a": run(0), "b": run(0.1), "c": run(0.2)}, ax=ax, train=False),
    lambda ax: plot.loss_bands({"a": [run(0), run(0.01)], "b": [run(0.1)], "c": [run(0.2)]}, ax=ax),
    lambda ax: plot.activation_curves(["relu", "gelu", "swish"], ax=ax),
    lambda ax: plot.extrapolation_curves({k: [{"length": 64, "loss": 1.0 + i}, {"length": 128, "loss": 1.1 + i}]
                                          for i, k in enumerate("abc")}, train_length=64, ax=ax),
    lambda ax: plot.diagonal_profile({k: [0.1 * i, 0.2, 0.0] for i, k in enumerate("abc")}, ax=ax),
    lambda ax: plot.per_position_curves({k: [float(i)] * 64 for i, k in enumerate("abc")}, train_length=32, ax=ax),
], ids=["loss_curves", "loss_bands", "activation_curves", "extrapolation_curves", "diagonal_profile",
        "per_position_curves"])
def test_curves_of_one_plot_differ_in_more_than_colour(draw):
    _, ax = plt.subplots()
    draw(ax)
    styles = looks(ax.lines)
    assert len(styles) == 3 and len(set(styles)) == 3, styles


def test_heat_maps_have_a_colour_bar_and_axis_labels():
    for draw in (lambda: plot.attention_heads(torch.rand(2, 4, 4).softmax(-1), list("abcd")),
                 lambda: plot.spatial_weights(torch.randn(2, 5, 5)),
                 lambda: plot.bias_heads(torch.randn(2, 4, 4))):
        axes = draw()
        figure = axes[0].figure
        assert len(figure.axes) == len(axes) + 1  # the shared colour bar
        assert figure.axes[-1].get_ylabel()  # and it says what the colours are
        for ax in axes:
            assert ax.get_xlabel() and ax.get_ylabel()
    _, ax = plt.subplots()
    plot.heatmap(torch.rand(3, 3), ax=ax, colorbar_label="weight")
    assert ax.get_xlabel() == "key" and ax.get_ylabel() == "query"
    assert ax.figure.axes[-1].get_ylabel() == "weight"


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 8])
def test_panels_wrap_into_rows_no_wider_than_a_phone_can_show(count):
    # A row of eight heat maps, 26 inches wide, is shown on a phone at an eighth of its size; the
    # panels wrap instead, and an odd count leaves no empty frame behind.
    for draw in (lambda: plot.attention_heads(torch.rand(count, 4, 4).softmax(-1), list("abcd")),
                 lambda: plot.spatial_weights(torch.randn(count, 5, 5)),
                 lambda: plot.bias_heads(torch.randn(count, 4, 4))):
        axes = draw()
        figure = axes[0].figure
        assert figure.get_size_inches()[0] <= plot.MAX_WIDTH + 1e-9
        assert len(figure.axes) == count + 1  # the panels and the shared colour bar, no spare frame
        tops = [round(ax.get_position().y0, 3) for ax in axes]  # one value per row of panels
        per_row = tops.count(max(tops))
        assert len(set(tops)) == -(-count // per_row)  # full rows, then what is left


def test_panel_grid_gives_count_axes_in_rows_that_fit():
    fig, axes = plot.panel_grid(3, (3.2, 3.0), sharey=True)
    assert len(axes) == 3 and len(fig.axes) == 3  # the fourth place of the 2 x 2 grid is removed
    assert fig.get_size_inches()[0] <= plot.MAX_WIDTH
    assert axes[0].get_position().y0 == axes[1].get_position().y0 > axes[2].get_position().y0
