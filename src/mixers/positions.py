r"""Position schemes added to the token embeddings, and rotary embeddings.

Attention is permutation-equivariant: for a permutation :math:`\pi` of the
positions, :math:`\operatorname{attn}(X_\pi) = \operatorname{attn}(X)_\pi`,
so without positions a bidirectional transformer cannot tell "dog bites man"
from "man bites dog". A *causal* one
can still infer position from how many tokens it sees, so ``none`` is a real
baseline too. The ALiBi chapter compares these with rotary embeddings and
ALiBi, which act inside attention instead of on the embeddings.

Every scheme maps a length ``seq_len`` to an additive ``[seq_len, d_model]``
tensor :math:`P` (or ``None``), broadcast over the batch: the model reads
:math:`x_t + P_t` at position :math:`t`. Rotary embeddings (RoFormer, Su et
al., 2021), last on this page, act on the queries and keys instead.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ._checks import (
    check_even,
    check_finite_float,
    check_positive_float,
    check_positive_int,
    check_rotary_inputs,
)
from .attention import MultiHeadAttention, family_arguments

__all__ = [
    "sinusoidal_table",
    "NoPositions",
    "SinusoidalPositions",
    "LearnedPositions",
    "POSITION_SCHEMES",
    "build_positions",
    "rotary_embedding",
    "rotary_tables",
    "rotate_pairs",
    "RotaryMultiHeadAttention",
]


def sinusoidal_table(
    seq_len: int, d_model: int, base: float = 10000.0
) -> torch.Tensor:
    r"""The fixed sin/cos table of "Attention Is All You Need": ``[seq_len,
    d_model]``,

    .. math::

        P_{t, 2i} = \sin(t\, \omega_i)

        P_{t, 2i+1} = \cos(t\, \omega_i)

        \omega_i = \text{base}^{-2i/d_\text{model}}

    at position :math:`t`: wavelengths :math:`2\pi/\omega_i` from
    :math:`2\pi` to :math:`2\pi\cdot\text{base}`, so any length can be
    encoded. ``base`` is a positive finite float (0 would make every frequency
    infinite).
    """
    check_positive_int("seq_len", seq_len)
    check_positive_float("base", base)
    if check_positive_int("d_model", d_model) % 2:
        raise ValueError(
            f"d_model must be even for sinusoidal positions, got {d_model}"
        )
    # :math:`t` down the rows, :math:`\omega_i = e^{-(2i/d) \ln
    # \text{base}}` across the channel pairs.
    position = torch.arange(seq_len, dtype=torch.float32)[:, None]
    inv_freq = torch.exp(
        -math.log(base)
        * torch.arange(0, d_model, 2, dtype=torch.float32)
        / d_model
    )
    table = torch.zeros(seq_len, d_model)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq)
    return table


class NoPositions(nn.Module):
    """No positional information at all (a causal model still infers order)."""

    def forward(self, seq_len: int) -> None:
        check_positive_int("seq_len", seq_len)
        return None


class SinusoidalPositions(nn.Module):
    """Fixed sinusoidal positions, computed for whatever length arrives, times
    ``scale``.

    ``d_model`` is a positive even int (sin and cos halves); ``scale`` a finite
    float.
    """

    def __init__(self, d_model: int, scale: float = 1.0):
        super().__init__()
        self.d_model = check_even("d_model", d_model)
        self.scale = check_finite_float("scale", scale)

    def forward(self, seq_len: int) -> torch.Tensor:
        table = sinusoidal_table(seq_len, self.d_model)
        return table if self.scale == 1.0 else table * self.scale


# The token embeddings start with standard deviation 0.02 (``mixers.model``),
# and the sinusoid table has RMS :math:`1/\sqrt{2}` (each pair has
# :math:`\sin^2 + \cos^2 = 1`). "sinusoidal_scaled" multiplies the table by
# :math:`0.02\sqrt{2}`, so that at initialisation position and token are the
# same size: the unscaled table is 35 times larger, and the original
# transformer's :math:`\sqrt{d_\text{model}}` scaling of the embeddings
# presumes their :math:`\mathcal{N}(0, 1/d_\text{model})` initialisation,
# which this model does not use.
SCALED_SINUSOID_FACTOR = 0.02 * math.sqrt(2.0)


class LearnedPositions(nn.Module):
    """A learned table of ``max_len`` rows: it cannot encode a longer
    sequence."""

    def __init__(self, d_model: int, max_len: int):
        super().__init__()
        self.max_len = check_positive_int("max_len", max_len)
        self.table = nn.Embedding(
            max_len, check_positive_int("d_model", d_model)
        )
        nn.init.normal_(self.table.weight, std=0.02)

    def forward(self, seq_len: int) -> torch.Tensor:
        check_positive_int("seq_len", seq_len)
        if seq_len > self.max_len:
            raise ValueError(
                f"learned positions have {self.max_len} rows; a sequence of"
                f" {seq_len} tokens is longer than the table (use sinusoidal,"
                " rotary or ALiBi to go past it)"
            )
        return self.table.weight[:seq_len]


#: The schemes added to the token embeddings (rotary and ALiBi act inside
#: attention instead).
POSITION_SCHEMES = ("none", "learned", "sinusoidal", "sinusoidal_scaled")


def build_positions(name: str, d_model: int, max_len: int) -> nn.Module:
    """The position module for ``name`` (one of ``POSITION_SCHEMES``)."""
    if name == "none":
        return NoPositions()
    if name == "sinusoidal":
        return SinusoidalPositions(d_model)
    if name == "sinusoidal_scaled":
        return SinusoidalPositions(d_model, scale=SCALED_SINUSOID_FACTOR)
    if name == "learned":
        return LearnedPositions(d_model, max_len)
    raise ValueError(
        f"positions must be one of {POSITION_SCHEMES}, got {name!r}"
    )


# -----------------------------------------------------------------------------
# Rotary position embeddings (RoPE; Su et al., "RoFormer", 2021): positions
# that act inside attention, by rotating queries and keys.


def rotary_embedding(
    q_or_k: Tensor, positions: Tensor, base: float = 10000.0
) -> Tensor:
    r"""Rotates each channel pair of ``q_or_k`` by an angle proportional to its
    position.

    q_or_k: ``[batch, heads, seq, d_head]`` (any ``[..., seq, d_head]``),
    d_head even. positions: ``[seq]``, or ``[batch, seq]`` for a 4-d input
    (per-sample positions, e.g. with padding); int or float. base: a positive
    finite float, the slowest wavelength over :math:`2\pi`. Returns the
    rotated tensor, same shape and dtype.

    Pairs are *interleaved*, channels :math:`(2i, 2i+1)` as in the RoFormer
    paper and in :func:`sinusoidal_table` above; pair :math:`i` at position
    :math:`p` turns by :math:`\theta_i = p\, \text{base}^{-2i/d_\text{head}}`:

    .. math::

        \begin{pmatrix} y_{2i} \\ y_{2i+1} \end{pmatrix} = R_{\theta_i}
        \begin{pmatrix} x_{2i} \\ x_{2i+1} \end{pmatrix}

        R_\theta = \begin{pmatrix} \cos\theta & -\sin\theta \\
        \sin\theta & \cos\theta \end{pmatrix}

    (GPT-NeoX and Hugging Face's LLaMA pair channel :math:`i` with :math:`i +
    d_\text{head}/2` instead, "half-split". The two are the same up to a
    fixed permutation of the channels, which the learned q/k projections
    absorb, but weights trained with one do not fit the other.)

    A rotation keeps norms, and rotating q by angle :math:`a` and k by
    :math:`b` changes their dot product only through :math:`b - a`:
    :math:`R_m q \cdot R_n k = q^\top R_{n - m} k` depends on :math:`m` and
    :math:`n` only via :math:`n - m`. So attention sees relative positions,
    although each vector is rotated by its absolute one.
    """
    angles_shape = check_rotary_inputs(q_or_k, positions, base)
    # Angles in at least float32: float16 spaces numbers 1 apart near 2000, so
    # :math:`p\, \theta_i` there would be off by up to half a radian.
    compute = torch.promote_types(q_or_k.dtype, torch.float32)
    cos, sin = rotary_tables(
        # the angles' shape less its last axis, which rotary_tables adds
        positions.to(q_or_k.device).reshape(angles_shape[:-1]),
        q_or_k.shape[-1],
        base,
        dtype=compute,
    )
    return rotate_pairs(q_or_k.to(compute), cos, sin).to(q_or_k.dtype)


def rotary_tables(
    positions: Tensor, d_head: int, base: float = 10000.0, dtype=None
) -> tuple[Tensor, Tensor]:
    r"""The rotation of every channel pair at ``positions`` (``[..., seq]``),
    laid out like the channels: ``cos, sin``, each ``[..., seq, d_head]``, on
    the positions' device, in ``dtype`` (default float32).

    Pair :math:`i` turns by :math:`\theta_i = p\,
    \text{base}^{-2i/d_\text{head}}`; ``cos`` holds :math:`\cos\theta_i` at
    both channels of pair :math:`i` and ``sin`` holds :math:`(-\sin\theta_i,
    +\sin\theta_i)`, so that :func:`rotate_pairs` is two products and a
    sum."""
    dtype = torch.float32 if dtype is None else dtype
    inv_freq = base ** (
        -torch.arange(0, d_head, 2, device=positions.device, dtype=dtype)
        / d_head
    )
    # :math:`\theta_i = p\, \omega_i`, ``[..., seq, d_head / 2]``.
    angles = positions.to(dtype).unsqueeze(-1) * inv_freq
    cos, sin = torch.cos(angles), torch.sin(angles)
    signed = torch.stack((-sin, sin), dim=-1).flatten(-2)
    return cos.repeat_interleave(2, dim=-1), signed


def rotate_pairs(
    x: Tensor,
    cos: Tensor | None,
    sin: Tensor | None,
    turn: Tensor | None = None,
) -> Tensor:
    r"""Each channel pair of ``x`` (``[..., seq, d_head]``) turned by its
    angle: the complex product

    .. math::

        y_{2i} + \mathrm{i}\, y_{2i+1} = (x_{2i} + \mathrm{i}\, x_{2i+1})\,
        e^{\mathrm{i} \theta_i},

    with ``cos`` and ``sin`` from :func:`rotary_tables` (broadcastable to
    ``x``): :math:`y_{2i} = x_{2i} \cos\theta_i - x_{2i+1} \sin\theta_i`,
    :math:`y_{2i+1} = x_{2i+1} \cos\theta_i + x_{2i} \sin\theta_i`.

    Run eagerly, it is that complex product: one kernel (a pair of adjacent
    floats *is* a complex number in memory, so ``view_as_complex`` copies
    nothing). Under ``torch.compile``, which generates no code for complex
    numbers, it is written out in reals, ``swapped`` holding each pair the
    other way round, ``(x[2i+1], x[2i])``, and the compiler fuses the lines
    into one kernel. The two are equal to rounding (tests/test_positions.py).
    ``turn``, the complex :math:`e^{\mathrm{i} \theta_i}` ``[..., seq,
    d_head / 2]``, is made from ``cos`` and ``sin`` unless given (a caller
    that keeps it saves that step); given it, an eager call needs no ``cos``
    and ``sin`` (None).
    """
    if torch.compiler.is_compiling():
        if cos is None or sin is None:
            raise ValueError(
                "rotate_pairs under torch.compile needs cos and sin, got"
                " None: the compiled form is written in reals, not with turn"
            )
        swapped = x.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)
        return x * cos + swapped * sin
    pairs = x.unflatten(-1, (-1, 2))
    if not _viewable_as_complex(pairs):
        pairs = pairs.clone(memory_format=torch.contiguous_format)
    if turn is None:
        if cos is None or sin is None:
            raise ValueError("rotate_pairs needs turn, or cos and sin")
        # :math:`e^{\mathrm{i}\theta} = \cos\theta + \mathrm{i} \sin\theta`
        turn = torch.complex(cos[..., 0::2], sin[..., 1::2])
    return torch.view_as_real(torch.view_as_complex(pairs) * turn).flatten(-2)


def _viewable_as_complex(pairs: Tensor) -> bool:
    """Whether ``view_as_complex`` takes ``pairs`` (``[..., 2]``) as it lies:
    every stride but the last, and the offset, even, the last 1. Contiguous
    at an even offset is the usual case, and the cheapest test: it is made
    for every q and k, at every decoding step."""
    if pairs.storage_offset() % 2:
        return False
    if pairs.is_contiguous():
        return True
    strides = pairs.stride()
    return strides[-1] == 1 and not any(n % 2 for n in strides[:-1])


class RotaryMultiHeadAttention(MultiHeadAttention):
    r""":class:`MultiHeadAttention` with rotary embeddings applied to q and k
    after the heads split: the score of query :math:`i` and key :math:`j` is
    :math:`(R_{P_i} q_i) \cdot (R_{P_j} k_j) = q_i^\top R_{P_j - P_i} k_j`.

    The same constructor arguments, defaults and forward as the base class,
    plus ``base``: query ``[batch, q_len, d_model]``, key/value ``[batch,
    k_len, kdim/vdim]`` -> ``[batch, q_len, d_model]`` (or ``(output,
    weights)`` with ``need_weights=True``). Through the ``transform_qk`` hook,
    key :math:`j` is rotated to position :math:`j` and query :math:`i` to
    :math:`k_\text{len} - q_\text{len} + i` (the base class's offset
    convention), so calling it with the last q_len tokens as the query and
    every token so far as key and value gives the last rows of the full pass
    (incremental decoding). :math:`d_\text{head} = d_\text{model} / H` must
    be even; ``base``, a positive finite float, sets the slowest wavelength
    (:math:`2\pi \cdot \text{base}`).
    """

    @family_arguments
    def __init__(self, *args, base: float = 10000.0, **kwargs):
        super().__init__(*args, **kwargs)
        if self.d_head % 2:
            raise ValueError(
                "rotary embeddings rotate channel pairs: d_head = d_model /"
                f" n_heads must be even, got d_model={self.d_model},"
                f" n_heads={self.n_heads}, d_head={self.d_head}"
            )
        self.base = check_positive_float("base", base)
        # ((device, dtype), :math:`e^{\mathrm{i}\theta}`) for positions
        # :math:`0, 1, \dots, n - 1`; grown on demand
        self._tables: tuple | None = None

    def _rotation(self, start: int, length: int, device, dtype) -> tuple:
        r"""The rotation of positions ``start .. start + length - 1``, as
        :func:`rotate_pairs` takes it: ``cos, sin, turn``. Run eagerly, only
        ``turn``, a slice of ``_turns`` (``cos`` and ``sin`` None, since
        the complex product reads nothing else). Compiled, or at a tensor of
        positions, ``cos`` and ``sin`` (:func:`rotary_tables`, in ``dtype``)
        and no ``turn``."""
        # a tensor: the positions themselves (a StaticKVCache's), any values
        if isinstance(start, Tensor):
            return (*rotary_tables(start, self.d_head, self.base, dtype), None)
        end = start + length
        if torch.compiler.is_compiling():  # built in the graph, fused there
            positions = torch.arange(start, end, device=device)
            return (
                *rotary_tables(positions, self.d_head, self.base, dtype),
                None,
            )
        return None, None, self._turns(end, device, dtype)[start:end]

    def _turns(self, n: int, device, dtype) -> Tensor:
        r""":math:`e^{\mathrm{i}\theta}` (complex) of positions :math:`0, 1,
        \dots, m - 1`, ``[m, d_head / 2]`` with :math:`m \ge n`, in
        ``dtype``'s complex type: a table built once per device and dtype, and
        rebuilt (twice as long) when a call reaches past it, so that training
        (the same positions every step) and decoding (one more position per
        token) build it once or a few times."""
        key = (torch.device(device), dtype)
        same = self._tables is not None and self._tables[0] == key
        if not same or self._tables[1].shape[0] < n:
            # twice as long as before when a call reached past the old tables
            size = max(n, 2 * self._tables[1].shape[0]) if same else n
            positions = torch.arange(size, device=device)
            cos, sin = rotary_tables(positions, self.d_head, self.base, dtype)
            turn = torch.complex(cos[..., 0::2], sin[..., 1::2])
            self._tables = (key, turn)
        return self._tables[1]

    def transform_qk(
        self, q: Tensor, k: Tensor, q_offset: int, k_offset: int = 0
    ) -> tuple[Tensor, Tensor]:
        # :math:`R_{P} x` for every query and key, in float32 at least, as
        # :func:`rotary_embedding`.
        compute = torch.promote_types(q.dtype, torch.float32)

        def rotate(x, start):
            tables = self._rotation(start, x.shape[-2], x.device, compute)
            return rotate_pairs(x.to(compute), *tables).to(x.dtype)

        return rotate(q, q_offset), rotate(k, k_offset)
