"""Sphinx extension: the theme's icons drawn from a few SVG files.

pydata-sphinx-theme draws its icons (``<i class="fa-solid fa-rocket">`` in
the header, and a few CSS pseudo-elements such as an admonition's sign) with
Font Awesome: a 1.49 MB script, ``fontawesome.js``, that turns every icon of
the whole set into an SVG, and, behind it, the set's web fonts (270 KB more).
A reader of this book sees 26 of its icons. So the site serves those 26,
vendored as SVG files from the npm package ``@fortawesome/fontawesome-free``
6.5.2 (the version the theme ships) in ``book/_static/icons/`` with their
licence, and no script and no icon font:

* at build time this extension writes ``_static/icons.css``: for each icon a
  rule that paints the icon's class (``.fa-rocket::before``) with its SVG as a
  mask over the text colour, so that it follows the light and dark themes
  like the font did; the admonitions' signs, and those of links to GitHub
  and of download links, are painted the same way;
* the theme's ``<script src="_static/scripts/fontawesome.js">`` is removed from
  every page (``layout.html`` in ``book/_ext/templates``), and the script from
  the site.

An icon class the theme adds later that is not in the folder falls back to the
theme's own web font, which then loads: tests/site_chrome.py (run by
tests/test_site.py) fails on a page that downloads it.
"""

import re
from pathlib import Path
from urllib.parse import quote

ICONS = Path(__file__).resolve().parents[1] / "_static" / "icons"
TEMPLATES = Path(__file__).resolve().parent / "templates"

# The admonitions' signs (pydata-sphinx-theme's --pst-icon-admonition-*): the
# admonition's class, then the icon.
ADMONITION_ICONS = {
    "": "bell",
    "note": "circle-info",
    "attention": "circle-exclamation",
    "important": "circle-exclamation",
    "caution": "triangle-exclamation",
    "warning": "triangle-exclamation",
    "danger": "triangle-exclamation",
    "error": "circle-xmark",
    "hint": "lightbulb",
    "tip": "lightbulb",
    "seealso": "share",
    "admonition-todo": "pencil",
}

# Other signs the theme draws with its font: a link to a GitHub repository
# (pydata-sphinx-theme marks it with class "github"), a download link.
LINK_ICONS = {
    "a.github::before": "github",
    "a.reference.download::before": "download",
}

# Every icon: a box the icon's shape (its width in em: Font Awesome's icons
# are 512 units tall and of various widths), painted in the text colour.
ICON_BOX = (
    "content:'';display:inline-block;height:1em;vertical-align:-0.125em;"
    "background-color:currentColor;"
    "-webkit-mask:var(--mixers-icon) center/contain no-repeat;"
    "mask:var(--mixers-icon) center/contain no-repeat"
)


def data_svg(svg: str) -> str:
    """The SVG without its comment (the licence, which heads the CSS file
    once), its attributes in single quotes."""
    return re.sub(r"<!--.*?-->", "", svg, flags=re.S).replace('"', "'")


def data_url(svg: str) -> str:
    """The SVG as a ``url()``."""
    svg = data_svg(svg)
    # Only what a URL in CSS cannot hold is escaped (<, >, #, %).
    escaped = quote(svg, safe=" =:/.-,'")
    return f'url("data:image/svg+xml,{escaped}")'


def icon_rules() -> str:
    shapes = {
        path.stem: path.read_text() for path in sorted(ICONS.glob("*.svg"))
    }
    licence = re.search(r"<!--!?(.*?)-->", next(iter(shapes.values())), re.S)
    rules = [
        "/* The icons the site shows, from Font Awesome Free 6.5.2:"
        f" {licence.group(1).strip()}"
        " (book/_static/icons/, written by book/_ext/icons.py). */",
        # The icon's own element carries no glyph: no icon font is asked for.
        ".fa,.fas,.fa-solid,.fab,.fa-brands,.far,.fa-regular"
        "{font-family:inherit}",
    ]
    rules.append(
        ",".join(f".fa-{name}::before" for name in shapes) + f"{{{ICON_BOX}}}"
    )
    for name, svg in shapes.items():
        width, height = map(
            float,
            re.search(r"viewBox='0 0 (\S+) (\S+)'", data_svg(svg)).groups(),
        )
        rules.append(
            f".fa-{name}::before{{--mixers-icon:{data_url(svg)};"
            f"width:{width / height:.4g}em}}"
        )
    for where, name in LINK_ICONS.items():
        rules.append(
            f"{where}{{--mixers-icon:{data_url(shapes[name])};{ICON_BOX};"
            f"font:inherit;width:1em}}"
        )
    for kind, name in ADMONITION_ICONS.items():
        # As specific as the theme's rules, and after them.
        where = f"div.admonition{'.' + kind if kind else ''}>.admonition-title"
        rules.append(
            f"{where}::after{{--mixers-icon:{data_url(shapes[name])};"
            + (
                f"{ICON_BOX};font:inherit;width:1rem;height:1rem"
                if not kind
                else "content:''"
            )
            + "}"
        )
    return "\n".join(rules) + "\n"


def write_icons_css(app, exception):
    if exception is None and app.builder.format == "html":
        static = Path(app.outdir) / "_static"
        static.mkdir(parents=True, exist_ok=True)
        (static / "icons.css").write_text(icon_rules())
        # No page asks for the theme's script any more.
        for unused in (static / "scripts").glob("fontawesome.js*"):
            unused.unlink()


def without_fontawesome(html: str) -> str:
    """The page's head without the theme's Font Awesome script."""
    return re.sub(
        r'\s*<script[^>]*src="[^"]*/fontawesome\.js[^"]*"[^>]*></script>',
        "",
        str(html),
    )


def add_filter(app):
    if hasattr(app.builder, "templates"):
        environment = app.builder.templates.environment
        environment.filters["without_fontawesome"] = without_fontawesome


def add_templates(app, config):
    config.templates_path.append(str(TEMPLATES))


def setup(app):
    app.connect("config-inited", add_templates)
    app.add_css_file("icons.css")
    app.connect("builder-inited", add_filter)
    app.connect("build-finished", write_icons_css)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
