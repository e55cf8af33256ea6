"""mixers.stats against independent references: closed forms of Student's t
and of the chi-square distribution, numerical integration of their densities,
a brute-force count of sign patterns and the binomial count of patterns of
equal differences, an independent series for the noncentral t, values from
SciPy, and simulation."""

import itertools
import math
import random
import statistics

import numpy as np
import pytest

from mixers import stats
from mixers.stats import (
    benjamini_hochberg,
    holm,
    incomplete_beta,
    mean_interval,
    paired_test,
    sd_interval,
    seeds_needed,
    sign_flip_p,
    sign_flip_test,
    t_quantile,
    t_test_p,
    t_test_power,
)


def normal_cdf(x):
    return 0.5 * math.erfc(-x / math.sqrt(2))


def t_density(x, df):
    return math.exp(
        math.lgamma((df + 1) / 2)
        - math.lgamma(df / 2)
        - 0.5 * math.log(df * math.pi)
        - (df + 1) / 2 * math.log1p(x * x / df)
    )


def simpson(f, low, high, steps=200_000):
    h = (high - low) / steps
    total = f(low) + f(high)
    for i in range(1, steps):
        total += (4 if i % 2 else 2) * f(low + i * h)
    return total * h / 3


def two_sided_by_integration(t, df):
    # P(|T| >= |t|) = 1 - 2 * integral_0^|t| density (Simpson's rule)
    return 1 - 2 * simpson(lambda x: t_density(x, df), 0, abs(t))


# ---------------------------------------------------------------- Student's t


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


@pytest.mark.parametrize("df", [1e5, 1e6, 1e9, 1e12, 1e15])
@pytest.mark.parametrize("t", [0.5, 1.96, 4.0])
def test_t_p_values_for_many_degrees_of_freedom(t, df):
    # Fisher's expansion of Student's t in 1/df, to its second term:
    # P(|T| >= t) = erfc(t/sqrt 2) + 2 phi(t) [(t^3 + t) / (4 df)
    #   + (3t^7 - 7t^5 - 5t^3 - 3t) / (96 df^2)] + O(df^-3)
    # (Johnson, Kotz & Balakrishnan, Continuous Univariate Distributions
    # 2, ch. 28; the second term checked against SciPy at df = 1e3, 1e4)
    phi = math.exp(-t * t / 2) / math.sqrt(2 * math.pi)
    first = (t**3 + t) / (4 * df)
    second = (3 * t**7 - 7 * t**5 - 5 * t**3 - 3 * t) / (96 * df**2)
    expected = math.erfc(t / math.sqrt(2)) + 2 * phi * (first + second)
    assert t_test_p(t, df) == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_t_p_value_is_continuous_where_its_method_changes():
    for t in (0.5, 2.0, 5.0):
        below = t_test_p(t, stats.LARGE_DF)
        above = t_test_p(t, stats.LARGE_DF * (1 + 1e-9))
        assert above == pytest.approx(below, rel=1e-9)


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


def test_t_quantile_inverts_the_p_value():
    assert t_quantile(0.975, 2) == pytest.approx(4.302653, abs=1e-6)
    assert t_quantile(0.975, 10**7) == pytest.approx(1.959964, abs=1e-5)
    assert t_quantile(0.8, 10**7) == pytest.approx(0.841621, abs=1e-5)
    for df in (1, 3, 9):
        t = t_quantile(0.9, df)
        assert t_test_p(t, df) == pytest.approx(0.2, abs=1e-12)
    # df = 1: the Cauchy quantile tan(pi (q - 1/2))
    assert t_quantile(0.999, 1) == pytest.approx(
        math.tan(math.pi * 0.499), rel=1e-12
    )


# ----------------------------------------------------------- sign-flip test


def brute_force_sign_flip(differences):
    observed = abs(sum(differences))
    patterns = list(itertools.product((1, -1), repeat=len(differences)))
    return sum(
        abs(sum(s * d for s, d in zip(signs, differences))) >= observed - 1e-9
        for signs in patterns
    ) / len(patterns)


