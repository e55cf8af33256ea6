r"""Position-wise feed-forward networks and their GLU variants — the channel
mixers.

A feed-forward network (FFN) transforms every position on its own: it expands
the :math:`d` = ``d_model`` features of a token to :math:`d_{ff}` hidden
features, applies an activation :math:`f` and contracts back
(labml.ai's annotated FFN :cite:p:`labml_annotated` reads it so too):

.. math::

    \operatorname{FFN}(x) = f(x W_1 + b_1)\, W_2 + b_2,

with :math:`W_1 \in \mathbb{R}^{d \times d_{ff}}` and
:math:`W_2 \in \mathbb{R}^{d_{ff} \times d}`.

"GLU Variants Improve Transformer" (Shazeer, 2020) multiplies the activated
branch element-wise with a second, purely linear projection of the same input:

.. math::

    h &= f(x W + b) \odot (x V + c), \\
    \operatorname{FFN}_{\text{gated}}(x) &= h\, W_2 + b_2,

e.g. :math:`\operatorname{FFN}_{\text{GEGLU}}(x) = (\operatorname{GELU}(x W)
\odot x V)\, W_2` without biases, as the paper writes it. As in Dauphin et
al.'s GLU, the *gate* is the activated branch :math:`f(x W + b)` (a sigmoid
in the original GLU), and it gates the linear branch :math:`x V + c`. The
module's names follow that, as LLaMA-style code does:

==================  =============  ==========================================
paper               module         what it is
==================  =============  ==========================================
:math:`W, b`        ``gate_proj``  the gate: the branch that passes through
                                   :math:`f` (gated variants only)
:math:`V, c`        ``up_proj``    the linear branch that is gated; in an
                                   ungated FFN, :math:`W_1, b_1` (activated)
:math:`W_2, b_2`    ``down_proj``  back to :math:`d`
==================  =============  ==========================================

The paper's variants (:math:`\Phi` is the standard normal CDF, the exact erf
form of GELU; swish is Swish with :math:`\beta = 1`, i.e. SiLU):

==========  ===========================  =====
name        :math:`f(z)`                 gated
==========  ===========================  =====
relu        :math:`\max(0, z)`           no
gelu        :math:`z\, \Phi(z)`          no
swish       :math:`z\, \sigma(z)`        no
glu         :math:`\sigma(z)`            yes
bilinear    :math:`z`                    yes
reglu       :math:`\max(0, z)`           yes
geglu       :math:`z\, \Phi(z)`          yes
swiglu      :math:`z\, \sigma(z)`        yes
==========  ===========================  =====

The paper drops every bias, so the named variants default to ``bias=False``;
:class:`FeedForward` itself defaults to biases on, like the classic FFN.

Parameter matching: an ungated FFN has two :math:`d \times d_{ff}` matrices, a
gated one three, so at equal cost the gated hidden size is
:math:`h = \tfrac{2}{3} d_{ff}` (:math:`\tfrac{2}{3} \cdot 4d` at the usual
:math:`d_{ff} = 4d`): the paper uses :math:`d_{ff} = 3072` for the ungated
and 2048 for the gated models at :math:`d = 768`.
"""

import copy
from typing import Callable

import torch
from torch import nn

from ._checks import (
    check_bool,
    check_dropout,
    check_dtype_matches,
    check_flags,
    check_not_empty,
    check_positive_int,
)

__all__ = [
    "ACTIVATIONS",
    "VARIANTS",
    "FeedForward",
    "fuse",
    "unfuse",
    "matched_hidden_size",
    "feed_forward_param_count",
    "feed_forward_variant",
]

# FeedForward's three bias switches, one for each projection.
_BIASES = ("gate_bias", "up_bias", "down_bias")

#: Activation names -> modules (modules, so that `print(ff)` shows which one).
ACTIVATIONS = {
    "relu": nn.ReLU,
    "gelu": nn.GELU,  # exact erf form, as in the paper
    "swish": nn.SiLU,  # Swish with beta = 1
    "silu": nn.SiLU,
    "sigmoid": nn.Sigmoid,
    "identity": nn.Identity,
}

