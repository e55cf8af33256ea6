"""book/_ext/annotated.py: every module of the package as an annotated page.

The cut into notes and code is checked against an independent reading of each
file (``ast`` for docstrings, a line that starts with ``#`` for a comment;
for ``views.js``, a line that starts with ``//`` or lies in a ``/* */``), a
small Sphinx build checks the rendered page (anchors, typeset maths, names
linked to their definitions, its contents, no warnings) and the chapters'
links to it and back; ``tests/test_site.py`` and
``tests/test_site_annotated.py`` check the built book's pages in a browser.
"""

import ast
import functools
import html
import json
import re
import sys
from pathlib import Path

import pytest
from sphinx.testing.util import SphinxTestApp
from test_book import toc_files

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
from annotated import (  # noqa: E402
    PLAIN_TOKEN_CLASSES,
    Package,
    anchor_of_line,
    module_of_path,
    modules_used,
    page_of_module,
    parse_module,
    parse_script,
)

MODULES = sorted((ROOT / "src" / "mixers").rglob("*.py"))
SCRIPTS = sorted((ROOT / "src" / "mixers").rglob("*.js"))


def note_lines(source):
    """The lines a reader reads as notes: docstrings and whole-line comments."""
    tree = ast.parse(source)
    notes = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(
                node,
                (
                    ast.Module,
                    ast.ClassDef,
                    ast.FunctionDef,
                    ast.AsyncFunctionDef,
                ),
            )
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            notes.update(range(body[0].lineno, body[0].end_lineno + 1))
    strings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            strings.update(range(node.lineno + 1, node.end_lineno + 1))
    for number, line in enumerate(source.splitlines(), 1):
        if line.lstrip().startswith("#") and number not in strings:
            notes.add(number)
    return notes


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_every_line_is_shown_once_as_a_note_or_as_code(path):
    source = path.read_text(encoding="utf-8")
    sections = parse_module(source)
    code = [number for section in sections for number, _ in section.code]
    assert code == sorted(code), "code lines out of order"
    assert len(code) == len(set(code)), "a code line shown twice"
    every = set(range(1, len(source.splitlines()) + 1))
    assert set(code) == every - note_lines(source)
    lines = source.splitlines()
    assert all(
        text == lines[number - 1]
        for section in sections
        for number, text in section.code
    )


def test_a_function_s_header_sits_beside_its_docstring():
    source = (ROOT / "src" / "mixers" / "alibi.py").read_text()
    sections = parse_module(source)
    header = source.splitlines().index(
        "def alibi_slopes(n_heads: int) -> Tensor:"
    )
    section = next(
        s for s in sections if any(n == header + 1 for n, _ in s.code)
    )
    assert section.notes[0].startswith("The fixed ALiBi slope")
    assert "alibi_slopes" in section.names
    # The section's first code line is the def, so a link to it lands there.
    assert anchor_of_line(sections, header + 1) == f"L{header + 1}"


def test_comments_become_notes_and_rules_titles():
    source = (
        "x = 1\n"
        "\n"
        "# " + "-" * 20 + "\n"
        "# The part\n"
        "\n"
        "\n"
        "# Why y is two.\n"
        "y = 2  # a trailing comment stays with its code\n"
    )
    sections = parse_module(source)
    assert [s.title for s in sections] == [None, "The part"]
    assert sections[1].notes == ["Why y is two."]
    assert sections[1].code[-1] == (
        8,
        "y = 2  # a trailing comment stays with its code",
    )


def test_every_module_has_its_page_in_the_table_of_contents():
    pages = {page_of_module(str(p.relative_to(ROOT))) for p in MODULES}
    assert len(pages) == len(MODULES)
    assert pages <= set(toc_files())
    for page in pages:
        text = (ROOT / f"{page}.rst").read_text()
        module = re.search(r"annotated-source:: \.\./\.\./(\S+)", text)[1]
        assert page_of_module(module) == page


ODD = '''"""A module whose notes are not all clean reStructuredText.

.. math::

    y = x^2
"""


# *args is not emphasis: a note that would warn is shown as plain text.
def f(*args):
    """Square.

    Args:
        args: the numbers.
    """
    return [a**2 for a in args]
'''

CHAPTER = """# Chapter

```{literalinclude} ../src/mixers/odd.py
:pyobject: f
```
"""


