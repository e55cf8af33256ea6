"""The package's one convention, checked across modules.

- every boolean mask is True where reading is allowed, and a per-token mask is ``token_mask``,
  True at real tokens: the same mask given to every layer that takes one means the same thing;
- the attention family shares arguments, defaults and return types;
- bad masks and empty sequences fail with errors that name the argument;
- the FlexAttention backend survives new head counts and lengths in one process.
"""

import inspect
from pathlib import Path

import pytest
import torch
from helpers import json_from_a_fresh_process

import mixers
import mixers.attention
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

FAMILY = (
    MultiHeadAttention,
    AlibiMultiHeadAttention,
    RotaryMultiHeadAttention,
)
D, SEQ = 16, 6

# Sample 0 is padded at its last two tokens, sample 1 at its first (left padding).
REAL = torch.tensor([[True] * 4 + [False] * 2, [False] + [True] * 5])


def _pad_junk(x, real):
    """x with its padded positions replaced by large noise: a padded token must not be read."""
    return torch.where(real[..., None], x, 100 * torch.randn_like(x))


def _pad_with(x, real, value):
    """x with its padded positions set to ``value`` (NaN, inf): 0 · NaN = NaN, so a layer that
    merely gives them zero weight still lets them through."""
    return torch.where(real[..., None], x, torch.full_like(x, value))


def _token_mixers():
    torch.manual_seed(0)
    yield (
        "MultiHeadAttention",
        MultiHeadAttention(D, 4).eval(),
        lambda m, x, mask: m(x, token_mask=mask),
    )
    yield (
        "AlibiMultiHeadAttention",
        AlibiMultiHeadAttention(D, 4).eval(),
        lambda m, x, mask: m(x, token_mask=mask),
    )
    yield (
        "RotaryMultiHeadAttention",
        RotaryMultiHeadAttention(D, 4).eval(),
        lambda m, x, mask: m(x, token_mask=mask),
    )
    yield (
        "TinyAttention",
        TinyAttention(D, D, d_attn=8).eval(),
        lambda m, x, mask: m(x, token_mask=mask),
    )
    yield (
        "SpatialGatingUnit",
        SpatialGatingUnit(D, SEQ).eval(),
        lambda m, x, mask: m(x, token_mask=mask),
    )
    yield (
        "GatedMLP",
        GatedMLP(D, 2 * D, SEQ, tiny_attention=True).eval(),
        lambda m, x, mask: m(x, token_mask=mask),
    )
    yield (
        "GMLPBlock",
        GMLPBlock(D, 2 * D, SEQ).eval(),
        lambda m, x, mask: m(x, token_mask=mask),
    )


