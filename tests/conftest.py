"""Shared fixtures: the packaged corpus and its dataset are loaded once per test session."""

import os
import signal
import sys
import warnings

import pytest
import skip_gate
import torch
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


# The quick subset for the edit-test loop, `pytest -m "not slow"` (README): it
# leaves out what is marked slow here, each run in full by the plain `pytest`.
# Slow: every chapter notebook (nbval), every test that drives the browser
# over the built site, the gpu_check rehearsal, the experiments' smoke runs,
# and the tests below that compile, train or start fresh processes. CPU
# seconds each, measured on the shared two-core machine (2026-11-27); an
# entry without [...] marks every case of the test.
SLOW_FIXTURES = {"browser", "site_url", "rehearsal"}
SLOW_FILES = {
    # smoke runs of every experiment, resumed, with workers (147 s together)
    "tests/test_experiments_all.py",
    "tests/test_experiments_alibi.py",
    "tests/test_experiments_attention.py",
    "tests/test_experiments_baseline.py",
    "tests/test_experiments_glu_variants.py",
    "tests/test_experiments_gmlp.py",
    "tests/test_experiments_side_by_side.py",
}
SLOW_TESTS = {
    # a child pytest over a subset of the suite: 35 s
    "tests/test_cuda_absent_independence.py::test_the_suite_passes_as_if_cuda_were_present",
    # four fresh processes compiling flex_attention
    "tests/test_conventions.py::test_flex_equals_eager_at_every_length_in_fresh_processes_with_an_empty_compile_cache",
    # a fresh process compiling three models with inductor: 115 s and more
    "tests/test_train.py::test_the_gpu_profiles_code_path_runs_on_a_cpu_and_equals_the_eager_one",
    # processes that train and are stopped, or save at once: 8-10 s each
    "tests/test_runs_share_a_folder.py::test_sigterm_to_all_with_workers_ends_them_and_keeps_what_finished",
    "tests/test_runs_share_a_folder.py::test_a_save_waits_for_another_process_s_save_and_loses_no_run",
    # every chapter's live run trained on its GPU branch: 34 s
    "tests/test_live_run.py::test_every_chapters_live_run_takes_its_gpu_branch_on_a_cpu",
    # compiled flex_attention or decoding steps: 10-22 s each
    "tests/test_alibi.py::test_flex_compiled_matches_eager_and_sdpa",
    "tests/test_decoding.py::test_a_compiled_decoding_step_writes_what_the_eager_one_writes",
    "tests/test_conventions.py::test_a_triu_mask_in_torchs_sense_is_refused",
    "tests/test_conventions.py::test_a_3d_pairwise_mask_is_refused_as_ambiguous",
    "tests/test_conventions.py::test_a_query_with_nothing_to_read_is_refused_only_when_it_is_real",
    "tests/test_conventions.py::test_nan_or_inf_padding_never_reaches_a_real_output_or_gradient[nan-AlibiMultiHeadAttention-flex-causal]",
    "tests/test_conventions.py::test_nan_or_inf_padding_never_reaches_a_real_output_or_gradient[nan-AlibiMultiHeadAttention-flex-bidirectional]",
    "tests/test_alibi.py::test_flex_logic_matches_eager_on_many_cases",
    "tests/test_alibi.py::test_incremental_decoding_equals_the_full_pass[flex]",
    # 2-5 s each: all the diagrams drawn, a Sphinx build, the whole corpus,
    # every precision or mixer path timed, a few models trained
    "tests/test_diagrams.py::test_the_command_writes_every_diagram",
    "tests/test_annotated.py::test_the_built_page_anchors_every_line_and_typesets_the_notes",
    "tests/test_data.py::test_tokenizer_round_trips_the_whole_corpus",
    "tests/test_bench_cpu_precision.py::test_every_precision_is_timed_and_compared_with_float32",
    "tests/test_bench_side_by_side.py::test_every_mixer_path_precision_and_mode_is_measured_at_every_length",
    "tests/test_train.py::test_a_run_that_overfits_returns_its_best_model",
    "tests/test_train.py::test_float16_training_scales_the_loss_and_unscales_before_clipping",
    "tests/test_train.py::test_baseline_run_produces_results_with_provenance",
    "tests/test_train.py::test_a_compiled_run_times_its_first_step_apart",
}


def is_slow(item) -> bool:
    path = item.nodeid.split("::")[0]
    return (
        path.startswith("book/")
        or path in SLOW_FILES
        or item.nodeid in SLOW_TESTS
        or item.nodeid.split("[")[0] in SLOW_TESTS
        or bool(SLOW_FIXTURES & set(getattr(item, "fixturenames", ())))
    )


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
