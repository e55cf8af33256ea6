"""Paired comparisons over seeds: what a handful of seeds can show, and what
not.

Two models trained from the same seed share the random stream of their
batches and validation windows, so the fair comparison is seed by seed: the
differences :math:`d_s = a_s - b_s`, one per seed. Whether their mean could be
zero is tested two ways:

* **The sign-flip test** (a permutation test). Its null hypothesis is that
  each seed's difference is symmetric about zero, :math:`d_s` as likely as
  :math:`-d_s`, and the seeds independent; then all :math:`2^n` patterns of
  signs are equally likely, and the two-sided p-value is the share of
  patterns whose mean is at least as far from zero as the one observed. It
  is exact under that null and assumes no normal distribution, and so it
  cannot say much with few seeds: its smallest possible value is
  :math:`2 / 2^n`, 0.5 with 2 seeds and 0.25 with 3. "Better in every seed"
  is exactly that smallest value.
* **The paired t-test**. :math:`t = \\bar d / (s_d / \\sqrt n)` with
  :math:`n - 1` degrees of freedom. It assumes the differences are normal;
  under that assumption it can give small p-values from 3 seeds, and with
  :math:`n - 1 = 2` degrees of freedom a p-value below 0.05 needs
  :math:`|t| > 4.3`.

Beside each p-value goes the size of the effect, the mean difference with
its t-interval. Several tests at once are corrected (:func:`holm`, or
:func:`benjamini_hochberg` for the false discovery rate), and a plan for more
seeds reads the exact power of the t-test (:func:`t_test_power`,
:func:`seeds_needed`) with the uncertainty of the standard deviation it
assumes (:func:`sd_interval`). No test can rescue a comparison the seeds do
not separate; these say how far the seeds go.

Everything here is plain Python (``math``), checked against closed forms,
numerical integration and simulation in ``tests/test_stats.py``.
"""

from __future__ import annotations

import bisect
import math
import numbers
import random
import statistics
from collections.abc import Mapping, Sequence, Set

from mixers._checks import check_float_in, check_positive_float

# Up to this many seeds the sign-flip test counts every pattern; past it, it
# samples SIGN_FLIP_DRAWS patterns (a seeded Monte Carlo).
EXACT_SIGN_FLIP_UP_TO = 30
SIGN_FLIP_DRAWS = 20_000

# Differences larger than this are refused: their spread and its interval
# must fit in a float (the largest is about 1.8e308).
LARGEST_DIFFERENCE = 1e300

# Above this many degrees of freedom t_test_p integrates over the chi
# distribution instead of reading the incomplete beta function.
LARGE_DF = 1e5

# sd_interval answers for up to this many seeds; the chi-square series it
# sums takes about sqrt(n) terms.
MOST_SEEDS_FOR_SD = 10**6

# seeds_needed answers up to this many seeds; past it, n and n + 1 are no
# longer told apart by the power's floating-point arithmetic.
MOST_SEEDS = 10**12


# ----------------------------------------------------------- sign-flip test
#
# Under the null each seed's difference is as likely to be d_s as -d_s, so
# the 2^n sign patterns are equally likely. Counting them one by one costs
# 2^n sums; splitting the seeds in two halves costs 2 * 2^(n/2), since a
# pattern's sum is one half's signed sum plus the other's.


def _signed_sums(values: Sequence[float]) -> list[float]:
    """The :math:`2^k` sums :math:`\\sum_i \\pm v_i`, one per sign pattern:
    at index j, :math:`v_i` is negated where bit i of j is set."""
    sums = [0.0]
    for v in values:
        sums = [s + v for s in sums] + [s - v for s in sums]
    return sums


