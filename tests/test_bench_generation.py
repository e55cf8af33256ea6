"""The generation benchmark: with and without the key/value cache, the same tokens."""

import torch

from mixers.bench import generation


def test_the_benchmark_writes_the_same_tokens_both_ways_and_reports_rates(
    monkeypatch,
):
    monkeypatch.setitem(
        generation.SETTINGS,
        "smoke",
        dict(profile="smoke", prompt=4, new_tokens=6, repeats=1),
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
