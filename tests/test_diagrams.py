"""The book's block diagrams (``mixers.diagrams``, ``book/figures/*.svg``).

- the committed files are exactly what the module draws now, so a picture
  never drifts from the package it shows;
- every name a picture labels exists: a name taken away makes the drawing
  fail;
- each file is a light, self-contained, accessible SVG (a title, a
  description, role="img", nothing loaded from anywhere), small enough for
  the text column, with no text under 9 px on a 390-px phone;
- the book's map numbers and names the chapters as the table of contents
  does;
- on the built site, every committed diagram is shown somewhere, and every
  diagram a page shows is shown at a width where its text is at least 9 px
  on a phone (``diagrams_unreadable``, run in tests/test_site.py's page
  load, which says how to build the site and when the browser tests skip).
"""

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from test_book import ROOT, chapter_pages, toc_files
from test_site import SITE, browser, unavailable  # noqa: F401

import mixers.alibi
import mixers.attention
import mixers.feed_forward
import mixers.gmlp
import mixers.model
from mixers import diagrams

FIGURES = ROOT / "book" / "figures"
SVG = "{http://www.w3.org/2000/svg}"
# The diagrams the book places (/work/coord/NOTES.md's list): each block the
# book studies, and the map.
BOOK_DIAGRAMS = {
    "attention",
    "multi_head",
    "causal_kv_cache",
    "transformer_block",
    "glu",
    "sgu",
    "gmlp_block",
    "alibi_bias",
    "block",
}
REGENERATE = "regenerate them: python -m mixers.diagrams book/figures"


@pytest.fixture(scope="module")
def drawn() -> dict[str, str]:
    """Every diagram, drawn now."""
    return {name: diagrams.draw(name) for name in diagrams.DIAGRAMS}


def test_the_book_has_every_diagram_with_its_caption_and_alt_text():
    assert BOOK_DIAGRAMS <= set(diagrams.DIAGRAMS)
    assert len(diagrams.DIAGRAMS) >= 9
    for table in ("TITLES", "CAPTIONS", "ALT", "DESCRIPTIONS"):
        assert set(getattr(diagrams, table)) == set(diagrams.DIAGRAMS), table
    committed = {path.stem for path in FIGURES.glob("*.svg")}
    assert committed == set(diagrams.DIAGRAMS), (
        f"book/figures holds {sorted(committed)}, the module draws"
        f" {sorted(diagrams.DIAGRAMS)}: {REGENERATE}"
    )


def test_the_committed_diagrams_are_what_the_package_draws_now(drawn):
    stale = [
        name
        for name, svg in drawn.items()
        if (FIGURES / f"{name}.svg").read_text(encoding="utf-8") != svg
    ]
    assert not stale, f"book/figures differs for {stale}: {REGENERATE}"


