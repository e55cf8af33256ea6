"""Runs that share a folder, and command lines refused or stopped: one run per experiment and
folder (a second is refused at its start, naming the first's process id; a lock left by a killed
run blocks nothing), progress merged rather than overwritten, a refused command line that makes
no folder, SIGTERM handled as Ctrl-C, and a hand-edited progress file refused by name."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mixers import experiments
from mixers.experiments import (
    Experiment,
    FolderInUse,
    _save_partial,
    load_partial,
    lock_path,
    partial_path,
    run_lock,
)
from mixers.results import CorruptResults

pytestmark = pytest.mark.skipif(
    experiments.fcntl is None, reason="runs are locked where fcntl exists"
)

SRC = str(Path(experiments.__file__).resolve().parents[2])
DURATIONS = {"smoke": "seconds"}


def python(code: str, *args: str, **popen) -> subprocess.Popen:
    """A Python process running ``code`` with this package on its path."""
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


HOLD = """
    import sys, time
    from mixers.experiments import run_lock
    with run_lock("demo", "smoke", sys.argv[1]):
        print("locked", flush=True)
        time.sleep(60)
"""


def holding(tmp_path) -> subprocess.Popen:
    """A process that holds demo-smoke's lock in ``tmp_path`` until it is killed."""
    holder = python(HOLD, str(tmp_path))
    assert holder.stdout.readline().strip() == "locked"
    return holder


def experiment(jobs=8) -> Experiment:
    return Experiment(
        "demo", "smoke", {"steps": 2}, ("seed",), [(i,) for i in range(jobs)]
    )


def record(seed: int) -> dict:
    return {"seed": seed, "loss": 1.0 + seed, "diverged": False, "error": None}


# -----------------------------------------------------------------------------------------------
# One run per folder.


def test_a_second_run_into_the_folder_is_refused_naming_the_first(
    tmp_path,
):
    holder = holding(tmp_path)
    try:
        with pytest.raises(FolderInUse) as info:
            with run_lock("demo", "smoke", tmp_path):
                pass
        message = str(info.value)
        assert (
            f"process {holder.pid} is already running demo (profile smoke)"
            in message
            and f"kill {holder.pid}" in message
            and "--out" in message
        )
        # another experiment, or another profile, in the same folder is not blocked
        with (
            run_lock("demo", "cpu", tmp_path),
            run_lock("other", "smoke", tmp_path),
        ):
            pass
    finally:
        holder.kill()
        holder.wait()


def test_the_command_line_refuses_a_second_run_before_it_trains(
    tmp_path, monkeypatch, capsys
):
    holder = holding(tmp_path)
    ran = []
    monkeypatch.setattr(
        sys, "argv", ["demo", "--profile", "smoke", "--out", str(tmp_path)]
    )
    try:
        with pytest.raises(SystemExit) as info:
            experiments.main(
                "demo",
                lambda profile, progress: ran.append(1) or {},
                "a demo",
                DURATIONS,
            )
    finally:
        holder.kill()
        holder.wait()
    assert info.value.code == 2 and not ran
    assert f"process {holder.pid} is already running demo" in (
        capsys.readouterr().err
    )


def test_a_lock_left_by_a_killed_run_does_not_block_the_next(tmp_path):
    holder = holding(tmp_path)
    holder.send_signal(signal.SIGKILL)  # no finally block runs: the file stays
    holder.wait()
    assert lock_path("demo", "smoke", tmp_path).is_file()
    with run_lock("demo", "smoke", tmp_path) as path:
        assert path.read_text().strip() == str(os.getpid())
    assert not path.exists()  # released: the file goes too


def test_the_lock_is_released_when_the_run_fails(tmp_path):
    with pytest.raises(RuntimeError):
        with run_lock("demo", "smoke", tmp_path):
            raise RuntimeError("a crash")
    with run_lock("demo", "smoke", tmp_path):
        pass


# -----------------------------------------------------------------------------------------------
# Progress merged, never overwritten.


def test_two_writers_merge_their_runs(tmp_path):
    path = partial_path("demo", "smoke", tmp_path)
    mine, theirs = experiment(), experiment()
    done_here = {(i,): record(i) for i in range(4)}  # a file of 4 runs ...
    _save_partial(path, mine, done_here)
    # ... then a process that knows 1 other run saves: it adds, it does not replace
    done_there = {(5,): record(5)}
    _save_partial(path, theirs, done_there)
    saved = json.loads(path.read_text())
    assert [run["seed"] for run in saved["runs"]] == [0, 1, 2, 3, 5]
    assert saved["runs_done"] == 5 and set(done_there) == {
        (0,),
        (1,),
        (2,),
        (3,),
        (5,),
    }
    assert set(load_partial(path, mine)) == {(0,), (1,), (2,), (3,), (5,)}


