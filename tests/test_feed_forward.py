"""Tests of mixers.feed_forward: every variant against its formula, written here independently."""

import math

import pytest
import torch

from mixers.feed_forward import (
    VARIANTS,
    FeedForward,
    feed_forward_param_count,
    feed_forward_variant,
    fuse,
    matched_hidden_size,
    unfuse,
)

D_MODEL, D_FF = 8, 12
GATED = [name for name, (_, gated) in VARIANTS.items() if gated]
BOOK_D_MODELS = [128, 192, 256, 384, 512, 768]


# Reference activations, from their definitions (not torch.nn.functional's versions).
def relu(z):
    return z.clamp(min=0)


def gelu(z):
    return 0.5 * z * (1 + torch.erf(z / math.sqrt(2)))  # z Φ(z), exact


def sigmoid(z):
    return 1 / (1 + torch.exp(-z))


def swish(z):
    return z * sigmoid(z)


def identity(z):
    return z


# name -> (f, gated), the paper's table
REFERENCE = {
    "relu": (relu, False),
    "gelu": (gelu, False),
    "swish": (swish, False),
    "glu": (sigmoid, True),
    "bilinear": (identity, True),
    "reglu": (relu, True),
    "geglu": (gelu, True),
    "swiglu": (swish, True),
}


def weights(ff):
    """(W1, b1, V, c, W2, b2) as torch.nn.Linear stores them ([out, in]); None where absent.

    W1, b1 is the activated branch: the paper's W, b (`gate_proj`) when gated, W1, b1 (`up_proj`)
    when ungated; V, c (`up_proj`) is the gated linear branch; W2, b2 is `down_proj`.
    """
    if ff.fused:
        w1, v = ff.gate_up_proj.weight.chunk(
            2
        )  # first half: the gate (activated branch)
        b1, c = (
            ff.gate_up_proj.bias.chunk(2)
            if ff.gate_up_proj.bias is not None
            else (None, None)
        )
    elif ff.gated:
        w1, b1 = ff.gate_proj.weight, ff.gate_proj.bias
        v, c = ff.up_proj.weight, ff.up_proj.bias
    else:
        w1, b1 = ff.up_proj.weight, ff.up_proj.bias
        v, c = None, None
    return w1, b1, v, c, ff.down_proj.weight, ff.down_proj.bias


def affine(x, w, b):
    return x @ w.T + (b if b is not None else 0)


def reference_output(name, ff, x):
    f, gated = REFERENCE[name]
    w1, b1, v, c, w2, b2 = weights(ff)
    hidden = f(affine(x, w1, b1))
    if gated:
        hidden = hidden * affine(x, v, c)
    return affine(hidden, w2, b2)


def randomize_biases(ff):
    """nn.Linear's default init is already random; this only makes sure no bias is near zero."""
    with torch.no_grad():
        for name, p in ff.named_parameters():
            if name.endswith("bias"):
                p.uniform_(0.5, 1.0)
    return ff


def test_variants_table_and_order():
    assert list(VARIANTS) == [
        "relu",
        "gelu",
        "swish",
        "glu",
        "bilinear",
        "reglu",
        "geglu",
        "swiglu",
    ]
    assert {name: gated for name, (_, gated) in VARIANTS.items()} == {
        n: g for n, (_, g) in REFERENCE.items()
    }


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("name", list(VARIANTS))
def test_variant_equals_its_formula(name, bias, fused):
    torch.manual_seed(0)
    ff = (
        feed_forward_variant(name, D_MODEL, D_FF, bias=bias, fused=fused)
        .double()
        .eval()
    )
    randomize_biases(ff)
    x = 3 * torch.randn(
        2, 5, D_MODEL, dtype=torch.float64
    )  # wide enough to reach every regime of f
    out = ff(x)
    assert out.shape == (2, 5, D_MODEL)
    torch.testing.assert_close(
        out, reference_output(name, ff, x), atol=1e-6, rtol=0
    )


