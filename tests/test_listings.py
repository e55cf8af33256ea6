"""book/_ext/listings.py: the captions of the package's listings name the right lines and link to them.

The expected line numbers come from outside Sphinx (``inspect``, or searching the file's text), so
an off-by-one in the extension fails here; a one-page Sphinx build checks the rendered captions.
"""

import html
import inspect
import re
import shutil
import sys
from pathlib import Path

import pytest
from sphinx.config import Config
from sphinx.testing.util import SphinxTestApp

import mixers.alibi
import mixers.feed_forward

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import listings  # noqa: E402  (book/_ext is not a package; Jupyter Book puts it on the path too)

URL = "https://github.com/example/mixers"
ALIBI = ROOT / "src" / "mixers" / "alibi.py"
FEED_FORWARD = ROOT / "src" / "mixers" / "feed_forward.py"
ACTIVATIONS = {
    "start-at": "ACTIVATIONS = {",
    "end-before": "The paper's variants, in its order",
}


def source_range(obj):
    """(first, last) line numbers of ``obj`` in its file, as Python itself reports them."""
    lines, first = inspect.getsourcelines(obj)
    return first, first + len(lines) - 1


def line_number_of(path, text):
    """The 1-based number of the first line of ``path`` that contains ``text``."""
    return next(
        i
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if text in line
    )


def activations_range():
    """The lines the ACTIVATIONS listing should show: its first line to the one before the end mark."""
    first = line_number_of(FEED_FORWARD, ACTIVATIONS["start-at"])
    return first, line_number_of(FEED_FORWARD, ACTIVATIONS["end-before"]) - 1


@pytest.fixture(scope="module")
def config():
    return Config()


def test_a_pyobject_listing_spans_the_lines_python_reports(config):
    text, lines = listings.read_listing(
        str(ALIBI), {"pyobject": "alibi_slopes"}, config
    )
    first, last = source_range(mixers.alibi.alibi_slopes)
    assert first > 1 and lines == (first, last)
    assert text.startswith("def alibi_slopes(")


def test_a_method_listing_spans_the_lines_python_reports(config):
    options = {"pyobject": "AlibiMultiHeadAttention.attention_bias"}
    _, lines = listings.read_listing(str(ALIBI), options, config)
    assert lines == source_range(
        mixers.alibi.AlibiMultiHeadAttention.attention_bias
    )


def test_a_start_at_end_before_listing_spans_its_marks(config):
    text, lines = listings.read_listing(str(FEED_FORWARD), ACTIVATIONS, config)
    assert lines == activations_range()
    assert lines[1] > lines[0]
    assert listings.listed_object(ACTIVATIONS, text) == "ACTIVATIONS"


def test_lines_within_an_object_and_decorations(config):
    first, _ = source_range(mixers.alibi.alibi_slopes)
    # :lines: counts from the object's first line; prepend, append and dedent change the text only.
    options = {
        "pyobject": "alibi_slopes",
        "lines": "2-3",
        "prepend": "# x",
        "append": "# y",
        "dedent": 4,
    }
    _, lines = listings.read_listing(str(ALIBI), options, config)
    assert lines == (first + 1, first + 2)
    _, lines = listings.read_listing(
        str(ALIBI), {"pyobject": "alibi_slopes", "lines": "2,4"}, config
    )
    assert lines is None  # not one run of lines: no range to link to


def test_the_link_points_at_exactly_those_lines():
    path = "src/mixers/alibi.py"
    first, last = source_range(mixers.alibi.alibi_slopes)
    options = {"repository_url": URL + "/", "repository_branch": "dev"}
    assert (
        listings.source_url(options, path, (first, last))
        == f"{URL}/blob/dev/{path}#L{first}-L{last}"
    )
    assert (
        listings.source_url(options, path, (7, 7))
        == f"{URL}/blob/dev/{path}#L7"
    )
    assert (
        listings.source_url({"repository_url": URL}, path, None)
        == f"{URL}/blob/HEAD/{path}"
    )
    assert listings.source_url({}, path, (first, last)) is None


def test_the_path_is_the_repository_s_wherever_the_book_sits():
    assert (
        listings.repository_path({"path_to_docs": ""}, "src/mixers/alibi.py")
        == "src/mixers/alibi.py"
    )
    assert (
        listings.repository_path(
            {"path_to_docs": "docs"}, "../src/mixers/alibi.py"
        )
        == "src/mixers/alibi.py"
    )


@pytest.mark.parametrize(
    "text, name",
    [
        ("ACTIVATIONS = {\n", "ACTIVATIONS"),
        ("\nSCHEMES: dict[str, str] = {\n", "SCHEMES"),
        ("# a comment\n@torch.no_grad()\ndef fuse(x):\n", "fuse"),
        ("class GatedMLP(nn.Module):\n", "GatedMLP"),
        ("else:\n    pass\n", None),
        ("return x\n", None),
    ],
)
def test_the_name_a_partial_listing_starts_with(text, name):
    assert listings.leading_name(text) == name


CHAPTER = """\
# Chapter

```{literalinclude} ../src/mixers/alibi.py
:pyobject: alibi_slopes
```

```{literalinclude} ../src/mixers/feed_forward.py
:start-at: ACTIVATIONS = {
:end-before: The paper's variants, in its order
```

```{literalinclude} ../src/mixers/alibi.py
:pyobject: alibi_bias
:caption: How the bias is built
```

```{literalinclude} notes.py
```
"""


