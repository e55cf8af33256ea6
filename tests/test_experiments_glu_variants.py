"""Smoke test of mixers.experiments.glu_variants: the structure of its results, in seconds, and
runs that survive an interruption or a diverging run, in the worker pool too."""

import json
import math

import pytest
import torch
from helpers import run_smoke_restoring_threads

from mixers.experiments import glu_variants, partial_path, save_runs
from mixers.feed_forward import (
    VARIANTS,
    feed_forward_param_count,
    matched_hidden_size,
)
from mixers.model import CHANNEL_MIXERS
from mixers.results import to_json, without_timings
from mixers.train import TrainingDiverged


@pytest.fixture(scope="module")
def results():
    return run_smoke_restoring_threads(glu_variants.run)


def test_every_variant_is_a_registered_channel_mixer():
    assert set(VARIANTS) <= set(CHANNEL_MIXERS)
    assert list(glu_variants.PAPER_TABLE_1) == list(VARIANTS)


def test_smoke_run_has_every_seed_and_variant_with_curves(results):
    settings = glu_variants.SETTINGS["smoke"]
    seeds = list(settings["seeds"])
    assert len(seeds) >= 2
    runs = results["runs"]
    assert [(run["seed"], run["variant"]) for run in runs] == [
        (s, v) for s in seeds for v in VARIANTS
    ]
    d_model = settings["model"]["d_model"]
    steps = settings["train"]["steps"]
    for run in runs:
        result = run["result"]
        assert result["model_config"]["channel_mixer"] == run["variant"]
        assert result["train_config"]["seed"] == run["seed"]
        assert result["steps"][-1] == steps and len(result["val_loss"]) == len(
            result["steps"]
        )
        assert all(
            math.isfinite(v) for v in result["val_loss"] + result["train_loss"]
        )
        assert (
            run["best_val_loss"]
            == min(result["val_loss"])
            == result["best_val_loss"]
        )
        assert math.isfinite(run["full_val_loss"]) and run["tokens_per_s"] > 0
        assert run["gated"] == VARIANTS[run["variant"]][1]
        assert run["d_ff"] == matched_hidden_size(4 * d_model, run["gated"])
        assert run["feed_forward_parameters"] == feed_forward_param_count(
            d_model, run["d_ff"], run["gated"], False, False, False
        )  # no biases
        assert run["parameters"] == result["parameters"]
        assert result["provenance"]["seeds"] == [run["seed"]]


def test_like_for_like_within_a_seed(results):
    """Per seed, the variants differ only in the channel mixer; parameters agree within 1%."""
    by_seed = {}
    for run in results["runs"]:
        by_seed.setdefault(run["seed"], []).append(run)
    for runs in by_seed.values():
        configs = [
            {
                k: v
                for k, v in run["result"]["model_config"].items()
                if k != "channel_mixer"
            }
            for run in runs
        ]
        assert all(config == configs[0] for config in configs)
        assert all(
            run["result"]["train_config"] == runs[0]["result"]["train_config"]
            for run in runs
        )
        counts = [run["parameters"] for run in runs]
        assert (max(counts) - min(counts)) / max(counts) < 0.01


def test_summary_is_mean_and_std_over_seeds(results):
    summary = results["summary"]
    assert list(summary["variants"]) == list(VARIANTS)
    assert sorted(summary["ranking_by_best_val_loss"]) == sorted(VARIANTS)
    assert summary["paper_ranking"][0] == "geglu"
    for name, row in summary["variants"].items():
        losses = [
            run["best_val_loss"]
            for run in results["runs"]
            if run["variant"] == name
        ]
        assert row["best_val_loss_mean"] == pytest.approx(
            sum(losses) / len(losses)
        )
        assert row["best_val_loss_std"] == pytest.approx(
            torch.tensor(losses, dtype=torch.float64).std().item()
        )
        assert row["paper_log_perplexity"] == glu_variants.PAPER_TABLE_1[name]
    gap = summary["gated_minus_ungated"]["best_val_loss"]
    assert len(gap["per_seed"]) == len(glu_variants.SETTINGS["smoke"]["seeds"])
    seed = glu_variants.SETTINGS["smoke"]["seeds"][0]
    mine = [run for run in results["runs"] if run["seed"] == seed]
    gated = [r["best_val_loss"] for r in mine if r["gated"]]
    ungated = [r["best_val_loss"] for r in mine if not r["gated"]]
    assert gap["per_seed"][0] == pytest.approx(
        sum(gated) / len(gated) - sum(ungated) / len(ungated)
    )


