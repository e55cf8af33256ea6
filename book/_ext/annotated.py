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

A JavaScript file (``views.js``) is read with the same conventions: a run of
``//`` lines or a ``/* */`` comment alone on its lines is a note, a
``// ----`` rule and the comment line after it open a part, and a function's
header sits beside the note just above it.

Moving around: each part is a section of the page, and the page's contents
(the theme's "On this page", behind its contents button at every width on
these pages) list the parts, their classes and functions, and a class's
methods. A name of the package in a note, as ``code`` or a role (``:func:``,
``:class:``), links to its definition on its page (:class:`Package`); under
the title, the chapters that use the module (computed from the notebooks'
imports and listings, :func:`modules_used`) and its API reference; and each
chapter's contents end with the pages of the modules it uses.
"""

from __future__ import annotations

import ast
import io
import json
import posixpath
import re
import textwrap
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from docutils import nodes
from docutils.core import publish_doctree
from docutils.statemachine import StringList
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import JavascriptLexer, PythonLexer
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


@dataclass
class _Note:
    """A note of several lines read whole: a docstring or a ``/* */``
    comment. ``header`` is the first line of the definition whose docstring
    it is (that header moves down beside it); ``intro`` marks the module's
    own docstring."""

    last: int
    text: list[str]
    docstring: bool = False
    header: int | None = None
    intro: bool = False


def _cut(lines, notes, comments, definitions):
    """The sections of a file's ``lines``, in order, each line in one.

    ``notes`` are the notes read whole ({first line: _Note}), ``comments``
    the lines that hold only a comment ({line: its text}), ``definitions``
    {header line: dotted name}. A run of comment lines is one block; a rule
    (10 or more dashes) and the comment line after it open a titled part.
    """
    sections = [Section()]
    comment_ended = None  # the last line of the comment being read
    n = 1
    while n <= len(lines):
        current = sections[-1]
        if n in notes:
            note = notes[n]
            moved = []
            if note.header is not None:
                # The header (decorators, def line) moves beside its docstring.
                while current.code and current.code[-1][0] >= note.header:
                    moved.insert(0, current.code.pop())
            if current.has_code():
                sections.append(Section())
            section = sections[-1]
            if note.docstring:
                section.docstrings.add(len(section.blocks))
            section.blocks.append(note.text)
            section.intro = section.intro or note.intro
            section.code += moved
            n = note.last + 1
            continue
        if n in comments:
            text = comments[n]
            if _RULE.match(text.strip()):
                # A rule then "Title": a part of the file, a section of its
                # own.
                if current.blocks or current.code or current.title:
                    sections.append(Section())
                if n + 1 in comments:
                    sections[-1].title = comments[n + 1].strip()
                    n += 1
                n += 1
                continue
            if current.has_code():
                sections.append(Section())
                current = sections[-1]
            if comment_ended == n - 1 and current.blocks:
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


def _lines(source):
    lines = source.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the file
    return lines


def parse_module(source):
    """A Python module's sections, in order; every line of ``source`` is in
    one.

    Lines that are notes (comments alone on their line, docstrings) are in
    ``blocks``, a ``# ----`` rule's title in ``title``; every other line,
    blank ones included, is in ``code``.
    """
    tree = ast.parse(source)
    lines = _lines(source)
    notes = {
        first: _Note(
            last,
            _docstring_text(lines[first - 1 : last]).split("\n"),
            docstring=True,
            header=header,
            intro=header is None,
        )
        for first, (last, _, header) in _docstrings(tree).items()
    }
    comments = {
        line: _comment_text(text)
        for line, text in _comment_lines(source).items()
    }
    definitions = {header: name for name, header, _ in _definitions(tree)}
    return _cut(lines, notes, comments, definitions)


# -----------------------------------------------------------------------------
# JavaScript: the same conventions, with // and /* */ comments


# Keywords after which a "/" starts a regular expression, not a division.
_BEFORE_REGEX = {
    "return", "typeof", "case", "of", "in", "delete", "void", "throw",
    "new", "yield", "await", "else", "do",
}  # fmt: skip

# A top-level function's or class's header: its name.
_JS_DEFINITION = re.compile(
    r"(?:export\s+)?(?:default\s+)?(?:async\s+)?"
    r"(?:function\s*\*?\s*([A-Za-z_$][\w$]*)|class\s+([A-Za-z_$][\w$]*))"
)


class _ScriptScanner:
    """Where a JavaScript file's comments are, and which lines hold code.

    Strings, template literals (with their ``${...}``) and regular
    expressions are skipped over, so that a ``//`` or ``/*`` inside one is
    not read as a comment.
    """

    def __init__(self, source):
        self.source = source
        self.pos = 0
        self.line = 1
        self.comments = []  # (first line, last line, text, is a /* */)
        self.code_lines = set()
        self._code(inside_template=False)

    def _code(self, inside_template):
        """Read code up to the end, or up to the ``}`` that closes a
        template's ``${``."""
        source, depth, previous = self.source, 0, ""
        while self.pos < len(source):
            c = source[self.pos]
            if c == "\n":
                self.line += 1
                self.pos += 1
                continue
            if c.isspace():
                self.pos += 1
                continue
            if source.startswith("//", self.pos):
                end = source.find("\n", self.pos)
                end = len(source) if end < 0 else end
                text = source[self.pos + 2 : end]
                self.comments.append((self.line, self.line, text, False))
                self.pos = end
                continue
            if source.startswith("/*", self.pos):
                end = source.find("*/", self.pos + 2)
                end = len(source) if end < 0 else end + 2
                text = source[self.pos : end]
                last = self.line + text.count("\n")
                self.comments.append((self.line, last, text, True))
                self.line, self.pos = last, end
                continue
            self.code_lines.add(self.line)
            if c in "'\"":
                self._string(c)
            elif c == "`":
                self._template()
            elif c == "/" and (
                not previous
                or previous in _BEFORE_REGEX
                or previous in "(,=:[!&|?{};+-*%<>~^"
            ):
                self._regex()
            elif c.isalnum() or c in "_$":
                start = self.pos
                while self.pos < len(source) and (
                    source[self.pos].isalnum() or source[self.pos] in "_$"
                ):
                    self.pos += 1
                previous = source[start : self.pos]
                continue
            else:
                if c == "{":
                    depth += 1
                elif c == "}":
                    if inside_template and depth == 0:
                        self.pos += 1
                        return
                    depth -= 1
                self.pos += 1
            previous = c

    def _string(self, quote):
        source, self.pos = self.source, self.pos + 1
        while self.pos < len(source) and source[self.pos] not in (quote, "\n"):
            self.pos += 2 if source[self.pos] == "\\" else 1
        self.pos += 1

    def _template(self):
        source, self.pos = self.source, self.pos + 1
        while self.pos < len(source):
            c = source[self.pos]
            self.code_lines.add(self.line)
            if c == "`":
                self.pos += 1
                return
            if source.startswith("${", self.pos):
                self.pos += 2
                self._code(inside_template=True)
                continue
            if c == "\\":
                self.line += source[self.pos + 1 : self.pos + 2] == "\n"
                self.pos += 2
                continue
            self.line += c == "\n"
            self.pos += 1

    def _regex(self):
        source, in_class = self.source, False
        self.pos += 1
        while self.pos < len(source) and source[self.pos] != "\n":
            c = source[self.pos]
            if c == "\\":
                self.pos += 1
            elif c == "[":
                in_class = True
            elif c == "]":
                in_class = False
            elif c == "/" and not in_class:
                break
            self.pos += 1
        self.pos += 1
        while self.pos < len(source) and source[self.pos].isalpha():
            self.pos += 1  # its flags


