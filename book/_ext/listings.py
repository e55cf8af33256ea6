"""Sphinx extension: every listing of the package's source says where it comes
from.

The chapters show the package's real code with ``literalinclude``
(``:pyobject:``, or ``:start-at:`` / ``:end-before:``), which Sphinx renders as
a bare block: the reader cannot tell which file it is from, nor open it. This
overrides ``literalinclude`` so that a listing of a file under ``src/`` gets a
caption, with no change to the chapters::

    src/mixers/alibi.py · alibi_slopes — lines 42–67 (annotated · source)

where "annotated" links to the section of the book's annotated source that
shows those lines (``book/_ext/annotated.py``) and "source" to exactly those
lines on the repository's site,
``{repository_url}/blob/{repository_branch}/src/mixers/alibi.py#L42-L67``. The
URL and branch are the ones Jupyter Book copies from ``_config.yml``'s
``repository:`` into ``html_theme_options``; without a URL the caption has no
link. The line numbers are Sphinx's own: the file is read again by
``LiteralIncludeReader`` with ``:lineno-match:``, the option with which Sphinx
numbers a listing by its lines in the file. An author's ``:caption:`` is kept,
and the location appended.

The package's comments are reStructuredText, as its docstrings are (the
annotated pages typeset them: ``book/_ext/annotated.py``). In the code that a
page shows highlighted, every comment reads as text, never as its markup
(:func:`typeset_comments`): ``:math:`q_i^\top k_j``` becomes a formula that
MathJax typesets in place (``book/_static/mathjax-setup.js``), a role such as
``:class:`Foo``` or ``:func:`f``` the name it names, ````x```` plain ``x``,
``*word*`` the word in italics. A
formula that runs onto the next comment line is typeset whole where it
starts, and the next line keeps what follows it. The code itself is
untouched.
"""

import html
import keyword
import posixpath
import re

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.directives.code import LiteralInclude, LiteralIncludeReader
from sphinx.util.logging import suppress_logging

from mixers.source import core

from annotated import anchor_of_line, page_of_module, parse_module

# Listings of files under this folder of the repository get a caption.
SOURCE_ROOT = "src/"

# Options that change the text shown but not which lines of the file it is, and
# that Sphinx refuses to combine with :lineno-match: (or that would warn a
# second time).
_PRESENTATION_OPTIONS = ("lineno-start", "prepend", "append", "dedent")

# The name a listing starts with: "def f", "class C", "NAME = ..." or "NAME:
# type = ...".
_NAME = re.compile(r"(?:async\s+def|def|class)\s+(\w+)|([A-Za-z_]\w*)\s*[:=]")


def repository_path(theme_options, relative_to_book):
    """The file's path in the repository, from its path relative to the book's
    root."""
    book_in_repository = theme_options.get("path_to_docs") or ""
    return posixpath.normpath(
        posixpath.join(book_in_repository, relative_to_book)
    )


def read_listing(filename, options, config):
    """The text a listing shows, without its decorations, and (first, last):
    its lines in the file.

    (first, last) is None when the lines are not one run (a disjoint
    ``:lines:``).
    """
    plain = {
        k: v for k, v in options.items() if k not in _PRESENTATION_OPTIONS
    }
    # The directive has already read the file and reported any problem; this
    # reading is silent.
    with suppress_logging():
        try:
            reader = LiteralIncludeReader(
                filename, dict(plain, **{"lineno-match": True}), config
            )
            text, count = reader.read()
        # Sphinx cannot number a disjoint :lines: by the file's lines either
        except ValueError:
            return (
                LiteralIncludeReader(filename, plain, config).read()[0],
                None,
            )
    return text, (
        (reader.lineno_start, reader.lineno_start + count - 1)
        if count
        else None
    )


def leading_name(text):
    """The identifier a listing begins with (``ACTIVATIONS``, ``fuse``), or
    None."""
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "@")):
            match = _NAME.match(line)
            name = match and (match.group(1) or match.group(2))
            # "else:" starts with a name followed by a colon too, but names
            # nothing.
            return name if name and not keyword.iskeyword(name) else None
    return None


def listed_object(options, text):
    """What the caption names: the ``:pyobject:``, or the name a partial
    listing starts with."""
    if options.get("pyobject"):
        return options["pyobject"]
    if any(k in options for k in ("start-at", "start-after", "lines")):
        return leading_name(text)
    return None  # the whole file: its name says it all


def source_url(theme_options, path, lines):
    """The repository page of ``path``, at ``lines`` when known; None without a
    repository URL."""
    url = (theme_options.get("repository_url") or "").rstrip("/")
    if not url:
        return None
    # GitHub resolves HEAD to the default branch: the right page when no branch
    # is configured.
    branch = theme_options.get("repository_branch") or "HEAD"
    anchor = ""
    if lines:
        first, last = lines
        anchor = f"#L{first}" if first == last else f"#L{first}-L{last}"
    return f"{url}/blob/{branch}/{path}{anchor}"


