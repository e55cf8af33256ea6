"""Everything a GPU must verify, in one call on a bare GPU machine.

    python tools/gpu_check.py --out DIR              # on a GPU: about 8 min
    python tools/gpu_check.py --out DIR --cpu-rehearsal   # a CPU, tiny sizes

Needs torch, matplotlib and tqdm only (no Jupyter, no install: it puts the
working tree's ``src`` on the path). Four stages, each timed:

1. correctness: every attention backend of ``MultiHeadAttention``,
   ``AlibiMultiHeadAttention`` and ``RotaryMultiHeadAttention``, in float32
   and bf16 autocast, causal, padded and bidirectional, against float64
   eager on the CPU (outputs and input gradients); greedy decoding through
   the key/value cache against the plain loop; a compiled training step
   against an eager one;
2. the gpu plan: ``python -m mixers.experiments.all --profile gpu --workers
   8``, every chapter's comparison at once, its measured time beside
   ``--plan``'s prediction;
3. the benchmarks on the GPU: ``mixers.bench.train_step``,
   ``mixers.bench.generation`` and ``mixers.bench.alibi``, ``--profile
   gpu``, each printing its targets beside its figures;
4. the results packed for the book.

It writes four files to DIR: ``gpu_check.log`` (everything printed),
``correctness.json``, ``summary.json`` (stages, times, predicted and measured
plan) and ``results.tar``, the plan's and benchmarks' results files, ready
for the book: ``tar -xf DIR/results.tar -C book/results``.

``--cpu-rehearsal`` runs the same code on the CPU at tiny sizes (the
``smoke`` profile, two workers, short lengths) in a few minutes; the tests
run it (tests/test_gpu_check.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from mixers.alibi import AlibiMultiHeadAttention  # noqa: E402
from mixers.attention import MultiHeadAttention  # noqa: E402
from mixers.model import LanguageModel, ModelConfig  # noqa: E402
from mixers.positions import RotaryMultiHeadAttention  # noqa: E402

#: Relative error allowed against float64 (the GPU measured at most 2.4e-6
#: in float32 and 8.9e-3 in bf16 on 2026-11-26).
TOLERANCE = {"float32": 1e-4, "bf16": 3e-2}
LAYERS = {
    "attention": (MultiHeadAttention, ("eager", "sdpa")),
    "alibi": (AlibiMultiHeadAttention, ("eager", "sdpa", "flex")),
    "rotary": (RotaryMultiHeadAttention, ("eager", "sdpa")),
}
MODES = ("causal", "padded", "bidirectional")
#: What each size of check runs: the gpu sizes, and the rehearsal's.
SIZES = {
    "gpu": dict(
        lengths=(40, 300, 1000),
        d_model=384,
        heads=6,
        profile="gpu",
        workers=8,
        decode_tokens=300,
    ),
    "rehearsal": dict(
        lengths=(24, 70),
        d_model=32,
        heads=4,
        profile="smoke",
        workers=2,
        decode_tokens=40,
    ),
}
BENCHMARKS = ("train_step", "generation", "alibi")


class Log:
    """Everything printed, also to ``gpu_check.log``."""

    def __init__(self, path: Path):
        self.file = path.open("w", encoding="utf-8")

    def __call__(self, text: str = "") -> None:
        print(text, flush=True)
        self.file.write(text + "\n")
        self.file.flush()


# -----------------------------------------------------------------------------
# 1. Correctness against float64 eager on the CPU


def _relative(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.double().cpu(), want.double().cpu()
    return float((got - want).norm() / want.norm().clamp_min(1e-30))


def _inputs(batch, length, d_model, mode, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, length, d_model, generator=generator)
    token_mask = None
    if mode == "padded":  # the second sequence ends a third of the way early
        token_mask = torch.ones(batch, length, dtype=torch.bool)
        token_mask[1, length - length // 3 :] = False
    return x, token_mask


def _forward_backward(layer, x, token_mask, device, precision, backward):
    x = x.to(device).requires_grad_(backward)
    mask = None if token_mask is None else token_mask.to(device)
    with (
        torch.set_grad_enabled(backward),
        torch.autocast(
            device.type, dtype=torch.bfloat16, enabled=precision == "bf16"
        ),
    ):
        out = layer(x, token_mask=mask)
    real = (
        torch.ones(out.shape[:2], dtype=torch.bool, device=device)
        if mask is None
        else mask
    )
    out = out.float() * real[..., None]  # padded queries are not compared
    if not backward:
        return out.detach(), None
    out.square().sum().backward()
    return out.detach(), x.grad.detach()


def check_layer(name, backend, mode, length, precision, device, sizes):
    """One layer against its float64 copy: relative errors of the output and
    of the input gradient."""
    cls, _ = LAYERS[name]
    causal = mode != "bidirectional"
    torch.manual_seed(0)
    layer = cls(sizes["d_model"], sizes["heads"], causal=causal)
    reference = cls(sizes["d_model"], sizes["heads"], causal=causal)
    reference.load_state_dict(layer.state_dict())
    reference.backend = "eager"
    layer.backend = backend
    x, token_mask = _inputs(2, length, sizes["d_model"], mode)
    # FlexAttention has no backward pass on a CPU (the rehearsal)
    backward = not (backend == "flex" and device.type == "cpu")
    cpu = torch.device("cpu")
    want = _forward_backward(
        reference.double(), x.double(), token_mask, cpu, "-", backward
    )
    got = _forward_backward(
        layer.to(device), x, token_mask, device, precision, backward
    )
    errors = [_relative(got[0], want[0])]
    errors += [_relative(got[1], want[1])] if backward else []
    return {
        "layer": name,
        "backend": backend,
        "mode": mode,
        "length": length,
        "precision": precision,
        "output_error": errors[0],
        "grad_error": errors[1] if backward else None,
        "ok": max(errors) <= TOLERANCE[precision],
    }


def check_decoding(device, sizes) -> list[dict]:
    """Greedy decoding with ``generate`` (the key/value cache where the model
    has one) writes the tokens of the plain loop, which re-reads everything
    (or the window) for every token."""
    rows = []
    for mixer in ("attention", "alibi", "rotary", "gmlp"):
        torch.manual_seed(0)
        # decoding goes past block_size: the cache reads on, the window of
        # the models without one slides
        config = ModelConfig(
            vocab_size=65,
            block_size=sizes["decode_tokens"] // 2,
            d_model=sizes["d_model"],
            n_layers=2,
            n_heads=sizes["heads"],
            dropout=0.0,
            token_mixer=mixer,
            positions="none",
        )
        model = LanguageModel(config).to(device).eval()
        prompt = torch.randint(65, (2, 5), generator=torch.Generator())
        prompt = prompt.to(device)
        new = sizes["decode_tokens"]
        fast = model.generate(prompt, new, top_k=1)
        plain = prompt
        window = None if model.decodes_with_cache() else config.block_size
        with torch.no_grad():
            for _ in range(new):
                context = plain if window is None else plain[:, -window:]
                logits, _ = model(context)
                plain = torch.cat([plain, logits[:, -1:].argmax(-1)], dim=1)
        same = (fast == plain).float().mean().item()
        rows.append(
            {
                "model": mixer,
                "cache": model.decodes_with_cache(),
                "tokens": new,
                "past_block_size": prompt.shape[1] + new > config.block_size,
                "same_tokens": same,
                "ok": same == 1.0,
            }
        )
    return rows


def check_training(device, sizes) -> dict:
    """Three steps of the gpu profile's training path (torch.compile, bf16
    autocast on a GPU) against the same steps uncompiled."""
    from mixers.data import CharDataset, load_corpus
    from mixers.train import get_profile, run_profile

    dataset = CharDataset.from_text(load_corpus()[:20000])
    # a tiny model and three steps: enough to compare the two paths' losses
    model = dict(block_size=32, d_model=32, n_layers=1, n_heads=2, dropout=0.0)
    train = dict(steps=3, batch_size=4, seq_len=32, warmup_steps=1,
                 eval_interval=3, eval_batches=1)  # fmt: skip
    losses = {}
    for compiled in (False, True):
        _, result = run_profile(
            dataset,
            get_profile("gpu"),
            model_overrides=model,
            train_overrides=dict(train, compile=compiled),
            device=device,
            progress=False,
        )
        losses[compiled] = result.train_loss[-1]
    gap = abs(losses[True] - losses[False])
    return {"eager": losses[False], "compiled": losses[True], "ok": gap < 0.05}


def correctness(device, sizes, log) -> dict:
    layers = []
    precisions = ("float32", "bf16")
    for name, (_, backends) in LAYERS.items():
        for backend in backends:
            for mode in MODES:
                for length in sizes["lengths"]:
                    for precision in precisions:
                        layers.append(
                            check_layer(
                                name, backend, mode, length, precision, device,
                                sizes,
                            )
                        )  # fmt: skip
    worst = {
        p: max(
            max(r["output_error"], r["grad_error"] or 0.0)
            for r in layers
            if r["precision"] == p
        )
        for p in precisions
    }
    decoding = check_decoding(device, sizes)
    training = check_training(device, sizes)
    ok = all(r["ok"] for r in layers + decoding) and training["ok"]
    log(
        f"correctness: {len(layers)} layer checks, worst relative error"
        f" float32 {worst['float32']:.1e} (limit {TOLERANCE['float32']:g}),"
        f" bf16 {worst['bf16']:.1e} (limit {TOLERANCE['bf16']:g});"
        f" decoding {sum(r['ok'] for r in decoding)} of {len(decoding)}"
        f" models write the plain loop's tokens; compiled training step"
        f" {'equals' if training['ok'] else 'differs from'} eager"
    )
    return {
        "ok": ok,
        "worst": worst,
        "layers": layers,
        "decoding": decoding,
        "training": training,
    }


# -----------------------------------------------------------------------------
# 2-3. The plan and the benchmarks, as their command lines


def run_command(args: list[str], log, timeout: float) -> tuple[int, float]:
    """``python -m ARGS`` from the working tree, its output in the log;
    returns its exit code (124 past ``timeout``) and its seconds."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    log(f"$ python -m {' '.join(args)}")
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = start + timeout
    for line in process.stdout:
        log(line.rstrip("\n"))
        if time.perf_counter() > deadline:
            process.kill()
            log(f"stopped after {timeout:.0f} s")
            return 124, time.perf_counter() - start
    code = process.wait()
    return code, time.perf_counter() - start