def _block_comment_text(text):
    """A ``/* */`` comment's text: without the delimiters, the ``*`` that
    opens each of its lines, and the common indent."""
    inner = text.removeprefix("/*").removeprefix("*").removesuffix("*/")
    lines = [re.sub(r"^\s*\*(?!\*)", "", line) for line in inner.split("\n")]
    first, rest = lines[0].strip(), textwrap.dedent("\n".join(lines[1:]))
    return (first + "\n" + rest).strip().split("\n")


def parse_script(source):
    """A JavaScript file's sections, as :func:`parse_module` reads a Python
    module's: a run of ``//`` lines or a ``/* */`` comment alone on its lines
    is a note, a ``// ----`` rule and the comment line after it open a part,
    and a top-level function's or class's header is the first code line of
    the section whose notes are just above it."""
    scanner = _ScriptScanner(source)
    code = scanner.code_lines
    comments, notes = {}, {}
    for first, last, text, block in scanner.comments:
        if first in code or last in code:
            continue  # a comment after (or before) code stays with it
        if block:
            notes[first] = _Note(last, _block_comment_text(text))
        else:
            comments[first] = text[1:] if text.startswith(" ") else text
    lines = _lines(source)
    definitions = {}
    for number, line in enumerate(lines, 1):
        match = number in code and _JS_DEFINITION.match(line)
        name = match and (match.group(1) or match.group(2))
        if name and name not in definitions.values():
            definitions[number] = name
    sections = _cut(lines, notes, comments, definitions)
    # The comment that opens the file, before any code, is its introduction.
    if sections and sections[0].blocks and not sections[0].title:
        sections[0].intro = True
    return sections