@pytest.mark.parametrize("gated", [False, True])
def test_reference_formulas_tell_the_variants_apart(gated):
    """The formula test has teeth: with shared weights, each variant's output differs from every other's reference."""
    torch.manual_seed(0)
    names = [n for n, (_, g) in VARIANTS.items() if g == gated]
    template = feed_forward_variant(
        names[0], D_MODEL, D_FF, match_params=False
    ).double()
    x = 3 * torch.randn(4, D_MODEL, dtype=torch.float64)
    for name in names:
        ff = feed_forward_variant(
            name, D_MODEL, D_FF, match_params=False
        ).double()
        ff.load_state_dict(template.state_dict())
        for other in names:
            if other != name:
                assert (
                    ff(x) - reference_output(other, ff, x)
                ).abs().max() > 1e-3, (name, other)


def test_any_leading_dims_and_callable_activation():
    torch.manual_seed(0)
    ff = FeedForward(D_MODEL, D_FF, activation=torch.tanh, gated=True).double()
    x = torch.randn(7, D_MODEL, dtype=torch.float64)
    w1, b1, v, c, w2, b2 = weights(ff)
    expected = affine(torch.tanh(affine(x, w1, b1)) * affine(x, v, c), w2, b2)
    torch.testing.assert_close(ff(x), expected, atol=1e-6, rtol=0)
    assert ff(torch.randn(2, 3, 4, D_MODEL, dtype=torch.float64)).shape == (
        2,
        3,
        4,
        D_MODEL,
    )


# ---- the paper's names: gate_proj (W, activated), up_proj (V, linear), down_proj (W2) ----


@pytest.mark.parametrize("name", GATED)
def test_gated_names_map_to_the_papers_formula(name):
    """FFN_gated(x) = (f(x W) ⊗ x V) W2 with W = gate_proj, V = up_proj, W2 = down_proj (no biases)."""
    torch.manual_seed(0)
    ff = feed_forward_variant(name, D_MODEL, D_FF).double()
    assert (
        ff.gate_proj.bias is None
        and ff.up_proj.bias is None
        and ff.down_proj.bias is None
    )
    f = REFERENCE[name][0]
    x = 3 * torch.randn(2, 5, D_MODEL, dtype=torch.float64)
    expected = (
        f(x @ ff.gate_proj.weight.T) * (x @ ff.up_proj.weight.T)
    ) @ ff.down_proj.weight.T
    torch.testing.assert_close(ff(x), expected, atol=1e-10, rtol=0)


def test_glu_applies_the_sigmoid_to_gate_proj():
    """GLU's sigmoid acts on gate_proj's output; swapping the branches' roles gives another function."""
    torch.manual_seed(0)
    ff = feed_forward_variant("glu", D_MODEL, D_FF).double()
    x = 3 * torch.randn(2, 5, D_MODEL, dtype=torch.float64)
    gate, up, w2 = (
        x @ ff.gate_proj.weight.T,
        x @ ff.up_proj.weight.T,
        ff.down_proj.weight.T,
    )
    torch.testing.assert_close(
        ff(x), (torch.sigmoid(gate) * up) @ w2, atol=1e-10, rtol=0
    )
    assert (
        ff(x) - (gate * torch.sigmoid(up)) @ w2
    ).abs().max() > 1e-2  # not sigmoid on up_proj


def test_seeded_init_unchanged_by_the_rename():
    """Creation order is the activated branch first: the same seed gives gate_proj the first Linear's weights."""
    torch.manual_seed(0)
    ff = FeedForward(8, 12, gated=True)
    torch.manual_seed(0)
    first = torch.nn.Linear(8, 12)
    second = torch.nn.Linear(8, 12)
    assert torch.equal(ff.gate_proj.weight, first.weight) and torch.equal(
        ff.gate_proj.bias, first.bias
    )
    assert torch.equal(ff.up_proj.weight, second.weight) and torch.equal(
        ff.up_proj.bias, second.bias
    )
    torch.manual_seed(0)
    ungated = FeedForward(8, 12)
    assert torch.equal(
        ungated.up_proj.weight, first.weight
    )  # ungated: up_proj is the (activated) W1