#: The paper's variants, in its order: name -> (activation name, gated).
VARIANTS = {
    "relu": ("relu", False),
    "gelu": ("gelu", False),
    "swish": ("swish", False),
    "glu": ("sigmoid", True),
    "bilinear": ("identity", True),
    "reglu": ("relu", True),
    "geglu": ("gelu", True),
    "swiglu": ("swish", True),
}


def _make_activation(activation):
    if isinstance(activation, str):
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {list(ACTIVATIONS)} or a callable,"
                f" got {activation!r}"
            )
        return ACTIVATIONS[activation]()
    if not callable(activation):
        raise TypeError(
            f"activation must be a name in {list(ACTIVATIONS)} or a callable,"
            f" got {activation!r}"
        )
    # nn.ReLU, not nn.ReLU(): calling it on a tensor builds a module
    if isinstance(activation, type):
        raise TypeError(
            "activation must be a module or function, got the class"
            f" {activation.__name__}: pass {activation.__name__}()"
        )
    return activation


def _check_options(d_model, d_ff, dropout, fused, gated, **biases):
    """``FeedForward``'s arguments, checked once at construction."""
    check_positive_int("d_model", d_model)
    check_positive_int("d_ff", d_ff)
    check_dropout(dropout)
    check_flags(gated=gated, **biases, fused=fused)
    if fused and not gated:
        raise ValueError(
            "fused=True needs gated=True: only a gated FFN has two input"
            " projections to fuse"
        )
    if fused and biases["gate_bias"] != biases["up_bias"]:
        raise ValueError(
            "fused=True needs gate_bias == up_bias (one Linear holds both),"
            f" got gate_bias={biases['gate_bias']},"
            f" up_bias={biases['up_bias']}"
        )


# -----------------------------------------------------------------------------
# The module


