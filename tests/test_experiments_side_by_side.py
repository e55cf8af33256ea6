"""mixers.experiments.side_by_side: like-for-like pairs, the structure of its results, and runs
that survive an interruption (saved as they finish, resumed, never mixed with other settings)."""

import json
import math
import statistics

import pytest
import torch
from helpers import run_smoke_restoring_threads

import mixers.results as results_module
from mixers.experiments import (
    SettingsMismatch,
    main,
    partial_path,
    save_runs,
    settings_differences,
)
from mixers.experiments import side_by_side as sbs
from mixers.model import (
    CHANNEL_MIXERS,
    TOKEN_MIXERS,
    LanguageModel,
    ModelConfig,
)
from mixers.results import (
    CorruptResults,
    load_results,
    to_json,
    without_timings,
    write_results,
)
from mixers.train import TrainingDiverged

SMOKE = sbs.SETTINGS["smoke"]
# Two pairs, two learning rates, one seed: four runs of a tiny model, for the resume tests.
SMALL = dict(pairs=["attention+gelu", "gmlp"], lrs=[3e-3, 6e-3], seeds=[0])
REAL_RUN_ONE = sbs.run_one


# ---------------------------------------------------------------------------------------------
# Pairs and parameters


def test_the_default_pairs_are_registered_and_include_the_required_ones():
    for pair in sbs.PAIRS:
        fields = sbs.parse_pair(pair)
        assert (
            fields["token_mixer"] in TOKEN_MIXERS
            and fields["channel_mixer"] in CHANNEL_MIXERS
        )
    for token_mixer in ("attention", "rotary", "alibi"):
        for channel_mixer in ("gelu", "swiglu"):
            assert f"{token_mixer}+{channel_mixer}" in sbs.PAIRS
    assert {"gmlp", "amlp"} <= set(
        sbs.PAIRS
    ) and sbs.REFERENCE_PAIR in sbs.PAIRS


@pytest.mark.parametrize(
    "label, message",
    [
        ("transformer+gelu", "unknown token mixer 'transformer'"),
        ("attention+swishglu", "channel mixer must be one of"),
        ("attention", "channel mixer must be one of"),
        ("attention+none", "channel mixer must be one of"),
        ("gmlp+gelu", "mixes channels itself"),
    ],
)
def test_a_bad_pair_is_refused_by_name(label, message):
    with pytest.raises(ValueError, match=message) as info:
        sbs.parse_pair(label)
    assert repr(label) in str(info.value)


def test_the_whole_validation_split_is_read_in_whole_windows_of_every_length():
    plan = sbs.experiment_plan("cpu", 65, val_tokens=111_540)
    longest = max(plan["eval_lengths"])
    assert plan["eval_tokens"] == 111_540 // longest * longest
    assert all(
        plan["eval_tokens"] % length == 0 for length in plan["eval_lengths"]
    )
    assert (
        plan["eval_lengths"][0] == plan["model"]["block_size"]
    )  # loss_by_seed reads 1x
    with pytest.raises(ValueError, match="pass val_tokens"):
        sbs.experiment_plan("cpu", 65)
    with pytest.raises(TypeError, match="val_tokens must be a positive int"):
        sbs.experiment_plan("cpu", 65, val_tokens=1.5)


@pytest.mark.parametrize("profile", ["smoke", "cpu", "gpu"])
def test_every_pair_is_matched_to_the_target_within_the_tolerance(profile):
    plan = sbs.experiment_plan(profile, 65, val_tokens=111_540)
    target = plan["target_parameters"]
    assert plan["parameter_tolerance"] == sbs.PARAMETER_TOLERANCE == 0.02
    model = plan["model"]
    assert target == sbs.count_parameters(
        65, model, sbs.REFERENCE_PAIR, 4 * model["d_model"]
    )
    for pair, info in plan["pairs"].items():
        assert abs(info["parameters"] - target) / target <= 0.02
        assert info["parameter_deviation"] == pytest.approx(
            (info["parameters"] - target) / target
        )
        # no other width comes closer (the count is monotonic in d_ff; check the neighbours)
        step = 2 if pair in ("gmlp", "amlp") else 1
        for other in (info["d_ff"] - step, info["d_ff"] + step):
            assert abs(
                sbs.count_parameters(65, model, pair, other) - target
            ) >= abs(info["parameters"] - target)
    if (
        profile == "smoke"
    ):  # the meta-device count is the count of the real model
        for pair, info in plan["pairs"].items():
            config = ModelConfig(
                vocab_size=65,
                **model,
                **sbs.parse_pair(pair),
                d_ff=info["d_ff"],
            )
            real = LanguageModel(config)
            assert real.num_parameters() == info["parameters"]
            assert (config.positions, config.channel_mixer) == (
                info["positions"],
                info["channel_mixer"],
            )
            block = real.blocks[0]
            width = (
                block.channel_mixer.d_ff
                if block.channel_mixer is not None
                else block.token_mixer.d_ffn
            )
            assert width == info["hidden_size"]


