r"""Train short, test long, on a task that needs the long context: find a
key, say its value.

A language model's loss past its training length L can stay flat without the
model reading anything past L: most of what predicts the next character lies
close by. This experiment asks for something that lies far away.
``python -m mixers.experiments.retrieval --profile cpu`` trains the same small
transformer with four position schemes, those of the perplexity experiment
(``mixers.experiments.alibi_extrapolation``) that can read past L,

=====================  =============  =======================================
scheme                 token mixer    positions
=====================  =============  =======================================
``sinusoidal``         ``attention``  a fixed sin/cos table added to the
                                      embeddings
``sinusoidal_scaled``  ``attention``  the same table at the embeddings' size
                                      (``mixers.positions``)
``rotary``             ``rotary``     q and k rotated by their positions
                                      (RoPE)
``alibi``              ``alibi``      a penalty :math:`-m_h (i - j)` on the
                                      scores
=====================  =============  =======================================

on one synthetic task, at one length L. A sequence of T tokens is random
*symbols*, with one *key* planted among them; the symbol right after the key
is its *value*, and the same key comes again as the last token. The model
must answer with the value:

.. math::

    \underbrace{s\, s \cdots s}_{\text{symbols}}\; k\; v\;
    \underbrace{s \cdots s}_{\text{symbols}}\; k \;\longrightarrow\; v.

The key sits :math:`d` tokens before the query, the last token: with the
query at position :math:`T - 1`, the key is at :math:`p = T - 1 - d` and the
value at :math:`p + 1`, so :math:`2 \le d \le T - 1`. Keys appear nowhere
else, so the match is unique; values are drawn from the symbols, so no token
type gives the answer away: the model must find the key and read the token
after it (an *induction head*, two layers at least). Training sequences have
length L and distances :math:`2 \le d \le L - 1`, every distance that fits,
drawn afresh every step; the loss is the cross-entropy of the value at the
query alone.

Each trained model is then scored on fixed test sets, the same for every
scheme and seed, at lengths L, 2L and 4L, with the key placed

* **near**, :math:`2 \le d \le L - 1`: distances seen in training, in a longer
  input (does the model read a long input without breaking?);
* **far**, :math:`L \le d \le T - 1`: distances no training sequence had (does
  it retrieve across them?);

by the accuracy of its most likely token at the query and the loss of the
value there (nats; chance is :math:`\ln S` for :math:`S` symbols). Every
scheme trains from each seed of the profile, which drives the initial weights
and the training sequences; the results compare the schemes seed by seed
(``mixers.stats.paired_test``).

It writes ``retrieval-PROFILE.json`` (to ``runs/``; ``--out book/results`` for
the chapter's): per run its loss curves, its best validation loss (the answer
loss on a fixed validation set at L, whose weights ``train_on_task`` keeps and
the tests score), and its accuracy and loss in every test set, also by
distance; a summary over seeds per scheme; the paired tests; and the
provenance. Each (scheme, seed) is one job of ``mixers.experiments.run_jobs``:
the command line saves it as it finishes, a rerun resumes, and a run that
diverges is recorded as such while the others carry on.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, replace
from functools import partial

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .._checks import check_int_in, check_positive_int
from ..model import LanguageModel, ModelConfig
from ..stats import paired_test
from ..train import (
    TrainConfig,
    TrainingDiverged,
    TrainResult,
    _BestWeights,
    _Clock,
    _finish,
    _LossTracker,
    _prepare,
    _set_lr,
    _train_step,
    default_device,
    get_profile,
)
from . import Experiment, cpu_threads, main, profile_settings
from .alibi_extrapolation import SCHEMES as EXTRAPOLATION_SCHEMES
from .plan import PlannedRun, durations, planned_run, train_config

NAME = "retrieval"
DURATIONS = durations(
    "about 15 minutes on two idle cores with --workers 2", runs=20, steps=1000
)

# scheme -> (token mixer, positions on the embeddings): the perplexity
# experiment's but learned positions, which stop at L, so that the chapter
# reads the two side by side.
SCHEMES: dict[str, tuple[str, str]] = {
    name: EXTRAPOLATION_SCHEMES[name]
    for name in ("sinusoidal", "sinusoidal_scaled", "rotary", "alibi")
}


# -----------------------------------------------------------------------------
# The task


@dataclass(frozen=True)
class Task:
    """The vocabulary: ``symbols`` filler tokens, ids ``0 .. symbols - 1``,
    any of which can be a value, and ``keys`` key tokens, ids ``symbols ..
    symbols + keys - 1``, which appear only where they are planted."""

    symbols: int
    keys: int

    def __post_init__(self) -> None:
        check_positive_int("symbols", self.symbols)
        check_positive_int("keys", self.keys)

    @property
    def vocab_size(self) -> int:
        return self.symbols + self.keys


def check_distances(distances, length: int) -> tuple[int, int]:
    """``(low, high)``, the range of distances a batch draws from: ints with
    :math:`2 \\le \\text{low} \\le \\text{high} \\le \\text{length} - 1`, so
    that the key, its value and the query fit, in that order."""
    check_positive_int("length", length)
    if length < 3:
        raise ValueError(
            f"length must be at least 3 (key, value, query), got {length}"
        )
    if not isinstance(distances, (tuple, list)) or len(distances) != 2:
        raise TypeError(
            f"distances must be a pair (low, high), got {distances!r}"
        )
    low = check_int_in("distances[0]", distances[0], 2, length - 1)
    high = check_int_in("distances[1]", distances[1], low, length - 1)
    return low, high


def sample_batch(
    task: Task,
    batch_size: int,
    length: int,
    distances: tuple[int, int],
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``batch_size`` sequences of ``length`` tokens, each with one key at a
    distance drawn uniformly from ``distances`` (``check_distances``) and
    the same key at the end.

    Returns ``(tokens int64[batch, length], value int64[batch], distance
    int64[batch])``: the value is the token after the planted key, the answer
    expected at the last position. Everything is drawn from ``generator``,
    so a seed gives the same batch.
    """
    check_positive_int("batch_size", batch_size)
    low, high = check_distances(distances, length)
    tokens = torch.randint(
        task.symbols, (batch_size, length), generator=generator
    )
    distance = torch.randint(low, high + 1, (batch_size,), generator=generator)
    key = task.symbols + torch.randint(
        task.keys, (batch_size,), generator=generator
    )
    rows = torch.arange(batch_size)
    # the key d tokens before the query at T - 1; its value is the symbol
    # after it, already drawn
    planted = length - 1 - distance
    tokens[rows, planted] = key
    tokens[:, -1] = key
    return tokens, tokens[rows, planted + 1], distance


