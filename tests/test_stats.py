"""mixers.stats against independent references: closed forms of Student's t,
numerical integration of its density, and a brute-force count of sign
patterns."""

import itertools
import math
import random

import pytest

from mixers.stats import (
    incomplete_beta,
    paired_test,
    sign_flip_p,
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
