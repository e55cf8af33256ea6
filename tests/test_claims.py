"""The numbers the chapters' prose quotes, recomputed from the committed results.

A markdown cell cannot compute, so a figure quoted in prose can drift from the
results it describes. Each test here finds a quoted figure in a chapter's
markdown, recomputes it from ``book/results`` (with the package's own
functions where there are any) and checks that the two agree to the digits
quoted. Where a chapter was corrected (issue 34), the test also checks that
the wrong statement is gone.
"""

import ast
import json
import re
import statistics
from pathlib import Path

import pytest

from mixers.experiments import load_results
from mixers.stats import holm, paired_test, seeds_needed

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"


def cells(chapter: str) -> list[dict]:
    return json.loads((BOOK / f"{chapter}.ipynb").read_text(encoding="utf-8"))[
        "cells"
    ]


def source(cell: dict) -> str:
    s = cell["source"]
    return s if isinstance(s, str) else "".join(s)


def prose(chapter: str) -> str:
    """A chapter's markdown, its line breaks read as spaces (a quoted phrase
    may wrap anywhere)."""
    text = "\n\n".join(
        source(c) for c in cells(chapter) if c["cell_type"] == "markdown"
    )
    return re.sub(r"[ \t]*\n[ \t]*(?!\n)", " ", text)


def quoted(chapter: str, pattern: str) -> tuple[str, ...]:
    """The groups of ``pattern`` in a chapter's prose; it must occur once."""
    matches = re.findall(pattern, prose(chapter))
    assert len(matches) == 1, (
        f"{chapter}: expected one match of {pattern!r}, found {len(matches)}"
    )
    match = matches[0]
    return match if isinstance(match, tuple) else (match,)


def as_quoted(value: float, like: str) -> str:
    """``value`` with as many decimals as the quoted ``like``."""
    decimals = len(like.split(".")[1]) if "." in like else 0
    return f"{value:.{decimals}f}"


def cited_keys(chapter: str) -> set[str]:
    keys = set()
    for group in re.findall(r"\{cite:[pt]\}`([^`]+)`", prose(chapter)):
        keys.update(key.strip() for key in group.split(","))
    return keys


def bib_keys() -> set[str]:
    text = (BOOK / "references.bib").read_text(encoding="utf-8")
    return set(re.findall(r"^@\w+\{([^,]+),", text, re.MULTILINE))


# ---------------------------------------------------------------- baseline


def test_baseline_says_both_references_tie_the_head_and_the_package_does_not():
    text = prose("baseline")
    assert "reused (tied weights)" not in text
    assert "self.transformer.wte.weight = self.lm_head.weight" in text
    run = load_results("baseline", profiles=("cpu",))["result"]
    config = run["model_config"]
    head = config["vocab_size"] * config["d_model"]
    (count,) = quoted("baseline", r"it costs \$Vd\$ = ([\d,]+) parameters")
    assert int(count.replace(",", "")) == head
    (share,) = quoted(
        "baseline", r"parameters, under (\d+) % of the `cpu` model"
    )
    assert head / run["parameters"] < int(share) / 100


# ------------------------------------------------------------------- ALiBi


def alibi_bench_at(length: int) -> dict:
    rows = load_results("alibi_bench", profiles=("cpu",))["results"]
    return next(row for row in rows if row["length"] == length)


def test_alibi_cost_is_quoted_with_what_it_is_measured_against():
    assert "the bias costs little" not in prose("alibi")
    bias_mib, forward, both, labml = quoted(
        "alibi",
        r"SDPA keeping a (\d+) MiB bias took (\d+(?:\.\d+)?)× the time of causal"
        r" attention with no bias \((\d+(?:\.\d+)?)× forward \+ backward\),"
        r" labml's layout (\d+(?:\.\d+)?)×",
    )
    row = alibi_bench_at(2048)
    floor = row["time_vs_causal_floor"]
    assert as_quoted(floor["forward"]["sdpa"], forward) == forward
    assert as_quoted(floor["forward_backward"]["sdpa"], both) == both
    assert as_quoted(floor["forward"]["labml"], labml) == labml
    kept = row["implementations"]["sdpa"]["kept_bias_bytes"]
    assert kept == int(bias_mib) * 2**20