def lines_text(lines):
    """'line 38' or 'lines 42–67' (with an en dash)."""
    first, last = lines
    return f"line {first}" if first == last else f"lines {first}\u2013{last}"


def location_nodes(path, name, lines, url, annotated=None):
    """The caption's nodes: file · object — lines a–b (annotated · source).

    ``annotated`` is the URI of the listing's section in the annotated source
    (``book/_ext/annotated.py``), ``url`` the lines on the repository's site.
    """
    parts = [nodes.literal(path, path)]
    if name:
        parts += [nodes.Text(" · "), nodes.literal(name, name)]
    if lines:
        parts.append(nodes.Text(" — " + lines_text(lines)))
    links = []
    if annotated:
        links.append(
            nodes.reference(
                "annotated",
                "annotated",
                refuri=annotated,
                internal=True,
                classes=["listing-annotated"],
            )
        )
    if url:
        links.append(
            nodes.reference(
                "source", "source", refuri=url, classes=["listing-source"]
            )
        )
    if links:
        parts.append(nodes.Text(" ("))
        for index, link in enumerate(links):
            parts += [nodes.Text(" · ")] if index else []
            parts.append(link)
        parts.append(nodes.Text(")"))
    return parts


def annotated_uri(env, path, lines):
    """The URI, from the current page, of the section of the annotated source
    that shows the listing's first line; None if there is no such page."""
    page = page_of_module(path)
    if page not in env.found_docs:
        return None
    with open(env.relfn2path("/" + path)[1], encoding="utf-8") as file:
        sections = parse_module(file.read())
    anchor = anchor_of_line(sections, lines[0]) if lines else None
    uri = env.app.builder.get_relative_uri(env.docname, page)
    return uri + (f"#{anchor}" if anchor else "")


class SourceLiteralInclude(LiteralInclude):
    """``literalinclude`` that captions listings of the package's source with
    their location.

    ``:core:`` shows the lines that compute: the listed function's (or each
    method's) docstring and opening argument checks become one ``...`` line
    each (``mixers.source.core``, which Colab's ``show_source(core=True)``
    uses too); the caption's line numbers stay the whole object's.
    """

    option_spec = {**LiteralInclude.option_spec, "core": directives.flag}

    def run(self):
        relative, filename = self.env.relfn2path(self.arguments[0])
        theme_options = self.config.html_theme_options or {}
        path = repository_path(theme_options, relative)
        if not path.startswith(SOURCE_ROOT) or "diff" in self.options:
            return super().run()
        authored = self.options.get("caption")
        # Sphinx builds the captioned container (and puts :name: on it); for a
        # listing without a caption of its own, a placeholder caption is then
        # replaced.
        self.options["caption"] = authored or "listing"
        result = super().run()
        caption = self._caption(result)
        if caption is None:
            return result  # Sphinx reported a problem instead of a listing
        if "core" in self.options:
            literal = next(iter(result[0].findall(nodes.literal_block)))
            shown = core(literal.rawsource)
            literal.rawsource = shown
            literal[:] = [nodes.Text(shown)]
        text, lines = read_listing(filename, self.options, self.config)
        url = source_url(theme_options, path, lines)
        annotated = annotated_uri(self.env, path, lines)
        if authored:
            caption += [nodes.Text(" · ")] + location_nodes(
                path, None, lines, url, annotated
            )
        else:
            caption.children.clear()
            caption += location_nodes(
                path, listed_object(self.options, text), lines, url, annotated
            )
        caption.rawsource = caption.astext()
        return result

    @staticmethod
    def _caption(result):
        """The caption node of a captioned listing, or None."""
        if len(result) == 1 and isinstance(result[0], nodes.container):
            return next(iter(result[0].findall(nodes.caption)), None)
        return None


# ---------------------------------------------------------------------------
# Comments read as text: their maths typeset, their roles as names


# A comment token of Pygments' HTML (Python's ``#``, JavaScript's ``//`` and
# ``/* */``): each line of highlighted code holds its own spans.
_COMMENT = re.compile(r'(<span class="(?:c|c1|cm|cs)">)(.*?)(</span>)')
# What opens a comment line: "#", Sphinx's "#:", "//", and the space after.
_PREFIX = re.compile(r"^(?:#:?|//)[ \t]*")
# A role (``:math:`...```, ``:class:`~a.B```) or ````literal````, across
# lines ("\n" joins a comment's lines).
_MARKUP = re.compile(
    r":(?P<role>[a-z]+(?::[a-z]+)?):`(?P<target>[^`]*)`|``(?P<literal>.+?)``"
    # *emphasis* (not ``*args``, not ``a * b``): the word, in italics.
    r"|(?<![\w*])\*(?P<emphasis>[^\s*](?:[^*]*[^\s*])?)\*(?![\w*])",
    re.S,
)
# The languages whose comments are the package's reStructuredText.
COMMENTED_LANGUAGES = {
    "python",
    "python3",
    "py",
    "ipython",
    "ipython3",
    "default",
}
MATH_SPAN = '<span class="math notranslate nohighlight">\\({}\\)</span>'


