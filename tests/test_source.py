"""mixers.source: the code a chapter's listing shows, taken from the installed package."""

import inspect
import textwrap
from pathlib import Path

import pytest

import mixers.feed_forward
from mixers.alibi import AlibiMultiHeadAttention, alibi_slopes
from mixers.source import core, show_source, source_text


def test_an_object_is_shown_whole_from_its_module():
    assert source_text("mixers.alibi.alibi_slopes") == inspect.getsource(
        alibi_slopes
    )
    assert source_text(
        "mixers.alibi.AlibiMultiHeadAttention.forward"
    ) == inspect.getsource(AlibiMultiHeadAttention.forward)


def test_a_module_is_cut_as_literalinclude_cuts_it():
    lines = (
        Path(mixers.feed_forward.__file__)
        .read_text()
        .splitlines(keepends=True)
    )
    first = next(
        i for i, line in enumerate(lines) if "ACTIVATIONS = {" in line
    )
    last = next(
        i
        for i in range(first + 1, len(lines))
        if "The paper's variants, in its order" in lines[i]
    )
    shown = source_text(
        "mixers.feed_forward",
        start_at="ACTIVATIONS = {",
        end_before="The paper's variants, in its order",
    )
    assert shown == "".join(lines[first:last])
    assert (
        shown.startswith("ACTIVATIONS = {")
        and "The paper's variants" not in shown
    )
    one_line = source_text(
        "mixers.feed_forward",
        start_at="ACTIVATIONS = {",
        end_at="ACTIVATIONS = {",
    )
    assert one_line == lines[first]


def test_bad_targets_and_markers_are_named():
    with pytest.raises(
        ValueError, match="target: 'mixers.alibi.nope' has no 'nope'"
    ):
        source_text("mixers.alibi.nope")
    with pytest.raises(ValueError, match="target: no module"):
        source_text("nosuchpackage.thing")
    with pytest.raises(ValueError, match="start_at"):
        source_text("mixers.feed_forward", start_at="no such line")
    with pytest.raises(ValueError, match="end_before"):
        source_text(
            "mixers.feed_forward",
            start_at="ACTIVATIONS = {",
            end_before="no such line",
        )
    with pytest.raises(ValueError, match="end_before and end_at"):
        source_text("mixers.feed_forward", end_before="a", end_at="b")


def test_shown_as_a_python_block(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", shown.append)
    show_source("mixers.alibi.alibi_slopes")
    assert (
        shown[0].data
        == "```python\n" + inspect.getsource(alibi_slopes).rstrip() + "\n```"
    )


FUNCTION = '''    def f(self, x, mask=None):
        """What f does.

        Args:
            x: a tensor.
        """
        check_tensor(x, "x", "[batch, seq]", ndim=2)
        if mask is not None:
            check_token_mask(mask, *x.shape)
        # why y is x doubled
        y = 2 * x
        if x.shape[0] > 4:
            raise ValueError("x: at most 4 rows")
        for name, value in (("x", x),):
            check_tensor(value, name, "[batch, seq]", ndim=2)
        return y
'''


def test_core_leaves_out_docstrings_and_argument_checks_and_says_so():
    assert core(FUNCTION) == (
        "    def f(self, x, mask=None):\n"
        "        ...  # docstring and argument checks: in the annotated source\n"
        "        # why y is x doubled\n"
        "        y = 2 * x\n"
        "        ...  # argument checks: in the annotated source\n"
        "        return y\n"
    )
    compiled = compile(textwrap.dedent(core(FUNCTION)), "core", "exec")
    assert compiled is not None  # still Python


def test_core_keeps_what_computes():
    # A check whose value is used is not left out; nor is a body of checks alone.
    text = "def g(n):\n    n = check_positive_int('n', n)\n    return n\n"
    assert core(text) == text
    only = "def h(n):\n    check_positive_int('n', n)\n"
    assert core(only) == only
    cls = 'class C:\n    """Doc."""\n\n    def m(self):\n        return 1\n'
    assert core(cls) == (
        "class C:\n    ...  # docstring: in the annotated source\n\n"
        "    def m(self):\n        return 1\n"
    )


def test_core_of_a_package_function_shows_fewer_lines_and_no_checks():
    whole = source_text("mixers.gmlp.GatedMLP")
    shown = core(whole)
    assert len(shown.splitlines()) < len(whole.splitlines())
    assert "check_positive_int(" not in shown and '"""' not in shown
    assert "self.sgu(z, token_mask, gate_residual" in shown
