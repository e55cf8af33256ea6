"""Live views: the book's explorations, computed in the reader's browser.

A view is one JavaScript module, ``views/views.js``, fed a few kilobytes of
JSON from this module. Formulas (ALiBi's slopes and biases, softmax with a
temperature, a GLU unit's gate) are computed in the page at any setting;
learned things (gMLP's spatial weights, loss curves) travel as data, never as
pictures. The same module renders in three places:

- **Jupyter and Colab**: :func:`live_view` returns an `anywidget
  <https://anywidget.dev>`_ whose ``_esm`` is ``views.js``; its
  ``render({model, el})`` is anywidget's contract (and what Jupyter Book 2's
  ``{anywidget}`` directive takes).
- **The built site, with no kernel**: the widget's output also carries an
  HTML form (``text/html``): the view's name and props as JSON, and a small
  static picture in ``<noscript>`` for readers without scripts. The book's
  Sphinx extension (``book/_ext/live_views.py``) serves ``views.js`` and a
  loader that renders every such output; the site needs no widget manager.
- **node's test runner**: ``tests/js/views.test.mjs`` checks every formula
  of ``views.js`` against :func:`fixtures`, computed here by the package.
"""

from __future__ import annotations

import base64
import functools
import html
import io
import json
import math
import os
from pathlib import Path
from typing import Any

import torch

from ._checks import check_int_in, check_positive_float
from .results import _non_finite

__all__ = [
    "VIEWS_JS",
    "VIEW_NAMES",
    "live_view",
    "encode_lower",
    "figure_png",
    "fixtures",
]

#: The module every view is drawn by (in Jupyter, on the site, under node).
VIEWS_JS = Path(__file__).with_name("views") / "views.js"
#: The views it defines (its ``VIEWS``).
VIEW_NAMES = ("alibi", "softmax", "glu", "gmlp", "curves", "scaling")


def _site_html(view: str, props: dict, fallback: bytes | None, alt: str):
    """The output the site renders: props as JSON for the loader, and a static
    picture for readers without scripts."""
    # "</" would end the <script> early; JSON allows "<\/" for it.
    data = json.dumps(
        {"view": view, "props": props}, separators=(",", ":"), allow_nan=False
    )
    data = data.replace("</", "<\\/")
    picture = ""
    if fallback is not None:
        source = base64.b64encode(fallback).decode("ascii")
        picture = (
            f'<noscript><img src="data:image/png;base64,{source}" '
            f'alt="{html.escape(alt)}" style="max-width: 100%"></noscript>'
        )
    return (
        f'<div class="mixers-live" role="group" '
        f'aria-label="{html.escape(alt)}">'
        f'<script type="application/json">{data}</script>{picture}</div>'
    )


@functools.cache
def _anywidget():
    # anywidget (and ipywidgets under it) is for notebooks only: the package
    # itself imports without them.
    import anywidget
    import traitlets

    class LiveView(anywidget.AnyWidget):
        """One view of ``views.js``: ``view`` names it, ``props`` feeds it."""

        _esm = VIEWS_JS
        view = traitlets.Unicode().tag(sync=True)
        props = traitlets.Dict().tag(sync=True)

        def __init__(self, view, props, *, fallback=None, alt=""):
            super().__init__(view=view, props=props)
            self._site = _site_html(view, props, fallback, alt)

        def __repr__(self):
            return f"LiveView({self.view!r})"

        def _repr_mimebundle_(self, **kwargs):
            bundle = super()._repr_mimebundle_(**kwargs)
            data, metadata = (
                bundle if isinstance(bundle, tuple) else (bundle, {})
            )
            return {**data, "text/html": self._site}, metadata

    return LiveView


def live_view(view: str, props: dict, *, fallback=None, alt: str):
    """The live view ``view`` (one of :data:`VIEW_NAMES`) fed ``props``.

    ``fallback``: a matplotlib figure of the view's first setting, shown
    (small, as PNG) where scripts do not run; it is closed. ``alt`` says what
    the view shows (its accessible name, and the picture's alt text).
    """
    if view not in VIEW_NAMES:
        raise ValueError(f"view must be one of {VIEW_NAMES}, got {view!r}")
    if not isinstance(props, dict):
        raise TypeError(f"props must be a dict, got {type(props).__name__}")
    if not isinstance(alt, str) or not alt.strip():
        raise ValueError("alt must say what the view shows, got an empty alt")
    try:
        json.dumps(props, allow_nan=False)
    except TypeError as error:
        raise TypeError(f"props must be JSON (the page reads it): {error}")
    except ValueError:
        # a NaN would reach the page as NaN, which JSON.parse refuses
        raise ValueError(
            "props must hold finite numbers (the page parses them as JSON),"
            f" but {_non_finite(props, 'props')}"
        ) from None
    png = None
    if fallback is not None:
        png = figure_png(fallback, dpi=60, colours=48)
    return _anywidget()(view, props, fallback=png, alt=alt)


def figure_png(fig, *, dpi: int = 110, colours: int = 256) -> bytes:
    """The figure as PNG bytes (palette-reduced to ``colours``, an int in [2,
    256], to keep pages light; ``dpi`` a positive float); closes it."""
    import matplotlib.pyplot as plt

    from .plot import palette_png

    check_positive_float("dpi", dpi)
    check_int_in("colours", colours, 2, 256)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    plt.close(fig)
    return palette_png(buffer.getvalue(), colours)


