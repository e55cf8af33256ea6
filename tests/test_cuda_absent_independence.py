"""Nothing in the suite may depend on CUDA being absent.

On a GPU machine (torch 2.11.0+cu130) the experiments' tests trained on the GPU: ``default_device``
said CUDA and nothing in the tests said otherwise, and a smoke run's record named a device the CPU
runs never had. conftest.py now pins ``MIXERS_DEVICE=cpu`` for every test module, and
``MIXERS_FAKE_CUDA=1`` (conftest.py) tells every caller outside torch that CUDA is there while every
tensor stays on the CPU. This test runs a fast part of the suite that way in a fresh process: the
tests of the defaults that ask about CUDA, an experiment trained with the default device, and the
command lines that record where they ran. The whole suite passes that way too
(``MIXERS_FAKE_CUDA=1 pytest tests -o addopts=`` ...; README, "Set up").

No GPU is needed or used: on a CPU build, a path that really used CUDA would fail ("Torch not
compiled with CUDA enabled") instead of running.
"""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import mixers

ROOT = Path(__file__).resolve().parents[1]
# Only a hang stops the child: the subset takes 1-3 minutes on a busy
# two-core machine, and how long it took is no part of the verdict.
HANG_S = 3600

SUBSET = [
    f"tests/{Path(__file__).name}::test_the_fake_tells_callers_outside_torch_only",
    "tests/test_train.py::test_default_profile_follows_hardware",
    "tests/test_train.py::test_mixers_device_overrides_the_hardware",
    "tests/test_train.py::test_cpu_threads_by_default_follows_the_device_the_runs_go_to",
    "tests/test_train.py::test_baseline_run_produces_results_with_provenance",
    "tests/test_experiments_baseline.py",
    "tests/test_experiments_all.py",
    "tests/test_experiments_attention.py::test_the_command_line_refuses_to_resume_with_other_settings",
    "tests/test_experiments_side_by_side.py::test_the_command_line_writes_the_results_and_removes_the_partial_file",
]


def test_the_fake_tells_callers_outside_torch_only():
    """Under MIXERS_FAKE_CUDA=1 this module hears "CUDA is there"; torch itself hears the truth, so
    that compiling (dynamo saves the CUDA RNG state where CUDA is available) still works on a CPU
    build. Without the variable nothing is patched."""
    faked = os.environ.get("MIXERS_FAKE_CUDA") == "1"
    assert torch.cuda.is_available() == (
        faked or torch.cuda.device_count() > 0
    )
    compiled = torch.compile(lambda x: x + 1, backend="eager")
    assert compiled(torch.ones(2)).tolist() == [2.0, 2.0]


def test_the_suite_passes_as_if_cuda_were_present():
    env = dict(os.environ, MIXERS_FAKE_CUDA="1")
    # the child imports the same mixers as this process
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(mixers.__file__).resolve().parents[1])]
        + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    start = time.perf_counter()
    try:
        child = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-o",
                "addopts=",
                "-p",
                "no:cacheprovider",
                "-q",
                "-rfEs",
                *SUBSET,
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=HANG_S,
        )
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"the child pytest hung (no end in {HANG_S} s): {hung}")
    took = time.perf_counter() - start
    summary = child.stdout.strip().splitlines()[-1] if child.stdout else ""
    assert child.returncode == 0, child.stdout[-6000:] + child.stderr[-2000:]
    # every test of the subset ran and passed: none skipped, none missing
    passed = re.match(r"(\d+) passed(, \d+ warnings?)? in ", summary)
    assert passed and int(passed.group(1)) >= 14, summary
    print(f"{summary} (child process: {took:.1f} s)")
