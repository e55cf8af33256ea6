"""One module per chapter experiment: ``run(profile) -> results`` and a CLI
writing JSON.

Run one with ``python -m mixers.experiments.NAME --profile {smoke,cpu,gpu}``;
the results land in ``runs/NAME-PROFILE.json`` with their provenance
(``mixers.results``). The chapter plots the committed results in
``book/results`` of the largest profile that was run; ``--out book/results``
replaces them.

Every experiment survives an interruption the same way (``run_jobs``): it is a
list of jobs, one per run, and the command line saves each run the moment it
finishes to ``NAME-PROFILE.partial.json``; the same command, run again, resumes
from there. One run of an experiment writes into a folder at a time
(``run_lock``); Ctrl-C and ``kill`` (SIGTERM) stop it alike, saying where its
finished runs are (exit 130 and 143).
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import inspect
import json
import multiprocessing
import os
import signal
import socket
import struct
import sys
import threading
import time
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from contextlib import closing, contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, replace
from functools import partial
from multiprocessing import get_context
from pathlib import Path
from typing import Callable, Iterator

import torch
import torch.nn.functional as F

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

from .._checks import check_bool, check_positive_int
from ..data import CharDataset, sequential_windows
from ..model import LanguageModel
from ..results import (
    PROFILE_ORDER,  # noqa: F401 (re-exported: the chapters import it)
    CorruptResults,
    ResultsNotWritten,
    check_results_file,
    check_writable_dir,
    load_results,  # noqa: F401 (re-exported: the chapters import it)
    provenance,
    read_results,  # noqa: F401 (re-exported)
    results_path,
    runs_dir,
    save_results,
    to_json,
    writable_dir,
    write_results,
)
from ..train import (
    PROFILES,
    Profile,
    TrainConfig,
    TrainingDiverged,
    default_device,
    default_profile_name,
    evaluate_sequential,
    get_profile,
)


def profile_settings(profile: str, settings: dict) -> dict:
    """An experiment's own sizes for ``profile`` (its table ``settings`` maps
    profile -> sizes); inside ``step_fraction``, the ``gpu`` profile's
    training cut to that share of its steps (``scaled_settings``)."""
    if profile not in settings:
        raise ValueError(
            f"profile must be one of {sorted(settings)}, got {profile!r}"
        )
    fraction = _STEP_FRACTION.get()
    if (
        fraction is None
        or profile != "gpu"
        or "train" not in settings[profile]
    ):
        return settings[profile]
    return scaled_settings(settings[profile], get_profile(profile), fraction)


# -----------------------------------------------------------------------------
# A chapter's live run on a reader's GPU: the ``gpu`` plan with its steps cut
# to a budget (``mixers.experiments.plan.live_run``). Every experiment reads
# its sizes through ``profile_settings`` (the baseline through
# ``sized_profile``), so one context cuts them all.

_STEP_FRACTION: ContextVar[float | None] = ContextVar(
    "step_fraction", default=None
)


@contextmanager
def step_fraction(fraction: float) -> Iterator[None]:
    """Inside this block the ``gpu`` profile of every experiment trains
    ``fraction`` (in (0, 1]) of its steps, eagerly: a run of a few minutes
    does not win back ``torch.compile``'s compile time."""
    if not isinstance(fraction, float) or not 0 < fraction <= 1:
        raise ValueError(
            f"fraction must be a float in (0, 1], got {fraction!r}"
        )
    token = _STEP_FRACTION.set(fraction)
    try:
        yield
    finally:
        _STEP_FRACTION.reset(token)


def scaled_train(train: dict, fraction: float) -> dict:
    """TrainConfig fields ``train`` with ``fraction`` of the steps (at least
    one); warm-up and the evaluation interval keep their share of the run, so
    a cut run evaluates as often and decays its rate over the same shape."""
    steps = max(1, round(train["steps"] * fraction))
    share = steps / train["steps"]
    return {
        **train,
        "steps": steps,
        "warmup_steps": min(steps - 1, round(train["warmup_steps"] * share)),
        "eval_interval": max(
            1, min(steps, round(train["eval_interval"] * share))
        ),
        "compile": False,
    }


def scaled_settings(entry: dict, base: Profile, fraction: float) -> dict:
    """An experiment's settings ``entry`` over profile ``base`` with
    ``fraction`` of the steps: its training (``scaled_train``, spelled out in
    full) and the steps it saves weights at (``snapshot_steps``)."""
    train = asdict(replace(base.train, **entry["train"]))
    out = {**entry, "train": scaled_train(train, fraction)}
    if "snapshot_steps" in entry:
        share = out["train"]["steps"] / train["steps"]
        out["snapshot_steps"] = tuple(
            sorted({round(step * share) for step in entry["snapshot_steps"]})
        )
    return out


def sized_profile(profile: Profile) -> Profile:
    """``profile``, its training cut as ``profile_settings`` cuts the
    experiments' inside ``step_fraction``: for the baseline, whose sizes are
    the profile's own."""
    fraction = _STEP_FRACTION.get()
    if fraction is None or profile.name != "gpu":
        return profile
    train = scaled_train(asdict(profile.train), fraction)
    return replace(profile, train=TrainConfig(**train))


