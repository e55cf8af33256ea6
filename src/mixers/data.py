"""Tiny Shakespeare, a character tokenizer, splits and batches.

The corpus ships inside the package (``mixers/tinyshakespeare.txt``) so that a
``pip install`` on Colab has it too and nothing is downloaded at run time. Its
sha256 is checked every time it is loaded: a truncated or edited file would
silently change every number in the book.

Shapes: token ids are ``int64``; a batch is ``(x, y)`` with both ``[batch,
seq]`` and ``y`` shifted one character to the right of ``x``.
"""

from __future__ import annotations

import hashlib
import numbers
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Iterator

import torch

from ._checks import check_float_in, check_positive_int

CORPUS_SHA256 = (
    "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
)
CORPUS_FILE = "tinyshakespeare.txt"


class CorpusError(RuntimeError):
    """The corpus is missing, is not the file the book was built on, or is not
    UTF-8 text."""


def corpus_path() -> Path:
    """Where the packaged corpus lives on this machine."""
    return Path(str(resources.files("mixers").joinpath(CORPUS_FILE)))


def load_corpus(
    path: str | Path | None = None, sha256: str | None = CORPUS_SHA256
) -> str:
    """Read the corpus and verify its checksum.

    ``path`` defaults to the copy shipped with the package. Pass
    ``sha256=None`` to read another text file without a checksum (your own
    corpus); it must be UTF-8. A path that is missing, a directory or
    unreadable is refused with a ``CorpusError`` saying so.
    """
    if sha256 is not None and not isinstance(sha256, str):
        raise TypeError(
            f"sha256 must be None or a hex digest str, got {sha256!r}"
        )
    packaged = path is None
    path = corpus_path() if packaged else path
    raw = _read_corpus(path, packaged)
    path = Path(path)
    if sha256 is not None:
        digest = hashlib.sha256(raw).hexdigest()
        if digest != sha256:
            own = (
                ""
                if packaged
                else "; to read a text of your own, pass sha256=None"
            )
            raise CorpusError(
                f"corpus file {path} has sha256 {digest}, expected {sha256}: "
                f"the file is altered or truncated{own}"
            )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CorpusError(
            f"corpus file {path} is not UTF-8 text (byte {error.start}:"
            f" {error.reason}); re-encode it as UTF-8"
        ) from None


def _read_corpus(path, packaged: bool) -> bytes:
    """The bytes of the corpus file ``path``; a ``CorpusError`` that says what
    is wrong with that path: a missing packaged corpus needs the package
    reinstalled, a path of the caller's needs that path mended."""
    if not isinstance(path, (str, Path)):
        raise TypeError(
            f"path must be None (the packaged corpus), a str or a Path, got"
            f" {path!r}"
        )
    path = Path(path)
    if packaged and not path.is_file():
        raise CorpusError(
            f"corpus file not found: {path}, the copy shipped with the"
            " package (reinstall the package: pip install -e .)"
        )
    if path.is_dir():
        raise CorpusError(
            f"corpus file {path} is a directory, not a text file: pass the"
            " path of a file"
        )
    if not path.exists():
        raise CorpusError(f"corpus file not found: {path} (no such file)")
    try:
        return path.read_bytes()
    except OSError as error:
        raise CorpusError(
            f"cannot read corpus file {path}: {error.strerror or error}"
        ) from None