OTHER = '''"""Another module, whose notes name the first one's things."""

# ------------------------------------------------------------------------
# The part with g


def g():
    """Calls ``f`` (:func:`odd.f`, in ``mixers.odd``); ``nothing_here`` and
    :class:`Unknown` name nothing of the package."""
    return f()


# ------------------------------------------------------------------------
# Part


def part():
    """Calls ``f`` (:func:`odd.f`, in ``mixers.odd``); ``nothing_here`` and
    :class:`Unknown` name nothing of the package."""
    return f()
'''

NOTEBOOK_CHAPTER = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": "# Notebook"},
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": None,
            "outputs": [],
            "source": "from mixers.other import g",
        },
    ],
    "metadata": {"language_info": {"name": "python"}},
    "nbformat": 4,
    "nbformat_minor": 4,
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A small book: two modules, a script and a chapter of each kind, built
    with the extensions and the theme; its pages' HTML and its warnings."""
    root = tmp_path_factory.mktemp("book")
    (root / "book" / "source").mkdir(parents=True)
    (root / "src" / "mixers" / "views").mkdir(parents=True)
    (root / "src" / "mixers" / "odd.py").write_text(ODD)
    (root / "src" / "mixers" / "other.py").write_text(OTHER)
    (root / "src" / "mixers" / "views" / "views.js").write_text(SCRIPT)
    (root / "book" / "chapter.md").write_text(CHAPTER)
    notebook = json.dumps(NOTEBOOK_CHAPTER)
    (root / "book" / "notebook.ipynb").write_text(notebook)
    pages = {
        "odd": "src/mixers/odd.py",
        "other": "src/mixers/other.py",
        "views_js": "src/mixers/views/views.js",
    }
    for page, path in pages.items():
        (root / "book" / "source" / f"{page}.rst").write_text(
            f"{page}\n{'=' * len(page)}\n\n"
            f".. annotated-source:: ../../{path}\n"
        )
    docs = ["chapter", "notebook", *(f"source/{p}" for p in pages)]
    toctree = "\n".join(f"   book/{doc}" for doc in docs)
    (root / "index.rst").write_text(
        f"Book\n====\n\n.. toctree::\n\n{toctree}\n"
    )
    (root / "conf.py").write_text("")
    overrides = {
        "extensions": ["myst_nb", "listings", "annotated"],
        "html_theme": "sphinx_book_theme",
        "nb_execution_mode": "off",
        # A dict of this build's own: myst_nb adds its suffixes to the one it
        # is given, which would otherwise be Sphinx's default, shared with
        # the next test's build (which has no myst_nb).
        "source_suffix": {".rst": "restructuredtext"},
    }
    app = SphinxTestApp(
        "html", srcdir=root, confoverrides=overrides, freshenv=True
    )
    try:
        app.build()
    finally:
        app.cleanup()
    out = root / "_build" / "html" / "book"
    html_of = {doc: (out / f"{doc}.html").read_text() for doc in docs}
    return html_of, app.warning.getvalue()


def test_the_built_page_anchors_every_line_and_typesets_the_notes(built):
    pages, warnings = built
    page, chapter = pages["source/odd"], pages["chapter"]
    assert warnings == ""
    code_lines = [
        number
        for section in parse_module(ODD)
        for number, text in section.code
        if text.strip()
    ]
    for number in code_lines:
        assert f'id="L{number}"' in page
    assert 'id="f"' in page  # the function's own anchor
    assert '<div class="math' in page  # .. math:: typeset, not shown as text
    assert ":param args:" not in page  # napoleon read the Args: section
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert "*args is not emphasis" in text
    # The chapter's listing of f links to the section that shows f's def.
    def_line = ODD.splitlines().index("def f(*args):") + 1
    assert f'href="source/odd.html#L{def_line}"' in chapter


# -----------------------------------------------------------------------------
# JavaScript (views.js): the same conventions with // and /* */ comments

SCRIPT = r"""// The file's introduction.
//
// It goes on.

// ----------------------------------------------------------------
// Formulas

// The slope of head i: :math:`2^{-8 (i+1) / n}`.
export function slope(i, n) {
  return 2 ** ((-8 * (i + 1)) / n); // a trailing comment stays with its code
}

/**
 * A block note, read whole.
 *
 * Its second paragraph.
 */
function quoted() {
  const url = "http://example.com/*not a comment*/";
  const css = `
    // not a comment either
    a { color: ${"red" /* nor this */} }
  `;
  return [url, css, /\/\/ and \/* stay code/.test("x")];
}

const half = 1 / 2; // a division, then a comment
"""


