"""Tests of mixers.model: the config, the pre-norm Block, the registry and the LanguageModel.

References (the pre-norm residual formula, cross-entropy, greedy decoding) are written here from
torch.nn.functional, independently of the module. Models are tiny (d_model 32, 2 layers, seq 16).
"""

import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mixers.alibi import AlibiMultiHeadAttention
from mixers.attention import KVCache, MultiHeadAttention
from mixers.feed_forward import feed_forward_variant
from mixers.gmlp import GatedMLP, gmlp_param_count
from mixers.model import (
    CHANNEL_MIXERS,
    TOKEN_MIXERS,
    Block,
    LanguageModel,
    ModelConfig,
    TokenMixer,
    register_channel_mixer,
    register_token_mixer,
)
from mixers.positions import POSITION_SCHEMES, RotaryMultiHeadAttention

VOCAB = 65
SEQ = 16
TINY = dict(
    vocab_size=VOCAB,
    block_size=SEQ,
    d_model=32,
    n_layers=2,
    n_heads=4,
    dropout=0.0,
)


def tiny_model(seed: int = 0, **overrides) -> LanguageModel:
    torch.manual_seed(seed)
    return LanguageModel(ModelConfig(**{**TINY, **overrides})).eval()


def random_ids(batch: int = 2, seq: int = SEQ, seed: int = 1) -> torch.Tensor:
    return torch.randint(
        VOCAB, (batch, seq), generator=torch.Generator().manual_seed(seed)
    )


# ---------------------------------------------------------------------------------------------
# ModelConfig.


def test_model_config_defaults_and_to_dict():
    config = ModelConfig(vocab_size=65)
    d = config.to_dict()
    assert (
        d["vocab_size"] == 65
        and d["token_mixer"] == "attention"
        and d["positions"] == "learned"
    )
    assert (
        d["channel_mixer"] == "gelu"
        and d["attention_scale"] is None
        and d["d_ff"] is None
    )
    assert ModelConfig(**d) == config


@pytest.mark.parametrize(
    "overrides, match",
    [
        (
            dict(d_model=30, n_heads=4),
            r"d_model \(30\) must be divisible by n_heads \(4\)",
        ),
        (
            dict(positions="rotary"),
            r"positions must be one of \('none', 'learned', 'sinusoidal', 'sinusoidal_scaled'\)",
        ),
        (dict(dropout=1.0), r"dropout must be a probability in \[0, 1\)"),
        (dict(dropout=-0.1), "dropout"),
        (dict(vocab_size=0), "vocab_size must be a positive int"),
        (dict(block_size=-1), "block_size"),
        (dict(d_model=0), "d_model"),
        (dict(n_layers=0), "n_layers"),
        (dict(n_heads=0), "n_heads"),
        (dict(d_ff=0), "d_ff"),
        (dict(attention_scale=0.0), "scale"),
        (dict(attention_scale=float("inf")), "scale"),
    ],
)
def test_model_config_rejects_bad_values(overrides, match):
    with pytest.raises(ValueError, match=match):
        ModelConfig(**{**TINY, **overrides})


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(d_model=32.0), "d_model"),
        (dict(n_layers=True), "n_layers"),
        (dict(dropout="0.1"), "dropout"),
    ],
)
def test_model_config_rejects_wrong_types(overrides, match):
    with pytest.raises(TypeError, match=match):
        ModelConfig(**{**TINY, **overrides})


def test_unknown_token_mixer_lists_registered_ones():
    with pytest.raises(ValueError, match="unknown token_mixer 'nope'") as info:
        ModelConfig(
            **TINY, token_mixer="nope"
        )  # at construction, before any model is built
    assert "attention" in str(info.value)
    assert str(sorted(TOKEN_MIXERS)) in str(info.value)


def test_unknown_channel_mixer_lists_registered_ones():
    with pytest.raises(
        ValueError, match="unknown channel_mixer 'swishglu'"
    ) as info:
        ModelConfig(
            **TINY, channel_mixer="swishglu"
        )  # at construction, before any model is built
    message = str(info.value)
    for name in (
        "relu",
        "gelu",
        "swish",
        "glu",
        "bilinear",
        "reglu",
        "geglu",
        "swiglu",
        "none",
    ):
        assert repr(name) in message


def test_registry_holds_the_feed_forward_variants():
    assert {
        "relu",
        "gelu",
        "swish",
        "glu",
        "bilinear",
        "reglu",
        "geglu",
        "swiglu",
        "none",
    } <= set(CHANNEL_MIXERS)
    assert CHANNEL_MIXERS["none"] is None
    assert {"attention", "alibi", "rotary", "gmlp", "amlp"} <= set(
        TOKEN_MIXERS
    )
    assert all(
        isinstance(entry, TokenMixer) and callable(entry.build)
        for entry in TOKEN_MIXERS.values()
    )
    flags = {
        name: (
            TOKEN_MIXERS[name].positions_inside,
            TOKEN_MIXERS[name].mixes_channels,
        )
        for name in ("attention", "alibi", "rotary", "gmlp", "amlp")
    }
    assert flags == {
        "attention": (False, False),
        "alibi": (True, False),
        "rotary": (True, False),
        "gmlp": (True, True),
        "amlp": (True, True),
    }


