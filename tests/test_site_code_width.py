"""The chapters' code fits the site's code column (issue 32): written at 79
columns, as ruff formats it (pyproject.toml), and shown at 1280 px without a
block that scrolls sideways.

The first test reads the notebooks (no browser). The second opens each
chapter of the built site in headless Chromium (the server and browser of
tests/test_site.py, which says how to build the site and when the browser
tests skip), opens every collapsed "Show code cell source", and measures
every code cell's input, every listing and every printed output.
"""

import json
from pathlib import Path

import pytest
from test_book import NOTEBOOKS, ROOT
from test_site import HANG_MS, SECONDS, WIDTHS, browser, site_url  # noqa: F401

COLUMNS = 79  # pyproject.toml's line-length


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_no_line_of_a_chapter_code_cell_is_longer_than_79_columns(notebook):
    long = [
        f"cell {index}: {line!r}"
        for index, cell in enumerate(json.loads(notebook.read_text())["cells"])
        if cell["cell_type"] == "code"
        for line in "".join(cell["source"]).splitlines()
        if len(line) > COLUMNS
    ]
    assert not long, (
        f"{len(long)} lines over {COLUMNS} columns:\n" + "\n".join(long)
    )


WIDE_BLOCKS = """(selectors) => {
    // every collapsed cell opened, so that its code is laid out and measured
    document.querySelectorAll(".bd-article details").forEach(d => d.open = true);
    const found = [];
    for (const [kind, selector] of Object.entries(selectors)) {
        document.querySelectorAll(selector).forEach(pre => {
            if (pre.scrollWidth > pre.clientWidth + 1) found.push({
                kind, text: pre.textContent,
                wide: pre.scrollWidth, column: pre.clientWidth});
        });
    }
    return found;
}"""
SELECTORS = {
    "code cell": ".bd-article div.cell_input pre",
    "listing": ".bd-article .literal-block-wrapper pre",
    "output": ".bd-article div.cell_output pre",
}


@pytest.mark.parametrize(
    "notebook", NOTEBOOKS, ids=lambda path: Path(path).stem
)
def test_no_code_block_of_a_chapter_scrolls_sideways_at_desktop_width(
    site_url,  # noqa: F811
    browser,  # noqa: F811
    notebook,
):
    page_path = notebook.relative_to(ROOT).with_suffix("").as_posix()
    context = browser.new_context(viewport=WIDTHS["desktop"])
    context.set_default_timeout(HANG_MS)
    try:
        page = context.new_page()
        page.goto(f"{site_url}/{page_path}.html", wait_until="load")
        counted = page.evaluate(
            "(selector) => document.querySelectorAll(selector).length",
            SELECTORS["code cell"],
        )
        wide = page.evaluate(WIDE_BLOCKS, SELECTORS)
    finally:
        context.close()
    assert counted > 5, f"{page_path}: only {counted} code cells found"
    assert not wide, f"{page_path}.html at 1280 px:\n" + "\n".join(
        f"a {b['kind']} scrolls sideways ({b['wide']} px in {b['column']}):"
        f" {b['text'].strip()[:70]!r}"
        for b in wide
    )