def _exact_sign_flip(differences: list[float], threshold: float) -> float:
    """The share of the :math:`2^n` patterns with :math:`|\\sum \\pm d_s|
    \\ge` ``threshold``, counted exactly, half against half."""
    half = len(differences) // 2
    left = _signed_sums(differences[:half])
    right = sorted(_signed_sums(differences[half:]))
    extreme = 0
    for s in left:
        # partners r with s + r >= threshold, then with s + r <= -threshold
        extreme += len(right) - bisect.bisect_left(right, threshold - s)
        extreme += bisect.bisect_right(right, -threshold - s)
    return extreme / 2 ** len(differences)


def _sampled_sign_flip(
    differences: list[float], threshold: float, draws: int, seed: int = 0
) -> float:
    """The share estimated from ``draws`` random patterns, counting the
    observed pattern among them: :math:`(b + 1) / (\\text{draws} + 1)` with b
    the extreme draws, never 0, a valid p-value (Phipson & Smyth, 2010)."""
    # Each block of 8 seeds gets a table of its 256 signed sums, so that a
    # pattern's sum is n / 8 look-ups of its random bits.
    blocks = [differences[i : i + 8] for i in range(0, len(differences), 8)]
    tables = [(_signed_sums(block), len(block)) for block in blocks]
    rng = random.Random(seed)
    extreme = 0
    for _ in range(draws):
        bits, total = rng.getrandbits(len(differences)), 0.0
        for table, width in tables:
            total += table[bits & ((1 << width) - 1)]
            bits >>= width
        extreme += abs(total) >= threshold
    return (extreme + 1) / (draws + 1)


def sign_flip_test(differences: Sequence[float]) -> dict:
    """The two-sided sign-flip test that the mean of ``differences`` is zero.

    Returns its ``p`` and how it was computed: ``method`` ``"exact"`` (every
    pattern counted, up to :data:`EXACT_SIGN_FLIP_UP_TO` seeds) or
    ``"monte carlo"`` (``draws`` patterns, seeded, so the same input gives
    the same p), with the ``standard_error`` of p,
    :math:`\\sqrt{p (1 - p) / \\text{draws}}` (0 when exact).
    """
    d = _check_numbers("differences", differences)
    if len(d) < 2:
        raise ValueError(f"differences must hold at least 2, got {len(d)}")
    # p is unchanged by a common scale; a power of two keeps every digit and
    # the sums far from overflow.
    scale = 2.0 ** math.frexp(max(abs(v) for v in d) or 1.0)[1]
    d = [v / scale for v in d]
    observed = abs(sum(d))
    # A pattern ties the observed sum only by symmetry; rounding must not
    # break the tie against it.
    threshold = observed - 1e-12 * sum(abs(v) for v in d)
    if threshold <= 0.0:  # a zero mean: every pattern is as far from it
        p, draws = 1.0, None
    elif len(d) <= EXACT_SIGN_FLIP_UP_TO:
        p, draws = _exact_sign_flip(d, threshold), None
    else:
        draws = SIGN_FLIP_DRAWS
        p = _sampled_sign_flip(d, threshold, draws)
    return {
        "p": p,
        "method": "exact" if draws is None else "monte carlo",
        "draws": draws,
        "standard_error": 0.0
        if draws is None
        else (p * (1 - p) / draws) ** 0.5,
    }


def sign_flip_p(differences: Sequence[float]) -> float:
    """Two-sided p-value of the sign-flip test (:func:`sign_flip_test`): the
    share of the :math:`2^n` sign patterns whose mean is at least as far from
    zero as the observed one."""
    return sign_flip_test(differences)["p"]


# ---------------------------------------------------------------- Student's t


