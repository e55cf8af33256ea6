"""Speed and memory of causal ALiBi attention: labml's layout against the
package's backends.

``python -m mixers.bench.alibi --profile cpu`` times, for sequence lengths from
256 to 2048 (to 4096 with ``--profile gpu``), the forward pass and the forward
plus backward pass of

===============  ==============================================================
``labml``        ``mixers.bench.alibi.labml_style_alibi_attention``: the layout
                 of labml's implementation (labml.ai's "Annotated Deep Learning
                 Paper Implementations"), scores materialised as ``[L, L,
                 batch, heads]`` by einsum, the bias ``m·j`` added, masked,
                 soft-maxed over a strided dim
``eager``        ``AlibiMultiHeadAttention(backend="eager")``: ``alibi_bias``
                 built for the call, ``mixers.attention.dot_product_attention``
                 (scores ``[batch, heads, L, L]``)
``sdpa``         ``AlibiMultiHeadAttention(backend="sdpa")``: torch's fused
                 SDPA, with the bias (and -inf above the diagonal) as one
                 additive float mask ``[1, heads, L, L]``, built on the first
                 call and kept
``flex``         ``AlibiMultiHeadAttention(backend="flex")``: compiled
                 FlexAttention, the bias computed inside the kernel
                 (``score_mod``), the causal mask a block mask
``causal_sdpa``  ``MultiHeadAttention(causal=True)``, no ALiBi: fused SDPA with
                 ``is_causal``, the floor -- what attention costs with no bias
                 at all
===============  ==============================================================

All of them compute causal self-attention on the same ``x [batch, L,
heads·d_head]``. The layers' four projections are replaced by identities, so
that what is timed is attention itself (splitting and merging heads, building
the bias, the kernel) and not the O(L·d²) matrix products around it, which are
the same for every implementation. For each length the implementations are
interleaved, repeated, and summarised by their median; the first call of each
(FlexAttention's compilation, the SDPA layer's bias) is timed separately and
not counted. Each is also given as a multiple of ``causal_sdpa``'s time in the
same run (``time_vs_causal_floor``). Peak memory is measured by
``mixers.bench.peak_memory`` (on a CPU: allocations recorded by
``torch.profiler``). Every output is compared with the eager path's, so a fast
wrong answer would show.

At the longest length it also repeats the forward comparison for other batch
sizes and head shapes (``extra_shapes``), and splits FlexAttention's time into
the kernel and the causal block mask, which the layer builds once per length
and caches (``flex_diagnostics``).

It writes ``alibi_bench-PROFILE.json`` (to ``runs/``; ``--out book/results``
for the chapter's) with the provenance of the run.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Callable

import torch
from torch import Tensor, nn

from .._checks import check_tensor
from ..alibi import AlibiMultiHeadAttention, as_slopes
from ..attention import MultiHeadAttention, causal_mask
from ..experiments import cpu_threads
from . import (
    bench_device,
    bench_settings,
    benchmark_main,
    error_line,
    finished_provenance,
    load_average,
    machine_provenance,
    one_kernel_per_shape,
    random_inputs,
    time_and_measure,
    time_interleaved,
    warm_up,
)

NAME = "alibi_bench"
DURATIONS = {
    "smoke": "seconds",
    "cpu": "about 3 minutes on one CPU core",
    "gpu": "minutes on one GPU",
}

IMPLEMENTATIONS = ("labml", "eager", "sdpa", "flex", "causal_sdpa")
MODES = ("forward", "forward_backward")

# Per profile: the device, the lengths, the shape of one attention call, its
# dtype, how many timed repetitions per (length, implementation, mode), and the
# intra-op threads on a CPU (None: torch's default). One thread, as in the
# experiments: on cores that other jobs share, two OpenMP threads wait for each
# other at every barrier, and the timings scatter by factors of several.
SETTINGS = {
    "smoke": dict(
        device="cpu",
        lengths=(16, 32),
        batch=1,
        heads=2,
        d_head=8,
        dtype="float32",
        repeats=1,
        threads=None,
    ),
    "cpu": dict(
        device="cpu",
        lengths=(256, 512, 1024, 2048),
        batch=1,
        heads=8,
        d_head=64,
        dtype="float32",
        repeats=7,
        threads=1,
        extra_shapes=(
            dict(batch=4, heads=8, d_head=64),
            dict(batch=1, heads=16, d_head=32),
        ),
    ),
    "gpu": dict(
        device="cuda",
        lengths=(256, 512, 1024, 2048, 4096),
        batch=4,
        heads=8,
        d_head=64,
        dtype="bfloat16",
        repeats=10,
        extra_shapes=(dict(batch=1, heads=8, d_head=64),),
    ),
}
# At the longest length only, ``extra_shapes`` repeats the forward comparison
# with other batch sizes and head shapes (the ratio between implementations
# depends on them), and ``flex_diagnostics`` splits FlexAttention's time into
# its parts.


def _without_projections(layer: MultiHeadAttention) -> MultiHeadAttention:
    """The layer with its q/k/v and out projections replaced by identities: its
    forward is attention alone."""

    def inputs_as_they_are(query, key, value, self_attention=False):
        return query, key, value

    layer.project_qkv = inputs_as_they_are
    layer.out_proj = nn.Identity()
    return layer


def build_implementations(
    heads: int, d_head: int, device, names=IMPLEMENTATIONS
) -> dict[str, Callable[[Tensor], Tensor]]:
    """Each implementation as a function ``x [batch, L, heads·d_head] ->
    [batch, L, heads·d_head]``.

    They all compute causal ALiBi self-attention with ``q = k = v`` = the heads
    of ``x`` (except ``causal_sdpa``, which has no bias).
    """
    unknown = set(names) - set(IMPLEMENTATIONS)
    if unknown:
        raise ValueError(
            f"unknown implementations {sorted(unknown)}; known:"
            f" {IMPLEMENTATIONS}"
        )
    d_model = heads * d_head
    layers = {
        backend: _without_projections(
            AlibiMultiHeadAttention(
                d_model, heads, causal=True, backend=backend
            )
        )
        for backend in ("eager", "sdpa", "flex")
    }
    floor = _without_projections(
        MultiHeadAttention(d_model, heads, causal=True, backend="sdpa")
    )
    reference = layers["eager"]

    def labml(x: Tensor) -> Tensor:
        q = reference.split_heads(x)  # [batch, heads, L, d_head]
        out = labml_style_alibi_attention(q, q, q, reference.slopes)
        return reference.merge_heads(out)

    functions = {"labml": labml, **layers, "causal_sdpa": floor}
    for layer in (*layers.values(), floor):
        layer.to(device).eval()
    return {name: functions[name] for name in names}


def flex_backward_unsupported(device) -> str | None:
    """Why FlexAttention cannot run a backward pass on ``device`` (torch's
    message), or None if it can.

    Asked of torch's *uncompiled* ``flex_attention`` on a tiny input, never of
    the compiled one the layer uses: a compiled call that raises is not retried
    by ``torch.compile``, which then runs later calls of it through its slow
    eager fallback -- timing that instead of the kernel.
    """
    from torch.nn.attention.flex_attention import flex_attention

    q = torch.zeros(1, 1, 16, 16, device=device, requires_grad=True)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore",
                message=".*flex_attention called without torch.compile.*",
            )
            flex_attention(q, q, q).sum().backward()
    except NotImplementedError as error:
        return error_line(error)
    return None


def _call(fn, x: Tensor, grad: Tensor, mode: str) -> Callable[[], None]:
    if mode == "forward":
        # FlexAttention on a CPU refuses inputs that require grad, even under
        # no_grad
        x = x.detach()

        def run():
            with torch.no_grad():
                fn(x)

    else:

        def run():
            x.grad = None
            fn(x).backward(grad)

    return run


def bench_length(
    functions: dict,
    length: int,
    batch: int,
    heads: int,
    d_head: int,
    dtype: torch.dtype,
    device: torch.device,
    repeats: int,
    modes=MODES,
    memory: bool = True,
) -> dict:
    """Time and measure every implementation at one length; see the module
    docstring.

    ``memory=False`` skips the peak-memory probe (``peak_bytes`` is then None).
    """
    x, grad = random_inputs(batch, length, heads * d_head, device, dtype)
    x.requires_grad_()
    # Warm-up (and compilation): one call of each; an implementation that
    # cannot run a mode here is recorded with its error and skipped after.
    entries, calls = warm_up(
        {
            (name, mode): _call(fn, x, grad, mode)
            for name, fn in functions.items()
            for mode in modes
        },
        device,
        _flex_backward_unsupported(functions, device),
    )
    rows = {name: {} for name in functions}
    for (name, mode), entry in entries.items():
        rows[name][mode] = entry
    _compare_with_eager(functions, calls, x.detach(), rows)
    time_and_measure(entries, calls, repeats, device, memory)
    _record_kept_bias(functions, rows)
    itemsize = torch.finfo(dtype).bits // 8
    return {
        "length": length,
        "implementations": rows,
        **_ratios(rows, functions, modes),
        # The size of one [L, L, batch, heads] score tensor: the unit of
        # labml's layout's memory.
        "scores_tensor_bytes": length * length * batch * heads * itemsize,
    }


def _flex_backward_unsupported(functions: dict, device) -> dict:
    """FlexAttention's backward, never even tried where torch has none (on a
    CPU; see ``flex_backward_unsupported``): its key for ``warm_up``, with
    torch's reason."""
    reason = flex_backward_unsupported(device) if "flex" in functions else None
    return {("flex", "forward_backward"): reason} if reason else {}


