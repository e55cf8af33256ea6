"""Execute chapter notebooks in place, as nbval will check them.

    python tools/run_notebooks.py book/alibi.ipynb [book/gmlp.ipynb ...]

Each notebook runs top to bottom in a fresh kernel (``python3``) from
``book/``, as the tests run it, and is saved with its outputs. No widget state
is saved: the site renders the live views from their outputs' HTML form
(``mixers.live``), and a reader's kernel makes its widgets anew, so saved
state would only weigh the notebook down.
"""

import argparse
import json
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def run(path: Path, timeout: int = 900) -> None:
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        store_widget_state=False,
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
    notebook.metadata.pop("widgets", None)
    with open(path, "w", encoding="utf-8") as file:
        json.dump(notebook, file, indent=1, ensure_ascii=False)
        file.write("\n")
    print(f"{path}: executed")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    for notebook in parser.parse_args().notebooks:
        run(notebook)
