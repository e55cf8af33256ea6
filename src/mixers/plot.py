"""The figures the chapters share: loss curves and heat maps.

Each function draws on a matplotlib ``Axes`` it is given (or a new one) and
returns it, so a chapter can arrange several in one figure.
"""

from __future__ import annotations

import math
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.ticker import MaxNLocator

from ._checks import (
    check_bool,
    check_choice,
    check_finite_float,
    check_flags,
    check_int_in,
    check_non_negative_float,
    check_non_negative_int,
    check_positive_float,
    check_positive_int,
)


def _finish(ax, title: str | None):
    """The grid, legend and title every line plot here ends with."""
    ax.grid(alpha=0.3)
    ax.legend(fontsize=TEXT_POINTS)
    if title:
        ax.set_title(title)
    return ax


def _axes(ax):
    return ax if ax is not None else plt.subplots(figsize=(6, 4))[1]


def _check_vmax(vmax) -> None:
    """None (the data's largest magnitude) or a positive finite colour
    limit."""
    if vmax is not None:
        check_positive_float("vmax", vmax)


def _check_points(points) -> None:
    if check_positive_int("points", points) < 2:
        raise ValueError(
            "points must be an int >= 2 (a curve or a grid needs two), got"
            f" {points}"
        )


def _check_titles(titles, count: int) -> None:
    if titles is not None and (
        isinstance(titles, str) or len(titles) != count
    ):
        raise ValueError(
            f"titles must be one per panel ({count}), got {titles!r}"
        )


# Curves are told apart by line style and marker as well as colour (colour
# alone fails readers with colour-blindness and grey-scale prints): the i-th
# curve of a plot gets style(i).
LINESTYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def style(i: int, markers: bool = True) -> dict:
    """Colour, line style and (with ``markers``) marker of the ``i``-th curve
    of a plot (i >= 0)."""
    check_non_negative_int("i", i)
    check_bool("markers", markers)
    looks = {
        "color": f"C{i % 10}",
        "linestyle": LINESTYLES[i % len(LINESTYLES)],
    }
    if markers:
        looks["marker"] = MARKERS[i % len(MARKERS)]
    return looks


# The widest a chapter's figure is drawn, in inches (100 CSS pixels each; the
# inline backend adds 0.1 in of margin on each side): on a 390-pixel phone,
# whose text column is about 340 pixels wide, such a figure is shown at half
# its size or more.
MAX_WIDTH = 6.5

# The smallest text a figure of the book holds, in points, and the size of all
# of it: shown at about 340/670 of its size on a 390-pixel phone, 13 points at
# 100 pixels an inch are 9 CSS pixels or more (tests/test_site.py measures
# every figure of every chapter). No text of a figure is set smaller.
TEXT_POINTS = 13
BOOK_STYLE = {
    "font.size": TEXT_POINTS,
    "axes.titlesize": TEXT_POINTS,
    "axes.labelsize": TEXT_POINTS,
    "xtick.labelsize": TEXT_POINTS,
    "ytick.labelsize": TEXT_POINTS,
    "legend.fontsize": TEXT_POINTS,
    "legend.title_fontsize": TEXT_POINTS,
    "figure.titlesize": TEXT_POINTS,
}
# The key under which a chapter's figure records, in its notebook output's
# metadata, the height of its smallest text in the picture's own pixels.
SMALLEST_TEXT_KEY = "mixers/smallest_text_px"


def smallest_text_points(figure) -> float | None:
    """The size, in points, of the smallest visible text in ``figure``: tick
    labels, axis labels, titles, legends, annotations; None if it has none."""
    sizes = [
        text.get_fontsize()
        for text in figure.findobj(plt.Text)
        if text.get_visible() and text.get_text().strip()
    ]
    return min(sizes) if sizes else None


def use_book_style() -> None:
    """The book's figures from here on: text of ``TEXT_POINTS``, and, in a
    notebook, every figure's PNG output made by :func:`figure_png`, which
    records the figure's smallest text and its audit in the output's
    metadata."""
    plt.rcParams.update(BOOK_STYLE)
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    from matplotlib.figure import Figure

    def png(figure):
        if not figure.axes and not figure.texts:
            return None
        return figure_png(figure)

    shell.display_formatter.formatters["image/png"].for_type(Figure, png)


def figure_png(figure) -> tuple[bytes, dict]:
    """A chapter figure as its notebook output: PNG bytes (retina, with the
    inline backend's own options, ``bbox_inches="tight"``, as it would
    draw them; with a palette, :func:`palette_png`, which keeps notebooks
    and pages light) and their metadata, which records the height of the
    smallest text in the picture's pixels (``SMALLEST_TEXT_KEY``; the
    browser test turns it into the size a phone shows), what
    :func:`audit_figure` found in the very draw that made the picture
    (``AUDIT_KEY``) and the size of its heat maps (``PANEL_KEY``)."""
    from IPython.core.pylabtools import retina_figure
    from matplotlib_inline.config import InlineBackend

    found = []

    def audit(event):
        # The last draw is the picture's: the tight bounding box is found by
        # an earlier one, and the layout may move things in between.
        found[:] = [audit_figure(figure, event.renderer)]
        found.append(heat_map_panels(figure))

    options = InlineBackend.instance().print_figure_kwargs
    listening = figure.canvas.mpl_connect("draw_event", audit)
    try:
        data, metadata = retina_figure(figure, base64=False, **options)
    finally:
        figure.canvas.mpl_disconnect(listening)
    data = palette_png(data)
    points = smallest_text_points(figure)
    if points is not None:
        # retina: twice the figure's pixels per inch
        metadata[SMALLEST_TEXT_KEY] = round(points / 72 * figure.dpi * 2, 2)
    metadata[AUDIT_KEY], panels = found or (["the figure was not drawn"], [])
    if panels:
        metadata[PANEL_KEY] = panels
    return data, metadata