# ---------------------------------------------------------------------------------------------
# What ModelConfig derives from the token mixer, and what it refuses.

INSIDE_POSITIONS = [
    "alibi",
    "rotary",
    "gmlp",
    "amlp",
]  # encode positions themselves
MIXES_CHANNELS = ["gmlp", "amlp"]  # their block replaces both sub-layers


@pytest.mark.parametrize("token_mixer", INSIDE_POSITIONS)
def test_positions_default_to_none_where_the_mixer_encodes_them(token_mixer):
    assert (
        ModelConfig(vocab_size=65, token_mixer=token_mixer).positions == "none"
    )
    assert (
        ModelConfig(
            vocab_size=65, token_mixer=token_mixer, positions="none"
        ).positions
        == "none"
    )


def test_positions_default_to_learned_for_attention():
    assert (
        ModelConfig(vocab_size=65, token_mixer="attention").positions
        == "learned"
    )
    assert (
        ModelConfig(
            vocab_size=65, token_mixer="attention", positions="sinusoidal"
        ).positions
        == "sinusoidal"
    )


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
@pytest.mark.parametrize("token_mixer", INSIDE_POSITIONS)
def test_positions_twice_are_refused(token_mixer, positions):
    with pytest.raises(ValueError, match="positions='none'"):
        ModelConfig(
            vocab_size=65, token_mixer=token_mixer, positions=positions
        )


@pytest.mark.parametrize("token_mixer", MIXES_CHANNELS)
def test_channel_mixer_defaults_to_none_for_gmlp(token_mixer):
    assert (
        ModelConfig(vocab_size=65, token_mixer=token_mixer).channel_mixer
        == "none"
    )
    for other in ("attention", "alibi", "rotary"):
        assert (
            ModelConfig(vocab_size=65, token_mixer=other).channel_mixer
            == "gelu"
        )


@pytest.mark.parametrize("channel_mixer", ["gelu", "swiglu"])
@pytest.mark.parametrize("token_mixer", MIXES_CHANNELS)
def test_feed_forward_after_gmlp_is_refused(token_mixer, channel_mixer):
    with pytest.raises(ValueError, match="channel_mixer='none'"):
        ModelConfig(
            vocab_size=65, token_mixer=token_mixer, channel_mixer=channel_mixer
        )


GMLP_TINY = dict(vocab_size=VOCAB, d_model=32, block_size=16, n_layers=1)


@pytest.mark.parametrize("token_mixer", MIXES_CHANNELS)
def test_gmlp_width_comes_from_d_ff(token_mixer):
    model = LanguageModel(
        ModelConfig(**GMLP_TINY, token_mixer=token_mixer, d_ff=64)
    )
    (block,) = model.blocks
    assert (
        isinstance(block.token_mixer, GatedMLP)
        and block.token_mixer.d_ffn == 64
    )
    assert block.token_mixer.sgu.seq_len == 16 and block.token_mixer.sgu.causal
    assert (block.token_mixer.attention is not None) == (token_mixer == "amlp")
    default = LanguageModel(
        ModelConfig(**GMLP_TINY, token_mixer=token_mixer, d_ff=None)
    )
    assert default.blocks[0].token_mixer.d_ffn == 6 * 32


@pytest.mark.parametrize("token_mixer", MIXES_CHANNELS)
def test_gmlp_odd_d_ff_raises(token_mixer):
    with pytest.raises(ValueError, match="d_ff must be even"):
        LanguageModel(
            ModelConfig(**GMLP_TINY, token_mixer=token_mixer, d_ff=63)
        )


@pytest.mark.parametrize("token_mixer", MIXES_CHANNELS)
def test_gmlp_dropout_comes_from_the_config(token_mixer):
    model = LanguageModel(
        ModelConfig(**GMLP_TINY, token_mixer=token_mixer, dropout=0.25)
    )
    assert model.blocks[0].token_mixer.dropout.p == 0.25
    assert (
        LanguageModel(ModelConfig(**GMLP_TINY, token_mixer=token_mixer))
        .blocks[0]
        .token_mixer.dropout.p
        == 0.0
    )


