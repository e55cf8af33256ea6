"""Tests of mixers.data: the packaged corpus, the character tokenizer, the splits and the batches.

The batch tests use ``torch.arange(N)`` as the "token stream" wherever they can: then every id *is*
its own position, so a window's first id is its start index and off-by-one errors, overlaps and
leaks past the end of a split show up as plain numbers.
"""

import hashlib
import random
from pathlib import Path

import pytest
import torch

from mixers.data import (
    CORPUS_SHA256,
    CharDataset,
    CharTokenizer,
    CorpusError,
    corpus_path,
    load_corpus,
    random_batch,
    sequential_windows,
)

DOCUMENTED_SHA256 = (
    "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
)
N_CHARS = 1_115_394
# The vocabulary of Tiny Shakespeare, in sorted (code point) order.
VOCAB = (
    "\n !$&',-.3:;?"
    + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    + "abcdefghijklmnopqrstuvwxyz"
)


# ---------------------------------------------------------------------------------------------
# The corpus.


def test_packaged_corpus_has_documented_checksum_and_size(corpus_text):
    raw = corpus_path().read_bytes()
    assert hashlib.sha256(raw).hexdigest() == DOCUMENTED_SHA256
    assert CORPUS_SHA256 == DOCUMENTED_SHA256
    assert len(corpus_text) == N_CHARS
    assert len(set(corpus_text)) == 65
    assert corpus_text == raw.decode("utf-8")
    assert corpus_text.startswith(
        "First Citizen:\nBefore we proceed any further, hear me speak."
    )


def test_gitattributes_keep_the_corpus_byte_exact_on_any_checkout():
    """No end-of-line conversion for the corpus (a Windows checkout would otherwise break its sha256)."""
    root = Path(__file__).resolve().parents[1]
    attributes = {}
    for line in (root / ".gitattributes").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            pattern, *attrs = line.split()
            attributes[pattern] = attrs
    assert (
        root / "src/mixers/tinyshakespeare.txt"
    ).is_file()  # the pattern names the real file
    attrs = attributes.get("src/mixers/tinyshakespeare.txt", [])
    assert "-text" in attrs or "binary" in attrs, attrs


def test_missing_corpus_raises_corpus_error_naming_the_path(tmp_path):
    missing = tmp_path / "nowhere" / "tinyshakespeare.txt"
    with pytest.raises(CorpusError, match="not found") as info:
        load_corpus(missing)
    assert str(missing) in str(info.value)


def test_altered_corpus_raises_corpus_error_naming_path_and_both_checksums(
    tmp_path,
):
    raw = corpus_path().read_bytes()
    altered = bytearray(raw)
    altered[1000] = ord("#")  # one byte changed, same length
    path = tmp_path / "tinyshakespeare.txt"
    path.write_bytes(bytes(altered))
    with pytest.raises(CorpusError, match="sha256") as info:
        load_corpus(path)
    message = str(info.value)
    assert str(path) in message
    assert hashlib.sha256(bytes(altered)).hexdigest() in message
    assert DOCUMENTED_SHA256 in message


def test_truncated_corpus_raises_corpus_error(tmp_path):
    path = tmp_path / "short.txt"
    path.write_bytes(corpus_path().read_bytes()[:-1])
    with pytest.raises(CorpusError, match="altered or truncated"):
        load_corpus(path)