@pytest.mark.parametrize(
    "name, layer, call",
    list(_token_mixers()),
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_the_same_token_mask_means_the_same_thing_in_every_layer(
    name, layer, call
):
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
        assert not torch.allclose(
            call(layer, changed_real, REAL)[0, 0:4], out[0, 0:4]
        )


# Every token mixer, built causal or bidirectional; each takes (x, token_mask=...).
MIXER_FACTORIES = {
    "MultiHeadAttention": lambda causal: MultiHeadAttention(
        D, 4, causal=causal
    ),
    "AlibiMultiHeadAttention": lambda causal: AlibiMultiHeadAttention(
        D, 4, causal=causal
    ),
    "RotaryMultiHeadAttention": lambda causal: RotaryMultiHeadAttention(
        D, 4, causal=causal
    ),
    "TinyAttention": lambda causal: TinyAttention(
        D, D, d_attn=8, causal=causal
    ),
    "SpatialGatingUnit": lambda causal: SpatialGatingUnit(
        D, SEQ, causal=causal
    ),
    "GatedMLP": lambda causal: GatedMLP(
        D, 2 * D, SEQ, causal=causal, tiny_attention=True
    ),
    "GMLPBlock": lambda causal: GMLPBlock(
        D, 2 * D, SEQ, causal=causal, tiny_attention=True
    ),
}


def _nan_padding_cases():
    for name, build in MIXER_FACTORIES.items():
        for causal in (False, True):
            for backend in getattr(build(causal), "BACKENDS", (None,)):
                label = f"{name}-{backend or 'only'}-{'causal' if causal else 'bidirectional'}"
                yield pytest.param(build, backend, causal, id=label)


@pytest.mark.parametrize("build, backend, causal", list(_nan_padding_cases()))
@pytest.mark.parametrize(
    "value", [float("nan"), float("inf")], ids=["nan", "inf"]
)
def test_nan_or_inf_padding_never_reaches_a_real_output_or_gradient(
    build, backend, causal, value
):
    # Before: every attention layer, eager and sdpa, let a NaN at a padded position into every real
    # output (a masked key gets weight 0, and 0 · NaN = NaN).
    torch.manual_seed(2)
    layer = build(causal).eval()
    if backend is not None:
        layer.backend = backend
    call = lambda layer, x, mask: layer(x, token_mask=mask)  # noqa: E731
    x = torch.randn(2, SEQ, D)
    with torch.no_grad():
        clean = call(layer, x, REAL)
    grad_enabled = backend != "flex"  # no FlexAttention backward on a CPU
    poisoned = _pad_with(x, REAL, value).requires_grad_(grad_enabled)
    with torch.set_grad_enabled(grad_enabled):
        out = call(layer, poisoned, REAL)
        torch.testing.assert_close(out[REAL], clean[REAL], atol=1e-5, rtol=0)
        if grad_enabled:
            out[REAL].sum().backward()
    if grad_enabled:
        assert (
            torch.isfinite(poisoned.grad).all()
            and (poisoned.grad[~REAL] == 0).all()
        )
        for pname, param in layer.named_parameters():
            assert param.grad is None or torch.isfinite(param.grad).all(), (
                pname
            )


@pytest.mark.parametrize(
    "value", [float("nan"), float("inf")], ids=["nan", "inf"]
)
def test_bi_attention_never_reads_nan_padding_either(value):
    torch.manual_seed(0)
    layer = BiAttention(D).eval()
    context, question = torch.randn(2, 3, D), torch.randn(2, SEQ, D)
    clean = layer(context, question, token_mask=REAL)
    poisoned = _pad_with(question, REAL, value).requires_grad_()
    out = layer(context, poisoned, token_mask=REAL)
    torch.testing.assert_close(out, clean, atol=1e-5, rtol=0)
    out.sum().backward()
    assert torch.isfinite(poisoned.grad).all()


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
    inverted = ~torch.ones(
        2, SEQ, dtype=torch.bool
    )  # no real token anywhere: surely ~mask
    for name, layer, call in _token_mixers():
        yield name, lambda layer=layer, call=call: call(layer, x, inverted)
    yield (
        "BiAttention",
        lambda: BiAttention(D)(torch.randn(2, 3, D), x, token_mask=inverted),
    )


@pytest.mark.parametrize(
    "name, call",
    list(_inverted_calls()),
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_an_inverted_or_integer_token_mask_fails_clearly_everywhere(
    name, call
):
    with pytest.raises(
        ValueError, match=r"^token_mask has a sample with no real token.*~mask"
    ):
        call()


@pytest.mark.parametrize(
    "name, layer, call",
    list(_token_mixers()),
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_an_integer_mask_is_a_type_error_that_says_how_to_fix_it(
    name, layer, call
):
    with pytest.raises(
        TypeError, match=r"^token_mask must be a bool tensor.*mask\.bool\(\)"
    ):
        call(layer, torch.randn(2, SEQ, D), REAL.long())


@pytest.mark.parametrize(
    "name, layer, call",
    list(_token_mixers()),
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_an_empty_sequence_is_refused_everywhere(name, layer, call):
    with pytest.raises(ValueError, match=r"must hold at least one position"):
        call(layer, torch.randn(2, 0, D), None)


def test_the_pairwise_mask_means_may_attend_in_every_attention_layer():
    # Every layer that takes a pairwise mask gives a masked key exactly zero weight.
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 4)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[:, 2] = False
    for layer in (
        DotProductAttention(),
        SingleLayerAttention(8),
        AdditiveAttention(8, 8, 6),
    ):
        _, weights = layer(q, k, v, mask=mask, need_weights=True)
        assert (weights[..., 2] == 0).all() and (
            weights[..., [0, 1, 3, 4]] > 0
        ).all()
    self_mask = torch.ones(5, 5, dtype=torch.bool)
    self_mask[:, 2] = False
    for cls in FAMILY:
        _, weights = cls(8, 2).eval()(
            torch.randn(2, 5, 8), mask=self_mask, need_weights=True
        )
        assert (weights[..., 2] == 0).all() and (
            weights[..., [0, 1, 3, 4]] > 0
        ).all()


# ---------------------------------------------------------------------------------------------
# One family: arguments, defaults, return types


def test_the_attention_family_shares_arguments_and_defaults():
    base = inspect.signature(MultiHeadAttention.__init__).parameters
    for cls in FAMILY[1:]:
        params = inspect.signature(cls.__init__).parameters
        for name, param in base.items():
            assert name in params, f"{cls.__name__} lacks {name}"
            assert params[name].default == param.default, (
                f"{cls.__name__}.{name} defaults differ"
            )
    for cls in FAMILY:
        layer = cls(8, 2)
        assert (
            layer.causal is False
            and layer.scale is None
            and layer.backend == "auto"
        )


@pytest.mark.parametrize("cls", FAMILY)
def test_the_family_takes_kdim_vdim_and_scale(cls):
    torch.manual_seed(0)
    layer = cls(
        8, 2, kdim=6, vdim=4, scale=2.0
    ).eval()  # the default is 1/sqrt(4) = 0.5
    query, key, value = (
        torch.randn(2, 3, 8),
        torch.randn(2, 5, 6),
        torch.randn(2, 5, 4),
    )
    with torch.no_grad():
        out = layer(query, key, value)
        layer.scale = None
        assert not torch.allclose(
            layer(query, key, value), out
        )  # the scale is used
    assert out.shape == (2, 3, 8)


def _attention_calls():
    # A batch of 3: unpacking a [2, ...] tensor into (output, weights) would have passed.
    q, k, v = torch.randn(3, 4, 8), torch.randn(3, 5, 8), torch.randn(3, 5, 8)
    yield (
        "DotProductAttention",
        lambda **kw: DotProductAttention()(q, k, v, **kw),
    )
    yield (
        "SingleLayerAttention",
        lambda **kw: SingleLayerAttention(8)(q, k, v, **kw),
    )
    yield (
        "AdditiveAttention",
        lambda **kw: AdditiveAttention(8, 8, 4)(q, k, v, **kw),
    )
    for cls in FAMILY:
        yield cls.__name__, lambda cls=cls, **kw: cls(8, 2)(q, k, v, **kw)
    yield "BiAttention", lambda **kw: BiAttention(8)(q, k, **kw)


@pytest.mark.parametrize(
    "name, call",
    list(_attention_calls()),
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_every_attention_layer_returns_output_or_output_and_weights(
    name, call
):
    torch.manual_seed(0)
    out = call()
    assert isinstance(out, torch.Tensor) and out.shape[:2] == (3, 4)
    returned = call(need_weights=True)
    assert isinstance(returned, tuple) and len(returned) == 2
    with_weights, weights = returned
    assert (
        isinstance(with_weights, torch.Tensor)
        and with_weights.shape == out.shape
    )
    for w in (
        weights if isinstance(weights, tuple) else (weights,)
    ):  # BiAttention: both directions
        assert (
            isinstance(w, torch.Tensor)
            and w.shape[0] == 3
            and w.shape[-2 if w.dim() > 2 else -1] == 4
        )
    c2q = weights[0] if isinstance(weights, tuple) else weights
    torch.testing.assert_close(
        c2q.sum(-1), torch.ones(c2q.shape[:-1])
    )  # rows of weights sum to 1


def test_the_package_docstring_states_the_mask_convention():
    doc = mixers.__doc__
    for module in (
        "attention",
        "alibi",
        "positions",
        "gmlp",
        "feed_forward",
        "model",
    ):
        assert f"mixers.{module}" in doc
    assert "True where reading is allowed" in doc and "token_mask" in doc


# ---------------------------------------------------------------------------------------------
# Masks that can only be mistakes are refused


def _family(causal=False):
    for cls in FAMILY:
        for backend in cls.BACKENDS:
            layer = cls(D, 4, causal=causal, backend=backend).eval()
            yield f"{cls.__name__}-{backend}", layer


@pytest.mark.parametrize(
    "causal", [False, True], ids=["bidirectional", "causal"]
)
def test_a_triu_mask_in_torchs_sense_is_refused(causal):
    # torch's "not allowed" causal mask: before, the last query silently output 0 (bidirectional),
    # or every row was empty but the first (causal).
    x = torch.randn(2, SEQ, D)
    torch_style = torch.ones(SEQ, SEQ, dtype=torch.bool).triu(1)
    for name, layer in _family(causal):
        with (
            torch.no_grad(),
            pytest.raises(
                ValueError, match=r"leaves a real query with no key.*~mask"
            ),
        ):
            layer(x, mask=torch_style)
        with torch.no_grad():  # the same mask the package's way round is fine
            layer(x, mask=~torch_style)


def test_a_query_with_nothing_to_read_is_refused_only_when_it_is_real():
    x = torch.randn(2, SEQ, D)
    mask = torch.ones(SEQ, SEQ, dtype=torch.bool)
    mask[-1] = False  # the last query may read nothing
    padded_last = torch.ones(2, SEQ, dtype=torch.bool)
    padded_last[:, -1] = False
    for name, layer in _family():
        with torch.no_grad():
            with pytest.raises(ValueError, match="leaves a real query"):
                layer(x, mask=mask)
            out = layer(
                x, mask=mask, token_mask=padded_last
            )  # a padded query's row is exempt
            assert torch.isfinite(out).all()
            # cross-attention: a query may legitimately have nothing to read (it gets zeros)
            layer(x[:, :3], x, x, mask=mask[-3:])


def test_a_key_padding_mask_in_torchs_sense_is_refused_when_a_sample_is_all_padding():
    x = torch.randn(2, SEQ, D)
    key_padding_mask = torch.zeros(
        2, SEQ, dtype=torch.bool
    )  # torch's: True at padding, none here
    for name, layer in _family():
        with (
            torch.no_grad(),
            pytest.raises(ValueError, match=r"no real token.*~mask"),
        ):
            layer(x, token_mask=key_padding_mask)


def test_a_3d_pairwise_mask_is_refused_as_ambiguous():
    # [batch, q, k] against [batch, heads, q, k] scores broadcast as [heads, q, k] when batch ==
    # heads: before, weight 2.29 landed on keys the caller had forbidden.
    x = torch.randn(4, SEQ, D)  # batch 4 == heads 4
    per_sample = torch.rand(4, SEQ, SEQ) > 0.5
    per_sample |= torch.eye(SEQ, dtype=torch.bool)
    for name, layer in _family():
        with torch.no_grad():
            with pytest.raises(
                ValueError,
                match=r"\[q_len, k_len\] or \[batch\|1, heads\|1, q_len, k_len\].*3-D",
            ):
                layer(x, mask=per_sample)
            out = layer(
                x, mask=per_sample[:, None]
            )  # the same mask, its heads dim explicit
            _, weights = layer(x, mask=per_sample[:, None], need_weights=True)
        assert (
            weights.masked_select(~per_sample[:, None].expand_as(weights)) == 0
        ).all(), name
        assert out.shape == x.shape
    with pytest.raises(
        ValueError, match="3-D"
    ):  # and in the functional form, any rank in between
        mixers.attention.dot_product_attention(
            torch.randn(2, 3, 5, 8),
            torch.randn(2, 3, 5, 8),
            torch.randn(2, 3, 5, 8),
            torch.ones(3, 5, 5, dtype=torch.bool),
        )


# ---------------------------------------------------------------------------------------------
# FlexAttention: robust in ordinary use


FLEX_SCRIPT = Path(__file__).with_name("flex_equals_eager.py")


@pytest.mark.parametrize("order", ["forward", "reversed"])
@pytest.mark.parametrize("threads", [1, 2])
def test_flex_equals_eager_at_every_length_in_fresh_processes_with_an_empty_compile_cache(
    threads, order, tmp_path, cxx_store
):
    # Before: torch 2.13's compiled CPU kernel garbled batch rows >= 1 at length 40 (errors near
    # 1, or NaN) in 3 of 4 fresh processes, while a warm compile cache or another compile order
    # hid it. Now the flex path hands the kernel whole blocks only. Four fresh processes (1 and 2
    # threads, each in two compile orders, a test each), each with a new, empty
    # TORCHINDUCTOR_CACHE_DIR, so each generates every kernel again; a kernel's C++ source that
    # another process already built, byte for byte, is not built again (tests/cxx_store.py).
    # Each compares lengths 16, 40, 100, 130 and 200, 4 and 6 heads, batch 3, with and without
    # padding, causal and bidirectional (tests/flex_equals_eager.py).
    errors = json_from_a_fresh_process(
        FLEX_SCRIPT,
        threads,
        order,
        cache=tmp_path / "inductor",
        cxx_store=cxx_store,
        OMP_NUM_THREADS=str(threads),
    )
    assert len(errors) == 15
    wrong = {
        case: e for case, e in errors.items() if not e <= 1e-4
    }  # NaN counts as wrong
    assert not wrong, (
        f"{threads} threads, {order} order: flex differs from eager at {wrong}"
    )


def test_flex_on_a_cpu_refuses_a_backward_pass_before_running():
    layer = AlibiMultiHeadAttention(16, 4, causal=True, backend="flex")
    with pytest.raises(
        NotImplementedError,
        match=r"no backward pass on a CPU.*backend='sdpa'.*no_grad",
    ):
        layer(torch.randn(1, 5, 16))


def test_a_module_run_as_a_script_defines_everything_before_it_runs():
    # `python -m mixers.bench.alibi` once failed with a NameError: its `if __name__ ==
    # "__main__": main()` stood above a function that main() calls. The guard comes last.
    import ast

    late = []
    package = Path(mixers.__file__).parent
    for path in sorted(package.rglob("*.py")):
        body = ast.parse(path.read_text(encoding="utf-8")).body
        for i, node in enumerate(body):
            if isinstance(node, ast.If) and "__name__" in ast.unparse(
                node.test
            ):
                if i != len(body) - 1:
                    late.append(str(path.relative_to(package)))
    assert not late, late