def test_alibi_block_mask_share_of_the_kernel():
    assert "about a tenth of the kernel call" not in prose("alibi")
    with_bias, without = quoted(
        "alibi",
        r"block mask takes (\d+) % of the kernel call's time at 2,048 positions"
        r" on a CPU \((\d+) % of the no-bias kernel's\)",
    )
    d = load_results("alibi_bench", profiles=("cpu",))["flex_diagnostics"]
    assert d["length"] == 2048
    mask = d["create_block_mask"]["median_s"]
    assert round(100 * mask / d["kernel_with_alibi"]["median_s"]) == int(
        with_bias
    )
    assert round(100 * mask / d["kernel_without_bias"]["median_s"]) == int(
        without
    )


def test_alibi_labml_cache_is_described_as_its_code_has_it():
    text = prose("alibi")
    assert "its first batch element" not in text
    assert "reused by every later call" not in text
    assert "mask.shape[2] == 1" in text
    assert "shape[1] < seq_len" in text
    assert "equal or shorter length" in text


def test_alibi_samples_say_no_more_than_one_text_can():
    text = prose("alibi")
    assert "about half a training length past" not in text
    assert "one text cannot say where or how often" in text
    writers = {
        run["scheme"]: run["long_generation"]
        for run in load_results("alibi_extrapolation", profiles=("cpu",))[
            "runs"
        ]
        if run["long_generation"]
    }
    length = load_results("alibi_extrapolation", profiles=("cpu",))[
        "settings"
    ]["train_length"]
    quarters = {
        scheme: [
            sum(w["per_position"][q * length : (q + 1) * length]) / length
            for q in range(4)
        ]
        for scheme, w in writers.items()
    }
    a_low, a_high, r_low, r_high = quoted(
        "alibi",
        r"ALiBi's quarters range from (\d+(?:\.\d+)?) to (\d+(?:\.\d+)?) and rotary's from"
        r" (\d+(?:\.\d+)?) to (\d+(?:\.\d+)?)",
    )
    assert as_quoted(min(quarters["alibi"]), a_low) == a_low
    assert as_quoted(max(quarters["alibi"]), a_high) == a_high
    assert as_quoted(min(quarters["rotary"]), r_low) == r_low
    assert as_quoted(max(quarters["rotary"]), r_high) == r_high


def test_alibi_counting_is_a_cited_conjecture():
    text = prose("alibi")
    assert "counting how many tokens it attends to" not in text
    assert "conjecture that the causal mask" in text
    assert "haviv2022transformer" in cited_keys("alibi")


# --------------------------------------------------------------- GLU, gMLP


def test_glu_spread_is_the_largest_in_best_loss_only():
    variants = load_results("glu_variants", profiles=("cpu",))["summary"][
        "variants"
    ]
    glu_best, relu_full, glu_full = quoted(
        "glu_variants",
        r"best validation loss has the largest spread of the eight \((\d+(?:\.\d+)?);"
        r" on the whole split ReLU's (\d+(?:\.\d+)?) passes its (\d+(?:\.\d+)?)\)",
    )
    best_std = {n: v["best_val_loss_std"] for n, v in variants.items()}
    full_std = {n: v["full_val_loss_std"] for n, v in variants.items()}
    assert max(best_std, key=best_std.get) == "glu"
    assert as_quoted(best_std["glu"], glu_best) == glu_best
    assert as_quoted(full_std["relu"], relu_full) == relu_full
    assert as_quoted(full_std["glu"], glu_full) == glu_full
    assert full_std["relu"] > full_std["glu"]


