"""Sphinx extension: the site serves the package's live views.

``src/mixers/views/views.js`` is the one module that draws every live view
(``mixers.live``). This adds its folder to the site's static files, so the
site serves the package's own copy (no second copy to fall out of step), and
adds ``_static/live-views.js``, the loader that renders each live view's
output with it, to every page as an ES module. A page with no view loads the
loader alone (under 1 KB).
"""

from pathlib import Path

VIEWS = Path(__file__).resolve().parents[2] / "src" / "mixers" / "views"


def _serve_views(app, config):
    config.html_static_path.append(str(VIEWS))


def setup(app):
    app.connect("config-inited", _serve_views)
    app.add_js_file("live-views.js", type="module")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
