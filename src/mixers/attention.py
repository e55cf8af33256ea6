"""Attention: the token mixer that lets every position read from every other one.

Each layer here computes ``softmax(score(q, k)) @ v``; they differ only in the score:

- scaled dot product, ``q·k / sqrt(d_k)`` (Vaswani et al., 2017): ``scaled_dot_product_attention``,
  ``DotProductAttention`` and, with learned projections and several heads, ``MultiHeadAttention``;
- additive, ``vᵀ tanh(W_q q + W_k k)`` (Bahdanau et al., 2015): ``AdditiveAttention``, and its
  one-vector cousin ``SingleLayerAttention``;
- trilinear, read in both directions (BiDAF, Seo et al., 2017): ``BiAttention``.

Conventions shared by everything below:

- tensors are batch-first, ``[batch, seq, d_model]``; heads are ``[batch, heads, seq, d_head]``,
  the layout of ``torch.nn.functional.scaled_dot_product_attention``;
- a boolean ``mask`` is True where a query *may attend* to a key (as in torch's SDPA), while a
  ``key_padding_mask`` is True at *padding* (as in ``torch.nn.MultiheadAttention``);
- a masked key gets exactly zero weight, and a query with nothing to attend to gets zero
  weights and a zero output -- never NaN, in the forward or the backward pass.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "scaled_dot_product_attention", "masked_softmax", "causal_mask", "key_padding_to_mask",
    "DotProductAttention", "SingleLayerAttention", "AdditiveAttention", "MultiHeadAttention",
    "BiAttention", "fused_attention",
]

# ---------------------------------------------------------------------------------------------
# torch's fused kernel, and where it runs faster in float32.


def fused_attention(q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None = None,
                    **kwargs) -> Tensor:
    """``torch.nn.functional.scaled_dot_product_attention``, but bf16 on the CPU runs in float32.

    Under CPU autocast, q, k and v arrive in bfloat16, and torch's CPU flash-attention kernel is
    two to three times *slower* in bfloat16 than in float32 (torch 2.13 on AVX-512; measured by
    ``python -m mixers.bench.cpu_precision``), while the projections around it are two to three
    times faster. So the scores are computed in float32 there -- faster and more exact -- and the
    output is cast back to bf16. Any other dtype or device: torch's call as is.
    """
    if q.device.type != "cpu" or q.dtype != torch.bfloat16:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, **kwargs)
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        attn_mask = attn_mask.float()
    with torch.autocast("cpu", enabled=False):  # CPU autocast would cast the inputs back to bf16
        out = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=attn_mask, **kwargs)
    return out.to(q.dtype)


# ---------------------------------------------------------------------------------------------
# Input checks. Each error names the argument and the shape it expected.


def _check_tensor(x, name: str, expected: str, ndim: int | None = None, min_ndim: int = 2):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape {expected}, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if (ndim is not None and x.dim() != ndim) or x.dim() < min_ndim:
        raise ValueError(f"{name} must have shape {expected}, got {tuple(x.shape)}")


def _check_scores_like(t, name: str, target, expected: str, is_mask: bool = True):
    """Checks a mask (bool, True = may attend) or an additive bias (float) against the scores' shape."""
    if not isinstance(t, Tensor) or (t.dtype != torch.bool if is_mask else not t.is_floating_point()):
        kind = "a bool tensor (True = may attend)" if is_mask else "a floating-point (additive) tensor"
        got = t.dtype if isinstance(t, Tensor) else type(t).__name__
        raise TypeError(f"{name} must be {kind} broadcastable to {expected}, got {got}")
    try:
        fits = torch.broadcast_shapes(t.shape, target) == torch.Size(target)
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(f"{name} of shape {tuple(t.shape)} does not broadcast to {expected} = {tuple(target)}")


def _check_dropout(p):
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout must be a probability in [0, 1), got {p}")


def _check_qkv(q, k, v, same_d: bool = True) -> tuple[int, ...]:
    """Checks q [..., q_len, d_k], k [..., k_len, d_k], v [..., k_len, d_v]; returns the scores' shape."""
    _check_tensor(q, "q", "[..., q_len, d_k]")
    _check_tensor(k, "k", "[..., k_len, d_k]")
    _check_tensor(v, "v", "[..., k_len, d_v]")
    if same_d and k.shape[-1] != q.shape[-1]:
        raise ValueError(f"k must have the last dim d_k={q.shape[-1]} of q, got shape {tuple(k.shape)}")
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(f"v must have shape [..., k_len={k.shape[-2]}, d_v] like k, got {tuple(v.shape)}")
    try:
        batch_shape = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(f"the leading dims of q {tuple(q.shape)}, k {tuple(k.shape)} and "
                         f"v {tuple(v.shape)} must broadcast") from None
    return (*batch_shape, q.shape[-2], k.shape[-2])


