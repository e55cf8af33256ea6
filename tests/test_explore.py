"""The precomputed views: every setting drawn once, each control linked to the pictures it selects.

Whether a control really switches the picture in a browser is checked on the built site
(tests/test_site.py); here, that the widget tree and its links say what is drawn where.
"""

import base64
import importlib.util
import io
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

widgets = pytest.importorskip("ipywidgets")

from mixers.explore import figure_png, precomputed_view  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def draw(**setting):
    fig, ax = plt.subplots(figsize=(1, 1))
    ax.set_title(repr(setting))
    return fig


def alt(**setting):
    return "setting " + ", ".join(
        f"{name}={value}" for name, value in setting.items()
    )


def links_from(control):
    from ipywidgets.widgets.widget import (
        _instances,
    )  # every live widget, by model id
    from ipywidgets.widgets.widget_link import Link

    return [
        w
        for w in _instances.values()
        if isinstance(w, Link) and w.source == (control, "index")
    ]


def reached(stack_or_html, path):
    """The picture (an HTML widget) reached by choosing index path[0], then path[1], ..."""
    node = stack_or_html
    for index in path:
        if isinstance(
            node, widgets.VBox
        ):  # a branch with its own control: (row, stack)
            node = node.children[1]
        node = node.children[index]
    return node


def shown(stack_or_html, path):
    """The alt text of the picture reached by choosing index path[0], then path[1], ..."""
    return re.search(
        r'alt="([^"]*)"', reached(stack_or_html, path).value
    ).group(1)


def decoded(png: bytes):
    from PIL import Image

    return Image.open(io.BytesIO(png)).convert("RGB")


def picture_of(html_widget):
    """The image an HTML <img> widget shows, decoded from its data URL."""
    source = re.search(
        r'src="data:image/png;base64,([^"]+)"', html_widget.value
    ).group(1)
    return decoded(base64.b64decode(source))


def paint(**setting):
    """A figure of one flat colour that says which setting drew it (read back by ``colour_of``)."""
    a, b = (
        setting.get("a", setting.get("n")),
        setting.get("b", setting.get("k")),
    )
    return plt.figure(figsize=(0.5, 0.5), facecolor=colour_of(a, b))


def colour_of(a, b):
    b = {"x": 0, "y": 1}.get(b, b)
    return (a / 4, (b + 1) / 4, 0.5)


def rgb(colour):
    return tuple(round(255 * c) for c in colour)


def close_to(pixel, colour, tolerance=3):
    return all(abs(p - c) <= tolerance for p, c in zip(pixel, rgb(colour)))


def test_every_setting_is_drawn_once_and_each_control_is_linked_to_its_stacks():
    view = precomputed_view(
        draw, {"a": [1, 2, 3], "b": ["x", "y"]}, alt=alt, initial={"a": 2}
    )
    row_a, row_b, pictures = view.children
    control_a, control_b = row_a.children[1], row_b.children[1]
    assert control_a.options == ("1", "2", "3") and control_b.options == (
        "x",
        "y",
    )
    assert (
        control_a.index == 1 and control_b.index == 0
    )  # initial a=2, b's first value
    assert pictures.selected_index == 1
    # a selects the outer stack, b each inner one: 1 + 3 stacks, each linked to its control
    assert [link.target for link in links_from(control_a)] == [
        (pictures, "selected_index")
    ]
    assert sorted(
        id(link.target[0]) for link in links_from(control_b)
    ) == sorted(id(s) for s in pictures.children)
    for i, a in enumerate([1, 2, 3]):
        for j, b in enumerate(["x", "y"]):
            assert shown(pictures, [i, j]) == f"setting a={a}, b={b}"
    for stack in pictures.children:
        assert stack.selected_index == 0