@pytest.mark.parametrize("d_ff", [None, 64])
@pytest.mark.parametrize("token_mixer", MIXES_CHANNELS)
def test_gmlp_blocks_have_the_papers_parameter_count(token_mixer, d_ff):
    """Block(norm, GatedMLP, None) is exactly a GMLPBlock: no second norm, no feed-forward."""
    config = ModelConfig(
        **{**GMLP_TINY, "n_layers": 2}, token_mixer=token_mixer, d_ff=d_ff
    )
    model = LanguageModel(config)
    d_ffn = 6 * 32 if d_ff is None else d_ff
    expected = gmlp_param_count(
        32, d_ffn, 16, tiny_attention=token_mixer == "amlp"
    )
    for block in model.blocks:
        assert block.channel_mixer is None and block.norm_2 is None
        assert sum(p.numel() for p in block.parameters()) == expected
    # the whole model: embeddings, blocks, final norm, head; no position table
    assert (
        model.num_parameters()
        == VOCAB * 32 + 2 * expected + 2 * 32 + 32 * VOCAB
    )


ATTENTION_CLASSES = {
    "attention": MultiHeadAttention,
    "alibi": AlibiMultiHeadAttention,
    "rotary": RotaryMultiHeadAttention,
}


@pytest.mark.parametrize("token_mixer", list(ATTENTION_CLASSES))
def test_attention_scale_reaches_every_attention_layer(token_mixer):
    model = tiny_model(token_mixer=token_mixer, attention_scale=1.0)
    assert len(model.blocks) == TINY["n_layers"]
    for block in model.blocks:
        assert type(block.token_mixer) is ATTENTION_CLASSES[token_mixer]
        assert block.token_mixer.scale == 1.0 and block.token_mixer.causal
    default = tiny_model(token_mixer=token_mixer)
    assert all(
        block.token_mixer.scale is None for block in default.blocks
    )  # None = 1/sqrt(d_head)
    x = random_ids(2, SEQ)
    assert not torch.allclose(
        model(x)[0], default(x)[0], atol=1e-4
    )  # same seed, same weights


# ---------------------------------------------------------------------------------------------
# The language model: shapes, loss, initial loss.


def test_logits_shape_and_no_loss_without_targets():
    model = tiny_model()
    logits, loss = model(random_ids(3, 11))
    assert logits.shape == (3, 11, VOCAB)
    assert loss is None


def test_loss_equals_cross_entropy_by_hand():
    model = tiny_model()
    x, y = random_ids(3, SEQ, seed=2), random_ids(3, SEQ, seed=3)
    logits, loss = model(x, y)
    assert loss.shape == ()
    reference = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
    # and by hand: -log softmax at the target, averaged over every position of every sequence
    log_probs = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    by_hand = -log_probs.gather(-1, y[..., None]).mean()
    torch.testing.assert_close(loss, reference, atol=1e-6, rtol=0)
    torch.testing.assert_close(loss, by_hand, atol=1e-5, rtol=0)


def test_initial_loss_is_close_to_uniform():
    model = tiny_model()
    _, loss = model(random_ids(8, SEQ, seed=4), random_ids(8, SEQ, seed=5))
    assert abs(loss.item() - math.log(VOCAB)) < 0.3


def test_forward_rejects_bad_inputs():
    model = tiny_model()
    with pytest.raises(TypeError, match="idx must be an int64 tensor"):
        model(torch.zeros(2, 4))
    with pytest.raises(TypeError, match="idx must be an int64 tensor"):
        model(torch.zeros(2, 4, dtype=torch.int32))
    with pytest.raises(TypeError, match="idx must be an int64 tensor"):
        model([[1, 2, 3]])
    with pytest.raises(
        ValueError, match=r"idx must have shape \[batch, seq\]"
    ):
        model(torch.zeros(8, dtype=torch.long))
    with pytest.raises(
        ValueError,
        match=r"idx must have shape \[batch, seq\] with batch >= 1 and seq"
        r" >= 1, got \(2, 0\) \(an empty sequence\)",
    ):
        model(torch.zeros(2, 0, dtype=torch.long))
    with pytest.raises(ValueError, match="targets must have the shape of idx"):
        model(random_ids(2, 8), random_ids(2, 7))


# ---------------------------------------------------------------------------------------------
# Causality: for every position scheme and every registered channel mixer.

CAUSAL_CASES = [
    (p, c) for p in POSITION_SCHEMES for c in sorted(CHANNEL_MIXERS)
]


@pytest.mark.parametrize("positions, channel_mixer", CAUSAL_CASES)
def test_future_tokens_do_not_change_past_logits(positions, channel_mixer):
    model = tiny_model(positions=positions, channel_mixer=channel_mixer)
    x = random_ids(2, SEQ)
    logits, _ = model(x)
    for t in (0, 6, SEQ - 2):
        changed = x.clone()
        changed[:, t + 1 :] = (
            x[:, t + 1 :] + torch.randint(1, VOCAB, x[:, t + 1 :].shape)
        ) % VOCAB
        assert (
            not torch.equal(changed[:, t + 1 :], x[:, t + 1 :])
            and (changed[:, t + 1 :] != x[:, t + 1 :]).all()
        )
        new_logits, _ = model(changed)
        torch.testing.assert_close(
            new_logits[:, : t + 1], logits[:, : t + 1], atol=1e-6, rtol=0
        )
        # every later position sees its own (changed) token, so its logits must move
        later = (
            (new_logits[:, t + 1 :] - logits[:, t + 1 :]).abs().amax(dim=-1)
        )
        assert (later > 1e-4).all()


