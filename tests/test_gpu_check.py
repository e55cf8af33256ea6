"""tools/gpu_check.py, rehearsed on the CPU: the same code a GPU machine runs, at tiny sizes, its
plan stopped midway by a hook (a count of saved runs, not a clock); and the stage machinery on
commands of a few lines: a stage stopped at its deadline with its whole process group, a failure
recorded and the next stage still run, the budget shared out. No verdict depends on how long
anything took: the rehearsal's budget (7,200 s, each stage's allotment 15 times its GPU one: 20
minutes and more) is a budget for a hang, not a clock that a busy machine beats: every stage but
the one the hook stops must end "ok", and every check below runs on every machine."""

import json
import os
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path

import pytest
from helpers import load_module

ROOT = Path(__file__).resolve().parents[1]


gpu_check = load_module(ROOT / "tools" / "gpu_check.py")


def alive_in_group(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``, read from /proc here (not with the tool's
    own function)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] not in "ZX":
                alive.append(int(entry.name))
    return alive


def is_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def runs_in(path: Path) -> int:
    results = json.loads(path.read_text())
    return len(results.get("runs", [])) or int("result" in results)


# -----------------------------------------------------------------------------
# The rehearsal, end to end


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    """One rehearsal, its plan stopped once one run is saved. The budget is large: on a busy
    machine the stages take longer, and only the hook stops one; a stage stopped by its time
    is a hang, and fails the tests below."""
    folder = tmp_path_factory.mktemp("rehearsal")
    out, work = folder / "out", folder / "work"
    # a bare machine: no installed package, the working tree's src only
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "tools/gpu_check.py", "--cpu-rehearsal", "--out", out, "--work", work,
         "--budget", "7200", "--stop-plan-after-runs", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=7500,
    )  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    return done, out, work, summary, folder


def test_the_rehearsal_writes_its_files_and_no_stage_fails(rehearsal):
    done, out, _, summary, _ = rehearsal
    # the plan was stopped: incomplete (3), and no stage failed (1)
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == sorted(gpu_check.OUT_FILES)
    stages = summary["stages"]
    assert list(stages) == [stage.name for stage in gpu_check.STAGES]
    assert stages["alibi"]["status"] == "not rehearsed"
    for name in ("train_step", "generation", "correctness"):
        assert stages[name]["status"] == "ok", stages[name]
    log = (out / "gpu_check.log").read_text()
    assert "gpu check incomplete" in log


def test_the_stopped_plan_keeps_its_finished_runs_and_leaves_no_process(
    rehearsal,
):
    _, out, work, summary, folder = rehearsal
    plan = summary["stages"]["plan"]
    assert plan["status"] == "stopped"
    assert "--stop-plan-after-runs" in plan["stopped"]
    # nothing of its process group runs on: neither the plan nor its workers
    assert alive_in_group(plan["process_group"]) == []
    # the runs it finished are in --out, as the work folder holds them
    with tarfile.open(out / "results.tar") as tar:
        tar.extractall(folder / "results", filter="data")
    progress = folder / "results" / "attention_scaling-smoke.partial.json"
    assert runs_in(progress) >= 1
    assert progress.read_text() == (work / progress.name).read_text()


def test_each_benchmark_that_ended_is_in_the_results(rehearsal):
    _, out, _, summary, folder = rehearsal
    with tarfile.open(out / "results.tar") as tar:
        names = tar.getnames()
    for stage, name in (
        ("train_step", "train_step"),
        ("generation", "generation"),
    ):
        assert summary["stages"][stage]["status"] == "ok"
        assert f"{name}-smoke.json" in names
        results = json.loads(
            (folder / "results" / f"{name}-smoke.json").read_text()
        )
        assert results["provenance"]["profile"] == "smoke"


def test_the_checks_ran_every_layer_and_decoder(rehearsal):
    _, out, _, summary, _ = rehearsal
    checked = json.loads((out / "correctness.json").read_text())
    assert summary["stages"]["correctness"]["status"] == "ok"
    assert checked["complete"] and checked["ok"]
    assert {r["model"] for r in checked["decoding"]} == {
        "attention",
        "alibi",
        "rotary",
        "gmlp",
    }
    assert all(
        r["same_sampled_tokens"] for r in checked["decoding"] if r["cache"]
    )
    assert {(r["layer"], r["backend"]) for r in checked["layers"]} == {
        ("attention", "eager"), ("attention", "sdpa"), ("alibi", "eager"), ("alibi", "sdpa"),
        ("rotary", "eager"), ("rotary", "sdpa"),
    }  # fmt: skip
    assert all(r["ok"] for r in checked["layers"])


# -----------------------------------------------------------------------------
# The stage machinery, on commands of a few lines


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


class Lines(list):
    def __call__(self, text=""):
        self.append(text)


