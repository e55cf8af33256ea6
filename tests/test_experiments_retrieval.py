"""The retrieval probe (mixers.experiments.retrieval): the task generator, the training that
keeps its best weights, the smoke run end to end, resuming, the results' shape and provenance,
and the command line."""

import json
import math

import pytest
import torch
import torch.nn.functional as F
from helpers import run_smoke_restoring_threads

from mixers.experiments import main, partial_path, save_runs
from mixers.experiments import retrieval as experiment
from mixers.experiments.plan import planned_runs, train_config
from mixers.model import LanguageModel, ModelConfig
from mixers.results import to_json, without_timings
from mixers.train import TrainingDiverged

TASK = experiment.Task(symbols=16, keys=4)
REAL_RUN_ONE = experiment.run_one


# ---------------------------------------------------------------------------------------------
# The task


@pytest.mark.parametrize(
    "length, distances", [(16, (2, 15)), (64, (16, 63)), (5, (3, 3))]
)
def test_the_key_its_value_and_the_query_are_where_they_are_said_to_be(
    length, distances
):
    generator = torch.Generator().manual_seed(0)
    tokens, value, distance = experiment.sample_batch(
        TASK, 500, length, distances, generator
    )
    assert tokens.shape == (500, length) and tokens.dtype == torch.int64
    assert value.shape == distance.shape == (500,)
    low, high = distances
    assert ((low <= distance) & (distance <= high)).all()
    assert set(distance.tolist()) == set(
        range(low, high + 1)
    )  # every distance drawn
    is_key = tokens >= TASK.symbols
    assert (
        is_key.sum(1) == 2
    ).all()  # the planted key and the query, nowhere else
    assert (tokens < TASK.vocab_size).all()
    for row in range(500):
        planted = length - 1 - distance[row].item()
        assert is_key[row, planted] and is_key[row, -1]
        assert (
            tokens[row, planted] == tokens[row, -1]
        )  # the query is the planted key
        assert (
            value[row] == tokens[row, planted + 1]
        )  # the answer is the token after it
        assert value[row] < TASK.symbols  # a symbol, like the filler
    # every key and every symbol is used as key and value
    assert set(tokens[:, -1].tolist()) == set(range(16, 20))
    assert set(value.tolist()) == set(range(16))


def test_a_seed_gives_the_same_batch():
    def batch(seed):
        generator = torch.Generator().manual_seed(seed)
        return experiment.sample_batch(TASK, 8, 12, (2, 11), generator)

    first, again, other = batch(3), batch(3), batch(4)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[0], other[0])


@pytest.mark.parametrize(
    "length, distances, error, message",
    [
        (
            16,
            (1, 5),
            ValueError,
            r"distances\[0\] must be an int in \[2, 15\], got 1",
        ),
        (
            16,
            (2, 16),
            ValueError,
            r"distances\[1\] must be an int in \[2, 15\], got 16",
        ),
        (
            16,
            (8, 4),
            ValueError,
            r"distances\[1\] must be an int in \[8, 15\], got 4",
        ),
        (16, 5, TypeError, r"distances must be a pair \(low, high\), got 5"),
        (2, (2, 2), ValueError, "length must be at least 3"),
        (16, (2.0, 5), TypeError, r"distances\[0\] must be an int"),
    ],
)
def test_bad_distances_are_refused_by_name(length, distances, error, message):
    with pytest.raises(error, match=message):
        experiment.sample_batch(TASK, 4, length, distances, torch.Generator())


def test_near_and_far_split_the_distances_at_the_training_length():
    assert experiment.placements(16, 16) == {"near": (2, 15)}
    assert experiment.placements(16, 64) == {"near": (2, 15), "far": (16, 63)}


def test_the_answer_loss_is_the_cross_entropy_of_the_value_at_the_query():
    torch.manual_seed(0)
    model = LanguageModel(
        ModelConfig(
            vocab_size=TASK.vocab_size,
            block_size=8,
            d_model=16,
            n_layers=1,
            n_heads=2,
        )
    ).eval()
    generator = torch.Generator().manual_seed(1)
    tokens, value, _ = experiment.sample_batch(TASK, 6, 8, (2, 7), generator)
    loss, correct = experiment.answer_loss(model, tokens, value)
    logits, _ = model(tokens)
    for row in range(6):
        expected = F.cross_entropy(logits[row, -1], value[row])
        assert loss[row].item() == pytest.approx(expected.item(), rel=1e-6)
        assert correct[row] == (logits[row, -1].argmax() == value[row])
    # scored in batches, the same numbers
    batched = experiment.score(model, tokens, value, batch_size=4)
    torch.testing.assert_close(batched[0], loss.detach())
    assert torch.equal(batched[1], correct)


