"""Speed and memory of every mixer side by side: time and peak memory against
sequence length.

``python -m mixers.bench.side_by_side --profile cpu`` measures, for sequence
lengths from 256 to 2048 (to 8192 with ``--profile gpu``), the forward pass and
the forward plus backward pass of each token mixer of the package, built by the
model's own registry (``mixers.model.TOKEN_MIXERS``) as a causal layer of one
block, on every path it has, in float32 and in bf16 autocast:

=============  ====================  ==========================================
mixer          paths                 what a path is
=============  ====================  ==========================================
``attention``  ``eager``, ``sdpa``   ``dot_product_attention`` (scores
                                     materialised) or torch's fused SDPA
                                     (``is_causal``, no mask read)
``rotary``     ``eager``, ``sdpa``   the same, q and k rotated first
``alibi``      ``eager``, ``sdpa``,  the bias built and added, or passed to
               ``flex``              SDPA as a float mask, or computed inside a
                                     compiled FlexAttention kernel
``gmlp``       ``default``           the Spatial Gating Unit: W [L, L] times
                                     the gate's half
``amlp``       ``default``           the same with a tiny single-head attention
                                     (SDPA) in the gate
=============  ====================  ==========================================

and, for reference, the two channel mixers of the experiment (``gelu``,
``swiglu``), which cost the same per position at any length: a block of
attention costs its token mixer plus one of them, a gMLP block its token mixer
alone. The mixers are whole layers, projections included.

Width: ``d_model`` and ``n_heads`` of the profile; the FFNs have ``d_ff =
4·d_model`` (SwiGLU 2/3 of it); gMLP and aMLP ``d_ffn = 8·d_model``, at which a
gMLP block has, besides its W, about the parameters of an attention + GELU
block (12·d_model²): what the experiment's parameter matching gives too. W
grows as L², so gMLP's parameters are quadratic in the length as well; the
results count every mixer's parameters at every length.

For each length every (mixer, path, precision, mode) is called once to warm up
(FlexAttention compiles then; its time is recorded as ``first_call_s``), then
all are timed interleaved (``mixers.bench.time_interleaved``), ``repeats``
rounds, and summarised by their median; then the peak memory of each is
measured (``mixers.bench.peak_memory``: on a CPU, the allocations that
torch.profiler records). Every path's forward output is compared with the
float32 eager one, so that a fast wrong answer would show. FlexAttention has no
backward pass on a CPU: that entry records torch's error instead of a time.

What the chapter reads are ratios measured side by side in this one run, not
absolute times: ``fused_speedup`` (eager time over each path's),
``bf16_speedup`` (float32 time over bf16), ``vs_attention`` (each time over
causal SDPA attention's at the same length, precision and mode), and
``exponents``: the slope of log(time) against log(length), least squares over
the lengths (``fit_exponent``), with the slope over the last doubling alone,
where the quadratic term weighs most. Attention's score matrix and gMLP's W @ Z
are both L² in time; everything else (projections, FFNs) is linear, so a
measured exponent lies between 1 and 2.

It writes ``side_by_side_bench-PROFILE.json`` (to ``runs/``; ``--out
book/results`` for the chapter's) with the provenance of the run.
"""

from __future__ import annotations

import math
import time
from typing import Callable

import torch
from torch import Tensor, nn

from ..experiments import cpu_threads
from ..model import CHANNEL_MIXERS, TOKEN_MIXERS, ModelConfig
from . import (
    bench_device,
    bench_settings,
    benchmark_main,
    finished_provenance,
    load_average,
    machine_provenance,
    one_kernel_per_shape,
    random_inputs,
    time_and_measure,
    warm_up,
)
from .alibi import flex_backward_unsupported

NAME = "side_by_side_bench"
DURATIONS = {
    "smoke": "under a minute (FlexAttention compiles for each shape)",
    "cpu": "about 2.5 minutes on one CPU thread",
    "gpu": "a few minutes on one GPU",
}

#: Each timed mixer and its paths: the values its layer's ``backend`` takes
#: (``default``: one path).
MIXERS = {
    "attention": ("eager", "sdpa"),
    "rotary": ("eager", "sdpa"),
    "alibi": ("eager", "sdpa", "flex"),
    "gmlp": ("default",),
    "amlp": ("default",),
    "gelu": ("default",),
    "swiglu": ("default",),
}
TOKEN_MIXER_NAMES = ("attention", "rotary", "alibi", "gmlp", "amlp")
PRECISIONS = ("float32", "bf16")
MODES = ("forward", "forward_backward")
#: The denominator of ``vs_attention``: the package's default attention path.
REFERENCE = ("attention", "sdpa")