def parse_source(path, source):
    """The sections of a file of the package, read as its suffix says."""
    if str(path).endswith(".js"):
        return parse_script(source)
    return parse_module(source)


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
    ``src/mixers/__init__.py`` -> ``book/source/package``,
    ``src/mixers/views/views.js`` -> ``book/source/views_js``."""
    relative = posixpath.relpath(path, PACKAGE_ROOT + "mixers")
    if relative.endswith(".js"):
        return f"{PAGES}/{posixpath.basename(relative).replace('.', '_')}"
    stem = relative[: -len(".py")].removesuffix("__init__").strip("/")
    # "_checks" -> "checks": a page whose name starts with "_" is one that
    # GitHub Pages' Jekyll would not serve.
    return f"{PAGES}/{stem.replace('/', '_').lstrip('_') or 'package'}"


def package_files(root):
    """The repository paths of the package's files under ``root`` (the
    repository) that an annotated page can show: its modules and its
    scripts."""
    folder = Path(root, PACKAGE_ROOT, "mixers")
    files = sorted([*folder.rglob("*.py"), *folder.rglob("*.js")])
    return [file.relative_to(root).as_posix() for file in files]


def module_of_path(path):
    """The name a note calls a file of the package by: ``mixers.bench.alibi``
    for ``src/mixers/bench/alibi.py``, ``mixers`` for its ``__init__.py``,
    ``views.js`` for a script."""
    relative = posixpath.relpath(path, PACKAGE_ROOT)
    if relative.endswith(".js"):
        return posixpath.basename(relative)
    return relative[: -len(".py")].removesuffix("/__init__").replace("/", ".")


# -----------------------------------------------------------------------------
# What links where: the package's names, the chapters that use each module


@dataclass
class Package:
    """The package's annotated files: for each module (by
    :func:`module_of_path`'s name) its page and the dotted names it defines
    (each its anchor there)."""

    pages: dict[str, str] = field(default_factory=dict)
    names: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def read(cls, root, pages):
        """The package under ``root`` (the repository), its files that have
        one of ``pages``."""
        package = cls()
        for path in package_files(root):
            if page_of_module(path) not in pages:
                continue
            file = Path(root, path)
            module = module_of_path(path)
            package.pages[module] = page_of_module(path)
            sections = parse_source(path, file.read_text(encoding="utf-8"))
            package.names[module] = {n for s in sections for n in s.names}
        return package

    def resolve(self, name, here=None):
        """(page, anchor or None) of what ``name`` names, seen from module
        ``here``; None for a name that is not the package's, or that several
        modules define. ``name`` is a module (``mixers.alibi``), a name in
        it (``mixers.alibi.alibi_slopes``, ``alibi.alibi_slopes``), a name
        of ``here``, or a name only one module defines
        (``AlibiMultiHeadAttention.forward``); ``()`` after it is allowed."""
        name = name.strip().removeprefix("~").removesuffix("()")
        if not re.fullmatch(r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*", name):
            return None
        if name in self.pages:
            return self.pages[name], None
        parts = name.split(".")
        for split in range(len(parts) - 1, 0, -1):
            module, rest = ".".join(parts[:split]), ".".join(parts[split:])
            for candidate in (module, "mixers." + module):
                if rest in self.names.get(candidate, ()):
                    return self.pages[candidate], rest
        if name in self.names.get(here, ()):
            return self.pages[here], name
        owners = [m for m, names in self.names.items() if name in names]
        if len(owners) == 1:
            return self.pages[owners[0]], name
        return None


def _code_cells(notebook):
    """The Python of each code cell, IPython's ``%`` and ``!`` lines left
    out; a cell that is not Python is skipped."""
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        text = "".join(cell.get("source", ""))
        text = re.sub(r"(?m)^\s*[%!].*$", "", text)
        try:
            yield ast.parse(text)
        except SyntaxError:
            continue


def modules_used(notebook_path, modules):
    """The package's modules (of ``modules``, named as by
    :func:`module_of_path`) a chapter uses, in the order it first does: each
    module a code cell imports from or imports (``from mixers import plot``
    is ``mixers.plot``), and each file a ``literalinclude`` lists. The live
    views' script, ``views.js``, draws what ``mixers.live`` hands it."""
    with open(notebook_path, encoding="utf-8") as file:
        notebook = json.load(file)
    used = []
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "markdown":
            text = "".join(cell.get("source", ""))
            for target in re.findall(r"literalinclude\}?\s+(\S+)", text):
                path = posixpath.normpath(
                    posixpath.join(
                        posixpath.dirname(notebook_path.as_posix()), target
                    )
                )
                repository = path.rsplit("/" + PACKAGE_ROOT, 1)[-1]
                used.append(module_of_path(PACKAGE_ROOT + repository))
    for tree in _code_cells(notebook):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                used += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    used.append(
                        submodule if submodule in modules else node.module
                    )
    if "mixers.live" in used:
        used.append("views.js")
    return [m for m in dict.fromkeys(used) if m in modules]


