"""The generation benchmark: with and without the key/value cache, the same tokens."""

import torch

from mixers.bench import generation


def test_the_benchmark_writes_the_same_tokens_both_ways_and_reports_rates(
    monkeypatch,
):
    monkeypatch.setitem(
        generation.SETTINGS,
        "smoke",
        {
            **generation.SETTINGS["smoke"],
            "prompt": 4,
            "new_tokens": 6,
            "repeats": 1,
        },
    )
    results = generation.run("smoke", progress=False)
    assert [row["token_mixer"] for row in results["results"]] == list(
        generation.MIXERS
    )
    for row in results["results"]:
        assert row["same_tokens_inside_the_window"] is True
        assert set(row["tokens_per_s"]) == {"cache", "no_cache"}
        assert (
            row["speedup"]
            == row["tokens_per_s"]["cache"] / row["tokens_per_s"]["no_cache"]
        )
    assert results["provenance"]["profile"] == "smoke"


def test_the_plain_loop_is_greedy_over_the_cropped_window():
    model = generation._model("smoke", "alibi")
    idx = torch.zeros(1, 3, dtype=torch.long)
    out = generation.generate_without_cache(model, idx, 5)
    expected = idx
    for _ in range(5):
        logits, _ = model(expected[:, -model.config.block_size :])
        expected = torch.cat([expected, logits[:, -1:].argmax(-1)], 1)
    assert torch.equal(out, expected)


def test_each_rate_is_printed_beside_its_target():
    row = {
        "token_mixer": "alibi",
        "tokens_per_s": {"cache": 5200.0, "no_cache": 400.0},
        "speedup": 13.0,
        "same_tokens_inside_the_window": True,
    }
    line = generation.format_row(row, 500, gpu=True)
    assert "cache  5200.0 tok/s (target >= 5000, met)" in line
    assert "13.00x re-encoding (target >= 10.0x, met)" in line
    assert "(target >= 2.5x, met)" in generation.format_row(row, 500)


def test_the_gpu_profile_decodes_the_gpu_model_in_bf16_through_a_graph():
    settings = generation.SETTINGS["gpu"]
    assert settings["device"] == "cuda" and settings["dtype"] == "bfloat16"
    assert settings["graph"] and settings["compile"]
    assert generation.SETTINGS["smoke"]["graph"] is True  # the same step
