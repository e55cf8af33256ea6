"""The chapters run in the order a learner needs: none uses an idea that a
later chapter defines, unless it says that the idea comes later, and where.

The order is the table of contents' (``_toc.yml``). Each name below is
*introduced* by one chapter: a class or function of the package by the first
chapter that shows it in a listing (``literalinclude`` with ``:pyobject:``),
a term by the chapter whose sections define it (``TERMS``). An earlier
chapter may name it only in a sentence that links forward to that chapter (a
``{doc}`` link or a markdown link to it, or a ``{ref}``/``{numref}`` to one of
its labels). Its code cells, and the text they print, may not use it at all:
code cannot say "this comes later".

What is checked is the notebook's own text: its markdown and its code cells
with their printed outputs. The package's listings (the ``literalinclude``
directives, and the cells that show the same listing in Jupyter, tagged
``remove-cell``) are the package's text, read on its annotated pages.
"""

import json
import re
from pathlib import Path

import pytest
import yaml
from test_book import BOOK, ROOT, chapter_pages


def chapters() -> list[str]:
    """The chapters (notebooks) in the order of the table of contents."""
    return [Path(page).name for page in chapter_pages()]


def cells(chapter: str) -> list[dict]:
    path = BOOK / f"{chapter}.ipynb"
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def text_of(source) -> str:
    return source if isinstance(source, str) else "".join(source)


# Terms that a chapter's sections define, beyond the package names its
# listings show (which are found in the listings themselves). Each is a
# regular expression, matched case-sensitively; the chapter is the first, in
# the book's order, to define the idea.
TERMS = {
    "multi_head": [
        r"\b[Mm]ulti-head\b",
        r"key/value\s+cache",
        r"`KVCache`",
        r"\bFlashAttention\b",
        r"\b[Gg]rouped-query\b",
        r"\bmulti-query\b",
        r"`masked_fused_attention`",
        r"`fused_attention`",
    ],
    "baseline": [
        r"\b[Ll]anguage\s+models?\b",
        r"\b[Rr]otary\b",
        r"\bRoPE\b",
        r"`rotary_embedding`",
        r"`RotaryMultiHeadAttention`",
        r"\bpre-norm\b",
        r"\bbf16\b",
        r"\bautocast\b",
        r"`torch\.compile`",
        r"\bT4\b",
        r"\bFLOP\s+budget\b",
        r"`live_profile`",
        r"`lr_at`",
    ],
    "glu_variants": [
        r"\bGLU\b",
        r"\bSwiGLU\b",
        r"\bGEGLU\b",
        r"\bReGLU\b",
        r"\bswiglu\b",
        r"\bgeglu\b",
        r"\breglu\b",
        r"[Gg]ated\s+linear\s+unit",
        r"\bfeed_forward_variant\b",
    ],
    "gmlp": [
        r"\bgMLP\b",
        r"\baMLP\b",
        r"\bgmlp\b",
        r"\bamlp\b",
        r"Spatial\s+Gating\s+Unit",
        r"\bSGU\b",
        r"`GMLPBlock`",
        r"\bToeplitz\b",
    ],
    "alibi": [
        r"\bALiBi\b",
        r"\balibi\b",
        r"\bFlexAttention\b",
    ],
    "side_by_side": [r"\bsign-flip\b", r"\bHolm\b"],
    "cpu_timing": [],
}

# Package names shown in a listing of one chapter but introduced, in prose
# with a link to their source, by an earlier one: the listing of the later
# chapter is not where the reader first meets them.
INTRODUCED_IN_PROSE = {
    # the fused path of MultiHeadAttention (multi-head chapter), listed in
    # the appendix's kernel timings
    "fused_attention": "multi_head",
}

LISTING = re.compile(r"^:pyobject:\s*(\S+)", re.MULTILINE)
LABEL = re.compile(r"^\(([\w-]+)\)=", re.MULTILINE)
FIGURE_NAME = re.compile(r"^:name:\s*([\w-]+)", re.MULTILINE)