# -----------------------------------------------------------------------------
# Rendering


# Token classes that both of the theme's Pygments styles draw in the code's
# own colour (whitespace, punctuation, names): their spans change nothing on
# screen, and a JavaScript page is two fifths lighter without them.
PLAIN_TOKEN_CLASSES = ("w", "p", "n", "nx")
_PLAIN_TOKEN = re.compile(
    rf'<span class="(?:{"|".join(PLAIN_TOKEN_CLASSES)})">([^<]*)</span>'
)


def _code_html(code, lexer):
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
        rendered = highlight(text, lexer, formatter).split("\n")
        for (number, _), line in zip(run, rendered):
            line = _PLAIN_TOKEN.sub(r"\1", line)
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
    # Every problem of warning level or above is written to the stream,
    # those found by transforms (an undefined |substitution|) too.
    stream = io.StringIO()
    settings = {"report_level": 2, "halt_level": 5, "warning_stream": stream}
    doctree = publish_doctree(probe, settings_overrides=settings)
    return not stream.getvalue() and not any(
        doctree.findall(nodes.system_message)
    )


# The entry of a chapter's contents that lists the modules it uses.
SOURCES_ENTRY = "The package's code it uses"

# The roles of Sphinx's Python domain whose target a note may name.
_NAME_ROLES = {"class", "func", "meth", "mod", "obj", "attr", "data", "exc"}


def _package(env):
    """The package whose pages this book has (:class:`Package`), read once
    a build."""
    key = (env.srcdir, frozenset(env.found_docs))
    if _package.cache.get("key") != key:
        _package.cache.update(key=key, value=Package.read(*key))
    return _package.cache["value"]


_package.cache = {}


