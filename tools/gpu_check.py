"""Everything a GPU must verify, in one call on a bare GPU machine.

    python tools/gpu_check.py --out DIR                  # one H100: <= 8 min
    python tools/gpu_check.py --out DIR --cpu-rehearsal  # a CPU, tiny sizes

Needs torch, matplotlib and tqdm only (no Jupyter, no install: each stage
runs the working tree's ``src``). Five stages, in this order:

1. ``train_step``, 2. ``generation``, 3. ``alibi``: the benchmarks
   (``python -m mixers.bench.NAME --profile gpu``) on an idle GPU, each
   printing its targets beside its figures;
4. ``plan``: ``mixers.experiments.all --profile gpu --workers 8``, every
   chapter's comparison at once, each finished run saved as it finishes;
5. ``correctness``: every attention backend of ``MultiHeadAttention``,
   ``AlibiMultiHeadAttention`` and ``RotaryMultiHeadAttention`` against
   float64 eager on the CPU (outputs and input gradients), the flex backend
   once per mode and precision; greedy decoding against the plain loop, and
   seeded sampling recorded as a CUDA graph against the unrecorded step (a
   graph that cannot be recorded is a failure); a compiled training step
   against an eager one.

Each stage is a process group of its own (``start_new_session``) on a real
timer (a poll loop, whatever the stage prints): at its deadline it gets
SIGINT (the plan saves what finished, as on Ctrl-C), and ``GRACE_S`` later
SIGKILL goes to whatever is left of its group, the plan's worker processes
included; nothing of a stage runs on when the next starts. A stage that fails
or is stopped is recorded, and the next still runs.

The budget (``--budget``, default 8 minutes on a GPU) is shared out by
``STAGES``: each stage has its allotment (scaled with the budget), and the
plan has what the others leave. A GPU window is short (15 minutes, 1-2 of them
to start the machine), so one call must fit in 10 minutes with time to spare.

It writes at most four files to DIR, each as soon as a stage ends:
``gpu_check.log`` (everything printed, the stages' output included),
``summary.json`` (each stage: status, seconds, allotment, exit code, process
group; the plan's prediction), ``correctness.json`` and ``results.tar``, the
results files of the work folder: ``tar -xf DIR/results.tar -C book/results``
(a ``*.partial.json`` in it is an unfinished experiment's progress). It exits
0 when every stage passed, 1 when one failed, 3 when one was stopped or
skipped: the same command again resumes.

The work folder (``--work``, default ``runs/gpu_check-PROFILE``, untracked)
keeps the stages' results between calls: a second call on the same machine
skips the benchmarks that finished and resumes the plan where it stopped
(``--fresh`` starts afresh).

``--cpu-rehearsal`` runs the same code on the CPU at tiny sizes: the
``smoke`` profile, two workers, a plan of four runs, short lengths, one
thread a process, and nothing that compiles (the alibi benchmark and the
flex checks compile FlexAttention, for minutes on a busy CPU; the compiled
training step likewise). tests/test_gpu_check.py runs it with
``--stop-plan-after-runs 1``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from mixers.alibi import AlibiMultiHeadAttention  # noqa: E402
from mixers.attention import MultiHeadAttention  # noqa: E402
from mixers.model import LanguageModel, ModelConfig  # noqa: E402
from mixers.positions import RotaryMultiHeadAttention  # noqa: E402


@dataclass(frozen=True)
class Stage:
    """A stage: its name, and the seconds it is allotted on one H100 with
    cold compile caches (None: what the other stages leave), with why."""

    name: str
    allotted_s: float | None
    why: str


#: The whole check on one H100: 8 minutes.
BUDGET_S = 480.0
#: The stages in order, each allotted what it is estimated to take on one
#: H100 whose compile caches are cold (every machine starts bare). The
#: estimates start from the review of 2026-11-27 (from the H200 logs of
#: 2026-11-26: the gpu baseline compiled in 14 s there); a stage's own
#: process (python, torch, CUDA) costs 5-10 s more. The benchmarks and the
#: checks are trimmed so that the four fixed allotments (335 s) leave the
#: plan at least 140 s, about 3 minutes when they take their estimates; the
#: rest of the plan is the next call's, which skips the finished benchmarks
#: and resumes it.
STAGES = (
    Stage(
        "train_step",
        80,
        "about 70 s: four models compiled (about 14 s each, cold), then 7"
        " rounds of 10 steps of each",
    ),
    Stage(
        "generation",
        90,
        "1.2-1.7 min at 500 tokens; at 300, 65-90 s: three decoding steps"
        " compiled (about 15 s each) and recorded, each way timed 4 times",
    ),
    Stage(
        "alibi",
        75,
        "1.2-1.8 min at five lengths and 10 repeats; at L = 1,024 and 4,096"
        " (the target's length) and 5 repeats, 50-70 s, most of it flex"
        " compilations",
    ),
    Stage(
        "plan",
        None,
        "5.5-6.5 min alone; here what the others leave, and the rest in the"
        " next call",
    ),
    Stage(
        "correctness",
        90,
        "1.7-2.5 min with 18 flex compilations (forward and backward); with"
        " 6, one per mode and precision, 60-90 s, a compiled training step"
        " (about 20 s) included",
    ),
)
BENCHMARKS = {
    "train_step": "train_step",
    "generation": "generation",
    "alibi": "alibi_bench",
}
#: Seconds between SIGINT and SIGKILL to a stage's process group.
GRACE_S = {"gpu": 20.0, "rehearsal": 10.0}
#: Seconds kept back at the end, to write the last files.
MARGIN_S = 5.0
POLL_S = 0.2

#: Relative error allowed against float64 (the GPU measured at most 2.4e-6
#: in float32 and 8.9e-3 in bf16 on 2026-11-26).
TOLERANCE = {"float32": 1e-4, "bf16": 3e-2}
LAYERS = {
    "attention": (MultiHeadAttention, ("eager", "sdpa")),
    "alibi": (AlibiMultiHeadAttention, ("eager", "sdpa", "flex")),
    "rotary": (RotaryMultiHeadAttention, ("eager", "sdpa")),
}
MODES = ("causal", "padded", "bidirectional")
PRECISIONS = ("float32", "bf16")
#: What each size of check runs. ``flex``: the one length each (mode,
#: precision) is checked at (a compilation each): FlexAttention's blocks are
#: 128 long, so one length that is a multiple of 128 and one that is not.
SIZES = {
    "gpu": dict(
        profile="gpu",
        workers=8,
        budget=BUDGET_S,
        experiments=None,  # all of them
        benchmarks=tuple(BENCHMARKS),
        not_rehearsed=None,
        bench_args={"alibi": ["--lengths", "1024", "4096", "--repeats", "5"]},
        lengths=(40, 300, 1000),
        flex={
            ("causal", "float32"): 1000,
            ("causal", "bf16"): 1024,
            ("padded", "float32"): 1024,
            ("padded", "bf16"): 1000,
            ("bidirectional", "float32"): 1000,
            ("bidirectional", "bf16"): 1024,
        },
        d_model=384,
        heads=6,
        decode_tokens=300,
        training=True,
        env={},
    ),
    "rehearsal": dict(
        profile="smoke",
        workers=2,
        budget=1800.0,
        experiments=("attention_scaling",),  # four runs
        benchmarks=("train_step", "generation"),
        # FlexAttention compiles for minutes on a busy CPU (the alibi
        # benchmark times it; tests/test_bench_alibi.py runs it without)
        not_rehearsed="FlexAttention compiles for minutes on a CPU",
        bench_args={},
        lengths=(24,),
        flex={},
        d_model=32,
        heads=4,
        decode_tokens=16,
        # torch.compile of a training step takes minutes on a busy CPU;
        # tests/gpu_path_on_cpu.py checks it there
        training=False,
        # one thread a process: on shared cores two wait for each other
        env={"OMP_NUM_THREADS": "1"},
    ),
}


class Log:
    """Everything printed, also to ``gpu_check.log``; callable from the
    threads that copy the stages' output."""

    def __init__(self, path: Path):
        self.file = path.open("a", encoding="utf-8")
        self.lock = threading.Lock()

    def __call__(self, text: str = "") -> None:
        with self.lock:
            print(text, flush=True)
            self.file.write(text + "\n")
            self.file.flush()


