"""The package reads like nanoGPT's ``model.py`` (issue 32): these tests hold
the shape of the code, measured from the source itself.

- no function longer than a screen: at most 50 lines of code after its
  docstring (blank lines and comment lines not counted);
- the two attention layers a reader studies most at most 200 lines of code
  each (docstrings and comments not counted: the notes are the book's text);
- every core module's annotated page carries its maths typeset: at least 8
  formulas (``:math:`` roles and ``.. math::`` blocks) in its notes;
- repeated code kept down: at most 5 pairs of files in the package that
  share a run of six or more lines of code of the same shape, as
  ``tools/repetition.py`` counts them (the project's own finder: imports and
  thin lines such as ``x: int,`` passed over; 2 pairs when it was written).
"""

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest
from helpers import load_module

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "mixers"
MODULES = sorted(PACKAGE.rglob("*.py"))

# The pages a reader studies: each carries its maths in its notes.
CORE = ["attention", "alibi", "positions", "gmlp", "feed_forward", "model"]
CORE += ["train"]
FORMULAS_PER_PAGE = 8

MAX_FUNCTION_LINES = 50
MAX_CLASS_LINES = 200
MAX_REPEATED_PAIRS = 5


def _docstring_lines(tree):
    """The line numbers taken by docstrings (module, class, function)."""
    lines = set()
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    for node in ast.walk(tree):
        if not isinstance(node, kinds) or not node.body:
            continue
        first = node.body[0]
        if (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def _code_lines(source_lines, first, last, skip):
    """Lines first..last (1-based) that are code: not blank, not a comment,
    not in ``skip`` (docstrings)."""
    return sum(
        1
        for number in range(first, last + 1)
        if number not in skip
        and source_lines[number - 1].strip()
        and not source_lines[number - 1].strip().startswith("#")
    )


def _parse(path):
    text = path.read_text()
    return text.splitlines(), ast.parse(text)


def function_sizes():
    """(lines of code after the docstring, "module:line name") for every
    function and method of the package."""
    sizes = []
    for path in MODULES:
        lines, tree = _parse(path)
        docstrings = _docstring_lines(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                # From the body's first line: the signature is not counted.
                first = node.body[0].lineno
                size = _code_lines(lines, first, node.end_lineno, docstrings)
                where = f"{path.relative_to(PACKAGE)}:{node.lineno}"
                sizes.append((size, f"{where} {node.name}"))
    return sizes


def class_size(module, name):
    lines, tree = _parse(PACKAGE / f"{module}.py")
    (node,) = [
        node
        for node in tree.body
        if isinstance(node, ast.ClassDef) and node.name == name
    ]
    return _code_lines(
        lines, node.lineno, node.end_lineno, _docstring_lines(tree)
    )


_FORMULA = re.compile(r":math:`|^\s*\.\. math::", re.MULTILINE)


def notes(path):
    """A module's notes as the annotated page shows them: its comments and
    docstrings."""
    text = path.read_text()
    comments = [
        token.string
        for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.type == tokenize.COMMENT
    ]
    tree = ast.parse(text)
    docstrings = [
        ast.get_docstring(node, clean=False) or ""
        for node in ast.walk(tree)
        if isinstance(
            node,
            (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef),
        )
    ]
    return "\n".join(comments + docstrings)


def formula_count(path):
    return len(_FORMULA.findall(notes(path)))


def test_the_counters_count_what_they_say():
    # A function of 3 code lines after a docstring, a comment and a blank.
    source = 'def f():\n    """Doc.\n\n    More."""\n    a = 1\n\n'
    source += "    # why\n    b = 2\n    return a + b\n"
    lines, tree = source.splitlines(), ast.parse(source)
    (node,) = tree.body
    assert _code_lines(lines, 1, node.end_lineno, _docstring_lines(tree)) == 4
    assert len(_FORMULA.findall("# :math:`a` and :math:`b`\n.. math::")) == 3


def test_no_function_is_longer_than_a_screen():
    long = sorted(
        (size, where)
        for size, where in function_sizes()
        if size > MAX_FUNCTION_LINES
    )
    assert not long, (
        f"functions with more than {MAX_FUNCTION_LINES} lines of code after "
        f"their docstring: {long}"
    )


@pytest.mark.parametrize(
    "module, name",
    [
        ("attention", "MultiHeadAttention"),
        ("alibi", "AlibiMultiHeadAttention"),
    ],
)
def test_the_attention_layers_fit_in_a_sitting(module, name):
    size = class_size(module, name)
    assert size <= MAX_CLASS_LINES, f"{name}: {size} lines of code"


@pytest.mark.parametrize("module", CORE)
def test_every_core_page_carries_its_maths_typeset(module):
    count = formula_count(PACKAGE / f"{module}.py")
    assert count >= FORMULAS_PER_PAGE, (
        f"mixers.{module}: {count} typeset formulas in its notes"
    )


repetition = load_module(PACKAGE.parents[1] / "tools" / "repetition.py")


def test_the_package_repeats_itself_little():
    pairs = repetition.repeats(repetition.tree_sources(PACKAGE))
    assert len(pairs) <= MAX_REPEATED_PAIRS, "\n".join(map(str, pairs))


BLOCK = """
def {name}(rows, width):
    import os
    total = sum(len(row) for row in rows)
    kept = [row[:width] for row in rows if row]
    ratio = total / max(len(kept), 1)
    label = f"{{total}} rows, {{ratio:.2f}} each"
    print(label, os.sep)
    return sorted(kept, key=len)[::-1]
"""


def test_the_finder_sees_a_copy_under_other_names_and_nothing_else():
    """Six lines of one shape in two files make one pair, however their
    names, strings and numbers differ; imports, comments and thin lines do
    not count, nor does a run shorter than six lines of code."""
    renamed = BLOCK.replace("total", "count").replace("rows", "items")
    renamed = renamed.replace("1)", "2)").replace(".2f", ".3g")
    assert renamed != BLOCK
    sources = {"a.py": BLOCK.format(name="one"), "b.py": renamed.format(name="two")}  # fmt: skip
    (pair,) = repetition.repeats(sources)
    assert (pair.first, pair.second) == (("a.py", 2, 9), ("b.py", 2, 9))
    short = renamed.replace("    ratio = ", "    # ratio\n    ratio = -")
    short = short.replace("    kept = [", "    kept: list = [")
    assert repetition.repeats({"a.py": BLOCK, "b.py": short}) == []
    imports = "import os\nimport sys\nfrom a import (\n    b,\n    c,\n)\n"
    thin = "x = (\n    a,\n    b,\n)\n"
    assert repetition.repeats({"a.py": imports * 3, "b.py": thin * 4}) == []


@pytest.mark.parametrize("tiny_attention", [False, True])
def test_gmlp_checks_its_input_once(monkeypatch, tiny_attention):
    """A gMLP block checks ``x`` and ``token_mask`` where they enter, not
    again in each module inside it; each module alone still checks."""
    import torch

    from mixers import gmlp

    calls = []

    def counting(*args, **kwargs):
        calls.append(args[1])
        return check(*args, **kwargs)

    check = gmlp._check_input
    monkeypatch.setattr(gmlp, "_check_input", counting)
    block = gmlp.GMLPBlock(8, 16, 5, tiny_attention=tiny_attention)
    x, token_mask = torch.randn(2, 5, 8), torch.ones(2, 5, dtype=torch.bool)
    block(x, token_mask)
    assert calls == ["x"]
    calls.clear()
    block.mlp.sgu(torch.randn(2, 5, 16), token_mask)
    assert calls == ["z"]
