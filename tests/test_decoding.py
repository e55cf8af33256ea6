"""The GPU's code paths, checked on a CPU (issue 31): q, k and v from one product, the static
key/value cache and the decoding step a CUDA graph replays, each against a float64 reference; and
ALiBi's choice of backend on a GPU."""

import warnings
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from mixers import alibi
from mixers.alibi import AlibiMultiHeadAttention
from mixers.attention import (
    KVCache,
    MultiHeadAttention,
    ProjectionRows,
    StaticKVCache,
)
from mixers.bench.generation import generate_without_cache
from mixers.feed_forward import fuse
from mixers.model import LanguageModel, ModelConfig, _Sampler, _turning
from mixers.positions import RotaryMultiHeadAttention

DT = torch.float64
LAYERS = {
    "attention": MultiHeadAttention,
    "alibi": AlibiMultiHeadAttention,
    "rotary": RotaryMultiHeadAttention,
}


def make_layer(kind, backend="auto"):
    torch.manual_seed(0)
    layer = LAYERS[kind](16, 4, causal=True, backend=backend)
    return layer.to(DT).eval()


def tiny_model(mixer, dtype=DT, n_layers=2, channel_mixer=None):
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=65,
        block_size=16,
        d_model=32,
        n_layers=n_layers,
        n_heads=4,
        token_mixer=mixer,
        channel_mixer=channel_mixer,
        positions="none",
        dropout=0.0,
    )
    return LanguageModel(config).to(dtype).eval()


def after_the_prompt(model, idx, caches, new):
    """What ``generate`` holds when its loop of steps starts, greedily:
    ``idx`` through ``caches``; ``out`` ``[batch, seq + new]``, ``idx`` then
    the first new token, which ``token`` also holds; and the sampler.
    Returns ``(out, token, sample)``, what ``_decoding_step`` takes."""
    batch, seq = idx.shape
    out = torch.zeros(batch, seq + new, dtype=torch.long)
    out[:, :seq] = idx
    token = torch.zeros(batch, 1, dtype=torch.long)
    sample = _Sampler(1.0, 1, None)  # greedy
    sample(model._next_logits(idx, caches), out=token)
    out[:, seq] = token[:, 0]
    return out, token, sample


# -----------------------------------------------------------------------------
# q, k and v from one [3 d_model, d_model] weight


def test_self_attention_projects_q_k_and_v_with_one_product():
    layer = MultiHeadAttention(16, 4)
    assert tuple(layer.in_proj.weight.shape) == (48, 16)
    assert set(layer.state_dict()) == {
        "in_proj.weight",
        "in_proj.bias",
        "out_proj.weight",
        "out_proj.bias",
    }
    assert isinstance(layer.q_proj, ProjectionRows)
    # views of its rows, not copies
    rows = layer.in_proj.weight[16:32]
    assert layer.k_proj.weight.data_ptr() == rows.data_ptr()
    calls = []
    layer.in_proj.register_forward_hook(lambda *args: calls.append(1))
    layer(torch.randn(2, 5, 16))
    assert len(calls) == 1


def test_the_fused_projection_equals_three_float64_products():
    torch.manual_seed(1)
    layer = MultiHeadAttention(16, 4).to(DT)
    with torch.no_grad():
        layer.in_proj.bias.normal_()
    x, memory, other = (torch.randn(2, n, 16, dtype=DT) for n in (5, 7, 7))
    weight, bias = layer.in_proj.weight, layer.in_proj.bias

    def rows(t, i):
        return (
            t @ weight[16 * i : 16 * (i + 1)].T + bias[16 * i : 16 * (i + 1)]
        )

    cases = [
        ((x, x, x, True), (x, x, x)),
        ((x, memory, memory), (x, memory, memory)),
        ((x, memory, other), (x, memory, other)),
    ]
    for arguments, inputs in cases:
        got = layer.project_qkv(*arguments)
        for i, (mine, t) in enumerate(zip(got, inputs)):
            assert torch.allclose(mine, rows(t, i), rtol=0, atol=1e-13)


def test_gradients_reach_the_fused_weight_through_its_views():
    layer = MultiHeadAttention(16, 4)
    x = torch.randn(2, 5, 16)
    layer.q_proj(x).sum().backward()
    grad = layer.in_proj.weight.grad
    assert grad[:16].abs().sum() > 0 and not grad[16:].any()