def _chapters(env):
    """{chapter: the modules it uses}, for each notebook of the book."""
    package = _package(env)
    chapters = {}
    for docname in sorted(env.found_docs):
        path = Path(env.doc2path(docname))
        if path.suffix == ".ipynb":
            chapters[docname] = modules_used(path, package.pages)
    return chapters


def _chapter_ref(docname):
    """A reference to a chapter, which Sphinx fills with its title."""
    ref = addnodes.pending_xref(
        "",
        refdomain="std",
        reftype="doc",
        reftarget="/" + docname,
        refexplicit=False,
        refwarn=True,
    )
    ref += nodes.inline("", "", classes=["xref", "std", "std-doc"])
    return ref


# Parts of a module that are plumbing rather than its idea, folded in place
# on its page under their title: each named by a function or class it
# defines (a name outlives a reworded title). tests/test_annotated.py checks
# that each still exists.
PLUMBING_PARTS = {
    # torch's fused kernel, and running bf16 attention in float32 on a CPU:
    # before the softmax and attention themselves in the file.
    "mixers.attention": ("fused_attention",),
}


class Fold(nodes.Element):
    """A ``<details>`` fold on an annotated page: its first child is the
    bar (``<summary>``), the rest what it holds."""


def _visit_fold(self, node):
    self.body.append('<details class="annotated-fold"><summary>')
    node[0].walkabout(self)
    self.body.append("</summary>")
    for child in node.children[1:]:
        child.walkabout(self)
    self.body.append("</details>")
    raise nodes.SkipNode


def _import_lines(source):
    """The lines of a module's top-level imports and its ``__all__``."""
    lines = set()
    for node in ast.parse(source).body:
        named_all = isinstance(node, (ast.Assign, ast.AnnAssign)) and any(
            isinstance(target, ast.Name) and target.id == "__all__"
            for target in getattr(
                node, "targets", [getattr(node, "target", None)]
            )
        )
        if isinstance(node, (ast.Import, ast.ImportFrom)) or named_all:
            lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


def _split_imports(code, imports):
    """The intro's code as (the imports and ``__all__`` that open it, the
    rest): blank lines go with the imports they lie between."""
    end = 0
    for at, (number, text) in enumerate(code):
        if number in imports:
            end = at + 1
        elif text.strip():
            break
    return code[:end], code[end:]


def _continues(section):
    """A section that carries on the definition above it: its code starts
    indented, and it defines nothing."""
    first = next((t for _, t in section.code if t.strip()), "")
    return not section.title and not section.names and first[:1].isspace()


def _private(section):
    """A section that defines functions or classes of the module, all
    private (``_zero_padded``; not a method, not a ``__dunder__``)."""
    return bool(section.names) and all(
        "." not in name and name.startswith("_") and not name.endswith("__")
        for name in section.names
    )


def _helper_runs(sections):
    """{index of a section: (the run's first section, its private names,
    its lines of code)} for each section in the run of private helpers
    (functions whose names start with ``_``, and the sections that carry on
    their bodies) that opens a module, right after its introduction: folded,
    so that the page reaches the module's idea first."""
    at = 1
    names, lines = [], 0
    while (
        at < len(sections)
        and not sections[at].title
        and (_private(sections[at]) or (names and _continues(sections[at])))
    ):
        names += sections[at].names
        lines += sum(1 for _, t in sections[at].code if t.strip())
        at += 1
    return {index: (1, names, lines) for index in range(1, at)}


def _plumbing_parts(sections, names):
    """{index of a titled section: (the functions and classes its part
    defines, its lines of code)} for each part that defines one of
    ``names``."""
    found = {}
    for index, section in enumerate(sections):
        if not section.title:
            continue
        part = [section]
        for later in sections[index + 1 :]:
            if later.title:
                break
            part.append(later)
        defined = [n for s in part for n in s.names]
        if names and set(defined) & set(names):
            found[index] = (
                [n for n in defined if "." not in n],
                sum(1 for s in part for _, t in s.code if t.strip()),
            )
    return found