def _normal_cdf(x: float) -> float:
    """:math:`\\Phi(x)`, accurate in both tails."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _normal_upper(p: float) -> float:
    """The z with :math:`P(Z \\ge z) = p`, for p in (0, 1), by bisection (in
    the upper tail, so that a tiny p keeps its digits)."""
    low, high = -40.0, 40.0
    while True:
        middle = (low + high) / 2.0
        if middle in (low, high):
            return middle
        if _normal_cdf(-middle) > p:
            low = middle
        else:
            high = middle


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularised incomplete beta function
    (modified Lentz's method), which converges fast for x < (a + 1) / (a + b +
    2)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        # the even step, then the odd step, of the fraction's terms
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return result


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function :math:`I_x(a, b)`, for a, b
    > 0 and x in [0, 1]."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b)
        - math.lgamma(a)
        - math.lgamma(b)
        + a * math.log(x)
        + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _continued_fraction(a, b, x) / a
    # the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) keeps the fraction convergent
    return 1.0 - math.exp(log_front) * _continued_fraction(b, a, 1.0 - x) / b


def t_test_p(t: float, df: float) -> float:
    """Two-sided p-value of Student's t with ``df`` > 0 degrees of freedom:
    :math:`P(|T| \\ge |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2)`.

    Past :data:`LARGE_DF` degrees of freedom x is within
    :math:`t^2 / df` of 1 and the continued fraction loses its digits to
    rounding; there the p-value is the integral of
    :func:`_central_t_tail` instead."""
    t = _check_t(t)
    df = check_positive_float("df", df)
    if math.isinf(t):
        return 0.0
    if df > LARGE_DF:
        return _central_t_tail(abs(t), df)
    return incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t with ``df`` > 0 degrees of freedom,
    for q in (0.5, 1): the t with :math:`P(|T| \\ge t) = 2 (1 - q)`
    (:func:`_t_critical`)."""
    check_float_in("q", q, 0.5, 1.0, "()")
    df = check_positive_float("df", df)
    return _t_critical(2.0 * (1.0 - q), df)


def _t_critical(two_sided: float, df: float) -> float:
    """The t with :math:`P(|T| \\ge t) =` ``two_sided``, by bisection on
    :func:`t_test_p`, from the normal quantile z, which it exceeds by about
    :math:`(z^3 + z) / (4\\, df)`. A level is passed as itself, not as
    :math:`1 - \\alpha/2`, which rounds to 1 for a tiny :math:`\\alpha`."""
    low = _normal_upper(two_sided / 2.0)
    high = low + (low**3 + low) / df
    while t_test_p(high, df) > two_sided:
        low, high = high, 2.0 * high
    while high - low > 4e-16 * high:
        middle = (low + high) / 2.0
        if middle in (low, high):
            break
        if t_test_p(middle, df) > two_sided:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def mean_interval(
    differences: Sequence[float], level: float = 0.95
) -> tuple[float, float]:
    """The t-interval of the mean difference at confidence ``level``:

    .. math::

        \\bar d \\pm t_{(1 + \\text{level})/2,\\, n-1}\\, s_d / \\sqrt n .

    It is the effect size in the units of the differences (nats, say), and
    excludes 0 exactly when the t-test's p is below 1 - ``level``. With 3
    seeds :math:`t_{0.975,\\,2} = 4.30`, so its half-width is
    :math:`4.30 / \\sqrt 3 = 2.5` standard deviations of the differences.
    """
    d = _check_numbers("differences", differences)
    if len(d) < 2:
        raise ValueError(f"differences must hold at least 2, got {len(d)}")
    level = check_float_in("level", level, 0.0, 1.0, "()")
    mean, spread = statistics.fmean(d), statistics.stdev(d)
    half = _t_critical(1.0 - level, len(d) - 1)
    margin = half * spread / math.sqrt(len(d))
    return mean - margin, mean + margin


# ------------------------------------------------------------- paired test