def test_a_pair_that_cannot_be_matched_is_refused_by_name():
    # At length 256 and width 8, gMLP's W alone (256² per layer) outweighs the whole reference model.
    model = dict(d_model=8, n_layers=1, n_heads=2, block_size=256, dropout=0.0)
    with pytest.raises(
        ValueError, match=r"pair 'gmlp' cannot match the parameter target.*±2%"
    ):
        sbs.matched_pairs(["attention+gelu", "gmlp"], 65, model)


# ---------------------------------------------------------------------------------------------
# A whole smoke run


@pytest.fixture(scope="module")
def results():
    return run_smoke_restoring_threads(sbs.run)


def test_smoke_run_trains_every_pair_lr_and_seed_like_for_like(results):
    plan = results["settings"]
    assert list(plan["pairs"]) == list(sbs.PAIRS)
    assert plan["lrs"] == list(SMOKE["lrs"]) and len(plan["lrs"]) == 3
    assert plan["seeds"] == list(SMOKE["seeds"]) and len(plan["seeds"]) >= 2
    runs = results["runs"]
    assert [(r["pair"], r["lr"], r["seed"]) for r in runs] == sbs.jobs(plan)
    reference = runs[0]["result"]["train_config"]
    for run in runs:
        result = run["result"]
        assert not run["diverged"] and run["error"] is None
        config = result["train_config"]
        assert (config["lr"], config["seed"]) == (run["lr"], run["seed"])
        # the same token budget, schedule and evaluation for every run: only lr and seed differ
        assert {
            k: v for k, v in config.items() if k not in ("lr", "seed")
        } == {k: v for k, v in reference.items() if k not in ("lr", "seed")}
        assert result["steps"][-1] == SMOKE["train"]["steps"]
        assert (
            result["model_config"]["d_ff"]
            == plan["pairs"][run["pair"]]["d_ff"]
        )
        assert (
            result["parameters"]
            == run["parameters"]
            == plan["pairs"][run["pair"]]["parameters"]
        )
        assert (
            run["best_val_loss"]
            == result["best_val_loss"]
            == min(result["val_loss"])
        )
        assert run["tokens_per_s"] > 0
        assert (
            run["peak_memory_bytes"] is None or run["peak_memory_bytes"] > 0
        )  # None: no profiler events
    assert (
        plan["tokens_per_run"]
        == SMOKE["train"]["steps"]
        * SMOKE["train"]["batch_size"]
        * SMOKE["train"]["seq_len"]
    )


def test_the_same_seed_gives_the_same_run(results, shakespeare):
    """Seeded: rerunning one job gives its losses bit for bit (so every pair sees the same batches)."""
    first = results["runs"][0]
    again = sbs.run_one(
        shakespeare,
        "smoke",
        results["settings"],
        first["pair"],
        first["lr"],
        first["seed"],
    )
    assert again["result"]["val_loss"] == first["result"]["val_loss"]
    assert again["eval_lengths"] == first["eval_lengths"]


def test_only_the_models_that_can_read_longer_sequences_get_a_loss_there(
    results,
):
    lengths = results["settings"]["eval_lengths"]
    block_size = SMOKE["model"]["block_size"]
    assert lengths == [f * block_size for f in SMOKE["factors"]] and results[
        "settings"
    ]["eval_factors"] == [1, 2, 4]
    for run in results["runs"]:
        rows = run["eval_lengths"]
        assert [row["length"] for row in rows] == lengths
        assert (
            math.isfinite(rows[0]["loss"]) and rows[0]["error"] is None
        )  # every model reads its own length
        extrapolates = run["token_mixer"] in ("rotary", "alibi")
        for row in rows[1:]:
            if extrapolates:
                assert math.isfinite(row["loss"]) and row["error"] is None
            else:  # learned positions and gMLP's W stop at block_size, and say so
                assert row["loss"] is None and str(block_size) in row["error"]
        assert all(
            row["windows"] == SMOKE["eval_tokens"] // row["length"]
            for row in rows
        )


