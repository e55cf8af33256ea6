"""Training, evaluation, sampling and provenance: one harness for every
chapter.

A run is fully described by a ``ModelConfig`` (what to build) and a
``TrainConfig`` (how to train it); a *profile* names a pair of defaults sized
for the hardware:

* ``smoke``: seconds on a laptop CPU; what CI and a CPU reader run live.
* ``cpu``: minutes per model on two CPU cores (the baseline: about 5);
  meaningful results.
* ``gpu``: the full mini-training on one GPU (``torch.compile``; bf16 autocast,
  or float16 with a gradient scaler on a GPU without bf16, such as Colab's T4:
  ``autocast_dtype``).

The default is ``gpu`` when the runs go to CUDA (``default_device``: CUDA
when available, unless ``MIXERS_DEVICE`` names another device) and ``smoke``
otherwise; the environment variable ``MIXERS_PROFILE`` forces one. Every run
records where and how it ran (``mixers.results.provenance``), so that every
number in the book can say so too.

A run returns its best model: ``train`` keeps the weights of the evaluation
with the lowest validation loss and puts them back at the end, as nanoGPT
keeps its best checkpoint, so that everything measured after training (a
whole-split loss, a sample) is measured on the model the run reports. A
diverging run stops with ``TrainingDiverged`` instead of saving NaN;
``train``'s ``callback`` sees the model after every optimizer step (what an
experiment records along the way).
"""

from __future__ import annotations

import math
import os
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, NamedTuple

import torch
from tqdm.auto import tqdm

from ._checks import (
    check_bool,
    check_device,
    check_flags,
    check_float_in,
    check_non_negative_float,
    check_non_negative_int,
    check_positive_float,
    check_positive_int,
)
from .data import CharDataset, random_batch, sequential_windows
from .model import LanguageModel, ModelConfig
from .results import (
    device_name,  # noqa: F401 (the chapters import it from here)
    provenance,
)


@dataclass
class TrainConfig:
    """How to train: steps, batch, learning-rate schedule, evaluation, seed and
    precision.

    Counts are positive ints (``warmup_steps`` an int in [0, steps],
    ``eval_batch_size`` None or a positive int, ``seed`` an int >= 0); ``lr`` a
    positive finite float; ``min_lr_ratio`` a float in [0, 1]; ``weight_decay``
    and ``grad_clip`` non-negative finite floats (``grad_clip=0`` turns
    clipping off); ``betas`` two floats in [0, 1); the switches bools.
    """

    steps: int = 200
    batch_size: int = 32
    seq_len: int = 128
    lr: float = 1e-3
    min_lr_ratio: float = 0.1  # the cosine decays to lr·min_lr_ratio
    warmup_steps: int = 20
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.99)
    grad_clip: float = 1.0
    eval_interval: int = 50
    eval_batches: int = 10
    eval_batch_size: int | None = None  # None = batch_size
    seed: int = 1337
    compile: bool = False
    # autocast on CUDA: bf16, or float16 where the GPU has no bf16
    # (autocast_dtype)
    amp: bool = True
    # bf16 autocast on the CPU too, where it has native bf16 (cpu_has_bf16)
    cpu_amp: bool = False

    def __post_init__(self) -> None:
        for name in (
            "steps",
            "batch_size",
            "seq_len",
            "eval_interval",
            "eval_batches",
        ):
            check_positive_int(name, getattr(self, name))
        if (
            check_non_negative_int("warmup_steps", self.warmup_steps)
            > self.steps
        ):
            raise ValueError(
                f"warmup_steps must lie in [0, steps={self.steps}], got"
                f" {self.warmup_steps}"
            )
        if self.eval_batch_size is not None:
            check_positive_int("eval_batch_size", self.eval_batch_size)
        check_non_negative_int("seed", self.seed)
        check_positive_float("lr", self.lr)
        check_float_in("min_lr_ratio", self.min_lr_ratio, 0.0, 1.0)
        check_non_negative_float("weight_decay", self.weight_decay)
        # NaN would turn every gradient into NaN
        check_non_negative_float("grad_clip", self.grad_clip)
        if (
            isinstance(self.betas, (str, bytes))
            or not hasattr(self.betas, "__len__")
            or len(self.betas) != 2
        ):
            raise ValueError(
                f"betas must be two floats in [0, 1), got {self.betas!r}"
            )
        for i, beta in enumerate(self.betas):
            check_float_in(f"betas[{i}]", beta, 0.0, 1.0, "[)")
        check_flags(compile=self.compile, amp=self.amp, cpu_amp=self.cpu_amp)


