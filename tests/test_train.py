"""Tests of mixers.train (schedule, training, evaluation, sampling, profiles), of mixers.results
(provenance, results files) and of the command lines of mixers.experiments and mixers.bench.

Training runs use a profile far smaller than ``smoke`` (d_model 32, 2 layers, seq 16) so the
whole file runs in seconds on a shared CPU.
"""

import json
import math
import os
import re
import subprocess
import sys
from dataclasses import asdict, replace
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from helpers import json_from_a_fresh_process

import mixers.experiments as experiments
import mixers.results as results_module
import mixers.train as train_module
from mixers.data import CharDataset, load_corpus, random_batch
from mixers.experiments import baseline
from mixers.model import LanguageModel, ModelConfig
from mixers.results import (
    load_results,
    provenance,
    results_dir,
    runs_dir,
    save_results,
    writable_dir,
)
from mixers.train import (
    PROFILES,
    Profile,
    StepInfo,
    TrainConfig,
    TrainingDiverged,
    TrainResult,
    build_model,
    cpu_has_bf16,
    default_device,
    default_profile_name,
    evaluate,
    evaluate_sequential,
    get_profile,
    lr_at,
    make_optimizer,
    run_profile,
    sample,
    train,
    uses_bf16,
)

ROOT = Path(__file__).resolve().parents[1]
BOOK_RESULTS = ROOT / "book" / "results"

LN_VOCAB = math.log(65)
TINY = Profile(
    "tiny",
    dict(block_size=16, d_model=32, n_layers=2, n_heads=4, dropout=0.0),
    TrainConfig(
        steps=60,
        batch_size=16,
        seq_len=16,
        lr=3e-3,
        warmup_steps=10,
        eval_interval=20,
        eval_batches=4,
    ),
)


@pytest.fixture(scope="module")
def trained(shakespeare):
    """One tiny run of 60 steps, shared by the tests that only read its results."""
    torch.manual_seed(TINY.train.seed)
    untrained = build_model(65, TINY)
    initial_val = evaluate(
        untrained,
        shakespeare.val,
        16,
        TINY.train.eval_batches,
        16,
        seed=TINY.train.seed + 1,
    )
    model, result = run_profile(
        shakespeare, TINY, device="cpu", progress=False
    )
    return model, result, initial_val


# ---------------------------------------------------------------------------------------------
# The learning-rate schedule.


def test_lr_warmup_is_linear_and_peaks_at_lr():
    config = TrainConfig(steps=100, warmup_steps=10, lr=1e-3, min_lr_ratio=0.1)
    warm = [lr_at(s, config) for s in range(10)]
    assert warm == pytest.approx(
        [1e-3 * (s + 1) / 10 for s in range(10)], rel=1e-12
    )
    steps = [b - a for a, b in zip(warm, warm[1:])]
    assert steps == pytest.approx([1e-4] * 9, rel=1e-9)
    assert lr_at(9, config) == pytest.approx(1e-3, rel=1e-12)
    assert lr_at(10, config) == pytest.approx(1e-3, rel=1e-12)
    assert max(lr_at(s, config) for s in range(101)) == pytest.approx(
        1e-3, rel=1e-12
    )


def test_lr_cosine_decays_monotonically_to_min():
    config = TrainConfig(steps=100, warmup_steps=10, lr=1e-3, min_lr_ratio=0.1)
    decay = [lr_at(s, config) for s in range(10, 100)]
    assert all(b < a for a, b in zip(decay, decay[1:])), (
        "not strictly decreasing after warm-up"
    )
    assert lr_at(99, config) == pytest.approx(
        1e-4, rel=1e-9
    )  # the last step taken reaches the minimum
    assert lr_at(100, config) == pytest.approx(1e-4, rel=1e-9)
    assert lr_at(10 + 89 / 2, config) == pytest.approx(
        1e-3 * (0.1 + 0.9 * 0.5), rel=1e-9
    )  # half way
    assert lr_at(500, config) == pytest.approx(
        1e-4, rel=1e-9
    )  # clamped past the end
    assert min(lr_at(s, config) for s in range(200)) >= 1e-4 * (1 - 1e-9)


def test_lr_without_warmup_and_to_zero():
    config = TrainConfig(steps=10, warmup_steps=0, lr=2e-3, min_lr_ratio=0.0)
    assert lr_at(0, config) == pytest.approx(2e-3, rel=1e-12)
    assert lr_at(10, config) == pytest.approx(0.0, abs=1e-15)


# ---------------------------------------------------------------------------------------------
# TrainConfig, profiles, provenance.


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(steps=0), "steps must be a positive int"),
        (dict(batch_size=0), "batch_size"),
        (dict(seq_len=-4), "seq_len"),
        (dict(eval_interval=0), "eval_interval"),
        (dict(eval_batches=0), "eval_batches"),
        (dict(lr=0.0), "lr must be a positive finite float, got 0.0"),
        (dict(lr=-1e-3), "lr"),
        (dict(warmup_steps=-1), "warmup_steps"),
        (
            dict(steps=10, warmup_steps=11),
            r"warmup_steps must lie in \[0, steps=10\]",
        ),
    ],
)
def test_train_config_rejects_bad_values(overrides, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**overrides)


@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(min_lr_ratio=-0.5), "min_lr_ratio"),
        (dict(min_lr_ratio=2.0), "min_lr_ratio"),
        (dict(eval_batch_size=0), "eval_batch_size"),
        (dict(weight_decay=-0.1), "weight_decay"),
        (dict(grad_clip=-1.0), "grad_clip"),
        (dict(betas=(0.9, 1.0)), "betas"),
    ],
)
def test_train_config_rejects_unvalidated_fields(overrides, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**overrides)


def test_profiles_are_consistent():
    assert set(PROFILES) == {"smoke", "cpu", "gpu"}
    sizes = []
    for name, profile in PROFILES.items():
        assert profile.name == name
        config = ModelConfig(
            vocab_size=65, **profile.model
        )  # validates d_model % n_heads etc.
        # learned positions: the training length must fit the position table
        assert profile.train.seq_len <= config.block_size
        sizes.append(
            (name, config.d_model * config.n_layers, profile.train.steps)
        )
    order = {n: (w, s) for n, w, s in sizes}
    assert order["smoke"] < order["cpu"] < order["gpu"]


def test_default_profile_honours_environment(monkeypatch):
    monkeypatch.setenv("MIXERS_PROFILE", "cpu")
    assert default_profile_name() == "cpu"
    assert get_profile() is PROFILES["cpu"]
    assert get_profile("smoke") is PROFILES["smoke"]  # an explicit name wins
    monkeypatch.setenv("MIXERS_PROFILE", "gpu")
    assert get_profile().name == "gpu"


@pytest.mark.parametrize("cuda, expected", [(False, "smoke"), (True, "gpu")])
def test_default_profile_follows_hardware(monkeypatch, cuda, expected):
    monkeypatch.delenv("MIXERS_PROFILE", raising=False)
    monkeypatch.delenv("MIXERS_DEVICE", raising=False)  # conftest's pin
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    assert default_device() == torch.device("cuda" if cuda else "cpu")
    assert default_profile_name() == expected
    assert get_profile().name == expected
    monkeypatch.setenv("MIXERS_PROFILE", "")  # empty counts as unset
    monkeypatch.setenv("MIXERS_DEVICE", "")
    assert default_profile_name() == expected