# -----------------------------------------------------------------------------
# The command line, checked before any work


def positive_seconds(text: str) -> float:
    """argparse type: a finite number of seconds > 0."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(
            f"must be a finite number of seconds > 0, got {text!r} (the"
            " default is 480 on a GPU, 1800 in the rehearsal)"
        )
    return seconds


def writable_folder(text: str) -> Path:
    """argparse type: a folder that exists or can be made, and that takes a
    file (tried, not guessed from permissions)."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        kind = "a file" if path.is_file() else "not a folder (a device?)"
        raise argparse.ArgumentTypeError(f"{text} is {kind}: give a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".gpu_check.{os.getpid()}.probe"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise argparse.ArgumentTypeError(
            f"cannot write in {text} ({error.strerror or error}): give a"
            " folder you can write in"
        ) from None
    return path


#: The files the check writes in --out: at most 8 come back from a GPU
#: machine.
OUT_FILES = (
    "gpu_check.log",
    "summary.json",
    "correctness.json",
    "results.tar",
)


def parse_args(argv=None) -> argparse.Namespace:
    """The command line, every argument checked before any work: a usage
    error (exit 2) that names what is wrong."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        required=True,
        type=writable_folder,
        metavar="DIR",
        help="where the files go",
    )
    parser.add_argument(
        "--work",
        type=writable_folder,
        default=None,
        metavar="DIR",
        help="the stages' results, kept"
        " between calls (default runs/gpu_check-PROFILE)",
    )
    parser.add_argument(
        "--cpu-rehearsal",
        action="store_true",
        help="the same code on the CPU at tiny sizes",
    )
    parser.add_argument(
        "--budget",
        type=positive_seconds,
        default=None,
        help="seconds for the whole check (default 480 on a"
        " GPU, 1800 in the rehearsal)",
    )
    parser.add_argument(
        "--fresh", action="store_true", help="empty the work folder first"
    )
    parser.add_argument(
        "--stop-plan-after-runs",
        type=int,
        default=None,
        metavar="N",
        help="stop the plan as its deadline"
        " would, once N of its runs are saved",
    )
    parser.add_argument(
        "--stage", choices=("plan", "correctness"), help=argparse.SUPPRESS
    )  # a stage's own process
    parser.add_argument("--profile", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.stage is None and not args.cpu_rehearsal:
        if not torch.cuda.is_available():
            parser.error("no CUDA GPU here: use --cpu-rehearsal on a CPU")
    sizes = SIZES["rehearsal" if args.cpu_rehearsal else "gpu"]
    others = sorted(
        p.name for p in args.out.iterdir() if p.name not in OUT_FILES
    )
    if others and args.stage is None:
        parser.error(
            f"--out {args.out} holds files the check does not write"
            f" ({', '.join(others[:5])}): give an empty or a new folder"
        )
    if args.stop_plan_after_runs is not None and args.stop_plan_after_runs < 1:
        parser.error("--stop-plan-after-runs must be an int >= 1")
    args.budget = args.budget or sizes["budget"]
    args.work = args.work or writable_folder(
        str(ROOT / "runs" / f"gpu_check-{sizes['profile']}")
    )
    return args


# -----------------------------------------------------------------------------
# A stage: a process group of its own, on a timer


def group_members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid`` (a zombie is dead): from
    ``/proc`` where there is one, else whether ``killpg`` finds any."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").is_file():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        return [pgid]
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # ended meanwhile
            continue
        # after "pid (name) ": state, parent, process group
        state, _, group = stat[stat.rindex(")") + 2 :].split()[:3]
        if int(group) == pgid and state not in "ZX":
            members.append(int(entry.name))
    return members


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:  # none left
        pass


def _wait_for(condition, seconds: float) -> bool:
    """Polls ``condition()`` for up to ``seconds``; whether it came true."""
    end = time.monotonic() + seconds
    while not condition():
        if time.monotonic() >= end:
            return False
        time.sleep(POLL_S)
    return True


#: Whether this process adopts the orphans of its stages (``PR_SET_CHILD_
#: SUBREAPER``): then it reaps them, and none stays a zombie.
ADOPTS_ORPHANS = {"yes": False}


def _reap_orphans() -> None:
    """Waits for the stages' orphans that this process adopted."""
    while ADOPTS_ORPHANS["yes"]:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _become_subreaper() -> None:
    """On Linux, the orphans of a stage's processes become this process's
    children, not init's, and are reaped here. Only the check's own process
    calls it: it waits for any child, its stages' leaders already waited."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        ADOPTS_ORPHANS["yes"] = libc.prctl(36, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        pass


def _copy_output(stream, log) -> None:
    for line in stream:
        log(line.rstrip("\n"))


def run_stage(command, log, deadline, grace, stop_when=None, env=None) -> dict:
    """``command`` in a process group of its own, its output into the log,
    until it ends, its ``deadline`` (``time.monotonic()``) passes or
    ``stop_when()`` gives a reason to stop: then SIGINT to the group, and
    ``grace`` seconds later SIGKILL to what is left of it. A process left in
    the group by a stage that ended on its own is killed too. ``env``: more
    environment variables for it. Returns the stage's record: status (ok,
    failed or stopped), exit code, seconds, process group, why it was
    stopped, processes killed."""
    start = time.monotonic()
    path = [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(path)}
    log(f"$ {' '.join(command)}")
    try:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    except OSError as error:  # could not start at all
        return {"status": "failed", "error": str(error), "seconds": 0.0}
    reader = threading.Thread(
        target=_copy_output, args=(process.stdout, log), daemon=True
    )
    reader.start()
    stopped = None
    while stopped is None and process.poll() is None:
        if time.monotonic() >= deadline:
            stopped = "its time was up"
        else:
            stopped = stop_when() if stop_when is not None else None
            time.sleep(POLL_S)
    killed = _end_group(process, stopped, grace, log)
    reader.join(timeout=5)
    status = (
        "stopped" if stopped else "ok" if process.returncode == 0 else "failed"
    )
    return {
        "status": status,
        "exit_code": process.returncode,
        "seconds": round(time.monotonic() - start, 1),
        "process_group": process.pid,
        "stopped": stopped,
        "killed": killed,
    }


def _end_group(process, stopped, grace, log) -> int:
    """A stopped stage: SIGINT to its group, ``grace`` seconds to end, then
    SIGKILL to what is left. One that ended on its own: SIGKILL to anything
    it left in its group. Returns how many processes got SIGKILL; returns
    once the group is empty."""
    pgid = process.pid
    if stopped:
        log(f"stopping it ({stopped}): SIGINT to its process group")
        _signal_group(pgid, signal.SIGINT)
        _wait_for(
            lambda: process.poll() is not None and not group_members(pgid),
            grace,
        )
    process.poll()
    left = group_members(pgid)
    if left:
        log(f"SIGKILL to {len(left)} process(es) left in its group")
        _signal_group(pgid, signal.SIGKILL)
    process.wait()
    _wait_for(lambda: not group_members(pgid), 30)
    _reap_orphans()
    return len(left)


# -----------------------------------------------------------------------------
# The stages, their deadlines, and what each leaves in --out


def saved_runs(work: Path, profile: str) -> int:
    """The runs of the plan saved in ``work``: those of its progress files
    and of its finished experiments' results."""
    from mixers.experiments.all import EXPERIMENTS

    count = 0
    for name in EXPERIMENTS:
        for path in (
            work / f"{name}-{profile}.partial.json",
            work / f"{name}-{profile}.json",
        ):
            try:
                results = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            count += len(results.get("runs", [])) or "result" in results
    return count


