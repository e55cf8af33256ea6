"""Argument checks shared by every module: one place, one wording.

Each check raises ``TypeError`` for the wrong kind of value and ``ValueError``
for the wrong size, and names the argument and what it expected. The package's
mask convention is checked here too (see ``mixers``): every boolean mask is
True where reading is allowed.
"""

from __future__ import annotations

import math
import numbers
import os
import weakref

import torch
from torch import Tensor


def check_positive_int(name: str, value) -> int:
    """``value`` must be an int >= 1 (a bool is not accepted: ``n_heads=True``
    is surely a mistake)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be a positive int, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be a positive int, got {value}")
    return value


def check_even(name: str, value) -> int:
    """A positive even int (a width that is split into two halves)."""
    check_positive_int(name, value)
    if value % 2:
        raise ValueError(
            f"{name} must be even (it is split into two halves), got {value}"
        )
    return value


def check_dropout(value, name: str = "dropout") -> float:
    """A probability in [0, 1): dropout 1.0 would zero everything and scale by
    1/0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a float in [0, 1), got {value!r}")
    if not 0.0 <= value < 1.0:
        raise ValueError(
            f"{name} must be a probability in [0, 1), got {value}"
        )
    return float(value)


def check_scale(value) -> float | None:
    """None (the default ``1/sqrt(d_head)``) or a positive finite number."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(
            "scale must be None (1/sqrt(d_head)) or a positive finite float,"
            f" got {value!r}"
        )
    return float(value)


def check_tensor(
    x,
    name: str,
    expected: str,
    ndim: int | None = None,
    min_ndim: int = 2,
    width: int | None = None,
) -> Tensor:
    """A floating-point tensor of ``ndim`` dims (or at least ``min_ndim``),
    with at least one position along dim -2, and last dim ``width`` when given;
    ``expected`` spells the shape.
    """
    if not isinstance(x, Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor of shape {expected}, got"
            f" {type(x).__name__}"
        )
    if not x.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point tensor of shape {expected}, got"
            f" dtype {x.dtype}"
        )
    if (
        (ndim is not None and x.dim() != ndim)
        or x.dim() < min_ndim
        or (width is not None and x.shape[-1] != width)
    ):
        raise ValueError(
            f"{name} must have shape {expected}, got {tuple(x.shape)}"
        )
    check_not_empty(x, name)
    return x


def check_not_empty(x: Tensor, name: str) -> Tensor:
    """``x`` ``[..., seq, width]`` holds something along every dim; the error
    says which dim is empty (a batch of 0 is not an empty sequence)."""
    if x.numel():
        return x
    empty = [d for d, size in enumerate(x.shape) if size == 0][0]
    what = (
        "an empty sequence"
        if x.dim() >= 2 and empty == x.dim() - 2
        else "no features"
        if empty == x.dim() - 1
        else "an empty batch"
    )
    raise ValueError(
        f"{name} must hold at least one position, got shape"
        f" {tuple(x.shape)} ({what}: dim {empty} is 0)"
    )


def check_dtype_matches(x: Tensor, name: str, layer) -> Tensor:
    """``x`` in the dtype of the weight of ``layer`` (a linear layer), unless
    autocast casts them: torch's own message for a mismatch names neither the
    argument nor the way out. A layer without a weight (an ``nn.Identity`` put
    in its place) takes any dtype."""
    weight = getattr(layer, "weight", None)
    if (
        isinstance(weight, Tensor)
        and x.dtype != weight.dtype
        and not torch.compiler.is_compiling()
        and not torch.is_autocast_enabled(x.device.type)
    ):
        raise TypeError(
            f"{name} has dtype {x.dtype} but the layer's weights are"
            f" {weight.dtype}: cast one to the other (layer.to({x.dtype}) or"
            f" {name}.to({weight.dtype})), or run under torch.autocast"
        )
    return x


def check_same_dtype(**tensors: Tensor) -> None:
    """Tensors that meet in one product share a dtype (``check_same_dtype(q=q,
    k=k, v=v)``): torch refuses a mix deep inside matmul."""
    dtypes = {name: t.dtype for name, t in tensors.items()}
    if len(set(dtypes.values())) > 1:
        shown = ", ".join(f"{name} {dtype}" for name, dtype in dtypes.items())
        raise TypeError(
            f"{', '.join(dtypes)} must share one dtype, got {shown}: cast"
            " them to one (x.to(dtype))"
        )


def check_same_device(**tensors: Tensor | None) -> None:
    """Tensors that meet in one computation share a device (None: absent).
    Torch refuses most mixes in its own words, and some not at all: a
    ``meta`` query times CPU keys gives a CPU result."""
    devices = {n: t.device for n, t in tensors.items() if t is not None}
    if len(set(devices.values())) > 1:
        shown = ", ".join(
            f"{name} {device}" for name, device in devices.items()
        )
        raise ValueError(
            f"{', '.join(devices)} must be on one device, got {shown}: move"
            " them to one (x.to(device))"
        )


def check_device_matches(x: Tensor, name: str, layer) -> Tensor:
    """``x`` on the device of the weight of ``layer`` (a linear layer; one
    without a weight takes any device)."""
    weight = getattr(layer, "weight", None)
    if isinstance(weight, Tensor) and x.device != weight.device:
        raise ValueError(
            f"{name} is on {x.device} but the layer's weights are on"
            f" {weight.device}: move one to the other (layer.to({name}.device)"
            f" or {name}.to('{weight.device}'))"
        )
    return x


def _check_bool(mask, name: str, meaning: str, expected: str) -> Tensor:
    if not isinstance(mask, Tensor):
        raise TypeError(
            f"{name} must be a bool tensor {expected} ({meaning}), got"
            f" {type(mask).__name__}"
        )
    if mask.dtype != torch.bool:
        hint = (
            " (an int or float 0/1 mask: pass mask.bool())"
            if not mask.is_complex()
            else ""
        )
        raise TypeError(
            f"{name} must be a bool tensor {expected} ({meaning}), got dtype"
            f" {mask.dtype}{hint}"
        )
    return mask


def check_broadcasts(
    t: Tensor, target, name: str, expected: str = "[..., q_len, k_len]"
) -> None:
    """``t`` broadcasts to exactly the shape ``target`` (spelt
    ``expected``)."""
    try:
        fits = torch.broadcast_shapes(t.shape, target) == torch.Size(target)
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"{name} of shape {tuple(t.shape)} does not broadcast to"
            f" {expected} = {tuple(target)}"
        )


# What a mask in torch's opposite sense is told.
_INVERTED_HINT = (
    "in this package True means 'may attend' (the opposite of"
    " torch.nn.MultiheadAttention's attn_mask)"
)


def check_attention_mask(mask, target, name: str = "mask") -> Tensor:
    """A bool mask for scores of shape ``target`` ``[..., q_len, k_len]``, True
    where query i may attend to key j: either 2-D ``[q_len, k_len]`` (one
    pattern for every sample and head) or with all of the scores' dims, each
    equal to the scores' or 1 (``[batch|1, heads|1, q_len, k_len]`` for
    multi-head scores). Anything in between is refused: a 3-D ``[batch, q, k]``
    mask against ``[batch, heads, q, k]`` scores would broadcast as ``[heads,
    q, k]`` whenever batch == heads, silently. A mask that allows nothing at
    all is refused too: it is almost certainly inverted
    (torch.nn.MultiheadAttention's ``attn_mask`` is True where *not* allowed).
    """
    _check_bool(mask, name, "True = may attend", "[..., q_len, k_len]")
    if mask.dim() not in (2, len(target)):
        dims = (
            "[q_len, k_len] or [batch|1, heads|1, q_len, k_len]"
            if len(target) == 4
            else (
                f"[q_len, k_len] or {len(target)}-D [..., q_len, k_len] (each"
                " leading dim the scores' or 1)"
            )
        )
        raise ValueError(
            f"{name} must be {dims} for scores of shape {tuple(target)}, got a"
            f" {mask.dim()}-D mask of shape {tuple(mask.shape)}: its leading"
            " dims would be matched from the right, ambiguously (a [batch, q,"
            " k] mask would be read as [heads, q, k]); add the missing dims"
            " explicitly, e.g. mask[:, None] for [batch, 1, q_len, k_len]"
        )
    check_broadcasts(mask, target, name)
    if mask.numel() and not mask.any():
        raise ValueError(
            f"{name} allows no query to attend to any key: {_INVERTED_HINT};"
            " did you pass ~mask?"
        )
    # torch's causal attn_mask, triu(ones, 1), read in this package's sense:
    # one square pattern for every sample (no padding to explain it) in which
    # no query may read its own position and some query may read nothing.
    q_len, k_len = mask.shape[-2:]
    if (
        q_len == k_len == target[-1]
        and all(size == 1 for size in mask.shape[:-2])
        and q_len > 1
    ):
        square = mask.reshape(q_len, k_len)
        empty = ~square.any(dim=-1)
        if not square.diagonal().any() and empty.any():
            raise ValueError(
                f"{name} leaves a real query with no key to attend to (query"
                f" {int(empty.nonzero()[-1])}, in every sample) and lets no"
                f" query read its own position: {_INVERTED_HINT}, and a"
                " causal mask is tril, not triu; did you pass ~mask?"
            )
    return mask


def check_every_query_reads(
    attend: Tensor, real_queries: Tensor | None, name: str = "mask"
) -> None:
    """Self-attention: every real query must be allowed at least one key.

    attend: bool ``[..., q_len, k_len]``, the combined "may attend" mask
    (caller's mask, padding, causality); real_queries: bool ``[batch, q_len]``
    (``token_mask``) or None (all real). A real query with nothing to read is
    what a mask in torch's opposite sense gives (``triu(ones, 1)`` as a causal
    mask leaves the last query nothing), so it is refused; padded query rows
    are exempt, their output is ignored anyway."""
    empty = ~attend.any(dim=-1)  # [..., q_len]
    if real_queries is not None:
        empty = empty & real_queries.view(
            real_queries.shape[0], *[1] * (empty.dim() - 2), -1
        )
    if empty.any():
        where = empty.nonzero()[0].tolist()
        raise ValueError(
            f"{name} leaves a real query with no key to attend to (index"
            f" {where} of {tuple(empty.shape)}, combined with causal and"
            f" token_mask): {_INVERTED_HINT}, and a causal mask is tril, not"
            " triu; did you pass ~mask?"
        )


def check_token_mask(
    mask, batch: int, seq: int, name: str = "token_mask"
) -> Tensor:
    """A bool ``[batch, seq]`` mask, True at real tokens and False at padding.
    A sample with no real token is refused: it is almost certainly an inverted
    padding mask (torch's ``key_padding_mask`` is True at padding)."""
    expected = f"[batch, seq] = {(batch, seq)}"
    _check_bool(mask, name, "True = real token, False = padding", expected)
    if tuple(mask.shape) != (batch, seq):
        raise ValueError(
            f"{name} must have shape {expected}, got {tuple(mask.shape)}"
        )
    if not mask.any(dim=-1).all():
        raise ValueError(
            f"{name} has a sample with no real token: in this package True"
            " marks real tokens (the opposite of"
            " torch.nn.MultiheadAttention's key_padding_mask); did you pass"
            " ~mask?"
        )
    return mask


# -----------------------------------------------------------------------------
# Numbers, flags and names: every scalar argument is checked where it enters. A
# NaN compares False with everything, so ``lr <= 0`` lets it through; a string
# such as ``"no"`` is truthy, so ``if gated:`` reads it as True. Each check
# below names the argument and says what is valid.


def _real(name: str, value, rule: str) -> float:
    """``value`` as a float if it is a finite real number (int or float, not a
    bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {rule}, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be {rule}, got {value}")
    return float(value)


def check_finite_float(name: str, value) -> float:
    """Any finite real number."""
    return _real(name, value, "a finite float")


def check_positive_float(name: str, value) -> float:
    """A finite real number > 0 (a base, a temperature, a learning rate, an
    epsilon)."""
    if _real(name, value, "a positive finite float") <= 0:
        raise ValueError(
            f"{name} must be a positive finite float, got {value}"
        )
    return float(value)


def check_non_negative_float(name: str, value) -> float:
    """A finite real number >= 0 (a weight decay, a clipping norm, an initial
    range)."""
    if _real(name, value, "a non-negative finite float") < 0:
        raise ValueError(
            f"{name} must be a non-negative finite float, got {value}"
        )
    return float(value)


def check_float_in(
    name: str, value, low: float, high: float, interval: str = "[]"
) -> float:
    """A finite real number in the interval from ``low`` to ``high``;
    ``interval`` gives its two brackets: ``"[]"`` closed, ``"()"`` open,
    ``"[)"`` or ``"(]"`` half-open.
    """
    rule = f"a float in {interval[0]}{low:g}, {high:g}{interval[1]}"
    value = _real(name, value, rule)
    above = value >= low if interval[0] == "[" else value > low
    below = value <= high if interval[1] == "]" else value < high
    if not (above and below):
        raise ValueError(f"{name} must be {rule}, got {value:g}")
    return value


def check_non_negative_int(name: str, value) -> int:
    """An int >= 0 (a bool is not accepted): a count that may be zero, a seed,
    a step."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be a non-negative int, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value}")
    return value


def check_int_in(name: str, value, low: int, high: int) -> int:
    """An int in ``[low, high]`` (a bool is not accepted)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(
            f"{name} must be an int in [{low}, {high}], got {value!r}"
        )
    if not low <= value <= high:
        raise ValueError(
            f"{name} must be an int in [{low}, {high}], got {value}"
        )
    return value


def check_bool(name: str, value) -> bool:
    """True or False itself: ``gated="no"`` is truthy, and would silently mean
    True."""
    if not isinstance(value, bool):
        raise TypeError(
            f"{name} must be a bool (True or False), got {value!r}"
        )
    return value


def check_flags(**flags) -> None:
    """``check_bool`` for each keyword: ``check_flags(gated=gated,
    fused=fused)``."""
    for name, value in flags.items():
        check_bool(name, value)


def check_device(name: str, value) -> torch.device:
    """A device this process can train on: a ``torch.device`` or its name,
    of type ``cpu``, ``cuda`` (available, and an index below the GPU count)
    or ``mps`` (available). Refused here, not deep in torch at the first
    step."""
    rule = "a torch.device or its name: 'cpu', 'cuda', 'cuda:N' or 'mps'"
    if not isinstance(value, (str, torch.device)):
        raise TypeError(f"{name} must be {rule}, got {value!r}")
    try:
        device = torch.device(value)
    except RuntimeError:
        raise ValueError(f"{name} must be {rule}, got {value!r}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"{name}={value!r} but CUDA is not available here"
            " (torch.cuda.is_available() is False): use 'cpu'"
        )
    if device.type == "cuda" and device.index is not None:
        count = torch.cuda.device_count()
        if device.index >= count:
            raise ValueError(
                f"{name}={value!r} but this machine has {count} CUDA"
                f" device{'' if count == 1 else 's'} (cuda:0 to"
                f" cuda:{count - 1})"
            )
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"{name}={value!r} but MPS is not available here")
    if device.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"{name} must be {rule}, got {value!r}")
    return device


def check_choice(name: str, value, choices) -> str:
    """One of ``choices`` (names compared as they are: ``"ReLU"`` is not
    ``"relu"``)."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(
            f"{name} must be one of {tuple(choices)}, got {value!r}"
        )
    return value


