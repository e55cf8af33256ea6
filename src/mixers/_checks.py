"""Argument checks shared by every module: one place, one wording.

Each check raises ``TypeError`` for the wrong kind of value and ``ValueError`` for the wrong
size, and names the argument and what it expected. The package's mask convention is checked
here too (see ``mixers``): every boolean mask is True where reading is allowed.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def check_positive_int(name: str, value) -> int:
    """``value`` must be an int >= 1 (a bool is not accepted: ``n_heads=True`` is surely a mistake)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be a positive int, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be a positive int, got {value}")
    return value


def check_even(name: str, value) -> int:
    """A positive even int (a width that is split into two halves)."""
    check_positive_int(name, value)
    if value % 2:
        raise ValueError(f"{name} must be even (it is split into two halves), got {value}")
    return value


def check_dropout(value, name: str = "dropout") -> float:
    """A probability in [0, 1): dropout 1.0 would zero everything and scale by 1/0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a float in [0, 1), got {value!r}")
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1), got {value}")
    return float(value)


def check_scale(value) -> float | None:
    """None (the default ``1/sqrt(d_head)``) or a positive finite number."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"scale must be None (1/sqrt(d_head)) or a positive finite float, got {value!r}")
    return float(value)


def check_tensor(x, name: str, expected: str, ndim: int | None = None, min_ndim: int = 2,
                 width: int | None = None) -> Tensor:
    """A floating-point tensor of ``ndim`` dims (or at least ``min_ndim``), with at least one
    position along dim -2, and last dim ``width`` when given; ``expected`` spells the shape."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape {expected}, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor of shape {expected}, got dtype {x.dtype}")
    if (ndim is not None and x.dim() != ndim) or x.dim() < min_ndim or (width is not None and x.shape[-1] != width):
        raise ValueError(f"{name} must have shape {expected}, got {tuple(x.shape)}")
    if x.shape[-2] == 0:
        raise ValueError(f"{name} must hold at least one position, got shape {tuple(x.shape)} (an empty sequence)")
    return x


def _check_bool(mask, name: str, meaning: str, expected: str) -> Tensor:
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name} must be a bool tensor {expected} ({meaning}), got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        hint = " (an int or float 0/1 mask: pass mask.bool())" if not mask.is_complex() else ""
        raise TypeError(f"{name} must be a bool tensor {expected} ({meaning}), got dtype {mask.dtype}{hint}")
    return mask


def check_broadcasts(t: Tensor, target, name: str, expected: str = "[..., q_len, k_len]") -> None:
    """``t`` broadcasts to exactly the shape ``target`` (spelt ``expected``)."""
    try:
        fits = torch.broadcast_shapes(t.shape, target) == torch.Size(target)
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(f"{name} of shape {tuple(t.shape)} does not broadcast to {expected} = {tuple(target)}")


def check_attention_mask(mask, target, name: str = "mask") -> Tensor:
    """A bool mask broadcastable to the scores' shape ``target`` ``[..., q_len, k_len]``, True where
    query i may attend to key j. A mask that allows nothing at all is refused: it is almost
    certainly inverted (torch.nn.MultiheadAttention's ``attn_mask`` is True where *not* allowed)."""
    _check_bool(mask, name, "True = may attend", "[..., q_len, k_len]")
    check_broadcasts(mask, target, name)
    if mask.numel() and not mask.any():
        raise ValueError(f"{name} allows no query to attend to any key: in this package True means 'may attend' "
                         "(the opposite of torch.nn.MultiheadAttention's attn_mask); did you pass ~mask?")
    return mask


def check_token_mask(mask, batch: int, seq: int, name: str = "token_mask") -> Tensor:
    """A bool ``[batch, seq]`` mask, True at real tokens and False at padding. A sample with no
    real token is refused: it is almost certainly an inverted padding mask (torch's
    ``key_padding_mask`` is True at padding)."""
    expected = f"[batch, seq] = {(batch, seq)}"
    _check_bool(mask, name, "True = real token, False = padding", expected)
    if tuple(mask.shape) != (batch, seq):
        raise ValueError(f"{name} must have shape {expected}, got {tuple(mask.shape)}")
    if not mask.any(dim=-1).all():
        raise ValueError(f"{name} has a sample with no real token: in this package True marks real tokens "
                         "(the opposite of torch.nn.MultiheadAttention's key_padding_mask); did you pass ~mask?")
    return mask
