"""The book's own conventions, checked: every chapter follows the same pattern."""

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())


def toc_files() -> list[str]:
    files = [TOC["root"]]

    def walk(entries):
        for entry in entries:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections", []))

    for part in TOC.get("parts", [{"chapters": TOC.get("chapters", [])}]):
        walk(part["chapters"])
    return files


NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))


def test_every_toc_entry_exists_and_every_notebook_is_in_the_toc():
    listed = set(toc_files())
    for name in listed:
        assert any((ROOT / f"{name}{ext}").is_file() for ext in (".md", ".ipynb")), name
    for notebook in NOTEBOOKS:
        assert str(notebook.relative_to(ROOT).with_suffix("")) in listed, notebook


def test_execution_is_off_so_the_site_shows_the_committed_outputs():
    assert CONFIG["execute"]["execute_notebooks"] == "off"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_first_cell_installs_on_colab_only_from_the_configured_repository(notebook):
    first = json.loads(notebook.read_text())["cells"][0]
    source = "".join(first["source"])
    assert first["cell_type"] == "code"
    assert 'if "google.colab" in sys.modules:' in source
    assert f"git clone --depth 1 {CONFIG['repository']['url']} " in source


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_every_ignored_output_says_why_on_its_marker_line(notebook):
    for cell in json.loads(notebook.read_text())["cells"]:
        for line in "".join(cell["source"]).splitlines():
            if "NBVAL_IGNORE_OUTPUT" in line:
                assert re.fullmatch(r"# NBVAL_IGNORE_OUTPUT: \S.{10,}", line.strip()), line


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_are_committed_with_outputs_and_no_errors(notebook):
    cells = [c for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code"]
    assert all(c.get("execution_count") for c in cells[1:]), "every code cell after the first ran"
    for cell in cells:
        assert not any(out.get("output_type") == "error" for out in cell.get("outputs", []))


def test_nbval_reads_the_reasoned_ignore_marker():
    import importlib.util

    import nbval.plugin

    spec = importlib.util.spec_from_file_location("book_conftest", ROOT / "book" / "conftest.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    markers = dict(nbval.plugin.find_comment_markers("# NBVAL_IGNORE_OUTPUT: timings vary\nprint(1)"))
    assert markers == {"check": False}
    assert dict(nbval.plugin.find_comment_markers("# a comment: not a marker\nprint(1)")) == {}
    assert dict(nbval.plugin.find_comment_markers("print(1)")) == {}
