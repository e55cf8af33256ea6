"""mixers.experiments.baseline: its one run is the unit that survives an interruption.

The baseline trains a single model, so its one job is the whole run: an interruption while it
trains saves nothing, one after it has trained (while the results are written) loses nothing.
A tiny profile keeps each run to about a second.
"""

import json

import pytest

import mixers.experiments as experiments
from mixers.experiments import baseline, partial_path
from mixers.results import to_json, without_timings
from mixers.train import Profile, TrainConfig, TrainingDiverged

TINY = Profile(
    "smoke",
    dict(block_size=16, d_model=16, n_layers=1, n_heads=2, dropout=0.0),
    TrainConfig(
        steps=20,
        batch_size=8,
        seq_len=16,
        lr=3e-3,
        warmup_steps=5,
        eval_interval=10,
        eval_batches=2,
    ),
)


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(baseline, "get_profile", lambda name: TINY)


def _cli(directory):
    experiments.main(
        baseline.NAME,
        baseline.run,
        "the baseline",
        baseline.DURATIONS,
        ["--profile", "smoke", "--out", str(directory), "--no-progress"],
    )


def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt


def test_an_interruption_while_it_trains_saves_nothing_and_says_so(
    tiny, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(baseline, "run_profile", _interrupt)
    with pytest.raises(SystemExit) as info:
        _cli(tmp_path)
    assert info.value.code == 130
    assert (
        "interrupted before the first run finished: nothing was saved"
        in capsys.readouterr().err
    )
    assert list(tmp_path.iterdir()) == []


def test_the_finished_run_is_saved_before_the_results_and_a_rerun_resumes_it(
    tiny, tmp_path, monkeypatch, capsys
):
    straight = json.loads(
        to_json(baseline.run("smoke", progress=False))
    )  # as a file holds it
    real_save = experiments.save_results
    monkeypatch.setattr(
        experiments, "save_results", _interrupt
    )  # a Ctrl-C while the results are written
    with pytest.raises(SystemExit) as info:
        _cli(tmp_path)
    path = partial_path("baseline", "smoke", tmp_path)
    assert info.value.code == 130
    assert (
        f"the finished runs are saved in {path}; rerun the same command to resume"
        in capsys.readouterr().err
    )
    saved = json.loads(path.read_text())
    assert saved["complete"] and saved["runs_done"] == saved["runs_total"] == 1
    monkeypatch.setattr(experiments, "save_results", real_save)
    monkeypatch.setattr(
        baseline, "run_profile", _interrupt
    )  # the rerun must not train again
    _cli(tmp_path)
    assert "resuming: 1 of 1 runs already done" in capsys.readouterr().out
    written = json.loads((tmp_path / "baseline-smoke.json").read_text())
    assert written["provenance"]["resumed_runs"] == 1
    assert without_timings(written) == without_timings(
        straight
    )  # the numbers of a run never interrupted
    assert not path.exists()  # the results hold the run now


def test_a_diverging_baseline_stops_with_its_message(tiny, monkeypatch):
    def diverge(*args, **kwargs):
        raise TrainingDiverged("the training loss is nan at step 4 of 20")

    monkeypatch.setattr(baseline, "run_profile", diverge)
    with pytest.raises(TrainingDiverged, match="nan at step 4 of 20"):
        baseline.run("smoke", progress=False)
