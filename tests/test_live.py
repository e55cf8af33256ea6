"""The live views (mixers.live): the widget and the HTML form the site renders, the int8
weights, the fallback picture, and views.js's formulas against the package (under node).

Whether each control changes its view in a browser is checked on the built site
(tests/test_site.py).
"""

import base64
import html
import io
import json
import os
import re
import shutil
import subprocess

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from test_book import ROOT  # noqa: E402

from mixers.live import (  # noqa: E402
    VIEW_NAMES,
    VIEWS_JS,
    encode_lower,
    figure_png,
    fixtures,
    live_view,
)


def small_figure():
    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1], [1, 0])
    return fig


def site_form(widget) -> tuple[dict, str]:
    """The JSON and the whole HTML of a view's site form."""
    bundle, _ = widget._repr_mimebundle_()
    page = bundle["text/html"]
    data = re.search(
        r'<script type="application/json">(.*?)</script>', page, re.S
    ).group(1)
    return json.loads(data), page


def test_a_live_view_is_a_widget_for_jupyter_and_an_html_form_for_the_site():
    widget = live_view(
        "alibi", {"heads": 12, "length": 40}, alt="ALiBi's bias"
    )
    bundle, _ = widget._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert widget.view == "alibi" and widget.props == {
        "heads": 12,
        "length": 40,
    }
    # anywidget runs the very module the site serves
    assert widget._esm == VIEWS_JS.read_text()
    data, page = site_form(widget)
    assert data == {"view": "alibi", "props": {"heads": 12, "length": 40}}
    assert page.startswith('<div class="mixers-live" role="group"')
    assert 'aria-label="ALiBi&#x27;s bias"' in page
    assert "<noscript>" not in page  # no fallback given
    assert repr(widget) == "LiveView('alibi')"


