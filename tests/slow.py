"""What is slow: left out of the quick subset, ``pytest -m "not slow"``
(README). tests/conftest.py marks it; tests/test_quick_subset.py checks it."""

# The quick subset for the edit-test loop, `pytest -m "not slow"` (README): it
# leaves out what is named slow here, each run in full by the plain `pytest`.
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
    # a fresh process compiling three models with inductor: 65 s
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