def paired_test(a: Sequence[float], b: Sequence[float]) -> dict:
    """Compare ``a`` and ``b``, one number per seed in the same seed order
    (a validation loss, say: negative differences favour ``a``).

    Returns the per-seed ``differences`` (a - b), their ``mean_difference``
    and its 95 % t-interval ``mean_interval`` (:func:`mean_interval`),
    ``n``, whether ``a`` is lower in every seed
    (``a_lower_in_every_seed``), the paired ``t`` and its ``p_t`` (both None
    when every difference is the same, where the test is undefined), the
    sign-flip test's ``p_sign_flip`` with its ``sign_flip_method``,
    ``sign_flip_draws`` and ``sign_flip_standard_error``
    (:func:`sign_flip_test`), and the ``smallest_p_sign_flip`` that ``n``
    seeds allow.
    """
    differences = _differences(a, b)
    n = len(differences)
    mean = statistics.fmean(differences)
    spread = statistics.stdev(differences)
    t = p_t = interval = None
    if spread > 0.0:
        t = mean / (spread / math.sqrt(n))
        p_t = t_test_p(t, n - 1)
        interval = mean_interval(differences)
    sign_flip = sign_flip_test(differences)
    return {
        "n": n,
        "differences": differences,
        "mean_difference": mean,
        "mean_interval": interval,
        "a_lower_in_every_seed": all(d < 0 for d in differences),
        "t": t,
        "p_t": p_t,
        "p_sign_flip": sign_flip["p"],
        "sign_flip_method": sign_flip["method"],
        "sign_flip_draws": sign_flip["draws"],
        "sign_flip_standard_error": sign_flip["standard_error"],
        "smallest_p_sign_flip": 2.0 / 2**n,
    }


# --------------------------------------------------- several tests at once


def _check_p_values(p_values, alpha: float, name: str = "alpha") -> list:
    """The p-values as floats in [0, 1], and ``alpha`` in (0, 1)."""
    p = _check_numbers("p_values", p_values)
    for value in p:
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"p_values must lie in [0, 1], got {value}")
    check_float_in(name, alpha, 0.0, 1.0, "()")
    return p


def holm(p_values: Sequence[float], alpha: float = 0.05) -> list[bool]:
    """Holm's step-down correction for testing several hypotheses at once
    (Holm, 1979): which of ``p_values`` to reject, in their own order, so
    that the chance of rejecting *any* true null (the family-wise error
    rate) stays at most ``alpha``, whatever the dependence between the
    tests.

    Sort the m p-values from the smallest; the k-th smallest (counting from
    0) must be at most :math:`\\alpha / (m - k)` to be rejected, and the
    first that is not stops the procedure, keeping it and every larger one.
    The smallest thus faces Bonferroni's :math:`\\alpha / m`, the largest
    :math:`\\alpha` itself.
    """
    p = _check_p_values(p_values, alpha)
    m = len(p)
    rejected = [False] * m
    for k, i in enumerate(sorted(range(m), key=lambda i: p[i])):
        if p[i] > alpha / (m - k):
            break
        rejected[i] = True
    return rejected


def benjamini_hochberg(
    p_values: Sequence[float], q: float = 0.05
) -> list[bool]:
    """Benjamini and Hochberg's step-up procedure (1995): which of
    ``p_values`` to reject, in their own order, so that the expected share
    of true nulls among the rejected (the false discovery rate) stays at
    most ``q``, for independent or positively dependent tests.

    Sort the m p-values from the smallest, :math:`p_{(1)} \\le \\dots \\le
    p_{(m)}`; find the largest k with :math:`p_{(k)} \\le k q / m` and reject
    the k smallest. It rejects at least what :func:`holm` rejects at the same
    level, and controls a weaker error.
    """
    p = _check_p_values(p_values, q, "q")
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    last = max(
        (k for k, i in enumerate(order, start=1) if p[i] <= k * q / m),
        default=0,
    )
    rejected = [False] * m
    for i in order[:last]:
        rejected[i] = True
    return rejected


# ------------------------------------------------------- power and planning
#
# The t statistic of n differences with mean delta and standard deviation
# sigma follows a noncentral t: T' = (Z + lam) / S, with Z standard normal,
# lam = delta sqrt(n) / sigma, and S = sqrt(V / nu), V chi-square with
# nu = n - 1 degrees of freedom, independent of Z. Its power integrates over
# S the chance that |Z + lam| passes the critical value times S.


