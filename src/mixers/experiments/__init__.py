"""One module per chapter experiment: ``run(profile) -> results`` and a CLI writing JSON.

Run one with ``python -m mixers.experiments.NAME --profile {smoke,cpu,gpu}``; the results land
in ``runs/NAME-PROFILE.json`` with their provenance (``mixers.results``). The chapter plots the
committed results in ``book/results`` of the largest profile that was run; ``--out book/results``
replaces them.
"""

from __future__ import annotations

import argparse
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import torch

from .._checks import check_positive_int
# PROFILE_ORDER, load_results and results_path: re-exported, the chapters import them from here.
from ..results import PROFILE_ORDER, load_results, results_path, runs_dir, save_results, writable_dir  # noqa: F401
from ..train import PROFILES, Profile, default_profile_name, get_profile


def profile_settings(profile: str, settings: dict) -> dict:
    """An experiment's own sizes for ``profile`` (its table ``settings`` maps profile -> sizes)."""
    if profile not in settings:
        raise ValueError(f"profile must be one of {sorted(settings)}, got {profile!r}")
    return settings[profile]


def experiment_settings(profile: str, table: dict) -> tuple[Profile, dict, dict]:
    """For an experiment whose ``table`` maps profiles to settings with a ``"model"`` entry: the
    shared profile it starts from, its own settings for it, and the model fields they add up to."""
    base = get_profile(profile)
    settings = profile_settings(base.name, table)
    return base, settings, {**base.model, **settings["model"]}


# Windows per evaluation batch: about this many tokens at once, whatever the length.
EVAL_BATCH_TOKENS = 8192


def evaluation_windows(eval_tokens: int, length: int) -> tuple[int, int]:
    """For scoring the first ``eval_tokens`` tokens in windows of ``length``: how many windows, and
    how many per batch (about ``EVAL_BATCH_TOKENS`` tokens), so every length reads the same tokens."""
    windows = eval_tokens // length
    if windows < 1:
        raise ValueError(f"eval_tokens={eval_tokens} is shorter than the evaluation length {length}")
    return windows, max(1, min(windows, EVAL_BATCH_TOKENS // length))


@contextmanager
def cpu_threads(threads: int | None, enabled: bool | None = None) -> Iterator[None]:
    """Run the block with ``threads`` intra-op threads, then restore the previous count.

    Also a decorator: ``@cpu_threads(1)`` runs each call of the function that way.

    Small models on a shared two-core machine run fastest, and most predictably, on one thread
    per process: two OpenMP threads fighting for busy cores slowed them many times over.
    ``enabled`` defaults to "no CUDA" (on a GPU the CPU thread count hardly matters);
    ``threads=None`` leaves the count alone.
    """
    enabled = not torch.cuda.is_available() if enabled is None else enabled
    before = torch.get_num_threads()
    if enabled and threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------------------------------------
# The command lines of the experiments and benchmarks. Every argument is checked as it is parsed,
# before anything trains or compiles.


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (the package's ``check_positive_int``, as a command-line type)."""
    try:
        return check_positive_int("the value", int(text))
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None


def output_dir(text: str) -> Path:
    """argparse type: a directory the results can be written in (created if missing)."""
    try:
        return writable_dir(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def command_line(prog: str, description: str, durations: dict[str, str]) -> argparse.ArgumentParser:
    """A parser with the ``--out`` every experiment and benchmark shares; its help says how long
    each profile takes (``durations``: profile -> text) and where the results go."""
    lines = [f"  {name:6} {text}" for name, text in durations.items()]
    epilog = "\n".join(["how long each profile takes:", *lines, "",
                        "The results go to DIR/NAME-PROFILE.json with DIR = runs/ (untracked) unless --out",
                        "says otherwise; --out book/results replaces the committed results the chapters read."])
    parser = argparse.ArgumentParser(prog=prog, description=description, epilog=epilog,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    # A string default goes through `type` too: the folder is checked (and made) before any run.
    parser.add_argument("--out", type=output_dir, default=str(runs_dir()), metavar="DIR",
                        help="directory for the results JSON (default: %(default)s)")
    return parser


def main(name: str, run: Callable[..., dict], description: str, durations: dict[str, str]) -> None:
    """The command line every experiment module shares."""
    parser = command_line(f"python -m mixers.experiments.{name}", description, durations)
    parser.add_argument("--profile", choices=sorted(PROFILES), default=None,
                        help="training size (default: MIXERS_PROFILE, else gpu with CUDA, else smoke)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    args = parser.parse_args()
    try:
        profile = args.profile or default_profile_name()
    except ValueError as error:  # a bad MIXERS_PROFILE
        parser.error(str(error))
    results = run(profile, progress=not args.no_progress)
    print(f"wrote {save_results(name, profile, results, args.out)}")
