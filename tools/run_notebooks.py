"""Execute chapter notebooks in place, as nbval will check them, and keep their
widget state lean.

    python tools/run_notebooks.py book/alibi.ipynb [book/gmlp.ipynb ...]

Each notebook runs top to bottom in a fresh kernel (``python3``) from
``book/``, as the tests run it, and is saved with its outputs and its widget
state (the saved state is what the built site renders: the book's precomputed
views work from it with no kernel). Widget models that no shown output reaches
(a live ``interact`` in a cell the site removes, say) are dropped from the
saved state, so the page does not carry pictures it never shows.
"""

import argparse
import json
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
HIDDEN = {"remove-output", "remove-cell"}


def _model_ids(value):
    """Every model referenced from a widget state value ("IPY_MODEL_<id>"
    strings)."""
    if isinstance(value, str):
        if value.startswith("IPY_MODEL_"):
            yield value[len("IPY_MODEL_") :]
    elif isinstance(value, dict):
        for item in value.values():
            yield from _model_ids(item)
    elif isinstance(value, list):
        for item in value:
            yield from _model_ids(item)


def prune_widget_state(notebook) -> int:
    """Keep the widget models that a shown output reaches, and the links
    between them.

    Returns how many models were dropped.
    """
    widgets = notebook.metadata.get("widgets", {}).get(WIDGET_STATE)
    if not widgets:
        return 0
    state = widgets["state"]
    roots = [
        output["data"][WIDGET_VIEW]["model_id"]
        for cell in notebook.cells
        if cell.cell_type == "code"
        and not HIDDEN & set(cell.metadata.get("tags", []))
        for output in cell.get("outputs", [])
        if WIDGET_VIEW in output.get("data", {})
    ]
    keep, todo = set(), [root for root in roots if root in state]
    while todo:
        model = todo.pop()
        if model not in keep:
            keep.add(model)
            todo.extend(
                child
                for child in _model_ids(state[model]["state"])
                if child in state
            )
    # A jslink is a model nothing displays: keep it when both ends are kept.
    for model_id, model in state.items():
        ends = list(_model_ids(model["state"].get("source", []))) + list(
            _model_ids(model["state"].get("target", []))
        )
        if (
            model["model_name"] in ("LinkModel", "DirectionalLinkModel")
            and ends
            and set(ends) <= keep
        ):
            keep.add(model_id)
            keep.update(_model_ids(model["state"]))
    dropped = len(state) - len(keep)
    if keep:
        widgets["state"] = {
            model_id: model
            for model_id, model in state.items()
            if model_id in keep
        }
    else:
        del notebook.metadata["widgets"]
    return dropped


def run(path: Path, timeout: int = 900) -> None:
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(path.parent)}},
    )
    # Cell by cell (what NotebookClient.execute does), saying how far it got
    # and how long each took.
    with client.setup_kernel():
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type == "code":
                start = time.perf_counter()
                client.execute_cell(cell, index)
                print(
                    f"  cell {index}: {time.perf_counter() - start:.1f} s",
                    flush=True,
                )
        client.set_widgets_metadata()
    dropped = prune_widget_state(notebook)
    with open(path, "w", encoding="utf-8") as file:
        json.dump(notebook, file, indent=1, ensure_ascii=False)
        file.write("\n")
    print(f"{path}: executed; {dropped} unshown widget models dropped")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    for notebook in parser.parse_args().notebooks:
        run(notebook)
