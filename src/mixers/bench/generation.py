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
the weights say.

``--profile gpu`` decodes the ``gpu`` profile's model on CUDA in bf16 (float16
where the GPU has no bf16), its step compiled and replayed as a CUDA graph
(``LanguageModel.generate(graph=True, compile=True)``: a token is one replay,
its draw included), and prints each rate beside issue 31's targets: at least
5,000 tokens per second, and at least 10 times re-encoding (on a CPU, where
the same step runs unrecorded on a cache that grows: 3 times). Whether the
two ways agree is checked in float32 on the same device, since bf16's
rounding can flip a near-tie in an untrained model's logits. ``smoke`` runs
the GPU's static cache on a CPU at tiny sizes.

It writes ``generation-PROFILE.json`` (to ``runs/``) with the provenance of
the run, and, as each model finishes, the rows so far to
``generation-PROFILE.partial.json`` (removed at the end): a run stopped
midway keeps its finished models. A model that fails (a CUDA graph that
cannot be recorded, say) is a row with its ``error``, the others still run,
and the command exits 1.
"""

from __future__ import annotations

import sys
import time

import torch

from ..experiments import partial_path, profile_settings
from ..model import LanguageModel
from ..results import save_results, write_results
from . import (
    bench_config,
    bench_device,
    error_line,
    load_average,
    machine_provenance,
    time_interleaved,
)

NAME = "generation"
#: The models that decode through ``mixers.attention.KVCache``.
MIXERS = ("attention", "alibi", "rotary")
DURATIONS = {
    "smoke": "seconds",
    "cpu": "about two minutes on one CPU thread",
    "gpu": "a few minutes on one GPU, compiling included",
}
TARGET = 3.0  # the cache at least this many times faster, at 300 tokens
GPU_TARGET = 10.0  # on a GPU, at least this many times faster
GPU_TOKENS_PER_S = 5000.0  # and at least this many tokens per second
# device and dtype of the model; graph and compile: generate's switches. A
# graph is only recorded on a GPU: smoke runs the GPU's step on a CPU as it
# is (graph=True), cpu the CPU's own growing cache (graph=None).
_CPU = dict(device="cpu", dtype="float32", compile=False)
SETTINGS = {
    "smoke": dict(
        profile="smoke", prompt=8, new_tokens=24, repeats=2, graph=True, **_CPU
    ),
    "cpu": dict(
        profile="cpu", prompt=8, new_tokens=300, repeats=3, graph=None, **_CPU
    ),
    # 300 tokens: each way timed in under a second a model, so that the
    # three compilations are most of the benchmark's minute on a GPU
    "gpu": dict(
        profile="gpu",
        prompt=8,
        new_tokens=300,
        repeats=3,
        device="cuda",
        dtype="bfloat16",
        graph=True,
        compile=True,
    ),
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
    """The profile's model with ``token_mixer`` and no positions on the
    embeddings (they would stop it at ``block_size``), from seed 0."""
    config = bench_config(
        profile, vocab_size, token_mixer=token_mixer, positions="none"
    )
    torch.manual_seed(0)
    return LanguageModel(config).eval()


def _dtype(settings: dict, device: torch.device) -> torch.dtype:
    """The settings' dtype; float16 on a GPU without bf16 (Colab's T4)."""
    dtype = getattr(torch, settings["dtype"])
    if (
        dtype == torch.bfloat16
        and device.type == "cuda"
        and not torch.cuda.is_bf16_supported()
    ):
        return torch.float16
    return dtype


def measure(profile: str, token_mixer: str, settings: dict) -> dict:
    """Tokens per second with and without the cache for one model, and whether
    they agree."""
    device = torch.device(settings["device"])
    model = _model(settings["profile"], token_mixer).to(device)
    idx = torch.randint(
        0,
        model.config.vocab_size,
        (1, settings["prompt"]),
        generator=torch.Generator().manual_seed(0),
    ).to(device)
    switches = dict(graph=settings["graph"], compile=settings["compile"])
    # new tokens whose contexts agree (inside the training window, at most
    # the benchmark's count), in float32, the step recorded but not compiled
    # (one compilation per model is enough to wait for)
    inside = min(
        model.config.block_size - settings["prompt"], settings["new_tokens"]
    )
    same = torch.equal(
        model.generate(idx, inside, top_k=1, graph=settings["graph"]),
        generate_without_cache(model, idx, inside),
    )
    model.to(_dtype(settings, device))
    n = settings["new_tokens"]
    calls = {
        "cache": lambda: model.generate(idx, n, top_k=1, **switches),
        "no_cache": lambda: generate_without_cache(model, idx, n),
    }
    for call in calls.values():  # warm-up: compiling, allocations
        call()
    times = time_interleaved(calls, settings["repeats"], device)
    rates = {way: n / row["median_s"] for way, row in times.items()}
    return {
        "token_mixer": token_mixer,
        "times": times,
        "tokens_per_s": rates,
        "speedup": rates["cache"] / rates["no_cache"],
        "same_tokens_inside_the_window": same,
        "block_size": model.config.block_size,
        "dtype": str(_dtype(settings, device)).replace("torch.", ""),
    }


def run(profile: str = "cpu", progress: bool = True, save=None) -> dict:
    """Every mixer of ``MIXERS`` under ``profile``; JSON-able, with
    provenance. A mixer that fails is a row with its ``error`` and the next
    still runs; ``save(results)``, if given, gets the results so far after
    each mixer (``complete`` False until the last)."""
    start, load = time.perf_counter(), load_average()
    settings = profile_settings(profile, SETTINGS)
    device = bench_device(settings["device"], profile)
    gpu = device.type == "cuda"
    results = {
        "experiment": NAME,
        "settings": dict(settings),
        "targets": targets(gpu),
        "results": [],
        "complete": False,
        "provenance": machine_provenance(profile, device),
    }
    for mixer in MIXERS:
        try:
            row = measure(profile, mixer, settings)
        except RuntimeError as error:  # a graph that cannot be recorded
            row = {"token_mixer": mixer, "error": error_line(error)}
        results["results"].append(row)
        results["complete"] = mixer == MIXERS[-1]
        results["provenance"].update(
            load_average=[load, load_average()],
            wall_time_s=time.perf_counter() - start,
        )
        if progress:
            print(format_row(row, settings["new_tokens"], gpu), flush=True)
        if save is not None:
            save(results)
    return results


def targets(gpu: bool) -> dict:
    """The speedup over re-encoding to reach, and on a GPU the rate."""
    if gpu:
        return {"speedup": GPU_TARGET, "tokens_per_s": GPU_TOKENS_PER_S}
    return {"speedup": TARGET, "tokens_per_s": None}


def _verdict(met: bool) -> str:
    return "met" if met else "missed"


def format_row(row: dict, new_tokens: int, gpu: bool = False) -> str:
    """One mixer's rates, each beside its target, e.g. "attention: 300
    tokens, cache 5210.3 tok/s (target >= 5000, met), no cache 402.1 tok/s:
    12.96x re-encoding (target >= 10.0x, met)"; or its error."""
    if "error" in row:
        return f"{row['token_mixer']:>9}: FAILED: {row['error']}"
    rates, goal = row["tokens_per_s"], targets(gpu)
    cache = f"cache {rates['cache']:7.1f} tok/s"
    if goal["tokens_per_s"] is not None:
        met = rates["cache"] >= goal["tokens_per_s"]
        cache += f" (target >= {goal['tokens_per_s']:.0f}, {_verdict(met)})"
    met = row["speedup"] >= goal["speedup"]
    return (
        f"{row['token_mixer']:>9}: {new_tokens} tokens, {cache}, no cache"
        f" {rates['no_cache']:7.1f} tok/s: {row['speedup']:.2f}x re-encoding"
        f" (target >= {goal['speedup']:.1f}x, {_verdict(met)}); same tokens"
        f" inside the window: {row['same_tokens_inside_the_window']}"
    )


def main(argv=None) -> None:
    """``python -m mixers.bench.generation [--profile P] [--out DIR]``: the
    rows saved as each model finishes, the results at the end; exit 1 if a
    model failed."""
    from ..experiments import command_line

    parser = command_line(
        f"python -m mixers.bench.{NAME}", __doc__.splitlines()[0], DURATIONS
    )
    parser.add_argument(
        "--profile",
        choices=sorted(SETTINGS),
        default="cpu",
        help="model sizes (default: cpu)",
    )
    args = parser.parse_args(argv)
    partial = partial_path(NAME, args.profile, args.out)
    results = run(args.profile, save=lambda rows: write_results(partial, rows))
    print(f"wrote {save_results(NAME, args.profile, results, args.out)}")
    partial.unlink(missing_ok=True)
    failed = [
        row["token_mixer"] for row in results["results"] if "error" in row
    ]
    if failed:
        print(f"FAILED: {', '.join(failed)} (see the rows)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