@pytest.mark.parametrize("cuda", [False, True])
def test_mixers_device_overrides_the_hardware(monkeypatch, cuda):
    """MIXERS_DEVICE=cpu: the CPU and the smoke profile even with CUDA (what the tests set);
    MIXERS_DEVICE=cuda: the gpu profile. Asking is all it does: nothing here touches CUDA."""
    monkeypatch.delenv("MIXERS_PROFILE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setenv("MIXERS_DEVICE", "cpu")
    assert default_device() == torch.device("cpu")
    assert default_profile_name() == "smoke"
    monkeypatch.setenv("MIXERS_DEVICE", "cuda:1")
    assert default_device() == torch.device("cuda", 1)
    assert default_profile_name() == "gpu"
    monkeypatch.setenv("MIXERS_DEVICE", "gpu")
    with pytest.raises(
        ValueError, match="MIXERS_DEVICE must name a torch device, got 'gpu'"
    ):
        default_device()


def test_unknown_profile_names_are_rejected(monkeypatch):
    monkeypatch.setenv("MIXERS_PROFILE", "huge")
    with pytest.raises(
        ValueError,
        match=r"MIXERS_PROFILE must be one of \['cpu', 'gpu', 'smoke'\], got 'huge'",
    ):
        default_profile_name()
    with pytest.raises(ValueError, match="MIXERS_PROFILE"):
        get_profile()
    monkeypatch.delenv("MIXERS_PROFILE")
    with pytest.raises(
        ValueError,
        match=r"profile must be one of \['cpu', 'gpu', 'smoke'\], got 'laptop'",
    ):
        get_profile("laptop")


def test_provenance_records_where_and_how():
    record = provenance("smoke", torch.device("cpu"), [3, 4])
    for key in (
        "profile",
        "device",
        "device_type",
        "torch",
        "python",
        "git_commit",
        "date",
        "seeds",
    ):
        assert key in record
    assert record["profile"] == "smoke"
    assert record["device_type"] == "cpu"
    assert isinstance(record["device"], str) and "threads" in record["device"]
    assert record["torch"] == torch.__version__
    assert record["seeds"] == [3, 4]
    date = datetime.fromisoformat(record["date"])
    assert date.tzinfo is not None
    assert record["git_commit"] is None or re.fullmatch(
        r"[0-9a-f]{40}(-dirty)?", record["git_commit"]
    )
    assert provenance("cpu", torch.device("cpu"))["seeds"] == []
    json.dumps(record)  # goes into a results file


def test_git_commit_is_dirty_only_when_the_package_changed(
    tmp_path, monkeypatch
):
    repo = tmp_path / "repo"
    package = repo / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "results.py").write_text("x = 1\n")
    (repo / "results.json").write_text("{}\n")

    def git(*args):
        subprocess.run(
            ["git", *args], cwd=repo, check=True, capture_output=True
        )

    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    monkeypatch.setattr(
        results_module, "__file__", str(package / "results.py")
    )
    clean = results_module.git_commit()
    assert re.fullmatch(r"[0-9a-f]{40}", clean)
    (repo / "results.json").write_text(
        '{"new": 1}\n'
    )  # a result rewritten: the code is the same
    assert results_module.git_commit() == clean
    (package / "results.py").write_text("x = 2\n")
    assert results_module.git_commit() == clean + "-dirty"


@pytest.mark.parametrize(
    "gpu_has_bf16, expected",
    [(True, torch.bfloat16), (False, torch.float16)],
    ids=["ampere-or-later", "t4"],
)
def test_the_precision_follows_the_devices_capabilities(
    monkeypatch, gpu_has_bf16, expected
):
    # The GPU's capabilities stubbed: no GPU needed. A T4 has no bfloat16: float16 instead.
    monkeypatch.setattr(
        torch.cuda, "is_bf16_supported", lambda *a, **k: gpu_has_bf16
    )
    cuda = torch.device("cuda")
    assert train_module.autocast_dtype(cuda, amp=True) == expected
    assert train_module.autocast_dtype(cuda, amp=False) is None
    assert uses_bf16(cuda, amp=True) == gpu_has_bf16
    assert (
        train_module.precision_name(expected)
        == {True: "bf16 autocast", False: "float16 autocast, gradient scaler"}[
            gpu_has_bf16
        ]
    )
    for native in (
        True,
        False,
    ):  # a CPU: bf16 only when asked and native, else float32
        monkeypatch.setattr(
            train_module, "cpu_has_bf16", lambda native=native: native
        )
        assert train_module.autocast_dtype(
            torch.device("cpu"), cpu_amp=True
        ) == (torch.bfloat16 if native else None)
        assert (
            train_module.autocast_dtype(torch.device("cpu"), cpu_amp=False)
            is None
        )
    assert train_module.precision_name(None) == "float32"


def test_float16_training_scales_the_loss_and_unscales_before_clipping(
    shakespeare, monkeypatch
):
    # The float16 path (a T4) on a CPU: autocast in float16 and a real GradScaler, with a stubbed
    # capability. The scaler multiplies the loss before backward and divides the gradients
    # before they are clipped, so the clipped norm is the true one.
    monkeypatch.setattr(
        train_module,
        "autocast_dtype",
        lambda device, amp=True, cpu_amp=False: torch.float16,
    )
    scaled = []
    real_scale = torch.amp.GradScaler.scale
    monkeypatch.setattr(
        torch.amp.GradScaler,
        "scale",
        lambda self, loss: (
            scaled.append(self.is_enabled()) or real_scale(self, loss)
        ),
    )
    monkeypatch.setattr(
        torch.amp.GradScaler,
        "__init__",
        _cpu_scaler_init(torch.amp.GradScaler.__init__),
    )
    config = replace(TINY.train, steps=3, warmup_steps=1, eval_interval=3)
    torch.manual_seed(0)
    result = train(
        build_model(65, TINY), shakespeare, config, "cpu", progress=False
    )
    assert scaled == [True, True, True]
    assert (
        result.provenance["train_precision"]
        == "float16 autocast, gradient scaler"
    )
    assert math.isfinite(result.final_val_loss)


def _cpu_scaler_init(real_init):
    """GradScaler("cpu", enabled=...) as train builds it, kept enabled on a CPU for the test."""

    def init(self, device="cuda", *args, enabled=True, **kwargs):
        real_init(self, device, *args, enabled=enabled, **kwargs)

    return init


def test_bf16_is_used_on_a_cpu_only_when_asked_and_native():
    cpu = torch.device("cpu")
    assert not uses_bf16(cpu, amp=True, cpu_amp=False)
    assert uses_bf16(cpu, amp=True, cpu_amp=True) == cpu_has_bf16()
    assert (
        TrainConfig().cpu_amp is False
    )  # opt-in: float32 on a CPU unless a profile asks