# ---- parameter counts ----


@pytest.mark.parametrize("match_params", [False, True])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("name", list(VARIANTS))
def test_param_count_equals_formula(name, bias, match_params):
    ff = feed_forward_variant(
        name, D_MODEL, D_FF, bias=bias, match_params=match_params
    )
    gated = VARIANTS[name][1]
    assert ff.d_ff == (
        matched_hidden_size(D_FF, gated) if match_params else D_FF
    )
    expected = feed_forward_param_count(
        D_MODEL, ff.d_ff, gated, gate_bias=bias, up_bias=bias, down_bias=bias
    )
    assert (
        ff.num_parameters()
        == sum(p.numel() for p in ff.parameters())
        == expected
    )


@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize(
    "gate_bias, up_bias, down_bias",
    [(a, b, c) for a in (0, 1) for b in (0, 1) for c in (0, 1)],
)
def test_param_count_formula_per_bias_switch(
    gated, gate_bias, up_bias, down_bias
):
    gate_bias, up_bias, down_bias = (
        bool(gate_bias),
        bool(up_bias),
        bool(down_bias),
    )
    ff = FeedForward(
        D_MODEL,
        D_FF,
        gated=gated,
        gate_bias=gate_bias,
        up_bias=up_bias,
        down_bias=down_bias,
    )
    # gate_bias exists only when gated (there is no gate_proj otherwise)
    by_hand = (
        (2 + gated) * D_MODEL * D_FF
        + D_FF * up_bias
        + D_MODEL * down_bias
        + D_FF * (gated and gate_bias)
    )
    assert ff.num_parameters() == by_hand
    assert (
        feed_forward_param_count(
            D_MODEL, D_FF, gated, gate_bias, up_bias, down_bias
        )
        == by_hand
    )


def test_paper_sizes():
    assert matched_hidden_size(3072, gated=True) == 2048
    assert matched_hidden_size(3072, gated=False) == 3072
    assert matched_hidden_size(512, gated=True) == 341  # 341.33 -> nearest
    assert matched_hidden_size(1024, gated=True) == 683  # 682.67 -> nearest
    # 768 -> 3072 / 2048 without biases: exactly equal, 2 * 768 * 3072 = 3 * 768 * 2048
    assert (
        feed_forward_param_count(768, 3072, False, False, False, False)
        == 4_718_592
    )
    assert (
        feed_forward_param_count(768, 2048, True, False, False, False)
        == 4_718_592
    )
    assert feed_forward_param_count(768, 3072, False) == 4_718_592 + 3072 + 768


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("d_model", BOOK_D_MODELS)
def test_matched_gated_variants_within_one_percent(d_model, bias):
    with torch.device(
        "meta"
    ):  # build the real modules without allocating their weights
        baseline = feed_forward_variant(
            "relu", d_model, bias=bias
        ).num_parameters()
        assert baseline == feed_forward_param_count(
            d_model, 4 * d_model, False, bias, bias, bias
        )
        for name in GATED:
            ff = feed_forward_variant(name, d_model, bias=bias)
            assert ff.d_ff == matched_hidden_size(4 * d_model, True)
            assert abs(ff.num_parameters() - baseline) / baseline < 0.01, (
                name,
                d_model,
            )


# ---- bias switches ----