def answer_loss(
    model: LanguageModel, tokens: torch.Tensor, value: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Per sequence, the loss of the value at the query and whether it is
    the most likely token there: ``(loss float[batch], correct bool[batch])``.

    Only the last position is scored, :math:`\ell = -\log
    \operatorname{softmax}(z_{T-1})_v`; every other position predicts a
    random symbol, which no model can learn.
    """
    logits, _ = model(tokens)
    last = logits[:, -1].float()  # [batch, vocab]
    loss = F.cross_entropy(last, value, reduction="none")
    return loss, last.argmax(-1) == value


def _mean_answer_loss(model, tokens, value):
    """The training step's ``(logits, loss)``: the mean answer loss."""
    return None, answer_loss(model, tokens, value)[0].mean()


# -----------------------------------------------------------------------------
# Training: ``mixers.train``'s step (AdamW, warm-up and cosine, clipping,
# autocast) and its bookkeeping (the best weights, the loss curves, the
# timings), on fresh batches of the task.

#: The seed of the validation set (at L) and of the test sets: the same
#: sequences for every scheme and every seed.
VALIDATION_SEED = 1_000_003
TEST_SEED = 2_000_003


@torch.no_grad()
def score(
    model: LanguageModel,
    tokens: torch.Tensor,
    value: torch.Tensor,
    batch_size: int = 256,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``answer_loss`` over a whole set, ``batch_size`` sequences at a time,
    in evaluation mode, on the model's device: ``(loss, correct)``, on the
    CPU."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    losses, hits = [], []
    try:
        for first in range(0, len(tokens), batch_size):
            loss, correct = answer_loss(
                model,
                tokens[first : first + batch_size].to(device),
                value[first : first + batch_size].to(device),
            )
            losses.append(loss.cpu())
            hits.append(correct.cpu())
    finally:
        model.train(was_training)
    return torch.cat(losses), torch.cat(hits)


def train_on_task(
    model: LanguageModel,
    task: Task,
    config: TrainConfig,
    profile: str = "custom",
    progress: bool = False,
    description: str = NAME,
) -> TrainResult:
    """Train ``model`` on batches of ``task`` at length ``config.seq_len``
    (every distance from 2 to ``seq_len - 1``), the answer loss alone.

    Every ``eval_interval`` steps it scores a validation set of
    ``eval_batches × eval_batch_size`` sequences at ``seq_len`` (seeded by
    ``VALIDATION_SEED``); the model comes back with the weights of its best
    validation loss, as ``mixers.train.train`` returns them. Seeded by
    ``config.seed``: on a CPU the same seed gives the same run. A non-finite
    loss raises ``TrainingDiverged``.
    """
    device = default_device()
    stepper, result = _prepare(model, config, device, profile)
    # the step's loss is the answer's, not every position's
    step_fn = partial(_mean_answer_loss, model)
    stepper = stepper._replace(
        step_fn=torch.compile(step_fn) if config.compile else step_fn
    )
    distances = (2, config.seq_len - 1)
    batches = torch.Generator().manual_seed(config.seed)
    validation = sample_batch(
        task,
        config.eval_batches * (config.eval_batch_size or config.batch_size),
        config.seq_len,
        distances,
        torch.Generator().manual_seed(VALIDATION_SEED),
    )[:2]
    losses, clock, best = (
        _LossTracker(device),
        _Clock(device),
        _BestWeights(model),
    )
    for step in tqdm(
        range(config.steps), desc=description, disable=not progress
    ):
        _set_lr(stepper.optimizer, step, config)
        tokens, value, _ = sample_batch(
            task, config.batch_size, config.seq_len, distances, batches
        )
        tokens, value = tokens.to(device), value.to(device)
        losses.add(_train_step(stepper, model, tokens, value, config), step)
        if (step + 1) % config.eval_interval and step + 1 < config.steps:
            continue
        result.train_time_s += clock.lap()
        losses.check(config)
        val = score(model, *validation)[0].mean().item()
        if not math.isfinite(val):
            raise TrainingDiverged(
                f"the validation loss is {val} at step {step + 1} of"
                f" {config.steps}: the run diverged"
            )
        result.steps.append(step + 1)
        result.train_loss.append(losses.running())
        result.val_loss.append(val)
        best.offer(val, step + 1)
        result.eval_time_s += clock.lap()
    result.best_step = best.restore()
    return _finish(result, model, config, clock)


# -----------------------------------------------------------------------------
# The test sets: at each length, the key near (distances seen in training) and,
# past L, far (distances never seen).


def placements(train_length: int, length: int) -> dict[str, tuple[int, int]]:
    """The distance ranges tested at ``length``: ``near``, 2 to L - 1, and,
    when ``length`` > L, ``far``, L to ``length - 1``."""
    out = {"near": (2, train_length - 1)}
    if length > train_length:
        out["far"] = (train_length, length - 1)
    return out


def by_distance(
    distance: torch.Tensor,
    loss: torch.Tensor,
    correct: torch.Tensor,
    width: int,
) -> list[dict]:
    """Accuracy and loss in bins of ``width`` distances (``from`` to ``to``,
    both included), for the figure of accuracy against distance."""
    bins = distance // width
    rows = []
    for index in sorted(set(bins.tolist())):
        chosen = bins == index
        rows.append(
            {
                "from": index * width,
                "to": index * width + width - 1,
                "examples": int(chosen.sum()),
                "accuracy": correct[chosen].double().mean().item(),
                "loss": loss[chosen].double().mean().item(),
            }
        )
    return rows


def evaluate_retrieval(
    model: LanguageModel, task: Task, settings: dict
) -> list[dict]:
    """Per test length and placement: the accuracy at the query, the mean
    loss of the value, and both by distance, on ``test_examples`` sequences
    drawn from ``TEST_SEED`` (the same sets for every model)."""
    train_length = settings["train_length"]
    generator = torch.Generator().manual_seed(TEST_SEED)
    rows = []
    for factor in settings["factors"]:
        length = factor * train_length
        for placement, distances in placements(train_length, length).items():
            tokens, value, distance = sample_batch(
                task, settings["test_examples"], length, distances, generator
            )
            # about 8,192 tokens a batch, whatever the length
            loss, correct = score(model, tokens, value, max(1, 8192 // length))
            rows.append(
                {
                    "length": length,
                    "factor": factor,
                    "placement": placement,
                    "distances": list(distances),
                    "examples": len(value),
                    "accuracy": correct.double().mean().item(),
                    "loss": loss.double().mean().item(),
                    "by_distance": by_distance(
                        distance, loss, correct, settings["bin_width"]
                    ),
                }
            )
    return rows


# -----------------------------------------------------------------------------
# The profiles. Every field of the model and the training is spelled out, so
# that a change of the shared profiles does not change this experiment. The
# model is the perplexity experiment's kind (GELU feed-forward, no dropout),
# small: the task needs two layers, not width. ``seq_len`` = ``block_size`` =
# L; validation: ``eval_batches × eval_batch_size`` sequences at L.

_MODEL = dict(dropout=0.0, d_ff=None, channel_mixer="gelu")
_TRAIN = dict(min_lr_ratio=0.1, weight_decay=0.1, betas=(0.9, 0.99),
              grad_clip=1.0, eval_batches=1, compile=False, amp=True,
              cpu_amp=False)  # fmt: skip
SETTINGS = {
    "smoke": dict(
        task=dict(symbols=16, keys=4),
        model=dict(_MODEL, d_model=32, n_layers=2, n_heads=4, block_size=16),
        train=dict(_TRAIN, steps=20, batch_size=8, seq_len=16, lr=3e-3,
                   warmup_steps=5, eval_interval=10, eval_batch_size=32),
        factors=(1, 2, 4), test_examples=32, bin_width=8, seeds=(0, 1),
        workers=1,
    ),
    "cpu": dict(
        task=dict(symbols=32, keys=8),
        model=dict(_MODEL, d_model=64, n_layers=2, n_heads=4, block_size=32),
        train=dict(_TRAIN, steps=1000, batch_size=64, seq_len=32, lr=3e-3,
                   warmup_steps=50, eval_interval=100, eval_batch_size=512),
        factors=(1, 2, 4), test_examples=512, bin_width=8,
        seeds=(0, 1, 2), workers=2,
    ),
    "gpu": dict(
        task=dict(symbols=32, keys=8),
        model=dict(_MODEL, d_model=128, n_layers=2, n_heads=4, block_size=64),
        train=dict(_TRAIN, steps=1000, batch_size=128, seq_len=64, lr=3e-3,
                   warmup_steps=50, eval_interval=100, eval_batch_size=1024),
        factors=(1, 2, 4), test_examples=1024, bin_width=16,
        seeds=(0, 1, 2, 3, 4), workers=1,
    ),
}  # fmt: skip


def shared_settings(profile: str) -> dict:
    """Everything the runs of ``profile`` share, as the results record it:
    the task, the model but its position scheme, the training but its seed,
    the test sets, the seeds and the schemes. Checked before any run."""
    settings = profile_settings(profile, SETTINGS)
    task = Task(**settings["task"])
    train = asdict(replace(get_profile(profile).train, **settings["train"]))
    del train["seed"]
    train_length = settings["model"]["block_size"]
    if train["seq_len"] != train_length:
        raise ValueError(
            "the training seq_len must equal block_size: L is both the"
            " training length and the model's block_size"
        )
    return {
        "task": {
            **asdict(task),
            "vocab_size": task.vocab_size,
            "train_distances": [2, train_length - 1],
        },
        "model": dict(settings["model"]),
        "train": train,
        "train_length": train_length,
        "factors": list(settings["factors"]),
        "test_lengths": [f * train_length for f in settings["factors"]],
        "test_examples": settings["test_examples"],
        "test_seed": TEST_SEED,
        "validation_seed": VALIDATION_SEED,
        "bin_width": settings["bin_width"],
        "seeds": list(settings["seeds"]),
        "schemes": {
            scheme: {"token_mixer": m, "positions": p}
            for scheme, (m, p) in SCHEMES.items()
        },
    }


def _model_config(settings: dict, scheme: str) -> ModelConfig:
    token_mixer, positions = SCHEMES[scheme]
    return ModelConfig(
        vocab_size=settings["task"]["vocab_size"],
        token_mixer=token_mixer,
        positions=positions,
        **settings["model"],
    )


def run_one(
    dataset,
    profile: str,
    settings: dict,
    scheme: str,
    seed: int,
    progress: bool = False,
) -> dict:
    """Train the model of ``scheme`` from ``seed`` under ``settings``
    (``shared_settings``) and score it on every test set; return its record.
    ``dataset`` is not read (the task makes its own sequences): it is there
    because every experiment's jobs are called with the corpus."""
    if scheme not in SCHEMES:
        raise ValueError(
            f"scheme must be one of {list(SCHEMES)}, got {scheme!r}"
        )
    task = Task(settings["task"]["symbols"], settings["task"]["keys"])
    config = train_config({**settings["train"], "seed": seed})
    # the same seed gives the same initial weights
    torch.manual_seed(seed)
    model = LanguageModel(_model_config(settings, scheme))
    result = train_on_task(
        model,
        task,
        config,
        profile,
        progress,
        description=f"{NAME} {scheme} seed {seed}",
    )
    start = time.perf_counter()
    rows = evaluate_retrieval(model, task, settings)
    token_mixer, positions = SCHEMES[scheme]
    return {
        "scheme": scheme,
        "seed": seed,
        "token_mixer": token_mixer,
        "positions": positions,
        "parameters": result.parameters,
        "best_val_loss": result.best_val_loss,
        "result": result.to_dict(),
        "eval": rows,
        "eval_time_s": time.perf_counter() - start,
    }


# -----------------------------------------------------------------------------
# Over the seeds: each scheme's mean and spread, and the paired tests.

#: The comparisons between schemes, each as first - second.
PAIRS = (
    ("alibi", "rotary"),
    ("alibi", "sinusoidal_scaled"),
    ("rotary", "sinusoidal_scaled"),
    ("sinusoidal_scaled", "sinusoidal"),
)


def _mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return statistics.fmean(values), spread


def _by_seed(runs: list[dict]) -> dict[tuple, dict[int, dict]]:
    """Each test row of the finished runs, under (scheme, length, placement)
    and then its seed."""
    table: dict[tuple, dict[int, dict]] = {}
    for run in runs:
        for row in run["eval"]:
            key = (run["scheme"], row["length"], row["placement"])
            table.setdefault(key, {})[run["seed"]] = row
    return table


def summarize_schemes(runs: list[dict]) -> dict[str, list[dict]]:
    """Per scheme, per test set: the mean and standard deviation over the
    seeds of the accuracy and the loss, and the accuracy seed by seed."""
    out: dict[str, list[dict]] = {}
    for (scheme, length, placement), rows in _by_seed(runs).items():
        seeds = sorted(rows)
        entry = {"length": length, "placement": placement, "seeds": seeds}
        for metric in ("accuracy", "loss"):
            mean, std = _mean_std([rows[s][metric] for s in seeds])
            entry[f"{metric}_mean"], entry[f"{metric}_std"] = mean, std
        entry["accuracy_by_seed"] = [rows[s]["accuracy"] for s in seeds]
        out.setdefault(scheme, []).append(entry)
    return out


def _paired(first: dict, second: dict, metric: str, **labels) -> dict | None:
    """``paired_test`` of ``metric`` over the seeds that both ``first`` and
    ``second`` (seed -> test row) hold, with ``labels``; None below two."""
    seeds = sorted(set(first) & set(second))
    if len(seeds) < 2:
        return None
    return {
        **labels,
        "metric": metric,
        "seeds": seeds,
        **paired_test(
            [first[s][metric] for s in seeds],
            [second[s][metric] for s in seeds],
        ),
    }


def paired_tests(runs: list[dict]) -> list[dict]:
    """Seed by seed, in every test set: each pair of ``PAIRS``, first minus
    second, on accuracy and on loss; and for each scheme at each length past
    L, its accuracy near minus far (the same models on other distances)."""
    table, tests = _by_seed(runs), []
    sets = sorted({(length, place) for _, length, place in table})
    for length, placement in sets:
        for first, second in PAIRS:
            a = table.get((first, length, placement), {})
            b = table.get((second, length, placement), {})
            for metric in ("accuracy", "loss"):
                labels = dict(
                    comparison=f"{first} - {second}",
                    length=length,
                    placement=placement,
                )
                tests.append(_paired(a, b, metric, **labels))
    for scheme in SCHEMES:
        for length, placement in sets:
            if placement != "far":
                continue
            near = table.get((scheme, length, "near"), {})
            far = table.get((scheme, length, "far"), {})
            labels = dict(
                comparison=f"{scheme}: near - far",
                length=length,
                placement="near - far",
            )
            tests.append(_paired(near, far, "accuracy", **labels))
    return [test for test in tests if test is not None]


def planned_runs(profile: str) -> list[PlannedRun]:
    """Every run of ``profile`` (``mixers.experiments.plan``): training, and
    reading every test set once."""
    settings = shared_settings(profile)
    length = settings["train_length"]
    forward = sum(
        settings["test_examples"] * factor * length
        for factor in settings["factors"]
        for _ in placements(length, factor * length)
    )
    return [
        planned_run(
            asdict(_model_config(settings, scheme)),
            {**settings["train"], "seed": seed},
            settings["task"]["vocab_size"],
            forward,
        )
        for seed in settings["seeds"]
        for scheme in SCHEMES
    ]


@cpu_threads()
def run(
    profile: str, progress: bool = True, workers: int | None = None
) -> dict:
    """Train every scheme from every seed of ``profile``, ``workers`` runs at
    a time (on a CPU; the profile's count by default), and score each on the
    test sets; return the runs, the summary, the paired tests and the
    provenance."""
    start = time.perf_counter()
    settings = shared_settings(profile)
    on_cpu = default_device().type == "cpu"
    if workers is None or not on_cpu:
        workers = SETTINGS[profile]["workers"] if on_cpu else 1
    experiment = Experiment(
        NAME,
        profile,
        settings,
        ("scheme", "seed"),
        [(scheme, seed) for seed in settings["seeds"] for scheme in SCHEMES],
    )
    runs, resumed = experiment.train(run_one, None, workers, progress)
    finished = [run for run in runs if not run["diverged"]]
    model = settings["model"]
    return {
        "experiment": NAME,
        "model": (
            f"causal transformer, d_model {model['d_model']},"
            f" {model['n_layers']} layers, {model['n_heads']} heads, gelu"
            f" feed-forward; trained at L = {settings['train_length']};"
            f" schemes: {', '.join(SCHEMES)}"
        ),
        "seed_policy": (
            "the seed drives the initial weights and the training sequences;"
            " the validation and test sets are the same for every run"
        ),
        "settings": {**settings, "workers": workers},
        "runs": runs,
        "summary": summarize_schemes(finished),
        "paired_tests": paired_tests(finished),
        "provenance": experiment.provenance(
            runs, resumed, start, seeds=settings["seeds"], workers=workers
        ),
    }


# -----------------------------------------------------------------------------
# What the chapter shows of a results file, whatever its profile
# (mixers.tables.profiles_table, mixers.plot.live_beside_committed).


def curves(results: dict) -> dict[str, dict]:
    """Each scheme's loss curves at the first seed."""
    seed = results["settings"]["seeds"][0]
    return {
        run["scheme"]: run["result"]
        for run in results["runs"]
        if run["seed"] == seed and not run.get("diverged")
    }


def headline(results: dict) -> dict[str, str]:
    """Each scheme's mean accuracy over the seeds at the longest length, the
    key near / far."""
    longest = results["settings"]["test_lengths"][-1]
    out = {"seeds": str(len(results["settings"]["seeds"]))}
    for scheme, entries in results["summary"].items():
        accuracy = {
            entry["placement"]: entry["accuracy_mean"]
            for entry in entries
            if entry["length"] == longest
        }
        out[scheme] = f"{accuracy['near']:.2f} / {accuracy['far']:.2f}"
    return out


if __name__ == "__main__":
    main(NAME, run, __doc__.splitlines()[0], DURATIONS)
