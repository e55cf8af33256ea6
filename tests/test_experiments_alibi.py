"""Smoke tests of the ALiBi chapter's experiment and benchmark: structure, provenance, correctness.

The benchmark's timings are never asserted (they depend on the machine); its outputs are
checked against each other, and its memory probe against a tensor of known size. Its
FlexAttention path runs through torch's uncompiled ``flex_attention`` here (the same function,
no kernel to compile), as in tests/test_alibi.py.
"""

import json
import math

import pytest
import torch
from helpers import run_smoke_restoring_threads

import mixers.alibi as alibi_module
from mixers.bench import alibi as bench
from mixers.bench import peak_memory, time_interleaved
from mixers.experiments import alibi_extrapolation as experiment
from mixers.experiments import (
    partial_path,
    per_position_loss,
    save_runs,
    sliding_window_loss,
)
from mixers.model import LanguageModel, ModelConfig
from mixers.results import to_json, without_timings
from mixers.train import TrainingDiverged, evaluate_sequential

# ---------------------------------------------------------------------------------------------
# The extrapolation experiment


@pytest.fixture(scope="module")
def results():
    return run_smoke_restoring_threads(experiment.run)


def test_smoke_run_trains_every_scheme_like_for_like(results):
    settings = experiment.SETTINGS["smoke"]
    assert results["experiment"] == "alibi_extrapolation"
    assert [run["scheme"] for run in results["runs"]] == list(
        experiment.SCHEMES
    )
    for run in results["runs"]:
        config = run["result"]["model_config"]
        assert (
            config["token_mixer"],
            config["positions"],
        ) == experiment.SCHEMES[run["scheme"]]
        assert (
            config["block_size"]
            == results["settings"]["train_length"]
            == settings["model"]["block_size"]
        )
        assert run["result"]["steps"][-1] == settings["train"]["steps"]
        assert all(math.isfinite(v) for v in run["result"]["val_loss"])
    # Same data order and steps for every scheme: only the position scheme differs.
    train_configs = [run["result"]["train_config"] for run in results["runs"]]
    assert all(c == train_configs[0] for c in train_configs)


def test_every_length_sees_the_same_tokens_and_learned_positions_stop_at_L(
    results,
):
    settings = results["settings"]
    L = settings["train_length"]
    assert settings["eval_lengths"] == [
        f * L for f in experiment.SETTINGS["smoke"]["factors"]
    ]
    for run in results["runs"]:
        assert [row["length"] for row in run["eval"]] == settings[
            "eval_lengths"
        ]
        for row in run["eval"]:
            undefined = run["scheme"] == "learned" and row["length"] > L
            if undefined:
                assert row["loss"] is None and row["per_position"] is None
                assert "learned positions have" in row["error"]
            else:
                assert row["error"] is None
                assert (
                    row["tokens"] == settings["eval_tokens"]
                )  # the same text at every length
                assert len(row["per_position"]) == row["length"]
                assert row["loss"] == pytest.approx(
                    sum(row["per_position"]) / row["length"], abs=1e-4
                )
                assert 0 < row["loss"] < 2 * math.log(65)


def test_smoke_results_have_provenance_and_serialise(results):
    prov = results["provenance"]
    assert prov["profile"] == "smoke" and prov["wall_time_s"] > 0
    for key in ("device", "torch", "git_commit", "date", "seeds"):
        assert key in prov
    assert (
        json.loads(to_json(results))["runs"][2]["eval"][1]["loss"] is None
    )  # null in JSON


def _tiny_alibi(vocab_size: int) -> LanguageModel:
    """A one-layer ALiBi language model, float32, seeded."""
    torch.manual_seed(0)
    return LanguageModel(
        ModelConfig(
            vocab_size=vocab_size,
            block_size=16,
            d_model=16,
            n_layers=1,
            n_heads=2,
            token_mixer="alibi",
            positions="none",
        )
    )


def test_per_position_loss_averages_to_evaluate_sequential(shakespeare):
    model = _tiny_alibi(shakespeare.tokenizer.vocab_size)
    data = shakespeare.val[:2000]
    for length in (8, 16, 48):  # ALiBi: lengths past block_size are fine
        loss, windows = per_position_loss(
            model, data, length, batch_size=5, max_windows=9
        )
        assert loss.shape == (length,) and windows == 9
        expected = evaluate_sequential(
            model, data, length, batch_size=5, max_windows=9
        )
        assert loss.mean().item() == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("window, stride", [(8, 1), (8, 3), (16, 4), (12, 12)])
