"""Sphinx extension: MathJax 4, served by the site, in the parts the book
uses, breaking long display equations to fit the column.

The site serves its own copy of MathJax 4 (``book/_static/mathjax/``, from
the npm packages ``mathjax`` and ``@mathjax/mathjax-newcm-font``; its
README says which version and how to update it): no page loads anything
from another host, and the pages work from a server and from ``file://``.
A page with maths loads MathJax's ``startup.js`` and, from the same copy,
only what typesets TeX as HTML (``input/tex``, ``output/chtml``), the hidden
MathML that screen readers read (``a11y/assistive-mml``), and the font's
metrics (``fonts/mathjax-newcm-font/chtml.js``); the font's glyphs come as
small WOFF2 files, each loaded when a formula needs it, and TeX packages
beyond the common ones (``ams``, ``newcommand``, ...) when a formula needs
them (``autoload``). MathJax's right-click menu and its speech tools (about
1.5 MB) are not loaded: a formula's TeX is in the page's source, and the
browser zooms.

Long display equations break to fit their column (MathJax 4's
``displayOverflow: "linebreak"``), at a relation or an operator, as TeX
would: on a 390-px phone no display formula is wider than the text. One
that has nowhere to break (a wide matrix) still scrolls in its own box,
with a cue (``book/_static/table-scroll.js`` and ``mixers.css``).

What JSON cannot say is in ``book/_static/mathjax-setup.js``: MathJax
typesets, after the page, the maths in the package's comments that the
chapters' listings show inside code (``book/_ext/listings.py``), which its
page-wide pass skips as it skips all code.
"""

# Where the site's copy of MathJax is, under _static.
STARTUP = "mathjax/startup.js"
SETUP = "mathjax-setup.js"
PARTS = ["input/tex", "output/chtml", "a11y/assistive-mml"]
CONFIG = {
    "loader": {
        "load": PARTS,
        # The font's metrics and glyphs, from the same copy.
        "paths": {"fonts": "[mathjax]/fonts"},
    },
    "options": {"enableAssistiveMml": True},
    "output": {
        "font": "mathjax-newcm",
        "displayOverflow": "linebreak",
        "linebreaks": {"inline": True, "width": "100%"},
    },
}


def configure(app, config):
    config.mathjax_path = STARTUP
    mathjax = dict(config.mathjax3_config or {})
    for key, value in CONFIG.items():
        mathjax[key] = {**mathjax.get(key, {}), **value}
    config.mathjax3_config = mathjax


def mark_pages_with_maths_in_code(
    app, pagename, templatename, context, doctree
):
    """A page whose only maths is in its code's comments loads MathJax too
    (Sphinx loads it where the page has a math node)."""
    if doctree is None or "math notranslate" not in context.get("body", ""):
        return
    domain = app.env.get_domain("math")
    domain.data.setdefault("has_equations", {})[pagename] = True


def add_setup_script(app, pagename, templatename, context, doctree):
    """``mathjax-setup.js`` right before MathJax's own script, after the
    configuration that Sphinx writes into the page."""
    scripts = context.get("script_files", [])
    for index, script in enumerate(scripts):
        if str(getattr(script, "filename", script)).endswith(STARTUP):
            from sphinx.builders.html._assets import _JavaScript

            scripts.insert(index, _JavaScript(f"_static/{SETUP}"))
            return


def setup(app):
    app.connect("config-inited", configure, priority=900)
    # Before sphinx.ext.mathjax adds MathJax to the page (priority 500).
    app.connect(
        "html-page-context", mark_pages_with_maths_in_code, priority=400
    )
    app.connect("html-page-context", add_setup_script, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