WRITER = """
    import sys
    from pathlib import Path
    from mixers.experiments import Experiment, _save_partial
    first = int(sys.argv[2])
    experiment = Experiment(
        "demo", "smoke", {"steps": 2}, ("seed",), [(i,) for i in range(40)]
    )
    done = {}
    for seed in range(first, 40, 2):
        done[(seed,)] = {"seed": seed, "diverged": False, "error": None}
        _save_partial(Path(sys.argv[1]), experiment, done)
"""


def test_two_processes_saving_at_once_lose_no_run(tmp_path):
    path = partial_path("demo", "smoke", tmp_path)
    writers = [python(WRITER, str(path), str(first)) for first in (0, 1)]
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
    saved = json.loads(path.read_text())
    assert [run["seed"] for run in saved["runs"]] == list(range(40))
    assert saved["complete"]


@pytest.mark.parametrize(
    "runs",
    [
        [{"loss": 1.0}],  # a run without its job's fields
        {"0": {"seed": 0}},  # runs not a list
        [{"seed": [0]}],  # a field edited into a list
    ],
)
def test_a_hand_edited_progress_file_is_refused_by_name(tmp_path, runs):
    path = partial_path("demo", "smoke", tmp_path)
    path.write_text(json.dumps({"settings": {"steps": 2}, "runs": runs}))
    with pytest.raises(
        CorruptResults,
        match=r"is not a progress file of demo: its \"runs\" must be a list"
        r" of records, each with seed; move it away, or start afresh",
    ):
        load_partial(path, experiment())


def test_a_progress_file_with_nan_is_refused(tmp_path):
    path = partial_path("demo", "smoke", tmp_path)
    path.write_text('{"settings": {"steps": 2}, "runs": [{"seed": NaN}]}')
    with pytest.raises(CorruptResults, match="it holds NaN"):
        load_partial(path, experiment())


# -----------------------------------------------------------------------------------------------
# Command lines: refused before any folder is made; stopped by SIGTERM as by Ctrl-C.


def _never(*args, **kwargs):
    raise AssertionError("ran despite a bad command line")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--workers", "2"], "--workers: the demo experiment runs one job"),
        (["--profile", "huge"], "invalid choice"),
    ],
)
def test_a_refused_command_line_makes_no_folder(
    tmp_path, monkeypatch, capsys, argv, message
):
    out = tmp_path / "new" / "folder"
    monkeypatch.setattr(sys, "argv", ["demo", "--out", str(out), *argv])
    with pytest.raises(SystemExit) as info:
        experiments.main(
            "demo", lambda profile, progress: _never(), "a demo", DURATIONS
        )
    assert info.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_an_empty_out_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(
        sys, "argv", ["demo", "--profile", "smoke", "--out", ""]
    )
    with pytest.raises(SystemExit) as info:
        experiments.main(
            "demo", lambda profile, progress: _never(), "a demo", DURATIONS
        )
    assert info.value.code == 2
    assert "the results folder must be a non-empty path, got ''" in (
        capsys.readouterr().err
    )
    assert not list(tmp_path.iterdir())


SLEEPER = """
    import sys, time
    from mixers import experiments

    def run(profile, progress=True):
        print("running", flush=True)
        time.sleep(60)
        return {}

    experiments.main(
        "demo", run, "a demo", {"smoke": "seconds"},
        ["--profile", "smoke", "--out", sys.argv[1]],
    )
"""


@pytest.mark.parametrize(
    "sent, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)]
)
def test_sigterm_is_handled_as_ctrl_c(tmp_path, sent, code):
    process = python(SLEEPER, str(tmp_path))
    assert process.stdout.readline().strip() == "running"
    assert lock_path("demo", "smoke", tmp_path).is_file()
    time.sleep(0.2)
    process.send_signal(sent)
    _, err = process.communicate(timeout=60)
    assert process.returncode == code, err
    assert "interrupted before the first run finished" in err
    assert "Traceback" not in err
    assert not lock_path("demo", "smoke", tmp_path).exists()  # released
