"""The GPU plan: what every chapter's ``gpu`` comparison costs, how long one
GPU takes to train them all at once, and a chapter's live run sized to a
reader's GPU.

GPUs come in short windows (a free Colab session, a rented quarter of an
hour), so the ``gpu`` settings of the seven experiments are sized to train
together, as concurrent processes on one GPU, in one short call
(``python -m mixers.experiments.all --profile gpu --workers 8``, whose
``--plan`` prints this prediction without training).

The prediction counts FLOPs and divides them by rates measured on one GPU.
A run of ``s`` steps of ``B`` sequences of ``T`` tokens costs

.. math::

    s B T \\cdot C_{\\text{train}} + E \\cdot C_{\\text{train}} / 3,

with :math:`C_{\\text{train}}` the training FLOPs per token
(``mixers.train.training_flops_per_token``, Kaplan et al.'s
:math:`6N + 12 L d S`) and :math:`E` the tokens it reads forward only
(the evaluations, the whole validation split, longer lengths, samples): a
forward pass is a third of a training step.

Measured on one NVIDIA H200 (torch 2.11, commit 89a2512; the files are in
the book's results and ``shared/gpu-runs/2026-11-26-h200``), the ``gpu``
baseline (6 layers, :math:`d = 384`, batches of 64 × 256, bf16) trained at

* 1.40 M tokens/s alone, compiled, after 14 s of compiling;
* 0.52 M tokens/s alone eagerly, and 1.28 M and 1.50 M tokens/s in all with
  four and eight eager processes sharing the GPU.

Compiled processes sharing the GPU were not measured: the plan assumes the
larger of the two measured rates, 1.50 M tokens/s for eight, which a
compiled process can only exceed. An H100 has the H200's arithmetic and
less memory bandwidth: the plan takes 0.8 of the H200's rates.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import asdict, dataclass, replace

from .._checks import check_positive_float, check_positive_int
from ..model import ModelConfig
from ..train import (
    ASSUMED_UTILIZATION,
    T4_FLOPS,
    Profile,
    TrainConfig,
    default_device,
    get_profile,
    training_flops_per_token,
)

#: The GPU the rates below were measured on, and where.
MEASURED_ON = "one NVIDIA H200, torch 2.11.0+cu130, commit 89a2512"
#: The gpu baseline compiled, alone on the GPU (tokens/s).
COMPILED_ALONE = 1.40e6
#: Processes training the gpu baseline eagerly at once -> their tokens/s in
#: all.
EAGER_TOGETHER = {1: 0.52e6, 4: 1.28e6, 8: 1.50e6}
#: Seconds to compile the gpu baseline (its first step).
COMPILE_S = 14.0
#: An H100's share of an H200's rates (less memory bandwidth).
H100_FACTOR = 0.8
#: Starting the workers: spawning, importing torch, reading the corpus
#: (assumed, not measured).
START_S = 20.0


@dataclass(frozen=True)
class PlannedRun:
    """One run of an experiment: what it builds, how it trains, and the
    tokens it reads forward only (beyond its evaluations during training)."""

    model: ModelConfig
    train: TrainConfig
    forward_tokens: int = 0

    @property
    def steps(self) -> int:
        return self.train.steps

    def flops(self) -> tuple[float, float]:
        """(training FLOPs, forward-only FLOPs) of the run."""
        per_token = training_flops_per_token(self.model)
        train = self.train
        trained = train.steps * train.batch_size * train.seq_len
        evaluations = len(
            {*range(train.eval_interval, train.steps + 1, train.eval_interval)}
            | {train.steps}
        )
        batch = train.eval_batch_size or train.batch_size
        read = evaluations * train.eval_batches * batch * train.seq_len
        return (
            trained * per_token,
            (read + self.forward_tokens) * per_token / 3,
        )


def planned_runs(name: str, profile: str = "gpu") -> list[PlannedRun]:
    """Every run experiment ``name`` makes under ``profile``, in order."""
    module = importlib.import_module(f"{__package__}.{name}")
    return module.planned_runs(profile)


def baseline_flops_per_token() -> float:
    """Training FLOPs per token of the model the rates were measured with."""
    gpu = get_profile("gpu")
    return training_flops_per_token(ModelConfig(vocab_size=65, **gpu.model))


def tokens_per_s_together(workers: int) -> float:
    """The measured rate, in gpu-baseline tokens/s, of ``workers`` processes
    sharing one H200: the eager measurements, linear between the counts
    measured and flat past eight, or one compiled process where that is
    faster."""
    check_positive_int("workers", workers)
    counts = sorted(EAGER_TOGETHER)
    if workers >= counts[-1]:
        eager = EAGER_TOGETHER[counts[-1]]
    else:
        upper = next(c for c in counts if c >= workers)
        lower = max(c for c in counts if c <= workers)
        if upper == lower:
            eager = EAGER_TOGETHER[upper]
        else:
            t = (workers - lower) / (upper - lower)
            eager = (1 - t) * EAGER_TOGETHER[lower] + t * EAGER_TOGETHER[upper]
    return max(eager, COMPILED_ALONE)


@dataclass(frozen=True)
class Prediction:
    """The plan of some experiments on ``gpus`` H100s, ``workers`` processes
    each."""

    runs: int
    steps: int
    tokens: int
    train_flops: float
    forward_flops: float
    workers: int
    gpus: int
    seconds: float


def predict(runs: list[PlannedRun], workers: int, gpus: int = 1) -> Prediction:
    """How long ``runs`` take on ``gpus`` H100s with ``workers`` processes
    each: starting, compiling (each worker compiles its runs one after
    another), and the FLOPs at the measured rate, or the longest run at its
    share of the GPU if that is longer."""
    check_positive_int("workers", workers)
    check_positive_int("gpus", gpus)
    flop_rate = (
        tokens_per_s_together(workers)
        * baseline_flops_per_token()
        * H100_FACTOR
        * gpus
    )
    costs = [sum(run.flops()) for run in runs]
    slots = workers * gpus
    compiled = sum(run.train.compile for run in runs)
    busy = max(
        sum(costs) / flop_rate,
        max(costs, default=0.0) / (flop_rate / slots),
    )
    train, forward = (sum(parts) for parts in zip(*(r.flops() for r in runs)))
    return Prediction(
        runs=len(runs),
        steps=sum(run.steps for run in runs),
        tokens=sum(
            r.train.steps * r.train.batch_size * r.train.seq_len for r in runs
        ),
        train_flops=train,
        forward_flops=forward,
        workers=workers,
        gpus=gpus,
        seconds=START_S + COMPILE_S * math.ceil(compiled / slots) + busy,
    )


# -----------------------------------------------------------------------------
# The plan's settings, which the experiments' ``gpu`` tables use.

#: How a cpu-swept learning rate carries over to the gpu plan: times the
#: ratio of the two profiles' own peak rates (1e-3, nanoGPT's for the gpu
#: model, over 3e-3, tuned for the cpu model), close to the ratio of their
#: widths, 160 / 384, by which muP would scale a rate.
LR_CARRY = get_profile("gpu").train.lr / get_profile("cpu").train.lr


def carried_lr(cpu_lr: float) -> float:
    """The gpu plan's rate for a rate chosen on the cpu profile
    (``LR_CARRY``), to three significant digits."""
    check_positive_float("cpu_lr", cpu_lr)
    return float(f"{cpu_lr * LR_CARRY:.3g}")


#: The training every experiment of the gpu plan shares but the baseline:
#: short runs of the gpu model, eager (eight processes at once were measured
#: eagerly; each would compile its own model for about 14 s), with the
#: evaluation cut to keep it under a tenth of the run.
PLAN_TRAIN = dict(batch_size=64, seq_len=256, warmup_steps=50,
                  eval_interval=100, eval_batches=20,
                  compile=False)  # fmt: skip


def durations(cpu: str, runs: int, steps: int) -> dict[str, str]:
    """How long an experiment takes per profile, for its ``--help``: seconds
    for ``smoke``; ``cpu`` as measured; for ``gpu``, ``runs`` runs of
    ``steps`` steps, a few minutes on one GPU, and the seven experiments go at
    once through ``mixers.experiments.all``, whose ``--plan`` says how
    long."""
    return {
        "smoke": "seconds",
        "cpu": cpu,
        "gpu": (
            f"a few minutes on one GPU ({runs} runs of {steps} steps); all"
            " seven at once: python -m mixers.experiments.all --profile gpu"
            " --plan"
        ),
    }


# -----------------------------------------------------------------------------
# A chapter's live run on a reader's GPU, sized for Colab's free T4: the
# experiment's gpu plan with its steps cut (``step_fraction``) so that its
# FLOPs take at most ``seconds`` at ``ASSUMED_UTILIZATION`` of a T4's peak.

#: A live run's budget on a T4, in seconds.
LIVE_SECONDS = 180.0


def live_fraction(
    runs: list[PlannedRun],
    seconds: float = LIVE_SECONDS,
    flops_per_s: float = T4_FLOPS * ASSUMED_UTILIZATION,
) -> tuple[float, float]:
    """The share of the steps of ``runs`` that fits ``seconds`` at
    ``flops_per_s`` (their forward-only reading is not cut), and the time it
    is predicted to take. At least one step a run: the fraction never
    reaches 0."""
    check_positive_float("seconds", seconds)
    check_positive_float("flops_per_s", flops_per_s)
    train, forward = (sum(parts) for parts in zip(*(r.flops() for r in runs)))
    smallest = max(1 / run.steps for run in runs)
    fraction = min(
        1.0, max(smallest, (seconds * flops_per_s - forward) / train)
    )
    return fraction, (fraction * train + forward) / flops_per_s


def live_run(
    module,
    progress: bool = False,
    gpu: bool | None = None,
    seconds: float = LIVE_SECONDS,
):
    """A chapter's live comparison: ``module.run("smoke")`` on a CPU; on a
    GPU (``gpu``; by default, where ``default_device`` sends the runs) its
    ``gpu`` plan with the steps that fit ``seconds`` of a T4
    (``live_fraction``), printing the prediction before it starts. Returns
    the run's results."""
    from . import step_fraction  # the package imports this module's users

    gpu = default_device().type == "cuda" if gpu is None else gpu
    if not gpu:
        return module.run("smoke", progress=progress)
    fraction, predicted = live_fraction(module.planned_runs("gpu"), seconds)
    print(
        f"{module.NAME}: the gpu plan at {fraction:.0%} of its steps,"
        f" predicted {predicted / 60:.1f} min on a T4 at"
        f" {ASSUMED_UTILIZATION:.0%} of its peak (a guess: no T4 has run it)",
        flush=True,
    )
    with step_fraction(float(fraction)):
        return module.run("gpu", progress=progress)