class AnnotatedSource(SphinxDirective):
    """``annotated-source``: a file of the package, note beside code,
    section by section; each titled part a section of the page."""

    required_arguments = 1

    def run(self):
        relative, filename = self.env.relfn2path(self.arguments[0])
        self.env.note_dependency(relative)
        with open(filename, encoding="utf-8") as file:
            source = file.read()
        script = filename.endswith(".js")
        self.lexer = (
            JavascriptLexer(stripnl=False)
            if script
            else PythonLexer(stripnl=False)
        )
        self.language = "javascript" if script else "python"
        # The book's root is the repository's.
        self.module = module_of_path(posixpath.normpath(relative))
        self.package = _package(self.env)
        result = [self._uses()]
        rows = nodes.container(classes=["annotated-source"])
        result.append(rows)
        sections = parse_source(filename, source)
        self.imports = set() if script else _import_lines(source)
        taken = {name for section in sections for name in section.names}
        helpers = _helper_runs(sections)
        plumbing = _plumbing_parts(sections, PLUMBING_PARTS.get(self.module))
        fold = None  # the fold that the rows now go into, if any
        for index, section in enumerate(sections):
            fold = None if index not in helpers else fold
            if index in helpers and helpers[index][0] == index:
                _, names, lines = helpers[index]
                fold = self._fold(
                    "Helpers: " + ", ".join(f"``{n}``" for n in names),
                    lines,
                )
                rows += fold
            if section.title:
                part = nodes.section(classes=["annotated-part"])
                # Its id, unless a name defined on the page is that id
                # (the part "Provenance." and the function provenance).
                ident = nodes.make_id(section.title)
                while ident in taken or ident in self.state.document.ids:
                    ident = "part-" + ident
                taken.add(ident)
                part["ids"].append(ident)
                name = nodes.fully_normalize_name(section.title)
                part["names"].append(name)
                self.state.document.note_implicit_target(part, part)
                # The title is reStructuredText, as the notes are: its
                # ``code`` and :math: show as code and maths.
                shown, _ = self.state.inline_text(section.title, self.lineno)
                part += nodes.title(section.title, "", *shown)
                rows = nodes.container(classes=["annotated-source"])
                if index in plumbing:
                    names, lines = plumbing[index]
                    folded = self._fold(
                        "Plumbing: " + ", ".join(f"``{n}``" for n in names),
                        lines,
                    )
                    folded += rows
                    part += folded
                else:
                    part += rows
                result.append(part)
            (fold if fold is not None else rows).append(self._section(section))
        return result

    def _fold(self, summary, lines):
        """A fold (``<details>``) whose bar says what it holds: ``summary``
        (reStructuredText) and how many lines of code."""
        shown, _ = self.state.inline_text(summary, self.lineno)
        bar = nodes.inline("", "", *shown)
        bar += nodes.Text(f" ({lines} line{'' if lines == 1 else 's'})")
        return Fold("", bar, classes=["annotated-fold"])

    def _uses(self):
        """The line under the title: the chapters that use the module, and
        its entry in the API reference."""
        line = nodes.paragraph(classes=["annotated-uses"])
        chapters = []
        for chapter, modules in _chapters(self.env).items():
            self.env.note_dependency(self.env.doc2path(chapter))
            if self.module in modules:
                chapters.append(chapter)
        if chapters:
            line += nodes.Text("Used in ")
            for index, chapter in enumerate(chapters):
                line += nodes.Text(" · " if index else "")
                line += _chapter_ref(chapter)
            line += nodes.Text(". ")
        if not self.module.endswith(".js"):
            line += nodes.Text("API reference: ")
            ref = addnodes.pending_xref(
                "", refdomain="py", reftype="mod", reftarget=self.module
            )
            ref += nodes.literal(self.module, self.module)
            line += ref
            line += nodes.Text(".")
        return line

    def _section(self, section):
        row = nodes.container(classes=["annotated-section"])
        if section.intro:
            row["classes"].append("annotated-intro")
        row["ids"] = list(section.names)
        note = nodes.container(classes=["annotated-note"])
        for index, block in enumerate(section.blocks):
            text = "\n".join(block).strip("\n")
            if text:
                note += self._notes(text, index in section.docstrings)
        self._link_names(note, section.names)
        row += note
        code_lines = section.code
        if self.imports and (section.intro or section.has_code()):
            folded, code_lines = _split_imports(section.code, self.imports)
            if section.intro and folded:
                row += self._imports_fold(folded)
            elif folded and not any(t.strip() for _, t in code_lines):
                # A section of imports alone: folded in its code's place.
                holder = nodes.container(classes=["annotated-code"])
                holder += self._imports_fold(folded)
                row += holder
                return row
            else:
                code_lines = section.code
        code = _code_html(code_lines, self.lexer)
        if code:
            row += nodes.raw(
                "",
                f'<div class="annotated-code highlight-{self.language}'
                f' notranslate"><div class="highlight"><pre>{code}</pre>'
                "</div></div>",
                format="html",
            )
        elif not section.intro:
            row += nodes.container(
                classes=["annotated-code", "annotated-empty"]
            )
        return row

    def _imports_fold(self, folded):
        """The module's imports (and ``__all__``), folded under a bar."""
        text = "\n".join(t for _, t in folded)
        what = (
            "The imports and ``__all__``"
            if "__all__" in text
            else ("The imports")
        )
        fold = self._fold(what, sum(1 for _, t in folded if t.strip()))
        fold += nodes.raw(
            "",
            f'<div class="annotated-code highlight-{self.language}'
            f' notranslate"><div class="highlight"><pre>'
            f"{_code_html(folded, self.lexer)}</pre></div></div>",
            format="html",
        )
        return fold

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

    def _target(self, name, here):
        """The URI of what ``name`` names in the package, or None; None too
        for the names the section itself defines (``here``)."""
        found = self.package.resolve(name, self.module)
        if found is None:
            return None
        page, anchor = found
        if page == self.env.docname:
            return None if anchor in here else f"#{anchor or ''}"
        uri = self.env.app.builder.get_relative_uri(self.env.docname, page)
        return uri + (f"#{anchor}" if anchor else "")

    def _link_names(self, note, here):
        """Each name of the package in the notes, as ``code`` or a role
        (:func:, :class:, ...), links to its definition on its page; any
        other name stays as written."""
        roles = [
            (ref, ref["reftarget"], ref.children)
            for ref in note.findall(addnodes.pending_xref)
            if ref.get("refdomain") == "py"
            and ref.get("reftype") in _NAME_ROLES
        ]
        literals = [
            (literal, literal.astext(), [literal])
            for literal in note.findall(nodes.literal)
            if not isinstance(
                literal.parent, (nodes.reference, addnodes.pending_xref)
            )
        ]
        for node, name, shown in roles + literals:
            uri = self._target(name, here)
            if uri:
                link = nodes.reference(
                    "",
                    "",
                    refuri=uri,
                    internal=True,
                    classes=["annotated-name"],
                )
                node.replace_self(link)
                link += list(shown)


