"""Smoke test of mixers.experiments.attention_scaling: the structure of its results, in seconds; a
run that survives an interruption, and a resume that refuses other settings."""

import itertools
import json
import math

import pytest
from helpers import run_smoke_restoring_threads

from mixers.attention import MultiHeadAttention
from mixers.experiments import attention_scaling, main, partial_path, save_runs
from mixers.model import TOKEN_MIXERS, LanguageModel, ModelConfig
from mixers.results import to_json, without_timings


def test_the_unscaled_arm_is_the_package_attention_with_scale_one():
    # No experiment-registered mixer: the arm is ModelConfig.attention_scale.
    assert attention_scaling.ARMS == {"scaled": None, "unscaled": 1.0}
    assert not any(name.startswith("attention_") for name in TOKEN_MIXERS)
    config = ModelConfig(
        vocab_size=65,
        d_model=32,
        n_layers=1,
        n_heads=2,
        block_size=8,
        attention_scale=attention_scaling.ARMS["unscaled"],
    )
    mixer = LanguageModel(config).blocks[0].token_mixer
    assert (
        isinstance(mixer, MultiHeadAttention)
        and mixer.scale == 1.0
        and mixer.causal
    )


@pytest.fixture(scope="module")
def results():
    return run_smoke_restoring_threads(attention_scaling.run)


def test_smoke_run_has_every_pair_with_curves_and_diagnostics(results):
    settings = attention_scaling.SETTINGS["smoke"]
    assert results["experiment"] == "attention_scaling"
    runs = results["runs"]
    pairs = [(run["d_head"], run["scaled"]) for run in runs]
    assert pairs == [
        (d, s) for d in settings["head_sizes"] for s in (True, False)
    ]
    d_model, n_layers = (
        settings["model"]["d_model"],
        settings["model"]["n_layers"],
    )
    steps = settings["train"]["steps"]
    for run in runs:
        assert run["n_heads"] * run["d_head"] == d_model
        assert run["scale"] == (
            1 / math.sqrt(run["d_head"]) if run["scaled"] else 1.0
        )
        assert run["token_mixer"] == "attention"
        result = run["result"]
        assert result["model_config"]["token_mixer"] == "attention"
        assert result["model_config"]["attention_scale"] == (
            None if run["scaled"] else 1.0
        )
        assert result["model_config"]["n_heads"] == run["n_heads"]
        assert result["steps"][-1] == steps and len(result["val_loss"]) == len(
            result["steps"]
        )
        assert all(
            math.isfinite(v) for v in result["val_loss"] + result["train_loss"]
        )
        assert result["val_loss"][-1] < math.log(65)  # it learned something
        for stage in ("initial", "final"):
            for key, values in run[stage].items():
                assert len(values) == n_layers and all(
                    math.isfinite(v) for v in values
                ), (stage, key)
            assert all(
                0 < e <= u + 1e-6
                for e, u in zip(
                    run[stage]["entropy"], run[stage]["entropy_uniform"]
                )
            )
    # Same parameters in every run: only the scale and the split into heads differ.
    assert len({run["result"]["parameters"] for run in runs}) == 1


def test_smoke_run_shows_the_scale_at_initialisation(results):
    by_key = {
        (run["d_head"], run["scaled"]): run["initial"]
        for run in results["runs"]
    }
    for d_head in attention_scaling.SETTINGS["smoke"]["head_sizes"]:
        scaled, unscaled = by_key[d_head, True], by_key[d_head, False]
        # Unit-variance-ish q and k: scaled scores have std ~ 1, un-scaled ones ~ sqrt(d_head).
        assert all(0.7 < s < 1.4 for s in scaled["score_std"])
        # Same initial weights: the first layer sees the same input, so the ratio is exact there;
        # later layers see inputs that the first layer's (different) attention has already mixed.
        assert unscaled["score_std"][0] / scaled["score_std"][
            0
        ] == pytest.approx(math.sqrt(d_head), rel=1e-4)
        for s, u in zip(scaled["score_std"][1:], unscaled["score_std"][1:]):
            assert u / s == pytest.approx(math.sqrt(d_head), rel=0.3)
        assert all(
            u < s for s, u in zip(scaled["entropy"], unscaled["entropy"])
        )


