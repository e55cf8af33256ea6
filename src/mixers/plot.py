"""The figures the chapters share: loss curves and heat maps.

Each function draws on a matplotlib ``Axes`` it is given (or a new one) and
returns it, so a chapter can arrange several in one figure.
"""

from __future__ import annotations

import math
from typing import Sequence

import matplotlib.pyplot as plt
import torch


def _axes(ax):
    return ax if ax is not None else plt.subplots(figsize=(6, 4))[1]


def loss_curves(runs: dict[str, dict], ax=None, train: bool = True, title: str | None = None):
    """Validation (solid) and training (dashed) loss against step for each named run.

    ``runs`` maps a label to a ``TrainResult.to_dict()`` (``steps``, ``train_loss``, ``val_loss``).
    """
    ax = _axes(ax)
    for i, (label, run) in enumerate(runs.items()):
        color = f"C{i}"
        ax.plot(run["steps"], run["val_loss"], color=color, label=f"{label} (val)")
        if train:
            ax.plot(run["steps"], run["train_loss"], color=color, linestyle="--", alpha=0.6,
                    label=f"{label} (train)")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats / char)")
    secondary = ax.secondary_yaxis("right", functions=(lambda n: n / math.log(2), lambda b: b * math.log(2)))
    secondary.set_ylabel("bits / char")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title)
    return ax


def heatmap(
    matrix: torch.Tensor,
    ax=None,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    title: str | None = None,
    cmap: str = "viridis",
    colorbar: bool = True,
    **imshow_kwargs,
):
    """A 2-d tensor as an image: rows = queries (``y``), columns = keys (``x``)."""
    ax = _axes(ax)
    values = matrix.detach().float().cpu()
    if values.dim() != 2:
        raise ValueError(f"matrix must be 2-d, got shape {tuple(values.shape)}")
    image = ax.imshow(values, cmap=cmap, **imshow_kwargs)
    if x_labels is not None:
        ax.set_xticks(range(len(x_labels)), list(x_labels), fontsize="small")
    if y_labels is not None:
        ax.set_yticks(range(len(y_labels)), list(y_labels), fontsize="small")
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def attention_heads(
    weights: torch.Tensor,
    tokens: Sequence[str] | None = None,
    key_tokens: Sequence[str] | None = None,
    axes=None,
    titles: Sequence[str] | None = None,
    cmap: str = "viridis",
    colorbar: bool = True,
):
    """One heat map per head of attention weights ``[heads, q_len, k_len]`` (or ``[q_len, k_len]``).

    Rows are queries (labelled by ``tokens``), columns are keys (``key_tokens``, default ``tokens``).
    All heads share the colour scale [0, 1], so their sharpness can be compared at a glance. Draws
    into ``axes`` (one per head) or a new row of axes; returns the axes.
    """
    values = weights.detach().float().cpu()
    if values.dim() == 2:
        values = values[None]
    if values.dim() != 3:
        raise ValueError(f"weights must be [heads, q_len, k_len] or [q_len, k_len], got {tuple(weights.shape)}")
    heads = values.shape[0]
    if axes is None:
        _, axes = plt.subplots(1, heads, figsize=(3.2 * heads + 0.6, 3.2), squeeze=False, layout="constrained")
        axes = axes[0]
    axes = list(axes) if not isinstance(axes, plt.Axes) else [axes]
    if len(axes) != heads:
        raise ValueError(f"need one axes per head: {heads} heads, {len(axes)} axes")
    key_tokens = tokens if key_tokens is None else key_tokens
    for h, ax in enumerate(axes):
        title = titles[h] if titles is not None else (f"head {h}" if heads > 1 else None)
        heatmap(values[h], ax=ax, x_labels=key_tokens, y_labels=tokens, title=title, cmap=cmap,
                colorbar=False, vmin=0.0, vmax=1.0)
        if key_tokens is not None:
            ax.tick_params(axis="x", labelrotation=90)
    if colorbar:
        axes[0].figure.colorbar(axes[-1].images[0], ax=axes, shrink=0.85, pad=0.02)
    return axes