def test_the_command_writes_every_diagram(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mixers.diagrams", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    written = sorted(path.stem for path in tmp_path.glob("*.svg"))
    assert written == sorted(diagrams.DIAGRAMS), result.stdout
    for path in tmp_path.glob("*.svg"):
        assert path.read_text(encoding="utf-8") == (
            FIGURES / path.name
        ).read_text(encoding="utf-8")


def _without_submodule(monkeypatch, cls, name):
    """``cls`` builds without its submodule ``name`` (as if renamed)."""
    built = cls.__init__

    def init(self, *args, **kwargs):
        built(self, *args, **kwargs)
        delattr(self, name)

    monkeypatch.setattr(cls, "__init__", init)


# (diagram, what to take away, the name the error must give)
TAKEN_AWAY = [
    ("multi_head", (mixers.attention.MultiHeadAttention, "split_heads")),
    ("multi_head", (mixers.attention.MultiHeadAttention, "out_proj", True)),
    ("attention", (mixers.attention, "masked_softmax")),
    ("causal_kv_cache", (mixers.attention, "KVCache")),
    ("transformer_block", (mixers.model.Block, "norm_1", True)),
    ("glu", (mixers.feed_forward.FeedForward, "gate_proj", True)),
    ("sgu", (mixers.gmlp.SpatialGatingUnit, "spatial_weight")),
    ("gmlp_block", (mixers.gmlp.GatedMLP, "proj_in", True)),
    ("alibi_bias", (mixers.alibi, "alibi_slopes")),
    ("block", (mixers.model.Block, "channel_mixer", True)),
]


@pytest.mark.parametrize(
    "diagram, taken",
    TAKEN_AWAY,
    ids=lambda x: x if isinstance(x, str) else x[1],
)
def test_a_labelled_name_that_no_longer_exists_fails_the_drawing(
    monkeypatch, diagram, taken
):
    owner, name, *submodule = taken
    diagrams.draw(diagram)  # draws while the name exists
    if submodule:
        _without_submodule(monkeypatch, owner, name)
    else:
        monkeypatch.delattr(owner, name)
    with pytest.raises(LookupError, match=repr(name)):
        diagrams.draw(diagram)


def _parse(svg: str):
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def _font_size(element, parents) -> float:
    """An element's font-size, its own or the nearest ancestor's."""
    while element is not None:
        if "font-size" in element.attrib:
            return float(element.attrib["font-size"])
        element = parents.get(element)
    raise AssertionError("a text with no font-size")


def smallest_text(svg: str) -> float:
    """The smallest font-size of the SVG's texts, in its own units."""
    root = _parse(svg)
    parents = {child: parent for parent in root.iter() for child in parent}
    return min(
        _font_size(text, parents)
        for text in root.iter()
        if text.tag in (f"{SVG}text", f"{SVG}tspan")
    )


def view_box(svg: str) -> tuple[float, float]:
    """The width and height of the SVG's viewBox."""
    _, _, width, height = map(float, _parse(svg).attrib["viewBox"].split())
    return width, height


@pytest.mark.parametrize("name", sorted(BOOK_DIAGRAMS))
def test_each_diagram_is_an_accessible_self_contained_svg(name):
    svg = (FIGURES / f"{name}.svg").read_text(encoding="utf-8")
    root = _parse(svg)
    assert root.attrib.get("role") == "img"
    title, desc = root[0], root[1]
    assert title.tag == f"{SVG}title" and len(title.text.strip()) > 10
    assert desc.tag == f"{SVG}desc" and len(desc.text.strip()) > 100
    assert root.attrib.get("aria-labelledby") == "title desc"
    # nothing loaded from anywhere: no image, script, style import or link
    tags = {element.tag.removeprefix(SVG) for element in root.iter()}
    assert not tags & {"image", "script", "foreignObject", "use", "a"}, tags
    assert "@import" not in svg and "http" not in svg.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )
    for element in root.iter():
        for key, value in element.attrib.items():
            assert "href" not in key, (element.tag, key)
            for reference in re.findall(r"url\(([^)]*)\)", value):
                assert reference.startswith("#"), reference


@pytest.mark.parametrize("name", sorted(BOOK_DIAGRAMS))
def test_each_diagram_fits_the_column_and_is_legible_on_a_phone(name):
    svg = (FIGURES / f"{name}.svg").read_text(encoding="utf-8")
    root = _parse(svg)
    width, height = view_box(svg)
    # shown at its own size: the width and height attributes are the
    # viewBox's, at most 480 × 450 (a 688-px column shows it whole)
    assert (float(root.attrib["width"]), float(root.attrib["height"])) == (
        width,
        height,
    )
    assert width <= 480 and height <= 450, (width, height)
    # on a 390-px phone the 342-px column scales it by 342 / width
    shown = smallest_text(svg) * 342 / width
    assert shown >= 9, f"{name}: smallest text {shown:.1f} px on a phone"


def test_the_legibility_rule_is_enforced_while_drawing():
    drawing = diagrams.Drawing(480, 100, "t", "d")
    drawing.text(100, 50, "small", 11)
    with pytest.raises(ValueError, match="px on a phone"):
        drawing.svg()
    drawing = diagrams.Drawing(480, 100, "t", "d")
    drawing.text(100, 50, "one", 14)
    with pytest.raises(ValueError, match="overlaps"):
        drawing.text(110, 52, "two", 14)
    with pytest.raises(ValueError, match="runs off"):
        drawing.text(470, 50, "far right", 14, "start")
    with pytest.raises(ValueError, match="wider than its box"):
        drawing.box((10, 60, 40, 30), "#fff", "a long label")
    with pytest.raises(ValueError, match="at most"):
        diagrams.Drawing(700, 100, "t", "d")


def test_the_map_numbers_and_names_the_chapters_as_the_toc_does():
    chapters = diagrams.chapters(ROOT)
    notebooks = [Path(page).name for page in chapter_pages()]
    assert [name for _, name, _, _ in chapters] == notebooks
    assert [number for number, *_ in chapters] == list(
        range(1, len(notebooks) + 1)
    )
    texts = [
        text.text for text in _parse(diagrams.draw("block")).iter(f"{SVG}text")
    ]
    for number, _, title, _ in chapters:
        assert title in " ".join(texts)
        assert str(number) in texts


def test_the_pictures_sizes_come_from_the_package():
    from mixers.feed_forward import feed_forward_variant
    from mixers.train import PROFILES

    reference = PROFILES["cpu"].model
    multi_head = diagrams.draw("multi_head")
    d_head = reference["d_model"] // reference["n_heads"]
    assert f"d_model = {reference['d_model']}" in multi_head
    assert f"[batch, {reference['n_heads']}, seq, {d_head}]" in multi_head
    d_model = diagrams.chapter_model("glu_variants")["d_model"]
    d_ff = feed_forward_variant("swiglu", d_model).d_ff
    assert f"d_ff = {d_ff}" in diagrams.draw("glu")
    slopes = mixers.alibi.alibi_slopes(8)
    alibi = diagrams.draw("alibi_bias")
    assert f"1/{round(1 / slopes[-1].item())}" in alibi
    assert torch.equal(slopes, torch.tensor([2.0**-k for k in range(1, 9)]))


