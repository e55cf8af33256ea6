"""Why divide by sqrt(d_k): one language model trained with and without the
scale, at several head sizes.

``python -m mixers.experiments.attention_scaling --profile cpu`` trains the
same small character-level transformer with causal multi-head attention that
scales its scores by ``1/sqrt(d_head)`` (the token mixer ``"attention"``) and
with the raw dot products as scores (``"attention_unscaled"``, ``scale=1``), at
a few head sizes. ``d_model`` is fixed and ``d_head`` varies through
``n_heads``, so every model has the same parameters; only the scale differs
within a pair. It writes ``attention_scaling-PROFILE.json`` (to ``runs/``;
``--out book/results`` for the chapter's): per run the loss curves, and, at
initialisation and after training, per layer the standard deviation of the
attention scores, the mean entropy of the attention weights and the norm of the
gradient that reaches the query and key projections; plus the provenance of the
whole experiment. Each (head size, scale) is one job of
``mixers.experiments.run_jobs``: the command line saves it as it finishes, a
rerun resumes, and a run that diverges (the un-scaled arm at a large head size
may) is recorded as such while the others carry on.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, replace

import torch

from ..attention import MultiHeadAttention, causal_mask
from ..data import CharDataset, random_batch
from ..model import LanguageModel
from ..train import build_model, get_profile, run_profile
from . import Experiment, cpu_threads, experiment_settings, main
from .plan import PLAN_TRAIN, PlannedRun, carried_lr, durations, planned_run

NAME = "attention_scaling"
DURATIONS = durations("about 3 minutes on a two-core CPU", runs=6, steps=500)

# The scores' scale of each arm, ModelConfig.attention_scale: None is the
# package's default, 1/sqrt(d_head); 1.0 leaves the raw dot products q·k.
ARMS = {"scaled": None, "unscaled": 1.0}

# Per profile: the model (fields of ModelConfig, over the profile's own), the
# head sizes (d_model is fixed, so d_head = d_model / n_heads) and the training
# (fields of TrainConfig).
SETTINGS = {
    "smoke": dict(
        model=dict(d_model=64, n_layers=2, block_size=32),
        head_sizes=(16, 64),
        train=dict(steps=40, batch_size=16, seq_len=32, warmup_steps=5,
                   eval_interval=20, eval_batches=2),
    ),
    "cpu": dict(
        model=dict(d_model=128, n_layers=2, block_size=64),
        head_sizes=(16, 64, 128),
        train=dict(steps=600, batch_size=32, seq_len=64, lr=2e-3,
                   warmup_steps=50, eval_interval=50, eval_batches=10),
    ),
    # The gpu plan (mixers.experiments.plan): 500 steps a run, the cpu rate
    # carried over.
    "gpu": dict(
        model=dict(d_model=384, n_layers=6, block_size=256),
        head_sizes=(32, 128, 384),
        train=dict(PLAN_TRAIN, steps=500, lr=carried_lr(2e-3)),
    ),
}  # fmt: skip


def _attention_layers(model: LanguageModel) -> list[MultiHeadAttention]:
    return [block.token_mixer for block in model.blocks]


def diagnostics(
    model: LanguageModel, x: torch.Tensor, y: torch.Tensor
) -> dict[str, list[float]]:
    """Per layer, on the batch ``x`` (targets ``y``): what the scale does to
    attention.

    - ``score_std``: standard deviation of the scaled scores ``q·k·scale`` over
      the causal entries;
    - ``entropy``: mean entropy (nats) of each query's attention weights, and
      ``entropy_uniform``, the mean of ``ln(i + 1)``, which is what uniform
      weights over the i + 1 visible keys give;
    - ``max_weight``: the mean over queries of the largest weight (1 =
      one-hot);
    - ``softmax_jacobian``: the mean over queries of the Frobenius norm of the
      softmax's Jacobian ``diag(p) - p pᵀ``, the factor by which a gradient on
      the weights reaches the scores (0 for one-hot weights);
    - ``qk_grad_norm``: the norm of the loss's gradient with respect to ``W_q``
      and ``W_k`` together.
    """
    layers = _attention_layers(model)
    was_training = model.training
    model.eval()
    inputs = _inputs_after_backward(model, layers, x, y)
    visible = causal_mask(x.shape[1], device=x.device)
    with torch.no_grad():
        rows = [
            _layer_diagnostics(layer, h, visible)
            for layer, h in zip(layers, inputs)
        ]
    model.zero_grad(set_to_none=True)
    model.train(was_training)
    return {key: [row[key] for row in rows] for key in DIAGNOSTICS}


#: What ``diagnostics`` measures of each layer, in the order it lists them.
DIAGNOSTICS = (
    "score_std",
    "entropy",
    "entropy_uniform",
    "max_weight",
    "softmax_jacobian",
    "qk_grad_norm",
)


def _inputs_after_backward(
    model: LanguageModel,
    layers: list[MultiHeadAttention],
    x: torch.Tensor,
    y: torch.Tensor,
) -> list[torch.Tensor]:
    """The input of each attention layer on the batch ``x``, caught by a hook
    on the way forward, after a backward pass of the loss on ``y`` that
    leaves the gradients of ``W_q`` and ``W_k`` in the model (from zero)."""
    inputs: list[torch.Tensor] = []
    hooks = [
        layer.register_forward_pre_hook(
            lambda _, args: inputs.append(args[0].detach())
        )
        for layer in layers
    ]
    model.zero_grad(set_to_none=True)
    try:
        _, loss = model(x, y)
        loss.backward()
    finally:
        for hook in hooks:
            hook.remove()
    return inputs


def _layer_diagnostics(
    layer: MultiHeadAttention, h: torch.Tensor, visible: torch.Tensor
) -> dict[str, float]:
    """``DIAGNOSTICS`` of one layer on its input ``h`` (``visible``: the
    causal entries of the scores), its gradients already computed."""
    q = layer.split_heads(layer.q_proj(h))
    k = layer.split_heads(layer.k_proj(h))
    scale = (
        layer.scale
        if layer.scale is not None
        else 1.0 / math.sqrt(layer.d_head)
    )
    scores = (q @ k.transpose(-2, -1)) * scale  # [batch, heads, seq, seq]
    _, weights = layer(h, need_weights=True)  # [batch, heads, seq, seq]
    plogp = torch.where(
        weights > 0, weights * weights.clamp_min(1e-30).log(), 0.0
    )
    positions = torch.arange(1, h.shape[1] + 1, dtype=torch.float64)
    # ||diag(p) - p pᵀ||_F² = Σ p² - 2 Σ p³ + (Σ p²)², per query.
    p2, p3 = weights.square().sum(-1), weights.pow(3).sum(-1)
    # W_q and W_k: the first two thirds of the fused projection
    grads = [layer.in_proj.weight.grad[: 2 * layer.d_model]]
    return {
        "score_std": scores[..., visible].std().item(),
        "entropy": -plogp.sum(-1).mean().item(),
        "entropy_uniform": positions.log().mean().item(),
        "max_weight": weights.amax(-1).mean().item(),
        "softmax_jacobian": (
            (p2 - 2 * p3 + p2.square()).clamp_min(0).sqrt().mean().item()
        ),
        "qk_grad_norm": math.sqrt(
            sum(g.float().square().sum().item() for g in grads)
        ),
    }


def shared_settings(profile: str) -> dict:
    """Everything the runs of ``profile`` share, as the results record it, with
    the validation batch every run's diagnostics read (``probe``)."""
    base, settings, model_settings = experiment_settings(profile, SETTINGS)
    train = asdict(replace(base.train, **settings["train"]))
    for d_head in settings["head_sizes"]:
        if model_settings["d_model"] % d_head:
            raise ValueError(
                f"head size {d_head} does not divide"
                f" d_model={model_settings['d_model']}"
            )
    return {
        "model": model_settings,
        "head_sizes": list(settings["head_sizes"]),
        "train": train,
        "probe": {
            "split": "val",
            "batch_size": 8,
            "seq_len": train["seq_len"],
            "seed": 0,
        },
    }