def test_unchecked_corpus_reads_any_text(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("hello, world\n", encoding="utf-8")
    assert load_corpus(path, sha256=None) == "hello, world\n"
    with pytest.raises(CorpusError):
        load_corpus(path)  # the default checksum is the packaged corpus's


# ---------------------------------------------------------------------------------------------
# The tokenizer.


def test_tokenizer_round_trips_the_whole_corpus(shakespeare, corpus_text):
    tok = shakespeare.tokenizer
    ids = tok.encode(corpus_text)
    assert ids.dtype == torch.int64 and ids.shape == (N_CHARS,)
    assert tok.decode(ids) == corpus_text
    assert tok.decode(ids.tolist()) == corpus_text  # a plain list works too


def test_vocabulary_is_sorted_and_known(shakespeare, corpus_text):
    tok = shakespeare.tokenizer
    assert tok.vocab_size == 65
    assert "".join(tok.chars) == VOCAB
    assert tok.chars == sorted(set(corpus_text))
    assert (
        tok.stoi["\n"] == 0
        and tok.stoi[" "] == 1
        and tok.stoi["A"] == 13
        and tok.stoi["z"] == 64
    )
    assert tok.encode("First").tolist() == [VOCAB.index(c) for c in "First"]


def test_vocabulary_does_not_depend_on_text_order(corpus_text):
    chars = list(set(corpus_text))
    random.Random(0).shuffle(chars)
    shuffled = CharTokenizer("".join(chars) * 3)
    reversed_ = CharTokenizer(corpus_text[::-1])
    sample = corpus_text[:5000]
    assert shuffled.chars == reversed_.chars == list(VOCAB)
    assert shuffled.stoi == reversed_.stoi
    assert torch.equal(shuffled.encode(sample), reversed_.encode(sample))


def test_small_tokenizer_ids():
    a, b = CharTokenizer("cabbage"), CharTokenizer("bbgeaac")
    assert a.chars == b.chars == ["a", "b", "c", "e", "g"]
    assert a.encode("bag").tolist() == b.encode("bag").tolist() == [1, 0, 4]
    assert a.decode([4, 0, 2]) == "gac"


def test_unknown_characters_raise_value_error(shakespeare):
    with pytest.raises(ValueError, match="outside the vocabulary"):
        shakespeare.tokenizer.encode("naïve")
    with pytest.raises(ValueError, match="'~'"):
        shakespeare.tokenizer.encode("a~b")


@pytest.mark.parametrize("bad", [[65], [-1], [0, 1, 100]])
def test_out_of_range_ids_raise_value_error(shakespeare, bad):
    with pytest.raises(ValueError, match=r"ids must be ints in \[0, 65\)"):
        shakespeare.tokenizer.decode(bad)
    with pytest.raises(ValueError, match="ids must be ints in"):
        shakespeare.tokenizer.decode(torch.tensor(bad))


@pytest.mark.parametrize("text", ["", None, 123])
def test_tokenizer_needs_non_empty_text(text):
    with pytest.raises(ValueError, match="text"):
        CharTokenizer(text)


# ---------------------------------------------------------------------------------------------
# The split.


def test_split_sizes_are_90_10(shakespeare):
    assert len(shakespeare.train) == int(N_CHARS * 0.9) == 1_003_854
    assert len(shakespeare.val) == N_CHARS - 1_003_854 == 111_540
    assert shakespeare.train.dtype == shakespeare.val.dtype == torch.int64


def test_split_is_contiguous_disjoint_and_complete(shakespeare, corpus_text):
    tok = shakespeare.tokenizer
    assert torch.equal(
        torch.cat([shakespeare.train, shakespeare.val]),
        tok.encode(corpus_text),
    )
    n_train = len(shakespeare.train)
    assert tok.decode(shakespeare.train) == corpus_text[:n_train]
    assert tok.decode(shakespeare.val) == corpus_text[n_train:]
    assert shakespeare.split("train") is shakespeare.train
    assert shakespeare.split("val") is shakespeare.val


def test_shakespeare_constructor_matches_from_text(shakespeare):
    ds = CharDataset.shakespeare(val_fraction=0.25)
    assert len(ds.val) == N_CHARS - int(N_CHARS * 0.75)
    assert torch.equal(
        torch.cat([ds.train, ds.val]),
        torch.cat([shakespeare.train, shakespeare.val]),
    )


@pytest.mark.parametrize("val_fraction", [0.0, 1.0, -0.1, 1.5])
def test_val_fraction_out_of_range_raises(val_fraction):
    with pytest.raises(ValueError, match="val_fraction"):
        CharDataset.from_text("some text to split", val_fraction)


def test_unknown_split_name_raises(shakespeare):
    with pytest.raises(ValueError, match="split must be 'train' or 'val'"):
        shakespeare.split("test")


def test_training_batches_never_reach_into_validation(
    shakespeare, corpus_text
):
    """Every window drawn from the training split is a piece of the training text."""
    n_train = len(shakespeare.train)
    train_text = corpus_text[:n_train]
    tok = shakespeare.tokenizer
    generator = torch.Generator().manual_seed(0)
    seq_len = 16
    for _ in range(4):
        x, y = random_batch(shakespeare.train, 32, seq_len, generator)
        windows = torch.cat([x, y[:, -1:]], dim=1)
        for window in windows:
            assert tok.decode(window) in train_text
    # By position: with ids equal to their positions in a stream of n_train tokens, no window may
    # reach index n_train (the first validation character) while the last start is reachable.
    positions = torch.arange(n_train)
    starts = set()
    for _ in range(20):
        x, y = random_batch(positions, 4096, seq_len, generator)
        assert int(y.max()) <= n_train - 1
        starts.update(x[:, 0].tolist())
    assert min(starts) >= 0 and max(starts) <= n_train - seq_len - 1


# ---------------------------------------------------------------------------------------------
# Random batches.


def test_random_batch_shapes_dtype_and_shift():
    data = torch.arange(1000) * 7 % 65  # an arbitrary id stream
    x, y = random_batch(data, 5, 12, torch.Generator().manual_seed(1))
    assert x.shape == y.shape == (5, 12)
    assert x.dtype == y.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])


