"""mixers.source: the code a chapter's listing shows, taken from the installed package."""

import inspect
from pathlib import Path

import pytest

import mixers.feed_forward
from mixers.alibi import AlibiMultiHeadAttention, alibi_slopes
from mixers.source import show_source, source_text


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