def done_before(name: str, work: Path, profile: str) -> bool:
    """A benchmark whose complete results an earlier call left in ``work``."""
    path = work / f"{BENCHMARKS[name]}-{profile}.json"
    try:
        results = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return results.get("complete", True) and "provenance" in results


def stage_command(stage: Stage, args, sizes) -> list[str]:
    """The command line of a stage: a benchmark's own; the plan and the
    correctness checks as this tool's ``--stage``, in a process of their
    own."""
    profile = sizes["profile"]
    if stage.name in BENCHMARKS:
        return [
            sys.executable,
            "-m",
            f"mixers.bench.{stage.name}",
            "--profile",
            profile,
            "--out",
            str(args.work),
            *sizes["bench_args"].get(stage.name, []),
        ]
    tool = [sys.executable, str(Path(__file__).resolve()), "--stage"]
    rehearsal = ["--cpu-rehearsal"] if args.cpu_rehearsal else []
    if stage.name == "plan":
        return [
            *tool,
            "plan",
            "--out",
            str(args.out),
            "--work",
            str(args.work),
            "--profile",
            profile,
            *rehearsal,
        ]
    return [*tool, "correctness", "--out", str(args.out), *rehearsal]


def deadline(index: int, budget: float, start: float, now: float) -> float:
    """When stage ``index`` must have ended (``time.monotonic()``): its
    allotment, scaled with the ``budget``, from ``now``; never so late that
    the stages after it lose theirs."""
    scale = budget / BUDGET_S
    later = sum(s.allotted_s or 0 for s in STAGES[index + 1 :]) * scale
    end = start + budget - later - MARGIN_S
    own = STAGES[index].allotted_s
    if own is not None:
        end = min(end, now + own * scale)
    return end