@pytest.mark.parametrize("positions, channel_mixer", CAUSAL_CASES)
def test_logits_have_zero_gradient_wrt_future_embeddings(
    positions, channel_mixer
):
    model = tiny_model(positions=positions, channel_mixer=channel_mixer)
    captured = {}

    def keep_embeddings(module, inputs, output):
        captured["emb"] = output

    handle = model.token_embedding.register_forward_hook(keep_embeddings)
    try:
        logits, _ = model(random_ids(2, SEQ))
    finally:
        handle.remove()
    emb = captured["emb"]
    assert emb.shape == (2, SEQ, 32) and emb.requires_grad
    for t in range(SEQ):
        (grad,) = torch.autograd.grad(
            logits[:, t].sum(), emb, retain_graph=True
        )
        assert torch.count_nonzero(grad[:, t + 1 :]) == 0, (
            f"logits at {t} depend on later positions"
        )
        # the position itself and (through the token mixer) every earlier one do matter
        assert (grad[:, : t + 1].abs().sum(dim=-1) > 0).all()


TOKEN_MIXER_NAMES = ["attention", "alibi", "rotary", "gmlp", "amlp"]


@pytest.mark.parametrize("token_mixer", TOKEN_MIXER_NAMES)
def test_every_token_mixer_is_causal(token_mixer):
    """Autograd: logits at t have zero gradient w.r.t. the embeddings after t, for each registered mixer."""
    model = tiny_model(token_mixer=token_mixer)
    captured = {}
    handle = model.token_embedding.register_forward_hook(
        lambda m, i, out: captured.update(emb=out)
    )
    try:
        logits, _ = model(random_ids(2, SEQ))
    finally:
        handle.remove()
    emb = captured["emb"]
    for t in range(SEQ):
        (grad,) = torch.autograd.grad(
            logits[:, t].sum(), emb, retain_graph=True
        )
        assert torch.count_nonzero(grad[:, t + 1 :]) == 0, (
            f"{token_mixer}: logits at {t} depend on later positions"
        )
        assert (grad[:, : t + 1].abs().sum(dim=-1) > 0).all()


def test_learned_positions_reject_sequences_longer_than_block_size():
    model = tiny_model(positions="learned")
    assert model(random_ids(1, SEQ))[0].shape == (1, SEQ, VOCAB)
    with pytest.raises(
        ValueError,
        match=rf"learned positions have {SEQ} rows; a sequence of {SEQ + 1} tokens",
    ):
        model(random_ids(1, SEQ + 1))


@pytest.mark.parametrize("positions", ["none", "sinusoidal"])
def test_other_positions_accept_longer_sequences(positions):
    model = tiny_model(positions=positions)
    long = random_ids(2, 3 * SEQ)
    logits, _ = model(long)
    assert logits.shape == (2, 3 * SEQ, VOCAB)
    # causal and absolute: the first SEQ positions of a long sequence are those of its prefix
    prefix_logits, _ = model(long[:, :SEQ])
    torch.testing.assert_close(
        logits[:, :SEQ], prefix_logits, atol=1e-5, rtol=0
    )


def test_position_schemes_differ():
    """The three schemes really change the model (same weights otherwise, same input)."""
    x = random_ids(1, SEQ)
    outs = {p: tiny_model(seed=0, positions=p)(x)[0] for p in POSITION_SCHEMES}
    assert not torch.allclose(outs["none"], outs["sinusoidal"], atol=1e-4)
    # "none" is permutation-blind at position 0 but sinusoidal is not: a repeated token in a
    # none-model gets identical logits at both positions when the prefix is all that token
    rep = torch.full((1, 4), 7)
    none_logits = tiny_model(positions="none")(rep)[0]
    torch.testing.assert_close(
        none_logits[0, 0], none_logits[0, 3], atol=1e-5, rtol=0
    )
    sin_logits = tiny_model(positions="sinusoidal")(rep)[0]
    assert not torch.allclose(sin_logits[0, 0], sin_logits[0, 3], atol=1e-4)


# ---------------------------------------------------------------------------------------------
# Block: the pre-norm residual formula.


def _randomise_norm(norm: nn.LayerNorm) -> None:
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.normal_(0.0, 0.3)