def check_token_ids(
    ids, name: str, vocab_size: int, expected: str = "[batch, seq]"
) -> Tensor:
    """An int64 tensor of shape ``expected`` (2-d, at least one position) whose
    every id lies in ``[0, vocab_size)``: an id past the embedding table would
    fail deep inside torch, or on a GPU as an asynchronous device assert. The
    ids' range is read back (one ``aminmax`` pass) only for a CPU tensor: on a
    GPU that read would make the host wait for every queued step, so there the
    ids are checked where a model meets its data (``train``, ``sample``); and
    never inside ``torch.compile``, where a data-dependent branch would split
    the graph.
    """
    if not isinstance(ids, Tensor) or ids.dtype != torch.long:
        got = ids.dtype if isinstance(ids, Tensor) else type(ids).__name__
        raise TypeError(
            f"{name} must be an int64 tensor {expected}, got {got}"
        )
    if ids.dim() != 2 or not ids.numel():
        empty = (
            " (an empty batch)"
            if ids.dim() == 2 and ids.shape[0] == 0
            else " (an empty sequence)"
            if ids.dim() == 2
            else ""
        )
        raise ValueError(
            f"{name} must have shape {expected} with batch >= 1 and seq >="
            f" 1, got {tuple(ids.shape)}{empty}"
        )
    if torch.compiler.is_compiling() or ids.device.type != "cpu":
        return ids
    low, high = torch.aminmax(ids)
    low, high = int(low), int(high)
    if low < 0 or high >= vocab_size:
        raise ValueError(
            f"{name} holds token ids in [{low}, {high}], outside the"
            f" vocabulary [0, {vocab_size}) (vocab_size={vocab_size}): was the"
            " model built for another tokenizer?"
        )
    return ids


