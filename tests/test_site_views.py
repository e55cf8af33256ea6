"""The live views' details on the built site, in headless Chromium.

tests/test_site.py moves every control of every view once and checks that
the view changes; these tests move the controls that a detail depends on
and check what the view then says and draws: the multi-head view's colour
bar names the scale the scores are shown at, the ALiBi view's weights show
a flat head's structure, the side-by-side view's title follows its
reference toggle and its curves stay inside their box, and the GLU view
names its controls without a side and draws the level sets of its heat map.
They reuse test_site.py's local server, browser and widths.
"""

import re

import pytest
import test_site
from test_site import HANG_MS, LIVE_VIEW, WIDTHS

# The fixtures of tests/test_site.py: one local server and one browser for
# the module.
site_url = test_site.site_url
browser = test_site.browser


def open_view(browser, site_url, page_path, width="desktop"):
    """The page's first live view, once drawn, and its browser context."""
    context = browser.new_context(
        viewport=WIDTHS[width], has_touch=width == "phone"
    )
    context.set_default_timeout(HANG_MS)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{site_url}/{page_path}.html", wait_until="load")
    view = page.locator(LIVE_VIEW).first
    view.locator("svg").first.wait_for()
    return context, view, errors


def control(view, name):
    """The control (a slider's row, a choice's fieldset) named ``name``."""
    named = re.compile(f"^{re.escape(name)}$")
    return view.locator(".mx-controls > .mx-control").filter(
        has=view.page.locator(":scope > label, :scope > legend").filter(
            has_text=named
        )
    )


def choose(view, name, option):
    """Click ``option`` of the choice ``name``, as a reader would."""
    control(view, name).locator("label").filter(
        has_text=re.compile(f"^{re.escape(option)}$")
    ).click()


def slide_to_end(view, name, key="End"):
    """Move the slider ``name`` to its end (``End``) or start (``Home``)."""
    handle = control(view, name).locator("input[type=range]")
    handle.focus()
    handle.press(key)


def colour_bar_label(view, panel=0):
    """The label of the colour bar of the view's ``panel``-th panel (the
    text turned by 90 degrees beside the bar)."""
    svg = view.locator(".mx-figures svg").nth(panel)
    return svg.locator("text.mx-label[transform*='rotate(90)']").text_content()


def panel_title(view, panel=0):
    svg = view.locator(".mx-figures svg").nth(panel)
    return svg.locator(".mx-title").text_content()


def test_the_colour_bar_of_the_scores_names_the_scale(site_url, browser):
    """With the scale set to none, the scores are q·k / T: the colour bar
    must not claim the 1/√d it no longer applies."""
    context, view, errors = open_view(browser, site_url, "book/multi_head")
    try:
        assert colour_bar_label(view) == "attention weight"
        choose(view, "show", "scores")
        assert colour_bar_label(view) == "score q·k / (T√d)"
        choose(view, "scale", "none")
        assert colour_bar_label(view) == "score q·k / T"
        choose(view, "scale", "1/√d")
        assert colour_bar_label(view) == "score q·k / (T√d)"
        assert not errors
    finally:
        context.close()


# The share of an image's drawn (not white, masked) pixels whose colour is
# in the darkest tenth of viridis: darker than its colour at 0.1, #482475,
# whose channels sum to 225.
DARK_SHARE = """async (image) => {
    const picture = new Image();
    picture.src = image.getAttribute("href");
    await picture.decode();
    const canvas = document.createElement("canvas");
    [canvas.width, canvas.height] = [picture.width, picture.height];
    const context = canvas.getContext("2d");
    context.drawImage(picture, 0, 0);
    const data = context.getImageData(0, 0, canvas.width, canvas.height).data;
    let drawn = 0, dark = 0;
    for (let k = 0; k < data.length; k += 4) {
        const sum = data[k] + data[k + 1] + data[k + 2];
        if (sum === 3 * 255) continue;
        drawn++;
        if (sum < 225) dark++;
    }
    return dark / drawn;
}"""


def test_the_weights_of_a_flat_alibi_head_show_its_structure(
    site_url, browser
):
    """The flattest of 8 heads (m = 2^-8) over 1,024 positions: its softmax
    weights are all about 1/i, nearly all dark on a 0 to 1 scale. Drawn over
    each row's largest (e^(-m(i - j))), a key keeps a tenth of the weight
    after 589 tokens: most of the triangle is lighter than the darkest
    tenth of the scale, and the colour bar says what it shows."""
    context, view, errors = open_view(browser, site_url, "book/alibi")
    try:
        slide_to_end(view, "head")  # head 7 of 8: m = 2^-8
        slide_to_end(view, "length")  # 1,024 positions
        choose(view, "colour shows", "softmax of the bias")
        assert "m = 2⁻⁸" in panel_title(view)
        assert colour_bar_label(view) == "weight ÷ its row's largest"
        image = view.locator(".mx-figures svg").first.locator("image")
        dark = image.evaluate(DARK_SHARE)
        assert dark < 0.3, f"{dark:.0%} of the weights drawn darkest"
        assert (
            "drawn over its largest"
            in view.locator(".mx-caption").inner_text()
        )
        # the bias itself still runs over the whole scale, from -m(L - 1)
        choose(view, "colour shows", "the bias")
        assert colour_bar_label(view) == "bias"
        assert not errors
    finally:
        context.close()


