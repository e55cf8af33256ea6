r"""Position-wise feed-forward networks and their GLU variants — the channel mixers.

A feed-forward network (FFN) transforms every position on its own: expand the
`d_model` features of a token to `d_ff` hidden features, apply an activation `f`,
contract back to `d_model`:

    FFN(x)       = f(x W1 + b1) W2 + b2

"GLU Variants Improve Transformer" (Shazeer, 2020) multiplies the activated branch
element-wise with a second, purely linear projection of the same input:

    FFN_gated(x) = (f(x W1 + b1) ⊗ (x V + c)) W2 + b2

with W1, V: [d_model, d_ff] and W2: [d_ff, d_model]. The paper's variants:

    name      f          gated     name      f          gated
    relu      max(0, z)  no        bilinear  z          yes
    gelu      z Φ(z)     no        reglu     max(0, z)  yes
    swish     z σ(z)     no        geglu     z Φ(z)     yes
    glu       σ(z)       yes       swiglu    z σ(z)     yes

(Φ is the standard normal CDF, the exact erf form of GELU; swish is Swish with
β = 1, i.e. SiLU.) The paper drops every bias, so the named variants default to
`bias=False`; `FeedForward` itself defaults to biases on, like the classic FFN.

Parameter matching: an ungated FFN has two [d_model, d_ff] matrices, a gated one
three. To compare at equal cost the gated hidden size is shrunk to 2/3 — the paper
uses d_ff = 3072 for the ungated and 2048 for the gated models at d_model = 768.
"""

import copy

import torch
from torch import nn

# Activation names -> modules (modules, so that `print(ff)` shows which one).
ACTIVATIONS = {
    "relu": nn.ReLU,
    "gelu": nn.GELU,  # exact erf form, as in the paper
    "swish": nn.SiLU,  # Swish with beta = 1
    "silu": nn.SiLU,
    "sigmoid": nn.Sigmoid,
    "identity": nn.Identity,
}

# The paper's variants, in its order: name -> (activation name, gated).
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


def _check_positive_int(name, value):
    # bool is a subclass of int, but FeedForward(True, 4) is surely a mistake
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be a positive int, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value}")


def _make_activation(activation):
    if isinstance(activation, str):
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {list(ACTIVATIONS)} or a callable, got {activation!r}")
        return ACTIVATIONS[activation]()
    if not callable(activation):
        raise TypeError(f"activation must be a name in {list(ACTIVATIONS)} or a callable, got {activation!r}")
    return activation


class FeedForward(nn.Module):
    """`f(x W1 + b1) W2 + b2`, or gated `(f(x W1 + b1) ⊗ (x V + c)) W2 + b2`.

    x: [batch, seq, d_model] (any leading dims) -> [batch, seq, d_model].
    Submodules: `layer1` (W1, b1), `gate` (V, c; only when gated), `layer2` (W2, b2),
    `dropout` (on the [batch, seq, d_ff] hidden layer, after the gate product).
    `fused=True` (gated only) holds W1 and V stacked in one `layer1_and_gate`
    Linear(d_model, 2 * d_ff) — one matmul instead of two; the first half of its
    output is the activation branch, the second half the linear branch. It then
    needs `bias1 == bias_gate`, since one Linear has one bias switch.
    `activation` is a name in `ACTIVATIONS` or any callable on tensors.
    """

    def __init__(self, d_model, d_ff, activation="relu", gated=False, dropout=0.0,
                 bias1=True, bias2=True, bias_gate=True, fused=False):
        super().__init__()
        _check_positive_int("d_model", d_model)
        _check_positive_int("d_ff", d_ff)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)):
            raise TypeError(f"dropout must be a float probability in [0, 1], got {dropout!r}")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"dropout must be a probability in [0, 1], got {dropout}")
        if fused and not gated:
            raise ValueError("fused=True needs gated=True: only a gated FFN has two input projections to fuse")
        if fused and bias1 != bias_gate:
            raise ValueError(f"fused=True needs bias1 == bias_gate (one Linear holds both), "
                             f"got bias1={bias1}, bias_gate={bias_gate}")
        self.d_model, self.d_ff = d_model, d_ff
        self.gated, self.fused = gated, fused
        self.bias1, self.bias2, self.bias_gate = bias1, bias2, bias_gate
        self.activation = _make_activation(activation)
        if fused:
            self.layer1_and_gate = nn.Linear(d_model, 2 * d_ff, bias=bias1)
        else:
            self.layer1 = nn.Linear(d_model, d_ff, bias=bias1)
            if gated:
                # the linear branch x V + c that multiplies f(x W1 + b1); named `gate`
                # after the seed's `bias_gate`, although in GLU the sigmoid side gates
                self.gate = nn.Linear(d_model, d_ff, bias=bias_gate)
        self.dropout = nn.Dropout(dropout)
        self.layer2 = nn.Linear(d_ff, d_model, bias=bias2)

    def forward(self, x):
        """x: [batch, seq, d_model] -> [batch, seq, d_model]."""
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        if x.ndim == 0 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape [..., d_model={self.d_model}], got {tuple(x.shape)}")
        if self.fused:
            pre_activation, linear_branch = self.layer1_and_gate(x).chunk(2, dim=-1)
        else:
            pre_activation = self.layer1(x)  # [batch, seq, d_ff]
            linear_branch = self.gate(x) if self.gated else None
        hidden = self.activation(pre_activation)
        if linear_branch is not None:
            hidden = hidden * linear_branch
        hidden = self.dropout(hidden)
        return self.layer2(hidden)

    def num_parameters(self):
        """Number of scalar parameters (equals `feed_forward_param_count` for the built-in activations)."""
        return sum(p.numel() for p in self.parameters())

    def extra_repr(self):
        return f"d_model={self.d_model}, d_ff={self.d_ff}, gated={self.gated}, fused={self.fused}"