def test_other_input_widths_keep_three_layers():
    layer = MultiHeadAttention(16, 4, kdim=6, vdim=10)
    assert layer.in_proj is None
    assert all(
        isinstance(p, nn.Linear)
        for p in (layer.q_proj, layer.k_proj, layer.v_proj)
    )


# -----------------------------------------------------------------------------
# The static cache


@pytest.mark.parametrize("backend", ["eager", "sdpa"])
@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_a_static_cache_decodes_the_full_pass(kind, backend):
    layer = make_layer(kind, backend)
    x = torch.randn(2, 12, 16, dtype=DT)
    with torch.no_grad():
        full = layer(x)
        cache = StaticKVCache(16)
        outs = [layer(x[:, :5], cache=cache)]  # the prompt at once
        memory = cache.k.data_ptr(), cache.v.data_ptr()
        for t in range(5, 12):
            outs.append(layer(x[:, t : t + 1], cache=cache))
    assert torch.allclose(torch.cat(outs, 1), full, rtol=0, atol=1e-12)
    # written in place: the same memory, the counter on the device
    assert (cache.k.data_ptr(), cache.v.data_ptr()) == memory
    assert cache.k.shape[-2] == 16 and int(cache.position) == 12


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_a_full_ring_is_sliding_window_attention(kind):
    layer = make_layer(kind, "eager")
    x = torch.randn(1, 10, 16, dtype=DT)
    i, j = torch.arange(10)[:, None], torch.arange(10)[None, :]
    band = (j <= i) & (j > i - 4)  # each token and the 3 before it
    with torch.no_grad():
        expected = layer(x, mask=band)
        cache = StaticKVCache(4)
        got = torch.cat(
            [layer(x[:, t : t + 1], cache=cache) for t in range(10)], 1
        )
    assert torch.allclose(got, expected, rtol=0, atol=1e-12)
    assert sorted(cache.key_positions.tolist()) == [6, 7, 8, 9]


def test_a_static_cache_refuses_more_tokens_than_it_holds():
    layer = make_layer("attention")
    with pytest.raises(ValueError, match="capacity"):
        layer(torch.randn(1, 5, 16, dtype=DT), cache=StaticKVCache(4))
    with pytest.raises(ValueError, match="capacity"):
        StaticKVCache(0)


# -----------------------------------------------------------------------------
# generate's GPU path (graph=True), run as it is on a CPU


@pytest.mark.parametrize("max_context", [None, 6])
@pytest.mark.parametrize("mixer", sorted(LAYERS))
def test_the_gpu_path_samples_what_the_growing_cache_samples(
    mixer, max_context
):
    model = tiny_model(mixer)
    idx = torch.randint(
        0, 65, (2, 5), generator=torch.Generator().manual_seed(0)
    )
    runs = {
        graph: model.generate(
            idx,
            24,  # past block_size
            generator=torch.Generator().manual_seed(3),
            max_context=max_context,
            graph=graph,
        )
        for graph in (False, True)
    }
    assert torch.equal(runs[True], runs[False])


@pytest.mark.parametrize("mixer", sorted(LAYERS))
def test_greedy_decoding_on_the_gpu_path_equals_re_encoding(mixer):
    model = tiny_model(mixer)
    idx = torch.randint(
        0, 65, (1, 4), generator=torch.Generator().manual_seed(1)
    )
    inside = model.config.block_size - 4
    assert torch.equal(
        model.generate(idx, inside, top_k=1, graph=True),
        generate_without_cache(model, idx, inside),
    )


# -----------------------------------------------------------------------------
# The decoding step: every block it can meet, its tensors read once a call


def block_model(mixer, channel, backend):
    """A float64 ``tiny_model`` with channel mixer ``channel`` ("none",
    "relu", "swiglu", or "swiglu fused": its gate and linear branch from one
    product) and every attention layer on ``backend``."""
    model = tiny_model(mixer, channel_mixer=channel.split()[0])
    for block in model.blocks:
        block.token_mixer.backend = backend
        if channel.endswith("fused"):
            block.channel_mixer = fuse(block.channel_mixer)
    return model