# -----------------------------------------------------------------------------
# The attention family's checks: one step at construction
# (``check_attention_arguments``) and one at the entry of ``forward``
# (``check_attention_call``), so that the layers' code is the computation.


def check_attention_arguments(
    d_model, n_heads, kdim, vdim, dropout, scale, **flags
) -> None:
    """The constructor arguments of :class:`MultiHeadAttention` (the whole
    family's): :math:`d_\\text{model}` must split into :math:`H` heads of
    :math:`d_\\text{head} = d_\\text{model} / H` channels. ``flags``:
    ``bias``, ``causal``, ``cpu_bf16_sdpa_in_float32``."""
    check_positive_int("d_model", d_model)
    check_positive_int("n_heads", n_heads)
    check_flags(**flags)
    if d_model % n_heads != 0:
        raise ValueError(
            f"d_model={d_model} must be divisible by n_heads={n_heads}"
        )
    for name, width in (("kdim", kdim), ("vdim", vdim)):
        if width is not None:
            check_positive_int(name, width)
    check_dropout(dropout)
    check_scale(scale)


def check_attention_call(
    layer, query, key, value, mask, token_mask, cache, need_weights=False
):
    """What a :class:`MultiHeadAttention` ``layer``'s ``forward`` is given:
    three float tensors of the layer's widths and dtype, sharing their batch
    (and key and value their length), the masks in the package's sense, and
    for decoding a cache and the new tokens alone; ``need_weights`` a bool
    (``"no"`` is truthy). In self-attention every real query must be allowed
    some key, causality and padding included: a mask in torch's opposite
    sense (``triu``) fails there."""
    check_bool("need_weights", need_weights)
    if cache is not None:
        return _check_decoding_call(
            layer, query, (key, value, mask, token_mask), cache
        )
    # The queries are the keys when key is None or is the query itself
    # (``project_heads`` then zeroes the padded queries with the keys), and
    # every real query must read some key.
    queries_are_keys = key is None or key is query
    key = query if key is None else key
    value = key if value is None else value
    for name, x, length, width in (
        ("query", query, "q_len", "d_model"),
        ("key", key, "k_len", "kdim"),
        ("value", value, "k_len", "vdim"),
    ):
        size = getattr(layer, width)
        expected = f"[batch, {length}, {width}={size}]"
        check_tensor(x, name, expected, ndim=3, width=size)
    check_same_dtype(query=query, key=key, value=value)
    check_dtype_matches(query, "query", layer.q_proj)
    check_same_device(
        query=query, key=key, value=value, mask=mask, token_mask=token_mask
    )
    check_device_matches(query, "query", layer.q_proj)
    if key.shape[0] != query.shape[0] or value.shape[:2] != key.shape[:2]:
        raise ValueError(
            f"key and value must have shapes [batch={query.shape[0]},"
            " k_len, ...] with the same k_len, got key"
            f" {tuple(key.shape)}, value {tuple(value.shape)}"
        )
    (batch, q_len), k_len = query.shape[:2], key.shape[1]
    if mask is not None:
        check_attention_mask(mask, (batch, layer.n_heads, q_len, k_len))
    if token_mask is not None:
        check_token_mask(token_mask, batch, k_len)
    if queries_are_keys and mask is not None:
        attend = mask
        if token_mask is not None:
            attend = attend & token_mask[:, None, None, :]
        if layer.causal and q_len > 1:
            ones = torch.ones(q_len, q_len, dtype=torch.bool)
            attend = attend & ones.tril().to(query.device)
        check_every_query_reads(attend, token_mask)