def binomial_sign_flip(plus, minus):
    """The exact p of ``plus`` differences of +1 and ``minus`` of -1: a
    pattern's sum is 2B - n with B ~ Binomial(n, 1/2) the +1s kept."""
    n = plus + minus
    observed = abs(plus - minus)
    count = sum(
        math.comb(n, b) for b in range(n + 1) if abs(2 * b - n) >= observed
    )
    return count / 2**n


def test_sign_flip_p_counts_patterns():
    assert sign_flip_p([0.1, 0.2, 0.3]) == 0.25  # every seed agrees: 2 of 8
    assert sign_flip_p([-0.1, -0.2]) == 0.5
    assert sign_flip_p([0.3, -0.3]) == 1.0
    rng = random.Random(0)
    for n in range(2, 13):
        for _ in range(10):
            differences = [rng.gauss(0.02, 0.03) for _ in range(n)]
            assert sign_flip_p(differences) == brute_force_sign_flip(
                differences
            )
            # ties: small integers make many patterns reach the same sum
            ties = [rng.randint(-3, 3) * 0.1 for _ in range(n)]
            assert sign_flip_p(ties) == brute_force_sign_flip(ties)


@pytest.mark.parametrize("plus, minus", [(26, 0), (17, 9), (15, 11), (20, 10)])
def test_sign_flip_is_exact_up_to_thirty_seeds(plus, minus):
    # 2^26 to 2^30 patterns: counted half against half, tie for tie
    differences = [1.0] * plus + [-1.0] * minus
    random.Random(plus).shuffle(differences)
    result = sign_flip_test(differences)
    assert result["method"] == "exact" and result["draws"] is None
    assert result["p"] == binomial_sign_flip(plus, minus)


def test_sign_flip_does_not_depend_on_the_scale():
    for scale in (1e-13, 1e-200, 1.0, 1e250):
        assert sign_flip_p([scale, 2 * scale, 3 * scale]) == 0.25
        assert sign_flip_p([scale, -scale]) == 1.0


def test_sign_flip_past_thirty_seeds_samples_and_says_so():
    plus, minus = 26, 14  # 40 seeds: p from the binomial count, 0.0807
    differences = [1.0] * plus + [-1.0] * minus
    random.Random(1).shuffle(differences)
    result = sign_flip_test(differences)
    exact = binomial_sign_flip(plus, minus)
    assert result["method"] == "monte carlo"
    assert result["draws"] == stats.SIGN_FLIP_DRAWS
    se = math.sqrt(exact * (1 - exact) / result["draws"])
    assert result["standard_error"] == pytest.approx(se, rel=0.1)
    assert abs(result["p"] - exact) < 5 * se
    assert sign_flip_test(differences) == result  # seeded: reproducible
    test = paired_test(differences, [0.0] * 40)
    assert test["p_sign_flip"] == result["p"]
    assert test["sign_flip_method"] == "monte carlo"
    assert test["sign_flip_standard_error"] == result["standard_error"]


def test_twenty_six_seeds_get_an_exact_answer():
    rng = random.Random(26)
    a = [rng.gauss(0.1, 1) for _ in range(26)]
    b = [rng.gauss(0.0, 1) for _ in range(26)]
    result = paired_test(a, b)
    assert result["sign_flip_method"] == "exact"
    assert result["sign_flip_standard_error"] == 0.0
    # an exact p is a count of patterns over 2^26
    assert (result["p_sign_flip"] * 2**26).is_integer()
    # the same differences, scaled, give the same p
    scaled = paired_test([x * 3e-9 for x in a], [y * 3e-9 for y in b])
    assert scaled["p_sign_flip"] == result["p_sign_flip"]