def test_the_site_form_cannot_be_cut_short_and_escapes_its_alt_text():
    props = {"tokens": ["</script><b>", "&"]}
    widget = live_view(
        "softmax", props, fallback=small_figure(), alt='a "quoted" <b>'
    )
    data, page = site_form(widget)
    assert data["props"] == props  # the JSON survived a "</script>" in it
    assert page.count("</script>") == 1
    picture = re.search(r"<noscript>(.*)</noscript>", page).group(1)
    assert picture.startswith('<img src="data:image/png;base64,iVBORw0KGgo')
    assert 'alt="a &quot;quoted&quot; &lt;b&gt;"' in picture
    source = re.search(r"base64,([^\"]+)", picture).group(1)
    assert base64.b64decode(source)[:8] == b"\x89PNG\r\n\x1a\n"
    assert html.unescape(picture)  # well-formed enough to unescape


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        (("heatmap", {}), {"alt": "x"}, ValueError, "view must be one of"),
        (("alibi", [1]), {"alt": "x"}, TypeError, "props must be a dict"),
        (("alibi", {}), {"alt": " "}, ValueError, "alt"),
        (
            ("alibi", {"w": torch.ones(2)}),
            {"alt": "x"},
            TypeError,
            "props must be JSON",
        ),
    ],
)
def test_bad_arguments_are_refused_by_name(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        live_view(*args, **kwargs)


def test_views_js_defines_exactly_the_views_the_package_names():
    source = VIEWS_JS.read_text()
    table = re.search(r"export const VIEWS = \{(.*?)\};", source, re.S)
    names = re.findall(r"(\w+): \w+View", table.group(1))
    assert sorted(names) == sorted(VIEW_NAMES)
    assert "export default { render }" in source  # anywidget's entry point


def test_encode_lower_keeps_the_lower_triangle_to_within_half_a_step():
    weight = torch.randn(9, 9, dtype=torch.float64).tril()
    code = encode_lower(weight)
    assert code["n"] == 9 and code["scale"] == pytest.approx(
        weight.abs().max().item(), rel=1e-6
    )
    q = torch.frombuffer(
        bytearray(base64.b64decode(code["data"])), dtype=torch.int8
    )
    assert len(q) == 9 * 10 // 2  # the lower triangle only
    rows, cols = torch.tril_indices(9, 9)
    decoded = q.double() * code["scale"] / 127
    assert (decoded - weight[rows, cols]).abs().max() <= code[
        "scale"
    ] / 254 + 1e-9
    assert q.abs().max() == 127  # the largest entry uses the whole range
    with pytest.raises(ValueError, match="weight must be square"):
        encode_lower(torch.zeros(2, 3))


def test_figure_png_is_the_figure_at_its_resolution_in_at_most_its_palette():
    from PIL import Image

    fig = plt.figure(figsize=(2, 1))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.imshow([list(range(256))], cmap="viridis", aspect="auto")
    png = figure_png(fig, dpi=50, colours=8)
    assert not plt.fignum_exists(fig.number)  # closed
    image = Image.open(io.BytesIO(png))
    assert image.size == (100, 50)  # 2 x 1 inches at 50 dots per inch
    assert len(image.convert("RGB").getcolors()) <= 8
    with pytest.raises(ValueError):
        figure_png(small_figure(), dpi=-5)
    with pytest.raises(TypeError):
        figure_png(small_figure(), colours=True)
    plt.close("all")


def test_the_fixtures_cover_every_head_count_and_mark_masked_entries():
    data = fixtures()
    assert sorted(map(int, data["slopes"])) == list(range(1, 65))
    bias = data["bias"]["values"][0]  # head 0 over 9 positions
    assert bias[1] is None and bias[9] == pytest.approx(-0.5)  # masked; -m
    assert json.loads(json.dumps(data)) == data  # plain JSON


def test_views_js_computes_what_the_package_computes(tmp_path):
    """node's own test runner runs tests/js/views.test.mjs against the package's fixtures."""
    node = shutil.which("node")
    if node is None:
        if os.environ.get("MIXERS_REQUIRE_BROWSER") == "1":
            pytest.fail("node is needed for the JavaScript tests")
        pytest.skip("node is not installed")
    path = tmp_path / "fixtures.json"
    path.write_text(json.dumps(fixtures()))
    run = subprocess.run(
        [node, "--test", str(ROOT / "tests" / "js")],
        env={**os.environ, "MIXERS_FIXTURES": str(path)},
        capture_output=True,
        text=True,
        timeout=1800,  # a hang's limit
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"# fail 0", run.stdout), run.stdout
    assert int(re.search(r"# pass (\d+)", run.stdout).group(1)) >= 8


# ---------------------------------------------------------------------------------------------
# views.js reads like the package: parts with titles, a note beside each few lines of code, the
# notes in reStructuredText with their maths typeset (its annotated page shows them beside the
# code).

RULE = "// " + "-" * 54


def views_js_notes() -> list[tuple[int, str, int]]:
    """Each note of views.js (a run of whole-line ``//`` comments, rules and titles aside) as
    (first line, text, the line of the code it sits above)."""
    lines = VIEWS_JS.read_text().split("\n")
    notes, run = [], []
    for n, line in enumerate(lines, 1):
        text = line.strip()
        if text.startswith("//") and text != RULE and lines[n - 2] != RULE:
            run.append((n, text[3:] if text.startswith("// ") else text[2:]))
        elif run:
            notes.append((run[0][0], "\n".join(t for _, t in run), n))
            run = []
    return notes


def code_runs_without_a_note(lines: list[str]) -> list[tuple[int, int]]:
    """(first line, length) of each run of code lines with no note among them (blank lines and
    the style's CSS, inside template strings, not counted)."""
    runs, start, length, in_css = [], 0, 0, False
    for n, line in enumerate(lines, 1):
        text = line.strip()
        if in_css or text.startswith("//"):
            if length:
                runs.append((start, length))
            length = 0
        elif text:
            start, length = (start, length + 1) if length else (n, 1)
        if text.endswith("= `"):
            in_css = True
        elif text == "`;":
            in_css = False
    return runs + ([(start, length)] if length else [])


def test_views_js_is_in_titled_parts_one_per_view():
    lines = VIEWS_JS.read_text().split("\n")
    titles = [lines[n + 1] for n, line in enumerate(lines) if line == RULE]
    assert all(re.fullmatch(r"// [A-Z].+", title) for title in titles), titles
    for part in ("Formulas", "Drawing", "Controls"):
        assert any(title.startswith(f"// {part}") for title in titles)
    # one part a view: ALiBi, softmax, GLU, gMLP, side-by-side (curves), scaling
    views = [t for t in titles if re.match(r"// The [\w-]+ view\b", t)]
    assert len(views) == len(VIEW_NAMES), views


def test_views_js_has_a_note_beside_each_few_lines_of_code():
    lines = VIEWS_JS.read_text().split("\n")
    long_runs = [
        f"lines {start}-{start + length - 1}: {length} lines of code without a note"
        for start, length in code_runs_without_a_note(lines)
        if length > 24
    ]
    assert not long_runs, "\n".join(long_runs)


def test_views_js_notes_are_restructuredtext_with_their_maths_typeset():
    """Every note parses without a warning (the annotated page renders it), and every formula
    the views compute has its maths typeset in the note above it."""
    from docutils import nodes
    from docutils.core import publish_doctree
    from docutils.parsers.rst import roles

    def sphinx_role(
        name, rawtext, text, lineno, inliner, options=None, content=None
    ):
        return [nodes.literal(rawtext, text)], []

    for name in (
        "func",
        "data",
        "class",
        "ref",
    ):  # Sphinx's, resolved on the site
        roles.register_local_role(name, sphinx_role)
    problems, typeset = [], {}
    lines = VIEWS_JS.read_text().split("\n")
    for first, text, code in views_js_notes():
        warnings = io.StringIO()
        publish_doctree(
            text,
            settings_overrides={"warning_stream": warnings, "report_level": 2},
        )
        if warnings.getvalue():
            problems.append(
                f"note at line {first}: {warnings.getvalue().strip()}"
            )
        typeset[lines[code - 1]] = ":math:" in text or ".. math::" in text
    assert not problems, "\n".join(problems)
    formulas = [
        "alibiSlopes",
        "alibiBias",
        "softmaxRows",
        "rowsOverMax",
        "meanEntropy",
        "erf",
        "ACTIVATIONS",
        "unitOutput",
        "diagonalMeans",
        "toeplitzScore",
        "decodeLower",
        "contourSegments",
        "drawScores",
    ]
    for name in formulas:
        header = next(
            line for line in typeset if re.match(rf"export \w+ {name}\b", line)
        )
        assert typeset[header], f"the note above {name} typesets no maths"
