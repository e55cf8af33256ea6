"""One module per chapter experiment: ``run(profile) -> results`` and a CLI writing JSON.

Run one with ``python -m mixers.experiments.NAME --profile {smoke,cpu,gpu}``; the
results land in ``book/results/NAME-PROFILE.json`` with their provenance, and the
chapter plots the committed results of the largest profile that was run.
"""

from __future__ import annotations

import argparse
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import torch

from ..train import PROFILES, Profile, default_profile_name, get_profile

# Largest first: a chapter shows the biggest run that has been committed.
PROFILE_ORDER = ("gpu", "cpu", "smoke")


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


def results_dir() -> Path:
    """``$MIXERS_RESULTS``, else the ``book/results`` of the checkout this package lives in,
    else ``book/results`` (or ``results``) under the current directory."""
    if os.environ.get("MIXERS_RESULTS"):
        return Path(os.environ["MIXERS_RESULTS"])
    for parent in Path(__file__).resolve().parents:
        if (parent / "book" / "results").is_dir():
            return parent / "book" / "results"
    cwd = Path.cwd()
    return cwd / "results" if cwd.name == "book" else cwd / "book" / "results"


def results_path(name: str, profile: str, directory: Path | None = None) -> Path:
    return (directory or results_dir()) / f"{name}-{profile}.json"


def save_results(name: str, profile: str, results: dict, directory: Path | None = None) -> Path:
    """Write ``results`` as JSON, its ``provenance`` first so a reader sees where it came from."""
    if "provenance" in results:
        results = {"provenance": results["provenance"], **results}
    path = results_path(name, profile, directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1) + "\n")
    return path


def load_results(name: str, directory: Path | None = None, profiles: tuple[str, ...] = PROFILE_ORDER) -> dict:
    """The committed results of the largest profile that was run for experiment ``name``."""
    for profile in profiles:
        path = results_path(name, profile, directory)
        if path.is_file():
            return json.loads(path.read_text())
    raise FileNotFoundError(
        f"no results for experiment {name!r} under {directory or results_dir()}; "
        f"run: python -m mixers.experiments.{name} --profile cpu"
    )


def main(name: str, run: Callable[..., dict], description: str) -> None:
    """The command line every experiment module shares."""
    parser = argparse.ArgumentParser(prog=f"python -m mixers.experiments.{name}", description=description)
    parser.add_argument("--profile", choices=sorted(PROFILES), default=None,
                        help="training size (default: MIXERS_PROFILE, else gpu with CUDA, else smoke)")
    parser.add_argument("--out", type=Path, default=None, help="directory for the results JSON")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    args = parser.parse_args()
    profile = args.profile or default_profile_name()
    results = run(profile, progress=not args.no_progress)
    path = save_results(name, profile, results, args.out)
    print(f"wrote {path}")
