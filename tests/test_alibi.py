"""Tests of mixers.alibi against independent references.

References are written here, not taken from the module: the official recursive ``get_slopes``
(Press et al.'s algorithm, written from its description), brute-force Python loops over
positions for the bias, and an einsum multi-head reference built from the module's own
projection weights. Most checks run in float64; FlexAttention runs in float32 (CPU), where the
bound is 1e-5. The compiled FlexAttention kernel takes seconds to build on a CPU, so it is
compiled for exactly one case (``test_flex_compiled_matches_eager_and_sdpa``); the flex path's
own logic (score_mod, mask_mod, offsets, padding) is checked on many cases through torch's
uncompiled ``flex_attention``, which computes the same function without a fused kernel.
"""

import copy
import math

import pytest
import torch
from helpers import (
    assert_causal_by_perturbation,
    assert_decoding_equals_the_full_pass,
)
from torch.nn.attention.flex_attention import flex_attention

import mixers.alibi as alibi_module
from mixers.alibi import (
    AlibiMultiHeadAttention,
    alibi_bias,
    alibi_slopes,
)
from mixers.attention import dot_product_attention
from mixers.bench.alibi import labml_style_alibi_attention

DT = torch.float64
ATOL = 1e-10  # float64 against float64 references
FLEX_ATOL = 1e-5  # float32 (FlexAttention on CPU), the brief's bound
NEG_INF = float("-inf")


def precision(backend):
    """(dtype, atol) for a backend: FlexAttention runs in float32 on a CPU, the others in float64."""
    return (torch.float32, FLEX_ATOL) if backend == "flex" else (DT, ATOL)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# ---------------------------------------------------------------------------------------------
# Independent references