def test_smoke_results_have_provenance_and_serialise(results):
    prov = results["provenance"]
    assert prov["profile"] == "smoke" and prov["wall_time_s"] > 0
    for key in ("device", "torch", "git_commit", "date", "seeds"):
        assert key in prov
    assert (
        json.loads(to_json(results))["runs"][0]["result"]["val_loss"]
        == results["runs"][0]["result"]["val_loss"]
    )


def test_unknown_profile_is_rejected():
    with pytest.raises(ValueError, match="profile"):
        attention_scaling.run("huge", progress=False)


def _interrupt_the_second_run(monkeypatch) -> list:
    """Make ``run_one`` raise KeyboardInterrupt (a Ctrl-C) the second time it is called, and only
    then; return the list of the (d_head, scaled) of the runs it trains."""
    real, jobs, calls = attention_scaling.run_one, [], itertools.count(1)

    def run_one(dataset, profile, settings, d_head, scaled, progress=False):
        if next(calls) == 2:
            raise KeyboardInterrupt
        jobs.append((d_head, scaled))
        return real(dataset, profile, settings, d_head, scaled, progress)

    monkeypatch.setattr(attention_scaling, "run_one", run_one)
    return jobs


def test_an_interrupted_run_resumes_with_the_same_results(
    results, tmp_path, monkeypatch, capsys
):
    jobs = _interrupt_the_second_run(monkeypatch)
    with pytest.raises(KeyboardInterrupt), save_runs(tmp_path):
        attention_scaling.run("smoke", progress=False)
    saved = json.loads(
        partial_path("attention_scaling", "smoke", tmp_path).read_text()
    )
    assert (
        [(run["d_head"], run["scaled"]) for run in saved["runs"]]
        == jobs
        == [(16, True)]
    )
    jobs.clear()
    with save_runs(tmp_path):
        resumed = attention_scaling.run("smoke", progress=False)
    assert "resuming: 1 of 4 runs already done" in capsys.readouterr().out
    assert jobs == [
        (16, False),
        (64, True),
        (64, False),
    ]  # only the missing runs ran
    assert without_timings(resumed) == without_timings(
        results
    )  # the numbers of a run never interrupted


def test_the_command_line_refuses_to_resume_with_other_settings(
    tmp_path, monkeypatch, capsys
):
    def cli():
        main(
            attention_scaling.NAME,
            attention_scaling.run,
            "a test",
            attention_scaling.DURATIONS,
            ["--profile", "smoke", "--out", str(tmp_path), "--no-progress"],
        )

    monkeypatch.setitem(
        attention_scaling.SETTINGS["smoke"], "head_sizes", (16,)
    )
    _interrupt_the_second_run(monkeypatch)
    with pytest.raises(SystemExit) as info:
        cli()
    path = partial_path("attention_scaling", "smoke", tmp_path)
    assert info.value.code == 130
    assert (
        f"the finished runs are saved in {path}; rerun the same command to resume"
        in capsys.readouterr().err
    )
    monkeypatch.setitem(
        attention_scaling.SETTINGS["smoke"], "head_sizes", (16, 64)
    )
    monkeypatch.setitem(
        attention_scaling.SETTINGS["smoke"],
        "train",
        {**attention_scaling.SETTINGS["smoke"]["train"], "steps": 20},
    )
    with pytest.raises(SystemExit) as info:
        cli()
    err = capsys.readouterr().err
    assert (
        info.value.code == 2
        and f"{path} holds 1 run made with other settings" in err
    )
    assert (
        "head_sizes: saved [16], now [16, 64]; train.steps: saved 40, now 20"
        in err
        and "--fresh" in err
    )
    assert (
        len(json.loads(path.read_text())["runs"]) == 1
    )  # the saved run is kept
