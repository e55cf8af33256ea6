"""Runs that share a folder, and command lines refused or stopped: one run per experiment and
folder (a second is refused at its start, naming the first's process id; a lock left by a killed
run blocks nothing), progress merged rather than overwritten, a refused command line that makes
no folder, SIGTERM handled as Ctrl-C, and a hand-edited progress file refused by name."""

import errno
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
from mixers import results as results_module
from mixers.experiments import (
    Experiment,
    FolderInUse,
    _save_partial,
    load_partial,
    lock_path,
    partial_path,
    run_jobs,
    run_lock,
)
from mixers.results import CorruptResults

pytestmark = pytest.mark.skipif(
    experiments.fcntl is None, reason="runs are locked where fcntl exists"
)

SRC = str(Path(experiments.__file__).resolve().parents[2])
# A wait's limit here only stops a hang: each wait ends as soon as what it
# waits for has happened, and how busy the machine is decides no verdict.
HANG_S = 1800
DURATIONS = {"smoke": "seconds"}


def python(code: str, *args: str, env=None, **popen) -> subprocess.Popen:
    """A Python process running ``code`` with this package on its path."""
    env = env or {**os.environ, "PYTHONPATH": SRC}
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
    return {
        "seed": seed,
        "loss": 1.0 + seed,
        "diverged": False,
        "error": None,
        "result": {"provenance": {"profile": "smoke"}},
    }


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


def test_the_lock_survives_the_removal_of_its_file(tmp_path):
    """``rm`` of a held lock file unlocks nothing: a second run is still refused, and still told
    which process holds the lock."""
    holder = holding(tmp_path)
    try:
        lock_path("demo", "smoke", tmp_path).unlink()
        with pytest.raises(
            FolderInUse,
            match=f"process {holder.pid} is already running demo",
        ):
            with run_lock("demo", "smoke", tmp_path):
                pass
    finally:
        holder.kill()
        holder.wait()