# ---------------------------------------------------------------------------------------------
# Functions: the softmax, the masks, and attention itself.


def masked_softmax(scores: Tensor, mask: Tensor | None = None, dim: int = -1) -> Tensor:
    """Softmax of ``scores`` over ``dim`` that gives masked entries exactly zero weight.

    scores: ``[..., n]`` floats; entries equal to -inf (say, from an additive bias) count as masked.
    mask:   bool broadcastable to ``scores``, True = keep.
    Returns weights of the shape of ``scores``; a row with nothing left gets all zeros.
    """
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    # A row that is all -inf would be exp(-inf) / sum = 0/0 = NaN. Zeroing it afterwards would fix
    # the forward pass only: the softmax's backward multiplies by its NaN output, and NaN * 0 is
    # NaN. So such rows get finite scores before the softmax, and zero weights after it.
    empty_rows = (scores == float("-inf")).all(dim=dim, keepdim=True)
    weights = torch.softmax(scores.masked_fill(empty_rows, 0.0), dim=dim)
    return weights.masked_fill(empty_rows, 0.0)


def causal_mask(q_len: int, k_len: int | None = None, device=None) -> Tensor:
    """Bool ``[q_len, k_len]``, True where query i may attend to key j, i.e. key j is not in its future.

    Query i sits at position ``k_len - q_len + i``: the queries are the *last* q_len of the k_len
    positions, which is what a key/value cache holds when decoding q_len new tokens.
    """
    k_len = q_len if k_len is None else k_len
    if q_len < 1 or k_len < q_len:
        raise ValueError(f"causal_mask needs 1 <= q_len <= k_len, got q_len={q_len}, k_len={k_len}")
    query_positions = torch.arange(k_len - q_len, k_len, device=device)
    key_positions = torch.arange(k_len, device=device)
    return key_positions[None, :] <= query_positions[:, None]


def key_padding_to_mask(key_padding_mask: Tensor) -> Tensor:
    """Turns a ``[batch, k_len]`` padding mask (True = padding) into a ``[batch, 1, 1, k_len]``
    "may attend" mask that broadcasts against ``[batch, heads, q_len, k_len]`` scores."""
    if not isinstance(key_padding_mask, Tensor) or key_padding_mask.dtype != torch.bool:
        raise TypeError("key_padding_mask must be a bool tensor [batch, k_len] (True = padding)")
    if key_padding_mask.dim() != 2:
        raise ValueError(f"key_padding_mask must have shape [batch, k_len], got {tuple(key_padding_mask.shape)}")
    return ~key_padding_mask[:, None, None, :]


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None,
                                 bias: Tensor | None = None, scale: float | None = None,
                                 dropout_p: float = 0.0) -> tuple[Tensor, Tensor]:
    """Eager attention that also returns its weights: ``softmax(q kᵀ * scale + bias) v``.

    q: ``[..., q_len, d_k]``, k: ``[..., k_len, d_k]``, v: ``[..., k_len, d_v]``.
    mask: bool broadcastable to ``[..., q_len, k_len]``, True = may attend.
    bias: float broadcastable to ``[..., q_len, k_len]``, added to the scores (ALiBi, relative positions).
    scale: defaults to ``1/sqrt(d_k)``; ``scale=1.0`` gives the unscaled dot product.
    dropout_p: dropout on the weights that multiply v (applied whenever > 0: pass 0 in eval).
    Returns ``(output [..., q_len, d_v], weights [..., q_len, k_len])``; the weights are the
    softmax before dropout, so each row sums to 1 (or is all zero, if it may attend to nothing).
    """
    scores_shape = _check_qkv(q, k, v)
    _check_dropout(dropout_p)
    if scale is None:
        # q·k sums d_k products: with unit-variance entries its variance is d_k. Dividing by
        # sqrt(d_k) keeps scores O(1), so the softmax neither saturates nor starves its gradient.
        scale = 1.0 / math.sqrt(q.shape[-1])
    scores = (q @ k.transpose(-2, -1)) * scale
    if bias is not None:
        _check_scores_like(bias, "bias", scores_shape, "[..., q_len, k_len]", is_mask=False)
        scores = scores + bias
    if mask is not None:
        _check_scores_like(mask, "mask", scores_shape, "[..., q_len, k_len]")
    weights = masked_softmax(scores, mask)
    dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return dropped @ v, weights