def _log_density_of_s(s: float, nu: float) -> float:
    """:math:`\\log f_S(s)` up to a constant, for :math:`S = \\chi_\\nu /
    \\sqrt\\nu`: :math:`(\\nu - 1) \\log s - \\nu s^2 / 2`, written in
    :math:`u = s - 1` (plus :math:`\\nu / 2`) so that a large :math:`\\nu`
    does not cancel away its digits."""
    if s <= 0.0:
        return nu / 2.0 if nu == 1.0 else -math.inf
    u = s - 1.0
    return (nu - 1.0) * math.log1p(u) - nu * u * (1.0 + u / 2.0)


def _simpson(f, low: float, high: float, steps: int) -> float:
    """:math:`\\int_{low}^{high} f`, by Simpson's rule (``steps`` even); 0 for
    an empty interval."""
    if high <= low:
        return 0.0
    h = (high - low) / steps
    total = f(low) + f(high)
    for i in range(1, steps):
        total += (4.0 if i % 2 else 2.0) * f(low + i * h)
    return total * h / 3.0


def _integral_over_s(nu: float):
    """What both integrals over S need: :math:`\\int g(s) f_S(s)\\, ds /
    \\int f_S(s)\\, ds` over a stretch of S, for g given, and S's range.

    S spreads over about :math:`1 \\pm 1/\\sqrt{2\\nu}`; its range here,
    12 of those widths below 1 and 20 above (the right tail is the longer),
    leaves out under :math:`10^{-30}` of it. Far from 0 the integrand dies
    away smoothly at both ends and 200 steps of Simpson's rule reach
    rounding; with few degrees of freedom the range starts at 0, where it
    does not, and 1,000 steps keep the error under :math:`10^{-9}`.
    """
    width = 1.0 / math.sqrt(2.0 * nu)
    low, high = max(0.0, 1.0 - 12.0 * width), 1.0 + 20.0 * width
    steps = 1000 if low == 0.0 else 200

    def density(s):
        return math.exp(_log_density_of_s(s, nu))

    mass = _simpson(density, low, high, steps)

    def average(g, start=low, stop=high):
        start, stop = max(start, low), min(stop, high)
        return _simpson(lambda s: g(s) * density(s), start, stop, steps) / mass

    return average, low


def _two_sided_tail(c: float, nu: float, lam: float) -> float:
    """:math:`P(|T'| \\ge c)` for the noncentral t with ``nu`` degrees of
    freedom and noncentrality ``lam`` :math:`\\ge 0`:

    .. math::

        \\begin{aligned}
        P(|T'| \\ge c) &= \\frac{\\int g\\, f_S\\, ds}{\\int f_S\\, ds} , \\\\
        g(s) &= \\Phi(\\lambda - c s) \\\\
        &\\quad + \\Phi(-\\lambda - c s) .
        \\end{aligned}

    Each :math:`\\Phi` turns from 1 to 0 within :math:`12 / c` of
    :math:`\\pm\\lambda / c`, a stretch that may be far narrower than S's
    spread (few degrees of freedom, a strict level, so a large c) or far
    wider; Simpson's rule runs on each stretch separately, so that neither
    scale is too fine for the other's grid.
    """
    average, low = _integral_over_s(nu)
    edge = (lam - 12.0) / c
    # below the edge Phi(lam - c s) is 1 to within Phi(-12), 2e-33
    upper = average(lambda s: 1.0, low, edge) + average(
        lambda s: _normal_cdf(lam - c * s), edge, (lam + 12.0) / c
    )
    lower = average(lambda s: _normal_cdf(-lam - c * s), low, (12 - lam) / c)
    return min(1.0, upper + lower)


def _central_t_tail(t: float, nu: float) -> float:
    """:math:`P(|T| \\ge t) = 2 \\int \\Phi(-t s) f_S(s)\\, ds`, the central
    t's tail, for many degrees of freedom: one integral over the whole
    spread of S, which keeps the tail's relative accuracy however far out
    t lies."""
    average, _ = _integral_over_s(nu)
    return 2.0 * average(lambda s: _normal_cdf(-t * s))


