"""Tests of mixers.attention against independent references.

References are written here, not taken from the module: torch.nn.functional.scaled_dot_product_attention,
torch.nn.MultiheadAttention with copied weights, an einsum multi-head reference, and brute-force
Python loops over positions for the score functions. Everything runs in float64 on tiny sizes.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mixers.attention import (
    AdditiveAttention,
    BiAttention,
    DotProductAttention,
    MultiHeadAttention,
    SingleLayerAttention,
    attention_in_blocks,
    causal_mask,
    dot_product_attention,
    fused_attention,
    masked_softmax,
    token_mask_to_attention_mask,
)

DT = torch.float64
ATOL = 1e-10  # float64 against float64 references; the brief's 1e-5 is the float32 bound
BACKENDS = ["eager", "sdpa"]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def rand(*shape, requires_grad=False):
    return torch.randn(*shape, dtype=DT, requires_grad=requires_grad)


def random_mask(*shape, p=0.4):
    """Bool "may attend" mask with every row keeping at least its first key."""
    mask = torch.rand(*shape) > p
    mask[..., 0] = True
    return mask


def randomize(module):
    """Random values in every parameter, biases included (the module starts them at zero)."""
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0.0, 0.5)
    return module


def assert_finite_grads(*tensors):
    for t in tensors:
        assert t.grad is not None and torch.isfinite(t.grad).all()


# ---------------------------------------------------------------------------------------------
# dot_product_attention and the mask helpers


def reference_weights(q, k, scale, bias=None, allowed=None):
    scores = torch.einsum("...id,...jd->...ij", q, k) * scale
    if bias is not None:
        scores = scores + bias
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    return scores.softmax(-1)


@pytest.mark.parametrize(
    "case", ["plain", "mask", "bias", "mask+bias", "broadcast-mask"]
)
def test_sdpa_matches_torch(case):
    q, k, v = rand(2, 3, 5, 8), rand(2, 3, 7, 8), rand(2, 3, 7, 6)
    mask = bias = None
    if "mask" in case:
        mask = (
            random_mask(2, 1, 5, 7)
            if case == "broadcast-mask"
            else random_mask(2, 3, 5, 7)
        )
    if "bias" in case:
        bias = rand(3, 5, 7)
    out, weights = dot_product_attention(q, k, v, mask=mask, bias=bias)

    if mask is not None and bias is not None:
        torch_mask = bias.masked_fill(~mask, float("-inf"))
    else:
        torch_mask = mask if mask is not None else bias
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=torch_mask)
    torch.testing.assert_close(out, expected, atol=ATOL, rtol=0)
    expected_weights = reference_weights(q, k, 1 / math.sqrt(8), bias, mask)
    torch.testing.assert_close(weights, expected_weights, atol=ATOL, rtol=0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5, dtype=DT))


def test_sdpa_float32_matches_torch_to_1e5():
    q, k, v = (
        torch.randn(2, 4, 6, 16),
        torch.randn(2, 4, 6, 16),
        torch.randn(2, 4, 6, 16),
    )
    mask = random_mask(6, 6)
    out, _ = dot_product_attention(q, k, v, mask=mask)
    torch.testing.assert_close(
        out,
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        atol=1e-5,
        rtol=0,
    )


@pytest.mark.parametrize("case", ["causal", "bool-mask", "float-mask"])
def test_fused_attention_on_cpu_bf16_computes_in_float32(case):
    # Under CPU autocast, q, k, v arrive in bf16; the helper runs torch's kernel in float32 on
    # exactly those (rounded) values and returns bf16 -- the same as doing so by hand.
    q, k, v = (torch.randn(2, 3, 7, 4).bfloat16() for _ in range(3))
    kwargs = {
        "causal": dict(is_causal=True),
        "bool-mask": dict(
            attn_mask=random_mask(2, 3, 7, 7) | torch.eye(7, dtype=torch.bool)
        ),
        "float-mask": dict(attn_mask=torch.randn(3, 7, 7).bfloat16()),
    }[case]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = fused_attention(q, k, v, **kwargs)
    by_hand = {
        key: (value.float() if value.is_floating_point() else value)
        for key, value in kwargs.items()
        if key == "attn_mask"
    }
    expected = F.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), **{**kwargs, **by_hand}
    )
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, expected.bfloat16())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_attention_in_full_precision_is_torch_sdpa(dtype):
    q, k, v = (torch.randn(2, 3, 7, 4, dtype=dtype) for _ in range(3))
    assert torch.equal(
        fused_attention(q, k, v, is_causal=True),
        F.scaled_dot_product_attention(q, k, v, is_causal=True),
    )


def test_sdpa_causal_matches_is_causal():
    q, k, v = rand(2, 2, 6, 4), rand(2, 2, 6, 4), rand(2, 2, 6, 4)
    out, weights = dot_product_attention(q, k, v, mask=causal_mask(6))
    torch.testing.assert_close(
        out,
        F.scaled_dot_product_attention(q, k, v, is_causal=True),
        atol=ATOL,
        rtol=0,
    )
    assert (weights.triu(diagonal=1) == 0).all()


def test_scale_one_is_the_unscaled_dot_product():
    q, k, v = rand(2, 5, 8), rand(2, 7, 8), rand(2, 7, 3)
    out, weights = dot_product_attention(q, k, v, scale=1.0)
    expected_weights = torch.softmax(
        q @ k.transpose(1, 2), dim=-1
    )  # the blog post's code: temper = 1
    torch.testing.assert_close(weights, expected_weights, atol=ATOL, rtol=0)
    torch.testing.assert_close(out, expected_weights @ v, atol=ATOL, rtol=0)
    torch.testing.assert_close(
        out,
        F.scaled_dot_product_attention(q, k, v, scale=1.0),
        atol=ATOL,
        rtol=0,
    )
    default_out, _ = dot_product_attention(q, k, v)
    assert not torch.allclose(
        default_out, out
    )  # so the default really does scale


def test_masked_positions_get_exactly_zero_weight():
    q, k, v = rand(2, 5, 4), rand(2, 7, 4), rand(2, 7, 4)
    mask = random_mask(2, 5, 7)
    _, weights = dot_product_attention(q, k, v, mask=mask)
    assert (weights[~mask] == 0.0).all()
    assert (weights[mask] > 0.0).all()


def test_sdpa_fully_masked_row_is_zero_and_has_finite_grads():
    q, k, v = (
        rand(2, 4, 8, requires_grad=True),
        rand(2, 6, 8, requires_grad=True),
        rand(2, 6, 5, requires_grad=True),
    )
    bias = rand(4, 6, requires_grad=True)
    mask = random_mask(2, 4, 6)
    mask[0, 1] = False  # query 1 of batch 0 may attend to nothing
    out, weights = dot_product_attention(q, k, v, mask=mask, bias=bias)
    assert (out[0, 1] == 0).all() and (weights[0, 1] == 0).all()
    assert torch.isfinite(out).all()
    (out.square().sum() + weights.sum()).backward()
    assert_finite_grads(q, k, v, bias)
    assert (q.grad[0, 1] == 0).all()


def test_bias_of_minus_inf_everywhere_in_a_row_gives_zero_not_nan():
    q, k, v = rand(1, 3, 4), rand(1, 5, 4), rand(1, 5, 4)
    bias = torch.zeros(3, 5, dtype=DT)
    bias[2] = float("-inf")
    out, weights = dot_product_attention(q, k, v, bias=bias)
    assert (
        (out[0, 2] == 0).all()
        and (weights[0, 2] == 0).all()
        and torch.isfinite(out).all()
    )


def test_masked_softmax_matches_softmax_and_zeroes_masked_entries():
    scores, mask = rand(3, 6), random_mask(3, 6)
    weights = masked_softmax(scores, mask)
    expected = (
        torch.exp(scores)
        * mask
        / (torch.exp(scores) * mask).sum(-1, keepdim=True)
    )
    torch.testing.assert_close(weights, expected, atol=ATOL, rtol=0)


def test_causal_mask_offset_convention():
    assert torch.equal(
        causal_mask(4), torch.ones(4, 4, dtype=torch.bool).tril()
    )
    # 2 new queries after 3 cached tokens sit at positions 3 and 4.
    expected = torch.tensor(
        [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool
    )
    assert torch.equal(causal_mask(2, 5), expected)


def test_token_mask_to_attention_mask():
    real = torch.tensor([[True, True, False], [True, False, False]])
    mask = token_mask_to_attention_mask(real)
    assert mask.shape == (2, 1, 1, 3)
    assert torch.equal(mask[:, 0, 0], real)


def test_dot_product_attention_module():
    q, k, v = rand(2, 5, 8), rand(2, 7, 8), rand(2, 7, 3)
    module = DotProductAttention(dropout=0.5, scale=0.25).eval()
    out, weights = module(q, k, v, need_weights=True)
    assert torch.equal(
        module(q, k, v), out
    )  # without need_weights: the output alone
    torch.testing.assert_close(
        weights, reference_weights(q, k, 0.25), atol=ATOL, rtol=0
    )
    torch.testing.assert_close(out, weights @ v, atol=ATOL, rtol=0)
    module.train()
    dropped_out, train_weights = module(q, k, v, need_weights=True)
    torch.testing.assert_close(
        train_weights, weights
    )  # weights are reported before dropout
    assert not torch.allclose(dropped_out, out)


# ---------------------------------------------------------------------------------------------
# MultiHeadAttention against torch.nn.MultiheadAttention and an einsum reference


def torch_mha_like(ours):
    """torch.nn.MultiheadAttention (batch_first) holding exactly our weights."""
    ref = nn.MultiheadAttention(
        ours.d_model,
        ours.n_heads,
        batch_first=True,
        kdim=ours.kdim,
        vdim=ours.vdim,
        dtype=DT,
    )
    with torch.no_grad():
        # the same layout: one [3 d_model, d_model] weight when the widths
        # agree, three matrices when they do not
        assert ref._qkv_same_embed_dim == (ours.in_proj is not None)
        if ours.in_proj is not None:
            ref.in_proj_weight.copy_(ours.in_proj.weight)
            ref.in_proj_bias.copy_(ours.in_proj.bias)
        else:
            ref.q_proj_weight.copy_(ours.q_proj.weight)
            ref.k_proj_weight.copy_(ours.k_proj.weight)
            ref.v_proj_weight.copy_(ours.v_proj.weight)
            ref.in_proj_bias.copy_(
                torch.cat(
                    [ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]
                )
            )
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)
    return ref.eval()


def reference_mha(m, query, key, value, allowed=None, bias=None, scale=None):
    """Multi-head attention written out with einsum, per head."""

    def heads(x, proj):
        return (
            F.linear(x, proj.weight, proj.bias)
            .unflatten(-1, (m.n_heads, m.d_head))
            .transpose(1, 2)
        )

    q, k, v = (
        heads(query, m.q_proj),
        heads(key, m.k_proj),
        heads(value, m.v_proj),
    )
    weights = reference_weights(
        q,
        k,
        1 / math.sqrt(m.d_head) if scale is None else scale,
        bias,
        allowed,
    )
    out = torch.einsum("bhij,bhjd->bihd", weights, v).flatten(2)
    return F.linear(out, m.out_proj.weight, m.out_proj.bias), weights


def make_mha(d_model=16, n_heads=4, **kwargs):
    return randomize(
        MultiHeadAttention(d_model, n_heads, **kwargs).to(DT)
    ).eval()


@pytest.mark.parametrize("backend", BACKENDS)
def test_mha_self_attention_matches_torch(backend):
    ours = make_mha(backend=backend)
    x = rand(2, 6, 16)
    expected, expected_weights = torch_mha_like(ours)(
        x, x, x, average_attn_weights=False
    )
    torch.testing.assert_close(ours(x), expected, atol=ATOL, rtol=0)
    out, weights = ours(x, need_weights=True)
    torch.testing.assert_close(out, expected, atol=ATOL, rtol=0)
    torch.testing.assert_close(weights, expected_weights, atol=ATOL, rtol=0)
    assert weights.shape == (2, 4, 6, 6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mha_cross_attention_matches_torch(backend):
    ours = make_mha(kdim=10, vdim=12, backend=backend)
    query, key, value = rand(2, 5, 16), rand(2, 9, 10), rand(2, 9, 12)
    expected, expected_weights = torch_mha_like(ours)(
        query, key, value, average_attn_weights=False
    )
    torch.testing.assert_close(
        ours(query, key, value), expected, atol=ATOL, rtol=0
    )
    _, weights = ours(query, key, value, need_weights=True)
    torch.testing.assert_close(weights, expected_weights, atol=ATOL, rtol=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mha_key_padding_matches_torch(backend):
    ours = make_mha(backend=backend)
    query, memory = rand(3, 5, 16), rand(3, 7, 16)
    padding = torch.zeros(3, 7, dtype=torch.bool)
    padding[0, 5:], padding[2, 2:] = True, True
    expected, expected_weights = torch_mha_like(ours)(
        query,
        memory,
        memory,
        key_padding_mask=padding,
        average_attn_weights=False,
    )
    torch.testing.assert_close(
        ours(query, memory, token_mask=None if padding is None else ~padding),
        expected,
        atol=ATOL,
        rtol=0,
    )
    _, weights = ours(
        query,
        memory,
        token_mask=None if padding is None else ~padding,
        need_weights=True,
    )
    torch.testing.assert_close(weights, expected_weights, atol=ATOL, rtol=0)
    assert (weights[2, :, :, 2:] == 0.0).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_mha_causal_matches_torch(backend):
    ours = make_mha(causal=True, backend=backend)
    x = rand(2, 6, 16)
    future = torch.ones(6, 6, dtype=torch.bool).triu(
        diagonal=1
    )  # torch: True = NOT allowed
    expected, expected_weights = torch_mha_like(ours)(
        x, x, x, attn_mask=future, average_attn_weights=False
    )
    torch.testing.assert_close(ours(x), expected, atol=ATOL, rtol=0)
    _, weights = ours(x, need_weights=True)
    torch.testing.assert_close(weights, expected_weights, atol=ATOL, rtol=0)
    assert (weights[..., future] == 0.0).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_mha_user_mask_matches_torch(backend):
    ours = make_mha(backend=backend)
    x, allowed = rand(2, 6, 16), random_mask(6, 6)
    expected = torch_mha_like(ours)(
        x, x, x, attn_mask=~allowed, need_weights=False
    )[0]
    torch.testing.assert_close(
        ours(x, mask=allowed), expected, atol=ATOL, rtol=0
    )


def test_mha_float32_matches_torch_to_1e5():
    ours = MultiHeadAttention(
        32, 4, causal=True
    ).eval()  # Xavier init keeps outputs O(1)
    ref = torch_mha_like(ours.to(DT)).float()
    ours.float()
    x = torch.randn(2, 10, 32)
    expected = ref(
        x, x, x, attn_mask=torch.ones(10, 10, dtype=torch.bool).triu(1)
    )[0]
    for backend in BACKENDS:
        ours.backend = backend
        torch.testing.assert_close(ours(x), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("masks", ["none", "mask", "padding", "both"])
def test_mha_backends_agree(causal, masks):
    ours = make_mha(causal=causal)
    query, memory = rand(2, 5, 16), rand(2, 8, 16)
    mask = random_mask(2, 4, 5, 8) if masks in ("mask", "both") else None
    padding = (
        torch.tensor([[False] * 6 + [True] * 2, [False] * 8])
        if masks in ("padding", "both")
        else None
    )
    allowed = torch.ones(2, 4, 5, 8, dtype=torch.bool)
    if mask is not None:
        allowed &= mask
    if padding is not None:
        allowed &= ~padding[:, None, None, :]
    if causal:
        allowed &= torch.ones(5, 8, dtype=torch.bool).tril(
            diagonal=3
        )  # query i at position 3 + i
    expected, _ = reference_mha(ours, query, memory, memory, allowed)
    for backend in BACKENDS:
        ours.backend = backend
        out = ours(
            query,
            memory,
            mask=mask,
            token_mask=None if padding is None else ~padding,
        )
        torch.testing.assert_close(out, expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize("scale", [1.0, 0.3])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("masks", ["none", "padding"])
def test_mha_scale_option_on_both_backends(scale, causal, masks):
    ours = make_mha(causal=causal, scale=scale)
    x = rand(2, 6, 16)
    padding = (
        torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
        if masks == "padding"
        else None
    )
    allowed = torch.ones(2, 4, 6, 6, dtype=torch.bool)
    if padding is not None:
        allowed &= ~padding[:, None, None, :]
    if causal:
        allowed &= torch.ones(6, 6, dtype=torch.bool).tril()
    # Padded positions are zeroed on entry (a padded query's row is computed from zeros).
    xz = x if padding is None else x.masked_fill(padding[..., None], 0.0)
    expected, expected_weights = reference_mha(
        ours, xz, xz, xz, allowed, scale=scale
    )
    for backend in BACKENDS:
        ours.backend = backend
        torch.testing.assert_close(
            ours(x, token_mask=None if padding is None else ~padding),
            expected,
            atol=ATOL,
            rtol=0,
        )
    _, weights = ours(
        x, token_mask=None if padding is None else ~padding, need_weights=True
    )
    torch.testing.assert_close(weights, expected_weights, atol=ATOL, rtol=0)
    default = make_mha(causal=causal)
    default.load_state_dict(ours.state_dict())
    assert default.scale is None
    assert not torch.allclose(
        default(x, token_mask=None if padding is None else ~padding), expected
    )  # the scale mattered


def test_mha_default_scale_is_one_over_sqrt_d_head():
    ours = make_mha(d_model=16, n_heads=2)
    explicit = make_mha(d_model=16, n_heads=2, scale=1 / math.sqrt(8))
    explicit.load_state_dict(ours.state_dict())
    x = rand(2, 5, 16)
    for backend in BACKENDS:
        ours.backend = explicit.backend = backend
        torch.testing.assert_close(ours(x), explicit(x), atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    "scale", [0.0, -1.0, float("inf"), float("nan"), "0.5"]
)
def test_mha_bad_scale_raises(scale):
    with pytest.raises(ValueError, match="scale"):
        MultiHeadAttention(16, 4, scale=scale)


class FixedBiasAttention(MultiHeadAttention):
    """A stand-in for ALiBi: adds a fixed table [heads, q_len, k_len] to the scores."""

    def __init__(self, *args, table, **kwargs):
        super().__init__(*args, **kwargs)
        self.register_buffer("table", table)

    def attention_bias(self, q_len, k_len, device, dtype):
        return self.table[:, :q_len, :k_len].to(device=device, dtype=dtype)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_bias_override_is_added_on_both_backends(causal):
    table = rand(4, 6, 6)
    ours = randomize(
        FixedBiasAttention(16, 4, table=table, causal=causal).to(DT)
    ).eval()
    x, padding = (
        rand(2, 6, 16),
        torch.tensor([[False] * 6, [False] * 4 + [True] * 2]),
    )
    allowed = (~padding)[:, None, None, :] & (
        torch.ones(6, 6, dtype=torch.bool).tril() if causal else True
    )
    xz = x.masked_fill(
        padding[..., None], 0.0
    )  # padded positions are zeroed on entry
    expected, expected_weights = reference_mha(
        ours, xz, xz, xz, allowed, bias=table
    )
    outputs = {}
    for backend in BACKENDS:
        ours.backend = backend
        outputs[backend] = ours(
            x, token_mask=None if padding is None else ~padding
        )
        torch.testing.assert_close(
            outputs[backend], expected, atol=ATOL, rtol=0
        )
    _, weights = ours(
        x, token_mask=None if padding is None else ~padding, need_weights=True
    )
    torch.testing.assert_close(weights, expected_weights, atol=ATOL, rtol=0)
    plain = make_mha(causal=causal)
    plain.load_state_dict(
        {k: v for k, v in ours.state_dict().items() if k != "table"}
    )
    assert not torch.allclose(
        plain(x, token_mask=None if padding is None else ~padding), expected
    )  # the bias mattered


def nan_on_empty_rows_sdpa(
    q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None
):
    """A plain-softmax SDPA: like some fused kernels, it gives NaN for a query with no allowed key."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        scores = scores.masked_fill(
            torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1),
            float("-inf"),
        )
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    elif attn_mask is not None:
        scores = scores + attn_mask
    return F.dropout(scores.softmax(-1), dropout_p) @ v