def test_random_batch_windows_are_real_contiguous_windows():
    n, seq_len = 60, 10
    data = torch.arange(n)
    x, y = random_batch(data, 2000, seq_len, torch.Generator().manual_seed(2))
    starts = x[:, 0]
    expected_x = starts[:, None] + torch.arange(seq_len)
    assert torch.equal(x, expected_x)
    assert torch.equal(y, expected_x + 1)
    # every legal start (0 .. n - seq_len - 1) is drawn, none beyond
    assert sorted(set(starts.tolist())) == list(range(n - seq_len))


def test_random_batch_seeded_is_reproducible():
    data = torch.arange(10_000)
    a = random_batch(data, 8, 16, torch.Generator().manual_seed(123))
    b = random_batch(data, 8, 16, torch.Generator().manual_seed(123))
    c = random_batch(data, 8, 16, torch.Generator().manual_seed(124))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


def test_random_batch_with_minimal_data():
    x, y = random_batch(torch.tensor([3, 1, 4]), 4, 2)
    assert torch.equal(x, torch.tensor([[3, 1]] * 4)) and torch.equal(
        y, torch.tensor([[1, 4]] * 4)
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(seq_len=0), "seq_len"),
        (dict(seq_len=-3), "seq_len"),
        (dict(seq_len=20), "seq_len=20 needs at least 21 tokens"),
        (dict(batch_size=0), "batch_size"),
        (dict(batch_size=-1), "batch_size"),
        (
            dict(data=torch.zeros(2, 30, dtype=torch.long)),
            "data must be a 1-d tensor",
        ),
    ],
)
def test_random_batch_bad_arguments(kwargs, match):
    args = dict(data=torch.arange(20), batch_size=2, seq_len=4) | kwargs
    with pytest.raises(ValueError, match=match):
        random_batch(**args)


# ---------------------------------------------------------------------------------------------
# Sequential windows.


@pytest.mark.parametrize("seq_len", [1, 3, 7, 16, 49])
@pytest.mark.parametrize("batch_size", [1, 4])
def test_sequential_windows_cover_every_token_once_in_order(
    seq_len, batch_size
):
    n = 50
    data = torch.arange(n)
    batches = list(sequential_windows(data, seq_len, batch_size))
    n_windows = (n - 1) // seq_len
    xs = torch.cat([x for x, _ in batches])
    ys = torch.cat([y for _, y in batches])
    assert xs.shape == ys.shape == (n_windows, seq_len)
    # non-overlapping and in order: the concatenated inputs are 0, 1, 2, ... with nothing repeated
    assert torch.equal(xs.flatten(), torch.arange(n_windows * seq_len))
    assert torch.equal(ys, xs + 1)  # each position's target is the next token
    # the incomplete tail is dropped: no window ends past the data
    assert int(ys.max()) == n_windows * seq_len <= n - 1
    # batch sizes: full batches, then one remainder
    sizes = [len(x) for x, _ in batches]
    assert sizes == [batch_size] * (n_windows // batch_size) + (
        [n_windows % batch_size] if n_windows % batch_size else []
    )
    assert all(x.dtype == torch.int64 for x, _ in batches)


def test_sequential_windows_every_target_predicted_exactly_once_on_real_text(
    shakespeare,
):
    data = shakespeare.val[:1001]
    for seq_len in (10, 25, 1000):
        ys = torch.cat(
            [
                y.flatten()
                for _, y in sequential_windows(data, seq_len, batch_size=3)
            ]
        )
        assert torch.equal(ys, data[1 : 1 + len(ys)])
        assert len(ys) == (1000 // seq_len) * seq_len


@pytest.mark.parametrize("max_windows", [1, 5, 7, 100])
def test_sequential_windows_respects_max_windows(max_windows):
    data = torch.arange(41)  # 10 windows of 4
    batches = list(
        sequential_windows(data, 4, batch_size=3, max_windows=max_windows)
    )
    xs = torch.cat([x for x, _ in batches])
    expected = min(max_windows, 10)
    assert len(xs) == expected
    assert torch.equal(xs.flatten(), torch.arange(expected * 4))
    assert all(len(x) <= 3 for x, _ in batches)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(seq_len=0), "seq_len"),
        (dict(seq_len=20), "seq_len=20 needs at least 21 tokens"),
        (
            dict(data=torch.zeros(2, 30, dtype=torch.long)),
            "data must be a 1-d tensor",
        ),
    ],
)
def test_sequential_windows_bad_arguments(kwargs, match):
    args = dict(data=torch.arange(20), seq_len=4) | kwargs
    with pytest.raises(ValueError, match=match):
        list(sequential_windows(**args))


