r"""Position-wise feed-forward networks and their GLU variants — the channel
mixers.

A feed-forward network (FFN) transforms every position on its own: expand the
`d_model` features of a token to `d_ff` hidden features, apply an activation
`f`, contract back to `d_model`:

    FFN(x)       = f(x W1 + b1) W2 + b2

"GLU Variants Improve Transformer" (Shazeer, 2020) multiplies the activated
branch element-wise with a second, purely linear projection of the same input:

    FFN_gated(x) = (f(x W + b) ⊗ (x V + c)) W2 + b2

with W, V: [d_model, d_ff] and W2: [d_ff, d_model]. As in Dauphin et al.'s GLU,
the *gate* is the activated branch f(x W + b) (a sigmoid in the original GLU),
and it gates the linear branch x V + c. The module's names follow that, as
LLaMA-style code does:

======  =============  ==================================================
paper   module         what it is
======  =============  ==================================================
W, b    ``gate_proj``  the gate: the branch that passes through f (gated
                       variants only)
V, c    ``up_proj``    the linear branch that is gated; in an ungated FFN,
                       W1, b1 (activated)
W2, b2  ``down_proj``  back to d_model
======  =============  ==================================================

The paper's variants:

    name      f          gated     name      f          gated
    relu      max(0, z)  no        bilinear  z          yes
    gelu      z Φ(z)     no        reglu     max(0, z)  yes
    swish     z σ(z)     no        geglu     z Φ(z)     yes
    glu       σ(z)       yes       swiglu    z σ(z)     yes

(Φ is the standard normal CDF, the exact erf form of GELU; swish is Swish with
β = 1, i.e. SiLU.) The paper drops every bias, so the named variants default to
`bias=False`; `FeedForward` itself defaults to biases on, like the classic FFN.

Parameter matching: an ungated FFN has two [d_model, d_ff] matrices, a gated
one three. To compare at equal cost the gated hidden size is shrunk to 2/3 —
the paper uses d_ff = 3072 for the ungated and 2048 for the gated models at
d_model = 768.
"""

import copy

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


