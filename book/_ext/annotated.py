"""Sphinx extension: a module of the package as the book's annotated source.

labml.ai's annotated implementations put each note beside the lines it
explains. This builds such a page from a module itself, at build time (the
pages under ``book/source/`` are reStructuredText, one directive each)::

    .. annotated-source:: ../../src/mixers/alibi.py

The module is cut into *sections*. A section is a run of notes, the module's
own comments and docstrings, then the code that follows them up to the next
note. A function's or class's header (its decorators and ``def`` line) moves
down beside its docstring, so the note that says what a function does sits
next to its signature. Every line of the file is shown once: notes in the left
column, typeset (docstrings and comments are reStructuredText, so ``.. math::``
and ``:math:`` typeset as maths), and code in the right, highlighted; a
``# ----`` rule and the comment line after it become the heading of the part
they open. At phone width the columns stack (``book/_static/mixers.css``).

Anchors: every code line has the id ``L<n>`` (its line in the file) and every
function, class and method its dotted name
(``AlibiMultiHeadAttention.forward``), so that the chapters' listings
(``book/_ext/listings.py``) and the API reference link to the very section.
"""

from __future__ import annotations

import ast
import io
import posixpath
import re
import textwrap
import tokenize
from dataclasses import dataclass, field

from docutils import nodes
from docutils.core import publish_doctree
from docutils.statemachine import StringList
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer
from sphinx import addnodes
from sphinx.util.docutils import SphinxDirective

from mixers.source import is_docstring

# The folder of the package's modules, relative to the repository's root, and
# the folder of the annotated pages, relative to the book's root.
PACKAGE_ROOT = "src/"
PAGES = "book/source"

# A comment line made only of dashes: a rule that opens a titled part.
_RULE = re.compile(r"^-{10,}$")


@dataclass
class Section:
    """Notes (reStructuredText), then the code lines they explain.

    ``blocks`` are the notes as written: each docstring, and each run of
    comment lines, is one block, rendered on its own; ``docstrings`` holds the
    indices of the blocks that are docstrings.
    """

    blocks: list[list[str]] = field(default_factory=list)
    docstrings: set[int] = field(default_factory=set)
    code: list[tuple[int, str]] = field(default_factory=list)  # (line, text)
    title: str | None = None  # the part of the module this opens
    names: list[str] = field(default_factory=list)  # objects defined here
    intro: bool = False  # the module's docstring: read across the page

    @property
    def notes(self):
        """The notes' lines, a blank line between blocks."""
        return [line for block in self.blocks for line in [""] + block][1:]

    def has_code(self):
        return any(text.strip() for _, text in self.code)