def _check_decoding_call(layer, query, others, cache) -> None:
    """A decoding step: a key/value cache, and the new tokens as ``query``
    alone; then the cache checks its own use (``check_cache_use``). A cache
    is known by its ``check_use`` method, so this module imports none."""
    if not callable(getattr(cache, "check_use", None)):
        raise TypeError(
            "cache must be a mixers.attention.KVCache or StaticKVCache, got"
            f" {type(cache).__name__}"
        )
    if any(x is not None for x in others):
        raise ValueError(
            "cache is for decoding a self-attention layer: pass the new"
            " tokens as query alone, with no key, value, mask or"
            " token_mask"
        )
    expected = f"[batch, new, d_model={layer.d_model}]"
    check_tensor(query, "query", expected, ndim=3, width=layer.d_model)
    check_dtype_matches(query, "query", layer.q_proj)
    check_device_matches(query, "query", layer.q_proj)
    cache.check_use(layer, query)


def check_cache_use(cache, layer, query):
    """What a key/value ``cache`` may be used for, before ``layer`` reads or
    writes it: the keys of one causal layer, for one batch of sequences.
    Returns its owner (a weak reference to the layer) and batch size, set at
    its first use.

    A cache holds the past keys of the layer that wrote them; another layer's
    queries would read them as their own. It holds no future keys, which a
    bidirectional layer (``causal=False``) reads, so its answer would differ
    from the full pass. And its buffers hold the first call's batch: a batch
    of another size would be broadcast against them, or refused in torch's
    words. Inside ``torch.compile`` nothing is checked: the call it traces
    was checked eagerly first."""
    if torch.compiler.is_compiling():
        return cache.owner, cache.batch
    if not layer.causal:
        raise ValueError(
            "cache decodes a causal layer, but this layer has causal=False:"
            " its tokens read the ones after them, which a cache never"
            " holds; call the layer on the whole sequence instead"
        )
    owner = cache.owner() if cache.owner is not None else None
    if cache.owner is not None and owner is not layer:
        raise ValueError(
            "cache holds the keys and values of another layer (it is bound"
            " to the first layer that used it): give each layer a cache of"
            " its own, e.g. [KVCache() for _ in layers]"
        )
    batch = query.shape[0]
    if cache.batch is not None and batch != cache.batch:
        raise ValueError(
            f"cache holds the keys of a batch of {cache.batch} (its size at"
            f" its first use), got query of batch {batch}"
            f" {tuple(query.shape)}: start a new cache for another batch"
        )
    return cache.owner or weakref.ref(layer), batch


