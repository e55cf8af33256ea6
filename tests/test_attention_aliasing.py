"""A layer's answer never depends on whether two of its arguments are the same tensor.

``m(x, x, y)`` must read its value ``y``: the fused q/k/v product is for one input only. Every
pattern of (query, key, value) aliasing -- the same object, a view, a clone, None -- is checked,
for the three attention layers, on the eager and the fused (SDPA) paths, with padding
(``token_mask``), causality and ``need_weights=True``, against two references:

- the same call on copies (every argument cloned on its own, so that nothing is shared), whose
  gradients, summed over the copies of one tensor, are that tensor's gradient;
- torch.nn.MultiheadAttention holding the same weights (MultiHeadAttention), or the layer's own
  eager path on copies (ALiBi and rotary, which torch has no layer for).

Everything runs in float64.
"""

import pytest
import torch
from test_attention import randomize, torch_mha_like

from mixers.alibi import AlibiMultiHeadAttention
from mixers.attention import MultiHeadAttention
from mixers.positions import RotaryMultiHeadAttention

DT = torch.float64
ATOL = 1e-10
BATCH, SEQ, D_MODEL, HEADS = 2, 6, 16, 4
CLASSES = [
    MultiHeadAttention,
    AlibiMultiHeadAttention,
    RotaryMultiHeadAttention,
]

# (query, key, value) as names of three distinct tensors x, y, z; "x:view" is a view of x with
# the same shape and data, "x:clone" a copy of it, None the layer's default (key: the query,
# value: the key).
PATTERNS = [
    ("x", "x", "x"),
    ("x", None, None),
    ("x", "x", None),
    ("x", "x", "y"),
    ("x", "y", "x"),
    ("y", "x", "x"),
    ("x", "y", "y"),
    ("x", "y", "z"),
    ("x", None, "y"),
    ("x", "y", None),
    ("x", "x:view", "x"),
    ("x", "x", "x:view"),
    ("x", "x:view", "x:view"),
    ("x", "x:clone", "x"),
    ("x", "x:clone", "x:clone"),
    ("x:view", "x", "x"),
]


def make_layer(cls, backend, causal):
    torch.manual_seed(0)
    layer = cls(D_MODEL, HEADS, causal=causal, backend=backend).to(DT)
    return randomize(layer).eval()


def make_inputs():
    torch.manual_seed(1)
    return {
        name: torch.randn(BATCH, SEQ, D_MODEL, dtype=DT, requires_grad=True)
        for name in "xyz"
    }


def arguments(pattern, leaves):
    """The call's (query, key, value) for a pattern, from the leaf tensors."""

    def one(name):
        if name is None:
            return None
        base, _, how = name.partition(":")
        tensor = leaves[base]
        if how == "view":
            return tensor.view(
                BATCH, SEQ, D_MODEL
            )  # another object, the same data
        if how == "clone":
            return tensor.clone()
        return tensor

    return tuple(one(name) for name in pattern)


def resolved(pattern):
    """The pattern with the defaults filled in: key None is the query, value None is the key."""
    query, key, value = pattern
    key = query if key is None else key
    value = key if value is None else value
    return query, key, value


def on_copies(call):
    """Every argument as a separate leaf of its own: nothing shared."""
    return tuple(t.detach().clone().requires_grad_() for t in call)


def token_mask():
    keep = torch.ones(BATCH, SEQ, dtype=torch.bool)
    keep[0, 4:] = False
    keep[1, 1] = False
    return keep


def real_query_rows(pattern, keep):
    """The query rows whose answer the call defines whatever is shared: all of them, except that
    when the queries are the keys themselves (self-attention) the padded ones are padding too,
    zeroed with the keys, whereas a copy of the keys is another sequence whose rows are all
    real."""
    query, key, _ = pattern
    if keep is None or not (key is None or key == query):
        return torch.ones(BATCH, SEQ, dtype=torch.bool)
    return keep


def call(layer, qkv, keep, need_weights):
    query, key, value = qkv
    out = layer(query, key, value, token_mask=keep, need_weights=need_weights)
    return out if need_weights else (out, None)


def gradients(out, rows, tensors):
    """d(sum of out over ``rows``, weighted)/d each tensor (zeros for one that is not read)."""
    weight = torch.linspace(-1, 1, out.numel(), dtype=DT).view_as(out)
    loss = (out * weight * rows[..., None]).sum()
    grads = torch.autograd.grad(loss, tensors, allow_unused=True)
    return [
        torch.zeros_like(t) if g is None else g for t, g in zip(tensors, grads)
    ]


# need_weights=True runs the eager path whatever the backend.
PATHS = [("eager", False), ("sdpa", False), ("sdpa", True)]