def t_test_power(n: int, gap: float, sd: float, alpha: float = 0.05) -> float:
    """The exact power of the two-sided paired t-test at level ``alpha``
    with ``n`` seeds, when the differences are normal with mean ``gap`` and
    standard deviation ``sd``: the chance that :math:`|t|` passes
    :math:`c = t_{1 - \\alpha/2,\\, n-1}`,

    .. math::

        P(|T'_{n-1,\\, \\lambda}| \\ge c), \\qquad
        \\lambda = \\frac{\\text{gap}}{\\text{sd}} \\sqrt n ,

    from the noncentral t distribution (:func:`_two_sided_tail`).
    """
    n = _check_count("n", n, 2)
    gap = check_positive_float("gap", gap)
    sd = check_positive_float("sd", sd)
    alpha = check_float_in("alpha", alpha, 0.0, 1.0, "()")
    c = _t_critical(alpha, n - 1)
    return _two_sided_tail(c, n - 1, gap / sd * math.sqrt(n))


# The chi-square distribution, for the uncertainty of a standard deviation.


def _lower_gamma_series(a: float, x: float) -> float:
    """:math:`P(a, x)` by its series, for x < a + 1."""
    term = total = 1.0 / a
    k = 0
    while abs(term) > 1e-17 * abs(total):
        k += 1
        term *= x / (a + k)
        total += term
    return total * math.exp(-x + a * math.log(x) - math.lgamma(a))


