"""Checks of an annotated page of the package's source, run by
``tests/test_site.py`` on the page it has loaded (one load a page and width
for all the site's browser checks): a reader can read it and move around in
it.

Read as labml.ai's pages read (issue 40), every annotated page at 1280 px:
the notes take at least 40 % of the width, and every note beside code is a
readable column (250 px at least); the contents sidebar is hidden; the code
column stands blank beside a note (a note that outruns its code) for at most
10 % of the page's height; the page opens on the module's idea, its imports,
``__all__``, its private helpers and its plumbing folded under bars that say
what they hold; and on ``views.js``'s page at most 10 % of the page's height
is code with no note in reach (more than ten lines of code below the end of
the nearest note). At 390 px each note is above its code (test_site's check of
every annotated page), as wide as the column, its text at least 14 px.

At either width, a page that has parts or definitions has its contents one
tap or click away: the contents button opens a drawer that lists the page's
parts, classes and functions, and a link there scrolls to its section; and a
click on a name in a note that links within the page scrolls its definition
into view. (That every name link lands on an id of the page it points to is
read from the built HTML: ``tests/test_site_annotated.py``.) With
``MIXERS_SCREENSHOTS=1``, screenshots of the open drawer are saved in
``_build/screenshots/PAGE-WIDTH-contents-drawer.png``.
"""

import re

from test_site import (
    ANNOTATED_PAGES,
    HANG_MS,
    ROOT,
    save_screenshot,
    screenshot_name,
)

from annotated import parse_source

# The narrowest notes column beside the code at 1280 px that reads as text.
NOTES_LEAST_PX = 250
# Issue 40's measures of an annotated page at 1280 px.
NOTES_LEAST_SHARE = 0.40
BLANK_MOST_SHARE = 0.10
BARE_MOST_SHARE = 0.10
# Code within this many lines below the end of a note is in its reach.
REACH_LINES = 10
# On a phone: a note's share of the column, and its text, at least.
PHONE_NOTE_LEAST_SHARE = 0.95
PHONE_NOTE_LEAST_PX = 14
DRAWER = "#pst-secondary-sidebar-modal"


def sections(page_path: str):
    module = ANNOTATED_PAGES[page_path]
    return parse_source(module, (ROOT / module).read_text(encoding="utf-8"))


def problems(page, page_path: str, width: str) -> list[str]:
    """What keeps the loaded annotated page from reading well; it only reads
    the page."""
    if page_path not in ANNOTATED_PAGES:
        return []
    if width == "desktop":
        return (
            reads_unlike_labml_s(page, page_path)
            + notes_too_narrow(page)
            + opens_off_its_idea(page)
        )
    return phone_notes_unreadable(page)


def moving_around_fails(page, page_path: str, width: str) -> list[str]:
    """A name link within the page, then the contents drawer: each must take
    the reader where it says. It clicks and scrolls: the page test runs it
    last."""
    if page_path not in ANNOTATED_PAGES:
        return []
    return name_link_lands_elsewhere(page, width) + contents_out_of_reach(
        page, page_path, width
    )


def back_to_the_top(page) -> None:
    """The page as it opened: at its top, with no fragment in its address
    (a link to the fragment already there would not move it)."""
    page.evaluate(
        "history.replaceState(null, '', location.pathname);"
        " window.scrollTo(0, 0)"
    )


# ---------------------------------------------------------------------------
# At 1280 px: notes beside code, as labml.ai's pages have them


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


def reads_unlike_labml_s(page, page_path: str) -> list[str]:
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
    return problems


def notes_too_narrow(page) -> list[str]:
    """Every note beside code is a column of text, and the contents sidebar
    leaves the page its width (it is hidden)."""
    widths = page.evaluate("""() => [...document.querySelectorAll(
        ".annotated-section:not(.annotated-intro)")]
        .filter(s => s.querySelector(".annotated-code pre")
                     && s.checkVisibility())
        .map(s => s.querySelector(".annotated-note")
                   .getBoundingClientRect().width)""")
    problems = []
    if widths and min(widths) < NOTES_LEAST_PX:
        problems.append(
            f"a note beside code is {min(widths):.0f} px wide, under"
            f" {NOTES_LEAST_PX} px"
        )
    if page.locator("#pst-secondary-sidebar").is_visible():
        problems.append("the contents sidebar is shown beside the code")
    return problems


def opens_off_its_idea(page) -> list[str]:
    """No import or ``__all__`` is in view before the folds are opened, and
    every fold's bar says what it holds (the names it folds, or "The
    imports"), with its count of lines."""
    first, bars = page.evaluate("""() => [
        [...document.querySelectorAll(".annotated-code pre")]
            .filter((pre) => pre.checkVisibility())
            .map((pre) => pre.textContent.split("\\n").find((l) => l.trim()) ?? "")[0] ?? "",
        [...document.querySelectorAll("details.annotated-fold > summary")]
            .map((bar) => bar.textContent.trim()),
    ]""")
    problems = []
    if first.startswith(("import ", "from ", "__all__")):
        problems.append(f"the page opens on {first!r}, not on its idea")
    problems += [
        f"a fold's bar does not say what it holds: {bar!r}"
        for bar in bars
        if not re.fullmatch(
            r"(The imports( and __all__)?|Helpers: .+|Plumbing: .+)"
            r" \(\d+ lines?\)",
            bar,
        )
    ]
    return problems


# ---------------------------------------------------------------------------
# At 390 px: each note across the column, legible