def test_block_equals_pre_norm_residual_formula():
    torch.manual_seed(0)
    d = 32
    token_mixer = MultiHeadAttention(d, 4, causal=True)
    channel_mixer = feed_forward_variant("gelu", d)
    block = Block(d, token_mixer, channel_mixer).eval()
    _randomise_norm(block.norm_1)
    _randomise_norm(block.norm_2)
    x = torch.randn(2, SEQ, d)
    n1, n2 = block.norm_1, block.norm_2
    h = x + token_mixer(F.layer_norm(x, (d,), n1.weight, n1.bias, n1.eps))
    expected = h + channel_mixer(
        F.layer_norm(h, (d,), n2.weight, n2.bias, n2.eps)
    )
    torch.testing.assert_close(block(x), expected, atol=1e-6, rtol=0)
    # and it is not the post-norm block
    post = F.layer_norm(x + token_mixer(x), (d,), n1.weight, n1.bias, n1.eps)
    post = F.layer_norm(
        post + channel_mixer(post), (d,), n2.weight, n2.bias, n2.eps
    )
    assert not torch.allclose(block(x), post, atol=1e-3)


def test_block_without_channel_mixer_skips_second_sublayer():
    torch.manual_seed(0)
    d = 32
    token_mixer = MultiHeadAttention(d, 4, causal=True)
    block = Block(d, token_mixer, None).eval()
    _randomise_norm(block.norm_1)
    assert block.norm_2 is None and block.channel_mixer is None
    x = torch.randn(2, SEQ, d)
    n1 = block.norm_1
    expected = x + token_mixer(
        F.layer_norm(x, (d,), n1.weight, n1.bias, n1.eps)
    )
    torch.testing.assert_close(block(x), expected, atol=1e-6, rtol=0)
    n_params = sum(p.numel() for p in block.parameters())
    assert n_params == 2 * d + sum(p.numel() for p in token_mixer.parameters())


def test_model_with_channel_mixer_none_has_no_second_norms():
    model = tiny_model(channel_mixer="none")
    assert all(
        b.channel_mixer is None and b.norm_2 is None for b in model.blocks
    )
    with_ffn = tiny_model(channel_mixer="gelu")
    assert with_ffn.num_parameters() > model.num_parameters()


# ---------------------------------------------------------------------------------------------
# Registering a new mixer.


class CumulativeMean(nn.Module):
    """A causal token mixer written for this test: a linear map of the running mean."""

    def __init__(self, d_model: int):
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        counts = torch.arange(1, x.shape[1] + 1, dtype=x.dtype)[:, None]
        return self.proj(x.cumsum(dim=1) / counts)


@pytest.fixture
def registered_names():
    """Names a test registers; removed from both registries afterwards."""
    names = []
    yield names
    for name in names:
        TOKEN_MIXERS.pop(name, None)
        CHANNEL_MIXERS.pop(name, None)


def test_register_token_mixer_makes_it_buildable(registered_names):
    name = "test_cumulative_mean"
    registered_names.append(name)
    seen = []

    def factory(config):
        seen.append(config)
        return CumulativeMean(config.d_model)

    assert register_token_mixer(name)(factory) is factory
    assert TOKEN_MIXERS[name] == TokenMixer(
        factory, positions_inside=False, mixes_channels=False
    )
    assert TOKEN_MIXERS[name].build is factory
    model = tiny_model(token_mixer=name, channel_mixer="swiglu")
    assert (
        len(seen) == TINY["n_layers"]
        and seen[0].d_model == 32
        and seen[0].token_mixer == name
    )
    assert all(isinstance(b.token_mixer, CumulativeMean) for b in model.blocks)
    assert (
        len({id(b.token_mixer) for b in model.blocks}) == TINY["n_layers"]
    )  # one per layer
    x = random_ids(2, SEQ)
    logits, _ = model(x)
    assert logits.shape == (2, SEQ, VOCAB)
    changed = x.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % VOCAB
    torch.testing.assert_close(
        model(changed)[0][:, :8], logits[:, :8], atol=1e-6, rtol=0
    )
    with pytest.raises(ValueError, match=re.escape(name)):
        ModelConfig(**TINY, token_mixer="still_unknown")


def test_register_token_mixer_flags_drive_the_defaults(registered_names):
    name = "test_cumulative_mean_with_positions"
    registered_names.append(name)
    register_token_mixer(name, positions_inside=True, mixes_channels=True)(
        lambda c: CumulativeMean(c.d_model)
    )
    config = ModelConfig(**TINY, token_mixer=name)
    assert config.positions == "none" and config.channel_mixer == "none"
    model = LanguageModel(config)
    assert model.positions(SEQ) is None and all(
        b.channel_mixer is None for b in model.blocks
    )
    with pytest.raises(ValueError, match="positions='none'"):
        ModelConfig(**TINY, token_mixer=name, positions="sinusoidal")


def test_registered_mixer_is_gone_after_cleanup():
    assert "test_cumulative_mean" not in TOKEN_MIXERS
    with pytest.raises(
        ValueError, match="unknown token_mixer 'test_cumulative_mean'"
    ):
        ModelConfig(**TINY, token_mixer="test_cumulative_mean")