@dataclass(frozen=True)
class Profile:
    """A named pair of defaults sized for the hardware: model fields and a
    ``TrainConfig``."""

    name: str
    model: dict  # ModelConfig fields, without vocab_size
    train: TrainConfig

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"name must be a non-empty str, got {self.name!r}")
        if not isinstance(self.model, dict) or "vocab_size" in self.model:
            raise TypeError(
                "model must be a dict of ModelConfig fields without"
                f" vocab_size (the dataset's), got {self.model!r}"
            )
        if not isinstance(self.train, TrainConfig):
            raise TypeError(
                f"train must be a TrainConfig, got {type(self.train).__name__}"
            )


# A profile: its model's fields on a line, then its training's. (Laid out by
# hand: ruff would give each of the 23 training fields a line of its own.)
# fmt: off
PROFILES: dict[str, Profile] = {
    "smoke": Profile("smoke",
        dict(block_size=64, d_model=64, n_layers=2, n_heads=4, dropout=0.0),
        TrainConfig(steps=300, batch_size=32, seq_len=64, lr=5e-3,
                    warmup_steps=20, eval_interval=50, eval_batches=4)),
    # The largest model that trains in about 5 minutes on two CPU cores:
    # bf16 where the CPU has it (python -m mixers.bench.cpu_precision),
    # eagerly (torch.compile was no faster at this size).
    "cpu": Profile("cpu",
        dict(block_size=128, d_model=160, n_layers=4, n_heads=5, dropout=0.0),
        TrainConfig(steps=1350, batch_size=32, seq_len=128, lr=3e-3,
                    warmup_steps=65, eval_interval=270, eval_batches=20,
                    cpu_amp=True)),
    # nanoGPT's shakespeare_char model and rate. Its 5,000 steps overfit
    # here: on one H200 the validation loss bottomed at steps 1,750-2,000
    # (1.467, 1.475) and climbed to 1.65 by step 5,000, so the profile
    # stops at 2,500, its cosine decaying over them (book/results/
    # baseline-gpu*.json hold the two 5,000-step runs).
    "gpu": Profile("gpu",
        dict(block_size=256, d_model=384, n_layers=6, n_heads=6, dropout=0.2),
        TrainConfig(steps=2500, batch_size=64, seq_len=256, lr=1e-3,
                    warmup_steps=100, eval_interval=250, eval_batches=50,
                    compile=True)),
}
# fmt: on


def default_profile_name() -> str:
    """``MIXERS_PROFILE`` if set, else ``gpu`` when ``default_device`` is
    CUDA and ``smoke`` otherwise."""
    forced = os.environ.get("MIXERS_PROFILE")
    if forced:
        if forced not in PROFILES:
            raise ValueError(
                f"MIXERS_PROFILE must be one of {sorted(PROFILES)}, got"
                f" {forced!r}"
            )
        return forced
    return "gpu" if default_device().type == "cuda" else "smoke"


def get_profile(name: str | None = None) -> Profile:
    """The profile called ``name`` (``None``: the default for this machine)."""
    name = default_profile_name() if name is None else name
    if name not in PROFILES:
        raise ValueError(
            f"profile must be one of {sorted(PROFILES)}, got {name!r}"
        )
    return PROFILES[name]


# -----------------------------------------------------------------------------
# The FLOPs of a run
#
# A chapter's live run on a reader's GPU is sized from them
# (:func:`mixers.experiments.plan.live_fraction`): the steps that fit a few
# minutes of Colab's T4, about :math:`\text{steps} = t \cdot u \cdot
# \text{FLOP/s} \,/\, (F \cdot B \cdot T)` for :math:`F` FLOPs a token,
# :math:`B \times T` tokens a step and a share :math:`u` of the peak.

#: Colab's free T4: its float16 tensor cores' peak, in FLOP/s.
T4_FLOPS = 65e12
#: The share of that peak a run this small is assumed to reach (an
#: assumption: no GPU has run this book's code; small models reach less).
ASSUMED_UTILIZATION = 0.3


