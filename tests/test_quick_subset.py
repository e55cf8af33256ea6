"""The quick subset, ``pytest -m "not slow"`` (tests/slow.py): every test
it names as slow still exists (a renamed test would otherwise slip into the
quick subset unseen), and what it marks is what it says."""

import ast
from pathlib import Path

import pytest
from slow import SLOW_FILES, SLOW_TESTS, is_slow

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("nodeid", sorted(SLOW_TESTS | SLOW_FILES))
def test_every_test_named_slow_exists(nodeid):
    path, _, name = nodeid.partition("::")
    name = name.split("[")[0]
    assert (ROOT / path).is_file(), nodeid
    if name:
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        names = {
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef)
        }
        assert name in names, nodeid


class Item:
    def __init__(self, nodeid, fixturenames=()):
        self.nodeid, self.fixturenames = nodeid, fixturenames


def test_what_is_slow():
    assert is_slow(Item("book/gmlp.ipynb::Cell 3"))
    assert is_slow(Item("tests/test_x.py::test_page[a-phone]", ["browser"]))
    assert is_slow(Item(f"{sorted(SLOW_TESTS)[0]}[1-2]"))
    assert not is_slow(
        Item("tests/test_attention.py::test_x[1]", ["tmp_path"])
    )