def test_register_channel_mixer_makes_it_buildable(registered_names):
    name = "test_linear_channel"
    registered_names.append(name)
    register_channel_mixer(name)(
        lambda config: nn.Linear(config.d_model, config.d_model)
    )
    model = tiny_model(channel_mixer=name)
    assert all(isinstance(b.channel_mixer, nn.Linear) for b in model.blocks)
    assert model(random_ids(1, SEQ))[0].shape == (1, SEQ, VOCAB)


# ---------------------------------------------------------------------------------------------
# Generation.


def test_generate_extends_by_max_new_tokens_and_keeps_prompt():
    model = tiny_model()
    prompt = random_ids(3, 5)
    out = model.generate(prompt, 7, generator=torch.Generator().manual_seed(0))
    assert out.shape == (3, 12) and out.dtype == torch.int64
    assert torch.equal(out[:, :5], prompt)
    assert int(out.min()) >= 0 and int(out.max()) < VOCAB
    assert torch.equal(model.generate(prompt, 0), prompt)


def test_generate_top_k_1_is_greedy_argmax_chain():
    model = tiny_model(
        block_size=8
    )  # learned positions: the context must be cropped to 8
    prompt = random_ids(2, 5)
    out = model.generate(
        prompt,
        12,
        temperature=0.7,
        top_k=1,
        generator=torch.Generator().manual_seed(0),
    )
    ids = prompt.clone()
    with torch.no_grad():
        for _ in range(12):
            logits, _ = model(ids[:, -8:])
            ids = torch.cat(
                [ids, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1
            )
    assert torch.equal(out, ids)


def test_generate_top_k_samples_only_from_top_k():
    model = tiny_model()
    prompt = random_ids(1, 6).expand(500, 6).contiguous()
    out = model.generate(
        prompt,
        1,
        temperature=2.0,
        top_k=3,
        generator=torch.Generator().manual_seed(0),
    )
    with torch.no_grad():
        top3 = set(model(prompt[:1])[0][0, -1].topk(3).indices.tolist())
    drawn = set(out[:, -1].tolist())
    assert drawn <= top3
    assert (
        len(drawn) == 3
    )  # with temperature 2 and 500 draws, all three show up


def test_generate_seeded_is_reproducible():
    model = tiny_model()
    prompt = random_ids(2, 4)
    a = model.generate(prompt, 20, generator=torch.Generator().manual_seed(5))
    b = model.generate(prompt, 20, generator=torch.Generator().manual_seed(5))
    c = model.generate(prompt, 20, generator=torch.Generator().manual_seed(6))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


@pytest.mark.parametrize(
    "temperature", [0.0, -1.0, float("nan"), float("inf")]
)
def test_generate_rejects_non_positive_temperature(temperature):
    with pytest.raises(
        ValueError, match="temperature must be a positive finite float"
    ):
        tiny_model().generate(random_ids(1, 3), 2, temperature=temperature)


@pytest.mark.parametrize("top_k", [0, -2, VOCAB + 1])
def test_generate_rejects_bad_top_k(top_k):
    with pytest.raises(
        ValueError,
        match=rf"top_k must be an int in \[1, {VOCAB}\], got {top_k}",
    ):
        tiny_model().generate(random_ids(1, 3), 2, top_k=top_k)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (
            dict(max_new_tokens=-1),
            ValueError,
            "max_new_tokens must be a non-negative int, got -1",
        ),
        (dict(max_new_tokens=2.0), TypeError, "max_new_tokens"),
        (dict(max_new_tokens=True), TypeError, "max_new_tokens"),
        (dict(max_new_tokens=2, temperature="1"), TypeError, "temperature"),
        (dict(max_new_tokens=2, top_k=3.0), TypeError, "top_k"),
        (dict(max_new_tokens=2, top_k=True), TypeError, "top_k"),
    ],
)
def test_generate_rejects_bad_numbers_naming_them(kwargs, error, match):
    """max_new_tokens=-1 returned the prompt as if all were well."""
    with pytest.raises(error, match=match):
        tiny_model().generate(random_ids(1, 3), **kwargs)


def test_generate_checks_the_prompt_even_when_adding_nothing():
    with pytest.raises(
        ValueError, match=rf"idx holds token ids in \[1, {VOCAB}\]"
    ):
        tiny_model().generate(torch.tensor([[1, VOCAB]]), 0)


# ---------------------------------------------------------------------------------------------
# Token ids outside the vocabulary: an IndexError deep inside torch before (on a GPU, a device assert).


