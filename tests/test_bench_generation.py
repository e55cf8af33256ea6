"""The generation benchmark: with and without the key/value cache, the same tokens; its rows
saved as each model finishes, and a model that fails reported as a failure."""

import json

import pytest
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
    assert "(target >= 3.0x, met)" in generation.format_row(row, 500)


def test_the_gpu_profile_decodes_the_gpu_model_in_bf16_through_a_graph():
    settings = generation.SETTINGS["gpu"]
    assert settings["device"] == "cuda" and settings["dtype"] == "bfloat16"
    assert settings["graph"] and settings["compile"]
    assert generation.SETTINGS["smoke"]["graph"] is True  # the same step


def test_rows_are_saved_as_each_model_finishes_and_a_failure_is_a_failure(
    monkeypatch, tmp_path, capsys
):
    """A model that cannot decode (here: as a CUDA graph that cannot be
    recorded would fail) is a row with its error; the next model still runs;
    every row is in the partial file as soon as its model ends; the command
    exits 1."""
    saved = []
    real = generation.write_results

    def spy(path, results):
        saved.append(json.loads(json.dumps(results["results"])))
        return real(path, results)

    def measure(profile, mixer, settings):
        if mixer == "alibi":
            raise RuntimeError("CUDA error: operation not permitted when"
                               " stream is capturing")  # fmt: skip
        return {"token_mixer": mixer, "tokens_per_s": {"cache": 2.0,
                "no_cache": 1.0}, "speedup": 2.0,
                "same_tokens_inside_the_window": True}  # fmt: skip

    monkeypatch.setattr(generation, "write_results", spy)
    monkeypatch.setattr(generation, "measure", measure)
    with pytest.raises(SystemExit) as stopped:
        generation.main(["--profile", "smoke", "--out", str(tmp_path)])
    assert stopped.value.code == 1
    assert [len(rows) for rows in saved] == [1, 2, 3]
    assert saved[1][1] == {
        "token_mixer": "alibi",
        "error": "RuntimeError: CUDA error: operation not permitted when"
        " stream is capturing",
    }
    final = json.loads((tmp_path / "generation-smoke.json").read_text())
    assert final["complete"] and [r["token_mixer"] for r in final["results"]] == [
        "attention", "alibi", "rotary"
    ]  # fmt: skip
    assert not (tmp_path / "generation-smoke.partial.json").exists()
    out = capsys.readouterr()
    assert "alibi: FAILED: RuntimeError" in out.out
    assert "FAILED: alibi" in out.err
