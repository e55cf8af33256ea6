"""The annotated pages of the built site: where their links lead, and one
fold that a link opens.

Every name in a note that names something of the package links to an id
that exists on the page it points to, on every annotated page (read from the
built HTML: the ids are the site's own, none is made by a script). The
attention page folds its plumbing, and a link into the fold opens it
(headless Chromium).

The checks a reader makes of each annotated page at each width (notes beside
or above the code, the page opening on its idea, the contents drawer, a name
link within the page) are ``tests/site_annotated.py``'s, run by
``tests/test_site.py`` on its own load of each page. The fixtures (a local
server for the built site, headless Chromium) and their skips are
``tests/test_site.py``'s.
"""

from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin

import test_site
from test_site import (
    ANNOTATED_PAGES,
    HANG_MS,
    SITE,
    WIDTHS,
    unavailable,
    wait_for_views_and_maths,
)

# test_site's fixtures: the built site on a local server, and Chromium.
site_url = test_site.site_url
browser = test_site.browser


class _IdsAndNameLinks(HTMLParser):
    """A page's element ids, and the targets of its name links."""

    def __init__(self):
        super().__init__()
        self.ids, self.name_links = set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        classes = (attrs.get("class") or "").split()
        if tag == "a" and "annotated-name" in classes:
            self.name_links.append(attrs.get("href") or "")


def read_page(path: Path) -> _IdsAndNameLinks:
    parser = _IdsAndNameLinks()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_a_name_in_a_note_links_to_an_id_on_its_page():
    """Every name link of every annotated page lands on an element with
    that id, on its page (and the pages have some)."""
    if not (SITE / "index.html").is_file():
        unavailable(f"no built site: {SITE / 'index.html'} is missing")
    pages, missing, links = {}, [], 0
    for page_path in ANNOTATED_PAGES:
        url = f"{page_path}.html"
        for href in read_page(SITE / url).name_links:
            links += 1
            target, _, anchor = urljoin(url, href).partition("#")
            if not (SITE / target).is_file():
                missing.append(f"{url}: {href} (no page {target})")
                continue
            if target not in pages:
                pages[target] = read_page(SITE / target)
            if anchor and anchor not in pages[target].ids:
                missing.append(f"{url}: {href} (no id {anchor!r})")
    assert not missing, missing[:5]
    print(f"{links} name links, every one lands")
    assert links > 100, links


def test_the_attention_page_folds_its_plumbing_and_a_link_opens_it(
    site_url, browser
):
    """mixers.attention: its first code in view is the softmax, past the
    folded imports and the folded part on torch's fused kernel; a link to
    ``fused_attention`` opens that fold and shows its definition."""
    context = browser.new_context(viewport=WIDTHS["desktop"])
    context.set_default_timeout(HANG_MS)
    try:
        page = context.new_page()
        page.goto(f"{site_url}/book/source/attention.html", wait_until="load")
        wait_for_views_and_maths(page, problems := {})
        assert not problems, problems
        first = page.evaluate("""() => [...document.querySelectorAll(".annotated-code pre")]
            .find((pre) => pre.checkVisibility()).textContent.trim().split("\\n")[0]""")
        assert first.startswith("def masked_softmax("), first
        bars = page.locator("details.annotated-fold > summary")
        assert bars.first.inner_text().startswith("The imports and __all__")
        assert "fused_attention" in bars.nth(1).inner_text()
        page.goto(f"{site_url}/book/source/attention.html#fused_attention")
        page.wait_for_function(
            "() => { const e = document.getElementById('fused_attention');"
            " const r = e.getBoundingClientRect();"
            " return e.closest('details').open && r.height > 0"
            " && r.top >= 0 && r.top < innerHeight; }",
            timeout=HANG_MS,
        )
    finally:
        context.close()