def test_nan_kernel_really_gives_nan():
    q = rand(1, 1, 2, 4)
    assert (
        nan_on_empty_rows_sdpa(
            q, q, q, attn_mask=torch.tensor([[True, False], [False, False]])
        )
        .isnan()
        .any()
    )


@pytest.fixture(params=["torch-kernel", "nan-kernel"])
def sdpa_kernel(request, monkeypatch):
    """Runs a test with torch's SDPA, and again with a kernel that gives NaN on empty rows."""
    if request.param == "nan-kernel":
        monkeypatch.setattr(
            F, "scaled_dot_product_attention", nan_on_empty_rows_sdpa
        )
    return request.param


@pytest.mark.parametrize("backend", BACKENDS)
def test_mha_fully_masked_rows_are_zero_with_finite_grads(
    backend, sdpa_kernel
):
    ours = make_mha(backend=backend)
    query = rand(2, 4, 16, requires_grad=True)
    memory = rand(2, 5, 16, requires_grad=True)
    real = torch.tensor(
        [[True] * 4 + [False], [True] * 5]
    )  # key 4 of batch 0 is padding
    mask = torch.ones(2, 1, 4, 5, dtype=torch.bool)
    mask[1] = False  # batch 1 may attend to no key at all
    mask[:, :, 2] = False  # and query 2 may attend to nothing anywhere
    out = ours(query, memory, mask=mask, token_mask=real)
    bias_only = ours.out_proj.bias.expand(
        4, 16
    )  # attention output 0, then out_proj
    torch.testing.assert_close(out[1], bias_only, atol=0, rtol=0)
    torch.testing.assert_close(out[0, 2], bias_only[0], atol=0, rtol=0)
    assert torch.isfinite(out).all()
    out.square().sum().backward()
    assert_finite_grads(query, memory, *ours.parameters())
    assert (memory.grad[1] == 0).all()