def test_the_same_folder_by_a_symlinked_path_is_the_same_lock(tmp_path):
    folder, link = tmp_path / "folder", tmp_path / "link"
    folder.mkdir()
    link.symlink_to(folder)
    holder = holding(folder)
    try:
        with pytest.raises(FolderInUse, match=f"process {holder.pid}"):
            with run_lock("demo", "smoke", link):
                pass
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_never_writes_through_a_symlink(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    lock_path("demo", "smoke", tmp_path).symlink_to(target)
    with pytest.raises(
        FolderInUse, match="demo-smoke.lock is a symbolic link: a run's lock"
    ):
        with run_lock("demo", "smoke", tmp_path):
            pass
    assert target.read_text() == "keep me"


def test_a_held_lock_whose_text_is_no_pid_gets_no_advice_to_kill(
    tmp_path, monkeypatch
):
    """Where the lock file is all there is (no abstract sockets, as on macOS), its text names the
    holder; text that is no process id names none, and no ``kill`` is suggested."""
    holder = holding(tmp_path)
    monkeypatch.setattr(experiments, "_lock_address", lambda *args: None)
    try:
        lock_path("demo", "smoke", tmp_path).write_text("not a pid\n")
        with pytest.raises(FolderInUse) as info:
            with run_lock("demo", "smoke", tmp_path):
                pass
    finally:
        holder.kill()
        holder.wait()
    message = str(info.value)
    assert message.startswith("another process is already running demo")
    assert "kill" not in message and "stop that run" in message


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


FIRST_WRITER = """
    import sys
    from pathlib import Path
    from mixers import experiments
    from mixers.experiments import Experiment, _save_partial

    write = experiments._write_partial

    def write_when_told(*args):
        # inside the folder's lock, the file read and not yet written
        print("read", flush=True)
        assert sys.stdin.readline().strip() == "go"
        write(*args)

    experiments._write_partial = write_when_told
    experiment = Experiment(
        "demo", "smoke", {"steps": 2}, ("seed",), [(i,) for i in range(8)]
    )
    record = {"seed": 0, "diverged": False, "error": None,
              "result": {"provenance": {"profile": "smoke"}}}
    _save_partial(Path(sys.argv[1]), experiment, {(0,): record})
"""

SECOND_WRITER = """
    import fcntl, sys, types
    from pathlib import Path
    from mixers import experiments
    from mixers.experiments import Experiment, _save_partial

    def flock(fd, operation):
        # says so when the lock is taken, before waiting for it
        if operation == fcntl.LOCK_EX:
            try:
                return fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                print("waiting", flush=True)
        return fcntl.flock(fd, operation)

    names = {name: getattr(fcntl, name) for name in dir(fcntl) if name.isupper()}
    experiments.fcntl = types.SimpleNamespace(**names, flock=flock)
    experiment = Experiment(
        "demo", "smoke", {"steps": 2}, ("seed",), [(i,) for i in range(8)]
    )
    record = {"seed": 1, "diverged": False, "error": None,
              "result": {"provenance": {"profile": "smoke"}}}
    _save_partial(Path(sys.argv[1]), experiment, {(1,): record})
    print("saved", flush=True)
"""


def test_a_save_waits_for_another_process_s_save_and_loses_no_run(tmp_path):
    """Deterministic, no timing: the first process stops inside the folder's lock, between
    reading the progress file and writing it, until the test tells it to go on; the second
    saves meanwhile. With the lock, the second waits (and says so) and then adds its run to the
    first's; without it, the second writes at once and the first overwrites it from what it read
    before: a run lost, every time."""
    path = partial_path("demo", "smoke", tmp_path)
    first = python(FIRST_WRITER, str(path), stdin=subprocess.PIPE)
    second = None
    try:
        assert first.stdout.readline().strip() == "read"
        second = python(SECOND_WRITER, str(path))
        said = (
            second.stdout.readline().strip()
        )  # "waiting", or "saved" if unlocked
        first.stdin.write("go\n")
        first.stdin.flush()
        for process in (first, second):
            _, err = process.communicate(timeout=HANG_S)
            assert process.returncode == 0, err
    finally:
        for process in (first, second):
            if process is not None:
                process.kill()
    saved = json.loads(path.read_text())
    assert [run["seed"] for run in saved["runs"]] == [0, 1]
    assert said == "waiting"


def progress_file(runs, name="demo", profile="smoke") -> str:
    return json.dumps(
        {
            "experiment": name,
            "settings": {"steps": 2},
            "runs": runs,
            "provenance": {"profile": profile},
        }
    )


@pytest.mark.parametrize(
    "runs, problem",
    [
        ([{"loss": 1.0}], "run 0 has no 'seed', 'diverged', 'error'"),
        ({"0": {"seed": 0}}, '"runs" is not a list'),
        (
            [{**record(0), "seed": [0]}],
            "a run's field is a list or a record",
        ),
        # issue 38: found at load, not after the other runs have trained
        (
            [record(0), {"seed": 1, "error": None}],
            "run 1 has no 'diverged'",
        ),
        (
            [{**record(0), "diverged": "no"}],
            "run 0 has \"diverged\" 'no', not a bool",
        ),
        (
            [{"seed": 0, "diverged": False, "error": None}],
            "run 0 did not diverge but has no result provenance",
        ),
        ([3], "run 0 is not a record"),
    ],
)
def test_a_hand_edited_progress_file_is_refused_by_name(
    tmp_path, runs, problem
):
    path = partial_path("demo", "smoke", tmp_path)
    path.write_text(progress_file(runs))
    with pytest.raises(CorruptResults) as info:
        load_partial(path, experiment())
    message = str(info.value)
    assert f"is not a progress file of demo: {problem}." in message
    assert "move it away, or start afresh with --fresh" in message


@pytest.mark.parametrize(
    "name, profile, holds",
    [
        ("other", "smoke", "experiment 'other', profile 'smoke'"),
        ("demo", "cpu", "experiment 'demo', profile 'cpu'"),
        (None, None, "experiment None, profile None"),
    ],
)
def test_another_experiment_s_progress_file_is_not_resumed(
    tmp_path, name, profile, holds
):
    """A progress file copied from another experiment (or profile), with the same settings, is
    refused, not resumed as this one's runs."""
    path = partial_path("demo", "smoke", tmp_path)
    path.write_text(progress_file([record(0)], name, profile))
    with pytest.raises(
        CorruptResults,
        match=f"is not a progress file of demo \\(profile smoke\\): it holds"
        f" {holds}",
    ):
        load_partial(path, experiment())


def test_a_progress_file_with_nan_is_refused(tmp_path):
    path = partial_path("demo", "smoke", tmp_path)
    path.write_text(progress_file([{"seed": 0}]).replace("0}]", "NaN}]"))
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
    _, err = process.communicate(timeout=HANG_S)
    assert process.returncode == code, err
    assert "interrupted before the first run finished" in err
    assert "Traceback" not in err
    assert not lock_path("demo", "smoke", tmp_path).exists()  # released


# -----------------------------------------------------------------------------------------------
# experiments.all --workers N: SIGTERM ends the workers as Ctrl-C does, and keeps what finished.

SLOW_EXPERIMENT = """
    import os, time
    from pathlib import Path
    from mixers.experiments import Experiment

    def run_one(dataset, profile, settings, job, progress=False):
        # in a worker process: say who runs which job, then finish job 0 and never job 1
        Path(settings["folder"], f"job-{job}.pid").write_text(str(os.getpid()))
        if job == 1:
            time.sleep(600)
        return {"job": job, "result": {"provenance": {"profile": profile}}}

    def run(profile, progress=True, workers=1):
        settings = {"folder": os.environ["SLOW_FOLDER"]}
        experiment = Experiment("slow", profile, settings, ("job",), [(0,), (1,)])
        runs, _ = experiment.train(run_one, None, workers, progress)
        return {"experiment": "slow", "runs": runs, "provenance": {"profile": profile}}

    def planned_runs(profile):
        return [0, 1]
"""

ALL_WITH_WORKERS = """
    import importlib, sys
    import slow_experiment
    from mixers.experiments import all as run_all

    run_all.EXPERIMENTS = ("slow",)
    real = importlib.import_module
    importlib.import_module = lambda name, *args: (
        slow_experiment if name.endswith(".slow") else real(name, *args)
    )
    run_all.main(["--profile", "smoke", "--out", sys.argv[1], "--workers", "2"])
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() if Path("/proc").is_dir() else True


def _wait_for(condition, what: str) -> None:
    """Wait until ``condition()``; only a hang (``HANG_S``) ends the wait
    without it."""
    deadline = time.monotonic() + HANG_S
    while not condition():
        assert time.monotonic() < deadline, f"hung waiting for {what}"
        time.sleep(0.1)


def _start_slow_experiment_with_workers(tmp_path):
    """``experiments.all --workers 2`` over the slow experiment, started: the
    process, its output folder, and the folder where each job writes its
    worker's process id (``job-N.pid``)."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "slow_experiment.py").write_text(textwrap.dedent(SLOW_EXPERIMENT))
    out, folder = tmp_path / "out", tmp_path / "pids"
    folder.mkdir()
    process = python(
        ALL_WITH_WORKERS,
        str(out),
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([SRC, str(code)]),
            "SLOW_FOLDER": str(folder),
            "MIXERS_DEVICE": "cpu",
        },
    )
    return process, out, folder


