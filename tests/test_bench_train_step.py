"""The training-step benchmark (mixers.bench.train_step): its nanoGPT-style reference is a causal
language model of the same sizes, and a smoke run reports a ratio for every mixer. Timings are
never asserted: the benchmark prints them."""

import math

import torch

from mixers.bench import train_step
from mixers.model import ModelConfig


def test_the_reference_is_a_causal_language_model_with_tied_embeddings():
    config = ModelConfig(
        vocab_size=65, block_size=16, d_model=32, n_layers=2, n_heads=4
    )
    torch.manual_seed(0)
    model = train_step.NanoGPTStyle(config).eval()
    assert model.lm_head.weight is model.wte.weight
    idx = torch.randint(0, 65, (2, 16))
    changed = idx.clone()
    changed[:, 9] = (changed[:, 9] + 1) % 65  # a later token changes
    with torch.no_grad():
        logits, loss = model(idx, idx)
        logits_changed, _ = model(changed, changed)
    assert torch.equal(
        logits[:, :9], logits_changed[:, :9]
    )  # nothing before it moves
    assert not torch.equal(logits[:, 9:], logits_changed[:, 9:])
    assert (
        abs(loss.item() - math.log(65)) < 1.0
    )  # about a uniform guess at initialisation


def test_the_models_share_their_sizes():
    models = train_step.build_models("smoke")
    assert list(models) == ["nanogpt", *train_step.MIXERS]
    counts = {
        name: sum(p.numel() for p in m.parameters())
        for name, m in models.items()
    }
    # nanoGPT ties its output to its embedding; the package keeps a separate head (65 x d_model)
    # and ALiBi and rotary have no position table: every count is within 10 % of the reference
    assert all(
        abs(c / counts["nanogpt"] - 1) < 0.1 for c in counts.values()
    ), counts


def test_a_smoke_run_reports_each_mixers_ratio_to_nanogpt():
    result = train_step.run("smoke", progress=False)
    ratios = result["results"]["ratio_to_nanogpt"]
    assert sorted(ratios) == sorted(train_step.MIXERS)
    assert all(math.isfinite(r) and r > 0 for r in ratios.values())
    assert result["target"] == train_step.CPU_TARGETS
    assert result["provenance"]["precision"] in (
        "float32",
        "bfloat16 autocast",
    )
    assert result["provenance"]["device"] is not None
    line = train_step.format_row(result["results"], result["target"])
    assert all(f"{mixer}: " in line for mixer in train_step.MIXERS)


def test_each_ratio_is_printed_beside_its_target():
    row = {"ratio_to_nanogpt": {"attention": 0.97, "alibi": 1.2, "rotary": 1}}
    lines = train_step.format_row(row, train_step.GPU_TARGETS).splitlines()
    assert lines == [
        "attention: 0.97x nanoGPT's step (target <= 1.00x, met)",
        "alibi: 1.20x nanoGPT's step (target <= 1.00x, missed)",
        "rotary: 1.00x nanoGPT's step (target <= 1.05x, met)",
    ]


def test_the_gpu_profile_trains_as_the_gpu_runs_do():
    settings = train_step.SETTINGS["gpu"]
    assert settings["device"] == "cuda" and settings["compile"]
    assert settings["amp"] and settings["batch_size"] == 64
    assert train_step.targets("gpu") == train_step.GPU_TARGETS
    assert train_step.targets("smoke") == train_step.CPU_TARGETS


def test_the_reference_runs_where_its_input_is():
    config = ModelConfig(
        vocab_size=65, block_size=8, d_model=16, n_layers=1, n_heads=2
    )
    model = train_step.NanoGPTStyle(config).to("meta")
    idx = torch.zeros(2, 8, dtype=torch.long, device="meta")
    logits, _ = model(idx, idx)  # positions made on idx's device
    assert logits.device.type == "meta"


def test_the_command_line_saves_the_run(tmp_path, monkeypatch, capsys):
    import json
    import sys

    monkeypatch.setattr(
        sys,
        "argv",
        ["train_step", "--profile", "smoke", "--out", str(tmp_path)],
    )
    train_step.main()
    saved = json.loads((tmp_path / "train_step-smoke.json").read_text())
    assert saved["experiment"] == "train_step"
    assert sorted(saved["results"]["ratio_to_nanogpt"]) == sorted(
        train_step.MIXERS
    )
    assert "wrote" in capsys.readouterr().out
