"""The site around the reading gets out of the way: checks that
``tests/test_site.py`` runs on every page it loads, at a desktop and a phone
width (one page load serves all of a page's checks).

* neither Font Awesome's script nor its web fonts are downloaded: the icons
  are a few SVGs (book/_ext/icons.py);
* every icon of the page's header (and of its menus, opened) is drawn: an
  SVG shape, on screen, not blank;
* each chapter has one "Open in Colab" link right under its title, to the
  notebook in the repository that _config.yml names, and keeps its launch
  button; before its first section it shows at most one collapsed bar of
  code, which says what it holds (book/_ext/chapter_top.py);
* no heading, and no entry of a visible sidebar, breaks a line inside a word:
  every line of it but the last ends at a space, a hyphen, a dot, an
  underscore or a slash (book/_ext/line_breaks.py);
* a display equation fits its column, or scrolls in its own box and says so
  (data-more-right and a fading edge, then data-more-left once scrolled to its
  end), and no formula shows a MathJax error;
* exactly one search box is shown, and it opens the search dialog.

With ``MIXERS_SCREENSHOTS=1``, screenshots of the header's menus go to
``_build/screenshots/chrome-*.png``.
"""

import dataclasses
import io
import re

from PIL import Image
from test_book import CONFIG
from test_site import CHAPTERS, HANG_MS, save_screenshot


def colab_url(page_path: str) -> str:
    """Where a chapter's Colab link must go: Colab, then the repository,
    branch and notebook that _config.yml names."""
    repository = CONFIG["repository"]
    owner_repo = re.fullmatch(
        r"https://github\.com/([^/]+/[^/]+?)/?", repository["url"]
    ).group(1)
    book = repository.get("path_to_book", "").strip("/")
    path = f"{book}/{page_path}" if book else page_path
    return (
        f"{CONFIG['launch_buttons']['colab_url'].rstrip('/')}/github/"
        f"{owner_repo}/blob/{repository['branch']}/{path}.ipynb"
    )


def problems(page, page_path: str, downloaded: dict) -> list[str]:
    """What is wrong with the site around the page's text, read from the
    loaded page (``downloaded``: url -> bytes, what its first visit fetched).
    The search box is opened and closed last; the header's menus are opened
    by ``header_icons_blank``, which the test runs after its other checks."""
    return (
        icon_font_downloaded(downloaded)
        + colab_link_wrong(page, page_path)
        + setup_bars_unclear(page, page_path)
        + words_broken(page)
        + equations_overflow_unseen(page)
        + search_boxes_wrong(page)
    )


# ---------------------------------------------------------------------------------------------
# The icons.


def icon_font_downloaded(downloaded: dict) -> list[str]:
    return [
        f"the page downloads Font Awesome: {url}"
        for url in downloaded
        if re.search(r"/fontawesome\.js|/webfonts/fa-", url)
    ]


# Each icon element visible in the header or the sidebar's search box: its
# ::before box, and the SVG shape that masks it.
VISIBLE_ICONS = """(roots) => {
    document.querySelectorAll('[data-icon-index]')
        .forEach(icon => delete icon.dataset.iconIndex);
    return [...document.querySelectorAll(roots)]
    .flatMap(root => [...root.querySelectorAll('[class*="fa-"]')])
    // shown: not hidden by display, visibility or opacity (an annotated
    // page's contents button hides its icon with visibility: hidden)
    .filter(icon => icon.checkVisibility({visibilityProperty: true, opacityProperty: true})
                    && icon.getClientRects().length)
    .map((icon, index) => {
        icon.dataset.iconIndex = index;
        const before = getComputedStyle(icon, '::before');
        const mask = before.maskImage !== 'none' ? before.maskImage
                                                 : before.webkitMaskImage;
        const path = /%3Cpath d=(?:%22|')([^%']+)/.exec(mask || '');
        // its box in whole pixels, as a screenshot of it would take it
        const r = icon.getBoundingClientRect();
        const box = [Math.floor(r.left), Math.floor(r.top),
                     Math.ceil(r.right), Math.ceil(r.bottom)];
        return {index, name: icon.getAttribute('class'), box,
                width: parseFloat(before.width), height: parseFloat(before.height),
                path: path ? path[1].length : 0};
    });
}"""
HEADER = ".bd-header-article, .bd-sidebar-primary .search-button-field"
# No transition or animation is running on the page.
SETTLED = """() => document.getAnimations()
    .every(animation => animation.playState !== "running")"""