def test_a_script_s_comments_become_notes_and_rules_titles():
    sections = parse_script(SCRIPT)
    assert sections[0].intro
    assert sections[0].notes == ["The file's introduction.", "", "It goes on."]
    assert [s.title for s in sections] == [None, "Formulas", None]
    formulas, block = sections[1], sections[2]
    assert formulas.notes == ["The slope of head i: :math:`2^{-8 (i+1) / n}`."]
    # The function's header is the first line of the code beside its note.
    header = SCRIPT.splitlines().index("export function slope(i, n) {") + 1
    shown = [(n, text) for n, text in formulas.code if text.strip()]
    assert shown[0] == (header, "export function slope(i, n) {")
    assert formulas.names == ["slope"]
    assert block.notes == [
        "A block note, read whole.",
        "",
        "Its second paragraph.",
    ]
    assert block.names == ["quoted"]


def test_strings_templates_and_regexes_are_code_not_comments():
    sections = parse_script(SCRIPT)
    lines = SCRIPT.splitlines()
    code = {number for s in sections for number, _ in s.code}
    for text in (
        "// not a comment either",
        "a { color: ${",
        "/\\/\\/ and",
        "http://example.com/*not",
        "const half = 1 / 2; // a division",
        "// a trailing comment",
    ):
        number = next(i for i, line in enumerate(lines, 1) if text in line)
        assert number in code, text


def comment_lines_of_script(source):
    """The lines a reader reads as notes in a script: those that start with
    ``//`` and those of a ``/* */`` that starts a line, outside template
    literals (read here as the lines between two backquote lines)."""
    notes, in_block, in_template = set(), False, False
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        if in_template:
            in_template = stripped.count("`") % 2 == 0
            continue
        if in_block:
            notes.add(number)
            in_block = "*/" not in stripped
        elif stripped.startswith("//"):
            notes.add(number)
        elif stripped.startswith("/*"):
            notes.add(number)
            in_block = "*/" not in stripped
        elif stripped.count("`") % 2 == 1:
            in_template = True
    return notes


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_every_line_of_a_script_is_shown_once(path):
    source = path.read_text(encoding="utf-8")
    sections = parse_script(source)
    code = [number for section in sections for number, _ in section.code]
    assert code == sorted(code), "code lines out of order"
    assert len(code) == len(set(code)), "a code line shown twice"
    every = set(range(1, len(source.splitlines()) + 1))
    assert set(code) == every - comment_lines_of_script(source)
    # Every top-level function has its anchor.
    functions = re.findall(
        r"(?m)^(?:export )?(?:async )?function\*? ?(\w+)", source
    )
    assert functions
    names = [n for s in sections for n in s.names]
    assert set(functions) <= set(names)


# -----------------------------------------------------------------------------
# What links where


@functools.cache
def package():
    paths = [*MODULES, *SCRIPTS]
    pages = {page_of_module(str(p.relative_to(ROOT))) for p in paths}
    return Package.read(ROOT, pages)


def defines(module_file, name):
    """Whether the module's source defines ``name`` (``Class.method``)."""
    tree = ast.parse(module_file.read_text(encoding="utf-8"))
    *owners, last = name.split(".")
    for owner in owners:
        tree = next(
            n
            for n in tree.body
            if isinstance(n, ast.ClassDef) and n.name == owner
        )
    return any(
        getattr(n, "name", None) == last
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.ClassDef))
    )


@pytest.mark.parametrize(
    "name, module",
    [
        ("causal_mask", "attention"),
        ("MultiHeadAttention", "attention"),
        ("AlibiMultiHeadAttention.attention_bias", "alibi"),
        ("mixers.alibi.alibi_slopes", "alibi"),
        ("alibi.alibi_slopes()", "alibi"),
    ],
)
def test_a_name_of_the_package_resolves_to_its_definition(name, module):
    page, anchor = package().resolve(name)
    assert page == f"book/source/{module}"
    assert defines(ROOT / "src" / "mixers" / f"{module}.py", anchor)
    assert name.removesuffix("()").endswith(anchor)


def test_a_module_resolves_to_its_page_and_other_names_to_nothing():
    found = package()
    assert found.resolve("mixers.alibi") == ("book/source/alibi", None)
    assert found.resolve("mixers") == ("book/source/package", None)
    assert found.resolve("views.js") == ("book/source/views_js", None)
    # Not the package's, or defined by several of its modules.
    for name in ("torch.softmax", "forward", "x", "q·k / sqrt(d_k)", "-1"):
        assert found.resolve(name) is None, name
    # A name the module being read defines is its own, first.
    assert found.resolve("forward", "mixers.attention") is None
    page, anchor = found.resolve("run", "mixers.experiments.baseline")
    assert (page, anchor) == ("book/source/experiments_baseline", "run")


