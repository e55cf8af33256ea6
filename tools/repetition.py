"""Where a tree of Python files repeats itself: the pairs of files that share
a run of six or more consecutive lines of code of the same shape.

A line's *shape* is its tokens with every name (keywords kept), string and
number replaced by a placeholder, so ``x = f(a, 1)`` and ``y = g(b, 2)``
have one shape. Blank lines, comments and lone strings (docstrings) are not
lines of code and are passed over, and so are import statements and thin
lines (at most ``THIN`` tokens: a lone ``)``, ``name,``, ``x: int,``,
``return x``), which any two files share. A run of ``min_lines`` shapes
that stands in more than ``most_places`` places is too common to mean
anything and is not counted.

Used by tests/test_code_shape.py (at most so many pairs in src/mixers), and
by hand to see where::

    python tools/repetition.py src/mixers [--min-lines 6]
"""

import argparse
import io
import keyword
import sys
import tokenize
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

MIN_LINES = 6
MOST_PLACES = 8
THIN = 4
_NOT_CODE = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}
_STRINGS = {tokenize.STRING} | {
    getattr(tokenize, name)
    for name in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END")
    if hasattr(tokenize, name)
}


def _placeholder(token) -> str:
    if token.type == tokenize.NAME:
        return token.string if keyword.iskeyword(token.string) else "N"
    if token.type in _STRINGS:
        return "S"
    if token.type == tokenize.NUMBER:
        return "0"
    return token.string


def line_shapes(source: str) -> list[tuple[int, tuple[str, ...]]]:
    """``(line number, shape)`` for each line of code, in order."""
    lines: dict[int, list[str]] = defaultdict(list)
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    statement_start, importing = True, False
    for token in tokens:
        if token.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            statement_start, importing = True, False
        elif token.type not in _NOT_CODE:
            if statement_start:
                importing = token.string in ("import", "from")
                statement_start = False
            if importing:
                continue
            shape = lines[token.start[0]]
            word = _placeholder(token)
            if not (word == "S" and shape and shape[-1] == "S"):
                shape.append(word)
    return [
        (number, tuple(shape))
        for number, shape in sorted(lines.items())
        if len(shape) > THIN and shape != ["S"]
    ]


@dataclass
class Pair:
    """Two files (or one file twice) that share ``runs`` runs of shapes; the
    longest is ``first[0]:first[1]-first[2]`` ~ ``second[...]``."""

    first: tuple[str, int, int]
    second: tuple[str, int, int]
    runs: int

    def __str__(self) -> str:
        (a, a0, a1), (b, b0, b1) = self.first, self.second
        more = f" (+{self.runs - 1} more runs)" if self.runs > 1 else ""
        return f"{a}:{a0}-{a1} ~ {b}:{b0}-{b1}{more}"


def _windows(shapes, min_lines, most_places):
    """Each run of ``min_lines`` shapes that stands in two to
    ``most_places`` places: its places, ``(file, index)``."""
    places = defaultdict(list)
    for name, lines in shapes.items():
        for i in range(len(lines) - min_lines + 1):
            window = tuple(shape for _, shape in lines[i : i + min_lines])
            places[window].append((name, i))
    return [p for p in places.values() if 2 <= len(p) <= most_places]


def _matched_windows(shapes, min_lines, most_places):
    """Every pair of places ``((a, i), (b, j))`` with ``(a, i) < (b, j)``
    where the same run starts, overlapping places of one file left out."""
    matched = set()
    for places in _windows(shapes, min_lines, most_places):
        for k, (a, i) in enumerate(places):
            for b, j in places[k + 1 :]:
                if a != b or abs(i - j) >= min_lines:
                    matched.add(min(((a, i), (b, j)), ((b, j), (a, i))))
    return matched


def repeats(sources: dict[str, str], min_lines=MIN_LINES, most=MOST_PLACES):
    """The pairs of files of ``sources`` (name -> text) sharing a run of
    ``min_lines`` or more lines of one shape, most shared first."""
    shapes = {name: line_shapes(text) for name, text in sources.items()}
    matched = _matched_windows(shapes, min_lines, most)
    runs = defaultdict(list)  # (a, b) -> [(length, i, j)]
    for (a, i), (b, j) in matched:
        if ((a, i - 1), (b, j - 1)) in matched:
            continue  # not the start of its run
        extra = 0  # windows after the first that continue the run
        while ((a, i + extra + 1), (b, j + extra + 1)) in matched:
            extra += 1
        length = min_lines + extra
        runs[a, b].append((length, i, j))
    pairs = []
    for (a, b), found in runs.items():
        length, i, j = max(found)
        span_a = (a, shapes[a][i][0], shapes[a][i + length - 1][0])
        span_b = (b, shapes[b][j][0], shapes[b][j + length - 1][0])
        pairs.append((length, Pair(span_a, span_b, len(found))))
    return [
        pair for _, pair in sorted(pairs, key=lambda p: (-p[0], str(p[1])))
    ]


def tree_sources(folder: Path) -> dict[str, str]:
    """Every ``*.py`` file below ``folder``, by its path relative to it."""
    return {
        str(path.relative_to(folder)): path.read_text(encoding="utf-8")
        for path in sorted(folder.rglob("*.py"))
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--min-lines", type=int, default=MIN_LINES)
    args = parser.parse_args(argv)
    if args.min_lines < 2:
        parser.error(f"argument --min-lines: at least 2, got {args.min_lines}")
    if not args.folder.is_dir():
        parser.error(f"argument folder: not a folder: {str(args.folder)!r}")
    pairs = repeats(tree_sources(args.folder), args.min_lines)
    print(f"{len(pairs)} pairs of files share {args.min_lines} or more lines")
    for pair in pairs:
        print(pair)
    return 0


if __name__ == "__main__":
    sys.exit(main())
