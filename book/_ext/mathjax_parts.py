"""Sphinx extension: MathJax loaded in the parts the book uses.

sphinx-mathjax-offline serves MathJax 3 from the site itself and points each
page with maths at its combined ``tex-chtml.js`` (1.16 MB). Of that, 426 KB
is MathJax's right-click menu (``ui/menu``), which the book does not need: a
formula's TeX is in the page's source, and the browser zooms. Here a page
loads MathJax's ``startup.js`` and, from the same local copy, only what
typesets TeX as HTML (``input/tex``, ``output/chtml`` with its font, 740 KB
in all) and the hidden MathML that screen readers read
(``a11y/assistive-mml``). TeX packages beyond the common ones (``ams``,
``newcommand``, ...) load from the same copy when a formula needs them
(``autoload``).
"""

PARTS = ["input/tex", "output/chtml", "a11y/assistive-mml"]


def load_parts(app, config):
    config.mathjax_path = "mathjax/startup.js"
    mathjax = dict(config.mathjax3_config or {})
    mathjax["loader"] = {**mathjax.get("loader", {}), "load": PARTS}
    config.mathjax3_config = mathjax


def setup(app):
    # After sphinx-mathjax-offline's setup, which names tex-chtml.js.
    app.connect("config-inited", load_parts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