# -----------------------------------------------------------------------------
# The page's contents, and the way back from the chapters


def _rows(node):
    """The names each row of the annotated source under ``node`` defines,
    in order, outside its parts."""
    for child in node.children:
        if not isinstance(child, nodes.Element) or isinstance(
            child, nodes.section
        ):
            continue
        if "annotated-section" in child["classes"]:
            yield from child["ids"]
        else:
            yield from _rows(child)


def _entry(docname, name, uri=None, code=True):
    """An entry of the page's contents: the name (as code), linked to its
    anchor, or to ``uri`` (another page)."""
    reference = nodes.reference(
        "",
        "",
        nodes.literal(name, name) if code else nodes.Text(name),
        internal=True,
        refuri=docname,
        # The theme links a contents entry to its "anchor".
        anchorname=uri or "#" + name,
        annotated_entry=True,
    )
    return nodes.list_item(
        "",
        addnodes.compact_paragraph(
            "", "", reference, skip_section_number=True
        ),
    )


def _add_entries(item, docname, names, first=False):
    """Add each name's entry under the contents' ``item`` (``first``: before
    its entries already there); a method under its class."""
    entries, placed = {}, 0
    for name in names:
        owner = name.rpartition(".")[0]
        while owner and owner not in entries:
            owner = owner.rpartition(".")[0]
        parent = entries[owner] if owner else item
        if name in entries:
            continue  # a property's setter, after its getter
        entry = entries[name] = _entry(docname, name)
        lists = [
            c for c in parent.children if isinstance(c, nodes.bullet_list)
        ]
        if not lists:
            lists = [nodes.bullet_list()]
            parent += lists[0]
        if first and parent is item:
            lists[0].insert(placed, entry)
            placed += 1
        else:
            lists[0] += entry