@pytest.mark.parametrize("bad", [VOCAB, VOCAB + 7, -1])
def test_forward_refuses_ids_outside_the_vocabulary_naming_idx_and_vocab_size(
    bad,
):
    model = tiny_model()
    ids = random_ids(2, 8)
    ids[1, 3] = bad
    with pytest.raises(
        ValueError,
        match=rf"idx holds token ids in \[-?\d+, \d+\], outside the vocabulary "
        rf"\[0, {VOCAB}\) \(vocab_size={VOCAB}\)",
    ):
        model(ids)
    with pytest.raises(
        ValueError, match=rf"targets holds token ids .* \(vocab_size={VOCAB}\)"
    ):
        model(random_ids(2, 8), ids)


def test_forward_refuses_float_targets():
    with pytest.raises(TypeError, match="targets must be an int64 tensor"):
        tiny_model()(random_ids(2, 8), random_ids(2, 8).float())


def test_a_model_smaller_than_the_data_s_vocabulary_is_refused_at_the_first_batch():
    model = tiny_model(vocab_size=10)
    with pytest.raises(ValueError, match=r"vocab_size=10"):
        model(random_ids(2, 8))


def test_every_valid_id_is_accepted():
    model = tiny_model()
    ids = torch.tensor([[0, VOCAB - 1, 5]])
    logits, loss = model(ids, ids)
    assert logits.shape == (1, 3, VOCAB) and torch.isfinite(loss)


# ---------------------------------------------------------------------------------------------
# Options a mixer does not read are refused, naming them, rather than silently ignored.


@pytest.mark.parametrize("token_mixer", ["gmlp", "amlp"])
def test_attention_scale_with_a_mixer_that_has_no_attention_scores_is_refused(
    token_mixer,
):
    with pytest.raises(
        ValueError,
        match=rf"token_mixer='{token_mixer}' does not read attention_scale=1.0 "
        r"\(only token_mixer in \['alibi', 'attention', 'rotary'\] do\)",
    ):
        ModelConfig(**TINY, token_mixer=token_mixer, attention_scale=1.0)
    assert ModelConfig(**TINY, token_mixer=token_mixer).attention_scale is None


def test_attention_scale_with_a_registered_mixer_that_does_not_declare_it_is_refused(
    registered_names,
):
    registered_names.extend(["test_mean_plain", "test_mean_scaled"])
    register_token_mixer("test_mean_plain")(
        lambda c: CumulativeMean(c.d_model)
    )
    register_token_mixer("test_mean_scaled", options=("attention_scale",))(
        lambda c: CumulativeMean(c.d_model)
    )
    with pytest.raises(ValueError, match="does not read attention_scale"):
        ModelConfig(**TINY, token_mixer="test_mean_plain", attention_scale=0.5)
    assert (
        ModelConfig(
            **TINY, token_mixer="test_mean_scaled", attention_scale=0.5
        ).attention_scale
        == 0.5
    )