def test_mha_fully_masked_rows_with_bias_on_sdpa_backend(sdpa_kernel):
    table = torch.zeros(2, 3, 3, dtype=DT)
    table[:, 1] = float("-inf")  # a bias that forbids every key for query 1
    ours = randomize(
        FixedBiasAttention(8, 2, table=table, bias=False).to(DT)
    ).eval()
    x = rand(1, 3, 8, requires_grad=True)
    for backend in BACKENDS:
        ours.backend = backend
        out = ours(x)
        assert (out[0, 1] == 0).all() and torch.isfinite(out).all()
        x.grad = None
        out.square().sum().backward()
        assert_finite_grads(x)


def test_mha_dropout_only_in_training():
    ours = make_mha(dropout=0.5)
    x = rand(2, 6, 16)
    torch.testing.assert_close(ours(x), ours(x))  # eval: deterministic
    ours.train()
    assert not torch.allclose(ours(x), ours.eval()(x))


# ---------------------------------------------------------------------------------------------
# Causality: the future never reaches the past, checked by perturbation and by autograd


@pytest.mark.parametrize("backend", BACKENDS)
def test_causal_output_ignores_the_future(backend):
    ours = make_mha(causal=True, backend=backend)
    x = rand(2, 8, 16)
    t = 4
    changed = x.clone()
    changed[:, t + 1 :] = rand(2, 3, 16)
    before, after = ours(x), ours(changed)
    torch.testing.assert_close(
        after[:, : t + 1], before[:, : t + 1], atol=0, rtol=0
    )
    assert not torch.allclose(after[:, t + 1 :], before[:, t + 1 :])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("causal", [True, False])
