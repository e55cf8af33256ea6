"""book/_ext/annotated.py: every module of the package as an annotated page.

The cut into notes and code is checked against an independent reading of each
file (``ast`` for docstrings, a line that starts with ``#`` for a comment), a
small Sphinx build checks the rendered page (anchors, typeset maths, no
warnings) and the chapters' links to it; ``tests/test_site.py`` checks the
built book's pages in a browser.
"""

import ast
import html
import re
import sys
from pathlib import Path

import pytest
from sphinx.testing.util import SphinxTestApp
from test_book import toc_files

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
from annotated import (  # noqa: E402
    anchor_of_line,
    page_of_module,
    parse_module,
)

MODULES = sorted((ROOT / "src" / "mixers").rglob("*.py"))


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


def build(tmp_path):
    (tmp_path / "book" / "source").mkdir(parents=True)
    (tmp_path / "src" / "mixers").mkdir(parents=True)
    (tmp_path / "src" / "mixers" / "odd.py").write_text(ODD)
    (tmp_path / "book" / "chapter.md").write_text(CHAPTER)
    (tmp_path / "book" / "source" / "odd.rst").write_text(
        "Odd\n===\n\n.. annotated-source:: ../../src/mixers/odd.py\n"
    )
    (tmp_path / "index.rst").write_text(
        "Book\n====\n\n.. toctree::\n\n   book/chapter\n   book/source/odd\n"
    )
    (tmp_path / "conf.py").write_text("")
    overrides = {
        "extensions": ["myst_parser", "listings", "annotated"],
        "html_theme": "sphinx_book_theme",
    }
    app = SphinxTestApp(
        "html", srcdir=tmp_path, confoverrides=overrides, freshenv=True
    )
    try:
        app.build()
    finally:
        app.cleanup()
    out = tmp_path / "_build" / "html" / "book"
    return (
        (out / "source" / "odd.html").read_text(),
        (out / "chapter.html").read_text(),
        app.warning.getvalue(),
    )


def test_the_built_page_anchors_every_line_and_typesets_the_notes(tmp_path):
    page, chapter, warnings = build(tmp_path)
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