def check_qkv(q, k, v, same_d: bool = True) -> tuple[int, ...]:
    """Checks q ``[..., q_len, d_k]``, k ``[..., k_len, d_k]``, v ``[...,
    k_len, d_v]`` (k's width may differ from q's unless ``same_d``); returns
    the scores' shape ``[..., q_len, k_len]``."""
    check_tensor(q, "q", "[..., q_len, d_k]")
    check_tensor(k, "k", "[..., k_len, d_k]")
    check_tensor(v, "v", "[..., k_len, d_v]")
    check_same_dtype(q=q, k=k, v=v)
    check_same_device(q=q, k=k, v=v)
    if same_d and k.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"k must have the last dim d_k={q.shape[-1]} of q, got shape"
            f" {tuple(k.shape)}"
        )
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"v must have shape [..., k_len={k.shape[-2]}, d_v] like k, got"
            f" {tuple(v.shape)}"
        )
    try:
        batch_shape = torch.broadcast_shapes(
            q.shape[:-2], k.shape[:-2], v.shape[:-2]
        )
    except RuntimeError:
        raise ValueError(
            f"the leading dims of q {tuple(q.shape)}, k {tuple(k.shape)} and "
            f"v {tuple(v.shape)} must broadcast"
        ) from None
    return (*batch_shape, q.shape[-2], k.shape[-2])