def training_flops_per_token(config: ModelConfig) -> float:
    r"""FLOPs of one training step per token (Kaplan et al. 2020's count, as
    PaLM's appendix writes it):

    .. math::

        F = 6 N + 12\, L\, d\, S,

    2 per parameter that multiplies (:math:`N`, every parameter but the
    embedding and position tables, which are looked up) forward and 4
    backward, plus the attention scores and their weighted sum over
    :math:`S` = ``block_size`` keys in each of :math:`L` layers of width
    :math:`d`."""
    with torch.device("meta"):  # sizes only
        model = LanguageModel(config)
    looked_up = model.token_embedding.weight.numel() + sum(
        p.numel() for p in model.positions.parameters()
    )
    multiplying = model.num_parameters() - looked_up
    return (
        6 * multiplying
        + 12 * config.n_layers * config.d_model * config.block_size
    )


def default_device() -> torch.device:
    """``MIXERS_DEVICE`` if set (``cpu``, ``cuda``, ``cuda:1``), else
    ``cuda`` when CUDA is available and ``cpu`` otherwise.

    The variable reaches every process a run starts (an experiment's
    workers, a command line): the tests set ``MIXERS_DEVICE=cpu`` so that
    they run, and give the same numbers, on a machine with a GPU too."""
    forced = os.environ.get("MIXERS_DEVICE")
    if forced:
        try:
            return torch.device(forced)
        except RuntimeError:
            raise ValueError(
                f"MIXERS_DEVICE must name a torch device, got {forced!r}"
            ) from None
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def lr_at(step: int, config: TrainConfig) -> float:
    r"""Linear warm-up to ``lr``, then cosine decay to ``lr·min_lr_ratio`` at
    the last step.

    With :math:`\eta` = ``lr``, :math:`W` = ``warmup_steps``, :math:`S` =
    ``steps`` and :math:`\rho` = ``min_lr_ratio``, step :math:`t` (from 0 to
    :math:`S - 1`) uses

    .. math::

        \eta_t &= \eta\, (t + 1) / W, \\
        \eta_t &= \eta \big(\rho + (1 - \rho)\, c_t\big), \\
        c_t &= \tfrac{1}{2}\big(1 + \cos \pi p_t\big), \\
        p_t &= \min\big(1,\, (t - W) / D\big), \\
        D &= \max(1,\, S - 1 - W),

    the first while :math:`t < W` (warm-up), the second from then on.

    Warm-up keeps the first updates small while Adam's second-moment
    estimates are still noisy; the cosine spends most steps at a high rate
    and ends at :math:`\rho\,\eta`.
    """
    # a float step reads the curve between steps
    check_non_negative_float("step", step)
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    span = max(1, config.steps - 1 - config.warmup_steps)
    progress = min(1.0, (step - config.warmup_steps) / span)
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
    return config.lr * (
        config.min_lr_ratio + (1.0 - config.min_lr_ratio) * cosine
    )


def make_optimizer(
    model: torch.nn.Module, config: TrainConfig
) -> torch.optim.AdamW:
    r"""AdamW with weight decay on matrices only (not on biases, norms or
    gains).

    For a parameter :math:`\theta` with gradient :math:`g_t`, at rate
    :math:`\eta_t` (``lr_at``), ``betas`` :math:`(\beta_1, \beta_2)` and
    decay :math:`\lambda` = ``weight_decay``:

    .. math::

        m_t &= \beta_1 m_{t-1} + (1 - \beta_1)\, g_t, \\
        v_t &= \beta_2 v_{t-1} + (1 - \beta_2)\, g_t^2, \\
        \hat m_t &= m_t / (1 - \beta_1^t), \\
        \hat v_t &= v_t / (1 - \beta_2^t), \\
        \theta_t &= (1 - \eta_t \lambda)\, \theta_{t-1} \\
            &\quad - \eta_t\, \hat m_t / (\sqrt{\hat v_t} + \epsilon).

    The decay is decoupled from the gradient (the "W"), and a bias or a
    LayerNorm gain pulled towards 0 would only hurt, so their
    :math:`\lambda` is 0.
    """
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [
        p for p in model.parameters() if p.requires_grad and p.dim() < 2
    ]
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    # On a GPU, fused AdamW: one kernel updates every parameter, where the
    # default launches several per parameter (issue 31)
    fused = bool(decay) and all(p.is_cuda for p in decay + no_decay)
    return torch.optim.AdamW(
        groups, lr=config.lr, betas=config.betas, fused=fused or None
    )


