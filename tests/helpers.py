"""Checks that several test modules share (imported as ``helpers``: pytest puts tests/ on the path)."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from cxx_store import compiler_environment


def load_module(path, name: str | None = None):
    """The Python file at ``path`` (a tool, a Sphinx extension, a conftest:
    none of them on the import path) loaded as a module named ``name``
    (the file's stem if None). It is entered in ``sys.modules`` before it
    runs, since a dataclass looks its own module up there."""
    spec = importlib.util.spec_from_file_location(
        name or Path(path).stem, path
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# A fresh process that compiles may take many minutes on a busy machine: this
# limit only stops a hang, and no verdict depends on how long it took.
FRESH_PROCESS_HANG_S = 3600


def json_from_a_fresh_process(
    script, *args, cache, cxx_store=None, **env
) -> dict:
    """The JSON line that ``python SCRIPT ARGS`` prints last, run in a fresh
    process whose compile cache (``TORCHINDUCTOR_CACHE_DIR``) is the new,
    empty folder ``cache`` (a warm cache can hide a compiled kernel's bug),
    with ``env`` added to the environment. It must end well. With
    ``cxx_store`` (the fixture), the C++ compiler is tests/cxx_store.py: a
    library another process of the session built from the same source and
    arguments is copied instead of built again."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), **env}
    if cxx_store is not None:
        env |= compiler_environment(cxx_store, env.get("CXX", "g++"))
    command = [sys.executable, str(script), *map(str, args)]
    try:
        done = subprocess.run(
            command,
            env=env,
            capture_output=True,
            text=True,
            timeout=FRESH_PROCESS_HANG_S,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{command[1:]} hung (no end in {FRESH_PROCESS_HANG_S} s)")
    assert done.returncode == 0, f"{command[1:]}: {done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_smoke_restoring_threads(run, **options) -> dict:
    """``run("smoke", **options)`` of an experiment, checking that it restores the thread count it
    changed."""
    threads = torch.get_num_threads()
    out = run("smoke", progress=False, **options)
    assert (
        torch.get_num_threads() == threads
    )  # run() restores the thread count it changed
    return out


def assert_causal_by_perturbation(
    module, x: torch.Tensor, t: int, atol: float
) -> None:
    """Changing position ``t`` of ``x [batch, seq, d]`` leaves ``module``'s outputs before ``t``
    unchanged (to ``atol``) and changes every output from ``t`` on."""
    y = x.clone()
    y[:, t] += 1.0
    with torch.no_grad():
        out_x, out_y = module(x), module(y)
    torch.testing.assert_close(out_x[:, :t], out_y[:, :t], atol=atol, rtol=0)
    assert ((out_x[:, t:] - out_y[:, t:]).abs().amax(-1) > 1e-6).all()


def assert_decoding_equals_the_full_pass(
    module, x: torch.Tensor, chunk_from: int, atol: float
) -> None:
    """Self-attention ``module`` called with new queries against all keys so far (a key/value
    cache) gives the rows of the full pass on ``x [batch, seq, d]``: one token at a time, then the
    tokens from ``chunk_from`` on at once."""
    seq = x.shape[1]
    with torch.no_grad():
        full = module(x)
        for t in range(
            seq
        ):  # one new token at a time, with every past token as key and value
            step = module(x[:, t : t + 1], x[:, : t + 1], x[:, : t + 1])
            torch.testing.assert_close(
                step, full[:, t : t + 1], atol=atol, rtol=0
            )
        chunk = module(
            x[:, chunk_from:], x, x
        )  # several new tokens after a cache
        torch.testing.assert_close(
            chunk, full[:, chunk_from:], atol=atol, rtol=0
        )