def _kill_what_is_left(process, folder) -> None:
    """Nothing left running, whatever a test found: the process and every
    worker that wrote its id."""
    process.kill()
    for pid_file in folder.glob("job-*.pid"):
        if _alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_sigterm_to_all_with_workers_ends_them_and_keeps_what_finished(
    tmp_path,
):
    process, out, folder = _start_slow_experiment_with_workers(tmp_path)
    partial = partial_path("slow", "smoke", out)
    try:
        # job 0 finished and saved, job 1 running in a worker
        _wait_for(
            lambda: partial.is_file() and (folder / "job-1.pid").is_file(),
            "the first run saved and the second started",
        )
        workers = {int(p.read_text()) for p in folder.glob("job-*.pid")}
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=HANG_S)
        assert process.returncode == 143, err
        assert (
            "interrupted: every finished run is saved; rerun the same command"
            " to resume" in err
        )
        assert "Traceback" not in err
        _wait_for(lambda: not any(map(_alive, workers)), "the workers to end")
        saved = json.loads(partial.read_text())
        assert [run["job"] for run in saved["runs"]] == [0]
    finally:
        _kill_what_is_left(process, folder)


def test_sigterm_while_the_workers_start_exits_143_at_once(tmp_path):
    """SIGTERM the moment the experiment has started, while its pool's
    processes are still starting: the same message and exit 143, at once,
    and no process left (the interpreter's own exit waited on the starting
    pool, or aborted in torch's threads, exit -6)."""
    process, out, folder = _start_slow_experiment_with_workers(tmp_path)
    try:
        # the experiment's first line: its runs are about to go to the pool
        line = process.stdout.readline()
        assert "slow, profile smoke" in line, line
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=HANG_S)
        assert process.returncode == 143, err
        assert "interrupted: every finished run is saved" in err
        assert "Traceback" not in err and "terminate called" not in err
        workers = {int(p.read_text()) for p in folder.glob("job-*.pid")}
        _wait_for(lambda: not any(map(_alive, workers)), "the workers to end")
    finally:
        _kill_what_is_left(process, folder)


# -----------------------------------------------------------------------------------------------
# A full disk, and a directory where a results file goes.


def _two_runs(profile, progress=True):
    experiment = Experiment(
        "demo", profile, {"steps": 2}, ("seed",), [(0,), (1,)]
    )
    runs, _ = run_jobs(experiment, lambda job: record(job[0]))
    return {"experiment": "demo", "runs": runs}