def cpu_has_bf16() -> bool:
    """Whether this CPU multiplies bf16 matrices natively (AVX512-BF16 or AMX),
    via oneDNN.

    There, bf16 autocast makes the projections two to three times faster;
    elsewhere bf16 is emulated and slower than float32, so CPU autocast is not
    worth turning on.
    """
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def autocast_dtype(
    device: torch.device, amp: bool = True, cpu_amp: bool = False
) -> torch.dtype | None:
    """The dtype a run on ``device`` computes its matrix products in, under
    autocast; None for float32 (no autocast). Chosen from what the device can
    do:

    - a GPU, with ``amp``: bfloat16 where it has it (Ampere and later), else
      float16 (Colab's T4 has no bfloat16). float16 keeps 5 exponent bits:
      gradients below about 6e-8 underflow to zero, so ``train`` scales the
      loss up (``torch.amp.GradScaler``) and the gradients back;
    - a CPU, with ``cpu_amp``, where it multiplies bf16 natively
      (``cpu_has_bf16``): bfloat16;
    - anything else: float32.
    """
    check_flags(amp=amp, cpu_amp=cpu_amp)
    if device.type == "cuda" and amp:
        return (
            torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        )
    if device.type == "cpu" and cpu_amp and cpu_has_bf16():
        return torch.bfloat16
    return None


def uses_bf16(
    device: torch.device, amp: bool = True, cpu_amp: bool = False
) -> bool:
    """Whether a run on ``device`` computes in bf16 autocast
    (``autocast_dtype``)."""
    return autocast_dtype(device, amp, cpu_amp) == torch.bfloat16


def precision_name(dtype: torch.dtype | None) -> str:
    """How a run's precision is recorded in its provenance."""
    names = {
        torch.bfloat16: "bf16 autocast",
        torch.float16: "float16 autocast, gradient scaler",
    }
    return names.get(dtype, "float32")


def _autocast(device: torch.device, amp: bool = True, cpu_amp: bool = False):
    dtype = autocast_dtype(device, amp, cpu_amp)
    return torch.autocast(
        device_type=device.type,
        dtype=dtype or torch.bfloat16,
        enabled=dtype is not None,
    )


@torch.no_grad()
def evaluate(
    model: LanguageModel,
    data: torch.Tensor,
    seq_len: int,
    batches: int,
    batch_size: int,
    seed: int = 0,
    device: torch.device | None = None,
    amp: bool = True,
    cpu_amp: bool = False,
) -> float:
    r"""Mean loss (nats/char) over ``batches`` random windows drawn with a
    fixed ``seed``: :math:`\frac{1}{K} \sum_{k=1}^{K} \mathcal{L}_k` for
    :math:`K` = ``batches``.

    The same seed gives the same windows, so every model in a comparison (and
    every evaluation of one model) is scored on the same text.
    ``amp``/``cpu_amp``: bf16 autocast as in ``uses_bf16`` (``train`` evaluates
    in the precision it trains in). ``batches`` is a positive int, ``seed`` an
    int >= 0.
    """
    check_positive_int("batches", batches)
    check_non_negative_int("seed", seed)
    check_flags(amp=amp, cpu_amp=cpu_amp)
    device = device or next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    was_training = model.training
    model.eval()
    total = 0.0
    for _ in range(batches):
        x, y = random_batch(data, batch_size, seq_len, generator, device)
        with _autocast(device, amp, cpu_amp):
            _, loss = model(x, y)
        total += loss.item()
    model.train(was_training)
    return total / batches


@torch.no_grad()
def evaluate_sequential(
    model: LanguageModel,
    data: torch.Tensor,
    seq_len: int,
    batch_size: int = 64,
    max_windows: int | None = None,
    amp: bool = True,
    cpu_amp: bool = False,
) -> float:
    r"""Mean loss (nats/char) over every non-overlapping window of ``data``:
    each token once, :math:`\sum_w n_w \mathcal{L}_w / \sum_w n_w` for
    windows of :math:`n_w` targets.

    ``amp``/``cpu_amp``: bf16 autocast as in ``uses_bf16``.
    """
    check_flags(amp=amp, cpu_amp=cpu_amp)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for x, y in sequential_windows(
        data, seq_len, batch_size, max_windows, device
    ):
        with _autocast(device, amp, cpu_amp):
            _, loss = model(x, y)
        total += loss.item() * y.numel()
        count += y.numel()
    model.train(was_training)
    return total / count


class TrainingDiverged(RuntimeError):
    """A training or validation loss became NaN or infinite: the run
    diverged."""


