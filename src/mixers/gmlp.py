r"""gMLP: token mixing with a gated, learned linear map along the sequence — no
attention.

"Pay Attention to MLPs" (Liu et al., 2021); labml.ai's annotated
implementation :cite:p:`labml_annotated` reads the same paper. For one sample
:math:`X \in \mathbb{R}^{n \times d}` (:math:`n` positions, :math:`d` =
``d_model`` channels) a gMLP block is

.. math::

    Z &= \operatorname{GELU}(\hat X U), \\
    \tilde Z &= s(Z), \\
    Y &= \tilde Z V, \\
    \text{out} &= X + Y,

with :math:`\hat X = \operatorname{LayerNorm}(X)`, :math:`U \in
\mathbb{R}^{d \times d_{\text{ffn}}}` and :math:`V \in
\mathbb{R}^{d_{\text{ffn}}/2 \times d}`: :math:`U` and :math:`V` mix channels,
:math:`s` mixes positions.

The Spatial Gating Unit :math:`s` splits :math:`Z` along its channels into
halves :math:`Z_1, Z_2` and gates :math:`Z_1` with a linear map of
:math:`Z_2` *along the sequence*:

.. math::

    s(Z) = Z_1 \odot \big(W \operatorname{norm}(Z_2) + b\big),

with :math:`W \in \mathbb{R}^{n \times n}` and :math:`b \in \mathbb{R}^{n}`.

:math:`W` is where positions meet: a learned attention map that does not
depend on the input. Causal, :math:`W` is lower triangular
(:math:`W_{ij} = 0` for :math:`j > i`); it has a fixed size ``seq_len`` and a
shorter sequence uses its leading block.

aMLP adds a tiny single-head attention (:math:`d_{\text{attn}} = 64`) on the
block's normalised input, added inside the gate:
:math:`s(Z) = Z_1 \odot (W \operatorname{norm}(Z_2) + b +
\operatorname{attn}(\hat X))`.

**Checks, once.** Each module checks its arguments once when it is built and
once at the entry of ``forward``; a module inside another is called with
``checked=True``, because the outermost one has checked its input and zeroed
its padded positions already, and every shape inside follows from the
constructors' checks. Each module is still safe to call on its own.
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
from .attention import causal_mask, fused_attention

__all__ = [
    "SpatialGatingUnit",
    "TinyAttention",
    "GatedMLP",
    "GMLPBlock",
    "gmlp_param_count",
    "diagonal_means",
    "toeplitz_score",
]


def _zero_padded(x, token_mask):
    r"""``x`` ``[batch, seq, ...]`` with the rows of padded positions
    (``token_mask`` False) set to 0.

    ``masked_fill``, not a product: :math:`0 \cdot \infty` and
    :math:`0 \cdot \text{NaN}` are NaN, a filled zero is zero and passes a
    zero gradient back.
    """
    if token_mask is None:
        return x
    return x.masked_fill(~token_mask[:, :, None], 0.0)


def _check_input(x, name, width, token_mask):
    """``x`` a float ``[batch, seq, width]`` with a position at least, and
    ``token_mask`` None or its bool ``[batch, seq]`` mask; ``width`` is
    ``(name, size)``, spelt in the error."""
    width_name, size = width
    expected = f"[batch, seq, {width_name}={size}]"
    check_tensor(x, name, expected, ndim=3, width=size)
    if token_mask is not None:
        check_token_mask(token_mask, *x.shape[:2])


# -----------------------------------------------------------------------------
# The Spatial Gating Unit


class SpatialGatingUnit(nn.Module):
    r""":math:`s(Z) = Z_1 \odot (W \operatorname{norm}(Z_2) + b)`: ``z``
    ``[batch, seq, d_z]`` -> ``[batch, seq, d_z/2]``.

    ``norm`` is a LayerNorm over :math:`Z_2`'s :math:`d_z/2` channels;
    ``weight`` (:math:`W`, ``[seq_len, seq_len]``) and ``bias`` (:math:`b`,
    ``[seq_len]``) act along the sequence. ``d_z``: a positive even int;
    ``seq_len``: a positive int; ``causal``: a bool; ``init_scale``: a
    non-negative finite float; ``eps`` (the LayerNorm's): a positive finite
    float.
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
        # Near-identity start: :math:`W_{ij} \sim \mathcal{U}(-0.01, 0.01)`
        # and :math:`b = 1` give :math:`W \operatorname{norm}(Z_2) + b
        # \approx 1`, so :math:`s(Z) \approx Z_1` and each block starts as a
        # per-position FFN; token mixing is learned from there. The paper
        # notes this matters for stable early training.
        self.weight = nn.Parameter(
            torch.empty(seq_len, seq_len).uniform_(-init_scale, init_scale)
        )
        self.bias = nn.Parameter(torch.ones(seq_len))
        # The causal mask :math:`M_{ij} = [j \le i]` multiplies :math:`W`, so
        # the entries above the diagonal get zero gradient and never move; a
        # buffer rebuilt from ``causal``, not saved.
        mask = causal_mask(seq_len) if causal else None
        self.register_buffer("mask", mask, persistent=False)

    def spatial_weight(self, seq_len=None):
        r"""The effective :math:`W \odot M`, ``[seq, seq]`` (seq = ``seq_len``
        if None): the leading block :math:`W_{[:n, :n]}` of a shorter
        sequence, causally masked."""
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

    def forward(
        self, z, token_mask=None, gate_residual=None, *, checked=False
    ):
        r"""``z`` ``[batch, seq, d_z]`` -> ``[batch, seq, d_z/2]``, with
        :math:`1 \le` seq :math:`\le` ``seq_len``.

        .. math::

            s(Z)_{i,c} &= (Z_1)_{i,c}\; g_{i,c}, \\
            g_{i,c} &= \textstyle\sum_{j} W_{ij}\, \hat Z_{j,c} + b_i,

        with :math:`\hat Z = \operatorname{norm}(Z_2)`.

        ``token_mask``: bool ``[batch, seq]``, True = real token. A padded
        position :math:`j` contributes nothing, as if column :math:`j` of
        :math:`W` were dropped for that sample: its row of :math:`Z` is zeroed
        (whatever it held, inf and NaN included), and so is its row of
        :math:`\operatorname{norm}(Z_2)`, which would be the norm's shift
        :math:`\beta`, not 0. Its own output is :math:`0 \cdot
        \text{gate} = 0`: ignore it. ``gate_residual``: ``[batch, seq,
        d_z/2]`` added to the gate before the product (aMLP's attention).
        ``checked``: the caller has checked the arguments (see the module's
        docstring).
        """
        if not checked:
            self._check_arguments(z, token_mask, gate_residual)
        seq = z.shape[1]
        weight = self.spatial_weight(seq)  # [seq, seq]
        # padded rows dropped: from Z, then from norm(Z2) (the norm's shift)
        z1, z2 = _zero_padded(z, token_mask).chunk(2, dim=-1)
        z2 = _zero_padded(self.norm(z2), token_mask)
        # [seq, seq] @ [batch, seq, d_z/2]: mixes positions
        gate = weight @ z2 + self.bias[:seq, None]
        if gate_residual is not None:
            gate = gate + gate_residual
        return z1 * gate

    def _check_arguments(self, z, token_mask, gate_residual):
        _check_input(z, "z", ("d_z", self.d_z), token_mask)
        if gate_residual is not None:
            batch, seq, _ = z.shape
            expected = f"[batch, seq, d_z/2] = {(batch, seq, self.d_z // 2)}"
            check_tensor(gate_residual, "gate_residual", expected, ndim=3)
            if gate_residual.shape != (batch, seq, self.d_z // 2):
                raise ValueError(
                    f"gate_residual must have shape {expected}, got"
                    f" {tuple(gate_residual.shape)}"
                )

    def extra_repr(self):
        return f"d_z={self.d_z}, seq_len={self.seq_len}, causal={self.causal}"


# -----------------------------------------------------------------------------
# aMLP's tiny attention


class TinyAttention(nn.Module):
    r"""aMLP's single-head attention: ``x`` ``[batch, seq, d_in]`` ->
    ``[batch, seq, d_out]``.

    .. math::

        q, k, v &= x W_{qkv}, \\
        \operatorname{attn}(x) &= \operatorname{softmax}\big(q k^\top /
        \sqrt{d_a}\big)\, v W_o

    with :math:`d_a` = ``d_attn``, ``qkv`` (:math:`W_{qkv}`) = Linear(d_in,
    3·d_attn) and ``proj`` (:math:`W_o`) = Linear(d_attn, d_out). ``d_in``,
    ``d_out``, ``d_attn``: positive ints; ``causal``: a bool.
    """

    def __init__(self, d_in, d_out, d_attn=64, causal=False):
        super().__init__()
        for name, value in (
            ("d_in", d_in),
            ("d_out", d_out),
            ("d_attn", d_attn),
        ):
            check_positive_int(name, value)
        self.causal = check_bool("causal", causal)
        self.d_in, self.d_out, self.d_attn = d_in, d_out, d_attn
        self.qkv = nn.Linear(d_in, 3 * d_attn)
        self.proj = nn.Linear(d_attn, d_out)

    def forward(self, x, token_mask=None, *, checked=False):
        """``x`` ``[batch, seq, d_in]`` -> ``[batch, seq, d_out]``;
        ``token_mask`` bool ``[batch, seq]``, True = real token; ``checked``:
        as in :class:`SpatialGatingUnit`."""
        if not checked:
            _check_input(x, "x", ("d_in", self.d_in), token_mask)
            x = _zero_padded(x, token_mask)
        # [batch, seq, d_attn] each; SDPA scales by 1/√d_attn
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if token_mask is None:
            return self.proj(fused_attention(q, k, v, is_causal=self.causal))
        # Query :math:`i` may read key :math:`j` when :math:`j` is real (and,
        # causal, :math:`j \le i`): ``[batch, seq, seq]``.
        seq = x.shape[1]
        attend = token_mask[:, None, :].expand(-1, seq, -1)
        if self.causal:
            attend = attend & causal_mask(seq, device=x.device)
        # A query with no key to read (under causality, a padded prefix)
        # would be :math:`\operatorname{softmax}` over nothing, 0/0 = NaN.
        # Its row attends to everything inside the kernel (no NaN, forward
        # or backward), then is zeroed, which also blocks its gradient to
        # the keys it "saw": it outputs ``proj``'s bias alone.
        empty = ~attend.any(dim=-1, keepdim=True)  # [batch, seq, 1]
        out = fused_attention(q, k, v, attn_mask=attend | empty)
        return self.proj(out.masked_fill(empty, 0.0))

    def extra_repr(self):
        return (
            f"d_in={self.d_in}, d_out={self.d_out}, d_attn={self.d_attn},"
            f" causal={self.causal}"
        )


# -----------------------------------------------------------------------------
# The gated MLP and the gMLP block


class GatedMLP(nn.Module):
    r"""The gMLP block's body, without norm and shortcut: ``x`` ``[batch,
    seq, d_model]`` -> ``[batch, seq, d_model]``.

    .. math::

        Y = \operatorname{dropout}\big(s(\operatorname{GELU}(x U))\big)\, V

    Submodules ``proj_in`` (:math:`U`), ``activation``, ``sgu``,
    ``proj_out`` (:math:`V`) and, with ``tiny_attention=True`` (aMLP),
    ``attention`` = ``TinyAttention(d_model, d_ffn/2)``, whose output joins
    the gate. This is the token mixer ``"gmlp"``/``"amlp"`` of the model.
    ``d_model``, ``seq_len``, ``d_attn``: positive ints; ``d_ffn``: a positive
    even int; ``causal``, ``tiny_attention``: bools; ``dropout``: a
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

    def forward(self, x, token_mask=None, *, checked=False):
        r"""``x`` ``[batch, seq, d_model]`` -> ``[batch, seq, d_model]``;
        ``token_mask`` bool ``[batch, seq]``, True = real token; ``checked``:
        as in :class:`SpatialGatingUnit`.

        Padded positions reach no real output and no gradient: zeroed at the
        outermost entry, dropped inside the unit.
        """
        if not checked:  # the outermost call: check, and zero the padding
            _check_input(x, "x", ("d_model", self.d_model), token_mask)
            x = _zero_padded(x, token_mask)
        gate_residual = (
            self.attention(x, token_mask, checked=True)
            if self.attention is not None
            else None
        )
        z = self.activation(self.proj_in(x))  # [batch, seq, d_ffn]
        # Z̃ = s(Z): [batch, seq, d_ffn/2]
        z = self.sgu(z, token_mask, gate_residual, checked=True)
        return self.proj_out(self.dropout(z))


class GMLPBlock(nn.Module):
    r"""One gMLP block, pre-norm and residual:
    :math:`x + \operatorname{GatedMLP}(\operatorname{LayerNorm}(x))`; ``x``
    ``[batch, seq, d_model]`` -> ``[batch, seq, d_model]``.

    Submodules ``norm`` and ``mlp``. The language model's ``Block`` computes
    :math:`x + \text{token\_mixer}(\operatorname{norm}(x))`, then
    :math:`x + \text{channel\_mixer}(\operatorname{norm}(x))`; its registry
    pairs the token mixer ``"gmlp"`` with the channel mixer ``"none"``, which
    drops the second sub-layer, so that ``Block`` is exactly this block: as
    in the paper, the gMLP block replaces both the attention and the FFN
    sub-layers. The arguments are :class:`GatedMLP`'s.
    """

    def __init__(self, d_model, d_ffn, seq_len, **options):
        super().__init__()
        self.norm = nn.LayerNorm(check_positive_int("d_model", d_model))
        self.mlp = GatedMLP(d_model, d_ffn, seq_len, **options)

    def forward(self, x, token_mask=None):
        """``x`` ``[batch, seq, d_model]`` -> ``[batch, seq, d_model]``;
        ``token_mask`` bool ``[batch, seq]``, True = real token.

        Padded positions are zeroed on entry (their outputs are meaningless):
        whatever they hold, inf and NaN included, reaches no real output and
        no gradient.
        """
        _check_input(x, "x", ("d_model", self.mlp.d_model), token_mask)
        x = _zero_padded(x, token_mask)
        return x + self.mlp(self.norm(x), token_mask, checked=True)


def gmlp_param_count(d_model, d_ffn, seq_len, tiny_attention=False, d_attn=64):
    r"""Parameters of ``GMLPBlock(d_model, d_ffn, seq_len, tiny_attention=...,
    d_attn=...)``:

    .. math::

        N ={} & 2d + (d + 1)\, d_{\text{ffn}} + d_{\text{ffn}} \\
        & + n (n + 1) + (d_{\text{ffn}}/2 + 1)\, d

    (the block's norm, :math:`U`, the unit's norm; :math:`W` and :math:`b`,
    :math:`V`), plus :math:`(d + 1)\, 3 d_a + (d_a + 1)\, d_{\text{ffn}}/2`
    for aMLP's attention (:math:`d_a` = ``d_attn``). :math:`W` grows as
    :math:`n^2`: at :math:`n = 256` it is 65,536 parameters a layer.
    """
    check_bool("tiny_attention", tiny_attention)
    check_positive_int("d_model", d_model)
    check_even("d_ffn", d_ffn)
    check_positive_int("seq_len", seq_len)
    check_positive_int("d_attn", d_attn)
    half = d_ffn // 2
    count = 2 * d_model  # block norm: LayerNorm(d_model) weight and bias
    count += d_model * d_ffn + d_ffn  # proj_in: U and its bias
    count += 2 * half  # sgu.norm: LayerNorm(d_ffn/2) weight and bias
    count += seq_len * seq_len + seq_len  # sgu: W and b
    count += half * d_model + d_model  # proj_out: V and its bias
    if tiny_attention:
        count += d_model * 3 * d_attn + 3 * d_attn  # attention.qkv
        # attention.proj, to the gate's d_ffn/2 channels
        count += d_attn * half + half
    return count


# -----------------------------------------------------------------------------
# How Toeplitz is a learned W?
#
# The paper finds learned spatial weights local and nearly shift-invariant:
# :math:`W_{ij} \approx w(i - j)`, a convolution. :func:`diagonal_means` gives
# :math:`m_k`, the mean of :math:`W` over the diagonal :math:`i - j = k`;
# :func:`toeplitz_score` is the share of :math:`W`'s variance (over the causal
# lower triangle) that the Toeplitz matrix :math:`T_{ij} = m_{i-j}` explains:
#
# .. math::
#
#     \text{score} = 1 - \frac{\sum_{j \le i} (W_{ij} - m_{i-j})^2}
#                              {\sum_{j \le i} (W_{ij} - \bar W)^2}
#
# 1 for an exact Toeplitz matrix; for i.i.d. noise about
# :math:`(n - 1) / (n(n+1)/2 - 1) \approx 2/n`: :math:`n` means fitted to
# :math:`n(n+1)/2` entries.


def _check_square(weight):
    if not isinstance(weight, torch.Tensor):
        raise TypeError(
            "weight must be a torch.Tensor of shape [seq, seq], got"
            f" {type(weight).__name__}"
        )
    n = weight.shape[0] if weight.dim() == 2 else 0
    if n == 0 or weight.shape[1] != n:
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
    r""":math:`m_k = \operatorname{mean}_{i - j = k} W_{ij}`; ``weight``
    ``[seq, seq]`` -> a float64 tensor.

    ``causal=True``: :math:`k = 0, \dots, n - 1` (how far back position
    :math:`i` reads), shape ``[seq]``. ``causal=False``: :math:`k = -(n-1),
    \dots, n-1`, shape ``[2·seq - 1]``, :math:`k = 0` at index ``seq - 1``.
    """
    values, offsets, count = _diagonals(weight, causal)
    sums = torch.zeros(
        count, dtype=values.dtype, device=values.device
    ).index_add_(0, offsets, values)
    return sums / torch.bincount(offsets, minlength=count)


def toeplitz_score(weight, causal=True):
    """Share of W's variance explained by its diagonal means (see the note
    above), in [0, 1].

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