def test_the_summary_is_at_each_pairs_best_learning_rate(results):
    summary = results["summary"]
    plan = results["settings"]
    assert sorted(summary["ranking_by_best_val_loss"]) == sorted(plan["pairs"])
    for pair, row in summary["pairs"].items():
        mine = [r for r in results["runs"] if r["pair"] == pair]
        means = {
            lr: statistics.fmean(
                r["best_val_loss"] for r in mine if r["lr"] == lr
            )
            for lr in plan["lrs"]
        }
        assert row["best_lr"] == min(means, key=means.get)
        assert row["best_lr_at_edge"] == (
            row["best_lr"] in (min(plan["lrs"]), max(plan["lrs"]))
        )
        at_best = [
            r["best_val_loss"] for r in mine if r["lr"] == row["best_lr"]
        ]
        spread = row["best_val_loss"]
        assert spread["mean"] == pytest.approx(statistics.fmean(at_best))
        assert spread["std"] == pytest.approx(statistics.stdev(at_best))
        assert (spread["min"], spread["max"], spread["n"]) == (
            min(at_best),
            max(at_best),
            len(plan["seeds"]),
        )
        assert row["tokens_per_s_median"] == pytest.approx(
            statistics.median(r["tokens_per_s"] for r in mine)
        )
        extrapolates = row["token_mixer"] in ("rotary", "alibi")
        assert row["loss_at_factor"]["1"]["n"] == len(plan["seeds"])
        assert (row["loss_at_factor"]["4"] is not None) == extrapolates
        assert row["parameters"] == plan["pairs"][pair]["parameters"]
        # each seed's loss at 1x, for paired tests, at the best rate
        at_best_runs = [r for r in mine if r["lr"] == row["best_lr"]]
        assert row["loss_by_seed"] == {
            str(r["seed"]): r["eval_lengths"][0]["loss"] for r in at_best_runs
        }
        assert statistics.fmean(row["loss_by_seed"].values()) == pytest.approx(
            row["loss_at_factor"]["1"]["mean"]
        )
        assert row["still_improving"] == sum(
            r["result"]["val_loss"][-1] == min(r["result"]["val_loss"])
            for r in at_best_runs
        )


def test_smoke_results_have_provenance_and_serialise(results):
    prov = results["provenance"]
    assert (
        prov["profile"] == "smoke"
        and prov["wall_time_s"] > 0
        and prov["resumed_runs"] == 0
    )
    for key in (
        "device",
        "torch",
        "git_commit",
        "date",
        "seeds",
        "threads",
        "train_precision",
    ):
        assert key in prov
    assert prov["seeds"] == list(SMOKE["seeds"])
    for key in ("seed_policy", "lr_policy", "memory_policy"):
        assert results[key]
    assert json.loads(to_json(results))["summary"] == results["summary"]


def test_a_diverged_run_is_recorded_and_its_learning_rate_disqualified(
    monkeypatch,
):
    real = sbs.run_profile

    def diverge_at_the_high_rate(*args, train_overrides, **kwargs):
        if train_overrides["lr"] == 6e-3:
            raise TrainingDiverged("the training loss is nan at step 3")
        return real(*args, train_overrides=train_overrides, **kwargs)

    monkeypatch.setattr(sbs, "run_profile", diverge_at_the_high_rate)
    results = sbs.run("smoke", progress=False, **SMALL)
    diverged = [run for run in results["runs"] if run["diverged"]]
    assert [(run["pair"], run["lr"]) for run in diverged] == [
        ("attention+gelu", 6e-3),
        ("gmlp", 6e-3),
    ]
    assert all(
        "nan at step 3" in run["error"] and "result" not in run
        for run in diverged
    )
    kept = [run for run in results["runs"] if not run["diverged"]]
    assert len(kept) == 2 and all(
        run["error"] is None and run["best_val_loss"] > 0 for run in kept
    )
    row = results["summary"]["pairs"]["gmlp"]
    assert row["best_lr"] == 3e-3 and row["by_lr"][repr(6e-3)]["diverged"] == 1


# ---------------------------------------------------------------------------------------------
# Interruption, resuming, and refusing to mix settings


class Interrupt:
    """``run_one`` that raises KeyboardInterrupt (a Ctrl-C) when called for the ``after + 1``-th
    time, and counts the jobs it ran."""

    def __init__(self, after: int | None):
        self.after, self.jobs = after, []

    def __call__(self, dataset, profile, plan, pair, lr, seed, progress=False):
        if self.after is not None and len(self.jobs) == self.after:
            raise KeyboardInterrupt
        self.jobs.append((pair, lr, seed))
        return REAL_RUN_ONE(dataset, profile, plan, pair, lr, seed, progress)