@pytest.mark.parametrize(
    "switch, module",
    [
        ("gate_bias", "gate_proj"),
        ("up_bias", "up_proj"),
        ("down_bias", "down_proj"),
    ],
)
def test_each_bias_switch(switch, module):
    others_on = dict(gate_bias=True, up_bias=True, down_bias=True)
    off = FeedForward(
        D_MODEL,
        D_FF,
        activation="gelu",
        gated=True,
        **{**others_on, switch: False},
    )
    assert getattr(off, module).bias is None
    assert f"{module}.bias" not in dict(off.named_parameters())
    assert (
        sum(
            getattr(off, m).bias is None
            for m in ("gate_proj", "up_proj", "down_proj")
        )
        == 1
    )  # only this one

    torch.manual_seed(0)
    on = FeedForward(
        D_MODEL, D_FF, activation="gelu", gated=True, **others_on
    ).double()
    assert f"{module}.bias" in dict(on.named_parameters())
    x = torch.randn(3, D_MODEL, dtype=torch.float64)
    before = on(x)
    with torch.no_grad():
        getattr(on, module).bias.add_(0.5)
    assert (on(x) - before).abs().max() > 1e-3


# ---- fused ----


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("name", GATED)
def test_fused_equals_unfused_forward_and_gradients(name, bias):
    torch.manual_seed(0)
    plain = randomize_biases(
        feed_forward_variant(name, D_MODEL, D_FF, bias=bias).double()
    )
    fused = fuse(plain)
    assert (
        fused.fused
        and not hasattr(fused, "gate_proj")
        and not hasattr(fused, "up_proj")
    )
    assert fused.gate_up_proj.weight.shape == (2 * plain.d_ff, D_MODEL)

    x = torch.randn(2, 5, D_MODEL, dtype=torch.float64)
    x_plain, x_fused = x.clone().requires_grad_(), x.clone().requires_grad_()
    out_plain, out_fused = plain(x_plain), fused(x_fused)
    torch.testing.assert_close(out_fused, out_plain, atol=1e-12, rtol=0)

    upstream = torch.randn_like(out_plain)
    (out_plain * upstream).sum().backward()
    (out_fused * upstream).sum().backward()
    torch.testing.assert_close(x_fused.grad, x_plain.grad, atol=1e-12, rtol=0)
    stacked_grad = torch.cat(
        [plain.gate_proj.weight.grad, plain.up_proj.weight.grad]
    )  # gate first
    torch.testing.assert_close(
        fused.gate_up_proj.weight.grad, stacked_grad, atol=1e-12, rtol=0
    )
    torch.testing.assert_close(
        fused.down_proj.weight.grad,
        plain.down_proj.weight.grad,
        atol=1e-12,
        rtol=0,
    )
    if bias:
        stacked_bias_grad = torch.cat(
            [plain.gate_proj.bias.grad, plain.up_proj.bias.grad]
        )
        torch.testing.assert_close(
            fused.gate_up_proj.bias.grad, stacked_bias_grad, atol=1e-12, rtol=0
        )
        torch.testing.assert_close(
            fused.down_proj.bias.grad,
            plain.down_proj.bias.grad,
            atol=1e-12,
            rtol=0,
        )


def test_unfuse_inverts_fuse_and_copies():
    torch.manual_seed(0)
    plain = FeedForward(D_MODEL, D_FF, activation="relu", gated=True)
    back = unfuse(fuse(plain))
    assert not back.fused
    for (name, p), (name_back, p_back) in zip(
        plain.named_parameters(), back.named_parameters(), strict=True
    ):
        assert name == name_back and torch.equal(p, p_back)
        assert p.data_ptr() != p_back.data_ptr()  # a copy, not shared storage


# ---- dropout ----


def test_dropout_eval_is_deterministic_and_off():
    torch.manual_seed(0)
    ff = feed_forward_variant("swiglu", D_MODEL, D_FF, dropout=0.5).eval()
    no_dropout = feed_forward_variant("swiglu", D_MODEL, D_FF, dropout=0.0)
    no_dropout.load_state_dict(ff.state_dict())
    x = torch.randn(2, 5, D_MODEL)
    assert torch.equal(ff(x), ff(x))
    assert torch.equal(ff(x), no_dropout(x))