def test_causal_jacobian_is_lower_triangular(backend, causal):
    ours = make_mha(d_model=8, n_heads=2, causal=causal, backend=backend)
    x = rand(1, 5, 8)
    jacobian = torch.autograd.functional.jacobian(ours, x)[
        0, :, :, 0
    ]  # [t, out, s, in]
    dependence = jacobian.abs().sum(dim=(1, 3))  # [t, s]
    future = torch.ones(5, 5, dtype=torch.bool).triu(diagonal=1)
    if causal:
        assert (dependence[future] == 0).all()
        assert (dependence[~future] > 0).all()
    else:  # the same check would catch a leak: without causal=True the future does flow
        assert (dependence[future] > 0).all()


# ---------------------------------------------------------------------------------------------
# SingleLayerAttention, AdditiveAttention, BiAttention against brute-force loops


def loop_attention(score, q, k, v, mask=None):
    """softmax over allowed keys of score(q_i, k_j), then the weighted sum of v, by loops."""
    batch, q_len, k_len = q.shape[0], q.shape[1], k.shape[1]
    out = torch.zeros(batch, q_len, v.shape[-1], dtype=DT)
    weights = torch.zeros(batch, q_len, k_len, dtype=DT)
    for b in range(batch):
        for i in range(q_len):
            allowed = [
                j for j in range(k_len) if mask is None or mask[b, i, j]
            ]
            exps = {
                j: math.exp(float(score(q[b, i], k[b, j]))) for j in allowed
            }
            total = sum(exps.values())
            for j in allowed:
                weights[b, i, j] = exps[j] / total
                out[b, i] += weights[b, i, j] * v[b, j]
    return out, weights


