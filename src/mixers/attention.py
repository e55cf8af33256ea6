r"""Attention: the token mixer that lets every position read from every other
one.

Each layer here computes, for query :math:`q_i` and keys and values
:math:`k_j, v_j`,

.. math::

    \operatorname{attn}(q_i) = \sum_j \alpha_{ij} v_j, \qquad
    \alpha_{ij} = \frac{e^{s(q_i, k_j)}}{\sum_{j'} e^{s(q_i, k_{j'})}},

and they differ only in the score :math:`s`:

- scaled dot product, :math:`s = q_i^\top k_j / \sqrt{d_k}` (Vaswani et al.,
  2017): :func:`dot_product_attention`, :class:`DotProductAttention` and, with
  learned projections and several heads, :class:`MultiHeadAttention`;
- additive, :math:`s = u^\top \tanh(W_q q_i + W_k k_j)` (Bahdanau et al.,
  2015): :class:`AdditiveAttention`, and its one-vector cousin
  :class:`SingleLayerAttention`;
- trilinear, read in both directions (BiDAF, Seo et al., 2017):
  :class:`BiAttention`.

The layers and their defects to fix come from the 2022 blog post "Some
attention code explanations", which collects the attention layers of one
library (its dot product is never divided by :math:`\sqrt{d_k}`, and a fully
masked row there becomes NaN); the book's attention and multi-head chapters
read this module beside it.

Conventions shared by everything below:

- tensors are batch-first, ``[batch, seq, d_model]``; heads are ``[batch,
  heads, seq, d_head]``, the layout of
  ``torch.nn.functional.scaled_dot_product_attention``;
- every boolean mask is True where reading is allowed (the package's one
  convention, see ``mixers``): a pairwise ``mask`` ``[..., q_len, k_len]`` is
  True where query i *may attend* to key j (as in torch's SDPA); a per-token
  ``token_mask`` ``[batch, k_len]`` is True at *real* key tokens and False at
  padding (the opposite of ``torch.nn.MultiheadAttention``'s
  ``key_padding_mask``). A mask that allows nothing is refused as inverted;
- a masked key gets exactly zero weight, :math:`\alpha_{ij} = 0`, and a query
  with nothing to attend to gets zero weights and a zero output -- never NaN,
  in the forward or the backward pass;
- every layer returns its output, or ``(output, weights)`` with
  ``need_weights=True``;
- every sequence holds at least one position: an empty one is refused with a
  ``ValueError``.
"""

from __future__ import annotations

import inspect
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import (
    check_attention_arguments,
    check_attention_call,
    check_attention_mask,
    check_bias,
    check_bool,
    check_cache_use,
    check_choice,
    check_context_and_question,
    check_dropout,
    check_finite_float,
    check_key_token_mask,
    check_non_negative_int,
    check_padded,
    check_positive_int,
    check_qkv,
    check_same_device,
    check_scale,
    check_softmax_inputs,
)

__all__ = [
    "dot_product_attention",
    "masked_softmax",
    "causal_mask",
    "token_mask_to_attention_mask",
    "DotProductAttention",
    "SingleLayerAttention",
    "AdditiveAttention",
    "MultiHeadAttention",
    "BiAttention",
    "fused_attention",
    "masked_fused_attention",
    "zero_padding",
    "KVCache",
    "StaticKVCache",
    "ProjectionRows",
]

# -----------------------------------------------------------------------------
# torch's fused kernel, and where it runs faster in float32.


def fused_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Tensor | None = None,
    *,
    cpu_bf16_in_float32: bool = True,
    **kwargs,
) -> Tensor:
    """``torch.nn.functional.scaled_dot_product_attention``, but bf16 on the
    CPU runs in float32. Torch's arguments and torch's meaning: a query that
    may attend to nothing gets whatever the kernel gives
    (:func:`masked_fused_attention` takes the package's masks instead).

    Under CPU autocast, q, k and v arrive in bfloat16, and torch's CPU
    flash-attention kernel is slower in bfloat16 than in float32 (torch 2.13 on
    one AVX-512 CPU; ``python -m mixers.bench.cpu_precision`` measures it),
    while the projections around it are faster. So with
    ``cpu_bf16_in_float32=True`` the scores are computed in float32 there --
    faster on that CPU and more exact -- and the output is cast back to bf16.
    Any other dtype or device, or ``cpu_bf16_in_float32=False``: torch's call
    as is. ``attn_mask`` and ``kwargs`` are torch's.
    """
    # Anything but bf16 on a CPU: torch's call as it is.
    if (
        not cpu_bf16_in_float32
        or q.device.type != "cpu"
        or q.dtype != torch.bfloat16
    ):
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, **kwargs
        )
    # bf16 on a CPU: :math:`\operatorname{softmax}(q k^\top) v` in float32
    # (an additive float mask too), rounded back to bf16 once, at the end.
    # CPU autocast would cast the inputs back to bf16, so it is off here.
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        attn_mask = attn_mask.float()
    with torch.autocast("cpu", enabled=False):
        out = F.scaled_dot_product_attention(
            q.float(), k.float(), v.float(), attn_mask=attn_mask, **kwargs
        )
    return out.to(q.dtype)