def test_run_records_the_precision_it_trained_in(shakespeare, monkeypatch):
    # Force "native bf16" so the bf16 path runs on any CPU (slowly where it is emulated).
    monkeypatch.setattr(
        torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True
    )
    config = replace(
        TINY.train, steps=20, warmup_steps=5, eval_interval=10, cpu_amp=True
    )
    torch.manual_seed(0)
    result = train(
        build_model(65, TINY),
        shakespeare,
        config,
        device="cpu",
        progress=False,
    )
    assert result.provenance["train_precision"] == "bf16 autocast"
    assert result.val_loss[-1] < LN_VOCAB
    torch.manual_seed(0)
    plain = train(
        build_model(65, TINY),
        shakespeare,
        replace(config, cpu_amp=False),
        device="cpu",
        progress=False,
    )
    assert plain.provenance["train_precision"] == "float32"
    assert (
        plain.train_loss != result.train_loss
    )  # the switch really changes the arithmetic


def test_evaluation_follows_the_precision_flags(
    trained, shakespeare, monkeypatch
):
    monkeypatch.setattr(
        torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True
    )
    model, _, _ = trained
    args = (model, shakespeare.val, 16, 4, 16)
    float32 = evaluate(*args, seed=3)
    assert evaluate(*args, seed=3, cpu_amp=False) == float32
    bf16 = evaluate(*args, seed=3, cpu_amp=True)
    assert bf16 != float32 and bf16 == pytest.approx(float32, abs=0.02)
    full = evaluate_sequential(model, shakespeare.val, 16, max_windows=32)
    assert evaluate_sequential(
        model, shakespeare.val, 16, max_windows=32, cpu_amp=True
    ) == pytest.approx(full, abs=0.02)


# ---------------------------------------------------------------------------------------------
# The optimizer.


def test_weight_decay_only_on_matrices():
    torch.manual_seed(0)
    model = build_model(65, TINY)
    config = replace(TINY.train, weight_decay=0.25)
    optimizer = make_optimizer(model, config)
    decay, no_decay = optimizer.param_groups
    assert decay["weight_decay"] == 0.25 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decay["params"]) and all(
        p.dim() < 2 for p in no_decay["params"]
    )
    ids = lambda ps: {id(p) for p in ps}  # noqa: E731
    assert ids(decay["params"]) | ids(no_decay["params"]) == ids(
        model.parameters()
    )
    assert not ids(decay["params"]) & ids(no_decay["params"])
    named = dict(model.named_parameters())
    for name in (
        "token_embedding.weight",
        "head.weight",
        "positions.table.weight",
        "blocks.0.token_mixer.in_proj.weight",
    ):
        assert id(named[name]) in ids(decay["params"]), name
    for name in (
        "final_norm.weight",
        "final_norm.bias",
        "blocks.1.norm_1.weight",
        "blocks.0.token_mixer.in_proj.bias",
    ):
        assert id(named[name]) in ids(no_decay["params"]), name
    assert (
        optimizer.defaults["lr"] == config.lr
        and optimizer.defaults["betas"] == config.betas
    )


# ---------------------------------------------------------------------------------------------
# Training.


def test_training_lowers_validation_loss(trained):
    _, result, initial_val = trained
    assert abs(initial_val - LN_VOCAB) < 0.3
    assert result.val_loss[-1] < initial_val - 0.5
    assert result.best_val_loss < LN_VOCAB - 0.5
    assert result.val_loss[-1] < result.val_loss[0] < initial_val


def test_train_result_fields(trained):
    model, result, _ = trained
    assert isinstance(result, TrainResult)
    assert result.steps == [20, 40, 60]
    assert len(result.train_loss) == len(result.val_loss) == 3
    assert result.best_val_loss == min(result.val_loss)
    assert result.best_val_bpc == pytest.approx(
        min(result.val_loss) / math.log(2), rel=1e-12
    )
    assert result.final_val_loss == result.val_loss[-1]
    assert result.tokens_per_s > 0 and result.wall_time_s > 0
    assert (
        result.parameters
        == model.num_parameters()
        == sum(p.numel() for p in model.parameters())
    )
    assert result.train_config == asdict(TINY.train)
    assert (
        result.model_config
        == ModelConfig(vocab_size=65, **TINY.model).to_dict()
    )
    assert result.provenance["profile"] == "tiny" and result.provenance[
        "seeds"
    ] == [TINY.train.seed]
    assert not model.training  # train() leaves the model in eval mode
    assert (
        json.loads(json.dumps(result.to_dict()))["val_loss"] == result.val_loss
    )


def test_train_bookkeeping_with_scripted_validation_losses(
    shakespeare, monkeypatch
):
    """best = min over the curve (not the last value), final = last, bpc = best / ln 2, and the
    validation is scored on the val split with the run's eval settings and seed + 1."""
    scripted = iter([3.0, 2.0, 2.5, 2.75])
    calls = []

    def fake_evaluate(
        model,
        data,
        seq_len,
        batches,
        batch_size,
        seed=0,
        device=None,
        amp=True,
        cpu_amp=False,
    ):
        calls.append((data, seq_len, batches, batch_size, seed))
        return next(scripted)

    monkeypatch.setattr(train_module, "evaluate", fake_evaluate)
    config = replace(
        TINY.train,
        steps=7,
        warmup_steps=2,
        eval_interval=2,
        eval_batches=3,
        eval_batch_size=5,
        seed=21,
    )
    torch.manual_seed(0)
    result = train_module.train(
        build_model(65, TINY), shakespeare, config, "cpu", progress=False
    )
    assert result.steps == [2, 4, 6, 7]
    assert result.val_loss == [3.0, 2.0, 2.5, 2.75]
    assert result.best_val_loss == 2.0 and result.final_val_loss == 2.75
    assert result.best_val_bpc == pytest.approx(2.0 / math.log(2), rel=1e-12)
    assert len(calls) == 4
    for data, seq_len, batches, batch_size, seed in calls:
        assert data is shakespeare.val
        assert (seq_len, batches, batch_size, seed) == (16, 3, 5, 22)
    assert result.tokens_per_s > 0


def test_same_seed_is_bit_identical_and_other_seed_is_not(shakespeare):
    short = replace(
        TINY,
        train=replace(TINY.train, steps=25, eval_interval=10, eval_batches=2),
    )
    runs = [
        run_profile(
            shakespeare,
            short,
            model_overrides=dict(dropout=0.1),
            train_overrides=dict(seed=seed),
            device="cpu",
            progress=False,
        )
        for seed in (11, 11, 12)
    ]
    (m1, r1), (m2, r2), (_, r3) = runs
    assert r1.steps == [10, 20, 25]  # the last step is always evaluated
    assert r1.train_loss == r2.train_loss and r1.val_loss == r2.val_loss
    for (name, a), b in zip(m1.state_dict().items(), m2.state_dict().values()):
        assert torch.equal(a, b), name
    assert r1.train_loss != r3.train_loss and r1.val_loss != r3.val_loss


