"""The ALiBi benchmark's plumbing (mixers.bench.alibi): the layers it times are attention alone,
and it prints issue 31's targets beside its figures. Timings are never asserted."""

import torch

from mixers.alibi import alibi_bias
from mixers.attention import dot_product_attention
from mixers.bench import alibi as bench


def test_the_timed_layers_are_attention_alone():
    functions = bench.build_implementations(2, 8, "cpu", ("eager", "sdpa"))
    x = torch.randn(2, 10, 16)
    q = x.view(2, 10, 2, 8).transpose(1, 2)  # q = k = v: the heads of x
    bias = alibi_bias(2, 10)
    expected, _ = dot_product_attention(q, q, q, bias=bias)
    expected = expected.transpose(1, 2).reshape(2, 10, 16)
    with torch.no_grad():
        for function in functions.values():
            assert torch.allclose(function(x), expected, atol=1e-5)


def test_a_run_reports_each_target_beside_its_figure(capsys):
    out = bench.run(
        "smoke",
        lengths=(16,),
        repeats=1,
        implementations=("eager", "sdpa", "causal_sdpa"),
        memory=False,
    )
    targets = out["targets"]
    assert set(bench.TARGETS) <= set(targets)
    assert targets["flex_forward_vs_causal_floor"] is None  # no flex run
    # on a CPU the default backend keeps its (small) bias
    assert out["default_backend_kept_bias_bytes"] == {16: 2 * 16 * 16 * 4}
    printed = capsys.readouterr().out
    assert "flex layer: not measured (target <= 1.10x)" in printed
    assert "largest bias kept by the default backend: 0.0 MiB" in printed


def test_the_target_lines_say_met_or_missed():
    lines = bench.target_lines(
        {
            "flex_layer_vs_kernel": 1.05,
            "score_mod_vs_no_bias": 1.3,
            "flex_forward_vs_causal_floor": 1.5,
            "length": 4096,
            "default_backend_kept_bias_mib": 0.0,
        }
    )
    assert lines == [
        "flex layer: 1.05x its kernel (target <= 1.10x, met)",
        "ALiBi score_mod: 1.30x the kernel without a bias (target <= 1.20x,"
        " missed)",
        "flex forward at L = 4096: 1.50x the causal floor (target <= 1.60x,"
        " met)",
        "largest bias kept by the default backend: 0.0 MiB (target <="
        " 64.00 MiB, met)",
    ]