# ---------------------------------------------------------------------------------------------
# Layers with a single score function.


class DotProductAttention(nn.Module):
    """``scaled_dot_product_attention`` as a module, with dropout on the weights while training.

    forward(q ``[..., q_len, d_k]``, k ``[..., k_len, d_k]``, v ``[..., k_len, d_v]``, mask, bias)
    -> ``(output [..., q_len, d_v], weights [..., q_len, k_len])``.
    """

    def __init__(self, dropout: float = 0.0, scale: float | None = None):
        super().__init__()
        _check_dropout(dropout)
        self.dropout, self.scale = dropout, scale

    def forward(self, q, k, v, mask=None, bias=None):
        dropout_p = self.dropout if self.training else 0.0
        return scaled_dot_product_attention(q, k, v, mask, bias, self.scale, dropout_p)


class SingleLayerAttention(nn.Module):
    """Attention scored by one learned vector: ``score(i, j) = LeakyReLU((q_i - k_j) · w)``.

    This is a variant of additive attention ``vᵀ tanh(W_q q_i + W_k k_j)`` with a one-unit hidden
    layer: ``W_q = w``, ``W_k = -w`` (the same vector with a sign flip), LeakyReLU for tanh and
    ``v = 1``. Since the score is monotone in ``q_i·w - k_j·w``, every query ranks the keys alike.

    forward(q ``[..., q_len, d_k]``, k ``[..., k_len, d_k]``, v ``[..., k_len, d_v]``,
    mask bool ``[..., q_len, k_len]``) -> ``(output [..., q_len, d_v], weights [..., q_len, k_len])``.
    """

    def __init__(self, d_k: int, dropout: float = 0.0, negative_slope: float = 0.01):
        super().__init__()
        self.d_k, self.negative_slope = d_k, negative_slope
        self.weight = nn.Parameter(torch.empty(d_k, 1))
        nn.init.xavier_normal_(self.weight)
        self.dropout = nn.Dropout(dropout)

    def forward(self, q, k, v, mask=None):
        scores_shape = _check_qkv(q, k, v)
        if q.shape[-1] != self.d_k:
            raise ValueError(f"q must have shape [..., q_len, d_k={self.d_k}], got {tuple(q.shape)}")
        if mask is not None:
            _check_scores_like(mask, "mask", scores_shape, "[..., q_len, k_len]")
        # (q_i - k_j)·w = q_i·w - k_j·w: two matrix-vector products and a broadcast subtraction
        # give every score, without the [q_len, k_len, d_k] tensor of differences.
        q_scores = q @ self.weight                                    # [..., q_len, 1]
        k_scores = (k @ self.weight).transpose(-2, -1)                # [..., 1, k_len]
        scores = F.leaky_relu(q_scores - k_scores, self.negative_slope)
        weights = masked_softmax(scores, mask)
        return self.dropout(weights) @ v, weights


class AdditiveAttention(nn.Module):
    """Bahdanau attention: ``score(i, j) = vᵀ tanh(W_q q_i + W_k k_j)``; q and k may differ in width.

    ``W_q`` is ``q_proj``, ``W_k`` is ``k_proj`` and ``v`` is ``score_proj`` (no biases, Xavier init).
    forward(q ``[..., q_len, d_q]``, k ``[..., k_len, d_k]``, v ``[..., k_len, d_v]``,
    mask bool ``[..., q_len, k_len]``) -> ``(output [..., q_len, d_v], weights [..., q_len, k_len])``.
    """

    def __init__(self, d_q: int, d_k: int, d_hidden: int, dropout: float = 0.0):
        super().__init__()
        self.q_proj = nn.Linear(d_q, d_hidden, bias=False)
        self.k_proj = nn.Linear(d_k, d_hidden, bias=False)
        self.score_proj = nn.Linear(d_hidden, 1, bias=False)
        for layer in (self.q_proj, self.k_proj, self.score_proj):
            nn.init.xavier_uniform_(layer.weight)
        self.dropout = nn.Dropout(dropout)

    def forward(self, q, k, v, mask=None):
        scores_shape = _check_qkv(q, k, v, same_d=False)
        if q.shape[-1] != self.q_proj.in_features or k.shape[-1] != self.k_proj.in_features:
            raise ValueError(f"q and k must have shapes [..., q_len, d_q={self.q_proj.in_features}] and "
                             f"[..., k_len, d_k={self.k_proj.in_features}], got {tuple(q.shape)}, {tuple(k.shape)}")
        if mask is not None:
            _check_scores_like(mask, "mask", scores_shape, "[..., q_len, k_len]")
        # [..., q_len, 1, d_hidden] + [..., 1, k_len, d_hidden]: one hidden vector per (i, j) pair.
        hidden = torch.tanh(self.q_proj(q).unsqueeze(-2) + self.k_proj(k).unsqueeze(-3))
        scores = self.score_proj(hidden).squeeze(-1)                  # [..., q_len, k_len]
        weights = masked_softmax(scores, mask)
        return self.dropout(weights) @ v, weights


