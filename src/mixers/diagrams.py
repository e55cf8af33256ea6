r"""The book's block diagrams, drawn from the package itself.

A reader should see a block before reading its code, so every block the book
studies has a picture where the text introduces it: scaled dot-product
attention with its shapes, multi-head attention's split and merge, the causal
mask and the key/value cache, ALiBi's bias on the scores, a GLU unit, the
Spatial Gating Unit and the gMLP block around it, the pre-norm transformer
block, and the book's map. Each is drawn here, by code, as a small SVG file.

**Names and sizes come from the module a picture shows.** A box labelled
``up_proj`` is labelled by looking the name up on a ``FeedForward`` built for
the purpose; a width written as 160 is the reference model's ``d_model`` read
from ``mixers.train.PROFILES``; ALiBi's slopes are ``alibi_slopes`` itself,
and the shading of its bias is ``alibi_bias``'s output. A labelled name that
no longer exists raises ``LookupError``, so a renamed attribute breaks the
drawing (and its test) instead of leaving a picture that lies.

**Drawn for the text column and for a phone.** Each picture is at most
``MAX_WIDTH`` units wide and ``MAX_HEIGHT`` tall, written with its own width
and height, so a page shows it at its natural size in the 688-px column of a
wide screen; on a 390-px phone the column is ``PHONE_COLUMN`` = 342 px and
the picture scales down by 342 / width. No text may then be under
``SMALLEST_SHOWN`` = 9 px: :math:`\text{size} \cdot 342 / \text{width} \ge
9`, which ``Drawing.svg`` enforces, with text of 13 and 14 units in pictures
up to 480 wide. Each
picture has a ``<title>`` and a ``<desc>`` (its text alternative), loads
nothing from anywhere, and uses the colours of the book's map: blue for token
mixing, orange for channel mixing, grey for norms.

``python -m mixers.diagrams DIR`` writes every diagram to ``DIR/NAME.svg``;
the book's are ``book/figures/NAME.svg``, and ``tests/test_diagrams.py``
checks that they equal a fresh drawing. ``CAPTIONS`` and ``ALT`` hold a
caption and a text alternative for each, for the chapters that place them.
"""

from __future__ import annotations

import math
import re
import sys
from html import escape
from pathlib import Path

import torch

__all__ = [
    "DIAGRAMS",
    "TITLES",
    "CAPTIONS",
    "ALT",
    "DESCRIPTIONS",
    "Drawing",
    "draw",
    "write_all",
]

# -----------------------------------------------------------------------------
# Sizes, fonts and colours

#: The text column of a 390-px phone, in CSS pixels (measured on the built
#: site: 390 less the page's margins), and the smallest text (CSS px) a
#: picture may show there.
PHONE_COLUMN = 342
SMALLEST_SHOWN = 9
#: The largest picture, in user units (shown 1:1 on a wide page).
MAX_WIDTH, MAX_HEIGHT = 480, 450
#: Text sizes: body and second lines.
TEXT, SMALL = 14, 13

# The site's font stack (the theme's system-ui first), and code in monospace.
FONT = (
    "system-ui, -apple-system, 'Segoe UI', 'DejaVu Sans', Helvetica, Arial,"
    " sans-serif"
)
MONO = "'DejaVu Sans Mono', Menlo, Consolas, monospace"

INK, LINE, MUTED = "#1a1a1a", "#333333", "#555555"
TOKEN, CHANNEL, NORM, PAPER = "#dbe9f6", "#fde3c8", "#eeeeee", "#ffffff"
BLUE, ORANGE, GREY = "#2b6cb0", "#c05621", "#777777"
NEW = "#f6ad55"  # what one decoding step adds
MASKED = "#d9d9d9"  # a score that may not be read
# One light fill per head, told apart by lightness as well as hue.
HEADS = ("#bee3f8", "#fbd38d", "#c6f6d5", "#e9d8fd", "#fed7e2", "#feebc8")

# Widths of characters in em, DejaVu Sans's (the widest common sans): an upper
# bound for the fonts the stack picks, used to keep text inside its box.
_NARROW = set("iljtfrI.,:;'|!()[]{} ·")
_WIDE = set("mwMW@%⊙⊕×")


def text_width(text: str, size: float, mono: bool = False) -> float:
    """The width of ``text`` at ``size``, estimated generously."""
    if mono:
        return 0.61 * size * len(text)
    ems = 0.0
    for c in text:
        if c in _NARROW:
            ems += 0.36
        elif c in _WIDE:
            ems += 0.92
        elif c.isupper() or c.isdigit():
            ems += 0.7
        else:
            ems += 0.61
    return ems * size


# -----------------------------------------------------------------------------
# Names from the package


def has(owner, *names: str) -> list[str]:
    """``names``, after checking that ``owner`` (a module, a class or an
    instance of the package) has each: a picture labels only names that
    exist. A missing one raises ``LookupError``, naming it."""
    what = getattr(owner, "__name__", type(owner).__name__)
    for name in names:
        if not hasattr(owner, name):
            raise LookupError(
                f"{what} has no {name!r}, which a diagram labels: redraw the"
                " diagram (src/mixers/diagrams.py) to match the package"
            )
    return list(names)


def part(owner, name: str):
    """``owner``'s attribute ``name``, checked by ``has``."""
    return getattr(owner, has(owner, name)[0])


def kind(instance) -> str:
    """The class name of a package object, as a label."""
    return type(instance).__name__


def reference_model() -> dict:
    """The reference model's ``ModelConfig`` fields: the ``cpu`` profile of
    ``mixers.train``, the book's baseline transformer."""
    from .train import PROFILES

    return dict(PROFILES["cpu"].model)


def chapter_model(experiment: str) -> dict:
    """The ``ModelConfig`` fields of an experiment's ``cpu`` profile (the
    model its chapter trains)."""
    import importlib

    module = importlib.import_module(f"mixers.experiments.{experiment}")
    return dict(module.SETTINGS["cpu"]["model"])


# -----------------------------------------------------------------------------
# The drawing: boxes, arrows and labels, checked as they are placed

# Styles of labels: code in monospace, asides in grey, emphasis in bold.
CODE, QUIET, BOLD = {"mono": True}, {"colour": MUTED}, {"bold": True}


