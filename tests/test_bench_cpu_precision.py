"""Tests of mixers.bench.cpu_precision: it measures what it says, on the smoke profile's model."""

import pytest
import torch

from mixers.bench import cpu_precision
from mixers.data import CharDataset, random_batch
from mixers.train import build_model, get_profile


@pytest.fixture(scope="module")
def results():
    return cpu_precision.run("smoke", progress=False)


def test_every_precision_is_timed_and_compared_with_float32(results):
    steps = results["training_step"]
    assert set(steps["precisions"]) == set(cpu_precision.PRECISIONS)
    for name, row in steps["precisions"].items():
        assert len(row["times_s"]) == results["settings"]["repeats"]
        assert steps["speedup_vs_float32"][name] == pytest.approx(
            steps["precisions"]["float32"]["median_s"] / row["median_s"]
        )
    assert set(results["kernels"]) == {"float32", "bfloat16"}
    assert results["provenance"]["profile"] == "smoke"


def test_initial_losses_are_the_models_loss_in_each_precision(results):
    # float32: exactly the model's loss on the benchmark's batch, computed here independently.
    profile = get_profile("smoke")
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
    with torch.no_grad():
        expected = model(x, y)[1].item()
    losses = {
        name: row["initial_loss"]
        for name, row in results["training_step"]["precisions"].items()
    }
    assert losses["float32"] == expected
    # bf16 rounds the products' inputs: the same function, to about three significant digits.
    for name in ("bf16", "bf16_fp32_attn"):
        assert losses[name] == pytest.approx(expected, abs=0.02)


def test_unknown_profile_is_rejected():
    with pytest.raises(ValueError, match="profile must be one of"):
        cpu_precision.run("gpu", progress=False)


def test_only_the_bf16_replica_runs_torchs_attention_in_bf16():
    # The switch is the layers' own option, not a patched module function: nothing else changes.
    from mixers.attention import MultiHeadAttention

    torch.manual_seed(0)
    model = build_model(65, get_profile("smoke"))
    for name in cpu_precision.PRECISIONS:
        replica = cpu_precision._replica(model, name)
        layers = [
            m for m in replica.modules() if isinstance(m, MultiHeadAttention)
        ]
        assert layers and all(
            getattr(m, "cpu_bf16_sdpa_in_float32", True) == (name != "bf16")
            for m in layers
        )
        for a, b in zip(replica.parameters(), model.parameters()):
            assert a is not b and torch.equal(
                a, b
            )  # a copy with the same weights
    assert all(
        getattr(m, "cpu_bf16_sdpa_in_float32", True)
        for m in model.modules()
        if isinstance(m, MultiHeadAttention)
    )  # the original is untouched
