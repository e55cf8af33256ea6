"""The built site in a real browser (headless Chromium, driven by Playwright).

Every page of the table of contents, at a desktop and a phone width, must load nothing from
another host, fail no request, log no console error or uncaught exception, show no untypeset
maths, and have every image loaded and described by alt text; and every control of an
interactive view (the ipywidgets that the widget HTML manager renders) must change what the
view shows. A full-page screenshot of each page at each width is saved beside the site, in
``_build/screenshots/PAGE-WIDTH.png``.

The tests need the built site (``jupyter-book build . --warningiserror``; ``MIXERS_SITE_DIR``
points them at another built copy) and Chromium (``apt-get install -y chromium``). Without
either they skip, unless ``MIXERS_REQUIRE_BROWSER=1`` (as in CI), where they fail.
"""

import functools
import http.server
import os
import re
import shutil
import threading
import time
from pathlib import Path

import pytest

from test_book import ROOT, toc_files

SITE = Path(os.environ.get("MIXERS_SITE_DIR") or ROOT / "_build" / "html").resolve()
SCREENSHOTS = SITE.parent / "screenshots"
WIDTHS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# Where a notebook output holds an ipywidget, MyST-NB writes this script tag, and the widget
# HTML manager renders the view beside it: .widget-subarea > the outermost widget.
WIDGET_VIEW = 'script[type="application/vnd.jupyter.widget-view+json"]'
TOP_LEVEL_VIEW = f"*:has(> {WIDGET_VIEW}) > .widget-subarea > .jupyter-widgets"
CONTROLS = ".widget-toggle-buttons, .widget-slider, .widget-dropdown"
SECONDS = 1000  # Playwright counts milliseconds


def unavailable(reason: str):
    if os.environ.get("MIXERS_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason} (and MIXERS_REQUIRE_BROWSER=1)", pytrace=False)
    pytest.skip(reason)


# ---------------------------------------------------------------------------------------------
# One local server and one browser for the module.


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site_url():
    if not (SITE / "index.html").is_file():
        unavailable(f"no built site: {SITE / 'index.html'} is missing; build it with "
                    "`jupyter-book build . --warningiserror` (or set MIXERS_SITE_DIR to a built copy)")
    handler = functools.partial(QuietHandler, directory=SITE)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    # Debian's chromium; Ubuntu's chromium-browser and Google Chrome (on GitHub's runners) also do.
    chromium = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    if chromium is None:
        unavailable("no Chromium: neither /usr/bin/chromium nor `chromium` on PATH; "
                    "install it with `apt-get install -y chromium` (Debian)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("Playwright's Python package is missing: `pip install -r requirements.txt`")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


# ---------------------------------------------------------------------------------------------
# The test.


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("page_path", toc_files(), ids=lambda path: Path(path).name)
def test_the_page_works_in_a_browser(site_url, browser, page_path, width):
    problems = {}  # one message per failing URL or per distinct error, in the order seen
    context = browser.new_context(viewport=WIDTHS[width])
    context.set_default_timeout(30 * SECONDS)
    try:
        page = context.new_page()
        watch_network_and_console(context, page, site_url, problems)
        page.goto(f"{site_url}/{page_path}.html", wait_until="load")
        page.wait_for_load_state("networkidle")
        wait_for_views_and_maths(page, problems)

        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SCREENSHOTS / f"{Path(page_path).name}-{width}.png", full_page=True)

        for message in (untypeset_maths(page) + bad_images(page) + figures_unreadable(page) + too_wide(page)
                        + too_heavy(page_path) + exercise_views(page)):
            problems.setdefault(message, message)
        page.wait_for_load_state("networkidle")  # what the controls asked for is checked too
    finally:
        context.close()
    if problems:
        pytest.fail(f"{page_path}.html at {width} width:\n  " + "\n  ".join(problems.values()), pytrace=False)


# ---------------------------------------------------------------------------------------------
# Loading a page: only from the local server, without errors, then waiting for it to settle.