class FeedForward(nn.Module):
    r""":math:`f(x W_1 + b_1) W_2 + b_2`, or gated
    :math:`(f(x W + b) \odot (x V + c)) W_2 + b_2`.

    ``x``: ``[batch, seq, d_model]`` (any leading dims, at least one
    position) -> ``[batch, seq, d_model]``. Submodules, named after what they
    do (the module's docstring gives the paper's letters):

    - ungated: ``up_proj`` (:math:`W_1, b_1`; its output goes through the
      activation), ``down_proj`` (:math:`W_2, b_2`);
    - gated: ``gate_proj`` (:math:`W, b`; the gate, activated), ``up_proj``
      (:math:`V, c`; the linear branch it gates), ``down_proj``;
    - ``dropout`` on the ``[batch, seq, d_ff]`` hidden layer, after the gate
      product.

    ``fused=True`` (gated only) holds :math:`W` and :math:`V` stacked in one
    ``gate_up_proj`` = Linear(d_model, 2·d_ff), :math:`x [W \; V] = [xW \;
    xV]`: one matmul instead of two, the first half of its output the gate,
    the second the linear branch. It then needs ``gate_bias == up_bias``,
    since one Linear has one bias switch. ``activation`` is a name in
    ``ACTIVATIONS`` or any callable on tensors (a module or a function);
    ``d_model`` and ``d_ff`` are positive ints, ``gated``, ``fused`` and the
    ``*_bias`` flags bools.
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        activation: str | Callable = "relu",
        gated: bool = False,
        dropout: float = 0.0,
        *,
        gate_bias: bool = True,
        up_bias: bool = True,
        down_bias: bool = True,
        fused: bool = False,
    ):
        super().__init__()
        biases = dict(
            gate_bias=gate_bias, up_bias=up_bias, down_bias=down_bias
        )
        _check_options(d_model, d_ff, dropout, fused, gated, **biases)
        self.d_model, self.d_ff = d_model, d_ff
        self.gated, self.fused = gated, fused
        self.gate_bias, self.up_bias, self.down_bias = biases.values()
        self.activation = _make_activation(activation)
        # Creation order (activated branch first) fixes the initial weights a
        # seed gives.
        if fused:
            self.gate_up_proj = nn.Linear(d_model, 2 * d_ff, bias=gate_bias)
        elif gated:
            self.gate_proj = nn.Linear(d_model, d_ff, bias=gate_bias)
            self.up_proj = nn.Linear(d_model, d_ff, bias=up_bias)
        else:
            self.up_proj = nn.Linear(d_model, d_ff, bias=up_bias)
        self.dropout = nn.Dropout(dropout)
        self.down_proj = nn.Linear(d_ff, d_model, bias=down_bias)

    def forward(self, x):
        r"""``x``: ``[batch, seq, d_model]`` -> ``[batch, seq, d_model]``.

        The hidden layer ``[batch, seq, d_ff]`` is :math:`h = f(x W_1 + b_1)`,
        or gated :math:`h = f(x W + b) \odot (x V + c)`; the output is
        :math:`\operatorname{dropout}(h)\, W_2 + b_2`.
        """
        self._check_input(x)
        if self.fused:
            gate, linear_branch = self.gate_up_proj(x).chunk(2, dim=-1)
            hidden = self.activation(gate) * linear_branch
        elif self.gated:
            # [batch, seq, d_ff]
            hidden = self.activation(self.gate_proj(x)) * self.up_proj(x)
        else:
            hidden = self.activation(self.up_proj(x))
        return self.down_proj(self.dropout(hidden))

    def _check_input(self, x):
        """``x`` a float tensor ``[..., d_model]`` with at least one position,
        in the weights' dtype (unless autocast casts it)."""
        if not isinstance(x, torch.Tensor):
            raise TypeError(
                f"x must be a torch.Tensor, got {type(x).__name__}"
            )
        if x.ndim == 0 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have shape [..., d_model={self.d_model}], got"
                f" {tuple(x.shape)}"
            )
        if not x.is_floating_point():
            raise TypeError(
                f"x must be a floating-point tensor [..., d_model], got dtype"
                f" {x.dtype} (token ids go through an embedding first)"
            )
        check_not_empty(x, "x")
        check_dtype_matches(x, "x", self.down_proj)

    def num_parameters(self):
        """Number of scalar parameters (equals ``feed_forward_param_count``
        for the built-in activations)."""
        return sum(p.numel() for p in self.parameters())

    def extra_repr(self):
        return (
            f"d_model={self.d_model}, d_ff={self.d_ff}, gated={self.gated},"
            f" fused={self.fused}"
        )


# -----------------------------------------------------------------------------
# Fusing and unfusing the input projections


def _converted(ff, fused):
    if not isinstance(ff, FeedForward):
        raise TypeError(f"ff must be a FeedForward, got {type(ff).__name__}")
    if not ff.gated:
        raise ValueError(
            "ff must be gated: an ungated FeedForward has only one input"
            " projection"
        )
    if ff.fused == fused:
        return copy.deepcopy(ff)
    activation, dropout = copy.deepcopy(ff.activation), ff.dropout.p
    biases = {name: getattr(ff, name) for name in _BIASES}
    new = FeedForward(
        ff.d_model, ff.d_ff, activation, True, dropout, **biases, fused=fused
    )
    new.to(ff.down_proj.weight)  # same dtype and device
    new.train(ff.training)
    # everything except the input projections carries over unchanged
    # (down_proj, a PReLU's weight...)
    projections = ("gate_proj", "up_proj", "gate_up_proj")
    state = {
        k: v
        for k, v in ff.state_dict().items()
        if k.split(".")[0] not in projections
    }
    kinds = ("weight", "bias") if ff.gate_bias else ("weight",)
    for kind in kinds:
        if fused:  # [W; V] stacked along the output dim: [2·d_ff, d_model]
            state[f"gate_up_proj.{kind}"] = torch.cat(
                [getattr(ff.gate_proj, kind), getattr(ff.up_proj, kind)]
            )
        else:
            state[f"gate_proj.{kind}"], state[f"up_proj.{kind}"] = getattr(
                ff.gate_up_proj, kind
            ).chunk(2)
    new.load_state_dict(state)  # copies, so the two modules share no storage
    return new


