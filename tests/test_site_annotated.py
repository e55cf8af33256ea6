"""The annotated pages of the built site in a browser: a reader can move
around in them.

Every annotated page that has parts or definitions has its contents one tap
or click away at a phone's width (390 px) and a desktop's (1280 px): the
contents button opens a drawer that lists the page's parts, classes and
functions, and a link there scrolls to its section. At 1280 px the notes keep
a readable column beside 79 columns of code. A name in a note that names
something of the package links to an anchor that exists on the page it
points to. With ``MIXERS_SCREENSHOTS=1``, screenshots of the open drawer are
saved in ``_build/screenshots/PAGE-WIDTH-contents-drawer.png``.

Read as labml.ai's pages read (issue 40), every annotated page at 1280 px:
the notes take at least 40 % of the width; the code column stands blank
beside a note (a note that outruns its code) for at most 10 % of the page's
height; the page opens on the module's idea, its imports, ``__all__``, its
private helpers and its plumbing folded under bars that say what they hold
(a link into a fold opens it); and on ``views.js``'s page at most 10 % of
the page's height is code with no note in reach (more than ten lines of
code below the end of the nearest note). At 390 px each note is above its
code, as wide as the column, its text at least 14 px.

The fixtures (a local server for the built site, headless Chromium) and
their skips are ``tests/test_site.py``'s.
"""

import re
from pathlib import Path