class FeedForward(nn.Module):
    """`f(x W1 + b1) W2 + b2`, or gated `(f(x W + b) ⊗ (x V + c)) W2 + b2`.

    x: [batch, seq, d_model] (any leading dims, at least one position) ->
    [batch, seq, d_model]. Submodules, named after what they do (see the module
    docstring for the paper's letters):

    - ungated: `up_proj` (W1, b1; its output goes through the activation),
      `down_proj` (W2, b2);
    - gated: `gate_proj` (W, b; the gate, activated), `up_proj` (V, c; the
      linear branch it gates), `down_proj` (W2, b2);
    - `dropout` on the [batch, seq, d_ff] hidden layer, after the gate product.

    `fused=True` (gated only) holds W and V stacked in one `gate_up_proj` =
    Linear(d_model, 2 * d_ff): one matmul instead of two; the first half of its
    output is the gate, the second half the linear branch. It then needs
    `gate_bias == up_bias`, since one Linear has one bias switch. `activation`
    is a name in `ACTIVATIONS` or any callable on tensors (a module or a
    function); d_model and d_ff are positive ints, `gated`, `fused` and the
    `*_bias` flags bools.
    """

    def __init__(
        self,
        d_model,
        d_ff,
        activation="relu",
        gated=False,
        dropout=0.0,
        gate_bias=True,
        up_bias=True,
        down_bias=True,
        fused=False,
    ):
        super().__init__()
        check_positive_int("d_model", d_model)
        check_positive_int("d_ff", d_ff)
        check_dropout(dropout)
        check_flags(
            gated=gated,
            gate_bias=gate_bias,
            up_bias=up_bias,
            down_bias=down_bias,
            fused=fused,
        )
        if fused and not gated:
            raise ValueError(
                "fused=True needs gated=True: only a gated FFN has two input"
                " projections to fuse"
            )
        if fused and gate_bias != up_bias:
            raise ValueError(
                "fused=True needs gate_bias == up_bias (one Linear holds"
                f" both), got gate_bias={gate_bias}, up_bias={up_bias}"
            )
        self.d_model, self.d_ff = d_model, d_ff
        self.gated, self.fused = gated, fused
        self.gate_bias, self.up_bias, self.down_bias = (
            gate_bias,
            up_bias,
            down_bias,
        )
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
        """x: [batch, seq, d_model] -> [batch, seq, d_model]."""
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
        if self.fused:
            gate, linear_branch = self.gate_up_proj(x).chunk(2, dim=-1)
            hidden = self.activation(gate) * linear_branch
        elif self.gated:
            # [batch, seq, d_ff]
            hidden = self.activation(self.gate_proj(x)) * self.up_proj(x)
        else:
            hidden = self.activation(self.up_proj(x))
        return self.down_proj(self.dropout(hidden))

    def num_parameters(self):
        """Number of scalar parameters (equals `feed_forward_param_count` for
        the built-in activations)."""
        return sum(p.numel() for p in self.parameters())

    def extra_repr(self):
        return (
            f"d_model={self.d_model}, d_ff={self.d_ff}, gated={self.gated},"
            f" fused={self.fused}"
        )


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
    new = FeedForward(
        ff.d_model,
        ff.d_ff,
        copy.deepcopy(ff.activation),
        gated=True,
        dropout=ff.dropout.p,
        gate_bias=ff.gate_bias,
        up_bias=ff.up_bias,
        down_bias=ff.down_bias,
        fused=fused,
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
    if fused:  # stack [W; V] along the output dim: weight [2 * d_ff, d_model]
        for kind in ("weight", "bias") if ff.gate_bias else ("weight",):
            state[f"gate_up_proj.{kind}"] = torch.cat(
                [getattr(ff.gate_proj, kind), getattr(ff.up_proj, kind)]
            )
    else:
        for kind in ("weight", "bias") if ff.gate_bias else ("weight",):
            state[f"gate_proj.{kind}"], state[f"up_proj.{kind}"] = getattr(
                ff.gate_up_proj, kind
            ).chunk(2)
    new.load_state_dict(state)  # copies, so the two modules share no storage
    return new


def fuse(ff):
    """A copy of gated `ff` with W and V in one `gate_up_proj`: the same
    function, one matmul."""
    return _converted(ff, fused=True)


def unfuse(ff):
    """A copy of gated `ff` with `gate_up_proj` split back into `gate_proj` and
    `up_proj`."""
    return _converted(ff, fused=False)


def matched_hidden_size(d_ff, gated):
    """Hidden size giving a gated FFN the parameters of an ungated one with
    hidden size `d_ff`.

    Gated: 3 d_model h ≈ 2 d_model d_ff, so h = 2 d_ff / 3 rounded to the
    nearest integer (never a tie: 2 d_ff / 3 ends in .0, .33 or .67), e.g. 3072
    -> 2048, 512 -> 341. Ungated: `d_ff` unchanged.
    """
    check_positive_int("d_ff", d_ff)
    check_bool("gated", gated)
    return max(1, round(2 * d_ff / 3)) if gated else d_ff


def feed_forward_param_count(
    d_model, d_ff, gated, gate_bias=True, up_bias=True, down_bias=True
):
    """Parameters of `FeedForward(d_model, d_ff, gated=..., *_bias=...)`: [W,
    b], W1/V, b1/c, W2, b2."""
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
    """The paper's variant `name` (a key of `VARIANTS`) as a FeedForward:
    [batch, seq, d_model] -> same.

    `d_ff` is the hidden size of the ungated baseline (default 4 * d_model);
    with `match_params=True` the gated variants use `matched_hidden_size(d_ff,
    True)`, otherwise `d_ff` as given. `bias` switches all three biases (the
    paper: off). `fused` fuses the gated variants and is ignored by the ungated
    ones, so a sweep over `VARIANTS` can pass it to all of them.
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
    return FeedForward(
        d_model,
        d_ff,
        activation=activation,
        gated=gated,
        dropout=dropout,
        gate_bias=bias,
        up_bias=bias,
        down_bias=bias,
        fused=fused and gated,
    )