# ---------------------------------------------------------------------------------------------
# Multi-head attention, the token mixer of the book's language model.


class MultiHeadAttention(nn.Module):
    """Batch-first multi-head attention with two interchangeable backends and one set of weights.

    Projects query ``[batch, q_len, d_model]``, key ``[batch, k_len, kdim]`` and value
    ``[batch, k_len, vdim]`` with ``q_proj``, ``k_proj``, ``v_proj`` (as torch.nn.MultiheadAttention's
    ``in_proj_weight`` split in three), splits heads into ``[batch, n_heads, seq, d_head]``, attends,
    merges heads and applies ``out_proj``. ``backend`` (settable on the instance) picks "eager"
    (this module's ``scaled_dot_product_attention``) or "sdpa" (torch's fused kernel).

    ``scale`` multiplies the scores ``q·k``: None (the default) is ``1/sqrt(d_head)``; ``scale=1.0``
    is the un-scaled dot product of the seed code, kept to show why the scale matters. Both
    backends honour it.

    Subclasses extend it through two hooks: ``attention_bias`` (e.g. ALiBi) and ``transform_qk``
    (e.g. rotary embeddings).
    """

    BACKENDS = ("eager", "sdpa")

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True,
                 causal: bool = False, kdim: int | None = None, vdim: int | None = None,
                 backend: str = "sdpa", scale: float | None = None):
        super().__init__()
        if n_heads < 1 or d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
        _check_dropout(dropout)
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.kdim, self.vdim = kdim or d_model, vdim or d_model
        self.dropout, self.causal, self.backend = dropout, causal, backend
        if scale is not None and not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
            raise ValueError(f"scale must be None (1/sqrt(d_head)) or a positive finite float, got {scale!r}")
        self.scale = None if scale is None else float(scale)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(self.kdim, d_model, bias=bias)
        self.v_proj = nn.Linear(self.vdim, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        for layer in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
            nn.init.xavier_uniform_(layer.weight)
            if bias:
                nn.init.zeros_(layer.bias)

    @property
    def backend(self) -> str:
        return self._backend

    @backend.setter
    def backend(self, value: str):
        if value not in self.BACKENDS:
            raise ValueError(f"backend must be one of {self.BACKENDS}, got {value!r}")
        self._backend = value

    def attention_bias(self, q_len: int, k_len: int, device, dtype) -> Tensor | None:
        """Additive bias ``[heads, q_len, k_len]`` for the scores, or None. Override it (ALiBi)."""
        return None

    def transform_qk(self, q: Tensor, k: Tensor, q_offset: int) -> tuple[Tensor, Tensor]:
        """Hook on q ``[batch, heads, q_len, d_head]``, k ``[batch, heads, k_len, d_head]`` after the
        heads are split; query i sits at position ``q_offset + i``. Identity here; rotary overrides it."""
        return q, k

    def forward(self, query: Tensor, key: Tensor | None = None, value: Tensor | None = None, *,
                mask: Tensor | None = None, key_padding_mask: Tensor | None = None,
                need_weights: bool = False):
        """query ``[batch, q_len, d_model]``; key ``[batch, k_len, kdim]`` (None: self-attention, key =
        value = query); value ``[batch, k_len, vdim]`` (None: value = key).
        mask: bool broadcastable to ``[batch, heads, q_len, k_len]``, True = may attend (the opposite
        of torch.nn.MultiheadAttention's ``attn_mask``); key_padding_mask: bool ``[batch, k_len]``,
        True = padding. Returns output ``[batch, q_len, d_model]``, or ``(output, weights
        [batch, heads, q_len, k_len])`` with ``need_weights=True``, which always runs the eager path.
        """
        key = query if key is None else key
        value = key if value is None else value
        scores_shape = self._check_inputs(query, key, value)
        batch, _, q_len, k_len = scores_shape
        q = self._split_heads(self.q_proj(query))
        k = self._split_heads(self.k_proj(key))
        v = self._split_heads(self.v_proj(value))
        q, k = self.transform_qk(q, k, q_offset=k_len - q_len)

        attend = None  # "may attend" mask from the caller's mask and the key padding
        if mask is not None:
            _check_scores_like(mask, "mask", scores_shape, "[batch, heads, q_len, k_len]")
            attend = mask
        if key_padding_mask is not None:
            padding = key_padding_to_mask(key_padding_mask)
            if padding.shape[0] != batch or padding.shape[-1] != k_len:
                raise ValueError(f"key_padding_mask must have shape [batch, k_len] = {(batch, k_len)}, "
                                 f"got {tuple(key_padding_mask.shape)}")
            attend = padding if attend is None else attend & padding
        bias = self.attention_bias(q_len, k_len, query.device, q.dtype)
        if bias is not None:
            _check_scores_like(bias, "attention_bias()", scores_shape, "[heads, q_len, k_len]", is_mask=False)
        dropout_p = self.dropout if self.training else 0.0

        weights = None
        if need_weights or self.backend == "eager":
            attend = self._with_causal(attend, q_len, k_len, query.device)
            out, weights = scaled_dot_product_attention(q, k, v, attend, bias, self.scale, dropout_p)
        elif self.causal and attend is None and bias is None and q_len == k_len:
            # Nothing but causality: let the fused kernel skip the future without reading a mask.
            # (is_causal aligns the mask top-left, which matches ours only when q_len == k_len.)
            out = fused_attention(q, k, v, dropout_p=dropout_p, is_causal=True, scale=self.scale)
        else:
            attend = self._with_causal(attend, q_len, k_len, query.device)
            out = _fused_attention(q, k, v, attend, bias, dropout_p, self.scale)
        out = self.out_proj(self._merge_heads(out))
        return (out, weights) if need_weights else out

    def _check_inputs(self, query, key, value) -> tuple[int, int, int, int]:
        _check_tensor(query, "query", f"[batch, q_len, d_model={self.d_model}]", ndim=3)
        _check_tensor(key, "key", f"[batch, k_len, kdim={self.kdim}]", ndim=3)
        _check_tensor(value, "value", f"[batch, k_len, vdim={self.vdim}]", ndim=3)
        for name, x, width in (("query", query, self.d_model), ("key", key, self.kdim), ("value", value, self.vdim)):
            if x.shape[-1] != width:
                raise ValueError(f"{name} must have last dim {width}, got shape {tuple(x.shape)}")
        if key.shape[0] != query.shape[0] or value.shape[:2] != key.shape[:2]:
            raise ValueError(f"key and value must have shapes [batch={query.shape[0]}, k_len, ...] with the "
                             f"same k_len, got key {tuple(key.shape)}, value {tuple(value.shape)}")
        return (query.shape[0], self.n_heads, query.shape[1], key.shape[1])

    def _with_causal(self, attend, q_len, k_len, device):
        if not self.causal:
            return attend
        causal = causal_mask(q_len, k_len, device=device)
        return causal if attend is None else attend & causal

    def _split_heads(self, x: Tensor) -> Tensor:
        """``[batch, seq, d_model]`` -> ``[batch, heads, seq, d_head]``: heads become a batch dim."""
        batch, seq, _ = x.shape
        return x.view(batch, seq, self.n_heads, self.d_head).transpose(1, 2)

    def _merge_heads(self, x: Tensor) -> Tensor:
        """``[batch, heads, seq, d_head]`` -> ``[batch, seq, d_model]``."""
        batch, _, seq, _ = x.shape
        return x.transpose(1, 2).reshape(batch, seq, self.d_model)


def _fused_attention(q, k, v, attend, bias, dropout_p, scale=None):
    """torch's SDPA with a "may attend" mask and/or an additive bias, safe for empty rows.

    Kernels differ on a query that may attend to nothing (some give NaN, and NaN in the backward
    pass). So such rows attend to every key inside the kernel, and their output is zeroed after.
    """
    if attend is None and bias is None:
        return fused_attention(q, k, v, dropout_p=dropout_p, scale=scale)
    if bias is None:
        empty_rows = ~attend.any(dim=-1, keepdim=True)
        attn_mask = attend | empty_rows
    else:
        # One additive float mask: the bias, with -inf where attention is not allowed.
        attn_mask = bias.to(q.dtype)
        if attend is not None:
            attn_mask = attn_mask.masked_fill(~attend, float("-inf"))
        empty_rows = (attn_mask == float("-inf")).all(dim=-1, keepdim=True)
        attn_mask = attn_mask.masked_fill(empty_rows, 0.0)
    out = fused_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, scale=scale)
    return out.masked_fill(empty_rows, 0.0)