@pytest.mark.parametrize("channel", ["none", "relu", "swiglu", "swiglu fused"])
@pytest.mark.parametrize("backend", ["eager", "sdpa"])
@pytest.mark.parametrize("mixer", sorted(LAYERS))
def test_the_step_decodes_every_block_it_can_meet(mixer, backend, channel):
    """Greedy, in float64: on the growing cache and on the static one, the
    step writes what the whole window through the model writes, whatever
    the block's channel mixer (none, plain, gated, gated in one product) and
    its attention's backend."""
    model = block_model(mixer, channel, backend)
    idx = torch.randint(
        0, 65, (2, 4), generator=torch.Generator().manual_seed(1)
    )
    inside = model.config.block_size - 4
    want = generate_without_cache(model, idx, inside)
    for graph in (False, True):
        got = model.generate(idx, inside, top_k=1, graph=graph)
        assert torch.equal(got, want), f"graph={graph}"


@pytest.mark.parametrize("mixer", sorted(LAYERS))
@torch.no_grad()
def test_a_token_reads_no_module_attribute(mixer, monkeypatch):
    """The step reads its blocks' parameters and submodules once per
    ``generate`` call, not at every token: a token makes no
    ``nn.Module.__getattr__``, but in ALiBi's bias hook, which reads the
    layer's slopes (a buffer)."""
    model = tiny_model(mixer, torch.float32)
    idx = torch.zeros(1, 3, dtype=torch.long)
    caches = [KVCache() for _ in model.blocks]
    out, token, sample = after_the_prompt(model, idx, caches, 7)
    step = model._decoding_step(
        token, caches, sample, out, graph=False, compile=False, steps=6
    )
    reads, read = [], nn.Module.__getattr__

    def counting(module, name):
        reads.append(name)
        return read(module, name)

    monkeypatch.setattr(nn.Module, "__getattr__", counting)
    for _ in range(6):  # rotary's table grows on the way: 3 -> 6 -> 12
        step()
    monkeypatch.undo()
    if mixer == "alibi":
        # its bias hook keys its kept biases by the slopes (two reads a
        # token), and reads them twice more each time it builds its ramp of
        # biases (at 4, 5 and 9 keys), a layer
        assert set(reads) == {"slopes"}
        assert len(reads) == (6 * 2 + 3 * 2) * model.config.n_layers
    else:
        assert reads == []
    assert all(cache.position == 9 for cache in caches)


@pytest.mark.parametrize(
    "dtype", [torch.float64, torch.float32, torch.bfloat16]
)
def test_one_token_is_turned_as_the_rotary_layer_turns_it(dtype):
    """The step's own rotation of q and k (``_turning``) gives the layer's
    ``transform_qk`` bit for bit at every position, in every dtype, and
    fetches the layer's table again only when a token passes its end."""
    layer = make_layer("rotary").to(dtype)
    reference = make_layer("rotary").to(dtype)  # its own table
    fetched, turns = [], layer._turns

    def fetch(n, device, compute):
        fetched.append(n)
        return turns(n, device, compute)

    layer._turns = fetch
    turn = _turning(layer)
    torch.manual_seed(0)
    for position in range(20):
        qkv = torch.randn(2, 3, 4, 1, 4).to(dtype)  # d_head 4
        q, k = turn(qkv[:, :2], position).unbind(1)
        want = reference.transform_qk(qkv[:, 0], qkv[:, 1], position, position)
        assert torch.equal(q, want[0]) and torch.equal(k, want[1])
        assert q.dtype == dtype
    # built for 1 position, then twice as long each time a token passed it
    assert fetched == [1, 2, 3, 5, 9, 17]


def test_sampling_on_the_gpu_path_is_reproducible():
    model = tiny_model("alibi")
    idx = torch.zeros(1, 3, dtype=torch.long)

    def sample(seed):
        g = torch.Generator().manual_seed(seed)
        return model.generate(idx, 30, generator=g, graph=True)

    assert torch.equal(sample(7), sample(7))
    assert not torch.equal(sample(7), sample(8))


@torch.no_grad()
def test_the_decoding_step_reads_and_writes_the_same_memory():
    """What a CUDA graph needs of the step: its input read where it lies, the
    caches, the token, the output and the column counter written in place,
    and nothing read back to the host."""
    model = tiny_model("rotary")
    caches = [StaticKVCache(12) for _ in model.blocks]
    idx = torch.randint(
        0, 65, (1, 4), generator=torch.Generator().manual_seed(5)
    )
    out, token, sample = after_the_prompt(model, idx, caches, 4)
    step = model._decoding_step(
        token, caches, sample, out, graph=True, compile=False, steps=3
    )
    before = [(c.k.data_ptr(), c.v.data_ptr()) for c in caches]
    pointers = token.data_ptr(), out.data_ptr()
    for _ in range(3):
        step()
    assert [(c.k.data_ptr(), c.v.data_ptr()) for c in caches] == before
    assert (token.data_ptr(), out.data_ptr()) == pointers
    assert all(int(c.position) == 7 for c in caches)
    # the tokens of the whole sequence through the model, greedily
    assert torch.equal(out, generate_without_cache(model, idx, 4))