@dataclass(frozen=True)
class StepInfo:
    """What ``train``'s callback sees: the ``model`` after ``step`` optimizer
    steps (0: before the first), the training loss of the last step and the
    learning rate it used (None at step 0).
    """

    step: int
    model: LanguageModel
    loss: float | None = None
    lr: float | None = None


@dataclass
class TrainResult:
    """What a run produced: its loss curves, its best validation loss, its
    timings and its provenance.

    Timings, in seconds: ``train_time_s`` is the training steps alone (forward,
    backward, update), without the first when compiling, which is
    ``compile_time_s``; ``eval_time_s`` the evaluations during training;
    ``wall_time_s`` everything. ``tokens_per_s`` is the tokens of the timed
    steps over ``train_time_s``. Results saved before these fields existed
    timed everything in ``wall_time_s`` and ``tokens_per_s``.

    ``best_step`` is the evaluation step of ``best_val_loss``: the weights
    ``train`` leaves in the model. ``final_val_loss`` is the last evaluation's,
    which a run that overfits has left behind.
    """

    model_config: dict
    train_config: dict
    steps: list[int] = field(default_factory=list)  # evaluation steps
    train_loss: list[float] = field(default_factory=list)  # at those steps
    val_loss: list[float] = field(default_factory=list)
    best_val_loss: float | None = None  # set when train() returns
    # bits per character, :math:`\mathcal{L} / \ln 2` (nats to bits)
    best_val_bpc: float | None = None
    # the step whose weights train() returns (results saved before it
    # existed returned the last step's: in every committed cpu run that was
    # also the best)
    best_step: int | None = None
    final_val_loss: float | None = None
    parameters: int = 0
    wall_time_s: float = 0.0
    train_time_s: float = 0.0
    compile_time_s: float = 0.0
    eval_time_s: float = 0.0
    tokens_per_s: float = 0.0
    provenance: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def _diverged(
    what: str, loss: float, step: int, lr: float, config: TrainConfig
) -> TrainingDiverged:
    return TrainingDiverged(
        f"{what} loss is {loss} at step {step} of {config.steps} (learning"
        f" rate {lr:.3g}): the run diverged. Try a smaller lr than"
        f" TrainConfig.lr = {config.lr:g}, or more warmup_steps."
    )


def train(
    model: LanguageModel,
    dataset: CharDataset,
    config: TrainConfig,
    device: torch.device | str | None = None,
    profile: str = "custom",
    progress: bool = True,
    description: str = "train",
    callback: Callable[[StepInfo], None] | None = None,
) -> TrainResult:
    """Train ``model`` on ``dataset.train``; evaluate on ``dataset.val`` every
    ``eval_interval`` steps.

    Seeded: on the CPU, the same seed gives the same losses, bit for bit. The
    tqdm bar shows the running training loss and the last validation loss.
    ``callback(StepInfo)``, if given, runs before the first step (step 0) and
    after every optimizer step (steps 1 to ``config.steps``), outside the
    timings. The model comes back with the weights of its best evaluation
    (``TrainResult.best_step``), not its last. A NaN or infinite loss raises
    ``TrainingDiverged``, naming the first step whose loss was not finite. A
    model whose vocabulary is smaller than the dataset's is refused before
    the first step.

    Between evaluations the host never waits for the device: losses stay on it
    (``_LossTracker``) until each evaluation; a ``callback`` needs each step's
    loss, so it reads and checks it.
    """
    _check_arguments(
        model, dataset, config, progress, callback, profile, description
    )
    device = _training_device(device)
    stepper, result = _prepare(model, config, device, profile)  # seeds torch
    batches = torch.Generator().manual_seed(config.seed)
    losses, clock = _LossTracker(device), _Clock(device)
    best = _BestWeights(model)
    if callback is not None:
        with clock.paused():
            callback(StepInfo(0, model))
    bar = tqdm(
        range(config.steps),
        desc=description,
        disable=not progress,
        mininterval=1.0,
    )
    try:
        for step in bar:
            # a step: the rate of the schedule, a fresh batch, an update
            lr = _set_lr(stepper.optimizer, step, config)
            x, y = random_batch(
                dataset.train,
                config.batch_size,
                config.seq_len,
                batches,
                device,
            )
            losses.add(_train_step(stepper, model, x, y, config), step)
            # the first compiled step compiles: timed on its own
            if config.compile and step == 0:
                result.compile_time_s = clock.lap()
            if callback is not None:
                with clock.paused():
                    losses.check(config)
                    callback(StepInfo(step + 1, model, losses.last(), lr))
            last = step == config.steps - 1
            if (step + 1) % config.eval_interval == 0 or last:
                result.train_time_s += clock.lap()
                _evaluate_now(
                    model, dataset, config, result, losses, step, device
                )
                best.offer(result.val_loss[-1], step + 1)
                result.eval_time_s += clock.lap()
                loss, val = result.train_loss[-1], result.val_loss[-1]
                bar.set_postfix(loss=f"{loss:.3f}", val=f"{val:.3f}")
    finally:
        bar.close()
    result.best_step = best.restore()
    return _finish(result, model, config, clock)


