"""The chapters' code fits the site's code column (issue 32): written at 79
columns, as ruff formats it (pyproject.toml), and shown at 1280 px without a
block that scrolls sideways.

Here the notebooks are read (no browser). That no code block scrolls
sideways on the built site is checked in the page load of
tests/test_site.py (``code_scrolls``), at desktop width: every code cell's
input (a collapsed one opened to be measured), every printed output, every
listing and every annotated page's code.
"""

import json

import pytest
from test_book import NOTEBOOKS

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