def listed_names(chapter: str) -> set[str]:
    """The package names a chapter's listings show (``Class.method`` gives
    ``Class``; private names are left out)."""
    names = set()
    for cell in cells(chapter):
        if cell["cell_type"] == "markdown":
            for obj in LISTING.findall(text_of(cell["source"])):
                name = obj.split(".")[0]
                if not name.startswith("_"):
                    names.add(name)
    return names


def labels(chapter: str) -> set[str]:
    """The targets a {ref} or {numref} can name in a chapter."""
    found = set()
    for cell in cells(chapter):
        source = text_of(cell["source"])
        if cell["cell_type"] == "markdown":
            found |= set(LABEL.findall(source)) | set(
                FIGURE_NAME.findall(source)
            )
        figure = cell.get("metadata", {}).get("mystnb", {}).get("figure")
        if figure and "name" in figure:
            found.add(figure["name"])
    return found


def introduced_by() -> dict[str, list[str]]:
    """Each later-defined idea, as regular expressions, by the chapter that
    introduces it."""
    order = chapters()
    patterns = {chapter: list(TERMS.get(chapter, [])) for chapter in order}
    seen = set(INTRODUCED_IN_PROSE)
    for name, chapter in INTRODUCED_IN_PROSE.items():
        patterns[chapter].append(rf"\b{re.escape(name)}\b")
    for chapter in order:
        for name in sorted(listed_names(chapter) - seen):
            patterns[chapter].append(rf"\b{re.escape(name)}\b")
            seen.add(name)
    return patterns


def links_to(chapter: str) -> re.Pattern:
    """A link to ``chapter``: {doc}, a markdown link, or a {ref}/{numref} to
    one of its labels."""
    targets = "|".join(re.escape(label) for label in sorted(labels(chapter)))
    parts = [
        rf"\{{doc\}}`(?:[^`<]*<)?{chapter}>?`",
        rf"\]\({chapter}\.(?:ipynb|md)(?:#[\w-]+)?\)",
    ]
    if targets:
        parts.append(rf"\{{(?:ref|numref)\}}`(?:[^`<]*<)?(?:{targets})>?`")
    return re.compile("|".join(parts))


# What a reader meets as one statement: a heading, a table row, a list item,
# or a sentence of a paragraph. Listings (directives), display maths and
# inline code blocks are not prose.
FENCE = re.compile(
    r"^(`{3,}|:{3,})\{(literalinclude|code-cell)\}.*?^\1\s*$",
    re.MULTILINE | re.DOTALL,
)
DISPLAY_MATH = re.compile(r"^\$\$.*?^\$\$\s*$", re.MULTILINE | re.DOTALL)
SENTENCE_END = re.compile(r"(?<=[.!?:;])\s+(?=[A-Z(*`{\[$])")


def statements(markdown: str) -> list[str]:
    markdown = FENCE.sub("", markdown)
    markdown = DISPLAY_MATH.sub(" $$ $$ ", markdown)
    found = []
    for block in re.split(r"\n\s*\n", markdown):
        lines, paragraph = [], []
        for line in block.splitlines():
            if re.match(r"\s*(#|\||:{3,}|[-*] |\d+\. |\(\S+\)=)", line):
                if paragraph:
                    lines.append(" ".join(paragraph))
                    paragraph = []
                lines.append(line)
            else:
                paragraph.append(line.strip())
        if paragraph:
            lines.append(" ".join(paragraph))
        for line in lines:
            found += SENTENCE_END.split(line)
    return [s for s in found if s.strip()]