def _interrupted(tmp_path, monkeypatch, after=2):
    monkeypatch.setattr(sbs, "run_one", Interrupt(after))
    with pytest.raises(KeyboardInterrupt), save_runs(tmp_path):
        sbs.run("smoke", progress=False, **SMALL)
    monkeypatch.setattr(sbs, "run_one", REAL_RUN_ONE)
    return partial_path("side_by_side", "smoke", tmp_path)


def _cli(argv):
    main(sbs.NAME, sbs.run, sbs.__doc__.splitlines()[0], sbs.DURATIONS, argv)


def test_an_interruption_keeps_the_finished_runs_in_a_valid_file(
    tmp_path, monkeypatch
):
    path = _interrupted(tmp_path, monkeypatch, after=2)
    assert path == tmp_path / "side_by_side-smoke.partial.json"
    saved = json.loads(path.read_text())  # valid JSON
    assert [
        (r["pair"], r["lr"], r["seed"]) for r in saved["runs"]
    ] == sbs.jobs(saved["settings"])[:2]
    assert saved["complete"] is False and (
        saved["runs_done"],
        saved["runs_total"],
    ) == (2, 4)
    assert list(saved)[0] == "provenance"
    assert [p.name for p in tmp_path.iterdir()] == [
        path.name
    ]  # no temporary file left behind


def test_a_rerun_resumes_and_runs_only_the_missing_runs(
    tmp_path, monkeypatch, capsys
):
    path = _interrupted(tmp_path, monkeypatch, after=2)
    saved = json.loads(path.read_text())["runs"]
    counter = Interrupt(None)
    monkeypatch.setattr(sbs, "run_one", counter)
    with save_runs(tmp_path):
        resumed = sbs.run("smoke", progress=False, **SMALL)
    assert "resuming: 2 of 4 runs already done" in capsys.readouterr().out
    plan = resumed["settings"]
    assert counter.jobs == sbs.jobs(plan)[2:]  # only the missing ones
    assert resumed["runs"][:2] == saved and len(resumed["runs"]) == 4
    assert resumed["provenance"]["resumed_runs"] == 2
    complete = json.loads(path.read_text())
    assert complete["complete"] is True and len(complete["runs"]) == 4
    # the same numbers as a run that was never interrupted (seeded, on a CPU)
    monkeypatch.setattr(sbs, "run_one", REAL_RUN_ONE)
    straight = sbs.run("smoke", progress=False, **SMALL)
    assert [r["result"]["val_loss"] for r in straight["runs"]] == [
        r["result"]["val_loss"] for r in resumed["runs"]
    ]
    assert without_timings(straight) == without_timings(resumed)
    # and a rerun after the last run has nothing left to do
    monkeypatch.setattr(
        sbs, "run_one", Interrupt(0)
    )  # would raise if it ran anything
    with save_runs(tmp_path):
        again = sbs.run("smoke", progress=False, **SMALL)
    assert "resuming: 4 of 4 runs already done" in capsys.readouterr().out
    assert again["runs"] == resumed["runs"]