def test_single_layer_attention_matches_loops():
    module = SingleLayerAttention(d_k=6, negative_slope=0.2).to(DT)
    w = module.weight[:, 0].detach()

    def score(q_i, k_j):
        s = float((q_i - k_j) @ w)
        return s if s > 0 else 0.2 * s

    q, k, v, mask = (
        rand(2, 4, 6),
        rand(2, 5, 6),
        rand(2, 5, 3),
        random_mask(2, 4, 5),
    )
    out, weights = module(q, k, v, mask=mask, need_weights=True)
    assert torch.equal(module(q, k, v, mask=mask), out)
    expected_out, expected_weights = loop_attention(score, q, k, v, mask)
    torch.testing.assert_close(weights, expected_weights, atol=ATOL, rtol=0)
    torch.testing.assert_close(out, expected_out, atol=ATOL, rtol=0)
    assert (weights[~mask] == 0.0).all()


def test_additive_attention_matches_loops():
    module = AdditiveAttention(d_q=5, d_k=7, d_hidden=4).to(DT)
    W_q, W_k, v_vec = (
        module.q_proj.weight.detach(),
        module.k_proj.weight.detach(),
        module.score_proj.weight[0].detach(),
    )

    def score(q_i, k_j):
        return float(v_vec @ torch.tanh(W_q @ q_i + W_k @ k_j))

    q, k, v, mask = (
        rand(2, 3, 5),
        rand(2, 6, 7),
        rand(2, 6, 2),
        random_mask(2, 3, 6),
    )
    out, weights = module(q, k, v, mask=mask, need_weights=True)
    assert torch.equal(module(q, k, v, mask=mask), out)
    expected_out, expected_weights = loop_attention(score, q, k, v, mask)
    torch.testing.assert_close(weights, expected_weights, atol=ATOL, rtol=0)
    torch.testing.assert_close(out, expected_out, atol=ATOL, rtol=0)
    assert (weights[~mask] == 0.0).all()