# Per profile: the device, the lengths, the layer's width and heads, the batch,
# the timed rounds and the CPU's intra-op threads (one, as in the experiments:
# on shared cores two OpenMP threads wait for each other at every barrier and
# the timings scatter).
SETTINGS = {
    "smoke": dict(device="cpu", lengths=(16, 32, 64), d_model=16, n_heads=2,
                  batch=1, repeats=1, threads=1),
    "cpu": dict(device="cpu", lengths=(256, 512, 1024, 2048), d_model=256,
                n_heads=4, batch=1, repeats=5, threads=1),
    "gpu": dict(device="cuda", lengths=(256, 512, 1024, 2048, 4096, 8192),
                d_model=384, n_heads=6, batch=4, repeats=10, threads=None),
}  # fmt: skip


# -----------------------------------------------------------------------------
# The layers.


def build_mixer(
    name: str, length: int, d_model: int, n_heads: int
) -> nn.Module:
    """The mixer ``name`` of ``MIXERS`` as the model builds it for one causal
    block of length ``length``: ``[batch, length, d_model] -> [batch, length,
    d_model]``."""
    if name not in MIXERS:
        raise ValueError(f"mixer must be one of {list(MIXERS)}, got {name!r}")
    token_mixer = name in TOKEN_MIXER_NAMES
    if token_mixer:
        # gMLP's d_ffn: see the docstring
        d_ff = 8 * d_model if TOKEN_MIXERS[name].mixes_channels else None
        mixer = dict(d_ff=d_ff, token_mixer=name)
    else:
        mixer = dict(d_ff=4 * d_model, channel_mixer=name)
    config = ModelConfig(
        vocab_size=1,
        d_model=d_model,
        n_layers=1,
        n_heads=n_heads,
        block_size=length,
        **mixer,
    )
    if token_mixer:
        return TOKEN_MIXERS[name].build(config)
    return CHANNEL_MIXERS[name](config)


def _autocast(device: torch.device, precision: str):
    return torch.autocast(
        device.type, dtype=torch.bfloat16, enabled=precision == "bf16"
    )


def _call(
    layer: nn.Module,
    path: str,
    precision: str,
    mode: str,
    x: Tensor,
    grad: Tensor,
    device: torch.device,
) -> Callable[[], Tensor | None]:
    """One call of ``layer`` on ``x [batch, L, d_model]`` along ``path``: the
    forward under no_grad, or the forward and a backward of ``grad`` to the
    input and the weights."""

    def forward(inputs: Tensor) -> Tensor:
        if path != "default":
            # the layers share weights across paths: set it for each call
            layer.backend = path
        with _autocast(device, precision):
            return layer(inputs)

    if mode == "forward":
        # FlexAttention on a CPU refuses inputs that require grad, even under
        # no_grad
        inputs = x.detach()

        def run() -> Tensor:
            with torch.no_grad():
                return forward(inputs)

    else:

        def run() -> None:
            x.grad = None
            layer.zero_grad(set_to_none=True)
            out = forward(x)
            out.backward(grad.to(out.dtype))

    return run


# -----------------------------------------------------------------------------
# One length.


def bench_length(
    length: int,
    settings: dict,
    device: torch.device,
    mixers=tuple(MIXERS),
    memory: bool = True,
) -> dict:
    """Every (mixer, path, precision, mode) at one length: times, peak memory,
    errors, accuracy.

    Returns ``{"length", "parameters": {mixer: count}, "calls": {mixer: {path:
    {precision: {mode: entry}}}}, "max_abs_diff_vs_eager_float32": {mixer:
    {path: {precision: diff}}}}``; an entry holds ``first_call_s``, the
    ``summarise_times`` fields, ``peak_bytes`` and ``error`` (None, or why that
    call cannot run, e.g. FlexAttention's backward on a CPU).
    """
    d_model = settings["d_model"]
    x, grad = random_inputs(settings["batch"], length, d_model, device)
    x.requires_grad_()
    torch.manual_seed(0)
    layers = {
        name: build_mixer(name, length, d_model, settings["n_heads"]).to(
            device
        )
        for name in mixers
    }
    # Warm-up: FlexAttention compiles here; its backward is never tried
    # where torch has none (on a CPU).
    entries, calls = warm_up(
        {
            key: _call(layers[key[0]], *key[1:], x, grad, device)
            for key in _keys(mixers)
        },
        device,
        _flex_backward_unsupported(mixers, device),
    )
    time_and_measure(entries, calls, settings["repeats"], device, memory)
    return {
        "length": length,
        "parameters": {
            name: sum(p.numel() for p in layer.parameters())
            for name, layer in layers.items()
        },
        "calls": _nest(entries),
        "max_abs_diff_vs_eager_float32": _accuracy(calls, mixers),
    }


