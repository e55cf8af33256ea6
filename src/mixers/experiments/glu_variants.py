"""GLU variants: the eight feed-forwards of Shazeer (2020) in one language
model, at equal parameters.

``python -m mixers.experiments.glu_variants --profile cpu`` trains the same
small character-level transformer (causal multi-head attention as the token
mixer, learned positions) eight times per seed, changing only the channel
mixer: the ungated ``relu``, ``gelu`` and ``swish`` feed-forwards and the gated
``glu``, ``bilinear``, ``reglu``, ``geglu`` and ``swiglu``. The ungated ones
have hidden size ``d_ff = 4·d_model``; the gated ones, which have a third
matrix, ``matched_hidden_size(4·d_model) ≈ 2/3`` of it, so every model has
(almost exactly) the same number of parameters, as in the paper.

Seeds: each seed is the ``TrainConfig.seed`` of a run, which drives both the
initial weights and the order of the training batches (and picks the validation
windows). For a given seed every variant sees the same batches in the same
order and is scored on the same windows; across seeds the initialisation *and*
the data order change. So a comparison within a seed is paired, and the spread
over seeds measures how much a result depends on the luck of the draw.

It writes ``glu_variants-PROFILE.json`` (to ``runs/``; ``--out book/results``
for the chapter's): per run its variant, seed, hidden size, parameter counts,
loss curves, best validation loss, loss on the whole validation split, tokens
per second and provenance; a summary per variant (mean and standard deviation
over seeds) beside the paper's Table 1; the gated-minus-ungated difference per
seed; and the provenance of the whole experiment. Each (variant, seed) is one
job of ``mixers.experiments.run_jobs``: the command line saves it as it
finishes, a rerun resumes, and a run that diverges is recorded as such (and
left out of the summary) while the others carry on, in the worker pool too.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, replace
from functools import partial

from ..data import CharDataset
from ..feed_forward import VARIANTS
from ..model import ModelConfig
from ..train import (
    default_device,
    evaluate_sequential,
    get_profile,
    run_profile,
)
from . import (
    CPU_THREADS,
    Experiment,
    cpu_threads,
    main,
    profile_settings,
    run_jobs_in_processes,
)
from .plan import PLAN_TRAIN, PlannedRun, carried_lr, durations, planned_run

NAME = "glu_variants"
DURATIONS = durations("about 7 minutes on a two-core CPU", runs=8, steps=500)

# Shazeer (2020), Table 1: heldout-set log-perplexity of T5-base-sized models
# after 65,536 pre-training steps on C4 (the "65,536 steps" column), in the
# paper's order.
PAPER_TABLE_1 = {
    "relu": 1.997,
    "gelu": 1.983,
    "swish": 1.994,
    "glu": 1.982,
    "bilinear": 1.960,
    "reglu": 1.953,
    "geglu": 1.942,
    "swiglu": 1.944,
}

# Per profile: the model and the training, every field spelled out so that a
# change of the shared profiles does not silently change this experiment; the
# seeds; and how many runs go at once (on a CPU, ``CPU_THREADS`` threads
# each). Every profile's model is causal attention with learned positions and
# no dropout (the paper trains without), ``d_ff=None``: 4·d_model ungated,
# parameter-matched when gated. torch.compile stays off on the CPU: for
# models this small its compile time is not won back in 600 steps.
_MODEL = dict(
    dropout=0.0, d_ff=None, token_mixer="attention", positions="learned"
)
SETTINGS = {
    "smoke": dict(
        model=dict(_MODEL, d_model=32, n_layers=1, n_heads=2, block_size=32),
        train=dict(steps=20, batch_size=8, seq_len=32, lr=5e-3,
                   warmup_steps=5, eval_interval=10, eval_batches=2,
                   eval_batch_size=None, compile=False),
        # of the validation split's 3,500 windows: seconds, not minutes
        full_val_windows=64, seeds=(0, 1), workers=1,
    ),
    "cpu": dict(
        model=dict(_MODEL, d_model=128, n_layers=2, n_heads=4, block_size=64),
        train=dict(steps=600, batch_size=32, seq_len=64, lr=3e-3,
                   min_lr_ratio=0.1, warmup_steps=50, weight_decay=0.1,
                   betas=(0.9, 0.99), grad_clip=1.0, eval_interval=50,
                   eval_batches=16, eval_batch_size=None, compile=False,
                   cpu_amp=True),
        full_val_windows=None,  # all of them
        seeds=(0, 1, 2), workers=2,
    ),
    "gpu": dict(
        model=dict(_MODEL, d_model=384, n_layers=6, n_heads=6, block_size=256),
        # the gpu plan (mixers.experiments.plan): one seed, 500 steps a run,
        # the cpu rate carried over
        train=dict(PLAN_TRAIN, steps=500, lr=carried_lr(3e-3)),
        full_val_windows=None, seeds=(0,), workers=1,
    ),
}  # fmt: skip


def run_one(
    dataset: CharDataset,
    profile: str,
    variant: str,
    seed: int,
    progress: bool = False,
) -> dict:
    """Train the model with channel mixer ``variant`` under ``profile``'s
    settings and ``seed``.

    Returns the run's record: variant, seed, hidden size, parameter counts,
    best and whole-split validation loss, throughput and the full
    ``TrainResult.to_dict()``.
    """
    if variant not in VARIANTS:
        raise ValueError(
            f"variant must be one of {list(VARIANTS)}, got {variant!r}"
        )
    settings = profile_settings(profile, SETTINGS)
    model_overrides = {**settings["model"], "channel_mixer": variant}
    train_overrides = {**settings["train"], "seed": seed}
    model, result = run_profile(
        dataset,
        get_profile(profile),
        model_overrides=model_overrides,
        train_overrides=train_overrides,
        progress=progress,
        description=f"{NAME} {variant} seed {seed}",
    )
    feed_forward = model.blocks[0].channel_mixer
    activation, gated = VARIANTS[variant]
    full_val = evaluate_sequential(
        model,
        dataset.val,
        settings["train"]["seq_len"],
        max_windows=settings["full_val_windows"],
    )
    return {
        "variant": variant,
        "seed": seed,
        "activation": activation,
        "gated": gated,
        "d_ff": feed_forward.d_ff,
        # of one block
        "feed_forward_parameters": (feed_forward.num_parameters()),
        "parameters": result.parameters,  # of the whole model
        "best_val_loss": result.best_val_loss,
        "final_val_loss": result.final_val_loss,
        # non-overlapping windows of the validation split (all but in smoke)
        "full_val_loss": (full_val),
        "tokens_per_s": result.tokens_per_s,
        "wall_time_s": result.wall_time_s,
        "result": result.to_dict(),
    }


def _run_job(
    profile: str, progress: bool, dataset: CharDataset, job: tuple[str, int]
) -> dict:
    variant, seed = job
    return run_one(dataset, profile, variant, seed, progress=progress)


def _mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    return statistics.fmean(values), (
        statistics.stdev(values) if len(values) > 1 else 0.0
    )


def summarize(runs: list[dict]) -> dict:
    """Per variant: mean and std over seeds; per seed: mean gated minus mean
    ungated loss.

    ``runs`` are ``run_one`` records. Standard deviations are sample standard
    deviations (n - 1). The gap is paired: within a seed all variants share
    data order and windows.
    """
    variants = [
        name
        for name in VARIANTS
        if any(run["variant"] == name for run in runs)
    ]
    per_variant = {name: _summarize_variant(runs, name) for name in variants}
    ranking = sorted(
        variants, key=lambda name: per_variant[name]["best_val_loss_mean"]
    )
    return {
        "variants": per_variant,
        "ranking_by_best_val_loss": ranking,
        "paper_ranking": sorted(PAPER_TABLE_1, key=PAPER_TABLE_1.get),
        "gated_minus_ungated": _gated_minus_ungated(runs),
    }


def _summarize_variant(runs: list[dict], name: str) -> dict:
    """The runs of variant ``name`` over the seeds: its sizes, the mean and
    standard deviation of its losses and its mean throughput, beside the
    paper's figure."""
    mine = [run for run in runs if run["variant"] == name]
    best_mean, best_std = _mean_std([run["best_val_loss"] for run in mine])
    full_mean, full_std = _mean_std([run["full_val_loss"] for run in mine])
    return {
        "gated": VARIANTS[name][1],
        "seeds": [run["seed"] for run in mine],
        "d_ff": mine[0]["d_ff"],
        "parameters": mine[0]["parameters"],
        "feed_forward_parameters": mine[0]["feed_forward_parameters"],
        "best_val_loss_mean": best_mean,
        "best_val_loss_std": best_std,
        "full_val_loss_mean": full_mean,
        "full_val_loss_std": full_std,
        "tokens_per_s_mean": statistics.fmean(
            run["tokens_per_s"] for run in mine
        ),
        "paper_log_perplexity": PAPER_TABLE_1[name],
    }