def plan_stage(results: Path, sizes, log, timeout) -> dict:
    from mixers.experiments import all as run_all

    profile, workers = sizes["profile"], sizes["workers"]
    predicted = run_all.plan_lines(profile, workers)[-1]
    log(f"the plan: {predicted}")
    command = ["mixers.experiments.all", "--profile", profile]
    command += ["--workers", str(workers), "--out", str(results)]
    code, seconds = run_command([*command, "--no-progress"], log, timeout)
    log(f"the plan took {seconds / 60:.1f} min ({predicted.split(', ')[-1]})")
    return {"predicted": predicted, "seconds": seconds, "exit_code": code}


def bench_stage(results: Path, sizes, log, timeout) -> dict:
    profile = "smoke" if sizes["profile"] == "smoke" else "gpu"
    out = {}
    for name in BENCHMARKS:
        left = timeout - sum(r["seconds"] for r in out.values())
        if left < 10:
            out[name] = {"exit_code": None, "seconds": 0.0, "skipped": True}
            log(f"{name}: skipped, no time left")
            continue
        code, seconds = run_command(
            [
                f"mixers.bench.{name}",
                "--profile",
                profile,
                "--out",
                str(results),
            ],
            log,
            left,
        )
        out[name] = {"exit_code": code, "seconds": seconds}
    return out