def _training_device(device) -> torch.device:
    """The device asked for, else ``MIXERS_DEVICE``, else the default; each
    checked by the name it was given as."""
    if device is None and os.environ.get("MIXERS_DEVICE"):
        device = check_device("MIXERS_DEVICE", os.environ["MIXERS_DEVICE"])
    return check_device("device", device or default_device())


class _Stepper(NamedTuple):
    """What an optimizer step needs besides the model and its batch."""

    step_fn: Callable  # the model, or the model compiled
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    device: torch.device


def _prepare(
    model: LanguageModel,
    config: TrainConfig,
    device: torch.device,
    profile: str,
) -> tuple[_Stepper, "TrainResult"]:
    """The model on ``device`` in training mode, and what a run needs: a
    ``_Stepper`` (the function a step calls, the model compiled if asked;
    AdamW; a gradient scaler, enabled for float16 only) and an empty
    ``TrainResult`` that records where and in what precision it ran. Seeds
    torch first.
    """
    torch.manual_seed(config.seed)
    model.to(device)
    model.train()
    step_fn = torch.compile(model) if config.compile else model
    dtype = autocast_dtype(device, config.amp, config.cpu_amp)
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
    result = TrainResult(
        model.config.to_dict(),
        asdict(config),
        parameters=model.num_parameters(),
        provenance={
            **provenance(profile, device, [config.seed]),
            "train_precision": precision_name(dtype),
        },
    )
    optimizer = make_optimizer(model, config)
    return _Stepper(step_fn, optimizer, scaler, device), result


def _set_lr(
    optimizer: torch.optim.Optimizer, step: int, config: TrainConfig
) -> float:
    """The schedule's learning rate for ``step``, set on every parameter
    group."""
    lr = lr_at(step, config)
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr


def _train_step(
    stepper: _Stepper, model, x, y, config: TrainConfig
) -> torch.Tensor:
    r"""One optimizer step on the batch ``x``, ``y``; returns the loss, still
    on the device.

    In float16 the loss is scaled up by :math:`S` before the backward pass, so
    that small gradients survive, and the gradients down by :math:`S` before
    clipping; a step whose scaled gradients overflowed is skipped and
    :math:`S` halved. Clipping rescales the whole gradient when its norm
    exceeds :math:`c` = ``grad_clip``:

    .. math::

        g \leftarrow g \cdot \min\Big(1, \frac{c}{\lVert g \rVert_2}\Big).
    """
    optimizer, scaler = stepper.optimizer, stepper.scaler
    with _autocast(stepper.device, config.amp, config.cpu_amp):
        _, loss = stepper.step_fn(x, y)
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    if config.grad_clip > 0:
        scaler.unscale_(optimizer)  # clip the true gradients
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()


def _evaluate_now(
    model, dataset, config, result, losses, step, device
) -> None:
    """An evaluation: the first non-finite training loss so far raises, then
    the validation loss is measured and recorded with the running training
    loss."""
    losses.check(config)
    batch_size = (
        config.eval_batch_size
        if config.eval_batch_size is not None
        else config.batch_size
    )
    val = evaluate(
        model,
        dataset.val,
        config.seq_len,
        config.eval_batches,
        batch_size,
        seed=config.seed + 1,
        device=device,
        amp=config.amp,
        cpu_amp=config.cpu_amp,
    )
    if not math.isfinite(val):
        raise _diverged(
            "the validation", val, step + 1, lr_at(step, config), config
        )
    result.steps.append(step + 1)
    result.train_loss.append(losses.running())
    result.val_loss.append(val)


