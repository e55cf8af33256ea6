"""Generation with and without a key/value cache: tokens per second, side by
side in one run.

``python -m mixers.bench.generation --profile cpu`` builds the ``cpu``
profile's model with each token mixer (attention with no embedded positions,
ALiBi and rotary: the models that decode through ``mixers.attention.KVCache``)
and writes ``new_tokens`` tokens after a short prompt, greedily, two ways,
interleaved and repeated:

============  =================================================================
``cache``     ``LanguageModel.generate``: one query per new token against the
              keys kept so far
``no_cache``  ``generate_without_cache``: the whole window through the model
              for every new token, as a plain loop does (the window is
              ``block_size``, as such a loop crops it)
============  =================================================================

and checks that the two write the same tokens wherever their contexts agree
(inside the training window). Untrained weights: speed does not depend on what
the weights say. It writes ``generation-PROFILE.json`` (to ``runs/``) with the
provenance of the run.
"""

from __future__ import annotations

import time

import torch

from ..experiments import profile_settings
from ..model import LanguageModel, ModelConfig
from ..results import provenance
from ..train import get_profile
from . import load_average, profile_main, time_interleaved

NAME = "generation"
DURATIONS = {"smoke": "seconds", "cpu": "about two minutes on one CPU thread"}
MIXERS = ("attention", "alibi", "rotary")
TARGET = 2.5  # the cache at least this many times faster, at 500 tokens
SETTINGS = {
    "smoke": dict(profile="smoke", prompt=8, new_tokens=40, repeats=2),
    "cpu": dict(profile="cpu", prompt=8, new_tokens=500, repeats=3),
}


@torch.no_grad()
def generate_without_cache(
    model: LanguageModel, idx: torch.Tensor, new_tokens: int
) -> torch.Tensor:
    """The plain loop, the benchmark's "before": for every new token, the last
    ``block_size`` tokens go through the whole model, and the next is the most
    likely (greedy).
    """
    for _ in range(new_tokens):
        logits, _ = model(idx[:, -model.config.block_size :])
        idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return idx


def _model(
    profile: str, token_mixer: str, vocab_size: int = 65
) -> LanguageModel:
    fields = {
        **get_profile(profile).model,
        "token_mixer": token_mixer,
        "positions": "none",
        "dropout": 0.0,
    }
    torch.manual_seed(0)
    return LanguageModel(ModelConfig(vocab_size=vocab_size, **fields)).eval()


def measure(profile: str, token_mixer: str, settings: dict) -> dict:
    """Tokens per second with and without the cache for one model, and whether
    they agree."""
    model = _model(settings["profile"], token_mixer)
    idx = torch.randint(
        0,
        model.config.vocab_size,
        (1, settings["prompt"]),
        generator=torch.Generator().manual_seed(0),
    )
    n = settings["new_tokens"]
    calls = {
        "cache": lambda: model.generate(idx, n, top_k=1),
        "no_cache": lambda: generate_without_cache(model, idx, n),
    }
    # new tokens whose contexts agree
    inside = model.config.block_size - settings["prompt"]
    same = torch.equal(
        model.generate(idx, inside, top_k=1),
        generate_without_cache(model, idx, inside),
    )
    times = time_interleaved(calls, settings["repeats"], torch.device("cpu"))
    rates = {way: n / row["median_s"] for way, row in times.items()}
    return {
        "token_mixer": token_mixer,
        "times": times,
        "tokens_per_s": rates,
        "speedup": rates["cache"] / rates["no_cache"],
        "same_tokens_inside_the_window": same,
        "block_size": model.config.block_size,
    }


def run(profile: str = "cpu", progress: bool = True) -> dict:
    """Every mixer of ``MIXERS`` under ``profile``; JSON-able, with
    provenance."""
    start, load = time.perf_counter(), load_average()
    settings = profile_settings(profile, SETTINGS)
    rows = []
    for mixer in MIXERS:
        rows.append(measure(profile, mixer, settings))
        if progress:
            print(format_row(rows[-1], settings["new_tokens"]), flush=True)
    return {
        "experiment": NAME,
        "settings": dict(settings),
        "results": rows,
        "provenance": {
            **provenance(profile, torch.device("cpu"), [0]),
            "threads": torch.get_num_threads(),
            "load_average": [load, load_average()],
            "wall_time_s": time.perf_counter() - start,
        },
    }


def format_row(row: dict, new_tokens: int) -> str:
    rates = row["tokens_per_s"]
    return (
        f"{row['token_mixer']:>9}: {new_tokens} tokens, cache"
        f" {rates['cache']:7.1f} tok/s, no cache {rates['no_cache']:7.1f}"
        f" tok/s: {row['speedup']:.2f}x"
        + (
            " (target met)"
            if row["speedup"] >= TARGET
            else f" (target {TARGET}x)"
        )
        + "; same tokens inside the window:"
        + f" {row['same_tokens_inside_the_window']}"
    )


def main() -> None:
    profile_main(__doc__, NAME, DURATIONS, SETTINGS, run)


if __name__ == "__main__":
    main()