def _contents(app, doctree):
    """An annotated page's contents (the theme's "On this page", a drawer
    behind its contents button) list its parts, and in each its classes
    and functions, a class's methods under it."""
    docname = app.env.docname
    if not any(
        "annotated-source" in node["classes"]
        for node in doctree.findall(nodes.container)
    ):
        return
    toc = app.env.tocs.get(docname)
    if toc is None or not len(toc):
        return
    items = {
        ref["anchorname"]: ref.parent.parent
        for ref in toc.findall(nodes.reference)
    }
    page = toc[0]
    for part in doctree.findall(nodes.section):
        if "annotated-part" in part["classes"]:
            item = items.get("#" + part["ids"][0])
            if item is not None:
                _add_entries(item, docname, list(_rows(part)))
    top = next(iter(doctree.findall(nodes.section)))
    names = list(_rows(top))
    if names:
        _add_entries(page, docname, names, first=True)


def _unnumbered(app, env):
    """The names in the contents carry no section number (the book's
    numbering, sphinx-multitoc-numbering, gives every entry one)."""
    for toc in env.tocs.values():
        for reference in toc.findall(nodes.reference):
            if reference.get("annotated_entry"):
                reference.attributes.pop("secnumber", None)
    return []


def _chapter_sources(app, doctree):
    """A chapter's contents ("On this page", beside it on a desktop and
    behind its contents button on a phone) end with links to the annotated
    source of the modules it uses; in the contents, they make the chapter
    no longer."""
    env = app.env
    docname = env.docname
    if Path(env.doc2path(docname)).suffix != ".ipynb":
        return
    package = _package(env)
    modules = modules_used(Path(env.doc2path(docname)), package.pages)
    toc = env.tocs.get(docname)
    if not modules or toc is None or not len(toc):
        return
    index = env.app.builder.get_relative_uri(docname, f"{PAGES}/index")
    group = _entry(docname, SOURCES_ENTRY, index, code=False)
    group += nodes.bullet_list()
    for module in modules:
        uri = env.app.builder.get_relative_uri(docname, package.pages[module])
        group[-1] += _entry(docname, module, uri)
    page = toc[0]
    if not any(isinstance(c, nodes.bullet_list) for c in page.children):
        page += nodes.bullet_list()
    [c for c in page.children if isinstance(c, nodes.bullet_list)][0] += group


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


def _contents_script(app, pagename, templatename, context, doctree):
    """An annotated page closes its contents drawer when an entry is
    tapped (``book/_static/annotated-contents.js``), and its notes flow
    beside its code (``book/_static/annotated-layout.js``)."""
    if doctree is not None and any(
        "annotated-source" in node["classes"]
        for node in doctree.findall(nodes.container)
    ):
        app.add_js_file("annotated-contents.js")
        app.add_js_file("annotated-layout.js")


def setup(app):
    app.add_node(Fold, html=(_visit_fold, None))
    app.add_directive("annotated-source", AnnotatedSource)
    app.connect("doctree-resolved", _api_links)
    # After Sphinx's own collector has read the page's sections.
    app.connect("doctree-read", _contents, priority=900)
    app.connect("doctree-read", _chapter_sources, priority=900)
    # After the section numbers are assigned.
    app.connect("env-get-updated", _unnumbered, priority=900)
    app.connect("html-page-context", _contents_script)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