# ------------------------------------------------------------- paired test


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
    # t_{0.975, 2} = 4.302653 (the closed form of Solution 4 of the chapter)
    half = 0.95 * math.sqrt(2 / (1 - 0.95**2)) * sd / math.sqrt(3)
    low, high = result["mean_interval"]
    assert low == pytest.approx(mean - half) and high == pytest.approx(
        mean + half
    )


def test_a_constant_difference_has_no_t():
    result = paired_test([1.0, 2.0], [0.5, 1.5])
    assert result["t"] is None and result["p_t"] is None
    assert result["mean_interval"] is None
    assert result["p_sign_flip"] == 0.5


def test_numpy_numbers_and_arrays_are_numbers():
    expected = paired_test([1.0, 2.0, 4.0], [1.5, 2.0, 3.0])
    numpy = paired_test(
        np.array([1.0, 2.0, 4.0]),
        [np.float32(1.5), np.int64(2), np.float64(3.0)],
    )
    assert numpy == expected
    assert holm([np.float32(0.01)]) == [True]
    assert holm(np.array([0.01, 0.2])) == [True, False]


def test_differences_near_the_float_limit_are_tested_not_overflowed():
    result = paired_test([1e200, -1e200, 3e200], [0.0, 0.0, 0.0])
    small = paired_test([1.0, -1.0, 3.0], [0.0, 0.0, 0.0])
    assert result["p_t"] == pytest.approx(small["p_t"], rel=1e-12)
    assert result["p_sign_flip"] == small["p_sign_flip"]
    assert result["mean_interval"][1] == pytest.approx(
        1e200 * small["mean_interval"][1], rel=1e-12
    )


@pytest.mark.parametrize(
    "a, b, error, words",
    [
        ([1.0, 2.0], [1.0], ValueError, "pair up seed by seed"),
        ([1.0], [2.0], ValueError, "at least 2 seeds"),
        ([1.0, math.nan], [1.0, 2.0], ValueError, "a must hold finite"),
        ([1.0, 2.0], [1.0, "2"], TypeError, "b must hold numbers"),
        ("12", [1.0, 2.0], TypeError, "a must be a sequence"),
        ([True, 2.0], [1.0, 2.0], TypeError, "a must hold numbers"),
        ({1.0, 2.0}, [1.0, 2.0], TypeError, "a must be a sequence"),
        ([1e308, -1e308], [-1e308, 1e308], ValueError, r"a\[0\] - b\[0\]"),
    ],
)
def test_bad_input_is_refused_by_name(a, b, error, words):
    with pytest.raises(error, match=words):
        paired_test(a, b)


# ----------------------------------------------------------- effect sizes


def test_the_mean_interval_covers_the_true_mean_as_often_as_it_says():
    # the interval is mean +- c s / sqrt(n), c one number for a given n
    rng = random.Random(3)
    c = None
    for _ in range(20):
        d = [rng.gauss(0.5, 2.0) for _ in range(3)]
        low, high = mean_interval(d)
        half = statistics.stdev(d) / math.sqrt(3)
        c = c or (high - low) / 2 / half
        assert (high + low) / 2 == pytest.approx(statistics.fmean(d))
        assert (high - low) / 2 == pytest.approx(c * half)
    # 200,000 simulated trials of 3 normal differences: it holds the true
    # mean in 95 % of them (within four standard errors of the count)
    d = np.random.default_rng(3).normal(0.5, 2.0, (200_000, 3))
    half = c * d.std(axis=1, ddof=1) / math.sqrt(3)
    held = np.mean(np.abs(d.mean(axis=1) - 0.5) <= half)
    assert abs(held - 0.95) < 4 * math.sqrt(0.95 * 0.05 / 200_000)


def test_the_mean_interval_excludes_zero_exactly_when_p_t_is_below_005():
    rng = random.Random(4)
    for _ in range(200):
        a = [rng.gauss(0.0, 1) for _ in range(4)]
        b = [rng.gauss(0.8, 1) for _ in range(4)]
        result = paired_test(a, b)
        low, high = result["mean_interval"]
        assert (result["p_t"] < 0.05) == (high < 0 or low > 0)