def test_smoke_results_have_provenance_and_serialise(results):
    prov = results["provenance"]
    assert prov["profile"] == "smoke" and prov["wall_time_s"] > 0
    assert prov["seeds"] == list(glu_variants.SETTINGS["smoke"]["seeds"])
    for key in ("device", "torch", "git_commit", "date", "workers"):
        assert key in prov
    assert (
        "seed_policy" in results
        and results["settings"]["seeds"] == prov["seeds"]
    )
    assert (
        json.loads(to_json(results))["runs"][0]["result"]["val_loss"]
        == results["runs"][0]["result"]["val_loss"]
    )


def _diverge_relu_in_a_worker(profile, progress, dataset, job):
    """``_run_job`` whose relu runs diverge. Defined here, at the top level, so that a spawned
    worker can import it (the workers get this process's sys.path, which holds tests/)."""
    if job[0] == "relu":
        raise TrainingDiverged("the training loss is nan at step 7")
    return glu_variants._run_job(profile, progress, dataset, job)


def test_two_worker_processes_give_the_same_runs_and_keep_them_when_one_diverges(
    results, monkeypatch
):
    """The cpu profile spreads runs over two processes: seeded runs must not notice, and a run that
    diverges in a worker is recorded there while the others are kept."""
    monkeypatch.setattr(glu_variants, "_run_job", _diverge_relu_in_a_worker)
    parallel = glu_variants.run(
        "smoke",
        progress=False,
        variants=["relu", "swiglu"],
        seeds=[1],
        workers=2,
    )
    assert parallel["provenance"]["workers"] == 2
    relu, swiglu = parallel["runs"]
    assert relu == {
        "variant": "relu",
        "seed": 1,
        "diverged": True,
        "error": "the training loss is nan at step 7",
    }
    serial = next(
        run
        for run in results["runs"]
        if run["variant"] == "swiglu" and run["seed"] == 1
    )
    assert (
        without_timings(swiglu) == without_timings(serial)
        and not swiglu["diverged"]
    )
    assert list(parallel["summary"]["variants"]) == [
        "swiglu"
    ]  # the summary is of the runs that finished


def test_an_interrupted_run_resumes_with_the_same_results(
    results, tmp_path, monkeypatch, capsys
):
    real, jobs = glu_variants.run_one, []

    def interrupt_the_second_run(
        dataset, profile, variant, seed, progress=False
    ):
        jobs.append((variant, seed))
        if len(jobs) == 2:
            raise KeyboardInterrupt  # a Ctrl-C during the second run
        return real(dataset, profile, variant, seed, progress)

    monkeypatch.setattr(glu_variants, "run_one", interrupt_the_second_run)
    with pytest.raises(KeyboardInterrupt), save_runs(tmp_path):
        glu_variants.run("smoke", progress=False)
    saved = json.loads(
        partial_path("glu_variants", "smoke", tmp_path).read_text()
    )
    assert [(run["variant"], run["seed"]) for run in saved["runs"]] == [
        ("relu", 0)
    ]
    jobs.clear()
    monkeypatch.setattr(
        glu_variants,
        "run_one",
        lambda *args, **kwargs: jobs.append(args[2:]) or real(*args, **kwargs),
    )
    with save_runs(tmp_path):
        resumed = glu_variants.run("smoke", progress=False)
    assert "resuming: 1 of 16 runs already done" in capsys.readouterr().out
    assert ("relu", 0) not in jobs and len(
        jobs
    ) == 15  # only the missing runs ran
    assert resumed["provenance"]["resumed_runs"] == 1
    assert without_timings(resumed) == without_timings(
        results
    )  # the numbers of a run never interrupted


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="profile"):
        glu_variants.run("huge", progress=False)
    with pytest.raises(ValueError, match="variants"):
        glu_variants.run("smoke", progress=False, variants=["swishglu"])


def test_cpu_settings_are_those_of_the_committed_run():
    """A rerun of the committed cpu experiment trains exactly what the JSON says it trained,
    even if the shared profiles change (every field is spelled out in SETTINGS)."""
    from dataclasses import asdict, replace

    from mixers.results import results_path
    from mixers.train import get_profile

    path = results_path("glu_variants", "cpu")
    assert path.is_file(), f"the committed cpu results are missing: {path}"
    committed = json.loads(path.read_text())
    settings = glu_variants.SETTINGS["cpu"]
    train = asdict(replace(get_profile("cpu").train, **settings["train"]))
    del train["seed"]
    assert json.loads(json.dumps(train)) == committed["settings"]["train"]
    model = {**get_profile("cpu").model, **settings["model"]}
    assert all(
        committed["settings"]["model"][key] == value
        for key, value in model.items()
    )
    assert committed["settings"]["seeds"] == list(settings["seeds"])
    assert len(committed["runs"]) == len(settings["seeds"]) * len(VARIANTS)
