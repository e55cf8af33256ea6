"""The chapters' figures audit themselves (issue 40): ``mixers.plot.figure_png``,
which ``use_book_style`` makes every chapter's figure output, records in the
output's metadata what ``audit_figure`` found in the very draw that made the
picture, and the size of its heat maps.

- the audit, on small synthetic figures: it finds a label cut by the
  picture's edge, a legend on a line, an axis that mixes tick formats, text
  drawn on text, and nothing in a clean figure;
- every chapter's every figure: its recorded audit is empty, and each heat
  map is at least ``MIN_PANEL_PX`` CSS pixels on a 390-px phone, or its
  cells at least ``MIN_CELL_PX`` (a 5 × 7 matrix reads well smaller). A figure
  that records no audit fails too (its chapter was executed before the audit
  existed: re-execute it with ``python tools/run_notebooks.py``).
"""

import json

import matplotlib
import pytest
from test_book import NOTEBOOKS, ROOT, chapter_pages

matplotlib.use("agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    LogFormatterSciNotation,
    ScalarFormatter,
)

from mixers import plot  # noqa: E402
from mixers.plot import AUDIT_KEY, PANEL_KEY, figure_png  # noqa: E402

# A 390-px phone's text column, in CSS pixels (measured on the built site).
PHONE_COLUMN = 342
# The smallest a heat map may be on a phone (the gMLP chapter's 12 maps of a
# 64 × 64 W were 55 px, under a pixel a cell), unless each of its cells is
# large enough to read on its own.
MIN_PANEL_PX, MIN_CELL_PX = 100, 8


@pytest.fixture(autouse=True)
def book_style():
    with plt.rc_context(plot.BOOK_STYLE):
        yield
    plt.close("all")


def audited(figure) -> list[str]:
    return figure_png(figure)[1][AUDIT_KEY]


def test_a_clean_figure_passes():
    runs = {
        name: {
            "steps": [0, 100, 200, 300],
            "train_loss": [3.0 - k, 2.2 - k, 1.9 - k, 1.8 - k],
            "val_loss": [3.1 - k, 2.3 - k, 2.0 - k, 1.9 - k],
        }
        for k, name in ((0.0, "attention"), (0.2, "gmlp"))
    }
    axes = plot.loss_curves(runs)
    metadata = figure_png(axes.figure)[1]
    assert metadata[AUDIT_KEY] == []
    assert PANEL_KEY not in metadata  # no heat map


def test_a_label_cut_by_the_edge_of_the_picture_is_found():
    # The real case (the GLU chapter's figure): a constrained layout makes no
    # room for a y-label taller than its panel, and the picture's tight box,
    # found by an earlier draw, no longer holds it once the layout moves.
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(6.5, 6.6), layout="constrained", height_ratios=[1.2, 1]
    )
    names = ["relu", "gelu", "swish", "glu", "bilinear", "reglu", "geglu"]
    names.append("swiglu")
    for i, name in enumerate(names):
        top.plot([300, 600], [2.1 - 0.02 * i, 1.9 - 0.02 * i], label=name)
    top.set_title("Validation loss, mean ± std over seeds")
    top.set_xlabel("step")
    fig.legend(loc="outside upper center", ncols=4)
    plot.seed_spread(
        {name: [1.9 + 0.01 * i, 1.92, 1.95] for i, name in enumerate(names)},
        ax=bottom,
        title="Best validation loss: each seed, and mean ± std",
    )
    problems = audited(fig)
    assert any(
        "'best validation loss (nats / char)' is cut at the bottom edge" in p
        for p in problems
    ), problems


def test_a_text_outside_the_picture_is_found():
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([0, 1], [0, 1])
    fig.text(0.97, 0.5, "cut off here", in_layout=False)
    assert audited(fig) == [
        "text 'cut off here' is cut at the right edge of the picture"
    ]


def test_a_legend_on_a_line_is_found():
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([0, 1], [0, 1], label="diagonal")
    ax.plot([0, 1], [0.9, 0.9], label="ceiling")
    ax.legend(loc="center")
    assert audited(fig) == [
        "a legend covers the line 'diagonal' in panel 1 of 1"
    ]
    ax.legend(loc="lower right")  # below the diagonal, clear of both
    assert audited(fig) == []


def test_a_legend_on_tick_labels_is_found():
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([0, 1], [1, 0], label="falling")
    ax.legend(loc="upper left", bbox_to_anchor=(-0.2, 0.3))
    problems = audited(fig)
    assert any(p.startswith("a legend covers the text '0.") for p in problems)


def test_an_axis_that_mixes_tick_formats_is_found():
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([400, 2000], [1, 2])
    ax.set_xscale("log")
    # plain numbers for the decades, 4×10^2 for the ticks between them
    ax.xaxis.set_major_formatter(ScalarFormatter())
    assert audited(fig) == [
        "the x axis of panel 1 of 1 mixes tick formats: '1000', '4×10^2'"
    ]
    ax.xaxis.set_major_formatter(LogFormatterSciNotation())
    assert audited(fig) == []  # 10^3 beside 4×10^2: one format