def test_a_compiled_decoding_step_writes_what_the_eager_one_writes():
    model = tiny_model("alibi", torch.float32, n_layers=1)
    idx = torch.randint(
        0, 65, (1, 4), generator=torch.Generator().manual_seed(2)
    )
    eager = model.generate(idx, 6, top_k=1, graph=True)
    compiled = model.generate(idx, 6, top_k=1, graph=True, compile=True)
    assert torch.equal(compiled, eager)


# -----------------------------------------------------------------------------
# ALiBi on a GPU: the default backend keeps no bias over 64 MiB


def _query(length, device="cuda", dtype=torch.bfloat16):
    # only the device, shape and dtype are read
    return SimpleNamespace(
        device=torch.device(device), shape=(4, length, 512), dtype=dtype
    )


def test_auto_runs_flex_on_a_gpu_where_the_bias_would_exceed_64_mib():
    layer = AlibiMultiHeadAttention(512, 8, causal=True).eval()
    assert layer.backend == "auto"
    # 8 heads x 2048² x 2 bytes = 64 MiB: kept; 4096: 256 MiB, computed
    assert not layer._runs_flex(_query(2048), None, False, None)
    assert layer._runs_flex(_query(4096), None, False, None)
    assert not layer._runs_flex(_query(4096, "cpu"), None, False, None)
    assert not layer._runs_flex(_query(4096), None, True, None)
    training = AlibiMultiHeadAttention(512, 8, dropout=0.1, causal=True)
    assert not training.train()._runs_flex(_query(4096), None, False, None)


def test_auto_never_keeps_a_bias_over_the_limit(monkeypatch):
    monkeypatch.setattr(alibi, "MAX_KEPT_BIAS_BYTES", 1000)
    x = torch.randn(1, 20, 16)
    auto = AlibiMultiHeadAttention(16, 4, causal=True)
    sdpa = AlibiMultiHeadAttention(16, 4, causal=True, backend="sdpa")
    sdpa.load_state_dict(auto.state_dict())
    assert torch.allclose(auto(x), sdpa(x), atol=1e-6)
    # 4 heads x 20² x 4 bytes = 6,400 bytes: only "sdpa" keeps it
    assert auto._bias_cache is None and sdpa._bias_cache is not None
    auto(x[:, :10])  # 1,600 bytes: over the limit too
    assert auto._bias_cache is None
    small = AlibiMultiHeadAttention(16, 4, causal=True)
    small(x[:, :5])  # 400 bytes: kept
    assert small._bias_cache is not None


def test_the_flex_kernel_gets_whole_blocks_on_a_cpu_only():
    assert alibi._flex_lengths(40, 40, "cpu") == (128, 128)
    assert alibi._flex_lengths(40, 300, "cuda") == (40, 300)


def test_the_flex_score_mod_is_made_once_per_offset():
    layer = AlibiMultiHeadAttention(16, 4, causal=True, backend="flex")
    cpu = torch.device("cpu")
    first = layer._flex_score_mod(cpu, 0)
    assert layer._flex_score_mod(cpu, 0) is first
    assert layer._flex_score_mod(cpu, 3) is not first
    score = torch.zeros(())
    h, q_idx, kv_idx = torch.tensor(1), torch.tensor(5), torch.tensor(2)
    slope = layer.slopes[1]
    for offset in (0, 3):
        mod = layer._flex_score_mod(cpu, offset)
        expected = -slope * (5 + offset - 2)
        assert torch.allclose(mod(score, 0, h, q_idx, kv_idx), expected)


