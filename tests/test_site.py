"""The built site in a real browser (headless Chromium, driven by Playwright).

Every page of the table of contents, at a desktop and a phone width, must load nothing from
another host, fail no request, log no console error or uncaught exception, show no untypeset
maths, and have every image loaded and described by alt text; every control of a live view
(``mixers.live``: drawn by ``views.js`` in the page) must have a visible name, move by keyboard
(sliders) or by a tap or click (choices), and change what the view shows, and the view's text
must stay legible; a page's own weight (its HTML and images) may not pass 550 KiB, nor a first
visit (everything it downloads) 3 MiB, and without scripts each view shows its static picture; no line of code may wrap, nor (at desktop width) any code scroll sideways, and a table that scrolls sideways must show it and keep its
first column in view; at desktop width no displayed equation may scroll, and a chapter must read
in one sitting (at most 16,000 px tall, shown code at most 45 % of it); and the sidebar buttons
must work: on a phone a tap on ☰ or on the contents button opens its drawer and a tap beside the
drawer closes it, on a desktop ☰ hides and shows the sidebar (an annotated page starts with it
hidden: ☰ shows and hides it). The same page load runs the checks of ``tests/site_chrome.py``
(the site around the text), ``tests/site_teaching.py`` (what the page teaches with) and
``tests/site_annotated.py`` (an annotated page of the package's source). With
``MIXERS_SCREENSHOTS=1``, a full-page screenshot of each
page at each width is saved beside the site, in ``_build/screenshots/PAGE-WIDTH.png`` (PAGE: its
path under ``book/``, a slash as a dash), and one of the screen with each drawer open (phone) or
the sidebar hidden (desktop), in ``PAGE-WIDTH-navigation.png`` and ``PAGE-WIDTH-contents.png``.

The tests need the built site (``jupyter-book build . --warningiserror``; ``MIXERS_SITE_DIR``
points them at another built copy) and Chromium (``apt-get install -y chromium``). Without
either they skip, unless ``MIXERS_REQUIRE_BROWSER=1`` (as in CI), where they fail.
"""

import base64
import contextlib
import dataclasses
import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest
from test_book import ROOT, chapter_pages, toc_files

from mixers.plot import SMALLEST_TEXT_KEY

sys.path.insert(0, str(ROOT / "book" / "_ext"))
from annotated import (  # noqa: E402
    package_files,
    page_of_module,
    parse_source,
)

CHAPTERS = set(chapter_pages())
# Each annotated page of the package's source and the file it shows: every
# module, and the views' script.
ANNOTATED_PAGES = {page_of_module(path): path for path in package_files(ROOT)}

SITE = Path(
    os.environ.get("MIXERS_SITE_DIR") or ROOT / "_build" / "html"
).resolve()
SCREENSHOTS = SITE.parent / "screenshots"
# Screenshots on request (MIXERS_SCREENSHOTS=1): they are for a person
# looking at the pages, and a full-page one costs seconds of the suite.
SCREENSHOTS_WANTED = os.environ.get("MIXERS_SCREENSHOTS") == "1"
WIDTHS = {
    "desktop": {"width": 1280, "height": 900},
    "phone": {"width": 390, "height": 844},
}
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # No host resolves but the local server's, 127.0.0.1, so a request to
    # another host fails in the browser, without each request's round trip
    # through Python that a route would cost (0.2-0.3 s a page load). The
    # rule holds for a bare IP address too (127.0.0.2 is not reached:
    # test_a_request_to_another_host_fails_and_is_reported).
    # watch_network_and_console reports each such request.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]

# A live view's output on the site (mixers.live): the view's JSON, which _static/live-views.js
# hands to views.js, which draws the view (.mx-view) inside it. Its controls: sliders (range
# inputs), choices (a group of radio buttons) and drop-down lists.
LIVE_OUTPUT = ".mixers-live"
LIVE_VIEW = f"{LIVE_OUTPUT} > .mx-view"
CONTROLS = ".mx-controls > .mx-control"
# How many controls each page's views have: none may go missing.
CONTROL_COUNTS = {
    "book/attention": 5,
    "book/multi_head": 5,
    "book/glu_variants": 4,
    "book/gmlp": 6,
    "book/alibi": 5,
    "book/side_by_side": 5,
}
# A page's own HTML and images. 550 KiB since every chapter that trains also
# shows its live run beside the committed one and its results by profile
# (about 35 KiB; the gMLP chapter, with its learned weights as data, was at
# 499 KiB before).
PAGE_WEIGHT_LIMIT = 550 * 2**10
FIRST_VISIT_LIMIT = 3 * 2**20  # everything a first visit downloads
SECONDS = 1000  # Playwright counts milliseconds
# Every wait of the browser tests ends as soon as what it waits for is there
# (a page loaded, a drawer open, a view redrawn); its limit only stops a
# hang, so it is long: a busy two-core machine draws a page many times
# slower than an idle one, and how busy it is decides no verdict.
HANG_MS = 120 * SECONDS


def unavailable(reason: str):
    if os.environ.get("MIXERS_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason} (and MIXERS_REQUIRE_BROWSER=1)", pytrace=False)
    pytest.skip(reason)


