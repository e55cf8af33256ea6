"""The baseline: a character-level transformer (causal attention + GELU
feed-forward).

``python -m mixers.experiments.baseline --profile cpu`` trains it on Tiny
Shakespeare and writes ``baseline-cpu.json`` (to ``runs/``; ``--out
book/results`` for the chapter's): the loss curves, the best validation loss in
nats and bits per character, a text sample, and the provenance of the run.

It is one model, so it is one job of ``mixers.experiments.run_jobs``: nothing
is saved halfway through its training (there is no checkpoint inside a run), so
an interruption while it trains loses it and a rerun starts it again; once it
has trained, been scored and sampled, it is saved
(``baseline-PROFILE.partial.json``) before the results are written, and a rerun
after an interruption there resumes it without training again. A run whose loss
turns NaN raises ``TrainingDiverged``: with no other run to keep, there is
nothing to write.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict
from functools import partial

import torch

from ..data import CharDataset
from ..model import ModelConfig
from ..train import (
    Profile,
    TrainingDiverged,
    evaluate_sequential,
    get_profile,
    run_profile,
    sample,
)
from . import Experiment, main, run_jobs_in_processes, sized_profile
from .plan import PlannedRun

NAME = "baseline"
DURATIONS = {
    "smoke": "seconds",
    "cpu": "about 5 minutes on two CPU cores",
    "gpu": "about a minute on one H200 (77 s of training for 5,000 steps)",
}
SAMPLE_TOKENS = 400


def run_one(
    dataset: CharDataset, base: Profile, progress: bool = False
) -> dict:
    """Train the baseline under ``base``, score it on the whole validation
    split and sample it."""
    model, result = run_profile(
        dataset, base, progress=progress, description=NAME
    )
    full_val = evaluate_sequential(
        model,
        dataset.val,
        result.train_config["seq_len"],
        amp=result.train_config["amp"],
        cpu_amp=result.train_config["cpu_amp"],
    )
    return {
        "result": result.to_dict(),
        "full_val_loss": full_val,
        "full_val_bpc": full_val / math.log(2),
        "sample": sample(
            model, dataset, prompt="ROMEO:\n", max_new_tokens=SAMPLE_TOKENS
        ),
    }


def _run_job(base: Profile, progress: bool, dataset, job: tuple) -> dict:
    """The one job, for ``run_jobs_in_processes``: it pickles."""
    return run_one(dataset, base, progress=progress)


def planned_runs(profile: str) -> list[PlannedRun]:
    """The one run of ``profile``: its training, then the whole validation
    split and a sample read forward (``mixers.experiments.plan``)."""
    base = sized_profile(get_profile(profile))
    dataset = CharDataset.shakespeare()
    model = ModelConfig(vocab_size=dataset.tokenizer.vocab_size, **base.model)
    return [PlannedRun(model, base.train, len(dataset.val) + SAMPLE_TOKENS)]


def run(profile: str, progress: bool = True) -> dict:
    """Train the baseline under ``profile``; return its results with
    provenance. One job: it takes no ``workers`` (``experiments.all``'s
    shared pool runs it like any other)."""
    start = time.perf_counter()
    base = sized_profile(get_profile(profile))
    dataset = CharDataset.shakespeare()
    # The one job is the whole run: no fields name it.
    experiment = Experiment(
        NAME,
        profile,
        {"model": base.model, "train": asdict(base.train)},
        (),
        [()],
    )
    (record,), resumed = run_jobs_in_processes(
        experiment,
        partial(_run_job, base, progress),
        dataset,
        1,
        torch.get_num_threads(),
    )
    if record["diverged"]:
        raise TrainingDiverged(record["error"])
    return {
        "experiment": NAME,
        "model": "attention + gelu, learned positions",
        **{
            key: record[key]
            for key in ("result", "full_val_loss", "full_val_bpc", "sample")
        },
        "provenance": {
            **record["result"]["provenance"],
            "resumed_runs": resumed,
            "wall_time_s": time.perf_counter() - start,
        },
    }


# -----------------------------------------------------------------------------
# What the chapter shows of a results file, whatever its profile
# (mixers.tables.profiles_table, mixers.plot.live_beside_committed).


def curves(results: dict) -> dict[str, dict]:
    """The run's loss curves, by label."""
    return {"baseline": results["result"]}


def headline(results: dict) -> dict[str, str]:
    """The figures of the chapter's profile table."""
    run = results["result"]
    best = run["steps"][run["val_loss"].index(min(run["val_loss"]))]
    # the model scored on the whole split: the best (best_step), or, in
    # results written before train() returned it, the last
    scored = run.get("best_step") or run["steps"][-1]
    return {
        "steps": f"{run['train_config']['steps']:,}",
        "best val loss": f"{run['best_val_loss']:.3f} (step {best:,})",
        "whole split": f"{results['full_val_loss']:.3f} (step {scored:,})",
    }


if __name__ == "__main__":
    main(NAME, run, __doc__.splitlines()[0], DURATIONS)