def test_sliding_window_loss_scores_each_token_with_its_own_context(
    shakespeare, window, stride
):
    model = _tiny_alibi(shakespeare.tokenizer.vocab_size).double().eval()
    data = shakespeare.val[:200]
    n_tokens = window + 5 * stride
    # The definition, one prediction at a time: prediction t reads from the
    # start of the window that scores it.
    losses = []
    with torch.no_grad():
        for t in range(n_tokens):
            start = 0 if t < window else ((t - window) // stride + 1) * stride
            assert t - start < window  # never more than a window of context
            assert t < window or t - start + 1 >= window - stride + 1
            logits, _ = model(data[start : t + 1][None])
            losses.append(
                torch.nn.functional.cross_entropy(
                    logits[0, -1], data[t + 1]
                ).item()
            )
    got = sliding_window_loss(
        model, data, window, stride, n_tokens, batch_size=3
    )
    assert got == pytest.approx(sum(losses) / n_tokens, rel=1e-6)


def test_sliding_windows_with_stride_equal_to_window_are_non_overlapping(
    shakespeare,
):
    model = _tiny_alibi(shakespeare.tokenizer.vocab_size).double()
    data = shakespeare.val[:2000]
    got = sliding_window_loss(model, data, 16, 16, 16 * 9)
    expected = evaluate_sequential(model, data, 16, max_windows=9, amp=False)
    assert got == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize(
    "window, stride, n_tokens, message",
    [
        (0, 1, 8, "window must be a positive int"),
        (8, 0, 8, "stride must be a positive int"),
        (8, 9, 8, "stride=9 must be at most window=8"),
        (8, 3, 12, "must be a multiple of stride=3"),
        (8, 2, 6, "must be a multiple of stride=2 and at least 0"),
        (8, 8, 10_000, "fewer than n_tokens"),
    ],
)
def test_sliding_window_loss_rejects_bad_arguments_by_name(
    shakespeare, window, stride, n_tokens, message
):
    model = _tiny_alibi(shakespeare.tokenizer.vocab_size)
    with pytest.raises(ValueError, match=message):
        sliding_window_loss(
            model, shakespeare.val[:500], window, stride, n_tokens
        )


def test_smoke_run_scores_sliding_windows_and_writes_past_the_training_length(
    results,
):
    settings = results["settings"]
    L = settings["train_length"]
    for run in results["runs"]:
        rows = run["sliding"]
        assert [row["window"] for row in rows] == settings["sliding_lengths"]
        for row in rows:
            if run["scheme"] == "learned" and row["window"] > L:
                assert (
                    row["loss"] is None and "learned positions" in row["error"]
                )
            else:
                assert row["error"] is None and 0 < row["loss"] < 2 * math.log(
                    65
                )
        # the window of L, slid, reads more context per token than
        # non-overlapping windows of L do, on the same predictions
        assert rows[0]["window"] == L
        long = run["long_generation"]
        # the models that decode through a cache: no positions on the embeddings
        if run["scheme"] in ("none", "rotary", "alibi"):
            length = settings["generate_length"]
            assert length > L
            assert (
                len(long["sample"]) == 1 + length
            )  # the newline, then the text
            assert long["sample"].startswith("\n")
            assert len(long["per_position"]) == length
            assert all(0 <= v < 3 * math.log(65) for v in long["per_position"])
        else:
            assert long is None  # embedded positions: a window of L at most


def test_the_writers_own_loss_is_the_loss_of_the_distributions_it_sampled(
    shakespeare,
):
    # The same text scored token by token through the cache as generate reads
    # it: every prediction equals the one-pass forward's.
    model = _tiny_alibi(shakespeare.tokenizer.vocab_size).double().eval()
    settings = {
        "generate_length": 40,
        "generate_samples": 2,
    }  # 40 > block_size
    long = experiment.long_generation(model, shakespeare, settings, seed=3)
    ids = shakespeare.tokenizer.encode(long["sample"])[None]
    from mixers.model import KVCache

    caches = [KVCache(None) for _ in model.blocks]
    step, losses = ids[:, :1], []
    with torch.no_grad():
        for t in range(ids.shape[1] - 1):
            logits = model._next_logits(step, caches)
            losses.append(
                torch.nn.functional.cross_entropy(
                    logits[0], ids[0, t + 1]
                ).item()
            )
            step = ids[:, t + 1 : t + 2]
    one_pass = []
    with torch.no_grad():
        logits, _ = model(ids[:, :-1])
        one_pass = torch.nn.functional.cross_entropy(
            logits[0], ids[0, 1:], reduction="none"
        ).tolist()
    assert losses == pytest.approx(one_pass, rel=1e-9, abs=1e-12)


def test_unknown_profile_is_rejected():
    with pytest.raises(ValueError, match="profile"):
        experiment.run("huge", progress=False)


def test_an_interrupted_run_resumes_with_the_same_results(
    results, tmp_path, monkeypatch, capsys
):
    real, schemes = experiment.run_one, []

    def interrupt_the_second_run(
        dataset, profile, settings, scheme, progress=False
    ):
        schemes.append(scheme)
        if schemes == ["none", "sinusoidal"]:
            raise KeyboardInterrupt  # a Ctrl-C while the second scheme trains, the first time
        return real(dataset, profile, settings, scheme, progress)

    monkeypatch.setattr(experiment, "run_one", interrupt_the_second_run)
    with pytest.raises(KeyboardInterrupt), save_runs(tmp_path):
        experiment.run("smoke", progress=False)
    saved = json.loads(
        partial_path("alibi_extrapolation", "smoke", tmp_path).read_text()
    )
    assert [run["scheme"] for run in saved["runs"]] == ["none"]
    schemes.clear()
    with save_runs(tmp_path):
        resumed = experiment.run("smoke", progress=False)
    assert "resuming: 1 of 6 runs already done" in capsys.readouterr().out
    assert schemes == list(experiment.SCHEMES)[1:]  # only the missing runs ran
    assert without_timings(resumed) == without_timings(
        results
    )  # the numbers of a run never interrupted


def test_a_diverging_scheme_is_recorded_and_the_others_kept(
    results, monkeypatch
):
    real = experiment.run_profile

    def diverge_rotary(dataset, profile, model_overrides, **kwargs):
        if model_overrides["token_mixer"] == "rotary":
            raise TrainingDiverged("the training loss is inf at step 9 of 60")
        return real(
            dataset, profile, model_overrides=model_overrides, **kwargs
        )

    monkeypatch.setattr(experiment, "run_profile", diverge_rotary)
    monkeypatch.setattr(
        experiment,
        "SCHEMES",
        {name: experiment.SCHEMES[name] for name in ("rotary", "alibi")},
    )
    out = experiment.run("smoke", progress=False)
    rotary, alibi = out["runs"]
    assert rotary == {
        "scheme": "rotary",
        "diverged": True,
        "error": "the training loss is inf at step 9 of 60",
    }
    assert without_timings(alibi) == without_timings(
        next(r for r in results["runs"] if r["scheme"] == "alibi")
    )
    assert (
        out["provenance"]["seeds"] == alibi["result"]["provenance"]["seeds"]
    )  # from the run that finished


# ---------------------------------------------------------------------------------------------
# The benchmark


def test_bench_runs_every_implementation_and_they_agree(uncompiled_flex):
    threads = torch.get_num_threads()
    out = bench.run("smoke", lengths=(16, 24), repeats=2, progress=False)
    assert (
        torch.get_num_threads() == threads
    )  # run() restores the thread count
    assert (
        out["experiment"] == "alibi_bench"
        and out["provenance"]["profile"] == "smoke"
    )
    assert out["provenance"]["threads"] >= 1 and "device" in out["provenance"]
    assert [row["length"] for row in out["results"]] == [16, 24]
    for row in out["results"]:
        impls = row["implementations"]
        assert set(impls) == set(bench.IMPLEMENTATIONS)
        for name, entry in impls.items():
            for mode in bench.MODES:
                timing = entry[mode]
                if timing["error"] is not None:
                    # Only FlexAttention's backward on a CPU may be missing (torch has none there).
                    assert (name, mode) == (
                        "flex",
                        "forward_backward",
                    ) and "backward" in timing["error"]
                    continue
                assert (
                    len(timing["times_s"]) == 2
                    and timing["min_s"]
                    <= timing["median_s"]
                    <= timing["max_s"]
                )
                assert (
                    timing["peak_bytes"] is None or timing["peak_bytes"] >= 0
                )
            if name != "causal_sdpa":
                assert entry["max_abs_diff_vs_eager"] < 1e-5, name
        assert row["speedup_vs_labml"]["forward"]["labml"] == 1.0
        for mode, ratios in row[
            "time_vs_causal_floor"
        ].items():  # each time over the floor's, same run
            assert ratios["causal_sdpa"] == 1.0
            for name, ratio in ratios.items():
                assert (
                    ratio
                    == impls[name][mode]["median_s"]
                    / impls["causal_sdpa"][mode]["median_s"]
                )
        assert (
            row["scores_tensor_bytes"] == row["length"] ** 2 * 1 * 2 * 4
        )  # batch 1, 2 heads, float32
        assert (
            impls["sdpa"]["kept_bias_bytes"] == 2 * row["length"] ** 2 * 4
        )  # the bias the layer keeps
    diagnostics = out["flex_diagnostics"]
    assert diagnostics["length"] == 24
    for part in (
        "layer",
        "kernel_with_alibi",
        "kernel_without_bias",
        "create_block_mask",
    ):
        assert len(diagnostics[part]["times_s"]) == 2
    assert out["extra_shapes"] == []  # the smoke profile has none
    to_json(out)


def test_bench_never_calls_the_compiled_flex_backward_on_a_cpu(
    uncompiled_flex, monkeypatch
):
    # A compiled call that raises leaves torch.compile on its slow fallback for later calls, so
    # the benchmark asks torch's uncompiled flex_attention whether a backward pass exists at all.
    reason = bench.flex_backward_unsupported(torch.device("cpu"))
    calls = []
    real = alibi_module._compiled_flex_attention

    def spy(q, *args, **kwargs):
        calls.append(q.requires_grad)
        return real(q, *args, **kwargs)

    monkeypatch.setattr(alibi_module, "_compiled_flex_attention", spy)
    functions = bench.build_implementations(
        2, 8, torch.device("cpu"), names=("eager", "flex")
    )
    row = bench.bench_length(
        functions,
        16,
        1,
        2,
        8,
        torch.float32,
        torch.device("cpu"),
        repeats=1,
        memory=False,
    )
    if reason is not None:
        assert (
            not any(calls)
            and row["implementations"]["flex"]["forward_backward"]["error"]
            == reason
        )
    assert row["implementations"]["flex"]["max_abs_diff_vs_eager"] < 1e-5


def test_bench_rejects_unknown_names():
    with pytest.raises(ValueError, match="profile"):
        bench.run("huge")
    with pytest.raises(ValueError, match="unknown implementations"):
        bench.build_implementations(
            2, 8, torch.device("cpu"), names=("labml", "magic")
        )


def test_peak_memory_sees_a_tensor_of_known_size():
    size = 1 << 20  # 1 MiB of float32
    peak = peak_memory(
        lambda: torch.empty(size // 4, dtype=torch.float32).fill_(1.0),
        torch.device("cpu"),
    )
    if (
        peak is not None
    ):  # None: this torch build does not expose the profiler's allocation events
        assert size <= peak < 2 * size


def test_time_interleaved_takes_turns_and_summarises_each_call():
    order = []
    calls = {"a": lambda: order.append("a"), "b": lambda: order.append("b")}
    times = time_interleaved(calls, 3, torch.device("cpu"))
    assert (
        order == ["a", "b"] * 3
    )  # one of each per round, not all of a then all of b
    for key in calls:
        assert len(times[key]["times_s"]) == 3
        assert (
            times[key]["min_s"]
            <= times[key]["median_s"]
            <= times[key]["max_s"]
        )


def test_evaluation_windows_read_the_same_tokens_at_every_length_in_batches_of_about_8192():
    from mixers.experiments import EVAL_BATCH_TOKENS, evaluation_windows

    assert EVAL_BATCH_TOKENS == 8192
    assert evaluation_windows(65536, 64) == (1024, 128)
    assert evaluation_windows(65536, 1024) == (64, 8)
    assert evaluation_windows(512, 16384 // 32) == (
        1,
        1,
    )  # one window, never an empty batch
    with pytest.raises(
        ValueError,
        match="eval_tokens=100 is shorter than the evaluation length 128",
    ):
        evaluation_windows(100, 128)
