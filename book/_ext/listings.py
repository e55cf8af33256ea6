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
"""

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


def setup(app):
    app.add_directive("literalinclude", SourceLiteralInclude, override=True)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