def chi2_cdf_closed_form(x, df):
    # df = 1: erf(sqrt(x / 2)); df = 2: 1 - e^(-x/2);
    # df = 4: 1 - e^(-x/2) (1 + x / 2)
    return {
        1: math.erf(math.sqrt(x / 2)),
        2: 1 - math.exp(-x / 2),
        4: 1 - math.exp(-x / 2) * (1 + x / 2),
    }[df]


@pytest.mark.parametrize("df", [1, 2, 4])
@pytest.mark.parametrize("x", [0.01, 0.5, 2.0, 7.5, 30.0])
def test_chi2_cdf_matches_closed_forms(x, df):
    assert stats._chi2_cdf(x, df) == pytest.approx(
        chi2_cdf_closed_form(x, df), abs=1e-14
    )


def test_chi2_quantiles_match_tables():
    # the 2.5 % and 97.5 % points of chi-square with 10 degrees of freedom,
    # as every table prints them (and SciPy 1.17's chi2.ppf to 16 digits)
    assert stats._chi2_quantile(0.975, 10) == pytest.approx(
        20.483177350807388, rel=1e-12
    )
    assert stats._chi2_quantile(0.025, 10) == pytest.approx(
        3.2469727802368413, rel=1e-12
    )


def test_sd_interval_with_three_seeds_has_its_closed_form():
    # 2 degrees of freedom: chi2 quantile q is -2 ln(1 - q)
    low, high = sd_interval(1.0, 3)
    assert low == pytest.approx(math.sqrt(2 / (-2 * math.log(0.025))))
    assert high == pytest.approx(math.sqrt(2 / (-2 * math.log(0.975))))
    assert (round(low, 2), round(high, 1)) == (0.52, 6.3)  # the docstring


def test_sd_interval_covers_the_true_sd_as_often_as_it_says():
    low, high = sd_interval(1.0, 3)
    assert sd_interval(0.02, 3) == pytest.approx((0.02 * low, 0.02 * high))
    s = (
        np.random.default_rng(5)
        .normal(0, 0.02, (200_000, 3))
        .std(axis=1, ddof=1)
    )
    held = np.mean((s * low <= 0.02) & (0.02 <= s * high))
    assert abs(held - 0.95) < 4 * math.sqrt(0.95 * 0.05 / 200_000)


# ------------------------------------------------------------ power, plans


def noncentral_t_cdf(t, df, delta, terms=400):
    """P(T' <= t) for t >= 0 by its Poisson-weighted series of incomplete
    beta functions (Guenther, 1978; Lenth's AS 243), a method independent
    of the package's integral over the chi distribution:
    Phi(-delta) + 1/2 sum_j [p_j I_x(j + 1/2, df/2) + q_j I_x(j + 1, df/2)],
    x = t^2 / (t^2 + df)."""
    x = t * t / (t * t + df)
    half = delta * delta / 2
    total = normal_cdf(-delta)
    for j in range(terms):
        log_poisson = -half + j * math.log(half) - math.lgamma(j + 1)
        p_j = math.exp(log_poisson)
        q_j = (
            delta
            * math.exp(-half + j * math.log(half) - math.lgamma(j + 1.5))
            / math.sqrt(2)
        )
        total += 0.5 * (
            p_j * incomplete_beta(j + 0.5, df / 2, x)
            + q_j * incomplete_beta(j + 1.0, df / 2, x)
        )
    return total


def power_by_series(n, gap, sd, alpha):
    c = t_quantile(1 - alpha / 2, n - 1)
    lam = gap / sd * math.sqrt(n)
    # P(T' >= c) + P(T' <= -c), the second as 1 - P(-T' < c), -T' having
    # noncentrality -lam
    return (
        2 - noncentral_t_cdf(c, n - 1, lam) - noncentral_t_cdf(c, n - 1, -lam)
    )