@pytest.mark.parametrize(
    "make",
    [lambda: SingleLayerAttention(4), lambda: AdditiveAttention(4, 4, 3)],
)
def test_single_layer_and_additive_fully_masked_rows(make):
    module = make().to(DT)
    q, k, v = (
        rand(2, 3, 4, requires_grad=True),
        rand(2, 5, 4, requires_grad=True),
        rand(2, 5, 2, requires_grad=True),
    )
    mask = random_mask(2, 3, 5)
    mask[1, 0] = False
    out, weights = module(q, k, v, mask=mask, need_weights=True)
    assert (
        (out[1, 0] == 0).all()
        and (weights[1, 0] == 0).all()
        and torch.isfinite(out).all()
    )
    assert (weights[~mask] == 0.0).all()
    out.square().sum().backward()
    assert_finite_grads(q, k, v, *module.parameters())


def loop_bi_attention(module, x, question, token_mask):
    w_x, w_q = (
        module.input_linear.weight[0].detach(),
        module.memory_linear.weight[0].detach(),
    )
    w_dot = module.dot_scale.detach()
    batch, x_len, q_len, d = (
        x.shape[0],
        x.shape[1],
        question.shape[1],
        x.shape[2],
    )
    outputs, all_c2q, all_q2c = (
        [],
        torch.zeros(batch, x_len, q_len, dtype=DT),
        torch.zeros(batch, x_len, dtype=DT),
    )
    for b in range(batch):
        real = [j for j in range(q_len) if token_mask[b, j]]
        s = [
            [
                float(
                    w_x @ x[b, i]
                    + w_q @ question[b, j]
                    + (x[b, i] * w_dot) @ question[b, j]
                )
                for j in range(q_len)
            ]
            for i in range(x_len)
        ]
        c = torch.zeros(x_len, d, dtype=DT)
        best = []
        for i in range(x_len):
            total = sum(math.exp(s[i][j]) for j in real)
            for j in real:
                all_c2q[b, i, j] = math.exp(s[i][j]) / total
                c[i] += all_c2q[b, i, j] * question[b, j]
            best.append(max(s[i][j] for j in real))
        total = sum(math.exp(m) for m in best)
        q2c = torch.zeros(d, dtype=DT)
        for i in range(x_len):
            all_q2c[b, i] = math.exp(best[i]) / total
            q2c += all_q2c[b, i] * x[b, i]
        outputs.append(torch.cat([x[b], c, x[b] * c, q2c * c], dim=-1))
    return torch.stack(outputs), all_c2q, all_q2c


def test_bi_attention_matches_loops():
    module = BiAttention(6).to(DT).eval()
    x, question = rand(2, 5, 6), rand(2, 4, 6)
    token_mask = torch.tensor(
        [[True, True, True, False], [True, False, False, False]]
    )
    out, (c2q, q2c) = module(x, question, token_mask, need_weights=True)
    expected, expected_c2q, expected_q2c = loop_bi_attention(
        module, x, question, token_mask
    )
    assert out.shape == (2, 5, 24)
    torch.testing.assert_close(out, expected, atol=ATOL, rtol=0)
    torch.testing.assert_close(c2q, expected_c2q, atol=ATOL, rtol=0)
    torch.testing.assert_close(q2c, expected_q2c, atol=ATOL, rtol=0)
    assert (c2q[~token_mask[:, None, :].expand_as(c2q)] == 0.0).all()
    without_mask = module(x, question)
    expected_unmasked, _, _ = loop_bi_attention(
        module, x, question, torch.ones(2, 4, dtype=torch.bool)
    )
    torch.testing.assert_close(
        without_mask, expected_unmasked, atol=ATOL, rtol=0
    )