def _compare_with_eager(
    functions: dict, calls: dict, x: Tensor, rows: dict
) -> None:
    """Correctness: into each row, the largest difference of its forward
    output from the eager path's (not for the floor, which has no bias), so
    that a fast wrong answer would show."""
    if "eager" not in functions:
        return
    with torch.no_grad():
        expected = functions["eager"](x).float()
        for name, fn in functions.items():
            if name != "causal_sdpa" and (name, "forward") in calls:
                rows[name]["max_abs_diff_vs_eager"] = (
                    (fn(x).float() - expected).abs().max().item()
                )


def _ratios(rows: dict, functions: dict, modes) -> dict:
    """Per mode and implementation: labml's time over its time
    (``speedup_vs_labml``) and its time over the causal floor's, no bias
    (``time_vs_causal_floor``), where both were timed."""
    speedup, vs_floor = ({mode: {} for mode in modes} for _ in range(2))
    for mode in modes:
        labml_row = rows.get("labml", {}).get(mode, {})
        floor_row = rows.get("causal_sdpa", {}).get(mode, {})
        for name in functions:
            row = rows[name].get(mode, {})
            if "median_s" in row and "median_s" in labml_row:
                speedup[mode][name] = labml_row["median_s"] / row["median_s"]
            if "median_s" in row and "median_s" in floor_row:
                vs_floor[mode][name] = row["median_s"] / floor_row["median_s"]
    return {"speedup_vs_labml": speedup, "time_vs_causal_floor": vs_floor}


