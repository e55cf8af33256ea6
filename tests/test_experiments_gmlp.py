"""Smoke test of mixers.experiments.gmlp: the structure of its results, in seconds, and a run that
survives an interruption."""

import json
import math

import pytest
import torch
from helpers import run_smoke_restoring_threads

from mixers.experiments import gmlp, partial_path, save_runs
from mixers.gmlp import (
    GatedMLP,
    SpatialGatingUnit,
    gmlp_param_count,
    toeplitz_score,
)
from mixers.model import TOKEN_MIXERS, LanguageModel, ModelConfig
from mixers.results import to_json, without_timings
from mixers.train import TrainingDiverged

SMOKE = gmlp.SETTINGS["smoke"]


def test_the_arms_use_the_package_mixers_which_read_d_ff():
    # No experiment-registered mixers: the package's gmlp/amlp read d_ffn from ModelConfig.d_ff.
    assert not any(name.endswith("_d_ff") for name in TOKEN_MIXERS)
    assert (
        gmlp.ARMS["gmlp"]["token_mixer"] == "gmlp"
        and gmlp.ARMS["amlp"]["token_mixer"] == "amlp"
    )
    for name, tiny in (("gmlp", False), ("amlp", True)):
        config = ModelConfig(
            vocab_size=65,
            d_model=16,
            n_layers=1,
            n_heads=2,
            block_size=8,
            d_ff=20,
            token_mixer=name,
        )
        assert config.channel_mixer == "none" and config.positions == "none"
        mixer = LanguageModel(config).blocks[0].token_mixer
        assert (
            isinstance(mixer, GatedMLP)
            and mixer.d_ffn == 20
            and mixer.sgu.causal
        )
        assert mixer.sgu.seq_len == 8 and (mixer.attention is not None) == tiny
        default = LanguageModel(
            ModelConfig(
                vocab_size=65,
                d_model=16,
                n_layers=1,
                n_heads=2,
                block_size=8,
                token_mixer=name,
                channel_mixer="none",
            )
        )
        assert default.blocks[0].token_mixer.d_ffn == 6 * 16


@pytest.mark.parametrize(
    "target, d_model, seq_len, tiny",
    [
        (198272, 128, 64, False),
        (198272, 128, 64, True),
        (49664, 64, 32, False),
        (1000, 8, 4, True),
    ],
)
def test_matched_d_ffn_is_the_closest_even_width(
    target, d_model, seq_len, tiny
):
    d_ffn = gmlp.matched_d_ffn(target, d_model, seq_len, tiny)
    assert d_ffn % 2 == 0
    error = abs(gmlp_param_count(d_model, d_ffn, seq_len, tiny) - target)
    for other in range(2, 4 * d_ffn + 4, 2):
        assert error <= abs(
            gmlp_param_count(d_model, other, seq_len, tiny) - target
        )


def test_recorder_saves_every_layers_w_after_n_steps_as_trains_callback(
    shakespeare,
):
    from mixers.train import TrainConfig, train

    config = ModelConfig(
        vocab_size=65,
        d_model=16,
        n_layers=2,
        n_heads=2,
        block_size=8,
        d_ff=20,
        token_mixer="gmlp",
    )
    torch.manual_seed(0)
    model = LanguageModel(config)
    units = [m for m in model.modules() if isinstance(m, SpatialGatingUnit)]
    initial = [unit.spatial_weight().detach().clone() for unit in units]
    seen = {}

    def spy(
        info,
    ):  # W of the first layer as train() hands the model over, step by step
        seen[info.step] = units[0].spatial_weight().detach().clone()
        recorder(info)

    recorder = gmlp.SpatialWeightRecorder([0, 2, 5])
    train(
        model,
        shakespeare,
        TrainConfig(
            steps=5,
            batch_size=4,
            seq_len=8,
            warmup_steps=1,
            eval_interval=5,
            eval_batches=1,
        ),
        device="cpu",
        progress=False,
        callback=spy,
    )
    assert sorted(recorder.snapshots) == [0, 2, 5] and sorted(seen) == list(
        range(6)
    )
    for step, layers in recorder.snapshots.items():
        assert len(layers) == 2 and all(
            w.shape == (8, 8) and w.dtype == torch.float32 for w in layers
        )
        assert torch.equal(
            layers[0], seen[step]
        )  # W after `step` optimizer steps
    assert all(
        torch.equal(w, w0) for w, w0 in zip(recorder.snapshots[0], initial)
    )  # step 0: initialisation
    assert all(
        torch.equal(w, unit.spatial_weight().detach())
        for w, unit in zip(recorder.snapshots[5], units)
    )
    assert not torch.equal(recorder.snapshots[0][0], recorder.snapshots[2][0])