def test_a_diverging_run_stops_naming_the_step_loss_and_lr(shakespeare):
    config = replace(
        TINY.train, lr=1e10, warmup_steps=0, steps=20, eval_interval=10
    )
    torch.manual_seed(0)
    seen = []
    with pytest.raises(
        TrainingDiverged,
        match=r"training loss is nan at step \d+ of 20 \(learning rate .*\)",
    ) as info:
        train(
            build_model(65, TINY),
            shakespeare,
            config,
            "cpu",
            progress=False,
            callback=seen.append,
        )
    assert "smaller lr" in str(info.value) and isinstance(
        info.value, RuntimeError
    )
    step = int(re.search(r"at step (\d+)", str(info.value)).group(1))
    assert f"{lr_at(step - 1, config):.3g}" in str(
        info.value
    )  # the lr that step used
    assert [s.step for s in seen] == list(
        range(step)
    )  # no callback for the step that diverged


def test_a_non_finite_validation_loss_stops_the_run(shakespeare, monkeypatch):
    losses = iter([3.0, math.inf])
    monkeypatch.setattr(
        train_module, "evaluate", lambda *args, **kwargs: next(losses)
    )
    config = replace(TINY.train, steps=4, warmup_steps=1, eval_interval=2)
    torch.manual_seed(0)
    with pytest.raises(
        TrainingDiverged, match=r"validation loss is inf at step 4 of 4"
    ):
        train(
            build_model(65, TINY), shakespeare, config, "cpu", progress=False
        )


def test_callback_sees_the_model_before_training_and_after_every_step(
    shakespeare,
):
    config = replace(TINY.train, steps=6, warmup_steps=2, eval_interval=3)
    torch.manual_seed(0)
    model = build_model(65, TINY)
    seen = []

    def callback(info: StepInfo) -> None:
        seen.append(
            (
                info.step,
                info.loss,
                info.lr,
                info.model.token_embedding.weight.detach().clone(),
            )
        )

    initial = model.token_embedding.weight.detach().clone()
    result = train(
        model, shakespeare, config, "cpu", progress=False, callback=callback
    )
    assert [step for step, *_ in seen] == list(range(7))
    assert seen[0][1:3] == (None, None) and torch.equal(seen[0][3], initial)
    assert [lr for _, _, lr, _ in seen[1:]] == [
        lr_at(s, config) for s in range(6)
    ]
    assert all(math.isfinite(loss) for _, loss, _, _ in seen[1:])
    assert all(
        not torch.equal(a[3], b[3]) for a, b in zip(seen, seen[1:])
    )  # after each update
    assert torch.equal(seen[-1][3], model.token_embedding.weight)
    assert result.steps == [3, 6]


def test_timings_count_training_steps_apart_from_evaluations(
    shakespeare, monkeypatch
):
    """A fake clock: each training step takes 1 s, each evaluation 100 s, each callback 1000 s."""
    now = [0.0]
    monkeypatch.setattr(
        train_module, "time", SimpleNamespace(perf_counter=lambda: now[0])
    )
    real_evaluate = train_module.evaluate

    def slow_evaluate(*args, **kwargs):
        now[0] += 100.0
        return real_evaluate(*args, **kwargs)

    def slow_callback(info):
        now[0] += 1000.0

    monkeypatch.setattr(train_module, "evaluate", slow_evaluate)
    config = replace(TINY.train, steps=6, warmup_steps=2, eval_interval=3)
    torch.manual_seed(0)
    model = build_model(65, TINY)
    model.register_forward_pre_hook(
        lambda module, args: (
            now.__setitem__(0, now[0] + 1.0) if module.training else None
        )
    )
    result = train(
        model,
        shakespeare,
        config,
        "cpu",
        progress=False,
        callback=slow_callback,
    )
    assert result.train_time_s == 6.0 and result.compile_time_s == 0.0
    assert result.eval_time_s == 200.0
    assert result.wall_time_s == 6.0 + 200.0 + 7 * 1000.0  # everything
    assert result.tokens_per_s == 6 * config.batch_size * config.seq_len / 6.0


def test_a_compiled_run_times_its_first_step_apart(shakespeare, monkeypatch):
    # Dynamo with the eager backend: torch.compile's tracing, without the seconds of code generation.
    compile = torch.compile
    monkeypatch.setattr(
        train_module.torch,
        "compile",
        lambda model: compile(model, backend="eager"),
    )
    config = replace(
        TINY.train, steps=4, warmup_steps=1, eval_interval=4, compile=True
    )
    torch.manual_seed(0)
    seen = []
    result = train(
        build_model(65, TINY),
        shakespeare,
        config,
        "cpu",
        progress=False,
        callback=seen.append,
    )
    assert [info.step for info in seen] == list(
        range(5)
    )  # the callback runs with a compiled step too
    assert result.compile_time_s > 0 and result.train_time_s > 0
    assert result.tokens_per_s == pytest.approx(
        3 * config.batch_size * config.seq_len / result.train_time_s
    )
    assert (
        result.wall_time_s
        >= result.compile_time_s + result.train_time_s + result.eval_time_s
    )


# ---------------------------------------------------------------------------------------------
# Evaluation and sampling.


def test_evaluate_is_seeded_and_scores_the_seeded_windows(shakespeare):
    torch.manual_seed(0)
    model = build_model(
        65, TINY, dropout=0.5
    ).train()  # evaluate must switch dropout off
    a = evaluate(model, shakespeare.val, 16, 3, 8, seed=5)
    b = evaluate(model, shakespeare.val, 16, 3, 8, seed=5)
    c = evaluate(model, shakespeare.val, 16, 3, 8, seed=6)
    assert a == b and a != c
    assert model.training  # the mode is restored
    generator = torch.Generator().manual_seed(5)
    model.eval()
    with torch.no_grad():
        losses = [
            model(*random_batch(shakespeare.val, 8, 16, generator))[1].item()
            for _ in range(3)
        ]
    assert a == pytest.approx(sum(losses) / 3, abs=1e-6)


@pytest.mark.parametrize(
    "batch_size, max_windows", [(5, None), (64, None), (4, 7)]
)
def test_evaluate_sequential_equals_hand_loop(
    shakespeare, batch_size, max_windows
):
    torch.manual_seed(0)
    model = build_model(65, TINY).eval()
    data = shakespeare.val[:1000]
    seq_len = 16
    n_windows = 999 // seq_len if max_windows is None else max_windows
    total = 0.0
    with torch.no_grad():
        for w in range(n_windows):
            x = data[w * seq_len : (w + 1) * seq_len][None]
            y = data[w * seq_len + 1 : (w + 1) * seq_len + 1][None]
            logits, _ = model(x)
            total += F.cross_entropy(logits[0], y[0], reduction="sum").item()
    expected = total / (n_windows * seq_len)
    got = evaluate_sequential(
        model, data, seq_len, batch_size=batch_size, max_windows=max_windows
    )
    assert got == pytest.approx(expected, abs=1e-5)


def test_sample_is_seeded(trained, shakespeare):
    model, _, _ = trained
    a = sample(
        model, shakespeare, prompt="ROMEO:\n", max_new_tokens=80, seed=3
    )
    b = sample(
        model, shakespeare, prompt="ROMEO:\n", max_new_tokens=80, seed=3
    )
    c = sample(
        model, shakespeare, prompt="ROMEO:\n", max_new_tokens=80, seed=4
    )
    assert a == b and a != c
    assert a.startswith("ROMEO:\n") and len(a) == len("ROMEO:\n") + 80
    assert set(a) <= set(shakespeare.tokenizer.chars)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        sample(model, shakespeare, prompt="€", max_new_tokens=1)