def _gated_minus_ungated(runs: list[dict]) -> dict:
    """Per loss, seed by seed: the mean loss of the gated variants minus that
    of the ungated ones (a seed that lacks either is skipped), and the mean
    and standard deviation of those differences."""
    seeds = sorted({run["seed"] for run in runs})
    gaps = {}
    for metric in ("best_val_loss", "full_val_loss"):
        per_seed = []
        for seed in seeds:
            gated = [
                r[metric] for r in runs if r["seed"] == seed and r["gated"]
            ]
            ungated = [
                r[metric] for r in runs if r["seed"] == seed and not r["gated"]
            ]
            if gated and ungated:
                per_seed.append(
                    statistics.fmean(gated) - statistics.fmean(ungated)
                )
        if per_seed:
            mean, std = _mean_std(per_seed)
            gaps[metric] = {"per_seed": per_seed, "mean": mean, "std": std}
    return gaps


def shared_settings(
    profile: str, vocab_size: int, variants: list[str], seeds: list[int]
) -> dict:
    """Everything the runs of ``profile`` share, as the results record it: the
    model but its channel mixer, the training but its seed, the variants, the
    seeds and the full-split evaluation.
    """
    settings = profile_settings(profile, SETTINGS)
    base = get_profile(profile)
    model = ModelConfig(
        vocab_size=vocab_size, **{**base.model, **settings["model"]}
    ).to_dict()
    train = asdict(replace(base.train, **settings["train"]))
    del model["channel_mixer"], train["seed"]
    return {
        "model": model,
        "train": train,
        "variants": variants,
        "seeds": seeds,
        "full_val_windows": settings["full_val_windows"],
    }