def test_a_crash_while_saving_leaves_the_previous_partial_file_whole(
    tmp_path, monkeypatch
):
    real_replace = results_module.os.replace
    calls = []

    def replace_then_crash(src, dst):
        calls.append(dst)
        if len(calls) == 2:  # while saving the second finished run
            raise KeyboardInterrupt
        real_replace(src, dst)

    monkeypatch.setattr(results_module.os, "replace", replace_then_crash)
    with pytest.raises(KeyboardInterrupt), save_runs(tmp_path):
        sbs.run("smoke", progress=False, **SMALL)
    path = partial_path("side_by_side", "smoke", tmp_path)
    assert len(json.loads(path.read_text())["runs"]) == 1
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_a_sweep_extended_for_one_pair_runs_only_its_new_jobs(
    tmp_path, monkeypatch
):
    with save_runs(tmp_path):
        first = sbs.run("smoke", progress=False, **SMALL)
    # as the command line leaves it: the finished runs, as a partial file
    # that names its experiment and profile
    partial_path("side_by_side", "smoke", tmp_path).write_text(
        json.dumps(
            {
                "experiment": "side_by_side",
                "settings": first["settings"],
                "runs": first["runs"],
                "provenance": first["provenance"],
            }
        )
    )
    monkeypatch.setitem(
        sbs.SETTINGS["smoke"], "extra_lrs", {"gmlp": (1.2e-2,)}
    )
    counted = Interrupt(None)
    monkeypatch.setattr(sbs, "run_one", counted)
    with save_runs(tmp_path):
        extended = sbs.run("smoke", progress=False, **SMALL)
    assert counted.jobs == [("gmlp", 1.2e-2, 0)]  # only the new job ran
    assert extended["provenance"]["resumed_runs"] == len(first["runs"])
    assert extended["settings"]["extra_lrs"] == {"gmlp": [1.2e-2]}
    pairs = extended["summary"]["pairs"]
    assert list(pairs["gmlp"]["by_lr"]) == ["0.003", "0.006", "0.012"]
    assert list(pairs["attention+gelu"]["by_lr"]) == ["0.003", "0.006"]
    assert (
        pairs["attention+gelu"] == first["summary"]["pairs"]["attention+gelu"]
    )
    assert pairs["gmlp"]["best_lr_at_edge"] == (
        pairs["gmlp"]["best_lr"] in (3e-3, 1.2e-2)
    )


def test_an_extra_rate_already_in_the_sweep_is_refused(monkeypatch):
    monkeypatch.setitem(sbs.SETTINGS["smoke"], "extra_lrs", {"gmlp": (3e-3,)})
    with pytest.raises(ValueError, match="extra_lrs for gmlp repeat a rate"):
        sbs.experiment_plan("smoke", 65, **SMALL)


def test_a_rerun_with_other_settings_refuses_to_mix_them(
    tmp_path, monkeypatch
):
    _interrupted(tmp_path, monkeypatch, after=1)
    with pytest.raises(
        SettingsMismatch,
        match=r"lrs: saved \[0\.003, 0\.006\], now \[0\.003, 0\.012\]",
    ):
        with save_runs(tmp_path):
            sbs.run(
                "smoke", progress=False, **{**SMALL, "lrs": [3e-3, 1.2e-2]}
            )
    monkeypatch.setitem(sbs.SETTINGS["smoke"]["train"], "steps", 10)
    with pytest.raises(
        SettingsMismatch, match=r"train\.steps: saved 12, now 10.*--fresh"
    ) as info:
        with save_runs(tmp_path):
            sbs.run("smoke", progress=False, **SMALL)
    assert (
        "side_by_side-smoke.partial.json holds 1 run made with other settings"
        in str(info.value)
    )
    # --fresh discards the saved runs and starts over with the new settings
    with save_runs(tmp_path, fresh=True):
        fresh = sbs.run("smoke", progress=False, **SMALL)
    assert (
        fresh["provenance"]["resumed_runs"] == 0
        and fresh["settings"]["train"]["steps"] == 10
    )


def test_settings_differences_name_every_changed_key():
    saved = {
        "train": {"steps": 12, "lr_policy": "x"},
        "lrs": [1, 2],
        "seeds": [0],
    }
    now = {
        "train": {"steps": 10, "lr_policy": "x"},
        "lrs": [1, 2],
        "pairs": {"gmlp": 3},
    }
    assert settings_differences(saved, now) == [
        "pairs.gmlp: saved '(absent)', now 3",
        "seeds: saved [0], now '(absent)'",
        "train.steps: saved 12, now 10",
    ]
    assert settings_differences(saved, saved) == []


def test_write_results_is_atomic_and_strict(tmp_path, monkeypatch):
    path = write_results(
        tmp_path / "a.json", {"runs": [1], "provenance": {"x": 1}}
    )
    assert list(json.loads(path.read_text())) == ["provenance", "runs"]
    with pytest.raises(ValueError, match=r"results\['runs'\]\[0\] = nan"):
        write_results(path, {"runs": [math.nan]})
    assert (
        json.loads(path.read_text())["runs"] == [1]
        and len(list(tmp_path.iterdir())) == 1
    )


