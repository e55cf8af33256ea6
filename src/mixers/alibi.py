r"""Attention with Linear Biases (ALiBi): positions as a penalty on distance,
not as embeddings.

Press, Smith and Lewis, "Train Short, Test Long: Attention with Linear Biases
Enables Input Length Extrapolation" (ICLR 2022); the book reads it beside
labml.ai's annotated implementation ("Attention with Linear Biases (ALiBi)",
nn.labml.ai), whose maths this page follows. No position is added to the
token embeddings; instead every head :math:`h` adds a bias to its attention
scores that falls linearly with the distance between the query at position
:math:`i` and the key at position :math:`j`:

.. math::

    \text{scores}_{h,i,j} = \frac{q_i \cdot k_j}{\sqrt{d_\text{head}}}
        - m_h\,(i - j), \qquad j \le i \text{ (causal)}

The slopes :math:`m_h` are fixed, not learned: a geometric series, so that
some heads look far back (small :math:`m_h`) and others only at their
neighbours (large :math:`m_h`). Because the bias depends only on :math:`i -
j`, a model trained on length :math:`L` sees nothing new at length :math:`2L`
except larger distances, which its heads already discount -- the paper's
length extrapolation.

Two equivalent forms. The paper writes the bias of query :math:`i` as
:math:`m \cdot [-(i-1), \dots, -1, 0]`; the authors' code, and labml.ai's, add
:math:`m\,j` instead. The two differ by :math:`-m\,i`, a constant along each
softmax row (query :math:`i`), and softmax is shift-invariant per row,

.. math::

    \operatorname{softmax}(x + c)_j = \frac{e^{x_j + c}}{\sum_{j'} e^{x_{j'} +
    c}} = \operatorname{softmax}(x)_j,

so they give the same weights. This module computes the relative form
:math:`-m\,(i - j)` from *positions*: it is 0 on the diagonal, never positive
where attention is allowed, and stays correct when query :math:`i` is not the
:math:`i`-th key (a key/value cache, chunked decoding) or when the positions
are not :math:`0, 1, 2, \dots` (left padding).

Conventions, shared with ``mixers.attention``:

- shapes are batch-first; the bias is ``[heads, q_len, k_len]``, or ``[batch,
  heads, q_len, k_len]`` when positions are given per sample;
- query :math:`i` sits at position :math:`q_\text{offset} + i` with
  :math:`q_\text{offset} = k_\text{len} - q_\text{len}` by default: the
  queries are the *last* q_len of the k_len keys, as when decoding new tokens
  after a cache;
- ``causal=True`` puts :math:`-\infty` where key :math:`j` lies after query
  :math:`i` in the sequence, i.e. outside :math:`j \le q_\text{offset} + i`
  (by index, like :func:`causal_mask`);
- ``symmetric=True`` uses :math:`-m\,|i - j|` for bidirectional attention,
  and is the default where ``causal=False``. This is beyond the paper, which
  only studies causal language models: without a causal mask the plain form
  :math:`-m\,(i - j)` is *positive* for future keys and grows with their
  distance.

:class:`AlibiMultiHeadAttention` is :class:`MultiHeadAttention` with the bias
supplied through its ``attention_bias`` hook (eager and SDPA backends), plus a
FlexAttention backend that computes the bias inside the kernel. The layout of
labml.ai's implementation, the benchmark's "before", is
``mixers.bench.alibi.labml_style_alibi_attention``.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ._checks import (
    check_alibi_bias_arguments,
    check_flex_backward,
    check_flex_call,
    check_positive_int,
)
from .attention import MultiHeadAttention, causal_mask, family_arguments

__all__ = [
    "alibi_slopes",
    "alibi_bias",
    "AlibiMultiHeadAttention",
    "causal_block_mask",
    "as_slopes",
    "MAX_KEPT_BIAS_BYTES",
]


# -----------------------------------------------------------------------------
# Slopes


def _geometric_slopes(n: int) -> list[float]:
    r""":math:`2^{-8/n}, 2^{-16/n}, \dots, 2^{-8}`: the series for a power of
    two :math:`n`, in float64.

    Each term is one correctly rounded power, :math:`m_i = 2^{-8 (i+1) / n}`,
    rather than a running product, so no rounding error accumulates along the
    series (for :math:`n = 8` every slope is exact).
    """
    return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]


def alibi_slopes(n_heads: int) -> Tensor:
    r"""The fixed ALiBi slope :math:`m_h` of every head: float32
    ``[n_heads]``.

    For :math:`n` a power of two the slopes are the geometric series that
    starts at :math:`2^{-8/n}` and has that same ratio,

    .. math::

        m_h = 2^{-8 (h + 1) / n}

    for the heads :math:`h = 0, \dots, n - 1`: 8 heads get :math:`\tfrac12,
    \tfrac14, \dots, \tfrac1{256}`. The paper trains only power-of-two head
    counts; for other :math:`n` this follows the workaround in the authors'
    repository, below. It keeps the first :math:`p` heads identical to a
    :math:`p`-head model and spreads the extra heads *between* the existing
    slopes, instead of extending the series below :math:`2^{-8}` to
    ever-flatter, nearly position-blind heads (this reading of why the rule
    works is the book's own). So the slopes are not monotone in head order:
    12 heads get :math:`2^{-1}, \dots, 2^{-8}, 2^{-0.5}, 2^{-1.5}, 2^{-2.5},
    2^{-3.5}`. Head order does not matter to the model -- permuting the heads
    together with their projection weights computes the same function.
    """
    check_positive_int("n_heads", n_heads)
    # :math:`p`, the largest power of two :math:`\le n`, exact (no float
    # :math:`\log_2`).
    p = 1 << (n_heads.bit_length() - 1)
    # The :math:`p`-head series, then the :math:`2p`-head series' slopes at
    # even indices, :math:`2^{-8/(2p)}, 2^{-24/(2p)}, \dots`, until there are
    # :math:`n`: each halfway (in log scale) between two of the first
    # :math:`p`, so none repeats.
    slopes = (
        _geometric_slopes(p) + _geometric_slopes(2 * p)[0::2][: n_heads - p]
    )
    return torch.tensor(slopes, dtype=torch.float32)


# -----------------------------------------------------------------------------
# The bias


def as_slopes(slopes, name: str = "slopes_or_n_heads") -> Tensor:
    """A float tensor ``[n_heads]`` as it is, or :func:`alibi_slopes` for a
    head count n."""
    if isinstance(slopes, Tensor):
        if (
            not slopes.is_floating_point()
            or slopes.dim() != 1
            or slopes.numel() < 1
        ):
            raise ValueError(
                f"{name} must be a positive int or a floating-point tensor"
                f" [n_heads], got a {slopes.dtype} tensor of shape"
                f" {tuple(slopes.shape)}"
            )
        # A negative slope rewards distance: with :math:`m_h < 0` the
        # farthest key would win. (Read back on the CPU only: elsewhere it
        # would wait for the device; and not while compiling, where reading
        # a value back splits the graph in two at every layer.)
        if (
            slopes.device.type == "cpu"
            and not torch.compiler.is_compiling()
            and not bool((torch.isfinite(slopes) & (slopes >= 0)).all())
        ):
            raise ValueError(
                f"{name} must hold finite slopes >= 0 (the bias is -m times"
                f" the distance), got {slopes.tolist()}"
            )
        return slopes
    if not isinstance(slopes, int) or isinstance(slopes, bool):
        raise TypeError(
            f"{name} must be a positive int or a floating-point tensor"
            f" [n_heads], got {slopes!r}"
        )
    if slopes < 1:
        raise ValueError(
            f"{name} must be a positive int (the number of heads), got"
            f" {slopes}"
        )
    return alibi_slopes(slopes)


def _positions(q_len, k_len, q_offset, query_positions, key_positions, device):
    """The queries' and keys' positions :math:`P_i, P_j` on ``device``: the
    given ones, or the defaults :func:`alibi_bias` states."""
    # Query i at :math:`P_i = q_\text{offset} + i`, or at the position of the
    # key it sits on; key j at :math:`P_j = j`.
    if query_positions is None and key_positions is None:
        query_positions = torch.arange(
            q_offset, q_offset + q_len, device=device
        )
    elif query_positions is None:
        query_positions = key_positions[..., q_offset : q_offset + q_len]
    if key_positions is None:
        key_positions = torch.arange(k_len, device=device)
    # Integer positions as int64: differences of uint8 positions would wrap
    # around below zero.
    return tuple(
        p.to(device) if p.is_floating_point() else p.to(device, torch.long)
        for p in (query_positions, key_positions)
    )


def alibi_bias(
    slopes_or_n_heads,
    q_len: int,
    k_len: int | None = None,
    causal: bool = True,
    symmetric: bool | None = None,
    q_offset: int | None = None,
    key_positions: Tensor | None = None,
    query_positions: Tensor | None = None,
    device=None,
    dtype=None,
) -> Tensor:
    r"""The additive ALiBi bias :math:`-m_h\,(P_i - P_j)` of query position
    :math:`P_i` and key position :math:`P_j`: ``[heads, q_len, k_len]``.

    Args:
        slopes_or_n_heads: the slopes, a float tensor ``[heads]``, or a head
            count for :func:`alibi_slopes`.
        q_len: number of queries.
        k_len: number of keys (default ``q_len``).
        causal: :math:`-\infty` where key j comes after query i in the
            sequence, :math:`j > q_\text{offset} + i` (by index, not position:
            padded keys still need a token mask).
        symmetric: :math:`-m_h\,|P_i - P_j|`, for bidirectional attention
            (beyond the paper). Default None: symmetric exactly when not
            causal, since without the causal mask the plain form gives every
            future key a bonus :math:`m_h (P_j - P_i) > 0` that grows with
            its distance. ``symmetric=False`` with ``causal=False`` is the
            plain form, for a caller whose own mask removes the future keys
            (a :class:`~mixers.attention.StaticKVCache`'s).
        q_offset: index of query 0 among the keys; default ``k_len - q_len``
            (the queries are the last q_len keys, as after a key/value cache).
            It sets the causal diagonal and, unless ``query_positions`` is
            given, the query positions ``q_offset + arange(q_len)``.
        key_positions: ``[k_len]`` or ``[batch, k_len]`` (int or float);
            default ``arange(k_len)``. Pass padding-aware positions here, e.g.
            ``(token_mask.cumsum(-1) - 1).clamp(min=0)``.
        query_positions: ``[q_len]`` or ``[batch, q_len]``; default: the
            positions of the keys they sit on, ``key_positions[..., q_offset :
            q_offset + q_len]``.
        device: of the result; default the positions' (else the slopes')
            device.
        dtype: of the result; default the slopes' dtype (float32 for a head
            count).

    Returns:
        ``[heads, q_len, k_len]``, or ``[batch, heads, q_len, k_len]`` when
        either positions tensor has a batch dim. Only differences of positions
        enter, so shifting all positions by the same amount changes nothing
        (why left padding is harmless once the pads are masked).
    """
    # The slopes :math:`m_h` (from a head count, or as given), and one check
    # of every other argument.
    slopes = as_slopes(slopes_or_n_heads)
    k_len = q_len if k_len is None else k_len
    q_offset = check_alibi_bias_arguments(
        q_len,
        k_len,
        q_offset,
        query_positions,
        key_positions,
        dtype,
        causal=causal,
        symmetric=symmetric,
    )
    # :math:`|P_i - P_j|` by default where no causal mask hides the future.
    symmetric = not causal if symmetric is None else symmetric
    dtype = slopes.dtype if dtype is None else dtype
    if device is None:
        given = key_positions if key_positions is not None else query_positions
        device = slopes.device if given is None else given.device
    query_positions, key_positions = _positions(
        q_len, k_len, q_offset, query_positions, key_positions, device
    )

    # Subtract before any cast to floating point: int64 differences are exact
    # however far the positions run, whereas positions near :math:`10^7` cast
    # to float32 first would lose their last digits.
    # :math:`P_i - P_j`, ``[(batch,) q_len, k_len]``.
    distance = query_positions[..., :, None] - key_positions[..., None, :]
    if symmetric:
        distance = distance.abs()
    # Multiply in at least float32, then round once to the requested dtype:
    # :math:`m_h (P_i - P_j)` in float16 would round the slope and the
    # distance separately before the product.
    compute = torch.promote_types(dtype, torch.float32)
    # ``[heads, 1, 1]``
    slopes = slopes.to(device=device, dtype=compute)[:, None, None]
    # ``[(batch,) heads, q_len, k_len]``
    bias = -(slopes * distance.to(compute).unsqueeze(-3))
    # :math:`-\infty` in the future, :math:`j > q_\text{offset} + i`:
    # :math:`e^{-\infty} = 0`, no weight there.
    if causal:
        allowed = causal_mask(q_len, k_len, device, q_offset=q_offset)
        bias = bias.masked_fill(~allowed, float("-inf"))
    return bias.to(dtype)


# -----------------------------------------------------------------------------
# The layer


#: The largest bias a layer at its default backend ("auto") keeps between
#: calls, in bytes: :math:`H \cdot L^2` entries, 8 heads at :math:`L = 2048`
#: in bf16. At :math:`L = 4096` the bias would be 256 MiB, at :math:`L =
#: 16384` 4 GiB; past this size the kernel that computes it (flex) runs
#: instead, on a GPU.
MAX_KEPT_BIAS_BYTES = 64 * 2**20


class AlibiMultiHeadAttention(MultiHeadAttention):
    r"""Multi-head attention with ALiBi biases instead of position embeddings.

    The same constructor arguments, defaults and forward as
    :class:`MultiHeadAttention`: query ``[batch, q_len, d_model]``, key/value
    ``[batch, k_len, kdim/vdim]`` (None: self-attention) -> ``[batch, q_len,
    d_model]``, or ``(output, weights [batch, heads, q_len, k_len])`` with
    ``need_weights=True``; ``mask`` True = may attend, ``token_mask`` True =
    real key token. Head h adds :math:`-m_h\,(i - j)` to its scores; a causal
    layer masks future keys, a bidirectional one (``causal=False``, the
    default of the whole family) uses :math:`-m_h\,|i - j|` (beyond the
    paper, which studies causal language models only).

    Query i sits at position :math:`k_\text{len} - q_\text{len} + i`: calling
    it with the last q_len tokens as the query and all k_len tokens so far as
    key and value gives the last q_len rows of the full pass (incremental
    decoding). With left padding, mark the pads False in ``token_mask``; the
    real tokens then get the unpadded result, since the bias only sees
    differences of positions.

    Backends (``backend``, settable on the instance), all computing the same
    function:

    - ``"auto"`` (the default): per call, ``"flex"`` on a GPU where the bias
      would take more than ``MAX_KEPT_BIAS_BYTES`` (64 MiB: 8 heads at
      :math:`L = 2048` in bf16) and flex can run the call (no attention
      dropout while training), else ``"sdpa"``, which then keeps its bias
      only if it is no larger than that (a longer one is rebuilt per call);
      so no layer left at its default holds a bias over 64 MiB;
    - ``"eager"``: :func:`dot_product_attention` with the bias; returns
      weights;
    - ``"sdpa"``: torch's fused SDPA with the bias (and :math:`-\infty` for
      masked keys) as one additive float mask in the query's dtype -- the base
      class does this with ``attention_bias``. In bfloat16 that mask rounds
      far distances: :math:`m\,d` keeps 8 significant bits, so at :math:`m\,d
      = 500` the bias is off by up to 1 (a factor :math:`e` in the weight);
    - ``"flex"``: ``torch.nn.attention.flex_attention``, compiled for static
      shapes: the bias is computed inside the kernel by a ``score_mod`` (on
      float32 scores) and the masks become a ``block_mask``, so no ``[q_len,
      k_len]`` bias is materialised and fully masked blocks are skipped. No
      attention dropout (it raises while training with ``dropout > 0``) and,
      on a CPU, no backward pass (torch has none there: it raises before
      running); float32/bf16/fp16.

    ``slopes`` is a non-persistent buffer (not in the state dict; it moves
    with ``.to()``). The eager and SDPA paths keep the last bias they built
    and reuse it while the lengths, device, dtype, causality and slopes stay
    the same (``attention_bias``).
    """

    BACKENDS = ("auto", "eager", "sdpa", "flex")
    # A causal ALiBi bias keeps the diagonal (no query is left with nothing to
    # read) and holds :math:`-\infty` above it (no causal mask is needed on
    # top); a bidirectional one holds no :math:`-\infty` at all.
    bias_may_empty_rows = False
    bias_masks_future = True

    @family_arguments
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The slopes :math:`m_h`, fixed: a buffer, not a parameter.
        slopes = alibi_slopes(self.n_heads)
        self.register_buffer("slopes", slopes, persistent=False)
        # (what it was built for, the bias)
        self._bias_cache: tuple[tuple, Tensor] | None = None
        # (what it was built for, the bias of one query at the end of R keys)
        self._ramp_cache: tuple[tuple, Tensor] | None = None
        # what the flex kernel reads, per (device, offset, slopes): the
        # score_mod and its tensors, made once rather than copied to the
        # device at every call
        self._flex_score_mods: dict = {}
        # exact float32 slopes per device, for a model cast to bf16 or fp16
        self._rebuilt_slopes: dict = {}

    def _exact_slopes(self, device) -> Tensor:
        # model.half() / .to(torch.bfloat16) also casts this buffer, rounding
        # the slopes to 11 or 8 bits; rebuild them then. (Autocast, the
        # recommended route, leaves the buffer float32.)
        if self.slopes.dtype in (torch.float32, torch.float64):
            return self.slopes.to(device)
        if torch.compiler.is_compiling():  # a constant of the graph
            return alibi_slopes(self.n_heads).to(device)
        # Made once per device: a copy from the host at every call would stop
        # a CUDA graph from recording the call (a bf16 model decoding).
        device = torch.device(device)
        if device not in self._rebuilt_slopes:
            slopes = alibi_slopes(self.n_heads).to(device)
            self._rebuilt_slopes[device] = slopes
        return self._rebuilt_slopes[device]

    def attention_bias(self, q_len: int, k_len: int, device, dtype) -> Tensor:
        r""":func:`alibi_bias` for this call: ``[heads, q_len, k_len]``,
        :math:`-\infty` above the diagonal if causal.

        Built once and kept while the calls ask for the same lengths, device,
        dtype, causality and slopes (a model at its training length asks for
        the same every step): rebuilding it cost more than the attention
        kernel itself at :math:`L = 2048` on a CPU. The key holds everything
        the bias depends on, the slopes buffer's identity and version
        included, so it cannot go stale. Under ``torch.compile`` it is built
        in the graph instead, where the compiler fuses it. At the default
        backend ("auto") a bias larger than ``MAX_KEPT_BIAS_BYTES`` is built
        for the call and not kept.
        """
        device = torch.device(device)
        slopes = (self.slopes.data_ptr(), self.slopes._version)
        key = (q_len, k_len, device, dtype, self.causal, *slopes)
        if torch.compiler.is_compiling():
            return self._build_bias(q_len, k_len, device, dtype)
        # Decoding: one query at the end, a view of one ramp.
        if q_len == 1 and self.causal:
            return self._decoding_row(k_len, key[2:])
        # At "auto", a bias larger than ``MAX_KEPT_BIAS_BYTES`` is built for
        # the call alone.
        too_large = self._bias_bytes(q_len, k_len, dtype) > MAX_KEPT_BIAS_BYTES
        if self.backend == "auto" and too_large:
            return self._build_bias(q_len, k_len, device, dtype)
        # Else kept, under a key of everything the bias depends on.
        if self._bias_cache is None or self._bias_cache[0] != key:
            bias = self._build_bias(q_len, k_len, device, dtype)
            self._bias_cache = (key, bias)
        return self._bias_cache[1]

    def _decoding_row(self, k_len: int, key: tuple) -> Tensor:
        r"""The bias of one query at the last position against ``k_len``
        keys, :math:`-m_h (k_\text{len} - 1 - j)` (``[heads, 1, k_len]``, no
        :math:`-\infty`: the query may read every key), as decoding asks for
        it once per new token. It is the tail of one ramp :math:`-m_h (R - 1 -
        t)`, :math:`t < R`, built once and rebuilt twice as long when
        ``k_len`` passes :math:`R`: a view, not a new bias for every token."""
        device, dtype = key[0], key[1]
        # Rebuilt, at least twice as long, when the keys outgrow it:
        # :math:`O(\log n)` builds for :math:`n` tokens.
        ramp = self._ramp_cache
        if ramp is None or ramp[0] != key or ramp[1].shape[-1] < k_len:
            grown = 2 * ramp[1].shape[-1] if ramp and ramp[0] == key else 0
            length = max(k_len, grown)
            row = self._build_bias(1, length, device, dtype)
            self._ramp_cache = ramp = (key, row)
        # Its last :math:`k_\text{len}` entries: :math:`t = R - k_\text{len} +
        # j`, so :math:`R - 1 - t = k_\text{len} - 1 - j`.
        return ramp[1][..., ramp[1].shape[-1] - k_len :]

    def _bias_bytes(self, q_len: int, k_len: int, dtype) -> int:
        r"""Bytes of a ``[heads, q_len, k_len]`` bias in ``dtype``:
        :math:`H\, q_\text{len}\, k_\text{len}` entries."""
        itemsize = torch.finfo(dtype).bits // 8
        return self.n_heads * q_len * k_len * itemsize

    def position_bias(
        self, query_positions: Tensor, key_positions: Tensor, dtype
    ) -> Tensor:
        r"""The bias from positions, :math:`-m_h (P_i - P_j)` ``[heads, q_len,
        k_len]`` with no :math:`-\infty` (a :class:`StaticKVCache`'s mask says
        which keys are read): what a decoding step reads, whatever slot a key
        sits in."""
        return alibi_bias(
            self._exact_slopes(query_positions.device),
            query_positions.shape[0],
            key_positions.shape[0],
            causal=False,
            symmetric=not self.causal,
            query_positions=query_positions,
            key_positions=key_positions,
            dtype=dtype,
        )

    def _build_bias(self, q_len: int, k_len: int, device, dtype) -> Tensor:
        return alibi_bias(
            self._exact_slopes(device),
            q_len,
            k_len,
            causal=self.causal,
            symmetric=not self.causal,
            device=device,
            dtype=dtype,
        )

    def _runs_flex(self, query, key, need_weights, cache) -> bool:
        """Whether this call runs the flex kernel: backend "flex", or "auto"
        on a GPU where the bias would exceed ``MAX_KEPT_BIAS_BYTES`` and
        nothing rules flex out (attention dropout while training).

        The base class runs "eager" and "sdpa", and anything with
        ``need_weights`` (eager) or a decoding step with a cache (one query
        row, where a whole-block kernel would waste 127 of 128 rows); only
        "flex" needs a path of its own, because the bias must not be
        materialised for it."""
        if need_weights or cache is not None or self.backend == "eager":
            return False
        if self.backend != "auto":
            return self.backend == "flex"
        if query.device.type != "cuda" or (self.training and self.dropout):
            return False
        autocast = torch.is_autocast_enabled("cuda")
        dtype = torch.get_autocast_dtype("cuda") if autocast else query.dtype
        k_len = query.shape[1] if key is None else key.shape[1]
        bias_bytes = self._bias_bytes(query.shape[1], k_len, dtype)
        return bias_bytes > MAX_KEPT_BIAS_BYTES

    def _flex_forward(self, query, key, value, mask, token_mask) -> Tensor:
        check_flex_call(self, query, key, value, mask, token_mask)
        q, k, v = self.project_heads(query, key, value, token_mask)
        check_flex_backward(q, k, v)
        batch, heads, q_len, _ = q.shape
        k_len = k.shape[-2]
        # The bias :math:`-m_h (i - j)` inside the kernel; causality, padding
        # and the caller's mask as its block mask.
        score_mod = self._flex_score_mod(q.device, k_len - q_len)
        block_mask = flex_block_mask(
            self.causal,
            mask,
            token_mask,
            (batch, heads, q_len, k_len),
            q.device,
        )
        # On a CPU, whole blocks only (see ``FLEX_BLOCK_SIZE``); the copies
        # also give torch's CPU kernel each head as one contiguous ``[seq,
        # d_head]`` block, which it reads faster than the projections'
        # interleaved layout, by more than the copies cost. A GPU needs
        # neither.
        padded_q, padded_k = _flex_lengths(q_len, k_len, q.device)
        if (padded_q, padded_k) != (q_len, k_len) or q.device.type == "cpu":
            q = _pad_positions(q, padded_q)
            k, v = (_pad_positions(x, padded_k) for x in (k, v))
        # The scale :math:`d_\text{head}^{-1/2}` unless the layer sets one.
        scale = (
            1.0 / math.sqrt(self.d_head) if self.scale is None else self.scale
        )
        out = _run_flex(
            q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale
        )
        return self.out_proj(self.merge_heads(out[:, :, :q_len]))

    def _flex_score_mod(self, device, q_offset: int):
        """:func:`alibi_score_mod` for this layer, made once per device,
        offset, causality and slopes."""
        device = torch.device(device)
        slopes = (self.slopes.data_ptr(), self.slopes._version)
        key = (device, q_offset, self.causal, *slopes)
        if key not in self._flex_score_mods:
            exact = self._exact_slopes(device).float()
            score_mod = alibi_score_mod(exact, q_offset, self.causal)
            self._flex_score_mods[key] = score_mod
        return self._flex_score_mods[key]


# -----------------------------------------------------------------------------
# FlexAttention: the bias computed inside the kernel


# torch.compile(flex_attention), built on first use and shared by every module
# and call: compiling per call (or per module) would re-trace each time. It is
# compiled for static shapes: torch compiles one kernel per shape (as a model
# at one length uses), never the dynamic-shape kernel that torch.compile
# switches to after a second shape, which failed to compile on a CPU in torch
# 2.13 (a head count of 4, then 6: "cur_kvSplitSize5 was not declared") and
# then poisoned the shapes that had worked. New slopes, offsets or mask values
# do not recompile: the score_mod and mask_mod below read them from tensors
# rather than from Python constants.
_compiled_flex_attention = None
# distinct shapes one process may compile before torch falls back to eager
FLEX_RECOMPILE_LIMIT = 64


def compiled_flex_attention():
    """torch's ``flex_attention``, compiled for static shapes, built on the
    first call and shared (the layer's flex backend and its benchmark)."""
    global _compiled_flex_attention
    if _compiled_flex_attention is None:
        from torch.nn.attention.flex_attention import flex_attention

        _compiled_flex_attention = torch.compile(flex_attention, dynamic=False)
    return _compiled_flex_attention


def _run_flex(*args, **kwargs) -> Tensor:
    """The compiled kernel, one static-shape compilation per shape (see
    ``compiled_flex_attention``)."""
    with torch._dynamo.config.patch(
        automatic_dynamic_shapes=False, recompile_limit=FLEX_RECOMPILE_LIMIT
    ):
        return compiled_flex_attention()(*args, **kwargs)


# torch 2.13's compiled CPU FlexAttention kernel returns wrong rows -- errors
# near 1, or NaN, in batch rows >= 1 -- at some lengths that are not a multiple
# of its block size: at 40, of the lengths 16, 40, 100, 130 and 200 tried with
# 4 and 6 heads, in fresh processes (upstream: "accuracy issue with kv length
# not multiple of kv block size"). So the flex path only ever hands it whole
# blocks: q, k and v are padded with zeros to a multiple of FLEX_BLOCK_SIZE
# (torch's default block), the block mask keeps every padded key out of every
# row, and the padded query rows are dropped.
FLEX_BLOCK_SIZE = 128


def _whole_blocks(length: int) -> int:
    """``length`` rounded up to a multiple of ``FLEX_BLOCK_SIZE``."""
    return -(-length // FLEX_BLOCK_SIZE) * FLEX_BLOCK_SIZE


def _flex_lengths(q_len: int, k_len: int, device) -> tuple[int, int]:
    """The lengths the flex kernel is handed: whole blocks on a CPU (see
    ``FLEX_BLOCK_SIZE``), the lengths themselves on a GPU, whose kernel
    handles a partial last block and needs no padded copy of q, k and v."""
    if torch.device(device).type != "cpu":
        return q_len, k_len
    return _whole_blocks(q_len), _whole_blocks(k_len)


@functools.lru_cache(maxsize=16)
def causal_block_mask(q_len: int, k_len: int, device: torch.device):
    r"""FlexAttention's block mask for causal attention, query :math:`i` at
    position :math:`k_\text{len} - q_\text{len} + i`, over the lengths
    ``_flex_lengths`` gives (whole blocks on a CPU), with any padded key
    (:math:`j \ge k_\text{len}`) masked for every query.

    Building one evaluates the mask at every (query, key) pair, a pass over a
    dense grid (``python -m mixers.bench.alibi`` times it:
    ``create_block_mask``). It depends on nothing but the two lengths and the
    device, so it is cached on exactly those: it cannot go stale. (The ALiBi
    bias is never cached; the kernel computes it from the slopes.)
    """
    from torch.nn.attention.flex_attention import create_block_mask

    # :math:`j \le k_\text{len} - q_\text{len} + i` and :math:`j <
    # k_\text{len}`, the lengths as tensors: no recompiling per length.
    offset = torch.tensor(k_len - q_len, device=device)
    keys = torch.tensor(k_len, device=device)
    lengths = _flex_lengths(q_len, k_len, device)

    def causal(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx + offset) & (kv_idx < keys)

    def self_causal(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx

    # :math:`j \le i` alone, where no key is padded and the queries are the
    # keys (a GPU training, or a benchmark): the kernel evaluates the mask on
    # the diagonal's blocks, and this is the fewest operations there.
    exact = lengths == (q_len, k_len) and q_len == k_len
    mask_mod = self_causal if exact else causal
    return create_block_mask(mask_mod, None, None, *lengths, device=device)


def _pad_positions(x: Tensor, length: int, value=0.0) -> Tensor:
    """``x [..., seq, d]`` padded with ``value`` along seq to ``length`` (a
    new, contiguous tensor)."""
    return F.pad(x, (0, 0, 0, length - x.shape[-2]), value=value).contiguous()


def alibi_score_mod(slopes: Tensor, q_offset: int, causal: bool):
    r"""The ALiBi bias as FlexAttention's ``score_mod``, computed inside the
    kernel from the ``slopes``: :math:`s - m_h (i - j)`, or :math:`s - m_h
    |i - j|` when not causal, query i at :math:`q_\text{offset} + i`.

    The slopes and offset are tensors, not Python numbers, so that new ones
    do not recompile the kernel; made once per offset (an int copied to the
    device at every call would make the host wait for the GPU)."""
    offset = torch.tensor(q_offset, device=slopes.device)
    if causal and q_offset == 0:
        # self-attention: one subtraction fewer per score
        def score_mod(score, b, h, q_idx, kv_idx):
            return score - slopes[h] * (q_idx - kv_idx)

    elif causal:

        def score_mod(score, b, h, q_idx, kv_idx):
            return score - slopes[h] * (q_idx + offset - kv_idx)

    else:

        def score_mod(score, b, h, q_idx, kv_idx):
            return score - slopes[h] * (q_idx + offset - kv_idx).abs()

    return score_mod


def flex_block_mask(causal, mask, token_mask, scores_shape, device):
    """FlexAttention's block mask over whole blocks: causality, padding and
    the caller's mask, each read inside the kernel from a small tensor, and
    never a padded key.
    """
    batch, heads, q_len, k_len = scores_shape
    # causality alone: the common case, cached
    if causal and mask is None and token_mask is None:
        return causal_block_mask(q_len, k_len, device)
    from torch.nn.attention.flex_attention import create_block_mask

    padded_q, padded_k = _flex_lengths(q_len, k_len, device)
    keys, offset = (
        torch.tensor(k_len, device=device),
        torch.tensor(k_len - q_len, device=device),
    )
    conditions = [lambda b, h, q_idx, kv_idx: kv_idx < keys]
    # None: the block mask broadcasts over that dim
    mask_batch = mask_heads = None
    # :math:`j \le k_\text{len} - q_\text{len} + i`
    if causal:
        conditions.append(lambda b, h, q_idx, kv_idx: kv_idx <= q_idx + offset)
    # ``[batch, k_len]``, True = real; padded keys False
    if token_mask is not None:
        keep = F.pad(token_mask, (0, padded_k - k_len), value=False)
        conditions.append(lambda b, h, q_idx, kv_idx: keep[b, kv_idx])
        mask_batch = batch
    # ``[q_len, k_len]`` or ``[batch|1, heads|1, q_len, k_len]``, checked
    # at the call's entry
    if mask is not None:
        attend = F.pad(
            mask.expand(scores_shape),
            (0, padded_k - k_len, 0, padded_q - q_len),
            value=False,
        )
        conditions.append(
            lambda b, h, q_idx, kv_idx: attend[b, h, q_idx, kv_idx]
        )
        mask_batch, mask_heads = batch, heads

    def mask_mod(b, h, q_idx, kv_idx):
        allowed = conditions[0](b, h, q_idx, kv_idx)
        for condition in conditions[1:]:
            allowed = allowed & condition(b, h, q_idx, kv_idx)
        return allowed

    return create_block_mask(
        mask_mod, mask_batch, mask_heads, padded_q, padded_k, device=device
    )