def official_get_slopes(n):
    """The ALiBi authors' recursive algorithm, from its description: for a power of two n, the
    geometric series with start = ratio = 2^(-8/n); otherwise the closest lower power of two's
    slopes, then every other slope of the series for twice that."""

    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        ratio = start
        return [start * ratio**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return (
        power_of_2(closest)
        + official_get_slopes(2 * closest)[0::2][: n - closest]
    )


def brute_bias(
    slopes, query_positions, key_positions, causal, symmetric, q_offset
):
    """One Python loop iteration per (head, query, key): -m·(p_i - p_j), -inf after the diagonal."""
    heads, q_len, k_len = len(slopes), len(query_positions), len(key_positions)
    out = torch.empty(heads, q_len, k_len, dtype=DT)
    for h in range(heads):
        for i in range(q_len):
            for j in range(k_len):
                distance = float(query_positions[i]) - float(key_positions[j])
                if symmetric:
                    distance = abs(distance)
                value = -float(slopes[h]) * distance
                if causal and j > q_offset + i:
                    value = NEG_INF
                out[h, i, j] = value
    return out


def reference_attention(q, k, v, bias, allowed=None):
    """softmax(q kᵀ / sqrt(d) + bias) v with einsum; rows with nothing allowed give zeros."""
    scores = (
        torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(q.shape[-1])
        + bias
    )
    if allowed is not None:
        scores = scores.masked_fill(~allowed, NEG_INF)
    empty = (scores == NEG_INF).all(-1, keepdim=True)
    weights = (
        scores.masked_fill(empty, 0.0).softmax(-1).masked_fill(empty, 0.0)
    )
    return weights @ v


def reference_alibi_mha(module, query, key=None, key_padding_mask=None):
    """The module's function from its weights, an einsum attention and the brute-force bias."""
    key = query if key is None else key
    batch, q_len, d_model = query.shape
    k_len, heads = key.shape[1], module.n_heads

    def split(x):
        return x.view(batch, -1, heads, d_model // heads).transpose(1, 2)

    q, k, v = (
        split(module.q_proj(query)),
        split(module.k_proj(key)),
        split(module.v_proj(key)),
    )
    q_offset = k_len - q_len
    slopes = official_get_slopes(heads)
    bias = brute_bias(
        slopes,
        range(q_offset, k_len),
        range(k_len),
        module.causal,
        not module.causal,
        q_offset,
    )
    allowed = (
        None
        if key_padding_mask is None
        else ~key_padding_mask[:, None, None, :]
    )
    out = reference_attention(q, k, v, bias.to(q.dtype), allowed)
    return module.out_proj(out.transpose(1, 2).reshape(batch, q_len, d_model))


def make_module(d_model=16, n_heads=4, causal=True, backend="eager", dtype=DT):
    module = AlibiMultiHeadAttention(
        d_model, n_heads, causal=causal, backend=backend
    ).to(dtype)
    with (
        torch.no_grad()
    ):  # non-zero biases too, so that the projections' biases are checked
        for p in module.parameters():
            p.normal_(0.0, 0.5)
    return module.eval()


# ---------------------------------------------------------------------------------------------
# Slopes


@pytest.mark.parametrize("n_heads", range(1, 65))
def test_slopes_match_the_official_algorithm(n_heads):
    slopes = alibi_slopes(n_heads)
    assert slopes.dtype == torch.float32 and slopes.shape == (n_heads,)
    expected = torch.tensor(official_get_slopes(n_heads), dtype=DT)
    torch.testing.assert_close(slopes.to(DT), expected, rtol=1e-7, atol=0)


def test_slopes_for_8_heads_are_powers_of_one_half():
    expected = torch.tensor(
        [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]
    )
    assert torch.equal(alibi_slopes(8), expected)


def test_slopes_for_12_heads_interleave_and_are_not_monotone():
    exponents = [1, 2, 3, 4, 5, 6, 7, 8, 0.5, 1.5, 2.5, 3.5]
    expected = torch.tensor([2.0**-e for e in exponents], dtype=DT)
    slopes = alibi_slopes(12)
    torch.testing.assert_close(slopes.to(DT), expected, rtol=1e-7, atol=0)
    assert (
        slopes[8] > slopes[0]
    )  # head 8 is steeper than head 0: not monotone in head order


# ---------------------------------------------------------------------------------------------
# The bias against a brute-force loop


@pytest.mark.parametrize(
    "q_len, k_len, causal, symmetric, q_offset",
    [
        (6, None, True, False, None),
        (6, None, False, False, None),
        (6, None, False, True, None),
        (6, None, True, True, None),
        (
            3,
            7,
            True,
            False,
            None,
        ),  # 3 new queries after 4 cached keys: positions 4, 5, 6
        (3, 7, False, True, None),
        (
            4,
            7,
            True,
            False,
            1,
        ),  # explicit offset: queries at 1..4, keys 5, 6 in their future
        (
            4,
            2,
            False,
            True,
            0,
        ),  # more queries than keys, allowed with an explicit offset
    ],
)
def test_bias_matches_brute_force(q_len, k_len, causal, symmetric, q_offset):
    slopes = torch.rand(3, dtype=DT) + 0.1
    bias = alibi_bias(
        slopes,
        q_len,
        k_len,
        causal=causal,
        symmetric=symmetric,
        q_offset=q_offset,
    )
    k_len = q_len if k_len is None else k_len
    offset = k_len - q_len if q_offset is None else q_offset
    expected = brute_bias(
        slopes,
        range(offset, offset + q_len),
        range(k_len),
        causal,
        symmetric,
        offset,
    )
    assert bias.shape == (3, q_len, k_len) and bias.dtype == DT
    torch.testing.assert_close(bias, expected, atol=ATOL, rtol=0)


def test_bias_from_head_count_uses_the_slopes_and_is_zero_on_the_diagonal():
    bias = alibi_bias(8, 5)
    assert bias.dtype == torch.float32
    assert (bias.diagonal(dim1=-2, dim2=-1) == 0).all()
    # Row 4 (the last query) against keys 0..4: -m·(4, 3, 2, 1, 0).
    expected = -alibi_slopes(8)[:, None] * torch.tensor(
        [4.0, 3.0, 2.0, 1.0, 0.0]
    )
    torch.testing.assert_close(bias[:, 4, :], expected, atol=0, rtol=0)
    assert (bias[:, 0, 1:] == NEG_INF).all()


def test_bias_in_half_precision_is_the_float32_bias_rounded_once():
    half = alibi_bias(12, 40, dtype=torch.float16)
    assert half.dtype == torch.float16
    assert torch.equal(half, alibi_bias(12, 40).to(torch.float16))


def left_padding_positions(keep):
    """Padding-aware positions: the count of real tokens before each one (pads get 0)."""
    return (keep.long().cumsum(-1) - 1).clamp(min=0)


@pytest.mark.parametrize("causal, symmetric", [(True, False), (False, True)])
def test_bias_with_explicit_positions_and_left_padding(causal, symmetric):
    keep = torch.tensor(
        [
            [False, False, True, True, True, True, True],
            [True, True, True, True, True, True, True],
            [False, False, False, False, True, True, True],
        ]
    )
    positions = left_padding_positions(keep)
    slopes = torch.rand(2, dtype=DT) + 0.1
    bias = alibi_bias(
        slopes, 7, key_positions=positions, causal=causal, symmetric=symmetric
    )
    assert bias.shape == (3, 2, 7, 7)
    for b in range(3):
        expected = brute_bias(
            slopes, positions[b], positions[b], causal, symmetric, 0
        )
        torch.testing.assert_close(bias[b], expected, atol=ATOL, rtol=0)
        # Among the real tokens, the bias is that of the unpadded sequence.
        n_pad = int((~keep[b]).sum())
        unpadded = alibi_bias(
            slopes, 7 - n_pad, causal=causal, symmetric=symmetric
        )
        torch.testing.assert_close(
            bias[b, :, n_pad:, n_pad:], unpadded, atol=ATOL, rtol=0
        )


def test_query_positions_default_to_the_last_key_positions_and_can_be_explicit():
    keep = torch.tensor(
        [[False, True, True, True, True], [True, True, True, True, True]]
    )
    positions = left_padding_positions(keep)
    slopes = torch.rand(2, dtype=DT) + 0.1
    decode = alibi_bias(
        slopes, 2, 5, key_positions=positions
    )  # the last 2 tokens against all 5
    full = alibi_bias(slopes, 5, key_positions=positions)
    torch.testing.assert_close(decode, full[:, :, 3:, :], atol=ATOL, rtol=0)
    explicit = alibi_bias(
        slopes, 2, 5, key_positions=positions, query_positions=positions[:, 3:]
    )
    torch.testing.assert_close(explicit, decode, atol=ATOL, rtol=0)
    # 1-d query positions against a batch of key positions broadcast to the batch.
    shared = alibi_bias(
        slopes,
        2,
        5,
        causal=False,
        symmetric=False,
        key_positions=positions,
        query_positions=torch.tensor([10, 11]),
    )
    for b in range(2):
        expected = brute_bias(slopes, [10, 11], positions[b], False, False, 3)
        torch.testing.assert_close(shared[b], expected, atol=ATOL, rtol=0)


def test_left_padded_attention_at_real_tokens_equals_the_unpadded_sequence():
    heads, n_pad, length, d = 2, 3, 5, 4
    q, k, v = (torch.randn(1, heads, length, d, dtype=DT) for _ in range(3))
    pad = (
        torch.randn(1, heads, n_pad, d, dtype=DT) * 10
    )  # garbage that must not leak in
    qp, kp, vp = (torch.cat([pad, x], dim=2) for x in (q, k, v))
    keep = torch.tensor([[False] * n_pad + [True] * length])
    slopes = alibi_slopes(heads).to(DT)
    bias = alibi_bias(
        slopes, n_pad + length, key_positions=left_padding_positions(keep)
    )
    out, weights = dot_product_attention(
        qp, kp, vp, mask=keep[:, None, None, :], bias=bias
    )
    expected = reference_attention(
        q,
        k,
        v,
        brute_bias(slopes, range(length), range(length), True, False, 0),
    )
    torch.testing.assert_close(out[:, :, n_pad:], expected, atol=ATOL, rtol=0)
    assert (
        weights[..., :n_pad] == 0
    ).all()  # padded keys get exactly zero weight


def test_unsigned_and_float_positions_give_signed_distances():
    slopes = torch.tensor([0.5], dtype=DT)
    positions = torch.tensor(
        [0, 1, 2, 3], dtype=torch.uint8
    )  # 1 - 3 must not wrap around to 254
    expected = brute_bias(slopes, range(4), range(4), False, False, 0)
    torch.testing.assert_close(
        alibi_bias(
            slopes, 4, causal=False, symmetric=False, key_positions=positions
        ),
        expected,
        atol=ATOL,
        rtol=0,
    )
    torch.testing.assert_close(
        alibi_bias(
            slopes,
            4,
            causal=False,
            symmetric=False,
            key_positions=positions.double(),
        ),
        expected,
        atol=ATOL,
        rtol=0,
    )


def test_without_the_causal_mask_the_default_bias_is_symmetric():
    """causal=False defaults to -m|i - j|: no future key gets a bonus that grows with its
    distance; symmetric=False asks for the plain form -m(i - j) explicitly."""
    slopes = torch.rand(3, dtype=DT) + 0.1
    default = alibi_bias(slopes, 6, causal=False)
    expected = brute_bias(slopes, range(6), range(6), False, True, 0)
    torch.testing.assert_close(default, expected, atol=ATOL, rtol=0)
    assert (default <= 0).all()
    plain = alibi_bias(slopes, 6, causal=False, symmetric=False)
    future = torch.ones(6, 6, dtype=torch.bool).triu(1)
    assert (plain[:, future] > 0).all()  # the bonus the default avoids
    # with the causal mask the two forms agree wherever attention is allowed
    torch.testing.assert_close(
        alibi_bias(slopes, 6), alibi_bias(slopes, 6, symmetric=True)
    )


def test_bias_follows_the_requested_device_and_dtype():
    bias = alibi_bias(4, 3, 5, device="meta", dtype=torch.bfloat16)
    assert (
        bias.device.type == "meta"
        and bias.dtype == torch.bfloat16
        and bias.shape == (4, 3, 5)
    )


# ---------------------------------------------------------------------------------------------
# labml's (and the authors' code's) form m·j against the relative form -m·(i - j)


def test_seed_form_equals_relative_form_with_and_without_the_causal_mask():
    q, k, v = (torch.randn(2, 4, 7, 8, dtype=DT) for _ in range(3))
    slopes = alibi_slopes(4).to(DT)
    for causal in (True, False):
        labml = labml_style_alibi_attention(q, k, v, slopes, causal=causal)
        plain = alibi_bias(slopes, 7, causal=causal, symmetric=False)
        relative = reference_attention(q, k, v, plain)
        # m·j and -m·(i - j) differ by -m·i, constant along each softmax row (query i), and
        # softmax is shift-invariant per row: the same weights, masked or not.
        torch.testing.assert_close(labml, relative, atol=ATOL, rtol=0)
    assert labml.shape == (2, 4, 7, 8)


def test_seed_form_differs_from_the_symmetric_form_without_the_causal_mask():
    q, k, v = (torch.randn(2, 4, 7, 8, dtype=DT) for _ in range(3))
    slopes = alibi_slopes(4).to(DT)
    symmetric = alibi_bias(slopes, 7, causal=False, symmetric=True)
    # Under the causal mask |i - j| = i - j wherever attention is allowed: the forms agree ...
    torch.testing.assert_close(
        labml_style_alibi_attention(q, k, v, slopes, causal=True),
        reference_attention(q, k, v, alibi_bias(slopes, 7, symmetric=True)),
        atol=ATOL,
        rtol=0,
    )
    # ... without it, m·j rewards distant *future* keys, while -m·|i - j| penalises them.
    labml = labml_style_alibi_attention(q, k, v, slopes, causal=False)
    bidirectional = reference_attention(q, k, v, symmetric)
    assert (labml - bidirectional).abs().max() > 1e-2


# ---------------------------------------------------------------------------------------------
# The module: against the reference, across backends, incrementally, with padding


@pytest.mark.parametrize("backend", ["eager", "sdpa"])
@pytest.mark.parametrize("causal", [True, False])
def test_module_matches_reference(backend, causal):
    module = make_module(causal=causal, backend=backend)
    x = torch.randn(2, 6, 16, dtype=DT)
    with torch.no_grad():
        torch.testing.assert_close(
            module(x), reference_alibi_mha(module, x), atol=ATOL, rtol=0
        )


def test_eager_returns_the_weights_of_the_reference():
    module = make_module(n_heads=2)
    x = torch.randn(1, 5, 16, dtype=DT)
    with torch.no_grad():
        _, weights = module(x, need_weights=True)
    q = module.q_proj(x).view(1, 5, 2, 8).transpose(1, 2)
    k = module.k_proj(x).view(1, 5, 2, 8).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(8)
    scores = scores + brute_bias(
        official_get_slopes(2), range(5), range(5), True, False, 0
    )
    torch.testing.assert_close(
        weights, scores.softmax(-1).detach(), atol=ATOL, rtol=0
    )


def test_module_causality_by_perturbation():
    assert_causal_by_perturbation(
        make_module(), torch.randn(1, 7, 16, dtype=DT), t=4, atol=ATOL
    )


@pytest.mark.parametrize("backend", ["eager", "sdpa", "flex"])
def test_incremental_decoding_equals_the_full_pass(backend, uncompiled_flex):
    dtype, atol = precision(backend)
    module = make_module(backend=backend, dtype=dtype)
    assert_decoding_equals_the_full_pass(
        module, torch.randn(2, 7, 16, dtype=dtype), chunk_from=4, atol=atol
    )


@pytest.mark.parametrize("backend", ["eager", "sdpa", "flex"])
def test_left_padding_gives_the_unpadded_output_at_real_tokens(
    backend, uncompiled_flex
):
    dtype, atol = precision(backend)
    module = make_module(backend=backend, dtype=dtype)
    real = torch.randn(1, 5, 16, dtype=dtype)
    padded = torch.cat([torch.randn(1, 3, 16, dtype=dtype) * 10, real], dim=1)
    key_padding_mask = torch.tensor([[True] * 3 + [False] * 5])
    with torch.no_grad():
        out = module(padded, token_mask=~key_padding_mask)
        torch.testing.assert_close(out[:, 3:], module(real), atol=atol, rtol=0)
        # The pads' own rows may attend to nothing (causal + padding): zero attention, no NaN.
        assert torch.isfinite(out).all()


def test_padded_keys_get_zero_weight():
    module = make_module()
    x = torch.randn(2, 6, 16, dtype=DT)
    key_padding_mask = torch.tensor(
        [[False] * 6, [True, True, False, False, False, True]]
    )
    with torch.no_grad():
        _, weights = module(x, token_mask=~key_padding_mask, need_weights=True)
    assert (weights[1][..., key_padding_mask[1]] == 0).all()
    allowed = torch.ones(6, 6, dtype=torch.bool).tril()
    assert (weights[0][:, allowed] > 0).all() and (
        weights[0][:, ~allowed] == 0
    ).all()


@pytest.mark.parametrize("causal", [True, False])
def test_flex_logic_matches_eager_on_many_cases(causal, uncompiled_flex):
    """Padding, a general mask and cross-shaped calls through the flex path's score_mod and mask_mod."""
    eager = make_module(causal=causal, dtype=torch.float32)
    flex = copy.deepcopy(eager)
    flex.backend = "flex"
    x = torch.randn(2, 8, 16)
    key_padding_mask = torch.zeros(2, 8, dtype=torch.bool)
    key_padding_mask[0, :2] = True
    mask = torch.rand(2, 4, 8, 8) > 0.3
    mask |= torch.eye(
        8, dtype=torch.bool
    )  # every query may attend to itself, causal or not
    with torch.no_grad():
        for kwargs in (
            {},
            {"token_mask": ~key_padding_mask},
            {"mask": mask},
            {"mask": mask[:, :1], "token_mask": ~key_padding_mask},
        ):
            torch.testing.assert_close(
                flex(x, **kwargs), eager(x, **kwargs), atol=FLEX_ATOL, rtol=0
            )
        q = x[:, 5:]
        torch.testing.assert_close(
            flex(q, x, x), eager(q, x, x), atol=FLEX_ATOL, rtol=0
        )
        eager.scale = flex.scale = (
            1.0  # the base class's score scale, honoured by the flex path too
        )
        torch.testing.assert_close(flex(x), eager(x), atol=FLEX_ATOL, rtol=0)


def test_flex_compiled_matches_eager_and_sdpa():
    """The one case that builds the compiled kernel: causal, cross-shaped, with left padding."""
    module = make_module(dtype=torch.float32, backend="eager")
    x = torch.randn(2, 9, 16)
    key_padding_mask = torch.zeros(2, 9, dtype=torch.bool)
    key_padding_mask[0, :2] = True
    q = x[:, 3:]  # 6 queries at positions 3..8 against 9 keys
    outputs = {}
    with torch.no_grad():
        for backend in ("eager", "sdpa", "flex"):
            module.backend = backend
            outputs[backend] = module(q, x, x, token_mask=~key_padding_mask)
    assert (
        alibi_module._compiled_flex_attention is not None
    )  # the compiled kernel really ran
    assert alibi_module._compiled_flex_attention is not flex_attention
    torch.testing.assert_close(
        outputs["sdpa"], outputs["eager"], atol=FLEX_ATOL, rtol=0
    )
    torch.testing.assert_close(
        outputs["flex"], outputs["eager"], atol=FLEX_ATOL, rtol=0
    )
    reference = reference_alibi_mha(
        module.double(), q.double(), x.double(), key_padding_mask
    )
    torch.testing.assert_close(
        outputs["flex"].double(), reference, atol=FLEX_ATOL, rtol=0
    )


def test_flex_refuses_attention_dropout_while_training():
    module = AlibiMultiHeadAttention(
        16, 4, dropout=0.1, backend="flex"
    ).train()
    with pytest.raises(ValueError, match="dropout"):
        module(torch.randn(1, 3, 16))


def test_causal_block_mask_is_cached_per_lengths_and_equals_a_fresh_one():
    from torch.nn.attention.flex_attention import create_block_mask

    cpu, block = torch.device("cpu"), alibi_module.FLEX_BLOCK_SIZE
    assert alibi_module.causal_block_mask(
        300, 300, cpu
    ) is alibi_module.causal_block_mask(300, 300, cpu)
    for q_len, k_len in [
        (300, 300),
        (1, 300),
        (44, 300),
        (129, 257),
        (40, 40),
        (128, 128),
    ]:
        cached = alibi_module.causal_block_mask(q_len, k_len, cpu)
        offset = k_len - q_len
        whole_q, whole_k = (
            -(-q_len // block) * block,
            -(-k_len // block) * block,
        )  # whole blocks
        fresh = create_block_mask(
            lambda b, h, i, j: (j <= i + offset) & (j < k_len),
            None,
            None,
            whole_q,
            whole_k,
            device=cpu,
        )
        assert cached.shape == fresh.shape == (1, 1, whole_q, whole_k)
        assert torch.equal(cached.to_dense(), fresh.to_dense())
        # and the mask it encodes, position by position (a loop, independent of flex): causal
        # over the real keys, and no padded key for any query, padded ones included
        dense = torch.tensor(
            [
                [j <= i + offset and j < k_len for j in range(whole_k)]
                for i in range(whole_q)
            ]
        )
        assert torch.equal(
            cached.mask_mod(
                0, 0, torch.arange(whole_q)[:, None], torch.arange(whole_k)
            ),
            dense,
        )
    assert alibi_module.causal_block_mask(
        44, 300, cpu
    ) is not alibi_module.causal_block_mask(45, 300, cpu)


def test_flex_uses_the_cached_mask_only_for_causality_alone(
    uncompiled_flex, monkeypatch
):
    calls = []
    real = alibi_module.causal_block_mask
    monkeypatch.setattr(
        alibi_module,
        "causal_block_mask",
        lambda *a: calls.append(a) or real(*a),
    )
    module = AlibiMultiHeadAttention(16, 4, causal=True, backend="flex").eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():  # no FlexAttention backward on a CPU
        module(x)
        assert calls == [(5, 5, x.device)]
        module(
            x, token_mask=torch.ones(2, 5, dtype=torch.bool)
        )  # padding: a mask of its own
    assert len(calls) == 1


# ---------------------------------------------------------------------------------------------
# No stale cache: every call computes its bias for its own lengths, device and dtype


def test_no_stale_bias_across_dtypes_and_lengths():
    module = make_module(dtype=torch.float32, backend="sdpa")
    fresh = copy.deepcopy(module)
    x32_long, x32_short = torch.randn(2, 9, 16), torch.randn(2, 4, 16)
    with torch.no_grad():
        long_first = module(x32_long)
        short_after = module(x32_short)
        module.double()
        out64 = module(x32_long.double())
        module.float()
        long_again = module(x32_long)
        torch.testing.assert_close(
            short_after,
            copy.deepcopy(fresh)(x32_short),
            atol=FLEX_ATOL,
            rtol=0,
        )
        torch.testing.assert_close(long_again, long_first, atol=0, rtol=0)
        torch.testing.assert_close(
            out64,
            reference_alibi_mha(fresh.double(), x32_long.double()),
            atol=ATOL,
            rtol=0,
        )
    assert (
        module.attention_bias(3, 3, "cpu", torch.float64).dtype
        == torch.float64
    )


def test_the_bias_is_built_once_per_lengths_device_dtype_causality_and_slopes(
    monkeypatch,
):
    module = AlibiMultiHeadAttention(16, 4, causal=True).eval()
    builds = []
    real = module._build_bias
    monkeypatch.setattr(
        module, "_build_bias", lambda *a: builds.append(a[:2]) or real(*a)
    )
    x = torch.randn(2, 9, 16)
    with torch.no_grad():
        first = module(x)
        torch.testing.assert_close(module(x), first, rtol=0, atol=0)
        assert len(builds) == 1  # the second call reused it
        module(x[:, :5])  # another length
        module(x)  # back to the first: one entry is kept, so it is rebuilt
        assert len(builds) == 3
        module.causal = False  # causality is in the key
        bidirectional = module(x)
        assert len(builds) == 4
        module.causal = True
        module(x)
        module.slopes.mul_(
            2.0
        )  # slopes changed in place: their version is in the key
        steeper = module(x)
        assert len(builds) == 6
    fresh = AlibiMultiHeadAttention(16, 4, causal=True).eval()
    fresh.load_state_dict(module.state_dict())
    fresh.slopes.mul_(2.0)
    with torch.no_grad():
        torch.testing.assert_close(steeper, fresh(x), atol=ATOL, rtol=0)
        fresh.slopes.div_(2.0)
        fresh.causal = False
        torch.testing.assert_close(bidirectional, fresh(x), atol=ATOL, rtol=0)


def test_the_sdpa_path_hands_torch_a_4d_mask(monkeypatch):
    import mixers.attention as attention_module

    seen = []
    real = attention_module.fused_attention
    monkeypatch.setattr(
        attention_module,
        "fused_attention",
        lambda q, k, v, attn_mask=None, **kw: (
            seen.append(attn_mask) or real(q, k, v, attn_mask, **kw)
        ),
    )
    with torch.no_grad():
        AlibiMultiHeadAttention(16, 4, causal=True).eval()(
            torch.randn(2, 7, 16)
        )
    assert seen[0].shape == (
        1,
        4,
        7,
        7,
    )  # [1, heads, q, k]: torch's fused CPU kernel refuses [heads, q, k]


def test_slopes_buffer_moves_with_the_module_and_is_not_saved():
    module = AlibiMultiHeadAttention(16, 4)
    assert "slopes" not in module.state_dict()
    module.to("meta")
    assert module.slopes.device.type == "meta"
    assert (
        module.attention_bias(
            3, 5, torch.device("meta"), torch.float32
        ).device.type
        == "meta"
    )


def test_casting_the_module_to_bfloat16_keeps_exact_slopes():
    module = AlibiMultiHeadAttention(24, 12, causal=True).to(torch.bfloat16)
    assert (
        module.slopes.dtype == torch.bfloat16
    )  # the buffer was rounded by the cast ...
    bias = module.attention_bias(6, 6, "cpu", torch.float32)
    assert torch.equal(
        bias, alibi_bias(12, 6)
    )  # ... but the bias uses the exact slopes


# ---------------------------------------------------------------------------------------------
# Bad arguments name themselves


def test_bad_arguments_raise_errors_that_name_them():
    with pytest.raises(ValueError, match="n_heads"):
        alibi_slopes(0)
    with pytest.raises(TypeError, match="n_heads"):
        alibi_slopes(4.0)
    with pytest.raises(ValueError, match="slopes_or_n_heads"):
        alibi_bias(0, 3)
    with pytest.raises(ValueError, match="slopes_or_n_heads"):
        alibi_bias(torch.ones(2, 2), 3)
    with pytest.raises(ValueError, match="q_len"):
        alibi_bias(
            4, 5, 3
        )  # more queries than keys: the default offset would be negative
    with pytest.raises(ValueError, match="q_len"):
        alibi_bias(4, 0)
    with pytest.raises(ValueError, match="q_offset"):
        alibi_bias(4, 2, 3, q_offset=-1)
    with pytest.raises(TypeError, match="q_offset"):
        alibi_bias(4, 2, 3, q_offset=1.0)
    with pytest.raises(ValueError, match="key_positions"):
        alibi_bias(4, 3, key_positions=torch.arange(4))
    with pytest.raises(ValueError, match="key_positions"):
        alibi_bias(4, 3, key_positions=torch.zeros(1, 2, 3, dtype=torch.long))
    with pytest.raises(TypeError, match="key_positions"):
        alibi_bias(4, 3, key_positions=torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="query_positions"):
        alibi_bias(4, 2, 3, query_positions=torch.arange(3))
    with pytest.raises(ValueError, match="batch size"):
        alibi_bias(
            4,
            3,
            key_positions=torch.zeros(2, 3),
            query_positions=torch.zeros(3, 3),
        )
    with pytest.raises(ValueError, match="backend"):
        AlibiMultiHeadAttention(16, 4, backend="flash")
    module = AlibiMultiHeadAttention(16, 4, causal=True)
    with pytest.raises(ValueError, match="backend"):
        module.backend = "triton"
    with pytest.raises(ValueError, match="n_heads"):
        AlibiMultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="q_len"):
        module(
            torch.randn(1, 5, 16), torch.randn(1, 3, 16)
        )  # causal with q_len > k_len
    with pytest.raises(ValueError, match="slopes"):
        labml_style_alibi_attention(
            *(torch.randn(1, 4, 5, 8) for _ in range(3)), slopes=torch.ones(3)
        )
    with pytest.raises(ValueError, match="self-attention"):
        labml_style_alibi_attention(
            torch.randn(1, 4, 5, 8),
            torch.randn(1, 4, 6, 8),
            torch.randn(1, 4, 6, 8),
            4,
        )


def test_the_decoding_bias_is_a_view_of_one_ramp_and_equals_alibi_bias_at_every_length():
    layer = AlibiMultiHeadAttention(16, 4, causal=True)
    for k_len in [
        *range(1, 40),
        100,
        3,
        101,
    ]:  # grows past the ramp twice, then shrinks
        row = layer.attention_bias(1, k_len, "cpu", torch.float32)
        torch.testing.assert_close(
            row, alibi_bias(layer.slopes, 1, k_len), atol=0, rtol=0
        )
    ramps = {layer._ramp_cache[1].data_ptr()}
    for k_len in (5, 60, 101):  # no new ramp while the lengths fit
        layer.attention_bias(1, k_len, "cpu", torch.float32)
        ramps.add(layer._ramp_cache[1].data_ptr())
    assert len(ramps) == 1
    double = layer.attention_bias(
        1, 7, "cpu", torch.float64
    )  # another dtype: its own ramp
    assert double.dtype == torch.float64
    torch.testing.assert_close(
        double, alibi_bias(layer.slopes.double(), 1, 7, dtype=torch.float64)
    )
