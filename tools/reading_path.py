"""How long a chapter's reading path is: the prose a reader meets before the
exercises.

    python tools/reading_path.py book/attention.ipynb [...]

Counts the characters and words of the markdown cells before "## Exercises",
leaving out what a reader does not meet unless they choose to: collapsed asides
(``:class: dropdown``) and the arguments of directives such as
``literalinclude``. Shown code is counted separately, in lines.
"""

import json
import re
import sys

EXERCISES = re.compile(r"^## Exercises", re.MULTILINE)
DROPDOWN = re.compile(
    r"^(:{3,})\{admonition\}[^\n]*\n:class: dropdown\n.*?^\1\s*$",
    re.MULTILINE | re.DOTALL,
)
DIRECTIVE = re.compile(
    r"^```\{(literalinclude|code-cell)\}.*?^```\s*$", re.MULTILINE | re.DOTALL
)
WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")


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
            prose.append(DIRECTIVE.sub("", DROPDOWN.sub("", source)))
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
            f"{path}: {chars:6d} characters, {words:5d} words of prose,"
            f" {lines:4d} lines of shown code"
        )