def run_one(index: int, args, sizes, log, start: float) -> dict:
    """Stage ``index``, recorded: skipped where an earlier call finished it
    or no time is left; its failure to start a failure like any other."""
    stage, profile = STAGES[index], sizes["profile"]
    grace = GRACE_S["rehearsal" if args.cpu_rehearsal else "gpu"]
    if stage.name in BENCHMARKS and stage.name not in sizes["benchmarks"]:
        return {"status": "not rehearsed", "why": sizes["not_rehearsed"]}
    if stage.name in BENCHMARKS and done_before(
        stage.name, args.work, profile
    ):
        return {"status": "done before", "seconds": 0.0}
    now = time.monotonic()
    end = deadline(index, args.budget, start, now)
    allotted = end - now
    if allotted < grace + 1:
        return {"status": "skipped", "why": "no time left", "seconds": 0.0}
    stop_when = None
    if stage.name == "plan" and args.stop_plan_after_runs is not None:
        wanted = args.stop_plan_after_runs

        def stop_when():
            if saved_runs(args.work, profile) >= wanted:
                return f"{wanted} of its runs saved (--stop-plan-after-runs)"
            return None

    log(f"\n== {stage.name}: {allotted:.0f} s allotted ({stage.why})")
    command = stage_command(stage, args, sizes)
    record = run_stage(
        command, log, end - grace, grace, stop_when, sizes["env"]
    )
    record["allotted_s"] = round(allotted, 1)
    log(f"== {stage.name}: {record['status']} in {record['seconds']:.0f} s")
    return record