def _definitions(tree, prefix=""):
    """Every function and class, nested ones too, in order: ``(dotted name,
    its header's first line (decorators included), node)``."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(
            child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        ):
            header = min(
                [child.lineno] + [d.lineno for d in child.decorator_list]
            )
            yield prefix + child.name, header, child
            yield from _definitions(child, prefix + child.name + ".")


def _docstrings(tree):
    """{first line: (last line, dotted name or '', header's first line)} of
    the module's docstring and every function's and class's."""
    found = {}
    if tree.body and is_docstring(tree.body[0]):
        first = tree.body[0]
        found[first.lineno] = (first.end_lineno, "", None)
    for name, header, node in _definitions(tree):
        if is_docstring(node.body[0]):
            body = node.body[0]
            found[body.lineno] = (body.end_lineno, name, header)
    return found


def _comment_lines(source):
    """{line: text} of the lines that hold only a comment (no code)."""
    comments, code_lines = {}, set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string
        elif token.type not in (
            tokenize.NL,
            tokenize.NEWLINE,
            tokenize.INDENT,
            tokenize.DEDENT,
            tokenize.ENDMARKER,
        ):
            code_lines.update(range(token.start[0], token.end[0] + 1))
    return {
        line: text for line, text in comments.items() if line not in code_lines
    }


def _comment_text(comment):
    """A comment's text: without ``#`` (or Sphinx's ``#:``) and one space."""
    text = comment[1:]
    if text.startswith(":"):
        text = text[1:]
    return text[1:] if text.startswith(" ") else text


def _docstring_text(lines):
    """The docstring's text from its source lines: quotes off, dedented."""
    source = "\n".join(lines)
    value = ast.literal_eval(source.strip())
    first, _, rest = value.partition("\n")
    return (first.strip() + "\n" + textwrap.dedent(rest)).strip()


def parse_module(source):
    """The module's sections, in order; every line of ``source`` is in one.

    Lines that are notes (comments alone on their line, docstrings) are in
    ``blocks``, a ``# ----`` rule's title in ``title``; every other line,
    blank ones included, is in ``code``.
    """
    tree = ast.parse(source)
    lines = source.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the file
    docstrings = _docstrings(tree)
    definitions = {header: name for name, header, _ in _definitions(tree)}
    comments = _comment_lines(source)
    sections = [Section()]
    comment_ended = None  # the last line of the comment being read
    n = 1
    while n <= len(lines):
        current = sections[-1]
        if n in docstrings:
            last, name, header = docstrings[n]
            text = _docstring_text(lines[n - 1 : last])
            moved = []
            if header is not None:
                # The header (decorators, def line) moves beside its docstring.
                while current.code and current.code[-1][0] >= header:
                    moved.insert(0, current.code.pop())
            if current.has_code():
                sections.append(Section())
            section = sections[-1]
            section.docstrings.add(len(section.blocks))
            section.blocks.append(text.split("\n"))
            section.intro = section.intro or header is None
            section.code += moved
            n = last + 1
            continue
        if n in comments:
            if current.has_code():
                sections.append(Section())
                current = sections[-1]
            text = _comment_text(comments[n])
            if _RULE.match(text.strip()):
                # "# ----" then "# Title": the title of a part of the module.
                if n + 1 in comments:
                    current.title = _comment_text(comments[n + 1]).strip()
                    n += 2
                    continue
                n += 1
                continue
            if comment_ended == n - 1:
                current.blocks[-1].append(text)  # the comment goes on
            else:
                current.blocks.append([text])
            comment_ended = n
            n += 1
            continue
        current.code.append((n, lines[n - 1]))
        n += 1
    sections = [s for s in sections if s.blocks or s.code or s.title]
    for section in sections:
        section.names = [
            definitions[line]
            for line, _ in section.code
            if line in definitions
        ]
    return sections


def section_of_line(sections, line):
    """The index of the section that shows ``line`` (its code), or None."""
    for index, section in enumerate(sections):
        if any(n == line for n, _ in section.code):
            return index
    return None


def anchor_of_line(sections, line):
    """The id to link to for ``line``: its section's first code line."""
    index = section_of_line(sections, line)
    if index is None:
        return None
    numbers = [n for n, text in sections[index].code if text.strip()]
    return f"L{numbers[0]}" if numbers else None


def page_of_module(path):
    """The annotated page's docname for a module's repository path:
    ``src/mixers/alibi.py`` -> ``book/source/alibi``,
    ``src/mixers/bench/alibi.py`` -> ``book/source/bench_alibi``,
    ``src/mixers/__init__.py`` -> ``book/source/package``."""
    relative = posixpath.relpath(path, PACKAGE_ROOT + "mixers")
    stem = relative[: -len(".py")].removesuffix("__init__").strip("/")
    # "_checks" -> "checks": a page whose name starts with "_" is one that
    # GitHub Pages' Jekyll would not serve.
    return f"{PAGES}/{stem.replace('/', '_').lstrip('_') or 'package'}"


# -----------------------------------------------------------------------------
# Rendering


def _code_html(code):
    """The code lines as highlighted HTML, each after an anchor ``L<n>``.

    Contiguous lines are highlighted together (a string may span lines);
    Pygments closes its spans at every line's end, so the HTML splits cleanly
    into lines.
    """
    # Leading and trailing blank lines take room and say nothing.
    while code and not code[0][1].strip():
        code = code[1:]
    while code and not code[-1][1].strip():
        code = code[:-1]
    runs, out = [], []
    for number, text in code:
        if runs and runs[-1][-1][0] == number - 1:
            runs[-1].append((number, text))
        else:
            runs.append([(number, text)])
    formatter = HtmlFormatter(nowrap=True)
    for run in runs:
        text = "\n".join(t for _, t in run) + "\n"
        rendered = highlight(
            text, PythonLexer(stripnl=False), formatter
        ).split("\n")
        for (number, _), line in zip(run, rendered):
            out.append(
                f'<span class="annotated-line" id="L{number}"></span>{line}'
            )
    return "\n".join(out)


def _parses_cleanly(text):
    """Whether ``text`` is reStructuredText with nothing to warn about.

    Sphinx's own roles and directives are unknown to bare docutils, so they
    are replaced with plain ones for this test.
    """
    probe = re.sub(r":(\w+):`", ":literal:`", text)
    probe = re.sub(
        r"^(\s*)\.\. (math|note|warning)::", r"\1.. note::", probe, flags=re.M
    )
    settings = {
        "report_level": 5,
        "halt_level": 5,
        "warning_stream": io.StringIO(),
    }
    doctree = publish_doctree(probe, settings_overrides=settings)
    return not any(doctree.findall(nodes.system_message))


class AnnotatedSource(SphinxDirective):
    """``annotated-source``: a module, note beside code, section by section."""

    required_arguments = 1

    def run(self):
        relative, filename = self.env.relfn2path(self.arguments[0])
        self.env.note_dependency(relative)
        with open(filename, encoding="utf-8") as file:
            source = file.read()
        container = nodes.container(classes=["annotated-source"])
        for section in parse_module(source):
            container += self._section(section)
        return [container]

    def _section(self, section):
        row = nodes.container(classes=["annotated-section"])
        if section.intro:
            row["classes"].append("annotated-intro")
        ids = list(section.names)
        if section.title:
            ids.insert(0, nodes.make_id(section.title))
        row["ids"] = ids
        if section.title:
            row += nodes.rubric(
                section.title, section.title, classes=["annotated-title"]
            )
        note = nodes.container(classes=["annotated-note"])
        for index, block in enumerate(section.blocks):
            text = "\n".join(block).strip("\n")
            if text:
                note += self._notes(text, index in section.docstrings)
        row += note
        code = _code_html(section.code)
        if code:
            row += nodes.raw(
                "",
                '<div class="annotated-code highlight-python notranslate">'
                f'<div class="highlight"><pre>{code}</pre></div></div>',
                format="html",
            )
        else:
            row += nodes.container(
                classes=["annotated-code", "annotated-empty"]
            )
        return row

    def _notes(self, text, docstring):
        """A block of notes, parsed as reStructuredText (a docstring's Args:
        sections as napoleon reads them). A docstring is reStructuredText
        (autodoc reads it so too), and any fault in it is reported; a comment
        that would not parse cleanly is shown as plain text."""
        from sphinx.ext.napoleon import Config
        from sphinx.ext.napoleon.docstring import GoogleDocstring

        rst = str(GoogleDocstring(text, Config(napoleon_use_rtype=False)))
        holder = nodes.container()
        if docstring or _parses_cleanly(rst):
            self.state.nested_parse(
                StringList(rst.split("\n"), source=self.arguments[0]),
                self.content_offset,
                holder,
            )
        else:
            for paragraph in text.split("\n\n"):
                holder += nodes.paragraph(paragraph, paragraph)
        return holder.children


# -----------------------------------------------------------------------------
# Links from the API reference


def _api_links(app, doctree, docname):
    """Each documented function and class of the package gets an
    "annotated" link to its section, beside its signature."""
    for signature in doctree.findall(addnodes.desc_signature):
        module = signature.get("module")
        fullname = signature.get("fullname")
        if not module or not fullname or not module.startswith("mixers"):
            continue
        path = PACKAGE_ROOT + module.replace(".", "/")
        page = page_of_module(path + ".py")
        if page not in app.env.found_docs:
            page = page_of_module(path + "/__init__.py")
        if page not in app.env.found_docs:
            continue
        uri = app.builder.get_relative_uri(docname, page) + "#" + fullname
        link = nodes.reference(
            "", "", refuri=uri, internal=True, classes=["annotated-link"]
        )
        link += nodes.inline(text="[annotated]")
        signature += link


def setup(app):
    app.add_directive("annotated-source", AnnotatedSource)
    app.connect("doctree-resolved", _api_links)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