@pytest.mark.parametrize("name", ["relu", "swiglu"])
def test_dropout_acts_on_the_hidden_layer_after_the_gate(name):
    torch.manual_seed(0)
    p = 0.5
    ff = (
        feed_forward_variant(name, D_MODEL, 64, dropout=p, match_params=False)
        .double()
        .train()
    )
    seen = {}
    ff.dropout.register_forward_hook(
        lambda module, args, out: seen.update(hidden=args[0], dropped=out)
    )
    x = torch.randn(4, 8, D_MODEL, dtype=torch.float64)
    out = ff(x)

    f, gated = REFERENCE[name]
    w1, b1, v, c, w2, b2 = weights(ff)
    undropped = f(affine(x, w1, b1)) * (affine(x, v, c) if gated else 1)
    torch.testing.assert_close(
        seen["hidden"], undropped, atol=1e-12, rtol=0
    )  # dropout sees the gate product
    active = (
        undropped != 0
    )  # ReLU zeros about half the units before dropout gets to them
    kept = seen["dropped"] != 0
    assert (
        0.35 < kept[active].double().mean() < 0.65
    )  # p = 0.5, of ~1000-2000 active units
    torch.testing.assert_close(
        seen["dropped"][kept], undropped[kept] / (1 - p), atol=1e-12, rtol=0
    )
    torch.testing.assert_close(
        out, affine(seen["dropped"], w2, b2), atol=1e-12, rtol=0
    )
    assert not torch.equal(ff(x), out)  # a fresh mask each call


# ---- errors ----


def test_unknown_variant_lists_valid_names():
    with pytest.raises(ValueError) as excinfo:
        feed_forward_variant("swishglu", D_MODEL)
    assert "swishglu" in str(excinfo.value)
    for name in VARIANTS:
        assert repr(name) in str(excinfo.value)


@pytest.mark.parametrize(
    "kwargs, error, argument",
    [
        (dict(d_model=0, d_ff=D_FF), ValueError, "d_model"),
        (dict(d_model=-3, d_ff=D_FF), ValueError, "d_model"),
        (dict(d_model=8.0, d_ff=D_FF), TypeError, "d_model"),
        (dict(d_model=True, d_ff=D_FF), TypeError, "d_model"),
        (dict(d_model=D_MODEL, d_ff=0), ValueError, "d_ff"),
        (dict(d_model=D_MODEL, d_ff="12"), TypeError, "d_ff"),
        (
            dict(d_model=D_MODEL, d_ff=D_FF, activation="tanh"),
            ValueError,
            "activation",
        ),
        (
            dict(d_model=D_MODEL, d_ff=D_FF, activation=3),
            TypeError,
            "activation",
        ),
        (dict(d_model=D_MODEL, d_ff=D_FF, dropout=1.5), ValueError, "dropout"),
        (
            dict(d_model=D_MODEL, d_ff=D_FF, dropout="0.1"),
            TypeError,
            "dropout",
        ),
        (dict(d_model=D_MODEL, d_ff=D_FF, fused=True), ValueError, "gated"),
        (dict(d_model=D_MODEL, d_ff=D_FF, dropout=1.0), ValueError, "dropout"),
        (
            dict(
                d_model=D_MODEL,
                d_ff=D_FF,
                gated=True,
                fused=True,
                up_bias=False,
            ),
            ValueError,
            "gate_bias == up_bias",
        ),
        (
            dict(
                d_model=D_MODEL,
                d_ff=D_FF,
                gated=True,
                fused=True,
                gate_bias=False,
            ),
            ValueError,
            "gate_bias == up_bias",
        ),
    ],
)
def test_bad_constructor_arguments(kwargs, error, argument):
    with pytest.raises(error, match=argument):
        FeedForward(**kwargs)


def test_bad_sizes_in_helpers():
    with pytest.raises(ValueError, match="d_model"):
        feed_forward_variant("relu", 0)
    with pytest.raises(ValueError, match="d_ff"):
        feed_forward_variant("swiglu", D_MODEL, d_ff=-4)
    with pytest.raises(ValueError, match="d_ff"):
        matched_hidden_size(0, gated=True)
    with pytest.raises(TypeError, match="d_model"):
        feed_forward_param_count(None, D_FF, gated=False)


