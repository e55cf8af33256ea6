"""Smoke test of mixers.experiments.attention_scaling: the structure of its results, in seconds."""

import json
import math

import pytest

from mixers.attention import MultiHeadAttention
from mixers.experiments import attention_scaling
from mixers.model import TOKEN_MIXERS, LanguageModel, ModelConfig
from mixers.results import to_json

from helpers import run_smoke_restoring_threads


def test_the_unscaled_arm_is_the_package_attention_with_scale_one():
    # No experiment-registered mixer: the arm is ModelConfig.attention_scale.
    assert attention_scaling.ARMS == {"scaled": None, "unscaled": 1.0}
    assert not any(name.startswith("attention_") for name in TOKEN_MIXERS)
    config = ModelConfig(vocab_size=65, d_model=32, n_layers=1, n_heads=2, block_size=8,
                         attention_scale=attention_scaling.ARMS["unscaled"])
    mixer = LanguageModel(config).blocks[0].token_mixer
    assert isinstance(mixer, MultiHeadAttention) and mixer.scale == 1.0 and mixer.causal


@pytest.fixture(scope="module")
def results():
    return run_smoke_restoring_threads(attention_scaling.run)


def test_smoke_run_has_every_pair_with_curves_and_diagnostics(results):
    settings = attention_scaling.SETTINGS["smoke"]
    assert results["experiment"] == "attention_scaling"
    runs = results["runs"]
    pairs = [(run["d_head"], run["scaled"]) for run in runs]
    assert pairs == [(d, s) for d in settings["head_sizes"] for s in (True, False)]
    d_model, n_layers = settings["model"]["d_model"], settings["model"]["n_layers"]
    steps = settings["train"]["steps"]
    for run in runs:
        assert run["n_heads"] * run["d_head"] == d_model
        assert run["scale"] == (1 / math.sqrt(run["d_head"]) if run["scaled"] else 1.0)
        assert run["token_mixer"] == "attention"
        result = run["result"]
        assert result["model_config"]["token_mixer"] == "attention"
        assert result["model_config"]["attention_scale"] == (None if run["scaled"] else 1.0)
        assert result["model_config"]["n_heads"] == run["n_heads"]
        assert result["steps"][-1] == steps and len(result["val_loss"]) == len(result["steps"])
        assert all(math.isfinite(v) for v in result["val_loss"] + result["train_loss"])
        assert result["val_loss"][-1] < math.log(65)  # it learned something
        for stage in ("initial", "final"):
            for key, values in run[stage].items():
                assert len(values) == n_layers and all(math.isfinite(v) for v in values), (stage, key)
            assert all(0 < e <= u + 1e-6 for e, u in zip(run[stage]["entropy"], run[stage]["entropy_uniform"]))
    # Same parameters in every run: only the scale and the split into heads differ.
    assert len({run["result"]["parameters"] for run in runs}) == 1


def test_smoke_run_shows_the_scale_at_initialisation(results):
    by_key = {(run["d_head"], run["scaled"]): run["initial"] for run in results["runs"]}
    for d_head in attention_scaling.SETTINGS["smoke"]["head_sizes"]:
        scaled, unscaled = by_key[d_head, True], by_key[d_head, False]
        # Unit-variance-ish q and k: scaled scores have std ~ 1, un-scaled ones ~ sqrt(d_head).
        assert all(0.7 < s < 1.4 for s in scaled["score_std"])
        # Same initial weights: the first layer sees the same input, so the ratio is exact there;
        # later layers see inputs that the first layer's (different) attention has already mixed.
        assert unscaled["score_std"][0] / scaled["score_std"][0] == pytest.approx(math.sqrt(d_head), rel=1e-4)
        for s, u in zip(scaled["score_std"][1:], unscaled["score_std"][1:]):
            assert u / s == pytest.approx(math.sqrt(d_head), rel=0.3)
        assert all(u < s for s, u in zip(scaled["entropy"], unscaled["entropy"]))


def test_smoke_results_have_provenance_and_serialise(results):
    prov = results["provenance"]
    assert prov["profile"] == "smoke" and prov["wall_time_s"] > 0
    for key in ("device", "torch", "git_commit", "date", "seeds"):
        assert key in prov
    assert json.loads(to_json(results))["runs"][0]["result"]["val_loss"] == results["runs"][0]["result"]["val_loss"]


def test_unknown_profile_is_rejected():
    with pytest.raises(ValueError, match="profile"):
        attention_scaling.run("huge", progress=False)
