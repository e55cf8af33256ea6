r"""One decoder block, one language model, and a registry of mixers.

Every block of a sequence model is a *token mixer* (moves information between
positions) followed by a *channel mixer* (transforms each position on its own),
each wrapped in pre-norm and a residual:

.. math::

    x &\leftarrow x + \text{token\_mixer}(\operatorname{LN}_1(x)), \\
    x &\leftarrow x + \text{channel\_mixer}(\operatorname{LN}_2(x)).

Because ``Block`` takes both mixers as arguments, any token mixer trains with
any channel mixer under the same harness: a fair, like-for-like comparison.
Mixers are looked up by name in ``TOKEN_MIXERS`` and ``CHANNEL_MIXERS``; each
entry builds, from a ``ModelConfig``, a module mapping ``[batch, seq,
d_model]`` to ``[batch, seq, d_model]``. Every mixer of the package is
registered here, and every size it needs comes from ``ModelConfig``. A token
mixer declares what it brings besides token mixing, and ``ModelConfig`` pairs
or rejects the rest:

- ``positions_inside`` (ALiBi, rotary, gMLP): it encodes positions itself, so
  the model adds no position embeddings (``positions`` defaults to ``"none"``);
- ``mixes_channels`` (gMLP, aMLP): it mixes channels itself, so the block has
  no channel mixer (``channel_mixer`` defaults to, and must be, ``"none"``);
- ``options``: the optional fields of ``ModelConfig`` it reads (the attention
  mixers read ``attention_scale``). An option set for a mixer that does not
  read it is refused, naming it, rather than silently ignored; so is a ``d_ff``
  that no mixer of the block reads.

The hidden sizes, from :math:`d` = ``d_model`` when ``d_ff`` is None: a
feed-forward's :math:`d_{ff} = 4d`, shrunk to :math:`\tfrac{2}{3} \cdot 4d`
for a gated one (:func:`mixers.feed_forward.matched_hidden_size`), and gMLP's
:math:`d_{\text{ffn}} = 6d`, the ratio of the paper's base models.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import (
    check_bool,
    check_decoding_memory,
    check_decoding_switches,
    check_dropout,
    check_even,
    check_generator,
    check_int_in,
    check_non_negative_int,
    check_positive_float,
    check_positive_int,
    check_prompt,
    check_scale,
    check_token_ids,
)
from .alibi import AlibiMultiHeadAttention
from .attention import (
    KVCache,
    MultiHeadAttention,
    StaticKVCache,
    fused_attention,
)
from .feed_forward import VARIANTS, FeedForward, feed_forward_variant
from .gmlp import GatedMLP
from .positions import (
    POSITION_SCHEMES,
    RotaryMultiHeadAttention,
    build_positions,
    rotate_pairs,
)

__all__ = [
    "ModelConfig",
    "TokenMixer",
    "TOKEN_MIXERS",
    "CHANNEL_MIXERS",
    "register_token_mixer",
    "register_channel_mixer",
    "Block",
    "LanguageModel",
]


#: The lowest sampling temperature ``generate`` takes: below it, :math:`z /
#: \tau` overflows float32 to :math:`\infty` and the softmax of
#: :math:`\infty` is NaN (and so low a :math:`\tau` is ``top_k=1`` anyway).
MIN_TEMPERATURE = 1e-6


@dataclass
class ModelConfig:
    """Everything needed to build a ``LanguageModel``.

    ``positions`` and ``channel_mixer`` left as None are derived from the token
    mixer (see the module docstring); a combination that would add positions
    twice, or a channel mixer to a block that mixes channels itself, is refused
    with the value to write instead.
    """

    vocab_size: int
    # the training length; learned positions and gMLP's W have this many rows
    block_size: int = 128
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int | None = (
        # hidden size: None = 4·d_model for an FFN (2/3 of it if gated),
        # 6·d_model for gMLP
        None
    )
    dropout: float = 0.0
    token_mixer: str = "attention"
    # None: "none" if the token mixer mixes channels, else "gelu"
    channel_mixer: str | None = None
    positions: str | None = (
        # None: "none" if the token mixer encodes positions, else "learned"
        None
    )
    # scores' scale in attention mixers; None = 1/sqrt(d_head)
    attention_scale: float | None = None

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "block_size",
            "d_model",
            "n_layers",
            "n_heads",
        ):
            check_positive_int(name, getattr(self, name))
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads"
                f" ({self.n_heads})"
            )
        if self.d_ff is not None:
            check_positive_int("d_ff", self.d_ff)
        check_dropout(self.dropout)
        check_scale(self.attention_scale)
        mixer = _lookup(TOKEN_MIXERS, "token_mixer", self.token_mixer)
        if self.positions is None:
            self.positions = "none" if mixer.positions_inside else "learned"
        if self.positions not in POSITION_SCHEMES:
            raise ValueError(
                f"positions must be one of {POSITION_SCHEMES}, got"
                f" {self.positions!r}"
            )
        if mixer.positions_inside and self.positions != "none":
            raise ValueError(
                f"token_mixer={self.token_mixer!r} encodes positions itself;"
                f" positions={self.positions!r} would add them a second time:"
                " write positions='none' (or leave positions unset)"
            )
        if self.channel_mixer is None:
            self.channel_mixer = "none" if mixer.mixes_channels else "gelu"
        _lookup(CHANNEL_MIXERS, "channel_mixer", self.channel_mixer)
        if mixer.mixes_channels and self.d_ff is not None:
            # gMLP splits its hidden layer into two halves
            check_even("d_ff", self.d_ff)
        if mixer.mixes_channels and self.channel_mixer != "none":
            raise ValueError(
                f"token_mixer={self.token_mixer!r} mixes channels itself (its"
                " block replaces both sub-layers);"
                f" channel_mixer={self.channel_mixer!r} would add a second"
                " one: write channel_mixer='none' (or leave channel_mixer"
                " unset)"
            )
        _refuse_unread_options(self, mixer)

    def to_dict(self) -> dict:
        """The fields as a plain dict (what results files record)."""
        return asdict(self)


MixerFactory = Callable[[ModelConfig], nn.Module]


@dataclass(frozen=True)
class TokenMixer:
    """A registered token mixer: how to build it, and what it brings besides
    token mixing."""

    build: MixerFactory
    # encodes positions itself: the model adds no embeddings
    positions_inside: bool = False
    # mixes channels itself: the block has no channel mixer
    mixes_channels: bool = False
    options: tuple[str, ...] = ()  # the fields of MIXER_OPTIONS that it reads


#: ``ModelConfig`` fields that only some token mixers read (None: unset). A
#: mixer declares those it reads in ``TokenMixer.options``; any other one set
#: is refused.
MIXER_OPTIONS = ("attention_scale",)


#: Registered token mixers: name -> ``TokenMixer``.
TOKEN_MIXERS: dict[str, TokenMixer] = {}
#: Registered channel mixers: name -> factory, or None for "none" (no channel
#: mixer).
CHANNEL_MIXERS: dict[str, MixerFactory | None] = {}


def register_token_mixer(
    name: str,
    *,
    positions_inside: bool = False,
    mixes_channels: bool = False,
    options: tuple[str, ...] = (),
) -> Callable[[MixerFactory], MixerFactory]:
    """Decorator: make ``factory(config)`` available as ``token_mixer=name``;
    ``options`` names the fields of ``MIXER_OPTIONS`` that the factory
    reads."""
    _check_name("name", name)
    check_bool("positions_inside", positions_inside)
    check_bool("mixes_channels", mixes_channels)
    if isinstance(options, str) or not set(options) <= set(MIXER_OPTIONS):
        raise ValueError(
            "options must be a tuple of names in MIXER_OPTIONS"
            f" {MIXER_OPTIONS}, got {options!r}"
        )

    def add(factory: MixerFactory) -> MixerFactory:
        TOKEN_MIXERS[name] = TokenMixer(
            factory, positions_inside, mixes_channels, tuple(options)
        )
        return factory

    return add


def register_channel_mixer(
    name: str,
) -> Callable[[MixerFactory], MixerFactory]:
    """Decorator: make ``factory(config)`` available as
    ``channel_mixer=name``."""
    _check_name("name", name)

    def add(factory: MixerFactory) -> MixerFactory:
        CHANNEL_MIXERS[name] = factory
        return factory

    return add


def _lookup(registry: dict, kind: str, name: str):
    if not isinstance(name, str) or name not in registry:
        raise ValueError(
            f"unknown {kind} {name!r}; registered: {sorted(registry)}"
        )
    return registry[name]


def _check_name(argument: str, name) -> str:
    if not isinstance(name, str) or not name:
        raise TypeError(f"{argument} must be a non-empty str, got {name!r}")
    return name


def _refuse_unread_options(config: ModelConfig, mixer: TokenMixer) -> None:
    """An option that no part of the model would read is a mistake: refuse it,
    naming it."""
    for option in MIXER_OPTIONS:
        if getattr(config, option) is not None and option not in mixer.options:
            readers = sorted(
                name
                for name, entry in TOKEN_MIXERS.items()
                if option in entry.options
            )
            raise ValueError(
                f"token_mixer={config.token_mixer!r} does not read"
                f" {option}={getattr(config, option)!r} (only token_mixer in"
                f" {readers} do): leave it None"
            )
    if (
        config.d_ff is not None
        and not mixer.mixes_channels
        and config.channel_mixer == "none"
    ):
        raise ValueError(
            f"d_ff={config.d_ff} is read by no mixer:"
            f" token_mixer={config.token_mixer!r} does not mix channels and"
            " channel_mixer='none' adds no feed-forward: leave d_ff None"
        )


def _attention_options(config: ModelConfig) -> dict:
    return dict(
        dropout=config.dropout, causal=True, scale=config.attention_scale
    )


@register_token_mixer("attention", options=("attention_scale",))
def _causal_attention(config: ModelConfig) -> nn.Module:
    return MultiHeadAttention(
        config.d_model, config.n_heads, **_attention_options(config)
    )


@register_token_mixer(
    "alibi", positions_inside=True, options=("attention_scale",)
)
def _alibi_attention(config: ModelConfig) -> nn.Module:
    return AlibiMultiHeadAttention(
        config.d_model, config.n_heads, **_attention_options(config)
    )


@register_token_mixer(
    "rotary", positions_inside=True, options=("attention_scale",)
)
def _rotary_attention(config: ModelConfig) -> nn.Module:
    return RotaryMultiHeadAttention(
        config.d_model, config.n_heads, **_attention_options(config)
    )


def _register_feed_forward(variant: str) -> None:
    @register_channel_mixer(variant)
    def build(config: ModelConfig) -> nn.Module:
        return feed_forward_variant(
            variant, config.d_model, config.d_ff, dropout=config.dropout
        )


for _variant in VARIANTS:
    _register_feed_forward(_variant)
# the token mixer does its own channel mixing (gMLP)
CHANNEL_MIXERS["none"] = None


# gMLP's block replaces *both* mixers: its GatedMLP mixes tokens (the Spatial
# Gating Unit) and channels (its two projections), and W [block_size,
# block_size] knows every position. So Block(norm, GatedMLP, None) is exactly a
# GMLPBlock. d_ffn = d_ff, or 6·d_model (the ratio of the paper's base models)
# when d_ff is None.
def _gated_mlp(config: ModelConfig, tiny_attention: bool) -> nn.Module:
    d_ffn = config.d_ff if config.d_ff is not None else 6 * config.d_model
    return GatedMLP(
        config.d_model,
        d_ffn,
        config.block_size,
        causal=True,
        tiny_attention=tiny_attention,
        dropout=config.dropout,
    )


@register_token_mixer("gmlp", positions_inside=True, mixes_channels=True)
def _gmlp(config: ModelConfig) -> nn.Module:
    return _gated_mlp(config, tiny_attention=False)


@register_token_mixer("amlp", positions_inside=True, mixes_channels=True)
def _amlp(config: ModelConfig) -> nn.Module:
    return _gated_mlp(config, tiny_attention=True)


class Block(nn.Module):
    r"""Pre-norm residual block: :math:`x + \text{token\_mixer}(
    \operatorname{LN}_1(x))`, then :math:`x + \text{channel\_mixer}(
    \operatorname{LN}_2(x))`.

    ``x``: ``[batch, seq, d_model]`` -> ``[batch, seq, d_model]``.
    ``channel_mixer`` may be ``None`` for a token mixer that mixes channels
    itself (gMLP's), and the block is then :math:`x +
    \text{token\_mixer}(\operatorname{LN}_1(x))` alone. Pre-norm leaves
    the residual stream an identity path, :math:`\partial x_{l+1} /
    \partial x_l = I + \partial f / \partial x_l`: the gradient reaches
    every layer through its :math:`I` term.
    """

    def __init__(
        self,
        d_model: int,
        token_mixer: nn.Module,
        channel_mixer: nn.Module | None,
    ):
        super().__init__()
        self.norm_1 = nn.LayerNorm(d_model)
        self.token_mixer = token_mixer
        self.norm_2 = (
            nn.LayerNorm(d_model) if channel_mixer is not None else None
        )
        self.channel_mixer = channel_mixer

    def forward(
        self, x: torch.Tensor, cache: KVCache | None = None
    ) -> torch.Tensor:
        """``cache``: the token mixer's ``KVCache`` when decoding (attention
        mixers only)."""
        mixer_input = self.norm_1(x)
        x = x + (
            self.token_mixer(mixer_input)
            if cache is None
            else self.token_mixer(mixer_input, cache=cache)
        )
        if self.channel_mixer is not None:
            x = x + self.channel_mixer(self.norm_2(x))
        return x


# -----------------------------------------------------------------------------
# Decoding a token a step: the draw, and one token through the blocks


class _Sampler:
    r"""Draws the next token of every row from logits ``[batch, vocab]``,
    with

    .. math::

        p(c) \propto \begin{cases}
            e^{z_c / \tau} & \text{if } z_c \text{ is among} \\
            & \text{the } k \text{ largest,} \\
            0 & \text{otherwise,}
        \end{cases}

    :math:`\tau` the temperature and :math:`k` = ``top_k`` (every character
    when None).

    One draw from :math:`p` is :math:`\arg\max_c p(c) / E_c` with
    :math:`E_c \sim \operatorname{Exp}(1)` drawn from ``generator``: the
    Gumbel-max trick, as torch's ``multinomial`` computes a single sample, so
    the same numbers in the same order give the same tokens as
    ``torch.multinomial(p, 1, generator=generator)``. What it leaves out are
    ``multinomial``'s checks of :math:`p`, two reads back to the host every
    token, which a CUDA graph cannot record. The check stays on the device:
    ``total`` adds up each row's :math:`p(c_0)`, NaN from the first token
    whose logits held a NaN (the softmax of such a row is NaN throughout),
    and ``check`` reads it once.
    """

    def __init__(self, temperature, top_k, generator):
        self.temperature, self.top_k = temperature, top_k
        self.generator = generator
        # made at the first draw: :math:`E`, then :math:`p / E`, one buffer
        # reused every token; and the sum of :math:`p(c_0)`
        self.noise = self.total = None

    def __call__(self, logits: torch.Tensor, out: torch.Tensor):
        """Writes each row's token id into ``out`` ``[batch, 1]``."""
        if logits.dtype != torch.float32:
            logits = logits.float()
        if self.temperature != 1.0:  # one kernel fewer per token
            logits = logits / self.temperature
        if self.top_k is not None:  # greedy (k = 1): the largest, one kernel
            kth = (
                logits.amax(dim=-1, keepdim=True)
                if self.top_k == 1
                else torch.topk(logits, self.top_k).values[:, -1:]
            )
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = F.softmax(logits, dim=-1)
        if self.noise is None:
            self.noise = torch.empty_like(probs)
            self.total = probs.new_zeros(probs.shape[0], 1)
        self.total.add_(probs[:, :1])
        # :math:`\arg\max_c p(c) / E_c`, in place
        self.noise.exponential_(generator=self.generator)
        torch.div(probs, self.noise, out=self.noise)
        torch.argmax(self.noise, dim=-1, keepdim=True, out=out)

    def check(self, model: LanguageModel) -> None:
        """A clear error if any logits so far held NaN (one host read)."""
        if not bool(torch.isfinite(self.total).all()):
            raise ValueError(_non_finite_logits(model))


def _non_finite_logits(model: nn.Module) -> str:
    for name, parameter in model.named_parameters():
        if not bool(torch.isfinite(parameter).all()):
            return (
                f"generate: the model's parameter {name!r} holds NaN or inf,"
                " so its logits are NaN and no character can be drawn: load"
                " finite weights (a diverged run's are not)"
            )
    return (
        "generate: the logits became NaN although every parameter is finite"
        " (an activation overflowed: decode in float32 or bfloat16, not"
        " float16)"
    )


def _linear_args(linear: nn.Linear) -> tuple:
    """``F.linear``'s arguments after the input: weight and bias."""
    return linear.weight, linear.bias


def _norm_args(norm: nn.LayerNorm) -> tuple:
    """``F.layer_norm``'s arguments after the input."""
    return norm.normalized_shape, norm.weight, norm.bias, norm.eps


def _block_step(block: Block, static: bool) -> Callable:
    """``block(x, cache=cache)`` for one new token ``x`` ``[batch, 1,
    d_model]``, as a function of ``(x, cache)``: the same arithmetic in its
    fewest operations, nothing checked again (the prompt's pass checked the
    block, the cache and their use, and a step's shapes never change).

    What the step reads of the block's modules is read here, once per
    ``generate`` call, into the functions' own variables: read at every
    token, each parameter and submodule would be an ``nn.Module.__getattr__``
    (a search of three dictionaries), about a hundred a token. Read once, a
    token of the ``cpu`` profile's models takes 10-20 % less time on a CPU,
    where a step's time is mostly such overhead (ten rounds of 300 tokens,
    the two steps in turn). ``static``: the caches are ``StaticKVCache``."""
    norm_1 = _norm_args(block.norm_1)
    mix_tokens = _attention_step(block.token_mixer, static)
    if block.channel_mixer is None:
        return lambda x, cache: x + mix_tokens(F.layer_norm(x, *norm_1), cache)
    norm_2 = _norm_args(block.norm_2)
    mix_channels = _channel_step(block.channel_mixer)

    def step(x: torch.Tensor, cache) -> torch.Tensor:
        x = x + mix_tokens(F.layer_norm(x, *norm_1), cache)
        return x + mix_channels(F.layer_norm(x, *norm_2))

    return step


def _attention_step(layer, static: bool) -> Callable:
    r"""``layer(x, cache=cache)`` for one new token, as a function of ``(x,
    cache)``.

    One position needs no transposes: the product :math:`x W_\text{in}`,
    ``[batch, 3 d]``, *is* ``[batch, 3, heads, 1, d_head]`` in memory, and
    its rows split into :math:`q, k, v` as views."""
    if layer.in_proj is None:  # three projections: the layer's own call
        return lambda x, cache: layer(x, cache=cache)
    in_proj = _linear_args(layer.in_proj)
    out_proj = _linear_args(layer.out_proj)
    heads = (3, layer.n_heads, 1, layer.d_head)
    attend = (_static_attention if static else _growing_attention)(layer)

    def step(x: torch.Tensor, cache) -> torch.Tensor:
        batch = x.shape[0]
        qkv = F.linear(x, *in_proj).view(batch, *heads)
        out = attend(qkv, cache)  # [batch, heads, 1, d_head]
        return F.linear(out.reshape(batch, 1, -1), *out_proj)

    return step


def _growing_attention(layer) -> Callable:
    """On a ``KVCache``: the token at ``cache.position`` reads every key the
    cache holds, its own last: no mask, only ALiBi's row of bias."""
    rotary = isinstance(layer, RotaryMultiHeadAttention)
    turn = _turning(layer) if rotary else None
    eager = layer.backend == "eager"
    fused = dict(
        scale=layer.scale, cpu_bf16_in_float32=layer.cpu_bf16_sdpa_in_float32
    )

    def attend(qkv: torch.Tensor, cache: KVCache) -> torch.Tensor:
        if turn is not None:
            q, k = turn(qkv[:, :2], cache.position).unbind(1)
            v = qkv[:, 2]
        else:
            q, k, v = qkv.unbind(1)
        k, v = cache.extend(k, v)
        bias = layer.attention_bias(1, k.shape[-2], q.device, q.dtype)
        if eager:
            return layer._attend(q, k, v, None, bias, False)[0]
        mask = None if bias is None else bias.unsqueeze(0)
        return fused_attention(q, k, v, mask, **fused)

    return attend


def _turning(layer: RotaryMultiHeadAttention) -> Callable:
    r"""Rotary's ``transform_qk`` for one token, q and k at once (side by side
    in ``qkv``), as a function of ``(qk, position)``, ``qk`` ``[batch, 2,
    heads, 1, d_head]``: the complex product of
    :func:`~mixers.positions.rotate_pairs`, each channel pair times row
    ``position`` of the layer's table of turns :math:`e^{\mathrm{i}\theta}`
    (``_turns``), in float32 at least.

    The table is held here and fetched again only when a token passes its
    end: the layer's own path (``_rotation``: its key of device and dtype,
    and a slice, at every call) made a rotary token 7-9 % slower (``cpu``
    profile, sixteen rounds, the two in turn)."""
    table = None

    def turn(qk: torch.Tensor, position: int) -> torch.Tensor:
        nonlocal table
        dtype = qk.dtype
        compute = torch.float64 if dtype == torch.float64 else torch.float32
        if table is None or table.shape[0] <= position:
            table = layer._turns(position + 1, qk.device, compute)
        if dtype != compute:
            qk = qk.to(compute)
        turned = rotate_pairs(qk, None, None, table[position])
        return turned if dtype == compute else turned.to(dtype)

    return turn


def _static_attention(layer) -> Callable:
    """On a ``StaticKVCache``: the token at its position (a tensor), written
    in place; the cache's mask says which slots it reads (``forward``'s own
    steps)."""

    def attend(qkv: torch.Tensor, cache: StaticKVCache) -> torch.Tensor:
        q, k, v = qkv.unbind(1)
        positions = cache.next_positions(1, q.device)
        q, k = layer.transform_qk(q, k, positions, positions)
        k, v, reads = cache.write(k, v, positions)
        bias = layer.position_bias(positions, cache.key_positions, q.dtype)
        return layer._attend(q, k, v, reads, bias, False, True)[0]

    return attend


def _channel_step(mixer) -> Callable:
    """``mixer(x)`` for one token, as a function of ``x``: a
    ``FeedForward``'s arithmetic without its input check and its dropout (the
    model decodes in eval mode); any other channel mixer as it is."""
    if not isinstance(mixer, FeedForward):
        return mixer
    f, down = mixer.activation, _linear_args(mixer.down_proj)
    if mixer.fused:
        gate_up = _linear_args(mixer.gate_up_proj)

        def hidden(x: torch.Tensor) -> torch.Tensor:
            gate, linear_branch = F.linear(x, *gate_up).chunk(2, dim=-1)
            return f(gate) * linear_branch

    elif mixer.gated:
        gate, up = _linear_args(mixer.gate_proj), _linear_args(mixer.up_proj)

        def hidden(x: torch.Tensor) -> torch.Tensor:
            return f(F.linear(x, *gate)) * F.linear(x, *up)

    else:
        up = _linear_args(mixer.up_proj)

        def hidden(x: torch.Tensor) -> torch.Tensor:
            return f(F.linear(x, *up))

    return lambda x: F.linear(hidden(x), *down)


#: Calls of the step before a CUDA graph records it (the first compiles a
#: compiled step).
WARM_UPS = 2


def _record(step, state: list[torch.Tensor], generator):
    """``step`` recorded as a CUDA graph: returns the function that replays
    it.

    Recording runs nothing, but the warm-up calls before it do: they advance
    every cache, write tokens, and draw from the generator. So ``state`` (the
    tensors a step writes) and the generator's state are put back as they
    were, and the first replay draws what an unrecorded step would draw."""
    saved = [tensor.clone() for tensor in state]
    rng = (
        generator.get_state()
        if generator is not None
        else torch.cuda.get_rng_state()
    )
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    try:
        with torch.cuda.stream(stream):
            for _ in range(WARM_UPS):
                step()
    finally:  # also after a failed warm-up: an unrecorded step goes on
        torch.cuda.current_stream().wait_stream(stream)
        for now, before in zip(state, saved):
            now.copy_(before)
        if generator is not None:
            generator.set_state(rng)
        else:
            torch.cuda.set_rng_state(rng)
    return _capture(step, generator)


def _capture(step, generator):
    """The CUDA graph of one call of ``step``, and its replay. A generator of
    the caller's own is registered with the graph, which then advances it at
    every replay as the unrecorded draws would (torch's default generator is
    registered anyway)."""
    graph = torch.cuda.CUDAGraph()
    # (a torch without it fails the capture in its own words instead)
    if generator is not None and hasattr(graph, "register_generator_state"):
        graph.register_generator_state(generator)
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def _recordable(token: torch.Tensor) -> bool:
    """Whether a decoding step on ``token``'s device can be recorded (CUDA)."""
    return token.device.type == "cuda"


class LanguageModel(nn.Module):
    r"""A decoder-only character language model built from ``Block`` layers.

    Token ids ``[batch, seq]`` -> embeddings (+ positions) -> blocks -> final
    norm -> logits ``[batch, seq, vocab_size]``:

    .. math::

        h_0 &= E[\text{idx}] + P_{[:T]}, \\
        h_l &= \operatorname{Block}_l(h_{l-1}), \\
        \text{logits} &= \operatorname{LN}(h_L)\, W_{\text{head}},

    with :math:`E` ``[vocab, d]`` the token embedding, :math:`P` the position
    table (none for a mixer that encodes positions itself) and
    :math:`W_{\text{head}}` ``[d, vocab]``. :math:`E` and
    :math:`W_{\text{head}}` start at :math:`\mathcal{N}(0, 0.02^2)`, GPT-2's
    scale.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        make_token_mixer = _lookup(
            TOKEN_MIXERS, "token_mixer", config.token_mixer
        ).build
        make_channel_mixer = _lookup(
            CHANNEL_MIXERS, "channel_mixer", config.channel_mixer
        )
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.positions = build_positions(
            config.positions, config.d_model, config.block_size
        )
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            Block(
                config.d_model,
                make_token_mixer(config),
                (
                    make_channel_mixer(config)
                    if make_channel_mixer is not None
                    else None
                ),
            )
            for _ in range(config.n_layers)
        )
        self.final_norm = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        # Small embeddings (GPT-2's 0.02) keep the residual stream's scale near
        # that of the sub-layers' outputs at the start of training.
        nn.init.normal_(self.token_embedding.weight, std=0.02)
        nn.init.normal_(self.head.weight, std=0.02)

    def num_parameters(self) -> int:
        r"""Number of scalar parameters, :math:`N = \sum_p |p|` (the head
        is not tied to :math:`E`: both count)."""
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        r"""``idx`` ``int64[batch, seq]`` -> ``(logits [batch, seq, vocab],
        loss or None)``.

        ``loss`` is the mean cross-entropy in nats per character against
        ``targets`` :math:`y`, ``int64[batch, seq]`` too:

        .. math::

            \mathcal{L} = -\frac{1}{BT} \sum_{b,t}
            \log \operatorname{softmax}(\text{logits}_{b,t})_{y_{b,t}},

        :math:`\mathcal{L} / \ln 2` bits per character. Every id of both
        must lie in ``[0, vocab_size)``.
        """
        self._check_ids(idx, targets)
        x = self.dropout(self._embed(idx))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.final_norm(x))
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
        return logits, loss

    def _check_ids(self, idx, targets) -> None:
        check_token_ids(idx, "idx", self.config.vocab_size)
        if targets is not None:
            check_token_ids(targets, "targets", self.config.vocab_size)
            if targets.shape != idx.shape:
                raise ValueError(
                    f"targets must have the shape of idx {tuple(idx.shape)},"
                    f" got {tuple(targets.shape)}"
                )

    def decodes_with_cache(self) -> bool:
        """Whether ``generate`` can keep a ``KVCache`` in every block: every
        token mixer is attention and no position embedding is added outside it
        (ALiBi, rotary, or none).

        Why not otherwise: a learned or sinusoidal table is added to the
        *input* at absolute positions, and a model trained at ``block_size`` is
        shown at most that window, whose positions shift with every new token;
        gMLP's W has ``block_size`` rows and mixes the whole window at once.
        Those models recompute their cropped window for every token.
        """
        return self.config.positions == "none" and all(
            isinstance(block.token_mixer, MultiHeadAttention)
            for block in self.blocks
        )

    def _embed(self, idx: torch.Tensor) -> torch.Tensor:
        """Token embeddings ``[batch, seq, d_model]``, plus the position
        table's first seq rows if the model adds positions to its input."""
        x = self.token_embedding(idx)
        positions = self.positions(idx.shape[1])
        return (
            x
            if positions is None
            else x + positions.to(device=x.device, dtype=x.dtype)
        )

    def _next_logits(
        self, idx: torch.Tensor, caches: list[KVCache] | None
    ) -> torch.Tensor:
        """Logits ``[batch, vocab]`` for the token after ``idx`` ``[batch,
        seq]``: only the last position goes through the head. With ``caches``
        (one per block), ``idx`` holds only the tokens they have not seen
        yet."""
        x = self._embed(idx)
        for i, block in enumerate(self.blocks):
            x = block(x) if caches is None else block(x, cache=caches[i])
        return self.head(self.final_norm(x[:, -1]))

    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        generator: torch.Generator | None = None,
        max_context: int | None = None,
        graph: bool | None = None,
        compile: bool = False,
    ) -> torch.Tensor:
        r"""Extend ``idx`` ``[batch, seq]`` by ``max_new_tokens`` sampled
        tokens, the model in eval mode for the call (dropout off; each
        module's mode is put back after).

        Models that can (``decodes_with_cache``: ALiBi, rotary, attention
        without embedded positions) decode through a key/value cache in every
        block: each new token is one query against the keys kept so far, and
        they read *past the training length*, every token so far by default,
        or the last ``max_context`` in every layer (sliding-window attention).
        After the prompt's pass, every token is one call of the same step
        (``_decoding_step``): the token through the blocks, its draw, and its
        write into the output, all on the device. On a GPU (``graph`` None or
        True) the cache is a ``StaticKVCache`` and the step always reads and
        writes the same memory, so it is recorded once as a CUDA graph and
        replayed: one launch per token instead of hundreds; ``compile=True``
        compiles the model's part of it first (``torch.compile``: fewer, fused
        kernels). On a CPU the cache is a ``KVCache`` that grows, and the step
        runs as it is (``graph=True`` runs the GPU's static cache there,
        without recording). The other models read the last ``block_size``
        tokens (or ``max_context``, if smaller), the window recomputed for
        every token; ``graph=True`` and ``compile=True`` are refused there.

        ``temperature`` :math:`\tau` (a positive finite float) divides the
        logits; ``top_k`` (None, or an int in [1, vocab_size]) keeps only the
        :math:`k` most likely characters (``_Sampler``). ``max_new_tokens`` is
        an int >= 0. Tokens are drawn from ``generator`` (a
        ``torch.Generator`` on ``idx``'s device, or None for torch's default)
        exactly as ``torch.multinomial`` draws them: the same seed writes the
        same tokens.

        Attention's cost per token: with a cache, the new query reads the
        :math:`t` keys so far, :math:`O(t\,d)` a layer; recomputed, a window
        of :math:`T` tokens is :math:`O(T^2 d)` a layer again.
        """
        self._check_sampling(idx, temperature, top_k, generator)
        self._check_decoding(idx, max_new_tokens, max_context, graph, compile)
        modes = [module.training for module in self.modules()]
        self.eval()
        try:
            sample = _Sampler(temperature, top_k, generator)
            return self._generate(
                idx, max_new_tokens, sample, max_context, graph, compile
            )
        finally:
            for module, training in zip(self.modules(), modes):
                module.training = training

    def _check_sampling(self, idx, temperature, top_k, generator) -> None:
        check_token_ids(idx, "idx", self.config.vocab_size)
        check_prompt(idx, self.head.weight.device)
        if check_positive_float("temperature", temperature) < MIN_TEMPERATURE:
            raise ValueError(
                f"temperature must be at least {MIN_TEMPERATURE:g}, got"
                f" {temperature:g} (for the most likely character every time,"
                " pass top_k=1)"
            )
        if top_k is not None:
            check_int_in("top_k", top_k, 1, self.config.vocab_size)
        check_generator(generator, idx.device)

    def _check_decoding(
        self, idx, max_new_tokens, max_context, graph, compile
    ):
        check_non_negative_int("max_new_tokens", max_new_tokens)
        if max_context is not None:
            check_positive_int("max_context", max_context)
        if graph is not None:
            check_bool("graph", graph)
        check_bool("compile", compile)
        static = self._decodes_static(idx, graph)
        check_decoding_switches(
            graph, compile, self.decodes_with_cache(), static, idx.device
        )
        # the output, and the static caches' keys and values
        ring = self._ring(idx, max_new_tokens, max_context) if static else 0
        cache_bytes = 2 * self.config.n_layers * self.config.d_model * ring
        cache_bytes *= idx.shape[0] * self.head.weight.element_size()
        check_decoding_memory(idx, max_new_tokens, cache_bytes)

    def _decodes_static(self, idx, graph) -> bool:
        """Whether ``generate`` decodes through ``StaticKVCache`` (a GPU's
        default, or ``graph=True``)."""
        return self.decodes_with_cache() and (
            bool(graph) or (graph is None and idx.device.type == "cuda")
        )

    @staticmethod
    def _ring(idx, max_new_tokens: int, max_context: int | None) -> int:
        r"""Slots of each ``StaticKVCache``: every token, :math:`16 \lceil (T
        + n) / 16 \rceil` for a prompt of :math:`T` and :math:`n` new tokens
        (the alignment torch's fused GPU kernels want of a mask), or exactly
        the window, :math:`\min(T + n, \text{max\_context})`."""
        length = idx.shape[1] + max_new_tokens
        if max_context is not None:
            return min(length, max_context)
        return -(-length // 16) * 16

    def _generate(
        self, idx, max_new_tokens, sample, max_context, graph, compile
    ):
        """The prompt's pass and the first token (the logits read once, to
        stop early on NaN), then ``max_new_tokens - 1`` steps, every token
        written into one preallocated output."""
        if max_new_tokens == 0:
            return idx
        batch, start = idx.shape
        cached = self.decodes_with_cache()
        window = (
            max_context
            if cached
            else min(
                max_context or self.config.block_size, self.config.block_size
            )
        )
        caches = None
        if cached and self._decodes_static(idx, graph):
            ring = self._ring(idx, max_new_tokens, max_context)
            caches = [StaticKVCache(ring) for _ in self.blocks]
        elif cached:
            caches = [KVCache(max_context) for _ in self.blocks]
        out = idx.new_empty(batch, start + max_new_tokens)
        out[:, :start] = idx
        token = out.new_empty(batch, 1)
        prompt = idx if window is None else idx[:, -window:]
        sample(self._next_logits(prompt, caches), out=token)
        sample.check(self)
        out[:, start] = token[:, 0]
        if caches is None:  # the window, recomputed for every token
            for i in range(start + 1, start + max_new_tokens):
                sample(
                    self._next_logits(out[:, max(0, i - window) : i], None),
                    out=token,
                )
                out[:, i] = token[:, 0]
        else:
            steps = self._decoding_step(
                token, caches, sample, out, graph, compile, max_new_tokens - 1
            )
            for _ in range(max_new_tokens - 1):
                steps()
        sample.check(self)
        return out

    def _step_logits(self, static: bool) -> Callable:
        """``_next_logits(token, caches)`` for one token ``[batch, 1]``
        through caches that the prompt's pass checked, as a function of
        ``(token, caches)``: every block's step (``_block_step``), then the
        final norm and the head, their tensors read once, here."""
        embedding = self.token_embedding.weight
        blocks = [_block_step(block, static) for block in self.blocks]
        final_norm, head = _norm_args(self.final_norm), _linear_args(self.head)

        def logits(token: torch.Tensor, caches: list) -> torch.Tensor:
            x = F.embedding(token, embedding)
            for step, cache in zip(blocks, caches):
                x = step(x, cache)
            x = F.layer_norm(x, *final_norm).view(x.shape[0], -1)
            return F.linear(x, *head)

        return logits

    def _decoding_step(
        self, token, caches, sample, out, graph, compile, steps: int
    ):
        """A function of no arguments that decodes one token: the logits
        after ``token`` (``[batch, 1]``, read where it lies), its key and
        value written into ``caches``, the next token drawn into ``token``
        and written into ``out`` at ``column`` (a counter on the device). It
        reads no number back to the host, and on a ``StaticKVCache`` it
        changes no shape from token to token: so on a GPU it is recorded once
        as a CUDA graph (``_record``) and each call replays it. On a CPU it
        runs as it is, the same code, which the tests check there.

        A graph is recorded on a GPU, of static caches (never with
        ``graph=False``), for more than ``WARM_UPS`` steps; ``graph=None``
        on a GPU that cannot record the step warns and decodes unrecorded
        (``graph=True`` raises)."""
        static = all(isinstance(c, StaticKVCache) for c in caches)
        logits = self._step_logits(static)
        if compile:
            logits = torch.compile(logits, dynamic=False)
        column = torch.tensor([out.shape[1] - steps], device=out.device)

        def step() -> None:
            sample(logits(token, caches), out=token)
            out.index_copy_(1, column, token)
            column.add_(1)

        if graph is False or not static or steps <= WARM_UPS:
            return step  # nothing to record, or not worth it
        if not _recordable(token):  # no CUDA
            return step
        state = [token, column, sample.total]
        state += [t for c in caches for t in _cache_tensors(c)]
        try:
            return _record(step, state, sample.generator)
        except RuntimeError as error:
            if graph:  # asked for: say why it could not be
                raise
            warnings.warn(
                f"generate: the decoding step could not be recorded as a"
                f" CUDA graph ({error}); decoding unrecorded, one launch per"
                " kernel",
                stacklevel=3,
            )
            return step


def _cache_tensors(cache: StaticKVCache) -> list[torch.Tensor]:
    return [cache.k, cache.v, cache.key_positions, cache.position]
