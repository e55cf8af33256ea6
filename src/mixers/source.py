"""The package's source, shown in a notebook: what the book's listings show,
wherever it is read.

On the built site each listing is a ``literalinclude`` of the package's file.
On Colab or in JupyterLab that directive is plain text, so every listing is
followed by a cell (removed from the site) that calls :func:`show_source` with
the same target: the code comes from the installed package, never from a copy.

A chapter shows the lines that compute an idea: :func:`core` drops the
docstrings and the argument checks that open a function, each run of them
replaced by one ``...`` line that says what was left out. The whole function
is on its page of the annotated source, one click away.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap

# What a function's opening checks and docstring become in an excerpt.
LEFT_OUT = "...  # {}: in the annotated source"


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


def _called_name(node) -> str:
    """The name a call calls: ``f`` for ``f(...)``, ``m`` for ``x.m(...)``."""
    func = node.func if isinstance(node, ast.Call) else None
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def is_docstring(node) -> bool:
    """Whether a statement is a docstring: a string alone."""
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _is_check(node) -> bool:
    """A statement that only checks the arguments: a call of a ``check_*``
    function, an ``if`` whose body only checks or raises, a loop of checks."""
    if isinstance(node, ast.Expr):
        return _called_name(node.value).lstrip("_").startswith("check_")
    if isinstance(node, ast.If):
        return all(
            _is_check(s) or isinstance(s, ast.Raise) for s in node.body
        ) and all(
            _is_check(s) or isinstance(s, ast.Raise) for s in node.orelse
        )
    if isinstance(node, ast.For):
        return all(_is_check(s) for s in node.body) and not node.orelse
    return False


def core(text: str) -> str:
    """``text``, the source of a function, method or class, without its
    docstrings and the argument checks in each function's body.

    Each run of statements left out becomes one line at its indentation,
    ``...  # argument checks: in the annotated source``; what is left is the
    code that computes. A body that would be left empty is kept whole.
    """
    lines = text.splitlines()
    tree = ast.parse(textwrap.dedent(text))
    cuts = []  # (first line, last line, what), 1-based in the text
    for node in ast.walk(tree):
        if not isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        ):
            continue
        function = not isinstance(node, ast.ClassDef)
        dropped = [
            (index == 0 and is_docstring(statement))
            or (function and _is_check(statement))
            for index, statement in enumerate(node.body)
        ]
        if all(dropped):
            continue
        run = []
        for statement, drop in zip(node.body + [None], dropped + [False]):
            if drop:
                run.append(statement)
                continue
            if run:
                docstring = is_docstring(run[0]) and run[0] is node.body[0]
                checks = len(run) > docstring
                what = " and ".join(
                    ["docstring"] * docstring + ["argument checks"] * checks
                )
                cuts.append((run[0].lineno, run[-1].end_lineno, what))
                run = []
    for first, last, what in sorted(cuts, reverse=True):
        indent = lines[first - 1][: -len(lines[first - 1].lstrip())]
        lines[first - 1 : last] = [indent + LEFT_OUT.format(what)]
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def show_source(
    target: str,
    start_at: str | None = None,
    end_before: str | None = None,
    end_at: str | None = None,
    core: bool = False,
) -> None:
    """Display :func:`source_text` as a highlighted Python block (Markdown
    output); with ``core``, its :func:`core`, as the chapter's listing with
    ``:core:`` shows it."""
    from IPython.display import Markdown, display

    text = source_text(target, start_at, end_before, end_at)
    if core:
        text = globals()["core"](text)
    display(Markdown(f"```python\n{text.rstrip()}\n```"))