def build(tmp_path, theme_options):
    """Build a one-chapter MyST book laid out like this one; return its HTML and the warnings."""
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "chapter.md").write_text(CHAPTER)
    (tmp_path / "book" / "notes.py").write_text("NOTE = 1\n")
    (tmp_path / "src" / "mixers").mkdir(parents=True)
    for source in (ALIBI, FEED_FORWARD):
        shutil.copy(source, tmp_path / "src" / "mixers")
    (tmp_path / "conf.py").write_text("")
    overrides = {
        "extensions": ["myst_parser", "listings"],
        "root_doc": "book/chapter",
        # The book's theme, which takes the repository options Jupyter Book passes it.
        "html_theme": "sphinx_book_theme",
        "html_theme_options": theme_options,
    }
    app = SphinxTestApp(
        "html", srcdir=tmp_path, confoverrides=overrides, freshenv=True
    )
    try:
        app.build()
    finally:
        app.cleanup()  # docutils' registries are global: leave them as they were
    return (
        tmp_path / "_build" / "html" / "book" / "chapter.html"
    ).read_text(), app.warning.getvalue()


def captions(page):
    """The text of each code-block caption (tags dropped) and the links in it."""
    found = re.findall(
        r'<div class="code-block-caption">(.*?)</div>', page, flags=re.S
    )
    # The permalink Sphinx adds after each caption is not part of its text.
    found = [
        re.sub(r'<a class="headerlink".*?</a>', "", c, flags=re.S)
        for c in found
    ]
    texts = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in found]
    links = [
        [html.unescape(u) for u in re.findall(r'href="([^"]*)"', c)]
        for c in found
    ]
    return texts, links


def test_the_built_page_captions_each_package_listing_with_a_link_to_its_lines(
    tmp_path,
):
    page, warnings = build(
        tmp_path, {"repository_url": URL, "repository_branch": "main"}
    )
    assert warnings == ""
    texts, links = captions(page)
    slopes = source_range(mixers.alibi.alibi_slopes)
    activations = activations_range()
    bias = source_range(mixers.alibi.alibi_bias)
    assert texts == [
        f"src/mixers/alibi.py · alibi_slopes — lines {slopes[0]}–{slopes[1]} (source)",
        f"src/mixers/feed_forward.py · ACTIVATIONS — lines {activations[0]}–{activations[1]} (source)",
        f"How the bias is built · src/mixers/alibi.py — lines {bias[0]}–{bias[1]} (source)",
    ]  # and none for book/notes.py, which is not the package's
    assert links == [
        [f"{URL}/blob/main/src/mixers/alibi.py#L{slopes[0]}-L{slopes[1]}"],
        [
            f"{URL}/blob/main/src/mixers/feed_forward.py#L{activations[0]}-L{activations[1]}"
        ],
        [f"{URL}/blob/main/src/mixers/alibi.py#L{bias[0]}-L{bias[1]}"],
    ]
    # The listing itself is still there, under its caption.
    shown = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert (
        inspect.getsource(mixers.alibi.alibi_slopes).splitlines()[0] in shown
    )


def test_without_a_repository_url_the_caption_has_no_link(tmp_path):
    page, warnings = build(tmp_path, {})
    assert warnings == ""
    texts, links = captions(page)
    slopes = source_range(mixers.alibi.alibi_slopes)
    assert (
        texts[0]
        == f"src/mixers/alibi.py · alibi_slopes — lines {slopes[0]}–{slopes[1]}"
    )
    assert links == [[], [], []]


# ---------------------------------------------------------------------------
# Comments read as text: maths typeset, roles as names, never raw reST.


def highlighted(code):
    from sphinx.highlighting import PygmentsBridge

    return PygmentsBridge("html").highlight_block(code, "python")


def shown_text(html_code):
    """The text a reader sees of highlighted code, a formula as its TeX."""
    text = re.sub(
        r'<span class="math notranslate nohighlight">\\\((.*?)\\\)</span>',
        r"[\1]",
        html_code,
    )
    return html.unescape(re.sub(r"<[^>]+>", "", text))


def test_a_comment_s_maths_is_typeset_and_its_roles_are_names():
    code = (
        "def f(x):\n"
        "    # :math:`q_i^\\top k_j < 0` for :class:`~mixers.attention.KVCache`"
        " and :func:`g`, ``x`` *only*\n"
        "    return x  # and :meth:`A.b <A.b>` here\n"
    )
    shown = listings.typeset_comments(highlighted(code))
    assert shown_text(shown).strip().splitlines() == [
        "def f(x):",
        "    # [q_i^\\top k_j < 0] for KVCache and g, x only",
        "    return x  # and A.b here",
    ]
    # The formula goes to MathJax escaped; the code is untouched.
    assert r"\(q_i^\top k_j &lt; 0\)" in shown
    assert "<em>only</em>" in shown
    assert not re.search(r":\w+:`|``", shown_text(shown))


def test_a_formula_that_runs_onto_the_next_comment_line_is_typeset_whole():
    code = (
        "x = 1\n"
        "# A row that is all :math:`-\\infty` would be :math:`e^{-\\infty} /\n"
        "# \\sum_j e^{-\\infty}`. Zeroing it after\n"
        "# :math:`j <\n"
        "# i`\n"
        "#\n"
        "# (a paragraph of its own, after an empty comment line)\n"
        "y = 2  # *args and a * b stay\n"
    )
    shown = shown_text(listings.typeset_comments(highlighted(code)))
    assert shown.strip().splitlines() == [
        "x = 1",
        "# A row that is all [-\\infty] would be"
        " [e^{-\\infty} / \\sum_j e^{-\\infty}].",
        "# Zeroing it after",
        "# [j < i]",
        "#",
        "# (a paragraph of its own, after an empty comment line)",
        "y = 2  # *args and a * b stay",
    ]


def test_code_without_markup_is_left_as_highlighted():
    code = "def f(*args, **kwargs):\n    return 2 * x  # a plain note\n"
    assert listings.typeset_comments(highlighted(code)) == highlighted(code)
