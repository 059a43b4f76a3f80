"""pass@k from n samples per question: the unbiased estimator, curves over k, and bootstrap intervals.

With ``n`` samples of one question of which ``c`` are correct, the chance that ``k`` samples drawn without
replacement hold at least one correct one is ``1 - C(n - c, k) / C(n, k)`` (Chen et al. 2021, the HumanEval
estimator; unbiased for the policy's pass@k when ``k <= n``). The ratio of binomials is computed as the
product ``prod_{i = n - c + 1}^{n} (1 - k / i)``, which never forms a large binomial and stays exact in
floating point for any ``n`` (the direct ratio overflows near ``n = 1030``).

A benchmark's pass@k is the mean over its questions. The interval resamples *questions* with replacement
(percentile bootstrap, seeded), the unit the samples are nested in; a paired delta resamples the same
questions for both policies, as :mod:`slmsql_hub.evaluation.stats` does for greedy EX.

Example:

```python
>>> from slmsql_hub.evaluation.passk import pass_at_k, pass_at_k_curve
>>> pass_at_k(16, 1, 1), pass_at_k(16, 1, 16), pass_at_k(16, 0, 8)
(0.0625, 1.0, 0.0)
>>> curve = pass_at_k_curve([16, 16], [0, 4], ks=[1, 4, 16], n_boot=200, seed=0)
>>> [round(point["pass_at_k"], 4) for point in curve]
[0.125, 0.364, 0.5]

```
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_DEFAULT_BOOT = 1000
"""Bootstrap resamples of the questions behind each interval."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of one question: ``n`` samples, ``c`` of them correct, ``1 <= k <= n``.

    Example:

    ```python
    >>> from slmsql_hub.evaluation.passk import pass_at_k
    >>> round(pass_at_k(4, 2, 2), 4)  # 1 - C(2,2)/C(4,2) = 1 - 1/6
    0.8333

    ```
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_at_k_matrix(n: Sequence[int], c: Sequence[int], ks: Sequence[int]) -> np.ndarray:
    """Per question (rows) and per ``k`` (columns): :func:`pass_at_k`. Every ``k`` must be ``<= min(n)``."""
    n_arr, c_arr = np.asarray(n, dtype=int), np.asarray(c, dtype=int)
    if n_arr.shape != c_arr.shape or n_arr.ndim != 1:
        raise ValueError(f"n and c must be two lists of the same length; got {n_arr.shape} and {c_arr.shape}")
    if n_arr.size and max(ks) > n_arr.min():
        raise ValueError(
            f"k up to {max(ks)} needs at least {max(ks)} samples per question; some have {n_arr.min()}"
        )
    return np.array(
        [[pass_at_k(int(ni), int(ci), int(k)) for k in ks] for ni, ci in zip(n_arr, c_arr)]
    ).reshape(len(n_arr), len(ks))


def _bootstrap_means(values: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """``(n_boot, columns)``: column means over questions resampled with replacement."""
    rng = np.random.default_rng(seed)
    index = rng.integers(0, len(values), size=(n_boot, len(values)))
    return values[index].mean(axis=1)


def _interval(boot: np.ndarray, level: float) -> np.ndarray:
    tail = (1.0 - level) / 2 * 100
    return np.percentile(boot, [tail, 100 - tail], axis=0)


def pass_at_k_curve(
    n: Sequence[int],
    c: Sequence[int],
    ks: Sequence[int] | None = None,
    *,
    n_boot: int = _DEFAULT_BOOT,
    seed: int = 0,
    level: float = 0.95,
) -> list[dict]:
    """pass@k for ``k`` in ``ks`` (default ``1..min(n)``) averaged over questions, each with a bootstrap
    interval over questions: ``[{"k", "pass_at_k", "ci95": [low, high], "n_questions"}, ...]``.

    Example:

    ```python
    >>> from slmsql_hub.evaluation.passk import pass_at_k_curve
    >>> point = pass_at_k_curve([8] * 4, [0, 0, 8, 8], ks=[1])[0]
    >>> point["pass_at_k"], point["n_questions"], 0.0 <= point["ci95"][0] <= 0.5 <= point["ci95"][1] <= 1.0
    (0.5, 4, True)

    ```
    """
    ks = list(ks) if ks is not None else list(range(1, int(min(n)) + 1)) if len(n) else []
    values = pass_at_k_matrix(n, c, ks)
    if not len(values):
        return [{"k": k, "pass_at_k": None, "ci95": [None, None], "n_questions": 0} for k in ks]
    low, high = _interval(_bootstrap_means(values, n_boot, seed), level)
    means = values.mean(axis=0)
    return [
        {"k": k, "pass_at_k": float(m), "ci95": [float(lo), float(hi)], "n_questions": len(values)}
        for k, m, lo, hi in zip(ks, means, low, high)
    ]


def paired_pass_at_k_delta(
    n_a: Sequence[int],
    c_a: Sequence[int],
    n_b: Sequence[int] | Sequence[Sequence[int]],
    c_b: Sequence[int] | Sequence[Sequence[int]],
    ks: Sequence[int],
    *,
    n_boot: int = _DEFAULT_BOOT,
    seed: int = 0,
    level: float = 0.95,
) -> list[dict]:
    """pass@k(b) − pass@k(a) per ``k`` on the SAME questions (row i of both is one question), with a paired
    bootstrap interval (one resample of the questions serves both policies):
    ``[{"k", "a", "b", "delta", "ci95"}, ...]``. ``n_b``/``c_b`` may hold one row per seed (seeds x questions):
    each question's pass@k of ``b`` is then its mean over the seeds, so the question stays the unit.

    Example:

    ```python
    >>> from slmsql_hub.evaluation.passk import paired_pass_at_k_delta
    >>> point = paired_pass_at_k_delta([4, 4], [0, 2], [4, 4], [2, 2], ks=[1])[0]
    >>> point["a"], point["b"], point["delta"]
    (0.25, 0.5, 0.25)
    >>> seeds = paired_pass_at_k_delta([4, 4], [0, 2], [[4, 4], [4, 4]], [[2, 2], [0, 2]], ks=[1])[0]
    >>> seeds["b"], seeds["delta"]          # question 1: (0.5 + 0) / 2; question 2: 0.5
    (0.375, 0.125)

    ```
    """
    a = pass_at_k_matrix(n_a, c_a, ks)
    b = np.mean([pass_at_k_matrix(n, c, ks) for n, c in zip(np.atleast_2d(n_b), np.atleast_2d(c_b))], axis=0)
    if a.shape != b.shape:
        raise ValueError(
            f"paired pass@k needs the same questions for both policies; got {len(a)} and {len(b)}"
        )
    low, high = _interval(_bootstrap_means(b - a, n_boot, seed), level)
    return [
        {"k": k, "a": float(ma), "b": float(mb), "delta": float(mb - ma), "ci95": [float(lo), float(hi)]}
        for k, ma, mb, lo, hi in zip(ks, a.mean(axis=0), b.mean(axis=0), low, high)
    ]
