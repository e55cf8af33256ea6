"""The book's own conventions, checked: every chapter follows the same pattern."""

import ast
import json
import re
from pathlib import Path

import pytest
import yaml
from helpers import load_module

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


def chapter_pages() -> list[str]:
    """The chapters (the table of contents' notebooks), in its order: paths
    such as ``book/attention``."""
    return [page for page in toc_files() if (ROOT / f"{page}.ipynb").is_file()]


BOOK = ROOT / "book"
NOTEBOOKS = sorted(BOOK.glob("*.ipynb"))


def test_every_toc_entry_exists_and_every_notebook_is_in_the_toc():
    listed = set(toc_files())
    for name in listed:
        assert any(
            (ROOT / f"{name}{ext}").is_file()
            for ext in (".md", ".rst", ".ipynb")
        ), name
    for notebook in NOTEBOOKS:
        assert str(notebook.relative_to(ROOT).with_suffix("")) in listed, (
            notebook
        )


def test_execution_is_off_so_the_site_shows_the_committed_outputs():
    assert CONFIG["execute"]["execute_notebooks"] == "off"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_the_title_comes_first_then_the_colab_cell_collapsed_on_the_site(
    notebook,
):
    title, colab = json.loads(notebook.read_text())["cells"][:2]
    assert title["cell_type"] == "markdown" and "".join(
        title["source"]
    ).startswith("# ")
    source = "".join(colab["source"])
    assert colab["cell_type"] == "code"
    assert 'if "google.colab" in sys.modules:' in source
    assert f"git clone --depth 1 {CONFIG['repository']['url']} " in source
    assert "hide-input" in colab["metadata"].get("tags", [])


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_every_ignored_output_has_a_reason_in_its_metadata_not_in_its_source(
    notebook,
):
    # nbval's own tag marks the cell; the reason lives in the metadata, where a reader of the
    # site never sees it, and the source carries no NBVAL comment.
    for cell in json.loads(notebook.read_text())["cells"]:
        source = "".join(cell["source"])
        assert "NBVAL" not in source, source[:80]
        if "nbval-ignore-output" in cell["metadata"].get("tags", []):
            assert re.fullmatch(
                r"\S.{10,}",
                cell["metadata"].get("nbval-ignore-output-reason", ""),
            ), source[:80]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_are_committed_with_outputs_and_no_errors(notebook):
    cells = [
        c
        for c in json.loads(notebook.read_text())["cells"]
        if c["cell_type"] == "code"
    ]
    assert all(c.get("execution_count") for c in cells[1:]), (
        "every code cell after the Colab cell ran"
    )
    for cell in cells:
        assert not any(
            out.get("output_type") == "error"
            for out in cell.get("outputs", [])
        )


def test_one_command_points_the_config_and_every_colab_cell_at_a_new_repository(
    tmp_path,
):
    import shutil

    (tmp_path / "book").mkdir()
    shutil.copy(ROOT / "_config.yml", tmp_path / "_config.yml")
    for notebook in NOTEBOOKS:
        shutil.copy(notebook, tmp_path / "book" / notebook.name)
    tool = load_module(ROOT / "tools" / "set_repository_url.py")

    url = "https://github.com/someone/their-mixers"
    tool.set_repository_url(url, root=tmp_path)
    assert (
        yaml.safe_load((tmp_path / "_config.yml").read_text())["repository"][
            "url"
        ]
        == url
    )
    for notebook in NOTEBOOKS:
        before = json.loads(notebook.read_text())
        after = json.loads((tmp_path / "book" / notebook.name).read_text())
        colab = "".join(after["cells"][1]["source"])
        assert f"git clone --depth 1 {url} /content/mixers" in colab
        assert CONFIG["repository"]["url"] not in colab
        # nothing else in the notebook changed
        after["cells"][1]["source"] = before["cells"][1]["source"]
        assert after == before
    with pytest.raises(ValueError, match="OWNER/REPO"):
        tool.set_repository_url(
            "git@github.com:someone/mixers.git", root=tmp_path
        )


