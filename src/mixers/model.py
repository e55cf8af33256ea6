"""One decoder block, one language model, and a registry of mixers.

Every block of a sequence model is a *token mixer* (moves information between
positions) followed by a *channel mixer* (transforms each position on its own),
each wrapped in pre-norm and a residual::

    x = x + token_mixer(norm_1(x))
    x = x + channel_mixer(norm_2(x))

Because ``Block`` takes both mixers as arguments, any token mixer trains with
any channel mixer under the same harness: a fair, like-for-like comparison.
Mixers are looked up by name in ``TOKEN_MIXERS`` and ``CHANNEL_MIXERS``; each
entry is a function ``ModelConfig -> nn.Module`` mapping ``[batch, seq, d_model]``
to ``[batch, seq, d_model]``. A chapter adds its mixers with
``register_token_mixer`` / ``register_channel_mixer``. A token mixer that already
contains its own channel mixing (gMLP) is paired with the channel mixer
``"none"``, which drops the second sub-layer.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .alibi import AlibiMultiHeadAttention
from .attention import MultiHeadAttention
from .feed_forward import VARIANTS, feed_forward_variant
from .gmlp import GatedMLP
from .positions import POSITION_SCHEMES, RotaryMultiHeadAttention, build_positions


@dataclass
class ModelConfig:
    """Everything needed to build a ``LanguageModel``."""

    vocab_size: int
    block_size: int = 128  # the training length; learned positions have this many rows
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int | None = None  # channel mixer hidden size; None = 4·d_model (2/3 of it if gated)
    dropout: float = 0.0
    token_mixer: str = "attention"
    channel_mixer: str = "gelu"
    positions: str = "learned"

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "d_model", "n_layers", "n_heads"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout}")
        if self.positions not in POSITION_SCHEMES:
            raise ValueError(f"positions must be one of {POSITION_SCHEMES}, got {self.positions!r}")

    def to_dict(self) -> dict:
        return asdict(self)


MixerFactory = Callable[[ModelConfig], nn.Module]
TOKEN_MIXERS: dict[str, MixerFactory] = {}
CHANNEL_MIXERS: dict[str, MixerFactory | None] = {}


def register_token_mixer(name: str) -> Callable[[MixerFactory], MixerFactory]:
    """Decorator: make ``factory(config)`` available as ``token_mixer=name``."""

    def add(factory: MixerFactory) -> MixerFactory:
        TOKEN_MIXERS[name] = factory
        return factory

    return add


def register_channel_mixer(name: str) -> Callable[[MixerFactory], MixerFactory]:
    """Decorator: make ``factory(config)`` available as ``channel_mixer=name``."""

    def add(factory: MixerFactory) -> MixerFactory:
        CHANNEL_MIXERS[name] = factory
        return factory

    return add


def _lookup(registry: dict, kind: str, name: str):
    if name not in registry:
        raise ValueError(f"unknown {kind} {name!r}; registered: {sorted(registry)}")
    return registry[name]


@register_token_mixer("attention")
def _causal_attention(config: ModelConfig) -> nn.Module:
    return MultiHeadAttention(config.d_model, config.n_heads, dropout=config.dropout, causal=True)


# Token mixers that encode position inside attention; pair them with positions="none".
@register_token_mixer("alibi")
def _alibi_attention(config: ModelConfig) -> nn.Module:
    return AlibiMultiHeadAttention(config.d_model, config.n_heads, dropout=config.dropout, causal=True)


@register_token_mixer("rotary")
def _rotary_attention(config: ModelConfig) -> nn.Module:
    return RotaryMultiHeadAttention(config.d_model, config.n_heads, dropout=config.dropout, causal=True)


def _register_feed_forward(variant: str) -> None:
    @register_channel_mixer(variant)
    def build(config: ModelConfig) -> nn.Module:
        return feed_forward_variant(variant, config.d_model, config.d_ff, dropout=config.dropout)


for _variant in VARIANTS:
    _register_feed_forward(_variant)
CHANNEL_MIXERS["none"] = None  # the token mixer does its own channel mixing (gMLP)


# gMLP's block replaces *both* mixers: its GatedMLP mixes tokens (the Spatial Gating
# Unit) and channels (its two projections). Registered as a token mixer and paired
# with channel_mixer="none", Block(norm, GatedMLP, None) is exactly a GMLPBlock.
# d_ffn = 6·d_model is the paper's ratio (gMLP-base: d_model 512, d_ffn 3072; see
# the gMLP chapter, which matches parameter counts explicitly).
@register_token_mixer("gmlp")
def _gmlp(config: ModelConfig) -> nn.Module:
    return GatedMLP(config.d_model, 6 * config.d_model, config.block_size, causal=True)


@register_token_mixer("amlp")
def _amlp(config: ModelConfig) -> nn.Module:
    return GatedMLP(config.d_model, 6 * config.d_model, config.block_size, causal=True, tiny_attention=True)


class Block(nn.Module):
    """Pre-norm residual block: ``x + token_mixer(norm(x))``, then ``x + channel_mixer(norm(x))``.

    ``x``: ``[batch, seq, d_model]`` -> ``[batch, seq, d_model]``. ``channel_mixer``
    may be ``None`` for a token mixer that mixes channels itself.
    """

    def __init__(self, d_model: int, token_mixer: nn.Module, channel_mixer: nn.Module | None):
        super().__init__()
        self.norm_1 = nn.LayerNorm(d_model)
        self.token_mixer = token_mixer
        self.norm_2 = nn.LayerNorm(d_model) if channel_mixer is not None else None
        self.channel_mixer = channel_mixer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mixer(self.norm_1(x))
        if self.channel_mixer is not None:
            x = x + self.channel_mixer(self.norm_2(x))
        return x


class LanguageModel(nn.Module):
    """A decoder-only character language model built from ``Block``s.

    token ids ``[batch, seq]`` -> embeddings (+ positions) -> blocks -> final
    norm -> logits ``[batch, seq, vocab_size]``.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        make_token_mixer = _lookup(TOKEN_MIXERS, "token_mixer", config.token_mixer)
        make_channel_mixer = _lookup(CHANNEL_MIXERS, "channel_mixer", config.channel_mixer)
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.positions = build_positions(config.positions, config.d_model, config.block_size)
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            Block(
                config.d_model,
                make_token_mixer(config),
                make_channel_mixer(config) if make_channel_mixer is not None else None,
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
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        """``idx`` ``int64[batch, seq]`` -> ``(logits [batch, seq, vocab], loss or None)``.

        ``loss`` is the mean cross-entropy in nats per character against ``targets``.
        """
        if idx.dim() != 2 or idx.dtype != torch.long:
            raise ValueError(f"idx must be int64 [batch, seq], got {idx.dtype} {tuple(idx.shape)}")
        x = self.token_embedding(idx)
        positions = self.positions(idx.shape[1])
        if positions is not None:
            x = x + positions.to(device=x.device, dtype=x.dtype)
        x = self.dropout(x)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.final_norm(x))
        if targets is None:
            return logits, None
        if targets.shape != idx.shape:
            raise ValueError(f"targets must have the shape of idx {tuple(idx.shape)}, got {tuple(targets.shape)}")
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
        return logits, loss

    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Extend ``idx`` ``[batch, seq]`` by ``max_new_tokens`` sampled tokens.

        The context is cropped to the last ``block_size`` tokens; ``temperature``
        divides the logits; ``top_k`` keeps only the k most likely characters.
        """
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        if top_k is not None and not 1 <= top_k <= self.config.vocab_size:
            raise ValueError(f"top_k must lie in [1, {self.config.vocab_size}], got {top_k}")
        for _ in range(max_new_tokens):
            context = idx[:, -self.config.block_size :]
            logits, _ = self(context)
            logits = logits[:, -1, :].float() / temperature
            if top_k is not None:
                kth = torch.topk(logits, top_k).values[:, -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            probs = F.softmax(logits, dim=-1)
            next_id = torch.multinomial(probs, 1, generator=generator)
            idx = torch.cat([idx, next_id], dim=1)
        return idx
