"""Shared fixtures: the packaged corpus and its dataset are loaded once per test session."""

import warnings

import pytest
import torch
from torch.nn.attention.flex_attention import flex_attention

import mixers.alibi as alibi_module
from mixers.data import CharDataset, load_corpus

# The tests use tiny models, for which one intra-op thread is fastest; on a machine whose cores
# are shared (CI runners, a busy laptop) two OpenMP threads contending for them made a 2-layer
# d_model-32 forward pass ~300x slower (0.3 s instead of 1 ms). Results do not depend on it.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def corpus_text() -> str:
    """The packaged Tiny Shakespeare text (checksum verified by ``load_corpus``)."""
    return load_corpus()


@pytest.fixture(scope="session")
def shakespeare(corpus_text) -> CharDataset:
    """The default 90/10 split of the packaged corpus."""
    return CharDataset.from_text(corpus_text)


@pytest.fixture
def uncompiled_flex(monkeypatch):
    """Route the ALiBi flex path through torch's uncompiled flex_attention (same function, no kernel)."""
    monkeypatch.setattr(
        alibi_module, "_compiled_flex_attention", flex_attention
    )
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=".*flex_attention called without torch.compile.*"
        )
        yield