def phone_notes_unreadable(page) -> list[str]:
    """Each note as wide as the column, its text at least 14 px. (That it is
    above its code is test_site's ``annotated_source_incomplete``.)"""
    found = page.evaluate("""() => {
        const column = document.querySelector(".annotated-source").getBoundingClientRect().width;
        return [...document.querySelectorAll(".annotated-section:not(.annotated-intro)")]
            .filter((row) => row.checkVisibility())
            .map((row) => [row.querySelector(":scope > .annotated-note"),
                           row.querySelector(":scope > .annotated-code pre"), row.id])
            .filter(([note, code]) => note && code && note.textContent.trim())
            .map(([note, code, id]) => [note.getBoundingClientRect().width / column,
                parseFloat(getComputedStyle(note).fontSize), id.slice(0, 40)]);
    }""")
    if not found:  # a module with no note beside code (the package's)
        return []
    problems = []
    share, where = min((share, where) for share, _, where in found)
    if share <= PHONE_NOTE_LEAST_SHARE:
        problems.append(
            f"a note takes {share:.0%} of the column's width, not all of it"
            f" (section {where!r})"
        )
    size, where = min((size, where) for _, size, where in found)
    if size < PHONE_NOTE_LEAST_PX:
        problems.append(
            f"a note's text is {size:g} px, under {PHONE_NOTE_LEAST_PX} px"
            f" (section {where!r})"
        )
    return problems


# ---------------------------------------------------------------------------
# Moving around: a name link, the contents drawer


IN_VIEW = """id => { const e = document.getElementById(id);
    const r = e && e.getBoundingClientRect();
    return r && r.top >= 0 && r.top < innerHeight; }"""


# The first name link within the page that a reader can click where it
# begins (a link in a table that scrolls sideways may lie partly under the
# table's first column, which stays in view), scrolled to the middle of the
# screen; null if there is none.
TAPPABLE_NAME_LINK = """() => {
    const links = [...document.querySelectorAll(
        ".annotated-note a.annotated-name[href^='#']")]
        .filter((link) => link.checkVisibility());
    for (const link of links) {
        link.scrollIntoView({block: "center", behavior: "instant"});
        const r = link.getClientRects()[0];
        const x = r.left + Math.min(r.width / 2, 8), y = r.top + r.height / 2;
        if (link.contains(document.elementFromPoint(x, y)))
            return {x, y, anchor: link.getAttribute("href").slice(1)};
    }
    return links.length ? {x: null, y: null, anchor: null} : null;
}"""


def name_link_lands_elsewhere(page, width: str) -> list[str]:
    """A click (a tap on a phone) on the first name in a note that links
    within the page scrolls its definition into view."""
    from playwright.sync_api import TimeoutError

    back_to_the_top(page)
    link = page.evaluate(TAPPABLE_NAME_LINK)
    if link is None:
        return []
    if link["anchor"] is None:
        return [
            "no name link within the page can be clicked: each lies under"
            " something else"
        ]
    if width == "phone":
        page.touchscreen.tap(link["x"], link["y"])
    else:
        page.mouse.click(link["x"], link["y"])
    try:
        page.wait_for_function(IN_VIEW, arg=link["anchor"], timeout=HANG_MS)
    except TimeoutError:
        return [f"a click on the name link #{link['anchor']} did not show it"]
    return []


def contents_out_of_reach(page, page_path: str, width: str) -> list[str]:
    """The contents button opens a drawer inside the screen that lists
    every part, class and function the page defines; a link there closes
    the drawer and scrolls to its section."""
    from playwright.sync_api import TimeoutError

    parts = sections(page_path)
    if not any(section.title or section.names for section in parts):
        return []
    back_to_the_top(page)
    buttons = page.locator(".secondary-toggle").filter(visible=True)
    if buttons.count() != 1:
        return [f"{buttons.count()} visible contents buttons, not one"]
    buttons.tap() if width == "phone" else buttons.click()
    drawer = page.locator(DRAWER)
    links = drawer.locator("a.nav-link").filter(visible=True)
    try:
        links.first.wait_for(timeout=HANG_MS)
    except TimeoutError:
        return ["the contents button did not open a drawer of links"]
    save_screenshot(
        page, f"{screenshot_name(page_path)}-{width}-contents-drawer"
    )
    problems = []
    box, screen = drawer.bounding_box(), page.viewport_size
    if box["x"] < 0 or box["x"] + box["width"] > screen["width"]:
        problems.append(f"the contents drawer leaves the screen: {box}")
    hrefs = drawer.locator("a.nav-link").evaluate_all(
        "links => links.map(link => link.getAttribute('href'))"
    )
    names = {f"#{name}" for section in parts for name in section.names}
    if not names <= set(hrefs):
        problems.append(
            f"the contents leave out {sorted(names - set(hrefs))[:5]}"
        )
    titled = sum(1 for section in parts if section.title)
    listed = sum(1 for href in hrefs if href not in names)
    if listed != titled:
        problems.append(
            f"the contents list {listed} parts, not the {titled} the page has"
        )
    target = links.last
    href = target.get_attribute("href")
    target.click()
    try:
        page.wait_for_function(
            "d => !d.open", arg=drawer.element_handle(), timeout=HANG_MS
        )
        page.wait_for_function(IN_VIEW, arg=href[1:], timeout=HANG_MS)
    except TimeoutError:
        problems.append(
            f"a link in the contents ({href}) did not close the drawer and"
            " show its section"
        )
    return problems
