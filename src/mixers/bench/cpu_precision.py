"""A training step on a CPU in float32 and in bf16 autocast: why the cpu
profile trains in bf16.

``python -m mixers.bench.cpu_precision --profile cpu`` times one training step
(forward, backward, gradient clipping, AdamW) of the ``cpu`` profile's baseline
model on one batch of its size, in three precisions, interleaved and repeated
in one run:

====================  =========================================================
``float32``           everything in float32
``bf16``              bf16 autocast, torch's attention kernel in bf16 too
                      (``MultiHeadAttention.cpu_bf16_sdpa_in_float32 = False``)
``bf16_fp32_attn``    bf16 autocast, attention in float32
                      (``cpu_bf16_sdpa_in_float32 = True``, the default): what
                      the ``cpu`` profile runs on a CPU with native bf16
====================  =========================================================

and, to show where the difference comes from, torch's causal attention kernel
alone (forward plus backward, at the model's shape) in float32 and in bf16, and
a matrix product of the feed-forward's shape. Each step's loss on the same
batch from the same weights is recorded too: bf16 changes the arithmetic, not
the function.

On a CPU with AVX512-BF16 or AMX (``mixers.train.cpu_has_bf16``), oneDNN
multiplies bf16 matrices two to three times faster than float32 ones, but
torch's CPU flash-attention kernel is slower in bf16 than in float32; the
profile takes the fast half of each. On a CPU without native bf16, bf16 is
emulated and everything is slower: the profile then trains in float32.

It writes ``cpu_precision-PROFILE.json`` (to ``runs/``; ``--out book/results``
for the chapter's) with the provenance of the run.
"""

from __future__ import annotations

import copy
import time

import torch
import torch.nn.functional as F

from ..attention import MultiHeadAttention
from ..data import CharDataset, random_batch
from ..experiments import profile_settings
from ..results import provenance
from ..train import build_model, cpu_has_bf16, get_profile, make_optimizer
from . import profile_main, time_interleaved

NAME = "cpu_precision"
DURATIONS = {"smoke": "seconds", "cpu": "under a minute"}
PRECISIONS = ("float32", "bf16", "bf16_fp32_attn")
SETTINGS = {
    "smoke": dict(profile="smoke", repeats=2),
    "cpu": dict(profile="cpu", repeats=15),
}


def _replica(model: torch.nn.Module, precision: str) -> torch.nn.Module:
    """A copy of ``model`` (the same weights) whose attention runs as
    ``precision`` asks: in plain bf16 torch SDPA for ``"bf16"``, else as the
    package's layers do by default.
    """
    replica = copy.deepcopy(model)
    if precision == "bf16":
        for m in replica.modules():
            if isinstance(m, MultiHeadAttention):
                m.cpu_bf16_sdpa_in_float32 = False
    return replica


def _autocast(precision: str):
    return torch.autocast(
        "cpu", dtype=torch.bfloat16, enabled=precision != "float32"
    )


def training_steps(profile_name: str, repeats: int) -> dict:
    """Median seconds of one training step in each precision, and each one's
    loss on the batch."""
    profile = get_profile(profile_name)
    dataset = CharDataset.shakespeare()
    torch.manual_seed(profile.train.seed)
    model = build_model(dataset.tokenizer.vocab_size, profile)
    x, y = random_batch(
        dataset.train,
        profile.train.batch_size,
        profile.train.seq_len,
        torch.Generator().manual_seed(0),
        torch.device("cpu"),
    )
    rows = {}
    steps = {}
    for name in PRECISIONS:
        # the same initial weights for each precision
        replica = _replica(model, name)
        optimizer = make_optimizer(replica, profile.train)
        with torch.no_grad(), _autocast(name):
            rows[name] = {"initial_loss": replica(x, y)[1].item()}

        def step(replica=replica, optimizer=optimizer, name=name):
            with _autocast(name):
                _, loss = replica(x, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(
                replica.parameters(), profile.train.grad_clip
            )
            optimizer.step()

        step()  # warm-up
        steps[name] = step
    times = time_interleaved(steps, repeats, torch.device("cpu"))
    for name in PRECISIONS:
        rows[name].update(times[name])
    base = rows["float32"]["median_s"]
    return {
        "model": profile.model,
        "batch_size": profile.train.batch_size,
        "seq_len": profile.train.seq_len,
        "precisions": rows,
        "speedup_vs_float32": {
            n: base / rows[n]["median_s"] for n in PRECISIONS
        },
    }


def kernels(profile_name: str, repeats: int) -> dict:
    """Median seconds of torch's causal attention (forward + backward) and of
    one feed-forward matrix product, at the profile's shapes, in float32 and
    bf16."""
    profile = get_profile(profile_name)
    batch, seq = profile.train.batch_size, profile.train.seq_len
    d_model, heads = profile.model["d_model"], profile.model["n_heads"]
    generator = torch.Generator().manual_seed(0)
    out = {}
    for dtype in (torch.float32, torch.bfloat16):
        q, k, v = (
            torch.randn(
                batch, heads, seq, d_model // heads, generator=generator
            )
            .to(dtype)
            .requires_grad_()
            for _ in range(3)
        )
        grad = torch.randn(
            batch, heads, seq, d_model // heads, generator=generator
        ).to(dtype)
        a = torch.randn(batch * seq, d_model, generator=generator).to(dtype)
        w = torch.randn(d_model, 4 * d_model, generator=generator).to(dtype)
        calls = {
            "attention_forward_backward": (
                lambda: F.scaled_dot_product_attention(
                    q, k, v, is_causal=True
                ).backward(grad)
            ),
            "feed_forward_matmul": lambda: a @ w,
        }
        for call in calls.values():
            call()  # warm-up
        out[str(dtype).removeprefix("torch.")] = time_interleaved(
            calls, repeats, torch.device("cpu")
        )
    return out


def run(profile: str = "cpu", progress: bool = True) -> dict:
    """Both measurements for ``profile``; JSON-able, with provenance."""
    start = time.perf_counter()
    settings = profile_settings(profile, SETTINGS)
    device = torch.device("cpu")
    steps = training_steps(settings["profile"], settings["repeats"])
    kernel_times = kernels(settings["profile"], settings["repeats"])
    results = {
        "experiment": NAME,
        "what": (
            "one training step of the baseline model (forward, backward,"
            " clipping, AdamW) on a CPU"
        ),
        "settings": dict(settings),
        "cpu_has_bf16": cpu_has_bf16(),
        "training_step": steps,
        "kernels": kernel_times,
        "provenance": {
            **provenance(profile, device, [0]),
            "threads": torch.get_num_threads(),
            "wall_time_s": time.perf_counter() - start,
        },
    }
    if progress:
        print(format_results(results))
    return results


def format_results(results: dict) -> str:
    """The medians and ratios as text."""
    steps = results["training_step"]
    lines = [f"training step (native bf16: {results['cpu_has_bf16']}):"]
    for name, row in steps["precisions"].items():
        lines.append(
            f"  {name:15s} {row['median_s'] * 1e3:8.1f} ms "
            f" {steps['speedup_vs_float32'][name]:4.2f}x float32  initial loss"
            f" {row['initial_loss']:.4f}"
        )
    for dtype, calls in results["kernels"].items():
        lines.append(
            f"{dtype}: "
            + ", ".join(
                f"{name} {row['median_s'] * 1e3:.2f} ms"
                for name, row in calls.items()
            )
        )
    return "\n".join(lines)


def main() -> None:
    profile_main(__doc__, NAME, DURATIONS, SETTINGS, run)


if __name__ == "__main__":
    main()