def pack_results(args) -> list[str]:
    """``results.tar`` in --out: every results file of the work folder (the
    benchmarks', the plan's experiments' and their progress files), written
    whole or not at all."""
    names = sorted(p.name for p in args.work.glob("*.json"))
    partial = args.out / ".results.tar.tmp"
    with tarfile.open(partial, "w") as tar:
        for name in names:
            tar.add(args.work / name, arcname=name)
    os.replace(partial, args.out / "results.tar")
    return names


def write_json(path: Path, data: dict) -> None:
    """``data`` to ``path``, atomically."""
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(json.dumps(data, indent=1))
    os.replace(partial, path)


def verdict(stages: dict) -> tuple[str, int]:
    """The check's word and exit code: 1 if a stage failed; 3 if one was
    stopped or skipped (run the same command again: it resumes); else 0."""
    statuses = {record["status"] for record in stages.values()}
    if "failed" in statuses:
        return "FAILED", 1
    if statuses & {"stopped", "skipped"}:
        return "incomplete (run it again to resume)", 3
    return "passed", 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.stage is not None:  # a stage's own process
        return STAGE_MAINS[args.stage](args)
    start = time.monotonic()
    sizes = SIZES["rehearsal" if args.cpu_rehearsal else "gpu"]
    if args.fresh:
        shutil.rmtree(args.work)
        args.work.mkdir(parents=True)
    _become_subreaper()
    log = Log(args.out / "gpu_check.log")
    summary = {
        "environment": environment(args.cpu_rehearsal),
        "budget_s": args.budget,
        "work": str(args.work),
        "stages": {},
    }
    log(json.dumps(summary["environment"]))
    if not args.cpu_rehearsal:
        summary["plan_predicted"] = predicted_plan(sizes)
        log(f"the plan: {summary['plan_predicted']}")
    write_json(args.out / "summary.json", summary)
    for index, stage in enumerate(STAGES):
        try:
            record = run_one(index, args, sizes, log, start)
        except Exception as error:  # a fault of the check itself
            record = {"status": "failed", "error": repr(error)}
            log(f"== {stage.name}: failed in the check itself: {error!r}")
        summary["stages"][stage.name] = record
        summary["results"] = pack_results(args)
        summary["seconds"] = round(time.monotonic() - start, 1)
        write_json(args.out / "summary.json", summary)
    word, code = verdict(summary["stages"])
    summary["verdict"] = word
    write_json(args.out / "summary.json", summary)
    log(
        f"gpu check {word} in {summary['seconds'] / 60:.1f} min; results.tar"
        f" holds {len(summary['results'])} results files"
    )
    return code


