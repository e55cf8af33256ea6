r"""gMLP: token mixing with a gated, learned linear map along the sequence — no
attention.

"Pay Attention to MLPs" (Liu et al., 2021). For one sample X: [n, d] (n
positions, d = d_model channels) the gMLP block is

=====================  ================  ================  ================
step                   weights           output            mixes
=====================  ================  ================  ================
Z = GELU(X U)          U: [d, d_ffn]     Z: [n, d_ffn]     channels
Z̃ = s(Z)                                 Z̃: [n, d_ffn/2]   positions
Y = Z̃ V                V: [d_ffn/2, d]   Y: [n, d]         channels
out = X + Y                                                (X pre-normalised)
=====================  ================  ================  ================

The Spatial Gating Unit s splits Z along channels into halves Z1, Z2 and gates
Z1 with a linear map of Z2 *along the sequence*:

.. math::

    s(Z) = Z_1 \odot f(\operatorname{norm}(Z_2)), \qquad
    f(Z_2)_{i,c} = \sum_j W_{i,j}\, (Z_2)_{j,c} + b_i

with :math:`W \in \mathbb{R}^{n \times n}` and :math:`b \in \mathbb{R}^n`.

W is where positions meet: a learned attention map that does not depend on the
input. It starts near zero (uniform ±0.01) and b at one, so s(Z) ≈ Z1 and each
block starts as a per-position FFN; token mixing is learned from there. Causal:
W is lower triangular (j ≤ i), so position i never reads the future. W has a
fixed size seq_len; shorter sequences use its leading block.

aMLP adds a tiny single-head attention (d_attn = 64) on the block's normalised
input. Its output, [n, d_ffn/2], is added inside the gate: s(Z) = Z1 ⊙ (W
norm(Z2) + b + attn(X)).

How Toeplitz is a learned W? The paper finds learned spatial weights local and
nearly shift-invariant: W[i, j] ≈ w(i - j), a convolution. `diagonal_means`
gives m_k, the mean of W over the diagonal i - j = k; `toeplitz_score` is the
share of W's variance (over the causal lower triangle) that the Toeplitz matrix
T[i, j] = m_{i-j} explains:

.. math::

    \text{score} = 1 - \frac{\sum_{j \le i} (W_{i,j} - m_{i-j})^2}
                             {\sum_{j \le i} (W_{i,j} - \bar W)^2}

1 for an exact Toeplitz matrix; about (n - 1) / (n(n+1)/2 - 1) ≈ 2/n for i.i.d.
noise.
"""

import torch
from torch import nn

from ._checks import (
    check_bool,
    check_dropout,
    check_even,
    check_non_negative_float,
    check_positive_float,
    check_positive_int,
    check_tensor,
    check_token_mask,
)
from .attention import causal_mask, fused_attention, zero_padding

__all__ = [
    "SpatialGatingUnit",
    "TinyAttention",
    "GatedMLP",
    "GMLPBlock",
    "gmlp_param_count",
    "diagonal_means",
    "toeplitz_score",
]