def masked_fused_attention(
    q, k, v, attend=None, bias=None, *, may_empty_rows=True, **kwargs
) -> Tensor:
    r""":func:`fused_attention` with the package's masks: a "may attend"
    mask ``attend`` and/or an additive ``bias`` (ALiBi's), and a query that
    may attend to nothing gets a zero output -- what the eager
    :func:`dot_product_attention` gives, where torch's kernels differ (some
    give NaN, and NaN in the backward pass). ``kwargs`` are
    :func:`fused_attention`'s.

    The empty rows attend to every key inside the kernel, and their output is
    zeroed after; ``may_empty_rows=False`` (a bias that never empties a row,
    as ALiBi's, or a :class:`StaticKVCache`'s mask, where every query reads
    its own key) skips the two passes over the scores' shape that finding
    them costs.
    """
    if bias is not None:
        check_bias(bias, (*q.shape[:-1], k.shape[-2]))
    if attend is None and bias is None:
        return fused_attention(q, k, v, **kwargs)
    # A bool mask as it is, when no row can be empty; else an empty row
    # (:math:`\alpha_{ij} = 0/0`) reads every key inside the kernel.
    empty_rows = None
    if bias is None and not may_empty_rows:
        attn_mask = attend
    elif bias is None:
        empty_rows = ~attend.any(dim=-1, keepdim=True)
        attn_mask = attend | empty_rows
    # Mask and bias as one additive float mask: the bias, with
    # :math:`-\infty` where attention is not allowed, since
    # :math:`e^{-\infty} = 0`.
    else:
        attn_mask = bias.to(q.dtype)
        if attend is not None:
            attn_mask = attn_mask.masked_fill(~attend, float("-inf"))
        if may_empty_rows:
            empty_rows = (attn_mask == float("-inf")).all(dim=-1, keepdim=True)
            attn_mask = attn_mask.masked_fill(empty_rows, 0.0)
    # The mask goes in as 4-D ``[batch|1, heads|1, q_len, k_len]``: torch's
    # fused CPU kernel refuses a 3-D one and falls back to its unfused path
    # (5.9x slower than causal attention at :math:`L = 2048`, against 1.8x).
    attn_mask = attn_mask.view(
        (1,) * (q.dim() - attn_mask.dim()) + attn_mask.shape
    )
    out = fused_attention(q, k, v, attn_mask=attn_mask, **kwargs)
    return out if empty_rows is None else out.masked_fill(empty_rows, 0.0)


# -----------------------------------------------------------------------------
# Functions: the softmax, the masks, and attention itself.


def masked_softmax(
    scores: Tensor, mask: Tensor | None = None, dim: int = -1
) -> Tensor:
    r"""Softmax of ``scores`` over ``dim`` that gives masked entries exactly
    zero weight: :math:`\alpha_j = e^{s_j} / \sum_{j' \in M} e^{s_{j'}}` for
    :math:`j` in the kept set :math:`M`, else 0.

    scores: ``[..., n]`` floats; entries equal to :math:`-\infty` (say, from
    an additive bias) count as masked. mask: bool broadcastable to
    ``scores``, True = keep. Returns weights of the shape of ``scores``; a row
    with nothing left gets all zeros.
    """
    check_softmax_inputs(scores, mask, dim)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    # A row that is all :math:`-\infty` would be :math:`e^{-\infty} / \sum_j
    # e^{-\infty} = 0/0 = \text{NaN}`. Zeroing it afterwards would fix the
    # forward pass only: the softmax's backward multiplies by its NaN output,
    # and :math:`\text{NaN} \cdot 0 = \text{NaN}`. So such rows get finite
    # scores before the softmax, and zero weights after it.
    empty_rows = (scores == float("-inf")).all(dim=dim, keepdim=True)
    weights = torch.softmax(scores.masked_fill(empty_rows, 0.0), dim=dim)
    return weights.masked_fill(empty_rows, 0.0)


def causal_mask(
    q_len: int, k_len: int | None = None, device=None, q_offset=None
) -> Tensor:
    r"""Bool ``[q_len, k_len]``, True where query i may attend to key j, i.e.
    key j is not in its future: :math:`j \le q_\text{offset} + i`.

    Query i sits at index ``q_offset + i`` among the keys, by default
    ``k_len - q_len + i``: the queries are the *last* q_len of the k_len
    positions, which is what a key/value cache holds when decoding q_len new
    tokens. The package's one causal mask: attention, ALiBi's bias and gMLP's
    W all take theirs from here.
    """
    check_positive_int("q_len", q_len)
    k_len = q_len if k_len is None else check_positive_int("k_len", k_len)
    if q_offset is None:
        if k_len < q_len:
            raise ValueError(
                "causal_mask needs q_len <= k_len (the queries are the last"
                f" q_len keys), got q_len={q_len}, k_len={k_len}; or pass"
                " q_offset"
            )
        q_offset = k_len - q_len
    else:
        check_non_negative_int("q_offset", q_offset)
    # Query i at :math:`q_\text{offset} + i` among the keys; the mask is the
    # lower triangle shifted right by :math:`q_\text{offset}`.
    query_index = torch.arange(q_offset, q_offset + q_len, device=device)
    key_index = torch.arange(k_len, device=device)
    return key_index[None, :] <= query_index[:, None]


def zero_padding(x: Tensor, token_mask: Tensor | None) -> Tensor:
    r"""x ``[batch, seq, ...]`` with its padded positions (``token_mask``
    ``[batch, seq]`` False) set to 0; x itself when token_mask is None.

    ``torch.where``, not ``x * mask``: :math:`0 \cdot \infty` and :math:`0
    \cdot \text{NaN}` are NaN, whereas a selected zero is zero whatever the
    padding held, and passes a zero gradient back to it. Zeroing matters even
    where no real output reads a padded position: a layer's weight gradient
    :math:`\partial L / \partial W = \sum_t x_t^\top \delta_t` sums over
    every position, so a NaN left there would reach it.
    """
    if token_mask is None:
        return x
    check_padded(x, token_mask)
    # ``[batch, seq, 1, ...]``: one flag per position, over its features.
    keep = token_mask.view(*token_mask.shape, *[1] * (x.dim() - 2))
    return torch.where(
        keep, x, torch.zeros((), dtype=x.dtype, device=x.device)
    )


def token_mask_to_attention_mask(token_mask: Tensor) -> Tensor:
    """Turns a ``[batch, k_len]`` token mask (True = real token) into a
    ``[batch, 1, 1, k_len]`` "may attend" mask that broadcasts against
    ``[batch, heads, q_len, k_len]`` scores.
    """
    check_key_token_mask(token_mask)
    return token_mask[:, None, None, :]


def score_scale(q: Tensor, scale: float | None = None) -> float:
    r"""The factor the scores :math:`q \cdot k` are multiplied by: ``scale``
    (checked), or by default :math:`1/\sqrt{d_k}`, :math:`d_k` =
    ``q.shape[-1]``."""
    scale = check_scale(scale)
    if scale is None:
        # :math:`q \cdot k = \sum_{c=1}^{d_k} q_c k_c` sums :math:`d_k`
        # products: with independent unit-variance entries,
        # :math:`\operatorname{Var}(q \cdot k) = d_k`. Dividing by
        # :math:`\sqrt{d_k}` keeps the scores :math:`O(1)`, so the softmax
        # neither saturates nor starves its gradient.
        scale = 1.0 / math.sqrt(q.shape[-1])
    return scale


def dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    bias: Tensor | None = None,
    scale: float | None = None,
    dropout_p: float = 0.0,
) -> tuple[Tensor, Tensor]:
    r"""Eager attention that also returns its weights:
    :math:`\operatorname{softmax}(\sigma\, q k^\top + b)\, v`, with the
    scale :math:`\sigma` and bias :math:`b`.

    Unlike ``torch.nn.functional.scaled_dot_product_attention``, which returns
    the output alone, this returns ``(output, weights)``: it is the reference
    the fused kernels are checked against.

    q: ``[..., q_len, d_k]``, k: ``[..., k_len, d_k]``, v: ``[..., k_len,
    d_v]``. mask: bool broadcastable to ``[..., q_len, k_len]``, True = may
    attend. bias: float broadcastable to ``[..., q_len, k_len]``, added to the
    scores (ALiBi, relative positions). scale: defaults to
    :math:`1/\sqrt{d_k}`; ``scale=1.0`` gives the unscaled dot product.
    dropout_p: dropout on the weights that multiply v (applied whenever > 0:
    pass 0 in eval). Returns
    ``(output [..., q_len, d_v], weights [..., q_len, k_len])``; the weights
    are the softmax before dropout, so each row sums to 1 (or is all zero, if
    it may attend to nothing).
    """
    scores_shape = check_qkv(q, k, v)
    check_same_device(q=q, mask=mask, bias=bias)
    check_dropout(dropout_p, "dropout_p")
    scale = score_scale(q, scale)
    if bias is not None:
        check_bias(bias, scores_shape)
    if mask is not None:
        check_attention_mask(mask, scores_shape)
    # :math:`s_{ij} = \sigma\, q_i \cdot k_j + b_{ij}`, ``[..., q_len,
    # k_len]``.
    scores = (q @ k.transpose(-2, -1)) * scale
    if bias is not None:
        scores = scores + bias
    # :math:`\alpha_{ij}`, exactly 0 where the mask says no.
    weights = masked_softmax(scores, mask)
    # :math:`\sum_j \alpha_{ij} v_j`; dropout drops weights *after* they
    # are returned, so the returned rows sum to 1.
    dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return dropped @ v, weights


def attention_in_blocks(
    q: Tensor, k: Tensor, v: Tensor, block_size: int = 64
) -> Tensor:
    r""":math:`\operatorname{softmax}(q k^\top / \sqrt{d_k})\, v` without
    ever holding all the scores:
    the keys are read ``block_size`` at a time, with the online softmax that
    fused kernels (FlashAttention) tile. For teaching and testing; the layers
    call torch's fused kernel.

    Per query it keeps three running values over the keys read so far: the
    largest score :math:`m`, the sum :math:`\ell = \sum_j e^{s_j - m}`, and
    the weighted sum of the values :math:`o = \sum_j e^{s_j - m} v_j`. A new
    block whose scores reach :math:`m' > m` rescales both sums by
    :math:`e^{m - m'}`; at the end :math:`o / \ell` is the softmax average.
    Memory: ``[..., q_len, block_size]`` scores at a time instead of ``[...,
    q_len, k_len]``. No mask (every query reads every key).

    q ``[..., q_len, d_k]``, k ``[..., k_len, d_k]``, v ``[..., k_len, d_v]``
    -> ``[..., q_len, d_v]``.
    """
    check_qkv(q, k, v)
    check_positive_int("block_size", block_size)
    scale = score_scale(q)
    # :math:`m = -\infty`, :math:`\ell = 0`, :math:`o = 0` before any key.
    rows = q.shape[:-1] + (1,)
    largest = torch.full(rows, -math.inf, dtype=q.dtype, device=q.device)
    total = torch.zeros(rows, dtype=q.dtype, device=q.device)
    out = torch.zeros(
        q.shape[:-1] + v.shape[-1:], dtype=q.dtype, device=q.device
    )
    # One block of keys at a time: :math:`m' = \max(m, \max_j s_j)`, both
    # sums rescaled by :math:`e^{m - m'}` (0 at the first block, where
    # :math:`m = -\infty`), then the block's terms added.
    for start in range(0, k.shape[-2], block_size):
        keys = k[..., start : start + block_size, :]
        scores = (q @ keys.transpose(-2, -1)) * scale  # [..., q_len, block]
        new_largest = torch.maximum(largest, scores.amax(-1, keepdim=True))
        rescale = torch.exp(largest - new_largest)  # e^(m - m'); 0 at first
        weights = torch.exp(scores - new_largest)  # each at most 1
        total = total * rescale + weights.sum(-1, keepdim=True)
        out = out * rescale + weights @ v[..., start : start + block_size, :]
        largest = new_largest
    # :math:`o / \ell = \sum_j e^{s_j} v_j / \sum_j e^{s_j}`.
    return out / total


# -----------------------------------------------------------------------------
# Layers with a single score function.


class DotProductAttention(nn.Module):
    r""":func:`dot_product_attention` as a module, with dropout on the weights
    while training: :math:`\operatorname{softmax}(q k^\top / \sqrt{d_k})\,
    v` by default, the blog post's layer with its temperature restored.

    forward(q ``[..., q_len, d_k]``, k ``[..., k_len, d_k]``, v ``[..., k_len,
    d_v]``, mask, bias, need_weights) -> output ``[..., q_len, d_v]``, or
    ``(output, weights [..., q_len, k_len])``.
    """

    def __init__(self, dropout: float = 0.0, scale: float | None = None):
        super().__init__()
        self.dropout, self.scale = check_dropout(dropout), check_scale(scale)

    def forward(
        self, q, k, v, mask=None, bias=None, need_weights: bool = False
    ):
        check_bool("need_weights", need_weights)
        dropout_p = self.dropout if self.training else 0.0
        out, weights = dot_product_attention(
            q, k, v, mask, bias, self.scale, dropout_p
        )
        return (out, weights) if need_weights else out