def header_icons_blank(page, stem: str) -> list[str]:
    """Every icon visible in the header, then in each of its menus opened
    (the repository and download menus, the launch menu), is an SVG shape of
    some size, and the screen shows it: its pixels are not all one colour."""
    problems = []
    seen = 0
    menus = page.locator(".bd-header-article .dropdown-toggle").filter(
        visible=True
    )
    for opened in [None, *range(menus.count())]:
        if opened is not None:
            menus.nth(opened).click()
            page.locator(".dropdown-menu.show").wait_for()
            save_screenshot(page, f"chrome-{stem}-menu{opened}")
        roots = HEADER if opened is None else ".dropdown-menu.show"
        icons, screen = icons_on_a_still_screen(page, roots)
        if screen is None:
            problems.append(f"the icons under {roots!r} never stand still")
        seen += len(icons)
        for icon in icons:
            if icon["path"] < 20 or min(icon["width"], icon["height"]) < 6:
                problems.append(
                    f"the icon {icon['name']!r} is not drawn as an SVG shape "
                    f"({icon['width']}x{icon['height']} px, path of "
                    f"{icon['path']} characters)"
                )
            elif screen is not None and blank(page, screen, icon):
                problems.append(f"the icon {icon['name']!r} shows nothing")
        if opened is not None:
            page.keyboard.press("Escape")
            page.locator(".dropdown-menu.show").wait_for(state="detached")
    # The repository, download, full-screen, theme and search buttons at
    # least, and the sidebar button.
    if seen < 6:
        problems.append(f"only {seen} icons are shown in the header")
    return problems


def icons_on_a_still_screen(page, roots: str, tries: int = 20):
    """The visible icons under ``roots`` and one picture of them (a
    ``Picture``), taken when the icons stand where they stood before it: a
    sidebar just shown or a drawer just closed may still be moving the header
    (one picture an icon took seconds a page). No picture if they are still
    moving after ``tries`` pictures."""
    for _ in range(tries):
        page.wait_for_function(SETTLED)
        icons = page.evaluate(VISIBLE_ICONS, roots)
        screen = picture_of(page, icons)
        if page.evaluate(VISIBLE_ICONS, roots) == icons:
            return icons, screen
    return icons, None


@dataclasses.dataclass
class Picture:
    """A picture of part of the screen, in grey (CSS px = image px), and
    where its top left corner lies on the screen."""

    image: Image.Image | None  # None: no icon lies in the viewport
    left: int = 0
    top: int = 0

    def part(self, box) -> Image.Image | None:
        """What the picture shows under ``box`` (left, top, right, bottom),
        or None unless it holds all of it."""
        left, top, right, bottom = box
        if self.image is None or not (
            self.left <= left < right <= self.left + self.image.width
            and self.top <= top < bottom <= self.top + self.image.height
        ):
            return None
        x, y = self.left, self.top
        return self.image.crop((left - x, top - y, right - x, bottom - y))


def picture_of(page, icons) -> Picture:
    """The smallest part of the screen that holds every icon's box, as far as
    the viewport shows it. (A picture of the whole viewport, read for the
    icons alone, cost the machine about 0.17 s to take and read: on the
    attention chapter at desktop width, against 0.05 s for the header's
    strip.)"""
    screen = page.viewport_size
    boxes = [
        (max(left, 0), max(top, 0))
        + (min(right, screen["width"]), min(bottom, screen["height"]))
        for left, top, right, bottom in (icon["box"] for icon in icons)
    ]
    boxes = [box for box in boxes if box[0] < box[2] and box[1] < box[3]]
    if not boxes:
        return Picture(None)
    left, top = min(box[0] for box in boxes), min(box[1] for box in boxes)
    right, bottom = max(box[2] for box in boxes), max(box[3] for box in boxes)
    clip = {"x": left, "y": top, "width": right - left, "height": bottom - top}
    return Picture(grey(page.screenshot(clip=clip)), left, top)