def test_bi_attention_dot_scale_init_is_centred_and_bounded():
    module = BiAttention(400)
    bound = 1 / math.sqrt(400)
    assert module.dot_scale.abs().max() <= bound
    assert (
        module.dot_scale.min() < 0 < module.dot_scale.max()
    )  # not the HotpotQA baseline's U(1/sqrt(d), 1)


def test_bi_attention_fully_padded_question_is_refused_as_an_empty_sequence():
    # A question with no real token is an empty sequence, refused as everywhere in the package
    # (and the likeliest cause is an inverted mask).
    module = BiAttention(4).to(DT)
    x, question = rand(2, 3, 4), rand(2, 2, 4)
    with pytest.raises(
        ValueError, match=r"token_mask has a sample with no real token.*~mask"
    ):
        module(x, question, torch.tensor([[True, False], [False, False]]))


# ---------------------------------------------------------------------------------------------
# Bad input: the error names the argument


q4, k4, v4 = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
mha = MultiHeadAttention(8, 2)
x8 = torch.randn(2, 3, 8)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda: dot_product_attention([1.0], k4, v4),
            TypeError,
            r"^q must be a torch.Tensor",
        ),
        (
            lambda: dot_product_attention(q4.long(), k4, v4),
            TypeError,
            r"^q must be a floating",
        ),
        (
            lambda: dot_product_attention(q4[0, 0], k4, v4),
            ValueError,
            r"^q must have shape \[\.\.\., q_len, d_k\]",
        ),
        (
            lambda: dot_product_attention(q4, torch.randn(2, 5, 3), v4),
            ValueError,
            r"^k must have the last dim d_k=4",
        ),
        (
            lambda: dot_product_attention(q4, k4, torch.randn(2, 4, 6)),
            ValueError,
            r"^v must have shape",
        ),
        (
            lambda: dot_product_attention(
                q4, torch.randn(3, 5, 4), torch.randn(3, 5, 6)
            ),
            ValueError,
            "must broadcast",
        ),
        (
            lambda: dot_product_attention(q4, k4, v4, mask=torch.ones(3, 5)),
            TypeError,
            r"^mask must be a bool",
        ),
        (
            lambda: dot_product_attention(
                q4, k4, v4, mask=torch.ones(3, 4, dtype=torch.bool)
            ),
            ValueError,
            r"^mask of shape \(3, 4\) does not broadcast to \[\.\.\., q_len, k_len\]",
        ),
        (
            lambda: dot_product_attention(
                q4, k4, v4, bias=torch.ones(3, 5, dtype=torch.long)
            ),
            TypeError,
            r"^bias must be",
        ),
        (
            lambda: dot_product_attention(q4, k4, v4, bias=torch.ones(4, 5)),
            ValueError,
            r"^bias of shape \(4, 5\)",
        ),
        (
            lambda: dot_product_attention(q4, k4, v4, dropout_p=1.5),
            ValueError,
            r"^dropout",
        ),
        (lambda: causal_mask(5, 3), ValueError, r"k_len=3"),
        (
            lambda: token_mask_to_attention_mask(torch.zeros(2, 3)),
            TypeError,
            r"^token_mask must be a bool",
        ),
        (
            lambda: token_mask_to_attention_mask(
                torch.zeros(2, 1, 3, dtype=torch.bool)
            ),
            TypeError,
            r"^token_mask must be a bool tensor \[batch, k_len\]",
        ),
        (
            lambda: dot_product_attention(
                q4, k4, v4, mask=torch.zeros(3, 5, dtype=torch.bool)
            ),
            ValueError,
            r"^mask allows no query to attend to any key.*~mask",
        ),
        (
            lambda: dot_product_attention(
                q4, k4, v4, mask=torch.ones(3, 5, dtype=torch.long)
            ),
            TypeError,
            r"mask\.bool\(\)",
        ),
        (
            lambda: dot_product_attention(q4[:, :0], k4, v4),
            ValueError,
            r"^q must hold at least one position",
        ),
        (
            lambda: dot_product_attention(q4, k4, v4, scale=-1.0),
            ValueError,
            r"^scale must be",
        ),
        (
            lambda: DotProductAttention(dropout=1.0),
            ValueError,
            r"^dropout must be a probability in \[0, 1\)",
        ),
        (
            lambda: SingleLayerAttention(4, dropout=1.0),
            ValueError,
            r"^dropout",
        ),
        (
            lambda: mha(x8[:, :0]),
            ValueError,
            r"^query must hold at least one position",
        ),
        (
            lambda: mha(x8, token_mask=torch.zeros(2, 3, dtype=torch.bool)),
            ValueError,
            r"^token_mask has a sample with no real token",
        ),
        (
            lambda: mha(x8, mask=torch.zeros(3, 3, dtype=torch.bool)),
            ValueError,
            r"^mask allows no query",
        ),
        (
            lambda: MultiHeadAttention(8, 0),
            ValueError,
            r"^n_heads must be a positive int",
        ),
        (
            lambda: MultiHeadAttention(8, 2, kdim=0),
            ValueError,
            r"^kdim must be a positive int",
        ),
        (
            lambda: MultiHeadAttention(10, 3),
            ValueError,
            r"d_model=10 must be divisible by n_heads=3",
        ),
        (
            lambda: MultiHeadAttention(8, 2, backend="flash"),
            ValueError,
            r"^backend must be one of",
        ),
        (
            lambda: setattr(mha, "backend", "cuda"),
            ValueError,
            r"^backend must be one of",
        ),
        (
            lambda: mha(torch.randn(2, 3, 6)),
            ValueError,
            r"^query must have shape \[batch, q_len, d_model=8\], got \(2, 3, 6\)",
        ),
        (
            lambda: mha(torch.randn(3, 8)),
            ValueError,
            r"^query must have shape \[batch, q_len, d_model=8\]",
        ),
        (
            lambda: mha(x8, torch.randn(2, 4, 8), torch.randn(2, 5, 8)),
            ValueError,
            r"k_len",
        ),
        (
            lambda: mha(x8, mask=torch.ones(3, 4, dtype=torch.bool)),
            ValueError,
            r"^mask of shape \(3, 4\) does not broadcast to \[\.\.\., q_len, k_len\] = \(2, 2, 3, 3\)",
        ),
        (
            lambda: mha(x8, mask=torch.ones(3, 3)),
            TypeError,
            r"^mask must be a bool",
        ),
        (
            lambda: mha(x8, token_mask=torch.ones(2, 4, dtype=torch.bool)),
            ValueError,
            r"^token_mask must have shape \[batch, seq\]",
        ),
        (
            lambda: mha(x8, token_mask=torch.ones(2, 3)),
            TypeError,
            r"^token_mask must be a bool",
        ),
        (
            lambda: mha(
                x8, key_padding_mask=torch.zeros(2, 3, dtype=torch.bool)
            ),
            TypeError,
            r"key_padding_mask",
        ),
        (
            lambda: FixedBiasAttention(8, 2, table=torch.zeros(3, 3, 3))(x8),
            ValueError,
            r"^bias of shape \(3, 3, 3\)",
        ),
        (
            lambda: SingleLayerAttention(5)(q4, k4, v4),
            ValueError,
            r"^q must have shape \[\.\.\., q_len, d_k=5\]",
        ),
        (lambda: AdditiveAttention(3, 4, 2)(q4, k4, v4), ValueError, r"d_q=3"),
        (
            lambda: BiAttention(4)(q4, k4, token_mask=torch.ones(2, 5)),
            TypeError,
            r"^token_mask must be a bool",
        ),
        (
            lambda: BiAttention(4)(
                q4, k4, token_mask=torch.ones(2, 3, dtype=torch.bool)
            ),
            ValueError,
            r"^token_mask must have shape \[batch, seq\] = \(2, 5\)",
        ),
        (
            lambda: BiAttention(4)(q4, torch.randn(2, 5, 3)),
            ValueError,
            r"question must have shapes?",
        ),
    ],
)
def test_bad_input_raises_an_error_naming_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


