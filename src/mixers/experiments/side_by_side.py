"""The mixers side by side: every token mixer × channel mixer pair on one
harness, at equal parameters.

``python -m mixers.experiments.side_by_side --profile cpu`` trains one small
character-level language model per pair of ``PAIRS``, changing only its blocks:

====================  =============  =============  ===========================
pair                  token mixer    channel mixer  positions
====================  =============  =============  ===========================
``attention+gelu``    ``attention``  ``gelu``       a learned table (the
                                                    classic transformer)
``attention+swiglu``  ``attention``  ``swiglu``     a learned table
``rotary+gelu``       ``rotary``     ``gelu``       rotary, inside attention
``rotary+swiglu``     ``rotary``     ``swiglu``     rotary, inside attention
``alibi+gelu``        ``alibi``      ``gelu``       ALiBi biases, inside
                                                    attention
``alibi+swiglu``      ``alibi``      ``swiglu``     ALiBi biases, inside
                                                    attention
``gmlp``              ``gmlp``       ``none``       the Spatial Gating Unit's W
``amlp``              ``amlp``       ``none``       W, and a tiny attention in
                                                    the gate
====================  =============  =============  ===========================

GELU and SwiGLU stand for the ungated and the gated feed-forwards (the GLU
chapter compares all eight); gMLP and aMLP mix channels themselves. Any other
registered pair can be asked for by label, ``"TOKEN_MIXER+CHANNEL_MIXER"``
(``parse_pair``).

Like for like:

* **parameters**: the reference pair (``attention+gelu``, ``d_ff = 4·d_model``)
  sets the target count of the whole model; every other pair gets the hidden
  size (``d_ff``, or gMLP's ``d_ffn``) that brings its whole model closest to
  it (``matched_d_ff``), and must land within ``PARAMETER_TOLERANCE`` (±2 %) of
  it, or the run refuses to start. (``d_ff`` is ``ModelConfig.d_ff``; a gated
  FFN builds 2/3 of it, and each pair records the width it built as
  ``hidden_size``.) Embeddings, positions and W all count: they are what each
  model pays for;
* **data and steps**: the same token budget (steps × batch × length) for every
  run, and for a given seed the same initial seed and the same batches in the
  same order (``TrainConfig.seed``);
* **learning rate**: the same schedule (warm-up, cosine decay) at each peak
  learning rate of the sweep (``lrs``) for every pair, so that no block is
  judged at a learning rate tuned for another; the summary reports each pair at
  *its* best learning rate, chosen on the mean best validation loss over the
  seeds (``best_lr_at_edge`` flags a pair whose best rate is the smallest or
  largest tried). A pair whose best rate lies at the edge gets more rates of
  its own (``extra_lrs``), run after the sweep as extra jobs, so that a grown
  sweep resumes from the runs it has.
* **evaluation**: every loss the summary reports is the final model's on the
  same text, the whole validation split (``eval_tokens=None``: every
  non-overlapping window of it, the same tokens at every length), not the
  random windows the learning rate was chosen on: choosing and reporting on
  the same numbers flatters the noisiest pairs most.

Per run it records the best validation loss during training, whether it was
still falling at the last evaluation (``still_improving``), the training
throughput (tokens per second of the training steps alone), the peak memory of
one training step (``train_step_peak_memory``) and the loss at 1, 2 and 4 times
the training length (``evaluate_lengths``): learned positions and gMLP's W have
exactly ``block_size`` rows, so those models cannot read a longer sequence, and
their loss there is ``None`` with the model's own error message, not a number.
A summary per pair gives mean, standard deviation, minimum and maximum over the
seeds at the pair's best learning rate, and each seed's loss
(``loss_by_seed``), which ``mixers.stats.paired_test`` compares pair against
pair, seed by seed.

Long runs survive interruption, as every experiment's do
(``mixers.experiments.run_jobs``): the command line saves every finished (pair,
learning rate, seed) at once to ``side_by_side-PROFILE.partial.json``,
atomically. A rerun with the same settings resumes from it and says so
("resuming: N of M runs already done"); a rerun with other settings refuses to
mix them (``SettingsMismatch``, naming each difference) unless told to start
afresh (``--fresh``). At the end it writes ``side_by_side-PROFILE.json`` and
removes the partial file.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import asdict, replace

import torch

from .._checks import check_positive_int
from ..bench import peak_memory
from ..data import CharDataset, random_batch
from ..model import CHANNEL_MIXERS, TOKEN_MIXERS, LanguageModel, ModelConfig
from ..results import provenance, to_json
from ..train import (
    PROFILES,
    autocast_dtype,
    default_device,
    get_profile,
    precision_name,
    run_profile,
)
from . import (
    CPU_THREADS,
    Experiment,
    cpu_threads,
    evaluate_lengths,
    experiment_settings,
    main,
)
from .plan import PLAN_TRAIN, PlannedRun, carried_lr, durations, planned_run

NAME = "side_by_side"
DURATIONS = durations(
    "about two hours on a two-core CPU (123 runs of 600 steps, two at a time)",
    runs=8,
    steps=500,
)

#: The pairs trained by default, as "TOKEN_MIXER+CHANNEL_MIXER" (a block that
#: mixes channels itself is named by its token mixer alone).
PAIRS = (
    "attention+gelu",
    "attention+swiglu",
    "rotary+gelu",
    "rotary+swiglu",
    "alibi+gelu",
    "alibi+swiglu",
    "gmlp",
    "amlp",
)
#: The pair whose whole model, at d_ff = 4·d_model, sets the parameter target
#: of every pair.
REFERENCE_PAIR = "attention+gelu"
#: How far (relative) a pair's parameter count may lie from the target.
PARAMETER_TOLERANCE = 0.02

# Per profile: the model (ModelConfig fields; the pair adds token_mixer,
# channel_mixer and d_ff), the training (every TrainConfig field but lr and
# seed, spelled out so that a change of the shared profiles does not silently
# change this experiment), the peak learning rates swept, the seeds, the
# evaluation lengths as multiples of the training length, and how many
# validation tokens each evaluation length reads (the same tokens at every
# length; None: the whole split, cut to whole windows of the longest
# length). What every profile's training shares (the schedule's floor,
# AdamW's decay and betas, clipping, mixed precision where the device has
# it).
_TRAIN = dict(
    min_lr_ratio=0.1,
    weight_decay=0.1,
    betas=(0.9, 0.99),
    grad_clip=1.0,
    eval_batch_size=None,
    amp=True,
)

SETTINGS = {
    "smoke": dict(
        model=dict(d_model=32, n_layers=1, n_heads=2, block_size=16,
                   dropout=0.0),
        train=dict(_TRAIN, steps=12, batch_size=8, seq_len=16, warmup_steps=3,
                   eval_interval=6, eval_batches=2, compile=False,
                   cpu_amp=False),
        lrs=(3e-3, 6e-3, 1.2e-2), seeds=(0, 1), factors=(1, 2, 4),
        eval_tokens=512,
    ),
    # Sized for a two-core AMD EPYC, which has no native bf16 (so float32:
    # autocast_dtype). The committed run's 123 runs, two at a time, one per
    # core, took 15,321 s of run time in all, about 2 minutes each, on a
    # machine that was running other work too: about two hours.
    "cpu": dict(
        model=dict(d_model=128, n_layers=2, n_heads=4, block_size=64,
                   dropout=0.0),
        train=dict(_TRAIN, steps=600, batch_size=32, seq_len=64,
                   warmup_steps=50, eval_interval=50, eval_batches=8,
                   compile=False, cpu_amp=True),
        # Three seeds, and a sweep wide enough that every pair's best rate can
        # lie inside it (with three rates, half the pairs' lay at its edge).
        lrs=(1.5e-3, 3e-3, 6e-3, 1.2e-2, 2.4e-2),
        # gMLP's best rate was the sweep's largest: the sweep goes on for it
        # (and only it) until its best lies inside.
        extra_lrs={"gmlp": (4.8e-2,)},
        seeds=(0, 1, 2), factors=(1, 2, 4), eval_tokens=None,
        # two runs at once, one per core (mixers.experiments
        # .run_jobs_in_processes): each still trains on one thread
        workers=2,
    ),
    # The gpu plan (mixers.experiments.plan): one seed, no sweep, each pair
    # at its best cpu rate carried over; 500 steps a run.
    "gpu": dict(
        model=dict(d_model=384, n_layers=6, n_heads=6, block_size=256,
                   dropout=0.1),
        train=dict(_TRAIN, **PLAN_TRAIN, steps=500, cpu_amp=False),
        lrs={
            pair: (carried_lr(lr),)
            for pair, lr in {
                "attention+gelu": 3e-3,
                "attention+swiglu": 3e-3,
                "rotary+gelu": 3e-3,
                "rotary+swiglu": 3e-3,
                "alibi+gelu": 6e-3,
                "alibi+swiglu": 6e-3,
                "gmlp": 2.4e-2,
                "amlp": 6e-3,
            }.items()
        },
        seeds=(0,), factors=(1, 2, 4), eval_tokens=None,
    ),
}  # fmt: skip


# -----------------------------------------------------------------------------
# Pairs and their parameter counts.


def parse_pair(label: str) -> dict:
    """``"TOKEN_MIXER+CHANNEL_MIXER"`` (or a channel-mixing token mixer's name
    alone) as the ``ModelConfig`` fields ``token_mixer`` and ``channel_mixer``;
    a ValueError names what is not registered."""
    if not isinstance(label, str) or not label:
        raise TypeError(
            "a pair must be a label 'TOKEN_MIXER+CHANNEL_MIXER', got"
            f" {label!r}"
        )
    token_mixer, _, channel_mixer = label.partition("+")
    if token_mixer not in TOKEN_MIXERS:
        raise ValueError(
            f"pair {label!r}: unknown token mixer {token_mixer!r}; registered:"
            f" {sorted(TOKEN_MIXERS)}"
        )
    if TOKEN_MIXERS[token_mixer].mixes_channels:
        if channel_mixer not in ("", "none"):
            raise ValueError(
                f"pair {label!r}: token mixer {token_mixer!r} mixes channels"
                f" itself; name it alone, {token_mixer!r}"
            )
        return {"token_mixer": token_mixer, "channel_mixer": "none"}
    if channel_mixer not in CHANNEL_MIXERS or channel_mixer == "none":
        raise ValueError(
            f"pair {label!r}: channel mixer must be one of "
            f"{sorted(set(CHANNEL_MIXERS) - {'none'})}, got {channel_mixer!r}"
        )
    return {"token_mixer": token_mixer, "channel_mixer": channel_mixer}


def count_parameters(
    vocab_size: int, model: dict, pair: str, d_ff: int | None
) -> int:
    """Parameters of the whole ``LanguageModel`` of ``pair`` with hidden size
    ``d_ff``.

    Built on the meta device: shapes without memory or initialisation, so
    counting is cheap.
    """
    with torch.device("meta"):
        config = ModelConfig(
            vocab_size=vocab_size, **model, **parse_pair(pair), d_ff=d_ff
        )
        return LanguageModel(config).num_parameters()


def matched_d_ff(target: int, vocab_size: int, model: dict, pair: str) -> int:
    """The ``ModelConfig.d_ff`` whose model of ``pair`` has the parameter count
    closest to ``target``.

    The count is affine in d_ff up to rounding (a gated FFN's hidden size is
    2/3 of d_ff, gMLP's d_ffn must be even), so two probes give the slope, and
    the neighbours of the estimate are counted exactly.
    """
    # gMLP: even widths
    step = (
        2
        if TOKEN_MIXERS[parse_pair(pair)["token_mixer"]].mixes_channels
        else 1
    )
    low, high = 4 * model["d_model"], 8 * model["d_model"]
    count_low = count_parameters(vocab_size, model, pair, low)
    slope = (count_parameters(vocab_size, model, pair, high) - count_low) / (
        high - low
    )
    estimate = round((low + (target - count_low) / slope) / step) * step
    candidates = [
        d
        for d in range(estimate - 3 * step, estimate + 4 * step, step)
        if d >= step
    ]
    # the target is below the count of the smallest width: take the smallest
    if not candidates:
        candidates = [step]
    return min(
        candidates,
        key=lambda d: (
            abs(count_parameters(vocab_size, model, pair, d) - target),
            d,
        ),
    )


def matched_pairs(
    pairs: list[str],
    vocab_size: int,
    model: dict,
    tolerance: float = PARAMETER_TOLERANCE,
) -> dict:
    """Per pair: its fields, ``d_ff``, parameter count and relative distance
    from the target.

    The target is ``REFERENCE_PAIR``'s count at ``d_ff = 4·d_model``. A pair
    that cannot come within ``tolerance`` of it (e.g. gMLP at a length whose W
    alone outweighs the target) raises a ValueError that names it.
    """
    target = count_parameters(
        vocab_size, model, REFERENCE_PAIR, 4 * model["d_model"]
    )
    out = {}
    for pair in pairs:
        d_ff = (
            4 * model["d_model"]
            if pair == REFERENCE_PAIR
            else matched_d_ff(target, vocab_size, model, pair)
        )
        count = count_parameters(vocab_size, model, pair, d_ff)
        deviation = (count - target) / target
        if abs(deviation) > tolerance:
            raise ValueError(
                f"pair {pair!r} cannot match the parameter target: {count:,}"
                f" parameters at d_ff={d_ff} is {deviation:+.1%} from"
                f" {target:,} ({REFERENCE_PAIR}), beyond ±{tolerance:.0%}"
            )
        with torch.device("meta"):
            config = ModelConfig(
                vocab_size=vocab_size, **model, **parse_pair(pair), d_ff=d_ff
            )
            block = LanguageModel(config).blocks[0]
        # The width actually built: a gated FFN's is 2/3 of d_ff, gMLP's is
        # d_ff (its d_ffn).
        hidden = (
            block.channel_mixer.d_ff
            if block.channel_mixer is not None
            else block.token_mixer.d_ffn
        )
        out[pair] = {
            "token_mixer": config.token_mixer,
            "channel_mixer": config.channel_mixer,
            "positions": config.positions,
            "d_ff": d_ff,
            "hidden_size": hidden,
            "parameters": count,
            "parameter_deviation": deviation,
        }
    return {"target_parameters": target, "pairs": out}


# -----------------------------------------------------------------------------
# Settings: everything that makes two runs comparable, checked on resuming
# (``run_jobs``).


def _check_list(name: str, values, check) -> list:
    values = list(values)
    if not values:
        raise ValueError(f"{name} must not be empty")
    if len(set(values)) != len(values):
        raise ValueError(f"{name} must not repeat a value, got {values}")
    for value in values:
        check(value)
    return values


def _check_lr(lr) -> None:
    if (
        isinstance(lr, bool)
        or not isinstance(lr, (int, float))
        or not math.isfinite(lr)
        or lr <= 0
    ):
        raise ValueError(f"lrs must be positive finite numbers, got {lr!r}")


def _check_seed(seed) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seeds must be non-negative ints, got {seed!r}")


def _extra_lrs(extra: dict, pairs: list[str], lrs) -> dict:
    """The profile's per-pair extensions of the sweep, for the pairs that
    run: checked, as floats, none already in the sweep."""
    out = {}
    for pair, rates in extra.items():
        if pair not in pairs:
            continue
        rates = [
            float(lr) for lr in _check_list("extra_lrs", rates, _check_lr)
        ]
        if set(rates) & set(lrs[pair] if isinstance(lrs, dict) else lrs):
            raise ValueError(
                f"extra_lrs for {pair} repeat a rate of the sweep {lrs}:"
                f" {rates}"
            )
        out[pair] = rates
    return out


def experiment_plan(
    profile: str,
    vocab_size: int,
    pairs=None,
    lrs=None,
    seeds=None,
    val_tokens: int | None = None,
) -> dict:
    """The complete settings of a run of ``profile`` (JSON-able): model,
    training, matched pairs, learning rates, seeds, evaluation lengths and
    tokens, device and threads. Two runs with equal plans are runs of one
    experiment; ``pairs``, ``lrs`` and ``seeds`` override the profile's.
    ``val_tokens``, the validation split's length, is needed where the profile
    evaluates on the whole split.
    """
    base, settings, model = experiment_settings(profile, SETTINGS)
    pairs = _check_list("pairs", PAIRS if pairs is None else pairs, parse_pair)
    lrs = _checked_lrs(settings["lrs"] if lrs is None else lrs, pairs)
    seeds = _check_list(
        "seeds", settings["seeds"] if seeds is None else seeds, _check_seed
    )
    train = asdict(replace(base.train, **settings["train"]))
    del train["lr"], train["seed"]  # the sweep and the seeds set them per run
    if train["seq_len"] != model["block_size"]:
        raise ValueError(
            f"the training seq_len ({train['seq_len']}) must equal block_size"
            f" ({model['block_size']}): the evaluation lengths are multiples"
            " of the training length"
        )
    eval_lengths = [f * model["block_size"] for f in settings["factors"]]
    eval_tokens = _eval_tokens(
        profile, settings["eval_tokens"], max(eval_lengths), val_tokens
    )
    device = default_device()
    plan = {
        "model": model,
        "train": train,
        "reference_pair": REFERENCE_PAIR,
        "parameter_tolerance": PARAMETER_TOLERANCE,
        **matched_pairs(pairs, vocab_size, model),
        "lrs": lrs,
        "extra_lrs": _extra_lrs(settings.get("extra_lrs", {}), pairs, lrs),
        "seeds": seeds,
        "tokens_per_run": (
            train["steps"] * train["batch_size"] * train["seq_len"]
        ),
        "eval_factors": list(settings["factors"]),
        "eval_lengths": eval_lengths,
        "eval_tokens": eval_tokens,
        "eval_split": "val",
        "device_type": device.type,
        "threads_per_run": CPU_THREADS if device.type == "cpu" else None,
        "workers": settings.get("workers", 1) if device.type == "cpu" else 1,
    }
    # as it reads back from a file: tuples are lists
    return json.loads(to_json(plan))


def _checked_lrs(lrs, pairs: list[str]):
    """The sweep's learning rates, checked, as floats: one list for every
    pair, or (a dict) each pair's own rates, for every pair of ``pairs``."""
    if not isinstance(lrs, dict):
        return [float(lr) for lr in _check_list("lrs", lrs, _check_lr)]
    own = {
        pair: [float(lr) for lr in _check_list("lrs", rates, _check_lr)]
        for pair, rates in lrs.items()
        if pair in pairs
    }
    if set(own) != set(pairs):
        raise ValueError(
            f"lrs must give rates for every pair {pairs}, got {sorted(own)}"
        )
    return own


def _eval_tokens(
    profile: str, eval_tokens: int | None, longest: int, val_tokens
) -> int:
    """The validation tokens every evaluation length reads: the profile's
    ``eval_tokens``, or for None the whole split (``val_tokens`` long), cut
    to whole windows of the ``longest`` length."""
    if eval_tokens is not None:
        return eval_tokens
    if val_tokens is None:
        raise ValueError(
            f"profile {profile!r} evaluates on the whole validation split:"
            " pass val_tokens, its length in tokens"
        )
    check_positive_int("val_tokens", val_tokens)
    return val_tokens // longest * longest


def pair_lrs(plan: dict, pair: str) -> list[float]:
    """The learning rates ``pair`` trains at: the sweep's (or its own), and
    the rates added for it (``extra_lrs``), in increasing order."""
    lrs = plan["lrs"]
    own = lrs[pair] if isinstance(lrs, dict) else lrs
    return sorted(own + plan.get("extra_lrs", {}).get(pair, []))


def jobs(plan: dict) -> list[tuple[str, float, int]]:
    """Every (pair, lr, seed) of ``plan``, in the order they run: seed by seed,
    then learning rate, then pair, so that a change in the machine's load over
    time hits every pair alike; then the rates added for single pairs
    (``extra_lrs``), so that extending a sweep keeps the jobs already run.
    """
    lrs = plan["lrs"]
    sweep = [
        (pair, lr, seed)
        for seed in plan["seeds"]
        for lr in ([None] if isinstance(lrs, dict) else lrs)
        for pair in plan["pairs"]
        for lr in ([lr] if lr is not None else lrs[pair])
    ]
    extension = [
        (pair, lr, seed)
        for seed in plan["seeds"]
        for pair, extra in plan.get("extra_lrs", {}).items()
        for lr in extra
    ]
    return sweep + extension


# -----------------------------------------------------------------------------
# One run.


def train_step_peak_memory(
    model: LanguageModel, dataset: CharDataset, plan: dict
) -> int | None:
    """Peak bytes of tensor memory allocated by one forward and backward pass
    at the training batch shape, in the training precision, above what was live
    before (the weights and optimizer state are not counted; activations and
    gradients are). ``mixers.bench.peak_memory``: on a GPU
    ``max_memory_allocated``; on a CPU the allocations recorded by
    ``torch.profiler``. The eager model is measured, also where training
    compiled it."""
    train = plan["train"]
    device = next(model.parameters()).device
    x, y = random_batch(
        dataset.train,
        train["batch_size"],
        train["seq_len"],
        torch.Generator().manual_seed(0),
        device,
    )
    # as the training steps ran
    dtype = autocast_dtype(device, train["amp"], train["cpu_amp"])
    model.train()

    def step() -> None:
        with torch.autocast(
            device.type,
            dtype=dtype or torch.bfloat16,
            enabled=dtype is not None,
        ):
            _, loss = model(x, y)
        loss.backward()

    try:
        return peak_memory(step, device)
    finally:
        model.zero_grad(set_to_none=True)
        model.eval()


def _model_overrides(plan: dict, pair: str) -> dict:
    """The model fields of a run of ``pair``: the plan's model, the pair's
    mixers and its matched ``d_ff``."""
    info = plan["pairs"][pair]
    return {
        **plan["model"],
        "token_mixer": info["token_mixer"],
        "channel_mixer": info["channel_mixer"],
        "d_ff": info["d_ff"],
    }


def run_one(
    dataset: CharDataset,
    profile: str,
    plan: dict,
    pair: str,
    lr: float,
    seed: int,
    progress: bool = False,
) -> dict:
    """Train ``pair`` at peak learning rate ``lr`` from ``seed`` under
    ``plan``; return its record.

    A run that diverges raises ``TrainingDiverged``, which ``run_jobs`` records
    (``diverged``, with its message): a learning rate too high for a block is a
    result of the sweep, not a crash.
    """
    info = plan["pairs"][pair]
    train_overrides = {
        **plan["train"],
        "betas": tuple(plan["train"]["betas"]),
        "lr": lr,
        "seed": seed,
    }
    model, result = run_profile(
        dataset,
        PROFILES[profile],
        model_overrides=_model_overrides(plan, pair),
        train_overrides=train_overrides,
        progress=progress,
        description=f"{NAME} {pair} lr {lr:g} seed {seed}",
    )
    # the plan counted the model this run built
    if result.parameters != info["parameters"]:
        raise RuntimeError(
            f"pair {pair!r} built {result.parameters} parameters, the plan"
            f" counted {info['parameters']}"
        )
    start = time.perf_counter()
    lengths = evaluate_lengths(
        model, dataset.val, plan["eval_lengths"], plan["eval_tokens"]
    )
    memory = train_step_peak_memory(model, dataset, plan)
    return {
        "pair": pair,
        "lr": lr,
        "seed": seed,
        **info,
        "best_val_loss": result.best_val_loss,
        "final_val_loss": result.final_val_loss,
        # the last evaluation was the best: training had not levelled off
        "still_improving": result.val_loss[-1] <= min(result.val_loss),
        "tokens_per_s": result.tokens_per_s,  # of the training steps alone
        "train_time_s": result.train_time_s,
        "wall_time_s": result.wall_time_s + time.perf_counter() - start,
        "peak_memory_bytes": memory,
        "eval_lengths": lengths,
        "result": result.to_dict(),
    }


def planned_runs(profile: str) -> list[PlannedRun]:
    """Every run of ``profile`` (``mixers.experiments.plan``): each reads
    its evaluation tokens at every length after training."""
    dataset = CharDataset.shakespeare()
    vocab_size = dataset.tokenizer.vocab_size
    plan = experiment_plan(profile, vocab_size, val_tokens=len(dataset.val))
    base = get_profile(profile).model
    return [
        planned_run(
            {**base, **_model_overrides(plan, pair)},
            {**plan["train"], "lr": lr, "seed": seed},
            vocab_size,
            len(plan["eval_lengths"]) * plan["eval_tokens"],
        )
        for pair, lr, seed in jobs(plan)
    ]


# -----------------------------------------------------------------------------
# The summary.


def _spread(values: list[float]) -> dict:
    """Mean, sample standard deviation (0 for one value), min, max and
    count."""
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def _summarize_pair(mine: list[dict], plan: dict) -> dict:
    """One pair's runs: every learning rate's mean loss, and its results at the
    best of them."""
    lrs = pair_lrs(plan, mine[0]["pair"])
    by_lr = {repr(lr): _at_lr(mine, lr) for lr in lrs}
    # A learning rate counts only if every seed run at it finished: one
    # divergence disqualifies it.
    eligible = [
        row
        for row in by_lr.values()
        if row["best_val_loss"] and not row["diverged"]
    ]
    out = {"by_lr": by_lr, "best_lr": None}
    if not eligible:
        return out
    best = min(eligible, key=lambda row: row["best_val_loss"]["mean"])
    at_best = [run for run in mine if run["lr"] == best["lr"]]
    return {
        **out,
        "best_lr": best["lr"],
        # (one rate has no edge: it was not swept)
        "best_lr_at_edge": len(lrs) > 1 and best["lr"] in (min(lrs), max(lrs)),
        "seeds": [run["seed"] for run in at_best],
        "best_val_loss": best["best_val_loss"],
        # the final model on the whole evaluation text, seed by seed, for
        # paired comparisons (None where it could not be scored)
        "loss_by_seed": {
            str(run["seed"]): run["eval_lengths"][0]["loss"] for run in at_best
        },
        "still_improving": sum(run["still_improving"] for run in at_best),
        # None where the model cannot read that length
        "loss_at_factor": _loss_at_factors(at_best, plan),
        **_speed_and_memory([run for run in mine if not run["diverged"]]),
    }


def _at_lr(mine: list[dict], lr: float) -> dict:
    """A pair's runs at one learning rate: how many, how many diverged, and
    the spread of the best validation loss of those that finished."""
    at_lr = [run for run in mine if run["lr"] == lr]
    finished = [run["best_val_loss"] for run in at_lr if not run["diverged"]]
    return {
        "lr": lr,
        "runs": len(at_lr),
        "diverged": sum(run["diverged"] for run in at_lr),
        "best_val_loss": _spread(finished) if finished else None,
    }


def _loss_at_factors(at_best: list[dict], plan: dict) -> dict:
    """Per evaluation length (a multiple of the training length): the spread
    of the loss over the seeds, or None where a model could not read it."""
    loss_at = {}
    for i, factor in enumerate(plan["eval_factors"]):
        losses = [run["eval_lengths"][i]["loss"] for run in at_best]
        loss_at[str(factor)] = (
            _spread(losses)
            if all(loss is not None for loss in losses)
            else None
        )
    return loss_at


def _speed_and_memory(finished: list[dict]) -> dict:
    """Throughput and memory over every finished run of a pair. The work of a
    step does not depend on the learning rate or the seed: every run
    measures the same thing, and the median resists a busy moment of the
    machine."""
    memory = [
        run["peak_memory_bytes"]
        for run in finished
        if run["peak_memory_bytes"] is not None
    ]
    return {
        "tokens_per_s_median": statistics.median(
            run["tokens_per_s"] for run in finished
        ),
        "tokens_per_s": _spread([run["tokens_per_s"] for run in finished]),
        # a measured value, in bytes
        "peak_memory_bytes": (
            statistics.median_low(memory) if memory else None
        ),
    }


def summarize(runs: list[dict], plan: dict) -> dict:
    """Per pair (``_summarize_pair``), and the pairs ranked by mean best
    validation loss."""
    per_pair = {
        pair: {
            **{
                k: plan["pairs"][pair][k]
                for k in (
                    "token_mixer",
                    "channel_mixer",
                    "positions",
                    "d_ff",
                    "hidden_size",
                    "parameters",
                    "parameter_deviation",
                )
            },
            **_summarize_pair(
                [run for run in runs if run["pair"] == pair], plan
            ),
        }
        for pair in plan["pairs"]
    }
    ranked = sorted(
        (pair for pair, row in per_pair.items() if row.get("best_val_loss")),
        key=lambda pair: per_pair[pair]["best_val_loss"]["mean"],
    )
    return {"pairs": per_pair, "ranking_by_best_val_loss": ranked}


# -----------------------------------------------------------------------------
# The experiment.


@cpu_threads()
def run(
    profile: str, progress: bool = True, pairs=None, lrs=None, seeds=None
) -> dict:
    """Train every (pair, learning rate, seed) of ``profile``; return the runs,
    a summary and provenance.

    ``pairs``, ``lrs`` and ``seeds`` override the profile's (``PAIRS`` and its
    sweep and seeds). Inside ``mixers.experiments.save_runs`` (the command
    line) each finished run is saved at once and the runs saved there before
    with the same settings are not run again (``run_jobs``).
    """
    start = time.perf_counter()
    dataset = CharDataset.shakespeare()
    plan = experiment_plan(
        profile,
        dataset.tokenizer.vocab_size,
        pairs,
        lrs,
        seeds,
        val_tokens=len(dataset.val),
    )
    # The rates added for single pairs are jobs, not settings: a sweep that
    # grows resumes from the runs it has.
    shared = {key: value for key, value in plan.items() if key != "extra_lrs"}
    experiment = Experiment(
        NAME, profile, shared, ("pair", "lr", "seed"), jobs(plan)
    )
    runs, resumed = experiment.train(
        run_one, dataset, plan["workers"], progress
    )
    return {
        "experiment": NAME,
        "model": _model_description(plan),
        **POLICIES,
        "settings": plan,
        "runs": runs,
        "summary": summarize(runs, plan),
        "provenance": _provenance(runs, plan, profile, resumed, start),
    }


#: How the runs are made comparable, as the results state it.
POLICIES = {
    "seed_policy": (
        "TrainConfig.seed drives the initial weights, the order of the"
        " training batches and the validation windows: the same for every"
        " pair and learning rate at a given seed"
    ),
    "lr_policy": (
        "every pair trains at every learning rate of the sweep with the"
        " same warm-up and cosine schedule; its summary is at the learning"
        " rate with the lowest mean best validation loss over the seeds,"
        " among those where no seed diverged"
    ),
    "memory_policy": (
        "peak_memory_bytes: tensor memory allocated by one forward and"
        " backward pass at the training batch shape, above the weights and"
        " optimizer state (mixers.bench.peak_memory: torch.profiler's"
        " allocation events on a CPU, max_memory_allocated on a GPU)"
    ),
}


def _model_description(plan: dict) -> str:
    """The results' one-line description of the models of ``plan``."""
    model = plan["model"]
    return (
        f"{model['n_layers']} layers, d_model {model['d_model']},"
        f" {model['n_heads']} heads, trained at length"
        f" {model['block_size']}; pairs {', '.join(plan['pairs'])}; hidden"
        f" sizes matched to {plan['target_parameters']:,} parameters"
        f" (±{PARAMETER_TOLERANCE:.0%})"
    )


def _provenance(
    runs: list[dict], plan: dict, profile: str, resumed: int, start: float
) -> dict:
    """This machine's provenance, the training precision and threads, and
    the times: this call's since ``start`` and, with a resume, the runs' own,
    which add up to the whole experiment's; and every commit that ran."""
    device = default_device()
    finished = [run for run in runs if not run["diverged"]]
    return {
        **provenance(profile, device, plan["seeds"]),
        "train_precision": precision_name(
            autocast_dtype(
                device, plan["train"]["amp"], plan["train"]["cpu_amp"]
            )
        ),
        "threads": torch.get_num_threads(),
        "resumed_runs": resumed,
        "wall_time_s": time.perf_counter() - start,
        "runs_wall_time_s": sum(run["wall_time_s"] for run in finished),
        "run_git_commits": sorted(
            {
                run["result"]["provenance"]["git_commit"] or "unknown"
                for run in finished
            }
        ),
    }


# -----------------------------------------------------------------------------
# What the chapter shows of a results file, whatever its profile
# (mixers.tables.profiles_table, mixers.plot.live_beside_committed).


def curves(results: dict) -> dict[str, dict]:
    """Each pair's loss curves at its best rate and first seed."""
    out = {}
    for pair, row in results["summary"]["pairs"].items():
        for run in results["runs"]:
            if (
                run["pair"] == pair
                and run["lr"] == row["best_lr"]
                and not run.get("diverged")
            ):
                out[pair] = run["result"]
                break
    return out


def headline(results: dict) -> dict[str, str]:
    """Seeds, and the pairs ranked by their mean best validation loss."""
    summary = results["summary"]
    ranked = summary["ranking_by_best_val_loss"]
    best = summary["pairs"][ranked[0]]["best_val_loss"]["mean"]
    return {
        "seeds": str(len(results["settings"]["seeds"])),
        "lowest": f"{ranked[0]} {best:.3f}",
        "order": ", ".join(ranked),
    }


if __name__ == "__main__":
    main(NAME, run, __doc__.splitlines()[0], DURATIONS)
