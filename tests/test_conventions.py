"""The package's one convention, checked across modules.

- every boolean mask is True where reading is allowed, and a per-token mask is ``token_mask``,
  True at real tokens: the same mask given to every layer that takes one means the same thing;
- the attention family shares arguments, defaults and return types;
- bad masks and empty sequences fail with errors that name the argument;
- the FlexAttention backend survives new head counts and lengths in one process.
"""

import inspect

import pytest
import torch

import mixers
from mixers.alibi import AlibiMultiHeadAttention
from mixers.attention import (
    AdditiveAttention,
    BiAttention,
    DotProductAttention,
    MultiHeadAttention,
    SingleLayerAttention,
)
from mixers.gmlp import GatedMLP, GMLPBlock, SpatialGatingUnit, TinyAttention
from mixers.positions import RotaryMultiHeadAttention

FAMILY = (MultiHeadAttention, AlibiMultiHeadAttention, RotaryMultiHeadAttention)
D, SEQ = 16, 6

# Sample 0 is padded at its last two tokens, sample 1 at its first (left padding).
REAL = torch.tensor([[True] * 4 + [False] * 2, [False] + [True] * 5])


def _pad_junk(x, real):
    """x with its padded positions replaced by large noise: a padded token must not be read."""
    return torch.where(real[..., None], x, 100 * torch.randn_like(x))


def _token_mixers():
    torch.manual_seed(0)
    yield "MultiHeadAttention", MultiHeadAttention(D, 4).eval(), lambda m, x, mask: m(x, token_mask=mask)
    yield "AlibiMultiHeadAttention", AlibiMultiHeadAttention(D, 4).eval(), lambda m, x, mask: m(x, token_mask=mask)
    yield "RotaryMultiHeadAttention", RotaryMultiHeadAttention(D, 4).eval(), lambda m, x, mask: m(x, token_mask=mask)
    yield "TinyAttention", TinyAttention(D, D, d_attn=8).eval(), lambda m, x, mask: m(x, token_mask=mask)
    yield "SpatialGatingUnit", SpatialGatingUnit(D, SEQ).eval(), lambda m, x, mask: m(x, token_mask=mask)
    yield "GatedMLP", GatedMLP(D, 2 * D, SEQ, tiny_attention=True).eval(), lambda m, x, mask: m(x, token_mask=mask)
    yield "GMLPBlock", GMLPBlock(D, 2 * D, SEQ).eval(), lambda m, x, mask: m(x, token_mask=mask)


@pytest.mark.parametrize("name, layer, call", list(_token_mixers()), ids=lambda v: v if isinstance(v, str) else "")
def test_the_same_token_mask_means_the_same_thing_in_every_layer(name, layer, call):
    # True = real token: changing what sits at the padded (False) positions changes nothing at
    # the real ones, while changing a real token does.
    torch.manual_seed(1)
    x = torch.randn(2, SEQ, D)
    with torch.no_grad():
        out = call(layer, x, REAL)
        junk = call(layer, _pad_junk(x, REAL), REAL)
        torch.testing.assert_close(junk[REAL], out[REAL], atol=1e-5, rtol=0)
        changed_real = x.clone()
        changed_real[0, 1] += 1.0
        assert not torch.allclose(call(layer, changed_real, REAL)[0, 0:4], out[0, 0:4])


def test_bi_attention_reads_its_token_mask_the_same_way():
    torch.manual_seed(0)
    layer = BiAttention(D).eval()
    context, question = torch.randn(2, 3, D), torch.randn(2, SEQ, D)
    with torch.no_grad():
        out = layer(context, question, token_mask=REAL)
        junk = layer(context, _pad_junk(question, REAL), token_mask=REAL)
    torch.testing.assert_close(junk, out, atol=1e-5, rtol=0)


def _inverted_calls():
    x = torch.randn(2, SEQ, D)
    inverted = ~torch.ones(2, SEQ, dtype=torch.bool)  # no real token anywhere: surely ~mask
    for name, layer, call in _token_mixers():
        yield name, lambda layer=layer, call=call: call(layer, x, inverted)
    yield "BiAttention", lambda: BiAttention(D)(torch.randn(2, 3, D), x, token_mask=inverted)


@pytest.mark.parametrize("name, call", list(_inverted_calls()), ids=lambda v: v if isinstance(v, str) else "")
def test_an_inverted_or_integer_token_mask_fails_clearly_everywhere(name, call):
    with pytest.raises(ValueError, match=r"^token_mask has a sample with no real token.*~mask"):
        call()


@pytest.mark.parametrize("name, layer, call", list(_token_mixers()), ids=lambda v: v if isinstance(v, str) else "")
def test_an_integer_mask_is_a_type_error_that_says_how_to_fix_it(name, layer, call):
    with pytest.raises(TypeError, match=r"^token_mask must be a bool tensor.*mask\.bool\(\)"):
        call(layer, torch.randn(2, SEQ, D), REAL.long())


