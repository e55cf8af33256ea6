"""The gpu profile's code path on a CPU, in a fresh process (tests/test_train.py runs it).

``python tests/gpu_path_on_cpu.py CORPUS [MIXER ...]`` (MIXER: attention, alibi or rotary; all three
if none is named)

torch.compile (inductor, the real code generation), bf16 autocast (the CPU's bf16 support stubbed
in, as a GPU would choose it) and the fused attention kernels: a few steps of a tiny model with each
attention-family token mixer, against the same steps uncompiled, and where dynamo split the compiled
model's graph. Each mixer's model is compiled from scratch: dynamo forgets what it compiled before,
and inductor writes into a new, empty folder of the caller's TORCHINDUCTOR_CACHE_DIR (or of a new
temporary folder); a kernel it already holds in memory, the same source, is the same kernel. One
process for the three: a process of its own for each cost twice the time (108 s against 53-60 s,
2026-11-28). Prints one JSON line.
"""

import json
import os
import sys
import tempfile
from pathlib import Path

import torch
from torch._dynamo.utils import counters

import mixers.train as train
from mixers.data import CharDataset

train.cpu_has_bf16 = lambda: (
    True
)  # as on a GPU with bf16: autocast_dtype picks bfloat16
text = open(sys.argv[1], encoding="utf-8").read()[:20000]
dataset = CharDataset.from_text(text)
report = {}
caches = Path(
    os.environ.get("TORCHINDUCTOR_CACHE_DIR") or tempfile.mkdtemp("-inductor")
)
for mixer in sys.argv[2:] or ("attention", "alibi", "rotary"):
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(caches / mixer)
    torch._dynamo.reset()
    counters.clear()
    losses = {}
    for compiled in (False, True):
        torch.manual_seed(0)
        profile = train.get_profile("gpu")
        model, result = train.run_profile(
            dataset,
            profile,
            model_overrides=dict(
                block_size=32,
                d_model=32,
                n_layers=1,
                n_heads=2,
                dropout=0.0,
                token_mixer=mixer,
            ),
            train_overrides=dict(
                steps=3,
                batch_size=2,
                seq_len=32,
                warmup_steps=1,
                eval_interval=3,
                eval_batches=1,
                cpu_amp=True,
                compile=compiled,
            ),
            device="cpu",
            progress=False,
        )
        losses[compiled] = result.train_loss
    report[mixer] = {
        "eager": losses[False],
        "compiled": losses[True],
        # each reason dynamo split a graph, and how often
        "graph_breaks": dict(counters["graph_break"]),
        "precision": str(
            train.autocast_dtype(torch.device("cpu"), cpu_amp=True)
        ),
    }
print(json.dumps(report))