def test_training_keeps_and_returns_its_best_validation_weights():
    settings = experiment.shared_settings("smoke")
    config = train_config({**settings["train"], "seed": 0})
    torch.manual_seed(0)
    model = LanguageModel(experiment._model_config(settings, "alibi"))
    result = experiment.train_on_task(model, TASK, config)
    assert result.steps[-1] == config.steps and len(result.val_loss) == len(
        result.steps
    )
    assert result.best_val_loss == min(result.val_loss)
    assert (
        result.val_loss[result.steps.index(result.best_step)]
        == result.best_val_loss
    )
    # the model that comes back scores its best validation loss again
    validation = experiment.sample_batch(
        TASK,
        config.eval_batches * config.eval_batch_size,
        config.seq_len,
        (2, config.seq_len - 1),
        torch.Generator().manual_seed(experiment.VALIDATION_SEED),
    )
    again = experiment.score(model, *validation[:2])[0].mean().item()
    assert again == pytest.approx(result.best_val_loss, rel=1e-6)


# ---------------------------------------------------------------------------------------------
# The smoke run


@pytest.fixture(scope="module")
def results():
    return run_smoke_restoring_threads(experiment.run)


def test_every_scheme_trains_from_every_seed_like_for_like(results):
    settings = results["settings"]
    assert results["experiment"] == "retrieval"
    assert [(r["scheme"], r["seed"]) for r in results["runs"]] == [
        (scheme, seed)
        for seed in settings["seeds"]
        for scheme in experiment.SCHEMES
    ]
    train = json.loads(to_json(settings["train"]))  # as a record holds it
    for run in results["runs"]:
        assert not run["diverged"]
        config = run["result"]["model_config"]
        assert (
            config["token_mixer"],
            config["positions"],
        ) == experiment.SCHEMES[run["scheme"]]
        assert (
            config["block_size"]
            == settings["train_length"]
            == settings["train"]["seq_len"]
        )
        assert config["vocab_size"] == settings["task"]["vocab_size"]
        # the same training but its seed
        assert {
            k: v
            for k, v in run["result"]["train_config"].items()
            if k != "seed"
        } == train
        assert run["result"]["train_config"]["seed"] == run["seed"]
        assert run["best_val_loss"] == min(run["result"]["val_loss"])


def test_every_test_set_is_scored_near_and_far(results):
    settings = results["settings"]
    L, examples = settings["train_length"], settings["test_examples"]
    expected = [
        (f * L, placement)
        for f in settings["factors"]
        for placement in (("near",) if f == 1 else ("near", "far"))
    ]
    for run in results["runs"]:
        assert [
            (row["length"], row["placement"]) for row in run["eval"]
        ] == expected
        for row in run["eval"]:
            low, high = row["distances"]
            assert (low, high) == (
                (2, L - 1)
                if row["placement"] == "near"
                else (L, row["length"] - 1)
            )
            assert row["examples"] == examples and 0 <= row["accuracy"] <= 1
            assert (
                0 < row["loss"] < 3 * math.log(settings["task"]["vocab_size"])
            )
            bins = row["by_distance"]
            assert sum(b["examples"] for b in bins) == examples
            assert bins[0]["from"] <= low and bins[-1]["to"] >= high
            hits = sum(b["accuracy"] * b["examples"] for b in bins)
            assert hits / examples == pytest.approx(row["accuracy"])


def test_the_summary_and_the_paired_tests_are_over_the_seeds(results):
    seeds = results["settings"]["seeds"]
    runs = {(r["scheme"], r["seed"]): r for r in results["runs"]}
    for scheme, entries in results["summary"].items():
        for entry in entries:
            by_seed = [
                next(
                    row["accuracy"]
                    for row in runs[scheme, seed]["eval"]
                    if (row["length"], row["placement"])
                    == (entry["length"], entry["placement"])
                )
                for seed in seeds
            ]
            assert entry["accuracy_by_seed"] == by_seed
            assert entry["accuracy_mean"] == pytest.approx(
                sum(by_seed) / len(seeds)
            )
    tests = results["paired_tests"]
    sets = sum(len(run["eval"]) for run in results["runs"]) // len(
        results["runs"]
    )
    far_sets = sum(
        row["placement"] == "far" for row in results["runs"][0]["eval"]
    )
    assert len(tests) == sets * len(experiment.PAIRS) * 2 + far_sets * len(
        experiment.SCHEMES
    )
    for test in tests:
        assert test["n"] == len(seeds) and test["seeds"] == seeds
        assert 0 < test["p_sign_flip"] <= 1
    first = tests[0]  # alibi - rotary, accuracy, at L
    assert (
        first["comparison"] == "alibi - rotary"
        and first["metric"] == "accuracy"
    )
    alibi = [runs["alibi", s]["eval"][0]["accuracy"] for s in seeds]
    rotary = [runs["rotary", s]["eval"][0]["accuracy"] for s in seeds]
    assert first["differences"] == pytest.approx(
        [a - b for a, b in zip(alibi, rotary)]
    )


def test_the_results_have_provenance_and_serialise(results):
    prov = results["provenance"]
    assert prov["profile"] == "smoke" and prov["wall_time_s"] > 0
    for key in (
        "device",
        "torch",
        "git_commit",
        "date",
        "seeds",
        "workers",
        "resumed_runs",
    ):
        assert key in prov
    assert prov["seeds"] == results["settings"]["seeds"]
    assert json.loads(to_json(results))["runs"][0]["eval"][0]["examples"] > 0
    headline = experiment.headline(results)
    assert set(headline) == {"seeds", *experiment.SCHEMES}


