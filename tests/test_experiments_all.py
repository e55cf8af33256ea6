"""python -m mixers.experiments.all: every experiment of a profile, resumable."""

import json
import re
import types

import pytest

from mixers.experiments import Experiment, run_jobs
from mixers.experiments import all as run_all
from mixers.results import results_dir


def _fake(name, calls, fail_on=None):
    """An experiment module whose run() has two jobs, each recorded in ``calls``."""

    def run(profile, progress=True):
        def job(j):
            if (name, j[0]) == fail_on:
                raise KeyboardInterrupt
            calls.append((name, j[0]))
            return {"job": j[0], "result": {"provenance": {}}}

        runs, _ = run_jobs(
            Experiment(name, profile, {"n": 2}, ("job",), [(0,), (1,)]), job
        )
        return {
            "experiment": name,
            "runs": runs,
            "provenance": {"profile": profile},
        }

    # two runs planned for every profile
    return types.SimpleNamespace(run=run, planned_runs=lambda profile: [1, 2])


def test_every_experiment_runs_once_and_an_interrupted_one_resumes(
    tmp_path, monkeypatch, capsys
):
    calls = []
    modules = {
        "one": _fake("one", calls),
        "two": _fake("two", calls, fail_on=("two", 1)),
    }
    monkeypatch.setattr(run_all, "EXPERIMENTS", ("one", "two"))
    monkeypatch.setattr(
        run_all.importlib,
        "import_module",
        lambda name: modules[name.rsplit(".", 1)[1]],
    )
    with pytest.raises(SystemExit) as stop:
        run_all.main(
            ["--profile", "smoke", "--out", str(tmp_path), "--no-progress"]
        )
    assert stop.value.code == 130 and calls == [
        ("one", 0),
        ("one", 1),
        ("two", 0),
    ]
    assert "rerun the same command to resume" in capsys.readouterr().err
    modules["two"] = _fake("two", calls)  # no interruption this time
    run_all.main(
        ["--profile", "smoke", "--out", str(tmp_path), "--no-progress"]
    )
    out = capsys.readouterr().out
    assert "one: done" in out and "resuming: 1 of 2 runs already done" in out
    assert calls[3:] == [("two", 1)]  # only the missing run
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "one-smoke.json",
        "two-smoke.json",
    ]


def _two_fakes(monkeypatch, calls):
    modules = {"one": _fake("one", calls), "two": _fake("two", calls)}
    monkeypatch.setattr(run_all, "EXPERIMENTS", ("one", "two"))
    monkeypatch.setattr(
        run_all.importlib,
        "import_module",
        lambda name: modules[name.rsplit(".", 1)[1]],
    )


def done(name="one", profile="smoke", runs=2, **more):
    """A results file's text: ``runs`` runs of ``name``, its provenance
    naming ``profile``."""
    return json.dumps(
        {
            "experiment": name,
            "runs": [{"job": i} for i in range(runs)],
            "provenance": {"profile": profile},
            **more,
        }
    )


@pytest.mark.parametrize(
    "content, reason",
    [
        ("", "not a valid results file"),
        ('{"experiment": "one", "runs": [', "not a valid results file"),
        ('{"experiment": "two", "provenance": {}}', "no results of the one"),
        ('{"experiment": "one"}', "no provenance"),
        # issue 38: a file that parses and names the experiment is not done
        (
            done(runs=0, complete=False, runs_done=0, runs_total=2),
            "it is a progress file, not finished results",
        ),  # a copied .partial.json
        (
            '{"experiment": "one", "provenance": {}}',
            "its provenance says profile None",
        ),
        (done(profile="cpu"), "its provenance says profile 'cpu'"),
        (done(runs=0), "it holds 0 of the 2 runs of profile smoke"),
        (done(runs=1), "it holds 1 of the 2 runs of profile smoke"),
    ],
)
def test_a_results_file_that_does_not_read_back_is_not_done(
    tmp_path, monkeypatch, capsys, content, reason
):
    calls = []
    _two_fakes(monkeypatch, calls)
    (tmp_path / "one-smoke.json").write_text(content)
    (tmp_path / "two-smoke.json").write_text(done("two"))
    run_all.main(
        ["--profile", "smoke", "--out", str(tmp_path), "--no-progress"]
    )
    out = capsys.readouterr().out
    assert f"one: {tmp_path / 'one-smoke.json'} is not a complete run (" in out
    assert reason in out
    assert "two: done, skipped" in out
    assert calls == [("one", 0), ("one", 1)]  # one is run again, two is not
    assert json.loads((tmp_path / "one-smoke.json").read_text())["runs"]


def test_the_plan_fits_one_short_call_on_one_h100(capsys):
    """--plan names all seven experiments, one line each, and predicts the
    whole gpu plan at most 8 minutes on one H100 with 8 workers, without
    training anything."""
    run_all.main(["--profile", "gpu", "--plan", "--workers", "8"])
    lines = capsys.readouterr().out.strip().splitlines()
    for name, line in zip(run_all.EXPERIMENTS, lines):
        assert line.startswith(f"{name}: ")
    total = re.fullmatch(
        r"total: (\d+) runs, ([\d,]+) steps, predicted ([\d.]+) minutes on"
        r" one H100 with 8 workers",
        lines[-1],
    )
    assert total, lines[-1]
    assert float(total[3]) <= 8.0
    assert int(total[1]) == sum(
        len(run_all.planned_runs(name, "gpu")) for name in run_all.EXPERIMENTS
    )


def test_the_plan_counts_every_step_of_every_run():
    from mixers.experiments import glu_variants
    from mixers.experiments.plan import predict

    runs = run_all.planned_runs("glu_variants", "smoke")
    settings = glu_variants.SETTINGS["smoke"]
    assert len(runs) == len(settings["seeds"]) * 8
    prediction = predict(runs, workers=2)
    assert prediction.steps == len(runs) * settings["train"]["steps"]
    assert prediction.train_flops > 0 and prediction.forward_flops > 0


def test_the_committed_results_count_as_done():
    """recorded_runs reads each experiment's results as run_saved writes them: the committed cpu
    results hold exactly their plan's runs, so they count as done."""
    for name in run_all.EXPERIMENTS:
        path = run_all.results_path(name, "cpu", results_dir())
        planned = len(run_all.planned_runs(name, "cpu"))
        assert run_all.finished(name, path, "cpu", planned) is None, name


def test_a_directory_at_a_results_path_is_refused_before_any_run(
    tmp_path, monkeypatch, capsys
):
    calls = []
    _two_fakes(monkeypatch, calls)
    (tmp_path / "two-smoke.json").mkdir()
    with pytest.raises(SystemExit) as stop:
        run_all.main(["--profile", "smoke", "--out", str(tmp_path)])
    assert stop.value.code == 2 and calls == []
    assert (
        f"cannot write {tmp_path / 'two-smoke.json'}: it is a directory"
        in capsys.readouterr().err
    )


@pytest.mark.parametrize("workers", ["100000", str(10**22)])
def test_more_workers_than_runs_are_refused(monkeypatch, capsys, workers):
    calls = []
    _two_fakes(monkeypatch, calls)
    with pytest.raises(SystemExit) as stop:
        run_all.main(["--profile", "smoke", "--plan", "--workers", workers])
    assert stop.value.code == 2
    assert (
        f"--workers: at most 4, one process per run (the smoke plan has 4"
        f" runs), got {workers}" in capsys.readouterr().err
    )