@pytest.mark.parametrize(
    "n, gap, alpha",
    [(2, 1.0, 0.05), (3, 2.0, 0.05), (5, 1.2, 0.05), (11, 1.5, 0.05 / 11)]
    + [(34, 0.5, 0.05), (59, 0.5, 0.05 / 11), (20, 0.1, 0.01)],
)
def test_power_matches_the_series_of_the_noncentral_t(n, gap, alpha):
    assert t_test_power(n, gap, 1.0, alpha) == pytest.approx(
        power_by_series(n, gap, 1.0, alpha), abs=1e-8
    )


@pytest.mark.parametrize(
    "n, gap, alpha, scipy_power",
    [
        # SciPy 1.17: nct.sf(c, n-1, lam) + nct.cdf(-c, n-1, lam)
        (34, 0.5, 0.05, 0.8077775012792738),
        (33, 0.5, 0.05, 0.7953658414875041),
        (59, 0.5, 0.05 / 11, 0.8075738198550537),
        (58, 0.5, 0.05 / 11, 0.7981804547759862),
        (11, 1.5, 0.05 / 11, 0.8663429066188247),
        (10, 1.5, 0.05 / 11, 0.7963917960236002),
        (3, 2.0, 0.05, 0.47074943127843494),
    ],
)
def test_power_matches_scipy(n, gap, alpha, scipy_power):
    assert t_test_power(n, gap, 1.0, alpha) == pytest.approx(
        scipy_power, abs=1e-8
    )


@pytest.mark.parametrize(
    "n, gap, alpha", [(3, 2.0, 0.05), (5, 1.2, 0.05), (11, 1.5, 0.05 / 11)]
)
def test_power_matches_a_simulation(n, gap, alpha):
    # simulate the test itself: n normal differences, |t| against c
    trials = 200_000
    d = np.random.default_rng(n).normal(gap, 1.0, (trials, n))
    t = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(n))
    rejected = np.mean(np.abs(t) >= t_quantile(1 - alpha / 2, n - 1))
    power = t_test_power(n, gap, 1.0, alpha)
    assert abs(rejected - power) < 4 * math.sqrt(power * (1 - power) / trials)


def test_power_tends_to_the_normal_approximation_and_to_alpha():
    n = 10**6
    z = stats._normal_upper(0.025)
    for lam in (1.0, 2.8, 4.0):
        normal = normal_cdf(lam - z) + normal_cdf(-lam - z)
        assert t_test_power(n, lam / math.sqrt(n), 1.0) == pytest.approx(
            normal, abs=1e-6
        )
    # no effect: the test rejects at its level
    for n, alpha in ((2, 0.05), (3, 0.01), (30, 0.05 / 11)):
        assert t_test_power(n, 1e-12, 1.0, alpha) == pytest.approx(
            alpha, abs=1e-9
        )


def test_seeds_needed_matches_published_sample_sizes():
    # a paired (one-sample) t-test, two-sided at 5 %, power 80 %: the
    # standard tables give 34 pairs for an effect of half a standard
    # deviation and 10 for one standard deviation
    for exact in (True, False):
        assert seeds_needed(sd=0.02, gap=0.01, exact=exact) == 34
        assert seeds_needed(sd=0.02, gap=0.02, exact=exact) == 10
    # for a small effect it tends to the normal ((1.96 + 0.84) sd / gap)^2
    n = seeds_needed(sd=1.0, gap=0.1)
    assert n == pytest.approx(((1.959964 + 0.841621) / 0.1) ** 2, rel=0.02)
    # a stricter level (a correction for many tests) needs more seeds
    assert seeds_needed(0.02, 0.01, alpha=0.05 / 11) > 34
    with pytest.raises(ValueError, match="gap must be a positive"):
        seeds_needed(0.02, 0.0)