class SingleLayerAttention(nn.Module):
    r"""Attention scored by one learned vector, as in the blog post:
    :math:`s_{ij} = \operatorname{LeakyReLU}\big((q_i - k_j)^\top w\big)`.

    This is a variant of additive attention :math:`u^\top \tanh(W_q q_i + W_k
    k_j)` with a one-unit hidden layer: :math:`W_q = w^\top`, :math:`W_k =
    -w^\top` (the same vector with a sign flip), LeakyReLU for tanh and
    :math:`u = 1`. Since the score is monotone in :math:`q_i^\top w -
    k_j^\top w`, every query ranks the keys alike.

    forward(q ``[..., q_len, d_k]``, k ``[..., k_len, d_k]``, v ``[..., k_len,
    d_v]``, mask bool ``[..., q_len, k_len]``, need_weights) -> output ``[...,
    q_len, d_v]``, or ``(output, weights [..., q_len, k_len])``.
    """

    def __init__(
        self, d_k: int, dropout: float = 0.0, negative_slope: float = 0.01
    ):
        super().__init__()
        self.d_k, self.negative_slope = (
            check_positive_int("d_k", d_k),
            check_finite_float("negative_slope", negative_slope),
        )
        self.weight = nn.Parameter(torch.empty(d_k, 1))
        nn.init.xavier_normal_(self.weight)
        self.dropout = nn.Dropout(check_dropout(dropout))

    def forward(self, q, k, v, mask=None, need_weights: bool = False):
        scores_shape = check_qkv(q, k, v)
        if q.shape[-1] != self.d_k:
            raise ValueError(
                f"q must have shape [..., q_len, d_k={self.d_k}], got"
                f" {tuple(q.shape)}"
            )
        if mask is not None:
            check_attention_mask(mask, scores_shape)
        check_bool("need_weights", need_weights)
        # :math:`(q_i - k_j)^\top w = q_i^\top w - k_j^\top w`: two
        # matrix-vector products and a broadcast subtraction give every score,
        # without the ``[q_len, k_len, d_k]`` tensor of differences.
        q_scores = q @ self.weight  # [..., q_len, 1]
        k_scores = (k @ self.weight).transpose(-2, -1)  # [..., 1, k_len]
        scores = F.leaky_relu(q_scores - k_scores, self.negative_slope)
        weights = masked_softmax(scores, mask)
        out = self.dropout(weights) @ v
        return (out, weights) if need_weights else out


class AdditiveAttention(nn.Module):
    r"""Bahdanau attention: :math:`s_{ij} = u^\top \tanh(W_q q_i + W_k
    k_j)`; q and k may differ in width.

    :math:`W_q` is ``q_proj``, :math:`W_k` is ``k_proj`` and :math:`u` is
    ``score_proj`` (no biases, Xavier init). forward(q ``[..., q_len, d_q]``,
    k ``[..., k_len, d_k]``, v ``[..., k_len, d_v]``, mask bool ``[..., q_len,
    k_len]``, need_weights) -> output ``[..., q_len, d_v]``, or ``(output,
    weights [..., q_len, k_len])``.
    """

    def __init__(
        self, d_q: int, d_k: int, d_hidden: int, dropout: float = 0.0
    ):
        super().__init__()
        for name, value in (
            ("d_q", d_q),
            ("d_k", d_k),
            ("d_hidden", d_hidden),
        ):
            check_positive_int(name, value)
        self.q_proj = nn.Linear(d_q, d_hidden, bias=False)
        self.k_proj = nn.Linear(d_k, d_hidden, bias=False)
        self.score_proj = nn.Linear(d_hidden, 1, bias=False)
        for layer in (self.q_proj, self.k_proj, self.score_proj):
            nn.init.xavier_uniform_(layer.weight)
        self.dropout = nn.Dropout(check_dropout(dropout))

    def forward(self, q, k, v, mask=None, need_weights: bool = False):
        scores_shape = check_qkv(q, k, v, same_d=False)
        if (
            q.shape[-1] != self.q_proj.in_features
            or k.shape[-1] != self.k_proj.in_features
        ):
            raise ValueError(
                "q and k must have shapes [..., q_len,"
                f" d_q={self.q_proj.in_features}] and [..., k_len,"
                f" d_k={self.k_proj.in_features}], got {tuple(q.shape)},"
                f" {tuple(k.shape)}"
            )
        if mask is not None:
            check_attention_mask(mask, scores_shape)
        check_bool("need_weights", need_weights)
        # :math:`\tanh(W_q q_i + W_k k_j)`: ``[..., q_len, 1, d_hidden] +
        # [..., 1, k_len, d_hidden]``, one hidden vector per pair
        # :math:`(i, j)`.
        hidden = torch.tanh(
            self.q_proj(q).unsqueeze(-2) + self.k_proj(k).unsqueeze(-3)
        )
        scores = self.score_proj(hidden).squeeze(-1)  # [..., q_len, k_len]
        weights = masked_softmax(scores, mask)
        out = self.dropout(weights) @ v
        return (out, weights) if need_weights else out


# -----------------------------------------------------------------------------
# A key/value cache: decoding one token at a time without recomputing the past.


class _CheckedUse:
    """What both caches check of their use (``check_cache_use``): the keys and
    values of one causal layer, for one batch. A cache is bound to both at
    its first use, and refuses any other layer or batch size."""

    owner = None  # a weak reference to the layer, from the first use
    batch: int | None = None  # the batch size, from the first use

    def check_use(self, layer, query: Tensor) -> None:
        self.owner, self.batch = check_cache_use(self, layer, query)


