"""The package's source, shown in a notebook: what the book's listings show,
wherever it is read.

On the built site each listing is a ``literalinclude`` of the package's file.
On Colab or in JupyterLab that directive is plain text, so every listing is
followed by a cell (removed from the site) that calls :func:`show_source` with
the same target: the code comes from the installed package, never from a copy.
"""

from __future__ import annotations

import importlib
import inspect


def _resolve(dotted: str):
    """The object named by ``"package.module.Object.attribute"``: the longest
    importable module, then attributes."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            try:
                target = getattr(target, attribute)
            except AttributeError:
                raise ValueError(
                    f"target: {dotted!r} has no {attribute!r}"
                ) from None
        return target
    raise ValueError(f"target: no module found in {dotted!r}")


def source_text(
    target: str,
    start_at: str | None = None,
    end_before: str | None = None,
    end_at: str | None = None,
) -> str:
    """The source of ``target`` (a dotted name: a module, class, function or
    method).

    ``start_at``, ``end_before`` and ``end_at`` cut it as ``literalinclude``'s
    options of those names do: from the first line containing ``start_at`` up
    to, not including, the first line from there containing ``end_before`` (or
    including the first containing ``end_at``).
    """
    if end_before is not None and end_at is not None:
        raise ValueError("end_before and end_at: give one or the other")
    text = inspect.getsource(_resolve(target))
    if start_at is None and end_before is None and end_at is None:
        return text
    lines = text.splitlines(keepends=True)
    first = 0
    if start_at is not None:
        first = next(
            (i for i, line in enumerate(lines) if start_at in line), None
        )
        if first is None:
            raise ValueError(f"start_at: {start_at!r} is not in {target}")
    last = len(lines)
    if end_before is not None:
        last = next(
            (
                i
                for i in range(first + 1, len(lines))
                if end_before in lines[i]
            ),
            None,
        )
        if last is None:
            raise ValueError(
                f"end_before: {end_before!r} is not in {target} after"
                f" {start_at!r}"
            )
    if end_at is not None:
        last = next(
            (i + 1 for i in range(first, len(lines)) if end_at in lines[i]),
            None,
        )
        if last is None:
            raise ValueError(
                f"end_at: {end_at!r} is not in {target} from {start_at!r}"
            )
    return "".join(lines[first:last])


def show_source(
    target: str,
    start_at: str | None = None,
    end_before: str | None = None,
    end_at: str | None = None,
) -> None:
    """Display :func:`source_text` as a highlighted Python block (Markdown
    output)."""
    from IPython.display import Markdown, display

    text = source_text(target, start_at, end_before, end_at).rstrip()
    display(Markdown(f"```python\n{text}\n```"))