def forward_uses(chapter: str) -> list[str]:
    """Where ``chapter`` uses an idea a later chapter introduces without a
    link to it: one message each."""
    order = chapters()
    later = order[order.index(chapter) + 1 :]
    patterns = introduced_by()
    # Code may call a later chapter's tool (its own listing, an import) where
    # the chapter's prose sends the reader to that chapter.
    linked = {
        target
        for target in later
        for cell in cells(chapter)
        if cell["cell_type"] == "markdown"
        and links_to(target).search(text_of(cell["source"]))
    }
    problems = []
    for index, cell in enumerate(cells(chapter)):
        source = text_of(cell["source"])
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell["cell_type"] == "markdown":
            pieces = [(s, True) for s in statements(source)]
        elif "remove-cell" in tags:  # a listing of the package, for Jupyter
            continue
        else:
            pieces = [(line, False) for line in source.splitlines()]
            for output in cell.get("outputs", []):
                printed = output.get("text") or output.get("data", {}).get(
                    "text/markdown", output.get("data", {}).get("text/plain")
                )
                if printed:
                    pieces += [
                        (line, False) for line in text_of(printed).splitlines()
                    ]
        for piece, is_prose in pieces:
            for target in later:
                for pattern in patterns[target]:
                    if not re.search(pattern, piece):
                        continue
                    if is_prose and links_to(target).search(piece):
                        continue
                    if not is_prose and target in linked:
                        continue
                    where = "prose" if is_prose else "code"
                    problems.append(
                        f"cell {index} ({where}) uses {pattern!r} of "
                        f"{target} without a link to it: {piece.strip()!r}"
                    )
    return problems


@pytest.mark.parametrize("chapter", chapters())
def test_no_chapter_uses_an_idea_a_later_chapter_defines_without_a_link(
    chapter,
):
    problems = forward_uses(chapter)
    assert not problems, "\n".join(problems)


def test_the_first_chapters_are_attention_multi_head_then_the_transformer():
    assert chapters()[:3] == ["attention", "multi_head", "baseline"]


def test_every_later_idea_is_found_where_it_is_said_to_be_introduced():
    # A term the map assigns to a chapter that never uses it would hold
    # nothing: each must occur in the text of the chapter that introduces it.
    for chapter, patterns in introduced_by().items():
        text = "\n".join(text_of(c["source"]) for c in cells(chapter))
        missing = [p for p in patterns if not re.search(p, text)]
        assert not missing, f"{chapter} never uses {missing}"


# The chapters' own numbers change with the order: a chapter refers to
# another chapter or to one of the book's figures by a link ({doc}, {ref},
# {numref}), never by "chapter 3" or "Fig. 3.1" typed out. (A paper's own
# sections and figures, "their §3.2.1", "the paper's Figure 1", are the
# paper's, and stay.)
TYPED_NUMBER = re.compile(r"\b[Cc]hapters? \d|\bFig\.\s?\d")


@pytest.mark.parametrize("chapter", chapters())
def test_no_chapter_types_out_the_number_of_a_chapter_section_or_figure(
    chapter,
):
    found = [
        match.group(0)
        for cell in cells(chapter)
        if cell["cell_type"] == "markdown"
        for match in TYPED_NUMBER.finditer(text_of(cell["source"]))
    ]
    assert not found, found


def test_the_intro_lists_the_chapters_in_the_books_order():
    intro = (BOOK / "intro.md").read_text(encoding="utf-8")
    section = intro.split("## The chapters", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| \[[^]]+\]\((\w+)\.ipynb\)", section, re.M)
    assert listed == chapters()


def test_the_intro_numbers_each_chapter_by_its_place_in_the_book():
    # "[3 the transformer](baseline.ipynb)": the number is the chapter's.
    intro = (BOOK / "intro.md").read_text(encoding="utf-8")
    numbered = re.findall(r"\[(\d+) [^]]*\]\((\w+)\.ipynb\)", intro)
    assert numbered, "the intro numbers no chapter"
    order = chapters()
    for number, chapter in numbered:
        assert int(number) == order.index(chapter) + 1, (number, chapter)


def test_each_chapter_points_next_to_the_chapter_that_follows_it():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    entries = [Path(entry["file"]).name for entry in toc["chapters"]]
    for chapter in chapters():
        last = text_of(cells(chapter)[-1]["source"])
        pointer = re.match(
            r"\*\*Next:\*\* \[[^\]]+\]\(([\w.]+)\.(?:ipynb|md)\)", last
        )
        assert pointer, f"{chapter} ends without a Next pointer: {last[:80]!r}"
        follows = entries[entries.index(chapter) + 1]
        assert pointer.group(1) == follows, (
            chapter,
            pointer.group(1),
            follows,
        )