def _keys(mixers) -> list[tuple[str, str, str, str]]:
    """Every (mixer, path, precision, mode) of ``mixers``, in the order they
    are called and reported."""
    return [
        (name, path, precision, mode)
        for name in mixers
        for path in MIXERS[name]
        for precision in PRECISIONS
        for mode in MODES
    ]


def _flex_backward_unsupported(mixers, device) -> dict:
    """ALiBi's FlexAttention path's backward, in both precisions, where torch
    has none (``flex_backward_unsupported``): its keys, with torch's
    reason, for ``warm_up``."""
    reason = flex_backward_unsupported(device) if "alibi" in mixers else None
    if reason is None:
        return {}
    return {
        ("alibi", "flex", precision, "forward_backward"): reason
        for precision in PRECISIONS
    }


def _nest(entries: dict) -> dict:
    """``{(a, b, c, d): v}`` as ``{a: {b: {c: {d: v}}}}``."""
    out: dict = {}
    for (name, path, precision, mode), value in entries.items():
        out.setdefault(name, {}).setdefault(path, {}).setdefault(
            precision, {}
        )[mode] = value
    return out


def _accuracy(calls: dict, mixers) -> dict:
    """Each path's forward output against the same mixer's first path in
    float32 (the eager one where there is one): the largest absolute
    difference."""
    out = {}
    for name in mixers:
        reference_key = (name, MIXERS[name][0], "float32", "forward")
        if reference_key not in calls:
            continue
        expected = calls[reference_key]().float()
        out[name] = {}
        for path in MIXERS[name]:
            out[name][path] = {}
            for precision in PRECISIONS:
                key = (name, path, precision, "forward")
                if key in calls:
                    out[name][path][precision] = (
                        (calls[key]().float() - expected).abs().max().item()
                    )
    return out


# -----------------------------------------------------------------------------
# Ratios and exponents.


def _median(
    rows: dict, name: str, path: str, precision: str, mode: str
) -> float | None:
    return (
        rows.get(name, {})
        .get(path, {})
        .get(precision, {})
        .get(mode, {})
        .get("median_s")
    )


def ratios(row: dict) -> dict:
    """One length's side-by-side ratios (None where either time is missing):

    * ``fused_speedup[mixer][path][precision][mode]``: the eager path's time
      over this path's;
    * ``bf16_speedup[mixer][path][mode]``: float32 time over bf16 time;
    * ``vs_attention[mixer][path][precision][mode]``: this time over
      ``REFERENCE``'s (attention, SDPA) at the same precision and mode.
    """
    calls = row["calls"]

    def ratio(a, b):
        return a / b if a is not None and b is not None else None

    fused, bf16, relative = {}, {}, {}
    for name, paths in calls.items():
        for path in paths:
            for mode in MODES:
                bf16.setdefault(name, {}).setdefault(path, {})[mode] = ratio(
                    _median(calls, name, path, "float32", mode),
                    _median(calls, name, path, "bf16", mode),
                )
                for precision in PRECISIONS:
                    time_s = _median(calls, name, path, precision, mode)
                    if "eager" in MIXERS[name] and path != "eager":
                        fused.setdefault(name, {}).setdefault(
                            path, {}
                        ).setdefault(precision, {})[mode] = ratio(
                            _median(calls, name, "eager", precision, mode),
                            time_s,
                        )
                    relative.setdefault(name, {}).setdefault(
                        path, {}
                    ).setdefault(precision, {})[mode] = ratio(
                        time_s, _median(calls, *REFERENCE, precision, mode)
                    )
    return {
        "fused_speedup": fused,
        "bf16_speedup": bf16,
        "vs_attention": relative,
    }


def fit_exponent(lengths: list[int], values: list[float]) -> dict | None:
    """The exponent p of ``value ≈ c · length^p``: the least-squares slope of
    log(value) against log(length); and the slope over the last doubling alone.
    None with fewer than two points.
    """
    points = [
        (math.log(n), math.log(v))
        for n, v in zip(lengths, values)
        if v is not None and v > 0
    ]
    if len(points) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum(
        (x - mean_x) ** 2 for x, _ in points
    )
    (x1, y1), (x2, y2) = points[-2:]
    return {
        "exponent": slope,
        "coefficient": math.exp(mean_y - slope * mean_x),
        "last_doubling": (y2 - y1) / (x2 - x1),
        "points": len(points),
    }


