"""What a page teaches with: checks that ``tests/test_site.py`` runs on every
page it loads, at a desktop (1280 px) and a phone (390 px) width (one page
load serves all of a page's checks).

* every fold says what it holds: no "Show code cell source/content/output",
  "Hide code cell ..." (MyST-NB's default labels) or "Click to show" on any
  page, open or closed (a chapter names its folds in the cell's metadata,
  ``"mystnb": {"code_prompt_show": ..., "code_prompt_hide": ...}``);
* each chapter shows, unfolded, at least one listing of the package's code
  (a captioned ``src/mixers/...`` listing, not inside a closed fold);
* no display formula is wider than its column on a phone: each fits its box
  (no sideways scrolling), and its box its column (MathJax 4 breaks long
  display equations, ``book/_ext/mathjax_parts.py``);
* a live view's text is at least 14 px at 1280 px and 12 px at 390 px (as
  shown: its SVG font size times the scale the panel is drawn at), and every
  view has a caption;
* no word in a table is broken inside: a line in a cell breaks at a space,
  or after a hyphen, dot, underscore, slash or comma;
* no visible text shows raw markup: no reST role (``:math:`...```,
  ``:class:``, ``:func:``, ...), no double backquotes, no TeX command outside
  typeset maths (the package's comments in the chapters' listings are
  typeset, ``book/_ext/listings.py``; a heading with maths keeps it where it
  is referred to, ``book/_ext/heading_maths.py``).

Each failure names the page, the width, the criterion and the element. (A
chapter's height, at most 16,000 px at 1280 px, is test_site's
``chapter_too_long``.)
"""

from test_site import CHAPTERS

# A live view's smallest text as shown, in CSS px.
VIEW_TEXT_LEAST_PX = {"desktop": 14.0, "phone": 12.0}
# MyST-NB's and sphinx-togglebutton's labels, which say nothing of what a
# fold holds.
GENERIC_FOLD_LABELS = (
    "Show code cell",
    "Hide code cell",
    "Click to show",
    "Click to hide",
)


def problems(page, page_path: str, width: str) -> list[str]:
    """What keeps the loaded page from teaching in view; it only reads the
    page."""
    chapter = page_path in CHAPTERS
    return (
        generic_fold_labels(page)
        + (no_listing_in_view(page) if chapter else [])
        + (formulas_too_wide(page) if width == "phone" else [])
        + view_text_too_small(page, width)
        + views_without_caption(page)
        + table_words_broken(page)
        + raw_markup(page)
    )


# ---------------------------------------------------------------------------
# The chapter's folds and its listings


def generic_fold_labels(page) -> list[str]:
    """Every fold's labels, closed and open (both are in the page: one is
    hidden), and every toggle button's."""
    labels = page.evaluate("""() => [
        ...document.querySelectorAll("details > summary"),
        ...document.querySelectorAll("button.toggle-button"),
    ].map(node => [
        node.textContent.replace(/\\s+/g, " ").trim(),
        node.closest(".cell")?.querySelector("pre")?.textContent
            .trim().split("\\n")[0].slice(0, 50) ?? "",
    ])""")
    found = []
    for label, code in labels:
        for generic in GENERIC_FOLD_LABELS:
            if generic in label:
                where = f" (over code starting {code!r})" if code else ""
                found.append(
                    f"folds: a generic label {label!r}{where}: say what "
                    f"it holds (cell metadata mystnb.code_prompt_show/hide)"
                )
                break
    return found


def no_listing_in_view(page) -> list[str]:
    """At least one captioned listing of the package, not in a closed
    fold."""
    shown = page.evaluate("""() => [...document.querySelectorAll(
            ".bd-article div.literal-block-wrapper")]
        .filter(listing => [...listing.querySelectorAll(".code-block-caption code")]
            .some(code => code.textContent.trim().startsWith("src/mixers/")))
        .filter(listing => !listing.closest("details:not([open])")
                           && listing.getClientRects().length).length""")
    print(f"package listings in view: {shown}")
    if not shown:
        return [
            "listings: the chapter shows no listing of the package's code "
            "unfolded (a captioned src/mixers/... literalinclude)"
        ]
    return []