def grey(png: bytes) -> Image.Image:
    """A screenshot (PNG bytes) as an image in grey."""
    return Image.open(io.BytesIO(png)).convert("L")


def blank(page, screen: Picture, icon) -> bool:
    """Whether the icon's box is one colour: read in ``screen`` where the
    picture holds the box, else in a picture of the icon alone (scrolled into
    view)."""
    image = screen.part(icon["box"])
    if image is None:
        locator = page.locator(f'[data-icon-index="{icon["index"]}"]')
        image = grey(locator.screenshot())
    low, high = image.getextrema()
    return high - low < 40


# ---------------------------------------------------------------------------------------------
# The Colab link.


def colab_link_wrong(page, page_path: str) -> list[str]:
    links = page.evaluate("""() => [...document.querySelectorAll('a.colab-link')].map(link => ({
        href: link.href, text: link.textContent.trim(), shown: link.checkVisibility(),
        afterTitle: link.closest('p')?.previousElementSibling?.tagName === 'H1',
    }))""")
    if page_path not in CHAPTERS:
        return [
            f"a Colab link on a page that is not a chapter: {links}"
        ] * bool(links)
    problems = []
    if len(links) != 1:
        return [f"{len(links)} Colab links, not one"]
    link = links[0]
    if link["href"] != colab_url(page_path):
        problems.append(
            f"the Colab link goes to {link['href']}, not {colab_url(page_path)}"
        )
    if not (link["shown"] and link["afterTitle"]):
        problems.append("the Colab link is not shown right under the title")
    if link["text"] != "Open in Colab":
        problems.append(f"the Colab link reads {link['text']!r}")
    if not page.locator(".dropdown-launch-buttons").count():
        problems.append("the chapter lost its launch button")
    return problems


def setup_bars_unclear(page, page_path: str) -> list[str]:
    """A chapter opens with at most one collapsed bar of code before its
    first section, and the bar says what it holds."""
    if page_path not in CHAPTERS:
        return []
    bars = page.evaluate("""() => {
        const article = document.querySelector('article.bd-article');
        const section = article.querySelector('h2');
        return [...article.querySelectorAll('details.hide')]
            .filter(bar => !section || bar.compareDocumentPosition(section)
                                       & Node.DOCUMENT_POSITION_FOLLOWING)
            .map(bar => bar.querySelector('summary').innerText.trim());
    }""")
    problems = []
    if len(bars) > 1:
        problems.append(
            f"the chapter opens with {len(bars)} collapsed bars, not one: {bars}"
        )
    problems += [
        f"a bar at the top of the chapter does not say what it holds: {bar!r}"
        for bar in bars
        if bar.startswith("Show code cell")
    ]
    return problems


# ---------------------------------------------------------------------------------------------
# Line breaks in headings and sidebars.


# For each element: its visible text's lines, as the screen lays them out
# (a character's line is where its box's middle is). Typeset maths is left
# out: its glyphs sit above and below the line by design (a root's sign, a
# subscript), and it never breaks inside a heading (book/_static/mixers.css).
LINES_OF = """(selector) => [...document.querySelectorAll(selector)]
    .filter(element => element.checkVisibility() && element.getClientRects().length)
    .map(element => {
        const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT, {
            acceptNode: node => node.parentElement.closest('a.headerlink, mjx-container')
                ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT});
        const lines = [];
        let middle = null, spaced = false;
        for (let node; (node = walker.nextNode());) {
            for (let i = 0; i < node.data.length; i++) {
                const range = document.createRange();
                range.setStart(node, i);
                range.setEnd(node, i + 1);
                const box = range.getBoundingClientRect();
                if (/\\s/.test(node.data[i]) || !box.width) { spaced = true; continue; }
                const y = box.top + box.height / 2;
                if (middle === null || y > middle + box.height / 2) {
                    lines.push({text: '', spaced});
                    middle = y;
                }
                lines.at(-1).text += node.data[i];
                spaced = false;
            }
        }
        return lines;
    })
    .filter(lines => lines.length > 1)"""
