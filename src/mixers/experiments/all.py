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

An experiment whose results file in ``--out`` is a complete run of it and
of this profile is done and skipped (``--fresh`` runs everything again): a
file of its results, not a progress file, whose provenance names the profile
and which holds every run the plan makes. Any other file (empty, cut short,
another experiment's or profile's, a copied progress file) is named, with
why, and run again. ``--out book/results`` makes the chapters read the
results. ``kill`` (SIGTERM) stops a run as Ctrl-C does: the worker processes
end with it, every finished run is kept, and the same command resumes.
"""

from __future__ import annotations

import contextvars
import importlib
import os
import signal
import sys
import threading
from pathlib import Path

import torch

from ..results import (
    CorruptResults,
    ResultsNotWritten,
    check_results_file,
    read_results,
)
from ..train import default_device
from . import (
    DevicePools,
    FolderInUse,
    SettingsMismatch,
    _terminate_as_interrupt,
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


def recorded_runs(name: str, results: dict) -> int:
    """How many runs a results file of experiment ``name`` holds: the
    baseline's one ``result``, every rate of every arm of gMLP's ``sweep``,
    else the length of its ``runs``; 0 where they are not there."""
    try:
        if name == "baseline":
            return int(isinstance(results["result"], dict))
        if name == "gmlp":
            return sum(len(rates) for rates in results["sweep"].values())
        return len(results["runs"])
    except (AttributeError, KeyError, TypeError):
        return 0


def finished(name: str, path: Path, profile: str, runs: int) -> str | None:
    """Why the results file ``path`` is not a complete run of experiment
    ``name`` and ``profile`` (of ``runs`` runs), or None if it is: missing,
    unreadable, another experiment's, a progress file, another profile's,
    fewer runs. A file that merely parses is not done."""
    if not path.is_file():
        return "missing" if not path.exists() else "it is not a file"
    try:
        results = read_results(path)
    except CorruptResults as error:
        return str(error)
    if results.get("experiment") != name:
        return f"it holds no results of the {name} experiment"
    prov = results.get("provenance")
    if not isinstance(prov, dict):
        return "it has no provenance"
    if results.get("complete", True) is not True or "runs_done" in results:
        return "it is a progress file, not finished results"
    if prov.get("profile") != profile:
        return f"its provenance says profile {prov.get('profile')!r}"
    held = recorded_runs(name, results)
    if held != runs:
        return f"it holds {held} of the {runs} runs of profile {profile}"
    return None


def plan_lines(
    profile: str, workers: int, gpus: int = 1, planned: dict | None = None
) -> list[str]:
    """``--plan``: a line per experiment, then the total (``planned``: each
    experiment's ``planned_runs``, if they are at hand)."""
    lines, everything = [], []
    for name in EXPERIMENTS:
        runs = planned[name] if planned else planned_runs(name, profile)
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


def _todo(args, profile: str, planned: dict[str, int]) -> list[str]:
    """The experiments to run, each done one named as skipped and each file
    that is not a complete run named with why it runs again."""
    todo = []
    for name in EXPERIMENTS:
        path = results_path(name, profile, args.out)
        why = finished(name, path, profile, planned[name])
        if why is None and not args.fresh:
            print(f"{name}: done, skipped", flush=True)
            continue
        if why not in (None, "missing"):
            print(
                f"{name}: {path} is not a complete run ({why}): running it"
                " again",
                flush=True,
            )
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
    # SIGTERM (``kill``) as Ctrl-C: it ends the workers too
    try:
        with _terminate_as_interrupt(), shared_pool(pool):
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
    except KeyboardInterrupt as interrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        print(
            "\ninterrupted: every finished run is saved; rerun the same"
            " command to resume",
            file=sys.stderr,
        )
        _exit_at_once(128 + getattr(interrupt, "signal", signal.SIGINT))
    pool.shutdown()
    for name, error in failures.items():
        print(f"{name}: failed: {_failure(error)}", file=sys.stderr)
    if failures:
        sys.exit(1)


def _exit_at_once(code: int) -> None:
    """Exit now, as the signal would have, once the workers are ended. Not
    ``sys.exit``: the experiments' threads may be inside torch's C++ code or
    starting the pool's processes, and an interpreter that shuts down around
    them waits on the pool (a SIGTERM in the first seconds hung for a
    minute) or aborts ("terminate called without an active exception", exit
    -6). Nothing is lost: every run was saved, atomically, when it finished,
    and the run locks go with the process."""
    import multiprocessing

    children = multiprocessing.active_children()
    for child in children:
        child.terminate()
    for child in children:
        child.join(10)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _failure(error: BaseException) -> str:
    """An experiment's failure in one line: the package's own errors say
    what to do; anything else is shown as Python would."""
    if isinstance(error, ResultsNotWritten):
        return (
            f"{error}; its finished runs are saved; rerun the same command"
            " to resume once it can be written"
        )
    if isinstance(error, (CorruptResults, FolderInUse, SettingsMismatch)):
        return str(error)
    return repr(error)


def _check_targets(parser, profile: str, out: Path) -> None:
    """Before any run: no directory where a results or progress file goes
    (found otherwise only at the write, after the training)."""
    for name in EXPERIMENTS:
        for path in (
            results_path(name, profile, out),
            partial_path(name, profile, out),
        ):
            try:
                check_results_file(path)
            except ResultsNotWritten as error:
                parser.exit(2, f"error: {error}\n")


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
    planned = {name: planned_runs(name, profile) for name in EXPERIMENTS}
    total = sum(len(runs) for runs in planned.values())
    if args.workers > total:
        parser.error(
            f"--workers: at most {total}, one process per run (the {profile}"
            f" plan has {total} runs), got {args.workers}"
        )
    if args.plan:
        on_gpu = default_device().type == "cuda"
        gpus = torch.cuda.device_count() if on_gpu else 1
        print("\n".join(plan_lines(profile, args.workers, gpus, planned)))
        return
    _check_targets(parser, profile, args.out)
    todo = _todo(args, profile, {n: len(r) for n, r in planned.items()})
    if args.workers > 1:
        run_together(todo, profile, args)
        return
    for name in todo:
        with exits_cleanly(parser, partial_path(name, profile, args.out)):
            wrote = _run_one(name, profile, args, progress=True)
            print(f"wrote {wrote}", flush=True)


if __name__ == "__main__":
    main()