def curve_points_cut_by_the_box(view) -> list[str]:
    """Points of the loss curves (paths) that lie outside the plotting box
    (the axes' frame) or so near its edge that the frame cuts their stroke
    (1.8 px wide): at least 1 px inside, named by the curve's index."""
    return view.locator(".mx-figures svg").first.evaluate(
        """(svg) => {
        const pointsOf = """
        + test_site.PATH_POINTS
        + """;
        const frame = svg.querySelector(".mx-axes .mx-frame");
        const [x, y, w, h] = ["x", "y", "width", "height"].map(
            (k) => Number(frame.getAttribute(k)));
        const cut = [];
        const curves = svg.querySelectorAll("path");
        if (!curves.length) return ["no curve drawn"];
        curves.forEach((path, k) => {
            for (const [px, py] of pointsOf(path))
                if (px < x || px > x + w || py < y + 1 || py > y + h - 1)
                    cut.push(`curve ${k} at (${px}, ${py})`);
        });
        return cut;
    }"""
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_the_loss_curves_fit_their_box_and_the_title_follows_the_reference(
    site_url, browser, width
):
    """Every pair at its lowest and its best learning rate, each loss: no
    point of a curve outside the box or on its edge (the y range fits what
    is drawn, with a margin), no title cut by the picture's edge nor line
    hidden by the legend (a six-line legend goes below the axes on a
    phone), a caption that gives the final losses, and a title that names
    the reference only while it is shown."""
    context, view, errors = open_view(
        browser, site_url, "book/side_by_side", width
    )
    try:
        select = control(view, "pair").locator("select")
        pairs = select.locator("option").evaluate_all(
            "options => options.map(o => o.value)"
        )
        assert len(pairs) > 1
        problems = []
        for pair in pairs:
            select.select_option(pair)
            for rate in ("best", "lowest"):
                if rate == "lowest":
                    slide_to_end(view, "learning rate", "Home")
                for loss in ("validation", "training"):
                    choose(view, "loss", loss)
                    problems += [
                        f"{pair}, {rate} rate, {loss} loss: {where}"
                        for where in curve_points_cut_by_the_box(view)
                        + test_site.drawn_badly(view)
                    ]
                    caption = view.locator(".mx-caption").inner_text()
                    assert caption.startswith(loss.capitalize() + " loss")
                    assert f"{pair} at " in caption
        assert not problems, "\n".join(problems[:10])

        assert panel_title(view).endswith(", reference at its best")
        choose(view, "reference", "hidden")
        assert "reference" not in panel_title(view)
        described = view.locator(".mx-figures svg > title").first
        assert "reference" not in described.text_content()
        choose(view, "reference", "shown")
        assert panel_title(view).endswith(", reference at its best")
        assert not errors
    finally:
        context.close()


def contour_segments(view):
    """The GLU view's level sets, as [[x0, y0], [x1, y1]] in pixels."""
    return (
        view.locator(".mx-figures svg")
        .nth(1)
        .evaluate(
            """(svg) => {
        const pointsOf = """
            + test_site.PATH_POINTS
            + """;
        // each segment an M and an L: the points two by two
        return [...svg.querySelectorAll(".mx-contour")].flatMap((path) =>
            pointsOf(path).flatMap((p, i, all) =>
                i % 2 ? [] : [[p, all[i + 1]]]));
        }"""
        )
    )


def test_the_glu_view_draws_level_sets_and_names_no_side(site_url, browser):
    """An ungated unit's level sets are vertical (relu(a) ignores b); a
    gated unit's are not. No control or panel title names a side: on a
    phone the panels stack."""
    context, view, errors = open_view(browser, site_url, "book/glu_variants")
    try:
        names = view.locator(
            ".mx-controls label, .mx-controls legend, .mx-title"
        ).all_text_contents()
        sides = [n for n in names if re.search(r"\b(left|right)\b", n)]
        assert not sides, f"names that point to a side: {sides}"
        assert any(n == "linear branch b" for n in names)

        choose(view, "variant", "relu")
        segments = contour_segments(view)
        assert len(segments) > 10
        slanted = [s for s in segments if abs(s[0][0] - s[1][0]) > 0.15]
        assert not slanted, (
            f"relu's level sets are not vertical: {slanted[:3]}"
        )

        choose(view, "variant", "swiglu")
        segments = contour_segments(view)
        slanted = [s for s in segments if abs(s[0][0] - s[1][0]) > 0.15]
        assert len(slanted) > len(segments) / 4
        assert not errors
    finally:
        context.close()