@pytest.mark.parametrize(
    "text, message",
    [
        (
            '{"runs": [1, 2',
            r"is not a valid results file: Expecting ',' delimiter at line 1, column 15 of its JSON",
        ),
        (
            "<<<<<<< HEAD\n",
            r"is not a valid results file: Expecting value at line 1, column 1 of its JSON",
        ),
        (
            "[1, 2]",
            r"is not a results file: it holds a JSON list, not an object",
        ),
    ],
)
def test_a_corrupt_results_file_is_named(tmp_path, text, message):
    path = tmp_path / "demo-cpu.json"
    path.write_text(text)
    with pytest.raises(CorruptResults, match=message) as info:
        load_results("demo", tmp_path)
    assert str(info.value).startswith(str(path)) and not isinstance(
        info.value, json.JSONDecodeError
    )
    path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(
        CorruptResults,
        match=r"demo-cpu\.json is not a results file: it is not UTF-8 text",
    ):
        load_results("demo", tmp_path)


def test_a_corrupt_partial_file_is_named_and_never_overwritten(
    tmp_path, capsys
):
    path = partial_path("side_by_side", "smoke", tmp_path)
    path.write_text(
        '{"settings": {"lrs": [0.003'
    )  # say, cut short by an editor
    with pytest.raises(
        CorruptResults,
        match=r"side_by_side-smoke\.partial\.json is not a valid results file.*--fresh",
    ):
        with save_runs(tmp_path):
            sbs.run("smoke", progress=False, **SMALL)
    with pytest.raises(SystemExit) as info:
        _cli(["--profile", "smoke", "--out", str(tmp_path), "--no-progress"])
    assert (
        info.value.code == 2
        and f"error: {path} is not a valid results file"
        in capsys.readouterr().err
    )
    assert path.read_text() == '{"settings": {"lrs": [0.003'


# ---------------------------------------------------------------------------------------------
# The command line


def test_the_command_line_writes_the_results_and_removes_the_partial_file(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(sbs, "PAIRS", tuple(SMALL["pairs"]))
    monkeypatch.setitem(sbs.SETTINGS["smoke"], "lrs", tuple(SMALL["lrs"]))
    monkeypatch.setitem(sbs.SETTINGS["smoke"], "seeds", tuple(SMALL["seeds"]))
    _interrupted(tmp_path, monkeypatch, after=1)
    _cli(["--profile", "smoke", "--out", str(tmp_path), "--no-progress"])
    out = capsys.readouterr().out
    assert (
        "resuming: 1 of 4 runs already done" in out
        and "side_by_side-smoke.json" in out
    )
    final = json.loads((tmp_path / "side_by_side-smoke.json").read_text())
    assert len(final["runs"]) == 4 and final["provenance"]["resumed_runs"] == 1
    assert not partial_path("side_by_side", "smoke", tmp_path).exists()


def test_the_command_line_reports_an_interruption_and_a_mismatch(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(sbs, "PAIRS", tuple(SMALL["pairs"]))
    monkeypatch.setitem(sbs.SETTINGS["smoke"], "lrs", tuple(SMALL["lrs"]))
    monkeypatch.setitem(sbs.SETTINGS["smoke"], "seeds", tuple(SMALL["seeds"]))
    monkeypatch.setattr(sbs, "run_one", Interrupt(1))
    with pytest.raises(SystemExit) as info:
        _cli(["--profile", "smoke", "--out", str(tmp_path), "--no-progress"])
    assert info.value.code == 130
    assert "rerun the same command to resume" in capsys.readouterr().err
    monkeypatch.setitem(sbs.SETTINGS["smoke"], "lrs", (1e-3, 2e-3))
    with pytest.raises(SystemExit) as info:
        _cli(["--profile", "smoke", "--out", str(tmp_path), "--no-progress"])
    assert (
        info.value.code == 2
        and "lrs: saved [0.003, 0.006], now [0.001, 0.002]"
        in capsys.readouterr().err
    )
    with pytest.raises(SystemExit) as info:
        _cli(["--help"])
    assert info.value.code == 0 and "--fresh" in capsys.readouterr().out


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(pairs=["attention+nope"]), "channel mixer must be one of"),
        (dict(pairs=[]), "pairs must not be empty"),
        (dict(pairs=["gmlp", "gmlp"]), "pairs must not repeat"),
        (dict(lrs=[0.0]), "lrs must be positive"),
        (dict(lrs=[math.inf]), "lrs must be positive"),
        (dict(seeds=[-1]), "seeds must be non-negative ints"),
        (dict(seeds=[1.5]), "seeds must be non-negative ints"),
    ],
)
def test_bad_arguments_are_refused_by_name(overrides, message):
    with pytest.raises(ValueError, match=message):
        sbs.run("smoke", progress=False, **overrides)


def test_an_unknown_profile_is_refused():
    with pytest.raises(ValueError, match="profile"):
        sbs.run("huge", progress=False)
    assert torch.get_num_threads() >= 1
