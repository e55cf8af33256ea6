"""Paired comparisons over seeds: what a handful of seeds can show, and what
not.

Two models trained from the same seed share the random stream of their
batches and validation windows, so the fair comparison is seed by seed: the
differences :math:`d_s = a_s - b_s`, one per seed. Whether their mean could be
zero is tested two ways:

* **The sign-flip test** (exact, a permutation test). If the two models were
  equally good, each :math:`d_s` would be as likely as :math:`-d_s`, so all
  :math:`2^n` patterns of signs are equally likely. The two-sided p-value is
  the share of patterns whose mean is at least as far from zero as the one
  observed. It assumes nothing about how the differences are distributed, and
  so it cannot say much with few seeds: its smallest possible value is
  :math:`2 / 2^n`, 0.5 with 2 seeds and 0.25 with 3. "Better in every seed"
  is exactly that smallest value.
* **The paired t-test**. :math:`t = \\bar d / (s_d / \\sqrt n)` with
  :math:`n - 1` degrees of freedom. It assumes the differences are normal;
  under that assumption it can give small p-values from 3 seeds, and with
  :math:`n - 1 = 2` degrees of freedom a p-value below 0.05 needs
  :math:`|t| > 4.3`.

No test can rescue a comparison the seeds do not separate; these say how far
the seeds go.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence


def _differences(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """``a[s] - b[s]`` for every seed s, checked: two equally long sequences
    of at least two finite numbers."""
    for name, values in (("a", a), ("b", b)):
        if isinstance(values, (str, bytes)) or not isinstance(
            values, Sequence
        ):
            raise TypeError(
                f"{name} must be a sequence of numbers, one per seed, got"
                f" {type(values).__name__}"
            )
        for value in values:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must hold numbers, got {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"{name} must hold finite numbers: {value}")
    if len(a) != len(b):
        raise ValueError(
            f"a and b must pair up seed by seed: {len(a)} values against"
            f" {len(b)}"
        )
    if len(a) < 2:
        raise ValueError(f"a paired test needs at least 2 seeds, got {len(a)}")
    return [x - y for x, y in zip(a, b)]


def sign_flip_p(differences: Sequence[float]) -> float:
    """Two-sided p-value of the exact sign-flip test that the mean of
    ``differences`` is zero: the share of the :math:`2^n` sign patterns whose
    mean is at least as far from zero as the observed one."""
    observed = abs(sum(differences))
    # A pattern ties the observed sum only by symmetry; rounding must not
    # break the tie against it.
    tolerance = 1e-12 * max(1.0, sum(abs(d) for d in differences))
    extreme = sum(
        abs(sum(sign * d for sign, d in zip(signs, differences)))
        >= observed - tolerance
        for signs in itertools.product((1, -1), repeat=len(differences))
    )
    return extreme / 2 ** len(differences)


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


def t_test_p(t: float, df: int) -> float:
    """Two-sided p-value of Student's t with ``df`` degrees of freedom:
    :math:`P(|T| \\ge |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2)`."""
    if math.isinf(t):
        return 0.0
    return incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def paired_test(a: Sequence[float], b: Sequence[float]) -> dict:
    """Compare ``a`` and ``b``, one number per seed in the same seed order
    (a validation loss, say: negative differences favour ``a``).

    Returns the per-seed ``differences`` (a - b), their ``mean_difference``,
    ``n``, whether ``a`` is lower in every seed (``a_lower_in_every_seed``),
    the paired ``t`` (None when every difference is the same, when the test
    is undefined) and its ``p_t``, the exact ``p_sign_flip`` and the
    ``smallest_p_sign_flip`` that ``n`` seeds allow.
    """
    differences = _differences(a, b)
    n = len(differences)
    mean = statistics.fmean(differences)
    spread = statistics.stdev(differences)
    if spread > 0.0:
        t = mean / (spread / math.sqrt(n))
        p_t = t_test_p(t, n - 1)
    else:
        t = p_t = None
    return {
        "n": n,
        "differences": differences,
        "mean_difference": mean,
        "a_lower_in_every_seed": all(d < 0 for d in differences),
        "t": t,
        "p_t": p_t,
        "p_sign_flip": sign_flip_p(differences),
        "smallest_p_sign_flip": 2.0 / 2**n,
    }


def holm(p_values: Sequence[float], alpha: float = 0.05) -> list[bool]:
    """Holm's step-down correction for testing several hypotheses at once
    (Holm, 1979): which of ``p_values`` to reject, in their own order, so
    that the chance of rejecting *any* true null stays at most ``alpha``.

    Sort the m p-values from the smallest; the k-th smallest (counting from
    0) must be at most :math:`\\alpha / (m - k)` to be rejected, and the
    first that is not stops the procedure, keeping it and every larger one.
    The smallest thus faces Bonferroni's :math:`\\alpha / m`, the largest
    :math:`\\alpha` itself.
    """
    p = list(p_values)
    for value in p:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"p_values must hold numbers, got {value!r}")
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"p_values must lie in [0, 1], got {value}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    m = len(p)
    rejected = [False] * m
    for k, i in enumerate(sorted(range(m), key=lambda i: p[i])):
        if p[i] > alpha / (m - k):
            break
        rejected[i] = True
    return rejected


def t_quantile(q: float, df: int) -> float:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom, for
    q in (0.5, 1), by bisection on :func:`t_test_p`."""
    if not 0.5 < q < 1.0:
        raise ValueError(f"q must lie in (0.5, 1), got {q}")
    target = 2.0 * (1.0 - q)  # P(|T| >= t) at the q quantile
    low, high = 0.0, 1.0
    while t_test_p(high, df) > target:
        high *= 2.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if t_test_p(middle, df) > target:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def seeds_needed(
    sd: float, gap: float, alpha: float = 0.05, power: float = 0.8
) -> int:
    """How many seeds a two-sided paired t-test at level ``alpha`` needs to
    detect a true mean difference ``gap`` with probability ``power``, when
    the per-seed differences have standard deviation ``sd``.

    The usual approximation, with t quantiles in place of normal ones: the
    smallest n with

    .. math::

        n \\ge \\left( (t_{1 - \\alpha/2,\\, n-1} + t_{\\text{power},\\, n-1})
        \\, \\frac{sd}{gap} \\right)^2 ,

    which for many seeds tends to the normal
    :math:`((1.96 + 0.84)\\, sd / gap)^2` at 5 % and 80 %.
    """
    for name, value in (("sd", sd), ("gap", gap)):
        if not (math.isfinite(value) and value > 0.0):
            raise ValueError(f"{name} must be a positive number, got {value}")
    if not 0.0 < alpha < 1.0 or not 0.5 < power < 1.0:
        raise ValueError(
            f"alpha must lie in (0, 1) and power in (0.5, 1), got {alpha}"
            f" and {power}"
        )
    n = 2
    while True:
        df = n - 1
        z = t_quantile(1.0 - alpha / 2.0, df) + t_quantile(power, df)
        if n >= (z * sd / gap) ** 2:
            return n
        n += 1