NOTEBOOK = {
    "cells": [
        {
            "cell_type": "code",
            "source": [
                "%matplotlib inline\n",
                "import mixers.data\n",
                "from mixers import plot\n",
                "from mixers.experiments import baseline as experiment\n",
                "from mixers.live import live_view\n",
                "from torch import nn\n",
            ],
        },
        {
            "cell_type": "markdown",
            "source": "```{literalinclude} ../src/mixers/alibi.py\n```\n",
        },
        {"cell_type": "code", "source": "this is not Python"},
    ],
    "metadata": {},
    "nbformat": 4,
    "nbformat_minor": 5,
}


def test_the_modules_a_chapter_uses_are_read_from_its_cells(tmp_path):
    (tmp_path / "book").mkdir()
    notebook = tmp_path / "book" / "chapter.ipynb"
    notebook.write_text(json.dumps(NOTEBOOK))
    modules = set(package().pages)
    assert modules_used(notebook, modules) == [
        "mixers.alibi",
        "mixers.data",
        "mixers.plot",
        "mixers.experiments.baseline",
        "mixers.live",
        "views.js",
    ]


@pytest.mark.parametrize(
    "path", sorted((ROOT / "book").glob("*.ipynb")), ids=lambda p: p.name
)
def test_each_chapter_uses_the_modules_it_imports_from(path):
    """Independently: each ``from mixers.X import`` in the notebook's text
    names a module the chapter uses, X or (``from mixers.bench import
    alibi``) the submodule it imports."""
    text = "".join(
        "".join(cell["source"])
        for cell in json.loads(path.read_text())["cells"]
        if cell["cell_type"] == "code"
    )
    imports = re.findall(r"from (mixers(?:\.\w+)*) import \(?(\w+)", text)
    assert imports
    used = set(modules_used(path, set(package().pages)))
    for module, first_name in imports:
        assert {module, f"{module}.{first_name}"} & used, module


def test_module_names_of_paths():
    assert module_of_path("src/mixers/__init__.py") == "mixers"
    assert module_of_path("src/mixers/bench/__init__.py") == "mixers.bench"
    assert module_of_path("src/mixers/bench/alibi.py") == "mixers.bench.alibi"
    assert module_of_path("src/mixers/views/views.js") == "views.js"
    assert page_of_module("src/mixers/views/views.js") == (
        "book/source/views_js"
    )


def links(page):
    """{text of each link: where it goes}."""
    found = re.findall(r'<a [^>]*href="([^"]*)"[^>]*>(.*?)</a>', page, re.S)
    return {
        html.unescape(re.sub(r"<[^>]+>", "", text)): href
        for href, text in found
    }


def contents(page):
    """Where the page's contents ("On this page") link to."""
    nav = page[page.index('id="pst-page-toc-nav"') :]
    return re.findall(r'href="([^"]*)"', nav[: nav.index("</nav>")])


def test_names_in_notes_link_to_their_definitions(built):
    pages, warnings = built
    assert warnings == ""
    other = pages["source/other"]
    found = links(other)
    assert found["f"] == "odd.html#f"  # ``f``
    assert found["odd.f()"] == "odd.html#f"  # Sphinx adds the ()
    assert found["mixers.odd"] == "odd.html"
    # Names that are not the package's stay code, not links.
    for name in ("nothing_here", "Unknown"):
        assert name not in found
        assert f'<span class="pre">{name}</span>' in other


def test_an_annotated_page_has_its_contents(built):
    pages, _ = built
    assert contents(pages["source/other"]) == [
        "#the-part-with-g",
        "#g",
        "#part-part",  # not the function part's id
        "#part",
    ]
    for ident in ("part", "part-part", "g", "the-part-with-g"):
        assert pages["source/other"].count(f'id="{ident}"') == 1
    assert contents(pages["source/views_js"]) == [
        "#formulas",
        "#slope",
        "#quoted",
    ]
    # The part is a section of the page, its title a heading.
    assert re.search(r"<h2>The part with g", pages["source/other"])


def test_a_script_s_page_has_its_anchors_and_its_maths(built):
    pages, _ = built
    page = pages["source/views_js"]
    for section in parse_script(SCRIPT):
        for number, text in section.code:
            if text.strip():
                assert f'id="L{number}"' in page
    assert 'id="slope"' in page and 'id="quoted"' in page
    assert '<span class="math' in page  # :math: in a // note, typeset
    assert "highlight-javascript" in page


