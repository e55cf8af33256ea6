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

from mixers.attention import MultiHeadAttention
from mixers.feed_forward import feed_forward_variant
from mixers.model import (
    CHANNEL_MIXERS,
    TOKEN_MIXERS,
    Block,
    LanguageModel,
    ModelConfig,
    register_channel_mixer,
    register_token_mixer,
)
from mixers.positions import POSITION_SCHEMES

VOCAB = 65
SEQ = 16
TINY = dict(vocab_size=VOCAB, block_size=SEQ, d_model=32, n_layers=2, n_heads=4, dropout=0.0)


def tiny_model(seed: int = 0, **overrides) -> LanguageModel:
    torch.manual_seed(seed)
    return LanguageModel(ModelConfig(**{**TINY, **overrides})).eval()


def random_ids(batch: int = 2, seq: int = SEQ, seed: int = 1) -> torch.Tensor:
    return torch.randint(VOCAB, (batch, seq), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------------------------
# ModelConfig.


def test_model_config_defaults_and_to_dict():
    config = ModelConfig(vocab_size=65)
    d = config.to_dict()
    assert d["vocab_size"] == 65 and d["token_mixer"] == "attention" and d["positions"] == "learned"
    assert ModelConfig(**d) == config


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(d_model=30, n_heads=4), r"d_model \(30\) must be divisible by n_heads \(4\)"),
        (dict(positions="rotary"), r"positions must be one of \('none', 'learned', 'sinusoidal'\)"),
        (dict(dropout=1.0), r"dropout must lie in \[0, 1\)"),
        (dict(dropout=-0.1), "dropout"),
        (dict(vocab_size=0), "vocab_size must be a positive int"),
        (dict(block_size=-1), "block_size"),
        (dict(d_model=0), "d_model"),
        (dict(n_layers=0), "n_layers"),
        (dict(n_heads=0), "n_heads"),
        (dict(d_model=32.0), "d_model"),
    ],
)
def test_model_config_rejects_bad_values(overrides, match):
    with pytest.raises(ValueError, match=match):
        ModelConfig(**{**TINY, **overrides})


def test_unknown_token_mixer_lists_registered_ones():
    with pytest.raises(ValueError, match="unknown token_mixer 'nope'") as info:
        LanguageModel(ModelConfig(**TINY, token_mixer="nope"))
    assert "attention" in str(info.value)
    assert str(sorted(TOKEN_MIXERS)) in str(info.value)


def test_unknown_channel_mixer_lists_registered_ones():
    with pytest.raises(ValueError, match="unknown channel_mixer 'swishglu'") as info:
        LanguageModel(ModelConfig(**TINY, channel_mixer="swishglu"))
    message = str(info.value)
    for name in ("relu", "gelu", "swish", "glu", "bilinear", "reglu", "geglu", "swiglu", "none"):
        assert repr(name) in message


def test_registry_holds_the_feed_forward_variants():
    assert {"relu", "gelu", "swish", "glu", "bilinear", "reglu", "geglu", "swiglu", "none"} <= set(CHANNEL_MIXERS)
    assert CHANNEL_MIXERS["none"] is None
    assert "attention" in TOKEN_MIXERS


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
    with pytest.raises(ValueError, match="idx must be int64"):
        model(torch.zeros(2, 4))
    with pytest.raises(ValueError, match="idx must be int64"):
        model(torch.zeros(8, dtype=torch.long))
    with pytest.raises(ValueError, match="targets must have the shape of idx"):
        model(random_ids(2, 8), random_ids(2, 7))


# ---------------------------------------------------------------------------------------------
# Causality: for every position scheme and every registered channel mixer.

CAUSAL_CASES = [(p, c) for p in POSITION_SCHEMES for c in sorted(CHANNEL_MIXERS)]


@pytest.mark.parametrize("positions, channel_mixer", CAUSAL_CASES)
def test_future_tokens_do_not_change_past_logits(positions, channel_mixer):
    model = tiny_model(positions=positions, channel_mixer=channel_mixer)
    x = random_ids(2, SEQ)
    logits, _ = model(x)
    for t in (0, 6, SEQ - 2):
        changed = x.clone()
        changed[:, t + 1:] = (x[:, t + 1:] + torch.randint(1, VOCAB, x[:, t + 1:].shape)) % VOCAB
        assert not torch.equal(changed[:, t + 1:], x[:, t + 1:]) and (changed[:, t + 1:] != x[:, t + 1:]).all()
        new_logits, _ = model(changed)
        torch.testing.assert_close(new_logits[:, : t + 1], logits[:, : t + 1], atol=1e-6, rtol=0)
        # every later position sees its own (changed) token, so its logits must move
        later = (new_logits[:, t + 1:] - logits[:, t + 1:]).abs().amax(dim=-1)
        assert (later > 1e-4).all()


@pytest.mark.parametrize("positions, channel_mixer", CAUSAL_CASES)
def test_logits_have_zero_gradient_wrt_future_embeddings(positions, channel_mixer):
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
        (grad,) = torch.autograd.grad(logits[:, t].sum(), emb, retain_graph=True)
        assert torch.count_nonzero(grad[:, t + 1:]) == 0, f"logits at {t} depend on later positions"
        # the position itself and (through the token mixer) every earlier one do matter
        assert (grad[:, : t + 1].abs().sum(dim=-1) > 0).all()


def test_learned_positions_reject_sequences_longer_than_block_size():
    model = tiny_model(positions="learned")
    assert model(random_ids(1, SEQ))[0].shape == (1, SEQ, VOCAB)
    with pytest.raises(ValueError, match=rf"learned positions have {SEQ} rows; a sequence of {SEQ + 1} tokens"):
        model(random_ids(1, SEQ + 1))


