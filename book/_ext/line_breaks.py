"""Sphinx extension: headings, sidebar entries and table cells break at
dots, underscores and slashes, not inside words.

A module's name (``mixers.experiments.alibi_extrapolation``) is one long word
to the browser: too wide for a phone's heading or the sidebar's column, it
broke wherever the line ran out (``mixers.experime|nts.alibi_extra|polation``).
Here every dot, underscore or slash (of a path: ``mixers/views/views.js``)
between two letters, in a heading of the page, in a cell of its tables
(``DotProductAttention.forward``) and in an entry of its sidebars (the
book's pages, the page's contents, the previous and next links), is
followed by ``<wbr>``, a place where the line may break; mixers.css forbids
breaks inside words there.
"""

import re

from bs4 import BeautifulSoup, NavigableString, Tag

# After a dot that follows a name (``SinusoidalPositions.|__init__``), and
# after an underscore or a slash between two letters or digits
# (``alibi_|extrapolation``, ``views/|views.js``): never inside ``__init__``.
BREAK_AFTER = re.compile(
    r"(?<=[A-Za-z0-9_]\.)(?=[A-Za-z_])|(?<=[A-Za-z0-9][_/])(?=[A-Za-z0-9])"
)
HEADING = re.compile(r"<h([1-6])\b.*?</h\1>", re.S)
TABLE_CELL = re.compile(r"<t([dh])\b.*?</t\1>", re.S)
TEXT = re.compile(r">([^<]+)<")


def with_breaks(text: str) -> str:
    """Plain text (or text escaped for HTML) with ``<wbr>`` after its dots,
    underscores and slashes between letters."""
    return BREAK_AFTER.sub("<wbr>", text)


def headings_with_breaks(html: str) -> str:
    """Every heading and table cell of the page's HTML, its text given its
    breaks."""

    def heading(found):
        return TEXT.sub(
            lambda text: f">{with_breaks(text.group(1))}<", found.group(0)
        )

    return TABLE_CELL.sub(heading, HEADING.sub(heading, html))


def links_with_breaks(soup):
    """The links of a sidebar (parsed HTML, changed in place)."""
    new_tag = (
        soup if isinstance(soup, BeautifulSoup) else BeautifulSoup()
    ).new_tag
    for link in soup.find_all("a"):
        for text in list(link.find_all(string=True)):
            pieces = BREAK_AFTER.split(str(text))
            if len(pieces) == 1:
                continue
            for piece in pieces[:-1]:
                text.insert_before(NavigableString(piece))
                text.insert_before(new_tag("wbr"))
            text.replace_with(NavigableString(pieces[-1]))
    return soup


def sidebar_with_breaks(generate):
    """A theme's sidebar function whose links are given their breaks."""

    def generate_with_breaks(*args, **kwargs):
        html = generate(*args, **kwargs)
        if isinstance(html, Tag):  # parsed HTML (a BeautifulSoup is a Tag)
            return links_with_breaks(html)
        return str(links_with_breaks(BeautifulSoup(str(html), "html.parser")))

    return generate_with_breaks


def add_breaks(app, pagename, templatename, context, doctree):
    if "body" in context:
        context["body"] = headings_with_breaks(context["body"])
    for name in ("generate_toctree_html", "generate_toc_html"):
        if name in context:
            context[name] = sidebar_with_breaks(context[name])
    for neighbour in ("prev", "next"):
        if context.get(neighbour):
            title = context[neighbour]["title"]
            context[neighbour]["title"] = TEXT.sub(
                lambda text: f">{with_breaks(text.group(1))}<", f">{title}<"
            )[1:-1]


def setup(app):
    # After the theme has put its sidebar functions in the page's context
    # (the default priority is 500).
    app.connect("html-page-context", add_breaks, priority=800)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