def encode_lower(weight: torch.Tensor) -> dict[str, Any]:
    """The lower triangle of a square matrix ``[n, n]``, row by row, as int8
    multiples of ``scale / 127`` in base64: ``{"n", "scale", "data"}`` (the
    causal spatial weights of gMLP are zero above the diagonal). An entry
    moves by at most ``scale / 254``; ``views.js``'s ``decodeLower`` reads it
    back."""
    if not isinstance(weight, torch.Tensor) or not (
        weight.is_floating_point()
    ):
        got = (
            f"dtype {weight.dtype}"
            if isinstance(weight, torch.Tensor)
            else type(weight).__name__
        )
        raise TypeError(
            f"weight must be a floating-point tensor [n, n], got {got}"
        )
    if (
        weight.dim() != 2
        or weight.shape[0] != weight.shape[1]
        or weight.shape[0] == 0
    ):
        raise ValueError(
            f"weight must be square [n, n] with n >= 1, got"
            f" {tuple(weight.shape)}"
        )
    n = weight.shape[0]
    rows, cols = torch.tril_indices(n, n)
    values = weight.detach().double().cpu()[rows, cols]
    # one NaN would make the scale NaN and every entry 0
    if not torch.isfinite(values).all():
        raise ValueError(
            "weight must hold finite numbers in its lower triangle, got"
            f" {int((~torch.isfinite(values)).sum())} NaN or infinite"
        )
    scale = float(values.abs().max()) or 1.0
    q = torch.round(values / scale * 127).to(torch.int8)
    data = base64.b64encode(q.numpy().tobytes()).decode("ascii")
    return {"n": n, "scale": scale, "data": data}


# -----------------------------------------------------------------------------
# Fixtures: what views.js must compute, computed by the package.


def _as_list(tensor: torch.Tensor) -> list:
    return [
        v if math.isfinite(v) else None
        for v in tensor.double().flatten().tolist()
    ]


def fixtures(seed: int = 0) -> dict[str, Any]:
    """Reference values for ``tests/js/views.test.mjs``: ALiBi slopes of
    1..64 heads (the rule changes past each power of two: 3, 6, 12, 24),
    biases, masked softmax with a scale, the activations and gated units at
    sample points, diagonal means and Toeplitz scores, and an int8 encoding.
    ``-inf`` is written as ``null``."""
    check_int_in("seed", seed, 0, 2**32 - 1)
    g = torch.Generator().manual_seed(seed)
    return {
        **_alibi_fixtures(),
        **_activation_fixtures(g),
        "softmax": _softmax_fixtures(g),
        "gmlp": _gmlp_fixtures(g),
    }


def _alibi_fixtures() -> dict[str, Any]:
    from .alibi import alibi_bias, alibi_slopes

    symmetric = alibi_bias(12, 9, causal=False, symmetric=True)
    return {
        "slopes": {
            str(n): _as_list(alibi_slopes(n).double()) for n in range(1, 65)
        },
        "bias": {
            "n_heads": 12,
            "length": 9,
            "values": [_as_list(h) for h in alibi_bias(12, 9)],
            "symmetric": [_as_list(h) for h in symmetric],
        },
    }


@torch.no_grad()
def _activation_fixtures(g: torch.Generator) -> dict[str, Any]:
    from .feed_forward import ACTIVATIONS

    z = torch.linspace(-10, 10, 81, dtype=torch.float64)
    a, b = torch.randn(2, 50, generator=g, dtype=torch.float64) * 3
    made = {name: module() for name, module in ACTIVATIONS.items()}
    return {
        "activations": {
            "z": _as_list(z),
            "values": {name: _as_list(f(z)) for name, f in made.items()},
        },
        "gated": {
            "a": _as_list(a),
            "b": _as_list(b),
            "values": {name: _as_list(f(a) * b) for name, f in made.items()},
        },
    }


def _softmax_fixtures(g: torch.Generator, scale: float = 0.37) -> dict:
    from .attention import causal_mask, masked_softmax

    scores = torch.randn(3, 7, 7, generator=g, dtype=torch.float64) * 2
    mask = causal_mask(7)
    return {
        "scores": [_as_list(s) for s in scores],
        "scale": scale,
        "plain": [_as_list(masked_softmax(s * scale)) for s in scores],
        "causal": [_as_list(masked_softmax(s * scale, mask)) for s in scores],
    }


def _gmlp_fixtures(g: torch.Generator) -> dict[str, Any]:
    from .gmlp import diagonal_means, toeplitz_score

    weight = torch.randn(12, 12, generator=g, dtype=torch.float64).tril()
    return {
        "n": 12,
        "weight": _as_list(weight),
        "diagonal_means": _as_list(diagonal_means(weight)),
        "toeplitz_score": toeplitz_score(weight),
        "encoded": encode_lower(weight),
    }


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(
        description="Write the fixtures views.js is tested against (JSON)."
    )
    parser.add_argument("path", type=_fixtures_path)
    args = parser.parse_args(argv)
    # Checked by writing there first: os.access answers yes to root for
    # /proc, where nothing can be written.
    try:
        probe = args.path.parent / f".write-test-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as error:
        parser.error(
            f"path: cannot write in {args.path.parent}:"
            f" {error.strerror or error}"
        )
    text = json.dumps(fixtures())
    try:
        args.path.write_text(text)
    except OSError as error:
        parser.error(f"path: cannot write {args.path}: {error.strerror}")
    print(f"wrote {args.path}")


def _fixtures_path(text: str) -> Path:
    """argparse type: a file to write in an existing folder (not "", which
    is the current folder, nor a directory)."""
    import argparse

    path = Path(text)
    if not text.strip() or path.is_dir():
        raise argparse.ArgumentTypeError(
            f"must be a file to write, got {text!r}"
            + (" (a directory)" if text.strip() else "")
        )
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(
            f"the folder {path.parent} does not exist (make it first)"
        )
    return path


if __name__ == "__main__":
    main()
