"""A chapter's live run: the smoke profile on a CPU; on a GPU, the chapter's
gpu plan with its steps cut to a T4's three minutes. The GPU branch runs
here on the CPU, every experiment's, with the gpu sizes swapped for tiny
ones (the code path is the point, not the sizes)."""

import copy
import importlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

import mixers.train as train_module
from mixers.data import CharDataset, load_corpus
from mixers.experiments import (
    profile_settings,
    scaled_train,
    sized_profile,
    step_fraction,
)
from mixers.experiments.all import EXPERIMENTS
from mixers.experiments.plan import (
    PlannedRun,
    live_fraction,
    live_profile,
    live_run,
)
from mixers.model import ModelConfig

ROOT = Path(__file__).resolve().parents[1]


def test_a_cut_run_keeps_its_shape():
    train = dict(steps=500, warmup_steps=50, eval_interval=100, compile=True)
    cut = scaled_train(train, 0.2)
    assert cut == dict(
        steps=100, warmup_steps=10, eval_interval=20, compile=False
    )
    assert scaled_train(train, 1e-6)["steps"] == 1  # never none
    assert scaled_train(dict(train, steps=1), 0.5)["warmup_steps"] == 0


def test_step_fraction_cuts_the_gpu_profile_only():
    from mixers.experiments import gmlp

    with step_fraction(0.5):
        cut = profile_settings("gpu", gmlp.SETTINGS)
        smoke = profile_settings("smoke", gmlp.SETTINGS)
        base = sized_profile(train_module.get_profile("gpu"))
    full = gmlp.SETTINGS["gpu"]
    assert cut["train"]["steps"] == full["train"]["steps"] // 2
    assert cut["snapshot_steps"] == tuple(
        s // 2 for s in full["snapshot_steps"]
    )
    assert smoke is gmlp.SETTINGS["smoke"]
    assert base.train.steps == train_module.get_profile("gpu").train.steps // 2
    assert profile_settings("gpu", gmlp.SETTINGS) is full  # outside: whole
    with pytest.raises(ValueError, match="fraction"):
        with step_fraction(0.0):
            pass


def test_the_live_budget_fits_the_seconds_it_is_given():
    from mixers.experiments import glu_variants

    runs = glu_variants.planned_runs("gpu")
    fraction, seconds = live_fraction(runs, seconds=180.0)
    assert 0 < fraction < 1 and seconds == pytest.approx(180.0)
    assert live_fraction(runs, seconds=1e9) == (
        1.0,
        pytest.approx(sum(sum(r.flops()) for r in runs) / (65e12 * 0.3)),
    )


@pytest.fixture
def tiny_gpu(monkeypatch):
    """Every experiment's gpu settings (and the gpu profile) replaced by its
    smoke ones, still called gpu."""
    smoke = train_module.get_profile("smoke")
    monkeypatch.setitem(
        train_module.PROFILES,
        "gpu",
        replace(smoke, name="gpu", train=replace(smoke.train, compile=True)),
    )
    for name in EXPERIMENTS:
        module = importlib.import_module(f"mixers.experiments.{name}")
        if hasattr(module, "SETTINGS"):
            monkeypatch.setitem(
                module.SETTINGS, "gpu", copy.deepcopy(module.SETTINGS["smoke"])
            )


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_chapters_live_run_takes_its_gpu_branch_on_a_cpu(
    tiny_gpu, name, capsys
):
    module = importlib.import_module(f"mixers.experiments.{name}")
    runs = module.planned_runs("gpu")
    # a budget of about half the (tiny) plan: the steps are cut
    seconds = 0.5 * sum(sum(r.flops()) for r in runs) / (65e12 * 0.3)
    fraction, _ = live_fraction(runs, seconds)
    results = live_run(module, gpu=True, seconds=seconds)
    printed = capsys.readouterr().out
    assert f"{name}: the gpu plan at {fraction:.0%} of its steps" in printed
    assert results["provenance"]["profile"] == "gpu"
    configs = []

    def find(value):
        if isinstance(value, dict):
            if "train_config" in value:
                configs.append(value["train_config"])
            for item in value.values():
                find(item)
        elif isinstance(value, list):
            for item in value:
                find(item)

    find(results)
    assert configs
    for config, run in zip(configs, runs):
        cut = max(1, round(run.train.steps * fraction))
        assert config["steps"] == cut < run.train.steps
        assert config["compile"] is False