def test_text_drawn_on_text_is_found_and_a_heat_map_records_its_size():
    fig, ax = plt.subplots(figsize=(4, 4))
    ax.imshow([[0.0, 1.0], [1.0, 0.0]])
    ax.text(0.0, 0.5, "one", color="w")
    ax.text(0.05, 0.5, "two", color="w")
    data, metadata = figure_png(fig)
    assert metadata[AUDIT_KEY] == ["text 'one' overlaps text 'two'"]
    # the panel's smaller side, and a cell's, in the picture's (retina)
    # pixels
    width, height = fig.get_size_inches() * fig.dpi * 2
    position = ax.get_position()
    side = min(position.width * width, position.height * height)
    assert metadata[PANEL_KEY] == [
        [pytest.approx(side, abs=1), pytest.approx(side / 2, abs=1)]
    ]


def test_an_annotation_is_measured_by_its_text_not_its_arrow():
    # Labels at the ends of lines (plot._label_line_ends): their arrows
    # cross other labels' places, their texts do not touch.
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([0, 1], [0, 0.1])
    for y, name in ((0.8, "first"), (0.2, "second")):
        arrow = dict(arrowstyle="-", color="0.5")
        ax.annotate(name, (1, 0.1), (1.1, y), arrowprops=arrow)
    ax.annotate("third", (0, 0.1), (0.3, 0.5), arrowprops=arrow)
    assert audited(fig) == []


def test_a_heat_map_too_small_for_its_numbers_is_found():
    fig, ax = plt.subplots(figsize=(3, 3))
    values = [[float(i + j) for j in range(12)] for i in range(12)]
    ax.imshow(values)
    for i in range(12):
        for j in range(12):
            ax.text(j, i, f"{values[i][j]:.1f}", ha="center", va="center")
    problems = audited(fig)
    assert any(
        p.startswith("the numbers in the cells of panel 1 of 1 need")
        for p in problems
    ), problems
    fig, ax = plt.subplots(figsize=(4, 4))
    ax.imshow([[0.0, 1.0], [1.0, 0.0]])
    ax.text(0, 0, "0.0", ha="center", va="center")
    assert audited(fig) == []


def test_a_panel_whose_data_fills_a_corner_is_found():
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([256, 512, 1024, 2048], [9, 30, 300, 1000], marker="o")
    ax.set_xscale("log", base=2)
    ax.set_xlim(4, 2048)  # the lengths another run measured
    assert audited(fig) == ["the data fills 33% of the width of panel 1 of 1"]
    ax.set_xlim(200, 2600)
    assert audited(fig) == []
    # a short run beside a long one on a shared scale: no empty panel
    fig, (short, long) = plt.subplots(1, 2, figsize=(6, 3), sharey=True)
    short.plot([10, 20], [3.5, 3.4])
    long.plot([100, 200, 400, 600], [2.7, 2.3, 2.1, 2.0])
    assert audited(fig) == []


def test_tick_formats_are_told_apart():
    formats = {
        "3×10^2": "scientific",
        "10^3": "scientific",
        "1e+03": "scientific",
        "1000": "plain",
        "0.25": "plain",
        "−3": "plain",
        "40%": "plain",
        "relu": None,
        "1/2": None,
    }
    for label, kind in formats.items():
        assert plot._tick_format(label) == kind, label


# ---------------------------------------------------------------------------
# Every chapter's figures, as committed


def chapter_numbers() -> dict[str, int]:
    """Notebook name -> the chapter number the site gives it (its place
    among the table of contents' notebooks)."""
    return {
        page.split("/")[-1]: i + 1 for i, page in enumerate(chapter_pages())
    }


def figure_outputs(notebook):
    """(the figure's name as a reader finds it, the PNG output's metadata)
    for every picture of a chapter: "Fig. 4.4 (fig-glu-curves)" for a
    numbered figure, "cell 12" for another."""
    chapter = chapter_numbers().get(notebook.stem, "?")
    figures = 0
    for index, cell in enumerate(json.loads(notebook.read_text())["cells"]):
        figure = cell.get("metadata", {}).get("mystnb", {}).get("figure")
        if figure is not None:
            figures += 1
        for output in cell.get("outputs", []):
            if "image/png" not in output.get("data", {}):
                continue
            name = (
                f"Fig. {chapter}.{figures} ({figure.get('name', 'unnamed')})"
                if figure is not None
                else f"cell {index}"
            )
            yield name, output.get("metadata", {}).get("image/png", {})


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_figure_of_the_chapter_passes_its_audit(notebook):
    problems = []
    for name, metadata in figure_outputs(notebook):
        where = f"{notebook.name} {name}"
        if AUDIT_KEY not in metadata:
            problems.append(
                f"{where}: records no audit (re-execute the chapter:"
                f" python tools/run_notebooks.py {notebook.relative_to(ROOT)})"
            )
            continue
        problems += [f"{where}: {problem}" for problem in metadata[AUDIT_KEY]]
        # picture pixels are retina (2 a CSS pixel); a picture wider than
        # the phone's column is shown at the column's width
        width = metadata.get("width") or PHONE_COLUMN
        scale = min(1, PHONE_COLUMN / width) / 2
        for side, cell in metadata.get(PANEL_KEY, []):
            if side * scale < MIN_PANEL_PX and cell * scale < MIN_CELL_PX:
                problems.append(
                    f"{where}: a heat map is {side * scale:.0f} px on a"
                    f" 390-px phone, {cell * scale:.1f} px a cell (at least"
                    f" {MIN_PANEL_PX} px, or {MIN_CELL_PX} px a cell)"
                )
    assert not problems, "\n".join(problems)