def watch_network_and_console(context, page, site_url, problems):
    def local(url):
        return url.startswith(site_url + "/")

    def keep_local(route):
        if local(route.request.url):
            route.continue_()
        else:
            problems.setdefault(route.request.url, f"request to another host: {route.request.url}")
            route.abort()

    def on_response(response):
        if local(response.url) and response.status >= 400:
            problems.setdefault(response.url, f"HTTP {response.status}: {response.url}")

    def on_request_failed(request):
        if local(request.url):  # the other hosts' requests were aborted above, and reported
            problems.setdefault(request.url, f"request failed ({request.failure}): {request.url}")

    def on_console(message):
        if message.type == "error":
            where = message.location.get("url", "")
            key = where if message.text.startswith("Failed to load resource") else message.text
            line = message.location.get("lineNumber")
            problems.setdefault(key, f"console error: {message.text} (at {where}:{line})")

    def on_page_error(error):
        frames = [line.strip() for line in (error.stack or "").splitlines()[1:2]]
        problems.setdefault(error.message, f"uncaught exception: {error.message} {' '.join(frames)}".strip())

    context.route("**/*", keep_local)
    page.on("response", on_response)
    page.on("requestfailed", on_request_failed)
    page.on("console", on_console)
    page.on("pageerror", on_page_error)


def wait_for_views_and_maths(page, problems):
    from playwright.sync_api import TimeoutError

    # The widget manager renders each view asynchronously, after the load event.
    try:
        page.wait_for_function(
            "selector => [...document.querySelectorAll(selector)]"
            ".every(script => script.parentElement.querySelector('.jupyter-widgets'))",
            arg=WIDGET_VIEW, timeout=30 * SECONDS)
    except TimeoutError:
        problems["views"] = "an interactive view was never rendered (no .jupyter-widgets after 30 s)"
    page.wait_for_load_state("networkidle")
    outcome = page.evaluate("""async () => {
        if (!window.MathJax?.startup?.promise) return "done";
        const late = new Promise(resolve => setTimeout(() => resolve("late"), 30000));
        return Promise.race([window.MathJax.startup.promise.then(() => "done"), late]);
    }""")
    if outcome != "done":
        problems["mathjax"] = "MathJax did not finish typesetting within 30 s"


# ---------------------------------------------------------------------------------------------
# What the reader sees.


def untypeset_maths(page) -> list[str]:
    found = page.evaluate("""() => {
        const text = document.body.innerText, found = [];
        for (const delimiter of ["\\\\(", "\\\\[", "$$"]) {
            const at = text.indexOf(delimiter);
            if (at >= 0) found.push([delimiter, text.slice(Math.max(0, at - 30), at + 50)]);
        }
        return found;
    }""")
    return [f"untypeset maths ({delimiter} in the visible text): \"{' '.join(context.split())}\""
            for delimiter, context in found]


def bad_images(page) -> list[str]:
    images = page.evaluate("""() => [...document.images].map(img => ({
        src: img.getAttribute("src") || "", alt: (img.getAttribute("alt") || "").trim(),
        broken: img.complete && img.naturalWidth === 0}))""")
    problems = []
    for image in images:
        src = image["src"] if len(image["src"]) < 80 else image["src"][:60] + "…"
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
        .filter(img => !img.closest(".jupyter-widgets"))
        .map(img => ({src: img.getAttribute("src"), link: img.closest("a")?.getAttribute("href") || null,
                      shown: img.getBoundingClientRect().width, shown_height: img.getBoundingClientRect().height,
                      natural: img.naturalWidth, natural_height: img.naturalHeight}))""")
    problems = []
    for figure in figures:
        if figure["link"] != figure["src"]:
            problems.append(f"figure {figure['src']} does not open at full size (link {figure['link']})")
        # The chapters' figures are retina PNGs: twice as many pixels as CSS pixels.
        natural = figure["natural"] / 2 if figure["src"].endswith(".png") else figure["natural"]
        shape, drawn_shape = figure["shown_height"] / figure["shown"], figure["natural_height"] / figure["natural"]
        if abs(shape / drawn_shape - 1) > 0.02:
            problems.append(f"figure {figure['src']} is distorted: shown {figure['shown']:.0f} × {figure['shown_height']:.0f} px, "
                            f"drawn {figure['natural']} × {figure['natural_height']} pixels")
        if natural and figure["shown"] / natural < least_scale:
            problems.append(f"figure {figure['src']} is shown at {figure['shown'] / natural:.2f} of its size "
                            f"({natural:.0f} px drawn, {figure['shown']:.0f} px shown)")
    return problems


def too_wide(page) -> list[str]:
    """The page must fit the screen's width: wide maths, tables and code scroll in their own box."""
    wide, screen = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    return [f"the page is {wide} px wide on a {screen} px screen: it scrolls sideways"] if wide > screen else []


