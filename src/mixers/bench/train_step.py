"""A training step of the package's models against nanoGPT's, side by side
in one run.

``python -m mixers.bench.train_step --profile cpu`` builds the ``cpu``
profile's model with each attention-family token mixer and a model laid out
as nanoGPT's ``model.py`` lays out its GPT, at the same sizes, and times one
training step of each (forward, backward, AdamW), interleaved and repeated:

==============  ===============================================================
``nanogpt``     :class:`NanoGPTStyle`: one fused query/key/value projection,
                ``scaled_dot_product_attention(is_causal=True)``, a learned
                position table, the token embedding tied to the output
``attention``   ``LanguageModel`` with causal attention and learned positions
``alibi``       ALiBi (``mixers.alibi``): a bias in the scores, no positions
``rotary``      rotary embeddings (``mixers.positions``): q and k turned
==============  ===============================================================

The claim it measures: the book's layers cost no more to train than the plain
causal attention of a well-known reference, within 3 % (issue 23's target).
Each round times ``steps`` steps of every model in turn, so that a change in
the machine's load hits all alike; the ratio to ``nanogpt`` is taken within
each round and its median reported. It writes ``train_step-PROFILE.json``
(to ``runs/``) with the provenance of the run.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from ..experiments import profile_settings
from ..model import LanguageModel, ModelConfig
from ..results import provenance
from ..train import get_profile
from . import load_average, profile_main, time_call

NAME = "train_step"
DURATIONS = {"smoke": "seconds", "cpu": "about five minutes on two threads"}
MIXERS = ("attention", "alibi", "rotary")
TARGET = 1.03  # at most this many times nanoGPT's step
SETTINGS = {
    "smoke": dict(profile="smoke", batch_size=4, steps=2, rounds=3),
    "cpu": dict(profile="cpu", batch_size=32, steps=3, rounds=15),
}


# -----------------------------------------------------------------------------
# The reference: nanoGPT's GPT, written from its layout (no dropout, biases
# in the linear layers and layer norms as in its default configuration).


class _Attention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.c_proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        batch, seq, d_model = x.shape
        q, k, v = self.c_attn(x).split(d_model, dim=2)
        q, k, v = (
            t.view(batch, seq, self.n_heads, -1).transpose(1, 2)
            for t in (q, k, v)
        )
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(batch, seq, d_model))


class _Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = _Attention(d_model, n_heads)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model),
            nn.GELU(),
            nn.Linear(4 * d_model, d_model),
        )

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPTStyle(nn.Module):
    """nanoGPT's GPT at the sizes of a ``ModelConfig``: token ids ``[batch,
    seq]`` -> ``(logits [batch, seq, vocab], loss)``."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        d = config.d_model
        self.wte = nn.Embedding(config.vocab_size, d)
        self.wpe = nn.Embedding(config.block_size, d)
        self.blocks = nn.ModuleList(
            _Block(d, config.n_heads) for _ in range(config.n_layers)
        )
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as nanoGPT's
        for module in self.modules():  # nanoGPT's initialisation
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())


# -----------------------------------------------------------------------------
# The measurement.


def build_models(profile: str, vocab_size: int = 65) -> dict[str, nn.Module]:
    """The reference and one ``LanguageModel`` per mixer of ``MIXERS``, at
    the profile's sizes, without dropout."""
    fields = {**get_profile(profile).model, "dropout": 0.0}
    config = ModelConfig(vocab_size=vocab_size, **fields)
    torch.manual_seed(0)
    models = {"nanogpt": NanoGPTStyle(config)}
    for mixer in MIXERS:
        models[mixer] = LanguageModel(
            ModelConfig(vocab_size=vocab_size, **fields, token_mixer=mixer)
        )
    return models


def _stepper(model: nn.Module, idx, targets, steps: int):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def run_steps():
        for _ in range(steps):
            _, loss = model(idx, targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

    return run_steps


def measure(settings: dict, progress: bool = False) -> dict:
    """Median seconds per step of each model, and the median over rounds of
    each one's time divided by the reference's in the same round."""
    models = build_models(settings["profile"])
    block = get_profile(settings["profile"]).train.seq_len
    g = torch.Generator().manual_seed(0)
    idx, targets = torch.randint(
        0, 65, (2, settings["batch_size"], block), generator=g
    )
    calls = {
        name: _stepper(model.train(), idx, targets, settings["steps"])
        for name, model in models.items()
    }
    for call in calls.values():
        call()  # warm-up: allocations, the optimizer's state
    rounds = []
    for r in range(settings["rounds"]):
        cpu = torch.device("cpu")
        times = {name: time_call(call, cpu) for name, call in calls.items()}
        rounds.append(times)
        if progress:
            shown = ", ".join(f"{k} {v:.3f} s" for k, v in times.items())
            print(f"round {r + 1}: {shown}", flush=True)
    steps = settings["steps"]
    return {
        "seconds_per_step": {
            name: statistics.median(t[name] for t in rounds) / steps
            for name in calls
        },
        "ratio_to_nanogpt": {
            name: statistics.median(t[name] / t["nanogpt"] for t in rounds)
            for name in MIXERS
        },
        "parameters": {
            name: sum(p.numel() for p in model.parameters())
            for name, model in models.items()
        },
        "sequence_length": block,
    }


def run(profile: str = "cpu", progress: bool = True) -> dict:
    """The measurement under ``profile``; JSON-able, with provenance."""
    start, load = time.perf_counter(), load_average()
    settings = profile_settings(profile, SETTINGS)
    row = measure(settings, progress)
    if progress:
        print(format_row(row), flush=True)
    return {
        "experiment": NAME,
        "settings": dict(settings),
        "target": TARGET,
        "results": row,
        "provenance": {
            **provenance(profile, torch.device("cpu"), [0]),
            "threads": torch.get_num_threads(),
            "precision": "float32",
            "load_average": [load, load_average()],
            "wall_time_s": time.perf_counter() - start,
        },
    }


def format_row(row: dict) -> str:
    return ", ".join(
        f"{mixer} {ratio:.3f}x nanoGPT"
        + (" (target met)" if ratio <= TARGET else f" (target {TARGET}x)")
        for mixer, ratio in row["ratio_to_nanogpt"].items()
    )


def main() -> None:
    profile_main(__doc__, NAME, DURATIONS, SETTINGS, run)


if __name__ == "__main__":
    main()