def check_bias(bias, target) -> None:
    """An additive float bias broadcastable to the scores' shape ``target``."""
    if not isinstance(bias, Tensor) or not bias.is_floating_point():
        got = bias.dtype if isinstance(bias, Tensor) else type(bias).__name__
        raise TypeError(
            "bias must be a floating-point (additive) tensor broadcastable to"
            f" [..., q_len, k_len], got {got}"
        )
    check_broadcasts(bias, target, "bias")


def check_softmax_inputs(scores, mask, dim: int = -1) -> None:
    """Float scores, a ``dim`` among theirs, and a bool mask (True = keep)
    that broadcasts to them."""
    if not isinstance(scores, Tensor) or not scores.is_floating_point():
        got = scores.dtype if isinstance(scores, Tensor) else type(scores)
        raise TypeError(
            f"scores must be a floating-point tensor [..., n], got {got}"
        )
    check_int_in("dim", dim, -max(scores.dim(), 1), max(scores.dim(), 1) - 1)
    if mask is not None:
        _check_bool(mask, "mask", "True = keep", "broadcastable to scores")
        check_broadcasts(mask, scores.shape, "mask", "scores' shape")


# -----------------------------------------------------------------------------
# ALiBi's checks: the bias's arguments, and the flex backend's call.


def check_q_offset(q_offset, q_len: int, k_len: int) -> int:
    """The index of query 0 among the keys: an int >= 0, by default
    :math:`k_\\text{len} - q_\\text{len}` (the queries are the last keys),
    which needs :math:`q_\\text{len} \\le k_\\text{len}`."""
    if q_offset is None:
        if q_len > k_len:
            raise ValueError(
                f"q_len={q_len} > k_len={k_len}: the default q_offset = k_len"
                " - q_len would put the queries before the first key; pass"
                " q_offset (>= 0) explicitly"
            )
        return k_len - q_len
    rule = "an int >= 0 (the index of query 0 among the keys)"
    if not isinstance(q_offset, int) or isinstance(q_offset, bool):
        raise TypeError(f"q_offset must be {rule}, got {q_offset!r}")
    if q_offset < 0:
        raise ValueError(f"q_offset must be {rule}, got {q_offset}")
    return q_offset


def _check_positions(positions, name: str, length_name: str, length: int):
    """Positions must be real numbers ``[length]`` or ``[batch, length]``."""
    expected = f"[{length_name}={length}] or [batch, {length_name}={length}]"
    if not isinstance(positions, Tensor):
        raise TypeError(
            f"{name} must be a tensor of shape {expected}, got"
            f" {type(positions).__name__}"
        )
    if positions.dtype == torch.bool or positions.is_complex():
        raise TypeError(
            f"{name} must hold integer or floating-point positions, got dtype"
            f" {positions.dtype}"
        )
    if positions.dim() not in (1, 2) or positions.shape[-1] != length:
        raise ValueError(
            f"{name} must have shape {expected}, got {tuple(positions.shape)}"
        )
    check_finite_positions(name, positions)


def check_finite_positions(name: str, positions: Tensor) -> None:
    """Float positions hold finite numbers: a NaN position gives NaN scores
    for every query that reads it. (Integer positions cannot be NaN; they are
    what the layers pass, so no layer's step waits to read this back.)"""
    if (
        positions.is_floating_point()
        and not torch.compiler.is_compiling()
        and not bool(torch.isfinite(positions).all())
    ):
        raise ValueError(f"{name} must hold finite positions, got NaN or inf")