def _overrides(settings: dict, d_head: int, scaled: bool) -> dict:
    """The model fields of the run with heads of ``d_head``, scaled or
    not."""
    return {
        **settings["model"],
        "n_heads": settings["model"]["d_model"] // d_head,
        "token_mixer": "attention",
        "attention_scale": ARMS["scaled" if scaled else "unscaled"],
    }


def jobs(settings: dict) -> list[tuple[int, bool]]:
    """Every (head size, scaled) pair, in the order they run."""
    return [
        (d_head, arm == "scaled")
        for d_head in settings["head_sizes"]
        for arm in ARMS
    ]


def planned_runs(profile: str) -> list[PlannedRun]:
    """Every run of ``profile`` (``mixers.experiments.plan``)."""
    settings = shared_settings(profile)
    vocab_size = CharDataset.shakespeare().tokenizer.vocab_size
    base = get_profile(profile).model
    return [
        planned_run(
            {**base, **_overrides(settings, *job)},
            settings["train"],
            vocab_size,
        )
        for job in jobs(settings)
    ]


def run_one(
    dataset: CharDataset,
    profile: str,
    settings: dict,
    d_head: int,
    scaled: bool,
    progress: bool = False,
) -> dict:
    """Train the model with heads of ``d_head`` and scaled (or raw) scores
    under ``settings`` (``shared_settings``); return its record, with the
    diagnostics before and after training.
    """
    d_model = settings["model"]["d_model"]
    overrides = _overrides(settings, d_head, scaled)
    label = f"d_head={d_head}, {'scaled' if scaled else 'unscaled'}"
    # One fixed validation batch for the diagnostics, the same for every run.
    probe = settings["probe"]
    generator = torch.Generator().manual_seed(probe["seed"])
    x, y = random_batch(
        dataset.val, probe["batch_size"], probe["seq_len"], generator
    )
    # run_profile seeds with the training seed before building, so this is its
    # initial model.
    torch.manual_seed(settings["train"]["seed"])
    initial = diagnostics(
        build_model(
            dataset.tokenizer.vocab_size, get_profile(profile), **overrides
        ),
        x,
        y,
    )
    model, result = run_profile(
        dataset,
        profile,
        model_overrides=overrides,
        train_overrides=settings["train"],
        progress=progress,
        description=f"{NAME} {label}",
    )
    device = next(model.parameters()).device
    return {
        "label": label,
        "d_head": d_head,
        "n_heads": d_model // d_head,
        "scaled": scaled,
        "scale": 1.0 / math.sqrt(d_head) if scaled else 1.0,
        "token_mixer": "attention",
        "result": result.to_dict(),
        "initial": initial,
        "final": diagnostics(model, x.to(device), y.to(device)),
    }