def test_a_bf16_alibi_layer_makes_its_exact_slopes_once():
    """A model cast to bf16 rounds its slopes buffer; the exact slopes are
    made once per device, not copied from the host at every (recorded)
    step."""
    layer = AlibiMultiHeadAttention(16, 4, causal=True).to(torch.bfloat16)
    cpu = torch.device("cpu")
    first = layer._exact_slopes(cpu)
    assert first.dtype == torch.float32 and layer._exact_slopes(cpu) is first
    assert torch.equal(first, alibi.alibi_slopes(4))


def _on_fake_cuda(model, only=None):
    """``model`` with its parameters (those named in ``only``, else all)
    replaced by fake CUDA tensors (torch's FakeTensor: a device and a shape,
    no memory), so that torch's AdamW is built as it is on a GPU, with no
    GPU."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    mode = FakeTensorMode()
    for module_name, module in model.named_modules():
        for name, p in list(module._parameters.items()):
            full = f"{module_name}.{name}".lstrip(".")
            if p is None or (only is not None and full not in only):
                continue
            meta = torch.empty(p.shape, dtype=p.dtype, device="meta")
            fake = FakeTensor(mode, meta, torch.device("cuda", 0))
            module._parameters[name] = nn.Parameter(fake, p.requires_grad)
    return model


def test_adamw_is_fused_on_a_gpu_only():
    from mixers.train import TrainConfig, make_optimizer

    def fused(model):
        return make_optimizer(model, TrainConfig()).defaults["fused"]

    # on a CPU: torch's default
    assert not fused(tiny_model("attention", torch.float32))
    # every parameter on a GPU: fused, as torch builds it there
    gpu = _on_fake_cuda(tiny_model("attention", torch.float32))
    assert all(p.is_cuda for p in gpu.parameters()) and fused(gpu) is True
    # a model split between a GPU and the CPU: not fused (torch refuses it)
    split = _on_fake_cuda(
        tiny_model("attention", torch.float32), only={"head.weight"}
    )
    assert not fused(split)


# -----------------------------------------------------------------------------
# Sampling: what a seed writes is pinned, and every fast path samples what the
# plain loop samples


def pinned_model(mixer):
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=65,
        block_size=16,
        d_model=32,
        n_layers=2,
        n_heads=4,
        token_mixer=mixer,
        positions=None if mixer == "gmlp" else "none",
        dropout=0.0,
    )
    return LanguageModel(config).eval()


#: The 24 tokens ``generate`` wrote after ``[[1, 2, 3], [4, 5, 6]]`` from
#: seed 11 with torch 2.13's CPU generator (the multinomial draw of
#: ``torch.multinomial``), float32 models of ``pinned_model``: a change of
#: the sampling code that changes what a seed writes fails here.
PINNED = {
    ("alibi", "plain"): [
        [28, 9, 1, 33, 1, 28, 57, 9, 41, 34, 1, 38,
         12, 16, 49, 39, 7, 10, 46, 61, 6, 21, 33, 1],
        [33, 15, 10, 49, 48, 50, 12, 18, 5, 58, 31, 60,
         29, 36, 49, 2, 9, 18, 37, 21, 4, 25, 54, 45],
    ],
    ("alibi", "top_k"): [
        [19, 37, 37, 37, 17, 17, 17, 10, 10, 17, 10, 16,
         17, 16, 28, 54, 10, 10, 28, 6, 54, 10, 46, 37],
        [18, 34, 34, 55, 64, 34, 64, 54, 34, 41, 34, 55,
         54, 55, 54, 4, 0, 4, 54, 54, 4, 58, 54, 54],
    ],
    ("rotary", "top_k"): [
        [19, 26, 37, 37, 17, 17, 17, 10, 10, 17, 10, 10,
         37, 16, 37, 37, 10, 10, 55, 6, 36, 10, 10, 37],
        [18, 18, 64, 41, 18, 34, 64, 41, 34, 41, 34, 46,
         54, 32, 41, 34, 58, 54, 56, 54, 54, 48, 54, 54],
    ],
    ("attention", "top_k"): [
        [19, 37, 37, 37, 17, 17, 17, 10, 10, 17, 10, 16,
         37, 16, 37, 37, 10, 10, 55, 17, 17, 10, 10, 37],
        [18, 43, 64, 41, 18, 34, 64, 54, 34, 46, 33, 18,
         54, 41, 54, 34, 56, 9, 33, 54, 32, 56, 54, 54],
    ],
    ("gmlp", "plain"): [
        [28, 9, 1, 33, 1, 28, 57, 9, 57, 34, 1, 50,
         12, 16, 49, 39, 7, 10, 46, 61, 6, 34, 33, 1],
        [33, 15, 54, 1, 48, 50, 12, 18, 5, 58, 31, 60,
         29, 36, 49, 2, 44, 18, 37, 21, 4, 25, 54, 1],
    ],
    ("gmlp", "top_k"): [
        [17, 37, 12, 12, 28, 36, 41, 40, 12, 17, 40, 50,
         40, 21, 30, 49, 28, 36, 60, 15, 51, 21, 30, 18],
        [17, 54, 54, 21, 0, 62, 40, 12, 0, 17, 40, 12,
         17, 37, 49, 27, 45, 21, 50, 21, 50, 21, 0, 4],
    ],
}  # fmt: skip
SAMPLING = {"plain": {}, "top_k": dict(temperature=0.7, top_k=5)}


# gMLP has no cache, so graph=True does not apply to it: the case is not made.
@pytest.mark.parametrize(
    "mixer, sampling, graph",
    [
        (mixer, sampling, graph)
        for mixer, sampling in sorted(PINNED)
        for graph in (None, True)
        if not (mixer == "gmlp" and graph)
    ],
)
def test_what_a_seed_writes_is_pinned(mixer, sampling, graph):
    model = pinned_model(mixer)
    out = model.generate(
        torch.tensor([[1, 2, 3], [4, 5, 6]]),
        24,
        generator=torch.Generator().manual_seed(11),
        graph=graph,
        **SAMPLING[sampling],
    )
    assert out[:, 3:].tolist() == PINNED[mixer, sampling]


def plain_sampling_loop(model, idx, new, temperature, top_k, generator):
    """The reference: the whole sequence through the model for every token,
    and ``torch.multinomial`` over the softmax of the (tempered, top-k)
    logits of its last position."""
    for _ in range(new):
        logits = model(idx)[0][:, -1].float() / temperature
        if top_k is not None:
            kth = logits.topk(top_k).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = torch.softmax(logits, -1)
        next_id = torch.multinomial(probs, 1, generator=generator)
        idx = torch.cat([idx, next_id], 1)
    return idx


@pytest.mark.parametrize("graph", [False, True])
@pytest.mark.parametrize(
    "options",
    [
        dict(temperature=1.0, top_k=None),
        dict(temperature=0.6, top_k=7),
        dict(temperature=1.3, top_k=1),
    ],
)
@pytest.mark.parametrize("mixer", sorted(LAYERS))
def test_every_decoding_path_samples_what_the_plain_loop_samples(
    mixer, options, graph
):
    """float64, so that the cache's rounding cannot flip a draw: the growing
    cache (graph=False) and the static cache's step (graph=True, run as it
    is on a CPU) draw the plain loop's tokens from the same seed."""
    model = tiny_model(mixer)
    idx = torch.randint(
        0, 65, (2, 3), generator=torch.Generator().manual_seed(4)
    )
    new = model.config.block_size - 3  # the plain loop reads it all
    got = model.generate(
        idx,
        new,
        generator=torch.Generator().manual_seed(9),
        graph=graph,
        **options,
    )
    want = plain_sampling_loop(
        model, idx, new, generator=torch.Generator().manual_seed(9), **options
    )
    assert torch.equal(got, want)


