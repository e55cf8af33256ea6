"""Run by tests/test_conventions.py in a fresh process: does ALiBi's compiled FlexAttention path
give the eager answer at every length, head count and mask?

``python tests/flex_equals_eager.py THREADS ORDER`` (ORDER ``forward`` or ``reversed``: the order
in which the shapes are compiled) prints one JSON line: the largest |flex - eager| per case. The
caller sets ``TORCHINDUCTOR_CACHE_DIR`` to a new empty folder, so nothing compiled by an earlier
process (a warm cache can hide a kernel's bugs) is reused.
"""

import json
import sys

import torch

from mixers.alibi import AlibiMultiHeadAttention

LENGTHS = (16, 40, 100, 130, 200)
HEADS = (4, 6)
BATCH, D_HEAD = 3, 8


def cases(order: str):
    shapes = [(length, heads) for length in LENGTHS for heads in HEADS]
    for length, heads in shapes if order == "forward" else shapes[::-1]:
        yield "causal", length, heads
    for heads in (
        HEADS if order == "forward" else HEADS[::-1]
    ):  # padding and bidirectional, one length
        yield "causal+token_mask", 40, heads
        yield "bidirectional+token_mask", 130, heads


def error(kind: str, length: int, heads: int) -> float:
    layer = AlibiMultiHeadAttention(
        heads * D_HEAD, heads, causal=kind.startswith("causal"), backend="flex"
    ).eval()
    x = torch.randn(BATCH, length, heads * D_HEAD)
    token_mask = None
    if (
        "token_mask" in kind
    ):  # sample 1 padded on the left, sample 2 on the right
        token_mask = torch.ones(BATCH, length, dtype=torch.bool)
        token_mask[1, : length // 3] = False
        token_mask[2, -length // 4 :] = False
    with torch.no_grad():
        flex = layer(x, token_mask=token_mask)
        layer.backend = "eager"
        eager = layer(x, token_mask=token_mask)
    real = (
        token_mask
        if token_mask is not None
        else torch.ones(BATCH, length, dtype=torch.bool)
    )
    return (
        (flex - eager)[real].abs().max().item()
    )  # NaN compares as not <= tolerance


if __name__ == "__main__":
    threads, order = int(sys.argv[1]), sys.argv[2]
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    errors = {
        f"{kind} L={length} H={heads}": error(kind, length, heads)
        for kind, length, heads in cases(order)
    }
    errors["causal L=16 H=4, again last"] = error(
        "causal", 16, 4
    )  # the first shape still right after the others
    print(json.dumps(errors))
