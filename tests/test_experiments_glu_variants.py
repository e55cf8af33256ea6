"""Smoke test of mixers.experiments.glu_variants: the structure of its results, in seconds."""

import json
import math

import pytest
import torch

from mixers.experiments import glu_variants
from mixers.feed_forward import VARIANTS, feed_forward_param_count, matched_hidden_size
from mixers.model import CHANNEL_MIXERS
from mixers.results import to_json

from helpers import run_smoke_restoring_threads


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
    assert [(run["seed"], run["variant"]) for run in runs] == [(s, v) for s in seeds for v in VARIANTS]
    d_model = settings["model"]["d_model"]
    steps = settings["train"]["steps"]
    for run in runs:
        result = run["result"]
        assert result["model_config"]["channel_mixer"] == run["variant"]
        assert result["train_config"]["seed"] == run["seed"]
        assert result["steps"][-1] == steps and len(result["val_loss"]) == len(result["steps"])
        assert all(math.isfinite(v) for v in result["val_loss"] + result["train_loss"])
        assert run["best_val_loss"] == min(result["val_loss"]) == result["best_val_loss"]
        assert math.isfinite(run["full_val_loss"]) and run["tokens_per_s"] > 0
        assert run["gated"] == VARIANTS[run["variant"]][1]
        assert run["d_ff"] == matched_hidden_size(4 * d_model, run["gated"])
        assert run["feed_forward_parameters"] == feed_forward_param_count(
            d_model, run["d_ff"], run["gated"], False, False, False)  # no biases
        assert run["parameters"] == result["parameters"]
        assert result["provenance"]["seeds"] == [run["seed"]]


def test_like_for_like_within_a_seed(results):
    """Per seed, the variants differ only in the channel mixer; parameters agree within 1%."""
    by_seed = {}
    for run in results["runs"]:
        by_seed.setdefault(run["seed"], []).append(run)
    for runs in by_seed.values():
        configs = [{k: v for k, v in run["result"]["model_config"].items() if k != "channel_mixer"} for run in runs]
        assert all(config == configs[0] for config in configs)
        assert all(run["result"]["train_config"] == runs[0]["result"]["train_config"] for run in runs)
        counts = [run["parameters"] for run in runs]
        assert (max(counts) - min(counts)) / max(counts) < 0.01


def test_summary_is_mean_and_std_over_seeds(results):
    summary = results["summary"]
    assert list(summary["variants"]) == list(VARIANTS)
    assert sorted(summary["ranking_by_best_val_loss"]) == sorted(VARIANTS)
    assert summary["paper_ranking"][0] == "geglu"
    for name, row in summary["variants"].items():
        losses = [run["best_val_loss"] for run in results["runs"] if run["variant"] == name]
        assert row["best_val_loss_mean"] == pytest.approx(sum(losses) / len(losses))
        assert row["best_val_loss_std"] == pytest.approx(torch.tensor(losses, dtype=torch.float64).std().item())
        assert row["paper_log_perplexity"] == glu_variants.PAPER_TABLE_1[name]
    gap = summary["gated_minus_ungated"]["best_val_loss"]
    assert len(gap["per_seed"]) == len(glu_variants.SETTINGS["smoke"]["seeds"])
    seed = glu_variants.SETTINGS["smoke"]["seeds"][0]
    mine = [run for run in results["runs"] if run["seed"] == seed]
    gated = [r["best_val_loss"] for r in mine if r["gated"]]
    ungated = [r["best_val_loss"] for r in mine if not r["gated"]]
    assert gap["per_seed"][0] == pytest.approx(sum(gated) / len(gated) - sum(ungated) / len(ungated))


def test_smoke_results_have_provenance_and_serialise(results):
    prov = results["provenance"]
    assert prov["profile"] == "smoke" and prov["wall_time_s"] > 0
    assert prov["seeds"] == list(glu_variants.SETTINGS["smoke"]["seeds"])
    for key in ("device", "torch", "git_commit", "date", "workers"):
        assert key in prov
    assert "seed_policy" in results and results["settings"]["seeds"] == prov["seeds"]
    assert json.loads(to_json(results))["runs"][0]["result"]["val_loss"] == results["runs"][0]["result"]["val_loss"]


def test_two_worker_processes_give_the_same_runs(results):
    """The cpu profile spreads runs over two processes; seeded runs must not notice."""
    parallel = glu_variants.run("smoke", progress=False, variants=["swiglu"], seeds=[1], workers=2)
    serial = next(run for run in results["runs"] if run["variant"] == "swiglu" and run["seed"] == 1)
    (run,) = parallel["runs"]
    assert run["result"]["val_loss"] == serial["result"]["val_loss"]
    assert run["full_val_loss"] == serial["full_val_loss"]
    assert parallel["provenance"]["workers"] == (1 if torch.cuda.is_available() else 2)  # one process on a GPU


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
    if not path.is_file():
        pytest.skip("no committed cpu results")
    committed = json.loads(path.read_text())
    settings = glu_variants.SETTINGS["cpu"]
    train = asdict(replace(get_profile("cpu").train, **settings["train"]))
    del train["seed"]
    assert json.loads(json.dumps(train)) == committed["settings"]["train"]
    model = {**get_profile("cpu").model, **settings["model"]}
    assert all(committed["settings"]["model"][key] == value for key, value in model.items())
    assert committed["settings"]["seeds"] == list(settings["seeds"])
    assert len(committed["runs"]) == len(settings["seeds"]) * len(VARIANTS)
