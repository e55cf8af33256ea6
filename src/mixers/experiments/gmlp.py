"""gMLP, aMLP and the transformer at equal parameters, and what the Spatial
Gating Unit learns.

``python -m mixers.experiments.gmlp --profile cpu`` trains three
character-level language models of the same depth, width and (to within 0.1%)
parameter count on the same data, from the same seed, for the same steps:

* ``transformer``: causal multi-head attention + GELU feed-forward, learned
  positions;
* ``gmlp``: gMLP blocks (Spatial Gating Unit, no attention), no position
  embeddings;
* ``amlp``: gMLP blocks with a tiny single-head attention in the gate, no
  position embeddings.

Each arm trains at every peak learning rate of the profile's ``lrs`` (the same
warm-up and cosine decay) and is reported at the one with its lowest tracked
validation loss (``best_val_loss``, a few random batches): one rate does not
suit all three, and a fixed rate would favour the model it happens to suit.
The loss the chapter reports, ``full_val_loss``, scores the whole validation
split, other text than the rate was chosen on.

gMLP's block replaces both sub-layers of a transformer block, so the gMLP
models are paired with the channel mixer ``"none"``; their ``d_ffn`` is chosen
so that a block has as many parameters as a transformer block. As in the paper,
the gMLP models use no position embeddings: W is position-specific, so it
already knows where each token is.

It writes ``gmlp-PROFILE.json`` (to ``runs/``; ``--out book/results`` for
the chapter's): the sweep (``sweep``: per model, every rate's losses) and, per
model at its best rate (``runs``), the loss curves, best validation loss, loss
over the whole validation split, tokens per second, parameter count and a text
sample; and for the two gMLP models the causal spatial weights W of every layer
at a few training steps (its lower triangle, 4 significant digits;
``weight_from_rows`` rebuilds it), with how Toeplitz each one is
(``toeplitz_score``) and the mean of each of its diagonals. Each (model, rate)
is one job of ``mixers.experiments.run_jobs_in_processes`` (``--workers N``
runs N at once): the command line saves it as it finishes, and a rerun resumes
from the runs already trained.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, replace

import torch

from ..data import CharDataset
from ..gmlp import (
    SpatialGatingUnit,
    diagonal_means,
    gmlp_param_count,
    toeplitz_score,
)
from ..train import (
    StepInfo,
    TrainingDiverged,
    build_model,
    evaluate_sequential,
    get_profile,
    run_profile,
    sample,
)
from . import Experiment, cpu_threads, experiment_settings, main
from .plan import PLAN_TRAIN, PlannedRun, carried_lr, durations, planned_run

NAME = "gmlp"
DURATIONS = durations(
    "about 50 minutes on a two-core CPU with --workers 2", runs=3, steps=700
)


# The three arms: fields of ModelConfig over the profile's. The gMLP arms take
# d_ffn from ModelConfig.d_ff, filled in by `matched_d_ffn` to match the
# transformer's parameters; they bring their own positions (W) and channel
# mixing, so ModelConfig derives positions="none" and channel_mixer="none" for
# them.
ARMS = {
    "transformer": dict(
        token_mixer="attention", channel_mixer="gelu", positions="learned"
    ),
    "gmlp": dict(token_mixer="gmlp"),
    "amlp": dict(token_mixer="amlp"),
}
TINY_ATTENTION = {"gmlp": False, "amlp": True}

# Per profile: the model (ModelConfig fields over the profile's), the training
# (TrainConfig fields over the profile's), the steps at which every layer's W
# is saved (0 = initialisation; the last step is added), how many windows of
# the validation split the full-split loss reads (None = all), the length of
# each model's text sample and the peak learning rates of the sweep (a factor
# of two apart; the train settings' lr is replaced by each).
SETTINGS = {
    "smoke": dict(
        model=dict(d_model=64, n_layers=2, n_heads=4, block_size=32),
        train=dict(steps=60, batch_size=16, seq_len=32, lr=3e-3,
                   warmup_steps=10, eval_interval=20, eval_batches=4),
        snapshot_steps=(0, 20), full_val_windows=64, sample_tokens=100,
        lrs=(3e-3, 6e-3),
    ),
    "cpu": dict(
        model=dict(d_model=128, n_layers=4, n_heads=4, block_size=64),
        train=dict(steps=1200, batch_size=32, seq_len=64, lr=2e-3,
                   warmup_steps=100, eval_interval=100, eval_batches=10),
        snapshot_steps=(0, 100, 300, 600), full_val_windows=None,
        sample_tokens=300, lrs=(1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2),
    ),
    # The gpu plan (mixers.experiments.plan): no sweep, each arm at its
    # best cpu rate carried over; 700 steps a run.
    "gpu": dict(
        model=dict(d_model=384, n_layers=6, n_heads=6, block_size=256),
        train=dict(PLAN_TRAIN, steps=700),
        snapshot_steps=(0, 100, 300), full_val_windows=None,
        sample_tokens=300,
        lrs={
            "transformer": (carried_lr(4e-3),),
            "gmlp": (carried_lr(8e-3),),
            "amlp": (carried_lr(8e-3),),
        },
    ),
}  # fmt: skip


def matched_d_ffn(
    target: int,
    d_model: int,
    seq_len: int,
    tiny_attention: bool = False,
    d_attn: int = 64,
) -> int:
    """The even d_ffn whose gMLP block (norm included) has the parameter count
    closest to ``target``.

    A block's count grows linearly in d_ffn (``gmlp_param_count``): 1.5·d_model
    + 2 per unit of d_ffn, plus d_attn/2 + 1/2 with tiny attention; so the best
    d_ffn is found by rounding.
    """
    base = gmlp_param_count(d_model, 2, seq_len, tiny_attention, d_attn)
    slope = (
        gmlp_param_count(d_model, 4, seq_len, tiny_attention, d_attn) - base
    ) / 2
    estimate = 2 + (target - base) / slope
    candidates = {
        max(2, 2 * math.floor(estimate / 2)),
        max(2, 2 * math.ceil(estimate / 2)),
    }
    return min(
        sorted(candidates),
        key=lambda d: abs(
            gmlp_param_count(d_model, d, seq_len, tiny_attention, d_attn)
            - target
        ),
    )


def _lower_rows(matrix: torch.Tensor, digits: int = 4) -> list[list[float]]:
    """A causal W [n, n] as its lower-triangle rows (row i: W[i, 0..i]),
    ``digits`` significant digits.

    The upper triangle of a causal W is zero by construction; leaving it out
    halves the JSON.
    """
    return [
        [float(f"{v:.{digits}g}") for v in row[: i + 1]]
        for i, row in enumerate(matrix.tolist())
    ]


def weight_from_rows(rows: list[list[float]]) -> torch.Tensor:
    """The causal W [n, n] (zeros above the diagonal) from its saved
    lower-triangle rows."""
    n = len(rows)
    if any(len(row) != i + 1 for i, row in enumerate(rows)):
        raise ValueError(
            "rows must be the lower-triangle rows of a square matrix: row i"
            " has i + 1 values"
        )
    weight = torch.zeros(n, n)
    for i, row in enumerate(rows):
        weight[i, : i + 1] = torch.tensor(row)
    return weight


class SpatialWeightRecorder:
    """Saves every Spatial Gating Unit's effective W at given training steps:
    ``train``'s callback.

    Called with ``StepInfo(step, model, ...)`` before the first step (step 0,
    the initialisation) and after every optimizer step, it keeps, at each of
    ``steps``, the W of every ``SpatialGatingUnit`` in the model, in layer
    order: ``snapshots[step]`` is a list of ``[seq_len, seq_len]`` float32 CPU
    tensors, one per layer. It reads the weights between steps, outside the
    forward pass, so it works whether the model is compiled or not.
    """

    def __init__(self, steps):
        self.steps = set(steps)
        self.snapshots: dict[int, list[torch.Tensor]] = {}

    def __call__(self, info: StepInfo) -> None:
        if info.step in self.steps:
            self.keep(info.step, info.model)

    def keep(self, step: int, model: torch.nn.Module) -> None:
        """Save the W of every layer of ``model`` as ``snapshots[step]``."""
        units = [
            m for m in model.modules() if isinstance(m, SpatialGatingUnit)
        ]
        with torch.no_grad():
            self.snapshots[step] = [
                unit.spatial_weight().float().cpu().clone() for unit in units
            ]


def shared_settings(profile: str, vocab_size: int) -> dict:
    """Everything the three runs of ``profile`` share, as the results record
    it, with each arm's model (``arms``: ModelConfig fields over the profile's,
    with its matched ``d_ff``).
    """
    base, settings, model_settings = experiment_settings(profile, SETTINGS)
    d_model, block_size = (
        model_settings["d_model"],
        model_settings["block_size"],
    )
    # The transformer's block sets the parameter budget; each gMLP arm gets the
    # d_ffn that matches it.
    transformer = build_model(
        vocab_size, base, **settings["model"], **ARMS["transformer"]
    )
    block_budget = sum(p.numel() for p in transformer.blocks[0].parameters())
    arms = {"transformer": {**settings["model"], **ARMS["transformer"]}}
    for name, tiny in TINY_ATTENTION.items():
        arms[name] = {
            **settings["model"],
            **ARMS[name],
            "d_ff": matched_d_ffn(block_budget, d_model, block_size, tiny),
        }
    train = asdict(replace(base.train, **settings["train"]))
    del train["lr"]  # each run's own, from lrs
    return {
        "model": model_settings,
        "train": train,
        "snapshot_steps": sorted(
            set(settings["snapshot_steps"]) | {train["steps"]}
        ),
        "full_val_windows": settings["full_val_windows"],
        "threads": torch.get_num_threads(),
        "block_budget": block_budget,
        "arms": arms,
        "sample_tokens": settings["sample_tokens"],
        # one sweep for every arm, or each arm's own rates
        "lrs": (
            {arm: list(rates) for arm, rates in settings["lrs"].items()}
            if isinstance(settings["lrs"], dict)
            else list(settings["lrs"])
        ),
    }


def arm_lrs(settings: dict, label: str) -> list[float]:
    """The peak learning rates arm ``label`` trains at."""
    lrs = settings["lrs"]
    return list(lrs[label] if isinstance(lrs, dict) else lrs)


def jobs(settings: dict) -> list[tuple[str, float]]:
    """Every (arm, learning rate), in the order they run."""
    return [
        (label, lr)
        for label in settings["arms"]
        for lr in arm_lrs(settings, label)
    ]


def planned_runs(profile: str) -> list[PlannedRun]:
    """Every run of ``profile`` (``mixers.experiments.plan``)."""
    dataset = CharDataset.shakespeare()
    vocab_size = dataset.tokenizer.vocab_size
    settings = shared_settings(profile, vocab_size)
    base = get_profile(profile).model
    windows = settings["full_val_windows"]
    read = (
        len(dataset.val)
        if windows is None
        else windows * settings["train"]["seq_len"]
    )
    return [
        planned_run(
            {**base, **settings["arms"][label]},
            {**settings["train"], "lr": lr},
            vocab_size,
            read + settings["sample_tokens"],
        )
        for label, lr in jobs(settings)
    ]


def _spatial_weights(
    recorder: SpatialWeightRecorder, returned_step: int
) -> dict:
    """What the results keep of the W that ``recorder`` saved: per step and
    layer, W, its Toeplitz score and its diagonal means, and the step whose
    weights the run returned."""
    snapshots = dict(sorted(recorder.snapshots.items()))
    return {
        "steps": list(snapshots),
        # the step of the weights the run returned (train's best evaluation)
        "returned_step": returned_step,
        # W[step index][layer]: lower-triangle rows, see weight_from_rows
        "weights": [
            [_lower_rows(w) for w in layers] for layers in snapshots.values()
        ],
        "toeplitz_score": [
            [toeplitz_score(w) for w in layers]
            for layers in snapshots.values()
        ],
        "diagonal_means": [
            [
                [float(f"{m:.4g}") for m in diagonal_means(w).tolist()]
                for w in layers
            ]
            for layers in snapshots.values()
        ],
    }


def run_one(
    dataset: CharDataset,
    profile: str,
    settings: dict,
    label: str,
    lr: float,
    progress: bool = False,
) -> dict:
    """Train the arm ``label`` at peak learning rate ``lr`` under ``settings``
    (``shared_settings``); return its entry."""
    overrides = settings["arms"][label]
    recorder = SpatialWeightRecorder(
        settings["snapshot_steps"] if label in TINY_ATTENTION else ()
    )
    model, result = run_profile(
        dataset,
        profile,
        model_overrides=overrides,
        train_overrides={**settings["train"], "lr": lr},
        progress=progress,
        description=f"{NAME} {label} lr {lr:g}",
        callback=recorder,
    )
    if label in TINY_ATTENTION:
        # train() returned the weights of the best evaluation: the W analysed
        # after training is theirs (the same as the step's own snapshot)
        recorder.keep(result.best_step, model)
    full_val = evaluate_sequential(
        model,
        dataset.val,
        result.train_config["seq_len"],
        max_windows=settings["full_val_windows"],
    )
    entry = {
        "label": label,
        "lr": lr,
        "model_overrides": overrides,
        "d_ffn": overrides.get("d_ff"),
        "block_parameters": sum(
            p.numel() for p in model.blocks[0].parameters()
        ),
        "result": result.to_dict(),
        "full_val_loss": full_val,
        "full_val_bpc": full_val / math.log(2),
        "sample": sample(
            model,
            dataset,
            prompt="ROMEO:\n",
            max_new_tokens=settings["sample_tokens"],
        ),
    }
    if label in TINY_ATTENTION:
        entry["spatial_weights"] = _spatial_weights(recorder, result.best_step)
    return entry


def best_rates(records: list[dict], settings: dict) -> tuple[dict, dict]:
    """From every run of the sweep: ``(runs, sweep)``. ``runs[label]`` is the
    arm's run at the rate with its lowest ``best_val_loss`` (a diverged run
    never wins), with ``best_lr_at_edge``; ``sweep[label]`` lists every rate's
    losses. The weights and samples of the other rates are dropped: they would
    only make the results file larger."""
    runs, sweep = {}, {}
    for label in dict.fromkeys(record["label"] for record in records):
        arm = [record for record in records if record["label"] == label]
        sweep[label] = [
            {
                "lr": record["lr"],
                "diverged": record["diverged"],
                "best_val_loss": None
                if record["diverged"]
                else record["result"]["best_val_loss"],
                "full_val_loss": record.get("full_val_loss"),
            }
            for record in arm
        ]
        trained = [record for record in arm if not record["diverged"]]
        if not trained:
            raise TrainingDiverged(f"{label}: every learning rate diverged")
        best = min(trained, key=lambda r: r["result"]["best_val_loss"])
        lrs = arm_lrs(settings, label)
        edge = best["lr"] in (min(lrs), max(lrs)) and len(lrs) > 1
        runs[label] = {**best, "best_lr_at_edge": edge}
    return runs, sweep


@cpu_threads()
def run(profile: str, progress: bool = True, workers: int = 1) -> dict:
    """Train the three arms at every rate of ``profile``'s sweep, ``workers``
    runs at a time (one thread each); return each arm at its best rate, the
    sweep, and the provenance."""
    start = time.perf_counter()
    dataset = CharDataset.shakespeare()
    settings = shared_settings(profile, dataset.tokenizer.vocab_size)
    experiment = Experiment(
        NAME, profile, settings, ("label", "lr"), jobs(settings)
    )
    records, resumed = experiment.train(run_one, dataset, workers, progress)
    runs, sweep = best_rates(records, settings)
    model = settings["model"]
    return {
        "experiment": NAME,
        "model": (
            f"{model['n_layers']} layers, d_model {model['d_model']}, context"
            f" {model['block_size']}: transformer (attention + gelu, learned"
            " positions) vs gMLP and aMLP (channel mixer none, no positions),"
            " d_ffn matched to the transformer's parameters per block"
        ),
        "settings": settings,
        "runs": runs,
        "sweep": sweep,
        "provenance": experiment.provenance(records, resumed, start),
    }


# -----------------------------------------------------------------------------
# What the chapter shows of a results file, whatever its profile
# (mixers.tables.profiles_table, mixers.plot.live_beside_committed).


def curves(results: dict) -> dict[str, dict]:
    """Each arm's loss curves at its best rate."""
    return {label: run["result"] for label, run in results["runs"].items()}


def headline(results: dict) -> dict[str, str]:
    """Each arm's loss on the whole validation split."""
    return {
        label: f"{run['full_val_loss']:.3f}"
        for label, run in results["runs"].items()
    }


if __name__ == "__main__":
    main(NAME, run, __doc__.splitlines()[0], DURATIONS)
