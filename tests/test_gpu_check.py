"""tools/gpu_check.py, rehearsed on the CPU: the same code a GPU machine
runs, at tiny sizes, end to end, writing the same files."""

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from mixers.experiments.all import EXPERIMENTS
from mixers.results import read_results

ROOT = Path(__file__).resolve().parents[1]


def test_the_gpu_check_rehearses_on_a_cpu(tmp_path):
    out = tmp_path / "check"
    # a bare machine: no installed package, the working tree's src only
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [
            sys.executable,
            "tools/gpu_check.py",
            "--cpu-rehearsal",
            "--out",
            out,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    files = sorted(p.name for p in out.iterdir())
    assert files == [
        "correctness.json",
        "gpu_check.log",
        "results.tar",
        "summary.json",
    ]  # at most 8
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] and summary["stages"]["correctness"]["ok"]
    assert "predicted" in summary["stages"]["plan"]["predicted"]
    checked = json.loads((out / "correctness.json").read_text())
    # every backend, mode and precision, and the four decoders
    assert {(r["layer"], r["backend"]) for r in checked["layers"]} == {
        ("attention", "eager"),
        ("attention", "sdpa"),
        ("alibi", "eager"),
        ("alibi", "sdpa"),
        ("alibi", "flex"),
        ("rotary", "eager"),
        ("rotary", "sdpa"),
    }
    assert {r["model"] for r in checked["decoding"]} == {
        "attention",
        "alibi",
        "rotary",
        "gmlp",
    }
    with tarfile.open(out / "results.tar") as tar:
        tar.extractall(tmp_path / "results", filter="data")
    names = sorted(p.name for p in (tmp_path / "results").iterdir())
    assert names == sorted(
        [f"{name}-smoke.json" for name in EXPERIMENTS]
        + ["alibi_bench-smoke.json", "generation-smoke.json"]
        + ["train_step-smoke.json"]
    )
    for name in names:  # each reads back as results, ready for the book
        assert read_results(tmp_path / "results" / name)["provenance"]
    log = (out / "gpu_check.log").read_text()
    assert "gpu check passed" in log and "correctness:" in log
