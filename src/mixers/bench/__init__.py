"""Benchmarks: one module per measured claim, ``python -m mixers.bench.NAME``.

A benchmark times implementations of the same function *side by side in one
run*: for each size it interleaves them, repeats, and reports medians, so that
a change in the machine's load hits every implementation alike. Results go
through ``mixers.results.save_results`` to ``runs/NAME-PROFILE.json`` (``--out
book/results`` for the chapters') with the same provenance as an experiment's.

The helpers here are what every benchmark needs: a clock that waits for the
GPU, and the peak memory that a call allocates.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Callable

import torch

from ..model import ModelConfig
from ..results import provenance
from ..train import get_profile

__all__ = [
    "bench_config",
    "bench_device",
    "bench_settings",
    "machine_provenance",
    "one_kernel_per_shape",
    "random_inputs",
    "synchronize",
    "time_call",
    "time_interleaved",
    "peak_memory",
    "summarise_times",
    "benchmark_main",
    "check_out",
    "error_line",
    "finished_provenance",
    "time_and_measure",
    "warm_up",
    "profile_main",
    "load_average",
]


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work, so that a clock read afterwards includes it
    (no-op on a CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn: Callable[[], object], device: torch.device) -> float:
    """Wall-clock seconds of one call of ``fn``, including the GPU work it
    queued."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def summarise_times(times: list[float]) -> dict:
    """Median, min and max of repeated timings (seconds), and the timings
    themselves."""
    return {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "times_s": list(times),
    }


def time_interleaved(calls: dict, repeats: int, device: torch.device) -> dict:
    """``summarise_times`` of each of ``calls`` (key -> function of no
    arguments), timed ``repeats`` times in turn -- one call of each, then the
    next round -- so that a change in the machine's load hits every one alike.
    Warm them up before."""
    times = {key: [] for key in calls}
    for _ in range(repeats):
        for key, call in calls.items():
            times[key].append(time_call(call, device))
    return {key: summarise_times(values) for key, values in times.items()}


def peak_memory(fn: Callable[[], object], device: torch.device) -> int | None:
    """Peak bytes of tensor memory allocated during one call of ``fn``, above
    what was live before.

    On a GPU: ``torch.cuda.max_memory_allocated`` after resetting the peak. On
    a CPU, where PyTorch keeps no such counter, the call runs under
    ``torch.profiler`` with ``profile_memory=True``, which records every
    allocation and free made through PyTorch's CPU allocator; the running sum
    of those events, in time order, is the live memory, and its maximum the
    peak. What a compiled kernel allocates *inside* its own C++ code (small
    per-thread scratch buffers) does not go through that allocator and is not
    counted. Returns ``None`` if this torch build does not expose the
    allocation events.
    """
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    from torch.profiler import ProfilerActivity, profile

    try:
        from torch._C._profiler import _EventType
    except ImportError:
        return None
    with profile(
        activities=[ProfilerActivity.CPU], profile_memory=True
    ) as prof:
        fn()
    allocations: list[
        tuple[int, int]
    ] = []  # (time in ns, bytes: + allocated, - freed)

    def walk(nodes) -> None:
        for node in nodes:
            if (
                node.tag == _EventType.Allocation
                and node.extra_fields.device.type == "cpu"
            ):
                allocations.append(
                    (node.start_time_ns, node.extra_fields.alloc_size)
                )
            walk(node.children)

    try:
        walk(prof.profiler.kineto_results.experimental_event_tree())
    except AttributeError:
        return None
    live = peak = 0
    for _, size in sorted(allocations):
        live += size
        peak = max(peak, live)
    return peak


def error_line(error: Exception) -> str:
    """``error`` as one line of a results file: its type and the first line
    of its message."""
    message = str(error)
    return (
        f"{type(error).__name__}: {message.splitlines()[0] if message else ''}"
    )