def experiment_settings(
    profile: str, table: dict
) -> tuple[Profile, dict, dict]:
    """For an experiment whose ``table`` maps profiles to settings with a
    ``"model"`` entry: the shared profile it starts from, its own settings for
    it, and the model fields they add up to.
    """
    base = get_profile(profile)
    settings = profile_settings(base.name, table)
    return base, settings, {**base.model, **settings["model"]}


# Windows per evaluation batch: about this many tokens at once, whatever the
# length.
EVAL_BATCH_TOKENS = 8192


def evaluation_windows(eval_tokens: int, length: int) -> tuple[int, int]:
    """For scoring the first ``eval_tokens`` tokens in windows of ``length``:
    how many windows, and how many per batch (about ``EVAL_BATCH_TOKENS``
    tokens), so every length reads the same tokens.
    """
    windows = eval_tokens // length
    if windows < 1:
        raise ValueError(
            f"eval_tokens={eval_tokens} is shorter than the evaluation length"
            f" {length}"
        )
    return windows, max(1, min(windows, EVAL_BATCH_TOKENS // length))


@torch.no_grad()
def per_position_loss(
    model: LanguageModel,
    data: torch.Tensor,
    seq_len: int,
    batch_size: int = 16,
    max_windows: int | None = None,
) -> tuple[torch.Tensor, int]:
    """Mean loss (nats/char) at each position of non-overlapping windows of
    ``data``.

    model: a ``LanguageModel``; data: token ids ``int64[n]``; windows as in
    ``mixers.data.sequential_windows(data, seq_len, batch_size, max_windows)``.
    Returns ``(loss [seq_len] float64, windows)``: ``loss[t]`` is the
    cross-entropy of predicting token t + 1 of a window from tokens 0..t,
    averaged over the windows, and ``windows`` is how many there were. Since
    every window has every position once, ``loss.mean()`` is the mean loss over
    all the windows' tokens, what ``mixers.train.evaluate_sequential`` returns.
    """
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total = torch.zeros(seq_len, dtype=torch.float64)
    windows = 0
    try:
        for x, y in sequential_windows(
            data, seq_len, batch_size, max_windows, device
        ):
            logits, _ = model(x)  # [batch, seq, vocab]
            # [batch, seq]
            loss = F.cross_entropy(
                logits.float().transpose(1, 2), y, reduction="none"
            )
            total += loss.sum(0).double().cpu()
            windows += x.shape[0]
    finally:
        model.train(was_training)
    if windows == 0:
        raise ValueError(
            f"data has {len(data)} tokens: not one window of"
            f" seq_len={seq_len} + 1"
        )
    return total / windows, windows


def _check_sliding(data, window, stride, n_tokens) -> None:
    """``sliding_window_loss``'s arguments: positive ints, a stride of at
    most a window, whole strides after the first window, and the data to read
    them from."""
    check_positive_int("window", window)
    check_positive_int("stride", stride)
    check_positive_int("n_tokens", n_tokens)
    if stride > window:
        raise ValueError(f"stride={stride} must be at most window={window}")
    if n_tokens < window or (n_tokens - window) % stride:
        raise ValueError(
            f"n_tokens - window = {n_tokens} - {window} must be a multiple"
            f" of stride={stride} and at least 0"
        )
    if len(data) < n_tokens + 1:
        raise ValueError(
            f"data has {len(data)} tokens: fewer than n_tokens + 1 ="
            f" {n_tokens + 1}"
        )


@torch.no_grad()
def sliding_window_loss(
    model: LanguageModel,
    data: torch.Tensor,
    window: int,
    stride: int,
    n_tokens: int,
    batch_size: int = 16,
) -> float:
    """Mean loss (nats/char) of the first ``n_tokens`` predictions of
    ``data``, each read with (almost) a whole ``window`` of context.

    Non-overlapping windows give the first tokens of every window little
    context; here windows of ``window`` tokens start every ``stride`` tokens
    and each scores only its last ``stride`` predictions, so that every
    prediction after the first window sees between ``window - stride + 1`` and
    ``window`` tokens (the first window scores all of its own, as nothing came
    before it). ``stride=1`` is the paper's sliding window, every prediction
    with the full window; ``stride=window`` is ``evaluate_sequential``. The
    cost is ``window / stride`` times that of non-overlapping windows.
    ``n_tokens - window`` must be a multiple of ``stride``.
    """
    _check_sliding(data, window, stride, n_tokens)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    # Window k starts at k·stride; window 0 scores all of its predictions,
    # window k ≥ 1 only its last `stride`.
    starts = torch.arange(1 + (n_tokens - window) // stride) * stride
    total = 0.0
    try:
        for first in range(0, len(starts), batch_size):
            begin = starts[first : first + batch_size]
            tokens = data[begin[:, None] + torch.arange(window + 1)]
            x, y = tokens[:, :-1].to(device), tokens[:, 1:].to(device)
            logits, _ = model(x)  # [batch, window, vocab]
            loss = F.cross_entropy(  # [batch, window]
                logits.float().transpose(1, 2), y, reduction="none"
            )
            scored = loss[:, -stride:].sum()
            if first == 0:  # window 0: its earlier predictions too
                scored += loss[0, :-stride].sum()
            total += scored.item()
    finally:
        model.train(was_training)
    return total / n_tokens


def evaluate_lengths(
    model: LanguageModel,
    data: torch.Tensor,
    lengths: list[int],
    eval_tokens: int,
    per_position: bool = False,
) -> list[dict]:
    """Per length: the mean loss (nats/char) over ``eval_tokens // length``
    non-overlapping windows of ``data``, so that every length reads the same
    first tokens; with ``per_position``, the loss at every position of the
    window too (``per_position_loss``) and the tokens read.

    A length past ``block_size`` that the model cannot take (learned positions,
    gMLP's W) gets ``loss: None`` and the model's own error message, rather
    than a number; a failure at or below ``block_size`` is a bug and is raised.
    """
    rows = []
    for length in lengths:
        windows, batch = evaluation_windows(eval_tokens, length)
        row = {"length": length, "windows": windows, "loss": None}
        try:
            if per_position:
                losses, windows = per_position_loss(
                    model, data, length, batch, max_windows=windows
                )
                # Five decimals are far below the noise between windows; they
                # keep the JSON small.
                row.update(
                    windows=windows,
                    tokens=windows * length,
                    loss=losses.mean().item(),
                    per_position=[round(v, 5) for v in losses.tolist()],
                )
            else:
                row["loss"] = evaluate_sequential(
                    model, data, length, batch, max_windows=windows
                )
            row["error"] = None
        except ValueError as failure:
            if length <= model.config.block_size:
                raise
            row["error"] = str(failure)
            if per_position:
                row.update(windows=0, tokens=0, per_position=None)
        rows.append(row)
    return rows


#: The intra-op threads of one training run on a CPU, in every experiment:
#: these models are too small for a second thread to help on quiet cores,
#: and on shared ones two OpenMP threads wait for each other at every
#: barrier (a step ran several times slower). ``workers=2`` runs two models
#: side by side instead, one per core. The provenance records the count.
CPU_THREADS = 1


@contextmanager
def cpu_threads(
    threads: int | None = CPU_THREADS, enabled: bool | None = None
) -> Iterator[None]:
    """Run the block with ``threads`` intra-op threads, then restore the
    previous count.

    Also a decorator: ``@cpu_threads()`` runs each call of the function on
    ``CPU_THREADS``, the experiments' one thread per run.

    Small models on a shared two-core machine run fastest, and most
    predictably, on one thread per process: two OpenMP threads fighting for
    busy cores slowed them many times over. ``enabled`` defaults to "the runs
    go to the CPU" (``default_device``; on a GPU the CPU thread count hardly
    matters); ``threads=None`` leaves the count alone.
    """
    if enabled is None:
        enabled = default_device().type == "cpu"
    before = torch.get_num_threads()
    if enabled and threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# -----------------------------------------------------------------------------
# Runs that survive an interruption. An experiment is a list of jobs, each the
# tuple of values that names one run in its record ((variant, seed), (pair, lr,
# seed)), and the settings every run shares. The jobs run one by one, or in a
# pool of processes; inside ``save_runs(folder)`` (the command line's
# ``--out``) each finished run is saved at once, atomically, with those
# settings, and a rerun with the same settings runs only the jobs that are
# missing.


class SettingsMismatch(ValueError):
    """A partial results file holds runs made with other settings than this
    run's."""


class FolderInUse(RuntimeError):
    """The folder cannot be locked for this run: another process is running
    the same experiment into it, or the lock's path is taken (a symbolic
    link, a directory)."""


# -----------------------------------------------------------------------------
# One run per experiment and folder. Two runs writing the same files would
# race: each would train the same jobs, and the slower one's results would
# replace the other's. So a run holds a lock on (folder, experiment, profile)
# while it writes there, which the operating system drops when the process
# ends, however it ends (SIGKILL included): nothing a killed run leaves
# blocks the next one.
#
# A lock on a file alone does not hold: ``rm`` of a held lock file leaves the
# first run holding a file that no name reaches, and a second run makes a new
# file and locks that. What ``rm`` cannot remove is what has no file: on
# Linux the lock is a name bound in the kernel's abstract socket namespace,
# made from the folder's identity (its device and inode: one folder by any
# path, symbolic links included) and the experiment, for as long as the run
# lasts; a second bind of that name fails, and the socket says whose it is.
# The file ``NAME-PROFILE.lock`` is locked too (``flock``; where there are no
# abstract sockets, as on macOS, it is the lock) and holds the process id for
# people to read. It is opened with ``O_NOFOLLOW``: a symbolic link in its
# place is refused, never written through. (Where ``fcntl`` is missing,
# Windows, runs are not locked.)


def lock_path(name: str, profile: str, directory: str | Path) -> Path:
    """``DIRECTORY/NAME-PROFILE.lock``: held while a run of ``name`` writes
    there."""
    return results_path(name, profile, Path(directory)).with_suffix(".lock")


def _lock_address(name: str, profile: str, directory: Path) -> bytes | None:
    """The lock's name in Linux's abstract socket namespace (a leading NUL:
    no file), from the folder's device and inode; None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    folder = os.stat(directory)
    key = f"{folder.st_dev}:{folder.st_ino}/{name}-{profile}".encode()
    return b"\0mixers-run-lock/" + hashlib.sha256(key).hexdigest().encode()


def _socket_holder(address: bytes) -> int | None:
    """The process id of the process bound to ``address``: the credentials a
    connection to it carries (``SO_PEERCRED``), or None."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(address)
        size = struct.calcsize("3i")
        credentials = probe.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, size
        )
        return struct.unpack("3i", credentials)[0] or None
    except OSError:
        return None
    finally:
        probe.close()


def _file_holder(fd: int) -> int | None:
    """The process id a held lock file's text gives, or None if it is not
    one."""
    text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def _in_use(name, profile, directory, path, pid: int | None) -> FolderInUse:
    """The refusal of a second run, naming the first's process where it is
    known; only then is there a process id to ``kill``."""
    holder = f"process {pid}" if pid else "another process"
    stop = (
        f"stop it (kill {pid}; its finished runs are kept and a rerun"
        " resumes them)"
        if pid
        else "stop that run (its finished runs are kept and a rerun resumes"
        " them)"
    )
    return FolderInUse(
        f"{holder} is already running {name} (profile {profile}) into"
        f" {Path(directory)} (it holds {path}): wait for it to finish, {stop},"
        " or pass another --out"
    )


@contextmanager
def _socket_lock(address: bytes | None, refuse) -> Iterator[None]:
    """Hold ``address`` bound for the block (nothing where it is None);
    ``refuse(pid)`` makes the error if another process holds it."""
    if address is None:
        yield
        return
    held = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        held.bind(address)
    except OSError as error:
        held.close()
        if error.errno != errno.EADDRINUSE:
            raise
        raise refuse(_socket_holder(address)) from None
    # listening: a refused run connects to read whose lock it is
    held.listen(64)
    try:
        yield
    finally:
        held.close()


def _open_lock_file(path: Path) -> int:
    """``path`` opened for the lock, never through a symbolic link."""
    if path.is_symlink():
        raise FolderInUse(
            f"{path} is a symbolic link: a run's lock is never written"
            " through one (its target would be overwritten); remove the link"
        )
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as error:
        raise FolderInUse(
            f"cannot lock {path}: {error.strerror or error}"
        ) from None


@contextmanager
def _file_lock(path: Path, refuse) -> Iterator[None]:
    """Hold ``flock`` on the file ``path`` for the block, with this process's
    id written in it; ``refuse(pid)`` makes the error if another process
    holds it."""
    while True:
        fd = _open_lock_file(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _file_holder(fd)
            os.close(fd)
            raise refuse(pid) from None
        # Locked, but the file may have been released and removed between
        # open and flock: then lock the one now at the path.
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    try:
        yield
    finally:
        # removed only if the name still leads to this file
        try:
            if os.lstat(path).st_ino == os.fstat(fd).st_ino:
                path.unlink()
        except FileNotFoundError:
            pass
        os.close(fd)


@contextmanager
def run_lock(name: str, profile: str, directory: str | Path) -> Iterator[Path]:
    """Hold the lock of ``name`` and ``profile`` in ``directory`` for the
    block (its file is ``lock_path``); a ``FolderInUse`` naming the process
    that holds it already, and what to do, if another run does."""
    path = lock_path(name, profile, directory)
    if fcntl is None:
        yield path
        return

    def refuse(pid: int | None) -> FolderInUse:
        return _in_use(name, profile, directory, path, pid)

    address = _lock_address(name, profile, Path(directory))
    with _socket_lock(address, refuse), _file_lock(path, refuse):
        yield path


@contextmanager
def _folder_locked(directory: Path) -> Iterator[None]:
    """Hold the folder's own lock for the block (a moment: one read and one
    write of a progress file)."""
    if fcntl is None:
        yield
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # and with it the lock


@dataclass(frozen=True)
class Experiment:
    """What an experiment runs: ``jobs``, each the values of ``fields`` in its
    run's record (``fields=("variant", "seed")``, a job ``("swiglu", 0)``), and
    the JSON-like ``settings`` that every run shares and that saved runs must
    match to be resumed."""

    name: str
    profile: str
    settings: dict
    fields: tuple[str, ...]
    jobs: list[tuple]

    def __post_init__(self) -> None:
        if len(set(self.jobs)) != len(self.jobs):
            raise ValueError(
                f"{self.name}: jobs must not repeat, got {self.jobs}"
            )

    def job(self, record: dict) -> tuple:
        """The job whose run ``record`` is."""
        return tuple(record[field] for field in self.fields)

    def train(
        self,
        run_one: Callable,
        dataset: CharDataset,
        workers: int,
        progress: bool,
    ) -> tuple[list[dict], int]:
        """Train every job (``run_jobs_in_processes``), each as
        ``run_one(dataset, profile, settings, *job, progress=...)``,
        ``workers`` at a time on ``CPU_THREADS`` threads each; progress bars
        only when the runs go one at a time (the bars of several processes
        would interleave). Returns every run's record and how many were
        resumed from a partial file."""
        run_job = partial(
            _run_one_job,
            run_one,
            self.profile,
            self.settings,
            progress and workers == 1,
        )
        return run_jobs_in_processes(
            self, run_job, dataset, workers, CPU_THREADS
        )

    def provenance(
        self, runs: list[dict], resumed: int, start: float, **more
    ) -> dict:
        """The provenance of the whole experiment: its first finished run's
        (``first_provenance``), then ``more``, how many runs were resumed,
        and the seconds since ``start`` (``time.perf_counter``) of this call:
        with a resume, less than the runs' own times add up to."""
        return {
            **first_provenance(runs, self.profile),
            **more,
            "resumed_runs": resumed,
            "wall_time_s": time.perf_counter() - start,
        }


def _run_one_job(
    run_one: Callable, profile: str, settings, progress: bool, dataset, job
) -> dict:
    """One job of ``Experiment.train``: ``run_one(dataset, profile,
    settings, *job)``. A module-level function, so that it pickles for a
    worker process."""
    return run_one(dataset, profile, settings, *job, progress=progress)


# Where ``run_jobs`` saves the finished runs: (folder, fresh), or None to keep
# them in memory only.
_SAVING: ContextVar[tuple[Path, bool] | None] = ContextVar(
    "saving", default=None
)


@contextmanager
def save_runs(directory: str | Path, fresh: bool = False) -> Iterator[None]:
    """Inside this block, experiments save each finished run in ``directory``
    and resume the runs saved there; ``fresh=True`` discards those first. The
    command line runs every experiment so.
    """
    check_bool("fresh", fresh)
    token = _SAVING.set((Path(directory), fresh))
    try:
        yield
    finally:
        _SAVING.reset(token)


def partial_path(name: str, profile: str, directory: str | Path) -> Path:
    """``DIRECTORY/NAME-PROFILE.partial.json``: the runs of an experiment
    finished so far."""
    return results_path(name, f"{profile}.partial", Path(directory))


def _flatten(value, prefix: str = "") -> dict:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            out.update(
                _flatten(item, f"{prefix}.{key}" if prefix else str(key))
            )
        return out
    return {prefix: value}


def settings_differences(saved: dict, current: dict) -> list[str]:
    """Each setting that differs between two settings dicts, as ``"key: saved
    X, now Y"``."""
    old, new = _flatten(saved), _flatten(current)
    return [
        f"{key}: saved {old.get(key, '(absent)')!r}, now"
        f" {new.get(key, '(absent)')!r}"
        for key in sorted(old.keys() | new.keys())
        if old.get(key, "(absent)") != new.get(key, "(absent)")
    ]


def load_partial(path: Path, experiment: Experiment) -> dict[tuple, dict]:
    """The runs saved in ``path`` (none if it does not exist), by job, after
    checking that they were made with ``experiment.settings``; a
    ``SettingsMismatch`` names every difference otherwise.
    """
    if not path.is_file():
        return {}
    try:
        saved = read_results(path)
    except CorruptResults as error:
        raise CorruptResults(
            f"{error}; move it away, or start afresh with --fresh"
        ) from None
    _check_whose(path, saved, experiment)
    # Compared as a file holds them: tuples are lists there.
    differences = settings_differences(
        saved.get("settings", {}), json.loads(to_json(experiment.settings))
    )
    if differences:
        shown = "; ".join(differences[:8]) + (
            "; ..." if len(differences) > 8 else ""
        )
        count = len(saved.get("runs", []))
        raise SettingsMismatch(
            f"{path} holds {count} run{'' if count == 1 else 's'} made with"
            f" other settings, which would not compare like for like: {shown}."
            " Rerun with the saved settings to resume, or start afresh"
            " (--fresh, or save_runs(..., fresh=True)), which discards them"
        )
    # a file edited by hand: runs not a list, a run without its fields, a
    # field edited into a list (unhashable)
    runs = saved.get("runs", [])
    problem = "\"runs\" is not a list" if not isinstance(runs, list) else None
    for index, run in enumerate(runs if problem is None else []):
        problem = _record_problem(run, experiment.fields, index)
        if problem:
            break
    try:
        runs = (
            {experiment.job(run): run for run in runs} if not problem else {}
        )
    except TypeError:
        problem = "a run's field is a list or a record"
    if problem:
        raise CorruptResults(
            f"{path} is not a progress file of {experiment.name}: {problem}."
            " Its \"runs\" must be a list of records, each with"
            f" {', '.join(experiment.fields)}, \"diverged\" and \"error\","
            " and, where it did not diverge, a \"result\" with its"
            " \"provenance\"; move it away, or start afresh with --fresh"
        )
    return {job: runs[job] for job in experiment.jobs if job in runs}


def _check_whose(path: Path, saved: dict, experiment: Experiment) -> None:
    """A progress file of this experiment and profile (a copied or renamed
    one of another would be resumed as this one's runs)."""
    prov = saved.get("provenance")
    profile = prov.get("profile") if isinstance(prov, dict) else None
    whose = (saved.get("experiment"), profile)
    if whose != (experiment.name, experiment.profile):
        raise CorruptResults(
            f"{path} is not a progress file of {experiment.name} (profile"
            f" {experiment.profile}): it holds experiment {whose[0]!r},"
            f" profile {whose[1]!r}; move it away, or start afresh with"
            " --fresh"
        )


def _record_problem(run, fields, index: int) -> str | None:
    """What a saved run lacks for a resume to use it, or None: read before
    any run starts, not after the others have trained."""
    if not isinstance(run, dict):
        return f"run {index} is not a record"
    missing = [key for key in (*fields, "diverged", "error") if key not in run]
    if missing:
        return f"run {index} has no {', '.join(map(repr, missing))}"
    if not isinstance(run["diverged"], bool):
        return f"run {index} has \"diverged\" {run['diverged']!r}, not a bool"
    result = run.get("result")
    if not run["diverged"] and not (
        isinstance(result, dict) and isinstance(result.get("provenance"), dict)
    ):
        return f"run {index} did not diverge but has no result provenance"
    return None


def _save_partial(
    path: Path, experiment: Experiment, done: dict[tuple, dict]
) -> None:
    """Merge ``done`` with the runs already in ``path`` and write them all.

    Read and written under the folder's lock, so that two processes saving
    at once each add their runs to the other's: a run finished elsewhere
    joins ``done``, and none is lost to a file rewritten from one process's
    memory.
    """
    with _folder_locked(path.parent):
        for job, record in load_partial(path, experiment).items():
            done.setdefault(job, record)
        _write_partial(path, experiment, done)


def _write_partial(
    path: Path, experiment: Experiment, done: dict[tuple, dict]
) -> None:
    runs = [done[job] for job in experiment.jobs if job in done]
    write_results(
        path,
        {
            "experiment": experiment.name,
            "complete": len(runs) == len(experiment.jobs),
            "runs_done": len(runs),
            "runs_total": len(experiment.jobs),
            "settings": experiment.settings,
            "runs": runs,
            "provenance": provenance(experiment.profile, default_device()),
        },
    )


def _outcome(
    experiment: Experiment, job: tuple, run: Callable[[], dict]
) -> dict:
    """The record of ``run()``: as a file holds it (tuples become lists), so
    that a resumed run and a new one look alike, and ``diverged``; a run that
    diverged is recorded with its message.
    """
    try:
        record = run()
    # a result of the experiment (a learning rate too high), not a crash
    except TrainingDiverged as error:
        return {
            **dict(zip(experiment.fields, job)),
            "diverged": True,
            "error": str(error),
        }
    return json.loads(to_json({**record, "diverged": False, "error": None}))


def _finished(
    experiment: Experiment,
    run_job: Callable[[tuple], dict],
    jobs: list[tuple],
    pool: Executor | None,
) -> Iterator[tuple[tuple, dict]]:
    """Each job and its record as it finishes: in order, or in the order the
    pool finishes them."""
    if pool is None:
        for job in jobs:
            yield job, _outcome(experiment, job, lambda: run_job(job))
        return
    futures = {pool.submit(run_job, job): job for job in jobs}
    try:
        for future in as_completed(futures):
            yield (
                futures[future],
                _outcome(experiment, futures[future], future.result),
            )
    # interrupted: the jobs that have not started are dropped, not run
    finally:
        for future in futures:
            future.cancel()


def _report(experiment: Experiment, done: int, record: dict) -> str:
    name = (
        ", ".join(f"{field} {record[field]}" for field in experiment.fields)
        or experiment.name
    )
    where = f"[{done}/{len(experiment.jobs)}] {name}"
    if record["diverged"]:
        return f"{where}: diverged ({record['error']})"
    loss = record.get(
        "best_val_loss", (record.get("result") or {}).get("best_val_loss")
    )
    return (
        f"{where}: best val {loss:.4f}"
        if loss is not None
        else f"{where}: done"
    )


def run_jobs(
    experiment: Experiment,
    run_job: Callable[[tuple], dict],
    pool: Executor | None = None,
) -> tuple[list[dict], int]:
    """Run every job of ``experiment``; return every run's record, in the jobs'
    order, and how many of them were resumed from a partial file.

    ``run_job(job)`` trains one run and returns its record, a JSON-like dict
    holding the job's ``fields``; with a ``pool`` (a ``concurrent.futures``
    executor) the jobs run there, and ``run_job`` must pickle. Each record gets
    ``diverged`` and ``error``: a run that raises ``TrainingDiverged`` is
    recorded as diverged, with its message, and the others go on. Inside
    ``save_runs`` each record is saved at once to ``partial_path``, and the
    jobs saved there before with the same settings are not run again.
    """
    saving = _SAVING.get()
    path = (
        partial_path(experiment.name, experiment.profile, saving[0])
        if saving
        else None
    )
    if path is not None and saving[1]:
        path.unlink(missing_ok=True)
    done = load_partial(path, experiment) if path is not None else {}
    resumed = len(done)
    if path is not None:
        print(
            f"{experiment.name}, profile {experiment.profile}:"
            f" {len(experiment.jobs)} runs, each saved to {path} as it"
            " finishes",
            flush=True,
        )
    if resumed:
        print(
            f"resuming: {resumed} of {len(experiment.jobs)} runs already done",
            flush=True,
        )
    todo = [job for job in experiment.jobs if job not in done]
    with closing(_finished(experiment, run_job, todo, pool)) as finished:
        for job, record in finished:
            done[job] = record
            if path is not None:
                _save_partial(path, experiment, done)
                print(_report(experiment, len(done), record), flush=True)
    return [done[job] for job in experiment.jobs], resumed


# The corpus of a worker process, loaded once when the process starts.
_WORKER_DATASET = None


def _init_worker(threads: int, cuda_device: int | None = None) -> None:
    global _WORKER_DATASET
    torch.set_num_threads(threads)
    if cuda_device is not None:  # "cuda" is this GPU in this process
        torch.cuda.set_device(cuda_device)
    _WORKER_DATASET = CharDataset.shakespeare()


# Several experiments at once (``mixers.experiments.all --workers N``): their
# jobs go to one pool of processes per GPU, shared by all of them.
_SHARED_POOL: ContextVar[Executor | None] = ContextVar(
    "shared_pool", default=None
)


@contextmanager
def shared_pool(pool: Executor) -> Iterator[None]:
    """Inside this block every experiment runs its jobs in ``pool``, made by
    ``device_pools`` (its processes hold the corpus)."""
    token = _SHARED_POOL.set(pool)
    try:
        yield
    finally:
        _SHARED_POOL.reset(token)


class DevicePools(Executor):
    """One pool of ``workers`` processes per device, as one executor: each
    job goes to the pool with the fewest jobs waiting or running. ``devices``
    lists CUDA device indices, or is ``[None]`` for the CPU."""

    def __init__(self, workers: int, devices: list, threads: int):
        check_positive_int("workers", workers)
        self.pools = [
            ProcessPoolExecutor(
                workers,
                mp_context=get_context("spawn"),
                initializer=_init_worker,
                initargs=(threads, device),
            )
            for device in devices
        ]
        self.load = [0] * len(self.pools)
        self.lock = threading.Lock()

    def submit(self, fn, /, *args, **kwargs):
        with self.lock:
            index = min(range(len(self.pools)), key=self.load.__getitem__)
            self.load[index] += 1
        future = self.pools[index].submit(fn, *args, **kwargs)
        future.add_done_callback(lambda _: self._done(index))
        return future

    def _done(self, index: int) -> None:
        with self.lock:
            self.load[index] -= 1

    def shutdown(self, wait=True, *, cancel_futures=False) -> None:
        for pool in self.pools:
            pool.shutdown(wait, cancel_futures=cancel_futures)


def _in_worker(run_job: Callable, job: tuple) -> dict:
    return run_job(_WORKER_DATASET, job)


def run_jobs_in_processes(
    experiment: Experiment,
    run_job: Callable,
    dataset: CharDataset,
    workers: int,
    threads: int,
) -> tuple[list[dict], int]:
    """``run_jobs``, calling ``run_job(dataset, job)``: in this process with
    ``workers=1``, else over ``workers`` processes of ``threads`` threads each,
    one run per core (they show no bars); inside ``shared_pool``, in that
    pool, whatever ``workers`` says. ``run_job`` must pickle: a module-level
    function, or a ``functools.partial`` of one."""
    check_positive_int("workers", workers)
    pool = _SHARED_POOL.get()
    if pool is not None:
        return run_jobs(experiment, partial(_in_worker, run_job), pool)
    if workers == 1:
        return run_jobs(experiment, lambda job: run_job(dataset, job))
    # spawn, not fork: a forked child would inherit this process's OpenMP state
    with ProcessPoolExecutor(
        workers,
        mp_context=get_context("spawn"),
        initializer=_init_worker,
        initargs=(threads,),
    ) as pool:
        return run_jobs(experiment, partial(_in_worker, run_job), pool)


def first_provenance(runs: list[dict], profile: str) -> dict:
    """Where, when and with what an experiment ran: the provenance of its first
    run that finished (this machine's, if every run diverged)."""
    for run in runs:
        if not run["diverged"]:
            return dict(run["result"]["provenance"])
    return provenance(profile, default_device())


# -----------------------------------------------------------------------------
# The command lines of the experiments and benchmarks. Every argument is
# checked as it is parsed, before anything trains or compiles.


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (the package's ``check_positive_int``, as
    a command-line type)."""
    try:
        return check_positive_int("the value", int(text))
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(
            f"must be a positive integer, got {text!r}"
        ) from None


def output_dir(text: str) -> Path:
    """argparse type: a directory the results can be written in. Not made
    here: a command line refused later (a bad option, ``--workers`` where
    the experiment has none) must leave no folder behind; ``run_saved`` makes
    it."""
    try:
        return check_writable_dir(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def command_line(
    prog: str, description: str, durations: dict[str, str]
) -> argparse.ArgumentParser:
    """A parser with the ``--out`` every experiment and benchmark shares; its
    help says how long each profile takes (``durations``: profile -> text) and
    where the results go.
    """
    lines = [f"  {name:6} {text}" for name, text in durations.items()]
    epilog = "\n".join(
        [
            "how long each profile takes:",
            *lines,
            "",
            (
                "The results go to DIR/NAME-PROFILE.json with DIR = runs/"
                " (untracked) unless --out"
            ),
            (
                "says otherwise; --out book/results replaces the committed"
                " results the chapters read."
            ),
        ]
    )
    parser = argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # A string default goes through `type` too: the folder is checked before
    # any run, and made only once every argument is known to be good.
    parser.add_argument(
        "--out",
        type=output_dir,
        default=str(runs_dir()),
        metavar="DIR",
        help="directory for the results JSON (default: %(default)s)",
    )
    return parser


def _interrupted(path: Path) -> str:
    if path.is_file():
        return (
            f"\ninterrupted: the finished runs are saved in {path}; rerun the"
            " same command to resume"
        )
    return (
        "\ninterrupted before the first run finished: nothing was saved (the"
        f" runs go to {path}); rerun the same command to start again"
    )


def main(
    name: str,
    run: Callable[..., dict],
    description: str,
    durations: dict[str, str],
    argv: list[str] | None = None,
) -> None:
    """The command line every experiment module shares: ``--profile``,
    ``--out``, ``--fresh``, ``--no-progress``. Each finished run is saved as it
    finishes (``save_runs``) and resumed by a rerun; the partial file goes once
    the results are written."""
    parser, args, profile = parse_experiment_args(
        f"python -m mixers.experiments.{name}", description, durations, argv
    )
    if (
        args.workers != 1
        and "workers" not in inspect.signature(run).parameters
    ):
        parser.error(
            f"--workers: the {name} experiment runs one job at a time"
        )
    with exits_cleanly(parser, partial_path(name, profile, args.out)):
        written = run_saved(
            name,
            run,
            profile,
            args.out,
            fresh=args.fresh,
            progress=not args.no_progress,
            workers=args.workers,
        )
    print(f"wrote {written}")


def parse_experiment_args(
    prog: str,
    description: str,
    durations: dict[str, str],
    argv: list[str] | None,
    plan: bool = False,
):
    """``command_line`` plus ``--profile``, ``--fresh`` and ``--no-progress``
    (and ``--plan`` with ``plan``), parsed from ``argv``: the parser, its
    arguments and the profile (``--profile``, else ``default_profile_name``).
    """
    parser = command_line(prog, description, durations)
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default=None,
        help=(
            "training size (default: MIXERS_PROFILE, else gpu with CUDA, else"
            " smoke)"
        ),
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help=(
            "discard the runs saved by an earlier, interrupted run instead of"
            " resuming them"
        ),
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="hide the progress bars"
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        help=(
            "runs at a time, one process and one thread each, for the"
            " experiments that train many small models (default 1)"
        ),
    )
    if plan:
        parser.add_argument(
            "--plan",
            action="store_true",
            help=(
                "print what would be trained and the predicted time on one"
                " H100, without training"
            ),
        )
    args = parser.parse_args(argv)
    try:
        profile = args.profile or default_profile_name()
    except ValueError as error:  # a bad MIXERS_PROFILE
        parser.error(str(error))
    return parser, args, profile


def run_saved(
    name: str,
    run: Callable[..., dict],
    profile: str,
    out: Path,
    fresh: bool = False,
    progress: bool = True,
    workers: int = 1,
) -> Path:
    """``run(profile)``, holding the folder's ``run_lock`` (a second run of
    ``name`` into ``out`` is refused at its start), with each finished run
    saved in ``out`` as it finishes (``save_runs``), then its results written
    to ``out/NAME-PROFILE.json`` and the partial file removed. ``workers`` >
    1 goes to a ``run`` that takes it (and is refused by one that does not).
    """
    options = {"progress": progress}
    if workers != 1:
        if "workers" not in inspect.signature(run).parameters:
            raise ValueError(
                f"--workers: the {name} experiment runs one job at a time"
            )
        options["workers"] = workers
    out = writable_dir(out)
    # Before any work: what would be found only when the files are written.
    for target in (
        results_path(name, profile, out),
        partial_path(name, profile, out),
    ):
        check_results_file(target)
    with run_lock(name, profile, out):
        with save_runs(out, fresh=fresh):
            results = run(profile, **options)
        written = save_results(name, profile, results, out)
        # the results hold every run now
        partial_path(name, profile, out).unlink(missing_ok=True)
    return written


@contextmanager
def exits_cleanly(
    parser: argparse.ArgumentParser, path: Path
) -> Iterator[None]:
    """A settings mismatch, a corrupt partial file or a folder in use by
    another run exits 2 with its message; a results file that cannot be
    written (a full disk) exits 1, saying where the finished runs are and
    how to resume; Ctrl-C (SIGINT) and ``kill``
    (SIGTERM) both say where the finished runs are (``path``), and exit as a
    shell reports a process those signals stopped: 130 and 143."""
    try:
        with _terminate_as_interrupt():
            yield
    except (SettingsMismatch, CorruptResults, FolderInUse) as error:
        parser.exit(2, f"error: {error}\n")
    # a full disk, a folder that became a file: one line, not the system's
    except ResultsNotWritten as error:
        saved = f"; the finished runs are in {path}" if path.is_file() else ""
        parser.exit(
            1,
            f"error: {error}{saved}; rerun the same command to resume once"
            " it can be written\n",
        )
    # also while the results are written: that is atomic, the partial file is
    # whole
    except KeyboardInterrupt as interrupt:
        print(_interrupted(path), file=sys.stderr)
        sys.exit(128 + getattr(interrupt, "signal", signal.SIGINT))


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, as Ctrl-C raises
    ``KeyboardInterrupt``: the same ``finally`` blocks run."""

    signal = signal.SIGTERM


def _raise_terminated(signum, frame):
    # Ctrl-C reaches the worker processes too; SIGTERM only this one
    for child in multiprocessing.active_children():
        child.terminate()
    raise Terminated


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises ``Terminated`` inside the block (only the main thread
    can set a handler; elsewhere the default stays)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