# ---------------------------------------------------------------------------------------------
# Results files: strict, atomic, and never in book/results unless asked.


def test_save_and_load_results_round_trip(tmp_path):
    results = {
        "experiment": "demo",
        "losses": [4.17, 3.2, 2.5],
        "nested": {"bpc": 1.5, "ok": True},
    }
    path = save_results("demo", "cpu", results, tmp_path / "results")
    assert path == tmp_path / "results" / "demo-cpu.json"
    assert json.loads(path.read_text()) == results
    assert load_results("demo", tmp_path / "results") == results
    assert [p.name for p in (tmp_path / "results").iterdir()] == [
        "demo-cpu.json"
    ]  # no temporary file left


def test_load_results_prefers_gpu_then_cpu_then_smoke(tmp_path):
    for profile in ("smoke", "cpu", "gpu"):
        save_results("demo", profile, {"profile": profile}, tmp_path)
    assert load_results("demo", tmp_path) == {"profile": "gpu"}
    (tmp_path / "demo-gpu.json").unlink()
    assert load_results("demo", tmp_path) == {"profile": "cpu"}
    (tmp_path / "demo-cpu.json").unlink()
    assert load_results("demo", tmp_path) == {"profile": "smoke"}
    save_results("demo", "gpu", {"profile": "gpu"}, tmp_path)
    assert load_results("demo", tmp_path, profiles=("smoke",)) == {
        "profile": "smoke"
    }


def test_load_results_missing_names_the_command(tmp_path):
    save_results(
        "other", "gpu", {}, tmp_path
    )  # another experiment's file is no help
    with pytest.raises(
        FileNotFoundError,
        match=re.escape("python -m mixers.experiments.demo --profile cpu"),
    ) as info:
        load_results("demo", tmp_path)
    assert str(tmp_path) in str(info.value)


def test_committed_results_are_read_from_book_results_and_old_files_still_load(
    monkeypatch,
):
    monkeypatch.delenv("MIXERS_RESULTS", raising=False)
    assert results_dir() == ROOT / "book" / "results"
    # saved before train_time_s and the others existed
    committed = load_results("baseline", profiles=("cpu",))
    assert committed == json.loads(
        (ROOT / "book" / "results" / "baseline-cpu.json").read_text()
    )
    # the largest profile committed comes first: the H200 runs
    assert load_results("baseline")["provenance"]["device"] == "NVIDIA H200"
    assert (
        committed["result"]["tokens_per_s"] > 0
        and committed["provenance"]["wall_time_s"] > 0
    )
    assert (
        experiments.load_results is load_results
        and experiments.PROFILE_ORDER == ("gpu", "cpu", "smoke")
    )
    assert (
        experiments.results_path("baseline", "cpu")
        == ROOT / "book" / "results" / "baseline-cpu.json"
    )


def test_results_dir_honours_environment_and_runs_go_elsewhere(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("MIXERS_RESULTS", str(tmp_path / "elsewhere"))
    assert results_dir() == tmp_path / "elsewhere"
    save_results("demo", "smoke", {"x": 1}, tmp_path / "elsewhere")
    assert load_results("demo") == {"x": 1}
    # By default a run writes to runs/ at the checkout's root, which git ignores.
    assert runs_dir() == ROOT / "runs"
    monkeypatch.setattr(results_module, "runs_dir", lambda: tmp_path / "runs")
    assert (
        save_results("demo", "smoke", {"x": 2})
        == tmp_path / "runs" / "demo-smoke.json"
    )


def test_the_runs_folder_is_ignored_by_git():
    try:
        out = subprocess.run(
            ["git", "check-ignore", "-q", "runs/baseline-cpu.json"],
            cwd=ROOT,
            timeout=600,  # a hang's limit
        )
    except OSError:
        pytest.skip("no git")
    if out.returncode == 128:
        pytest.skip("not a git checkout")
    assert out.returncode == 0


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_refused_with_their_path(tmp_path, bad):
    save_results("demo", "cpu", {"ok": 1.0}, tmp_path)
    results = {
        "provenance": {},
        "runs": [
            {"result": {"best_val_loss": 1.5}},
            {"result": {"best_val_loss": bad}},
        ],
    }
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"results['runs'][1]['result']['best_val_loss'] = {bad}"
        ),
    ):
        save_results("demo", "cpu", results, tmp_path)
    assert load_results("demo", tmp_path) == {
        "ok": 1.0
    }  # the previous file is untouched
    assert len(list(tmp_path.iterdir())) == 1