def live_profile(
    profile: Profile,
    vocab_size: int,
    gpu: bool | None = None,
    seconds: float = LIVE_SECONDS,
) -> Profile:
    """The baseline chapter's live run, which trains a profile directly:
    ``profile`` itself on a CPU; on a GPU its steps cut to ``seconds`` of a
    T4 as ``live_run`` cuts an experiment's, the prediction printed."""
    gpu = default_device().type == "cuda" if gpu is None else gpu
    if not gpu:
        return profile
    from . import scaled_train  # the package imports this module's users

    run = PlannedRun(ModelConfig(vocab_size=vocab_size, **profile.model),
                     profile.train)  # fmt: skip
    fraction, predicted = live_fraction([run], seconds)
    train = scaled_train(asdict(profile.train), fraction)
    print(
        f"{train['steps']:,} of the {profile.name} profile's"
        f" {profile.train.steps:,} steps, predicted {predicted / 60:.1f} min"
        f" on a T4 at {ASSUMED_UTILIZATION:.0%} of its peak (a guess: no T4"
        " has run it)",
        flush=True,
    )
    return replace(profile, train=TrainConfig(**train))


def describe(name: str, prediction: Prediction) -> str:
    """One line of ``--plan``."""
    return (
        f"{name}: {prediction.runs} run{'s' * (prediction.runs != 1)},"
        f" {prediction.steps:,} steps,"
        f" {prediction.tokens / 1e6:,.0f} M tokens,"
        f" {(prediction.train_flops + prediction.forward_flops) / 1e15:.1f}"
        " PFLOP"
    )