# ---------------------------------------------------------------------------
# Drawn by a browser, with its fonts

TEXT_BOXES = """() => [...document.querySelectorAll("text")].map(t => {
    const b = t.getBBox();
    return [t.textContent, b.x, b.y, b.width, b.height];
})"""


@pytest.mark.parametrize("name", sorted(BOOK_DIAGRAMS))
def test_in_a_browser_no_text_runs_off_or_onto_another(browser, name):  # noqa: F811
    """The drawing's checks estimate text widths; Chromium measures them:
    every text inside the picture, none on another (boxes shrunk by a
    fifth of their height, the blank above and below the glyphs)."""
    svg = (FIGURES / f"{name}.svg").read_text(encoding="utf-8")
    width, height = view_box(svg)
    page = browser.new_page()
    try:
        page.set_content(svg)
        boxes = page.evaluate(TEXT_BOXES)
    finally:
        page.close()
    assert len(boxes) >= 10, boxes  # the texts were found and measured
    problems = []
    for words, x, y, w, h in boxes:
        if x < 0 or y < 0 or x + w > width or y + h > height:
            problems.append(f"{words!r} runs off the picture")
    inked = [
        (words, x, y + h / 5, x + w, y + h - h / 5)
        for words, x, y, w, h in boxes
    ]
    for i, (a, x0, y0, x1, y1) in enumerate(inked):
        for b, u0, v0, u1, v1 in inked[i + 1 :]:
            if (
                min(x1, u1) - max(x0, u0) > 0.5
                and min(y1, v1) - max(y0, v0) > 0.5
            ):
                problems.append(f"{a!r} overlaps {b!r}")
    assert not problems, problems


# ---------------------------------------------------------------------------
# On the built site

# A diagram's file on the site: its name, then the digits Sphinx adds to a
# second copy (``block.svg``, ``block1.svg``). One pattern, read by Python and
# by the browser's JavaScript (the same syntax in both).
DIAGRAM_FILE = "(" + "|".join(map(re.escape, diagrams.DIAGRAMS)) + r")\d*\.svg"

SHOWN = """(pattern) => [...document.querySelectorAll("article img")]
    .map(img => [img.getAttribute("src").split("/").pop().split("?")[0],
                 img.getBoundingClientRect().width,
                 img.getBoundingClientRect().height])
    .filter(([file]) => new RegExp(`^${pattern}$`).test(file))"""


def diagrams_unreadable(page, width: str) -> list[str]:
    """Each diagram the page shows, as it is shown: at 390 px its smallest
    text is at least 9 px, at 1280 px it is at most 460 px tall.
    (tests/test_site.py runs it in its page load, on every page at both
    widths.)"""
    problems = []
    for file, shown, tall in page.evaluate(SHOWN, DIAGRAM_FILE):
        name = re.fullmatch(DIAGRAM_FILE, file)[1]
        svg = (FIGURES / f"{name}.svg").read_text(encoding="utf-8")
        text = smallest_text(svg) * shown / view_box(svg)[0]
        if width == "phone" and text < 9:
            problems.append(f"the diagram {name}: text {text:.1f} px at 390")
        if width == "desktop" and tall > 460:
            problems.append(f"the diagram {name}: {tall:.0f} px tall at 1280")
    return problems


IMAGE_OF_A_DIAGRAM = re.compile(r'<img [^>]*src="[^"]*/' + DIAGRAM_FILE + '"')


def test_every_committed_diagram_is_shown_on_a_page():
    """The count that says the diagrams are placed: every diagram of
    book/figures is an image on at least one page of the site (the chapters
    place them where their text introduces the block), so the site shows at
    least as many diagrams as are committed. (That each is shown, and
    legible, is diagrams_unreadable's check in the browser.)"""
    if not (SITE / "index.html").is_file():
        unavailable(f"no built site: {SITE / 'index.html'} is missing")
    shown = [
        name
        for path in toc_files()
        for name in IMAGE_OF_A_DIAGRAM.findall(
            (SITE / f"{path}.html").read_text(encoding="utf-8")
        )
    ]
    missing = sorted(set(diagrams.DIAGRAMS) - set(shown))
    assert len(shown) >= len(diagrams.DIAGRAMS) and not missing, (
        f"{len(shown)} diagram images on the site for"
        f" {len(diagrams.DIAGRAMS)} committed; not shown anywhere: {missing}"
    )