class Drawing:
    """An SVG picture of ``width`` × ``height`` units, built element by
    element. Every text is placed inside the canvas and inside its box (by
    ``text_width``'s estimate) and on top of no other text, and ``svg()``
    refuses a picture whose smallest text would be under
    ``SMALLEST_SHOWN`` px on a phone."""

    def __init__(self, width: int, height: int, title: str, desc: str):
        if not (width <= MAX_WIDTH and height <= MAX_HEIGHT):
            raise ValueError(
                f"a diagram is at most {MAX_WIDTH} × {MAX_HEIGHT}, got"
                f" {width} × {height}"
            )
        self.width, self.height = width, height
        self.title, self.desc = title, desc
        self.parts: list[str] = []
        self.texts: list[tuple[float, float, float, float, str]] = []

    def text(self, x, y, words, size=TEXT, anchor="middle", **style):
        """``words`` with its baseline at ``y``; ``anchor`` start, middle or
        end at ``x``. ``style``: ``bold``, ``mono``, ``colour``."""
        mono = style.get("mono", False)
        width = text_width(words, size, mono)
        left = x - {"start": 0, "middle": width / 2, "end": width}[anchor]
        self._place(left, y - 0.8 * size, width, size, words)
        attributes = [f'x="{x:g}" y="{y:g}" font-size="{size:g}"']
        if anchor != "start":
            attributes.append(f'text-anchor="{anchor}"')
        if style.get("bold"):
            attributes.append('font-weight="bold"')
        if mono:
            attributes.append(f'font-family="{MONO}"')
        if style.get("colour", INK) != INK:
            attributes.append(f'fill="{style["colour"]}"')
        self.parts.append(
            f"<text {' '.join(attributes)}>{escape(words)}</text>"
        )

    def _place(self, left, top, width, height, words):
        """Records a text's box; refuses one outside the canvas or on top of
        another text."""
        right, bottom = left + width, top + height
        if left < 0 or top < 0 or right > self.width or bottom > self.height:
            raise ValueError(f"{words!r} runs off the {self.title!r} canvas")
        for a, b, c, d, other in self.texts:
            if left < c and a < right and top < d and b < bottom:
                raise ValueError(f"{words!r} overlaps {other!r}")
        self.texts.append((left, top, right, bottom, words))

    def rect(self, at, fill, stroke=LINE, radius=0, **extra):
        """A rectangle ``at`` ``(x, y, width, height)``; ``extra``
        attributes as given (``stroke_width`` -> ``stroke-width``)."""
        x, y, w, h = at
        attributes = "".join(
            f' {key.replace("_", "-")}="{value}"'
            for key, value in extra.items()
        )
        if radius:
            attributes += f' rx="{radius}"'
        self.parts.append(
            f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}"'
            f' fill="{fill}" stroke="{stroke}"{attributes}/>'
        )

    def box(self, at, fill, *lines):
        """A rounded box ``at`` ``(x, y, width, height)`` with ``lines``
        centred in it: the first in ``TEXT`` (bold if there are more), the
        others in ``SMALL``; a line is a string or ``(string, style)``."""
        x, y, w, h = at
        self.rect(at, fill, radius=7, stroke_width=1.4)
        sizes = [TEXT] + [SMALL] * (len(lines) - 1)
        baseline = y + (h - 1.25 * sum(sizes)) / 2 - 0.25 * TEXT
        for i, (line, size) in enumerate(zip(lines, sizes)):
            words, style = (line, {}) if isinstance(line, str) else line
            style = {"bold": i == 0 and len(lines) > 1, **style}
            if text_width(words, size, style.get("mono", False)) > w - 10:
                raise ValueError(f"{words!r} is wider than its box")
            baseline += 1.25 * size
            self.text(x + w / 2, baseline - 0.2 * size, words, size, **style)

    def arrow(self, *points, colour=LINE, head=True):
        """A polyline through ``points``, ending in an arrowhead."""
        path = " L ".join(f"{x:g} {y:g}" for x, y in points)
        marker = f' marker-end="url(#head-{colour[1:]})"' if head else ""
        self.parts.append(
            f'<path d="M {path}" fill="none" stroke="{colour}"'
            f' stroke-width="1.6"{marker}/>'
        )

    def circle(self, x, y, r, fill, stroke="none"):
        """A circle centred at ``(x, y)``."""
        self.parts.append(
            f'<circle cx="{x:g}" cy="{y:g}" r="{r:g}" fill="{fill}"'
            f' stroke="{stroke}" stroke-width="1.5"/>'
        )

    def op(self, x, y, symbol):
        """An operation in a circle: ``+`` (a residual sum), ``⊙``."""
        self.circle(x, y, 11, PAPER, LINE)
        self.text(x, y + 5.5, symbol, 16)

    def badge(self, x, y, number, colour):
        """A chapter's number in a filled circle centred at ``(x, y)``."""
        self.circle(x, y, 10.5, colour)
        self.text(x, y + 4.6, str(number), SMALL, bold=True, colour=PAPER)

    def svg(self) -> str:
        """The picture as an SVG document (checked for legibility)."""
        smallest = min(bottom - top for _, top, _, bottom, _ in self.texts)
        shown = smallest * PHONE_COLUMN / self.width
        if shown < SMALLEST_SHOWN:
            raise ValueError(
                f"{self.title!r}: text of {smallest:g} units in a"
                f" {self.width}-wide picture is {shown:.1f} px on a phone"
                f" (at least {SMALLEST_SHOWN})"
            )
        body = "\n".join(self.parts)
        markers = "".join(
            f'<marker id="head-{c}" viewBox="0 0 10 10" refX="9" refY="5"'
            ' markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
            f'<path d="M 0 0 L 10 5 L 0 10 z" fill="#{c}"/></marker>'
            for c in sorted(set(re.findall(r"url\(#head-(\w+)\)", body)))
        )
        w, h = self.width, self.height
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}"'
            f' width="{w}" height="{h}" role="img"'
            ' aria-labelledby="title desc"'
            f' font-family="{FONT}" font-size="{TEXT}" fill="{INK}">\n'
            f'<title id="title">{escape(self.title)}</title>\n'
            f'<desc id="desc">{escape(self.desc)}</desc>\n'
            f"<defs>{markers}</defs>\n"
            f'<rect width="{w}" height="{h}" fill="{PAPER}"/>\n'
            f"{body}\n</svg>\n"
        )


def shade(value: float, colour: str = BLUE) -> str:
    """A fill between white (``value`` 0) and ``colour`` (``value`` 1)."""
    value = min(1.0, max(0.0, float(value)))
    channels = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    mixed = [round(255 + (c - 255) * value) for c in channels]
    return "#" + "".join(f"{c:02x}" for c in mixed)


def grid(d, x, y, cell, values, allowed=None, outline=None):
    """A matrix of cells at ``(x, y)``: ``values`` ``[rows, cols]`` in
    [0, 1] shade them, ``allowed`` (bool, same shape) greys out the cells
    that may not be read; row ``outline`` gets a thick orange border."""
    rows, cols = values.shape
    for i in range(rows):
        for j in range(cols):
            ok = allowed is None or bool(allowed[i, j])
            fill = shade(values[i, j]) if ok else MASKED
            d.rect((x + j * cell, y + i * cell, cell, cell), fill, PAPER)
    d.rect((x, y, cols * cell, rows * cell), "none")
    if outline is not None:
        row = (x, y + outline * cell, cols * cell, cell)
        d.rect(row, "none", ORANGE, stroke_width=2.5)