def paragraph(page, css_class):
    return re.search(rf'<p class="{css_class}">(.*?)</p>', page, re.S)[1]


def test_chapters_and_the_pages_of_their_modules_link_both_ways(built):
    pages, _ = built
    # The page of mixers.other names the chapter that imports from it ...
    uses = paragraph(pages["source/other"], "annotated-uses")
    assert links(uses) == {"Notebook": "../notebook.html"}
    # ... and the chapter's contents end with a link to that page.
    assert contents(pages["notebook"])[-2:] == [
        "source/index.html",
        "source/other.html",
    ]
    assert "Used in" not in pages["source/odd"]  # no chapter imports it


# -----------------------------------------------------------------------------
# What a page folds: imports and __all__, private helpers, plumbing parts

FOLDED = '''"""A module with imports, helpers, a part of plumbing and its idea."""

from __future__ import annotations

import math

from .other import g

__all__ = ["idea"]

LIMIT = 3


def _helper(x):
    """Private: folded."""
    if x:
        return x

    return 0


def _other_helper():
    return 1


# ------------------------------------------------------------------------
# Plumbing


def plumb():
    """Plumbing."""
    return 1


# ------------------------------------------------------------------------
# The idea


def idea():
    """The idea."""
    return math.pi
'''


def test_the_imports_and_all_are_split_from_the_rest_of_the_intro():
    from annotated import _import_lines, _split_imports

    sections = parse_module(FOLDED)
    folded, rest = _split_imports(sections[0].code, _import_lines(FOLDED))
    lines = FOLDED.splitlines()
    assert [t for _, t in folded if t.strip()] == [
        "from __future__ import annotations",
        "import math",
        "from .other import g",
        '__all__ = ["idea"]',
    ]
    assert [t for _, t in rest if t.strip()] == ["LIMIT = 3"]
    assert folded[-1][0] < lines.index("LIMIT = 3") + 1


def test_private_helpers_before_the_first_part_fold_together():
    from annotated import _helper_runs

    sections = parse_module(FOLDED)
    runs = _helper_runs(sections)
    starts = {start for start, _, _ in runs.values()}
    assert len(starts) == 1
    start, names, lines = runs[min(runs)]
    assert names == ["_helper", "_other_helper"]
    assert lines == 6  # their code lines, bodies included
    # every section of the run, the body's continuation too, is in it
    assert sorted(runs) == list(range(start, start + len(runs)))
    assert not any(sections[i].title for i in runs)


def test_a_plumbing_part_is_named_by_what_it_defines():
    from annotated import PLUMBING_PARTS, _plumbing_parts

    sections = parse_module(FOLDED)
    found = _plumbing_parts(sections, ("plumb",))
    ((index, (names, lines)),) = found.items()
    assert sections[index].title == "Plumbing"
    assert names == ["plumb"] and lines == 2
    # Each name that marks a part as plumbing still names a definition of
    # its module (a renamed function would otherwise unfold it silently).
    for module, marked in PLUMBING_PARTS.items():
        path = ROOT / "src" / (module.replace(".", "/") + ".py")
        defined = {n for s in parse_module(path.read_text()) for n in s.names}
        assert set(marked) <= defined, (module, set(marked) - defined)


def _theme_pygments_styles():
    """The light and dark Pygments styles the site's theme draws code with,
    read from the theme's own settings."""
    import configparser

    import pydata_sphinx_theme

    conf = configparser.ConfigParser()
    conf.read(
        Path(pydata_sphinx_theme.__file__).parent
        / "theme"
        / "pydata_sphinx_theme"
        / "theme.conf"
    )
    options = conf["options"]
    return [options["pygments_light_style"], options["pygments_dark_style"]]


@pytest.mark.parametrize("style", _theme_pygments_styles())
def test_the_token_spans_left_out_change_no_colour(style):
    """The listing drops the spans of some token classes to keep its pages
    light: in each of the theme's styles they must draw in the code's own
    colour, with no weight, slant or background of their own."""
    from pygments.formatters import HtmlFormatter

    rules = dict(
        re.findall(
            r"^\.highlight(?: \.(\w+))? \{ ([^}]*) \}",
            HtmlFormatter(style=style).get_style_defs(".highlight"),
            re.MULTILINE,
        )
    )
    own_colour = re.search(r"color: (#\w+)", rules[""]).group(1)
    for token_class in PLAIN_TOKEN_CLASSES:
        rule = rules.get(token_class, f"color: {own_colour}")
        assert rule == f"color: {own_colour}", (style, token_class, rule)
