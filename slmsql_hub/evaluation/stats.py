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

Seeds (:func:`question_comparison`): GRPO trained with several seeds answers each question once per seed, SFT
once. The unit of inference stays the QUESTION: per question, each arm's correctness is averaged over its
answers and d_i is the difference of the two means, so a question enters every statistic once however many
seeds there are (stacking seeds as extra pairs would count it once per seed and shrink the CI and p as if the
seeds were new questions). On the d_i:

- the test is a **paired sign-flip permutation test** (:func:`sign_flip_p`): under "no difference" each d_i is
  as likely to have the opposite sign; T = Σ d_i, p = P(|T*| >= |T|) over the 2^N sign vectors of the N
  non-zero d_i, computed exactly (the d_i are multiples of 1/seeds, so T*'s law is a convolution of
  binomials) up to :data:`_EXACT_SIGN_FLIPS` of them, else estimated from seeded draws as
  (1 + #{|T*| >= |T|}) / (1 + B). With one seed it IS the exact McNemar test;
- the CI is a **paired bootstrap over questions** of the mean d_i (:func:`bootstrap_mean_ci`);
- for claims about templates, :func:`cluster_bootstrap_ci` resamples whole templates (clusters) instead.

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

_DEFAULT_RESAMPLES = 10_000
_EXACT_SIGN_FLIPS = 1000
"""Up to this many non-zero d_i the sign-flip p is exact (2^-N stays a normal float); above, seeded draws."""
_SIGN_FLIP_TEST = "sign-flip permutation on per-question mean differences"
ALPHA = 0.05  # the CI is the central 1 − ALPHA interval and p must be below ALPHA
NO_DIFFERENCE = "no significant difference"
SIGNIFICANCE_RULE = (  # also written into eval_results.json
    "significant when the paired bootstrap 95% CI of ΔEX excludes 0 AND the McNemar exact p < 0.05; "
    "otherwise no significant difference"
)


def _correctness(values: Sequence[int | None], what: str) -> np.ndarray:
    """``values`` (1, 0 or ``None`` = unscorable) as floats, NaN for ``None``; UsageError otherwise."""
    out = np.empty(len(values), dtype=np.float64)
    for index, value in enumerate(values):
        if value is not None and value not in (0, 1):
            raise UsageError(
                f"{what}question {index}: correctness must be 1, 0 or None (unscorable), got {value!r}"
            )
        out[index] = np.nan if value is None else int(value)
    return out


def _paired_arrays(a: Sequence[int | None], b: Sequence[int | None]) -> tuple[np.ndarray, np.ndarray]:
    """The scorable pairs of two 0/1/None sequences, as int arrays (pairs with a ``None`` dropped)."""
    if len(a) != len(b):
        raise UsageError(
            f"paired statistics need one result per question from each policy: {len(a)} != {len(b)}"
        )
    xa, xb = _correctness(a, ""), _correctness(b, "")
    kept = ~(np.isnan(xa) | np.isnan(xb))
    return xa[kept].astype(np.int64), xb[kept].astype(np.int64)


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
    resamples: int = _DEFAULT_RESAMPLES,
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
    _check_bootstrap(resamples, confidence)
    xa, xb = _paired_arrays(a, b)
    if xa.size == 0:
        raise UsageError("no scorable question pairs: a confidence interval needs at least one")
    return bootstrap_mean_ci(xb - xa, resamples=resamples, seed=seed, confidence=confidence)


def _check_bootstrap(resamples: int, confidence: float) -> None:
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise UsageError(f"resamples must be a positive integer, got {resamples!r}")
    if not 0 < confidence < 1:
        raise UsageError(f"confidence must be in (0, 1), got {confidence!r}")


def _interval(means: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def bootstrap_mean_ci(
    d: Sequence[float] | np.ndarray,
    *,
    resamples: int = _DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 1 - ALPHA,
) -> tuple[float, float]:
    """Percentile bootstrap CI ``(low, high)`` of the mean of the per-question differences ``d`` (questions
    resampled with replacement; seeded).

    A resample matters only through how often each distinct value of ``d`` is drawn, so those counts are drawn
    from Multinomial(n, observed shares): the law of resampling indices, in ``O(resamples x distinct values)``
    whatever ``n`` (the d_i of s seeds take at most 2s + 1 values).

    Example:

    ```python
    >>> low, high = bootstrap_mean_ci([0.0] * 60 + [1.0] * 30 + [0.5] * 10, seed=0)
    >>> low < 0.35 < high, (low, high) == bootstrap_mean_ci([0.0] * 60 + [1.0] * 30 + [0.5] * 10, seed=0)
    (True, True)

    ```
    """
    _check_bootstrap(resamples, confidence)
    values, counts = np.unique(np.asarray(d, dtype=np.float64), return_counts=True)
    n = int(counts.sum())
    if n == 0:
        raise UsageError("no scorable question: a confidence interval needs at least one")
    draws = np.random.default_rng(seed).multinomial(n, counts / n, size=resamples)
    return _interval((draws @ values) / n, confidence)


def cluster_bootstrap_ci(
    d: Sequence[float] | np.ndarray,
    clusters: Sequence[str],
    *,
    resamples: int = _DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 1 - ALPHA,
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of ``d`` with whole clusters resampled: ``clusters[i]`` is question
    i's group (its template); each resample draws as many groups as there are, with replacement, and takes
    every question of each (the mean over the drawn questions). Questions of one template share its errors, so
    this CI is the one for a claim about templates; it is wider than :func:`bootstrap_mean_ci` when they do.

    Example:

    ```python
    >>> d, templates = [1.0] * 10 + [0.0] * 10, ["t1"] * 10 + ["t2"] * 10
    >>> cluster_bootstrap_ci(d, templates, seed=0)   # two templates: a draw is t1 twice, t2 twice or both
    (0.0, 1.0)

    ```
    """
    _check_bootstrap(resamples, confidence)
    values = np.asarray(d, dtype=np.float64)
    if len(clusters) != values.size or values.size == 0:
        raise UsageError(
            f"a clustered bootstrap needs one cluster per question: {len(clusters)} != {values.size}"
        )
    _, index = np.unique(np.asarray(clusters, dtype=str), return_inverse=True)
    sums, sizes = np.bincount(index, weights=values), np.bincount(index).astype(np.float64)
    groups = sums.size
    drawn = np.random.default_rng(seed).integers(0, groups, size=(resamples, groups))
    return _interval(sums[drawn].sum(axis=1) / sizes[drawn].sum(axis=1), confidence)


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


def _verdict_words(delta: float, significant: bool, a: str = "sft", b: str = "grpo") -> str:
    """The verdict in words: ``no significant difference``, ``<b> significantly better than <a>`` or worse.

    Example:

    ```python
    >>> _verdict_words(0.05, False), _verdict_words(0.05, True), _verdict_words(-0.05, True)
    ('no significant difference', 'grpo significantly better than sft', 'grpo significantly worse than sft')

    ```
    """
    if not significant:
        return NO_DIFFERENCE
    return f"{b} significantly {'better' if delta > 0 else 'worse'} than {a}"


def verdict_sentence(verdict: str, delta: float, ci95: tuple[float, float], p_value: float, n: int) -> str:
    """The plain verdict sentence (``verdict`` from :func:`_verdict_words`, ``delta``/``ci95`` as fractions).

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
    resamples: int = _DEFAULT_RESAMPLES,
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
    verdict = _verdict_words(delta, significant, a_name, b_name)
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


def sign_flip_p(
    units: Sequence[int] | np.ndarray,
    *,
    permutations: int = _DEFAULT_RESAMPLES,
    seed: int = 0,
    exact_max: int = _EXACT_SIGN_FLIPS,
) -> float:
    """Two-sided paired sign-flip permutation p in ``(0, 1]`` (module docstring) of the per-question differences
    given as integers ``units`` (d_i times the number of seeds; the test is scale-free): exact when at most
    ``exact_max`` are non-zero, else from ``permutations`` seeded draws.

    Example:

    ```python
    >>> sign_flip_p([1] * 5)                  # one seed: the exact McNemar p of 0 vs 5
    0.0625
    >>> sign_flip_p([2, 1, -1, 0]), sign_flip_p([0, 0])
    (0.75, 1.0)

    ```
    """
    values = np.asarray(units, dtype=np.int64)
    t = abs(int(values.sum()))
    magnitudes, counts = np.unique(np.abs(values[values != 0]), return_counts=True)
    if counts.sum() == 0:
        return 1.0
    if counts.sum() <= exact_max:
        law = np.ones(1)
        for k, c in zip(magnitudes.tolist(), counts.tolist()):
            kernel = np.zeros(2 * k * c + 1)
            kernel[:: 2 * k] = [math.comb(c, j) / (1 << c) for j in range(c + 1)]
            law = np.convolve(law, kernel)
        total = (len(law) - 1) // 2
        return min(1.0, float(law[np.abs(np.arange(-total, total + 1)) >= t].sum()))
    rng = np.random.default_rng(seed)
    flipped = sum(k * (2 * rng.binomial(c, 0.5, size=permutations) - c) for k, c in zip(magnitudes, counts))
    return (1 + int(np.count_nonzero(np.abs(flipped) >= t))) / (1 + permutations)


@dataclass(frozen=True)
class QuestionComparison:
    """GRPO's seeds (``b``) against one SFT answer (``a``) per question, the question the unit: ``n`` questions,
    ``ex_a``/``ex_b`` the means over questions of each arm's per-question mean, ``delta`` = ex_b − ex_a,
    ``ci95`` the paired bootstrap over questions, ``p`` the sign-flip p (:data:`_SIGN_FLIP_TEST`),
    ``discordant`` one ``{"a_only", "b_only"}`` per seed, ``ci_cluster`` the clustered CI if clusters were given."""

    n: int
    seeds: int
    ex_a: float
    ex_b: float
    delta: float
    ci95: tuple[float, float]
    p: float
    discordant: list[dict[str, int]]
    ci_cluster: tuple[float, float] | None = None
    test: str = _SIGN_FLIP_TEST


def question_comparison(
    a: Sequence[int | None],
    b: Sequence[Sequence[int | None]],
    *,
    clusters: Sequence[str] | None = None,
    resamples: int = _DEFAULT_RESAMPLES,
    seed: int = 0,
) -> QuestionComparison:
    """Compare SFT's answers ``a`` (one per question) with GRPO's ``b`` (one list per seed, same question order)
    with the question as the unit (module docstring): a question any answer of which is ``None`` is left out;
    ``clusters`` (one label per question, e.g. its template) adds :func:`cluster_bootstrap_ci`. UsageError on
    bad input or no scorable question.

    Example:

    ```python
    >>> sft = [0] * 10 + [1] * 10
    >>> one = question_comparison(sft, [[1] * 20])
    >>> one.n, one.delta, one.p, one.discordant
    (20, 0.5, 0.001953125, [{'a_only': 0, 'b_only': 10}])
    >>> two = question_comparison(sft, [[1] * 20, [1] * 20])   # a repeated seed adds no question
    >>> (two.n, two.ci95, two.p) == (one.n, one.ci95, one.p)
    True

    ```
    """
    if not b or any(len(seed_answers) != len(a) for seed_answers in b):
        raise UsageError(
            f"question_comparison needs one answer per question from each seed ({len(a)} questions)"
        )
    xa = _correctness(a, "sft ")
    xb = np.stack([_correctness(answers, f"seed {i} ") for i, answers in enumerate(b)])
    kept = ~(np.isnan(xa) | np.isnan(xb).any(axis=0))
    n, seeds = int(kept.sum()), len(b)
    if n == 0:
        raise UsageError(
            "no scorable question to compare (every gold SQL failed?); check the benchmark's databases"
        )
    xa, xb = xa[kept].astype(np.int64), xb[:, kept].astype(np.int64)
    units = xb.sum(axis=0) - seeds * xa  # d_i * seeds, an integer
    d = units / seeds
    ci_cluster = None
    if clusters is not None:
        if len(clusters) != len(a):
            raise UsageError(f"one cluster per question is needed: {len(clusters)} != {len(a)}")
        kept_clusters = [c for c, keep in zip(clusters, kept) if keep]
        ci_cluster = cluster_bootstrap_ci(d, kept_clusters, resamples=resamples, seed=seed)
    return QuestionComparison(
        n=n,
        seeds=seeds,
        ex_a=float(xa.mean()),
        ex_b=float(xb.mean()),
        delta=float(units.sum()) / (n * seeds),
        ci95=bootstrap_mean_ci(d, resamples=resamples, seed=seed),
        p=sign_flip_p(units, permutations=resamples, seed=seed),
        discordant=[{"a_only": int(np.sum(xa > row)), "b_only": int(np.sum(row > xa))} for row in xb],
        ci_cluster=ci_cluster,
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