def down(d, x, top, bottom, head=True):
    """A vertical arrow (or line) at ``x`` from ``top`` to ``bottom``."""
    d.arrow((x, top), (x, bottom), head=head)


def stack(d, x, y, w, steps, gap=16, height=46):
    """Boxes ``w`` wide one under another from ``y``, joined by arrows:
    ``steps`` are ``(fill, lines)``; returns the bottom of the last."""
    for i, (fill, lines) in enumerate(steps):
        if i:
            down(d, x + w / 2, y - gap, y)
        d.box((x, y, w, height), fill, *lines)
        y += height + gap
    return y - gap


def residual(d, x, fork, join, side):
    """The skip connection: from the fork at ``(x, fork)`` out to ``side``,
    down, and into the ``+`` at ``(x, join)``."""
    d.arrow((x, fork), (side, fork), (side, join), (x + 12, join))
    d.circle(x, fork, 3, LINE)


# -----------------------------------------------------------------------------
# Titles, captions and text alternatives

#: Each diagram's title (the SVG's ``<title>``).
TITLES = {
    "attention": "Scaled dot-product attention",
    "multi_head": "Multi-head attention: split into heads and merged",
    "causal_kv_cache": "The causal mask and the key/value cache",
    "transformer_block": "The pre-norm transformer block",
    "glu": "A gated linear unit (GLU) feed-forward",
    "sgu": "The Spatial Gating Unit",
    "gmlp_block": "The gMLP block",
    "alibi_bias": "ALiBi: a bias on the scores, one slope per head",
    "block": "The book in one picture",
}

#: A caption for each diagram, for the chapter that places it.
CAPTIONS = {
    "attention": "Scaled dot-product attention, step by step, with the"
    " shapes of dot_product_attention; beside the steps, a 5 × 5"
    " example it computes: the scores, the same with the future masked,"
    " the weights.",
    "multi_head": "Multi-head attention in the reference model: one"
    " projection, its output cut into 5 heads of 32 channels, attention"
    " in every head at once, the heads put side by side again and mixed"
    " by out_proj.",
    "causal_kv_cache": "Top: the causal mask; training computes every"
    " row, a decoding step only the newest. Bottom: that step in one"
    " layer. The cache keeps the keys and values of past positions; the"
    " new token adds its own and reads them all with one query.",
    "transformer_block": "The pre-norm block of the reference model: each"
    " mixer reads a normalised copy of the residual stream and adds its"
    " output back to it.",
    "glu": "A gated feed-forward (SwiGLU here): the gate branch goes"
    " through the activation, the linear branch does not, and their"
    " product is projected back. The variants differ only in the"
    " activation.",
    "sgu": "The Spatial Gating Unit of the gMLP chapter's model: half of"
    " the channels, normalised and mixed along the sequence by a learned,"
    " causal W, gates the other half.",
    "gmlp_block": "The gMLP block: the Spatial Gating Unit between two"
    " channel projections, with a pre-norm and a residual; one block does"
    " the work of attention and the feed-forward.",
    "alibi_bias": "ALiBi: each head subtracts m_h times the distance from"
    " its scores before the softmax. The slopes are fixed, one per head,"
    " from steep (neighbours only) to flat (far back).",
    "block": "The book in one picture. Every block is a token mixer and a"
    " channel mixer, each after a LayerNorm and inside a residual"
    " connection; each chapter studies one part, and the last ones"
    " compare every pair.",
}

#: Short text alternatives (a figure's ``:alt:``); the SVG's ``<desc>``
#: is the long one, with the sizes.
ALT = {
    "attention": "A flow chart of attention: Q and K give scores, which"
    " are scaled, masked and softmaxed into weights that multiply V; small"
    " heat maps show an example's scores, masked scores and weights.",
    "multi_head": "A diagram: in_proj makes Q, K and V; Q's 160 channels"
    " are cut into 5 coloured slices of 32, one per head; attention runs"
    " in every head at once; the slices are joined and out_proj mixes"
    " them.",
    "causal_kv_cache": "A lower-triangular 6 by 6 mask with its last row"
    " outlined, then one decoding step: a new query row times the cached"
    " keys, with the new key appended, gives one row of scores; its"
    " weights times the cached values give one output row.",
    "transformer_block": "A block: LayerNorm, multi-head attention and a"
    " residual sum, then LayerNorm, a GELU feed-forward and a second"
    " residual sum, repeated 4 times.",
    "glu": "Two branches from x: gate_proj through the activation, and"
    " up_proj alone; their elementwise product goes through down_proj.",
    "sgu": "Z splits into Z1 and Z2; Z2 is normalised and multiplied"
    " along the sequence by a lower-triangular W plus a bias; the result"
    " multiplies Z1 elementwise.",
    "gmlp_block": "A block: LayerNorm, proj_in with GELU, the Spatial"
    " Gating Unit, proj_out, and a residual sum.",
    "alibi_bias": "A 6 by 6 causal score grid minus a grid of distances"
    " i minus j, then 8 small triangles, one per head, shaded by how much"
    " their bias lowers the weights, with slopes 1/2 down to 1/256.",
    "block": "One block: LayerNorm then a token mixer inside a residual"
    " connection, then LayerNorm then a channel mixer inside another, in"
    " a frame repeated N times; numbered chapters sit on the part they"
    " study.",
}