@pytest.fixture(scope="module")
def results():
    return run_smoke_restoring_threads(gmlp.run)


def test_smoke_run_trains_three_arms_like_for_like(results):
    assert results["experiment"] == "gmlp"
    runs = results["runs"]
    assert list(runs) == ["transformer", "gmlp", "amlp"]
    steps = SMOKE["train"]["steps"]
    configs = {
        name: run["result"]["model_config"] for name, run in runs.items()
    }
    assert (
        configs["transformer"]["token_mixer"] == "attention"
        and configs["transformer"]["channel_mixer"] == "gelu"
    )
    assert (
        configs["gmlp"]["token_mixer"] == "gmlp"
        and configs["amlp"]["token_mixer"] == "amlp"
    )
    assert (
        configs["gmlp"]["channel_mixer"] == "none"
        and configs["gmlp"]["positions"] == "none"
    )
    budget = results["settings"]["block_budget"]
    for name, run in runs.items():
        result = run["result"]
        assert (
            result["train_config"]
            == runs["transformer"]["result"]["train_config"]
        )  # same seed, steps, data
        assert (
            result["train_config"]["compile"] is False
        )  # the smoke profile trains eagerly
        assert result["steps"][-1] == steps and len(result["val_loss"]) == len(
            result["steps"]
        )
        assert all(
            math.isfinite(v) for v in result["val_loss"] + result["train_loss"]
        )
        assert result["val_loss"][-1] < math.log(65)  # it learned something
        assert (
            abs(run["block_parameters"] - budget) / budget < 0.01
        )  # parameters matched per block
        assert result["tokens_per_s"] > 0 and math.isfinite(
            run["full_val_loss"]
        )
        assert (
            run["sample"].startswith("ROMEO:\n")
            and len(run["sample"]) == len("ROMEO:\n") + SMOKE["sample_tokens"]
        )
        if name != "transformer":
            assert run["d_ffn"] == result["model_config"]["d_ff"]
            assert (
                configs[name]["channel_mixer"] == "none"
                and configs[name]["positions"] == "none"
            )


def test_smoke_run_saves_every_layers_w_at_each_snapshot(results):
    n_layers, seq_len = (
        SMOKE["model"]["n_layers"],
        SMOKE["model"]["block_size"],
    )
    expected_steps = sorted(
        set(SMOKE["snapshot_steps"]) | {SMOKE["train"]["steps"]}
    )
    assert results["settings"]["snapshot_steps"] == expected_steps
    assert "spatial_weights" not in results["runs"]["transformer"]
    for name in ("gmlp", "amlp"):
        saved = results["runs"][name]["spatial_weights"]
        assert saved["steps"] == expected_steps
        assert (
            len(saved["weights"])
            == len(saved["toeplitz_score"])
            == len(saved["diagonal_means"])
            == len(expected_steps)
        )
        for weights, scores, means in zip(
            saved["weights"], saved["toeplitz_score"], saved["diagonal_means"]
        ):
            assert len(weights) == len(scores) == len(means) == n_layers
            for w, score, m in zip(weights, scores, means):
                w = gmlp.weight_from_rows(w)
                assert w.shape == (seq_len, seq_len) and torch.all(
                    w.triu(1) == 0
                )  # causal
                assert (
                    score == pytest.approx(toeplitz_score(w), abs=1e-3)
                    and len(m) == seq_len
                )
        initial = torch.stack(
            [gmlp.weight_from_rows(w) for w in saved["weights"][0]]
        )
        final = torch.stack(
            [gmlp.weight_from_rows(w) for w in saved["weights"][-1]]
        )
        assert (
            initial.abs().max() <= 0.01
        )  # W ~ uniform(±0.01) at initialisation
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
    assert (
        json.loads(to_json(results))["runs"]["gmlp"]["spatial_weights"][
            "steps"
        ]
        == results["settings"]["snapshot_steps"]
    )