class CharTokenizer:
    """Maps characters to ids and back; the vocabulary is the sorted set of
    characters.

    Sorting makes the order stable: the same text always gives the same ids, on
    every machine and Python version (a ``set``'s iteration order is not).
    """

    def __init__(self, text: str):
        if not isinstance(text, str) or not text:
            raise ValueError(
                "text must be a non-empty str to build a vocabulary from"
            )
        self.chars: list[str] = sorted(set(text))
        self.stoi: dict[str, int] = {ch: i for i, ch in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        """``str`` of length n -> ``int64[n]``."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        unknown = sorted(set(text) - self.stoi.keys())
        if unknown:
            raise ValueError(
                f"text contains characters outside the vocabulary: {unknown!r}"
            )
        return torch.tensor([self.stoi[ch] for ch in text], dtype=torch.long)

    def decode(self, ids: torch.Tensor | list[int]) -> str:
        """``int[n]`` (ints in ``[0, vocab_size)``) -> ``str`` of length n."""
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
        bad = [
            i
            for i in ids
            if isinstance(i, bool)
            or not isinstance(i, numbers.Integral)
            or not 0 <= i < self.vocab_size
        ]
        if bad:
            raise ValueError(
                f"ids must be ints in [0, {self.vocab_size}), got {bad[:5]}"
            )
        return "".join(self.chars[i] for i in ids)


@dataclass
class CharDataset:
    """The encoded corpus split into a training and a validation part.

    The split is contiguous (the first ``1 - val_fraction`` for training, the
    rest for validation), as in nanoGPT's ``shakespeare_char``: random windows
    from a shuffled split would leak validation text into training.
    """

    tokenizer: CharTokenizer
    train: torch.Tensor  # int64[n_train]
    val: torch.Tensor  # int64[n_val]

    @classmethod
    def shakespeare(cls, val_fraction: float = 0.1) -> "CharDataset":
        return cls.from_text(load_corpus(), val_fraction)

    @classmethod
    def from_text(cls, text: str, val_fraction: float = 0.1) -> "CharDataset":
        """``val_fraction``, a float in (0, 1), must leave both splits at least
        one character."""
        check_float_in("val_fraction", val_fraction, 0.0, 1.0, "()")
        tokenizer = CharTokenizer(text)
        ids = tokenizer.encode(text)
        n_train = int(len(ids) * (1.0 - val_fraction))
        if not 0 < n_train < len(ids):
            raise ValueError(
                f"val_fraction={val_fraction} leaves an empty split of a text"
                f" of {len(ids)} characters ({n_train} for training,"
                f" {len(ids) - n_train} for validation)"
            )
        return cls(tokenizer, ids[:n_train], ids[n_train:])

    def split(self, name: str) -> torch.Tensor:
        if name not in ("train", "val"):
            raise ValueError(f"split must be 'train' or 'val', got {name!r}")
        return self.train if name == "train" else self.val


def _check_window(data: torch.Tensor, seq_len: int) -> None:
    if not isinstance(data, torch.Tensor) or data.dtype != torch.long:
        got = (
            data.dtype
            if isinstance(data, torch.Tensor)
            else type(data).__name__
        )
        raise TypeError(
            f"data must be a 1-d int64 tensor of token ids, got {got}"
        )
    if data.dim() != 1:
        raise ValueError(
            "data must be a 1-d tensor of token ids, got shape"
            f" {tuple(data.shape)}"
        )
    check_positive_int("seq_len", seq_len)
    if len(data) < seq_len + 1:
        raise ValueError(
            f"seq_len={seq_len} needs at least {seq_len + 1} tokens, data has"
            f" {len(data)}"
        )


def random_batch(
    data: torch.Tensor,
    batch_size: int,
    seq_len: int,
    generator: torch.Generator | None = None,
    device: str | torch.device = "cpu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample ``batch_size`` random windows: ``x, y`` both ``int64[batch_size,
    seq_len]``.

    ``y[b, t] == x[b, t + 1]``: each position predicts the next character. Pass
    a seeded ``generator`` for a reproducible data order.
    """
    _check_window(data, seq_len)
    check_positive_int("batch_size", batch_size)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(
            "generator must be None or a torch.Generator (seeded for a"
            f" reproducible order), got {generator!r}"
        )
    starts = torch.randint(
        len(data) - seq_len, (batch_size,), generator=generator
    )
    offsets = torch.arange(seq_len + 1)
    windows = data[starts[:, None] + offsets]  # [batch, seq_len + 1]
    x, y = windows[:, :-1], windows[:, 1:]
    if torch.device(device).type == "cuda":
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(
            device, non_blocking=True
        )
    return x.to(device), y.to(device)


def sequential_windows(
    data: torch.Tensor,
    seq_len: int,
    batch_size: int = 1,
    max_windows: int | None = None,
    device: str | torch.device = "cpu",
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Non-overlapping windows in order, for evaluation at any length.

    Window ``w`` covers tokens ``[w·seq_len, (w+1)·seq_len]``; every token is
    predicted exactly once, whatever ``seq_len`` is, so losses at different
    lengths are measured on the same text. Yields ``x, y`` of shape
    ``[≤batch_size, seq_len]``; the incomplete tail is dropped. The arguments
    are checked at the call, not at the first ``next()``.
    """
    _check_window(data, seq_len)
    check_positive_int("batch_size", batch_size)
    if max_windows is not None:
        check_positive_int("max_windows", max_windows)
    n_windows = (len(data) - 1) // seq_len
    if max_windows is not None:
        n_windows = min(n_windows, max_windows)
    return _windows(data, seq_len, batch_size, n_windows, device)


def _windows(data, seq_len, batch_size, n_windows, device):
    for first in range(0, n_windows, batch_size):
        starts = (
            torch.arange(first, min(first + batch_size, n_windows)) * seq_len
        )
        windows = data[starts[:, None] + torch.arange(seq_len + 1)]
        yield windows[:, :-1].to(device), windows[:, 1:].to(device)