@pytest.mark.parametrize("positions", ["none", "sinusoidal"])
def test_other_positions_accept_longer_sequences(positions):
    model = tiny_model(positions=positions)
    long = random_ids(2, 3 * SEQ)
    logits, _ = model(long)
    assert logits.shape == (2, 3 * SEQ, VOCAB)
    # causal and absolute: the first SEQ positions of a long sequence are those of its prefix
    prefix_logits, _ = model(long[:, :SEQ])
    torch.testing.assert_close(logits[:, :SEQ], prefix_logits, atol=1e-5, rtol=0)


def test_position_schemes_differ():
    """The three schemes really change the model (same weights otherwise, same input)."""
    x = random_ids(1, SEQ)
    outs = {p: tiny_model(seed=0, positions=p)(x)[0] for p in POSITION_SCHEMES}
    assert not torch.allclose(outs["none"], outs["sinusoidal"], atol=1e-4)
    # "none" is permutation-blind at position 0 but sinusoidal is not: a repeated token in a
    # none-model gets identical logits at both positions when the prefix is all that token
    rep = torch.full((1, 4), 7)
    none_logits = tiny_model(positions="none")(rep)[0]
    torch.testing.assert_close(none_logits[0, 0], none_logits[0, 3], atol=1e-5, rtol=0)
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
    expected = h + channel_mixer(F.layer_norm(h, (d,), n2.weight, n2.bias, n2.eps))
    torch.testing.assert_close(block(x), expected, atol=1e-6, rtol=0)
    # and it is not the post-norm block
    post = F.layer_norm(x + token_mixer(x), (d,), n1.weight, n1.bias, n1.eps)
    post = F.layer_norm(post + channel_mixer(post), (d,), n2.weight, n2.bias, n2.eps)
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
    expected = x + token_mixer(F.layer_norm(x, (d,), n1.weight, n1.bias, n1.eps))
    torch.testing.assert_close(block(x), expected, atol=1e-6, rtol=0)
    n_params = sum(p.numel() for p in block.parameters())
    assert n_params == 2 * d + sum(p.numel() for p in token_mixer.parameters())


def test_model_with_channel_mixer_none_has_no_second_norms():
    model = tiny_model(channel_mixer="none")
    assert all(b.channel_mixer is None and b.norm_2 is None for b in model.blocks)
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
    assert TOKEN_MIXERS[name] is factory
    model = tiny_model(token_mixer=name, channel_mixer="swiglu")
    assert len(seen) == TINY["n_layers"] and seen[0].d_model == 32 and seen[0].token_mixer == name
    assert all(isinstance(b.token_mixer, CumulativeMean) for b in model.blocks)
    assert len({id(b.token_mixer) for b in model.blocks}) == TINY["n_layers"]  # one per layer
    x = random_ids(2, SEQ)
    logits, _ = model(x)
    assert logits.shape == (2, SEQ, VOCAB)
    changed = x.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % VOCAB
    torch.testing.assert_close(model(changed)[0][:, :8], logits[:, :8], atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match=re.escape(name)):
        LanguageModel(ModelConfig(**TINY, token_mixer="still_unknown"))


def test_registered_mixer_is_gone_after_cleanup():
    assert "test_cumulative_mean" not in TOKEN_MIXERS
    with pytest.raises(ValueError, match="unknown token_mixer 'test_cumulative_mean'"):
        LanguageModel(ModelConfig(**TINY, token_mixer="test_cumulative_mean"))


def test_register_channel_mixer_makes_it_buildable(registered_names):
    name = "test_linear_channel"
    registered_names.append(name)
    register_channel_mixer(name)(lambda config: nn.Linear(config.d_model, config.d_model))
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
    model = tiny_model(block_size=8)  # learned positions: the context must be cropped to 8
    prompt = random_ids(2, 5)
    out = model.generate(prompt, 12, temperature=0.7, top_k=1, generator=torch.Generator().manual_seed(0))
    ids = prompt.clone()
    with torch.no_grad():
        for _ in range(12):
            logits, _ = model(ids[:, -8:])
            ids = torch.cat([ids, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    assert torch.equal(out, ids)


def test_generate_top_k_samples_only_from_top_k():
    model = tiny_model()
    prompt = random_ids(1, 6).expand(500, 6).contiguous()
    out = model.generate(prompt, 1, temperature=2.0, top_k=3, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        top3 = set(model(prompt[:1])[0][0, -1].topk(3).indices.tolist())
    drawn = set(out[:, -1].tolist())
    assert drawn <= top3
    assert len(drawn) == 3  # with temperature 2 and 500 draws, all three show up


def test_generate_seeded_is_reproducible():
    model = tiny_model()
    prompt = random_ids(2, 4)
    a = model.generate(prompt, 20, generator=torch.Generator().manual_seed(5))
    b = model.generate(prompt, 20, generator=torch.Generator().manual_seed(5))
    c = model.generate(prompt, 20, generator=torch.Generator().manual_seed(6))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


@pytest.mark.parametrize("temperature", [0.0, -1.0])
def test_generate_rejects_non_positive_temperature(temperature):
    with pytest.raises(ValueError, match="temperature must be > 0"):
        tiny_model().generate(random_ids(1, 3), 2, temperature=temperature)


@pytest.mark.parametrize("top_k", [0, -2, VOCAB + 1])
def test_generate_rejects_bad_top_k(top_k):
    with pytest.raises(ValueError, match=rf"top_k must lie in \[1, {VOCAB}\]"):
        tiny_model().generate(random_ids(1, 3), 2, top_k=top_k)