def test_unknown_profile_is_rejected():
    with pytest.raises(ValueError, match="profile"):
        gmlp.run("huge", progress=False)


def test_an_interrupted_run_resumes_with_the_same_results(
    results, tmp_path, monkeypatch, capsys
):
    real, jobs, interrupted = gmlp.run_one, [], []

    def interrupt_the_second_run(
        dataset, profile, settings, label, lr, progress=False
    ):
        jobs.append((label, lr))
        if len(jobs) == 2 and not interrupted:
            interrupted.append(True)
            raise KeyboardInterrupt  # a Ctrl-C in the second run, the first time
        return real(dataset, profile, settings, label, lr, progress)

    monkeypatch.setattr(gmlp, "run_one", interrupt_the_second_run)
    with pytest.raises(KeyboardInterrupt), save_runs(tmp_path):
        gmlp.run("smoke", progress=False)
    saved = json.loads(partial_path("gmlp", "smoke", tmp_path).read_text())
    total = 3 * len(SMOKE["lrs"])
    assert [(run["label"], run["lr"]) for run in saved["runs"]] == [
        jobs[0]
    ] and saved["runs_total"] == total
    first = jobs[0]
    jobs.clear()
    with save_runs(tmp_path):
        resumed = gmlp.run("smoke", progress=False)
    assert (
        f"resuming: 1 of {total} runs already done" in capsys.readouterr().out
    )
    assert (
        first not in jobs and len(jobs) == total - 1
    )  # only the missing runs ran
    assert without_timings(resumed) == without_timings(
        results
    )  # the numbers of a run never interrupted


def _sweep_record(label, lr, loss, diverged=False):
    return {
        "label": label,
        "lr": lr,
        "diverged": diverged,
        "full_val_loss": None if diverged else loss + 0.01,
        "result": None if diverged else {"best_val_loss": loss},
    }


def test_each_arm_is_reported_at_its_own_best_rate_and_the_sweep_is_kept():
    lrs = [1e-3, 2e-3, 4e-3]
    records = [
        _sweep_record("transformer", 1e-3, 1.9),
        _sweep_record("transformer", 2e-3, 1.7),
        _sweep_record("transformer", 4e-3, 1.8),
        _sweep_record("gmlp", 1e-3, 1.8),
        _sweep_record("gmlp", 2e-3, 1.6),
        _sweep_record("gmlp", 4e-3, 1.5),
        _sweep_record("amlp", 1e-3, 1.7),
        _sweep_record("amlp", 2e-3, 1.0, diverged=True),
        _sweep_record("amlp", 4e-3, 1.75),
    ]
    runs, sweep = gmlp.best_rates(records, {"lrs": lrs})
    assert list(runs) == ["transformer", "gmlp", "amlp"]
    assert {label: run["lr"] for label, run in runs.items()} == {
        "transformer": 2e-3,
        "gmlp": 4e-3,
        "amlp": 1e-3,  # a diverged run never wins
    }
    assert {label: run["best_lr_at_edge"] for label, run in runs.items()} == {
        "transformer": False,
        "gmlp": True,
        "amlp": True,
    }
    assert [row["lr"] for row in sweep["amlp"]] == lrs
    assert sweep["amlp"][1] == {
        "lr": 2e-3,
        "diverged": True,
        "best_val_loss": None,
        "full_val_loss": None,
    }
    assert sweep["gmlp"][2]["full_val_loss"] == pytest.approx(1.51)


def test_an_arm_whose_every_rate_diverged_is_an_error_that_names_it():
    records = [_sweep_record("gmlp", 1e-3, 0.0, diverged=True)]
    with pytest.raises(TrainingDiverged, match="gmlp"):
        gmlp.best_rates(records, {"lrs": [1e-3]})


def test_two_workers_give_the_same_results_as_one(results):
    two = run_smoke_restoring_threads(gmlp.run, workers=2)
    assert without_timings(two) == without_timings(results)


def test_the_command_line_refuses_workers_where_the_experiment_has_none(
    tmp_path, capsys
):
    from mixers.experiments import baseline, main

    argv = ["--profile", "smoke", "--out", str(tmp_path), "--workers", "2"]
    with pytest.raises(SystemExit) as info:
        main("baseline", baseline.run, "x", {}, argv)
    assert info.value.code == 2
    assert "--workers: the baseline experiment runs one job" in (
        capsys.readouterr().err
    )