class KVCache(_CheckedUse):
    r"""The keys and values a self-attention layer has made so far, for
    decoding token by token.

    A language model writes one token at a time, and attention's keys and
    values for the tokens before it do not change when it does (causal
    attention: no token reads its future). So each layer keeps them, ``k`` and
    ``v`` ``[batch, heads, seq, d_head]``, and a new token projects only its
    own query, key and value: one row of attention per token instead of the
    whole window, :math:`O(n d)` per token instead of :math:`O(n^2 d)`. The
    keys are stored *after* positions are applied (a rotary key stays rotated
    to its own position), so they are read as they were made.

    ``position`` counts the tokens seen (the position of the next one).
    ``max_context`` (None: every token) keeps only the last ``max_context``
    keys and values: sliding-window attention, each new token reading at most
    that many. It grows by ``torch.cat``, the fewest operations per token on a
    CPU; a GPU decodes with ``StaticKVCache``, written in place.
    """

    def __init__(self, max_context: int | None = None):
        self.max_context = (
            None
            if max_context is None
            else check_positive_int("max_context", max_context)
        )
        self.k: Tensor | None = None
        self.v: Tensor | None = None
        self.position = 0

    def extend(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Appends the new tokens' k, v ``[batch, heads, new, d_head]``;
        returns every key and value a new token may read, ``[batch, heads, seq,
        d_head]``, the new ones last.
        """
        if self.max_context is not None and k.shape[-2] > self.max_context:
            raise ValueError(
                f"{k.shape[-2]} new tokens at once exceed"
                f" max_context={self.max_context}: the first of them would"
                " lose keys they may read; feed at most max_context tokens at"
                " a time"
            )
        # The new tokens' keys and values join the end: the queries are the
        # last keys, :math:`q_\text{offset} = k_\text{len} - q_\text{len}`.
        self.k = k if self.k is None else torch.cat([self.k, k], dim=-2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=-2)
        self.position += k.shape[-2]
        # A sliding window of :math:`w` = ``max_context`` keys: the oldest go.
        if self.max_context is not None:
            self.k, self.v = (
                self.k[..., -self.max_context :, :],
                self.v[..., -self.max_context :, :],
            )
        return self.k, self.v


class StaticKVCache(_CheckedUse):
    r"""A ``KVCache`` whose buffers are allocated once and written in place:
    what a GPU decodes with.

    ``KVCache`` grows by ``torch.cat``, a new tensor (and a copy of every key
    so far) for every token, and its length, a Python number, changes the
    shapes of every step. Here ``k`` and ``v`` ``[batch, heads, capacity,
    d_head]`` are made at the first write and never reallocated; token t goes
    to slot ``t mod capacity`` (a ring: once full, a new token overwrites the
    oldest), and ``key_positions`` ``[capacity]`` records which position each
    slot holds (-1: empty). The position counter is a 0-d tensor on the
    cache's device, advanced in place. So a step reads and writes the same
    memory, with the same shapes, whatever token it decodes: a CUDA graph
    recorded once can replay it (``LanguageModel.generate``).

    Every key read is chosen by a mask from positions, not by slicing: query
    position :math:`p` reads slot :math:`j` when :math:`p - c < P_j \le p`,
    with :math:`c` the capacity -- its own key and the :math:`c - 1` before
    it (sliding-window attention once the ring is full; every token so far
    while it is not).
    """

    def __init__(self, capacity: int):
        self.capacity = check_positive_int("capacity", capacity)
        self.k: Tensor | None = None
        self.v: Tensor | None = None
        self.key_positions: Tensor | None = None
        self.position: Tensor | None = None

    def next_positions(self, n: int, device) -> Tensor:
        """The positions ``[n]`` of the next n tokens (int64, no host read)."""
        if n > self.capacity:
            raise ValueError(
                f"{n} new tokens at once exceed capacity={self.capacity}:"
                " the first of them would lose keys they may read; feed at"
                " most capacity tokens at a time"
            )
        if self.position is None:
            self.position = torch.zeros((), dtype=torch.long, device=device)
        return self.position + torch.arange(n, device=device)

    def write(self, k: Tensor, v: Tensor, positions: Tensor):
        """Writes the new tokens' k, v ``[batch, heads, n, d_head]`` at
        ``positions`` (from ``next_positions``) into their slots and advances
        the counter; returns the whole buffers ``k, v`` and the "may attend"
        mask ``[n, capacity]`` of the new queries."""
        if self.k is None:
            shape = (*k.shape[:2], self.capacity, k.shape[-1])
            self.k = k.new_zeros(shape)
            self.v = v.new_zeros((*shape[:3], v.shape[-1]))
            self.key_positions = torch.full(
                (self.capacity,), -1, dtype=torch.long, device=k.device
            )
        # Token :math:`t` to slot :math:`t \bmod c`. Indexed assignment
        # (``index_put_``): torch.compile writes it in place.
        slots = positions % self.capacity
        self.k[:, :, slots] = k.to(self.k.dtype)
        self.v[:, :, slots] = v.to(self.v.dtype)
        self.key_positions[slots] = positions
        self.position.add_(positions.shape[0])
        # Query :math:`p` reads slot :math:`j` when :math:`p - c < P_j \le p`
        # (an empty slot holds :math:`P_j = -1`).
        held = self.key_positions[None, :]
        query = positions[:, None]
        attend = (held >= 0) & (held <= query) & (held > query - self.capacity)
        return self.k, self.v, attend


class ProjectionRows:
    r"""Rows :math:`[i w, (i + 1) w)` (``index`` :math:`i`, ``width``
    :math:`w`) of a fused projection ``linear`` as a projection of their own:
    ``q_proj``, ``k_proj``, ``v_proj`` of a :class:`MultiHeadAttention` whose
    ``in_proj`` holds all three. ``weight`` and ``bias`` are views of its
    parameters (writing into them writes into ``in_proj``; gradients
    accumulate on ``in_proj.weight``), and calling it applies them: the
    layer's own q, k or v of an input."""

    def __init__(self, linear: nn.Linear, index: int, width: int):
        self.linear, self.rows = (
            linear,
            slice(index * width, (index + 1) * width),
        )
        self.in_features, self.out_features = linear.in_features, width

    @property
    def weight(self) -> Tensor:
        return self.linear.weight[self.rows]

    @property
    def bias(self) -> Tensor | None:
        bias = self.linear.bias
        return None if bias is None else bias[self.rows]

    def __call__(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def __repr__(self) -> str:
        return (
            f"ProjectionRows(rows {self.rows.start}:{self.rows.stop} of"
            f" {self.linear})"
        )


# -----------------------------------------------------------------------------
# Multi-head attention, the token mixer of the book's language model.


class MultiHeadAttention(nn.Module):
    r"""Batch-first multi-head attention with interchangeable backends and one
    set of weights.

    Each of the :math:`H` heads attends in its own slice of
    :math:`d_\text{head} = d_\text{model} / H` channels, and ``out_proj``
    mixes their outputs:

    .. math::

        \text{head}_h = \operatorname{softmax}\!\Big(
            \frac{Q_h K_h^\top}{\sqrt{d_\text{head}}}\Big)\, V_h

        \operatorname{MHA} = [\text{head}_1; \dots; \text{head}_H]\, W^O

    with :math:`Q_h = Q W^Q_h`, :math:`K_h = K W^K_h`, :math:`V_h = V W^V_h`.

    Arguments, shared by the whole family (:class:`AlibiMultiHeadAttention`,
    :class:`RotaryMultiHeadAttention`) with the same defaults:

    - ``d_model``, ``n_heads``: the width of a token and the number of heads
      (``d_model`` divisible by ``n_heads``);
    - ``dropout`` on the attention weights while training; ``bias``: the
      projections have biases;
    - ``causal`` (default False, as in torch): query i may not attend to keys
      after it;
    - ``kdim``, ``vdim``: widths of key and value inputs (default d_model);
    - ``backend`` (settable on the instance): "eager"
      (:func:`dot_product_attention`, which also gives the weights), "sdpa"
      (torch's fused kernel) or "auto" (the default: the fastest path the call
      allows; here the fused kernel);
    - ``scale`` multiplies the scores :math:`q \cdot k`: None (the default) is
      :math:`1/\sqrt{d_\text{head}}`; ``scale=1.0`` is the un-scaled dot
      product, kept to show why the scale matters;
    - ``cpu_bf16_sdpa_in_float32`` (default True): under bf16 autocast on a
      CPU, run torch's SDPA in float32 (see :func:`fused_attention`); False
      runs it in bf16 as torch would.

    Subclasses extend it through two hooks: ``attention_bias`` (ALiBi) and
    ``transform_qk`` (rotary embeddings).
    """

    BACKENDS = ("auto", "eager", "sdpa")
    # What a subclass's ``attention_bias`` guarantees, so that no pass over the
    # scores' shape is spent on it: whether it may leave a query no key (a row
    # all :math:`-\infty`; the SDPA path then looks for such rows), and
    # whether, in a causal layer, it already holds :math:`-\infty` at every
    # future key (then no causal mask is added to it). ALiBi's bias keeps the
    # diagonal and masks the future.
    bias_may_empty_rows = True
    bias_masks_future = False

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        causal: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        backend: str = "auto",
        scale: float | None = None,
        cpu_bf16_sdpa_in_float32: bool = True,
    ):
        super().__init__()
        check_attention_arguments(
            d_model,
            n_heads,
            kdim,
            vdim,
            dropout,
            scale,
            bias=bias,
            causal=causal,
            cpu_bf16_sdpa_in_float32=cpu_bf16_sdpa_in_float32,
        )
        self.d_model, self.n_heads = d_model, n_heads
        self.d_head = d_model // n_heads
        self.kdim = d_model if kdim is None else kdim
        self.vdim = d_model if vdim is None else vdim
        self.dropout, self.causal, self.backend = (
            float(dropout),
            causal,
            backend,
        )
        self.scale = None if scale is None else float(scale)
        self.cpu_bf16_sdpa_in_float32 = cpu_bf16_sdpa_in_float32
        # q, k and v as one product when they share their input width, as
        # nanoGPT's ``c_attn`` and torch's ``in_proj_weight``: ``in_proj``, a
        # :math:`3 d_\text{model} \times d_\text{model}` weight whose rows are
        # :math:`W^Q, W^K, W^V`. One product instead of three is one kernel
        # (and one cast under autocast), forward and backward; ``q_proj``,
        # ``k_proj`` and ``v_proj`` are views of its rows
        # (:class:`ProjectionRows`), with no parameters of their own.
        d = d_model
        if self.kdim == d and self.vdim == d:
            self.in_proj = nn.Linear(d, 3 * d, bias=bias)
            parts = [ProjectionRows(self.in_proj, i, d) for i in range(3)]
        # Other widths (``kdim``, ``vdim``): three layers, no ``in_proj``.
        else:
            self.in_proj = None
            widths = (d, self.kdim, self.vdim)
            parts = [nn.Linear(width, d, bias=bias) for width in widths]
        self.q_proj, self.k_proj, self.v_proj = parts
        self.out_proj = nn.Linear(d, d, bias=bias)
        # Each block of rows starts as one :math:`d \times d` layer would
        # (Xavier, :math:`U(\pm\sqrt{6 / 2d})`), in the order three layers
        # drew theirs; biases start at 0.
        for layer in (*parts, self.out_proj):
            nn.init.xavier_uniform_(layer.weight)
            if bias:
                nn.init.zeros_(layer.bias)

    @property
    def backend(self) -> str:
        return self._backend

    @backend.setter
    def backend(self, value: str):
        check_choice("backend", value, self.BACKENDS)
        self._backend = value

    def attention_bias(
        self, q_len: int, k_len: int, device, dtype
    ) -> Tensor | None:
        """Hook: an additive bias ``[heads, q_len, k_len]`` for the scores, or
        None. ALiBi overrides it."""
        return None

    def position_bias(
        self, query_positions: Tensor, key_positions: Tensor, dtype
    ) -> Tensor | None:
        """Hook: ``attention_bias`` from positions (``[q_len]``, ``[k_len]``,
        int64 tensors) rather than lengths: a :class:`StaticKVCache`'s keys
        sit in slots whose positions only the cache knows. ALiBi overrides
        it."""
        return None

    def _runs_flex(self, query, key, need_weights, cache) -> bool:
        """Hook: whether this call runs on the subclass's FlexAttention path,
        ``_flex_forward(query, key, value, mask, token_mask)``. Never here;
        ALiBi overrides it."""
        return False

    def transform_qk(
        self, q: Tensor, k: Tensor, q_offset: int, k_offset: int = 0
    ) -> tuple[Tensor, Tensor]:
        """Hook on q ``[batch, heads, q_len, d_head]`` and k ``[batch, heads,
        k_len, d_head]`` after the heads are split; query i sits at position
        ``q_offset + i``, key j at ``k_offset + j``, or, when the offsets are
        int64 tensors ``[q_len]`` and ``[k_len]`` (a :class:`StaticKVCache`),
        at the positions they hold. Identity here; rotary overrides it."""
        return q, k

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        *,
        mask: Tensor | None = None,
        token_mask: Tensor | None = None,
        need_weights: bool = False,
        cache: KVCache | StaticKVCache | None = None,
    ):
        """query ``[batch, q_len, d_model]``; key ``[batch, k_len, kdim]``
        (None: self-attention, key = value = query); value ``[batch, k_len,
        vdim]`` (None: value = key). mask: bool ``[q_len, k_len]`` or
        ``[batch|1, heads|1, q_len, k_len]``, True = may attend (the opposite
        of torch.nn.MultiheadAttention's ``attn_mask``); token_mask: bool
        ``[batch, k_len]``, True at real key tokens (the opposite of torch's
        ``key_padding_mask``). cache: a :class:`KVCache` or
        :class:`StaticKVCache` for decoding (self-attention, no masks): query
        holds the new tokens, which read every key the cache holds and their
        own; a cache serves one causal layer and one batch size. Returns
        output ``[batch, q_len, d_model]``, or ``(output, weights [batch,
        heads, q_len, k_len])`` with ``need_weights=True`` (eager).
        """
        # A subclass may run the call on a kernel of its own: ALiBi's flex
        # backend computes its bias inside the kernel.
        if self._runs_flex(query, key, need_weights, cache):
            return self._flex_forward(query, key, value, mask, token_mask)
        # One check of all the call was given; then :math:`Q W^Q, K W^K, V
        # W^V`, split into heads ``[batch, heads, seq, d_head]``.
        check_attention_call(
            self, query, key, value, mask, token_mask, cache, need_weights
        )
        q, k, v = self.project_heads(query, key, value, token_mask)
        q_len = q.shape[-2]
        # Query i sits at position :math:`k_\text{len} - q_\text{len} + i`:
        # the queries are the *last* :math:`q_\text{len}` keys. The caller's
        # mask and padding become one "may attend" mask ``attend``.
        if cache is None:
            k_len = k.shape[-2]
            q, k = self.transform_qk(q, k, q_offset=k_len - q_len)
            attend = mask
            if token_mask is not None:
                keys = token_mask_to_attention_mask(token_mask)
                attend = keys if mask is None else mask & keys
            bias = self.attention_bias(q_len, k_len, q.device, q.dtype)
        # A static cache (a GPU decoding): each new token at its position, a
        # tensor, so every step has the same shapes; the cache's mask says
        # which slot each query reads, and already holds causality.
        elif isinstance(cache, StaticKVCache):
            positions = cache.next_positions(q_len, q.device)
            q, k = self.transform_qk(q, k, positions, positions)
            k, v, attend = cache.write(k, v, positions)
            bias = self.position_bias(positions, cache.key_positions, q.dtype)
        # A growing cache: the new tokens at ``cache.position`` onwards read
        # every key it holds, theirs last.
        else:
            start = cache.position
            q, k = self.transform_qk(q, k, q_offset=start, k_offset=start)
            k, v = cache.extend(k, v)
            attend = None
            bias = self.attention_bias(q_len, k.shape[-2], q.device, q.dtype)
        # Every head at once: :math:`\operatorname{softmax}(\sigma\, q k^\top
        # + b)\, v` on the fastest path the call allows.
        whole_mask = isinstance(cache, StaticKVCache)
        out, weights = self._attend(
            q, k, v, attend, bias, need_weights, whole_mask
        )
        # :math:`[\text{head}_1; \dots; \text{head}_H]\, W^O`.
        out = self.out_proj(self.merge_heads(out))
        return (out, weights) if need_weights else out

    def _attend(self, q, k, v, attend, bias, need_weights, whole_mask=False):
        """The heads' attention, ``(out [batch, heads, q_len, d_head],
        weights or None)``, on the fastest path the call allows: eager when
        the weights are asked for (or backend "eager"), else torch's fused
        kernel. ``whole_mask``: ``attend`` already holds causality (a
        :class:`StaticKVCache`'s mask), and every query reads its own key."""
        q_len, k_len = q.shape[-2], k.shape[-2]
        dropout_p = self.dropout if self.training else 0.0
        eager = need_weights or self.backend == "eager"
        # Nothing but causality: the fused kernel skips the future without
        # reading a mask. (``is_causal`` aligns the mask top-left, which
        # matches ours only when :math:`q_\text{len} = k_\text{len}`.)
        is_causal = (
            self.causal
            and not (eager or whole_mask)
            and attend is None
            and bias is None
            and q_len == k_len
        )
        # Else the causal mask :math:`j \le k_\text{len} - q_\text{len} + i`
        # joins ``attend``, unless the bias holds :math:`-\infty` there.
        masked_by_bias = bias is not None and self.bias_masks_future
        if not (is_causal or whole_mask or masked_by_bias):
            attend = self._with_causal(attend, q_len, k_len, q.device)
        if eager:
            return dot_product_attention(
                q, k, v, attend, bias, self.scale, dropout_p
            )
        out = masked_fused_attention(
            q,
            k,
            v,
            attend,
            bias,
            may_empty_rows=not whole_mask
            and (attend is not None or self.bias_may_empty_rows),
            dropout_p=dropout_p,
            is_causal=is_causal,
            scale=self.scale,
            cpu_bf16_in_float32=self.cpu_bf16_sdpa_in_float32,
        )
        return out, None

    def _with_causal(self, attend, q_len, k_len, device):
        # One query sits at the last position: it may read every key.
        if not self.causal or q_len == 1:
            return attend
        causal = causal_mask(q_len, k_len, device=device)
        return causal if attend is None else attend & causal

    def project_heads(self, query, key, value, token_mask=None):
        """:math:`Q W^Q, K W^K, V W^V`, each split into heads ``[batch, heads,
        seq, d_head]``; key None is the query (self-attention), value None is
        the key."""
        key = query if key is None else key
        value = key if value is None else value
        # One product for all three only when all three *are* the query, the
        # same tensor: ``m(x, x, y)`` must read y. Equal values in another
        # tensor (a view, a clone) take the separate products, which give
        # the same answer; sharing one product between two tensors of equal
        # values would send the gradient of one to the other.
        fused = key is query and value is query
        # A padded key gets weight 0, but :math:`0 \cdot \text{NaN} =
        # \text{NaN}`: so padded inputs are zeroed before they are projected,
        # and whatever they hold never reaches a real token's output or
        # gradient. Queries given as the keys themselves (self-attention) are
        # the padded positions too, and are zeroed with them.
        if token_mask is not None:
            queries_are_keys = key is query
            given_key, key = key, zero_padding(key, token_mask)
            value = (
                key if value is given_key else zero_padding(value, token_mask)
            )
            query = key if queries_are_keys else query
        projected = self.project_qkv(query, key, value, fused)
        return tuple(self.split_heads(x) for x in projected)

    def project_qkv(self, query, key, value, fused: bool = False):
        """q, k, v ``[batch, seq, d_model]`` of the inputs. With ``in_proj``
        and ``fused`` (query, key and value one tensor), one product whose
        output splits into three (views, no copy), as nanoGPT's; a separate
        key and value read their own rows of the same weight (two products,
        or one when value is key)."""
        if self.in_proj is None:
            return self.q_proj(query), self.k_proj(key), self.v_proj(value)
        if fused:
            return self.in_proj(query).split(self.d_model, dim=-1)
        # Key and value one product: rows :math:`d..3d` of ``in_proj``.
        if value is key:
            d, bias = self.d_model, self.in_proj.bias
            kv_bias = None if bias is None else bias[d:]
            kv = F.linear(key, self.in_proj.weight[d:], kv_bias)
            return self.q_proj(query), *kv.split(d, dim=-1)
        return self.q_proj(query), self.k_proj(key), self.v_proj(value)

    def split_heads(self, x: Tensor) -> Tensor:
        """``[batch, seq, d_model]`` -> ``[batch, heads, seq, d_head]``: heads
        become a batch dim."""
        batch, seq, _ = x.shape
        return x.view(batch, seq, self.n_heads, self.d_head).transpose(1, 2)

    def merge_heads(self, x: Tensor) -> Tensor:
        """``[batch, heads, seq, d_head]`` -> ``[batch, seq, d_model]``."""
        batch, _, seq, _ = x.shape
        return x.transpose(1, 2).reshape(batch, seq, self.d_model)


