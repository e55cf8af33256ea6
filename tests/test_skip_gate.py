"""tests/skip_gate.py: with ``MIXERS_SKIPS_ALLOWED`` set, a skip whose reason
is not allowed fails the run and is named; an allowed one does not; unset,
a skip is only reported. Each case runs pytest on a two-test file in a fresh
process (no torch imported: about a second each)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import skip_gate

TESTS = Path(__file__).resolve().parent

SAMPLE = """
import sys

import pytest

import skip_gate


def pytest_configure(config):
    skip_gate.register(config)


def test_runs():
    pass


def test_skips_at_call():
    pytest.skip("no frobnicator here")


@pytest.mark.skipif(sys.maxsize > 0, reason="a mark that always skips")
def test_skips_by_mark():
    pass
"""


def run_sample(tmp_path, allowed, *options):
    """pytest over the sample (its own conftest registers the gate), with
    ``options``; the process's exit code and output."""
    (tmp_path / "conftest.py").write_text(SAMPLE.split("\n\ndef test_")[0])
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    env.pop(skip_gate.ENV, None)
    if allowed is not None:
        env[skip_gate.ENV] = allowed
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
         "-o", "addopts=", *options, "--rootdir", str(tmp_path),
         str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # a hang, not a verdict
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def test_unset_the_skips_are_only_reported(tmp_path):
    code, out = run_sample(tmp_path, None)
    assert code == 0, out
    assert "1 passed, 2 skipped" in out
    assert "not allowed" not in out


@pytest.mark.parametrize(
    "options", [(), ("-n", "2")], ids=["one process", "two workers"]
)
def test_set_and_empty_every_skip_fails_the_run(tmp_path, options):
    # with workers (the suite's pytest, pyproject.toml) the skips happen in
    # them, and the gate hears them in the process that ends the run
    code, out = run_sample(tmp_path, "", *options)
    assert code == 1, out
    assert "test_sample.py::test_skips_at_call: no frobnicator here" in out
    assert (
        "test_sample.py::test_skips_by_mark: a mark that always skips" in out
    )
    assert "2 skipped tests fail this run" in out


def test_an_allowed_reason_lets_its_skip_pass(tmp_path):
    code, out = run_sample(tmp_path, "# why: a comment line\nfrobnicator\n")
    assert code == 1, out
    assert "test_skips_at_call" not in out.split("not allowed")[-1]
    assert "1 skipped tests fail this run" in out
    allowed = "frobnicator\na mark that always"
    code, out = run_sample(tmp_path, allowed)
    assert code == 0, out
    assert "1 passed, 2 skipped" in out


def test_a_failing_run_still_fails_and_names_its_skips(tmp_path):
    (tmp_path / "test_fails.py").write_text("def test_no():\n    assert 0\n")
    code, out = run_sample(tmp_path, "")
    assert code == 1, out
    assert "1 failed" in out and "2 skipped tests fail this run" in out


@pytest.mark.parametrize(
    "skips, allowed, refused",
    [
        ([("a", "x y")], [], [("a", "x y")]),
        ([("a", "x y"), ("b", "z")], ["y"], [("b", "z")]),
        ([("a", "x y")], ["x y", "q"], []),
    ],
)
def test_unallowed_keeps_the_skips_no_reason_covers(skips, allowed, refused):
    assert skip_gate.unallowed(skips, allowed) == refused


def test_allowed_reasons_are_the_lines_less_blanks_and_comments():
    value = "\n  no fcntl  \n# why: Windows\n\nno /proc\n"
    assert skip_gate.allowed_reasons(value) == ["no fcntl", "no /proc"]