# -----------------------------------------------------------------------------
# Recording the step as a CUDA graph, as far as a CPU goes: the warm-up calls
# run and what they wrote is put back; the capture itself is faked (the replay
# of a faithful graph is the step itself)


class _FakeStream:
    def wait_stream(self, other):
        pass


@pytest.fixture
def fake_recording(monkeypatch):
    """Every decoding step "recorded": the warm-ups and the restoring of
    ``_record`` run for real, ``_capture`` returns the step itself; returns
    the list of captures made."""
    import contextlib

    from mixers import model as model_module

    captures = []

    def capture(step, generator):
        captures.append(generator)
        return step

    monkeypatch.setattr(model_module, "_recordable", lambda token: True)
    monkeypatch.setattr(model_module, "_capture", capture)
    monkeypatch.setattr(torch.cuda, "Stream", _FakeStream)
    monkeypatch.setattr(torch.cuda, "current_stream", _FakeStream)
    monkeypatch.setattr(
        torch.cuda, "stream", lambda stream: contextlib.nullcontext()
    )
    # torch's default generator: the CPU's here
    monkeypatch.setattr(torch.cuda, "get_rng_state", torch.get_rng_state)
    monkeypatch.setattr(torch.cuda, "set_rng_state", torch.set_rng_state)
    return captures


