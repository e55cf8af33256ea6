"""mixers.bench.side_by_side: the structure of its results and the arithmetic of its ratios and
fits, on the smoke profile. No timing is asserted: timings vary, correctness does not."""

import json
import sys

import pytest
import torch

from mixers.bench import side_by_side as bench
from mixers.gmlp import GatedMLP
from mixers.results import to_json

SMOKE = bench.SETTINGS["smoke"]


@pytest.fixture(scope="module")
def results():
    # FlexAttention through torch's uncompiled function (the same maths, no minutes of compiling):
    # the conftest fixture, at module scope.
    import warnings

    from torch.nn.attention.flex_attention import flex_attention

    import mixers.alibi as alibi_module

    patch = pytest.MonkeyPatch()
    patch.setattr(alibi_module, "_compiled_flex_attention", flex_attention)
    threads = torch.get_num_threads()
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=".*flex_attention called without torch.compile.*"
        )
        out = bench.run("smoke", progress=False)
    patch.undo()
    assert torch.get_num_threads() == threads  # restored
    return out


def test_every_mixer_path_precision_and_mode_is_measured_at_every_length(
    results,
):
    assert [row["length"] for row in results["results"]] == list(
        SMOKE["lengths"]
    )
    assert set(bench.TOKEN_MIXER_NAMES) <= set(bench.MIXERS)
    assert bench.MIXERS["alibi"] == ("eager", "sdpa", "flex")
    for row in results["results"]:
        calls = row["calls"]
        assert list(calls) == list(bench.MIXERS)
        for name, paths in bench.MIXERS.items():
            assert list(calls[name]) == list(paths)
            for path in paths:
                for precision in bench.PRECISIONS:
                    for mode in bench.MODES:
                        entry = calls[name][path][precision][mode]
                        if (
                            path == "flex" and mode == "forward_backward"
                        ):  # no backward on a CPU
                            assert entry["error"] and "median_s" not in entry
                            continue
                        assert entry["error"] is None
                        assert (
                            len(entry["times_s"]) == SMOKE["repeats"]
                            and entry["median_s"] > 0
                        )
                        assert (
                            entry["peak_bytes"] is None
                            or entry["peak_bytes"] > 0
                        )


def test_every_path_computes_the_same_function(results):
    for row in results["results"]:
        for name, paths in row["max_abs_diff_vs_eager_float32"].items():
            for path, diffs in paths.items():
                assert diffs["float32"] < 1e-5, (name, path)
                assert diffs["bf16"] < 0.1, (
                    name,
                    path,
                )  # bf16 rounds; it does not change the function


def test_the_ratios_are_those_of_the_medians(results):
    for row in results["results"]:
        calls, ratios = row["calls"], row["ratios"]
        for precision in bench.PRECISIONS:
            for mode in bench.MODES:
                eager = calls["alibi"]["eager"][precision][mode]["median_s"]
                sdpa = calls["alibi"]["sdpa"][precision][mode]["median_s"]
                assert ratios["fused_speedup"]["alibi"]["sdpa"][precision][
                    mode
                ] == pytest.approx(eager / sdpa)
                reference = calls["attention"]["sdpa"][precision][mode][
                    "median_s"
                ]
                gmlp = calls["gmlp"]["default"][precision][mode]["median_s"]
                assert ratios["vs_attention"]["gmlp"]["default"][precision][
                    mode
                ] == pytest.approx(gmlp / reference)
                assert ratios["vs_attention"]["attention"]["sdpa"][precision][
                    mode
                ] == pytest.approx(1.0)
            assert (
                ratios["fused_speedup"]["alibi"]["flex"][precision][
                    "forward_backward"
                ]
                is None
            )
        f32 = calls["rotary"]["eager"]["float32"]["forward"]["median_s"]
        bf16 = calls["rotary"]["eager"]["bf16"]["forward"]["median_s"]
        assert ratios["bf16_speedup"]["rotary"]["eager"][
            "forward"
        ] == pytest.approx(f32 / bf16)
        assert (
            "gmlp" not in ratios["fused_speedup"]
        )  # one path: nothing to compare


def test_fit_exponent_recovers_a_power_law():
    lengths = [256, 512, 1024, 2048]
    fit = bench.fit_exponent(lengths, [3e-6 * n**2 for n in lengths])
    assert fit["exponent"] == pytest.approx(2.0) and fit[
        "last_doubling"
    ] == pytest.approx(2.0)
    assert fit["coefficient"] == pytest.approx(3e-6) and fit["points"] == 4
    # linear plus quadratic: the overall slope lies between, the last doubling nearer 2
    mixed = bench.fit_exponent(lengths, [n + n**2 / 512 for n in lengths])
    assert 1 < mixed["exponent"] < mixed["last_doubling"] < 2
    assert bench.fit_exponent([256], [1.0]) is None


