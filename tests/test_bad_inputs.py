"""A table of bad and edge inputs to the public API, each with the error it must get: the type,
and a message that names the argument (or what was expected). Issue 33's review found 41 inputs
that were accepted silently or refused in torch's words; they are here (marked ``# 33``) beside
the ones that were already refused well, so that none comes back. Issue 38's review of the code
added since (caches, devices, results files, progress files, locks) adds its cases, marked
``# 38``. The command lines, the results files and the runs that share a folder have tests of
their own (tests/test_runs_share_a_folder.py, tests/test_experiments_all.py); the attention
layers' aliased arguments, tests/test_attention_aliasing.py."""

import atexit
import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from unittest import mock

import pytest
import torch

from mixers import (
    alibi,
    attention,
    experiments,
    feed_forward,
    gmlp,
    live,
    positions,
)
from mixers import data as data_module
from mixers import results as results_module
from mixers import stats as stats_module  # the rows of stats-side
from mixers.attention import (
    AdditiveAttention,
    MultiHeadAttention,
    SingleLayerAttention,
    causal_mask,
    dot_product_attention,
    masked_softmax,
    zero_padding,
)
from mixers.data import (
    CharDataset,
    CharTokenizer,
    CorpusError,
    load_corpus,
    random_batch,
)
from mixers.model import LanguageModel, ModelConfig
from mixers.results import CorruptResults
from mixers.train import (
    TrainConfig,
    build_model,
    get_profile,
    run_profile,
    sample,
    train,
)

NAN, INF = float("nan"), float("inf")
TEXT = "the quick brown fox jumps over the lazy dog.\n" * 40