def test_the_baseline_live_profile_takes_its_gpu_branch_on_a_cpu(capsys):
    gpu = train_module.get_profile("gpu")
    assert live_profile(gpu, 65, gpu=False) is gpu  # a CPU: as it is
    run = PlannedRun(ModelConfig(vocab_size=65, **gpu.model), gpu.train)
    # the whole profile fits three minutes of a T4 at the assumed rate
    assert live_fraction([run])[0] == 1.0
    cut = live_profile(gpu, 65, gpu=True, seconds=60.0)
    fraction, seconds = live_fraction([run], seconds=60.0)
    assert (
        cut.train.steps == round(gpu.train.steps * fraction) < gpu.train.steps
    )
    assert cut.train.compile is False and cut.model == gpu.model
    assert f"{cut.train.steps:,} of the gpu profile's 2,500 steps" in (
        capsys.readouterr().out
    )
    # and it trains, on the CPU, at tiny sizes
    smoke = train_module.get_profile("smoke")
    tiny = replace(gpu, model=smoke.model, train=smoke.train)
    sized = live_profile(tiny, 65, gpu=True, seconds=1e-4)
    assert sized.train.steps == 1
    dataset = CharDataset.from_text(load_corpus()[:20000])
    _, result = train_module.run_profile(dataset, sized, progress=False)
    assert result.steps == [1]


TRAINING_CHAPTERS = {
    "baseline": "live_profile(",
    "attention": "live_run(attention_scaling)",
    "glu_variants": "live_run(glu_variants)",
    "gmlp": "live_run(experiment)",
    "alibi": "live_run(alibi_extrapolation)",
    "side_by_side": "live_run(experiment)",
}


@pytest.mark.parametrize("chapter", TRAINING_CHAPTERS)
def test_every_chapter_that_trains_has_a_gpu_branch_and_a_profile_table(
    chapter,
):
    """Each chapter's live cell goes through the package's GPU branch
    (tested above), and its committed results show a row per profile."""
    notebook = json.loads((ROOT / "book" / f"{chapter}.ipynb").read_text())
    code = "\n".join(
        "".join(cell["source"])
        for cell in notebook["cells"]
        if cell["cell_type"] == "code"
    )
    assert TRAINING_CHAPTERS[chapter] in code
    assert "profiles_table(" in code and "live_beside_committed(" in code
    assert '.run("smoke"' not in code  # no live cell stuck on the CPU size


def test_the_gpu_plans_rates_are_the_cpu_sweeps_carried_over():
    """One rule (plan.carried_lr) turns each rate chosen on the cpu profile
    into the gpu plan's, read here from the committed cpu results."""
    from mixers.experiments import (
        alibi_extrapolation,
        attention_scaling,
        glu_variants,
        gmlp,
        side_by_side,
    )
    from mixers.experiments.plan import carried_lr
    from mixers.results import load_results

    def cpu(name):
        return load_results(name, profiles=("cpu",))

    assert carried_lr(3e-3) == train_module.get_profile("gpu").train.lr
    for module in (attention_scaling, glu_variants, alibi_extrapolation):
        assert module.SETTINGS["gpu"]["train"]["lr"] == carried_lr(
            cpu(module.NAME)["settings"]["train"]["lr"]
        )
    assert gmlp.SETTINGS["gpu"]["lrs"] == {
        arm: (carried_lr(run["lr"]),)
        for arm, run in cpu("gmlp")["runs"].items()
    }
    pairs = cpu("side_by_side")["summary"]["pairs"]
    assert side_by_side.SETTINGS["gpu"]["lrs"] == {
        pair: (carried_lr(row["best_lr"]),) for pair, row in pairs.items()
    }


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_each_experiment_shows_its_committed_results_by_profile(name):
    from mixers.results import load_results
    from mixers.tables import profiles_table

    module = importlib.import_module(f"mixers.experiments.{name}")
    committed = load_results(name, profiles=("cpu",))
    assert module.curves(committed) and module.headline(committed)
    table = profiles_table(module).data
    assert "\n| cpu | " in table and "\n| gpu | " in table
    if name != "baseline":  # its gpu row reads the H200 runs
        assert "| gpu | not run yet |" in table
