"""Tests of mixers.positions against brute-force references written here.

The sinusoidal table and the rotary embedding are checked element by element with Python's
math.sin / math.cos (a 2x2 rotation per channel pair); RotaryMultiHeadAttention against its
defining properties (relative positions, causality, incremental decoding) and a reference built
from its own weights with torch's SDPA.
"""

import inspect
import math

import pytest
import torch
import torch.nn.functional as F
from helpers import (
    assert_causal_by_perturbation,
    assert_decoding_equals_the_full_pass,
)

from mixers.attention import MultiHeadAttention
from mixers.positions import (
    LearnedPositions,
    NoPositions,
    RotaryMultiHeadAttention,
    SinusoidalPositions,
    rotary_embedding,
    rotary_tables,
    rotate_pairs,
    sinusoidal_table,
)

DT = torch.float64
ATOL = 1e-10


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# ---------------------------------------------------------------------------------------------
# Sinusoidal and learned positions


@pytest.mark.parametrize(
    "seq_len, d_model, base", [(7, 8, 10000.0), (5, 6, 100.0), (1, 2, 10000.0)]
)
def test_sinusoidal_table_matches_brute_force(seq_len, d_model, base):
    table = sinusoidal_table(seq_len, d_model, base)
    assert table.shape == (seq_len, d_model)
    expected = torch.empty(seq_len, d_model, dtype=DT)
    for pos in range(seq_len):
        for i in range(d_model // 2):
            angle = pos / base ** (2 * i / d_model)
            expected[pos, 2 * i] = math.sin(angle)
            expected[pos, 2 * i + 1] = math.cos(angle)
    torch.testing.assert_close(
        table.to(DT), expected, atol=1e-6, rtol=0
    )  # a float32 table
    if base == 10000.0:  # the module uses the default base
        torch.testing.assert_close(
            SinusoidalPositions(d_model)(seq_len), table, atol=0, rtol=0
        )


def test_sinusoidal_table_needs_an_even_width():
    with pytest.raises(ValueError, match="d_model"):
        sinusoidal_table(4, 5)


def test_learned_positions_raise_past_max_len():
    positions = LearnedPositions(8, max_len=5)
    assert positions(5).shape == (5, 8)
    with pytest.raises(ValueError, match="5 rows.*6 tokens"):
        positions(6)


# ---------------------------------------------------------------------------------------------
# rotary_embedding


def brute_rotary(x, positions, base=10000.0):
    """A 2x2 rotation of each channel pair (2i, 2i+1) by pos · base^(-2i/d), one loop step each."""
    *lead, seq, d = x.shape
    out = torch.empty(
        x.shape, dtype=DT
    )  # contiguous, so that view below shares its memory
    flat_x, flat_out = x.reshape(-1, seq, d), out.view(-1, seq, d)
    for n in range(flat_x.shape[0]):
        for s in range(seq):
            pos = float(positions[s])
            for i in range(d // 2):
                theta = pos * base ** (-2 * i / d)
                a, b = (
                    float(flat_x[n, s, 2 * i]),
                    float(flat_x[n, s, 2 * i + 1]),
                )
                flat_out[n, s, 2 * i] = a * math.cos(theta) - b * math.sin(
                    theta
                )
                flat_out[n, s, 2 * i + 1] = a * math.sin(theta) + b * math.cos(
                    theta
                )
    return out


@pytest.mark.parametrize("base", [10000.0, 10.0])
def test_rotary_matches_brute_force_rotation(base):
    x = torch.randn(2, 3, 5, 6, dtype=DT)
    positions = torch.tensor([0, 1, 2, 7, 100])
    torch.testing.assert_close(
        rotary_embedding(x, positions, base),
        brute_rotary(x, positions, base),
        atol=ATOL,
        rtol=0,
    )


def test_rotary_pairs_are_interleaved():
    # A unit vector in channel 0 at position 1 turns (by 1 radian) into channels 0 and 1 only.
    x = torch.zeros(1, 1, 1, 4, dtype=DT)
    x[..., 0] = 1.0
    out = rotary_embedding(x, torch.tensor([1]))
    expected = torch.tensor([math.cos(1.0), math.sin(1.0), 0.0, 0.0], dtype=DT)
    torch.testing.assert_close(out[0, 0, 0], expected, atol=ATOL, rtol=0)


def test_rotary_preserves_norms():
    x = torch.randn(2, 3, 9, 8, dtype=DT)
    out = rotary_embedding(x, torch.arange(9) * 13)
    torch.testing.assert_close(
        out.norm(dim=-1), x.norm(dim=-1), atol=ATOL, rtol=0
    )
    pair_norms = out.unflatten(-1, (4, 2)).norm(
        dim=-1
    )  # each 2-d pair is rotated on its own
    torch.testing.assert_close(
        pair_norms, x.unflatten(-1, (4, 2)).norm(dim=-1), atol=ATOL, rtol=0
    )
    assert not torch.allclose(out, x)


def test_rotary_dot_product_depends_only_on_the_relative_offset():
    q, k = torch.randn(8, dtype=DT), torch.randn(8, dtype=DT)

    def rotated_dot(m, n):
        rq = rotary_embedding(q.view(1, 8), torch.tensor([m]))
        rk = rotary_embedding(k.view(1, 8), torch.tensor([n]))
        return float((rq * rk).sum())

    for m, n in [(0, 0), (3, 1), (1, 3), (10, 2)]:
        for shift in (1, 5, 37):
            assert math.isclose(
                rotated_dot(m, n),
                rotated_dot(m + shift, n + shift),
                abs_tol=1e-10,
            )
    assert not math.isclose(
        rotated_dot(3, 1), rotated_dot(1, 3), abs_tol=1e-6
    )  # the offset does matter


def test_rotary_accepts_per_sample_positions_and_keeps_dtype():
    x = torch.randn(2, 3, 4, 6, dtype=DT)
    positions = torch.tensor(
        [[0, 0, 1, 2], [0, 1, 2, 3]]
    )  # sample 0 left-padded by one
    out = rotary_embedding(x, positions)
    for b in range(2):
        torch.testing.assert_close(
            out[b], rotary_embedding(x[b], positions[b]), atol=ATOL, rtol=0
        )
    half = rotary_embedding(x.to(torch.bfloat16), positions)
    assert half.dtype == torch.bfloat16


def test_rotary_bad_arguments_name_them():
    with pytest.raises(ValueError, match="d_head even"):
        rotary_embedding(torch.randn(1, 2, 3, 5), torch.arange(3))
    with pytest.raises(ValueError, match="positions"):
        rotary_embedding(torch.randn(1, 2, 3, 4), torch.arange(4))
    with pytest.raises(ValueError, match="positions"):
        rotary_embedding(torch.randn(2, 2, 3, 4), torch.zeros(3, 3))
    with pytest.raises(TypeError, match="positions"):
        rotary_embedding(torch.randn(1, 2, 3, 4), [0, 1, 2])
    with pytest.raises(TypeError, match="q_or_k"):
        rotary_embedding(
            torch.zeros(1, 2, 3, 4, dtype=torch.long), torch.arange(3)
        )


# ---------------------------------------------------------------------------------------------
# RotaryMultiHeadAttention


def make_rotary(backend="sdpa", causal=True, **kwargs):
    module = RotaryMultiHeadAttention(
        16, 2, causal=causal, backend=backend, **kwargs
    ).to(DT)
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0.0, 0.5)
    return module.eval()


def reference_rotary_mha(module, x, scale=None):
    """From the module's weights: split heads, rotate with the brute-force loop, torch's SDPA."""
    batch, seq, _ = x.shape

    def split(t):
        return t.view(batch, seq, 2, 8).transpose(1, 2)

    q = brute_rotary(split(module.q_proj(x)), range(seq))
    k = brute_rotary(split(module.k_proj(x)), range(seq))
    out = F.scaled_dot_product_attention(
        q, k, split(module.v_proj(x)), is_causal=module.causal, scale=scale
    )
    return module.out_proj(out.transpose(1, 2).reshape(batch, seq, 16))


@pytest.mark.parametrize("backend", ["eager", "sdpa"])
@pytest.mark.parametrize("causal", [True, False])
def test_rotary_attention_matches_reference(backend, causal):
    module = make_rotary(backend, causal)
    x = torch.randn(2, 5, 16, dtype=DT)
    with torch.no_grad():
        torch.testing.assert_close(
            module(x), reference_rotary_mha(module, x), atol=ATOL, rtol=0
        )


def test_rotating_pairs_is_one_complex_multiply():
    x = torch.randn(3, 4, 7, 10, dtype=DT)
    positions = torch.arange(7) * 3
    cos, sin = rotary_tables(positions, 10, dtype=DT)
    angles = positions[:, None].to(DT) * 10000.0 ** (
        -torch.arange(0, 10, 2, dtype=DT) / 10
    )
    as_complex = torch.view_as_complex(x.unflatten(-1, (5, 2)).contiguous())
    expected = torch.view_as_real(
        as_complex * torch.polar(torch.ones_like(angles), angles)
    )
    torch.testing.assert_close(
        rotate_pairs(x, cos, sin), expected.flatten(-2), atol=ATOL, rtol=0
    )


def test_the_compiled_form_of_the_rotation_equals_the_eager_complex_one(
    monkeypatch,
):
    x = torch.randn(2, 7, 3, 10, dtype=DT).transpose(
        1, 2
    )  # [2, 3, 7, 10], not contiguous
    cos, sin = rotary_tables(torch.arange(7), 10, dtype=DT)
    eager = rotate_pairs(x, cos, sin)  # one complex product, on a view of x
    odd = torch.randn(2 * 3 * 7 * 10 + 1, dtype=DT)[1:].view(
        2, 3, 7, 10
    )  # odd offset: copied
    eager_odd = rotate_pairs(odd, cos, sin)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    torch.testing.assert_close(
        eager, rotate_pairs(x, cos, sin), atol=ATOL, rtol=0
    )
    torch.testing.assert_close(
        eager_odd, rotate_pairs(odd, cos, sin), atol=ATOL, rtol=0
    )


def test_an_eager_layer_hands_the_product_only_its_complex_turn(
    monkeypatch,
):
    # Decoding slices the tables at every token: the eager product reads only
    # the complex turn, so cos and sin are not sliced (None); compiled, the
    # real form gets cos and sin and no turn. Without cos and sin where they
    # are read, the call says so.
    module = make_rotary("eager")
    cos, sin, turn = module._rotation(3, 2, "cpu", DT)
    assert cos is None and sin is None and turn.shape == (2, 4)  # d_head 8
    full_cos, full_sin = rotary_tables(torch.arange(3, 5), 8, dtype=DT)
    x = torch.randn(1, 2, 2, 8, dtype=DT)
    torch.testing.assert_close(
        rotate_pairs(x, None, None, turn),
        rotate_pairs(x, full_cos, full_sin),
        atol=ATOL,
        rtol=0,
    )
    with pytest.raises(ValueError, match="needs turn, or cos and sin"):
        rotate_pairs(x, None, None)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    compiled = module._rotation(3, 2, "cpu", DT)
    assert compiled[2] is None
    torch.testing.assert_close(compiled[0], full_cos, atol=0, rtol=0)
    with pytest.raises(
        ValueError, match="under torch.compile needs cos and sin"
    ):
        rotate_pairs(x, None, None, turn)


def test_rotary_tables_are_built_once_and_grown_only_when_a_call_reaches_past_them():
    module = make_rotary("eager")
    calls = []
    real = rotary_tables

    def counting(positions, *args):
        calls.append(len(positions))
        return real(positions, *args)

    import mixers.positions as positions_module

    positions_module.rotary_tables = counting
    try:
        with torch.no_grad():
            for seq in (
                5,
                5,
                3,
                5,
                9,
                2,
                9,
            ):  # short, the same, longer, shorter
                x = torch.randn(2, seq, 16, dtype=DT)
                # each call still equals the reference (the loop rotation), whatever was cached
                torch.testing.assert_close(
                    module(x),
                    reference_rotary_mha(module, x),
                    atol=ATOL,
                    rtol=0,
                )
            assert calls == [
                5,
                10,
            ]  # built for 5 positions, rebuilt at twice that
            module.float()(torch.randn(1, 4, 16))  # another dtype: built anew
            assert calls == [5, 10, 4]
    finally:
        positions_module.rotary_tables = real


def test_rotary_attention_is_causal_by_perturbation():
    assert_causal_by_perturbation(
        make_rotary(), torch.randn(1, 6, 16, dtype=DT), t=3, atol=ATOL
    )


@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_rotary_incremental_decoding_equals_the_full_pass(backend):
    assert_decoding_equals_the_full_pass(
        make_rotary(backend),
        torch.randn(2, 6, 16, dtype=DT),
        chunk_from=2,
        atol=ATOL,
    )


def test_rotary_attention_needs_an_even_head_width():
    with pytest.raises(ValueError, match="d_head"):
        RotaryMultiHeadAttention(6, 2)  # d_head = 3


# The same arguments and defaults as MultiHeadAttention: causal=False, kdim, vdim, scale.


def test_rotary_attention_has_the_base_class_arguments_and_defaults():
    base = dict(inspect.signature(MultiHeadAttention).parameters)
    rotary = dict(inspect.signature(RotaryMultiHeadAttention).parameters)
    assert list(rotary)[-1] == "base"  # its own argument, last
    rotary.pop("base")
    assert list(rotary) == list(base)
    assert {n: p.default for n, p in rotary.items()} == {
        n: p.default for n, p in base.items()
    }


def test_rotary_attention_is_not_causal_by_default():
    module = RotaryMultiHeadAttention(16, 2)
    assert module.causal is False
    x = torch.randn(1, 6, 16)
    y = x.clone()
    y[:, 4] += 1.0
    with torch.no_grad():  # position 0 reads position 4: not causal
        assert (module(x)[:, 0] - module(y)[:, 0]).abs().max() > 1e-6


def reference_rotary_cross(
    module, query, key, value, scale=None, token_mask=None
):
    """Cross-attention from the module's weights: key j rotated to position j, query i to
    k_len - q_len + i (brute-force loop), then torch's SDPA."""
    batch, q_len, _ = query.shape
    k_len = key.shape[1]

    def split(t):
        return t.view(batch, t.shape[1], 2, 8).transpose(1, 2)

    q = brute_rotary(split(module.q_proj(query)), range(k_len - q_len, k_len))
    k = brute_rotary(split(module.k_proj(key)), range(k_len))
    attn_mask = None if token_mask is None else token_mask[:, None, None, :]
    out = F.scaled_dot_product_attention(
        q, k, split(module.v_proj(value)), attn_mask=attn_mask, scale=scale
    )
    return module.out_proj(out.transpose(1, 2).reshape(batch, q_len, 16))


@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_rotary_cross_attention_with_kdim_vdim(backend):
    module = make_rotary(backend, causal=False, kdim=6, vdim=10)
    assert module.k_proj.in_features == 6 and module.v_proj.in_features == 10
    query, key, value = (
        torch.randn(2, 3, 16, dtype=DT),
        torch.randn(2, 5, 6, dtype=DT),
        torch.randn(2, 5, 10, dtype=DT),
    )
    token_mask = torch.tensor(
        [[True, True, True, False, False], [False, True, True, True, True]]
    )
    with torch.no_grad():
        out = module(query, key, value)
        assert out.shape == (2, 3, 16)
        torch.testing.assert_close(
            out,
            reference_rotary_cross(module, query, key, value),
            atol=ATOL,
            rtol=0,
        )
        torch.testing.assert_close(
            module(query, key, value, token_mask=token_mask),
            reference_rotary_cross(
                module, query, key, value, token_mask=token_mask
            ),
            atol=ATOL,
            rtol=0,
        )
    with pytest.raises(ValueError, match="kdim=6"):
        module(query, torch.randn(2, 5, 16, dtype=DT), value)


@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_rotary_attention_scale(backend):
    torch.manual_seed(0)
    scaled = make_rotary(backend, causal=True)
    torch.manual_seed(0)
    unscaled = make_rotary(backend, causal=True, scale=1.0)
    assert unscaled.scale == 1.0 and scaled.scale is None
    x = torch.randn(2, 5, 16, dtype=DT)
    with torch.no_grad():
        out_scaled, out_unscaled = scaled(x), unscaled(x)
        torch.testing.assert_close(
            out_unscaled,
            reference_rotary_mha(unscaled, x, scale=1.0),
            atol=ATOL,
            rtol=0,
        )
        torch.testing.assert_close(
            out_scaled, reference_rotary_mha(scaled, x), atol=ATOL, rtol=0
        )
    assert (
        out_scaled - out_unscaled
    ).abs().max() > 1e-3  # same weights, different scale
    with pytest.raises(ValueError, match="scale"):
        RotaryMultiHeadAttention(16, 2, scale=0.0)


def test_the_scaled_sinusoid_starts_at_the_token_embeddings_scale():
    from mixers.positions import SCALED_SINUSOID_FACTOR, build_positions

    plain, scaled = (
        build_positions("sinusoidal", 128, 64)(64),
        build_positions("sinusoidal_scaled", 128, 64)(64),
    )
    assert torch.equal(scaled, plain * SCALED_SINUSOID_FACTOR)
    assert abs(plain.pow(2).mean().sqrt().item() - 2**-0.5) < 1e-6
    assert (
        abs(scaled.pow(2).mean().sqrt().item() - 0.02) < 1e-6
    )  # the token embeddings' init std


# ---------------------------------------------------------------------------------------------
# Every number is checked where it enters: base 0 gave all-zero outputs on SDPA and NaN on the
# eager path; a negative seq_len cropped the learned table from its end.

BAD_BASES = [
    (0, ValueError),
    (-10.0, ValueError),
    (float("nan"), ValueError),
    (float("inf"), ValueError),
    ("10000", TypeError),
    (True, TypeError),
    (None, TypeError),
]


@pytest.mark.parametrize("base, error", BAD_BASES)
def test_a_bad_base_is_refused_naming_it(base, error):
    x = torch.randn(1, 2, 3, 4)
    for call in (
        lambda: rotary_embedding(x, torch.arange(3), base=base),
        lambda: RotaryMultiHeadAttention(8, 2, base=base),
        lambda: RotaryMultiHeadAttention(8, 2, backend="eager", base=base),
        lambda: sinusoidal_table(4, 8, base=base),
    ):
        with pytest.raises(
            error, match=r"base must be a positive finite float, got"
        ):
            call()


@pytest.mark.parametrize(
    "build, error, match",
    [
        (
            lambda: SinusoidalPositions(8, scale=float("nan")),
            ValueError,
            "scale must be a finite float",
        ),
        (
            lambda: SinusoidalPositions(8, scale=float("inf")),
            ValueError,
            "scale",
        ),
        (lambda: SinusoidalPositions(8, scale="1"), TypeError, "scale"),
        (lambda: SinusoidalPositions(7), ValueError, "d_model must be even"),
        (lambda: SinusoidalPositions(0), ValueError, "d_model"),
        (lambda: SinusoidalPositions(8.0), TypeError, "d_model"),
        (lambda: LearnedPositions(8, max_len=0), ValueError, "max_len"),
        (
            lambda: LearnedPositions(8, max_len=4)(-1),
            ValueError,
            "seq_len must be a positive int",
        ),
        (lambda: LearnedPositions(8, max_len=4)(0), ValueError, "seq_len"),
        (lambda: LearnedPositions(8, max_len=4)(2.0), TypeError, "seq_len"),
        (lambda: SinusoidalPositions(8)(0), ValueError, "seq_len"),
        (lambda: NoPositions()(-3), ValueError, "seq_len"),
    ],
)
def test_bad_position_arguments_are_refused_naming_them(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_valid_bases_and_scales_still_work():
    torch.testing.assert_close(
        SinusoidalPositions(8, scale=0.5)(3), 0.5 * sinusoidal_table(3, 8)
    )
    x = torch.randn(1, 2, 3, 4)
    torch.testing.assert_close(
        rotary_embedding(x, torch.arange(3), base=10000),
        rotary_embedding(x, torch.arange(3), base=10000.0),
        atol=0,
        rtol=0,
    )
    assert RotaryMultiHeadAttention(8, 2, base=500).base == 500.0