import pytest
import test_site
from test_site import (
    ANNOTATED_PAGES,
    HANG_MS,
    ROOT,
    WIDTHS,
    save_screenshot,
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
# Issue 40's measures of an annotated page at 1280 px.
NOTES_LEAST_SHARE = 0.40
BLANK_MOST_SHARE = 0.10
BARE_MOST_SHARE = 0.10
# Code within this many lines below the end of a note is in its reach.
REACH_LINES = 10
ALL_PAGES = sorted({**ANNOTATED_PAGES, "book/source/views_js": ""})
DRAWER = "#pst-secondary-sidebar-modal"


def open_page(browser, site_url, page_path, width):
    context = browser.new_context(
        viewport=WIDTHS[width], has_touch=width == "phone"
    )
    context.set_default_timeout(HANG_MS)
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
        links.first.wait_for(timeout=HANG_MS)
        save_screenshot(
            page, f"{screenshot_name(page_path)}-{width}-contents-drawer"
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
            timeout=HANG_MS,
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
            .filter(s => s.querySelector(".annotated-code pre")
                         && s.checkVisibility())
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
                timeout=HANG_MS,
            )
    finally:
        context.close()


# What a page's layout measures (the rows laid out, not in a closed fold, not
# read across the page): the notes' share of the width, the height of notes
# with no code beside them, and of code with no note in reach.
MEASURES = """(reachLines) => {
    const union = (intervals) => {
        const out = [];
        for (const [a, b] of intervals.sort((x, y) => x[0] - y[0])) {
            if (out.length && a <= out.at(-1)[1]) out.at(-1)[1] = Math.max(out.at(-1)[1], b);
            else out.push([a, b]);
        }
        return out;
    };
    const minus = (u, v) => u.reduce((sum, [a, b]) => sum + (b - a) - v.reduce(
        (covered, [c, d]) => covered + Math.max(0, Math.min(b, d) - Math.max(a, c)), 0), 0);
    const rows = [...document.querySelectorAll(
        ".annotated-section:not(.annotated-intro):not(.annotated-wide)")]
        .filter((row) => row.checkVisibility());
    const line = parseFloat(getComputedStyle(document.querySelector(".annotated-code pre")).lineHeight);
    const notes = [], reach = [], codes = [], shares = [];
    const width = document.querySelector(".annotated-source").getBoundingClientRect().width;
    for (const row of rows) {
        const note = row.querySelector(":scope > .annotated-note");
        const code = row.querySelector(":scope > .annotated-code pre");
        if (note && note.textContent.trim()) {
            const r = note.getBoundingClientRect();
            notes.push([r.top + scrollY, r.bottom + scrollY]);
            reach.push([r.top + scrollY, r.bottom + scrollY + reachLines * line]);
            if (code) shares.push([r.width / width, (row.id || "").slice(0, 40)]);
        }
        if (code) {
            const r = code.getBoundingClientRect();
            codes.push([r.top + scrollY, r.bottom + scrollY]);
        }
    }
    const page = document.documentElement.scrollHeight;
    const [N, C, R] = [union(notes), union(codes), union(reach)];
    shares.sort((a, b) => a[0] - b[0]);
    return {page, blank: minus(N, C) / page, bare: minus(C, R) / page,
            strictBare: minus(C, N) / page, share: shares[0] ?? null};
}"""


@pytest.fixture(
    scope="module", params=ALL_PAGES, ids=lambda path: Path(path).name
)
def desktop_page(request, browser, site_url):
    """Each annotated page loaded and typeset once at 1280 px, for the checks
    that only read it (pytest runs every test of one page before it opens
    the next): one page load, not one a check."""
    context, page = open_page(browser, site_url, request.param, "desktop")
    try:
        yield request.param, page
    finally:
        context.close()


def test_the_page_reads_like_labml_s(desktop_page):
    page_path, page = desktop_page
    found = page.evaluate(MEASURES, REACH_LINES)
    print(
        f"{page_path}: {found['page']:,} px, notes beside code at least"
        f" {found['share'][0] if found['share'] else 1:.0%} of the width,"
        f" blank code column {found['blank']:.1%},"
        f" code with no note in reach {found['bare']:.1%}"
        f" (beside no note at all {found['strictBare']:.1%})"
    )
    problems = []
    if found["share"] and found["share"][0] < NOTES_LEAST_SHARE:
        share, where = found["share"]
        problems.append(
            f"a note beside code is {share:.0%} of the width, under"
            f" {NOTES_LEAST_SHARE:.0%} (section {where!r})"
        )
    if found["blank"] > BLANK_MOST_SHARE:
        problems.append(
            f"the code column stands blank beside notes for"
            f" {found['blank']:.1%} of the page's height, over"
            f" {BLANK_MOST_SHARE:.0%}"
        )
    if page_path.endswith("views_js") and found["bare"] > BARE_MOST_SHARE:
        problems.append(
            f"{found['bare']:.1%} of the page's height is code with no"
            f" note within {REACH_LINES} lines above it, over"
            f" {BARE_MOST_SHARE:.0%}"
        )
    assert not problems, f"{page_path}: " + "; ".join(problems)


def test_the_page_opens_on_the_module_s_idea(desktop_page):
    """No import or ``__all__`` is in view before the folds are opened, and
    every fold's bar says what it holds (the names it folds, or "The
    imports"), with its count of lines."""
    page_path, page = desktop_page
    first, bars = page.evaluate("""() => [
        [...document.querySelectorAll(".annotated-code pre")]
            .filter((pre) => pre.checkVisibility())
            .map((pre) => pre.textContent.split("\\n").find((l) => l.trim()) ?? "")[0] ?? "",
        [...document.querySelectorAll("details.annotated-fold > summary")]
            .map((bar) => bar.textContent.trim()),
    ]""")
    assert not first.startswith(("import ", "from ", "__all__")), (
        f"{page_path} opens on {first!r}"
    )
    for bar in bars:
        assert re.fullmatch(
            r"(The imports( and __all__)?|Helpers: .+|Plumbing: .+)"
            r" \(\d+ lines?\)",
            bar,
        ), bar


def test_the_attention_page_folds_its_plumbing_and_a_link_opens_it(
    site_url, browser
):
    """mixers.attention: its first code in view is the softmax, past the
    folded imports and the folded part on torch's fused kernel; a link to
    ``fused_attention`` opens that fold and shows its definition."""
    context, page = open_page(
        browser, site_url, "book/source/attention", "desktop"
    )
    try:
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


@pytest.mark.parametrize(
    "page_path",
    ["book/source/attention", "book/source/alibi", "book/source/views_js"],
    ids=lambda path: Path(path).name,
)
def test_on_a_phone_each_note_is_above_its_code_and_readable(
    site_url, browser, page_path
):
    context, page = open_page(browser, site_url, page_path, "phone")
    try:
        found = page.evaluate("""() => {
            const column = document.querySelector(".annotated-source").getBoundingClientRect().width;
            return [...document.querySelectorAll(".annotated-section:not(.annotated-intro)")]
                .filter((row) => row.checkVisibility())
                .map((row) => [row.querySelector(":scope > .annotated-note"),
                               row.querySelector(":scope > .annotated-code pre")])
                .filter(([note, code]) => note && code && note.textContent.trim())
                .map(([note, code]) => {
                    const n = note.getBoundingClientRect(), c = code.getBoundingClientRect();
                    return [n.bottom <= c.top + 1, n.width / column,
                            parseFloat(getComputedStyle(note).fontSize)];
                });
        }""")
        assert found
        assert all(above for above, _, _ in found), "a note not above its code"
        assert min(share for _, share, _ in found) > 0.95
        assert min(size for _, _, size in found) >= 14
    finally:
        context.close()