def planned_runs(profile: str) -> list[PlannedRun]:
    """Every run of ``profile`` (``mixers.experiments.plan``)."""
    settings = profile_settings(profile, SETTINGS)
    dataset = CharDataset.shakespeare()
    shared = shared_settings(
        profile,
        dataset.tokenizer.vocab_size,
        list(VARIANTS),
        list(settings["seeds"]),
    )
    windows = settings["full_val_windows"]
    seq_len = shared["train"]["seq_len"]
    read = len(dataset.val) if windows is None else windows * seq_len
    return [
        planned_run(
            {**shared["model"], "channel_mixer": variant},
            {**shared["train"], "seed": seed},
            dataset.tokenizer.vocab_size,
            read,
        )
        for seed in shared["seeds"]
        for variant in VARIANTS
    ]


def run(
    profile: str,
    progress: bool = True,
    variants: list[str] | None = None,
    seeds: list[int] | None = None,
    workers: int | None = None,
) -> dict:
    """Train every (seed, variant) under ``profile``; return the runs, a
    summary and provenance.

    ``variants``, ``seeds`` and ``workers`` default to all eight variants and
    the profile's seeds and worker count. With ``workers > 1`` (CPU only) the
    runs are spread over that many processes; each run is seeded, so the
    results are the same as in one process.
    """
    start = time.perf_counter()
    settings = profile_settings(profile, SETTINGS)
    variants = _checked_variants(variants)
    seeds = list(settings["seeds"] if seeds is None else seeds)
    on_cpu = default_device().type == "cpu"
    workers = (
        (settings["workers"] if workers is None else workers) if on_cpu else 1
    )
    dataset = CharDataset.shakespeare()
    shared = shared_settings(
        profile, dataset.tokenizer.vocab_size, variants, seeds
    )
    experiment = Experiment(
        NAME,
        profile,
        shared,
        ("variant", "seed"),
        [(name, seed) for seed in seeds for name in variants],
    )

    with cpu_threads(CPU_THREADS, enabled=on_cpu):
        runs, resumed = run_jobs_in_processes(
            experiment,
            partial(_run_job, profile, progress and workers == 1),
            dataset,
            workers,
            CPU_THREADS,
        )
    return {
        "experiment": NAME,
        "model": _model_description(shared["model"]),
        "seed_policy": (
            "TrainConfig.seed drives the initial weights, the order of the"
            " training batches and the validation windows: the same for every"
            " variant at a given seed, different across seeds"
        ),
        "settings": {
            **shared,
            "workers": workers,
            "threads_per_run": CPU_THREADS if on_cpu else None,
        },
        "paper_table_1": PAPER_TABLE_1,
        "runs": runs,
        "summary": summarize([run for run in runs if not run["diverged"]]),
        "provenance": experiment.provenance(
            runs, resumed, start, seeds=seeds, workers=workers
        ),
    }


