"""Interactive views that work without a kernel.

A live ``ipywidgets.interact`` redraws its figure in Python, so on a static web
page (the built book) its controls do nothing. :func:`precomputed_view` draws
every setting of a small grid once, in Python, and links the controls to the
drawings in the browser: each control is ``jslink``-ed to the
``selected_index`` of ``Stack`` widgets holding the pictures. The notebook
saves the widget state, the site's widget manager renders it, and moving a
control shows another picture with no kernel at all. The same view works in
Jupyter and on Colab.

Settings that depend on an earlier one (which heads exist depends on the head
count) get a control of their own inside each branch of the earlier control's
stack.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable, Sequence
from typing import Any

import matplotlib.pyplot as plt

from ._checks import check_int_in, check_positive_float

__all__ = ["precomputed_view", "figure_png"]

# Values for one control: a fixed list, or a function of the settings chosen
# before it.
Values = Sequence[Any] | Callable[..., Sequence[Any]]


def figure_png(fig, *, dpi: int = 110, colours: int = 256) -> bytes:
    """The figure as PNG bytes (palette-reduced to ``colours``, an int in [2,
    256], to keep pages light; ``dpi`` a positive float); closes it."""
    from PIL import Image

    check_positive_float("dpi", dpi)
    check_int_in("colours", colours, 2, 256)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    plt.close(fig)
    buffer.seek(0)
    image = (
        Image.open(buffer)
        .convert("RGB")
        .quantize(colors=colours, method=Image.Quantize.MEDIANCUT)
    )
    out = io.BytesIO()
    image.save(out, format="png", optimize=True)
    return out.getvalue()


def _picture(png: bytes, alt: str):
    import ipywidgets as widgets

    # An HTML <img> rather than an ipywidgets.Image: the Image widget has no
    # alt text.
    source = base64.b64encode(png).decode("ascii")
    return widgets.HTML(
        f'<img src="data:image/png;base64,{source}" alt="{html.escape(alt)}" '
        'style="max-width: 100%; height: auto">'
    )


def _control(
    name: str,
    values: Sequence[Any],
    label: Callable[[str, Any], str],
    initial: Any,
):
    """A control choosing one of ``values`` (its synced ``index`` selects the
    picture), with its name."""
    import ipywidgets as widgets

    options = [label(name, value) for value in values]
    index = list(values).index(initial) if initial in values else 0
    numeric = all(
        isinstance(value, (int, float)) and not isinstance(value, bool)
        for value in values
    )
    # No `description`: the widget manager typesets descriptions through
    # MathJax 2's API, which the book's MathJax 3 lacks. The name goes in an
    # HTML widget beside the control instead.
    if numeric and len(values) > 6:
        control = widgets.SelectionSlider(
            options=options, index=index, continuous_update=True, readout=True
        )
    else:
        control = widgets.ToggleButtons(
            options=options, index=index, style={"button_width": "auto"}
        )
    return control, widgets.HBox(
        [widgets.HTML(f"<b>{html.escape(name)}</b>&nbsp;"), control],
        layout={"align_items": "center", "flex_flow": "row wrap"},
    )


def precomputed_view(
    draw: Callable[..., Any],
    controls: dict[str, Values],
    *,
    alt: Callable[..., str],
    initial: dict[str, Any] | None = None,
    label: Callable[[str, Any], str] = lambda name, value: str(value),
    dpi: int = 110,
    colours: int = 256,
):
    """A widget that shows ``draw(**setting)`` for every setting of
    ``controls``, with no kernel.

    Args:
        draw: returns a matplotlib figure for one setting, called with one
            keyword per control.
        controls: control name -> its values, in the order the controls stack
            up. A callable instead of a list is called with the settings of the
            controls before it (as keywords) and gives that branch its own
            control.
        alt: the alt text of one setting's picture (what it shows), called like
            ``draw``.
        initial: the setting shown first (default: each control's first value);
            its names must be controls', and a fixed list's value must be one
            of its values.
        label: the text of one value on its control.
        dpi, colours: resolution and palette size of the pictures (page
            weight): a positive float and an int in [2, 256].

    Returns:
        An ``ipywidgets.VBox``: the shared controls, then the pictures. Every
        picture is drawn now, so keep the grid small (its size is the product
        of the value counts).
    """
    import ipywidgets as widgets

    if not controls:
        raise ValueError("controls: give at least one control")
    for name, values in controls.items():
        # it would be read as one value per character
        if isinstance(values, str):
            raise TypeError(
                f"controls[{name!r}] must be a list of values or a callable,"
                f" not the str {values!r}"
            )
        if not callable(values) and not len(values):
            raise ValueError(f"controls[{name!r}] has no values")
    for name, function in (("draw", draw), ("alt", alt), ("label", label)):
        if not callable(function):
            raise TypeError(f"{name} must be a callable, got {function!r}")
    check_positive_float("dpi", dpi)
    check_int_in("colours", colours, 2, 256)
    initial = dict(initial or {})
    for (
        name,
        value,
        # a misspelt name or value would silently show another setting
    ) in initial.items():
        if name not in controls:
            raise ValueError(
                f"initial[{name!r}] names no control; the controls are"
                f" {list(controls)}"
            )
        if not callable(controls[name]) and value not in controls[name]:
            raise ValueError(
                f"initial[{name!r}] = {value!r} is not one of"
                f" controls[{name!r}] = {list(controls[name])}"
            )
    names = list(controls)
    # name -> (control, row)
    shared = {
        name: _control(name, values, label, initial.get(name))
        for name, values in controls.items()
        if not callable(values)
    }

    def branch(level: int, setting: dict[str, Any]):
        if level == len(names):
            return _picture(
                figure_png(draw(**setting), dpi=dpi, colours=colours),
                alt(**setting),
            )
        name = names[level]
        values = controls[name]
        own = callable(values)
        if own:
            values = list(values(**setting))
            if not values:
                raise ValueError(
                    f"controls[{name!r}] gives no values for {setting}"
                )
            control, row = _control(name, values, label, initial.get(name))
        else:
            control, row = shared[name]
        stack = widgets.Stack(
            [branch(level + 1, {**setting, name: value}) for value in values],
            selected_index=control.index,
        )
        # The link lives in the browser: moving the control switches the
        # picture with no kernel. (A selection widget syncs its index with the
        # browser; its value lives in Python only.)
        widgets.jslink((control, "index"), (stack, "selected_index"))
        return widgets.VBox([row, stack]) if own else stack

    return widgets.VBox([*(row for _, row in shared.values()), branch(0, {})])