def test_the_colab_install_keeps_the_torch_already_installed():
    # What the Colab cell runs, `pip install "<clone>[book]"`, asked of this environment (which already
    # holds torch, as Colab's does) as a dry run with no index: only the package itself would be
    # installed, and torch would not be touched.
    import subprocess
    import sys

    report = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--no-index",
            "--no-build-isolation",
            "--quiet",
            "--report",
            "-",
            f"{ROOT}[book]",
        ],
        capture_output=True,
        text=True,
        timeout=1800,  # a hang's limit
        check=True,
    )
    installs = [
        item["metadata"]["name"].lower()
        for item in json.loads(report.stdout)["install"]
    ]
    assert installs == ["mixers"], installs


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_harness_cells_are_collapsed_on_the_site(notebook):
    # Loading committed results (and printing their provenance) and timing loops are harness,
    # not teaching: their code sits behind a toggle, their output stays on the page and under nbval.
    for cell in json.loads(notebook.read_text())["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and re.search(
            r"load_results\(|timeit|time_call\(|\.run\(\"smoke\", lengths",
            source,
        ):
            tags = cell["metadata"].get("tags", [])
            assert "hide-input" in tags or "remove-input" in tags, source[:80]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_every_figure_has_a_name_a_caption_and_alt_text(notebook):
    # MyST-NB turns this cell metadata into a numbered, captioned figure with real alt text
    # (without it the alt text is the image's file path). One figure per cell, so names are unique.
    for cell in json.loads(notebook.read_text())["cells"]:
        images = [
            o
            for o in cell.get("outputs", [])
            if "image/png" in o.get("data", {})
        ]
        if not images:
            continue
        assert len(images) == 1, "".join(cell["source"])[:80]
        meta = cell["metadata"].get("mystnb", {})
        assert meta.get("figure", {}).get("name", "").startswith("fig-"), (
            "".join(cell["source"])[:80]
        )
        assert (
            len(meta["figure"].get("caption", "")) > 20
            and len(meta.get("image", {}).get("alt", "")) > 20
        )


def test_each_page_includes_each_script_once():
    # Jupyter Book adds sphinx-thebe's inline configuration twice (file name None, then ""), which
    # threw "Identifier 'THEBE_JS_URL' has already been declared" on every page.
    from types import SimpleNamespace

    extension = load_module(ROOT / "book" / "_ext" / "unique_scripts.py")
    thebe = {"body": "const THEBE_JS_URL = 'x'"}
    scripts = [
        SimpleNamespace(filename="_static/a.js", attributes={}),
        SimpleNamespace(filename=None, attributes=dict(thebe)),
        SimpleNamespace(filename="", attributes=dict(thebe)),
        SimpleNamespace(
            filename="_static/a.js", attributes={"async": "async"}
        ),
    ]
    context = {"script_files": list(scripts)}
    extension._unique_scripts(None, "page", "page.html", context, None)
    assert context["script_files"] == [scripts[0], scripts[1], scripts[3]]
    assert "unique_scripts" in CONFIG["sphinx"]["local_extensions"]


# A listing of the package's source, as a chapter writes it, and the call that shows the same code.
LISTING = re.compile(
    r"```\{literalinclude\}\s+\.\./src/(\S+)\.py\n((?::[\w-]+:[^\n]*\n)*)"
)
LISTING_OPTION = re.compile(r":([\w-]+):\s*(.*)\n")