def check_alibi_bias_arguments(
    q_len, k_len, q_offset, query_positions, key_positions, dtype, **flags
) -> int:
    """``alibi_bias``'s arguments; returns ``q_offset`` with its default
    filled in. ``flags``: ``causal``, and ``symmetric``, a bool or None (its
    default: symmetric exactly when not causal)."""
    if flags["symmetric"] is None:
        flags["symmetric"] = not flags["causal"]
    check_flags(**flags)
    if dtype is not None and (
        not isinstance(dtype, torch.dtype) or not dtype.is_floating_point
    ):
        # -inf has no integer or bool form: int64 would hold -9.2e18 there.
        raise TypeError(
            "dtype must be None (the slopes' dtype) or a floating-point"
            f" torch.dtype, got {dtype!r}"
        )
    check_positive_int("q_len", q_len)
    check_positive_int("k_len", k_len)
    q_offset = check_q_offset(q_offset, q_len, k_len)
    if key_positions is not None:
        _check_positions(key_positions, "key_positions", "k_len", k_len)
    if query_positions is not None:
        _check_positions(query_positions, "query_positions", "q_len", q_len)
    elif key_positions is not None and q_offset + q_len > k_len:
        raise ValueError(
            "query_positions is needed when key_positions are given and"
            f" q_offset + q_len = {q_offset + q_len} > k_len = {k_len}:"
            " queries past the last key have no key positions to take"
            " theirs from"
        )
    if (
        query_positions is not None
        and key_positions is not None
        and key_positions.dim() == query_positions.dim() == 2
        and key_positions.shape[0] != query_positions.shape[0]
    ):
        raise ValueError(
            f"query_positions {tuple(query_positions.shape)} and key_positions"
            f" {tuple(key_positions.shape)} must have the same batch size"
        )
    return q_offset


def check_flex_call(layer, query, key, value, mask, token_mask) -> None:
    """An ALiBi layer's call on its flex backend: the layer's checks
    (``check_attention_call``), no attention dropout while training, and the
    queries the last keys."""
    if layer.training and layer.dropout > 0:
        raise ValueError(
            "backend='flex' has no attention dropout, but"
            f" dropout={layer.dropout} while training: use backend 'sdpa'"
            " or 'eager' to train with dropout"
        )
    check_attention_call(layer, query, key, value, mask, token_mask, None)
    k_len = query.shape[1] if key is None else key.shape[1]
    check_q_offset(None, query.shape[1], k_len)


def check_flex_backward(q: Tensor, k: Tensor, v: Tensor) -> None:
    """FlexAttention has no backward pass on a CPU. Checked before the call,
    not left to torch: a compiled call that raises inside its backward is not
    retried, and later calls in the process ran several times slower."""
    if (
        q.device.type == "cpu"
        and torch.is_grad_enabled()
        and any(x.requires_grad for x in (q, k, v))
    ):
        raise NotImplementedError(
            "backend='flex' has no backward pass on a CPU (torch"
            f" {torch.__version__}): use backend='sdpa' to train on a CPU,"
            " or call it under torch.no_grad() (or"
            " torch.inference_mode()) for inference"
        )


def check_context_and_question(x, question, token_mask, d_model) -> None:
    """``BiAttention``'s inputs: a context and a question of width
    ``d_model``, one batch, and the question's ``token_mask``."""
    for name, t, length in (
        ("x", x, "x_len"),
        ("question", question, "q_len"),
    ):
        expected = f"[batch, {length}, d_model={d_model}]"
        check_tensor(t, name, expected, ndim=3, width=d_model)
    if x.shape[0] != question.shape[0]:
        raise ValueError(
            "x and question must have the same batch size, got"
            f" {tuple(x.shape)}, {tuple(question.shape)}"
        )
    if token_mask is not None:
        check_token_mask(token_mask, *question.shape[:2])


def check_padded(x, token_mask) -> None:
    """``zero_padding``'s arguments: x ``[batch, seq, ...]`` and its
    ``token_mask`` ``[batch, seq]``."""
    check_tensor(x, "x", "[batch, seq, ...]", min_ndim=2)
    _check_bool(
        token_mask,
        "token_mask",
        "True = real token",
        f"[batch, seq] = {tuple(x.shape[:2])}",
    )
    if token_mask.shape != x.shape[:2]:
        raise ValueError(
            "token_mask must have shape [batch, seq] ="
            f" {tuple(x.shape[:2])} (the first two dims of x), got"
            f" {tuple(token_mask.shape)}"
        )


def check_key_token_mask(token_mask) -> None:
    """A bool ``[batch, k_len]`` token mask, True at real tokens."""
    if (
        not isinstance(token_mask, Tensor)
        or token_mask.dtype != torch.bool
        or token_mask.dim() != 2
    ):
        got = (
            f"{token_mask.dtype} {tuple(token_mask.shape)}"
            if isinstance(token_mask, Tensor)
            else type(token_mask).__name__
        )
        raise TypeError(
            "token_mask must be a bool tensor [batch, k_len] (True = real"
            f" token), got {got}"
        )