def test_bad_input():
    ff = FeedForward(D_MODEL, D_FF)
    with pytest.raises(
        ValueError,
        match=r"x must have shape \[\.\.\., d_model=8\], got \(2, 5, 7\)",
    ):
        ff(torch.randn(2, 5, 7))
    with pytest.raises(ValueError, match="x must have shape"):
        ff(torch.tensor(1.0))
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        ff([[0.0] * D_MODEL])


@pytest.mark.parametrize("gated", [False, True])
def test_empty_sequence_raises(gated):
    ff = FeedForward(D_MODEL, D_FF, gated=gated)
    with pytest.raises(ValueError, match="empty sequence"):
        ff(torch.randn(2, 0, D_MODEL))


def test_dropout_one_raises_naming_dropout():
    for make in (
        lambda: FeedForward(D_MODEL, D_FF, dropout=1.0),
        lambda: feed_forward_variant("swiglu", D_MODEL, D_FF, dropout=1.0),
    ):
        with pytest.raises(ValueError, match="dropout"):
            make()


def test_fuse_needs_a_gated_feed_forward():
    with pytest.raises(ValueError, match="gated"):
        fuse(FeedForward(D_MODEL, D_FF))
    with pytest.raises(TypeError, match="FeedForward"):
        fuse(torch.nn.Linear(D_MODEL, D_FF))
    # the factory's fused=True fuses only where there is something to fuse
    assert not feed_forward_variant("relu", D_MODEL, fused=True).fused
    assert feed_forward_variant("geglu", D_MODEL, fused=True).fused


# ---------------------------------------------------------------------------------------------
# Flags are real bools: gated="no" is a truthy string, and built a gated FFN.

FLAGS = ["gated", "gate_bias", "up_bias", "down_bias", "fused"]


@pytest.mark.parametrize("value", ["no", "False", 0, 1, None, 1.0])
@pytest.mark.parametrize("flag", FLAGS)
def test_feed_forward_flags_must_be_bools(flag, value):
    with pytest.raises(TypeError, match=f"{flag} must be a bool"):
        FeedForward(D_MODEL, D_FF, **{flag: value})


@pytest.mark.parametrize(
    "call, flag",
    [
        (lambda: matched_hidden_size(D_FF, "no"), "gated"),
        (lambda: matched_hidden_size(D_FF, 1), "gated"),
        (
            lambda: feed_forward_param_count(D_MODEL, D_FF, gated="yes"),
            "gated",
        ),
        (
            lambda: feed_forward_param_count(
                D_MODEL, D_FF, gated=False, up_bias=2
            ),
            "up_bias",
        ),
        (
            lambda: feed_forward_param_count(
                D_MODEL, D_FF, gated=True, gate_bias=None
            ),
            "gate_bias",
        ),
        (
            lambda: feed_forward_param_count(
                D_MODEL, D_FF, gated=True, down_bias="no"
            ),
            "down_bias",
        ),
        (lambda: feed_forward_variant("swiglu", D_MODEL, bias="no"), "bias"),
        (lambda: feed_forward_variant("swiglu", D_MODEL, fused=1), "fused"),
        (
            lambda: feed_forward_variant("swiglu", D_MODEL, match_params="no"),
            "match_params",
        ),
    ],
)
def test_helper_flags_must_be_bools(call, flag):
    with pytest.raises(TypeError, match=f"{flag} must be a bool"):
        call()


def test_an_activation_class_instead_of_a_module_is_refused():
    with pytest.raises(
        TypeError, match=r"activation .*class GELU: pass GELU\(\)"
    ):
        FeedForward(D_MODEL, D_FF, activation=torch.nn.GELU)
    # a module and a function are accepted
    x = torch.randn(2, 3, D_MODEL)
    module = FeedForward(D_MODEL, D_FF, activation=torch.nn.GELU())
    function = FeedForward(D_MODEL, D_FF, activation=torch.relu)
    assert module(x).shape == function(x).shape == x.shape