def too_heavy(page_path: str, limit: int = 3 * 2**20) -> list[str]:
    """A page's own weight: its HTML (with the saved widget state) and its images, not the
    scripts and styles every page shares."""
    html_file = SITE / f"{page_path}.html"
    html = html_file.read_text(encoding="utf-8")
    images = {(html_file.parent / src).resolve() for src in re.findall(r'<img[^>]+src="([^":]+)"', html)}
    weight = html_file.stat().st_size + sum(image.stat().st_size for image in images if image.is_file())
    return [f"the page weighs {weight / 2**20:.2f} MiB (HTML and images), over {limit / 2**20:.0f} MiB"] if weight > limit else []


# ---------------------------------------------------------------------------------------------
# Interactive views: every control a reader can see must change what the view shows.


def exercise_views(page) -> list[str]:
    """Move each visible control of each view once, last first (a view's inner controls come
    after the outer ones that choose them), until every control that became visible has moved."""
    problems = []
    views = page.locator(TOP_LEVEL_VIEW)
    if views.count() != page.locator(WIDGET_VIEW).count():
        problems.append(f"{page.locator(WIDGET_VIEW).count()} widget outputs but {views.count()} rendered views")
    for v in range(views.count()):
        view = views.nth(v)
        for moved in range(1, 51):
            untested = view.locator(f":is({CONTROLS}):not([data-site-test])").filter(visible=True)
            if untested.count() == 0:
                break
            untested.last.evaluate("(control, id) => control.dataset.siteTest = id", str(moved))
            control = view.locator(f'[data-site-test="{moved}"]')
            problem = exercise(view, control)
            if problem:
                problems.append(f"view {v + 1} of {views.count()}: {problem}")
        else:
            problems.append(f"view {v + 1} of {views.count()}: gave up after 50 controls")
    return problems


def exercise(view, control) -> str | None:
    """Move one control; say what went wrong, if anything."""
    kind = next(k for k in KINDS if control.evaluate("(el, k) => el.classList.contains('widget-' + k)", k))
    value, move = KINDS[kind]
    name = f"{kind} {control.locator('.widget-label').first.inner_text().strip() or '(no label)'!r}"
    # The control itself is masked: the rest of the view (what it is linked to) must change.
    # Nor may a focus ring or a hover left by the previous move count as a change.
    unfocus_and_unhover(view.page)
    old, before = value(control), view.screenshot(mask=[control], animations="disabled")
    move(control)
    if not eventually(lambda: value(control) != old):
        return f"{name} did not move (its value stayed {old!r})"
    unfocus_and_unhover(view.page)
    if not eventually(lambda: view.screenshot(mask=[control], animations="disabled") != before):
        return f"moving {name} from {old!r} to {value(control)!r} did not change the view"
    print(f"moved {name} from {old!r} to {value(control)!r}: the view changed")
    return None


def eventually(condition, seconds=5) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def unfocus_and_unhover(page):
    page.evaluate("document.activeElement?.blur()")
    page.mouse.move(0, 0)


# How to read and move each kind of control, as the widget HTML manager (ipywidgets 8) draws it.


def toggle_buttons_value(control):
    active = control.locator("button.mod-active")
    return active.first.inner_text().strip() if active.count() else None


def toggle_buttons_move(control):
    control.locator("button:not(.mod-active)").filter(visible=True).first.click()


def slider_value(control):  # a selection slider's readout is its option's label
    return control.locator(".widget-readout").first.inner_text().strip()


def slider_move(control):
    # The slider is a noUiSlider, whose handle takes the arrow keys; at the end, it steps back.
    handle = control.locator(".noUi-handle").first
    at_end = float(handle.get_attribute("aria-valuenow")) >= float(handle.get_attribute("aria-valuemax"))
    handle.focus()
    handle.press("ArrowLeft" if at_end else "ArrowRight")


def dropdown_value(control):
    return control.locator("select").input_value()


def dropdown_move(control):
    select = control.locator("select")
    options = select.locator("option").evaluate_all("options => options.map(o => o.value)")
    select.select_option(next((o for o in options if o != select.input_value()), None))


KINDS = {"toggle-buttons": (toggle_buttons_value, toggle_buttons_move),
         "slider": (slider_value, slider_move),
         "dropdown": (dropdown_value, dropdown_move)}