@pytest.mark.parametrize("padded", [False, True], ids=["", "token_mask"])
@pytest.mark.parametrize(
    "causal", [False, True], ids=["bidirectional", "causal"]
)
@pytest.mark.parametrize(
    "backend, need_weights", PATHS, ids=["eager", "sdpa", "need_weights"]
)
@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_aliased_arguments_give_the_answer_of_copies(
    cls, backend, causal, padded, need_weights
):
    layer = make_layer(cls, backend, causal)
    eager = make_layer(cls, "eager", causal)
    keep = token_mask() if padded else None
    for pattern in PATTERNS:
        leaves = make_inputs()
        given = arguments(pattern, leaves)
        out, weights = call(layer, given, keep, need_weights)
        # The same call with every argument a separate copy, on the eager path.
        copies = on_copies(arguments(resolved(pattern), leaves))
        expected, expected_weights = call(eager, copies, keep, need_weights)
        rows = real_query_rows(pattern, keep)
        torch.testing.assert_close(
            out[rows], expected[rows], atol=ATOL, rtol=0, msg=f"{pattern}"
        )
        if need_weights:
            torch.testing.assert_close(
                weights.transpose(1, 2)[rows],
                expected_weights.transpose(1, 2)[rows],
                atol=ATOL,
                rtol=0,
                msg=f"{pattern}",
            )
        # Gradients: a leaf read in several roles gets the sum of its copies' gradients.
        got = gradients(out, rows, list(leaves.values()))
        per_copy = gradients(expected, rows, list(copies))
        names = [name.partition(":")[0] for name in resolved(pattern)]
        for leaf_name, grad in zip(leaves, got):
            want = sum(
                (g for n, g in zip(names, per_copy) if n == leaf_name),
                torch.zeros_like(grad),
            )
            torch.testing.assert_close(
                grad, want, atol=ATOL, rtol=0, msg=f"{pattern} d/d{leaf_name}"
            )


@pytest.mark.parametrize("padded", [False, True], ids=["", "token_mask"])
@pytest.mark.parametrize(
    "causal", [False, True], ids=["bidirectional", "causal"]
)
@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_aliased_arguments_give_torchs_answer(backend, causal, padded):
    layer = make_layer(MultiHeadAttention, backend, causal)
    reference = torch_mha_like(layer)
    keep = token_mask() if padded else None
    future = torch.ones(SEQ, SEQ, dtype=torch.bool).triu(1) if causal else None
    for pattern in PATTERNS:
        given = arguments(pattern, make_inputs())
        query, key, value = arguments(resolved(pattern), make_inputs())
        expected, expected_weights = reference(
            query,
            key,
            value,
            key_padding_mask=None if keep is None else ~keep,
            attn_mask=future,
            average_attn_weights=False,
        )
        out, weights = call(layer, given, keep, need_weights=True)
        fused_out, _ = call(layer, given, keep, need_weights=False)
        rows = real_query_rows(pattern, keep)
        for got in (out, fused_out):
            torch.testing.assert_close(
                got[rows], expected[rows], atol=ATOL, rtol=0, msg=f"{pattern}"
            )
        torch.testing.assert_close(
            weights.transpose(1, 2)[rows],
            expected_weights.transpose(1, 2)[rows],
            atol=ATOL,
            rtol=0,
            msg=f"{pattern}",
        )


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_a_value_other_than_the_query_is_read(cls):
    """The issue's case, as a user meets it: m(x, x, y) differs from m(x) and equals m(x, x.clone(),
    y); m(x, x, x) is m(x), on the one fused product."""
    layer = make_layer(cls, "auto", causal=False)
    x, y = (
        torch.randn(2, 5, D_MODEL, dtype=DT),
        torch.randn(2, 5, D_MODEL, dtype=DT),
    )
    with torch.no_grad():
        assert (layer(x, x, y) - layer(x)).abs().max() > 0.1
        torch.testing.assert_close(
            layer(x, x, y), layer(x, x.clone(), y), atol=ATOL, rtol=0
        )
        torch.testing.assert_close(
            layer(x, None, y), layer(x, x.clone(), y), atol=ATOL, rtol=0
        )
        assert torch.equal(layer(x, x, x), layer(x))


def test_the_fused_product_is_used_for_one_input_only():
    """One in_proj product exactly when query, key and value are one tensor; a key and value that
    are one tensor share one product of their rows."""
    layer = make_layer(MultiHeadAttention, "sdpa", causal=False)
    x, y = (
        torch.randn(2, 5, D_MODEL, dtype=DT),
        torch.randn(2, 5, D_MODEL, dtype=DT),
    )
    calls = []
    handle = layer.in_proj.register_forward_hook(lambda *a: calls.append(1))
    try:
        for args, fused in [
            ((x,), True),
            ((x, x, x), True),
            ((x, x), True),
            ((x, x, y), False),
            ((x, y, x), False),
            ((x, None, y), False),
            ((x, x.view_as(x), x), False),
        ]:
            calls.clear()
            with torch.no_grad():
                layer(*args)
            assert bool(calls) == fused, args
    finally:
        handle.remove()