def warm_up(
    calls: dict, device: torch.device, unsupported: dict | None = None
) -> tuple[dict, dict]:
    """Call each of ``calls`` (key -> function of no arguments) once, to warm
    it up (FlexAttention compiles then): per key, its ``first_call_s`` and
    ``error`` None; or only the ``error`` of a call that cannot run here
    (torch's ``NotImplementedError`` or ``RuntimeError``), or of one never
    tried, the reason in ``unsupported[key]``. Returns the entries, in the
    order of ``calls``, and the calls that ran."""
    unsupported = unsupported or {}
    entries, ran = {}, {}
    for key, call in calls.items():
        if key in unsupported:
            entries[key] = {"error": unsupported[key]}
            continue
        try:
            first = time_call(call, device)
        except (NotImplementedError, RuntimeError) as error:
            entries[key] = {"error": error_line(error)}
            continue
        entries[key] = {"first_call_s": first, "error": None}
        ran[key] = call
    return entries, ran


def time_and_measure(
    entries: dict,
    calls: dict,
    repeats: int,
    device: torch.device,
    memory: bool = True,
) -> None:
    """Into each call's entry: its ``time_interleaved`` summary over
    ``repeats`` rounds, so that a change in the machine's load hits every
    call alike; then its ``peak_bytes`` (``peak_memory``; None with
    ``memory=False``)."""
    for key, summary in time_interleaved(calls, repeats, device).items():
        entries[key].update(summary)
    for key, call in calls.items():
        entries[key]["peak_bytes"] = (
            peak_memory(call, device) if memory else None
        )


def load_average() -> list[float] | None:
    """The 1, 5 and 15-minute load averages (other processes competing for the
    cores), or None where the platform has none: a benchmark records them at
    its start and end.
    """
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # not available on this platform
        return None


# -----------------------------------------------------------------------------
# What the benchmarks set up alike: their settings and device, their inputs
# and models, and the record of where they ran.


def bench_settings(
    profile: str, table: dict, lengths=None, repeats: int | None = None
) -> dict:
    """A length benchmark's settings for ``profile`` (its ``table`` maps
    profiles to settings; ``mixers.experiments.profile_settings``), with
    ``lengths`` and ``repeats`` over the profile's where given: positive, or
    a ValueError names them."""
    # not at import: experiments import bench
    from ..experiments import profile_settings

    settings = dict(profile_settings(profile, table))
    if lengths is not None:
        settings["lengths"] = tuple(lengths)
    if repeats is not None:
        settings["repeats"] = repeats
    if (
        settings["repeats"] < 1
        or not settings["lengths"]
        or min(settings["lengths"]) < 1
    ):
        raise ValueError(
            f"repeats and lengths must be positive, got {settings['repeats']}"
            f" and {settings['lengths']}"
        )
    return settings


def bench_device(name: str, profile: str) -> torch.device:
    """The device ``name`` of a profile's settings; a clear error where the
    profile wants CUDA and there is none, before anything is built."""
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            f"profile {profile!r} needs a CUDA GPU; none is available"
        )
    return device


def one_kernel_per_shape():
    """``torch.compile``'s settings while a benchmark runs FlexAttention:
    every shape gets a kernel compiled for exactly that shape, as a model run
    at one length would use, rather than one dynamic-shape kernel (which
    failed to compile for an extra shape on a CPU); the recompile limit makes
    room for them all."""
    return torch._dynamo.config.patch(
        automatic_dynamic_shapes=False, recompile_limit=64
    )