def test_gmlp_lead_at_own_and_shared_rates():
    text = prose("gmlp")
    assert "used to train all three" not in text
    shared, own = quoted(
        "gmlp",
        r"gMLP's lead in the tracked loss would have been (\d+(?:\.\d+)?) nats; at"
        r" each model's own rate it is (\d+(?:\.\d+)?)\.",
    )
    sweep = load_results("gmlp", profiles=("cpu",))["sweep"]

    def tracked(arm, lr=None):
        rows = [r for r in sweep[arm] if not r["diverged"]]
        if lr is None:
            return min(r["best_val_loss"] for r in rows)
        return next(r["best_val_loss"] for r in rows if r["lr"] == lr)

    assert as_quoted(tracked("transformer") - tracked("gmlp"), own) == own
    assert (
        as_quoted(
            tracked("transformer", 0.002) - tracked("gmlp", 0.002), shared
        )
        == shared
    )


# ------------------------------------------------------------ side by side


def side_by_side_tests() -> dict:
    """The chapter's paired tests, over its own list of comparisons (read
    from its code cell), recomputed with mixers.stats.paired_test."""
    code = next(
        source(c)
        for c in cells("side_by_side")
        if c["cell_type"] == "code" and "COMPARISONS = [" in source(c)
    )
    listing = code.split("COMPARISONS = ", 1)[1]
    comparisons = ast.literal_eval(listing[: listing.index("]\n") + 1])
    pairs = load_results("side_by_side", profiles=("cpu",))["summary"]["pairs"]
    tests = {}
    for first, second in comparisons:
        a, b = pairs[first]["loss_by_seed"], pairs[second]["loss_by_seed"]
        seeds = [
            s for s in a if s in b and a[s] is not None and b[s] is not None
        ]
        tests[first, second] = paired_test(
            [a[s] for s in seeds], [b[s] for s in seeds]
        )
    return tests


def test_holm_keeps_the_two_rankings_the_verdict_names():
    tests = side_by_side_tests()
    assert len(tests) == 11
    assert "11 tests at once" in prose("side_by_side")
    keys = list(tests)
    kept = holm([tests[k]["p_t"] for k in keys])
    survivors = {k for k, keep in zip(keys, kept) if keep}
    assert survivors == {
        ("rotary+swiglu", "attention+swiglu"),
        ("amlp", "rotary+swiglu"),
    }
    first, second, third = quoted(
        "side_by_side",
        r"\*\*rotary \+ SwiGLU below attention \+ SwiGLU\*\* \(\$p_t\$ = (\d+(?:\.\d+)?)\)"
        r" and \*\*aMLP below rotary \+ SwiGLU\*\* \(\$p_t\$ = (\d+(?:\.\d+)?)\); the"
        r" third smallest, (\d+(?:\.\d+)?), misses \$0\.05/9\$",
    )
    p = sorted(t["p_t"] for t in tests.values())
    assert f"{tests['rotary+swiglu', 'attention+swiglu']['p_t']:.2g}" == first
    assert f"{tests['amlp', 'rotary+swiglu']['p_t']:.2g}" == second
    assert f"{p[2]:.2g}" == third and p[2] > 0.05 / 9
    # every test is lower in every seed but aMLP - gMLP, and none reaches
    # a sign-flip p below 0.25
    assert all(t["p_sign_flip"] >= 0.25 for t in tests.values())