@pytest.mark.parametrize("batch_size", [0, -1])
def test_sequential_windows_bad_batch_size(batch_size):
    # checked when called, not at the first next(): the function is not itself a generator
    with pytest.raises(ValueError, match="batch_size"):
        sequential_windows(torch.arange(20), 4, batch_size=batch_size)
    with pytest.raises(ValueError, match="max_windows"):
        sequential_windows(torch.arange(20), 4, max_windows=batch_size)


def test_a_non_integer_size_is_a_type_error_naming_it(shakespeare):
    with pytest.raises(
        TypeError, match=r"^seq_len must be a positive int, got 2.0"
    ):
        random_batch(shakespeare.train, 4, 2.0)
    with pytest.raises(
        TypeError, match=r"^batch_size must be a positive int, got True"
    ):
        random_batch(shakespeare.train, True, 8)


# ---------------------------------------------------------------------------------------------
# Every argument is checked where it enters, naming it.


def test_a_non_utf8_corpus_raises_corpus_error_naming_the_path(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("naïve café\n".encode("latin-1"))
    with pytest.raises(CorpusError, match="not UTF-8") as info:
        load_corpus(path, sha256=None)
    assert str(path) in str(info.value)


def test_a_non_string_checksum_is_refused():
    with pytest.raises(
        TypeError, match="sha256 must be None or a hex digest str"
    ):
        load_corpus(sha256=b"86c4e6aa")


@pytest.mark.parametrize(
    "val_fraction, error",
    [
        (float("nan"), ValueError),
        (float("inf"), ValueError),
        ("0.1", TypeError),
        (True, TypeError),
        (None, TypeError),
    ],
)
def test_val_fraction_must_be_a_float_in_the_open_unit_interval(
    val_fraction, error
):
    with pytest.raises(
        error, match=r"val_fraction must be a float in \(0, 1\)"
    ):
        CharDataset.from_text("some text to split", val_fraction)


@pytest.mark.parametrize(
    "text, val_fraction", [("ab", 0.6), ("abc", 0.9), ("a", 0.5)]
)
def test_a_val_fraction_that_leaves_an_empty_split_is_refused(
    text, val_fraction
):
    with pytest.raises(ValueError, match="leaves an empty split"):
        CharDataset.from_text(text, val_fraction)
    CharDataset.from_text(
        "abcdefghij", 0.1
    )  # one character of validation is enough


@pytest.mark.parametrize(
    "ids", [[True, 2], [1.0], [0.5], ["a"], torch.tensor([1.0, 2.0])]
)
def test_decode_needs_int_ids(shakespeare, ids):
    """True decoded as id 1, silently."""
    with pytest.raises(ValueError, match=r"ids must be ints in \[0, 65\)"):
        shakespeare.tokenizer.decode(ids)


def test_encode_needs_a_str(shakespeare):
    with pytest.raises(TypeError, match="text must be a str"):
        shakespeare.tokenizer.encode(["a", "b"])


@pytest.mark.parametrize(
    "data, error, match",
    [
        (torch.arange(20.0), TypeError, "data must be a 1-d int64 tensor"),
        (
            torch.arange(20, dtype=torch.int32),
            TypeError,
            "data must be a 1-d int64 tensor",
        ),
        (list(range(20)), TypeError, "data must be a 1-d int64 tensor"),
    ],
)
def test_batches_need_int64_token_ids(data, error, match):
    with pytest.raises(error, match=match):
        random_batch(data, 2, 4)
    with pytest.raises(error, match=match):
        sequential_windows(data, 4)


@pytest.mark.parametrize(
    "max_windows, error",
    [(True, TypeError), (2.0, TypeError), (0, ValueError)],
)
def test_max_windows_must_be_a_positive_int(max_windows, error):
    """max_windows=True meant one window."""
    with pytest.raises(error, match="max_windows must be a positive int"):
        sequential_windows(torch.arange(20), 4, max_windows=max_windows)
