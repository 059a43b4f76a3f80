"""Paired statistics for comparing two policies on the same questions: is a difference in EX real?

Both policies answer the SAME questions, so the comparison is paired: per question, each policy is right (1)
or wrong (0). This module turns the two 0/1 vectors into:

- **ΔEX** = EX(b) − EX(a) over the questions both could be scored on (``None`` entries, the unscorable
  questions whose gold SQL failed, are left out of both policies' EX and of every statistic);
- a **paired bootstrap 95% CI of ΔEX** (:func:`paired_bootstrap_ci`): questions resampled with replacement,
  percentile interval, seeded, vectorised with numpy;
- the **McNemar exact p-value** (:func:`mcnemar_exact`): under "no difference" a question that only one
  policy solves is equally likely to be either's, so the ``a_only`` count of the ``a_only + b_only``
  discordant questions is Binomial(n, 1/2); two-sided, p = 1 when there are no discordant pairs;
- the **discordant counts** and a plain **verdict sentence** (:func:`verdict_sentence`).

The decision rule (:data:`SIGNIFICANCE_RULE`): a difference is *significant* only when BOTH the 95% CI
excludes 0 AND McNemar's p < 0.05. The two tests nearly always agree; when they do not, the difference is
reported as not significant. This replaces the study's rule of thumb "differences under ~4% are noise".

Example:

```python
>>> sft  = [1] * 60 + [0] * 30 + [1] * 5 + [0] * 5
>>> grpo = [1] * 60 + [0] * 30 + [0] * 5 + [1] * 5
>>> result = paired_comparison(sft, grpo)
>>> result.delta_ex, result.discordant, result.mcnemar_p
(0.0, {'a_only': 5, 'b_only': 5}, 1.0)
>>> result.summary
'no significant difference: ΔEX = 0.0 points, 95% CI [−6.0, +6.0], p = 1.00, n = 100'

```
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import UsageError
from ..render.fmt import format_p, format_points

logger = logging.getLogger(__name__)

DEFAULT_RESAMPLES = 10_000
ALPHA = 0.05  # the CI is the central 1 − ALPHA interval and p must be below ALPHA
NO_DIFFERENCE = "no significant difference"
SIGNIFICANCE_RULE = (  # also written into eval_results.json
    "significant when the paired bootstrap 95% CI of ΔEX excludes 0 AND the McNemar exact p < 0.05; "
    "otherwise no significant difference"
)


def _paired_arrays(a: Sequence[int | None], b: Sequence[int | None]) -> tuple[np.ndarray, np.ndarray]:
    """The scorable pairs of two 0/1/None sequences, as int arrays (pairs with a ``None`` dropped)."""
    if len(a) != len(b):
        raise UsageError(
            f"paired statistics need one result per question from each policy: {len(a)} != {len(b)}"
        )
    kept_a, kept_b = [], []
    for index, (x, y) in enumerate(zip(a, b)):
        if x is None or y is None:
            continue
        for value in (x, y):
            if value not in (0, 1):
                raise UsageError(
                    f"question {index}: correctness must be 1, 0 or None (unscorable), got {value!r}"
                )
        kept_a.append(int(x))
        kept_b.append(int(y))
    return np.asarray(kept_a, dtype=np.int64), np.asarray(kept_b, dtype=np.int64)


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value in ``(0, 1]`` from the discordant counts (questions only ``a`` /
    only ``b`` solves): ``min(1, 2 * P(X <= min(a_only, b_only)))`` for X ~ Binomial(a_only + b_only, 1/2),
    with exact integer binomial coefficients.

    Example:

    ```python
    >>> mcnemar_exact(0, 5)        # 2 * (1/2)**5
    0.0625
    >>> round(mcnemar_exact(9, 11), 4)
    0.8238
    >>> mcnemar_exact(0, 0)
    1.0

    ```
    """
    for name, value in (("a_only", a_only), ("b_only", b_only)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise UsageError(f"{name} must be a count >= 0, got {value!r}")
    n = int(a_only) + int(b_only)
    if n == 0:
        return 1.0
    k = min(int(a_only), int(b_only))
    tail = sum(math.comb(n, i) for i in range(k + 1))
    # Exact rational 2 * tail / 2**n, converted once (Python's int division rounds correctly, even for huge n).
    return min(1.0, (2 * tail) / (1 << n))


def paired_bootstrap_ci(
    a: Sequence[int | None],
    b: Sequence[int | None],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 1 - ALPHA,
) -> tuple[float, float]:
    """Percentile paired-bootstrap CI ``(low, high)`` of ΔEX = mean(b) − mean(a), as fractions; seeded.

    A resample of ``n`` paired questions matters only through how often each difference (−1, 0, +1) is drawn,
    so those counts are drawn from Multinomial(n, observed shares): the same distribution as resampling
    indices, in ``O(resamples)`` whatever ``n``. UsageError on bad input or no scorable pair.

    Example:

    ```python
    >>> a = [1, 1, 0, 0, 1, 0, 1, 1, 0, 1] * 10
    >>> b = [1, 1, 1, 0, 1, 0, 1, 1, 1, 1] * 10
    >>> low, high = paired_bootstrap_ci(a, b, seed=0)
    >>> low > 0, (low, high) == paired_bootstrap_ci(a, b, seed=0)
    (True, True)

    ```
    """
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise UsageError(f"resamples must be a positive integer, got {resamples!r}")
    if not 0 < confidence < 1:
        raise UsageError(f"confidence must be in (0, 1), got {confidence!r}")
    xa, xb = _paired_arrays(a, b)
    n = int(xa.size)
    if n == 0:
        raise UsageError("no scorable question pairs: a confidence interval needs at least one")
    diff = xb - xa
    counts = np.array([np.sum(diff == -1), np.sum(diff == 0), np.sum(diff == 1)], dtype=np.float64)
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(n, counts / n, size=resamples)
    deltas = (draws[:, 2] - draws[:, 0]) / n
    tail = (1 - confidence) / 2
    low, high = np.quantile(deltas, [tail, 1 - tail])
    return float(low), float(high)


def is_significant(ci95: tuple[float, float], p_value: float, alpha: float = ALPHA) -> bool:
    """The decision rule (:data:`SIGNIFICANCE_RULE`): the CI excludes 0 AND p < ``alpha``.

    Example:

    ```python
    >>> is_significant((0.01, 0.05), 0.02), is_significant((-0.01, 0.05), 0.02), is_significant((0.01, 0.05), 0.07)
    (True, False, False)

    ```
    """
    low, high = ci95
    return (low > 0 or high < 0) and p_value < alpha


def verdict_words(delta: float, significant: bool, a: str = "sft", b: str = "grpo") -> str:
    """The verdict in words: ``no significant difference``, ``<b> significantly better than <a>`` or worse.

    Example:

    ```python
    >>> verdict_words(0.05, False), verdict_words(0.05, True), verdict_words(-0.05, True)
    ('no significant difference', 'grpo significantly better than sft', 'grpo significantly worse than sft')

    ```
    """
    if not significant:
        return NO_DIFFERENCE
    return f"{b} significantly {'better' if delta > 0 else 'worse'} than {a}"


def verdict_sentence(verdict: str, delta: float, ci95: tuple[float, float], p_value: float, n: int) -> str:
    """The plain verdict sentence (``verdict`` from :func:`verdict_words`, ``delta``/``ci95`` as fractions).

    Example:

    ```python
    >>> verdict_sentence("no significant difference", 0.007, (-0.034, 0.047), 0.81, 200)
    'no significant difference: ΔEX = +0.7 points, 95% CI [−3.4, +4.7], p = 0.81, n = 200'

    ```
    """
    low, high = ci95
    return (
        f"{verdict}: ΔEX = {format_points(delta)} points, 95% CI [{format_points(low)}, {format_points(high)}], "
        f"{format_p(p_value)}, n = {n}"
    )


@dataclass(frozen=True)
class PairedComparison:
    """Policy ``b`` against policy ``a`` (``b`` − ``a``) over ``n`` scorable question pairs; ``ex_a``/``ex_b``
    are over those ``n``, ``discordant`` is ``{"a_only": ..., "b_only": ...}``."""

    a: str
    b: str
    n: int
    ex_a: float
    ex_b: float
    delta_ex: float
    ci95: tuple[float, float]
    bootstrap_resamples: int
    bootstrap_seed: int
    mcnemar_p: float
    discordant: dict[str, int]
    significant: bool
    verdict: str
    summary: str

    def to_dict(self) -> dict:
        """The ``comparison`` entry of ``eval_results.json`` (the shared contract's keys, plus the two EX)."""
        return {
            "a": self.a,
            "b": self.b,
            "ex_a": self.ex_a,
            "ex_b": self.ex_b,
            "delta_ex": self.delta_ex,
            "ci95": [self.ci95[0], self.ci95[1]],
            "bootstrap_resamples": self.bootstrap_resamples,
            "bootstrap_seed": self.bootstrap_seed,
            "mcnemar_p": self.mcnemar_p,
            "discordant": dict(self.discordant),
            "n": self.n,
            "significant": self.significant,
            "rule": SIGNIFICANCE_RULE,
            "verdict": self.verdict,
            "summary": self.summary,
        }


def paired_comparison(
    a: Sequence[int | None],
    b: Sequence[int | None],
    *,
    a_name: str = "sft",
    b_name: str = "grpo",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> PairedComparison:
    """Compare two policies' per-question correctness (1, 0, ``None`` = unscorable; same question order):
    ΔEX, bootstrap CI, McNemar p, discordant counts, verdict. UsageError on bad input or no scorable pair.

    Example:

    ```python
    >>> a = [1] * 50 + [0] * 50
    >>> b = [1] * 50 + [1] * 20 + [0] * 30
    >>> result = paired_comparison(a, b, seed=0)
    >>> result.significant, result.verdict, result.discordant
    (True, 'grpo significantly better than sft', {'a_only': 0, 'b_only': 20})

    ```
    """
    xa, xb = _paired_arrays(a, b)
    n = int(xa.size)
    if n == 0:
        raise UsageError(
            "no scorable question pairs to compare (every gold SQL failed?); check the benchmark's databases"
        )
    a_only = int(np.sum((xa == 1) & (xb == 0)))
    b_only = int(np.sum((xa == 0) & (xb == 1)))
    ex_a = float(xa.mean())
    ex_b = float(xb.mean())
    delta = (b_only - a_only) / n  # == ex_b - ex_a, without the float subtraction's rounding
    ci95 = paired_bootstrap_ci(xa.tolist(), xb.tolist(), resamples=resamples, seed=seed)
    p_value = mcnemar_exact(a_only, b_only)
    significant = is_significant(ci95, p_value)
    if (ci95[0] > 0 or ci95[1] < 0) != (p_value < ALPHA):
        logger.info(
            "the bootstrap CI %s and McNemar's p = %.3f disagree on %s vs %s: reported as not significant",
            ci95,
            p_value,
            b_name,
            a_name,
        )
    verdict = verdict_words(delta, significant, a_name, b_name)
    return PairedComparison(
        a=a_name,
        b=b_name,
        n=n,
        ex_a=ex_a,
        ex_b=ex_b,
        delta_ex=delta,
        ci95=ci95,
        bootstrap_resamples=resamples,
        bootstrap_seed=seed,
        mcnemar_p=p_value,
        discordant={"a_only": a_only, "b_only": b_only},
        significant=significant,
        verdict=verdict,
        summary=verdict_sentence(verdict, delta, ci95, p_value, n),
    )


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error control), in input order.

    Example:

    ```python
    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    >>> holm([])
    []

    ```
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * float(p_values[index])))
        adjusted[index] = running
    return adjusted