def exponents(rows: list[dict]) -> dict:
    """``fit_exponent`` of every (mixer, path, precision, mode)'s median time
    against length, and of every mixer's parameter count (``parameters``)."""
    lengths = [row["length"] for row in rows]
    times: dict = {}
    for name, paths in rows[0]["calls"].items():
        for path in paths:
            for precision in PRECISIONS:
                for mode in MODES:
                    values = [
                        _median(row["calls"], name, path, precision, mode)
                        for row in rows
                    ]
                    times.setdefault(name, {}).setdefault(path, {}).setdefault(
                        precision, {}
                    )[mode] = (
                        fit_exponent(lengths, values)
                        if all(v is not None for v in values)
                        else None
                    )
    parameters = {
        name: fit_exponent(lengths, [row["parameters"][name] for row in rows])
        for name in rows[0]["parameters"]
    }
    return {"time": times, "parameters": parameters}


# -----------------------------------------------------------------------------
# The benchmark.


def run(
    profile: str = "cpu",
    lengths=None,
    repeats: int | None = None,
    mixers=None,
    progress: bool = True,
    memory: bool = True,
) -> dict:
    """Every mixer at every length of ``profile``: JSON-able results with
    ratios, exponents and provenance. ``lengths``, ``repeats`` and ``mixers``
    (names of ``MIXERS``) override the profile's.
    """
    start = time.perf_counter()
    settings = bench_settings(profile, SETTINGS, lengths, repeats)
    mixers = _checked_mixers(mixers)
    device = bench_device(settings["device"], profile)
    load_start = load_average()
    with cpu_threads(settings["threads"], enabled=device.type == "cpu"):
        with one_kernel_per_shape():  # see mixers.alibi
            rows = []
            for length in settings["lengths"]:
                row = bench_length(length, settings, device, mixers, memory)
                row["ratios"] = ratios(row)
                rows.append(row)
                if progress:
                    print(format_row(row), flush=True)
        prov = machine_provenance(profile, device)
    return {
        "experiment": NAME,
        "what": (
            "each mixer as one causal layer, projections included: forward,"
            " and forward + backward, float32 and bf16 autocast, on every path"
            " it has"
        ),
        "settings": {
            **settings,
            "lengths": list(settings["lengths"]),
            "mixers": {m: list(MIXERS[m]) for m in mixers},
            "precisions": list(PRECISIONS),
            "modes": list(MODES),
            "memory": memory,
            "reference": list(REFERENCE),
            "gmlp_d_ffn": 8 * settings["d_model"],
            "ffn_d_ff": 4 * settings["d_model"],
        },
        "results": rows,
        "exponents": exponents(rows),
        "provenance": finished_provenance(prov, start, load_start),
    }


def _checked_mixers(mixers) -> tuple[str, ...]:
    """The names of ``MIXERS`` to time (all of them for None): attention
    among them, since the ratios ``vs_attention`` divide by its time."""
    mixers = tuple(MIXERS if mixers is None else mixers)
    unknown = [name for name in mixers if name not in MIXERS]
    if unknown or not mixers:
        raise ValueError(
            f"mixers must be names in {list(MIXERS)}, got {list(mixers)}"
        )
    if "attention" not in mixers:
        raise ValueError(
            "mixers must include 'attention': the ratios vs_attention divide"
            " by its time"
        )
    return mixers


def format_row(row: dict) -> str:
    """One length's medians (ms) and its ratios to causal SDPA attention, as
    text."""
    lines = [f"L = {row['length']}"]
    for name, paths in row["calls"].items():
        for path, precisions in paths.items():
            parts = []
            for precision, modes in precisions.items():
                for mode, entry in modes.items():
                    label = (
                        f"{precision}"
                        f" {'fwd' if mode == 'forward' else 'fwd+bwd'}"
                    )
                    if entry.get("median_s") is None:
                        parts.append(f"{label} n/a")
                        continue
                    ratio = row["ratios"]["vs_attention"][name][path][
                        precision
                    ][mode]
                    parts.append(
                        f"{label} {entry['median_s'] * 1e3:8.2f} ms"
                        + (f" ({ratio:4.1f}x)" if ratio else "")
                    )
            lines.append(f"  {name + '/' + path:16s} " + " | ".join(parts))
    return "\n".join(lines)


def main() -> None:
    benchmark_main(__doc__, NAME, DURATIONS, SETTINGS, run, "side_by_side")


if __name__ == "__main__":
    main()
