"""python -m mixers.experiments.all: every experiment of a profile, resumable."""

import types

import pytest

from mixers.experiments import Experiment, run_jobs
from mixers.experiments import all as run_all


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
        return {"experiment": name, "runs": runs}

    return types.SimpleNamespace(run=run)


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