# ---------------------------------------------------------------------------------------------
# Bidirectional attention between a context and a question (BiDAF, HotpotQA).


class BiAttention(nn.Module):
    """Context-to-question and question-to-context attention with a trilinear similarity.

    ``s(i, j) = w_xᵀ x_i + w_qᵀ q_j + (x_i ⊙ w_dot)ᵀ q_j``, with ``w_x`` = ``input_linear``,
    ``w_q`` = ``memory_linear``, ``w_dot`` = ``dot_scale``. Context-to-question: ``c_i = Σ_j
    softmax_j(s_ij) q_j``. Question-to-context: ``b = softmax_i(max_j s_ij)``, ``q2c = Σ_i b_i x_i``.

    forward(x ``[batch, x_len, d_model]`` (context), question ``[batch, q_len, d_model]``,
    question_mask bool ``[batch, q_len]`` with True = real token, False = padding) returns
    ``[x, c, x ⊙ c, q2c ⊙ c]`` of shape ``[batch, x_len, 4 * d_model]``, and with
    ``return_weights=True`` also ``(c2q_weights [batch, x_len, q_len], q2c_weights [batch, x_len])``.
    Dropout (training only) applies to both inputs, as in the original.
    """

    def __init__(self, d_model: int, dropout: float = 0.0):
        super().__init__()
        self.d_model = d_model
        self.dropout = nn.Dropout(dropout)
        self.input_linear = nn.Linear(d_model, 1, bias=False)
        self.memory_linear = nn.Linear(d_model, 1, bias=False)
        # All three weight vectors start like nn.Linear's weights, U(-1/sqrt(d), 1/sqrt(d)): the
        # cross term is a linear layer over the d products x_i ⊙ q_j, so it gets the same rule.
        self.dot_scale = nn.Parameter(torch.empty(d_model))
        bound = 1.0 / math.sqrt(d_model)
        nn.init.uniform_(self.dot_scale, -bound, bound)

    def forward(self, x: Tensor, question: Tensor, question_mask: Tensor | None = None,
                return_weights: bool = False):
        _check_tensor(x, "x", f"[batch, x_len, d_model={self.d_model}]", ndim=3)
        _check_tensor(question, "question", f"[batch, q_len, d_model={self.d_model}]", ndim=3)
        if x.shape[-1] != self.d_model or question.shape[-1] != self.d_model or x.shape[0] != question.shape[0]:
            raise ValueError(f"x and question must have shapes [batch, x_len, {self.d_model}] and "
                             f"[batch, q_len, {self.d_model}], got {tuple(x.shape)}, {tuple(question.shape)}")
        batch, q_len = question.shape[:2]
        if question_mask is not None:
            _check_scores_like(question_mask, "question_mask", (batch, q_len), "[batch, q_len]")
        x, question = self.dropout(x), self.dropout(question)

        scores = (self.input_linear(x)                                # [batch, x_len, 1]
                  + self.memory_linear(question).transpose(1, 2)      # [batch, 1, q_len]
                  + (x * self.dot_scale) @ question.transpose(1, 2))  # [batch, x_len, q_len]
        if question_mask is not None:
            # -inf drops padding from both the softmax over j and the max over j below.
            scores = scores.masked_fill(~question_mask[:, None, :], float("-inf"))
        c2q_weights = masked_softmax(scores)                          # [batch, x_len, q_len]
        c2q = c2q_weights @ question                                  # [batch, x_len, d_model]
        # Each context word is scored by its best match in the question; one summary of the
        # context, weighted by those scores, is shared by all positions.
        q2c_weights = masked_softmax(scores.amax(dim=-1))             # [batch, x_len]
        q2c = q2c_weights.unsqueeze(1) @ x                            # [batch, 1, d_model]
        output = torch.cat([x, c2q, x * c2q, q2c * c2q], dim=-1)
        return (output, (c2q_weights, q2c_weights)) if return_weights else output