@pytest.mark.parametrize("name, layer, call", list(_token_mixers()), ids=lambda v: v if isinstance(v, str) else "")
def test_an_empty_sequence_is_refused_everywhere(name, layer, call):
    with pytest.raises(ValueError, match=r"must hold at least one position"):
        call(layer, torch.randn(2, 0, D), None)


def test_the_pairwise_mask_means_may_attend_in_every_attention_layer():
    # Every layer that takes a pairwise mask gives a masked key exactly zero weight.
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 4)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[:, 2] = False
    for layer in (DotProductAttention(), SingleLayerAttention(8), AdditiveAttention(8, 8, 6)):
        _, weights = layer(q, k, v, mask=mask, need_weights=True)
        assert (weights[..., 2] == 0).all() and (weights[..., [0, 1, 3, 4]] > 0).all()
    self_mask = torch.ones(5, 5, dtype=torch.bool)
    self_mask[:, 2] = False
    for cls in FAMILY:
        _, weights = cls(8, 2).eval()(torch.randn(2, 5, 8), mask=self_mask, need_weights=True)
        assert (weights[..., 2] == 0).all() and (weights[..., [0, 1, 3, 4]] > 0).all()


# ---------------------------------------------------------------------------------------------
# One family: arguments, defaults, return types


def test_the_attention_family_shares_arguments_and_defaults():
    base = inspect.signature(MultiHeadAttention.__init__).parameters
    for cls in FAMILY[1:]:
        params = inspect.signature(cls.__init__).parameters
        for name, param in base.items():
            assert name in params, f"{cls.__name__} lacks {name}"
            assert params[name].default == param.default, f"{cls.__name__}.{name} defaults differ"
    for cls in FAMILY:
        layer = cls(8, 2)
        assert layer.causal is False and layer.scale is None and layer.backend == "sdpa"


@pytest.mark.parametrize("cls", FAMILY)
def test_the_family_takes_kdim_vdim_and_scale(cls):
    torch.manual_seed(0)
    layer = cls(8, 2, kdim=6, vdim=4, scale=2.0).eval()  # the default is 1/sqrt(4) = 0.5
    query, key, value = torch.randn(2, 3, 8), torch.randn(2, 5, 6), torch.randn(2, 5, 4)
    with torch.no_grad():
        out = layer(query, key, value)
        layer.scale = None
        assert not torch.allclose(layer(query, key, value), out)  # the scale is used
    assert out.shape == (2, 3, 8)


def _attention_calls():
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    yield "DotProductAttention", lambda **kw: DotProductAttention()(q, k, v, **kw)
    yield "SingleLayerAttention", lambda **kw: SingleLayerAttention(8)(q, k, v, **kw)
    yield "AdditiveAttention", lambda **kw: AdditiveAttention(8, 8, 4)(q, k, v, **kw)
    for cls in FAMILY:
        yield cls.__name__, lambda cls=cls, **kw: cls(8, 2)(q, k, v, **kw)
    yield "BiAttention", lambda **kw: BiAttention(8)(q, k, **kw)


@pytest.mark.parametrize("name, call", list(_attention_calls()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_attention_layer_returns_output_or_output_and_weights(name, call):
    assert isinstance(call(), torch.Tensor)
    out, weights = call(need_weights=True)
    assert isinstance(out, torch.Tensor) and weights is not None


def test_the_package_docstring_states_the_mask_convention():
    doc = mixers.__doc__
    for module in ("attention", "alibi", "positions", "gmlp", "feed_forward", "model"):
        assert f"mixers.{module}" in doc
    assert "True where reading is allowed" in doc and "token_mask" in doc


# ---------------------------------------------------------------------------------------------
# FlexAttention: robust in ordinary use


def test_flex_compiles_for_two_head_counts_and_two_lengths_in_one_process():
    # Before: 4 heads then 6 heads in one process failed inside torch's compiler (a dynamic-shape
    # kernel), and later even the shapes that had worked failed. Compiled for real, no fixture.
    torch.manual_seed(0)
    for n_heads, d_model in ((4, 32), (6, 48)):
        for length in (16, 40):
            layer = AlibiMultiHeadAttention(d_model, n_heads, causal=True, backend="flex").eval()
            x = torch.randn(2, length, d_model)
            with torch.no_grad():
                out = layer(x)
                layer.backend = "eager"
                torch.testing.assert_close(out, layer(x), atol=1e-5, rtol=0)
    # and the first shape still works after the others
    layer = AlibiMultiHeadAttention(32, 4, causal=True, backend="flex").eval()
    with torch.no_grad():
        assert torch.isfinite(layer(torch.randn(2, 16, 32))).all()


def test_flex_on_a_cpu_refuses_a_backward_pass_before_running():
    layer = AlibiMultiHeadAttention(16, 4, causal=True, backend="flex")
    with pytest.raises(NotImplementedError, match=r"no backward pass on a CPU.*backend='sdpa'.*no_grad"):
        layer(torch.randn(1, 5, 16))