# ---------------------------------------------------------------------------
# Maths on a phone


def formulas_too_wide(page) -> list[str]:
    """Each display formula fits its own box (it does not scroll) and the
    box fits the text column (its block parent's content box). Named by its
    TeX, which MathJax keeps."""
    found = page.evaluate("""() => {
        const tex = new Map();
        for (const item of window.MathJax?.startup?.document?.math ?? [])
            if (item.typesetRoot) tex.set(item.typesetRoot, item.math);
        return [...document.querySelectorAll('mjx-container[display="true"]')]
            .filter(maths => maths.getClientRects().length)
            .map(maths => {
                const column = maths.parentElement.closest("div, p, section, article, li, td, dd");
                const inside = column.getBoundingClientRect();
                const style = getComputedStyle(column);
                const right = inside.right - parseFloat(style.paddingRight) - parseFloat(style.borderRightWidth);
                const box = maths.getBoundingClientRect();
                return {tex: (tex.get(maths) ?? "").trim().replace(/\\s+/g, " ").slice(0, 70),
                        scroll: maths.scrollWidth, client: maths.clientWidth,
                        over: Math.max(0, box.right - right)};
            });
    }""")
    wide = [f for f in found if f["scroll"] > f["client"] + 1 or f["over"] > 1]
    print(f"display formulas at 390 px: {len(wide)} of {len(found)} too wide")
    return [
        f"maths: a display formula is {f['scroll']} px wide in a "
        f"{f['client']} px box"
        + (f", {f['over']:.0f} px past its column" if f["over"] > 1 else "")
        + f": {f['tex']!r}"
        for f in wide
    ]


# ---------------------------------------------------------------------------
# Live views


def view_text_too_small(page, width: str) -> list[str]:
    """Each view's smallest text as shown: an SVG text's font size times the
    scale its panel is drawn at (the screen's CTM), an HTML text's computed
    size."""
    sizes = page.evaluate("""() => [...document.querySelectorAll(".mixers-live > .mx-view")]
        .map((view, v) => {
            const shown = [];
            for (const text of view.querySelectorAll("svg text")) {
                if (!text.textContent.trim() || !text.getClientRects().length) continue;
                const matrix = text.getScreenCTM();
                const scale = Math.hypot(matrix.a, matrix.b);
                shown.push([parseFloat(getComputedStyle(text).fontSize) * scale, text.textContent.trim()]);
            }
            const walker = document.createTreeWalker(view, NodeFilter.SHOW_TEXT);
            for (let node; (node = walker.nextNode());) {
                const parent = node.parentElement;
                if (!node.data.trim() || parent.closest("svg") || !parent.getClientRects().length) continue;
                shown.push([parseFloat(getComputedStyle(parent).fontSize), node.data.trim()]);
            }
            shown.sort((a, b) => a[0] - b[0]);
            return [v, view.dataset.view, shown[0] ?? null];
        })""")
    least = VIEW_TEXT_LEAST_PX[width]
    found = []
    for index, name, smallest in sizes:
        if smallest is None:
            continue
        size, text = smallest
        print(f"view {index + 1} ({name}): smallest text {size:.1f} px")
        if size < least - 0.05:
            found.append(
                f"views: view {index + 1} ({name}) shows text at "
                f"{size:.1f} px, under {least:g} px: {text[:40]!r}"
            )
    return found


def views_without_caption(page) -> list[str]:
    missing = page.evaluate("""() => [...document.querySelectorAll(".mixers-live > .mx-view")]
        .map((view, v) => [v, view.dataset.view,
                           view.querySelector(".mx-caption")?.textContent.trim() ?? ""])
        .filter(([, , caption]) => !caption)""")
    return [
        f"views: view {index + 1} ({name}) has no caption"
        for index, name, _ in missing
    ]


