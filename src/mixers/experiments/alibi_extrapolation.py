"""Train short, test long: one language model with six position schemes,
evaluated past its training length.

``python -m mixers.experiments.alibi_extrapolation --profile cpu`` trains the
same small character-level transformer six times at one training length L,
changing only how it knows where a token is:

==============  =============  ==============  ================================
scheme          token mixer    positions       where the position enters
==============  =============  ==============  ================================
``none``        ``attention``  ``none``        nowhere (a causal model can
                                               still count)
``sinusoidal``  ``attention``  ``sinusoidal``  a fixed sin/cos table added to
                                               the embeddings
``learned``     ``attention``  ``learned``     a learned table of L rows added
                                               to the embeddings
``rotary``      ``rotary``     ``none``        q and k rotated by their
                                               positions (RoPE)
``alibi``       ``alibi``      ``none``        a linear penalty ``-m·(i - j)``
                                               on the scores
==============  =============  ==============  ================================

and ``sinusoidal_scaled`` (token mixer ``attention``, positions
``sinusoidal_scaled``): the same sin/cos table multiplied by 0.02·√2, so that
it starts at the token embeddings' size (both RMS 0.02; the plain table is 35
times larger), to measure whether that size matters.

Same initial seed, same data order, same steps. Each model is then scored on
the validation split in non-overlapping windows of 1, 2, 4, ... times L
(``mixers.data.sequential_windows``), and every length sees the *same* tokens:
the first ``eval_tokens`` characters of the split, cut into ``eval_tokens /
length`` windows. Besides the mean loss at each length, it records the loss at
every position of the window (``mixers.experiments.per_position_loss``),
averaged over the windows.

Learned positions have no row for position L or beyond: the model raises a
``ValueError`` there, and the results say so (``loss: null`` with the error
message) instead of inventing a number.

Non-overlapping windows give the first tokens of every window little context,
so a longer window lowers the loss even for a model that reads no further than
L: the paper's Appendix B calls this the early token curse, and warns that
ALiBi's gains past L might come from it rather than from using the longer
context. So each model is scored a second way, with **sliding windows**
(``sliding_window_loss``): windows of 1, 2 and 4 times L that advance by
``sliding_stride`` tokens and score only their last ``sliding_stride``
predictions, so that every prediction reads almost a whole window. If ALiBi
uses context past L, its sliding-window loss falls as the window grows; if it
does not, it stays level.

The models that decode through a key/value cache past L (``rotary``,
``alibi`` and ``none``, whose positions are not on the embeddings) also **write
long**: each generates ``generate_samples`` texts of
``generate_factor`` × L characters from a newline, every token reading every
token before it, at temperature 1 (``long_generation``). The record keeps one
text and the writer's own loss at each position of its texts, averaged over
them: the surprisal of each character it chose, whose mean is the entropy of
its predictions there.

It writes ``alibi_extrapolation-PROFILE.json`` (to ``runs/``; ``--out
book/results`` for the chapter's): per scheme the loss curves, the loss at each
evaluation length, the per-position losses, the sliding-window losses, the
long generation of the models that write past L, and the provenance of the
run. Each
scheme, trained and evaluated, is one job of ``mixers.experiments.run_jobs``:
the command line saves it as it finishes, a rerun resumes, and a scheme whose
training diverges is recorded as such while the others carry on.
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace

import torch
import torch.nn.functional as F

from ..data import CharDataset
from ..model import LanguageModel
from ..train import get_profile, run_profile
from . import (
    Experiment,
    cpu_threads,
    evaluate_lengths,
    experiment_settings,
    main,
    sliding_window_loss,
)
from .plan import PLAN_TRAIN, PlannedRun, carried_lr, durations, planned_run

NAME = "alibi_extrapolation"
DURATIONS = durations(
    "about half an hour on a two-core CPU", runs=6, steps=500
)

# scheme -> (token mixer, positions added to the embeddings). The mixers that
# encode position inside attention (rotary, alibi) get no positions on the
# embeddings.
SCHEMES: dict[str, tuple[str, str]] = {
    "none": ("attention", "none"),
    "sinusoidal": ("attention", "sinusoidal"),
    "learned": ("attention", "learned"),
    "rotary": ("rotary", "none"),
    "alibi": ("alibi", "none"),
    # the sinusoid table at the token embeddings' scale
    # (mixers.positions.SCALED_SINUSOID_FACTOR): does the size of the plain
    # table, 35 times the embeddings' at initialisation, matter?
    "sinusoidal_scaled": ("attention", "sinusoidal_scaled"),
}

# Per profile: the model (ModelConfig fields over the profile's own; block_size
# is the training length L), the training (TrainConfig fields; seq_len = L),
# the evaluation lengths as multiples of L, and the number of validation tokens
# scored at every length.
SETTINGS = {
    "smoke": dict(
        model=dict(d_model=32, n_layers=1, n_heads=4, block_size=16),
        train=dict(steps=60, batch_size=16, seq_len=16, lr=1e-2,
                   warmup_steps=5, eval_interval=30, eval_batches=2),
        factors=(1, 2, 4, 8, 16), eval_tokens=2048,
        sliding_factors=(1, 2), sliding_stride=4,
        generate_factor=4, generate_samples=2,
    ),
    "cpu": dict(
        model=dict(d_model=128, n_layers=3, n_heads=8, block_size=64),
        train=dict(steps=800, batch_size=32, seq_len=64, lr=2e-3,
                   warmup_steps=50, eval_interval=100, eval_batches=10),
        factors=(1, 2, 4, 8, 16), eval_tokens=65536,
        sliding_factors=(1, 2, 4), sliding_stride=16,
        generate_factor=4, generate_samples=16,
    ),
    "gpu": dict(
        model=dict(d_model=384, n_layers=6, n_heads=8, block_size=256,
                   dropout=0.1),
        # the gpu plan (mixers.experiments.plan): 500 steps a run, the cpu
        # rate carried over
        train=dict(PLAN_TRAIN, steps=500, lr=carried_lr(2e-3)),
        factors=(1, 2, 4, 8, 16), eval_tokens=98304,
        sliding_factors=(1, 2, 4), sliding_stride=64,
        generate_factor=4, generate_samples=16,
    ),
}  # fmt: skip

# Facts from the paper, for comparison (not computed here): WikiText-103
# validation perplexity of 16-layer, 247M-parameter models trained on L = 512
# tokens, evaluated without overlap at longer lengths (Press, Smith and Lewis,
# 2022, the L = 512 curves of their Figure 1 / appendix table).
PAPER_WIKITEXT103_L512 = {
    "train_length": 512,
    "eval_lengths": [512, 15512],
    "perplexity": {
        "sinusoidal": [20.05, 406.01],
        "rotary": [20.07, 79.25],
        "alibi": [19.73, 18.31],
    },
}


def shared_settings(profile: str, val_tokens: int) -> dict:
    """Everything the runs of ``profile`` share, as the results record it;
    checked before any run (``val_tokens``: the length of the validation split
    the evaluation reads).
    """
    base, settings, model_settings = experiment_settings(profile, SETTINGS)
    train = asdict(replace(base.train, **settings["train"]))
    train_length = model_settings["block_size"]
    if train["seq_len"] != train_length:
        raise ValueError(
            "the training seq_len must equal block_size: L is both the"
            " training length and the number of learned positions"
        )
    if settings["eval_tokens"] + 1 > val_tokens:
        raise ValueError(
            f"eval_tokens={settings['eval_tokens']} exceeds the validation"
            f" split ({val_tokens} tokens)"
        )
    return {
        "model": model_settings,
        "train": train,
        "train_length": train_length,
        "factors": list(settings["factors"]),
        "eval_lengths": [f * train_length for f in settings["factors"]],
        "eval_tokens": settings["eval_tokens"],
        "eval_split": "val",
        "sliding_lengths": [
            f * train_length for f in settings["sliding_factors"]
        ],
        "sliding_stride": settings["sliding_stride"],
        "generate_length": settings["generate_factor"] * train_length,
        "generate_samples": settings["generate_samples"],
        "schemes": {
            scheme: {"token_mixer": m, "positions": p}
            for scheme, (m, p) in SCHEMES.items()
        },
    }


def _overrides(settings: dict, scheme: str) -> dict:
    """The model fields of the run of ``scheme``: the shared model, its token
    mixer and the positions on its embeddings."""
    token_mixer, positions = SCHEMES[scheme]
    return {
        **settings["model"],
        "token_mixer": token_mixer,
        "positions": positions,
    }


def run_one(
    dataset: CharDataset,
    profile: str,
    settings: dict,
    scheme: str,
    progress: bool = False,
) -> dict:
    """Train the model of ``scheme`` under ``settings`` (``shared_settings``)
    and evaluate it at every length; return its record."""
    model, result = run_profile(
        dataset,
        profile,
        model_overrides=_overrides(settings, scheme),
        train_overrides=settings["train"],
        progress=progress,
        description=f"{NAME} {scheme}",
    )
    eval_start = time.perf_counter()
    evaluation = evaluate_lengths(
        model,
        dataset.val,
        settings["eval_lengths"],
        settings["eval_tokens"],
        per_position=True,
    )
    sliding = sliding_evaluation(model, dataset.val, settings)
    eval_time_s = time.perf_counter() - eval_start
    token_mixer, positions = SCHEMES[scheme]
    return {
        "scheme": scheme,
        "token_mixer": token_mixer,
        "positions": positions,
        "result": result.to_dict(),
        "eval": evaluation,
        "sliding": sliding,
        "eval_time_s": eval_time_s,
        "long_generation": (
            long_generation(model, dataset, settings)
            if model.decodes_with_cache()
            else None
        ),
    }


def sliding_evaluation(
    model: LanguageModel, data: torch.Tensor, settings: dict
) -> list[dict]:
    """Per length of ``settings["sliding_lengths"]``: the sliding-window loss
    over the first ``eval_tokens`` predictions, or ``None`` with the model's
    message where it cannot read that length (past ``block_size``)."""
    rows = []
    for window in settings["sliding_lengths"]:
        row = {"window": window, "stride": settings["sliding_stride"]}
        try:
            row["loss"] = sliding_window_loss(
                model,
                data,
                window,
                settings["sliding_stride"],
                settings["eval_tokens"],
            )
            row["error"] = None
        except ValueError as failure:
            if window <= model.config.block_size:
                raise
            row.update(loss=None, error=str(failure))
        rows.append(row)
    return rows


@torch.no_grad()
def long_generation(
    model: LanguageModel, dataset: CharDataset, settings: dict, seed: int = 0
) -> dict:
    """``generate_samples`` texts of ``generate_length`` characters after a
    newline, sampled at temperature 1 with full context through the key/value
    cache; one of them, and the writer's own loss (nats) at every position,
    averaged over the texts.

    The loss is the model's, with full context, on the text it wrote: scoring
    the sampled text in one forward pass gives the same distributions that
    generation sampled from, one token at a time.
    """
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    prompt = dataset.tokenizer.encode("\n")[None].to(device)
    prompt = prompt.expand(settings["generate_samples"], -1)
    was_training = model.training
    model.eval()
    try:
        texts = model.generate(
            prompt, settings["generate_length"], generator=generator
        )
        logits, _ = model(texts[:, :-1])
        loss = F.cross_entropy(
            logits.float().transpose(1, 2), texts[:, 1:], reduction="none"
        )
    finally:
        model.train(was_training)
    return {
        "sample": dataset.tokenizer.decode(texts[0].tolist()),
        "per_position": [round(v, 4) for v in loss.mean(0).tolist()],
    }


def forward_tokens(settings: dict) -> int:
    """The tokens a run reads forward after training: every evaluation
    length, the sliding windows (each reads ``window / stride`` times its
    tokens) and its texts, written and then scored."""
    tokens = settings["eval_tokens"]
    lengths = len(settings["eval_lengths"]) * tokens
    sliding = sum(
        window // settings["sliding_stride"] * tokens
        for window in settings["sliding_lengths"]
    )
    texts = 2 * settings["generate_samples"] * settings["generate_length"]
    return lengths + sliding + texts


def planned_runs(profile: str) -> list[PlannedRun]:
    """Every run of ``profile`` (``mixers.experiments.plan``)."""
    dataset = CharDataset.shakespeare()
    settings = shared_settings(profile, len(dataset.val))
    base = get_profile(profile).model
    return [
        planned_run(
            {**base, **_overrides(settings, scheme)},
            settings["train"],
            dataset.tokenizer.vocab_size,
            forward_tokens(settings),
        )
        for scheme in SCHEMES
    ]


@cpu_threads()
def run(profile: str, progress: bool = True, workers: int = 1) -> dict:
    """Train every scheme at the training length of ``profile`` and evaluate it
    at longer lengths, ``workers`` schemes at a time."""
    start = time.perf_counter()
    dataset = CharDataset.shakespeare()
    settings = shared_settings(profile, len(dataset.val))
    experiment = Experiment(
        NAME, profile, settings, ("scheme",), [(scheme,) for scheme in SCHEMES]
    )
    runs, resumed = experiment.train(run_one, dataset, workers, progress)
    model = settings["model"]
    return {
        "experiment": NAME,
        "model": (
            f"causal transformer, d_model {model['d_model']},"
            f" {model['n_layers']} layers, {model['n_heads']} heads, gelu"
            f" feed-forward; trained at L = {settings['train_length']};"
            f" schemes: {', '.join(SCHEMES)}"
        ),
        "settings": settings,
        "runs": runs,
        "provenance": experiment.provenance(runs, resumed, start),
    }


# -----------------------------------------------------------------------------
# What the chapter shows of a results file, whatever its profile
# (mixers.tables.profiles_table, mixers.plot.live_beside_committed).


def curves(results: dict) -> dict[str, dict]:
    """Each scheme's loss curves."""
    return {
        run["scheme"]: run["result"]
        for run in results["runs"]
        if not run.get("diverged")
    }


def headline(results: dict) -> dict[str, str]:
    """Each scheme's loss at the training length and at 16 times it (or the
    longest length evaluated)."""
    out = {}
    for run in results["runs"]:
        if run.get("diverged"):
            out[run["scheme"]] = "diverged"
            continue
        first, last = run["eval"][0]["loss"], run["eval"][-1]["loss"]
        longest = "n/a" if last is None else f"{last:.2f}"
        out[run["scheme"]] = f"{first:.2f} / {longest}"
    return out


if __name__ == "__main__":
    main(NAME, run, __doc__.splitlines()[0], DURATIONS)