def test_an_interrupted_write_leaves_the_previous_file_whole(
    tmp_path, monkeypatch
):
    save_results("demo", "cpu", {"version": 1}, tmp_path)

    def crash(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(results_module.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        save_results("demo", "cpu", {"version": 2}, tmp_path)
    assert load_results("demo", tmp_path) == {"version": 1}
    assert [p.name for p in tmp_path.iterdir()] == [
        "demo-cpu.json"
    ]  # and no temporary file


def test_writable_dir_makes_missing_folders_and_refuses_files(tmp_path):
    assert (
        writable_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b"
        and (tmp_path / "a" / "b").is_dir()
    )
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is not a directory"):
        writable_dir(tmp_path / "file")
    with pytest.raises(ValueError, match="cannot write results"):
        writable_dir(tmp_path / "file" / "below")


def test_saved_results_put_their_provenance_first(tmp_path):
    save_results(
        "demo",
        "cpu",
        {"runs": [1, 2], "provenance": {"profile": "cpu", "torch": "x"}},
        tmp_path,
    )
    text = (tmp_path / "demo-cpu.json").read_text()
    assert text.index('"provenance"') < text.index('"runs"')
    assert load_results("demo", tmp_path) == {
        "provenance": {"profile": "cpu", "torch": "x"},
        "runs": [1, 2],
    }


# ---------------------------------------------------------------------------------------------
# The command lines: checked as they are parsed, before anything runs.

DURATIONS = {
    "smoke": "seconds",
    "cpu": "about 5 minutes on two CPU cores",
    "gpu": "minutes",
}


def _never(*args, **kwargs):
    raise AssertionError("ran despite a bad command line")


def test_command_line_writes_results(tmp_path, monkeypatch, capsys):
    calls = []

    def run(profile, progress=True):
        calls.append((profile, progress))
        return {"profile": profile}

    monkeypatch.setattr(
        sys,
        "argv",
        [
            "demo",
            "--profile",
            "smoke",
            "--out",
            str(tmp_path),
            "--no-progress",
        ],
    )
    experiments.main("demo", run, "a demo", DURATIONS)
    assert calls == [("smoke", False)]
    assert json.loads((tmp_path / "demo-smoke.json").read_text()) == {
        "profile": "smoke"
    }
    assert str(tmp_path / "demo-smoke.json") in capsys.readouterr().out

    monkeypatch.setenv("MIXERS_PROFILE", "cpu")
    monkeypatch.setattr(sys, "argv", ["demo", "--out", str(tmp_path)])
    experiments.main("demo", run, "a demo", DURATIONS)
    assert calls[-1] == ("cpu", True)
    assert (tmp_path / "demo-cpu.json").is_file()


def test_command_line_writes_to_the_runs_folder_by_default(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(experiments, "runs_dir", lambda: tmp_path / "runs")
    monkeypatch.setattr(sys, "argv", ["demo", "--profile", "smoke"])
    experiments.main(
        "demo", lambda profile, progress: {"x": 1}, "a demo", DURATIONS
    )
    assert json.loads((tmp_path / "runs" / "demo-smoke.json").read_text()) == {
        "x": 1
    }


def test_help_says_where_results_go_and_how_long_profiles_take(
    monkeypatch, capsys
):
    monkeypatch.setattr(sys, "argv", ["demo", "--help"])
    with pytest.raises(SystemExit) as info:
        experiments.main("demo", _never, "a demo", DURATIONS)
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert (
        "runs" in text
        and "--out book/results" in text
        and "about 5 minutes on two CPU cores" in text
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--out", "FILE"], "is not a directory"),
        (["--out", "FILE/below"], "cannot write results"),
        (["--profile", "huge"], "invalid choice"),
    ],
)
def test_command_line_refuses_a_bad_argument_before_running(
    tmp_path, monkeypatch, capsys, argv, message
):
    (tmp_path / "FILE").write_text("x")
    argv = [arg.replace("FILE", str(tmp_path / "FILE")) for arg in argv]
    monkeypatch.setattr(sys, "argv", ["demo", *argv])
    with pytest.raises(SystemExit) as info:
        experiments.main("demo", _never, "a demo", DURATIONS)
    assert info.value.code == 2 and message in capsys.readouterr().err


def test_a_bad_mixers_profile_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MIXERS_PROFILE", "huge")
    monkeypatch.setattr(sys, "argv", ["demo", "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as info:
        experiments.main("demo", _never, "a demo", DURATIONS)
    assert (
        info.value.code == 2
        and "MIXERS_PROFILE must be one of" in capsys.readouterr().err
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["--repeats", "0"],
        ["--repeats", "-2"],
        ["--lengths", "64", "0"],
        ["--lengths", "-16"],
        ["--lengths", "x"],
    ],
)
def test_alibi_bench_refuses_bad_numbers_before_compiling(
    tmp_path, monkeypatch, capsys, argv
):
    from mixers.bench import alibi as bench

    monkeypatch.setattr(bench, "run", _never)
    monkeypatch.setattr(
        sys,
        "argv",
        ["bench", "--profile", "smoke", "--out", str(tmp_path), *argv],
    )
    with pytest.raises(SystemExit) as info:
        bench.main()
    assert (
        info.value.code == 2
        and f"argument {argv[0]}: must be a positive integer"
        in capsys.readouterr().err
    )


def test_alibi_bench_run_refuses_bad_numbers_too():
    from mixers.bench import alibi as bench

    for lengths, repeats in (((16, 0), 1), ((16,), 0), ((), 1)):
        with pytest.raises(ValueError, match="must be positive"):
            bench.run("smoke", lengths=lengths, repeats=repeats)


def test_benchmarks_check_their_output_folder_before_running(
    tmp_path, monkeypatch, capsys
):
    from mixers.bench import alibi, cpu_precision

    (tmp_path / "file").write_text("x")
    for module in (alibi, cpu_precision):
        monkeypatch.setattr(module, "run", _never)
        monkeypatch.setattr(
            sys,
            "argv",
            ["bench", "--profile", "smoke", "--out", str(tmp_path / "file")],
        )
        with pytest.raises(SystemExit):
            module.main()
        assert "is not a directory" in capsys.readouterr().err
        monkeypatch.setattr(sys, "argv", ["bench", "--help"])
        with pytest.raises(SystemExit):
            module.main()
        assert "--out book/results" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# The baseline experiment and the helpers experiments share.


def test_baseline_run_produces_results_with_provenance(monkeypatch):
    monkeypatch.setattr(baseline, "get_profile", lambda name: TINY)
    results = baseline.run("tiny", progress=False)
    assert results["experiment"] == "baseline"
    assert results["full_val_loss"] < LN_VOCAB - 0.5
    assert results["full_val_bpc"] == pytest.approx(
        results["full_val_loss"] / math.log(2), rel=1e-12
    )
    assert (
        results["sample"].startswith("ROMEO:\n")
        and len(results["sample"]) == len("ROMEO:\n") + 400
    )
    assert results["result"]["steps"] == [20, 40, 60]
    prov = results["provenance"]
    assert (
        prov["profile"] == "tiny"
        and prov["wall_time_s"] > 0
        and prov["seeds"] == [TINY.train.seed]
    )
    written = json.loads(
        results_module.to_json(results)
    )  # what save_results writes must read back
    assert (
        written["full_val_loss"] == results["full_val_loss"]
        and written["sample"] == results["sample"]
    )
    assert written["result"]["val_loss"] == results["result"]["val_loss"]


def test_profile_settings_names_the_profiles():
    from mixers.experiments import profile_settings

    table = {"smoke": {"steps": 1}, "cpu": {"steps": 9}}
    assert profile_settings("cpu", table) == {"steps": 9}
    with pytest.raises(
        ValueError,
        match=r"profile must be one of \['cpu', 'smoke'\], got 'gpu'",
    ):
        profile_settings("gpu", table)


def test_cpu_threads_sets_and_restores_the_thread_count():
    from mixers.experiments import cpu_threads

    before = torch.get_num_threads()
    other = 2 if before == 1 else 1  # the tests run on one thread (conftest)
    with cpu_threads(other, enabled=True):
        assert torch.get_num_threads() == other
    assert torch.get_num_threads() == before
    with cpu_threads(other, enabled=False):
        assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError):
        with cpu_threads(other, enabled=True):
            raise RuntimeError("boom")
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("device, sets", [("cpu", True), ("cuda", False)])
def test_cpu_threads_by_default_follows_the_device_the_runs_go_to(
    monkeypatch, device, sets
):
    """Enabled when default_device is the CPU: with MIXERS_DEVICE=cpu (the tests) even where CUDA
    is available."""
    from mixers.experiments import cpu_threads

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("MIXERS_DEVICE", device)
    before = torch.get_num_threads()
    other = 2 if before == 1 else 1
    with cpu_threads(other):
        assert torch.get_num_threads() == (other if sets else before)
    assert torch.get_num_threads() == before


def test_train_config_refuses_a_non_integer_count_with_a_type_error():
    with pytest.raises(
        TypeError, match=r"^steps must be a positive int, got 1.5"
    ):
        TrainConfig(steps=1.5)


# ---------------------------------------------------------------------------------------------
# Every field and argument is checked where it enters: grad_clip=nan turned every gradient into
# NaN, lr=nan and min_lr_ratio=nan passed the old comparisons, compile="no" switched compiling on.

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    "overrides, error, match",
    [
        (
            dict(grad_clip=NAN),
            ValueError,
            "grad_clip must be a non-negative finite float, got nan",
        ),
        (dict(grad_clip=INF), ValueError, "grad_clip"),
        (dict(grad_clip="1"), TypeError, "grad_clip"),
        (dict(lr=NAN), ValueError, "lr must be a positive finite float"),
        (dict(lr=INF), ValueError, "lr"),
        (dict(lr="1e-3"), TypeError, "lr"),
        (
            dict(min_lr_ratio=NAN),
            ValueError,
            r"min_lr_ratio must be a float in \[0, 1\]",
        ),
        (dict(weight_decay=NAN), ValueError, "weight_decay"),
        (dict(weight_decay=INF), ValueError, "weight_decay"),
        (
            dict(betas=(0.9, NAN)),
            ValueError,
            r"betas\[1\] must be a float in \[0, 1\)",
        ),
        (dict(betas=(-0.1, 0.99)), ValueError, r"betas\[0\]"),
        (dict(betas=("0.9", 0.99)), TypeError, r"betas\[0\]"),
        (dict(betas=(0.9,)), ValueError, "betas must be two floats"),
        (dict(betas="ab"), ValueError, "betas must be two floats"),
        (dict(betas=0.9), ValueError, "betas must be two floats"),
        (dict(warmup_steps=2.5), TypeError, "warmup_steps"),
        (dict(warmup_steps=True), TypeError, "warmup_steps"),
        (dict(eval_batch_size=True), TypeError, "eval_batch_size"),
        (dict(eval_batch_size=-2), ValueError, "eval_batch_size"),
        (dict(seed=-1), ValueError, "seed must be a non-negative int"),
        (dict(seed=1.5), TypeError, "seed"),
        (dict(compile="no"), TypeError, "compile must be a bool"),
        (dict(amp=1), TypeError, "amp must be a bool"),
        (dict(cpu_amp=None), TypeError, "cpu_amp must be a bool"),
    ],
)
def test_train_config_checks_every_field(overrides, error, match):
    with pytest.raises(error, match=match):
        TrainConfig(**overrides)
    with pytest.raises(error, match=match):  # replace() checks again
        replace(TrainConfig(), **overrides)


def test_train_config_accepts_betas_as_a_list_from_json():
    assert TrainConfig(betas=[0.9, 0.95]).betas == [0.9, 0.95]


@pytest.mark.parametrize(
    "make, error, match",
    [
        (
            lambda: Profile("", {}, TrainConfig()),
            TypeError,
            "name must be a non-empty str",
        ),
        (
            lambda: Profile("p", [("d_model", 8)], TrainConfig()),
            TypeError,
            "model must be a dict",
        ),
        (
            lambda: Profile("p", {"vocab_size": 65}, TrainConfig()),
            TypeError,
            "without vocab_size",
        ),
        (
            lambda: Profile("p", {}, {"steps": 5}),
            TypeError,
            "train must be a TrainConfig",
        ),
    ],
)
def test_profile_fields_are_checked(make, error, match):
    with pytest.raises(error, match=match):
        make()


@pytest.mark.parametrize(
    "step, error",
    [(-1, ValueError), (NAN, ValueError), ("3", TypeError), (None, TypeError)],
)
def test_lr_at_refuses_a_bad_step(step, error):
    with pytest.raises(
        error, match="step must be a non-negative finite float"
    ):
        lr_at(step, TrainConfig(steps=100, warmup_steps=10))


def test_a_model_smaller_than_the_dataset_s_vocabulary_is_refused_before_training(
    shakespeare,
):
    small = build_model(40, TINY)  # Tiny Shakespeare has 65 characters
    config = replace(
        TINY.train, steps=2, warmup_steps=1, eval_interval=1, eval_batches=1
    )
    with pytest.raises(
        ValueError,
        match=r"the dataset has 65 characters but the model's vocab_size=40",
    ):
        train(small, shakespeare, config, "cpu", progress=False)
    with pytest.raises(ValueError, match="vocab_size=40"):
        sample(small, shakespeare, max_new_tokens=1)
    with pytest.raises(
        ValueError, match=r"idx holds token ids .* \(vocab_size=40\)"
    ):
        evaluate(small, shakespeare.val, 16, 1, 2)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda m, d: train(m, d, {"steps": 2}, "cpu", progress=False),
            TypeError,
            "config must be a TrainConfig",
        ),
        (
            lambda m, d: train(m, d, TINY.train, "cpu", progress="no"),
            TypeError,
            "progress must be a bool",
        ),
        (
            lambda m, d: train(
                m, d, TINY.train, "cpu", progress=False, callback=3
            ),
            TypeError,
            "callback",
        ),
        (
            lambda m, d: train(m, d.train, TINY.train, "cpu", progress=False),
            TypeError,
            "dataset must be a CharDataset",
        ),
        (
            lambda m, d: sample(m, d, prompt=""),
            ValueError,
            "prompt must be a non-empty str",
        ),
        (
            lambda m, d: sample(m, d, max_new_tokens=-1),
            ValueError,
            "max_new_tokens",
        ),
        (
            lambda m, d: sample(m, d, temperature=NAN),
            ValueError,
            "temperature",
        ),
        (lambda m, d: sample(m, d, top_k=0), ValueError, "top_k"),
        (lambda m, d: sample(m, d, seed=-2), ValueError, "seed"),
        (
            lambda m, d: evaluate(m, d.val, 16, 0, 2),
            ValueError,
            "batches must be a positive int",
        ),
        (lambda m, d: evaluate(m, d.val, 16, -1, 2), ValueError, "batches"),
        (
            lambda m, d: evaluate(m, d.val, 16, 1, 2, seed=1.5),
            TypeError,
            "seed",
        ),
        (
            lambda m, d: evaluate(m, d.val, 16, 1, 2, amp="no"),
            TypeError,
            "amp must be a bool",
        ),
        (
            lambda m, d: evaluate_sequential(m, d.val[:100], 16, cpu_amp=1),
            TypeError,
            "cpu_amp must be a bool",
        ),
        (
            lambda m, d: train(
                m, d, TINY.train, "cpu", profile=None, progress=False
            ),
            TypeError,
            "profile must be a str",
        ),
        (
            lambda m, d: train(
                m, d, TINY.train, "cpu", progress=False, description=3
            ),
            TypeError,
            "description",
        ),
        (
            lambda m, d: build_model(65, "smoke"),
            TypeError,
            "profile must be a Profile",
        ),
        (
            lambda m, d: run_profile(
                d, TINY, model_overrides=[("d_model", 8)]
            ),
            TypeError,
            "model_overrides",
        ),
        (
            lambda m, d: uses_bf16(torch.device("cpu"), amp="no"),
            TypeError,
            "amp",
        ),
    ],
)
def test_train_and_evaluation_arguments_are_checked(
    shakespeare, call, error, match
):
    """evaluate(batches=-1) returned -0.0 as a loss; the others failed deep inside or not at all."""
    with pytest.raises(error, match=match):
        call(build_model(65, TINY), shakespeare)


