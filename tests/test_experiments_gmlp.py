"""Smoke test of mixers.experiments.gmlp: the structure of its results, in seconds."""

import json
import math

import pytest
import torch

from mixers.experiments import gmlp
from mixers.gmlp import GatedMLP, SpatialGatingUnit, gmlp_param_count, toeplitz_score
from mixers.model import TOKEN_MIXERS, LanguageModel, ModelConfig

from helpers import run_smoke_restoring_threads

SMOKE = gmlp.SETTINGS["smoke"]


def test_d_ff_mixers_are_registered_and_read_d_ff():
    assert {"gmlp_d_ff", "amlp_d_ff"} <= set(TOKEN_MIXERS)
    for name, tiny in (("gmlp_d_ff", False), ("amlp_d_ff", True)):
        config = ModelConfig(vocab_size=65, d_model=16, n_layers=1, n_heads=2, block_size=8, d_ff=20,
                             token_mixer=name, channel_mixer="none", positions="none")
        mixer = LanguageModel(config).blocks[0].token_mixer
        assert isinstance(mixer, GatedMLP) and mixer.d_ffn == 20 and mixer.sgu.causal
        assert mixer.sgu.seq_len == 8 and (mixer.attention is not None) == tiny
        default = LanguageModel(ModelConfig(vocab_size=65, d_model=16, n_layers=1, n_heads=2, block_size=8,
                                            token_mixer=name, channel_mixer="none"))
        assert default.blocks[0].token_mixer.d_ffn == 6 * 16


@pytest.mark.parametrize("target, d_model, seq_len, tiny", [(198272, 128, 64, False), (198272, 128, 64, True),
                                                            (49664, 64, 32, False), (1000, 8, 4, True)])
def test_matched_d_ffn_is_the_closest_even_width(target, d_model, seq_len, tiny):
    d_ffn = gmlp.matched_d_ffn(target, d_model, seq_len, tiny)
    assert d_ffn % 2 == 0
    error = abs(gmlp_param_count(d_model, d_ffn, seq_len, tiny) - target)
    for other in range(2, 4 * d_ffn + 4, 2):
        assert error <= abs(gmlp_param_count(d_model, other, seq_len, tiny) - target)


def test_recorder_saves_w_before_the_nth_update_and_ignores_eval_mode():
    torch.manual_seed(0)
    sgu = SpatialGatingUnit(4, 5, causal=True)
    optimizer = torch.optim.SGD(sgu.parameters(), lr=0.1)
    history = []
    with gmlp.SpatialWeightRecorder([0, 2]) as recorder:
        for _ in range(3):
            history.append(sgu.spatial_weight().detach().clone())
            sgu(torch.randn(2, 5, 4)).square().sum().backward()
            optimizer.step()
            optimizer.zero_grad()
            with torch.no_grad():
                sgu.eval()
                sgu(torch.randn(1, 5, 4))  # not a training step
                sgu.train()
    sgu(torch.randn(1, 5, 4))  # outside the context: not recorded
    assert recorder.calls[sgu] == 3 and set(recorder.snapshots[sgu]) == {0, 2}
    assert torch.equal(recorder.snapshots[sgu][0], history[0]) and torch.equal(recorder.snapshots[sgu][2], history[2])
    assert not torch.equal(history[0], history[2])


@pytest.fixture(scope="module")
def results():
    return run_smoke_restoring_threads(gmlp.run)


def test_smoke_run_trains_three_arms_like_for_like(results):
    assert results["experiment"] == "gmlp"
    runs = results["runs"]
    assert list(runs) == ["transformer", "gmlp", "amlp"]
    steps = SMOKE["train"]["steps"]
    configs = {name: run["result"]["model_config"] for name, run in runs.items()}
    assert configs["transformer"]["token_mixer"] == "attention" and configs["transformer"]["channel_mixer"] == "gelu"
    assert configs["gmlp"]["token_mixer"] == "gmlp_d_ff" and configs["amlp"]["token_mixer"] == "amlp_d_ff"
    budget = results["settings"]["block_budget"]
    for name, run in runs.items():
        result = run["result"]
        assert result["train_config"] == runs["transformer"]["result"]["train_config"]  # same seed, steps, data
        assert result["train_config"]["compile"] is False  # the recorder's hook must run eagerly
        assert result["steps"][-1] == steps and len(result["val_loss"]) == len(result["steps"])
        assert all(math.isfinite(v) for v in result["val_loss"] + result["train_loss"])
        assert result["val_loss"][-1] < math.log(65)  # it learned something
        assert abs(run["block_parameters"] - budget) / budget < 0.01  # parameters matched per block
        assert result["tokens_per_s"] > 0 and math.isfinite(run["full_val_loss"])
        assert run["sample"].startswith("ROMEO:\n") and len(run["sample"]) == len("ROMEO:\n") + SMOKE["sample_tokens"]
        if name != "transformer":
            assert run["d_ffn"] == result["model_config"]["d_ff"]
            assert configs[name]["channel_mixer"] == "none" and configs[name]["positions"] == "none"


def test_smoke_run_saves_every_layers_w_at_each_snapshot(results):
    n_layers, seq_len = SMOKE["model"]["n_layers"], SMOKE["model"]["block_size"]
    expected_steps = sorted(set(SMOKE["snapshot_steps"]) | {SMOKE["train"]["steps"]})
    assert results["settings"]["snapshot_steps"] == expected_steps
    assert "spatial_weights" not in results["runs"]["transformer"]
    for name in ("gmlp", "amlp"):
        saved = results["runs"][name]["spatial_weights"]
        assert saved["steps"] == expected_steps
        assert len(saved["weights"]) == len(saved["toeplitz_score"]) == len(saved["diagonal_means"]) == len(expected_steps)
        for weights, scores, means in zip(saved["weights"], saved["toeplitz_score"], saved["diagonal_means"]):
            assert len(weights) == len(scores) == len(means) == n_layers
            for w, score, m in zip(weights, scores, means):
                w = gmlp.weight_from_rows(w)
                assert w.shape == (seq_len, seq_len) and torch.all(w.triu(1) == 0)  # causal
                assert score == pytest.approx(toeplitz_score(w), abs=1e-3) and len(m) == seq_len
        initial = torch.stack([gmlp.weight_from_rows(w) for w in saved["weights"][0]])
        final = torch.stack([gmlp.weight_from_rows(w) for w in saved["weights"][-1]])
        assert initial.abs().max() <= 0.01  # W ~ uniform(±0.01) at initialisation
        assert not torch.equal(initial, final)  # and training moved it


def test_weight_from_rows_rebuilds_the_lower_triangle():
    w = torch.randn(5, 5).tril()
    rows = [w[i, : i + 1].tolist() for i in range(5)]
    assert torch.equal(gmlp.weight_from_rows(rows), w)
    with pytest.raises(ValueError, match="rows"):
        gmlp.weight_from_rows([[1.0, 2.0], [3.0]])


def test_smoke_results_have_provenance_and_serialise(results):
    prov = results["provenance"]
    assert prov["profile"] == "smoke" and prov["wall_time_s"] > 0
    for key in ("device", "torch", "git_commit", "date", "seeds"):
        assert key in prov
    assert json.loads(json.dumps(results))["runs"]["gmlp"]["spatial_weights"]["steps"] == results["settings"]["snapshot_steps"]


def test_unknown_profile_is_rejected():
    with pytest.raises(ValueError, match="profile"):
        gmlp.run("huge", progress=False)