#: Each diagram's long text alternative (the SVG's ``<desc>``); its
#: ``{fields}`` are the sizes and names the picture shows.
DESCRIPTIONS = {
    "attention": "Q of shape [batch, q_len, d_k] and K of shape [batch,"
    " k_len, d_k] give the scores Q K transposed, [batch, q_len, k_len];"
    " they are multiplied by 1 over the square root of d_k, set to minus"
    " infinity where the mask forbids reading (causal: key j after query"
    " i), turned into weights by a softmax over the keys, each row summing"
    " to 1, and the weights multiply V, [batch, k_len, d_v], giving the"
    " output [batch, q_len, d_v]. Beside the steps, a 5 by 5 example"
    " computed by dot_product_attention: its scores, the masked scores"
    " with the future greyed out, and the weights.",
    "multi_head": "x of shape [batch, seq, {d_model}] goes through in_proj,"
    " one Linear({d_model} to 3 times {d_model}) whose rows are q_proj,"
    " k_proj and v_proj. Q (and K and V alike) is cut into {heads} slices"
    " of {d_head} channels, one per head: split_heads reshapes it to"
    " [batch, {heads}, seq, {d_head}], the heads a batch dimension."
    " Scaled dot-product attention runs in every head at once; merge_heads"
    " puts the heads' outputs side by side again, [batch, seq, {d_model}],"
    " and out_proj, Linear({d_model} to {d_model}), mixes them. Sizes of"
    " the book's reference model.",
    "causal_kv_cache": "Top: the causal mask of 6 positions, a 6 by 6 grid"
    " whose cells on and below the diagonal are allowed (query i reads"
    " keys j up to i) and whose cells above it are greyed out; training"
    " computes every row at once, and one decoding step computes only the"
    " newest row, outlined. Bottom: one decoding step at position 5 in a"
    " layer. Only the new token is projected, to q5, k5 and v5;"
    " KVCache.extend appends k5 and v5 to the keys and values kept from"
    " positions 0 to 4. q5 times K transposed gives one row of 6 scores;"
    " their softmax, the weights, times V gives one output row. Kept per"
    " layer: K and V of every past position.",
    "transformer_block": "x, [batch, seq, {d_model}], from the token"
    " embedding plus positions, enters a block: norm_1, a LayerNorm, then"
    " the token mixer ({mixer}, {heads} heads), whose output is added to x"
    " (a residual connection); then norm_2 and the channel mixer ({ff},"
    " {activation}, d_ff = {d_ff}), whose output is added again. The"
    " reference model stacks {layers} such blocks, then final_norm and the"
    " head give the logits.",
    "glu": "x, [batch, seq, {d_model}], takes two branches: gate_proj, x W,"
    " to d_ff = {d_ff}, through the activation f (the gate); and up_proj,"
    " x V, to {d_ff}, with no activation. Their elementwise product h,"
    " [batch, seq, {d_ff}], goes through down_proj, W2, back to"
    " {d_model}. The gated variants differ in f only: {variants}.",
    "sgu": "{unit}: Z, [batch, seq, d_z = {d_z}], is split along its"
    " channels into Z1 and Z2, each [batch, seq, {half}]. Z2 is normalised"
    " (norm, a LayerNorm) and mixed along the sequence: W times norm(Z2)"
    " plus b, with weight W of {seq} by {seq}, lower triangular (causal:"
    " position i reads positions j up to i), and bias b of {seq}. The"
    " result gates Z1 elementwise: s(Z) = Z1 times (W norm(Z2) + b),"
    " [batch, seq, {half}].",
    "gmlp_block": "{block}: x, [batch, seq, {d_model}], is normalised"
    " (norm, a LayerNorm), projected by proj_in, U, to d_ffn = {d_ffn}"
    " channels, passed through {activation}, then through sgu, the Spatial"
    " Gating Unit, which mixes positions and halves the channels to"
    " {half}; proj_out, V, projects back to {d_model}, and the result is"
    " added to x (a residual connection). The mlp, a GatedMLP, mixes"
    " channels and tokens: the block replaces both attention and the"
    " feed-forward.",
    "alibi_bias": "Top: in each head, the scores q_i dot k_j over the"
    " square root of d_head (a 6 by 6 causal grid, the future greyed out)"
    " minus m_h times (i minus j), where i minus j is the distance from the"
    " query back to the key, 0 on the diagonal and up to 5; the sum goes"
    " into the softmax. Bottom: the {heads} heads of the ALiBi chapter's"
    " model and their fixed slopes m_h, {slopes} (alibi_slopes); each"
    " head's triangle is shaded by how much its bias shrinks a key's"
    " weight, from none on the diagonal to nearly all far back in the"
    " steep heads, and hardly any in the flat ones.",
    "block": "One block of the model: a LayerNorm then the token mixer,"
    " which moves information between positions, inside a residual"
    " connection; then a LayerNorm and the channel mixer, which transforms"
    " each position on its own, inside another; the block is repeated N"
    " times between the embeddings and the logits. The chapters:"
    " {chapters}.",
}


def _drawing(name: str, width: int, height: int, **fields) -> Drawing:
    """A new ``Drawing`` for diagram ``name``, its title and description
    from the tables above (``fields`` fill in the description)."""
    return Drawing(
        width, height, TITLES[name], DESCRIPTIONS[name].format(**fields)
    )


# -----------------------------------------------------------------------------
# The diagrams, one function each


def attention() -> Drawing:
    """Scaled dot-product attention, step by step, with the shapes that
    ``dot_product_attention`` documents."""
    from . import attention as module

    has(module, "dot_product_attention", "score_scale", "masked_softmax")
    for dim in ("q_len", "k_len", "d_k", "d_v"):
        if dim not in module.dot_product_attention.__doc__:
            raise LookupError(f"dot_product_attention's doc lost {dim!r}")
    d = _drawing("attention", 480, 410)
    d.box((20, 8, 150, 46), PAPER, "Q", "[batch, q_len, d_k]")
    d.box((190, 8, 150, 46), PAPER, "K", "[batch, k_len, d_k]")
    d.arrow((95, 54), (95, 64), (160, 64), (160, 76))
    d.arrow((265, 54), (265, 64), (200, 64), (200, 76))
    steps = [
        ("scores = Q Kᵀ", "[batch, q_len, k_len]"),
        ("× 1/√d_k", "score_scale: keeps scores O(1)"),
        (
            "mask: −∞ where reading is barred",
            "True = may attend; causal: j ≤ i",
        ),
        ("softmax over the keys", "masked_softmax: rows sum to 1"),
        ("weights · V", "output [batch, q_len, d_v]"),
    ]
    bottom = stack(d, 20, 76, 320, [(TOKEN, lines) for lines in steps])
    d.box((358, 324, 114, 46), PAPER, "V", "[…, k_len, d_v]")
    d.arrow((358, 347), (342, 347))
    down(d, 180, bottom, bottom + 14)
    note = "each query: a weighted mean of the values"
    d.text(180, bottom + 30, note, SMALL, **QUIET)
    _attention_example(d, module)
    return d


def _attention_example(d, module):
    """Three 5 × 5 thumbnails beside the steps: an example's scores, the
    same masked, and its weights, computed by ``dot_product_attention``."""
    generator = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(3, 5, 4, generator=generator)
    mask = module.causal_mask(5, 5)
    _, weights = module.dot_product_attention(q, k, v, mask=mask)
    scores = (q @ k.T) * module.score_scale(q)
    level = (scores - scores.min()) / (scores.max() - scores.min())
    d.text(415, 26, "a 5 × 5", SMALL, **QUIET)
    d.text(415, 44, "example", SMALL, **QUIET)
    grid(d, 390, 74, 10, level)
    grid(d, 390, 198, 10, level, allowed=mask)
    grid(d, 390, 260, 10, weights, allowed=mask)