def fuse(ff):
    r"""A copy of gated ``ff`` with :math:`W` and :math:`V` in one
    ``gate_up_proj``: the same function, one matmul."""
    return _converted(ff, fused=True)


def unfuse(ff):
    """A copy of gated ``ff`` with ``gate_up_proj`` split back into
    ``gate_proj`` and ``up_proj``."""
    return _converted(ff, fused=False)


# -----------------------------------------------------------------------------
# Sizes and the paper's variants


def matched_hidden_size(d_ff, gated):
    r"""Hidden size giving a gated FFN the parameters of an ungated one with
    hidden size ``d_ff``.

    Gated, three matrices of :math:`d \times h` against two of :math:`d
    \times d_{ff}`:

    .. math::

        3 d h &= 2 d\, d_{ff}, \\
        h &= \operatorname{round}\big(\tfrac{2}{3} d_{ff}\big),

    never a tie (:math:`\tfrac{2}{3} d_{ff}` ends in .0, .33 or .67), e.g.
    3072 -> 2048, 512 -> 341. Ungated: ``d_ff`` unchanged.
    """
    check_positive_int("d_ff", d_ff)
    check_bool("gated", gated)
    return max(1, round(2 * d_ff / 3)) if gated else d_ff


def feed_forward_param_count(
    d_model, d_ff, gated, gate_bias=True, up_bias=True, down_bias=True
):
    r"""Parameters of ``FeedForward(d_model, d_ff, gated=..., *_bias=...)``:

    .. math::

        N ={} & (d\, d_{ff} + d_{ff}) \\
        & + (d\, d_{ff} + d_{ff}) \\
        & + (d_{ff}\, d + d),

    for :math:`V, c`, then :math:`W, b` (gated only), then :math:`W_2, b_2`;
    each bias term only where its flag is on (ungated, the first line is
    :math:`W_1, b_1`).
    """
    check_positive_int("d_model", d_model)
    check_positive_int("d_ff", d_ff)
    check_flags(
        gated=gated, gate_bias=gate_bias, up_bias=up_bias, down_bias=down_bias
    )
    # up_proj: W1, b1 (ungated) or V, c (gated)
    count = d_model * d_ff + d_ff * up_bias
    if gated:
        count += d_model * d_ff + d_ff * gate_bias  # gate_proj: W, b
    return count + d_ff * d_model + d_model * down_bias  # down_proj: W2, b2


def feed_forward_variant(
    name,
    d_model,
    d_ff=None,
    *,
    match_params=True,
    dropout=0.0,
    bias=False,
    fused=False,
):
    r"""The paper's variant ``name`` (a key of ``VARIANTS``) as a
    :class:`FeedForward`: ``[batch, seq, d_model]`` -> the same.

    ``d_ff`` is the hidden size of the ungated baseline (default
    :math:`4d`); with ``match_params=True`` the gated variants use
    ``matched_hidden_size(d_ff, True)``, :math:`\tfrac{2}{3} \cdot 4d`
    by default, otherwise ``d_ff`` as given. ``bias`` switches all three
    biases (the paper: off). ``fused`` fuses the gated variants and is
    ignored by the ungated ones, so a sweep over ``VARIANTS`` can pass it to
    all of them.
    """
    if name not in VARIANTS:
        raise ValueError(f"name must be one of {list(VARIANTS)}, got {name!r}")
    check_positive_int("d_model", d_model)
    check_flags(match_params=match_params, bias=bias, fused=fused)
    activation, gated = VARIANTS[name]
    if d_ff is None:
        d_ff = 4 * d_model
    if match_params:
        d_ff = matched_hidden_size(d_ff, gated)
    biases, fused = dict.fromkeys(_BIASES, bias), fused and gated
    return FeedForward(
        d_model, d_ff, activation, gated, dropout, **biases, fused=fused
    )