def palette_png(png: bytes, colours: int = 256) -> bytes:
    """PNG bytes re-encoded with a palette of at most ``colours`` colours (an
    int in [2, 256]). A figure's flat colours, colour maps and anti-aliased
    edges fit in 256 (median cut); the GLU chapter's figures went from 648 KB
    to 194 KB."""
    import io

    from PIL import Image

    check_int_in("colours", colours, 2, 256)
    image = Image.open(io.BytesIO(png)).convert("RGB")
    palette = image.quantize(colors=colours, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    palette.save(out, format="png", optimize=True)
    return out.getvalue()


# -----------------------------------------------------------------------------
# The audit every chapter figure records about itself (issue 40): nothing cut
# by the picture's edge, no text on text, no legend on the data or on text,
# one tick format an axis, and the size of its heat maps. It measures the
# figure in the draw that makes its picture, from the artists' own boxes, in
# a few milliseconds.

#: The key under which a chapter's figure records what :func:`audit_figure`
#: found: a list of problems, empty when it found none.
AUDIT_KEY = "mixers/figure_audit"
#: The key of the sizes of the figure's heat maps, ``[side, cell]`` each in
#: the picture's pixels (:func:`heat_map_panels`; absent when it has none).
PANEL_KEY = "mixers/heat_maps_px"


def audit_figure(figure, renderer) -> list[str]:
    """What is wrong with ``figure`` as ``renderer`` has just drawn it:
    text cut by the edge of the picture (``figure.bbox`` while it draws),
    text on other text, a legend on plotted data (lines, markers, error
    bars, bars, images) or on text, an axis whose tick labels mix formats
    (``3×10²`` beside ``1000``), a heat map whose cells are smaller than
    the numbers written in them, a panel whose data fills less than half
    its width or height. Each problem is one sentence naming the text or the
    panel; none is an empty list."""
    # Text's own box: an annotation's would also hold its arrow.
    texts = [
        (text, plt.Text.get_window_extent(text, renderer))
        for text in _drawn(figure)
        if isinstance(text, plt.Text) and text.get_text().strip()
    ]
    texts = [(text, box) for text, box in texts if box.width and box.height]
    return [
        *_cut_texts(figure.bbox, texts),
        *_texts_on_texts(texts),
        *_legends_on_things(figure, renderer, texts),
        *_mixed_tick_formats(figure),
        *_cells_too_small(figure, renderer),
        *_empty_panels(figure),
    ]


def _drawn(artist):
    """Every visible artist under ``artist``, with an axis's ticks only
    where they are drawn (its list also keeps ticks outside the view)."""
    from matplotlib.axis import Axis

    children = (
        [artist.label, artist.offsetText, *_drawn_ticks(artist)]
        if isinstance(artist, Axis)
        else artist.get_children()
    )
    for child in children:
        if child.get_visible():
            yield child
            yield from _drawn(child)


def _drawn_ticks(axis):
    """The ticks ``axis`` draws: the first of its tick lists that its
    locators fill, at a place inside the view (as matplotlib's own
    ``Axis._update_ticks`` picks them)."""
    scale = axis.get_transform()
    low, high = sorted(scale.transform(list(axis.get_view_interval())))
    margin = 1e-9 * max(abs(high - low), 1e-300)
    for ticks, places in (
        (axis.majorTicks, axis.get_majorticklocs()),
        (axis.minorTicks, axis.get_minorticklocs()),
    ):
        for tick, place in zip(ticks, places):
            where = scale.transform([place])[0]
            if low - margin <= where <= high + margin:
                yield tick


def _readable(text) -> str:
    """A text as a reader sees it, at most 40 characters: a tick label in
    matplotlib's mathtext (dollar signs, TeX commands, braces) reads as
    ``3×10^2``."""
    shown = text.get_text() if isinstance(text, plt.Text) else text
    for code, plain in (
        ("$", ""),
        ("\\mathdefault", ""),
        ("\\times", "×"),
        ("\\cdot", "·"),
        ("\\minus", "−"),
        ("{", ""),
        ("}", ""),
    ):
        shown = shown.replace(code, plain)
    shown = " ".join(shown.split())
    return shown if len(shown) <= 40 else shown[:39] + "…"


def _overlap(a, b, least: float = 1.0) -> bool:
    """Whether boxes ``a`` and ``b`` share more than ``least`` pixels each
    way."""
    wide = min(a.x1, b.x1) - max(a.x0, b.x0)
    tall = min(a.y1, b.y1) - max(a.y0, b.y0)
    return wide > least and tall > least


def _ink(box):
    """A text's box without the blank margin of its line (the font's
    ascent and descent above and below the glyphs): a fifth of its smaller
    side on every edge, so that two labels whose boxes merely touch at a
    corner do not count as drawn on each other."""
    margin = 0.2 * min(box.width, box.height)
    return box.padded(-margin)


def _cut_texts(canvas, texts) -> list[str]:
    """Texts that run past an edge of the picture (by more than a pixel)."""
    found = []
    for text, box in texts:
        edges = [
            side
            for side, outside in (
                ("left", box.x0 < canvas.x0 - 1),
                ("right", box.x1 > canvas.x1 + 1),
                ("bottom", box.y0 < canvas.y0 - 1),
                ("top", box.y1 > canvas.y1 + 1),
            )
            if outside
        ]
        if edges:
            where = " and ".join(edges)
            found.append(
                f"text {_readable(text)!r} is cut at the {where} edge of the"
                " picture"
            )
    return found


def _texts_on_texts(texts, most: int = 5) -> list[str]:
    """Pairs of texts drawn on each other (the first ``most``, and how many
    more)."""
    ordered = sorted(texts, key=lambda item: item[1].x0)
    pairs = []
    for i, (text, box) in enumerate(ordered):
        for other, other_box in ordered[i + 1 :]:
            if other_box.x0 >= box.x1:
                break
            if _overlap(_ink(box), _ink(other_box)):
                pairs.append((text, other))
    found = [
        f"text {_readable(a)!r} overlaps text {_readable(b)!r}"
        for a, b in pairs[:most]
    ]
    if len(pairs) > most:
        found.append(f"and {len(pairs) - most} more pairs of texts overlap")
    return found


def _panel_name(figure, ax) -> str:
    """A panel as a reader finds it: by its title, else by its place."""
    title = ax.get_title() or ax.get_title("left") or ax.get_title("right")
    if title:
        return f"panel {_readable(title)!r}"
    if ax in figure.axes:
        return f"panel {figure.axes.index(ax) + 1} of {len(figure.axes)}"
    return "a secondary axis"


def _legends_on_things(figure, renderer, texts) -> list[str]:
    """Legends that cover plotted data or a text outside the legend."""
    legends = [ax.get_legend() for ax in figure.axes] + list(figure.legends)
    found = []
    for legend in legends:
        if legend is None or not legend.get_visible():
            continue
        box = legend.get_window_extent(renderer)
        own = set(_drawn(legend))
        for text, text_box in texts:
            if text not in own and _overlap(box, _ink(text_box)):
                found.append(f"a legend covers the text {_readable(text)!r}")
        for ax in figure.axes:
            what = _data_under(ax, box, renderer)
            if what:
                found.append(
                    f"a legend covers {what} in {_panel_name(figure, ax)}"
                )
    return found


def _data_under(ax, box, renderer) -> str | None:
    """What plotted data of ``ax`` lies under ``box`` (a legend's), within
    the panel (data is clipped to it): a line, markers, error bars, bars or
    an image; None if nothing."""
    from matplotlib.collections import LineCollection, PathCollection
    from matplotlib.transforms import Bbox

    region = Bbox.intersection(box, ax.bbox)
    if region is None or not ax.get_visible():
        return None
    for line in ax.lines:
        if line.get_visible() and _line_under(line, region):
            return f"the line {line.get_label()!r}"
    for collection in ax.collections:
        if not collection.get_visible():
            continue
        if isinstance(collection, PathCollection):
            points = collection.get_offset_transform().transform(
                collection.get_offsets()
            )
            if any(region.contains(x, y) for x, y in points):
                return "markers"
        if isinstance(collection, LineCollection) and any(
            path.intersects_bbox(region, filled=False)
            for path in _display_paths(collection)
        ):
            return "error bars or lines"
    for image in ax.images:
        if _overlap(region, image.get_window_extent(renderer)):
            return "the image"
    for container in ax.containers:
        for patch in getattr(container, "patches", []):
            if patch and _overlap(region, patch.get_window_extent(renderer)):
                return "a bar"
    return None


def _display_paths(collection):
    """A collection's paths in the picture's pixels."""
    transform = collection.get_transform()
    return [transform.transform_path(path) for path in collection.get_paths()]


def _line_under(line, region) -> bool:
    """Whether a ``Line2D``'s drawn segments or markers enter ``region``
    (markers count with their size)."""
    points = line.get_transform().transform(line.get_xydata())
    points = points[np.isfinite(points).all(axis=1)]
    if not len(points):
        return False
    if line.get_marker() not in (None, "None", "none", "", " "):
        pad = line.get_markersize() / 72 * line.figure.dpi / 2
        padded = region.expanded(1, 1).padded(pad)
        if any(padded.contains(x, y) for x, y in points):
            return True
    if line.get_linestyle() in ("None", "none", "", " "):
        return False
    path = line.get_transform().transform_path(line.get_path())
    return path.intersects_bbox(region, filled=False)


def _tick_format(label: str) -> str | None:
    """The format of a tick label: "scientific" (``3×10^2``, ``1e+03``),
    "plain" (``1000``, ``0.25``, ``−3``, ``40%``), or None (words, which
    are not numbers to compare)."""
    import re

    if re.search(r"×\s*10|^10\^|\de[+−-]?\d", label):
        return "scientific"
    if re.fullmatch(r"[−+-]?(\d+([.,]\d+)*|\.\d+)%?", label):
        return "plain"
    return None


def _mixed_tick_formats(figure) -> list[str]:
    """Axes whose drawn tick labels mix scientific and plain numbers."""
    panels = list(figure.axes)
    panels += [child for ax in figure.axes for child in ax.child_axes]
    found = []
    for ax in panels:
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            if not (ax.get_visible() and axis.get_visible()):
                continue
            formats = {}
            for tick in _drawn_ticks(axis):
                for label in (tick.label1, tick.label2):
                    shown = _readable(label)
                    kind = _tick_format(shown) if label.get_visible() else None
                    if kind and shown:
                        formats.setdefault(kind, shown)
            if len(formats) > 1:
                examples = ", ".join(repr(x) for x in formats.values())
                found.append(
                    f"the {name} axis of {_panel_name(figure, ax)} mixes tick"
                    f" formats: {examples}"
                )
    return found


def _cell_size(ax):
    """The width and height of one cell of the panel's (first) image, in
    the picture's pixels."""
    rows, columns = ax.images[0].get_array().shape[:2]
    return ax.bbox.width / columns, ax.bbox.height / rows


def _cells_too_small(figure, renderer) -> list[str]:
    """Heat maps whose cells are smaller than the text written in them: the
    numbers of neighbouring cells then run into each other."""
    found = []
    for ax in figure.axes:
        if not (ax.get_visible() and ax.images):
            continue
        width, height = _cell_size(ax)
        written = [
            plt.Text.get_window_extent(text, renderer)
            for text in ax.texts
            if text.get_visible() and text.get_text().strip()
        ]
        tall = max((box.height for box in written), default=0)
        wide = max((box.width for box in written), default=0)
        if tall > height + 1 or wide > width + 1:
            found.append(
                f"the numbers in the cells of {_panel_name(figure, ax)} need"
                f" {wide:.0f} × {tall:.0f} px, its cells are"
                f" {width:.0f} × {height:.0f}"
            )
    return found


def _data_fractions(ax):
    """The points of the panel's plotted lines (not level lines drawn
    across it), as fractions of its width and height: ``[n, 2]``."""
    points = [
        line.get_transform().transform(line.get_xydata())
        for line in ax.lines
        if line.get_visible() and line.get_transform() is ax.transData
    ]
    points = [p[np.isfinite(p).all(axis=1)] for p in points]
    points = [p for p in points if len(p)]
    if not points or ax.images or not ax.get_visible():
        return None
    return ax.transAxes.inverted().transform(np.concatenate(points))


def _empty_panels(figure, least: float = 0.5) -> list[str]:
    """Panels whose plotted data spans less than ``least`` of their width
    or height: the rest of the panel is empty. Panels that share an axis
    share its range, so it is their data together that must fill it (a
    short run beside a long one on a shared scale is no empty panel)."""
    data = {ax: _data_fractions(ax) for ax in figure.axes}
    data = {ax: points for ax, points in data.items() if points is not None}
    found = []
    for ax, points in data.items():
        shares = (ax.get_shared_x_axes(), ax.get_shared_y_axes())
        for axis, (side, shared) in enumerate(
            zip(("width", "height"), shares)
        ):
            together = np.concatenate(
                [
                    data[s][:, axis]
                    for s in shared.get_siblings(ax)
                    if s in data
                ]
            )
            share = np.ptp(together.clip(0, 1))
            # a constant (a level line, one point) is no empty panel
            if share < least and np.ptp(points[:, axis]) > 0:
                found.append(
                    f"the data fills {share:.0%} of the {side} of"
                    f" {_panel_name(figure, ax)}"
                )
    return found


def heat_map_panels(figure) -> list[list[float]]:
    """``[side, cell]`` of each panel of ``figure`` that shows an image (a
    heat map), in the picture's pixels as last drawn: the panel's smaller
    side, and the smaller side of one of its image's cells."""
    panels = []
    for ax in figure.axes:
        if not (ax.get_visible() and ax.images):
            continue
        side = min(ax.bbox.width, ax.bbox.height)
        panels.append([round(side, 1), round(min(_cell_size(ax)), 1)])
    return panels


def panel_grid(
    count: int, size: tuple[float, float], pad: float = 0.0, **subplots_kwargs
):
    """A new figure of ``count`` panels of ``size`` inches, as many to a row as
    fit in ``MAX_WIDTH`` with ``pad`` inches to spare (for a colour bar); the
    last row's empty places are removed.

    Returns ``(figure, axes)``, ``axes`` a list of ``count`` Axes in reading
    order. Extra keyword arguments (``sharey=True``, ...) go to
    ``plt.subplots``. ``count`` is a positive int, ``size`` two positive
    floats, ``pad`` a non-negative float.
    """
    check_positive_int("count", count)
    if isinstance(size, str) or not hasattr(size, "__len__") or len(size) != 2:
        raise ValueError(
            "size must be two positive floats (width, height) in inches, got"
            f" {size!r}"
        )
    check_positive_float("size[0]", size[0])
    check_positive_float("size[1]", size[1])
    check_non_negative_float("pad", pad)
    columns = min(count, max(1, int((MAX_WIDTH - pad) // size[0])))
    rows = math.ceil(count / columns)
    fig, grid = plt.subplots(
        rows,
        columns,
        figsize=(size[0] * columns + pad, size[1] * rows),
        squeeze=False,
        layout="constrained",
        **subplots_kwargs,
    )
    for spare in grid.flat[count:]:
        fig.delaxes(spare)
    return fig, list(grid.flat[:count])


def _panels(
    stack: torch.Tensor,
    name: str,
    expected: str,
    axes,
    size: tuple[float, float],
    pad: float,
    unit: str = "head",
    dtype: torch.dtype = torch.float32,
):
    """A ``[n, rows, cols]`` (or ``[rows, cols]``) tensor on the CPU and one
    Axes per matrix.

    Draws into ``axes`` (one per matrix) or a new ``panel_grid`` of
    ``size``-inch panels with ``pad`` inches for the colour bar; the shared
    check and layout of ``attention_heads``, ``spatial_weights`` and
    ``bias_heads``.
    """
    values = stack.detach().to(dtype).cpu()
    if values.dim() == 2:
        values = values[None]
    if values.dim() != 3:
        raise ValueError(
            f"{name} must be {expected}, got {tuple(stack.shape)}"
        )
    count = values.shape[0]
    if axes is None:
        _, axes = panel_grid(count, size, pad)
    axes = list(axes) if not isinstance(axes, plt.Axes) else [axes]
    if len(axes) != count:
        raise ValueError(
            f"need one axes per {unit}: {count} of them, {len(axes)} axes"
        )
    return values, axes


def loss_curves(
    runs: dict[str, dict],
    ax=None,
    train: bool = True,
    title: str | None = None,
):
    """Validation (solid) and training (dashed) loss against step for each
    named run.

    ``runs`` maps a label to a ``TrainResult.to_dict()`` (``steps``,
    ``train_loss``, ``val_loss``).
    """
    check_bool("train", train)
    ax = _axes(ax)
    for i, (label, run) in enumerate(runs.items()):
        # the run's colour and marker; solid for validation, dashed for
        # training
        looks = style(i)
        color, marker, every = (
            looks["color"],
            looks["marker"],
            max(1, len(run["steps"]) // 8),
        )
        ax.plot(
            run["steps"],
            run["val_loss"],
            color=color,
            marker=marker,
            markevery=every,
            markersize=4,
            label=f"{label} (val)",
        )
        if train:
            ax.plot(
                run["steps"],
                run["train_loss"],
                color=color,
                linestyle="--",
                alpha=0.6,
                marker=marker,
                markevery=every,
                markersize=3,
                fillstyle="none",
                label=f"{label} (train)",
            )
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats / char)")
    secondary = ax.secondary_yaxis(
        "right",
        functions=(lambda n: n / math.log(2), lambda b: b * math.log(2)),
    )
    secondary.set_ylabel("bits / char")
    return _finish(ax, title)


def heatmap(
    matrix: torch.Tensor,
    ax=None,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    title: str | None = None,
    cmap: str = "viridis",
    colorbar: bool = True,
    xlabel: str | None = "key",
    ylabel: str | None = "query",
    colorbar_label: str | None = None,
    **imshow_kwargs,
):
    """A 2-d tensor as an image: rows = queries (``y``), columns = keys
    (``x``), with a colour bar."""
    check_bool("colorbar", colorbar)
    ax = _axes(ax)
    values = matrix.detach().float().cpu()
    if values.dim() != 2:
        raise ValueError(
            f"matrix must be 2-d, got shape {tuple(values.shape)}"
        )
    image = ax.imshow(values, cmap=cmap, **imshow_kwargs)
    if x_labels is not None:
        ax.set_xticks(
            range(len(x_labels)), list(x_labels), fontsize=TEXT_POINTS
        )
    if y_labels is not None:
        ax.set_yticks(
            range(len(y_labels)), list(y_labels), fontsize=TEXT_POINTS
        )
    if xlabel:
        ax.set_xlabel(xlabel, fontsize=TEXT_POINTS)
    if ylabel:
        ax.set_ylabel(ylabel, fontsize=TEXT_POINTS)
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(
            image, ax=ax, fraction=0.046, pad=0.04, label=colorbar_label
        )
    return ax


def attention_heads(
    weights: torch.Tensor,
    tokens: Sequence[str] | None = None,
    key_tokens: Sequence[str] | None = None,
    axes=None,
    titles: Sequence[str] | None = None,
    cmap: str = "viridis",
    colorbar: bool = True,
):
    """One heat map per head of attention weights ``[heads, q_len, k_len]`` (or
    ``[q_len, k_len]``).

    Rows are queries (labelled by ``tokens``), columns are keys
    (``key_tokens``, default ``tokens``). All heads share the colour scale [0,
    1], so their sharpness can be compared at a glance. Draws into ``axes``
    (one per head) or a new grid of axes; returns the axes.
    """
    check_bool("colorbar", colorbar)
    values, axes = _panels(
        weights,
        "weights",
        "[heads, q_len, k_len] or [q_len, k_len]",
        axes,
        (2.9, 2.9),
        0.6,
    )
    _check_titles(titles, len(axes))
    heads = values.shape[0]
    key_tokens = tokens if key_tokens is None else key_tokens
    for h, ax in enumerate(axes):
        title = (
            titles[h]
            if titles is not None
            else (f"head {h}" if heads > 1 else None)
        )
        heatmap(
            values[h],
            ax=ax,
            x_labels=key_tokens,
            y_labels=tokens,
            title=title,
            cmap=cmap,
            colorbar=False,
            vmin=0.0,
            vmax=1.0,
        )
        if key_tokens is not None:
            ax.tick_params(axis="x", labelrotation=90)
    if colorbar:
        axes[0].figure.colorbar(
            axes[-1].images[0],
            ax=axes,
            shrink=0.85,
            pad=0.02,
            label="attention weight",
        )
    return axes


# ---- feed-forward chapter: activations, gate surfaces, curves over seeds ----


def activation_curves(
    names: Sequence[str] = ("relu", "gelu", "swish", "sigmoid"),
    ax=None,
    z_range: tuple[float, float] = (-4.0, 4.0),
    points: int = 401,
    title: str | None = None,
):
    """Each activation ``f(z)`` of ``mixers.feed_forward.ACTIVATIONS`` named in
    ``names``, over ``z`` from ``z_range[0]`` to ``z_range[1]`` (finite,
    increasing) at ``points`` (>= 2) points.
    """
    from .feed_forward import ACTIVATIONS

    if isinstance(names, str):
        raise TypeError(
            "names must be a sequence of activation names, not a str, got"
            f" {names!r}"
        )
    low, high = z_range if len(z_range) == 2 else (0.0, 0.0)
    if check_finite_float("z_range[0]", low) >= check_finite_float(
        "z_range[1]", high
    ):
        raise ValueError(
            "z_range must be two finite floats (low, high) with low < high,"
            f" got {z_range!r}"
        )
    _check_points(points)

    ax = _axes(ax)
    z = torch.linspace(*z_range, points)
    for name in names:
        if name not in ACTIVATIONS:
            raise ValueError(
                f"names must be keys of ACTIVATIONS {list(ACTIVATIONS)}, got"
                f" {name!r}"
            )
        with torch.no_grad():
            ax.plot(
                z,
                ACTIVATIONS[name]()(z),
                label=name,
                **style(len(ax.lines), markers=False),
            )
    ax.axhline(0, color="black", linewidth=0.6)
    ax.axvline(0, color="black", linewidth=0.6)
    ax.set_xlabel("z")
    ax.set_ylabel("f(z)")
    return _finish(ax, title)


def gate_surface(
    activation: str,
    gated: bool = True,
    ax=None,
    extent: float = 3.0,
    points: int = 201,
    vmax: float | None = None,
    title: str | None = None,
    colorbar: bool = True,
):
    """What one hidden unit computes from its two pre-activations, over a grid
    of ``(a, b)``.

    ``a = x·w1`` is the activation branch and ``b = x·v`` the linear branch; a
    gated unit outputs ``f(a)·b``, an ungated one ``f(a)`` whatever ``b`` is.
    ``activation`` is a key of ``mixers.feed_forward.ACTIVATIONS``. Drawn as a
    diverging colour map (red > 0 > blue) over ``[-extent, extent]²`` with
    black contours; ``vmax`` fixes the colour scale (default: the largest
    absolute value), so several panels can share one. ``extent`` and ``vmax``
    are positive finite floats, ``points`` an int >= 2.
    """
    from .feed_forward import ACTIVATIONS

    check_flags(gated=gated, colorbar=colorbar)
    check_positive_float("extent", extent)
    _check_points(points)
    _check_vmax(vmax)

    if activation not in ACTIVATIONS:
        raise ValueError(
            f"activation must be a key of ACTIVATIONS {list(ACTIVATIONS)}, got"
            f" {activation!r}"
        )
    ax = _axes(ax)
    axis = torch.linspace(-extent, extent, points)
    b, a = torch.meshgrid(axis, axis, indexing="ij")  # rows: b, columns: a
    with torch.no_grad():
        values = ACTIVATIONS[activation]()(a)
    if gated:
        values = values * b
    limit = vmax if vmax is not None else max(values.abs().max().item(), 1e-12)
    image = ax.imshow(
        values,
        origin="lower",
        extent=(-extent, extent, -extent, extent),
        cmap="RdBu_r",
        vmin=-limit,
        vmax=limit,
        aspect="equal",
    )
    ax.contour(
        a, b, values, levels=9, colors="black", linewidths=0.5, alpha=0.6
    )
    ax.set_xlabel("a = x·w₁ (activation branch)")
    ax.set_ylabel("b = x·v (linear branch)")
    ax.set_title(
        title
        if title is not None
        else (f"{activation}(a)·b" if gated else f"{activation}(a)")
    )
    if colorbar:
        ax.figure.colorbar(
            image, ax=ax, fraction=0.046, pad=0.04, label="unit output"
        )
    return ax


def loss_bands(
    groups: dict[str, list[dict]],
    ax=None,
    metric: str = "val_loss",
    colors: dict[str, str] | None = None,
    linestyles: dict[str, str] | None = None,
    title: str | None = None,
):
    """The mean over seeds of each group's loss curve, in a band of ± one
    standard deviation.

    ``groups`` maps a label to the ``TrainResult.to_dict()`` of each seed's
    run; the runs of a group must share their evaluation steps. ``metric`` is
    ``"val_loss"`` or ``"train_loss"``.
    """
    check_choice("metric", metric, ("val_loss", "train_loss"))
    ax = _axes(ax)
    for i, (label, runs) in enumerate(groups.items()):
        steps = runs[0]["steps"]
        if any(run["steps"] != steps for run in runs):
            raise ValueError(
                f"the runs of group {label!r} must share their evaluation"
                " steps"
            )
        # [seeds, evals]
        curves = torch.tensor(
            [run[metric] for run in runs], dtype=torch.float64
        )
        mean = curves.mean(0)
        std = curves.std(0) if len(runs) > 1 else torch.zeros_like(mean)
        color = (colors or {}).get(label, f"C{i}")
        ax.plot(
            steps,
            mean,
            color=color,
            linestyle=(linestyles or {}).get(label, style(i)["linestyle"]),
            marker=style(i)["marker"],
            markevery=max(1, len(steps) // 8),
            markersize=4,
            label=f"{label} (n={len(runs)})",
        )
        ax.fill_between(
            steps, mean - std, mean + std, color=color, alpha=0.15, linewidth=0
        )
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats / char)")
    return _finish(ax, title)


def seed_spread(
    values: dict[str, Sequence[float]],
    ax=None,
    colors: dict[str, str] | None = None,
    ylabel: str = "best validation loss (nats / char)",
    title: str | None = None,
):
    """One column per label: each seed's value as a dot, and the mean ± one
    standard deviation as a bar."""
    ax = _axes(ax)
    for i, (label, seeds) in enumerate(values.items()):
        seeds = torch.tensor(list(seeds), dtype=torch.float64)
        color = (colors or {}).get(label, f"C{i}")
        offsets = (
            torch.linspace(-0.12, 0.12, len(seeds))
            if len(seeds) > 1
            else torch.zeros(1)
        )
        ax.scatter(i + offsets, seeds, color=color, s=18, alpha=0.7, zorder=3)
        std = seeds.std().item() if len(seeds) > 1 else 0.0
        ax.errorbar(
            i + 0.3,
            seeds.mean().item(),
            yerr=std,
            color=color,
            marker="_",
            markersize=14,
            capsize=3,
            zorder=3,
        )
    ax.set_xticks(range(len(values)), list(values), fontsize=TEXT_POINTS)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, axis="y")
    if title:
        ax.set_title(title)
    return ax


def spatial_weights(
    weights,
    axes=None,
    titles: Sequence[str] | None = None,
    vmax: float | None = None,
    cmap: str = "RdBu_r",
    colorbar: bool = True,
):
    """One heat map per learned spatial weight W ``[k, seq, seq]`` (or ``[seq,
    seq]``): rows are the positions i that read, columns the positions j that
    are read.

    W is signed, so the colour scale is diverging and symmetric about 0
    (white), shared by all maps: ``[-vmax, vmax]`` with ``vmax`` (a positive
    float) the largest ``|W|`` unless given. Draws into ``axes`` (one per
    matrix) or a new grid of axes; returns the axes.
    """
    check_bool("colorbar", colorbar)
    _check_vmax(vmax)
    if isinstance(weights, (list, tuple)):
        weights = torch.stack([torch.as_tensor(w) for w in weights])
    weights = torch.as_tensor(weights)
    if weights.dim() < 2 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(
            "weights must be [k, seq, seq] or [seq, seq], got"
            f" {tuple(weights.shape)}"
        )
    values, axes = _panels(
        weights,
        "weights",
        "[k, seq, seq] or [seq, seq]",
        axes,
        (2.8, 2.8),
        0.8,
        unit="matrix",
    )
    _check_titles(titles, len(axes))
    limit = float(values.abs().max()) if vmax is None else float(vmax)
    limit = limit if limit > 0 else 1.0
    for k, ax in enumerate(axes):
        heatmap(
            values[k],
            ax=ax,
            title=titles[k] if titles is not None else None,
            cmap=cmap,
            colorbar=False,
            xlabel=None,
            ylabel=None,
            vmin=-limit,
            vmax=limit,
        )
        # positions are whole numbers
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("j (read)", fontsize=TEXT_POINTS)
        ax.set_ylabel("i (reads)", fontsize=TEXT_POINTS)
    if colorbar:
        axes[0].figure.colorbar(
            axes[-1].images[0], ax=axes, shrink=0.85, pad=0.02, label="W[i, j]"
        )
    return axes


def diagonal_profile(
    means: dict[str, Sequence[float]],
    ax=None,
    max_offset: int | None = None,
    title: str | None = None,
):
    """The mean of each diagonal of W against its offset k = i - j (how far
    back position i reads).

    ``means`` maps a label to the causal diagonal means ``m_0, m_1, ...``
    (``gmlp.diagonal_means``); ``max_offset`` (None or an int >= 0) crops the
    offsets shown. A Toeplitz W is *exactly* ``W[i, j] = m_{i-j}``, so this one
    curve is then the whole matrix: a causal convolution filter.
    """
    if max_offset is not None:
        # a negative one would crop from the end
        check_non_negative_int("max_offset", max_offset)
    ax = _axes(ax)
    for i, (label, values) in enumerate(means.items()):
        values = torch.as_tensor(values, dtype=torch.float64).cpu()
        if max_offset is not None:
            values = values[: max_offset + 1]
        ax.plot(
            range(len(values)), values, markersize=3, label=label, **style(i)
        )
    ax.axhline(0.0, color="black", linewidth=0.6)
    ax.set_xlabel("offset k = i - j (positions back)")
    ax.set_ylabel("mean of diagonal k of W")
    ax.grid(alpha=0.3)
    if len(means) > 1:
        ax.legend(fontsize=TEXT_POINTS)
    if title:
        ax.set_title(title)
    return ax


# -----------------------------------------------------------------------------
# ALiBi: slopes, bias matrices, extrapolation curves and the benchmark


def _halves(value: float) -> str:
    """``3`` for 3.0, ``3½`` for 3.5 (two characters, to fit a cell), else
    one decimal."""
    whole, half = divmod(round(value * 2), 2)
    if abs(value * 2 - round(value * 2)) > 1e-6:
        return f"{value:.1f}"
    return (str(whole) if whole or not half else "") + ("½" if half else "")


def alibi_slope_grid(
    head_counts: Sequence[int] = range(1, 17),
    ax=None,
    annotate: bool = True,
    title: str | None = None,
):
    """Every head's ALiBi slope, for each head count: row n, column h holds
    ``-log2 m_h`` of an n-head model (``mixers.alibi.alibi_slopes(n)``), as a
    colour and, with ``annotate``, as text.

    A power-of-two row darkens steadily from left to right (a geometric
    series); the other rows jump back after their first p heads, where the
    in-between slopes of the 2p series start.
    """
    from .alibi import alibi_slopes

    check_bool("annotate", annotate)
    ax = _axes(ax)
    counts = list(head_counts)
    width = max(counts)
    grid = torch.full((len(counts), width), float("nan"))
    for row, n in enumerate(counts):
        grid[row, :n] = -torch.log2(alibi_slopes(n).double()).float()
    image = ax.imshow(grid, cmap="viridis_r", vmin=0, vmax=8, aspect="auto")
    if annotate:
        for row, n in enumerate(counts):
            for h in range(n):
                value = grid[row, h].item()
                ax.text(
                    h,
                    row,
                    _halves(value),
                    ha="center",
                    va="center",
                    fontsize=TEXT_POINTS,
                    color="white" if value > 4 else "black",
                )
    ax.set_xticks(
        range(width), [str(h) for h in range(width)], fontsize=TEXT_POINTS
    )
    ax.set_yticks(
        range(len(counts)), [str(n) for n in counts], fontsize=TEXT_POINTS
    )
    ax.set_xlabel("head h")
    ax.set_ylabel("number of heads n")
    ax.figure.colorbar(
        image, ax=ax, fraction=0.046, pad=0.04, label="-log2(slope)"
    )
    if title:
        ax.set_title(title)
    return ax


def bias_heads(
    bias: torch.Tensor,
    axes=None,
    titles: Sequence[str] | None = None,
    colorbar: bool = True,
    cmap: str = "magma",
):
    """One heat map per head of an additive attention bias ``[heads, q_len,
    k_len]`` (or ``[q_len, k_len]``).

    Rows are queries, columns keys. All heads share one colour scale, from the
    most negative finite value to 0; ``-inf`` (not allowed: the causal mask) is
    left blank, grey, so that it cannot be mistaken for a large finite penalty.
    Returns the axes.
    """
    check_bool("colorbar", colorbar)
    values, axes = _panels(
        bias,
        "bias",
        "[heads, q_len, k_len] or [q_len, k_len]",
        axes,
        (2.4, 2.6),
        0.8,
        dtype=torch.float64,
    )
    _check_titles(titles, len(axes))
    finite = values[torch.isfinite(values)]
    low = finite.min().item() if finite.numel() else -1.0
    low = low if low < 0 else -1.0
    colours = plt.get_cmap(cmap).copy()
    colours.set_bad("#d9d9d9")
    for h, ax in enumerate(axes):
        shown = (
            values[h]
            .masked_fill(~torch.isfinite(values[h]), float("nan"))
            .float()
        )
        ax.imshow(shown, cmap=colours, vmin=low, vmax=0.0)
        ax.set_title(
            titles[h] if titles is not None else f"head {h}",
            fontsize=TEXT_POINTS,
        )
        ax.set_xlabel("key j", fontsize=TEXT_POINTS)
        ax.set_ylabel("query i", fontsize=TEXT_POINTS)
        ax.tick_params(labelsize=TEXT_POINTS)
        # In a grid of heads, only the outer panels name their axes: the
        # panels get the room that repeated labels would take.
        ax.label_outer()
    if colorbar:
        axes[0].figure.colorbar(
            axes[-1].images[0], ax=axes, shrink=0.85, pad=0.02, label="bias"
        )
    return axes


def extrapolation_curves(
    runs: dict[str, list[dict]],
    train_length: int,
    ax=None,
    perplexity: bool = False,
    title: str | None = None,
):
    """Loss (or per-character perplexity) against evaluation length, one line
    per scheme.

    ``runs`` maps a scheme to its evaluation rows ``{"length", "loss"}``
    (``loss`` None where the model is not defined at that length). A scheme
    whose line stops early gets an ``x`` at its last length and the words "not
    defined past L", rather than silently ending. The training length is a
    dotted vertical line; the x axis is logarithmic, base 2, as in the ALiBi
    paper. ``train_length`` is a positive int.
    """
    check_positive_int("train_length", train_length)
    check_bool("perplexity", perplexity)
    ax = _axes(ax)
    for i, (scheme, rows) in enumerate(runs.items()):
        defined = [
            (row["length"], row["loss"])
            for row in rows
            if row["loss"] is not None
        ]
        lengths = [length for length, _ in defined]
        values = [
            math.exp(loss) if perplexity else loss for _, loss in defined
        ]
        (line,) = ax.plot(
            lengths, values, markersize=4, label=scheme, **style(i)
        )
        if len(defined) < len(rows) and defined:
            ax.plot(
                lengths[-1],
                values[-1],
                marker="x",
                markersize=11,
                mew=2,
                color=line.get_color(),
            )
            ax.annotate(
                f"{scheme}: not defined past L",
                (lengths[-1], values[-1]),
                textcoords="offset points",
                xytext=(10, 6),
                fontsize=TEXT_POINTS,
                color=line.get_color(),
            )
    ax.axvline(train_length, color="gray", linestyle=":", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("evaluation length (tokens)")
    ax.set_ylabel(
        "perplexity per character"
        if perplexity
        else "validation loss (nats / char)"
    )
    return _finish(ax, title)


def per_position_curves(
    curves: dict[str, Sequence[float] | None],
    train_length: int,
    ax=None,
    bin_size: int = 16,
    title: str | None = None,
):
    """Loss at each position of the window, averaged in bins of ``bin_size``
    positions, one line per scheme.

    ``curves`` maps a scheme to its per-position losses (None: not defined at
    this length, shown in the legend as such). The training length L is a
    dotted vertical line: to its right, every position is one the model never
    saw in training. ``train_length`` and ``bin_size`` are positive ints,
    ``bin_size`` at most the length of every curve.
    """
    check_positive_int("train_length", train_length)
    check_positive_int("bin_size", bin_size)
    for scheme, values in curves.items():
        # no whole bin: the curve would vanish
        if values is not None and len(values) < bin_size:
            raise ValueError(
                f"bin_size={bin_size} is longer than the curve of {scheme!r} "
                f"({len(values)} positions)"
            )
    ax = _axes(ax)
    for i, (scheme, values) in enumerate(curves.items()):
        if values is None:
            ax.plot([], [], label=f"{scheme} (not defined past L)", **style(i))
            continue
        values = torch.as_tensor(values, dtype=torch.float64)
        bins = (
            values[: len(values) // bin_size * bin_size]
            .view(-1, bin_size)
            .mean(1)
        )
        centres = torch.arange(len(bins)) * bin_size + (bin_size - 1) / 2
        ax.plot(
            centres,
            bins,
            markersize=3,
            markevery=max(1, len(bins) // 10),
            label=scheme,
            **style(i),
        )
    ax.axvline(train_length, color="gray", linestyle=":", linewidth=1)
    ax.set_xlabel(f"position in the window (mean over bins of {bin_size})")
    ax.set_ylabel("loss (nats / char)")
    return _finish(ax, title)


def benchmark_curves(
    results: list[dict],
    mode: str = "forward",
    metric: str = "time",
    ax=None,
    title: str | None = None,
):
    """Median time (with a min-max bar) or peak memory against length, one line
    per implementation.

    ``results`` is the ``"results"`` list of a benchmark's JSON
    (``mixers.bench.alibi``): per length, ``implementations[name][mode]`` with
    ``median_s``, ``min_s``, ``max_s``, ``peak_bytes``. An implementation with
    no number for ``mode`` (an error) is listed in the legend as "n/a".
    """
    if metric not in ("time", "memory"):
        raise ValueError(f"metric must be 'time' or 'memory', got {metric!r}")
    # another name: every line "n/a"
    check_choice("mode", mode, ("forward", "forward_backward"))
    ax = _axes(ax)
    for i, name in enumerate(results[0]["implementations"]):
        points = _benchmark_points(results, name, mode, metric)
        # an empty errorbar, so that the legend keeps the implementations'
        # order
        if not points:
            ax.errorbar([], [], yerr=[], label=f"{name} (n/a)", **style(i))
        else:
            _benchmark_line(ax, points, metric, label=name, **style(i))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    # The lengths measured, end to end: an "n/a" entry's empty errorbar would
    # otherwise widen an axis shared with another panel.
    lengths = [row["length"] for row in results]
    ax.set_xlim(min(lengths) / 1.2, max(lengths) * 1.2)
    ax.set_xlabel("sequence length L")
    ax.set_ylabel(
        "median time (ms)" if metric == "time" else "peak memory (MiB)"
    )
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=TEXT_POINTS)
    if title:
        ax.set_title(title)
    return ax


def _benchmark_points(
    results: list[dict], name: str, mode: str, metric: str
) -> list[tuple[int, dict]]:
    """(length, entry) of one implementation at every length where it has
    the number ``metric`` plots (a median time; for memory, a peak too)."""
    points = [
        (row["length"], row["implementations"][name].get(mode, {}))
        for row in results
    ]
    keys = ("median_s",) if metric == "time" else ("median_s", "peak_bytes")
    return [
        (length, entry)
        for length, entry in points
        if all(entry.get(key) is not None for key in keys)
    ]


def _benchmark_line(ax, points, metric: str, **looks) -> None:
    """One implementation's line: median ms with a min-max bar, or peak MiB."""
    lengths = [length for length, _ in points]
    if metric == "time":
        median = [entry["median_s"] * 1e3 for _, entry in points]
        low = [m - e["min_s"] * 1e3 for m, (_, e) in zip(median, points)]
        high = [e["max_s"] * 1e3 - m for m, (_, e) in zip(median, points)]
        ax.errorbar(
            lengths, median, yerr=[low, high], markersize=4, capsize=3, **looks
        )
    else:
        peak_mib = [entry["peak_bytes"] / 2**20 for _, entry in points]
        ax.errorbar(lengths, peak_mib, markersize=4, **looks)


def live_beside_committed(
    live: dict, committed: dict, curves, train: bool = False
):
    """The live run of a chapter beside its committed run, each run's
    validation loss against the step, on one loss scale: what a reader's
    minutes of training give next to what the book's run gave.

    ``live`` and ``committed`` are results of one experiment; ``curves``
    (its module's ``curves``) maps results to ``{label: TrainResult
    dict}``; ``train`` adds the training loss (dashed). Each run keeps its
    colour, marker and (without ``train``) line style in both panels, and
    its name stands at the end of its line in the right-hand panel. Returns
    the figure.
    """
    fig, axes = plt.subplots(
        1, 2, figsize=(MAX_WIDTH, 3.0), sharey=True, layout="constrained"
    )
    for ax, results, what in (
        (axes[0], live, "this run"),
        (axes[1], committed, "committed"),
    ):
        prov = results["provenance"]
        where = prov["device_type"].upper()
        loss_curves(
            curves(results),
            ax=ax,
            train=train,
            title=f"{what}:\n{prov['profile']} on {where}",
        )
        ax.get_legend().remove()
        for secondary in list(ax.child_axes):  # nats only: one scale here
            secondary.remove()
        _tell_lines_apart(ax, restyle=not train)
    axes[1].set_ylabel("")
    _label_line_ends(axes[1])
    return fig


def _tell_lines_apart(ax, restyle: bool) -> None:
    """Lines that lie on one another stay visible: the first drawn is the
    widest, with the largest markers, so that each later line leaves the
    earlier ones showing at its edges; ``restyle`` also gives the i-th line
    style(i)'s line style (dashes are told apart where colours are not)."""
    lines = ax.get_lines()
    for i, line in enumerate(lines):
        wider = (len(lines) - 1 - i) / max(1, len(lines) - 1)
        line.set_linewidth(1.2 + 1.2 * wider)
        line.set_markersize(3.5 + 2.5 * wider)
        if restyle:
            line.set_linestyle(style(i)["linestyle"])


def _spread(targets: list[float], gap: float) -> list[float]:
    """Heights as near the sorted ``targets`` as keeps them ``gap`` apart:
    labels that would overlap are merged into one group, centred on its
    targets' mean, until no two groups overlap."""
    groups = [[target] for target in targets]  # each: its members' targets

    def bottom(group):
        return sum(group) / len(group) - gap * (len(group) - 1) / 2

    merged = True
    while merged:
        merged = False
        for k in range(len(groups) - 1):
            top_of_lower = bottom(groups[k]) + gap * (len(groups[k]) - 1)
            if bottom(groups[k + 1]) - top_of_lower < gap:
                groups[k : k + 2] = [groups[k] + groups[k + 1]]
                merged = True
                break
    return [bottom(g) + gap * i for g in groups for i in range(len(g))]


def _label_line_ends(ax) -> None:
    """Each line's name (its label less " (val)") in its colour, right of
    the panel at the height of its last point, moved up or down as little
    as keeps one line of text between names, with a thin leader from the
    point to its name."""
    ax.figure.draw_without_rendering()  # the layout sets the panel's size
    to_axes = ax.transData + ax.transAxes.inverted()
    ends = {}
    for line in ax.get_lines():
        points = [
            (x, y)
            for x, y in zip(line.get_xdata(), line.get_ydata())
            if y is not None and math.isfinite(y)
        ]
        if points:
            ends[line] = points[-1]
    # the height of a line of text, as a fraction of the panel's height
    panel_points = ax.get_window_extent().height * 72 / ax.figure.dpi
    gap = 1.2 * TEXT_POINTS / panel_points
    order = sorted(ends, key=lambda line: to_axes.transform(ends[line])[1])
    heights = _spread(
        [to_axes.transform(ends[line])[1] for line in order], gap
    )
    for line, height in zip(order, heights):
        ax.annotate(
            line.get_label().removesuffix(" (val)"),
            xy=ends[line],
            xytext=(1.04, height),
            textcoords="axes fraction",
            va="center",
            color=line.get_color(),
            fontsize=TEXT_POINTS,
            annotation_clip=False,
            arrowprops={
                "arrowstyle": "-",
                "color": line.get_color(),
                "linewidth": 0.8,
                "shrinkA": 0,
                "shrinkB": 2,
                "relpos": (0, 0.5),  # to the start of the name
            },
        )