def check_rotary_inputs(q_or_k, positions, base) -> tuple[int, ...]:
    """Checks ``rotary_embedding``'s arguments (``base`` 0 would give
    infinite angles: NaN or zeros out); returns the shape its angles take,
    ``[seq, 1]`` for positions ``[seq]`` (shared by the leading dims), or
    ``[batch, 1, seq, 1]`` for per-sample positions ``[batch, seq]``."""
    if not isinstance(q_or_k, Tensor) or not q_or_k.is_floating_point():
        got = (
            f"dtype {q_or_k.dtype}"
            if isinstance(q_or_k, Tensor)
            else type(q_or_k).__name__
        )
        raise TypeError(
            "q_or_k must be a floating-point tensor [batch, heads, seq,"
            f" d_head], got {got}"
        )
    if q_or_k.dim() < 2 or q_or_k.shape[-1] % 2:
        raise ValueError(
            "q_or_k must have shape [batch, heads, seq, d_head] with d_head"
            f" even, got {tuple(q_or_k.shape)}"
        )
    seq = q_or_k.shape[-2]
    check_not_empty(q_or_k, "q_or_k")
    if (
        not isinstance(positions, Tensor)
        or positions.dtype == torch.bool
        or positions.is_complex()
    ):
        raise TypeError(
            "positions must be an int or float tensor [seq] or [batch, seq]"
        )
    check_finite_positions("positions", positions)
    if positions.dim() == 1 and positions.shape[0] == seq:
        shape = (seq, 1)  # broadcasts over the leading dims
    elif (
        positions.dim() == 2
        and q_or_k.dim() == 4
        and positions.shape == (q_or_k.shape[0], seq)
    ):
        # one row per sample, shared by the heads
        shape = (positions.shape[0], 1, seq, 1)
    else:
        raise ValueError(
            f"positions must have shape [seq={seq}] or"
            f" [batch={q_or_k.shape[0]}, seq={seq}] (the latter for a 4-d"
            f" q_or_k), got {tuple(positions.shape)}"
        )
    check_positive_float("base", base)
    return shape


# -----------------------------------------------------------------------------
# LanguageModel.generate's checks: the prompt, the generator, the switches of
# its decoding paths and the memory the output takes.


def check_prompt(idx: Tensor, device: torch.device) -> None:
    """A prompt ``idx`` (token ids already checked) with at least one row,
    on the model's ``device``."""
    if idx.shape[0] == 0:
        raise ValueError(
            "idx must hold at least one prompt ([batch >= 1, seq >= 1]):"
            f" generate continues each row, got shape {tuple(idx.shape)}"
        )
    if idx.device != device:
        raise ValueError(
            f"idx is on {idx.device} but the model's weights are on"
            f" {device}: move the prompt there (idx.to('{device}'))"
        )


def check_generator(generator, device: torch.device) -> None:
    """None (torch's default generator) or a ``torch.Generator`` on the
    prompt's device."""
    if generator is None:
        return
    if not isinstance(generator, torch.Generator):
        raise TypeError(
            "generator must be a torch.Generator or None, got"
            f" {type(generator).__name__}"
        )
    if generator.device.type != device.type:
        raise ValueError(
            f"generator is on {generator.device} but idx is on {device}:"
            f" make it there (torch.Generator(device='{device}'))"
        )


def check_decoding_switches(
    graph, compile: bool, cached: bool, static: bool, device
) -> None:
    """``graph=True`` and ``compile=True`` apply to a key/value cache's
    decoding step (``compile`` to the static cache's only): refused where
    ``generate`` would ignore them."""
    why = (
        "this model decodes without a key/value cache (decodes_with_cache()"
        " is False: positions added to its input, or a token mixer that is"
        " not attention), recomputing its window for every token"
    )
    if graph and not cached:
        raise ValueError(
            f"graph=True records a key/value cache's decoding step, but {why}:"
            " leave graph None"
        )
    if compile and not cached:
        raise ValueError(
            f"compile=True compiles a key/value cache's decoding step, but"
            f" {why}: leave compile False"
        )
    if compile and not static:
        raise ValueError(
            "compile=True compiles the static cache's decoding step (graph="
            f"True, or graph=None on a GPU), but this call on {device} decodes"
            " through a cache that grows, whose every token has new shapes"
            " to compile again: pass graph=True as well, or leave compile"
            " False"
        )


def _memory_bytes(device: torch.device) -> int | None:
    """Free memory of a GPU, the physical memory of a CPU machine; None where
    unknown."""
    try:
        if device.type == "cuda":
            return torch.cuda.mem_get_info(device)[0]
        if device.type == "cpu":
            return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError, RuntimeError):
        return None
    return None


def check_decoding_memory(
    idx: Tensor, max_new_tokens: int, cache_bytes: int
) -> None:
    """The output ``[batch, seq + max_new_tokens]`` (int64) and the static
    caches' ``cache_bytes`` fit in the device's memory: a clear error before
    any work, not the allocator's."""
    batch, seq = idx.shape
    needed = batch * (seq + max_new_tokens) * 8 + cache_bytes
    have = _memory_bytes(idx.device)
    if have is not None and needed > have:
        gib = 2**30
        raise ValueError(
            f"max_new_tokens={max_new_tokens} needs {needed / gib:,.1f} GiB on"
            f" {idx.device} for the output ({batch} x"
            f" {seq + max_new_tokens:,} token ids) and the caches, more than"
            f" its {have / gib:,.1f} GiB: ask for fewer tokens (max_context"
            " bounds the caches)"
        )
