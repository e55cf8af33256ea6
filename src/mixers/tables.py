"""Results as tables: a Markdown table that the book's site typesets and nbval
compares as text.

A chapter that prints aligned columns with f-strings shows the reader ASCII art
in a code-output box; ``markdown_table`` returns an IPython ``Markdown`` object
instead, which Jupyter, Colab and the built site (MyST) render as a real table,
and whose text nbval checks like any other output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _cell(value: Any) -> str:
    # A "|" inside a cell would end it: escape it; None reads as an em dash,
    # not "None".
    return (
        "—"
        if value is None
        else str(value).replace("|", "\\|").replace("\n", " ")
    )


def markdown_table(
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    align: str | None = None,
):
    """The rows as a Markdown table, displayed by returning (or
    ``display``-ing) the result.

    Args:
        header: the column titles (a sequence, not a str: a str would be split
            into characters).
        rows: one sequence of cells per row, as many as ``header`` (format
            numbers beforehand).
        align: one letter per column, ``l``, ``c`` or ``r`` (default: numbers
            right, text left, judged from the first row).

    Returns:
        An ``IPython.display.Markdown`` object.
    """
    from IPython.display import Markdown

    if isinstance(header, str) or isinstance(rows, str):
        raise TypeError(
            f"{'header' if isinstance(header, str) else 'rows'} must be a"
            " sequence, not a str (a str would be split into characters)"
        )
    header = list(header)
    if any(isinstance(row, str) for row in rows):
        raise TypeError(
            "rows must be sequences of cells, not strs (a str would be split"
            " into characters)"
        )
    rows = [list(row) for row in rows]
    for i, row in enumerate(rows):
        if len(row) != len(header):
            raise ValueError(
                f"rows[{i}] has {len(row)} cells for {len(header)} columns"
            )
    if align is None:
        first = rows[0] if rows else [""] * len(header)
        align = "".join("r" if _numeric(cell) else "l" for cell in first)
    if len(align) != len(header) or set(align) - set("lcr"):
        raise ValueError(
            f"align must be one of l, c, r per column ({len(header)}), got"
            f" {align!r}"
        )
    rule = {"l": ":---", "c": ":---:", "r": "---:"}
    lines = [
        "| " + " | ".join(_cell(title) for title in header) + " |",
        "|" + "|".join(rule[a] for a in align) + "|",
    ]
    lines += [
        "| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows
    ]
    return Markdown("\n".join(lines))


def _numeric(cell: Any) -> bool:
    if isinstance(cell, (int, float)) and not isinstance(cell, bool):
        return True
    text = (
        str(cell)
        .replace(",", "")
        .replace("%", "")
        .replace("×", "")
        .replace("±", " ")
        .strip()
    )
    try:
        float(text.split()[0] if text else "x")
        return True
    except ValueError:
        return False


def profiles_table(module, profiles=("cpu", "gpu"), directory=None):
    """A chapter's committed results, one row per profile: where and when
    each ran, then its experiment's figures (``module.headline``), or "not
    run yet" where no results file is committed. A results file of the GPU
    check, copied into ``book/results``, fills its row with no other change.

    ``module`` is an experiment module (``NAME``, ``headline``); the files
    are read from ``directory`` (default: the book's results).
    """
    from .results import read_results, results_path  # results imports torch

    found = {}
    for profile in profiles:
        path = results_path(module.NAME, profile, directory)
        found[profile] = read_results(path) if path.is_file() else None
    figures = {
        profile: module.headline(results)
        for profile, results in found.items()
        if results is not None
    }
    columns = list(dict.fromkeys(k for row in figures.values() for k in row))
    rows = []
    for profile, results in found.items():
        if results is None:
            rows.append([profile, "not run yet"] + [None] * len(columns))
            continue
        prov = results["provenance"]
        # the machine and the day; the threads and commit are in each
        # chapter's provenance lines
        device = prov["device"].split(" (")[0]
        where = f"{device}, {prov['date'][:10]}"
        rows.append(
            [profile, where] + [figures[profile].get(c) for c in columns]
        )
    return markdown_table(["profile", "where, when", *columns], rows)