def _converted(ff, fused):
    if not isinstance(ff, FeedForward):
        raise TypeError(f"ff must be a FeedForward, got {type(ff).__name__}")
    if not ff.gated:
        raise ValueError("ff must be gated: an ungated FeedForward has only one input projection")
    if ff.fused == fused:
        return copy.deepcopy(ff)
    new = FeedForward(ff.d_model, ff.d_ff, copy.deepcopy(ff.activation), gated=True, dropout=ff.dropout.p,
                      bias1=ff.bias1, bias2=ff.bias2, bias_gate=ff.bias_gate, fused=fused)
    new.to(ff.layer2.weight)  # same dtype and device
    new.train(ff.training)
    # everything except the input projections carries over unchanged (layer2, a PReLU's weight...)
    projections = ("layer1", "gate", "layer1_and_gate")
    state = {k: v for k, v in ff.state_dict().items() if k.split(".")[0] not in projections}
    if fused:  # stack [W1; V] along the output dim: weight [2 * d_ff, d_model]
        for kind in ("weight", "bias") if ff.bias1 else ("weight",):
            state[f"layer1_and_gate.{kind}"] = torch.cat([getattr(ff.layer1, kind), getattr(ff.gate, kind)])
    else:
        for kind in ("weight", "bias") if ff.bias1 else ("weight",):
            first, second = getattr(ff.layer1_and_gate, kind).chunk(2)
            state[f"layer1.{kind}"], state[f"gate.{kind}"] = first, second
    new.load_state_dict(state)  # copies, so the two modules share no storage
    return new


def fuse(ff):
    """A copy of gated `ff` with W1 and V in one `layer1_and_gate`: the same function, one matmul."""
    return _converted(ff, fused=True)


def unfuse(ff):
    """A copy of gated `ff` with `layer1_and_gate` split back into `layer1` and `gate`."""
    return _converted(ff, fused=False)


def matched_hidden_size(d_ff, gated):
    """Hidden size giving a gated FFN the parameters of an ungated one with hidden size `d_ff`.

    Gated: 3 d_model h ≈ 2 d_model d_ff, so h = 2 d_ff / 3 rounded to the nearest
    integer (never a tie: 2 d_ff / 3 ends in .0, .33 or .67), e.g. 3072 -> 2048,
    512 -> 341. Ungated: `d_ff` unchanged.
    """
    _check_positive_int("d_ff", d_ff)
    return max(1, round(2 * d_ff / 3)) if gated else d_ff


def feed_forward_param_count(d_model, d_ff, gated, bias1=True, bias2=True, bias_gate=True):
    """Parameters of `FeedForward(d_model, d_ff, gated=..., bias...)`: W1, b1, [V, c], W2, b2."""
    _check_positive_int("d_model", d_model)
    _check_positive_int("d_ff", d_ff)
    count = d_model * d_ff + d_ff * bias1  # W1, b1
    if gated:
        count += d_model * d_ff + d_ff * bias_gate  # V, c
    return count + d_ff * d_model + d_model * bias2  # W2, b2


def feed_forward_variant(name, d_model, d_ff=None, *, match_params=True, dropout=0.0, bias=False, fused=False):
    """The paper's variant `name` (a key of `VARIANTS`) as a FeedForward: [batch, seq, d_model] -> same.

    `d_ff` is the hidden size of the ungated baseline (default 4 * d_model); with
    `match_params=True` the gated variants use `matched_hidden_size(d_ff, True)`,
    otherwise `d_ff` as given. `bias` switches all three biases (the paper: off).
    `fused` fuses the gated variants and is ignored by the ungated ones, so a
    sweep over `VARIANTS` can pass it to all of them.
    """
    if name not in VARIANTS:
        raise ValueError(f"name must be one of {list(VARIANTS)}, got {name!r}")
    _check_positive_int("d_model", d_model)
    activation, gated = VARIANTS[name]
    if d_ff is None:
        d_ff = 4 * d_model
    if match_params:
        d_ff = matched_hidden_size(d_ff, gated)
    return FeedForward(d_model, d_ff, activation=activation, gated=gated, dropout=dropout,
                       bias1=bias, bias2=bias, bias_gate=bias, fused=fused and gated)