def _finish(
    result: TrainResult, model, config: TrainConfig, clock: "_Clock"
) -> TrainResult:
    r"""The run's totals: throughput :math:`s\,B\,T / t_{\text{train}}`
    tokens a second over the :math:`s` timed steps, and the best validation
    loss, also in bits per character, :math:`\mathcal{L} / \ln 2`."""
    result.wall_time_s = clock.total()
    timed_steps = config.steps - (1 if config.compile else 0)
    tokens = timed_steps * config.batch_size * config.seq_len
    result.tokens_per_s = (
        tokens / result.train_time_s
        if timed_steps and result.train_time_s > 0
        else 0.0
    )
    result.best_val_loss = min(result.val_loss)
    result.best_val_bpc = result.best_val_loss / math.log(2)
    result.final_val_loss = result.val_loss[-1]
    model.eval()
    return result


class _BestWeights:
    """The weights of the evaluation with the lowest validation loss so far,
    copied in memory (on the model's device: a copy of the parameters and
    buffers, no optimizer state) and put back by ``restore``.

    A later evaluation must be strictly better to replace them, so a plateau
    keeps the earliest of its equal losses.
    """

    def __init__(self, model: LanguageModel):
        self.model = model
        self.loss = math.inf
        self.step: int | None = None
        self.weights: dict[str, torch.Tensor] | None = None

    def offer(self, loss: float, step: int) -> None:
        if loss < self.loss:
            self.loss, self.step = loss, step
            self.weights = {
                name: tensor.detach().clone()
                for name, tensor in self.model.state_dict().items()
            }

    def restore(self) -> int | None:
        """Load the best weights into the model (in place: a compiled
        step function keeps working on them); returns their step."""
        if self.weights is not None:
            self.model.load_state_dict(self.weights)
        return self.step


class _LossTracker:
    r"""The training losses, kept on the device so that no step waits for it
    to finish.

    It holds the running loss, an exponential average :math:`r_t = 0.9\,
    r_{t-1} + 0.1\, \ell_t` (:math:`r_0 = \ell_0`; in float64 as a Python
    float would be: the same numbers, bit for bit), and the
    first step whose loss was not finite, with that loss; ``check`` and
    ``running`` read them back once, when asked.
    """

    def __init__(self, device: torch.device):
        self._running: torch.Tensor | None = None
        self._latest: torch.Tensor | None = None
        # -1: every loss finite so far
        self._bad_step = torch.tensor(-1, device=device)
        self._bad_loss = torch.tensor(0.0, device=device)

    def add(self, loss: torch.Tensor, step: int) -> None:
        self._latest = loss.double()
        self._running = (
            self._latest
            if self._running is None
            else 0.9 * self._running + 0.1 * self._latest
        )
        first_bad = (self._bad_step < 0) & ~torch.isfinite(loss)
        self._bad_step = torch.where(first_bad, step + 1, self._bad_step)
        self._bad_loss = torch.where(first_bad, loss.float(), self._bad_loss)

    def check(self, config: TrainConfig) -> None:
        """Raises ``TrainingDiverged`` if a loss so far was NaN or infinite."""
        bad_step = int(self._bad_step)
        if bad_step > 0:
            raise _diverged(
                "the training",
                float(self._bad_loss),
                bad_step,
                lr_at(bad_step - 1, config),
                config,
            )

    def last(self) -> float:
        return float(self._latest)

    def running(self) -> float:
        return float(self._running)