def test_the_plan_counts_every_run_and_its_tests():
    runs = planned_runs("retrieval", "smoke")
    settings = experiment.shared_settings("smoke")
    assert len(runs) == len(settings["seeds"]) * len(experiment.SCHEMES)
    L, n = settings["train_length"], settings["test_examples"]
    assert runs[0].forward_tokens == n * (L + 2 * 2 * L + 2 * 4 * L)
    assert {run.model.token_mixer for run in runs} == {
        "attention",
        "rotary",
        "alibi",
    }


# ---------------------------------------------------------------------------------------------
# Interruptions, divergence and the command line: two runs of one scheme (every scheme's
# record is checked above)


@pytest.fixture
def one_scheme(monkeypatch):
    monkeypatch.setattr(
        experiment, "SCHEMES", {"alibi": experiment.SCHEMES["alibi"]}
    )


class Interrupt:
    """``run_one`` that raises KeyboardInterrupt when called for the ``after + 1``-th time."""

    def __init__(self, after):
        self.after, self.jobs = after, []

    def __call__(
        self, dataset, profile, settings, scheme, seed, progress=False
    ):
        if len(self.jobs) == self.after:
            raise KeyboardInterrupt
        self.jobs.append((scheme, seed))
        return REAL_RUN_ONE(dataset, profile, settings, scheme, seed, progress)


def test_an_interrupted_run_resumes_with_the_same_results(
    results, one_scheme, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(experiment, "run_one", Interrupt(after=1))
    with pytest.raises(KeyboardInterrupt), save_runs(tmp_path):
        experiment.run("smoke", progress=False)
    saved = json.loads(
        partial_path("retrieval", "smoke", tmp_path).read_text()
    )
    assert [(r["scheme"], r["seed"]) for r in saved["runs"]] == [("alibi", 0)]
    again = Interrupt(after=None)
    monkeypatch.setattr(experiment, "run_one", again)
    with save_runs(tmp_path):
        resumed = experiment.run("smoke", progress=False)
    assert "resuming: 1 of 2 runs already done" in capsys.readouterr().out
    assert again.jobs == [("alibi", 1)]  # only the missing run ran
    expected = [r for r in results["runs"] if r["scheme"] == "alibi"]
    assert without_timings(resumed["runs"]) == without_timings(expected)
    assert resumed["provenance"]["resumed_runs"] == 1


def test_a_diverging_run_is_recorded_and_the_other_kept(
    results, one_scheme, monkeypatch
):
    real = experiment.train_on_task

    def diverge_seed_1(model, task, config, *args, **kwargs):
        if config.seed == 1:
            raise TrainingDiverged("the training loss is nan at step 3 of 30")
        return real(model, task, config, *args, **kwargs)

    monkeypatch.setattr(experiment, "train_on_task", diverge_seed_1)
    out = experiment.run("smoke", progress=False)
    kept, diverged = out["runs"]
    assert diverged == {
        "scheme": "alibi",
        "seed": 1,
        "diverged": True,
        "error": "the training loss is nan at step 3 of 30",
    }
    alibi_0 = next(
        r for r in results["runs"] if (r["scheme"], r["seed"]) == ("alibi", 0)
    )
    assert without_timings(kept) == without_timings(alibi_0)
    assert out["paired_tests"] == []  # one seed left: nothing to pair
    assert [e["seeds"] for e in out["summary"]["alibi"]][0] == [0]


def test_the_command_line_writes_the_results_and_resumes(
    one_scheme, tmp_path, monkeypatch, capsys
):
    def cli(*argv):
        main(
            experiment.NAME,
            experiment.run,
            experiment.__doc__.splitlines()[0],
            experiment.DURATIONS,
            [
                "--profile",
                "smoke",
                "--out",
                str(tmp_path),
                "--no-progress",
                *argv,
            ],
        )

    monkeypatch.setattr(experiment, "run_one", Interrupt(after=1))
    with pytest.raises(SystemExit) as stop:
        cli()
    assert (
        stop.value.code == 130
        and "rerun the same command" in capsys.readouterr().err
    )
    monkeypatch.setattr(experiment, "run_one", REAL_RUN_ONE)
    cli()
    assert "resuming: 1 of 2 runs already done" in capsys.readouterr().out
    written = json.loads((tmp_path / "retrieval-smoke.json").read_text())
    assert (
        written["experiment"] == "retrieval"
        and written["provenance"]["resumed_runs"] == 1
    )
    assert not partial_path("retrieval", "smoke", tmp_path).exists()
    with pytest.raises(SystemExit) as stop:
        cli("--help")
    assert stop.value.code == 0 and "--fresh" in capsys.readouterr().out


def test_an_unknown_profile_or_scheme_is_refused():
    with pytest.raises(ValueError, match="profile"):
        experiment.run("huge", progress=False)
    settings = experiment.shared_settings("smoke")
    with pytest.raises(ValueError, match="scheme must be one of"):
        experiment.run_one(None, "smoke", settings, "learned", 0)
