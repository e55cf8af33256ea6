"""How the root conftest.py shares the tests out among pytest-xdist's
workers: the built site's pages go one after another on one worker of every
two, first, when the run has other tests to fill the core a page leaves
idle; otherwise they are spread over every worker."""

from pathlib import Path

import pytest
from helpers import load_module

ROOT = Path(__file__).resolve().parents[1]


root = load_module(ROOT / "conftest.py", "root_conftest")


class Item:
    """What the hook reads of a collected test: its id and its marks."""

    def __init__(self, nodeid: str):
        self.nodeid = nodeid
        self.groups = []

    def add_marker(self, mark):
        assert mark.name == "xdist_group"
        self.groups.append(mark.args[0])


def pages(n: int) -> list[Item]:
    return [Item(f"{root.SITE_PAGES}[page{i}-desktop]") for i in range(n)]


def others(n: int) -> list[Item]:
    return [Item(f"tests/test_plot.py::test_{i}") for i in range(n)]


def share_out(items, workers: int, monkeypatch) -> list[Item]:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(workers))
    root.pytest_collection_modifyitems(None, items)
    return items


@pytest.mark.parametrize("workers, parts", [(2, 1), (3, 1), (4, 2)])
def test_in_a_whole_run_the_pages_go_first_one_group_for_two_workers(
    workers, parts, monkeypatch
):
    items = share_out(others(30) + pages(10), workers, monkeypatch)
    assert [item.nodeid for item in items[:10]] == [
        item.nodeid for item in pages(10)
    ]
    groups = [item.groups for item in items[:10]]
    assert all(len(marks) == 1 for marks in groups), groups
    assert len({marks[0] for marks in groups}) == parts, groups
    if parts == 2:  # the parts take turns: each holds pages of every kind
        assert groups[0] != groups[1], groups
    assert all(item.groups == ["tests/test_plot.py"] for item in items[10:])


def test_the_pages_alone_are_spread_over_every_worker(monkeypatch):
    items = share_out(others(3) + pages(10), 2, monkeypatch)
    assert all(item.groups == [] for item in items[:10]), items