def test_d_ff_that_no_mixer_reads_is_refused():
    with pytest.raises(ValueError, match=r"d_ff=64 is read by no mixer"):
        ModelConfig(**TINY, channel_mixer="none", d_ff=64)
    ModelConfig(**TINY, channel_mixer="swiglu", d_ff=64)
    ModelConfig(**TINY, token_mixer="gmlp", d_ff=64)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda: register_token_mixer("x", positions_inside="no"),
            TypeError,
            "positions_inside must be a bool",
        ),
        (
            lambda: register_token_mixer("x", mixes_channels=1),
            TypeError,
            "mixes_channels must be a bool",
        ),
        (
            lambda: register_token_mixer("x", options=("scale",)),
            ValueError,
            "options must be",
        ),
        (
            lambda: register_token_mixer("x", options="attention_scale"),
            ValueError,
            "options must be",
        ),
        (
            lambda: register_token_mixer(""),
            TypeError,
            "name must be a non-empty str",
        ),
        (
            lambda: register_channel_mixer(3),
            TypeError,
            "name must be a non-empty str",
        ),
        (
            lambda: ModelConfig(**TINY, token_mixer=["attention"]),
            ValueError,
            "unknown token_mixer",
        ),
    ],
)
def test_registry_arguments_are_checked(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ---------------------------------------------------------------------------------------------
# Generation through a key/value cache


def _greedy_without_cache(model, idx, steps, window):
    """The plain loop: the whole (cropped) window through the model for every new token."""
    for _ in range(steps):
        logits, _ = model(idx[:, -window:])
        idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return idx


CACHED_MIXERS = [
    ("alibi", {}),
    ("rotary", {}),
    ("attention", {"positions": "none"}),
]


@pytest.mark.parametrize(
    "mixer, extra", CACHED_MIXERS, ids=[m for m, _ in CACHED_MIXERS]
)
def test_generation_with_the_cache_equals_the_full_recomputation_token_for_token(
    mixer, extra
):
    torch.manual_seed(0)
    model = LanguageModel(
        ModelConfig(
            vocab_size=65,
            block_size=32,
            d_model=32,
            n_layers=2,
            n_heads=4,
            token_mixer=mixer,
            **extra,
        )
    ).eval()
    assert model.decodes_with_cache()
    idx = torch.randint(0, 65, (3, 5))
    # inside the training window: 5 + 27 = 32 tokens
    torch.testing.assert_close(
        model.generate(idx, 27, top_k=1),
        _greedy_without_cache(model, idx, 27, 32),
        rtol=0,
        atol=0,
    )
    # past it, with every token as context (ALiBi and rotary read longer inputs): 5 + 75 = 80
    torch.testing.assert_close(
        model.generate(idx, 75, top_k=1),
        _greedy_without_cache(model, idx, 75, 10**6),
        rtol=0,
        atol=0,
    )


@pytest.mark.parametrize(
    "mixer, extra", CACHED_MIXERS, ids=[m for m, _ in CACHED_MIXERS]
)
def test_cached_logits_equal_the_full_pass_at_every_position(mixer, extra):
    torch.manual_seed(1)
    model = LanguageModel(
        ModelConfig(
            vocab_size=65,
            block_size=16,
            d_model=32,
            n_layers=2,
            n_heads=4,
            token_mixer=mixer,
            **extra,
        )
    ).eval()
    idx = torch.randint(0, 65, (2, 40))  # 2.5 training lengths
    full, _ = model(idx)
    caches = [KVCache() for _ in model.blocks]
    with torch.no_grad():
        first = model._next_logits(
            idx[:, :7], caches
        )  # a prompt at once, then token by token
        steps = [first] + [
            model._next_logits(idx[:, t : t + 1], caches) for t in range(7, 40)
        ]
    torch.testing.assert_close(
        torch.stack(steps, 1), full[:, 6:], atol=2e-5, rtol=0
    )
    assert all(
        cache.position == 40 and cache.k.shape[-2] == 40 for cache in caches
    )


@pytest.mark.parametrize("mixer", ["attention", "gmlp"])
def test_models_with_a_window_keep_it_and_say_why(mixer):
    torch.manual_seed(0)
    model = LanguageModel(
        ModelConfig(
            vocab_size=65,
            block_size=16,
            d_model=32,
            n_layers=1,
            n_heads=4,
            token_mixer=mixer,
        )
    ).eval()
    assert (
        not model.decodes_with_cache()
    )  # learned positions / gMLP's W: block_size rows
    assert "block_size" in LanguageModel.decodes_with_cache.__doc__
    idx = torch.randint(0, 65, (2, 3))
    torch.testing.assert_close(
        model.generate(idx, 30, top_k=1),
        _greedy_without_cache(model, idx, 30, 16),
        rtol=0,
        atol=0,
    )
    torch.testing.assert_close(
        model.generate(idx, 30, top_k=1, max_context=8),
        _greedy_without_cache(model, idx, 30, 8),
        rtol=0,
        atol=0,
    )


@pytest.mark.parametrize(
    "cls",
    [MultiHeadAttention, AlibiMultiHeadAttention, RotaryMultiHeadAttention],
)
def test_a_sliding_window_cache_equals_a_banded_causal_mask(cls):
    # max_context=w: each new token reads itself and the w - 1 before it, in every layer.
    torch.manual_seed(0)
    layer, window = cls(16, 4, causal=True).eval(), 5
    x = torch.randn(2, 20, 16)
    i = torch.arange(20)
    band = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - window)
    with torch.no_grad():
        reference = layer(x, mask=band)
        cache = KVCache(max_context=window)
        steps = [layer(x[:, :3], cache=cache)] + [
            layer(x[:, t : t + 1], cache=cache) for t in range(3, 20)
        ]
    torch.testing.assert_close(
        torch.cat(steps, 1), reference, atol=1e-5, rtol=0
    )
    assert cache.k.shape[-2] == window and cache.position == 20


def test_the_cache_refuses_what_it_cannot_do():
    layer = MultiHeadAttention(16, 4, causal=True)
    x = torch.randn(1, 3, 16)
    with pytest.raises(ValueError, match="no key, value, mask or token_mask"):
        layer(x, x, cache=KVCache())
    with pytest.raises(ValueError, match="exceed max_context=2"):
        layer(x, cache=KVCache(max_context=2))
    with pytest.raises(
        TypeError, match="cache must be a mixers.attention.KVCache"
    ):
        layer(x, cache={})
    with pytest.raises(ValueError, match="max_context must be a positive int"):
        KVCache(max_context=0)
    model = LanguageModel(
        ModelConfig(
            vocab_size=65,
            block_size=16,
            d_model=16,
            n_layers=1,
            n_heads=4,
            token_mixer="alibi",
        )
    )
    with pytest.raises(ValueError, match="max_context"):
        model.generate(torch.zeros(1, 2, dtype=torch.long), 3, max_context=-1)