def environment(rehearsal: bool) -> dict:
    """Where the check runs (no CUDA context is made here: the stages make
    their own)."""
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cuda": torch.version.cuda,
        "gpus": 0 if rehearsal else torch.cuda.device_count(),
        "cpu": platform.processor() or platform.machine(),
        "rehearsal": rehearsal,
    }


def predicted_plan(sizes) -> str:
    """``--plan``'s prediction for the whole plan (on one H100)."""
    from mixers.experiments import all as run_all

    return run_all.plan_lines(sizes["profile"], sizes["workers"])[-1]


# -----------------------------------------------------------------------------
# The plan, as a stage of its own


def plan_main(args) -> int:
    """``mixers.experiments.all``'s command line into the work folder: on a
    GPU every experiment, in the rehearsal a few runs of one."""
    from mixers.experiments import all as run_all

    sizes = SIZES["rehearsal" if args.cpu_rehearsal else "gpu"]
    if sizes["experiments"] is not None:
        run_all.EXPERIMENTS = sizes["experiments"]
    command = [
        "--profile",
        args.profile,
        "--workers",
        str(sizes["workers"]),
        "--out",
        str(args.work),
        "--no-progress",
    ]
    print(f"mixers.experiments.all {' '.join(command)}", flush=True)
    started = time.monotonic()
    run_all.main(command)
    print(
        f"the plan took {(time.monotonic() - started) / 60:.1f} min",
        flush=True,
    )
    return 0


# -----------------------------------------------------------------------------
# Correctness, as a stage of its own: against float64 eager on the CPU