def _checked_variants(variants: list[str] | None) -> list[str]:
    """``variants`` as a list, every name one of ``VARIANTS``; all eight for
    None."""
    variants = list(VARIANTS) if variants is None else list(variants)
    for name in variants:
        if name not in VARIANTS:
            raise ValueError(
                f"variants must be names in {list(VARIANTS)}, got {name!r}"
            )
    return variants


def _model_description(model: dict) -> str:
    """The results' one-line description of the models, from the shared
    ModelConfig fields ``model``."""
    return (
        "causal attention + each feed-forward variant, learned positions;"
        f" d_model {model['d_model']}, {model['n_layers']} layers,"
        f" {model['n_heads']} heads; d_ff {4 * model['d_model']} ungated,"
        " parameter-matched when gated; no biases in the feed-forwards"
    )


# -----------------------------------------------------------------------------
# What the chapter shows of a results file, whatever its profile
# (mixers.tables.profiles_table, mixers.plot.live_beside_committed).


def curves(results: dict) -> dict[str, dict]:
    """Each variant's loss curves at the first seed."""
    seed = results["settings"]["seeds"][0]
    return {
        run["variant"]: run["result"]
        for run in results["runs"]
        if run["seed"] == seed and not run.get("diverged")
    }


def headline(results: dict) -> dict[str, str]:
    """Seeds, the best variant, and the gated minus ungated gap."""
    summary = results["summary"]
    gap = summary["gated_minus_ungated"].get("best_val_loss")
    first = summary["ranking_by_best_val_loss"][0]
    return {
        "seeds": str(len(results["settings"]["seeds"])),
        "lowest best val loss": (
            f"{first} {summary['variants'][first]['best_val_loss_mean']:.3f}"
        ),
        "gated - ungated": "n/a" if gap is None else f"{gap['mean']:+.3f}",
    }


if __name__ == "__main__":
    main(NAME, run, __doc__.splitlines()[0], DURATIONS)
