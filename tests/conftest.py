"""Shared fixtures: the packaged corpus and its dataset are loaded once per test session."""

import os
import signal
import sys
import warnings

import pytest
import skip_gate
import torch
from slow import is_slow
from torch.nn.attention.flex_attention import flex_attention

import mixers.alibi as alibi_module
from mixers.data import CharDataset, load_corpus

# The tests use tiny models, for which one intra-op thread is fastest; on a machine whose cores
# are shared (CI runners, a busy laptop) two OpenMP threads contending for them made a 2-layer
# d_model-32 forward pass ~300x slower (0.3 s instead of 1 ms). Results do not depend on it.
torch.set_num_threads(1)

# Tests that stop a child process with SIGINT (Ctrl-C) need a child that hears
# it. A suite started in the background (nohup, `&` in a script) inherits
# SIGINT ignored, and so would every process it starts: such a child never
# ends on SIGINT, and those tests would fail or wait for their hang limit.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# MIXERS_FAKE_CUDA=1: code that merely *asks* whether CUDA is there
# (default_device, default_profile_name, cpu_threads, an experiment choosing
# its workers, a test) is told yes, while every tensor stays on the CPU.
# Nothing in the suite may depend on CUDA being absent: a test that means the
# CPU says so (device="cpu", a profile name, or its own patch of
# torch.cuda.is_available). torch itself still hears the truth (dynamo, for
# one, would otherwise save the CUDA RNG state of a CPU build). A path that
# would really use CUDA fails ("Torch not compiled with CUDA") on a CPU build
# instead of running. tests/test_cuda_absent_independence.py runs part of
# the suite this way.
if os.environ.get("MIXERS_FAKE_CUDA") == "1":
    _real_is_available = torch.cuda.is_available

    def _fake_is_available() -> bool:
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller == "torch" or caller.startswith("torch."):
            return _real_is_available()
        return True

    torch.cuda.is_available = _fake_is_available


def pytest_configure(config):
    """CI (``MIXERS_SKIPS_ALLOWED`` set) fails on a skip it does not allow
    (tests/skip_gate.py)."""
    skip_gate.register(config)


# Before pytest-xdist's hook, which appends a test's group to its id.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if is_slow(item):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="module", autouse=True)
def runs_on_the_cpu():
    """Every test runs on the CPU, on any machine: ``MIXERS_DEVICE=cpu``
    makes ``default_device`` the CPU (and so ``default_profile_name`` smoke)
    here, in an experiment's worker processes and in the command lines the
    tests start; a stray ``MIXERS_PROFILE`` is dropped. A test of the
    defaults themselves unsets the variable and patches
    ``torch.cuda.is_available``. Per module, not per session, so that the
    chapter notebooks nbval runs after the tests keep the real defaults."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MIXERS_DEVICE", "cpu")
        patch.delenv("MIXERS_PROFILE", raising=False)
        yield


@pytest.fixture(scope="session")
def corpus_text() -> str:
    """The packaged Tiny Shakespeare text (checksum verified by ``load_corpus``)."""
    return load_corpus()


@pytest.fixture(scope="session")
def shakespeare(corpus_text) -> CharDataset:
    """The default 90/10 split of the packaged corpus."""
    return CharDataset.from_text(corpus_text)


@pytest.fixture(scope="session")
def cxx_store(tmp_path_factory):
    """A folder for tests/cxx_store.py, shared by the session's workers: the
    C++ libraries that the session's fresh compiling processes have built.
    New each session (under xdist, the workers' temporary folders share a
    parent that is new each session)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    store = base / "cxx-store"
    store.mkdir(exist_ok=True)
    return store


@pytest.fixture
def uncompiled_flex(monkeypatch):
    """Route the ALiBi flex path through torch's uncompiled flex_attention (same function, no kernel)."""
    monkeypatch.setattr(
        alibi_module, "_compiled_flex_attention", flex_attention
    )
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=".*flex_attention called without torch.compile.*"
        )
        yield
