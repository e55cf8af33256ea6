"""The baseline: a character-level transformer (causal attention + GELU feed-forward).

``python -m mixers.experiments.baseline --profile cpu`` trains it on Tiny Shakespeare and writes
``baseline-cpu.json`` (to ``runs/``; ``--out book/results`` for the chapter's): the loss curves,
the best validation loss in nats and bits per character, a text sample, and the provenance of
the run.
"""

from __future__ import annotations

import math
import time

from ..data import CharDataset
from ..train import evaluate_sequential, get_profile, run_profile, sample
from . import main

NAME = "baseline"
DURATIONS = {"smoke": "seconds", "cpu": "about 5 minutes on two CPU cores", "gpu": "minutes on one GPU"}


def run(profile: str, progress: bool = True) -> dict:
    """Train the baseline under ``profile``; return its results with provenance."""
    start = time.perf_counter()
    dataset = CharDataset.shakespeare()
    model, result = run_profile(dataset, get_profile(profile), progress=progress, description=NAME)
    full_val = evaluate_sequential(model, dataset.val, result.train_config["seq_len"],
                                   amp=result.train_config["amp"], cpu_amp=result.train_config["cpu_amp"])
    text = sample(model, dataset, prompt="ROMEO:\n", max_new_tokens=400)
    return {
        "experiment": NAME,
        "model": "attention + gelu, learned positions",
        "result": result.to_dict(),
        "full_val_loss": full_val,
        "full_val_bpc": full_val / math.log(2),
        "sample": text,
        "provenance": {**result.provenance, "wall_time_s": time.perf_counter() - start},
    }


if __name__ == "__main__":
    main(NAME, run, __doc__.splitlines()[0], DURATIONS)
