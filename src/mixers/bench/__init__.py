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

__all__ = [
    "synchronize",
    "time_call",
    "time_interleaved",
    "peak_memory",
    "summarise_times",
    "benchmark_main",
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


def load_average() -> list[float] | None:
    """The 1, 5 and 15-minute load averages (other processes competing for the
    cores), or None where the platform has none: a benchmark records them at
    its start and end.
    """
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # not available on this platform
        return None


def benchmark_main(
    prog: str,
    description: str,
    durations: dict,
    profiles,
    run: Callable,
    name: str,
) -> None:
    """The command line every benchmark shares: ``--profile``, ``--lengths``,
    ``--repeats``, ``--no-progress`` and ``--out``; runs ``run(profile,
    lengths, repeats, progress=...)`` and saves its results as
    ``NAME-PROFILE.json`` (``mixers.results.save_results``).
    """
    # not at import: experiments import bench
    from ..experiments import (
        command_line,
        positive_int,
    )
    from ..results import save_results
    from ..train import default_device

    parser = command_line(prog, description, durations)
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
    results = run(args.profile)
    print(f"wrote {save_results(name, args.profile, results, args.out)}")