def _upper_gamma_fraction(a: float, x: float) -> float:
    """:math:`Q(a, x) = 1 - P(a, x)` by its continued fraction (modified
    Lentz), for x >= a + 1."""
    tiny = 1e-300
    b = x + 1.0 - a
    c, d = 1.0 / tiny, 1.0 / b
    result = d
    for i in range(1, 100_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = b + an / c
        c = c if abs(c) > tiny else tiny
        result *= d * c
        if abs(d * c - 1.0) < 1e-16:
            break
    return result * math.exp(-x + a * math.log(x) - math.lgamma(a))


def _chi2_cdf(x: float, df: float) -> float:
    """:math:`P(\\chi^2_{df} \\le x)`, the regularised lower incomplete
    gamma function :math:`P(df / 2, x / 2)`."""
    a, half = df / 2.0, x / 2.0
    if half == 0.0:
        return 0.0
    if half < a + 1.0:
        return _lower_gamma_series(a, half)
    return 1.0 - _upper_gamma_fraction(a, half)


def _chi2_quantile(q: float, df: float) -> float:
    """The ``q`` quantile of the chi-square distribution with ``df``
    degrees of freedom, q in (0, 1), by bisection on :func:`_chi2_cdf`."""
    low, high = 0.0, max(1.0, 2.0 * df)
    while _chi2_cdf(high, df) < q:
        low, high = high, 2.0 * high
    while high - low > 4e-16 * high:
        middle = (low + high) / 2.0
        if middle in (low, high):
            break
        if _chi2_cdf(middle, df) < q:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def sd_interval(sd: float, n: int, level: float = 0.95) -> tuple:
    """The confidence interval, at ``level``, of a true standard deviation
    :math:`\\sigma` estimated as ``sd`` from ``n`` normal values: since
    :math:`(n - 1) s^2 / \\sigma^2 \\sim \\chi^2_{n-1}`,

    .. math::

        \\begin{aligned}
        \\sigma &\\ge s \\sqrt{\\frac{n - 1}{\\chi^2_{(1 + \\text{level})/2,\\,
        n-1}}} , \\\\
        \\sigma &\\le s \\sqrt{\\frac{n - 1}{\\chi^2_{(1 - \\text{level})/2,\\,
        n-1}}} .
        \\end{aligned}

    With 3 seeds (2 degrees of freedom) the 95 % interval runs from 0.52 s
    to 6.3 s: three seeds barely fix a standard deviation's order of
    magnitude.
    """
    sd = check_positive_float("sd", sd)
    n = _check_count("n", n, 2)
    if n > MOST_SEEDS_FOR_SD:
        raise ValueError(
            f"n must be at most {MOST_SEEDS_FOR_SD:,}, got {n:,}: the"
            " chi-square quantiles here are summed term by term, for up to"
            " a million seeds (past it the interval is within 0.2 % of sd)"
        )
    level = check_float_in("level", level, 0.0, 1.0, "()")
    df = n - 1
    return (
        sd * math.sqrt(df / _chi2_quantile((1.0 + level) / 2.0, df)),
        sd * math.sqrt(df / _chi2_quantile((1.0 - level) / 2.0, df)),
    )


def _smallest_n(enough, start: int) -> int:
    """The smallest n >= 2 with ``enough(n)``, for ``enough`` monotone in n,
    searched from ``start`` (near the answer): steps that double away from
    it until the answer is bracketed, then bisection."""
    low, high, step = start - 1, start, 1
    while not enough(high):
        low, high, step = high, high + step, 2 * step
    step = 1
    while low >= 2 and enough(low):
        high, low, step = low, max(1, low - step), 2 * step
    while high - low > 1:  # low = 1 stands for "no n"
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high


def seeds_needed(
    sd: float,
    gap: float,
    alpha: float = 0.05,
    power: float = 0.8,
    exact: bool = True,
) -> int:
    """How many seeds a two-sided paired t-test at level ``alpha`` needs to
    detect a true mean difference ``gap`` with probability ``power``, when
    the per-seed differences are normal with standard deviation ``sd``.

    ``exact``: the smallest n whose exact power (:func:`t_test_power`)
    reaches ``power``. Otherwise the usual approximation, which treats
    :math:`T'` as a central t shifted by :math:`\\lambda`: the smallest n
    with

    .. math::

        n \\ge \\left( (t_{1 - \\alpha/2,\\, n-1} + t_{\\text{power},\\, n-1})
        \\, \\frac{sd}{gap} \\right)^2 ,

    which for many seeds tends to the normal approximation
    :math:`n \\ge ((z_{1 - \\alpha/2} + z_\\text{power})\\, sd / gap)^2`
    (:math:`(1.96 + 0.84)^2 = 7.85` times :math:`(sd/gap)^2` at 5 % and
    80 %) and, with few seeds, falls a seed or two short of the exact count.
    Both searches start from the normal approximation and take a few steps,
    so any answer up to :data:`MOST_SEEDS` comes in milliseconds.
    """
    sd = check_positive_float("sd", sd)
    gap = check_positive_float("gap", gap)
    alpha = check_float_in("alpha", alpha, 0.0, 1.0, "()")
    power = check_float_in("power", power, 0.5, 1.0, "()")
    if not isinstance(exact, bool):
        raise TypeError(f"exact must be a bool, got {exact!r}")
    z = _normal_upper(alpha / 2.0) + _normal_upper(1.0 - power)
    normal = (z * sd / gap) ** 2
    if normal > MOST_SEEDS:
        raise ValueError(
            f"sd / gap = {sd / gap:.3g} at alpha {alpha:g} and power"
            f" {power:g} needs about {normal:.3g} seeds, more than the"
            f" {MOST_SEEDS:.0e} seeds_needed counts to"
        )
    start = max(2, math.ceil(normal))
    if exact:
        return _smallest_n(
            lambda n: t_test_power(n, gap, sd, alpha) >= power,
            _newton_step(sd, gap, alpha, power, start),
        )

    def needs(n):  # the right-hand side of the approximation
        df = n - 1
        t = _t_critical(alpha, df) + _t_critical(2.0 * (1.0 - power), df)
        return (t * sd / gap) ** 2

    # one step of n <- needs(n) from the normal n lands within a seed or so
    again = min(math.ceil(needs(start)), 2 * start + 10)
    return _smallest_n(lambda n: n >= needs(n), again)


def _newton_step(sd: float, gap: float, alpha: float, power: float, n: int):
    """A better start for the exact search than the normal approximation's
    n, one Newton step on the power: it grows by about
    :math:`\\varphi(\\lambda - c)\\, \\lambda / (2n)` a seed, since
    :math:`\\lambda \\propto \\sqrt n`. That matters with many seeds: the
    exact power also counts a rejection on the wrong side,
    :math:`\\Phi(-\\lambda - c)`, about :math:`10^{-6}` at 5 % and 80 %,
    which the normal approximation leaves out; with :math:`10^{10}` seeds
    that is worth thousands of seeds."""
    c = _t_critical(alpha, n - 1)
    lam = gap / sd * math.sqrt(n)
    slope = math.exp(-((lam - c) ** 2) / 2.0) / math.sqrt(2.0 * math.pi)
    slope *= lam / (2.0 * n)
    shortfall = power - _two_sided_tail(c, n - 1, lam)
    if slope <= 0.0 or not math.isfinite(shortfall / slope):
        return n
    return min(max(2, round(n + shortfall / slope)), 2 * n + 10)


# ---------------------------------------------------------------- the checks
#
# What every public function checks before any work: each names the argument,
# what it got and what it expects. numpy's numbers and 1-D arrays are
# accepted as numbers and sequences; a bool is not a number here.


def _check_numbers(name: str, values) -> list[float]:
    """``values`` as a list of finite floats: a sequence (or a 1-D array) of
    real numbers, numpy's among them; never a string, a mapping or a set,
    whose order is not the caller's."""
    if hasattr(values, "tolist") and not isinstance(values, Sequence):
        values = values.tolist()  # a numpy array or a tensor
    if isinstance(values, (str, bytes, Mapping, Set)) or not isinstance(
        values, Sequence
    ):
        raise TypeError(
            f"{name} must be a sequence of numbers, got"
            f" {type(values).__name__} {values!r}"
        )
    for value in values:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must hold numbers, got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"{name} must hold finite numbers, got {value}")
    return [float(value) for value in values]