class SpatialGatingUnit(nn.Module):
    """s(Z) = Z1 ⊙ (W norm(Z2) + b): Z [batch, seq, d_z] -> [batch, seq,
    d_z/2].

    Z1, Z2 are the first and second halves of Z's channels; `norm` is a
    LayerNorm over Z2's d_z/2 channels; W [seq_len, seq_len] and b [seq_len]
    act along the sequence (see the module docstring). W ~ uniform(-init_scale,
    init_scale), b = 1, so s(Z) ≈ Z1 at initialisation. causal=True multiplies
    W by the lower-triangular buffer `mask` [seq_len, seq_len] (j ≤ i). d_z: a
    positive even int; seq_len: a positive int; causal: a bool; init_scale: a
    non-negative finite float; eps (the LayerNorm's): a positive finite float.
    """

    def __init__(self, d_z, seq_len, causal=False, init_scale=0.01, eps=1e-5):
        super().__init__()
        check_even("d_z", d_z)
        check_positive_int("seq_len", seq_len)
        check_bool("causal", causal)
        check_non_negative_float("init_scale", init_scale)
        # eps <= 0: sqrt(var + eps) is 0 or NaN for a near-constant row
        check_positive_float("eps", eps)
        self.d_z, self.seq_len, self.causal = d_z, seq_len, causal
        self.norm = nn.LayerNorm(d_z // 2, eps=eps)
        # Near-zero W and unit b: f(Z2) ≈ 1, so the unit passes Z1 through and
        # the block starts as a per-position FFN. The paper notes this matters
        # for stable early training.
        self.weight = nn.Parameter(
            torch.empty(seq_len, seq_len).uniform_(-init_scale, init_scale)
        )
        self.bias = nn.Parameter(torch.ones(seq_len))
        mask = causal_mask(seq_len) if self.causal else None
        # rebuilt from `causal`, not saved
        self.register_buffer("mask", mask, persistent=False)

    def spatial_weight(self, seq_len=None):
        """The effective W [seq, seq] (seq = seq_len if None): the leading
        block, causally masked."""
        n = self.seq_len if seq_len is None else seq_len
        check_positive_int("seq_len", n)
        if n > self.seq_len:
            raise ValueError(
                f"sequence length {n} exceeds the unit's"
                f" seq_len={self.seq_len}: W is [seq_len, seq_len], so"
                " sequences may be at most seq_len long"
            )
        weight = self.weight[:n, :n]
        return weight * self.mask[:n, :n] if self.causal else weight

    def forward(self, z, token_mask=None, gate_residual=None):
        """z [batch, seq, d_z] -> [batch, seq, d_z/2], with 1 ≤ seq ≤ seq_len.

        token_mask: bool [batch, seq], True = real token, False = padding. A
        padded position j contributes nothing to any output, whatever it holds
        (inf and NaN included): Z[j] is zeroed on entry and norm(Z2)[j] before
        W, i.e. column j of W is dropped for that sample. The output AT a
        padded position is 0 (its Z1 is zeroed; for a finite gate_residual):
        ignore it. gate_residual: [batch, seq, d_z/2] added to the gate before
        the product (aMLP's attention).
        """
        check_tensor(
            z, "z", f"[batch, seq, d_z={self.d_z}]", ndim=3, width=self.d_z
        )
        batch, seq, _ = z.shape
        if token_mask is not None:
            check_token_mask(token_mask, batch, seq)
        if gate_residual is not None:
            expected = f"[batch, seq, d_z/2] = {(batch, seq, self.d_z // 2)}"
            check_tensor(
                gate_residual,
                "gate_residual",
                expected,
                ndim=3,
                width=self.d_z // 2,
            )
            if gate_residual.shape[:2] != (batch, seq):
                raise ValueError(
                    f"gate_residual must have shape {expected}, got"
                    f" {tuple(gate_residual.shape)}"
                )
        weight = self.spatial_weight(seq)  # raises if seq > seq_len
        # [batch, seq, d_z/2] each
        z1, z2 = zero_padding(z, token_mask).chunk(2, dim=-1)
        z2 = self.norm(z2)
        if token_mask is not None:
            # the norm's shift too: column j of W dropped
            z2 = z2.masked_fill(~token_mask[:, :, None], 0.0)
        # [seq, seq] @ [batch, seq, d_z/2]: mixes positions
        gate = weight @ z2 + self.bias[:seq, None]
        if gate_residual is not None:
            gate = gate + gate_residual
        return z1 * gate

    def extra_repr(self):
        return f"d_z={self.d_z}, seq_len={self.seq_len}, causal={self.causal}"


class TinyAttention(nn.Module):
    """aMLP's single-head attention: x [batch, seq, d_in] -> [batch, seq,
    d_out].

    q, k, v = x W_qkv (each [batch, seq, d_attn]); out = softmax(q kᵀ /
    √d_attn) v W_out. Submodules `qkv` = Linear(d_in, 3·d_attn) and `proj` =
    Linear(d_attn, d_out). d_in, d_out, d_attn: positive ints; causal: a bool.
    """

    def __init__(self, d_in, d_out, d_attn=64, causal=False):
        super().__init__()
        for name, value in (
            ("d_in", d_in),
            ("d_out", d_out),
            ("d_attn", d_attn),
        ):
            check_positive_int(name, value)
        self.d_in, self.d_out, self.d_attn, self.causal = (
            d_in,
            d_out,
            d_attn,
            check_bool("causal", causal),
        )
        self.qkv = nn.Linear(d_in, 3 * d_attn)
        self.proj = nn.Linear(d_attn, d_out)

    def forward(self, x, token_mask=None):
        """x [batch, seq, d_in] -> [batch, seq, d_out]; token_mask bool [batch,
        seq], True = real token.

        Padded keys get zero weight, and padded inputs are zeroed on entry, so
        that an inf or NaN there reaches no real output and no gradient (a zero
        weight times NaN is NaN). A query that may attend to no key at all
        (under causality, a padded prefix) outputs proj's bias alone instead of
        softmax over nothing = NaN.
        """
        check_tensor(
            x, "x", f"[batch, seq, d_in={self.d_in}]", ndim=3, width=self.d_in
        )
        batch, seq, _ = x.shape
        if token_mask is not None:
            check_token_mask(token_mask, batch, seq)
        x = zero_padding(x, token_mask)
        # [batch, seq, d_attn] each; SDPA scales by 1/√d_attn
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if token_mask is None:
            out = fused_attention(q, k, v, is_causal=self.causal)
        else:
            # [batch, 1, seq]: query i may read key j
            attend = token_mask[:, None, :]
            if self.causal:
                attend = attend & causal_mask(seq, device=x.device)
            attend = attend.expand(batch, seq, seq)
            # Empty rows attend to everything inside the kernel (no NaN,
            # forward or backward), then are zeroed, which also blocks their
            # gradient to the keys they "saw".
            empty = ~attend.any(dim=-1, keepdim=True)  # [batch, seq, 1]
            out = fused_attention(q, k, v, attn_mask=attend | empty)
            out = out.masked_fill(empty, 0.0)
        return self.proj(out)

    def extra_repr(self):
        return (
            f"d_in={self.d_in}, d_out={self.d_out}, d_attn={self.d_attn},"
            f" causal={self.causal}"
        )


class GatedMLP(nn.Module):
    """The gMLP block's body, without norm and shortcut: x [batch, seq,
    d_model] -> [batch, seq, d_model].

    Z = GELU(x U) [batch, seq, d_ffn]; Z̃ = s(Z) [batch, seq, d_ffn/2]; Y = Z̃
    V [batch, seq, d_model]. Submodules `proj_in` (U), `activation`, `sgu`,
    `proj_out` (V), and with tiny_attention=True (aMLP) `attention` =
    TinyAttention(d_model, d_ffn/2), whose output on x joins the gate: Z̃ = Z1
    ⊙ (W norm(Z2) + b + attention(x)). `dropout` applies to Z̃ while training,
    as a feed-forward's dropout does to its hidden layer. This is the token
    mixer "gmlp"/"amlp" of the model. d_model, seq_len, d_attn: positive ints;
    d_ffn: a positive even int; causal, tiny_attention: bools; dropout: a
    probability in [0, 1).
    """

    def __init__(
        self,
        d_model,
        d_ffn,
        seq_len,
        causal=False,
        tiny_attention=False,
        d_attn=64,
        dropout=0.0,
    ):
        super().__init__()
        check_positive_int("d_model", d_model)
        check_even("d_ffn", d_ffn)
        check_bool("tiny_attention", tiny_attention)
        # also when unused: a bad value is a mistake either way
        check_positive_int("d_attn", d_attn)
        self.d_model, self.d_ffn = d_model, d_ffn
        self.proj_in = nn.Linear(d_model, d_ffn)
        self.activation = nn.GELU()  # exact erf form, as in the paper
        self.sgu = SpatialGatingUnit(d_ffn, seq_len, causal=causal)
        self.proj_out = nn.Linear(d_ffn // 2, d_model)
        self.attention = (
            TinyAttention(d_model, d_ffn // 2, d_attn, causal=causal)
            if tiny_attention
            else None
        )
        self.dropout = nn.Dropout(check_dropout(dropout))

    def forward(self, x, token_mask=None):
        """x [batch, seq, d_model] -> [batch, seq, d_model]; token_mask bool
        [batch, seq], True = real token.

        Padded positions are zeroed on entry: whatever they hold reaches no
        real output and no gradient.
        """
        check_tensor(
            x,
            "x",
            f"[batch, seq, d_model={self.d_model}]",
            ndim=3,
            width=self.d_model,
        )
        if token_mask is not None:
            check_token_mask(token_mask, *x.shape[:2])
        x = zero_padding(x, token_mask)
        gate_residual = (
            self.attention(x, token_mask)
            if self.attention is not None
            else None
        )
        z = self.activation(self.proj_in(x))  # [batch, seq, d_ffn]
        z = self.sgu(z, token_mask, gate_residual)  # [batch, seq, d_ffn/2]
        return self.proj_out(self.dropout(z))


class GMLPBlock(nn.Module):
    """One gMLP block: x + GatedMLP(LayerNorm(x)); x [batch, seq, d_model] ->
    [batch, seq, d_model].

    Submodules `norm` and `mlp`. The language model's `Block(token_mixer,
    channel_mixer)` computes x + token_mixer(norm(x)), then x +
    channel_mixer(norm(x)). Its registry pairs the token mixer "gmlp"
    (GatedMLP; "amlp" with tiny attention) with the channel mixer "none", which
    drops the second sub-layer — so that Block is exactly this GMLPBlock: as in
    the paper, the gMLP block replaces both the attention and the FFN
    sub-layers. The arguments are GatedMLP's.
    """

    def __init__(
        self,
        d_model,
        d_ffn,
        seq_len,
        causal=False,
        tiny_attention=False,
        d_attn=64,
        dropout=0.0,
    ):
        super().__init__()
        self.norm = nn.LayerNorm(check_positive_int("d_model", d_model))
        self.mlp = GatedMLP(
            d_model, d_ffn, seq_len, causal, tiny_attention, d_attn, dropout
        )

    def forward(self, x, token_mask=None):
        """x [batch, seq, d_model] -> [batch, seq, d_model]; token_mask bool
        [batch, seq], True = real token.

        Padded positions are zeroed on entry (their outputs are meaningless):
        whatever they hold, inf and NaN included, reaches no real output and no
        gradient.
        """
        check_tensor(
            x,
            "x",
            f"[batch, seq, d_model={self.mlp.d_model}]",
            ndim=3,
            width=self.mlp.d_model,
        )
        if token_mask is not None:
            check_token_mask(token_mask, *x.shape[:2])
        x = zero_padding(x, token_mask)
        return x + self.mlp(self.norm(x), token_mask)


def gmlp_param_count(d_model, d_ffn, seq_len, tiny_attention=False, d_attn=64):
    """Parameters of `GMLPBlock(d_model, d_ffn, seq_len, tiny_attention=...,
    d_attn=...)`."""
    check_bool("tiny_attention", tiny_attention)
    check_positive_int("d_model", d_model)
    check_even("d_ffn", d_ffn)
    check_positive_int("seq_len", seq_len)
    check_positive_int("d_attn", d_attn)
    half = d_ffn // 2
    count = 2 * d_model  # block norm: LayerNorm(d_model) weight and bias
    count += d_model * d_ffn + d_ffn  # proj_in: U and its bias
    count += 2 * half  # sgu.norm: LayerNorm(d_ffn/2) weight and bias
    # sgu: W [seq_len, seq_len] and b [seq_len]
    count += seq_len * seq_len + seq_len
    count += half * d_model + d_model  # proj_out: V and its bias
    if tiny_attention:
        count += d_model * 3 * d_attn + 3 * d_attn  # attention.qkv
        # attention.proj, to the gate's d_ffn/2 channels
        count += d_attn * half + half
    return count


def _check_square(weight):
    if not isinstance(weight, torch.Tensor):
        raise TypeError(
            "weight must be a torch.Tensor of shape [seq, seq], got"
            f" {type(weight).__name__}"
        )
    if (
        weight.dim() != 2
        or weight.shape[0] != weight.shape[1]
        or weight.shape[0] == 0
    ):
        raise ValueError(
            "weight must be a square matrix [seq, seq], got shape"
            f" {tuple(weight.shape)}"
        )


def _diagonals(weight, causal):
    """(values, offsets, n_offsets): the entries of W that count and their
    diagonal index.

    offset = i - j, shifted by n - 1 when not causal so that it indexes from 0.
    """
    _check_square(weight)
    check_bool("causal", causal)
    n = weight.shape[0]
    w = weight.detach().to(torch.float64)
    # a NaN or an infinity has no variance to explain: the score would be NaN
    if not torch.isfinite(w).all():
        raise ValueError(
            "weight must hold finite numbers, got"
            f" {int((~torch.isfinite(w)).sum())} NaN or infinite entries"
        )
    positions = torch.arange(n, device=w.device)
    offset = positions[:, None] - positions[None, :]  # [seq, seq]: i - j
    if causal:
        # the lower triangle j <= i, the only entries a causal W uses
        keep = offset >= 0
        return w[keep], offset[keep], n
    return w.flatten(), (offset + n - 1).flatten(), 2 * n - 1


def diagonal_means(weight, causal=True):
    """m_k = mean of W[i, j] over the diagonal i - j = k; weight [seq, seq] ->
    float64 tensor.

    causal=True: k = 0 .. seq-1 (how far back position i reads), shape [seq].
    causal=False: k = -(seq-1) .. seq-1, shape [2·seq - 1], k = 0 at index seq
    - 1.
    """
    values, offsets, count = _diagonals(weight, causal)
    sums = torch.zeros(
        count, dtype=values.dtype, device=values.device
    ).index_add_(0, offsets, values)
    return sums / torch.bincount(offsets, minlength=count)


def toeplitz_score(weight, causal=True):
    """Share of W's variance explained by its diagonal means (see the module
    docstring), in [0, 1].

    weight [seq, seq]; with causal=True only the lower triangle j ≤ i counts
    (the masked upper triangle is never used). 1.0 for an exact Toeplitz
    matrix, also for a constant one. Never negative: within each diagonal, its
    mean fits better than the overall mean.
    """
    values, offsets, _ = _diagonals(weight, causal)
    fitted = diagonal_means(weight, causal)[offsets]  # T[i, j] = m_{i-j}
    total = (values - values.mean()).square().sum()
    residual = (values - fitted).square().sum()
    if total <= 0:
        return 1.0  # a constant matrix is Toeplitz
    return float(1.0 - residual / total)