def family_arguments(init):
    """Decorator for a subclass's ``__init__(self, *args, <its own
    keyword-only arguments>, **kwargs)`` that hands the family's arguments to
    :class:`MultiHeadAttention`: its signature, as ``help()``, the API page
    and ``inspect`` show it, is the base class's, then its own."""
    base = inspect.signature(MultiHeadAttention.__init__).parameters
    own = inspect.signature(init).parameters.values()
    own = [p for p in own if p.kind is inspect.Parameter.KEYWORD_ONLY]

    # A function of its own rather than ``init``: Sphinx reads a signature's
    # defaults from its function's source, and ``init``'s lacks the family's.
    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)

    __init__.__doc__, __init__.__qualname__ = init.__doc__, init.__qualname__
    __init__.__signature__ = inspect.Signature([*base.values(), *own])
    return __init__


# -----------------------------------------------------------------------------
# Bidirectional attention between a context and a question (BiDAF, HotpotQA).


class BiAttention(nn.Module):
    r"""Context-to-question and question-to-context attention with a trilinear
    similarity (BiDAF; the HotpotQA baseline's layer, as the blog post shows
    it).

    .. math::

        s_{ij} &= w_x^\top x_i + w_q^\top q_j \\
            &\quad + (x_i \odot w_\text{dot})^\top q_j,

    with :math:`w_x` = ``input_linear``, :math:`w_q` = ``memory_linear``,
    :math:`w_\text{dot}` = ``dot_scale``. Context-to-question: :math:`c_i =
    \sum_j \operatorname{softmax}_j(s_{ij})\, q_j`. Question-to-context:
    :math:`b = \operatorname{softmax}_i(\max_j s_{ij})`, :math:`\text{q2c} =
    \sum_i b_i x_i`.

    forward(x ``[batch, x_len, d_model]`` (context), question ``[batch, q_len,
    d_model]``, token_mask bool ``[batch, q_len]`` over the question's tokens,
    True = real token, False = padding) returns :math:`[x; c; x \odot c;
    \text{q2c} \odot c]` of
    shape ``[batch, x_len, 4 * d_model]``, and with ``need_weights=True``
    ``(output, (c2q_weights [batch, x_len, q_len], q2c_weights [batch,
    x_len]))``. Dropout (training only) applies to both inputs, as in the
    HotpotQA baseline.
    """

    def __init__(self, d_model: int, dropout: float = 0.0):
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.dropout = nn.Dropout(check_dropout(dropout))
        self.input_linear = nn.Linear(d_model, 1, bias=False)
        self.memory_linear = nn.Linear(d_model, 1, bias=False)
        # All three weight vectors start like ``nn.Linear``'s weights,
        # :math:`U(-1/\sqrt{d}, 1/\sqrt{d})`: the cross term is a linear
        # layer over the :math:`d` products :math:`x_i \odot q_j`, so it gets
        # the same rule.
        self.dot_scale = nn.Parameter(torch.empty(d_model))
        bound = 1.0 / math.sqrt(d_model)
        nn.init.uniform_(self.dot_scale, -bound, bound)

    def forward(
        self,
        x: Tensor,
        question: Tensor,
        token_mask: Tensor | None = None,
        need_weights: bool = False,
    ):
        check_context_and_question(x, question, token_mask, self.d_model)
        check_bool("need_weights", need_weights)
        # Padded question tokens are zeroed first: their weight is 0, but
        # :math:`0 \cdot \text{NaN} = \text{NaN}`.
        x, question = (
            self.dropout(x),
            self.dropout(zero_padding(question, token_mask)),
        )
        # :math:`s_{ij}`, ``[batch, x_len, q_len]``: the three terms, each
        # broadcast over the other sequence.
        scores = (
            self.input_linear(x)  # [batch, x_len, 1]
            + self.memory_linear(question).transpose(1, 2)  # [batch, 1, q_len]
            + (x * self.dot_scale) @ question.transpose(1, 2)
        )
        if token_mask is not None:
            # :math:`-\infty` drops padding from both the softmax over
            # :math:`j` and the max over :math:`j` below.
            scores = scores.masked_fill(~token_mask[:, None, :], float("-inf"))
        # :math:`c_i = \sum_j \operatorname{softmax}_j(s_{ij})\, q_j`.
        c2q_weights = masked_softmax(scores)  # [batch, x_len, q_len]
        c2q = c2q_weights @ question  # [batch, x_len, d_model]
        # Each context word is scored by its best match in the question,
        # :math:`\max_j s_{ij}`; one summary of the context, weighted by
        # those scores, is shared by all positions.
        q2c_weights = masked_softmax(scores.amax(dim=-1))  # [batch, x_len]
        q2c = q2c_weights.unsqueeze(1) @ x  # [batch, 1, d_model]
        output = torch.cat([x, c2q, x * c2q, q2c * c2q], dim=-1)
        return (output, (c2q_weights, q2c_weights)) if need_weights else output