@pytest.mark.parametrize("seeded", [True, False])
@pytest.mark.parametrize("mixer", sorted(LAYERS))
def test_recording_puts_back_what_the_warm_ups_wrote(
    fake_recording, mixer, seeded
):
    model = tiny_model(mixer)
    idx = torch.randint(
        0, 65, (2, 3), generator=torch.Generator().manual_seed(6)
    )

    def decode(**options):
        torch.manual_seed(21)  # the default generator, where none is given
        generator = torch.Generator().manual_seed(8) if seeded else None
        return model.generate(
            idx, 20, generator=generator, graph=True, top_k=9, **options
        )

    from mixers import model as model_module

    recorded = decode()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(model_module, "_recordable", lambda token: False)
        unrecorded = decode()
    assert len(fake_recording) == 1  # the first call only
    assert torch.equal(recorded, unrecorded)


def test_a_short_call_records_no_graph(fake_recording):
    """Fewer steps than warm-up calls: nothing to gain from a graph."""
    model = tiny_model("alibi")
    model.generate(torch.zeros(1, 2, dtype=torch.long), 3, graph=True)
    assert fake_recording == []


def test_a_step_that_cannot_be_recorded_fails_when_a_graph_is_asked_for(
    fake_recording, monkeypatch
):
    from mixers import model as model_module

    def fail(step, generator):
        raise RuntimeError("CUDA error: operation not permitted")

    monkeypatch.setattr(model_module, "_capture", fail)
    with pytest.raises(RuntimeError, match="operation not permitted"):
        tiny_model("rotary").generate(
            torch.zeros(1, 2, dtype=torch.long), 10, graph=True
        )


# -----------------------------------------------------------------------------
# generate reads the model in eval mode (issue 38)


@pytest.mark.parametrize("mixer", ["alibi", "gmlp"])
def test_generate_decodes_in_eval_mode_and_puts_every_mode_back(mixer):
    """With dropout on, two greedy calls used to differ: generate put nothing
    in eval mode. Now it decodes in eval mode and gives each module its own
    mode back (a block the caller froze in eval stays so)."""
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=65,
        block_size=16,
        d_model=32,
        n_layers=2,
        n_heads=4,
        token_mixer=mixer,
        positions=None if mixer == "gmlp" else "none",
        dropout=0.5,
    )
    model = LanguageModel(config).train()
    model.blocks[0].eval()
    idx = torch.tensor([[1, 2, 3]])
    first, second = (model.generate(idx, 12, top_k=1) for _ in range(2))
    assert torch.equal(first, second)
    assert torch.equal(first, generate_without_cache(model.eval(), idx, 12))
    model.train()
    model.blocks[0].eval()
    model.generate(idx, 3, top_k=1)
    assert model.training and model.blocks[1].training
    assert not model.blocks[0].training
    assert not any(m.training for m in model.blocks[0].modules())


@torch.no_grad()
def test_a_step_left_unrecorded_warns_and_decodes_as_it_would(
    fake_recording, monkeypatch
):
    """Left to choose (graph=None, a GPU's default), a step that cannot be
    recorded says so and decodes unrecorded, from the state the warm-up
    calls found; graph=False records nothing and warns of nothing."""
    from mixers import model as model_module

    def fail(step, generator):
        raise RuntimeError("CUDA error: operation not permitted")

    monkeypatch.setattr(model_module, "_capture", fail)
    model = tiny_model("alibi")
    idx = torch.randint(
        0, 65, (1, 4), generator=torch.Generator().manual_seed(5)
    )
    outs, warned = {}, {}
    for graph in (None, False):
        caches = [StaticKVCache(16) for _ in model.blocks]
        out, token, sample = after_the_prompt(model, idx, caches, 8)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            step = model._decoding_step(
                token, caches, sample, out, graph, False, steps=7
            )
        warned[graph] = [str(w.message) for w in caught]
        for _ in range(7):
            step()
        outs[graph] = out
    assert len(warned[None]) == 1 and "decoding unrecorded" in warned[None][0]
    assert warned[False] == []
    assert torch.equal(outs[None], outs[False])
    assert torch.equal(outs[None], generate_without_cache(model, idx, 8))