# -----------------------------------------------------------------------------
# Attention in blocks (the online softmax) against torch's own attention.


@pytest.mark.parametrize("block_size", [1, 3, 7, 12, 50])
@pytest.mark.parametrize(
    "q_shape, k_len, d_v",
    [((2, 3, 5, 8), 12, 8), ((1, 9, 16), 9, 4), ((4, 1, 8), 30, 8)],
)
def test_attention_in_blocks_equals_torch_attention(
    block_size, q_shape, k_len, d_v
):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(*q_shape, generator=g, dtype=torch.float64)
    k = torch.randn(
        *q_shape[:-2], k_len, q_shape[-1], generator=g, dtype=torch.float64
    )
    v = torch.randn(
        *q_shape[:-2], k_len, d_v, generator=g, dtype=torch.float64
    )
    expected = F.scaled_dot_product_attention(q, k, v)
    got = attention_in_blocks(q, k, v, block_size=block_size)
    assert got.shape == expected.shape
    assert torch.allclose(got, expected, atol=1e-12, rtol=0)


def test_attention_in_blocks_never_overflows():
    # scores in the thousands: exp(s) alone would overflow; the running maximum keeps every
    # exponent at most 0, even when a later block holds the largest score
    q = torch.full((1, 2, 4), 40.0, dtype=torch.float64)
    k = (
        torch.linspace(-30, 30, 10, dtype=torch.float64)[:, None]
        .expand(10, 4)
        .contiguous()[None]
    )
    v = torch.randn(
        1,
        10,
        3,
        dtype=torch.float64,
        generator=torch.Generator().manual_seed(1),
    )
    got = attention_in_blocks(q, k, v, block_size=3)
    assert torch.isfinite(got).all()
    assert torch.allclose(
        got, F.scaled_dot_product_attention(q, k, v), atol=1e-12, rtol=0
    )


def test_attention_in_blocks_refuses_bad_input_by_name():
    q = k = v = torch.randn(1, 4, 8)
    with pytest.raises((TypeError, ValueError), match="block_size"):
        attention_in_blocks(q, k, v, block_size=0)
    with pytest.raises(ValueError, match="k must have the last dim"):
        attention_in_blocks(q, torch.randn(1, 4, 6), v)