def test_the_verdict_says_which_p_values_the_correction_keeps():
    tests = side_by_side_tests()
    gated = [
        tests[f"{m}+swiglu", f"{m}+gelu"]["p_t"]
        for m in ("attention", "rotary", "alibi")
    ]
    quoted_gated = quoted(
        "side_by_side",
        r"\(\$p_t\$ = (\d+(?:\.\d+)?), (\d+(?:\.\d+)?) and (\d+(?:\.\d+)?), none kept by the"
        r" correction\)",
    )
    assert [f"{p:.2g}" for p in gated] == list(quoted_gated)
    (learned_gap,) = quoted(
        "side_by_side",
        r"only rotary's below learned positions with SwiGLU \((−\d\.\d+)\)"
        r" survives",
    )
    mean = tests["rotary+swiglu", "attention+swiglu"]["mean_difference"]
    assert f"{mean:.3f}".replace("-", "−") == learned_gap
    kept = dict(zip(tests, holm([t["p_t"] for t in tests.values()])))
    assert kept["rotary+swiglu", "attention+swiglu"]
    assert not any(
        kept[f"{m}+swiglu", f"{m}+gelu"]
        for m in ("attention", "rotary", "alibi")
    )
    assert not kept["rotary+swiglu", "alibi+swiglu"]
    assert not kept["gmlp", "rotary+swiglu"]


def test_the_seeds_a_gap_would_need():
    tests = side_by_side_tests()
    spreads = {k: statistics.stdev(t["differences"]) for k, t in tests.items()}
    low, high, amlp = quoted(
        "side_by_side",
        r"standard deviations over the seeds of (\d+(?:\.\d+)?) to (\d+(?:\.\d+)?) nats"
        r" \((\d+(?:\.\d+)?) for aMLP − gMLP\)",
    )
    assert as_quoted(min(spreads.values()), low) == low
    assert as_quoted(max(spreads.values()), high) == high
    assert as_quoted(spreads["amlp", "gmlp"], amlp) == amlp
    assert max(spreads.values()) < 0.02  # "a little above the largest here"
    numbers = quoted(
        "side_by_side",
        r"at \$s = 0\.02\$, a little above the largest here, (\d+) seeds for a"
        r" gap \$\\delta\$ of 0\.01 nats,"
        r" (\d+) for 0\.02 and (\d+) for 0\.03; at the correction's strictest"
        r" step, \$0\.05/11\$, (\d+), (\d+) and (\d+)\.",
    )
    expected = [seeds_needed(0.02, gap) for gap in (0.01, 0.02, 0.03)] + [
        seeds_needed(0.02, gap, alpha=0.05 / 11) for gap in (0.01, 0.02, 0.03)
    ]
    assert [int(n) for n in numbers] == expected


# --------------------------------------------------------------- citations


@pytest.mark.parametrize(
    "chapter, keys",
    [
        (
            "alibi",
            {
                "chen2023extending",
                "bloc97_2023ntk",
                "peng2023yarn",
                "raffel2020t5",
                "kazemnejad2023impact",
                "haviv2022transformer",
                "bigscience2022bloom",
                "mosaicml2023mpt",
            },
        ),
        ("multi_head", {"shazeer2019fast", "ainslie2023gqa"}),
        ("baseline", {"zhang2019rmsnorm", "touvron2023llama"}),
        (
            "gmlp",
            {"gu2022s4", "fu2023h3", "poli2023hyena", "leethorp2022fnet"},
        ),
        ("glu_variants", {"shazeer2020glu"}),
        ("side_by_side", {"holm1979simple"}),
    ],
)
def test_the_added_ideas_cite_entries_of_the_bibliography(chapter, keys):
    assert keys <= cited_keys(chapter)
    assert cited_keys(chapter) <= bib_keys()


# ------------------------------------------------- where the reader was lost


def test_the_reader_is_not_sent_to_what_is_not_there():
    attention = prose("attention")
    first_sdpa = attention.index("SDPA")
    assert (
        "scaled_dot_product_attention` (*SDPA*"
        in attention[first_sdpa - 60 : first_sdpa + 10]
    )
    assert "(`_fused_attention`, below)" not in attention
    # the blog post's masking is quoted where the chapter fixes it
    assert "attn.data.masked_fill_(attn_mask, -float('inf'))" in attention
    assert "attn_mask = attn_mask.eq(0)" in attention
    assert "the listing of `lr_at` above" not in prose("baseline")
