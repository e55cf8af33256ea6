"""mixers.tables: result tables as Markdown."""

import pytest

from mixers.tables import markdown_table


def test_a_table_has_a_header_a_rule_and_one_line_per_row():
    table = markdown_table(
        ["pair", "loss", "tokens/s"],
        [["attention+gelu", "1.935", "56,279"], ["gmlp", 1.73, None]],
    )
    assert table.data.splitlines() == [
        "| pair | loss | tokens/s |",
        "|:---|---:|---:|",
        "| attention+gelu | 1.935 | 56,279 |",
        "| gmlp | 1.73 | — |",
    ]


def test_pipes_in_cells_are_escaped_and_alignment_can_be_given():
    table = markdown_table(["a", "b"], [["x|y", "z"]], align="cr")
    assert table.data.splitlines()[1:] == ["|:---:|---:|", "| x\\|y | z |"]


def test_bad_rows_and_alignments_are_named():
    with pytest.raises(
        ValueError, match=r"rows\[1\] has 1 cells for 2 columns"
    ):
        markdown_table(["a", "b"], [[1, 2], [3]])
    with pytest.raises(ValueError, match="align"):
        markdown_table(["a", "b"], [[1, 2]], align="x")


def test_a_string_header_or_row_is_refused_instead_of_split_into_characters():
    """markdown_table("ab", [["x", "y"]]) made a table with columns 'a' and 'b'."""
    with pytest.raises(
        TypeError, match="header must be a sequence, not a str"
    ):
        markdown_table("ab", [["x", "y"]])
    with pytest.raises(
        TypeError, match="rows must be sequences of cells, not strs"
    ):
        markdown_table(["a", "b"], ["xy"])
    with pytest.raises(TypeError, match="rows must be a sequence, not a str"):
        markdown_table(["a"], "xyz")
    assert (
        markdown_table(("a", "b"), (("x", "y"),)).data.splitlines()[-1]
        == "| x | y |"
    )