class _Clock:
    """Wall-clock laps that include the GPU work queued before them (it waits
    for it), and a ``paused`` block whose time no lap counts (a callback's)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.start = self._now()
        self.mark = self.start
        self.excluded = 0.0

    def _now(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def lap(self) -> float:
        """Seconds since the last lap (or the start), less any paused time in
        between."""
        now = self._now()
        seconds, self.mark, self.excluded = (
            now - self.mark - self.excluded,
            now,
            0.0,
        )
        return seconds

    @contextmanager
    def paused(self):
        before = self._now()
        try:
            yield
        finally:
            self.excluded += self._now() - before

    def total(self) -> float:
        return self._now() - self.start


def _check_arguments(
    model,
    dataset,
    config=None,
    progress=False,
    callback=None,
    profile="",
    description="",
) -> None:
    """Where a model meets a dataset: every id of the dataset must index the
    model's embedding table (checked once here; inside ``torch.compile`` the
    forward pass does not check its ids).
    """
    if not isinstance(model, LanguageModel):
        raise TypeError(
            f"model must be a LanguageModel, got {type(model).__name__}"
        )
    if not isinstance(dataset, CharDataset):
        raise TypeError(
            f"dataset must be a CharDataset, got {type(dataset).__name__}"
        )
    if dataset.tokenizer.vocab_size != model.config.vocab_size:
        # smaller: its ids would index past the embedding table; larger: the
        # model could sample an id the tokenizer cannot decode
        raise ValueError(
            f"the dataset has {dataset.tokenizer.vocab_size} characters but"
            f" the model's vocab_size={model.config.vocab_size}: build the"
            " model with vocab_size=dataset.tokenizer.vocab_size"
        )
    if config is not None:
        if not isinstance(config, TrainConfig):
            raise TypeError(
                f"config must be a TrainConfig, got {type(config).__name__}"
            )
        # checked again: a field set after construction was never checked
        config.__post_init__()
        # a window is seq_len inputs and their seq_len next characters
        for split in ("train", "val"):
            if len(getattr(dataset, split)) < config.seq_len + 1:
                raise ValueError(
                    f"dataset.{split} has {len(getattr(dataset, split))}"
                    f" tokens: fewer than seq_len + 1 = {config.seq_len + 1},"
                    " one window (lower TrainConfig.seq_len, or give the"
                    " split more text)"
                )
    check_bool("progress", progress)
    for name, text in (("profile", profile), ("description", description)):
        if not isinstance(text, str):
            raise TypeError(f"{name} must be a str, got {text!r}")
    if callback is not None and not callable(callback):
        raise TypeError(
            "callback must be None or a callable taking a StepInfo, got"
            f" {callback!r}"
        )


def build_model(
    vocab_size: int, profile: Profile, /, **overrides
) -> LanguageModel:
    """A ``LanguageModel`` with the profile's sizes, any field overridden by
    keyword."""
    if not isinstance(profile, Profile):
        raise TypeError(
            "profile must be a Profile (get_profile(name) gives one), got"
            f" {profile!r}"
        )
    if "vocab_size" in overrides:
        raise ValueError(
            "vocab_size is not a model override: it is the dataset's"
            " (dataset.tokenizer.vocab_size), given as the first argument"
        )
    return LanguageModel(
        ModelConfig(vocab_size=vocab_size, **{**profile.model, **overrides})
    )


def run_profile(
    dataset: CharDataset,
    profile: Profile | str | None = None,
    model_overrides: dict | None = None,
    train_overrides: dict | None = None,
    device: torch.device | str | None = None,
    progress: bool = True,
    description: str = "train",
    callback: Callable[[StepInfo], None] | None = None,
) -> tuple[LanguageModel, TrainResult]:
    """Build and train one model under a profile; the building block of every
    experiment.

    ``callback``: as in ``train``."""
    for name, overrides in (
        ("model_overrides", model_overrides),
        ("train_overrides", train_overrides),
    ):
        if overrides is not None and not isinstance(overrides, dict):
            raise TypeError(
                f"{name} must be None or a dict of fields, got {overrides!r}"
            )
    profile = profile if isinstance(profile, Profile) else get_profile(profile)
    config = replace(profile.train, **(train_overrides or {}))
    # the same seed gives the same initial weights
    torch.manual_seed(config.seed)
    model = build_model(
        dataset.tokenizer.vocab_size, profile, **(model_overrides or {})
    )
    result = train(
        model,
        dataset,
        config,
        device,
        profile.name,
        progress,
        description,
        callback,
    )
    return model, result


def sample(
    model: LanguageModel,
    dataset: CharDataset,
    prompt: str = "\n",
    max_new_tokens: int = 300,
    temperature: float = 0.8,
    top_k: int | None = 20,
    seed: int = 0,
) -> str:
    """Generate text after ``prompt`` (a non-empty str), seeded by ``seed`` (an
    int >= 0), so a CPU sample is reproducible; the other arguments are
    ``LanguageModel.generate``'s.
    """
    _check_arguments(model, dataset)
    if not isinstance(prompt, str) or not prompt:
        raise ValueError(
            "prompt must be a non-empty str (the model needs a first"
            f" character), got {prompt!r}"
        )
    check_non_negative_int("seed", seed)
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    idx = dataset.tokenizer.encode(prompt)[None].to(device)
    was_training = model.training
    model.eval()
    out = model.generate(
        idx,
        max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        generator=generator,
    )
    model.train(was_training)
    return dataset.tokenizer.decode(out[0])