def test_a_stopped_stage_ends_with_its_whole_process_group(tmp_path):
    """A stage that never ends on its own, whose child ignores SIGINT: stopped (here by the
    hook, once both are running), the stage gets SIGINT and the child, still there after the
    grace period, SIGKILL. Nothing of the group is left."""
    ready = tmp_path / "child.pid"
    command = python(f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", '''
        import os, signal, time
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        open({str(ready)!r} + ".tmp", "w").write(str(os.getpid()))
        os.replace({str(ready)!r} + ".tmp", {str(ready)!r})
        time.sleep(600)
        '''])
        print("started", flush=True)
        time.sleep(600)
        """)
    log = Lines()
    record = gpu_check.run_stage(
        command,
        log,
        deadline=time.monotonic() + 3600,
        grace=0.5,
        stop_when=lambda: "the child runs" if ready.exists() else None,
    )
    assert (
        record["status"] == "stopped" and record["stopped"] == "the child runs"
    )
    # the child, which SIGINT does not end; the parent too where a busy
    # machine kept it from ending on SIGINT within the half second
    assert record["killed"] in (1, 2)
    assert alive_in_group(record["process_group"]) == []
    assert not is_alive(int(ready.read_text()))
    assert "started" in log


def test_a_stage_past_its_deadline_is_stopped(tmp_path):
    """A stage that never ends on its own is stopped by its deadline (whenever the deadline
    comes, the answer is the same). The grace is long: the stage ends on SIGINT, and the wait
    ends as soon as it has, however busy the machine."""
    record = gpu_check.run_stage(
        python("import time; time.sleep(600)"),
        Lines(),
        time.monotonic(),
        grace=120,
    )
    assert (
        record["status"] == "stopped"
        and record["stopped"] == "its time was up"
    )
    assert record["killed"] == 0  # SIGINT ended it
    assert alive_in_group(record["process_group"]) == []


def test_a_failed_stage_is_recorded_with_its_exit_code_and_output():
    log = Lines()
    record = gpu_check.run_stage(
        python("print('half done', flush=True); raise SystemExit(3)"),
        log,
        time.monotonic() + 3600,
        grace=5,
    )
    assert record["status"] == "failed" and record["exit_code"] == 3
    assert "half done" in log
    missing = gpu_check.run_stage(
        ["/no/such/program"], Lines(), time.monotonic() + 60, 5
    )
    assert (
        missing["status"] == "failed"
        and "/no/such/program" in missing["error"]
    )


def test_a_stage_that_breaks_the_check_itself_is_recorded_and_the_next_runs(
    tmp_path, monkeypatch
):
    """Every stage is wrapped, the first included: a fault of the check in one stage is that
    stage's failure, the others still run, and the summary says so (exit 1)."""
    ran = []

    def run_one(index, args, sizes, log, start):
        ran.append(gpu_check.STAGES[index].name)
        if index == 0:
            raise RuntimeError("the check itself broke")
        return {"status": "ok", "seconds": 0.0}

    monkeypatch.setattr(gpu_check, "run_one", run_one)
    monkeypatch.setattr(gpu_check, "_become_subreaper", lambda: None)
    out = tmp_path / "out"
    code = gpu_check.main(
        [
            "--cpu-rehearsal",
            "--out",
            str(out),
            "--work",
            str(tmp_path / "work"),
        ]
    )
    assert code == 1
    assert ran == [stage.name for stage in gpu_check.STAGES]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stages"]["train_step"] == {
        "status": "failed",
        "error": "RuntimeError('the check itself broke')",
    }
    assert summary["verdict"] == "FAILED"


def test_the_budget_is_shared_out_by_allotments():
    """Each stage's deadline: its allotment (scaled with the budget) from now, never eating the
    allotments of the stages after it; the plan gets what is left."""
    names = [stage.name for stage in gpu_check.STAGES]
    assert names == [
        "train_step",
        "generation",
        "alibi",
        "plan",
        "correctness",
    ]
    fixed = sum(stage.allotted_s or 0 for stage in gpu_check.STAGES)
    # the plan gets at least two minutes of the eight
    assert gpu_check.BUDGET_S == 480
    assert fixed + gpu_check.MARGIN_S <= 480 - 120
    start = 1000.0
    assert gpu_check.deadline(0, 480, start, start) == start + 80
    # half the budget: half the allotments
    assert gpu_check.deadline(0, 240, start, start) == start + 40
    # the plan, started at 200 s: all but the checks' 90 s and the margin
    plan = names.index("plan")
    assert gpu_check.deadline(plan, 480, start, start + 200) == start + 385
    # a stage started late keeps the later stages' allotments for them
    assert gpu_check.deadline(0, 480, start, start + 400) == start + 220