@cpu_threads()
def run(profile: str, progress: bool = True, workers: int = 1) -> dict:
    """Train every (head size, scaled/un-scaled) pair under ``profile``,
    ``workers`` runs at a time; return the results."""
    start = time.perf_counter()
    dataset = CharDataset.shakespeare()
    settings = shared_settings(profile)
    experiment = Experiment(
        NAME, profile, settings, ("d_head", "scaled"), jobs(settings)
    )
    runs, resumed = experiment.train(run_one, dataset, workers, progress)
    return {
        "experiment": NAME,
        "model": (
            "causal attention + gelu, learned positions; d_model"
            f" {settings['model']['d_model']}, {settings['model']['n_layers']}"
            " layers; scaled (1/sqrt(d_head)) vs un-scaled (1) scores"
        ),
        "settings": settings,
        "runs": runs,
        "provenance": experiment.provenance(runs, resumed, start),
    }


# -----------------------------------------------------------------------------
# What the chapter shows of a results file, whatever its profile
# (mixers.tables.profiles_table, mixers.plot.live_beside_committed).


def curves(results: dict) -> dict[str, dict]:
    """Each run's loss curves, by head size and arm."""
    return {
        f"{run['d_head']}, {'scaled' if run['scaled'] else 'raw'}": run[
            "result"
        ]
        for run in results["runs"]
        if not run.get("diverged")
    }


def headline(results: dict) -> dict[str, str]:
    """Best validation loss, scaled / un-scaled, per head size."""
    best = {
        (run["d_head"], run["scaled"]): (
            "diverged"
            if run.get("diverged")
            else f"{run['result']['best_val_loss']:.3f}"
        )
        for run in results["runs"]
    }
    return {
        f"d_head {d}": f"{best[d, True]} / {best[d, False]}"
        for d in results["settings"]["head_sizes"]
    }


if __name__ == "__main__":
    main(NAME, run, __doc__.splitlines()[0], DURATIONS)