def _as_text(found):
    """What a piece of markup shows, as HTML: a formula for MathJax, or the
    name a role names (its lines joined)."""
    if found.group("literal") is not None:
        return _escape(" ".join(found.group("literal").split()))
    if found.group("emphasis") is not None:
        words = _escape(" ".join(found.group("emphasis").split()))
        return f"<em>{words}</em>"
    role, target = found.group("role"), found.group("target")
    if role == "math":
        return MATH_SPAN.format(_escape(" ".join(target.split())))
    # "Title <target>" shows its title; "~a.b.C" shows "C"; "!x" shows "x".
    titled = re.fullmatch(r"(.*?)\s*<[^<>]*>", target, re.S)
    if titled:
        target = titled.group(1)
    target = target.lstrip("!")
    if target.startswith("~"):
        target = target[1:].rpartition(".")[2]
    return _escape(" ".join(target.split()))


def _escape(text):
    return html.escape(text, quote=False)


def typeset_comments(highlighted: str) -> str:
    """Highlighted code (Pygments' HTML, one line of code a line) whose
    comments read as text: their reStructuredText markup turned into
    typeset maths or plain names. A run of comment lines is read whole, so a
    role that runs onto the next line is found; it is shown whole where it
    starts, with the punctuation right after it, and the line it ends on
    keeps what follows."""
    if "`" not in highlighted and "*" not in highlighted:
        return highlighted
    lines = highlighted.split("\n")
    comments = {
        index: found
        for index, line in enumerate(lines)
        if (found := _COMMENT.search(line))
    }
    index = 0
    while index < len(lines):
        if index not in comments:
            index += 1
            continue
        run = [index]
        while run[-1] + 1 in comments and _only_comment(lines[run[-1] + 1]):
            run.append(run[-1] + 1)
        texts = [html.unescape(comments[i].group(2)) for i in run]
        if any("`" in text or "*" in text for text in texts):
            for i, text in zip(run, _comment_run_as_text(texts)):
                found = comments[i]
                lines[i] = text and (
                    lines[i][: found.start(2)]
                    + text
                    + lines[i][found.end(2) :]
                )
        index = run[-1] + 1
    return "\n".join(line for line in lines if line is not None)


def _only_comment(line):
    """The highlighted line holds a comment and nothing else but spaces."""
    rest = re.sub(r'<span class="w">\s*</span>', "", _COMMENT.sub("", line))
    return not rest.strip()


def _comment_run_as_text(texts):
    """Consecutive comment lines (plain text, each with its ``#``) as HTML
    with their markup read; None for a line to leave out."""
    prefixes = [_PREFIX.match(text).group(0) for text in texts]
    joined = "\n".join(t[len(p) :] for t, p in zip(texts, prefixes))
    shown = [[] for _ in texts]
    line, at = 0, 0
    taken = set()  # lines that a piece from a line above ran onto

    def plain(text):
        nonlocal line
        first, *rest = text.split("\n")
        shown[line].append(_escape(first))
        for part in rest:
            line += 1
            shown[line].append(_escape(part))

    for found in _MARKUP.finditer(joined):
        plain(joined[at : found.start()])
        shown[line].append(_as_text(found))
        at = found.end()
        spanned = found.group(0).count("\n")
        if spanned:
            punctuation = re.match(r"[.,;:)\]]*", joined[at:]).group(0)
            shown[line].append(_escape(punctuation))
            at += len(punctuation)
            at += len(re.match(r"[ \t]*", joined[at:]).group(0))
            taken.update(range(line + 1, line + spanned + 1))
            line += spanned
    plain(joined[at:])
    # A line that a piece from a line above took whole is left out.
    return [
        None
        if k in taken and not "".join(parts)
        else _escape(prefix if "".join(parts) else prefix.rstrip())
        + "".join(parts)
        for k, (prefix, parts) in enumerate(zip(prefixes, shown))
    ]


def comments_as_text(app):
    """Every highlighted block of Python on the site gets its comments read
    as text (the builder's highlighter, wrapped once)."""
    highlighter = getattr(app.builder, "highlighter", None)
    if highlighter is None or getattr(highlighter, "_comments_as_text", False):
        return
    plain = highlighter.highlight_block

    def highlight_block(source, lang, *args, **kwargs):
        highlighted = plain(source, lang, *args, **kwargs)
        if (lang or "default") in COMMENTED_LANGUAGES:
            return typeset_comments(highlighted)
        return highlighted

    highlighter.highlight_block = highlight_block
    highlighter._comments_as_text = True


def setup(app):
    app.add_directive("literalinclude", SourceLiteralInclude, override=True)
    app.connect("builder-inited", comments_as_text)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
