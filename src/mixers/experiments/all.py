"""Every chapter's experiment of one profile, one after another, resumable.

``python -m mixers.experiments.all --profile gpu`` runs each experiment of
``EXPERIMENTS`` as its own command line would
(``mixers.experiments.run_saved``): every finished run is saved at once, so an
interruption loses at most the run in progress, and the same command resumes
where it stopped. An experiment whose results file is already in ``--out`` is
done and skipped (``--fresh`` runs everything again). For a reader with a GPU:
the ``gpu`` profile has never been run for the book (no GPU was available to
it); ``--out book/results`` would make the chapters read its results.
"""

from __future__ import annotations

import importlib
import inspect

from . import (
    exits_cleanly,
    parse_experiment_args,
    partial_path,
    results_path,
    run_saved,
)

EXPERIMENTS = (
    "baseline",
    "attention_scaling",
    "glu_variants",
    "gmlp",
    "alibi_extrapolation",
    "side_by_side",
)
DURATIONS = {
    "smoke": "a few minutes",
    "cpu": "about four hours on a two-core CPU",
    "gpu": "several hours on one GPU",
}


def main(argv: list[str] | None = None) -> None:
    """The command line: ``--profile``, ``--out``, ``--fresh``,
    ``--no-progress``, ``--workers`` (for the experiments that take it)."""
    parser, args, profile = parse_experiment_args(
        "python -m mixers.experiments.all",
        __doc__.splitlines()[0],
        DURATIONS,
        argv,
    )
    for name in EXPERIMENTS:
        done = results_path(name, profile, args.out)
        if done.is_file() and not args.fresh:
            print(f"{name}: done ({done}), skipped", flush=True)
            continue
        module = importlib.import_module(f"{__package__}.{name}")
        with exits_cleanly(parser, partial_path(name, profile, args.out)):
            progress = not args.no_progress
            # --workers goes to the experiments that can use it
            takes_workers = (
                "workers" in inspect.signature(module.run).parameters
            )
            path = run_saved(
                name,
                module.run,
                profile,
                args.out,
                args.fresh,
                progress,
                workers=args.workers if takes_workers else 1,
            )
            print(f"wrote {path}", flush=True)


if __name__ == "__main__":
    main()