def multi_head() -> Drawing:
    """Multi-head attention: one projection, split into heads, attention in
    every head at once, merged, projected out; the reference model's
    sizes."""
    from .attention import MultiHeadAttention

    config = reference_model()
    layer = MultiHeadAttention(config["d_model"], config["n_heads"])
    fused, *rows = has(layer, "in_proj", "q_proj", "k_proj", "v_proj")
    split, merge, out = has(layer, "split_heads", "merge_heads", "out_proj")
    d_model, heads, d_head = layer.d_model, layer.n_heads, layer.d_head
    sizes = dict(d_model=d_model, heads=heads, d_head=d_head)
    d = _drawing("multi_head", 480, 450, **sizes)
    d.text(240, 18, f"x  [batch, seq, d_model = {d_model}]")
    down(d, 240, 26, 40)
    widths = _linear(layer.in_proj, "Linear({} → {}")
    projection = f"{fused}: {widths} = 3 · {d_model})"
    rows = (f"{', '.join(rows)}: its rows", CODE)
    d.box((60, 40, 360, 46), CHANNEL, projection, rows)
    down(d, 240, 86, 104)
    d.text(252, 100, "Q  (K and V alike)", SMALL, "start", **QUIET)
    slices = _head_bars(d, 108, heads, d_head, "Q")
    shape = f"[batch, {heads}, seq, {d_head}]"
    d.text(240, 152, f"{split}: {shape}", SMALL, **CODE)
    centres = _head_boxes(d, slices, 180)
    attend = f"softmax(Q Kᵀ / √{d_head}) V, every head at once"
    batched = f"{shape}: the heads are a batch dim"
    d.box((20, 232, 440, 46), TOKEN, attend, batched)
    for centre, bar in zip(centres, slices):
        d.arrow((centre, 278), (bar, 310))
    _head_bars(d, 310, heads, d_head, "out")
    joined = f"{merge}: heads side by side, [batch, seq, {d_model}]"
    d.text(240, 354, joined, SMALL, **CODE)
    down(d, 240, 362, 380)
    mix = f"{out}: {_linear(layer.out_proj)}"
    d.box((60, 380, 360, 46), CHANNEL, mix, "mixes the heads")
    return d


def _linear(layer, form: str = "Linear({} → {})") -> str:
    """A ``Linear`` layer's widths, read from the layer, in ``form``."""
    return form.format(layer.in_features, layer.out_features)


def _head_bars(d, y, heads, d_head, label):
    """A ``[..., d_model]`` row cut into ``heads`` coloured slices of
    ``d_head`` channels; returns the slices' centres."""
    width = min(64, 320 / heads)
    left = 240 - heads * width / 2
    d.text(left - 8, y + 17, label, TEXT, "end", bold=True)
    centres = []
    for h in range(heads):
        x = left + h * width
        d.rect((x, y, width, 24), HEADS[h % len(HEADS)])
        d.text(x + width / 2, y + 17, str(d_head), SMALL)
        centres.append(x + width / 2)
    return centres


def _head_boxes(d, slices, y):
    """One box per head under the slices, joined to them and to the
    attention below; returns the boxes' centres."""
    heads = len(slices)
    width = min(84, 440 / heads - 8)
    start = 240 - (heads * (width + 8) - 8) / 2
    centres = []
    for h, bar in enumerate(slices):
        left = start + h * (width + 8)
        d.arrow((bar, 160), (left + width / 2, y))
        d.box((left, y, width, 32), HEADS[h % len(HEADS)], f"head {h + 1}")
        down(d, left + width / 2, y + 32, y + 52)
        centres.append(left + width / 2)
    return centres


def causal_kv_cache() -> Drawing:
    """The causal mask, and what one decoding step keeps and computes."""
    import inspect

    from . import attention as module

    cache = part(module, "KVCache")()
    names = has(cache, "k", "v", "extend")
    layer = part(module, "MultiHeadAttention")
    if "cache" not in inspect.signature(layer.forward).parameters:
        raise LookupError("MultiHeadAttention.forward takes no cache")
    d = _drawing("causal_kv_cache", 480, 446)
    _causal_mask_panel(d, module)
    _decoding_step_panel(d, names)
    return d


def _causal_mask_panel(d, module):
    """The 6 × 6 causal mask with its last row outlined, and what it
    means."""
    mask = part(module, "causal_mask")(6, 6)
    title = "The causal mask: query i reads keys j ≤ i"
    d.text(20, 20, title, TEXT, "start", **BOLD)
    d.text(150, 44, "key j", SMALL, **QUIET)
    d.text(82, 114, "query i", SMALL, "end", **QUIET)
    grid(d, 90, 52, 20, torch.full((6, 6), 0.35), allowed=mask, outline=5)
    d.text(232, 72, "causal_mask(q_len, k_len)", SMALL, "start", **CODE)
    d.text(232, 94, "True (blue): may attend", SMALL, "start")
    d.text(232, 116, "training: every row at once", SMALL, "start")
    step = "← one decoding step: one row"
    d.text(232, 166, step, SMALL, "start", colour=ORANGE, bold=True)


# The cache's rows kept from earlier steps; one row of a tensor is
# ``CELL`` units and a head's width ``DEPTH``.
KEPT, CELL, DEPTH = "#cbd5e0", 16, 48


def _decoding_step_panel(d, names):
    """q · Kᵀ = one row of scores; weights · V = one output row: the
    cache's kept rows grey, this step's orange."""
    k, v, extend = names
    title = "One decoding step (t = 5), in every layer"
    d.text(20, 206, title, TEXT, "start", **BOLD)
    new = "only the new token is projected: q₅, k₅, v₅"
    d.text(20, 228, new, SMALL, "start", **QUIET)
    # q5 [1, d] · K^T [d, 6] = scores [1, 6]
    d.text(44, 256, "q₅", SMALL)
    d.rect((20, 262, DEPTH, CELL), NEW)
    d.text(84, 276, "·", 18)
    for j in range(6):
        fill = NEW if j == 5 else KEPT
        d.rect((100 + j * CELL, 246, CELL, DEPTH), fill, PAPER)
    d.text(148, 310, f"Kᵀ: KVCache.{k}", SMALL, **CODE)
    d.text(214, 276, "=", 16)
    d.rect((230, 262, 6 * CELL, CELL), TOKEN, ORANGE, stroke_width=2.5)
    d.text(278, 256, "6 scores", SMALL)
    d.arrow((278, 280), (278, 322), (68, 322), (68, 366))
    d.text(290, 318, "softmax", SMALL, "start")
    _weights_times_values(d, v)
    d.rect((250, 400, 14, 14), NEW, "none")
    d.text(270, 412, f"new: KVCache.{extend}", SMALL, "start", **CODE)
    d.rect((250, 420, 14, 14), KEPT, "none")
    d.text(270, 432, "kept from steps 0–4", SMALL, "start")


def _weights_times_values(d, v):
    """weights [1, 6] · V [6, d] = out [1, d]."""
    scores = torch.tensor([0.2, 0.5, 0.1, 0.9, 0.4, 1.6])
    for j, weight in enumerate(torch.softmax(scores, 0)):
        d.rect((20 + j * CELL, 370, CELL, CELL), shade(2 * weight))
    d.text(68, 404, "weights", SMALL)
    d.text(128, 384, "·", 18)
    for i in range(6):
        fill = NEW if i == 5 else KEPT
        d.rect((144, 330 + i * CELL, DEPTH, CELL), fill, PAPER)
    d.text(200, 384, f"V: KVCache.{v}", SMALL, "start", **CODE)
    d.text(344, 384, "=", 16)
    d.rect((360, 370, DEPTH, CELL), TOKEN)
    d.text(384, 364, "out₅", SMALL)


