"""nbval settings for the chapters.

The book's convention is that an output nbval must not compare is marked with its reason on the
marker line, ``# NBVAL_IGNORE_OUTPUT: <why this output varies>`` (tests/test_book.py enforces the
reason). nbval 0.11 recognises a marker comment only when the comment is exactly the marker, so
its parser is taught to read the part before the colon; everything else about nbval is unchanged.
"""

import nbval.plugin

_find_comment_markers = nbval.plugin.find_comment_markers


def _find_reasoned_comment_markers(cellsource):
    lines = []
    for line in cellsource.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") and ":" in stripped:
            marker = stripped.lstrip("#").split(":", 1)[0].strip()
            if marker in nbval.plugin.comment_markers:
                line = f"# {marker}"
        lines.append(line)
    return _find_comment_markers("\n".join(lines))


nbval.plugin.find_comment_markers = _find_reasoned_comment_markers