# -----------------------------------------------------------------------------
# The whole check


def environment(device) -> dict:
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": (
            torch.cuda.get_device_name(device)
            if device.type == "cuda"
            else platform.processor() or "cpu"
        ),
        "cuda": torch.version.cuda,
        "bf16": device.type == "cuda" and torch.cuda.is_bf16_supported(),
    }


def parse_args(argv=None) -> argparse.Namespace:
    """The command line: ``--out``, ``--cpu-rehearsal`` and ``--budget``
    (its default by where it runs); no GPU without the rehearsal is an
    error before anything runs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, metavar="DIR")
    parser.add_argument(
        "--cpu-rehearsal",
        action="store_true",
        help="the same code on the CPU at tiny sizes",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help=(
            "seconds for the whole check (default 540, 9 minutes, on a GPU;"
            " 1,800 in the rehearsal)"
        ),
    )
    args = parser.parse_args(argv)
    if not args.cpu_rehearsal and not torch.cuda.is_available():
        parser.error("no CUDA GPU here: use --cpu-rehearsal on a CPU")
    if args.budget is None:
        args.budget = 1800.0 if args.cpu_rehearsal else 540.0
    return args


def results_stages(args, sizes, log, start: float, stages: dict) -> list:
    """Stages 2 to 4: the plan (the book's results first, leaving the
    benchmarks at least 90 s of the budget), then the benchmarks in what is
    left, their results files packed into ``results.tar``; each stage's
    record into ``stages``. Returns the names of the files packed."""
    with tempfile.TemporaryDirectory() as folder:
        results = Path(folder)
        left = args.budget - (time.perf_counter() - start) - 90
        stages["plan"] = plan_stage(results, sizes, log, left)
        left = args.budget - (time.perf_counter() - start)
        stages["benchmarks"] = bench_stage(results, sizes, log, left)
        written = sorted(p.name for p in results.glob("*.json"))
        with tarfile.open(args.out / "results.tar", "w") as tar:
            for name in written:
                tar.add(results / name, arcname=name)
    return written


def main(argv=None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    sizes = SIZES["rehearsal" if args.cpu_rehearsal else "gpu"]
    device = torch.device("cpu" if args.cpu_rehearsal else "cuda")
    log = Log(args.out / "gpu_check.log")
    start = time.perf_counter()
    summary = {"environment": environment(device), "stages": {}}
    log(json.dumps(summary["environment"]))

    checked = correctness(device, sizes, log)
    (args.out / "correctness.json").write_text(json.dumps(checked, indent=1))
    summary["stages"]["correctness"] = {
        "ok": checked["ok"],
        "seconds": time.perf_counter() - start,
    }
    written = results_stages(args, sizes, log, start, summary["stages"])
    summary["results"] = written
    summary["seconds"] = time.perf_counter() - start
    codes = [summary["stages"]["plan"]["exit_code"]] + [
        row["exit_code"] for row in summary["stages"]["benchmarks"].values()
    ]
    summary["ok"] = checked["ok"] and all(code == 0 for code in codes)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    log(
        f"gpu check {'passed' if summary['ok'] else 'FAILED'} in"
        f" {summary['seconds'] / 60:.1f} min; results.tar holds"
        f" {len(written)} results files"
    )
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