def test_exponents_cover_every_measured_time_and_count_gmlps_quadratic_weight(
    results,
):
    lengths = [row["length"] for row in results["results"]]
    times = results["exponents"]["time"]
    medians = [
        row["calls"]["gmlp"]["default"]["float32"]["forward"]["median_s"]
        for row in results["results"]
    ]
    assert times["gmlp"]["default"]["float32"][
        "forward"
    ] == bench.fit_exponent(lengths, medians)
    assert (
        times["alibi"]["flex"]["bf16"]["forward_backward"] is None
    )  # never measured on a CPU
    parameters = results["exponents"]["parameters"]
    for name in ("attention", "rotary", "alibi", "gelu", "swiglu"):
        assert parameters[name]["exponent"] == pytest.approx(
            0.0, abs=1e-12
        )  # nothing depends on L
    d_model = SMOKE["d_model"]
    for row in results["results"]:
        n = row["length"]
        # W [n, n] and b [n] on top of what does not depend on n
        assert row["parameters"]["gmlp"] == sum(
            p.numel() for p in GatedMLP(d_model, 8 * d_model, n).parameters()
        )
    assert (
        0
        < parameters["gmlp"]["exponent"]
        < parameters["gmlp"]["last_doubling"]
        <= 2
    )


def test_the_mixers_are_the_models_own_layers():
    layer = bench.build_mixer("alibi", 32, 16, 2)
    assert layer.causal and type(layer).__name__ == "AlibiMultiHeadAttention"
    gmlp = bench.build_mixer("gmlp", 32, 16, 2)
    assert (
        isinstance(gmlp, GatedMLP)
        and gmlp.d_ffn == 8 * 16
        and gmlp.sgu.seq_len == 32
        and gmlp.sgu.causal
    )
    assert bench.build_mixer("swiglu", 32, 16, 2).d_ff == round(2 * 4 * 16 / 3)
    with pytest.raises(ValueError, match="mixer must be one of"):
        bench.build_mixer("mamba", 32, 16, 2)


def test_results_have_provenance_and_serialise(results):
    prov = results["provenance"]
    assert (
        prov["profile"] == "smoke"
        and prov["wall_time_s"] > 0
        and prov["threads"] == SMOKE["threads"]
    )
    for key in ("device", "torch", "git_commit", "date", "load_average_start"):
        assert key in prov
    assert results["settings"]["reference"] == list(bench.REFERENCE)
    assert json.loads(to_json(results))["exponents"] == json.loads(
        json.dumps(results["exponents"])
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(mixers=["attention", "mamba"]), "mixers must be names in"),
        (dict(mixers=["gmlp"]), "must include 'attention'"),
        (dict(lengths=(16, 0)), "must be positive"),
        (dict(repeats=0), "must be positive"),
    ],
)
def test_bad_arguments_are_refused_before_measuring(kwargs, message):
    with pytest.raises(ValueError, match=message):
        bench.run("smoke", progress=False, **kwargs)
    with pytest.raises(ValueError, match="profile must be one of"):
        bench.run("huge", progress=False)


def test_the_command_line_checks_its_arguments_before_running(
    tmp_path, monkeypatch, capsys
):
    def never(*args, **kwargs):
        raise AssertionError("ran despite a bad command line")

    monkeypatch.setattr(bench, "run", never)
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "bench",
            "--profile",
            "smoke",
            "--lengths",
            "16",
            "0",
            "--out",
            str(tmp_path),
        ],
    )
    with pytest.raises(SystemExit) as info:
        bench.main()
    assert (
        info.value.code == 2
        and "must be a positive integer" in capsys.readouterr().err
    )
    monkeypatch.setattr(sys, "argv", ["bench", "--help"])
    with pytest.raises(SystemExit):
        bench.main()
    assert bench.DURATIONS["cpu"] in capsys.readouterr().out
    monkeypatch.setattr(
        bench,
        "run",
        lambda profile, lengths, repeats, progress: {"profile": profile},
    )
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "bench",
            "--profile",
            "smoke",
            "--out",
            str(tmp_path),
            "--no-progress",
        ],
    )
    bench.main()
    assert json.loads(
        (tmp_path / "side_by_side_bench-smoke.json").read_text()
    ) == {"profile": "smoke"}


def test_load_average_is_three_rounded_numbers_or_none(monkeypatch):
    import os

    from mixers.bench import load_average

    monkeypatch.setattr(
        os, "getloadavg", lambda: (1.234, 0.5, 0.25), raising=False
    )
    assert load_average() == [1.23, 0.5, 0.25]

    def unavailable():
        raise OSError("no load average here")

    monkeypatch.setattr(os, "getloadavg", unavailable, raising=False)
    assert load_average() is None