def test_the_step_loop_never_reads_a_tensor_back_between_evaluations(
    shakespeare, monkeypatch
):
    # On a GPU each read (item, float, int, bool of a tensor) waits for every queued step. Count
    # the package's own reads: they must not grow with the number of steps between evaluations.
    import sys

    reads = []

    def counting(name):
        real = getattr(torch.Tensor, name)

        def read(self, *args, **kwargs):
            caller = sys._getframe(1).f_code.co_filename
            if (
                f"{os.sep}mixers{os.sep}" in caller
                and f"{os.sep}tests{os.sep}" not in caller
            ):
                reads.append((name, sys._getframe(1).f_code.co_name))
            return real(self, *args, **kwargs)

        return read

    for name in ("item", "__float__", "__int__", "__bool__", "tolist"):
        monkeypatch.setattr(torch.Tensor, name, counting(name))
    counts = []
    for steps in (6, 18):
        reads.clear()
        config = replace(
            TINY.train, steps=steps, warmup_steps=1, eval_interval=steps
        )  # one evaluation
        torch.manual_seed(0)
        train(
            build_model(65, TINY), shakespeare, config, "cpu", progress=False
        )
        counts.append(
            [
                r
                for r in reads
                if r[1] not in ("evaluate", "check_token_ids", "random_batch")
            ]
        )
    assert counts[0] == counts[1], (
        f"reads per step in the loop: {set(counts[1]) - set(counts[0])}"
    )
    assert (
        len(counts[1]) <= 4
    )  # the evaluation's: divergence check and the running loss
    # The forward pass's check of the token ids (excluded above) reads them back on a CPU only,
    # where nothing is queued; elsewhere (meta stands in for a GPU) it reads nothing.
    reads.clear()
    from mixers._checks import check_token_ids

    check_token_ids(
        torch.zeros(2, 3, dtype=torch.long, device="meta"), "idx", 65
    )
    assert reads == []


