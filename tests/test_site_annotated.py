"""The annotated pages of the built site in a browser: a reader can move
around in them.

Every annotated page that has parts or definitions has its contents one tap
or click away at a phone's width (390 px) and a desktop's (1280 px): the
contents button opens a drawer that lists the page's parts, classes and
functions, and a link there scrolls to its section. At 1280 px the notes keep
a readable column beside 79 columns of code. A name in a note that names
something of the package links to an anchor that exists on the page it
points to. Screenshots of the open drawer are saved in
``_build/screenshots/PAGE-WIDTH-contents-drawer.png``.

The fixtures (a local server for the built site, headless Chromium) and
their skips are ``tests/test_site.py``'s.
"""

from pathlib import Path

import pytest
import test_site
from test_site import (
    ANNOTATED_PAGES,
    ROOT,
    SCREENSHOTS,
    SECONDS,
    WIDTHS,
    screenshot_name,
    wait_for_views_and_maths,
)

from annotated import parse_source

# test_site's fixtures: the built site on a local server, and Chromium.
site_url = test_site.site_url
browser = test_site.browser

# The annotated pages with something to list: a titled part or a definition.
PAGES_WITH_CONTENTS = sorted(
    page
    for page, module in {
        **ANNOTATED_PAGES,
        "book/source/views_js": "src/mixers/views/views.js",
    }.items()
    if any(
        section.title or section.names
        for section in parse_source(
            module, (ROOT / module).read_text(encoding="utf-8")
        )
    )
)
# The narrowest notes column beside the code at 1280 px that reads as text.
NOTES_LEAST_PX = 250
DRAWER = "#pst-secondary-sidebar-modal"


def open_page(browser, site_url, page_path, width):
    context = browser.new_context(
        viewport=WIDTHS[width], has_touch=width == "phone"
    )
    context.set_default_timeout(30 * SECONDS)
    page = context.new_page()
    page.goto(f"{site_url}/{page_path}.html", wait_until="load")
    # Typeset maths changes the page's height: wait for it first.
    wait_for_views_and_maths(page, problems := {})
    assert not problems, problems
    return context, page


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize(
    "page_path", PAGES_WITH_CONTENTS, ids=lambda path: Path(path).name
)
def test_the_contents_are_one_tap_away(site_url, browser, page_path, width):
    context, page = open_page(browser, site_url, page_path, width)
    try:
        buttons = page.locator(".secondary-toggle").filter(visible=True)
        assert buttons.count() == 1, "no visible contents button"
        buttons.tap() if width == "phone" else buttons.click()
        drawer = page.locator(DRAWER)
        links = drawer.locator("a.nav-link").filter(visible=True)
        links.first.wait_for(timeout=10 * SECONDS)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(
            path=SCREENSHOTS
            / f"{screenshot_name(page_path)}-{width}-contents-drawer.png"
        )
        box = drawer.bounding_box()
        screen = page.viewport_size
        assert box["x"] >= 0 and box["x"] + box["width"] <= screen["width"]
        # Every part, class and function the page defines is listed.
        hrefs = drawer.locator("a.nav-link").evaluate_all(
            "links => links.map(link => link.getAttribute('href'))"
        )
        module = ANNOTATED_PAGES.get(page_path, "src/mixers/views/views.js")
        sections = parse_source(module, (ROOT / module).read_text())
        names = {f"#{n}" for s in sections for n in s.names}
        assert names <= set(hrefs), sorted(names - set(hrefs))[:5]
        assert sum(1 for s in sections if s.title) == sum(
            1 for h in hrefs if h not in names
        )
        # A link there closes the drawer and scrolls to its section.
        target = links.last
        href = target.get_attribute("href")
        target.click()
        page.wait_for_function("d => !d.open", arg=drawer.element_handle())
        page.wait_for_function(
            "id => { const e = document.getElementById(id);"
            " const r = e && e.getBoundingClientRect();"
            " return r && r.top >= 0 && r.top < innerHeight; }",
            arg=href[1:],
            timeout=10 * SECONDS,
        )
    finally:
        context.close()


@pytest.mark.parametrize(
    "page_path",
    ["book/source/attention", "book/source/alibi", "book/source/views_js"],
    ids=lambda path: Path(path).name,
)
def test_notes_keep_their_column_beside_the_code(site_url, browser, page_path):
    context, page = open_page(browser, site_url, page_path, "desktop")
    try:
        widths = page.evaluate("""() => [...document.querySelectorAll(
            ".annotated-section:not(.annotated-intro)")]
            .filter(s => s.querySelector(".annotated-code pre"))
            .map(s => s.querySelector(".annotated-note")
                       .getBoundingClientRect().width)""")
        assert widths and min(widths) >= NOTES_LEAST_PX, min(widths)
        assert not page.locator("#pst-secondary-sidebar").is_visible()
    finally:
        context.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_name_in_a_note_links_to_its_definition(site_url, browser, width):
    """Every name link of the core pages' notes lands on an element with
    that id, on its page (and they have some)."""
    context, page = open_page(
        browser, site_url, "book/source/attention", width
    )
    try:
        missing, counts, anchors = [], {}, {}
        for path in ("attention", "alibi", "gmlp", "model"):
            page.goto(f"{site_url}/book/source/{path}.html")
            targets = page.locator(".annotated-note a.annotated-name")
            hrefs = targets.evaluate_all(
                "links => links.map(link => link.href)"
            )
            counts[path] = len(hrefs)
            for href in hrefs:
                target, _, anchor = href.partition("#")
                anchors.setdefault(target, set()).add(anchor)
        for target, ids in anchors.items():
            page.goto(target)
            missing += [
                f"{target}#{anchor}"
                for anchor in sorted(ids)
                if anchor
                and not page.evaluate(
                    "id => !!document.getElementById(id)", anchor
                )
            ]
        assert not missing, missing[:5]
        assert sum(counts.values()), counts
        # A click on one scrolls its definition into view.
        page.goto(f"{site_url}/book/source/alibi.html")
        link = page.locator(".annotated-note a.annotated-name[href^='#']")
        if link.count():
            anchor = link.first.get_attribute("href")[1:]
            link.first.click()
            page.wait_for_function(
                "id => { const r = document.getElementById(id)"
                ".getBoundingClientRect(); return r.top >= 0"
                " && r.top < innerHeight; }",
                arg=anchor,
                timeout=10 * SECONDS,
            )
    finally:
        context.close()