@pytest.mark.parametrize(
    "gap, exact_n, approximate_n",
    [(0.01, 59, 58), (0.02, 18, 18), (0.03, 11, 10)],
)
def test_the_approximation_falls_short_at_the_strictest_holm_level(
    gap, exact_n, approximate_n
):
    alpha = 0.05 / 11
    assert seeds_needed(0.02, gap, alpha) == exact_n
    assert seeds_needed(0.02, gap, alpha, exact=False) == approximate_n
    # exact_n is the smallest with enough power
    assert t_test_power(exact_n, gap, 0.02, alpha) >= 0.8
    assert t_test_power(exact_n - 1, gap, 0.02, alpha) < 0.8


@pytest.mark.parametrize(
    "sd, gap, alpha, power",
    [
        (1.0, 0.01, 0.05, 0.8),  # about 78,500 seeds
        (1.0, 1e-5, 0.05, 0.8),  # about 78.5 billion
        (1.0, 100.0, 1e-10, 0.8),  # two seeds would almost do
        (1.0, 1.0, 1e-300, 0.999999),  # a tiny level
        (1.0, 0.3, 0.5, 0.51),
    ],
)
def test_seeds_needed_is_the_smallest_n_with_that_power(sd, gap, alpha, power):
    n = seeds_needed(sd, gap, alpha, power)
    assert t_test_power(n, gap, sd, alpha) >= power
    if n > 2:
        assert t_test_power(n - 1, gap, sd, alpha) < power


def test_seeds_needed_answers_for_a_tiny_gap_and_refuses_past_its_range():
    assert seeds_needed(1.0, 0.01) == 78491  # SciPy's power agrees
    assert seeds_needed(1.0, 0.01, exact=False) == 78491
    with pytest.raises(ValueError, match="more than the 1e\\+12"):
        seeds_needed(1.0, 1e-7)


# --------------------------------------------------- several tests at once


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


def brute_force_benjamini_hochberg(p_values, q):
    # Benjamini & Hochberg (1995): reject every p_i at most the largest
    # sorted p_(k) with p_(k) <= k q / m
    m = len(p_values)
    ranked = sorted(p_values)
    passing = [
        ranked[k - 1] for k in range(1, m + 1) if ranked[k - 1] <= k * q / m
    ]
    cut = max(passing, default=-1.0)
    return [p <= cut for p in p_values]


def test_benjamini_hochberg_steps_up_and_keeps_at_least_holm():
    # m = 4 at 5 %: the k-th smallest faces k * 0.0125. Sorted, 0.005,
    # 0.01, 0.03, 0.04 all pass, so all four are rejected (Holm: two)
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.005]) == [True] * 4
    # step-up: 0.02 fails its 0.0125, but 0.024 passes its 0.025, and
    # takes 0.02 with it
    assert benjamini_hochberg([0.5, 0.024, 0.6, 0.02]) == [
        False,
        True,
        False,
        True,
    ]
    assert benjamini_hochberg([0.02, 0.2, 0.04, 0.5]) == [False] * 4
    rng = random.Random(2)
    for m in range(1, 9):
        for _ in range(50):
            p = [rng.random() ** 3 for _ in range(m)]
            bh = benjamini_hochberg(p, 0.1)
            assert bh == brute_force_benjamini_hochberg(p, 0.1)
            assert all(b or not h for b, h in zip(bh, holm(p, 0.1)))


def test_holm_refuses_what_is_not_a_p_value():
    with pytest.raises(ValueError, match="p_values must lie in"):
        holm([0.1, 1.5])
    with pytest.raises(TypeError, match="p_values must hold numbers"):
        holm([0.1, "0.2"])
    with pytest.raises(ValueError, match="alpha must be a float in"):
        holm([0.1], alpha=0.0)
    with pytest.raises(TypeError, match="p_values must be a sequence"):
        holm(0.01)
    with pytest.raises(ValueError, match="q must be a float in"):
        benjamini_hochberg([0.1], q=1.0)
