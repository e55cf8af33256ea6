"""Every chapter's experiment of one profile, resumable; with ``--workers``,
all at once.

``python -m mixers.experiments.all --profile gpu --workers 8`` trains every
experiment of ``EXPERIMENTS`` at the same time: each runs as its own command
line would (``mixers.experiments.run_saved``: every finished run saved at
once, so an interruption loses at most the runs in progress and the same
command resumes), and their runs share one pool of ``--workers`` processes
per GPU (``DevicePools``). The ``gpu`` plan is sized to take a few minutes on
one H100 that way; ``--plan`` prints what it trains and the predicted time
(``mixers.experiments.plan``) without training. Without ``--workers`` the
experiments run one after another, as each command line runs them.

An experiment whose results file in ``--out`` reads back as its results is
done and skipped (``--fresh`` runs everything again); a file that does not
(empty, cut short, another experiment's) is named and run again.
``--out book/results`` makes the chapters read the results.
"""

from __future__ import annotations

import contextvars
import importlib
import os
import sys
import threading
from pathlib import Path

import torch

from ..results import CorruptResults, read_results
from ..train import default_device
from . import (
    DevicePools,
    exits_cleanly,
    parse_experiment_args,
    partial_path,
    results_path,
    run_saved,
    shared_pool,
)
from .plan import MEASURED_ON, describe, planned_runs, predict

EXPERIMENTS = (
    "baseline",
    "attention_scaling",
    "glu_variants",
    "gmlp",
    "alibi_extrapolation",
    "retrieval",
    "side_by_side",
)
DURATIONS = {
    "smoke": "a few minutes",
    "cpu": "about four hours on a two-core CPU",
    "gpu": "about 6 minutes on one H100 with --workers 8 (see --plan)",
}


def finished(name: str, path: Path) -> str | None:
    """Why the results file ``path`` of experiment ``name`` is not done
    (missing, unreadable, not its results), or None if it is."""
    if not path.is_file():
        return "missing"
    try:
        results = read_results(path)
    except CorruptResults as error:
        return str(error)
    if not isinstance(results, dict) or results.get("experiment") != name:
        return f"it holds no results of the {name} experiment"
    if not isinstance(results.get("provenance"), dict):
        return "it has no provenance"
    return None


def plan_lines(profile: str, workers: int, gpus: int = 1) -> list[str]:
    """``--plan``: a line per experiment, then the total."""
    lines, everything = [], []
    for name in EXPERIMENTS:
        runs = planned_runs(name, profile)
        everything += runs
        lines.append(describe(name, predict(runs, workers, gpus)))
    total = predict(everything, workers, gpus)
    where = "one H100" if gpus == 1 else f"{gpus} H100s"
    lines.append(
        f"(rates measured on {MEASURED_ON}; an H100 taken as 0.8 of it)"
    )
    lines.append(
        f"total: {total.runs} runs, {total.steps:,} steps, predicted"
        f" {total.seconds / 60:.1f} minutes on {where} with {workers} workers"
    )
    return lines


def _todo(args, profile: str) -> list[str]:
    todo = []
    for name in EXPERIMENTS:
        why = finished(name, results_path(name, profile, args.out))
        if why is None and not args.fresh:
            print(f"{name}: done, skipped", flush=True)
            continue
        if why not in (None, "missing"):
            print(f"{name}: results file not valid ({why}): running it again")
        todo.append(name)
    return todo


def _run_one(name: str, profile: str, args, progress: bool) -> Path:
    """One experiment as its command line runs it, one job at a time (inside
    ``run_together``'s shared pool, its jobs go there instead)."""
    return run_saved(
        name,
        importlib.import_module(f"{__package__}.{name}").run,
        profile,
        args.out,
        args.fresh,
        progress and not args.no_progress,
    )


def run_together(names: list[str], profile: str, args) -> None:
    """Every experiment of ``names`` in a thread of its own, their runs in
    one pool of ``args.workers`` processes per GPU (on a CPU, one pool)."""
    on_gpu = default_device().type == "cuda"
    gpus = torch.cuda.device_count() if on_gpu else 0
    devices = list(range(gpus)) or [None]
    slots = args.workers * len(devices)
    # on a CPU, one thread a run, as every experiment trains there
    threads = max(1, (os.cpu_count() or 1) // slots) if gpus else 1
    failures: dict[str, BaseException] = {}

    def one(name: str) -> None:
        try:
            # no bars: eight processes' bars would interleave
            wrote = _run_one(name, profile, args, progress=False)
            print(f"wrote {wrote}", flush=True)
        except BaseException as error:  # reported once all have stopped
            failures[name] = error

    pool = DevicePools(args.workers, devices, threads)
    try:
        with shared_pool(pool):
            started = [
                threading.Thread(
                    target=contextvars.copy_context().run,
                    args=(one, name),
                    name=name,
                    daemon=True,  # Ctrl-C exits without waiting for them
                )
                for name in names
            ]
            for thread in started:
                thread.start()
            for thread in started:
                while thread.is_alive():
                    thread.join(0.5)
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        print(
            "\ninterrupted: every finished run is saved; rerun the same"
            " command to resume",
            file=sys.stderr,
        )
        sys.exit(130)
    pool.shutdown()
    for name, error in failures.items():
        print(f"{name}: failed: {error!r}", file=sys.stderr)
    if failures:
        sys.exit(1)


def main(argv: list[str] | None = None) -> None:
    """The command line: ``--profile``, ``--out``, ``--fresh``,
    ``--no-progress``, ``--workers`` (all experiments at once over that many
    processes per GPU) and ``--plan``."""
    parser, args, profile = parse_experiment_args(
        "python -m mixers.experiments.all",
        __doc__.splitlines()[0],
        DURATIONS,
        argv,
        plan=True,
    )
    if args.plan:
        on_gpu = default_device().type == "cuda"
        gpus = torch.cuda.device_count() if on_gpu else 1
        print("\n".join(plan_lines(profile, args.workers, gpus)))
        return
    todo = _todo(args, profile)
    if args.workers > 1:
        run_together(todo, profile, args)
        return
    for name in todo:
        with exits_cleanly(parser, partial_path(name, profile, args.out)):
            wrote = _run_one(name, profile, args, progress=True)
            print(f"wrote {wrote}", flush=True)


if __name__ == "__main__":
    main()
