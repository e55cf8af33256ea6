"""Position schemes added to the token embeddings.

Attention is permutation-equivariant: without positions, a bidirectional
transformer cannot tell "dog bites man" from "man bites dog". A *causal* one can
still infer position from how many tokens it sees, so ``none`` is a real
baseline too. The ALiBi chapter compares these with rotary embeddings and ALiBi,
which act inside attention instead of on the embeddings.

Every scheme maps a length ``seq_len`` to an additive ``[seq_len, d_model]``
tensor (or ``None``), broadcast over the batch.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def sinusoidal_table(seq_len: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The fixed sin/cos table of "Attention Is All You Need": ``[seq_len, d_model]``.

    Channel pair ``(2i, 2i+1)`` holds ``sin, cos`` of ``pos / base^(2i/d_model)``:
    wavelengths from ``2π`` to ``2π·base``, so any length can be encoded.
    """
    if d_model % 2:
        raise ValueError(f"d_model must be even for sinusoidal positions, got {d_model}")
    position = torch.arange(seq_len, dtype=torch.float32)[:, None]
    inv_freq = torch.exp(-math.log(base) * torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    table = torch.zeros(seq_len, d_model)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq)
    return table


class NoPositions(nn.Module):
    """No positional information at all (a causal model still infers order)."""

    def forward(self, seq_len: int) -> None:
        return None


class SinusoidalPositions(nn.Module):
    """Fixed sinusoidal positions, computed for whatever length arrives."""

    def __init__(self, d_model: int):
        super().__init__()
        self.d_model = d_model

    def forward(self, seq_len: int) -> torch.Tensor:
        return sinusoidal_table(seq_len, self.d_model)


class LearnedPositions(nn.Module):
    """A learned table of ``max_len`` rows: it cannot encode a longer sequence."""

    def __init__(self, d_model: int, max_len: int):
        super().__init__()
        self.max_len = max_len
        self.table = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.table.weight, std=0.02)

    def forward(self, seq_len: int) -> torch.Tensor:
        if seq_len > self.max_len:
            raise ValueError(
                f"learned positions have {self.max_len} rows; a sequence of {seq_len} tokens "
                "is longer than the table (use sinusoidal, rotary or ALiBi to go past it)"
            )
        return self.table.weight[:seq_len]


POSITION_SCHEMES = ("none", "learned", "sinusoidal")


def build_positions(name: str, d_model: int, max_len: int) -> nn.Module:
    """The position module for ``name`` (one of ``POSITION_SCHEMES``)."""
    if name == "none":
        return NoPositions()
    if name == "sinusoidal":
        return SinusoidalPositions(d_model)
    if name == "learned":
        return LearnedPositions(d_model, max_len)
    raise ValueError(f"positions must be one of {POSITION_SCHEMES}, got {name!r}")