def transformer_block() -> Drawing:
    """The pre-norm block: norm, token mixer, residual; norm, channel mixer,
    residual; the reference model's."""
    from .model import LanguageModel, ModelConfig

    config = reference_model()
    model = LanguageModel(ModelConfig(vocab_size=65, **config))
    has(model, "token_embedding", "positions", "final_norm", "head")
    block = model.blocks[0]
    norm_1, token, norm_2, channel = has(
        block, "norm_1", "token_mixer", "norm_2", "channel_mixer"
    )
    mixer, ff, layers = block.token_mixer, block.channel_mixer, "n_layers"
    act = kind(part(ff, "activation"))
    sizes = dict(d_model=config["d_model"], mixer=kind(mixer), ff=kind(ff))
    sizes.update(heads=mixer.n_heads, activation=act, d_ff=ff.d_ff)
    d = _drawing("transformer_block", 440, 424, layers=config[layers], **sizes)
    d.text(220, 16, "x = token_embedding + positions", SMALL, **CODE)
    frame = (20, 30, 410, 348)
    d.rect(frame, "none", GREY, radius=10, stroke_dasharray="6 4")
    d.text(30, 52, "Block", TEXT, "start", **BOLD)
    d.text(30, 72, f"× {config[layers]}", TEXT, "start")
    down(d, 220, 22, 46, head=False)
    heads = f"{mixer.n_heads} heads" + (", causal" if mixer.causal else "")
    _sub_layer(d, 46, norm_1, (f"{token}: {kind(mixer)}", heads), TOKEN)
    down(d, 220, 187, 208, head=False)
    hidden = f"{act}, d_ff = {ff.d_ff}"
    _sub_layer(d, 208, norm_2, (f"{channel}: {kind(ff)}", hidden), CHANNEL)
    down(d, 220, 349, 400)
    d.text(232, 394, f"[batch, seq, {config['d_model']}]", SMALL, "start")
    then = f"after {config[layers]} blocks: final_norm, head → logits"
    d.text(220, 416, then, SMALL, **QUIET)
    return d


def _sub_layer(d, top, norm, lines, fill):
    """norm, mixer, and the residual ``+``: ``x + mixer(norm(x))``, from
    the fork at ``top``."""
    residual(d, 220, top, top + 130, 405)
    down(d, 220, top, top + 12)
    d.box((120, top + 12, 200, 30), NORM, f"{norm}: LayerNorm")
    down(d, 220, top + 42, top + 58)
    d.box((75, top + 58, 290, 50), fill, *lines)
    down(d, 220, top + 108, top + 119)
    d.op(220, top + 130, "+")