GPU_PATH_SCRIPT = Path(__file__).with_name("gpu_path_on_cpu.py")


def test_the_gpu_profiles_code_path_runs_on_a_cpu_and_equals_the_eager_one(
    tmp_path, cxx_store
):
    """No GPU has run the gpu profile; its code path can still be run. In a fresh process,
    tests/gpu_path_on_cpu.py trains a tiny model with each attention-family token mixer (each
    compiled from scratch, into an empty compile cache) for 3 steps of the gpu profile's recipe:
    torch.compile with inductor (code generated and run, not traced only), bf16 autocast (the
    CPU's bf16 support stubbed in, as a GPU with bf16 would choose it) and the fused attention
    kernels; each loss equals the same steps uncompiled, to bf16's precision, and the model
    compiles whole, with no graph break (a value read back in a layer once split the ALiBi model's
    graph at every layer). Its C++ is built through tests/cxx_store.py, as the fresh flex
    processes' is: Inductor's caches stay empty, and a library another process of the session
    built from the same source (the probes of the CPU's vector instructions, four builds in
    each fresh process) is copied, not built again."""
    import mixers

    corpus = Path(mixers.__file__).with_name("tinyshakespeare.txt")
    report = json_from_a_fresh_process(
        GPU_PATH_SCRIPT,
        corpus,
        cache=tmp_path / "inductor",
        cxx_store=cxx_store,
    )
    assert sorted(report) == ["alibi", "attention", "rotary"]
    # each compiled into a cache of its own
    assert all(any((tmp_path / "inductor" / m).iterdir()) for m in report)
    for mixer, losses in report.items():
        assert losses["precision"] == "torch.bfloat16", mixer
        assert losses["graph_breaks"] == {}, mixer
        assert len(losses["eager"]) == len(losses["compiled"]) >= 1, mixer
        for eager, compiled in zip(losses["eager"], losses["compiled"]):
            assert math.isfinite(compiled) and abs(compiled - eager) < 0.02, (
                f"{mixer}: compiled {compiled} against eager {eager}"
            )


def test_training_flops_count_six_per_multiplying_parameter_and_the_attention_scores():
    config = ModelConfig(
        vocab_size=65, block_size=16, d_model=32, n_layers=2, n_heads=4
    )
    model = LanguageModel(config)
    multiplying = sum(
        p.numel()
        for name, p in model.named_parameters()
        if not name.startswith(("token_embedding.", "positions."))
    )
    assert multiplying < model.num_parameters()  # the tables are left out
    assert (
        train_module.training_flops_per_token(config)
        == 6 * multiplying + 12 * 2 * 32 * 16
    )


# -----------------------------------------------------------------------------
# A run returns its best model (nanoGPT keeps its best checkpoint too)


def _overfitting_run(callback=None):
    """A model far too big for 900 characters of training text, at a constant
    high rate: its validation loss bottoms out, then climbs."""
    text = load_corpus()[:1200]
    dataset = CharDataset.from_text(text, val_fraction=0.25)
    torch.manual_seed(0)
    model = LanguageModel(
        ModelConfig(
            vocab_size=dataset.tokenizer.vocab_size,
            block_size=32,
            d_model=64,
            n_layers=2,
            n_heads=4,
            dropout=0.0,
        )
    )
    config = TrainConfig(
        steps=120,
        batch_size=16,
        seq_len=32,
        lr=1e-2,
        warmup_steps=10,
        eval_interval=15,
        eval_batches=4,
        min_lr_ratio=1.0,
        weight_decay=0.0,
    )
    result = train_module.train(
        model, dataset, config, "cpu", progress=False, callback=callback
    )
    return model, dataset, config, result


def test_a_run_that_overfits_returns_its_best_model():
    kept = {}

    def keep_weights(info):
        kept[info.step] = {
            name: tensor.clone()
            for name, tensor in info.model.state_dict().items()
        }

    model, dataset, config, result = _overfitting_run(keep_weights)
    best = result.val_loss.index(min(result.val_loss))
    assert result.best_step == result.steps[best]
    # the run did overfit: its best evaluation is not its last
    assert result.best_step < result.steps[-1]
    assert result.final_val_loss > result.best_val_loss + 0.01
    # the weights it returns are those of the best step, exactly ...
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, kept[result.best_step][name]), name
    # ... and score the best validation loss again on the same windows
    again = evaluate(
        model,
        dataset.val,
        config.seq_len,
        config.eval_batches,
        config.batch_size,
        seed=config.seed + 1,
        device=torch.device("cpu"),
    )
    assert again == pytest.approx(result.best_val_loss, abs=1e-6)
    assert result.to_dict()["best_step"] == result.best_step


def test_every_committed_cpu_run_had_its_best_evaluation_last():
    """The best-model fix changes no committed cpu number: in every run of
    book/results made before it the best evaluation was already the last
    (they were still improving), so the model that was scored and sampled was
    the best one; a run made since records the best step it returned."""
    runs = []

    def walk(value):
        if isinstance(value, dict):
            if isinstance(value.get("val_loss"), list) and value["val_loss"]:
                runs.append(value)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for path in sorted(BOOK_RESULTS.glob("*-cpu.json")):
        walk(json.loads(path.read_text()))
    assert len(runs) >= 150
    for run in runs:
        best = run["val_loss"].index(min(run["val_loss"]))
        if "best_step" in run:  # made since: the run returned its best model
            assert run["best_step"] == run["steps"][best]
        else:
            assert run["steps"][best] == run["steps"][-1]