# ---------------------------------------------------------------------------------------------
# One local server and one browser for the module.


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serving(handler, host: str = "127.0.0.1"):
    """An HTTP server at a free port of ``host``, in a thread of its own,
    for the ``with`` block."""
    server = http.server.ThreadingHTTPServer((host, 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def serving_the_site(handler=QuietHandler):
    """The built site served by ``handler`` (a QuietHandler, or a test's
    own kind of one) for the ``with`` block: its URL."""
    with serving(functools.partial(handler, directory=SITE)) as server:
        yield f"http://127.0.0.1:{server.server_port}"


@pytest.fixture(scope="module")
def site_url():
    if not (SITE / "index.html").is_file():
        unavailable(
            f"no built site: {SITE / 'index.html'} is missing; build it with "
            "`jupyter-book build . --warningiserror` (or set MIXERS_SITE_DIR to a built copy)"
        )
    with serving_the_site() as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    # Debian's chromium; Ubuntu's chromium-browser and Google Chrome (on GitHub's runners) also do.
    chromium = next(
        filter(
            None,
            map(
                shutil.which, ("chromium", "chromium-browser", "google-chrome")
            ),
        ),
        None,
    )
    if chromium is None:
        unavailable(
            "no Chromium: neither /usr/bin/chromium nor `chromium` on PATH; "
            "install it with `apt-get install -y chromium` (Debian)"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable(
            "Playwright's Python package is missing: `pip install -r requirements.txt`"
        )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


# ---------------------------------------------------------------------------------------------
# The test.


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize(
    "page_path", toc_files(), ids=lambda path: Path(path).name
)
def test_the_page_works_in_a_browser(site_url, browser, page_path, width):
    # The checks of the site's chrome, of how the page teaches, of an
    # annotated page and of the diagrams, each in a module of its own, share
    # this page load (imported here: they import this module's helpers).
    import site_annotated
    import site_chrome
    import site_teaching
    import test_diagrams

    problems = {}  # one message per failing URL or per distinct error, in the order seen
    # A phone has a touch screen: its sidebar buttons are tapped (a desktop's are clicked).
    with opened_page(
        browser,
        site_url,
        page_path,
        problems,
        viewport=WIDTHS[width],
        has_touch=width == "phone",
    ) as (page, traffic):
        wait_for_views_and_maths(page, problems)
        # What the page fetched by itself, each request ended: a count, not
        # Playwright's "networkidle", which waits half a second without a
        # request on every page. A request started later still has its end
        # checked (the last check below), though it is not weighed here; on
        # every page at both widths, watched 2 s longer, none was.
        for message in requests_unfinished(page, traffic):
            problems.setdefault(message, message)
        first_visit = sum(traffic.downloaded.values())

        save_screenshot(
            page, f"{screenshot_name(page_path)}-{width}", full_page=True
        )

        for message in (
            untypeset_maths(page)
            + bad_images(page)
            + figures_unreadable(page)
            + figure_text_too_small(page, page_path, width)
            + test_diagrams.diagrams_unreadable(page, width)
            + too_wide(page)
            + code_wraps(page)
            + tables_scroll_unseen(page)
            + too_heavy(page_path)
            + first_visit_too_heavy(first_visit)
            + code_scrolls(page, page_path, width)
            + equations_scroll(page, width)
            + chapter_too_long(page, page_path, width)
            + annotated_source_incomplete(page, page_path, width)
            + site_teaching.problems(page, page_path, width)
            + site_annotated.problems(page, page_path, width)
            + site_chrome.problems(page, page_path, traffic.downloaded)
            # Then the checks that move controls and open menus.
            + exercise_views(page, page_path)
            + sidebars_dead(
                page, width, f"{screenshot_name(page_path)}-{width}"
            )
            + site_chrome.header_icons_blank(
                page, f"{screenshot_name(page_path)}-{width}"
            )
            + site_annotated.moving_around_fails(page, page_path, width)
            # What the controls and menus asked for is checked too.
            + requests_unfinished(page, traffic)
        ):
            problems.setdefault(message, message)
    if problems:
        pytest.fail(
            f"{page_path}.html at {width} width:\n  "
            + "\n  ".join(problems.values()),
            pytrace=False,
        )


# ---------------------------------------------------------------------------------------------
# Loading a page: only from the local server, without errors, then waiting for it to settle.


@contextlib.contextmanager
def opened_page(browser, site_url, page_path, problems, **context_options):
    """``page_path`` of the site at ``site_url`` in a page of a new browser
    context (``context_options``: its viewport, a touch screen), its network
    and console watched from the start (``watch_network_and_console``, which
    writes into ``problems``), loaded (its load event: its scripts have run,
    the views' loader and MathJax may still be at work); the context is
    closed after the ``with`` block. Yields the page and its ``Traffic``."""
    context = browser.new_context(**context_options)
    context.set_default_timeout(HANG_MS)
    try:
        page = context.new_page()
        traffic = watch_network_and_console(context, page, site_url, problems)
        page.goto(f"{site_url}/{page_path}.html", wait_until="load")
        yield page, traffic
    finally:
        context.close()


def watch_network_and_console(context, page, site_url, problems):
    def local(url):
        return url.startswith(site_url + "/")

    def on_request(request):
        # It fails: see CHROMIUM_ARGS.
        web = request.url.startswith(("http:", "https:", "ws:", "wss:"))
        if web and not local(request.url):
            problems.setdefault(
                request.url, f"request to another host: {request.url}"
            )

    traffic = Traffic()

    def on_sent(request):
        traffic.in_flight.add(request)

    def on_ended(request):
        traffic.in_flight.discard(request)

    def on_response(response):
        if local(response.url) and response.status >= 400:
            problems.setdefault(
                response.url, f"HTTP {response.status}: {response.url}"
            )

    def on_finished(request):
        sizes = request.sizes()
        traffic.downloaded[request.url] = (
            sizes["responseBodySize"] + sizes["responseHeadersSize"]
        )
        on_ended(request)

    def on_request_failed(request):
        on_ended(request)
        if local(
            request.url
        ):  # the other hosts' requests fail, and are reported above
            problems.setdefault(
                request.url,
                f"request failed ({request.failure}): {request.url}",
            )

    def on_console(message):
        if message.type == "error":
            where = message.location.get("url", "")
            key = (
                where
                if message.text.startswith("Failed to load resource")
                else message.text
            )
            line = message.location.get("lineNumber")
            problems.setdefault(
                key, f"console error: {message.text} (at {where}:{line})"
            )

    def on_page_error(error):
        frames = [
            line.strip() for line in (error.stack or "").splitlines()[1:2]
        ]
        problems.setdefault(
            error.message,
            f"uncaught exception: {error.message} {' '.join(frames)}".strip(),
        )

    context.on("request", on_request)
    page.on("request", on_sent)
    page.on("response", on_response)
    page.on("requestfinished", on_finished)
    page.on("requestfailed", on_request_failed)
    page.on("console", on_console)
    page.on("pageerror", on_page_error)
    return traffic


@dataclasses.dataclass
class Traffic:
    """What a page has fetched (url -> bytes: what a first visit costs) and
    the requests it has sent that have not yet finished or failed."""

    downloaded: dict = dataclasses.field(default_factory=dict)
    in_flight: set = dataclasses.field(default_factory=set)


def requests_unfinished(
    page, traffic: Traffic, seconds: float = HANG_MS / SECONDS
) -> list[str]:
    """Waits until every request the page has sent has finished or failed
    (each is then in ``traffic`` and checked by the handlers above); those
    still open after a hang's limit are the problem. A count, not a quiet
    period: Playwright's "networkidle" waits for 500 ms without a request,
    and after it has once fired, waits for nothing."""
    deadline = time.monotonic() + seconds
    while traffic.in_flight and time.monotonic() < deadline:
        page.wait_for_timeout(20)  # Playwright's events are handled meanwhile
    return [
        f"a request never ended ({seconds:.0f} s): {request.url}"
        for request in traffic.in_flight
    ]


def wait_for_views_and_maths(page, problems):
    from playwright.sync_api import TimeoutError

    # The loader renders the views after it has fetched views.js, after the load event.
    try:
        page.wait_for_function(
            "selector => [...document.querySelectorAll(selector)]"
            ".every(output => output.querySelector(':scope > .mx-view'))",
            arg=LIVE_OUTPUT,
            timeout=HANG_MS,
        )
    except TimeoutError:
        problems["views"] = (
            f"a live view was never rendered (no .mx-view after {HANG_MS // SECONDS} s)"
        )
    # Then the typeset page is laid out, so that it asks for the fonts its
    # text and formulas use, and those have loaded: a font that came later
    # would move what the checks measure. A hang's limit, not a deadline:
    # typesetting ends when it ends on a busy machine.
    outcome = page.evaluate(
        """hang => {
        const typeset = window.MathJax?.startup?.promise ?? Promise.resolve();
        const settled = typeset.then(() => {
            document.body.getBoundingClientRect();
            return document.fonts.ready;
        });
        const late = new Promise(resolve => setTimeout(() => resolve("late"), hang));
        return Promise.race([settled.then(() => "done"), late]);
    }""",
        HANG_MS,
    )
    if outcome != "done":
        problems["mathjax"] = (
            "MathJax never finished typesetting, or the page's fonts never"
            f" loaded (hung: {HANG_MS // SECONDS} s)"
        )


# ---------------------------------------------------------------------------------------------
# What the reader sees.


def untypeset_maths(page) -> list[str]:
    found = page.evaluate("""() => {
        // The visible text, less code: a regular expression in a listing
        // may hold \\( legitimately. A listing's comments and docstrings are
        // prose (typeset on the site), so they stay in.
        const prose = n => !n.parentElement.closest("pre, code, script, style")
            || n.parentElement.closest(".c, .c1, .cm, .ch, .cs, .sd");
        const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
        let text = "";
        for (let n = walker.nextNode(); n; n = walker.nextNode()) {
            if (n.parentElement.checkVisibility() && prose(n)) text += n.data;
        }
        const found = [];
        for (const delimiter of ["\\\\(", "\\\\[", "$$"]) {
            const at = text.indexOf(delimiter);
            if (at >= 0) found.push([delimiter, text.slice(Math.max(0, at - 30), at + 50)]);
        }
        return found;
    }""")
    return [
        f"untypeset maths ({delimiter} in the visible text): \"{' '.join(context.split())}\""
        for delimiter, context in found
    ]


def bad_images(page) -> list[str]:
    images = page.evaluate("""() => [...document.images].map(img => ({
        src: img.getAttribute("src") || "", alt: (img.getAttribute("alt") || "").trim(),
        broken: img.complete && img.naturalWidth === 0}))""")
    problems = []
    for image in images:
        src = (
            image["src"] if len(image["src"]) < 80 else image["src"][:60] + "…"
        )
        if not image["alt"]:
            problems.append(f"image without alt text: {src}")
        if image["broken"]:
            problems.append(f"image that failed to load: {src}")
    return problems


def figures_unreadable(page, least_scale: float = 0.5) -> list[str]:
    """Every figure opens at full size when tapped (Sphinx links a figure drawn at a given size to
    its image file: ``html_scaled_image_link``), and none is
    shrunk to less than half its size to fit the column: a figure drawn 1,300 px wide shows its
    10-point labels at 3 px on a phone. (The figures are drawn at most about 700 px wide.) And a
    figure narrowed to fit keeps its shape."""
    figures = page.evaluate("""() => [...document.querySelectorAll("figure img")]
        .filter(img => !img.closest(".mx-view"))
        .map(img => ({src: img.getAttribute("src"), link: img.closest("a")?.getAttribute("href") || null,
                      shown: img.getBoundingClientRect().width, shown_height: img.getBoundingClientRect().height,
                      natural: img.naturalWidth, natural_height: img.naturalHeight}))""")
    problems = []
    for figure in figures:
        if figure["link"] != figure["src"]:
            problems.append(
                f"figure {figure['src']} does not open at full size (link {figure['link']})"
            )
        # The chapters' figures are retina PNGs: twice as many pixels as CSS pixels.
        natural = (
            figure["natural"] / 2
            if figure["src"].endswith(".png")
            else figure["natural"]
        )
        shape, drawn_shape = (
            figure["shown_height"] / figure["shown"],
            figure["natural_height"] / figure["natural"],
        )
        if abs(shape / drawn_shape - 1) > 0.02:
            problems.append(
                f"figure {figure['src']} is distorted: shown {figure['shown']:.0f} × {figure['shown_height']:.0f} px, "
                f"drawn {figure['natural']} × {figure['natural_height']} pixels"
            )
        if natural and figure["shown"] / natural < least_scale:
            problems.append(
                f"figure {figure['src']} is shown at {figure['shown'] / natural:.2f} of its size "
                f"({natural:.0f} px drawn, {figure['shown']:.0f} px shown)"
            )
    return problems


def save_screenshot(page, name: str, full_page: bool = False) -> None:
    """``_build/screenshots/NAME.png``, when screenshots were asked for."""
    if SCREENSHOTS_WANTED:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SCREENSHOTS / f"{name}.png", full_page=full_page)


def screenshot_name(page_path: str) -> str:
    """``book/alibi`` -> ``alibi``, ``book/source/alibi`` -> ``source-alibi``:
    a chapter and the annotated page of its module do not overwrite each
    other's screenshots."""
    return str(Path(page_path).relative_to("book")).replace("/", "-")


def smallest_text_of_figures() -> dict[str, float]:
    """Each chapter figure's image file (``_images/<sha256>.png``, MyST-NB's
    name for it) -> the height of its smallest text in the picture's pixels,
    as ``mixers.plot.use_book_style`` records it in the notebook's output."""
    found = {}
    for notebook in sorted((ROOT / "book").glob("*.ipynb")):
        for cell in json.loads(notebook.read_text())["cells"]:
            for output in cell.get("outputs", []):
                png = output.get("data", {}).get("image/png")
                metadata = output.get("metadata", {}).get("image/png", {})
                if png and SMALLEST_TEXT_KEY in metadata:
                    name = hashlib.sha256(base64.b64decode(png)).hexdigest()
                    found[f"{name}.png"] = metadata[SMALLEST_TEXT_KEY]
    return found


SMALLEST_TEXT = smallest_text_of_figures()


def figure_text_too_small(
    page, page_path: str, width: str, least: float = 9.0
) -> list[str]:
    """On a phone every figure's smallest text is at least 9 CSS pixels tall:
    its size in the picture (from the chapter's output, ``SMALLEST_TEXT``)
    times the scale the picture is shown at. A chapter's figure that does not
    record its text is a failure too."""
    if (
        width != "phone"
        or not page_path.startswith("book/")
        or "/" in page_path[5:]
    ):
        return []
    images = page.evaluate("""() => [...document.querySelectorAll(
            "article figure img, article .cell_output img")]
        .filter(img => !img.closest(".mx-view") && img.naturalWidth)
        .map(img => [img.getAttribute("src").split("/").pop(),
                     img.getBoundingClientRect().width / img.naturalWidth])""")
    problems = []
    for name, scale in images:
        if not name.endswith(".png"):
            continue
        if name not in SMALLEST_TEXT:
            problems.append(f"figure {name} does not record its smallest text")
            continue
        shown = SMALLEST_TEXT[name] * scale
        if shown < least:
            problems.append(
                f"figure {name}: its smallest text is {shown:.1f} CSS px on a phone "
                f"(at least {least:g})"
            )
    return problems


def too_wide(page) -> list[str]:
    """The page must fit the screen's width: wide maths, tables and code scroll in their own box."""
    wide, screen = page.evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    return (
        [
            f"the page is {wide} px wide on a {screen} px screen: it scrolls sideways"
        ]
        if wide > screen
        else []
    )


def code_wraps(page) -> list[str]:
    """No line of code wraps: a wrapped piece would start at the left margin and read as dedented
    Python. Every ``pre`` keeps ``white-space: pre``, and every line of its text (from one newline
    to the next, across the highlighter's spans) lies on one line box: the union of its boxes is
    no taller than one and a half of its tallest box. (A hidden ``pre``, in a collapsed cell, has
    no boxes: only its style is checked.)"""
    found = page.evaluate("""() => {
        const found = [], range = document.createRange();
        const named = text => JSON.stringify(text.trim().slice(0, 60));
        document.querySelectorAll(".bd-article pre").forEach(pre => {
            const whiteSpace = getComputedStyle(pre).whiteSpace;
            if (whiteSpace !== "pre") {
                found.push(`code block ${named(pre.textContent.trim().split("\\n")[0])} has white-space: ${whiteSpace}`);
            }
            if (!pre.getClientRects().length) return;
            const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
            let start = null, last = null, node;
            const measure = (endNode, endOffset) => {
                range.setStart(start[0], start[1]);
                range.setEnd(endNode, endOffset);
                const boxes = [...range.getClientRects()].filter(box => box.width > 0 && box.height > 0);
                if (!boxes.length) return;
                const tallest = Math.max(...boxes.map(box => box.height));
                const top = Math.min(...boxes.map(box => box.top)), bottom = Math.max(...boxes.map(box => box.bottom));
                if (bottom - top > 1.5 * tallest) {
                    found.push(`a line of code wraps onto ${Math.round((bottom - top) / tallest)} lines: ${named(range.toString())}`);
                }
            };
            while ((node = walker.nextNode())) {
                if (!start) start = [node, 0];
                for (let at = node.data.indexOf("\\n"); at >= 0; at = node.data.indexOf("\\n", at + 1)) {
                    measure(node, at);
                    start = [node, at + 1];
                }
                last = node;
            }
            if (start) measure(last, last.length);
        });
        return found;
    }""")
    return found


# What a reader reads as code, by what the message calls it.
CODE_BLOCKS = {
    "code cell": ".bd-article div.cell_input pre",
    "printed output": ".bd-article div.cell_output pre",
    "listing": ".bd-article .literal-block-wrapper pre",
    "annotated page's code": ".annotated-code pre",
}
WIDE_CODE = """(blocks) => {
    // A closed fold's code has no width to measure: opened, then closed.
    const closed = [...document.querySelectorAll(".bd-article details:not([open])")];
    closed.forEach(fold => fold.open = true);
    const wide = [];
    for (const [kind, selector] of Object.entries(blocks)) {
        document.querySelectorAll(selector).forEach(pre => {
            if (pre.scrollWidth > pre.clientWidth + 1) wide.push(
                `a ${kind} scrolls sideways (${pre.scrollWidth} px of code in ` +
                `${pre.clientWidth} px): ${JSON.stringify(pre.textContent.trim().slice(0, 60))}`);
        });
    }
    const cells = document.querySelectorAll(blocks["code cell"]).length;
    closed.forEach(fold => fold.open = false);
    return [wide, cells];
}"""


def code_scrolls(page, page_path: str, width: str) -> list[str]:
    """At desktop width all code fits its column, none scrolls sideways: a
    chapter's code cells (a folded one too) and what they print, its
    listings, an annotated page's code. The 79 columns that ruff keeps the
    package and the chapters to (pyproject.toml,
    tests/test_site_code_width.py) are what make it fit. A chapter whose code
    cells were not found fails too."""
    if width != "desktop":
        return []
    wide, cells = page.evaluate(WIDE_CODE, CODE_BLOCKS)
    if page_path in CHAPTERS and cells <= 5:
        wide.append(f"only {cells} code cells found")
    return wide


def equations_scroll(page, width: str) -> list[str]:
    """At desktop width every displayed equation fits the text column: one that
    scrolls hides its end with no cue (on a phone, scrolling is the answer)."""
    if width != "desktop":
        return []
    return page.evaluate("""() => [...document.querySelectorAll('mjx-container[display="true"]')]
        .filter(maths => maths.scrollWidth > maths.clientWidth + 1)
        .map(maths => `an equation scrolls sideways (${maths.scrollWidth} px in ` +
                      `${maths.clientWidth} px): ${JSON.stringify(maths.textContent.slice(0, 60))}`)""")


# A chapter is read in one sitting: at desktop width at most this tall (issue 40: 16,000 px,
# diagrams included; the chapters were 16,252 to 17,971 px), and the code it shows (code cells
# and listings; code behind a closed fold is not shown) at most this share of its article's
# height. The rest of the source is one click away, annotated. The share stays at 45 %, but
# counts code only: the chapters now show the package lines that compute their maths, unfolded
# (issue 40), and a cell's output (a printed verdict, a table of results) is what the code
# found, not code to read, so it no longer counts as code (it did, as a highlighted block:
# multi-head's 43 % held about 1,000 px of printed output).
CHAPTER_MOST_PX = 16_000
CHAPTER_MOST_CODE_SHARE = 0.45
SHOWN_CODE_HEIGHT = """(root) => [...root.querySelectorAll(
        'div.cell_input, div.literal-block-wrapper, div.highlight')]
    .filter(block => !block.parentElement.closest('div.cell_input, div.literal-block-wrapper')
                     && !block.closest('div.cell_output')
                     && !block.closest('details:not([open])'))
    .reduce((sum, block) => sum + block.getBoundingClientRect().height, 0)"""


def chapter_too_long(page, page_path: str, width: str) -> list[str]:
    if width != "desktop" or page_path not in CHAPTERS:
        return []
    height, article, code = page.evaluate(
        f"""() => {{
            const article = document.querySelector('article.bd-article');
            return [document.documentElement.scrollHeight,
                    article.getBoundingClientRect().height,
                    ({SHOWN_CODE_HEIGHT})(article)];
        }}"""
    )
    print(f"{page_path}: {height:,} px tall at 1280 px")
    problems = []
    if height > CHAPTER_MOST_PX:
        problems.append(
            f"the chapter is {height:,} px tall at 1280 px, more than {CHAPTER_MOST_PX:,}"
        )
    if code > CHAPTER_MOST_CODE_SHARE * article:
        problems.append(
            f"shown code takes {code / article:.0%} of the chapter's height, more than "
            f"{CHAPTER_MOST_CODE_SHARE:.0%}"
        )
    return problems


def annotated_source_incomplete(page, page_path: str, width: str) -> list[str]:
    """An annotated page (``book/source/``) shows every line of its file once:
    each code line, by its anchor ``L<n>``, with the file's own text, in order,
    and every note (comment or docstring) in a note column. At desktop width
    each section's notes sit beside its code (left of it, side by side); on a
    phone, above it. (The file's first note, its introduction, is read
    across the page, above the first code.)"""
    module = ANNOTATED_PAGES.get(page_path)
    if module is None:
        return []
    source = (ROOT / module).read_text(encoding="utf-8")
    sections = parse_source(module, source)
    expected = [
        (number, text)
        for section in sections
        for number, text in section.code
        if text.strip()
    ]
    shown = page.evaluate("""() => [...document.querySelectorAll(".annotated-code pre")]
        .flatMap(pre => pre.textContent.split("\\n").map((text, i) => [text,
            pre.querySelectorAll("span.annotated-line")[i]?.id]))""")
    shown = [(int(id_[1:]), text) for text, id_ in shown if text.strip()]
    problems = []
    if shown != [(n, t) for n, t in expected]:
        missing = [
            n for n, _ in expected if (n, dict(expected)[n]) not in shown
        ]
        extra = [n for n, t in shown if (n, t) not in expected]
        problems.append(
            f"{module}: the page's code is not the module's, line for line "
            f"(missing or changed lines {missing[:5]}, extra {extra[:5]})"
        )
    notes = sum(1 for section in sections if section.notes)
    # A section in a closed fold is not laid out; a section whose note is
    # read across the page (annotated-wide, book/_static/annotated-layout.js)
    # has it above its code, as the introduction does.
    layout = page.evaluate(
        """(width) => [...document.querySelectorAll(".annotated-section")]
        .filter(section => !section.classList.contains("annotated-intro")
                           && !section.classList.contains("annotated-wide")
                           && section.checkVisibility())
        .map(section => [section.querySelector(".annotated-note"), section.querySelector(".annotated-code pre")])
        .filter(([note, code]) => note && code && note.textContent.trim())
        .map(([note, code]) => {
            const n = note.getBoundingClientRect(), c = code.getBoundingClientRect();
            return width === "desktop" ? (n.right <= c.left + 1 && n.top < c.bottom && c.top < n.bottom)
                                       : (n.bottom <= c.top + 1);
        })""",
        width,
    )
    shown_notes = page.evaluate("""() => [...document.querySelectorAll(".annotated-note")]
        .filter(note => note.textContent.trim()).length""")
    if shown_notes != notes:
        problems.append(
            f"{module}: {shown_notes} sections show notes, {notes} have them"
        )
    if not all(layout):
        where = "beside" if width == "desktop" else "above"
        problems.append(
            f"{module}: {layout.count(False)} of {len(layout)} notes are not {where} their code"
        )
    return problems


def tables_scroll_unseen(page, widest_first_column: float = 0.5) -> list[str]:
    """A table either fits its column or shows that it scrolls. The theme puts each table in a
    box that scrolls sideways (``.pst-scrollable-table-container``); where the table is wider,
    the box shows a cue at its right edge (``data-more-right``, which book/_static/table-scroll.js
    sets, and the fade that mixers.css draws from it), and the table's first column, which names
    each row, is sticky: scrolled to the end, the first column is still at the box's left edge,
    opaque, with a shadow beside it, and the cue at the right edge is gone. The first column
    leaves at least half of the box to the columns that scroll. Each box is scrolled back after.
    A table in a closed fold (a hidden cell's output) is checked as a reader who opens the fold
    sees it: the folds are opened, then closed again."""
    return page.evaluate(
        """async widest => {
        const frame = () => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
        const found = [];
        const closed = [...document.querySelectorAll(".bd-article details:not([open])")]
            .filter(fold => fold.querySelector("table"));
        closed.forEach(fold => fold.open = true);
        await frame();
        const tables = [...document.querySelectorAll(".bd-article table")]
            .filter(table => !table.closest(".mx-view") && table.getClientRects().length);
        for (const [i, table] of tables.entries()) {
            const name = `table ${i + 1} of ${tables.length} (${JSON.stringify(table.rows[0]?.textContent.trim().replace(/\\s+/g, " ").slice(0, 40))})`;
            const box = table.closest(".pst-scrollable-table-container");
            if (!box) {
                if (table.scrollWidth > table.parentElement.clientWidth + 1) found.push(`${name} is wider than its column and not in a scrolling box`);
                continue;
            }
            if (table.scrollWidth > table.clientWidth + 1) {  // a table shown as a block, scrolling in itself
                found.push(`${name} scrolls sideways inside itself, not in its box: no cue, no sticky first column`);
                continue;
            }
            const cue = () => box.hasAttribute("data-more-right") && getComputedStyle(box).maskImage !== "none";
            const hidden = box.scrollWidth - box.clientWidth;
            box.scrollLeft = 0;
            await frame();
            if (hidden <= 1) {
                if (cue()) found.push(`${name} fits its column but shows a scroll cue`);
                continue;
            }
            const firsts = [...table.rows].map(row => row.cells[0]).filter(Boolean);
            if (!cue()) found.push(`${name} scrolls sideways (${hidden} px out of view) with no cue at its right edge`);
            if (firsts.some(cell => getComputedStyle(cell).position !== "sticky")) found.push(`${name} scrolls sideways but its first column is not sticky`);
            const share = firsts[0].getBoundingClientRect().width / box.clientWidth;
            if (share > widest) found.push(`${name}: its first column takes ${Math.round(100 * share)}% of the box, leaving too little to scroll through`);
            box.scrollLeft = hidden;
            await frame();
            const left = box.getBoundingClientRect().left + box.clientLeft;
            if (firsts.some(cell => Math.abs(cell.getBoundingClientRect().left - left) > 1)) found.push(`${name}: scrolled to its end, its first column left the box`);
            if (firsts.some(cell => !/^rgb\\(/.test(getComputedStyle(cell).backgroundColor))) found.push(`${name}: its first column is not opaque, so the columns beneath it show through`);
            if (!box.hasAttribute("data-more-left") || getComputedStyle(firsts[0]).boxShadow === "none") found.push(`${name}: scrolled, its first column casts no shadow on the columns beneath it`);
            if (cue()) found.push(`${name}: scrolled to its end, it still shows the cue at its right edge`);
            box.scrollLeft = 0;
            await frame();
        }
        closed.forEach(fold => fold.open = false);
        return found;
    }""",
        widest_first_column,
    )


def too_heavy(page_path: str, limit: int = PAGE_WEIGHT_LIMIT) -> list[str]:
    """A page's own weight: its HTML (with its live views' data) and its images, not the
    scripts and styles every page shares."""
    html_file = SITE / f"{page_path}.html"
    html = html_file.read_text(encoding="utf-8")
    images = {
        (html_file.parent / src).resolve()
        for src in re.findall(r'<img[^>]+src="([^":]+)"', html)
    }
    weight = html_file.stat().st_size + sum(
        image.stat().st_size for image in images if image.is_file()
    )
    print(f"{page_path}: own weight {weight / 2**10:.0f} KiB")
    return (
        [
            f"the page weighs {weight / 2**10:.0f} KiB (HTML and images), over {limit / 2**10:.0f} KiB"
        ]
        if weight > limit
        else []
    )


def first_visit_too_heavy(
    downloaded: int, limit: float = FIRST_VISIT_LIMIT
) -> list[str]:
    """Everything a first visit to the page downloaded (no cache: a new browser context)."""
    print(f"first visit: {downloaded / 2**20:.2f} MiB")
    return (
        [
            f"a first visit downloads {downloaded / 2**20:.2f} MiB, over {limit / 2**20:.1f} MiB"
        ]
        if downloaded > limit
        else []
    )


# ---------------------------------------------------------------------------------------------
# The sidebars: ☰ (the book's pages) and the contents button (this page's sections).


def sidebars_dead(page, width: str, screenshot_stem: str) -> list[str]:
    """On a phone each sidebar is a drawer (a ``<dialog>``): a tap on its button opens it, showing
    its links, and a tap beside it closes it and puts the links back in the page. On a desktop the
    contents are always shown and ☰ hides the book's pages and shows them again. (The themes
    wire only the first button of each class, a hidden copy: book/_static/sidebar-toggles.js.)
    The contents button exists where the page has sections. A screenshot is taken of each drawer
    open and of the hidden sidebar, when asked for (``save_screenshot``)."""
    from playwright.sync_api import TimeoutError

    page.evaluate("window.scrollTo(0, 0)")
    problems = []
    sidebars = {
        "navigation": ("primary-toggle", "#pst-primary-sidebar"),
        "contents": ("secondary-toggle", "#pst-secondary-sidebar"),
    }
    for name, (toggle, sidebar) in sidebars.items():
        if not page.locator(sidebar).count() or (
            width == "desktop" and name == "contents"
        ):
            continue
        buttons = page.locator(f".{toggle}").filter(visible=True)
        if buttons.count() != 1:
            problems.append(
                f"{buttons.count()} {name} buttons (.{toggle}) are visible, not one"
            )
            continue
        try:
            if width == "phone":
                drawer = page.locator(f"{sidebar}-modal")
                buttons.tap()
                drawer.locator("a").filter(visible=True).first.wait_for(
                    timeout=DRAWER_WAIT
                )
                save_screenshot(page, f"{screenshot_stem}-{name}")
                # A tap on the backdrop, in the middle of the wider margin beside the drawer,
                # once the drawer has stopped sliding in (a busy machine draws it late).
                box, screen = settled_box(drawer), page.viewport_size
                left_margin, right_margin = (
                    box["x"],
                    screen["width"] - (box["x"] + box["width"]),
                )
                x = (
                    left_margin / 2
                    if left_margin > right_margin
                    else screen["width"] - right_margin / 2
                )
                page.touchscreen.tap(x, screen["height"] / 2)
                page.wait_for_function(
                    "d => !d.open",
                    arg=drawer.element_handle(),
                    timeout=DRAWER_WAIT,
                )
                # The theme moves the links back after the drawer's closing transition: wait
                # for them, rather than read the page once.
                try:
                    page.locator(f"{sidebar} a").first.wait_for(
                        state="attached", timeout=DRAWER_WAIT
                    )
                except TimeoutError:
                    problems.append(
                        f"the {name} drawer closed, but its links did not come back to the page"
                        f" within {DRAWER_WAIT // SECONDS} s"
                    )
            else:
                # An annotated page starts with the sidebar hidden
                # (mixers.css): ☰ shows it, then hides it again.
                shown = page.locator(sidebar).is_visible()
                buttons.click()
                page.locator(sidebar).wait_for(
                    state="hidden" if shown else "visible",
                    timeout=DRAWER_WAIT,
                )
                save_screenshot(page, f"{screenshot_stem}-{name}")
                buttons.click()
                page.locator(sidebar).wait_for(
                    state="visible" if shown else "hidden",
                    timeout=DRAWER_WAIT,
                )
                if shown:
                    page.locator(f"{sidebar} a").filter(
                        visible=True
                    ).first.wait_for(timeout=DRAWER_WAIT)
        except TimeoutError:
            action = "a tap on" if width == "phone" else "a click on"
            problems.append(
                f"{action} the {name} button (.{toggle}) did not open and close its sidebar"
                f" within {DRAWER_WAIT // SECONDS} s"
            )
    return problems


# How long a drawer may take to open, close or give its links back before it counts as stuck: a
# hang's limit (each wait ends as soon as the state is reached).
DRAWER_WAIT = HANG_MS


def settled_box(locator) -> dict:
    """The element's bounding box once it has stopped moving: when every
    animation and transition of the page has ended, those that repeat
    forever left out (the theme's drawers have none: then at once)."""
    locator.page.evaluate("""() => Promise.allSettled(document.getAnimations()
        .filter(a => a.effect?.getComputedTiming().iterations !== Infinity)
        .map(a => a.finished))""")
    return locator.bounding_box()


# ---------------------------------------------------------------------------------------------
# Interactive views: every control a reader can see must change what the view shows.


def exercise_views(page, page_path: str) -> list[str]:
    """Move every control of every live view once; each must change what its view shows. The
    views' controls must number what CONTROL_COUNTS says, each with a visible name, and the
    views' text must stay legible (9 px at least, at either width)."""
    problems = []
    views = page.locator(LIVE_VIEW)
    if views.count() != page.locator(LIVE_OUTPUT).count():
        problems.append(
            f"{page.locator(LIVE_OUTPUT).count()} live outputs but {views.count()} rendered views"
        )
    controls = page.locator(f"{LIVE_VIEW} {CONTROLS}")
    expected = CONTROL_COUNTS.get(page_path, 0)
    if controls.count() != expected:
        problems.append(
            f"{controls.count()} controls in the live views, not {expected}"
        )
    smallest = page.evaluate("""() => Math.min(Infinity, ...[...document.querySelectorAll(
        '.mx-view svg text')].filter(t => t.textContent.trim())
        .map(t => t.getBoundingClientRect().height))""")
    if smallest < 9:
        problems.append(
            f"a live view's text is {smallest:.1f} px tall, under 9 px"
        )
    for v in range(views.count()):
        view = views.nth(v)
        where = f"view {v + 1} of {views.count()}"
        problems += [f"{where}: {p}" for p in drawn_badly(view)]
        mine = view.locator(CONTROLS)
        for c in range(mine.count()):
            problem = exercise(view, mine.nth(c))
            if problem:
                problems.append(f"{where}: {problem}")
    return problems


def exercise(view, control) -> str | None:
    """Move one control as a reader would; say what went wrong, if anything."""
    name_node = control.locator(":scope > label, :scope > legend").first
    name = name_node.inner_text().strip() if name_node.count() else ""
    if not name:
        return "a control without a visible name"
    kind = control.evaluate(
        "el => el.querySelector('input[type=range]') ? 'slider'"
        " : el.querySelector('select') ? 'list' : 'choice'"
    )
    drawing = view.locator(".mx-figures")
    before = drawing.inner_html()
    old = KINDS[kind][0](control)
    KINDS[kind][1](control)
    # Each waits for what it checks: the control's value, then the view's redraw.
    if not eventually(lambda: KINDS[kind][0](control) != old, VIEW_WAIT):
        return f"{kind} {name!r} did not move (its value stayed {old!r})"
    new = KINDS[kind][0](control)
    if not eventually(lambda: drawing.inner_html() != before, VIEW_WAIT):
        return f"moving {kind} {name!r} from {old!r} to {new!r} did not change the view"
    print(f"moved {kind} {name!r} from {old!r} to {new!r}: the view changed")
    drawn = drawn_badly(view)
    if drawn:
        return f"after moving {kind} {name!r} to {new!r}: {'; '.join(drawn)}"
    return None


# A JavaScript function: the points of a view's SVG path, drawn as views.js
# draws every line (``M`` then ``L`` commands, "x,y" each), as [x, y] numbers
# in the picture's units. The page checks read a picture's lines through it.
PATH_POINTS = r"""(path) => [...(path.getAttribute("d") ?? "").matchAll(
    /[ML](-?[\d.]+),(-?[\d.]+)/g)].map((m) => [+m[1], +m[2]])"""


def drawn_badly(view) -> list[str]:
    """What a view's pictures hide from their reader: text that runs past
    its picture's edge, which cuts it (a long title on a phone did), and a
    legend's box over the points of a drawn line (a legend of six lines
    hid a quarter of the loss curves' points on a phone). A rotated label's
    em box may reach a pixel past the edge while its glyphs stay inside:
    1.5 px is allowed."""
    return view.evaluate(
        """(view) => {
        const pointsOf = """
        + PATH_POINTS
        + """;
        const found = [];
        for (const picture of view.querySelectorAll(".mx-figures svg")) {
            const edge = picture.getBoundingClientRect();
            for (const text of picture.querySelectorAll("text")) {
                const box = text.getBoundingClientRect();
                const past = Math.max(edge.left - box.left,
                    box.right - edge.right, edge.top - box.top,
                    box.bottom - edge.bottom);
                if (text.textContent.trim() && past > 1.5)
                    found.push(`"${text.textContent}" runs ${past.toFixed(0)}`
                        + " px past its picture's edge");
            }
            for (const legend of picture.querySelectorAll(".mx-legend-box")) {
                const [x0, y0, w, h] = ["x", "y", "width", "height"].map(
                    (k) => Number(legend.getAttribute(k)));
                let hidden = 0;
                for (const line of picture.querySelectorAll("path[stroke]"))
                    for (const [x, y] of pointsOf(line))
                        if (x > x0 && x < x0 + w && y > y0 && y < y0 + h)
                            hidden += 1;
                if (hidden) found.push(`a legend hides ${hidden} points of`
                    + " the lines drawn");
            }
        }
        return found;
    }"""
    )


# Seconds a view may take to show a moved control's value and redraw before it counts as stuck
# (a hang's limit: each wait ends as soon as the view has changed).
VIEW_WAIT = HANG_MS // SECONDS


def eventually(condition, seconds=5) -> bool:
    """Whether ``condition()`` comes true within ``seconds``, asked every
    50 ms (a view redraws within a frame or two of a move)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# How to read and move each kind of control. A slider moves by the keyboard (an arrow key; back
# at its end), a choice by a tap or click on another option's label, a list by choosing another.


def slider_value(control):
    return control.locator("output").inner_text().strip()


def slider_move(control):
    handle = control.locator("input[type=range]")
    at_end = float(handle.input_value()) >= float(handle.get_attribute("max"))
    handle.focus()
    handle.press("ArrowLeft" if at_end else "ArrowRight")


def choice_value(control):
    return control.locator("input:checked").get_attribute("value")


def choice_move(control):
    control.locator("input:not(:checked) + label").first.click()


def list_value(control):
    return control.locator("select").input_value()


def list_move(control):
    select = control.locator("select")
    options = select.locator("option").evaluate_all(
        "options => options.map(o => o.value)"
    )
    select.select_option(next(o for o in options if o != select.input_value()))


KINDS = {
    "slider": (slider_value, slider_move),
    "choice": (choice_value, choice_move),
    "list": (list_value, list_move),
}


def test_without_scripts_each_live_view_shows_its_static_picture(
    site_url, browser
):
    """Where scripts do not run, every live view's output shows its fallback picture, with alt
    text, in its place."""
    context = browser.new_context(
        java_script_enabled=False, viewport=WIDTHS["phone"]
    )
    problems = []
    try:
        page = context.new_page()
        for page_path in CONTROL_COUNTS:
            page.goto(f"{site_url}/{page_path}.html", wait_until="load")
            outputs = page.locator(LIVE_OUTPUT)
            pictures = page.locator(f"{LIVE_OUTPUT} img")
            if outputs.count() == 0 or pictures.count() != outputs.count():
                problems.append(
                    f"{page_path}: {outputs.count()} live views, {pictures.count()} static pictures"
                )
            for i in range(pictures.count()):
                picture = pictures.nth(i)
                loaded = eventually(
                    lambda: picture.evaluate(
                        "img => img.complete && img.naturalWidth > 0"
                    )
                )
                if not (
                    picture.is_visible()
                    and loaded
                    and picture.get_attribute("alt")
                ):
                    problems.append(
                        f"{page_path}: static picture {i + 1} is not shown with its alt text"
                    )
    finally:
        context.close()
    assert not problems, "\n".join(problems)


def test_a_request_to_another_host_fails_and_is_reported(site_url, browser):
    """What a page may not do, done on purpose: a script from a named host, a
    script from a host at a bare IP address (a server of the test's own, at
    127.0.0.2, which Linux routes to this machine) and an image are
    reported, and none reaches its host (see CHROMIUM_ARGS): the server at
    127.0.0.2 hears nothing."""
    heard = []

    class Counting(QuietHandler):
        def do_GET(self):
            heard.append(self.path)
            self.send_response(200)
            self.end_headers()

    problems = {}
    with serving(Counting, "127.0.0.2") as other:
        at_an_address = f"http://127.0.0.2:{other.server_port}/b.js"
        context = browser.new_context()
        context.set_default_timeout(HANG_MS)
        try:
            page = context.new_page()
            watch_network_and_console(context, page, site_url, problems)
            page.goto(f"{site_url}/book/intro.html", wait_until="load")
            outcomes = [
                page.evaluate(
                    """url => fetch(url).then(() => "reached", () => "failed")""",
                    url,
                )
                for url in ("https://cdn.example.org/a.js", at_an_address)
            ]
            page.evaluate("""() => new Promise(done => {
                const image = new Image();
                image.onload = image.onerror = done;
                image.src = "http://images.example.com/a.png";
            })""")
        finally:
            context.close()
    assert outcomes == ["failed", "failed"] and heard == [], heard
    reported = [m for m in problems.values() if "another host" in m]
    assert reported == [
        "request to another host: https://cdn.example.org/a.js",
        f"request to another host: {at_an_address}",
        "request to another host: http://images.example.com/a.png",
    ], problems


def test_a_request_started_after_the_load_is_awaited_and_checked(
    site_url, browser
):
    """The page test's last wait, given two requests that a page starts
    once it has loaded, as a control may: one the server answers with a 404
    half a second later, which is waited for and reported, and one it never
    answers, which is reported at the hang's limit (here 2 s). Playwright's
    "networkidle", waited for again, returns at once: the page would close
    with both requests open, unchecked. (The page is the built site's,
    served by a server of the test's own.)"""
    del site_url  # asked for its check that the site is built
    never = threading.Event()  # set at the end: the server's thread returns

    class Late(QuietHandler):
        def do_GET(self):
            if self.path == "/late":
                time.sleep(0.5)
                self.send_error(404)
            elif self.path == "/never":
                never.wait()
            else:
                super().do_GET()

    problems = {}
    with serving_the_site(Late) as url:
        try:
            with opened_page(browser, url, "book/intro", problems) as (
                page,
                traffic,
            ):
                page.evaluate("() => { fetch('/late'); fetch('/never'); }")
                unended = requests_unfinished(page, traffic, seconds=2)
        finally:
            never.set()
    assert f"HTTP 404: {url}/late" in problems.values(), problems
    assert unended == [f"a request never ended (2 s): {url}/never"]


def test_the_checks_start_once_the_fonts_the_page_asks_for_have_loaded(
    site_url, browser
):
    """wait_for_views_and_maths, given a paragraph added after the load in a
    font that the server sends a second late: the wait ends with the font
    loaded, not while it is on its way (text laid out again when it comes
    would move what the checks measure)."""
    del site_url  # asked for its check that the site is built
    # One of the site's own fonts, under a URL of its own (the server reads
    # no query): the server waits a second before it sends it.
    font = next(SITE.glob("_static/**/*.woff2")).relative_to(SITE)
    late_font = f"/{font.as_posix()}?late"

    class Slow(QuietHandler):
        def do_GET(self):
            if self.path == late_font:
                time.sleep(1)
            super().do_GET()

    problems = {}
    with serving_the_site(Slow) as url:
        with opened_page(browser, url, "book/intro", problems) as (page, _):
            page.evaluate(
                """lateFont => {
                const style = document.createElement("style");
                style.textContent = "@font-face { font-family: Slow;"
                    + ` src: url(${lateFont}) format('woff2'); }`
                    + " #slow { font-family: Slow; }";
                document.head.append(style);
                const late = document.createElement("p");
                late.id = "slow";
                late.textContent = "A paragraph in a font that comes late.";
                document.querySelector("main").append(late);
            }""",
                late_font,
            )
            wait_for_views_and_maths(page, problems)
            status = page.evaluate(
                "() => [...document.fonts].find(f => f.family === 'Slow')"
                ".status"
            )
    assert status == "loaded", status
    assert not problems, problems


def test_a_box_is_read_once_its_transition_has_ended(site_url, browser):
    """settled_box, given a square that slides 200 px in 0.6 s beside a
    spinner that turns forever: the box is where the square ends."""
    context = browser.new_context()
    context.set_default_timeout(HANG_MS)
    try:
        page = context.new_page()
        page.goto(f"{site_url}/book/intro.html", wait_until="load")
        page.evaluate("""() => {
            const square = document.createElement("div");
            square.id = "square";
            square.style.cssText = "position: fixed; left: 0; top: 0;"
                + " width: 50px; height: 50px; background: red;"
                + " transition: transform 0.6s linear";
            const spinner = document.createElement("div");
            spinner.animate([{rotate: "0deg"}, {rotate: "360deg"}],
                {duration: 1000, iterations: Infinity});
            document.body.append(square, spinner);
            square.getBoundingClientRect();
            square.style.transform = "translateX(200px)";
        }""")
        box = settled_box(page.locator("#square"))
    finally:
        context.close()
    assert box["x"] == 200, box


def test_an_icon_that_shows_nothing_is_reported(site_url, browser):
    """The header's icon check, given icons drawn in no colour on purpose:
    the full-screen button's, in the header, and the file icon of the
    download menu, which the check opens. Each is reported, and no other.
    Before that, the check's picture of the header's icons shows each icon
    as a picture of the whole screen does, pixel for pixel."""
    import site_chrome
    from PIL import ImageChops

    context = browser.new_context(viewport=WIDTHS["desktop"])
    context.set_default_timeout(HANG_MS)
    try:
        page = context.new_page()
        page.goto(f"{site_url}/book/intro.html", wait_until="load")
        icons, picture = site_chrome.icons_on_a_still_screen(
            page, site_chrome.HEADER
        )
        screen = site_chrome.grey(page.screenshot())
        page.add_style_tag(
            content=".fa-expand::before, .fa-file::before"
            " { background-color: transparent !important; }"
        )
        problems = site_chrome.header_icons_blank(page, "blank-icons")
    finally:
        context.close()
    assert len(icons) >= 6
    for icon in icons:
        shown = screen.crop(icon["box"])
        assert not ImageChops.difference(
            picture.part(icon["box"]), shown
        ).getbbox(), icon
    assert sorted(problems) == [
        "the icon 'fas fa-expand' shows nothing",
        "the icon 'fas fa-file' shows nothing",
    ], problems


def test_a_picture_of_part_of_the_screen_is_read_where_it_lies():
    """``site_chrome.Picture``: a box of the screen is read at its place in
    the picture, and a box the picture does not wholly hold is not read."""
    from PIL import Image
    from site_chrome import Picture

    image = Image.new("L", (100, 50))
    image.paste(255, (30, 20, 40, 30))  # a white square, in the picture
    picture = Picture(image, left=200, top=100)  # where it lies on screen
    assert picture.part((230, 120, 240, 130)).getextrema() == (255, 255)
    assert picture.part((200, 100, 210, 110)).getextrema() == (0, 0)
    assert picture.part((199, 120, 210, 130)) is None
    assert picture.part((290, 140, 301, 150)) is None
    assert picture.part((250, 140, 260, 151)) is None
    assert Picture(None).part((0, 0, 1, 1)) is None