def glu() -> Drawing:
    """A gated feed-forward: the gate f(x W) and the linear branch x V,
    their product, W2; the GLU chapter's sizes."""
    from .feed_forward import ACTIVATIONS, VARIANTS, feed_forward_variant

    d_model = chapter_model("glu_variants")["d_model"]
    ff = feed_forward_variant("swiglu", d_model)
    gate, up, down_proj, activation = has(
        ff, "gate_proj", "up_proj", "down_proj", "activation"
    )
    d_ff, variants = ff.d_ff, _variant_names(VARIANTS, ACTIVATIONS)
    listed = ", ".join(variants)
    d = _drawing("glu", 480, 424, d_model=d_model, d_ff=d_ff, variants=listed)
    d.text(240, 18, f"x  [batch, seq, d_model = {d_model}]")
    d.arrow((240, 26), (240, 40), (130, 40), (130, 60))
    d.arrow((240, 40), (350, 40), (350, 60))
    widths = _linear(ff.gate_proj, "{} → d_ff = {}")
    d.box((30, 60, 200, 46), CHANNEL, f"{gate}: x W", widths)
    down(d, 130, 106, 124)
    d.box((30, 124, 200, 46), CHANNEL, f"{activation}: f(x W)", "the gate")
    linear = _linear(ff.up_proj, "{} → {}, linear")
    d.box((250, 60, 200, 46), CHANNEL, f"{up}: x V", linear)
    d.arrow((130, 170), (130, 200), (227, 200))
    d.arrow((350, 106), (350, 200), (253, 200))
    d.op(240, 200, "⊙")
    down(d, 240, 211, 238)
    d.text(252, 230, f"h  [batch, seq, {d_ff}]", SMALL, "start")
    back = _linear(ff.down_proj, "{} → {}")
    d.box((130, 238, 220, 46), CHANNEL, f"{down_proj}: h W₂", back)
    down(d, 240, 284, 300)
    d.text(240, 316, f"[batch, seq, {d_model}]", SMALL)
    title = "The gated variants differ in f only:"
    d.text(20, 350, title, TEXT, "start", **BOLD)
    for i, words in enumerate(variants):
        x, y = 20 + 230 * (i % 2), 374 + 20 * (i // 2)
        d.text(x, y, words, SMALL, "start", **CODE)
    return d


def _variant_names(variants, activations) -> list[str]:
    """``name: Activation`` for each gated variant of the feed-forward
    module."""
    return [
        f"{name}: {activations[activation]().__class__.__name__}"
        for name, (activation, gated) in variants.items()
        if gated
    ]


def _gmlp_parts():
    """The gMLP chapter's token mixer, a ``GatedMLP``, built by the model's
    registry, and its config."""
    from .model import TOKEN_MIXERS, ModelConfig

    fields = chapter_model("gmlp")
    config = ModelConfig(vocab_size=65, token_mixer="gmlp", **fields)
    return TOKEN_MIXERS["gmlp"].build(config), config


def sgu() -> Drawing:
    """The Spatial Gating Unit: split, norm, mix along the sequence, gate."""
    mlp, _ = _gmlp_parts()
    unit = part(mlp, "sgu")
    names = has(unit, "norm", "weight", "bias", "spatial_weight")
    d_z, half, seq = unit.d_z, unit.d_z // 2, unit.seq_len
    sizes = dict(d_z=d_z, half=half, seq=seq, unit=kind(unit))
    d = _drawing("sgu", 480, 440, **sizes)
    d.text(240, 18, f"Z  [batch, seq, d_z = {d_z}]")
    d.arrow((240, 26), (240, 38), (120, 38), (120, 56))
    d.arrow((240, 38), (360, 38), (360, 56))
    d.text(240, 54, "split", SMALL, **QUIET)
    d.box((30, 56, 180, 44), PAPER, "Z₁", f"[batch, seq, {half}]")
    d.box((270, 56, 180, 44), PAPER, "Z₂", f"[batch, seq, {half}]")
    down(d, 360, 100, 116)
    d.box((270, 116, 180, 32), NORM, f"{names[0]}: LayerNorm")
    down(d, 360, 148, 164)
    _spatial_box(d, 255, 164, unit, names)
    d.text(130, 230, "Z₁: the half", SMALL, "start", **QUIET)
    d.text(130, 248, "that is gated", SMALL, "start", **QUIET)
    d.arrow((120, 100), (120, 332), (227, 332))
    d.arrow((360, 310), (360, 332), (253, 332))
    d.op(240, 332, "⊙")
    down(d, 240, 343, 368)
    d.text(240, 386, "s(Z) = Z₁ ⊙ (W · norm(Z₂) + b)", TEXT, **BOLD)
    d.text(240, 406, f"[batch, seq, {half}]: half the channels", SMALL)
    shorter = "a shorter sequence reads W's leading block"
    d.text(240, 430, shorter, SMALL, **QUIET)
    return d


def _spatial_box(d, x, y, unit, names):
    """The spatial mix: W (lower triangular when causal) times norm(Z2),
    plus b."""
    d.rect((x, y, 210, 146), TOKEN, radius=7, stroke_width=1.4)
    d.text(x + 105, y + 20, "mix along the sequence", SMALL, **BOLD)
    positions = torch.arange(8)
    reads = positions[:, None] >= positions[None, :] if unit.causal else None
    grid(d, x + 20, y + 32, 9, torch.full((8, 8), 0.45), allowed=reads)
    rows, columns = getattr(unit, names[1]).shape
    lines = [f"{names[1]} W", f"{rows} × {columns}"]
    lines += ["causal:", "j ≤ i"] if unit.causal else ["every j"]
    for i, words in enumerate(lines):
        d.text(x + 108, y + 46 + 18 * i, words, SMALL, "start")
    d.text(x + 105, y + 134, f"W · norm(Z₂) + {names[2]} b", SMALL)


def gmlp_block() -> Drawing:
    """The gMLP block around the SGU: norm, U with GELU, SGU, V,
    residual."""
    from . import gmlp as module

    mlp, config = _gmlp_parts()
    block = module.GMLPBlock(config.d_model, mlp.d_ffn, config.block_size)
    norm, body = has(block, "norm", "mlp")
    names = has(mlp, "proj_in", "activation", "sgu", "proj_out")
    d_model, d_ffn, act = config.d_model, mlp.d_ffn, kind(mlp.activation)
    sizes = dict(d_model=d_model, d_ffn=d_ffn, half=d_ffn // 2)
    d = _drawing(
        "gmlp_block", 440, 418, activation=act, block=kind(block), **sizes
    )
    d.text(220, 16, f"x  [batch, seq, d_model = {d_model}]")
    residual(d, 220, 34, 340, 405)
    down(d, 220, 24, 46)
    frame = (20, 85, 350, 228)
    d.rect(frame, "none", GREY, radius=10, stroke_dasharray="6 4")
    d.text(28, 190, f"{body}:", TEXT, "start", **BOLD)
    d.text(28, 210, kind(mlp), SMALL, "start")
    steps = [
        (NORM, [f"{norm}: LayerNorm"]),
        (CHANNEL, [f"{names[0]}: U", _linear(mlp.proj_in)]),
        (CHANNEL, [f"{names[1]}: {act}"]),
        (TOKEN, [f"{names[2]}: {kind(mlp.sgu)}", f"{d_ffn} → {d_ffn // 2}"]),
        (CHANNEL, [f"{names[3]}: V", _linear(mlp.proj_out)]),
    ]
    y = 46
    for i, (fill, lines) in enumerate(steps):
        height = 46 if len(lines) > 1 else 32
        if i:
            down(d, 220, y - 14, y)
        d.box((115, y, 210, height), fill, *lines)
        y += height + 14
    down(d, 220, y - 14, 329)
    d.op(220, 340, "+")
    down(d, 220, 351, 372)
    d.text(220, 390, f"x + Y  [batch, seq, {d_model}]", SMALL)
    alone = "one block: no separate feed-forward"
    d.text(220, 410, alone, SMALL, **QUIET)
    return d


def alibi_bias() -> Drawing:
    """ALiBi: each head subtracts m_h (i - j) from its scores before the
    softmax, with its own fixed slope; the ALiBi chapter's heads."""
    from . import alibi as module

    has(module, "alibi_slopes", "alibi_bias")
    config = chapter_model("alibi_extrapolation")
    layer = module.AlibiMultiHeadAttention(
        config["d_model"], config["n_heads"]
    )
    has(layer, "attention_bias")
    slopes = part(layer, "slopes")
    fractions = [_fraction(m) for m in slopes.tolist()]
    listed = ", ".join(fractions)
    d = _drawing("alibi_bias", 480, 446, heads=len(fractions), slopes=listed)
    _alibi_sum(d, module)
    _alibi_heads(d, module, slopes, fractions)
    return d


def _fraction(slope: float) -> str:
    """A slope :math:`2^{-k}` as ``1/2^k``; any other as a decimal."""
    power = -math.log2(slope)
    if abs(power - round(power)) < 1e-9:
        return f"1/{2 ** round(power)}"
    return f"{slope:.3g}"


def _alibi_sum(d, module):
    """Scores - m_h·(i - j), the distances written in their cells."""
    title = "In head h: softmax(scores − m_h · (i − j))"
    d.text(20, 20, title, TEXT, "start", **BOLD)
    n, cell = 6, 22
    allowed = module.causal_mask(n, n)
    generator = torch.Generator().manual_seed(1)
    scores = torch.rand(n, n, generator=generator) * 0.8 + 0.1
    grid(d, 20, 40, cell, scores, allowed=allowed)
    d.text(86, 194, "q·k / √d_head", SMALL)
    d.text(180, 114, "−", 22, bold=True)
    grid(d, 212, 40, cell, torch.zeros(n, n), allowed=allowed)
    for i in range(n):
        for j in range(i + 1):
            x, y = 212 + (j + 0.5) * cell, 40 + (i + 0.72) * cell
            d.text(x, y, str(i - j), SMALL)
    d.text(278, 194, "m_h × (i − j)", SMALL)
    notes = ["grey: the", "future, −∞", "", "0 on the", "diagonal"]
    for i, words in enumerate(notes):
        if words:
            d.text(368, 100 + 17 * i, words, SMALL, "start", **QUIET)


def _alibi_heads(d, module, slopes, fractions):
    """Every head's bias, shaded by 1 - exp(bias): how much of a key's
    weight it takes away."""
    heads, n, cell = len(fractions), 8, 6
    title = f"The {heads} heads' slopes m_h (alibi_slopes), fixed"
    d.text(20, 232, title, TEXT, "start", **BOLD)
    bias = module.alibi_bias(slopes, n)  # [heads, n, n], -inf in the future
    allowed = torch.isfinite(bias[0])
    pitch = (d.width - 40) / heads
    for h in range(heads):
        x = 20 + h * pitch + (pitch - n * cell) / 2
        weight_lost = 1 - torch.exp(bias[h].clamp(min=-30))
        d.text(x + n * cell / 2, 258, f"h{h + 1}", SMALL, **QUIET)
        grid(d, x, 266, cell, weight_lost, allowed=allowed)
        d.text(x + n * cell / 2, 334, fractions[h], SMALL)
    lines = [
        "shade: the share of a key's weight the bias takes,",
        f"1 − e^(−m_h (i − j)), over {n} positions",
        "steep heads read their neighbours, flat heads far back;",
        "no position embeddings: the bias is the position",
    ]
    for i, words in enumerate(lines):
        d.text(20, 366 + 20 * i, words, SMALL, "start")


# -----------------------------------------------------------------------------
# The book's map

#: Which part of the model each chapter studies (its notebook's name): the
#: token mixer, the channel mixer, the whole model, or both mixers.
CHAPTER_PARTS = {
    "attention": "token",
    "multi_head": "token",
    "baseline": "model",
    "glu_variants": "channel",
    "gmlp": "token",
    "alibi": "token",
    "side_by_side": "both",
    "cpu_timing": "both",
}
_PART_COLOURS = {
    "token": BLUE,
    "channel": ORANGE,
    "model": MUTED,
    "both": MUTED,
}


def book_root() -> Path:
    """The repository the package sits in (``src/mixers`` two levels
    down), which holds the book: ``_toc.yml`` and ``book/``."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "_toc.yml").is_file():
        raise FileNotFoundError(
            f"no _toc.yml in {root}: the book's map is drawn from a checkout"
            " of the repository (pip install -e .)"
        )
    return root


def chapters(root: Path) -> list[tuple[int, str, str, str]]:
    """``(number, notebook, title, part)`` of every chapter, in the order
    of ``_toc.yml`` (the site numbers them so); the title is the notebook's
    first heading. A chapter missing from ``CHAPTER_PARTS`` is refused."""
    import json

    toc = (root / "_toc.yml").read_text(encoding="utf-8")
    found = []
    for name in re.findall(r"^\s*- file: book/(\w+)\s*$", toc, re.M):
        notebook = root / "book" / f"{name}.ipynb"
        if not notebook.is_file():
            continue
        if name not in CHAPTER_PARTS:
            raise LookupError(
                f"chapter {name!r} has no place on the book's map: add it"
                " to CHAPTER_PARTS"
            )
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        text = "".join(
            "".join(c["source"]) + "\n"
            for c in cells
            if c["cell_type"] == "markdown"
        )
        title = re.search(r"^# (.+)$", text, re.M)[1].strip()
        found.append((len(found) + 1, name, title, CHAPTER_PARTS[name]))
    return found


def block() -> Drawing:
    """The book in one picture: the block, and each chapter on the part it
    studies (numbers and titles from the table of contents)."""
    from torch import nn

    from .model import Block

    parts = Block(8, nn.Identity(), nn.Identity())
    has(parts, "norm_1", "token_mixer", "norm_2", "channel_mixer")
    listed = chapters(book_root())
    by_part = {p: [c for c in listed if c[3] == p] for p in _PART_COLOURS}
    d = _drawing("block", 480, 450, chapters=_map_chapters(listed))
    into = "characters → embeddings (+ positions)"
    d.text(220, 16, into, SMALL, **QUIET)
    d.text(20, 206, "× N", TEXT, "start", **BOLD)
    down(d, 220, 22, 34, head=False)
    top = 34
    for mixer in ("token", "channel"):
        rows = by_part[mixer]
        # the box: its name, its role, a row per chapter, a margin
        height = 50 + 19 * len(rows)
        join = top + 57 + height
        if top > 34:
            down(d, 220, top - 4, top, head=False)
        residual(d, 220, top, join, 440)
        down(d, 220, top, top + 4)
        d.box((150, top + 4, 140, 22), NORM, "LayerNorm")
        down(d, 220, top + 26, top + 34)
        _mixer_box(d, top + 34, height, mixer, rows)
        down(d, 220, top + 34 + height, join - 11)
        d.op(220, join, "+")
        top = join + 15
    frame = (12, 26, 456, join + 13 - 26)
    d.rect(frame, "none", GREY, radius=12, stroke_dasharray="6 4")
    down(d, 220, join + 11, join + 30)
    d.text(208, join + 28, "next block, then logits", SMALL, "end", **QUIET)
    for i, (number, _, title, where) in enumerate(
        by_part["model"] + by_part["both"]
    ):
        title += " (the frame)" if where == "model" else " (both mixers)"
        d.badge(30, join + 42 + 19 * i, number, MUTED)
        d.text(48, join + 46 + 19 * i, title, SMALL, "start")
    return d


#: Each mixer's name and role, as the map writes them.
_MIXERS = {
    "token": ("token mixer", "moves information between positions", TOKEN),
    "channel": (
        "channel mixer",
        "transforms each position on its own",
        CHANNEL,
    ),
}


def _mixer_box(d, y, height, mixer, rows):
    """A mixer's box: its name, its role, and the chapters that study it."""
    title, role, fill = _MIXERS[mixer]
    d.rect((56, y, 328, height), fill, radius=7, stroke_width=1.4)
    d.text(220, y + 20, title, TEXT, **BOLD)
    d.text(220, y + 38, role, SMALL, **QUIET)
    for i, (number, _, chapter, _) in enumerate(rows):
        d.badge(78, y + 54 + 19 * i, number, _PART_COLOURS[mixer])
        d.text(96, y + 58 + 19 * i, chapter, SMALL, "start")


def _map_chapters(listed) -> str:
    """The chapters and their places, for the map's text alternative."""
    where = {
        "token": "on the token mixer",
        "channel": "on the channel mixer",
        "model": "on the whole model",
        "both": "on both mixers",
    }
    return "; ".join(
        f"{number} {title}, {where[part]}" for number, _, title, part in listed
    )


# -----------------------------------------------------------------------------
# All of them

#: Every diagram: name -> the function that draws it.
DIAGRAMS = {
    "attention": attention,
    "multi_head": multi_head,
    "causal_kv_cache": causal_kv_cache,
    "transformer_block": transformer_block,
    "glu": glu,
    "sgu": sgu,
    "gmlp_block": gmlp_block,
    "alibi_bias": alibi_bias,
    "block": block,
}


def draw(name: str) -> str:
    """The SVG document of diagram ``name`` (a key of ``DIAGRAMS``)."""
    if name not in DIAGRAMS:
        raise ValueError(
            f"name must be one of {sorted(DIAGRAMS)}, got {name!r}"
        )
    return DIAGRAMS[name]().svg()


def write_all(directory) -> list[Path]:
    """Writes every diagram to ``directory/NAME.svg``; returns the paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in DIAGRAMS:
        path = directory / f"{name}.svg"
        path.write_text(draw(name), encoding="utf-8")
        paths.append(path)
    return paths


def main(argv=None) -> None:
    """``python -m mixers.diagrams DIR``: every diagram into DIR."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        raise SystemExit("usage: python -m mixers.diagrams DIR")
    for path in write_all(argv[0]):
        print(path)


if __name__ == "__main__":
    main()