def test_each_picture_is_the_drawing_of_the_setting_its_controls_select():
    # The alt text is written from the setting; here, what the picture itself shows.
    view = precomputed_view(
        paint, {"a": [1, 2, 3], "b": ["x", "y"]}, alt=alt, dpi=40
    )
    pictures = view.children[-1]
    for i, a in enumerate([1, 2, 3]):
        for j, b in enumerate(["x", "y"]):
            image = picture_of(reached(pictures, [i, j]))
            assert image.size == (20, 20)  # 0.5 in at the dpi asked for
            assert close_to(image.getpixel((10, 10)), colour_of(a, b)), (a, b)
    view = precomputed_view(
        paint, {"n": [1, 3], "k": lambda n: range(n)}, alt=alt, dpi=40
    )
    pictures = view.children[-1]
    for i, n in enumerate([1, 3]):
        for k in range(n):
            assert close_to(
                picture_of(reached(pictures, [i, k])).getpixel((10, 10)),
                colour_of(n, k),
            ), (n, k)


def test_a_control_whose_values_depend_on_an_earlier_one_gets_one_per_branch():
    view = precomputed_view(
        draw,
        {"n": [1, 3], "k": lambda n: range(n)},
        alt=alt,
        initial={"n": 3, "k": 2},
    )
    (row_n, pictures) = view.children
    branches = pictures.children
    assert [len(branch.children[1].children) for branch in branches] == [1, 3]
    for branch, n in zip(branches, [1, 3]):
        row_k, stack = branch.children
        control_k = row_k.children[1]
        assert control_k.options == tuple(str(k) for k in range(n))
        assert [link.target for link in links_from(control_k)] == [
            (stack, "selected_index")
        ]
        for k in range(n):
            assert (
                re.search(r'alt="([^"]*)"', stack.children[k].value).group(1)
                == f"setting n={n}, k={k}"
            )
    assert (
        branches[1].children[0].children[1].index == 2
    )  # initial k=2 where it exists


def test_many_numbers_get_a_slider_and_few_choices_get_buttons():
    view = precomputed_view(
        draw, {"step": list(range(7)), "model": ["a", "b"]}, alt=alt
    )
    assert isinstance(view.children[0].children[1], widgets.SelectionSlider)
    assert isinstance(view.children[1].children[1], widgets.ToggleButtons)
    # No description: the widget manager would typeset it with MathJax 2, which the site lacks.
    assert view.children[0].children[1].description == ""


def test_pictures_are_png_with_escaped_alt_text():
    view = precomputed_view(
        draw, {"a": [1]}, alt=lambda a: 'a "quoted" <b>name</b>'
    )
    picture = view.children[1].children[0]
    assert picture.value.startswith(
        '<img src="data:image/png;base64,iVBORw0KGgo'
    )  # PNG's signature
    assert (
        'alt="a &quot;quoted&quot; &lt;b&gt;name&lt;/b&gt;"' in picture.value
    )


def test_figure_png_is_a_png_and_closes_the_figure():
    fig = draw(a=1)
    png = figure_png(fig, colours=16)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert not plt.fignum_exists(fig.number)


def test_figure_png_is_the_figure_at_its_resolution_in_at_most_its_palette():
    fig = plt.figure(figsize=(2, 1))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.imshow(
        [[(1.0, 0.0, 0.0), (0.0, 0.0, 1.0)]],
        aspect="auto",
        interpolation="nearest",
    )  # red | blue
    image = decoded(figure_png(fig, dpi=50))
    assert image.size == (100, 50)  # 2 x 1 inches at 50 dots per inch
    assert close_to(image.getpixel((25, 25)), (1, 0, 0)) and close_to(
        image.getpixel((75, 25)), (0, 0, 1)
    )
    fig = plt.figure(figsize=(2, 1))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.imshow(
        [list(range(256))], cmap="viridis", aspect="auto"
    )  # a ramp of many colours
    assert len(decoded(figure_png(fig, dpi=100, colours=8)).getcolors()) <= 8


def test_bad_controls_are_refused_by_name():
    with pytest.raises(ValueError, match="controls"):
        precomputed_view(draw, {}, alt=alt)
    with pytest.raises(ValueError, match=r"controls\['k'\] gives no values"):
        precomputed_view(draw, {"n": [0], "k": lambda n: range(n)}, alt=alt)
    with pytest.raises(ValueError, match=r"controls\['n'\] has no values"):
        precomputed_view(draw, {"n": []}, alt=alt)