def _relative(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.double().cpu(), want.double().cpu()
    return float((got - want).norm() / want.norm().clamp_min(1e-30))


def _inputs(batch, length, d_model, mode, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, length, d_model, generator=generator)
    token_mask = None
    if mode == "padded":  # the second sequence ends a third of the way early
        token_mask = torch.ones(batch, length, dtype=torch.bool)
        token_mask[1, length - length // 3 :] = False
    return x, token_mask


def _forward_backward(layer, x, token_mask, device, precision, backward):
    x = x.to(device).requires_grad_(backward)
    mask = None if token_mask is None else token_mask.to(device)
    with (
        torch.set_grad_enabled(backward),
        torch.autocast(
            device.type, dtype=torch.bfloat16, enabled=precision == "bf16"
        ),
    ):
        out = layer(x, token_mask=mask)
    real = (
        torch.ones(out.shape[:2], dtype=torch.bool, device=device)
        if mask is None
        else mask
    )
    out = out.float() * real[..., None]  # padded queries are not compared
    if not backward:
        return out.detach(), None
    out.square().sum().backward()
    return out.detach(), x.grad.detach()


def check_layer(name, backend, mode, length, precision, device, sizes):
    """One layer against its float64 copy: relative errors of the output and
    of the input gradient."""
    cls, _ = LAYERS[name]
    causal = mode != "bidirectional"
    torch.manual_seed(0)
    layer = cls(sizes["d_model"], sizes["heads"], causal=causal)
    reference = cls(sizes["d_model"], sizes["heads"], causal=causal)
    reference.load_state_dict(layer.state_dict())
    reference.backend = "eager"
    layer.backend = backend
    x, token_mask = _inputs(2, length, sizes["d_model"], mode)
    # FlexAttention has no backward pass on a CPU (the rehearsal)
    backward = not (backend == "flex" and device.type == "cpu")
    cpu = torch.device("cpu")
    want = _forward_backward(
        reference.double(), x.double(), token_mask, cpu, "-", backward
    )
    got = _forward_backward(
        layer.to(device), x, token_mask, device, precision, backward
    )
    errors = [_relative(got[0], want[0])]
    errors += [_relative(got[1], want[1])] if backward else []
    return {
        "layer": name,
        "backend": backend,
        "mode": mode,
        "length": length,
        "precision": precision,
        "output_error": errors[0],
        "grad_error": errors[1] if backward else None,
        "ok": max(errors) <= TOLERANCE[precision],
    }


def layer_cases(sizes, flex: bool) -> list[tuple]:
    """(layer, backend, mode, length, precision) of every check: with
    ``flex`` False every backend but flex at every length of the sizes; with
    ``flex`` True the flex backend once per (mode, precision) of
    ``sizes["flex"]``, at its length (a compilation each)."""
    cases = []
    for name, (_, backends) in LAYERS.items():
        for backend in backends:
            if (backend == "flex") != flex:
                continue
            for mode in MODES:
                for precision in PRECISIONS:
                    lengths = (
                        (
                            [sizes["flex"][mode, precision]]
                            if (mode, precision) in sizes["flex"]
                            else []
                        )
                        if flex
                        else sizes["lengths"]
                    )
                    for length in lengths:
                        cases.append((name, backend, mode, length, precision))
    return cases


def _decoder(mixer: str, sizes, device, dtype=torch.float32):
    torch.manual_seed(0)
    # decoding goes past block_size: the cache reads on, the window of the
    # models without one slides
    config = ModelConfig(
        vocab_size=65,
        block_size=sizes["decode_tokens"] // 2,
        d_model=sizes["d_model"],
        n_layers=2,
        n_heads=sizes["heads"],
        dropout=0.0,
        token_mixer=mixer,
        positions="none",
    )
    return LanguageModel(config).to(device, dtype).eval()


def _plain_greedy(model, prompt, new: int) -> torch.Tensor:
    window = None if model.decodes_with_cache() else model.config.block_size
    with torch.no_grad():
        for _ in range(new):
            context = prompt if window is None else prompt[:, -window:]
            logits, _ = model(context)
            prompt = torch.cat([prompt, logits[:, -1:].argmax(-1)], dim=1)
    return prompt


def check_decoding(device, sizes) -> list[dict]:
    """Each model decodes greedily the plain loop's tokens; a model with a
    cache also samples, from one seed, the same tokens recorded as a CUDA
    graph (``graph=True``: a recording that fails is a failure, never a
    silent fallback) as unrecorded on the growing cache, in float64 so that
    no rounding flips a draw."""
    rows = []
    for mixer in ("attention", "alibi", "rotary", "gmlp"):
        row = {"model": mixer, "tokens": sizes["decode_tokens"]}
        try:
            row.update(_decode_both_ways(mixer, device, sizes))
        except RuntimeError as error:
            row.update(ok=False, error=f"{type(error).__name__}: {error}")
        rows.append(row)
    return rows


def _decode_both_ways(mixer, device, sizes) -> dict:
    model = _decoder(mixer, sizes, device)
    cached, new = model.decodes_with_cache(), sizes["decode_tokens"]
    prompt = torch.randint(65, (2, 5), generator=torch.Generator())
    prompt = prompt.to(device)
    graph = True if cached else None
    fast = model.generate(prompt, new, top_k=1, graph=graph)
    same = (fast == _plain_greedy(model, prompt, new)).float().mean().item()
    row = {"cache": cached, "same_greedy_tokens": same}
    if cached:
        model = _decoder(mixer, sizes, device, torch.float64)
        draws = [
            model.generate(
                prompt,
                new,
                top_k=9,
                graph=graph,
                generator=torch.Generator(device).manual_seed(7),
            )
            for graph in (True, False)
        ]
        row["same_sampled_tokens"] = torch.equal(*draws)
    row["ok"] = same == 1.0 and row.get("same_sampled_tokens", True)
    return row


def check_training(device) -> dict:
    """Three steps of the gpu profile's training path (torch.compile, bf16
    autocast on a GPU) against the same steps uncompiled."""
    from mixers.data import CharDataset, load_corpus
    from mixers.train import get_profile, run_profile

    dataset = CharDataset.from_text(load_corpus()[:20000])
    # a tiny model and three steps: enough to compare the two paths' losses
    model = dict(block_size=32, d_model=32, n_layers=1, n_heads=2, dropout=0.0)
    train = dict(
        steps=3,
        batch_size=4,
        seq_len=32,
        warmup_steps=1,
        eval_interval=3,
        eval_batches=1,
    )
    losses = {}
    for compiled in (False, True):
        _, result = run_profile(
            dataset,
            get_profile("gpu"),
            model_overrides=model,
            train_overrides=dict(train, compile=compiled),
            device=device,
            progress=False,
        )
        losses[compiled] = result.train_loss[-1]
    gap = abs(losses[True] - losses[False])
    return {"eager": losses[False], "compiled": losses[True], "ok": gap < 0.05}


def _worst(rows: list[dict]) -> dict:
    return {
        p: max(
            (
                max(r["output_error"], r["grad_error"] or 0.0)
                for r in rows
                if r["precision"] == p
            ),
            default=None,
        )
        for p in PRECISIONS
    }


def correctness_main(args) -> int:
    """The checks, cheapest first (eager and sdpa layers, decoding, then the
    flex compilations and the compiled training step), ``correctness.json``
    rewritten as each part ends: a stage stopped midway keeps what it
    checked. Exit 1 if a check failed."""
    sizes = SIZES["rehearsal" if args.cpu_rehearsal else "gpu"]
    device = torch.device("cpu" if args.cpu_rehearsal else "cuda")
    checked = {"device": _device_name(device), "complete": False}
    parts = {
        "layers": lambda: [
            check_layer(*case, device, sizes)
            for case in layer_cases(sizes, flex=False)
        ],
        "decoding": lambda: check_decoding(device, sizes),
        "flex": lambda: [
            check_layer(*case, device, sizes)
            for case in layer_cases(sizes, flex=True)
        ],
        "training": lambda: (
            check_training(device)
            if sizes["training"]
            else {"ok": True, "skipped": "rehearsal"}
        ),
    }
    for name, part in parts.items():
        checked[name] = part()
        rows = (
            checked[name]
            if isinstance(checked[name], list)
            else [checked[name]]
        )
        print(
            f"correctness, {name}: {sum(r['ok'] for r in rows)} of"
            f" {len(rows)} checks pass",
            flush=True,
        )
        write_json(args.out / "correctness.json", checked)
    checked["worst"] = _worst(checked["layers"] + checked["flex"])
    checked["ok"] = (
        all(
            r["ok"]
            for name in ("layers", "decoding", "flex")
            for r in checked[name]
        )
        and checked["training"]["ok"]
    )
    checked["complete"] = True
    write_json(args.out / "correctness.json", checked)
    print(
        f"correctness: worst relative error {checked['worst']} (limits"
        f" {TOLERANCE}); {'all pass' if checked['ok'] else 'FAILED'}",
        flush=True,
    )
    return 0 if checked["ok"] else 1


def _device_name(device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine()


STAGE_MAINS = {"plan": plan_main, "correctness": correctness_main}


if __name__ == "__main__":
    sys.exit(main())
