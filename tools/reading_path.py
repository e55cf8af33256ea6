"""How long a chapter's reading path is: the prose a reader meets before the
exercises.

    python tools/reading_path.py book/attention.ipynb [...]

Counts the characters and words of the markdown cells before "## Exercises",
leaving out what a reader does not meet unless they choose to: collapsed asides
(``:class: dropdown``) and the arguments of directives such as
``literalinclude``. Shown code is counted separately, in lines: the code cells
the site shows, and every listing of the package (``literalinclude``), read
from the file as Sphinx reads it.

A first read takes prose at 200 words and code at 20 lines a minute
(``minutes``); ``tests/test_book.py`` holds every chapter to 30.
"""

import json
import re
import sys
from pathlib import Path

EXERCISES = re.compile(r"^## Exercises", re.MULTILINE)
DROPDOWN = re.compile(
    r"^(:{3,})\{admonition\}[^\n]*\n:class: dropdown\n.*?^\1\s*$",
    re.MULTILINE | re.DOTALL,
)
DIRECTIVE = re.compile(
    r"^```\{(literalinclude|code-cell)\}.*?^```\s*$", re.MULTILINE | re.DOTALL
)
WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
LISTING = re.compile(
    r"^```\{literalinclude\} (\S+)\n((?::[\w-]+:.*\n)*)```", re.MULTILINE
)
OPTION = re.compile(r"^:([\w-]+):(.*)$", re.MULTILINE)
WORDS_PER_MINUTE = 200
CODE_LINES_PER_MINUTE = 20


def listing_lines(notebook, markdown):
    """Lines of code shown by the ``literalinclude`` listings in ``markdown``,
    each read from its file with Sphinx's own reader (its options: pyobject,
    start-at, end-before, ...)."""
    from sphinx.config import Config
    from sphinx.directives.code import LiteralIncludeReader

    from mixers.source import core

    config = Config({}, {})
    config.source_encoding = "utf-8"
    total = 0
    for match in LISTING.finditer(markdown):
        options = {
            key: value.strip() for key, value in OPTION.findall(match[2])
        }
        shows_core = "core" in options
        options = {
            k: v for k, v in options.items() if k not in ("caption", "core")
        }
        path = (Path(notebook).parent / match[1]).resolve()
        text, _ = LiteralIncludeReader(str(path), options, config).read()
        if shows_core:
            text = core(text)
        total += len(text.strip().splitlines())
    return total


def minutes(words, code_lines):
    """A first read: prose at 200 words and code at 20 lines a minute."""
    return words / WORDS_PER_MINUTE + code_lines / CODE_LINES_PER_MINUTE


def reading_path(path):
    """Return (prose characters, prose words, shown code lines) on the reading
    path of a notebook."""
    cells = json.load(open(path, encoding="utf-8"))["cells"]
    prose, code_lines = [], 0
    for cell in cells:
        source = (
            cell["source"]
            if isinstance(cell["source"], str)
            else "".join(cell["source"])
        )
        if cell["cell_type"] == "markdown":
            if EXERCISES.search(source):
                break
            shown = DROPDOWN.sub("", source)
            code_lines += listing_lines(path, shown)
            prose.append(DIRECTIVE.sub("", shown))
        elif not {"remove-cell", "hide-cell", "hide-input"} & set(
            cell.get("metadata", {}).get("tags", [])
        ):
            code_lines += len(source.strip().splitlines())
    text = "\n".join(prose)
    return len(text), len(WORD.findall(text)), code_lines


if __name__ == "__main__":
    for path in sys.argv[1:]:
        chars, words, lines = reading_path(path)
        print(
            f"{path}: {words:5d} words of prose, {lines:4d} lines of shown"
            f" code: {minutes(words, lines):4.1f} minutes"
        )