def load_run_notebooks():
    spec = importlib.util.spec_from_file_location(
        "run_notebooks", ROOT / "tools" / "run_notebooks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_saved_widget_state_keeps_what_a_shown_output_reaches():
    import nbformat

    tool = load_run_notebooks()

    def model(name, **state):
        return {
            "model_name": name,
            "model_module": "@jupyter-widgets/controls",
            "model_module_version": "2.0.0",
            "state": state,
        }

    state = {
        "shown": model(
            "VBoxModel", children=["IPY_MODEL_slider", "IPY_MODEL_stack"]
        ),
        "slider": model("SelectionSliderModel", layout="IPY_MODEL_layout"),
        "layout": model("LayoutModel"),
        "stack": model("StackModel", children=[]),
        "link": model(
            "LinkModel",
            source=["IPY_MODEL_slider", "index"],
            target=["IPY_MODEL_stack", "selected_index"],
        ),
        "live": model("VBoxModel", children=["IPY_MODEL_live_slider"]),
        "live_slider": model("IntSliderModel"),
        "live_link": model(
            "LinkModel",
            source=["IPY_MODEL_live_slider", "value"],
            target=["IPY_MODEL_stack", "selected_index"],
        ),
    }
    view = {
        "output_type": "display_data",
        "metadata": {},
        "data": {
            "text/plain": "VBox()",
            tool.WIDGET_VIEW: {
                "model_id": "shown",
                "version_major": 2,
                "version_minor": 0,
            },
        },
    }
    hidden = {
        **view,
        "data": {
            **view["data"],
            tool.WIDGET_VIEW: {
                "model_id": "live",
                "version_major": 2,
                "version_minor": 0,
            },
        },
    }
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("view", outputs=[view]),
            nbformat.v4.new_code_cell(
                "live", outputs=[hidden], metadata={"tags": ["remove-cell"]}
            ),
        ]
    )
    notebook.metadata["widgets"] = {
        tool.WIDGET_STATE: {
            "state": state,
            "version_major": 2,
            "version_minor": 0,
        }
    }
    assert tool.prune_widget_state(notebook) == 3
    assert set(notebook.metadata["widgets"][tool.WIDGET_STATE]["state"]) == {
        "shown",
        "slider",
        "layout",
        "stack",
        "link",
    }


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (
            dict(initial={"colour": 2}),
            ValueError,
            r"initial\['colour'\] names no control",
        ),
        (
            dict(initial={"a": 3}),
            ValueError,
            r"initial\['a'\] = 3 is not one of controls\['a'\] = \[1, 2\]",
        ),
        (dict(dpi=0), ValueError, "dpi must be a positive finite float"),
        (dict(dpi=float("nan")), ValueError, "dpi"),
        (dict(colours=1), ValueError, r"colours must be an int in \[2, 256\]"),
        (dict(colours=1000), ValueError, "colours"),
        (dict(colours=16.0), TypeError, "colours"),
        (dict(alt="a picture"), TypeError, "alt must be a callable"),
        (
            dict(controls={"a": "xy"}),
            TypeError,
            r"controls\['a'\] must be a list of values or a callable, not the str",
        ),
        (dict(label=None), TypeError, "label must be a callable"),
    ],
)
def test_bad_settings_are_refused_by_name_before_anything_is_drawn(
    kwargs, error, match
):
    """An initial value not among a control's values silently showed its first value instead."""
    drawn = []
    with pytest.raises(error, match=match):
        precomputed_view(
            lambda **s: drawn.append(s) or draw(**s),
            **{"controls": {"a": [1, 2]}, "alt": alt, **kwargs},
        )
    assert drawn == []


def test_an_initial_value_may_be_missing_from_a_dependent_control_s_branch():
    view = precomputed_view(
        draw,
        {"n": [1, 3], "k": lambda n: range(n)},
        alt=alt,
        initial={"n": 3, "k": 2},
    )
    assert view.children[0].children[1].index == 1


@pytest.mark.parametrize(
    "kwargs, error",
    [
        (dict(dpi=-5), ValueError),
        (dict(colours=0), ValueError),
        (dict(colours=True), TypeError),
    ],
)
def test_figure_png_checks_its_numbers(kwargs, error):
    with pytest.raises(error):
        figure_png(draw(a=1), **kwargs)
    plt.close("all")