# ---------------------------------------------------------------------------
# Tables


def table_words_broken(page) -> list[str]:
    """Every word of every table's cells lies on one line, or breaks after a
    hyphen, dot, underscore, slash or comma. A word whose boxes lie on
    several lines is measured character by character to find its breaks."""
    broken = page.evaluate("""() => {
        const found = [], range = document.createRange();
        const lineOf = (node, start, end) => {
            range.setStart(node, start);
            range.setEnd(node, end);
            const boxes = [...range.getClientRects()].filter(b => b.width > 0 && b.height > 0);
            return boxes.length ? boxes[0].top : null;
        };
        const tables = [...document.querySelectorAll(".bd-article table")]
            .filter(table => !table.closest(".mx-view") && table.getClientRects().length);
        tables.forEach((table, t) => {
            for (const cell of table.querySelectorAll("th, td")) {
                const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
                for (let node; (node = walker.nextNode());) {
                    if (node.parentElement.closest("mjx-container")) continue;
                    for (const word of node.data.matchAll(/\\S+/g)) {
                        const [start, end] = [word.index, word.index + word[0].length];
                        range.setStart(node, start);
                        range.setEnd(node, end);
                        const tops = new Set([...range.getClientRects()]
                            .filter(b => b.width > 0 && b.height > 0).map(b => Math.round(b.top)));
                        if (tops.size < 2) continue;
                        const pieces = [];
                        let from = start, last = lineOf(node, start, start + 1);
                        for (let i = start + 1; i < end; i++) {
                            const top = lineOf(node, i, i + 1);
                            if (top !== null && last !== null && Math.abs(top - last) > 2) {
                                pieces.push([node.data.slice(from, i), node.data[i - 1]]);
                                from = i;
                            }
                            if (top !== null) last = top;
                        }
                        pieces.push([node.data.slice(from, end), ""]);
                        if (pieces.slice(0, -1).some(([, before]) => !/[-._\\/,]/.test(before)))
                            found.push([t + 1, tables.length, pieces.map(p => p[0]).join("|")]);
                    }
                }
            }
        });
        return found;
    }""")
    return [
        f"tables: table {t} of {n} breaks a word inside: {shown!r}"
        for t, n, shown in broken
    ]


# ---------------------------------------------------------------------------
# Raw markup


def raw_markup(page) -> list[str]:
    """The visible text outside typeset maths, read node by node: no reST
    role, no double backquotes, no TeX command."""
    found = page.evaluate(r"""() => {
        const patterns = [
            [/:(?:math|class|func|meth|attr|mod|data|obj|exc|ref|doc|numref|eq|term|cite(?::\w+)?|py:\w+):`/, "a reST role"],
            [/``/, "reST double backquotes"],
            [/\\(?:[A-Za-z]{2,}\b|[{}_^|,;!])/, "a TeX command"],
        ];
        const found = [];
        const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
        for (let node; (node = walker.nextNode());) {
            const parent = node.parentElement;
            if (!parent || parent.closest("mjx-container, script, style, noscript, title, .mx-view svg"))
                continue;
            if (!parent.checkVisibility() || !parent.getClientRects().length) continue;
            // In code, only the comments and docstrings are prose: a string
            // or a regular expression may hold backquotes and backslashes.
            if (parent.closest("pre") && !parent.closest(".c, .c1, .cm, .ch, .cs, .sd")) continue;
            for (const [pattern, what] of patterns) {
                const at = node.data.search(pattern);
                if (at < 0) continue;
                const where = parent.closest("pre") ? "code" : parent.closest("h1,h2,h3,h4,h5,h6,nav,.bd-sidebar-secondary") ? "heading or contents" : "text";
                found.push([what, where, node.data.slice(Math.max(0, at - 25), at + 45).replace(/\s+/g, " ")]);
                break;
            }
        }
        return found;
    }""")
    return [
        f"markup: {what} in the {where}: {text!r}"
        for what, where, text in found
    ]