def random_inputs(
    batch: int,
    length: int,
    width: int,
    device: torch.device,
    dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """An input ``[batch, length, width]`` and a gradient of the same shape
    for an output, from a generator seeded with the length: every
    implementation, and every run, reads the same numbers."""
    generator = torch.Generator().manual_seed(length)
    x = torch.randn(batch, length, width, generator=generator)
    grad = torch.randn(batch, length, width, generator=generator)
    return x.to(device, dtype), grad.to(device, dtype)


def bench_config(profile: str, vocab_size: int = 65, **fields) -> ModelConfig:
    """The ``ModelConfig`` of ``profile``'s model without dropout, ``fields``
    over its own: the model a benchmark times (untrained: speed does not
    depend on what the weights say)."""
    model = {**get_profile(profile).model, "dropout": 0.0, **fields}
    return ModelConfig(vocab_size=vocab_size, **model)


def machine_provenance(profile: str, device: torch.device) -> dict:
    """Where a benchmark ran (``mixers.results.provenance``) and on how many
    intra-op threads."""
    return {
        **provenance(profile, device, [0]),
        "threads": torch.get_num_threads(),
    }


def finished_provenance(prov: dict, start: float, load_start) -> dict:
    """``prov`` (``machine_provenance``) with the wall time since ``start``
    and the 1, 5 and 15-minute load averages at the start (``load_start``)
    and the end: other processes compete for the cores."""
    return {
        **prov,
        "wall_time_s": time.perf_counter() - start,
        "load_average_start": load_start,
        "load_average_end": load_average(),
    }


def benchmark_main(
    module_doc: str,
    name: str,
    durations: dict,
    profiles,
    run: Callable,
    module: str,
) -> None:
    """The command line every length benchmark shares (``python -m
    mixers.bench.MODULE``): ``--profile``, ``--lengths``, ``--repeats``,
    ``--no-progress`` and ``--out``; runs ``run(profile, lengths, repeats,
    progress=...)`` and saves its results as ``NAME-PROFILE.json``
    (``mixers.results.save_results``).
    """
    # not at import: experiments import bench
    from ..experiments import (
        command_line,
        positive_int,
    )
    from ..results import save_results
    from ..train import default_device

    parser = command_line(
        f"python -m mixers.bench.{module}",
        module_doc.splitlines()[0],
        durations,
    )
    parser.add_argument(
        "--profile",
        choices=sorted(profiles),
        default="gpu" if default_device().type == "cuda" else "cpu",
        help="sizes and device (default: gpu with CUDA, else cpu;"
        " MIXERS_DEVICE=cpu: cpu)",
    )
    parser.add_argument(
        "--lengths",
        type=positive_int,
        nargs="+",
        default=None,
        help="override the profile's lengths",
    )
    parser.add_argument(
        "--repeats",
        type=positive_int,
        default=None,
        help="override the profile's repeats",
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="do not print each length as it finishes",
    )
    args = parser.parse_args()
    check_out(parser, name, args.profile, args.out)
    results = run(
        args.profile, args.lengths, args.repeats, progress=not args.no_progress
    )
    print(f"wrote {save_results(name, args.profile, results, args.out)}")


def profile_main(
    module_doc: str, name: str, durations: dict, profiles, run: Callable
) -> None:
    """The command line of a benchmark that takes a profile only
    (``--profile``, default cpu, and ``--out``): runs ``run(profile)`` and
    saves its results as ``NAME-PROFILE.json``."""
    # not at import: experiments import bench
    from ..experiments import command_line
    from ..results import save_results

    parser = command_line(
        f"python -m mixers.bench.{name}", module_doc.splitlines()[0], durations
    )
    parser.add_argument(
        "--profile",
        choices=sorted(profiles),
        default="cpu",
        help="model sizes (default: cpu)",
    )
    args = parser.parse_args()
    check_out(parser, name, args.profile, args.out)
    results = run(args.profile)
    print(f"wrote {save_results(name, args.profile, results, args.out)}")


def check_out(parser, name: str, profile: str, out) -> None:
    """``--out`` checked by writing there before the benchmark runs, not
    after: the folder made, a file written and removed in it
    (``writable_dir``; ``os.access`` answers yes to root for ``/proc``, where
    nothing can be written), and no directory where the results file goes.
    A refusal exits 2 naming ``--out``."""
    from ..results import (
        ResultsNotWritten,
        check_results_file,
        results_path,
        writable_dir,
    )

    try:
        check_results_file(results_path(name, profile, writable_dir(out)))
    except (ValueError, ResultsNotWritten) as error:
        parser.error(f"--out: {error}")
