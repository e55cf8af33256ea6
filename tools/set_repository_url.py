"""Point the book at your copy of the repository: ``python
tools/set_repository_url.py URL``.

The repository's URL is written in one place, ``repository.url`` in
``_config.yml``; Jupyter Book derives the Colab launch buttons and the
repository and issue buttons from it. The one thing it cannot derive is the
first code cell of each chapter, which runs on Colab *before* the book is
cloned and so must name the URL itself. This script sets ``repository.url`` and
rewrites the ``git clone`` line of every chapter's Colab cell to match
(``tests/test_book.py`` checks that they agree). Run it, commit, push: the next
build's buttons and cells point at your copy.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
URL = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+$")
# the only "  url:" key: repository.url
CONFIG_LINE = re.compile(r"^(  url: ).*$", re.MULTILINE)
CLONE = re.compile(r"(!git clone --depth 1 )\S+( /content/mixers)")


def set_repository_url(url: str, root: Path = ROOT) -> list[Path]:
    """Write ``url`` into ``_config.yml`` and every chapter's Colab cell;
    return the files changed."""
    if not URL.match(url):
        raise ValueError(
            f"url must look like https://github.com/OWNER/REPO, got {url!r}"
        )
    config = root / "_config.yml"
    text, count = CONFIG_LINE.subn(rf"\g<1>{url}", config.read_text())
    if count != 1:
        raise ValueError(
            f"expected one 'url:' key (repository.url) in {config}, found"
            f" {count}"
        )
    config.write_text(text)
    changed = [config]
    for notebook in sorted((root / "book").glob("*.ipynb")):
        book = json.loads(notebook.read_text())
        for cell in book["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "code" and "google.colab" in source:
                cell["source"] = CLONE.sub(
                    rf"\g<1>{url}\g<2>", source
                ).splitlines(keepends=True)
                break
        else:
            raise ValueError(f"{notebook} has no Colab cell")
        notebook.write_text(
            json.dumps(book, indent=1, ensure_ascii=False) + "\n"
        )
        changed.append(notebook)
    return changed


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(
            "usage: python tools/set_repository_url.py"
            " https://github.com/OWNER/REPO"
        )
    for path in set_repository_url(sys.argv[1]):
        print(f"updated {path.relative_to(ROOT)}")