def x(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def ones(*shape):
    return torch.ones(*shape, dtype=torch.bool)


def tiny_model(vocab_size=None, **fields):
    dataset = CharDataset.from_text(TEXT)
    config = ModelConfig(
        vocab_size=vocab_size or dataset.tokenizer.vocab_size,
        block_size=8,
        d_model=16,
        n_layers=1,
        n_heads=2,
        **fields,
    )
    return LanguageModel(config), dataset


def tiny_config(**fields):
    return TrainConfig(
        **{
            "steps": 2,
            "batch_size": 2,
            "seq_len": 8,
            "warmup_steps": 0,
            "eval_interval": 1,
            "eval_batches": 1,
            **fields,
        }
    )


def train_tiny(model_dataset, config):
    model, dataset = model_dataset
    return train(model, dataset, config, "cpu", progress=False)


def changed_after_construction(**fields):
    config = tiny_config()
    for name, value in fields.items():
        setattr(config, name, value)
    return config


def short_validation():
    dataset = CharDataset.from_text(TEXT, val_fraction=0.005)  # 9 tokens
    model, _ = tiny_model(vocab_size=dataset.tokenizer.vocab_size)
    return model, dataset


def torch_causal(t):
    """torch.nn.MultiheadAttention's causal ``attn_mask``: True where reading is *blocked*."""
    return torch.triu(ones(t, t), 1)


def mha(**options):
    return MultiHeadAttention(8, 2, **options)


def bf16_input_to_float32_weights():
    return mha()(x(1, 3, 8, dtype=torch.bfloat16))


def read_text(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("results") / "demo-cpu.json"
    path.write_text(text)
    return results_module.read_results(path)


def causal_mha(**options):
    return MultiHeadAttention(8, 2, causal=True, **options)


def cache_with_another_batch(cache, first: int, then: int):
    layer = causal_mha()
    layer(x(first, 3, 8), cache=cache)
    return layer(x(then, 1, 8), cache=cache)


def cache_shared_by_two_layers(cache):
    causal_mha()(x(1, 3, 8), cache=cache)
    return causal_mha()(x(1, 1, 8), cache=cache)


def train_on(device, cuda: bool):
    """``train`` on ``device`` with CUDA present (one GPU) or not, as the test says: nothing here
    may depend on the machine's own (tests/conftest.py, MIXERS_FAKE_CUDA)."""
    with (
        mock.patch("torch.cuda.is_available", return_value=cuda),
        mock.patch("torch.cuda.device_count", return_value=int(cuda)),
    ):
        model, dataset = tiny_model()
        return train(model, dataset, tiny_config(), device, progress=False)


# A folder for the cases that need one (made once, at import: the cases are
# lambdas), removed with all it holds when the process ends.
TMP = Path(tempfile.mkdtemp(prefix="bad-inputs-"))
atexit.register(shutil.rmtree, TMP, ignore_errors=True)


def packaged_corpus_missing():
    with mock.patch.object(
        data_module, "corpus_path", return_value=TMP / "gone.txt"
    ):
        return load_corpus()


def a_file() -> Path:
    """A file where a folder is expected."""
    path = TMP / "a-file"
    path.write_text("not a folder")
    return path


def demo_experiment():
    return experiments.Experiment(
        "demo", "smoke", {"steps": 2}, ("seed",), [(0,), (1,)]
    )


def progress_file_of(name: str, run: dict | None = None) -> Path:
    run = run or {
        "seed": 0,
        "diverged": False,
        "error": None,
        "result": {"provenance": {}},
    }
    path = Path(tempfile.mkdtemp(dir=TMP)) / "demo-smoke.partial.json"
    path.write_text(
        json.dumps(
            {
                "experiment": name,
                "settings": {"steps": 2},
                "runs": [run],
                "provenance": {"profile": "smoke"},
            }
        )
    )
    return path


def locked_through_a_symlink():
    folder = Path(tempfile.mkdtemp(dir=TMP))
    (folder / "target").write_text("")
    experiments.lock_path("demo", "smoke", folder).symlink_to(
        folder / "target"
    )
    with experiments.run_lock("demo", "smoke", folder):
        pass


CASES = [
    # ---- Booleans checked as booleans ("no" is truthy).
    (
        "mha causal='no'",
        lambda: mha(causal="no"),
        TypeError,
        r"causal must be a bool",
    ),  # 33
    (
        "mha bias='no'",
        lambda: mha(bias="no"),
        TypeError,
        r"bias must be a bool",
    ),  # 33
    (
        "mha cpu_bf16_sdpa_in_float32='no'",  # 33
        lambda: mha(cpu_bf16_sdpa_in_float32="no"),
        TypeError,
        r"cpu_bf16_sdpa_in_float32 must be a bool",
    ),
    (
        "mha causal=1",
        lambda: mha(causal=1),
        TypeError,
        r"causal must be a bool",
    ),
    (
        "alibi_bias causal='no'",
        lambda: alibi.alibi_bias(2, 4, causal="no"),
        TypeError,
        r"causal must be a bool",
    ),  # 33
    (
        "alibi_bias symmetric='yes'",
        lambda: alibi.alibi_bias(2, 4, symmetric="yes"),
        TypeError,
        r"symmetric must be a bool",
    ),
    (
        "AlibiMultiHeadAttention causal='no'",
        lambda: alibi.AlibiMultiHeadAttention(8, 2, causal="no"),
        TypeError,
        r"causal must be a bool",
    ),
    (
        "RotaryMultiHeadAttention causal='no'",
        lambda: positions.RotaryMultiHeadAttention(8, 2, causal="no"),
        TypeError,
        r"causal must be a bool",
    ),
    (
        "FeedForward gated='no'",
        lambda: feed_forward.FeedForward(8, 16, gated="no"),
        TypeError,
        r"gated must be a bool",
    ),
    (
        "FeedForward fused=1",
        lambda: feed_forward.FeedForward(8, 16, gated=True, fused=1),
        TypeError,
        r"fused must be a bool",
    ),
    (
        "SpatialGatingUnit causal='no'",
        lambda: gmlp.SpatialGatingUnit(8, 4, causal="no"),
        TypeError,
        r"causal must be a bool",
    ),
    (
        "toeplitz_score causal='no'",
        lambda: gmlp.toeplitz_score(x(4, 4), causal="no"),
        TypeError,
        r"causal must be a bool",
    ),
    (
        "TrainConfig compile='no'",
        lambda: TrainConfig(compile="no"),
        TypeError,
        r"compile must be a bool",
    ),
    (
        "TrainConfig amp=None",
        lambda: TrainConfig(amp=None),
        TypeError,
        r"amp must be a bool",
    ),
    # ---- ALiBi's bias: dtypes and slopes that would give a wrong answer.
    (
        "alibi_bias dtype=long",
        lambda: alibi.alibi_bias(2, 4, dtype=torch.long),
        TypeError,
        r"dtype must be .* floating-point",
    ),  # 33
    (
        "alibi_bias dtype=bool",
        lambda: alibi.alibi_bias(2, 4, dtype=torch.bool),
        TypeError,
        r"dtype must be .* floating-point",
    ),  # 33
    (
        "alibi_bias dtype='float32'",
        lambda: alibi.alibi_bias(2, 4, dtype="float32"),
        TypeError,
        r"dtype must be",
    ),
    (
        "alibi_bias negative slopes",  # 33
        lambda: alibi.alibi_bias(torch.tensor([0.5, -0.25]), 4),
        ValueError,
        r"slopes_or_n_heads must hold finite slopes >= 0",
    ),
    (
        "alibi_bias NaN slope",
        lambda: alibi.alibi_bias(torch.tensor([0.5, NAN]), 4),
        ValueError,
        r"slopes_or_n_heads must hold finite slopes",
    ),
    (
        "alibi_bias int slopes tensor",
        lambda: alibi.alibi_bias(torch.tensor([1, 2]), 4),
        ValueError,
        r"slopes_or_n_heads must be",
    ),
    (
        "alibi_bias n_heads=0",
        lambda: alibi.alibi_bias(0, 4),
        ValueError,
        r"slopes_or_n_heads must be a positive int",
    ),
    (
        "alibi_bias n_heads=True",
        lambda: alibi.alibi_bias(True, 4),
        TypeError,
        r"slopes_or_n_heads must be",
    ),
    (
        "alibi_bias q_len=0",
        lambda: alibi.alibi_bias(2, 0),
        ValueError,
        r"q_len must be a positive int",
    ),
    (
        "alibi_bias q_offset=-1",
        lambda: alibi.alibi_bias(2, 4, q_offset=-1),
        ValueError,
        r"q_offset must be an int >= 0",
    ),
    (
        "alibi_bias q_len > k_len",
        lambda: alibi.alibi_bias(2, 5, 3),
        ValueError,
        r"q_len=5 > k_len=3",
    ),
    (
        "alibi_bias bool key_positions",
        lambda: alibi.alibi_bias(2, 4, key_positions=ones(4)),
        TypeError,
        r"key_positions must hold integer or floating-point positions",
    ),
    (
        "alibi_bias key_positions wrong length",
        lambda: alibi.alibi_bias(2, 4, key_positions=torch.arange(3)),
        ValueError,
        r"key_positions must have shape",
    ),
    (
        "alibi_slopes 0",
        lambda: alibi.alibi_slopes(0),
        ValueError,
        r"n_heads must be a positive int",
    ),
    (
        "alibi_slopes 2.0",
        lambda: alibi.alibi_slopes(2.0),
        TypeError,
        r"n_heads must be a positive int",
    ),
    # ---- Masks: True where reading is allowed.
    (
        "dot_product_attention torch's causal mask",  # 33
        lambda: dot_product_attention(
            x(4, 8), x(4, 8), x(4, 8), mask=torch_causal(4)
        ),
        ValueError,
        r"mask leaves a real query with no key to attend to \(query 3, in every sample\).*tril, not triu",
    ),
    (
        "mha torch's causal mask with some padding",  # 33
        lambda: mha()(
            x(2, 4, 8),
            mask=torch_causal(4),
            token_mask=torch.tensor(
                [[True, True, True, False], [True, True, False, False]]
            ),
        ),
        ValueError,
        r"mask leaves a real query with no key to attend to \(query 3",
    ),
    (
        "mha a mask that allows nothing",
        lambda: mha()(x(1, 3, 8), mask=torch.zeros(3, 3, dtype=torch.bool)),
        ValueError,
        r"mask allows no query to attend to any key",
    ),
    (
        "dot_product_attention float mask",
        lambda: dot_product_attention(
            x(3, 4), x(3, 4), x(3, 4), mask=torch.ones(3, 3)
        ),
        TypeError,
        r"mask must be a bool",
    ),
    (
        "dot_product_attention mask of the wrong shape",
        lambda: dot_product_attention(
            x(3, 4), x(3, 4), x(3, 4), mask=ones(2, 3)
        ),
        ValueError,
        r"mask of shape \(2, 3\) does not broadcast",
    ),
    (
        "dot_product_attention 3-d mask for 4-d scores",
        lambda: dot_product_attention(
            x(2, 2, 3, 4), x(2, 2, 3, 4), x(2, 2, 3, 4), mask=ones(2, 3, 3)
        ),
        ValueError,
        r"mask must be \[q_len, k_len\] or \[batch\|1, heads\|1, q_len, k_len\]",
    ),
    (
        "mha token_mask all padding",
        lambda: mha()(
            x(1, 3, 8), token_mask=torch.zeros(1, 3, dtype=torch.bool)
        ),
        ValueError,
        r"token_mask has a sample with no real token",
    ),
    (
        "mha int token_mask",
        lambda: mha()(
            x(1, 3, 8), token_mask=torch.ones(1, 3, dtype=torch.long)
        ),
        TypeError,
        r"token_mask must be a bool tensor",
    ),
    (
        "mha token_mask wrong shape",
        lambda: mha()(x(1, 3, 8), token_mask=ones(1, 4)),
        ValueError,
        r"token_mask must have shape",
    ),
    (
        "masked_softmax float mask",
        lambda: masked_softmax(x(2, 3), torch.ones(2, 3)),
        TypeError,
        r"mask must be a bool tensor",
    ),  # 33
    (
        "masked_softmax mask of the wrong shape",
        lambda: masked_softmax(x(2, 3), ones(4, 3)),
        ValueError,
        r"mask of shape \(4, 3\) does not broadcast",
    ),
    (
        "masked_softmax int scores",
        lambda: masked_softmax(torch.ones(2, 3, dtype=torch.long)),
        TypeError,
        r"scores must be a floating-point tensor",
    ),
    (
        "zero_padding mask of the wrong shape",
        lambda: zero_padding(x(2, 3, 4), ones(2, 5)),
        ValueError,
        r"token_mask must have shape \[batch, seq\] = \(2, 3\)",
    ),  # 33
    (
        "zero_padding float mask",
        lambda: zero_padding(x(2, 3, 4), torch.ones(2, 3)),
        TypeError,
        r"token_mask must be a bool tensor",
    ),
    (
        "causal_mask q_len=0",
        lambda: causal_mask(0),
        ValueError,
        r"q_len must be a positive int",
    ),
    (
        "causal_mask k_len < q_len",
        lambda: causal_mask(5, 3),
        ValueError,
        r"k_len=3",
    ),
    (
        "causal_mask q_offset=-1",
        lambda: causal_mask(3, 4, q_offset=-1),
        ValueError,
        r"q_offset must be a non-negative int",
    ),
    # ---- Tensors: kinds, dtypes and sizes.
    (
        "dot_product_attention mixed dtypes",
        lambda: dot_product_attention(
            x(3, 4), x(3, 4, dtype=torch.float64), x(3, 4)
        ),
        TypeError,
        r"q, k, v must share one dtype",
    ),  # 33
    (
        "dot_product_attention int q",
        lambda: dot_product_attention(
            torch.ones(3, 4, dtype=torch.long), x(3, 4), x(3, 4)
        ),
        TypeError,
        r"q must be a floating-point tensor",
    ),
    (
        "dot_product_attention a list",
        lambda: dot_product_attention([[1.0]], x(3, 4), x(3, 4)),
        TypeError,
        r"q must be a torch.Tensor",
    ),
    (
        "dot_product_attention 1-d q",
        lambda: dot_product_attention(x(4), x(3, 4), x(3, 4)),
        ValueError,
        r"q must have shape",
    ),
    (
        "dot_product_attention k width",
        lambda: dot_product_attention(x(3, 4), x(3, 5), x(3, 4)),
        ValueError,
        r"k must have the last dim d_k=4",
    ),
    (
        "dot_product_attention v length",
        lambda: dot_product_attention(x(3, 4), x(3, 4), x(2, 4)),
        ValueError,
        r"v must have shape \[\.\.\., k_len=3",
    ),
    (
        "dot_product_attention empty sequence",
        lambda: dot_product_attention(x(0, 4), x(3, 4), x(3, 4)),
        ValueError,
        r"q must hold at least one position.*an empty sequence",
    ),
    (
        "dot_product_attention dropout_p=1",
        lambda: dot_product_attention(
            x(3, 4), x(3, 4), x(3, 4), dropout_p=1.0
        ),
        ValueError,
        r"dropout_p must be a probability",
    ),
    (
        "dot_product_attention scale=0",
        lambda: dot_product_attention(x(3, 4), x(3, 4), x(3, 4), scale=0.0),
        ValueError,
        r"scale must be None",
    ),
    (
        "dot_product_attention scale=nan",
        lambda: dot_product_attention(x(3, 4), x(3, 4), x(3, 4), scale=NAN),
        ValueError,
        r"scale must be None",
    ),
    (
        "dot_product_attention bool bias",
        lambda: dot_product_attention(
            x(3, 4), x(3, 4), x(3, 4), bias=ones(3, 3)
        ),
        TypeError,
        r"bias must be a floating-point",
    ),
    (
        "mha a batch of 0",
        lambda: mha()(x(0, 3, 8)),
        ValueError,
        r"query must hold at least one position.*an empty batch",
    ),  # 33
    (
        "mha an empty sequence",
        lambda: mha()(x(2, 0, 8)),
        ValueError,
        r"query must hold at least one position.*an empty sequence",
    ),
    (
        "mha float32 weights, bf16 input",
        bf16_input_to_float32_weights,
        TypeError,
        r"query has dtype torch.bfloat16 but the layer's weights are torch.float32",
    ),  # 33
    (
        "mha mixed query and key dtypes",
        lambda: mha()(x(1, 3, 8), x(1, 3, 8, dtype=torch.float64)),
        TypeError,
        r"query, key, value must share one dtype",
    ),
    (
        "mha wrong width",
        lambda: mha()(x(1, 3, 7)),
        ValueError,
        r"query must have shape \[batch, q_len, d_model=8\]",
    ),
    (
        "mha 2-d query",
        lambda: mha()(x(3, 8)),
        ValueError,
        r"query must have shape",
    ),
    (
        "mha int query",
        lambda: mha()(torch.ones(1, 3, 8, dtype=torch.long)),
        TypeError,
        r"query must be a floating-point tensor",
    ),
    (
        "mha d_model not divisible",
        lambda: MultiHeadAttention(10, 3),
        ValueError,
        r"d_model=10 must be divisible by n_heads=3",
    ),
    (
        "mha n_heads=0",
        lambda: MultiHeadAttention(8, 0),
        ValueError,
        r"n_heads must be a positive int",
    ),
    (
        "mha dropout=1",
        lambda: mha(dropout=1.0),
        ValueError,
        r"dropout must be a probability",
    ),
    (
        "mha backend='fast'",
        lambda: mha(backend="fast"),
        ValueError,
        r"backend must be one of",
    ),
    (
        "mha scale=-1",
        lambda: mha(scale=-1.0),
        ValueError,
        r"scale must be None",
    ),
    (
        "mha cache with a mask",
        lambda: mha()(x(1, 1, 8), mask=ones(1, 1), cache=attention.KVCache()),
        ValueError,
        r"cache is for decoding",
    ),
    (
        "mha cache of the wrong type",
        lambda: mha()(x(1, 1, 8), cache={}),
        TypeError,
        r"cache must be a mixers.attention.KVCache",
    ),
    (
        "SingleLayerAttention negative_slope='x'",
        lambda: SingleLayerAttention(4, negative_slope="x"),
        TypeError,
        r"negative_slope must be a finite float",
    ),  # 33
    (
        "SingleLayerAttention negative_slope=nan",
        lambda: SingleLayerAttention(4, negative_slope=NAN),
        ValueError,
        r"negative_slope must be a finite float",
    ),  # 33
    (
        "SingleLayerAttention d_k mismatch",
        lambda: SingleLayerAttention(4)(x(3, 5), x(3, 5), x(3, 5)),
        ValueError,
        r"q must have shape \[\.\.\., q_len, d_k=4\]",
    ),
    (
        "AdditiveAttention d_hidden=0",
        lambda: AdditiveAttention(4, 4, 0),
        ValueError,
        r"d_hidden must be a positive int",
    ),
    (
        "FeedForward int input",
        lambda: feed_forward.FeedForward(8, 16)(
            torch.ones(2, 3, 8, dtype=torch.long)
        ),
        TypeError,
        r"x must be a floating-point tensor",
    ),  # 33
    (
        "FeedForward a batch of 0",
        lambda: feed_forward.FeedForward(8, 16)(x(0, 3, 8)),
        ValueError,
        r"x must hold at least one position.*an empty batch",
    ),
    (
        "FeedForward bf16 input",
        lambda: feed_forward.FeedForward(8, 16)(
            x(2, 3, 8, dtype=torch.bfloat16)
        ),
        TypeError,
        r"x has dtype torch.bfloat16 but the layer's weights",
    ),
    (
        "FeedForward wrong width",
        lambda: feed_forward.FeedForward(8, 16)(x(2, 3, 7)),
        ValueError,
        r"x must have shape \[\.\.\., d_model=8\]",
    ),
    (
        "FeedForward a list",
        lambda: feed_forward.FeedForward(8, 16)([1.0]),
        TypeError,
        r"x must be a torch.Tensor",
    ),
    (
        "FeedForward fused without gated",
        lambda: feed_forward.FeedForward(8, 16, fused=True),
        ValueError,
        r"fused=True needs gated=True",
    ),
    (
        "FeedForward activation='relu6'",
        lambda: feed_forward.FeedForward(8, 16, activation="nope"),
        ValueError,
        r"activation",
    ),
    (
        "FeedForward d_ff=0",
        lambda: feed_forward.FeedForward(8, 0),
        ValueError,
        r"d_ff must be a positive int",
    ),
    # ---- Positions.
    (
        "rotary_embedding empty sequence",
        lambda: positions.rotary_embedding(x(1, 2, 0, 4), torch.arange(0)),
        ValueError,
        r"q_or_k must hold at least one position.*an empty sequence",
    ),  # 33
    (
        "rotary_embedding odd d_head",
        lambda: positions.rotary_embedding(x(1, 2, 3, 5), torch.arange(3)),
        ValueError,
        r"d_head\s+even",
    ),
    (
        "rotary_embedding int input",
        lambda: positions.rotary_embedding(
            torch.ones(1, 2, 3, 4, dtype=torch.long), torch.arange(3)
        ),
        TypeError,
        r"q_or_k must be a floating-point tensor",
    ),
    (
        "rotary_embedding bool positions",
        lambda: positions.rotary_embedding(x(1, 2, 3, 4), ones(3)),
        TypeError,
        r"positions must be an int or float tensor",
    ),
    (
        "rotary_embedding base=0",
        lambda: positions.rotary_embedding(
            x(1, 2, 3, 4), torch.arange(3), base=0.0
        ),
        ValueError,
        r"base must be a positive finite float",
    ),
    (
        "rotary_embedding base=inf",
        lambda: positions.rotary_embedding(
            x(1, 2, 3, 4), torch.arange(3), base=INF
        ),
        ValueError,
        r"base must be a positive finite float",
    ),
    (
        "sinusoidal_table odd d_model",
        lambda: positions.sinusoidal_table(4, 5),
        ValueError,
        r"d_model must be even",
    ),
    (
        "LearnedPositions max_len=0",
        lambda: positions.LearnedPositions(8, 0),
        ValueError,
        r"max_len must be a positive int",
    ),
    (
        "build_positions 'none!'",
        lambda: positions.build_positions("absolute", 8, 4),
        ValueError,
        r"must be one of",
    ),
    # ---- gMLP and its Toeplitz measures.
    (
        "toeplitz_score NaN weight",
        lambda: gmlp.toeplitz_score(torch.full((3, 3), NAN)),
        ValueError,
        r"weight must hold finite numbers",
    ),  # 33
    (
        "toeplitz_score inf weight",
        lambda: gmlp.toeplitz_score(torch.eye(3) * INF),
        ValueError,
        r"weight must hold finite numbers",
    ),  # 33
    (
        "diagonal_means NaN weight",
        lambda: gmlp.diagonal_means(torch.full((3, 3), NAN)),
        ValueError,
        r"weight must hold finite numbers",
    ),
    (
        "toeplitz_score not square",
        lambda: gmlp.toeplitz_score(x(3, 4)),
        ValueError,
        r"weight must be a square matrix",
    ),
    (
        "toeplitz_score a list",
        lambda: gmlp.toeplitz_score([[1.0]]),
        TypeError,
        r"weight must be a torch.Tensor",
    ),
    (
        "SpatialGatingUnit odd d_z",
        lambda: gmlp.SpatialGatingUnit(7, 4),
        ValueError,
        r"d_z must be even",
    ),
    (
        "SpatialGatingUnit too long",
        lambda: gmlp.SpatialGatingUnit(8, 4)(x(1, 5, 8)),
        ValueError,
        r"seq",
    ),
    (
        "SpatialGatingUnit eps=0",
        lambda: gmlp.SpatialGatingUnit(8, 4, eps=0.0),
        ValueError,
        r"eps must be a positive finite float",
    ),
    # ---- The model, its config and sampling.
    (
        "ModelConfig vocab_size=0",
        lambda: ModelConfig(vocab_size=0),
        ValueError,
        r"vocab_size must be a positive int",
    ),
    (
        "ModelConfig token_mixer='lstm'",
        lambda: ModelConfig(vocab_size=4, token_mixer="lstm"),
        ValueError,
        r"unknown token_mixer 'lstm'; registered",
    ),
    (
        "ModelConfig d_model % n_heads",
        lambda: ModelConfig(vocab_size=4, d_model=10, n_heads=3),
        ValueError,
        r"d_model \(10\) must be divisible by n_heads \(3\)",
    ),
    (
        "ModelConfig dropout=nan",
        lambda: ModelConfig(vocab_size=4, dropout=NAN),
        ValueError,
        r"dropout must be a probability",
    ),
    (
        "ModelConfig alibi with learned positions",
        lambda: ModelConfig(
            vocab_size=4, token_mixer="alibi", positions="learned"
        ),
        ValueError,
        r"encodes positions itself",
    ),
    (
        "model ids out of range",
        lambda: tiny_model()[0](torch.full((1, 3), 999)),
        ValueError,
        r"idx holds token ids",
    ),
    (
        "model float ids",
        lambda: tiny_model()[0](x(1, 3)),
        TypeError,
        r"idx must be an int64 tensor",
    ),
    (
        "generate temperature=1e-45",
        lambda: tiny_model()[0].generate(
            torch.zeros(1, 1, dtype=torch.long), 1, temperature=1e-45
        ),
        ValueError,
        r"temperature must be at least 1e-06",
    ),  # 33
    (
        "generate temperature=0",
        lambda: tiny_model()[0].generate(
            torch.zeros(1, 1, dtype=torch.long), 1, temperature=0.0
        ),
        ValueError,
        r"temperature must be a positive finite float",
    ),
    (
        "generate top_k=0",
        lambda: tiny_model()[0].generate(
            torch.zeros(1, 1, dtype=torch.long), 1, top_k=0
        ),
        ValueError,
        r"top_k must be an int in",
    ),
    (
        "generate max_new_tokens=-1",
        lambda: tiny_model()[0].generate(
            torch.zeros(1, 1, dtype=torch.long), -1
        ),
        ValueError,
        r"max_new_tokens must be a non-negative int",
    ),
    (
        "sample temperature=1e-45",
        lambda: sample(*tiny_model(), temperature=1e-45),
        ValueError,
        r"temperature must be at least",
    ),  # 33
    (
        "sample empty prompt",
        lambda: sample(*tiny_model(), prompt=""),
        ValueError,
        r"prompt must be a non-empty str",
    ),
    (
        "sample seed=-1",
        lambda: sample(*tiny_model(), seed=-1),
        ValueError,
        r"seed must be a non-negative int",
    ),
    (
        "sample prompt outside the vocabulary",
        lambda: sample(*tiny_model(), prompt="Z"),
        ValueError,
        r"text contains characters outside the vocabulary",
    ),
    (
        "sample a model larger than the vocabulary",
        lambda: sample(*tiny_model(vocab_size=99), max_new_tokens=50),
        ValueError,
        r"the model's vocab_size=99: build the model with vocab_size=dataset",
    ),  # 33
    (
        "sample a model smaller than the vocabulary",
        lambda: sample(*tiny_model(vocab_size=5)),
        ValueError,
        r"the model's vocab_size=5",
    ),
    (
        "build_model vocab_size override",
        lambda: build_model(65, get_profile("smoke"), vocab_size=80),
        ValueError,
        r"vocab_size is not a model override",
    ),  # 33
    (
        "run_profile vocab_size in model_overrides",  # 33
        lambda: run_profile(
            CharDataset.from_text(TEXT),
            "smoke",
            model_overrides={"vocab_size": 80},
            progress=False,
        ),
        ValueError,
        r"vocab_size is not a model override",
    ),
    (
        "build_model profile name",
        lambda: build_model(65, "smoke"),
        TypeError,
        r"profile must be a Profile",
    ),
    # ---- Training: checked before the first step.
    (
        "train a model larger than the vocabulary",
        lambda: train_tiny(tiny_model(vocab_size=99), tiny_config()),
        ValueError,
        r"vocab_size=99",
    ),  # 33
    (
        "train a validation split shorter than seq_len",
        lambda: train_tiny(short_validation(), tiny_config(seq_len=16)),
        ValueError,
        r"dataset.val has 9 tokens: fewer than seq_len \+ 1 = 17",
    ),  # 33
    (
        "train a config changed after construction",
        lambda: train_tiny(tiny_model(), changed_after_construction(steps=0)),
        ValueError,
        r"steps must be a positive int",
    ),  # 33
    (
        "train lr changed to nan",
        lambda: train_tiny(tiny_model(), changed_after_construction(lr=NAN)),
        ValueError,
        r"lr must be a positive finite float",
    ),
    (
        "train progress='no'",
        lambda: train(*tiny_model(), tiny_config(), "cpu", progress="no"),
        TypeError,
        r"progress must be a bool",
    ),
    (
        "train a dict config",
        lambda: train(*tiny_model(), {"steps": 2}, "cpu"),
        TypeError,
        r"config must be a TrainConfig",
    ),
    (
        "train a callback that is not callable",
        lambda: train(
            *tiny_model(), tiny_config(), "cpu", progress=False, callback=3
        ),
        TypeError,
        r"callback must be None or a callable",
    ),
    (
        "TrainConfig steps=0",
        lambda: TrainConfig(steps=0),
        ValueError,
        r"steps must be a positive int",
    ),
    (
        "TrainConfig lr=nan",
        lambda: TrainConfig(lr=NAN),
        ValueError,
        r"lr must be a positive finite float",
    ),
    (
        "TrainConfig lr=-1",
        lambda: TrainConfig(lr=-1.0),
        ValueError,
        r"lr must be a positive finite float",
    ),
    (
        "TrainConfig warmup > steps",
        lambda: TrainConfig(steps=10, warmup_steps=20),
        ValueError,
        r"warmup_steps must lie in \[0, steps=10\]",
    ),
    (
        "TrainConfig betas one float",
        lambda: TrainConfig(betas=(0.9,)),
        ValueError,
        r"betas must be two floats",
    ),
    (
        "TrainConfig betas[1]=1",
        lambda: TrainConfig(betas=(0.9, 1.0)),
        ValueError,
        r"betas\[1\] must be a float in \[0, 1\)",
    ),
    (
        "TrainConfig min_lr_ratio=2",
        lambda: TrainConfig(min_lr_ratio=2.0),
        ValueError,
        r"min_lr_ratio must be a float in \[0, 1\]",
    ),
    (
        "TrainConfig grad_clip=nan",
        lambda: TrainConfig(grad_clip=NAN),
        ValueError,
        r"grad_clip must be a non-negative finite float",
    ),
    (
        "TrainConfig seed=-1",
        lambda: TrainConfig(seed=-1),
        ValueError,
        r"seed must be a non-negative int",
    ),
    (
        "TrainConfig batch_size='32'",
        lambda: TrainConfig(batch_size="32"),
        TypeError,
        r"batch_size must be a positive int",
    ),
    (
        "get_profile 'huge'",
        lambda: get_profile("huge"),
        ValueError,
        r"must be one of",
    ),
    # ---- Data.
    (
        "CharTokenizer empty text",
        lambda: CharTokenizer(""),
        ValueError,
        r"text must be a non-empty str",
    ),
    (
        "CharTokenizer.encode bytes",
        lambda: CharTokenizer("ab").encode(b"ab"),
        TypeError,
        r"text must be a str",
    ),
    (
        "CharTokenizer.decode out of range",
        lambda: CharTokenizer("ab").decode([5]),
        ValueError,
        r"ids must be ints in \[0, 2\)",
    ),
    (
        "CharDataset val_fraction=1",
        lambda: CharDataset.from_text(TEXT, val_fraction=1.0),
        ValueError,
        r"val_fraction must be a float in \(0, 1\)",
    ),
    (
        "random_batch seq_len too long",
        lambda: random_batch(torch.arange(5), 2, 5),
        ValueError,
        r"seq_len=5 needs at least 6 tokens",
    ),
    (
        "random_batch float data",
        lambda: random_batch(x(10), 2, 3),
        TypeError,
        r"data must be a 1-d int64 tensor",
    ),
    (
        "random_batch batch_size=0",
        lambda: random_batch(torch.arange(10), 0, 3),
        ValueError,
        r"batch_size must be a positive int",
    ),
    # ---- Results files and live views: finite numbers only, names that stay in their folder.
    (
        "save_results name '../x'",
        lambda: results_module.save_results("../x", "cpu", {}, None),
        ValueError,
        r"name must be a plain file name",
    ),  # 33
    (
        "save_results profile 'a/b'",
        lambda: results_module.results_path("demo", "a/b"),
        ValueError,
        r"profile must be a plain file name",
    ),
    (
        "save_results NaN",
        lambda: results_module.to_json({"loss": NAN}),
        ValueError,
        r"results must be finite numbers.*\['loss'\] = nan",
    ),
    (
        "live_view NaN prop",
        lambda: live.live_view(
            "softmax", {"scores": [1.0, NAN]}, alt="a view"
        ),
        ValueError,
        r"props must hold finite numbers.*props\['scores'\]\[1\] = nan",
    ),  # 33
    (
        "live_view inf prop",
        lambda: live.live_view("softmax", {"scale": INF}, alt="a view"),
        ValueError,
        r"props must hold finite numbers.*props\['scale'\] = inf",
    ),  # 33
    (
        "live_view unknown view",
        lambda: live.live_view("pie", {}, alt="a view"),
        ValueError,
        r"view must be one of",
    ),
    (
        "live_view empty alt",
        lambda: live.live_view("softmax", {}, alt=" "),
        ValueError,
        r"alt must say what the view shows",
    ),
    (
        "live_view props a list",
        lambda: live.live_view("softmax", [], alt="a view"),
        TypeError,
        r"props must be a dict",
    ),
    (
        "live_view props not JSON",
        lambda: live.live_view("softmax", {"x": object()}, alt="a view"),
        TypeError,
        r"props must be JSON",
    ),
    (
        "encode_lower NaN",
        lambda: live.encode_lower(torch.tensor([[NAN, 0.0], [1.0, 2.0]])),
        ValueError,
        r"weight must hold finite numbers",
    ),  # 33
    (
        "encode_lower inf",
        lambda: live.encode_lower(torch.tensor([[1.0, 0.0], [INF, 2.0]])),
        ValueError,
        r"weight must hold finite numbers",
    ),  # 33
    (
        "encode_lower 0x0",
        lambda: live.encode_lower(torch.zeros(0, 0)),
        ValueError,
        r"weight must be square \[n, n\] with n >= 1",
    ),  # 33
    (
        "encode_lower a list",
        lambda: live.encode_lower([[1.0]]),
        TypeError,
        r"weight must be a floating-point tensor",
    ),  # 33
    (
        "encode_lower not square",
        lambda: live.encode_lower(x(2, 3)),
        ValueError,
        r"weight must be square",
    ),
    (
        "figure_png colours=1",
        lambda: live.figure_png(None, colours=1),
        ValueError,
        r"colours must be an int in \[2, 256\]",
    ),
    # ---- mixers.stats (issue 38; branch stats-side). Each was answered
    # silently (0.0, nan, 3e-61, a bool read as 1) or in Python's words.
    # holm([np.float32(.01)]), seeds_needed(1.0, 0.01) and paired_test with
    # 26 seeds now get the right answer: tests/test_stats.py.
    (
        "stats.t_test_p df=0",
        lambda: stats_module.t_test_p(2.0, 0),
        ValueError,
        r"df must be a positive finite float, got 0",
    ),  # 38
    (
        "stats.t_test_p df=-3",
        lambda: stats_module.t_test_p(2.0, -3),
        ValueError,
        r"df must be a positive finite float, got -3",
    ),  # 38
    (
        "stats.t_test_p t=nan",
        lambda: stats_module.t_test_p(NAN, 3),
        ValueError,
        r"t must be a real number, not NaN",
    ),  # 38
    (
        "stats.t_test_p t='2'",
        lambda: stats_module.t_test_p("2", 3),
        TypeError,
        r"t must be a real number, got '2'",
    ),
    (
        "stats.t_quantile df=0",
        lambda: stats_module.t_quantile(0.975, 0),
        ValueError,
        r"df must be a positive finite float, got 0",
    ),  # 38
    (
        "stats.t_quantile q=1",
        lambda: stats_module.t_quantile(1.0, 3),
        ValueError,
        r"q must be a float in \(0.5, 1\), got 1",
    ),
    (
        "stats.seeds_needed sd=True",
        lambda: stats_module.seeds_needed(sd=True, gap=1),
        TypeError,
        r"sd must be a positive finite float, got True",
    ),  # 38
    (
        "stats.seeds_needed sd='1'",
        lambda: stats_module.seeds_needed("1", 1),
        TypeError,
        r"sd must be a positive finite float, got '1'",
    ),  # 38
    (
        "stats.seeds_needed exact='no'",
        lambda: stats_module.seeds_needed(1, 1, exact="no"),
        TypeError,
        r"exact must be a bool, got 'no'",
    ),
    (
        "stats.seeds_needed past 1e12 seeds",
        lambda: stats_module.seeds_needed(1.0, 1e-7),
        ValueError,
        r"sd / gap = 1e\+07 .* needs about 7.85e\+14 seeds",
    ),
    (
        "stats.holm a float",
        lambda: stats_module.holm(0.01),
        TypeError,
        r"p_values must be a sequence of numbers, got float 0.01",
    ),  # 38
    (
        "stats.holm a string",
        lambda: stats_module.holm("0.01"),
        TypeError,
        r"p_values must be a sequence of numbers, got str '0.01'",
    ),  # 38
    (
        "stats.holm a set",
        lambda: stats_module.holm({0.01, 0.2}),
        TypeError,
        r"p_values must be a sequence of numbers, got set",
    ),
    (
        "stats.holm alpha=1",
        lambda: stats_module.holm([0.01], alpha=1.0),
        ValueError,
        r"alpha must be a float in \(0, 1\), got 1",
    ),
    (
        "stats.paired_test differences overflow",
        lambda: stats_module.paired_test([1e308, -1e308], [-1e308, 1e308]),
        ValueError,
        r"a and b: the difference a\[0\] - b\[0\] = 1e\+308 - -1e\+308"
        r" is inf; differences must be at most 1e\+300",
    ),  # 38
    (
        "stats.t_test_power n=1",
        lambda: stats_module.t_test_power(1, 0.01, 0.02),
        ValueError,
        r"n must be an int >= 2, got 1",
    ),
    (
        "stats.sd_interval n=2.5",
        lambda: stats_module.sd_interval(0.02, 2.5),
        TypeError,
        r"n must be an int >= 2, got 2.5",
    ),
    # ---- Issue 38: a key/value cache checks its own use.
    (
        "StaticKVCache a smaller batch after its first write",
        lambda: cache_with_another_batch(attention.StaticKVCache(8), 2, 1),
        ValueError,
        r"cache holds the keys of a batch of 2 \(its size at its first use\),"
        r" got query of batch 1",
    ),  # 38
    (
        "StaticKVCache a larger batch after its first write",
        lambda: cache_with_another_batch(attention.StaticKVCache(8), 1, 2),
        ValueError,
        r"cache holds the keys of a batch of 1",
    ),  # 38
    (
        "KVCache another batch after its first write",
        lambda: cache_with_another_batch(attention.KVCache(), 1, 2),
        ValueError,
        r"cache holds the keys of a batch of 1",
    ),  # 38
    (
        "KVCache shared by two layers",
        lambda: cache_shared_by_two_layers(attention.KVCache()),
        ValueError,
        r"cache holds the keys and values of another layer",
    ),  # 38
    (
        "StaticKVCache shared by two layers",
        lambda: cache_shared_by_two_layers(attention.StaticKVCache(8)),
        ValueError,
        r"cache holds the keys and values of another layer",
    ),  # 38
    (
        "KVCache on a bidirectional layer",
        lambda: mha()(x(1, 3, 8), cache=attention.KVCache()),
        ValueError,
        r"cache decodes a causal layer, but this layer has causal=False",
    ),  # 38
    (
        "StaticKVCache on a bidirectional ALiBi layer",
        lambda: alibi.AlibiMultiHeadAttention(8, 2)(
            x(1, 3, 8), cache=attention.StaticKVCache(8)
        ),
        ValueError,
        r"cache decodes a causal layer, but this layer has causal=False",
    ),  # 38
    # ---- Issue 38: devices, and the model's own input named.
    (
        "dot_product_attention a meta query with CPU keys",
        lambda: dot_product_attention(
            x(1, 3, 4).to("meta"), x(1, 3, 4), x(1, 3, 4)
        ),
        ValueError,
        r"q, k, v must be on one device, got q meta, k cpu, v cpu",
    ),  # 38
    (
        "dot_product_attention a mask on another device",
        lambda: dot_product_attention(
            x(1, 3, 4).to("meta"),
            x(1, 3, 4).to("meta"),
            x(1, 3, 4).to("meta"),
            mask=ones(3, 3),
        ),
        ValueError,
        r"q, mask must be on one device, got q meta, mask cpu",
    ),  # 38
    (
        "mha a meta query, CPU weights",
        lambda: mha()(x(1, 3, 8).to("meta")),
        ValueError,
        r"query is on meta but the layer's weights are on cpu",
    ),  # 38
    (
        "mha key on another device than the query",
        lambda: mha()(x(1, 3, 8), x(1, 3, 8).to("meta")),
        ValueError,
        r"query, key, value must be on one device, got query cpu, key meta",
    ),  # 38
    (
        "model an empty batch",
        lambda: tiny_model()[0](torch.zeros(0, 5, dtype=torch.long)),
        ValueError,
        r"idx must have shape \[batch, seq\] with batch >= 1 and seq >= 1,"
        r" got \(0, 5\) \(an empty batch\)",
    ),  # 38
    (
        "train device='cuda' without CUDA",
        lambda: train_on("cuda", cuda=False),
        ValueError,
        r"device='cuda' but CUDA is not available here",
    ),  # 38
    (
        "train device='cuda:3' with one GPU",
        lambda: train_on("cuda:3", cuda=True),
        ValueError,
        r"device='cuda:3' but this machine has 1 CUDA device \(cuda:0 to"
        r" cuda:0\)",
    ),  # 38
    (
        "train device='tpu'",
        lambda: train_on("tpu", cuda=False),
        ValueError,
        r"device must be a torch.device or its name: 'cpu', 'cuda', 'cuda:N'"
        r" or 'mps', got 'tpu'",
    ),  # 38
    (
        "train device=3",
        lambda: train_on(3, cuda=False),
        TypeError,
        r"device must be a torch.device or its name",
    ),  # 38
    # ---- Issue 38: the corpus path says what is wrong with that path.
    (
        "load_corpus a directory",
        lambda: load_corpus(TMP),
        CorpusError,
        r"corpus file .* is a directory, not a text file",
    ),  # 38
    (
        "load_corpus a missing path of the user's",
        lambda: load_corpus(TMP / "no-such-corpus.txt"),
        CorpusError,
        r"corpus file not found: .*no-such-corpus.txt \(no such file\)$",
    ),  # 38
    (
        "load_corpus a text of the user's with the packaged checksum",
        lambda: load_corpus(__file__),
        CorpusError,
        r"altered or truncated; to read a text of your own, pass sha256=None",
    ),  # 38
    (
        "load_corpus the packaged corpus missing",
        lambda: packaged_corpus_missing(),
        CorpusError,
        r"the copy shipped with the package \(reinstall the package",
    ),  # 38
    (
        "load_corpus path=3",
        lambda: load_corpus(3),
        TypeError,
        r"path must be None \(the packaged corpus\), a str or a Path, got 3",
    ),  # 38
    # ---- Issue 38: results files.
    (
        "write_results provenance=3",
        lambda: results_module.write_results(
            TMP / "p.json", {"provenance": 3}
        ),
        TypeError,
        r"results\['provenance'\] must be a dict .*, got 3",
    ),  # 38
    (
        "write_results under a file",
        lambda: results_module.write_results(
            a_file() / "results.json", {"x": 1}
        ),
        results_module.ResultsNotWritten,
        r"cannot write .*a-file/results.json: .*a-file is a file, not a"
        r" folder$",
    ),  # 38
    (
        "write_results a directory in the file's place",
        lambda: results_module.write_results(TMP, {"x": 1}),
        results_module.ResultsNotWritten,
        r"cannot write .*: it is a directory; move it away",
    ),  # 38
    (
        "write_results a list",
        lambda: results_module.write_results(TMP / "l.json", [1]),
        TypeError,
        r"results must be a dict, got list",
    ),  # 38
    # ---- Still silent or unclear after issue 33 (found again in issue 38's round).
    (
        "mha need_weights='no'",
        lambda: mha()(x(1, 3, 8), need_weights="no"),
        TypeError,
        r"need_weights must be a bool \(True or False\), got 'no'",
    ),  # 38
    (
        "AlibiMultiHeadAttention need_weights=1",
        lambda: alibi.AlibiMultiHeadAttention(8, 2)(
            x(1, 3, 8), need_weights=1
        ),
        TypeError,
        r"need_weights must be a bool",
    ),  # 38
    (
        "DotProductAttention need_weights='no'",
        lambda: attention.DotProductAttention()(
            x(1, 3, 4), x(1, 3, 4), x(1, 3, 4), need_weights="no"
        ),
        TypeError,
        r"need_weights must be a bool",
    ),  # 38
    (
        "SingleLayerAttention need_weights='no'",
        lambda: SingleLayerAttention(4)(
            x(1, 3, 4), x(1, 3, 4), x(1, 3, 4), need_weights="no"
        ),
        TypeError,
        r"need_weights must be a bool",
    ),  # 38
    (
        "AdditiveAttention need_weights='no'",
        lambda: AdditiveAttention(4, 4, 6)(
            x(1, 3, 4), x(1, 3, 4), x(1, 3, 4), need_weights="no"
        ),
        TypeError,
        r"need_weights must be a bool",
    ),  # 38
    (
        "BiAttention need_weights='yes'",
        lambda: attention.BiAttention(8)(
            x(1, 3, 8), x(1, 2, 8), need_weights="yes"
        ),
        TypeError,
        r"need_weights must be a bool",
    ),  # 38
    (
        "alibi_bias a NaN key position",
        lambda: alibi.alibi_bias(
            2, 3, key_positions=torch.tensor([0.0, NAN, 2.0])
        ),
        ValueError,
        r"key_positions must hold finite positions, got NaN or inf",
    ),  # 38
    (
        "rotary_embedding an infinite position",
        lambda: positions.rotary_embedding(
            x(1, 1, 3, 4), torch.tensor([0.0, INF, 2.0])
        ),
        ValueError,
        r"positions must hold finite positions",
    ),  # 38
    (
        "masked_softmax dim=5 of 2-d scores",
        lambda: masked_softmax(x(3, 4), dim=5),
        ValueError,
        r"dim must be an int in \[-2, 1\], got 5",
    ),  # 38
    (
        "random_batch generator=3",
        lambda: random_batch(torch.arange(100), 2, 4, generator=3),
        TypeError,
        r"generator must be None or a torch.Generator",
    ),  # 38
    (
        "load_results profiles='cpu'",
        lambda: results_module.load_results("baseline", profiles="cpu"),
        TypeError,
        r"profiles must be a non-empty tuple of profile names",
    ),  # 38
    # ---- Issue 38: a progress file and a lock, through the calls a run makes.
    (
        "load_partial another experiment's progress file",
        lambda: experiments.load_partial(
            progress_file_of("other"), demo_experiment()
        ),
        CorruptResults,
        r"is not a progress file of demo \(profile smoke\): it holds"
        r" experiment 'other'",
    ),  # 38
    (
        "load_partial a run without 'diverged'",
        lambda: experiments.load_partial(
            progress_file_of("demo", run={"seed": 0, "error": None}),
            demo_experiment(),
        ),
        CorruptResults,
        r"run 0 has no 'diverged'",
    ),  # 38
    (
        "run_lock a symlink at the lock path",
        lambda: locked_through_a_symlink(),
        experiments.FolderInUse,
        r"is a symbolic link: a run's lock is never written through one",
    ),  # 38
]


# -----------------------------------------------------------------------------
# Issue 38: generate and tools/gpu_check.py (rows of the same table, kept in a
# block of their own).


def cached_model():
    """A tiny model that decodes through a key/value cache (ALiBi)."""
    return tiny_model(token_mixer="alibi")[0]


def nan_weights(top_k=None):
    model = cached_model()
    with torch.no_grad():
        model.blocks[0].token_mixer.in_proj.weight[0, 0] = NAN
    return model.generate(torch.zeros(1, 2, dtype=torch.long), 5, top_k=top_k)


def gpu_check_usage(*argv):
    """tools/gpu_check.py's command line as a user types it, parsed and
    checked (the check's first step, before any work); its usage error as a
    ValueError holding what it prints."""
    import contextlib
    import io
    from pathlib import Path

    from helpers import load_module

    path = Path(__file__).resolve().parents[1] / "tools" / "gpu_check.py"
    tool = load_module(path, "gpu_check_usage")
    printed = io.StringIO()
    try:
        with contextlib.redirect_stderr(printed):
            tool.parse_args(list(argv))
    except SystemExit as usage:
        raise ValueError(printed.getvalue()) from usage


def a_folder() -> str:
    """A new, empty folder."""
    return tempfile.mkdtemp(dir=TMP)


def a_temp_file() -> str:
    """A new, empty file, alone in a new folder."""
    handle, path = tempfile.mkstemp(dir=a_folder())
    os.close(handle)
    return path


CASES += [
    (
        "generate graph=True without a cache",
        lambda: tiny_model()[0].generate(
            torch.zeros(1, 2, dtype=torch.long), 3, graph=True
        ),
        ValueError,
        r"graph=True records a key/value cache's decoding step, but this"
        r" model decodes without a key/value cache",
    ),  # 38
    (
        "generate compile=True without a cache",
        lambda: tiny_model()[0].generate(
            torch.zeros(1, 2, dtype=torch.long), 3, compile=True
        ),
        ValueError,
        r"compile=True compiles a key/value cache's decoding step",
    ),  # 38
    (
        "generate compile=True on a growing cache",
        lambda: cached_model().generate(
            torch.zeros(1, 2, dtype=torch.long), 3, compile=True
        ),
        ValueError,
        r"compile=True compiles the static cache's decoding step .* on cpu"
        r" decodes through a cache that grows",
    ),  # 38
    (
        "generate an empty batch",
        lambda: cached_model().generate(
            torch.zeros(0, 3, dtype=torch.long), 3
        ),
        ValueError,
        r"idx must .*\(0, 3\)",
    ),  # 38
    (
        "generate NaN weights",
        lambda: nan_weights(),
        ValueError,
        r"parameter 'blocks\.0\.token_mixer\.in_proj\.weight' holds NaN",
    ),  # 38
    (
        "generate NaN weights top_k=1",
        lambda: nan_weights(top_k=1),
        ValueError,
        r"parameter 'blocks\.0\.token_mixer\.in_proj\.weight' holds NaN",
    ),  # 38
    (
        "generate 10**11 tokens graph=True",
        lambda: cached_model().generate(
            torch.zeros(1, 2, dtype=torch.long), 10**11, graph=True
        ),
        ValueError,
        r"max_new_tokens=100000000000 needs [\d,.]+ GiB on cpu .* ask for"
        r" fewer tokens",
    ),  # 38
    (
        "generate a meta prompt",
        lambda: cached_model().generate(
            torch.zeros(1, 2, dtype=torch.long, device="meta"), 3
        ),
        ValueError,
        r"idx is on meta but the model's weights are on cpu",
    ),  # 38
    (
        "generate generator=3",
        lambda: cached_model().generate(
            torch.zeros(1, 2, dtype=torch.long), 3, generator=3
        ),
        TypeError,
        r"generator must be a torch.Generator or None, got int",
    ),
    (
        "gpu_check --budget nan",
        lambda: gpu_check_usage(
            "--cpu-rehearsal", "--out", a_folder(), "--budget", "nan"
        ),
        ValueError,
        r"--budget: must be a finite number of seconds > 0, got 'nan'",
    ),  # 38
    (
        "gpu_check --budget -5",
        lambda: gpu_check_usage(
            "--cpu-rehearsal", "--out", a_folder(), "--budget", "-5"
        ),
        ValueError,
        r"--budget: must be a finite number of seconds > 0, got '-5'",
    ),  # 38
    (
        "gpu_check --budget 0",
        lambda: gpu_check_usage(
            "--cpu-rehearsal", "--out", a_folder(), "--budget", "0"
        ),
        ValueError,
        r"--budget: must be a finite number of seconds > 0, got '0'",
    ),
    (
        "gpu_check --budget inf",
        lambda: gpu_check_usage(
            "--cpu-rehearsal", "--out", a_folder(), "--budget", "inf"
        ),
        ValueError,
        r"--budget: must be a finite number of seconds > 0, got 'inf'",
    ),
    (
        "gpu_check --out a file",
        lambda: gpu_check_usage("--cpu-rehearsal", "--out", a_temp_file()),
        ValueError,
        r"--out: .* is a file: give a folder",
    ),  # 38
    (
        "gpu_check --out /dev/null",
        lambda: gpu_check_usage("--cpu-rehearsal", "--out", "/dev/null"),
        ValueError,
        r"--out: /dev/null is not a folder",
    ),  # 38
    (
        "gpu_check --out /proc/x",
        lambda: gpu_check_usage("--cpu-rehearsal", "--out", "/proc/x"),
        ValueError,
        r"--out: cannot write in /proc/x \(.+\): give a folder you can"
        r" write in",
    ),  # 38
    (
        "gpu_check --out a folder of other files",
        lambda: gpu_check_usage(
            "--cpu-rehearsal", "--out", os.path.dirname(a_temp_file())
        ),
        ValueError,
        r"--out .* holds files the check does not write",
    ),
]


@pytest.mark.parametrize(
    "call, error, message",
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_a_bad_input_gets_a_clear_error(call, error, message):
    torch.manual_seed(0)
    with pytest.raises(error, match=message):
        call()


# Read back: a results file holding what writing refuses is refused too.
@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_read_results_refuses_what_writing_refuses(
    tmp_path_factory, constant
):  # 33
    with pytest.raises(
        results_module.CorruptResults, match=f"it holds {constant}"
    ):
        read_text(tmp_path_factory, f'{{"loss": {constant}}}')


def test_the_table_holds_over_a_hundred_cases_and_the_issue_s_inputs():
    assert len(CASES) >= 100
    assert len(set(case[0] for case in CASES)) == len(CASES)


# The right answers, where the answer is not an error.
def test_a_one_query_mask_and_an_empty_row_of_a_per_sample_mask_still_work():
    q = x(2, 3, 4)
    mask = ones(2, 3, 3)
    mask[0, 1] = False  # padding: a per-sample mask may leave a row empty
    _, weights = dot_product_attention(q, q, q, mask=mask)
    assert (weights[0, 1] == 0).all() and torch.isfinite(weights).all()


def test_strict_json_reads_back_what_it_wrote(tmp_path):
    path = results_module.save_results(
        "demo", "cpu", {"loss": 1.5, "runs": [1, 2]}, tmp_path
    )
    assert results_module.read_results(path) == {
        "loss": 1.5,
        "runs": [1, 2],
    }
    assert json.loads(path.read_text())["loss"] == 1.5 and math.isfinite(1.5)


def test_live_fixtures_into_a_missing_folder_is_a_usage_error(
    tmp_path, capsys
):  # 33
    with pytest.raises(SystemExit) as info:
        live.main([str(tmp_path / "missing" / "fixtures.json")])
    assert info.value.code == 2
    assert "the folder" in capsys.readouterr().err
    assert not (tmp_path / "missing").exists()


def test_the_checks_import_no_module_they_check():
    """A cache is known by its own ``check_use``: _checks imports no layer module (no import
    circle with mixers.attention)."""
    import ast

    from mixers import _checks

    tree = ast.parse(open(_checks.__file__).read())
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }
    assert imported <= {"__future__", "torch"}, imported