def train_config(fields: dict) -> TrainConfig:
    """A TrainConfig from the fields a results file or a settings dict
    holds (``betas`` a list there)."""
    return TrainConfig(
        **{**fields, "betas": tuple(fields.get("betas", (0.9, 0.99)))}
    )


def model_config(fields: dict, vocab_size: int) -> ModelConfig:
    """A ModelConfig from settings fields, with the corpus's vocabulary."""
    return ModelConfig(**{**fields, "vocab_size": vocab_size})


def planned_run(
    model: dict, train: dict, vocab_size: int, forward_tokens: int = 0
) -> PlannedRun:
    """The ``PlannedRun`` of an experiment's run from its settings: the
    ModelConfig fields ``model`` (on the corpus's vocabulary), the
    TrainConfig fields ``train``, and the tokens it reads forward only."""
    return PlannedRun(
        model_config(model, vocab_size), train_config(train), forward_tokens
    )


__all__ = [
    "COMPILE_S",
    "COMPILED_ALONE",
    "EAGER_TOGETHER",
    "H100_FACTOR",
    "LIVE_SECONDS",
    "MEASURED_ON",
    "PlannedRun",
    "Prediction",
    "describe",
    "durations",
    "live_fraction",
    "live_profile",
    "live_run",
    "model_config",
    "planned_run",
    "planned_runs",
    "predict",
    "train_config",
]