def test_a_full_disk_stops_the_run_with_one_line_saying_how_to_resume(
    tmp_path, monkeypatch, capsys
):
    """The first run's progress is written, the disk is full at the second: one line says which
    file could not be written, why, where the finished runs are and how to resume."""
    writes = []

    def fsync(fd):
        writes.append(fd)
        if len(writes) > 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(results_module.os, "fsync", fsync)
    argv = ["--profile", "smoke", "--out", str(tmp_path), "--no-progress"]
    with pytest.raises(SystemExit) as info:
        experiments.main("demo", _two_runs, "a demo", DURATIONS, argv)
    err = capsys.readouterr().err
    partial = partial_path("demo", "smoke", tmp_path)
    assert info.value.code == 1
    assert err == (
        f"error: cannot write {partial}: No space left on device; the finished"
        f" runs are in {partial}; rerun the same command to resume once it can"
        " be written\n"
    )
    assert [
        run["seed"] for run in json.loads(partial.read_text())["runs"]
    ] == [0]
    assert sorted(p.name for p in tmp_path.iterdir()) == [partial.name]


@pytest.mark.parametrize("which", ["results", "progress"])
def test_a_directory_at_a_results_path_is_refused_before_any_run(
    tmp_path, capsys, which
):
    taken = (
        results_module.results_path("demo", "smoke", tmp_path)
        if which == "results"
        else partial_path("demo", "smoke", tmp_path)
    )
    taken.mkdir()
    argv = ["--profile", "smoke", "--out", str(tmp_path), "--no-progress"]
    with pytest.raises(SystemExit) as info:
        experiments.main(
            "demo", lambda *a, **k: _never(), "a demo", DURATIONS, argv
        )
    assert info.value.code == 1
    assert f"error: cannot write {taken}: it is a directory" in (
        capsys.readouterr().err
    )


# -----------------------------------------------------------------------------------------------
# The other command lines' outputs: checked by writing there before the work.


def _never_run(*args, **kwargs):
    raise AssertionError("the work ran despite an unwritable --out")


@pytest.mark.parametrize("main", ["benchmark_main", "profile_main"])
def test_a_benchmark_s_out_is_written_to_before_it_runs(
    tmp_path, monkeypatch, capsys, main
):
    """--out under a file, and a directory where the results file goes: refused before the run
    (os.access, as root, says yes to /proc; only a write tells)."""
    from mixers import bench

    taken = tmp_path / "demo-cpu.json"
    taken.mkdir()
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for out, message in [
        (tmp_path, f"--out: cannot write {taken}: it is a directory"),
        (a_file / "sub", "--out: cannot write results in"),
    ]:
        monkeypatch.setattr(sys, "argv", ["demo", "--out", str(out)])
        args = ("a demo", "demo", DURATIONS, {"cpu": {}}, _never_run)
        with pytest.raises(SystemExit) as info:
            if main == "benchmark_main":
                bench.benchmark_main(*args, "demo")
            else:
                bench.profile_main(*args)
        assert info.value.code == 2
        assert message in capsys.readouterr().err


def test_the_generation_benchmark_s_out_is_written_to_before_it_runs(
    tmp_path, monkeypatch, capsys
):
    """bench.generation has a command line of its own: the same check, before
    the first model decodes (it failed at its first partial save, after a
    model's measurement)."""
    from mixers.bench import generation

    monkeypatch.setattr(generation, "run", _never_run)
    taken = tmp_path / "generation-smoke.json"
    taken.mkdir()
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for out, message in [
        (tmp_path, f"--out: cannot write {taken}: it is a directory"),
        (a_file / "sub", "--out: cannot write results in"),
    ]:
        with pytest.raises(SystemExit) as info:
            generation.main(["--profile", "smoke", "--out", str(out)])
        assert info.value.code == 2
        assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "path, message",
    [
        ("", "argument path: must be a file to write, got ''"),
        (".", "argument path: must be a file to write, got '.' (a directory)"),
        pytest.param(
            "/proc/x.json",
            "path: cannot write in /proc:",
            marks=pytest.mark.skipif(
                not Path("/proc").is_dir(), reason="a system with /proc"
            ),
        ),
    ],
)
def test_live_fixtures_refuse_a_path_they_cannot_write(
    capsys, monkeypatch, path, message
):
    from mixers import live

    monkeypatch.setattr(live, "fixtures", _never_run)
    with pytest.raises(SystemExit) as info:
        live.main([path])
    assert info.value.code == 2 and message in capsys.readouterr().err
