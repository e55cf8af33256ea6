"""mixers.stats against independent references: closed forms of Student's t,
numerical integration of its density, and a brute-force count of sign
patterns."""

import itertools
import math
import random

import pytest

from mixers.stats import (
    holm,
    incomplete_beta,
    paired_test,
    seeds_needed,
    sign_flip_p,
    t_quantile,
    t_test_p,
)


def t_density(x, df):
    return math.exp(
        math.lgamma((df + 1) / 2)
        - math.lgamma(df / 2)
        - 0.5 * math.log(df * math.pi)
        - (df + 1) / 2 * math.log1p(x * x / df)
    )


def two_sided_by_integration(t, df, steps=200_000):
    # P(|T| >= |t|) = 1 - 2 * integral_0^|t| density (Simpson's rule)
    h = abs(t) / steps
    total = t_density(0, df) + t_density(abs(t), df)
    for i in range(1, steps):
        total += (4 if i % 2 else 2) * t_density(i * h, df)
    return 1 - 2 * total * h / 3


@pytest.mark.parametrize("t", [0.0, 0.3, 1.0, 2.5, 4.3, 12.0, -3.0])
def test_t_p_values_match_closed_forms(t):
    # df = 1 is the Cauchy distribution; df = 2 has a closed form too
    assert t_test_p(t, 1) == pytest.approx(
        1 - 2 / math.pi * math.atan(abs(t)), abs=1e-12
    )
    assert t_test_p(t, 2) == pytest.approx(
        1 - abs(t) / math.sqrt(2 + t * t), abs=1e-12
    )


@pytest.mark.parametrize("df", [3, 5, 11, 30])
@pytest.mark.parametrize("t", [0.5, 2.0, 3.7])
def test_t_p_values_match_numerical_integration(t, df):
    assert t_test_p(t, df) == pytest.approx(
        two_sided_by_integration(t, df), abs=1e-9
    )


def test_t_p_value_tends_to_the_normal_one():
    for t in (1.0, 1.96, 3.0):
        assert t_test_p(t, 10**7) == pytest.approx(
            math.erfc(t / math.sqrt(2)), abs=1e-6
        )
    assert t_test_p(math.inf, 3) == 0.0


def test_incomplete_beta_edges_and_a_known_value():
    assert incomplete_beta(2.0, 3.0, 0.0) == 0.0
    assert incomplete_beta(2.0, 3.0, 1.0) == 1.0
    # I_x(1, 1) = x; I_x(a, 1) = x^a; I_x(1, b) = 1 - (1 - x)^b
    for x in (0.1, 0.5, 0.93):
        assert incomplete_beta(1.0, 1.0, x) == pytest.approx(x, abs=1e-13)
        assert incomplete_beta(3.5, 1.0, x) == pytest.approx(x**3.5, abs=1e-13)
        assert incomplete_beta(1.0, 4.0, x) == pytest.approx(
            1 - (1 - x) ** 4, abs=1e-13
        )


def brute_force_sign_flip(differences):
    observed = abs(sum(differences))
    patterns = list(itertools.product((1, -1), repeat=len(differences)))
    return sum(
        abs(sum(s * d for s, d in zip(signs, differences))) >= observed - 1e-9
        for signs in patterns
    ) / len(patterns)


def test_sign_flip_p_counts_patterns():
    assert sign_flip_p([0.1, 0.2, 0.3]) == 0.25  # every seed agrees: 2 of 8
    assert sign_flip_p([-0.1, -0.2]) == 0.5
    assert sign_flip_p([0.3, -0.3]) == 1.0
    rng = random.Random(0)
    for n in range(2, 8):
        for _ in range(20):
            differences = [rng.gauss(0.02, 0.03) for _ in range(n)]
            assert sign_flip_p(differences) == brute_force_sign_flip(
                differences
            )


def test_paired_test_reports_seed_by_seed():
    result = paired_test([1.70, 1.72, 1.69], [1.75, 1.74, 1.76])
    assert result["differences"] == pytest.approx([-0.05, -0.02, -0.07])
    assert result["mean_difference"] == pytest.approx(-0.14 / 3)
    assert result["a_lower_in_every_seed"] is True
    assert result["p_sign_flip"] == 0.25
    assert result["smallest_p_sign_flip"] == 0.25
    d = result["differences"]
    mean = sum(d) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 2)
    t = mean / (sd / math.sqrt(3))
    assert result["t"] == pytest.approx(t)
    assert result["p_t"] == pytest.approx(1 - abs(t) / math.sqrt(2 + t * t))