def _record_kept_bias(functions: dict, rows: dict) -> None:
    """The bias the SDPA layer keeps (``[heads, L, L]``, outside any call's
    peak): memory it holds between calls, the price of not rebuilding it
    every call."""
    kept = getattr(functions.get("sdpa"), "_bias_cache", None)
    if kept is not None:
        rows["sdpa"]["kept_bias_bytes"] = (
            kept[1].numel() * kept[1].element_size()
        )


def flex_diagnostics(
    length: int, shape: dict, dtype, device, repeats: int
) -> dict:
    """Where the flex layer's forward time goes, at one length and ``shape``
    (its ``batch``, ``heads`` and ``d_head``): median seconds of

    - ``layer``: the whole call, as timed by ``bench_length``;
    - ``kernel_with_alibi``: the compiled kernel with the layer's ALiBi
      ``score_mod`` and a block mask built once, outside the timing;
    - ``kernel_without_bias``: the same kernel with the causal block mask only
      (no ``score_mod``): what the bias itself costs inside the kernel is the
      difference;
    - ``create_block_mask``: building the causal block mask, what the layer's
      cache saves per call.
    """
    from torch.nn.attention.flex_attention import create_block_mask

    from ..alibi import compiled_flex_attention

    batch, heads, d_head = shape["batch"], shape["heads"], shape["d_head"]
    layer = _without_projections(
        AlibiMultiHeadAttention(
            heads * d_head, heads, causal=True, backend="flex"
        )
    )
    layer.to(device).eval()
    x, _ = random_inputs(batch, length, heads * d_head, device, dtype)
    # three views of x, as inside the layer
    q, k, v = (layer.split_heads(x) for _ in range(3))
    # and, as the layer does on a CPU, each in a contiguous layout
    if device.type == "cpu":
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    # the layer's, for a causal self-attention call
    score_mod = layer._flex_score_mod(device, 0)

    def causal(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx

    block_mask = create_block_mask(
        causal, None, None, length, length, device=device
    )
    flex = compiled_flex_attention()
    parts = {
        "layer": lambda: layer(x),
        "kernel_with_alibi": lambda: flex(
            q, k, v, score_mod=score_mod, block_mask=block_mask
        ),
        "kernel_without_bias": lambda: flex(q, k, v, block_mask=block_mask),
        "create_block_mask": lambda: create_block_mask(
            causal, None, None, length, length, device=device
        ),
    }
    with torch.no_grad():
        for part in parts.values():  # warm-up and compilation
            part()
        times = time_interleaved(parts, repeats, device)
    return {
        "length": length,
        "batch": batch,
        "heads": heads,
        "d_head": d_head,
        **times,
    }


def run(
    profile: str = "cpu",
    lengths=None,
    repeats: int | None = None,
    implementations=IMPLEMENTATIONS,
    progress: bool = True,
    memory: bool = True,
) -> dict:
    """Benchmark every implementation at every length of ``profile``; return
    JSON-able results.

    ``lengths`` and ``repeats`` override the profile's; ``memory=False`` skips
    the memory probe.
    """
    start, load_start = time.perf_counter(), load_average()
    settings = bench_settings(profile, SETTINGS, lengths, repeats)
    device = bench_device(settings["device"], profile)
    dtype = getattr(torch, settings["dtype"])
    torch.manual_seed(0)
    with cpu_threads(settings.get("threads"), enabled=device.type == "cpu"):
        with one_kernel_per_shape():
            out = _run(
                settings,
                device,
                dtype,
                tuple(implementations),
                progress,
                memory,
            )
        prov = machine_provenance(profile, device)  # the threads it ran on
    return {
        "experiment": NAME,
        "what": (
            "causal ALiBi self-attention, projections excluded: forward, and"
            " forward + backward"
        ),
        "settings": {
            **settings,
            "lengths": list(settings["lengths"]),
            "implementations": list(implementations),
            "modes": list(MODES),
            "memory": memory,
            "extra_shapes": [
                dict(shape) for shape in settings.get("extra_shapes", ())
            ],
        },
        **out,
        "provenance": finished_provenance(prov, start, load_start),
    }


def _run(
    settings: dict,
    device: torch.device,
    dtype: torch.dtype,
    implementations: tuple,
    progress: bool,
    memory: bool,
) -> dict:
    """Every length, then at the longest FlexAttention's diagnostics and the
    extra shapes, then the bias a default layer keeps; each target beside
    its figure."""
    functions = build_implementations(
        settings["heads"], settings["d_head"], device, implementations
    )
    results = []
    for length in settings["lengths"]:
        results.append(
            bench_length(
                functions,
                length,
                settings["batch"],
                settings["heads"],
                settings["d_head"],
                dtype,
                device,
                settings["repeats"],
                memory=memory,
            )
        )
        if progress:
            print(format_row(results[-1]), flush=True)
    # Diagnostics before the extra shapes, so that a kernel that fails to
    # compile for one of those cannot affect them.
    diagnostics = (
        _flex_diagnostics_at_longest(settings, dtype, device, progress)
        if "flex" in implementations
        else None
    )
    out = {
        "results": results,
        "flex_diagnostics": diagnostics,
        "extra_shapes": _extra_shapes(
            settings, implementations, dtype, device, progress
        ),
        "default_backend_kept_bias_bytes": kept_by_default(
            settings, device, dtype
        ),
    }
    out["targets"] = against_targets(out)
    if progress:
        print("\n".join(target_lines(out["targets"])), flush=True)
    return out


def _flex_diagnostics_at_longest(
    settings: dict, dtype, device, progress: bool
) -> dict:
    """``flex_diagnostics`` at the longest length, or the error that stopped
    it (a kernel that fails to compile)."""
    longest = settings["lengths"][-1]
    try:
        diagnostics = flex_diagnostics(
            longest, settings, dtype, device, settings["repeats"]
        )
    except RuntimeError as error:
        return {"length": longest, "error": error_line(error)}
    if progress:
        print(
            "flex diagnostics (median ms): "
            + ", ".join(
                f"{name} {diagnostics[name]['median_s'] * 1e3:.1f}"
                for name in (
                    "layer",
                    "kernel_with_alibi",
                    "kernel_without_bias",
                    "create_block_mask",
                )
            ),
            flush=True,
        )
    return diagnostics


def _extra_shapes(
    settings: dict, implementations: tuple, dtype, device, progress: bool
) -> list[dict]:
    """The forward comparison at the longest length for the profile's other
    batch sizes and head shapes (``extra_shapes``): the ratio between
    implementations depends on them. Without the eager path, whose time is
    about labml's."""
    names = tuple(name for name in implementations if name != "eager")
    extra = []
    for shape in settings.get("extra_shapes", ()):
        row = bench_length(
            build_implementations(
                shape["heads"], shape["d_head"], device, names
            ),
            settings["lengths"][-1],
            shape["batch"],
            shape["heads"],
            shape["d_head"],
            dtype,
            device,
            settings["repeats"],
            modes=("forward",),
            memory=False,
        )
        extra.append({**shape, **row})
        if progress:
            print(
                f"batch {shape['batch']}, {shape['heads']} heads of"
                f" {shape['d_head']}:\n" + format_row(row),
                flush=True,
            )
    return extra


# Issue 31's targets on a GPU: the flex layer within 1.1x its kernel, its
# score_mod within 1.2x the kernel with no bias, flex forward within 1.6x the
# causal floor at the longest length (4,096), and no bias over 64 MiB kept by
# a layer at its default backend.
TARGETS = {
    "flex_layer_vs_kernel": 1.1,
    "score_mod_vs_no_bias": 1.2,
    "flex_forward_vs_causal_floor": 1.6,
    "default_backend_kept_bias_mib": 64.0,
}


def kept_by_default(settings: dict, device, dtype) -> dict:
    """Bytes of the bias a layer at its default backend ("auto") keeps after a
    forward call at each length (0: none), as it would run in a model."""
    layer = _without_projections(
        AlibiMultiHeadAttention(
            settings["heads"] * settings["d_head"],
            settings["heads"],
            causal=True,
        )
    )
    layer.to(device).eval()
    kept = {}
    for length in settings["lengths"]:
        x = torch.zeros(
            settings["batch"],
            length,
            settings["heads"] * settings["d_head"],
            device=device,
            dtype=dtype,
        )
        layer._bias_cache = None
        with torch.no_grad():
            layer(x)
        bias = layer._bias_cache
        kept[length] = (
            0 if bias is None else bias[1].numel() * bias[1].element_size()
        )
    return kept


def against_targets(out: dict) -> dict:
    """Each target's measured figure (None where it was not measured)."""
    diagnostics = out.get("flex_diagnostics") or {}

    def median(name):
        return diagnostics.get(name, {}).get("median_s")

    def ratio(a, b):
        return a / b if a is not None and b else None

    longest = out["results"][-1]
    floor = longest["time_vs_causal_floor"]["forward"].get("flex")
    kept = out["default_backend_kept_bias_bytes"]
    return {
        "flex_layer_vs_kernel": ratio(
            median("layer"), median("kernel_with_alibi")
        ),
        "score_mod_vs_no_bias": ratio(
            median("kernel_with_alibi"), median("kernel_without_bias")
        ),
        "flex_forward_vs_causal_floor": floor,
        "length": longest["length"],
        "default_backend_kept_bias_mib": max(kept.values()) / 2**20,
    }


def target_lines(measured: dict) -> list[str]:
    """Each target beside its figure, e.g. "flex layer: 1.05x its kernel
    (target <= 1.10x, met)"."""
    wording = {
        "flex_layer_vs_kernel": "flex layer: {:.2f}x its kernel",
        "score_mod_vs_no_bias": (
            "ALiBi score_mod: {:.2f}x the kernel without a bias"
        ),
        "flex_forward_vs_causal_floor": (
            f"flex forward at L = {measured['length']}:"
            " {:.2f}x the causal floor"
        ),
        "default_backend_kept_bias_mib": (
            "largest bias kept by the default backend: {:.1f} MiB"
        ),
    }
    lines = []
    for name, goal in TARGETS.items():
        value = measured[name]
        unit = " MiB" if name.endswith("_mib") else "x"
        if value is None:
            lines.append(
                wording[name].split(":")[0]
                + f": not measured (target <= {goal:.2f}{unit})"
            )
            continue
        verdict = "met" if value <= goal else "missed"
        lines.append(
            wording[name].format(value)
            + f" (target <= {goal:.2f}{unit}, {verdict})"
        )
    return lines


def format_row(row: dict) -> str:
    """One length's medians and ratios as text."""
    lines = [f"L = {row['length']}"]
    for name, modes in row["implementations"].items():
        parts = []
        for mode in MODES:
            entry = modes.get(mode)
            if entry is None:
                continue
            if entry.get("median_s") is None:
                parts.append(f"{mode}: n/a ({entry.get('error')})")
                continue
            ratio = row["speedup_vs_labml"][mode].get(name)
            floor = row.get("time_vs_causal_floor", {}).get(mode, {}).get(name)
            peak = entry.get("peak_bytes")
            parts.append(
                f"{mode} {entry['median_s'] * 1e3:9.2f} ms"
                + (f" ({ratio:5.1f}x labml)" if ratio else "")
                + (
                    f" ({floor:4.2f}x floor)"
                    if floor and name != "causal_sdpa"
                    else ""
                )
                + (
                    f" peak {peak / 2**20:8.1f} MiB"
                    if peak is not None
                    else ""
                )
            )
        kept = modes.get("kept_bias_bytes")
        lines.append(
            f"  {name:12s} "
            + " | ".join(parts)
            + (f" | keeps a {kept / 2**20:.1f} MiB bias" if kept else "")
        )
    return "\n".join(lines)


def main() -> None:
    benchmark_main(__doc__, NAME, DURATIONS, SETTINGS, run, "alibi")


# -----------------------------------------------------------------------------
# labml.ai's layout, kept as the benchmark's "before"


def labml_style_alibi_attention(
    q: Tensor, k: Tensor, v: Tensor, slopes, causal: bool = True
) -> Tensor:
    """ALiBi attention laid out as in labml.ai's annotated implementation --
    deliberately naive; the book's benchmark "before".

    q, k, v: ``[batch, heads, seq, d_head]`` (self-attention: one length);
    slopes: ``[heads]`` or a head count. Returns ``[batch, heads, seq,
    d_head]``, equal to causal ALiBi attention.

    Internally it follows labml's layout: tensors permuted to ``[seq, batch,
    heads, d]``, scores materialised as ``[seq, seq, batch, heads]`` by einsum,
    the bias in the form ``m · j`` (equal to ``-m · (i - j)`` up to a per-row
    constant) built as its own ``[seq, seq, heads]`` tensor and added, masked
    with ``masked_fill``, softmax over dim 1. Why it is slow:

    - every step materialises a full ``[seq, seq, batch, heads]`` tensor
      (scores, scores + bias, masked scores, weights): four O(seq²) tensors in
      memory where a fused kernel keeps none;
    - the softmax and the second einsum reduce over dim 1, a strided,
      non-innermost dim, and the einsums must permute their operands into a
      batched-matmul layout (copies);
    - nothing is fused: bias, mask and softmax are separate passes over memory,
      and work is spent on the masked half of the scores that a causal kernel
      would skip.

    Only ``m · j`` is correct here because of the causal mask's per-row
    softmax; for bidirectional use it would *favour* distant future keys (``-m
    · |i - j|`` is needed).
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_tensor(x, name, "[batch, heads, seq, d_head]", ndim=4)
    if k.shape != q.shape or v.shape[:3] != q.shape[:3]:
        raise ValueError(
            "q, k, v must have shapes [batch, heads, seq, d_head] with one"
            f" seq (self-attention), got q {tuple(q.shape)}, k"
            f" {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    batch, heads, seq, d_head = q.shape
    slopes = as_slopes(slopes, "slopes").to(device=q.device, dtype=q.dtype)
    if slopes.shape != (heads,):
        raise ValueError(
            f"slopes must have shape [heads={heads}], got"
            f" {tuple(slopes.shape)}"
        )

    # [seq, batch, heads, d]
    q, k, v = (x.permute(2, 0, 1, 3) for x in (q, k, v))
    # [seq, seq, batch, heads]
    scores = torch.einsum("ibhd,jbhd->ijbh", q, k) / math.sqrt(d_head)
    # [i, j] -> j
    distance = torch.arange(seq, device=q.device, dtype=q.dtype).expand(
        seq, seq
    )
    # [seq, seq, heads]: m · j
    bias = distance[:, :, None] * slopes[None, None, :]
    scores = scores + bias[:, :, None, :]
    if causal:
        allowed = causal_mask(seq, device=q.device)
        scores = scores.masked_fill(~allowed[:, :, None, None], float("-inf"))
    weights = torch.softmax(scores, dim=1)
    out = torch.einsum("ijbh,jbhd->ibhd", weights, v)  # [seq, batch, heads, d]
    return out.permute(1, 2, 0, 3)


# Last: run as a script, the module must have defined everything above first.
if __name__ == "__main__":
    main()
