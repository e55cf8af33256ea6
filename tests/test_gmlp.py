"""Tests of mixers.gmlp against formulas and loops written here independently of the module."""

import math

import pytest
import torch

from mixers.gmlp import (
    GatedMLP,
    GMLPBlock,
    SpatialGatingUnit,
    TinyAttention,
    diagonal_means,
    gmlp_param_count,
    toeplitz_score,
)


@pytest.fixture(autouse=True)
def _float64_and_seed():
    """Every test runs in float64 (references agree to ~1e-12) from a fixed seed."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(0)
    yield
    torch.set_default_dtype(previous)


# Two per-sample token masks (True = real token, False = padding): right padding, and holes + a padded start.
MASK = torch.tensor(
    [[True, True, True, False, False], [False, True, False, True, True]]
)


# ---------------------------------------------------------------------------------------------
# Independent references.


def layer_norm(x, weight, bias, eps=1e-5):
    """(x - mean) / sqrt(biased variance + eps) * weight + bias, over the last dim."""
    mean = x.sum(-1, keepdim=True) / x.shape[-1]
    var = ((x - mean) ** 2).sum(-1, keepdim=True) / x.shape[-1]
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def gelu(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def sgu_loop(sgu, z, token_mask=None, gate_residual=None):
    """Z1[i] * (sum over visible keys j of W[i, j] norm(Z2)[j] + b[i] (+ residual)), by loops; 0 at
    a padded position i."""
    batch, seq, d_z = z.shape
    half = d_z // 2
    out = torch.zeros(batch, seq, half)
    for b in range(batch):
        for i in range(seq):
            if token_mask is not None and not token_mask[b, i]:
                continue
            gate = sgu.bias[i].clone().expand(half).clone()
            for j in range(seq):
                if sgu.causal and j > i:
                    continue
                if token_mask is not None and not token_mask[b, j]:
                    continue
                normed = layer_norm(
                    z[b, j, half:],
                    sgu.norm.weight,
                    sgu.norm.bias,
                    sgu.norm.eps,
                )
                gate = gate + sgu.weight[i, j] * normed
            if gate_residual is not None:
                gate = gate + gate_residual[b, i]
            out[b, i] = z[b, i, :half] * gate
    return out


def sgu_formula(sgu, z, n=None):
    """Vectorised s(Z) with the leading [n, n] block of W (n = seq) and its own LayerNorm."""
    n = z.shape[1] if n is None else n
    z1, z2 = z[..., : z.shape[-1] // 2], z[..., z.shape[-1] // 2 :]
    weight = sgu.weight[:n, :n]
    if sgu.causal:
        weight = torch.tril(weight)
    normed = layer_norm(z2, sgu.norm.weight, sgu.norm.bias, sgu.norm.eps)
    return z1 * (
        torch.einsum("ij,bjc->bic", weight, normed) + sgu.bias[:n, None]
    )


def attention_formula(attn, x, token_mask=None):
    """softmax(q kᵀ / √d_attn) v, then proj; padded/future keys skipped; an empty row gives 0 before proj.
    A padded query reads from a zero input (the module zeroes padding on entry)."""
    if token_mask is not None:
        x = x * token_mask[:, :, None]  # finite x here
    q, k, v = (x @ attn.qkv.weight.T + attn.qkv.bias).split(
        attn.d_attn, dim=-1
    )
    scores = q @ k.transpose(1, 2) / math.sqrt(attn.d_attn)
    seq = x.shape[1]
    allowed = torch.ones(x.shape[0], seq, seq, dtype=torch.bool)
    if attn.causal:
        allowed &= torch.arange(seq)[None, :] <= torch.arange(seq)[:, None]
    if token_mask is not None:
        allowed &= token_mask[:, None, :]
    e = torch.exp(scores - scores.max(-1, keepdim=True).values) * allowed
    weights = e / e.sum(-1, keepdim=True).clamp_min(
        1e-300
    )  # an empty row: 0 / tiny = 0
    return (weights @ v) @ attn.proj.weight.T + attn.proj.bias


def randomise(module):
    """Non-trivial values for every parameter (LayerNorm scale and shift, W, b, biases)."""
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0, 0.5)
    return module


def dependency(fn, x):
    """D[i, j] = sum |d out[b, i, :] / d x[b', j, :]| over samples and channels; also cross-sample part."""
    jac = torch.autograd.functional.jacobian(
        fn, x
    )  # [batch, seq, c_out, batch, seq, c_in]
    batch = x.shape[0]
    same = torch.stack(
        [jac[b, :, :, b] for b in range(batch)]
    )  # [batch, seq, c_out, seq, c_in]
    cross = sum(
        jac[b, :, :, c].abs().sum()
        for b in range(batch)
        for c in range(batch)
        if b != c
    )
    return same.abs().sum(dim=(0, 2, 4)), cross


MODULES = {
    "sgu": lambda causal: SpatialGatingUnit(8, 7, causal=causal),
    "gated_mlp": lambda causal: GatedMLP(6, 8, 7, causal=causal),
    "block": lambda causal: GMLPBlock(6, 8, 7, causal=causal),
    "amlp": lambda causal: GMLPBlock(
        6, 8, 7, causal=causal, tiny_attention=True, d_attn=4
    ),
}


def _input_for(module, batch=2, seq=6):
    width = module.d_z if isinstance(module, SpatialGatingUnit) else 6
    return torch.randn(batch, seq, width)


# ---------------------------------------------------------------------------------------------
# Causality, with autograd.


@pytest.mark.parametrize("name", MODULES)
def test_causal_output_never_depends_on_the_future(name):
    module = randomise(MODULES[name](True))
    x = _input_for(module)
    dep, cross = dependency(module, x)
    future = torch.triu(torch.ones_like(dep, dtype=torch.bool), diagonal=1)
    assert torch.all(dep[future] == 0), (
        f"output i depends on input j > i:\n{dep}"
    )
    assert torch.all(dep[~future] > 0), (
        "causal mixing should still read every j <= i"
    )
    assert cross == 0, "samples of a batch must not mix"


@pytest.mark.parametrize("name", MODULES)
def test_non_causal_output_depends_on_the_future(name):
    module = randomise(MODULES[name](False))
    dep, _ = dependency(module, _input_for(module))
    assert torch.all(dep > 0), (
        f"non-causal mixing should read every position:\n{dep}"
    )


def test_causal_weight_gets_no_gradient_above_the_diagonal():
    sgu = SpatialGatingUnit(4, 5, causal=True)
    sgu(torch.randn(3, 5, 4)).square().sum().backward()
    upper = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    assert torch.all(sgu.weight.grad[upper] == 0) and torch.all(
        sgu.weight.grad[~upper] != 0
    )
    assert torch.equal(sgu.spatial_weight(), torch.tril(sgu.weight))
    assert (
        "mask" in dict(sgu.named_buffers()) and "mask" not in sgu.state_dict()
    )


# ---------------------------------------------------------------------------------------------
# Initialisation: the unit starts close to Z1.


def test_initial_unit_is_close_to_z1():
    # s - Z1 = Z1 * (f - 1) with f - 1 = W n, n = norm(Z2). Since |W[i, j]| <= init_scale,
    #   |s - Z1|[b, i, c] <= |Z1[b, i, c]| * init_scale * sum_j |n[b, j, c]|                    (1)
    #                     <= |Z1[b, i, c]| * init_scale * seq * sqrt(d_z/2 - 1)                  (2)
    # because a standardised vector of length m (unit LayerNorm scale, zero shift) has
    # max |n| <= sqrt(m - 1). Typically W n is a sum of seq terms of variance init_scale²/3
    # each, so rms(f - 1) ≈ init_scale * sqrt(seq / 3): 0.065 for seq = 128, init_scale = 0.01.
    d_z, seq, init_scale = 64, 128, 0.01
    sgu = SpatialGatingUnit(d_z, seq, init_scale=init_scale)
    assert torch.all(sgu.bias == 1) and sgu.weight.abs().max() <= init_scale
    z = torch.randn(4, seq, d_z) * 3 + 1
    z1, z2 = z[..., : d_z // 2], z[..., d_z // 2 :]
    with torch.no_grad():
        deviation = (sgu(z) - z1).abs()
    normed = layer_norm(z2, 1.0, 0.0)
    bound_1 = z1.abs() * init_scale * normed.abs().sum(dim=1, keepdim=True)
    bound_2 = z1.abs() * init_scale * seq * math.sqrt(d_z // 2 - 1)
    assert normed.abs().max() <= math.sqrt(d_z // 2 - 1)
    assert torch.all(deviation <= bound_1 + 1e-12) and torch.all(
        bound_1 <= bound_2
    )
    relative = deviation.square().mean().sqrt() / z1.square().mean().sqrt()
    assert (
        0.5 * init_scale * math.sqrt(seq / 3)
        < relative
        < 1.5 * init_scale * math.sqrt(seq / 3)
    )


def test_init_scale_sets_the_range_of_w():
    sgu = SpatialGatingUnit(4, 64, init_scale=0.2)
    assert 0.19 < sgu.weight.abs().max() <= 0.2
    assert torch.all(SpatialGatingUnit(4, 8, init_scale=0.0).weight == 0)


# ---------------------------------------------------------------------------------------------
# The unit against brute force; shorter and longer sequences.


@pytest.mark.parametrize("causal", [False, True])
def test_sgu_equals_triple_loop(causal):
    sgu = randomise(SpatialGatingUnit(6, 5, causal=causal))
    z = torch.randn(2, 5, 6)
    residual = torch.randn(2, 5, 3)
    torch.testing.assert_close(
        sgu(z), sgu_loop(sgu, z), rtol=1e-10, atol=1e-10
    )
    torch.testing.assert_close(
        sgu(z, gate_residual=residual),
        sgu_loop(sgu, z, gate_residual=residual),
        rtol=1e-10,
        atol=1e-10,
    )


@pytest.mark.parametrize("causal", [False, True])
def test_shorter_sequence_uses_leading_block_of_w(causal):
    sgu = randomise(SpatialGatingUnit(6, 10, causal=causal))
    z = torch.randn(3, 6, 6)
    torch.testing.assert_close(
        sgu(z), sgu_formula(sgu, z, n=6), rtol=1e-10, atol=1e-10
    )
    expected_w = (
        torch.tril(sgu.weight[:6, :6]) if causal else sgu.weight[:6, :6]
    )
    assert torch.equal(sgu.spatial_weight(6), expected_w)
    assert GMLPBlock(6, 8, 10, causal=causal)(torch.randn(2, 4, 6)).shape == (
        2,
        4,
        6,
    )


def test_longer_sequence_raises_naming_seq_len():
    sgu = SpatialGatingUnit(6, 10)
    with pytest.raises(ValueError, match="seq_len=10"):
        sgu(torch.randn(2, 11, 6))
    with pytest.raises(ValueError, match="seq_len=10"):
        GMLPBlock(6, 6, 10)(torch.randn(1, 11, 6))
    with pytest.raises(ValueError, match="seq_len"):
        sgu.spatial_weight(11)


# ---------------------------------------------------------------------------------------------
# Per-sample padding masks.


@pytest.mark.parametrize("causal", [False, True])
def test_sgu_padding_equals_loop_skipping_padded_keys(causal):
    sgu = randomise(SpatialGatingUnit(6, 5, causal=causal))
    z = torch.randn(2, 5, 6)
    torch.testing.assert_close(
        sgu(z, MASK), sgu_loop(sgu, z, MASK), rtol=1e-10, atol=1e-10
    )
    # an all-real mask changes nothing
    torch.testing.assert_close(
        sgu(z, torch.ones(2, 5, dtype=torch.bool)), sgu(z), rtol=0, atol=0
    )


@pytest.mark.parametrize("causal", [False, True])
def test_tiny_attention_equals_formula(causal):
    attn = randomise(TinyAttention(6, 4, d_attn=3, causal=causal))
    x = torch.randn(2, 5, 6)
    torch.testing.assert_close(
        attn(x), attention_formula(attn, x), rtol=1e-10, atol=1e-10
    )
    torch.testing.assert_close(
        attn(x, MASK), attention_formula(attn, x, MASK), rtol=1e-10, atol=1e-10
    )
    torch.testing.assert_close(
        attn(x, torch.ones(2, 5, dtype=torch.bool)),
        attn(x),
        rtol=1e-10,
        atol=1e-10,
    )


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", ["sgu", "gated_mlp", "block", "amlp"])
def test_padded_inputs_do_not_change_real_outputs(name, causal):
    module = randomise(MODULES[name](causal))
    x = _input_for(module, seq=5)
    x.requires_grad_(True)
    out = module(x, MASK)
    changed = torch.where(
        MASK[:, :, None], x.detach(), 100 * torch.randn_like(x)
    )
    out_changed = module(changed, MASK)
    torch.testing.assert_close(
        out_changed[MASK], out[MASK], rtol=1e-12, atol=1e-12
    )
    assert torch.isfinite(out).all() and torch.isfinite(out_changed).all()
    (grad,) = torch.autograd.grad(out[MASK].sum(), x)
    assert torch.isfinite(grad).all() and torch.all(grad[~MASK] == 0)
    # and the mask matters: without it, changing the padded inputs moves the real outputs
    assert not torch.allclose(module(changed)[MASK], module(x.detach())[MASK])


def test_fully_padded_causal_prefix_gives_no_nan():
    # With causality, position 0 of sample 1 may attend to nothing: softmax over nothing is NaN
    # unless handled. Its output is proj's bias; the gradient stays finite too.
    block = randomise(
        GMLPBlock(6, 8, 5, causal=True, tiny_attention=True, d_attn=4)
    )
    x = torch.randn(2, 5, 6, requires_grad=True)
    out = block(x, MASK)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(x.grad).all()
    attn = block.mlp.attention
    torch.testing.assert_close(
        attn(torch.randn(2, 5, 6), MASK)[1, 0], attn.proj.bias, rtol=0, atol=0
    )


# ---------------------------------------------------------------------------------------------
# The block by hand; parameter counts.


@pytest.mark.parametrize("tiny_attention", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_block_equals_hand_computation(causal, tiny_attention):
    block = randomise(
        GMLPBlock(
            6, 10, 8, causal=causal, tiny_attention=tiny_attention, d_attn=4
        )
    )
    mlp = block.mlp
    x = torch.randn(3, 7, 6)
    normed = layer_norm(x, block.norm.weight, block.norm.bias)
    z = gelu(normed @ mlp.proj_in.weight.T + mlp.proj_in.bias)
    gated = sgu_formula(mlp.sgu, z)
    if tiny_attention:
        gated = gated + z[..., :5] * attention_formula(mlp.attention, normed)
    expected = x + gated @ mlp.proj_out.weight.T + mlp.proj_out.bias
    torch.testing.assert_close(block(x), expected, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(
        block(x), x + mlp(block.norm(x)), rtol=0, atol=0
    )


@pytest.mark.parametrize(
    "d_model, d_ffn, seq_len, tiny_attention, d_attn",
    [
        (6, 8, 5, False, 64),
        (6, 8, 5, True, 4),
        (128, 768, 256, False, 64),
        (128, 768, 256, True, 64),
    ],
)
def test_param_count(d_model, d_ffn, seq_len, tiny_attention, d_attn):
    block = GMLPBlock(
        d_model, d_ffn, seq_len, tiny_attention=tiny_attention, d_attn=d_attn
    )
    actual = sum(p.numel() for p in block.parameters())
    # two LayerNorms (d_model, d_ffn/2) have scale+shift; U, V are Linear with bias; W, b.
    expected = 2 * d_model + 2 * (d_ffn // 2)
    expected += (
        (d_model + 1) * d_ffn
        + (d_ffn // 2 + 1) * d_model
        + seq_len * (seq_len + 1)
    )
    if (
        tiny_attention
    ):  # qkv: d_model -> 3 d_attn, proj: d_attn -> d_ffn/2, both with bias
        expected += (d_model + 1) * 3 * d_attn + (d_attn + 1) * (d_ffn // 2)
    assert (
        actual
        == expected
        == gmlp_param_count(d_model, d_ffn, seq_len, tiny_attention, d_attn)
    )


# ---------------------------------------------------------------------------------------------
# Bad input.


@pytest.mark.parametrize(
    "build, error, match",
    [
        (lambda: SpatialGatingUnit(7, 4), ValueError, "d_z"),
        (lambda: SpatialGatingUnit(0, 4), ValueError, "d_z"),
        (lambda: SpatialGatingUnit(4, 0), ValueError, "seq_len"),
        (lambda: SpatialGatingUnit(4.0, 4), TypeError, "d_z"),
        (
            lambda: SpatialGatingUnit(4, 4, init_scale=-1),
            ValueError,
            "init_scale",
        ),
        (
            lambda: SpatialGatingUnit(4, 4, init_scale="0.1"),
            TypeError,
            "init_scale",
        ),
        (lambda: GatedMLP(8, 15, 4), ValueError, "d_ffn"),
        (lambda: GMLPBlock(8, 16, True), TypeError, "seq_len"),
        (lambda: TinyAttention(8, 4, d_attn=0), ValueError, "d_attn"),
        (lambda: gmlp_param_count(8, 15, 4), ValueError, "d_ffn"),
    ],
)
def test_bad_constructor_arguments(build, error, match):
    with pytest.raises(error, match=match):
        build()


SGU = SpatialGatingUnit(6, 5).double()
BLOCK = GMLPBlock(6, 8, 5, tiny_attention=True, d_attn=4).double()


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda: SGU(torch.randn(2, 5, 8)),
            ValueError,
            r"z must have shape \[batch, seq, d_z=6\]",
        ),
        (
            lambda: SGU(torch.randn(5, 6)),
            ValueError,
            r"z must have shape \[batch, seq, d_z=6\]",
        ),
        (lambda: SGU([[1.0]]), TypeError, "z must be a torch.Tensor"),
        (
            lambda: SGU(torch.ones(2, 5, 6, dtype=torch.long)),
            TypeError,
            "z must be a floating-point",
        ),
        (
            lambda: SGU(
                torch.randn(2, 5, 6), torch.ones(2, 4, dtype=torch.bool)
            ),
            ValueError,
            r"token_mask must have shape \[batch, seq\]",
        ),
        (
            lambda: SGU(torch.randn(2, 5, 6), torch.ones(2, 5)),
            TypeError,
            "token_mask must be a bool",
        ),
        (
            lambda: SGU(
                torch.randn(2, 5, 6), gate_residual=torch.randn(2, 5, 6)
            ),
            ValueError,
            "gate_residual",
        ),
        (
            lambda: SGU(
                torch.randn(2, 5, 6), gate_residual=torch.randn(1, 5, 3)
            ),
            ValueError,
            "gate_residual",
        ),
        (
            lambda: BLOCK(torch.randn(2, 5, 7)),
            ValueError,
            r"x must have shape \[batch, seq, d_model=6\]",
        ),
        (
            lambda: BLOCK(torch.randn(5, 6)),
            ValueError,
            r"x must have shape \[batch, seq, d_model=6\]",
        ),
        (
            lambda: BLOCK.mlp(torch.randn(2, 5, 7)),
            ValueError,
            r"x must have shape",
        ),
        (
            lambda: BLOCK(
                torch.randn(2, 5, 6), torch.ones(5, dtype=torch.bool)
            ),
            ValueError,
            "token_mask",
        ),
        (
            lambda: BLOCK.mlp.attention(torch.randn(2, 5, 5)),
            ValueError,
            r"d_in=6",
        ),
        (
            lambda: SGU(torch.randn(2, 0, 6)),
            ValueError,
            "z must hold at least one position",
        ),
        (
            lambda: BLOCK(torch.randn(2, 0, 6)),
            ValueError,
            "x must hold at least one position",
        ),
        (
            lambda: BLOCK.mlp(torch.randn(2, 0, 6)),
            ValueError,
            "x must hold at least one position",
        ),
        (
            lambda: BLOCK.mlp.attention(torch.randn(2, 0, 6)),
            ValueError,
            "x must hold at least one position",
        ),
    ],
)
def test_bad_input_raises_naming_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


# The mask convention: True = real token. An inverted mask or a 0/1 mask is refused.

MASK_TAKERS = {
    "sgu": lambda: (SpatialGatingUnit(6, 5), torch.randn(2, 5, 6)),
    "tiny_attention": lambda: (
        TinyAttention(6, 4, d_attn=3),
        torch.randn(2, 5, 6),
    ),
    "gated_mlp": lambda: (GatedMLP(6, 8, 5), torch.randn(2, 5, 6)),
    "block": lambda: (GMLPBlock(6, 8, 5), torch.randn(2, 5, 6)),
    "amlp": lambda: (
        GMLPBlock(6, 8, 5, tiny_attention=True, d_attn=4),
        torch.randn(2, 5, 6),
    ),
}


@pytest.mark.parametrize("name", MASK_TAKERS)
def test_token_mask_with_an_all_padding_sample_raises(name):
    """A sample with no True is almost surely torch's key_padding_mask (True = padding): pass ~mask."""
    module, x = MASK_TAKERS[name]()
    module(x, MASK)  # the right sense runs
    with pytest.raises(ValueError, match="~mask"):
        module(x, ~torch.ones(2, 5, dtype=torch.bool))
    one_sample_empty = MASK.clone()
    one_sample_empty[1] = False
    with pytest.raises(ValueError, match="~mask"):
        module(x, one_sample_empty)


@pytest.mark.parametrize("name", MASK_TAKERS)
def test_int_token_mask_raises_type_error(name):
    module, x = MASK_TAKERS[name]()
    with pytest.raises(TypeError, match="token_mask must be a bool"):
        module(x, MASK.long())


@pytest.mark.parametrize("name", MASK_TAKERS)
def test_zero_length_sequence_raises(name):
    module, x = MASK_TAKERS[name]()
    with pytest.raises(ValueError, match="empty sequence"):
        module(x[:, :0])


# ---------------------------------------------------------------------------------------------
# Dropout on the gate's output Z̃.


@pytest.mark.parametrize("cls", [GatedMLP, GMLPBlock])
def test_dropout_acts_in_training_only(cls):
    module = randomise(cls(6, 8, 5, dropout=0.5))
    mlp = module if cls is GatedMLP else module.mlp
    assert mlp.dropout.p == 0.5
    x = torch.randn(2, 5, 6)
    module.eval()
    evaluated = module(x)
    assert torch.equal(module(x), evaluated)
    module.train()
    assert not torch.allclose(module(x), evaluated)
    # dropout=0 (the default) is the identity in training too
    plain = cls(6, 8, 5)
    plain.load_state_dict(module.state_dict())
    torch.testing.assert_close(plain.train()(x), evaluated, rtol=0, atol=0)


def test_dropout_on_the_sgu_output():
    mlp = randomise(GatedMLP(6, 8, 5, dropout=0.5)).train()
    seen = {}
    mlp.dropout.register_forward_hook(
        lambda module, args, out: seen.update(hidden=args[0], dropped=out)
    )
    x = torch.randn(2, 5, 6)
    out = mlp(x)
    z = gelu(x @ mlp.proj_in.weight.T + mlp.proj_in.bias)
    torch.testing.assert_close(
        seen["hidden"], sgu_formula(mlp.sgu, z), rtol=1e-10, atol=1e-10
    )
    kept = seen["dropped"] != 0
    torch.testing.assert_close(
        seen["dropped"][kept], 2 * seen["hidden"][kept], rtol=1e-12, atol=1e-12
    )
    torch.testing.assert_close(
        out,
        seen["dropped"] @ mlp.proj_out.weight.T + mlp.proj_out.bias,
        rtol=1e-12,
        atol=1e-12,
    )


@pytest.mark.parametrize(
    "dropout, error",
    [(1.0, ValueError), (-0.1, ValueError), ("0.1", TypeError)],
)
@pytest.mark.parametrize("cls", [GatedMLP, GMLPBlock])
def test_bad_dropout_raises(cls, dropout, error):
    with pytest.raises(error, match="dropout"):
        cls(6, 8, 5, dropout=dropout)


# ---------------------------------------------------------------------------------------------
# How Toeplitz is W: diagonal means and the share of variance they explain.


def test_diagonal_means_equal_a_loop_over_diagonals():
    w = torch.randn(6, 6)
    causal = [
        torch.stack([w[i, i - k] for i in range(k, 6)]).mean()
        for k in range(6)
    ]
    torch.testing.assert_close(
        diagonal_means(w), torch.stack(causal), rtol=1e-12, atol=1e-12
    )
    full = [
        torch.stack([w[i, i - k] for i in range(6) if 0 <= i - k < 6]).mean()
        for k in range(-5, 6)
    ]
    torch.testing.assert_close(
        diagonal_means(w, causal=False),
        torch.stack(full),
        rtol=1e-12,
        atol=1e-12,
    )


def test_toeplitz_score_is_one_for_a_toeplitz_matrix_and_small_for_noise():
    n = 64
    taps = torch.randn(n)
    i, j = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    toeplitz = taps[(i - j).clamp_min(0)] * (j <= i)
    assert toeplitz_score(toeplitz) == pytest.approx(1.0, abs=1e-12)
    # the upper triangle is masked in a causal W: whatever it holds does not count
    assert toeplitz_score(
        toeplitz + torch.randn(n, n).triu(1)
    ) == pytest.approx(1.0, abs=1e-12)
    assert toeplitz_score(torch.full((5, 5), 0.3)) == 1.0
    # i.i.d. noise: n diagonal means fitted to N = n(n+1)/2 entries explain (n-1)/(N-1) in expectation
    expected = (n - 1) / (n * (n + 1) / 2 - 1)
    scores = torch.tensor(
        [toeplitz_score(torch.randn(n, n)) for _ in range(20)]
    )
    assert (
        abs(scores.mean().item() - expected) < 0.3 * expected
        and scores.max() < 0.1
    )
    # Toeplitz signal plus noise of equal variance: about half the variance is explained
    signal = torch.randn(2 * n)
    big_i, big_j = torch.meshgrid(
        torch.arange(2 * n), torch.arange(2 * n), indexing="ij"
    )
    mixed = signal[(big_i - big_j).clamp_min(0)] + torch.randn(2 * n, 2 * n)
    assert 0.4 < toeplitz_score(mixed) < 0.65
    # non-causal: every entry counts
    full_toeplitz = torch.randn(2 * n - 1)[i - j + n - 1]
    assert toeplitz_score(full_toeplitz, causal=False) == pytest.approx(
        1.0, abs=1e-12
    )
    assert (
        toeplitz_score(
            full_toeplitz + torch.randn(n, n).triu(1) * 10, causal=False
        )
        < 0.5
    )


@pytest.mark.parametrize(
    "bad, error",
    [
        (torch.randn(3, 4), ValueError),
        (torch.randn(4), ValueError),
        (torch.randn(2, 3, 3), ValueError),
        ([[1.0]], TypeError),
    ],
)
def test_toeplitz_measures_reject_non_square_weights(bad, error):
    for fn in (toeplitz_score, diagonal_means):
        with pytest.raises(error, match="weight"):
            fn(bad)


# ---------------------------------------------------------------------------------------------
# A padded token is never read: inf or NaN at padded positions reaches no real output and no
# gradient. (A masked key's zero weight is not enough: 0 · NaN = NaN, and a per-position layer's
# weight gradient sums over padded positions too.)

PADDING_MODULES = {
    "tiny_attention": lambda causal: TinyAttention(
        6, 4, d_attn=3, causal=causal
    ),
    **MODULES,
}


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", PADDING_MODULES)
def test_nan_and_inf_padding_reach_no_real_output_and_no_gradient(
    name, causal, bad
):
    module = randomise(PADDING_MODULES[name](causal))
    x = torch.randn(
        2, 5, module.d_z if isinstance(module, SpatialGatingUnit) else 6
    )
    poisoned = torch.where(MASK[:, :, None], x, bad).requires_grad_(True)
    out = module(poisoned, MASK)
    with torch.no_grad():
        finite_padding = module(x, MASK)
    torch.testing.assert_close(
        out[MASK], finite_padding[MASK], rtol=1e-12, atol=1e-12
    )
    assert torch.isfinite(out[MASK]).all()
    out[MASK].square().sum().backward()
    assert torch.isfinite(poisoned.grad).all() and torch.all(
        poisoned.grad[~MASK] == 0
    )
    for parameter_name, parameter in module.named_parameters():
        assert (
            parameter.grad is not None and torch.isfinite(parameter.grad).all()
        ), parameter_name


@pytest.mark.parametrize("causal", [False, True])
def test_sgu_nan_padding_with_a_gate_residual(causal):
    sgu = randomise(SpatialGatingUnit(6, 5, causal=causal))
    z, residual = (
        torch.randn(2, 5, 6),
        torch.randn(2, 5, 3, requires_grad=True),
    )
    poisoned = torch.where(MASK[:, :, None], z, float("nan")).requires_grad_(
        True
    )
    out = sgu(poisoned, MASK, residual)
    torch.testing.assert_close(
        out[MASK],
        sgu_loop(sgu, z, MASK, residual)[MASK],
        rtol=1e-10,
        atol=1e-10,
    )
    out[MASK].sum().backward()
    assert (
        torch.isfinite(poisoned.grad).all()
        and torch.isfinite(residual.grad).all()
    )
    assert (
        torch.isfinite(sgu.weight.grad).all()
        and torch.isfinite(sgu.norm.weight.grad).all()
    )


def test_a_model_of_stacked_blocks_with_nan_padding_trains_on_its_real_tokens():
    blocks = torch.nn.Sequential(
        *(
            randomise(
                GMLPBlock(6, 8, 5, causal=True, tiny_attention=True, d_attn=4)
            )
            for _ in range(2)
        )
    )
    x = torch.where(MASK[:, :, None], torch.randn(2, 5, 6), float("nan"))
    h = x
    for block in blocks:
        h = block(h, MASK)
    h[MASK].sum().backward()
    assert torch.isfinite(h[MASK]).all()
    assert all(torch.isfinite(p.grad).all() for p in blocks.parameters())


# ---------------------------------------------------------------------------------------------
# Every number and flag is checked where it enters (eps=-1 gave NaN; causal="no" and
# tiny_attention="no" are truthy strings that silently meant True).


@pytest.mark.parametrize(
    "build, error, match",
    [
        (
            lambda: SpatialGatingUnit(4, 4, eps=-1),
            ValueError,
            "eps must be a positive finite float, got -1",
        ),
        (lambda: SpatialGatingUnit(4, 4, eps=0), ValueError, "eps"),
        (lambda: SpatialGatingUnit(4, 4, eps=float("nan")), ValueError, "eps"),
        (lambda: SpatialGatingUnit(4, 4, eps="1e-5"), TypeError, "eps"),
        (
            lambda: SpatialGatingUnit(4, 4, init_scale=float("inf")),
            ValueError,
            "init_scale must be a non-negative",
        ),
        (
            lambda: SpatialGatingUnit(4, 4, init_scale=float("nan")),
            ValueError,
            "init_scale",
        ),
        (
            lambda: SpatialGatingUnit(4, 4, init_scale=True),
            TypeError,
            "init_scale",
        ),
        (
            lambda: SpatialGatingUnit(4, 4, causal="no"),
            TypeError,
            "causal must be a bool",
        ),
        (lambda: SpatialGatingUnit(4, 4, causal=1), TypeError, "causal"),
        (lambda: SpatialGatingUnit(4, 4.0), TypeError, "seq_len"),
        (
            lambda: TinyAttention(8, 4, causal="no"),
            TypeError,
            "causal must be a bool",
        ),
        (lambda: TinyAttention(8, 0), ValueError, "d_out"),
        (lambda: TinyAttention(True, 4), TypeError, "d_in"),
        (lambda: GatedMLP(8, 16, 4, causal="no"), TypeError, "causal"),
        (
            lambda: GatedMLP(8, 16, 4, tiny_attention="no"),
            TypeError,
            "tiny_attention must be a bool",
        ),
        (
            lambda: GatedMLP(8, 16, 4, tiny_attention=1),
            TypeError,
            "tiny_attention",
        ),
        (lambda: GatedMLP(8, 16, 4, d_attn=0), ValueError, "d_attn"),
        (
            lambda: GatedMLP(8, 16, 4, d_attn=-4, tiny_attention=False),
            ValueError,
            "d_attn",
        ),
        (lambda: GatedMLP(0, 16, 4), ValueError, "d_model"),
        (lambda: GatedMLP(8, 16, 0), ValueError, "seq_len"),
        (lambda: GMLPBlock(0, 16, 4), ValueError, "d_model"),
        (lambda: GMLPBlock(8.0, 16, 4), TypeError, "d_model"),
        (
            lambda: GMLPBlock(8, 16, 4, tiny_attention="yes"),
            TypeError,
            "tiny_attention",
        ),
        (
            lambda: GMLPBlock(8, 16, 4, dropout=float("nan")),
            ValueError,
            "dropout",
        ),
        (
            lambda: gmlp_param_count(8, 16, 4, tiny_attention="no"),
            TypeError,
            "tiny_attention",
        ),
        (lambda: gmlp_param_count(8, 16, 4, d_attn=0), ValueError, "d_attn"),
        (
            lambda: diagonal_means(torch.randn(3, 3), causal="no"),
            TypeError,
            "causal must be a bool",
        ),
        (
            lambda: toeplitz_score(torch.randn(3, 3), causal=None),
            TypeError,
            "causal",
        ),
        (
            lambda: SpatialGatingUnit(4, 4).spatial_weight(0),
            ValueError,
            "seq_len",
        ),
    ],
)
def test_bad_numbers_and_flags_are_refused_naming_them(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_token_mask_is_checked_before_it_is_used():
    block = GMLPBlock(6, 8, 5)
    with pytest.raises(
        ValueError, match=r"token_mask must have shape \[batch, seq\]"
    ):
        block(torch.randn(2, 5, 6), torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="token_mask must be a bool"):
        block.mlp(torch.randn(2, 5, 6), torch.ones(2, 5))
