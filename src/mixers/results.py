"""Results files: where they go, what they record about their run, and how they
are written.

Two folders, so that a rerun never replaces a committed result by accident:

* ``book/results`` (``results_dir``) holds the committed results that the
  chapters read (``load_results``); a run writes there only when asked, ``--out
  book/results``.
* ``runs/`` (``runs_dir``), untracked, is where every run writes by default.

A file is ``NAME-PROFILE.json``, its ``provenance`` first (``provenance``:
where, when and with what it was produced). It is strict JSON, written
atomically: a NaN or an infinity is refused with the path to it, and an
interrupted write leaves the previous file whole. Read back (``read_results``),
a file that is not a JSON object is refused with its name (``CorruptResults``),
not with a bare JSON error.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import torch

# Largest first: a chapter shows the biggest run that has been committed.
PROFILE_ORDER = ("gpu", "cpu", "smoke")


# -----------------------------------------------------------------------------
# Provenance.


def device_name(device: torch.device) -> str:
    """A human name for ``device``: the GPU's model, or the CPU's and its core
    count."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu} ({torch.get_num_threads()} threads)"


def git_commit() -> str | None:
    """The commit of the working tree this code runs from, if it is a git
    checkout; ``-dirty`` when the package's own files differ from it (results
    and notebooks being rewritten do not change what ran)."""
    try:
        here = Path(__file__).resolve().parent
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
        )
        if out.returncode != 0:
            return None
        dirty = subprocess.run(
            [
                "git",
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
            ],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def provenance(
    profile: str, device: torch.device, seeds: list[int] | None = None
) -> dict:
    """Where, when and with what a result was produced."""
    return {
        "profile": profile,
        "device": device_name(device),
        "device_type": device.type,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "git_commit": git_commit(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "seeds": seeds or [],
    }


# -----------------------------------------------------------------------------
# Folders and files.


def _checkout() -> Path | None:
    """The root of the checkout this package runs from (the folder with
    ``book/results``), if any."""
    for parent in Path(__file__).resolve().parents:
        if (parent / "book" / "results").is_dir():
            return parent
    return None


def results_dir() -> Path:
    """The committed results: ``$MIXERS_RESULTS``, else the ``book/results`` of
    the checkout this package lives in, else ``book/results`` (or ``results``)
    under the current directory.
    """
    if os.environ.get("MIXERS_RESULTS"):
        return Path(os.environ["MIXERS_RESULTS"])
    if (root := _checkout()) is not None:
        return root / "book" / "results"
    cwd = Path.cwd()
    return cwd / "results" if cwd.name == "book" else cwd / "book" / "results"


def runs_dir() -> Path:
    """Where a run writes by default: ``runs/`` at the root of the checkout
    this package lives in, else under the current directory. Untracked
    (.gitignore): to publish a result, rerun with ``--out book/results`` or
    copy the file there."""
    return (_checkout() or Path.cwd()) / "runs"


def _check_file_part(name: str, value) -> str:
    """A name that stays one file in its folder: letters, digits, ``_``,
    ``-`` and ``.``, not starting with a dot (``"../x"`` would write outside
    the folder, ``"a/b"`` in another one)."""
    if not isinstance(value, str) or not re.fullmatch(
        r"[A-Za-z0-9_][A-Za-z0-9_.-]*", value
    ):
        raise ValueError(
            f"{name} must be a plain file name (letters, digits, _ - and .,"
            f" not starting with a dot; no folder), got {value!r}"
        )
    return value


def results_path(
    name: str, profile: str, directory: Path | None = None
) -> Path:
    """``DIRECTORY/NAME-PROFILE.json``; ``directory`` defaults to the committed
    ``results_dir()``. ``name`` and ``profile`` are plain names, so the file
    stays in the folder."""
    _check_file_part("name", name)
    _check_file_part("profile", profile)
    return Path(directory or results_dir()) / f"{name}-{profile}.json"


def check_writable_dir(path: str | Path) -> Path:
    """``path`` as a directory this process could write in, without making
    it: an existing directory it may write in, or a missing one under such a
    directory. A command line checks its ``--out`` so, and makes nothing
    until every argument is known to be good (``writable_dir`` makes it)."""
    # Path("") is Path("."): an empty --out would quietly mean "here"
    if not isinstance(path, (str, Path)) or (
        isinstance(path, str) and not path.strip()
    ):
        raise ValueError(
            f"the results folder must be a non-empty path, got {path!r} (use"
            " . for the current folder)"
        )
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{path} exists and is not a directory")
    existing = path.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(
            f"cannot write results in {path}: {existing} is not a directory"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(
            f"cannot write results in {path}: {existing} is not writable"
        )
    return path


def writable_dir(path: str | Path) -> Path:
    """``path`` as a directory this process can write in, created if missing;
    else a ValueError that says why. Checked before a run, so that hours of
    training are not lost at the end.
    """
    path = check_writable_dir(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-test-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as error:
        raise ValueError(
            f"cannot write results in {path}: {error.strerror or error}"
        ) from None
    return path


def _non_finite(value, where: str = "results"):
    """The path to the first NaN or infinity in a JSON-like ``value`` (None if
    it has none)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where} = {value}"
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, (list, tuple))
        else ()
    )
    for key, item in items:
        found = _non_finite(item, f"{where}[{key!r}]")
        if found:
            return found
    return None


def to_json(results: dict) -> str:
    """``results`` as strict JSON text; a NaN or infinity anywhere raises a
    ValueError naming it."""
    try:
        return json.dumps(results, indent=1, allow_nan=False) + "\n"
    except ValueError:
        where = _non_finite(results)
        if where is None:
            raise
        raise ValueError(
            f"results must be finite numbers (strict JSON), but {where}"
        ) from None


def without_timings(results):
    """``results`` (any JSON-like value) without what a rerun of the same seeds
    cannot repeat: dates, times (keys ending in ``_time_s``), throughput
    (``tokens_per_s...``) and how many runs were resumed. What is left, on a
    CPU, is the same number for number: the test of a resumed run.
    """
    if isinstance(results, dict):
        return {
            key: without_timings(value)
            for key, value in results.items()
            if not (
                key in ("date", "resumed_runs")
                or key.endswith("_time_s")
                or key.startswith("tokens_per_s")
            )
        }
    if isinstance(results, (list, tuple)):
        return [without_timings(value) for value in results]
    return results


class ResultsNotWritten(OSError):
    """A results file that cannot be written where it was asked for: a
    directory in its place, a folder that is a file, a full disk, no
    permission. Whatever file was there before is left whole."""


def check_results_file(path: str | Path) -> Path:
    """``path`` as a place a results file can be written: nothing there yet,
    or a file. A directory (or anything else) in its place would be found
    only when the file is written, after the work; so a run checks first."""
    path = Path(path)
    if path.is_dir() or (path.exists() and not path.is_file()):
        what = "a directory" if path.is_dir() else "not a regular file"
        raise ResultsNotWritten(
            f"cannot write {path}: it is {what}; move it away, or write the"
            " results elsewhere (--out)"
        )
    return path


def _write_error(path: Path, error: OSError) -> ResultsNotWritten:
    """Why ``path`` could not be written, in one line."""
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        why = f"{parent} is a file, not a folder"
    else:
        why = error.strerror or str(error)
    failure = ResultsNotWritten(f"cannot write {path}: {why}")
    failure.errno = error.errno
    return failure


def write_results(path: str | Path, results: dict) -> Path:
    """Write ``results`` as strict JSON to ``path``, its ``provenance`` first,
    atomically.

    The text goes to a temporary file in the same directory, flushed to disk,
    which then replaces ``path`` in one step (``os.replace``): an interruption
    at any moment leaves either the previous file or the new one, whole, and no
    temporary file behind. ``provenance``, if given, must be a JSON object.
    A file that cannot be written raises one ``ResultsNotWritten`` saying
    why (a full disk, a folder that is a file), not the system's errors.
    """
    if not isinstance(results, dict):
        raise TypeError(
            f"results must be a dict, got {type(results).__name__}"
        )
    if "provenance" in results:
        if not isinstance(results["provenance"], dict):
            raise TypeError(
                "results['provenance'] must be a dict (where, when and with"
                " what the results were produced: mixers.results.provenance),"
                f" got {results['provenance']!r}"
            )
        results = {"provenance": results["provenance"], **results}
    text = to_json(results)  # before touching any file
    path = check_results_file(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w") as file:
            file.write(text)
            file.flush()
            # the bytes are on disk before the rename makes them the file
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except OSError as error:
        raise _write_error(path, error) from None
    finally:
        # nothing to remove where the folder could not be made either
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    return path


def save_results(
    name: str, profile: str, results: dict, directory: Path | None = None
) -> Path:
    """Write ``results`` to ``DIRECTORY/NAME-PROFILE.json`` (default:
    ``runs_dir()``), its ``provenance`` first so a reader sees where it came
    from; atomically (``write_results``).
    """
    return write_results(
        results_path(name, profile, directory or runs_dir()), results
    )


class _NonFinite(ValueError):
    """A ``NaN`` or ``Infinity`` met while reading JSON."""


def _refuse_constant(text: str):
    raise _NonFinite(text)


class CorruptResults(ValueError):
    """A results file that is not a JSON object: cut short or edited by hand
    (this module writes atomically, so never by an interrupted run)."""


def read_results(path: str | Path) -> dict:
    """The results in the JSON file ``path``; a ``CorruptResults`` that names
    the file, and where it stops making sense, if it is not a JSON object."""
    path = Path(path)
    try:
        results = json.loads(path.read_text(), parse_constant=_refuse_constant)
    except UnicodeDecodeError as error:
        raise CorruptResults(
            f"{path} is not a results file: it is not UTF-8 text"
            f" ({error.reason} at byte {error.start})"
        ) from None
    except _NonFinite as error:
        raise CorruptResults(
            f"{path} is not a valid results file: it holds {error}, which"
            " strict JSON (and this module's writer) refuses"
        ) from None
    except json.JSONDecodeError as error:
        raise CorruptResults(
            f"{path} is not a valid results file: {error.msg} at line"
            f" {error.lineno}, column {error.colno} of its JSON"
        ) from None
    if not isinstance(results, dict):
        raise CorruptResults(
            f"{path} is not a results file: it holds a JSON"
            f" {type(results).__name__}, not an object"
        )
    return results


def load_results(
    name: str,
    directory: Path | None = None,
    profiles: tuple[str, ...] = PROFILE_ORDER,
) -> dict:
    """The committed results (default: ``results_dir()``) of the largest
    profile that was run for experiment ``name``; a ``CorruptResults`` naming
    the file if it is not valid JSON. ``profiles``: the profile names to look
    for, in order (a tuple or list; a str would be read letter by letter).
    """
    if not isinstance(profiles, (tuple, list)) or not profiles:
        raise TypeError(
            "profiles must be a non-empty tuple of profile names, largest"
            f" first (e.g. {PROFILE_ORDER}), got {profiles!r}"
        )
    for profile in profiles:
        path = results_path(name, profile, directory)
        if path.is_file():
            return read_results(path)
    raise FileNotFoundError(
        f"no results for experiment {name!r} under"
        f" {directory or results_dir()}; run: python -m"
        f" mixers.experiments.{name} --profile cpu --out book/results"
    )