WRAPPED = {
    "heading": "article.bd-article :is(h1, h2, h3, h4, h5, h6)",
    "sidebar entry": ".bd-sidebar-primary nav a, .bd-sidebar-secondary nav a",
}


def words_broken(page) -> list[str]:
    """A line of a heading or of a sidebar entry ends at a space, a hyphen, a
    dot, an underscore or a slash, never inside a word."""
    problems = []
    for kind, selector in WRAPPED.items():
        for lines in page.evaluate(LINES_OF, selector):
            for line, after in zip(lines, lines[1:]):
                if not (
                    after["spaced"] or re.search(r"[-._/]$", line["text"])
                ):
                    shown = "|".join(line["text"] for line in lines)
                    problems.append(f"a {kind} breaks inside a word: {shown}")
                    break
    return problems


# ---------------------------------------------------------------------------------------------
# Display equations.


def equations_overflow_unseen(page) -> list[str]:
    """An equation wider than its column is marked as scrolling and fades at
    the edge where more of it lies; scrolled to its end, the marks follow. And
    MathJax, loaded in parts (book/_ext/mathjax_parts.py), typesets every
    formula without an error (a part it lacks would show as one)."""
    return page.evaluate("""async () => {
        const found = [...document.querySelectorAll('mjx-merror')].map(error =>
            `MathJax could not typeset a formula: ${error.getAttribute('data-mjx-error') || error.textContent}`);
        const frame = () => new Promise(resolve => requestAnimationFrame(() => setTimeout(resolve, 50)));
        for (const maths of document.querySelectorAll('mjx-container[display="true"]')) {
            if (maths.scrollWidth <= maths.clientWidth + 1) continue;
            const name = JSON.stringify(maths.textContent.slice(0, 40));
            const faded = () => getComputedStyle(maths).maskImage !== 'none'
                || getComputedStyle(maths).webkitMaskImage !== 'none';
            if (!maths.hasAttribute('data-more-right') || !faded()) {
                found.push(`an equation scrolls sideways with no cue: ${name}`);
                continue;
            }
            maths.scrollLeft = maths.scrollWidth;
            await frame();
            if (maths.hasAttribute('data-more-right') || !maths.hasAttribute('data-more-left') || !faded())
                found.push(`scrolled to its end, an equation's cue does not follow: ${name}`);
            maths.scrollLeft = 0;
        }
        return found;
    }""")


# ---------------------------------------------------------------------------------------------
# Search.


def search_boxes_wrong(page) -> list[str]:
    """One search box or button is shown, and a click on it opens the
    search dialog."""
    boxes = page.locator(".search-button__button").filter(visible=True)
    menu = page.locator(".primary-toggle").filter(visible=True).first
    opened_the_pages = False
    if not boxes.count() and page.locator(".annotated-source").count():
        # an annotated page opens with the book's pages (and their search
        # box) hidden at desktop width, one tap on the menu button away
        menu.click()
        boxes.first.wait_for()
        opened_the_pages = True
    if boxes.count() != 1:
        return [f"{boxes.count()} search boxes are shown, not one"]
    boxes.click()
    try:
        page.locator("#pst-search-dialog input").wait_for(timeout=HANG_MS)
    except Exception:
        return ["the search box does not open the search dialog"]
    page.keyboard.press("Escape")
    page.locator("#pst-search-dialog input").wait_for(state="hidden")
    if opened_the_pages:
        # as the page opened: the later checks start from there
        menu.click()
        boxes.first.wait_for(state="hidden")
    return []