def _check_count(name: str, value, least: int) -> int:
    """An integer (numpy's too, never a bool) of at least ``least``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int >= {least}, got {value!r}")
    if value < least:
        raise ValueError(f"{name} must be an int >= {least}, got {value}")
    return int(value)


def _check_t(t) -> float:
    """A real t statistic, :math:`\\pm\\infty` allowed, NaN not."""
    if isinstance(t, bool) or not isinstance(t, numbers.Real):
        raise TypeError(f"t must be a real number, got {t!r}")
    if math.isnan(t):
        raise ValueError("t must be a real number, not NaN, got nan")
    return float(t)


def _differences(a, b) -> list[float]:
    """``a[s] - b[s]`` for every seed s, checked: two equally long sequences
    of at least two finite numbers whose differences fit in a float."""
    a, b = _check_numbers("a", a), _check_numbers("b", b)
    if len(a) != len(b):
        raise ValueError(
            f"a and b must pair up seed by seed: {len(a)} values against"
            f" {len(b)}"
        )
    if len(a) < 2:
        raise ValueError(f"a paired test needs at least 2 seeds, got {len(a)}")
    differences = [x - y for x, y in zip(a, b)]
    for seed, d in enumerate(differences):
        if not abs(d) <= LARGEST_DIFFERENCE:
            raise ValueError(
                f"a and b: the difference a[{seed}] - b[{seed}] ="
                f" {a[seed]!r} - {b[seed]!r} is {d}; differences must be at"
                f" most {LARGEST_DIFFERENCE:g} in size, so that their spread"
                " fits in a float (rescale a and b)"
            )
    return differences