def show_source_calls(markdown: str) -> list[str]:
    calls = []
    for match in LISTING.finditer(markdown):
        module = match.group(1).replace("/", ".").removesuffix(".__init__")
        options = dict(LISTING_OPTION.findall(match.group(2)))
        target = module + (
            "." + options.pop("pyobject") if "pyobject" in options else ""
        )
        args = (
            [repr(target)]
            + [
                f"{key.replace('-', '_')}={value.strip()!r}"
                for key, value in options.items()
                if key in ("start-at", "end-before", "end-at")
            ]
            + (["core=True"] if "core" in options else [])
        )
        calls.append(f"show_source({', '.join(args)})")
    return calls


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_every_listing_is_shown_where_the_directive_is_not_rendered(notebook):
    # On Colab or in JupyterLab a literalinclude is plain text: the next cell shows the same code
    # from the installed package (and nbval checks its output), and is removed from the site.
    cells = json.loads(notebook.read_text())["cells"]
    listed = 0
    for cell, after in zip(cells, cells[1:] + [None]):
        calls = (
            show_source_calls("".join(cell["source"]))
            if cell["cell_type"] == "markdown"
            else []
        )
        if not calls:
            continue
        listed += len(calls)
        assert after is not None and after["cell_type"] == "code", calls
        assert "remove-cell" in after["metadata"].get("tags", []), calls
        # the calls as Python reads them: ruff may wrap a long one
        shown = [
            ast.dump(node.value)
            for node in ast.parse("".join(after["source"])).body
            if isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", None) == "show_source"
        ]
        assert shown == [ast.dump(ast.parse(c).body[0].value) for c in calls]
        assert all(
            out.get("data", {})
            .get("text/markdown", "")
            .startswith("```python\n")
            for out in after["outputs"]
        )
        assert len(after["outputs"]) == len(calls)
    # every listing of the package was recognised (none written in a form the pattern misses)
    markdown = "".join(
        "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
    )
    assert listed == markdown.count("{literalinclude} ../src/")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_every_figure_is_cross_referenced_from_the_prose(notebook):
    cells = json.loads(notebook.read_text())["cells"]
    prose = "".join(
        "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
    )
    names = [
        c["metadata"]["mystnb"]["figure"]["name"]
        for c in cells
        if "figure" in c["metadata"].get("mystnb", {})
    ]
    assert (
        names and [n for n in names if f"{{numref}}`{n}`" not in prose] == []
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_every_chapter_ends_with_exercises_whose_solutions_run_and_a_next_pointer(
    notebook,
):
    # Each exercise: "**Exercise K.**", then a dropdown "Solution K", then one hidden code cell that
    # works it out (run and checked by nbval like every other cell).
    cells = json.loads(notebook.read_text())["cells"]
    text = ["".join(c["source"]) for c in cells]
    start = next(
        i
        for i, t in enumerate(text)
        if cells[i]["cell_type"] == "markdown" and t.startswith("## Exercises")
    )
    exercises = [
        i
        for i in range(start, len(cells))
        if text[i].startswith("**Exercise ")
    ]
    assert 3 <= len(exercises) <= 6, len(exercises)
    for number, i in enumerate(exercises, start=1):
        assert text[i].startswith(f"**Exercise {number}.**")
        end = exercises[number] if number < len(exercises) else len(cells) - 1
        block = list(range(i + 1, end))
        solutions = [
            j
            for j in block
            if cells[j]["cell_type"] == "markdown"
            and text[j].startswith(
                f":::{{admonition}} Solution {number}\n:class: dropdown"
            )
        ]
        workings = [
            j
            for j in block
            if cells[j]["cell_type"] == "code"
            and "hide-cell" in cells[j]["metadata"].get("tags", [])
        ]
        assert len(solutions) == 1 and len(workings) == 1, (
            number,
            solutions,
            workings,
        )
        working = cells[workings[0]]
        assert working["outputs"] and "nbval-ignore-output" not in working[
            "metadata"
        ].get("tags", [])
    last = cells[-1]
    assert last["cell_type"] == "markdown" and re.match(
        r"\*\*Next:\*\* \[[^\]]+\]\([\w.]+\.(ipynb|md)\)", text[-1]
    ), text[-1]


def reading_path():
    return load_module(ROOT / "tools" / "reading_path.py")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_a_first_read_of_every_chapter_takes_at_most_thirty_minutes(notebook):
    # Prose at 200 words a minute and shown code, the listings of the package included, at 20
    # lines a minute (tools/reading_path.py): a chapter that grows past 30 minutes shows fewer
    # lines (a listing's core, the plumbing on its annotated page) or moves detail into an aside.
    tool = reading_path()
    _, words, code_lines = tool.reading_path(notebook)
    minutes = tool.minutes(words, code_lines)
    assert minutes <= 30, (
        f"{notebook.name}: about {minutes:.1f} minutes ({words} words, {code_lines} lines of code)"
    )


def test_the_reading_path_counts_listings_and_leaves_out_asides_and_exercises(
    tmp_path,
):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text(
        'def f(x):\n    """Doc."""\n    check_positive_int("x", x)\n'
        "    y = x + 1\n    return y\n"
    )
    listing = "```{literalinclude} ../src/a.py\n:pyobject: f\n:core:\n```\n"
    cells = [
        {
            "cell_type": "markdown",
            "source": "Two words.\n\n:::{admonition} Aside: x\n:class: dropdown\n"
            "Hidden words here.\n" + listing + ":::\n" + listing,
        },
        {"cell_type": "code", "metadata": {}, "source": "a = 1\nb = 2\n"},
        {
            "cell_type": "code",
            "metadata": {"tags": ["hide-input"]},
            "source": "hidden = 1\n",
        },
        {
            "cell_type": "markdown",
            "source": "## Exercises\n\nMany more words that a reader meets later.\n"
            + listing,
        },
    ]
    (tmp_path / "book").mkdir()
    path = tmp_path / "book" / "chapter.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    tool = reading_path()
    _, words, code_lines = tool.reading_path(path)
    # The listing's core: the def, one "..." line for the docstring and the check, two lines.
    assert (words, code_lines) == (2, 2 + 4)
    assert tool.minutes(200, 20) == 2


def _intro_baselines() -> dict[str, list[str]]:
    """The intro's table of each chapter's transformer, by chapter file."""
    text = (BOOK / "intro.md").read_text()
    section = text.split("## One reference model", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        link = re.match(r"\| \[[^]]+\]\((\w+)\.ipynb\)", line)
        if link:
            rows[link.group(1)] = [
                c.strip() for c in line.strip("|").split("|")
            ]
    return rows


def _transformer_of(chapter: str) -> tuple[dict, dict, int, int]:
    """(model settings, train settings, parameters, seeds) of the
    transformer that ``chapter``'s committed results trained."""
    results = BOOK / "results"
    if chapter == "baseline":
        result = json.loads((results / "baseline-cpu.json").read_text())[
            "result"
        ]
        return (
            result["model_config"],
            result["train_config"],
            result["parameters"],
            1,
        )
    name = {
        "alibi": "alibi_extrapolation",
        "attention": "attention_scaling",
    }.get(chapter, chapter)
    data = json.loads((results / f"{name}-cpu.json").read_text())
    settings = data["settings"]
    runs = data["runs"]
    if chapter == "attention":
        # every arm has the same parameters: the heads split d_model
        (params,) = {r["result"]["parameters"] for r in runs}
    elif chapter == "glu_variants":
        params = next(r["parameters"] for r in runs if r["variant"] == "gelu")
    elif chapter == "gmlp":
        params = runs["transformer"]["result"]["parameters"]
    elif chapter == "alibi":
        params = next(
            r["result"]["parameters"] for r in runs if r["scheme"] == "learned"
        )
    else:
        params = next(
            r["parameters"] for r in runs if r["pair"] == "attention+gelu"
        )
    seeds = len(settings.get("seeds", [None]))
    return settings["model"], settings["train"], params, seeds


@pytest.mark.parametrize(
    "chapter",
    ["attention", "baseline", "glu_variants", "gmlp", "alibi", "side_by_side"],
)
def test_the_intro_names_each_chapters_transformer_as_its_results_trained_it(
    chapter,
):
    rows = _intro_baselines()
    assert chapter in rows, f"the intro's table has no row for {chapter}"
    _, shape, params, training, seeds = rows[chapter]
    model, train, expected_params, expected_seeds = _transformer_of(chapter)
    width = f"{model['n_layers']} layers, width {model['d_model']}"
    assert shape.startswith(width), (shape, width)
    assert shape.endswith(f"context {model['block_size']}"), shape
    assert params == f"{expected_params:,}"
    assert training == (
        f"{train['steps']:,} steps × {train['batch_size']} × {train['seq_len']} characters"
    )
    assert int(seeds) == expected_seeds


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_a_notebook_stays_small_enough_to_review(notebook):
    # A chapter's diff should be readable: no widget state is saved (the live views travel as a
    # few kilobytes of JSON) and figures are palette PNGs (mixers.plot.palette_png).
    size = notebook.stat().st_size
    assert size <= 600_000, (
        f"{notebook.name} is {size / 1000:.0f} KB, over 600 KB"
    )
    assert "widgets" not in json.loads(notebook.read_text())["metadata"]