def test_a_constant_difference_has_no_t():
    result = paired_test([1.0, 2.0], [0.5, 1.5])
    assert result["t"] is None and result["p_t"] is None
    assert result["p_sign_flip"] == 0.5


@pytest.mark.parametrize(
    "a, b, error, words",
    [
        ([1.0, 2.0], [1.0], ValueError, "pair up seed by seed"),
        ([1.0], [2.0], ValueError, "at least 2 seeds"),
        ([1.0, math.nan], [1.0, 2.0], ValueError, "a must hold finite"),
        ([1.0, 2.0], [1.0, "2"], TypeError, "b must hold numbers"),
        ("12", [1.0, 2.0], TypeError, "a must be a sequence"),
        ([True, 2.0], [1.0, 2.0], TypeError, "a must hold numbers"),
    ],
)
def test_bad_input_is_refused_by_name(a, b, error, words):
    with pytest.raises(error, match=words):
        paired_test(a, b)


def brute_force_holm(p_values, alpha):
    # Holm (1979): reject H_(1), ..., H_(k-1), where k is the first sorted
    # index with p_(k) > alpha / (m - k + 1), counting from 1
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    m = len(p_values)
    rejected = set()
    for rank, i in enumerate(order, start=1):
        if p_values[i] > alpha / (m - rank + 1):
            break
        rejected.add(i)
    return [i in rejected for i in range(m)]


def test_holm_steps_down_and_stops_at_the_first_kept():
    # thresholds for m = 4 at 5 %: 0.0125, 0.0167, 0.025, 0.05
    assert holm([0.01, 0.04, 0.03, 0.005]) == [True, False, False, True]
    assert holm([0.01, 0.016, 0.024, 0.049]) == [True, True, True, True]
    # 0.02 fails its threshold (0.0167), so 0.021 is kept though it would
    # pass its own: the procedure stops at the first p it keeps
    assert holm([0.011, 0.02, 0.021, 0.5]) == [True, False, False, False]
    assert holm([]) == []
    rng = random.Random(1)
    for m in range(1, 9):
        for _ in range(50):
            p = [rng.random() ** 3 for _ in range(m)]
            assert holm(p, 0.1) == brute_force_holm(p, 0.1)


def test_holm_refuses_what_is_not_a_p_value():
    with pytest.raises(ValueError, match="p_values must lie in"):
        holm([0.1, 1.5])
    with pytest.raises(TypeError, match="p_values must hold numbers"):
        holm([0.1, "0.2"])
    with pytest.raises(ValueError, match="alpha must lie in"):
        holm([0.1], alpha=0.0)


def test_t_quantile_inverts_the_p_value():
    assert t_quantile(0.975, 2) == pytest.approx(4.302653, abs=1e-6)
    assert t_quantile(0.975, 10**7) == pytest.approx(1.959964, abs=1e-5)
    assert t_quantile(0.8, 10**7) == pytest.approx(0.841621, abs=1e-5)
    for df in (1, 3, 9):
        t = t_quantile(0.9, df)
        assert t_test_p(t, df) == pytest.approx(0.2, abs=1e-12)


def test_seeds_needed_matches_published_sample_sizes():
    # a paired (one-sample) t-test, two-sided at 5 %, power 80 %: the
    # standard tables give 34 pairs for an effect of half a standard
    # deviation and 10 for one standard deviation
    assert seeds_needed(sd=0.02, gap=0.01) == 34
    assert seeds_needed(sd=0.02, gap=0.02) == 10
    # for a small effect it tends to the normal ((1.96 + 0.84) sd / gap)^2
    n = seeds_needed(sd=1.0, gap=0.1)
    assert n == pytest.approx(((1.959964 + 0.841621) / 0.1) ** 2, rel=0.02)
    # a stricter level (a correction for many tests) needs more seeds
    assert seeds_needed(0.02, 0.01, alpha=0.05 / 11) > 34
    with pytest.raises(ValueError, match="gap must be a positive"):
        seeds_needed(0.02, 0.0)
