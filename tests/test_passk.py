"""The unbiased pass@k estimator against brute force, and its curves and paired deltas over questions."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

from slmsql_hub.evaluation.passk import paired_pass_at_k_delta, pass_at_k, pass_at_k_curve, pass_at_k_matrix


def _brute_force(n: int, c: int, k: int) -> Fraction:
    """The share of all k-subsets of n samples (the first c correct) that hold a correct sample."""
    subsets = list(itertools.combinations(range(n), k))
    return Fraction(sum(any(i < c for i in subset) for subset in subsets), len(subsets))


@pytest.mark.parametrize("n", range(1, 9))
def test_estimator_equals_enumeration_of_every_k_subset(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(float(_brute_force(n, c, k)), abs=1e-12), (n, c, k)


def test_estimator_is_stable_where_the_binomial_ratio_overflows():
    # C(2000, 1000) overflows a float; the product form does not
    assert pass_at_k(2000, 1, 1000) == pytest.approx(0.5, abs=1e-9)
    assert pass_at_k(2000, 0, 1000) == 0.0
    assert pass_at_k(2000, 1001, 1000) == 1.0


@pytest.mark.parametrize("n, c, k", [(4, 5, 1), (4, -1, 1), (4, 2, 0), (4, 2, 5)])
def test_estimator_refuses_impossible_counts(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_matrix_needs_enough_samples_for_the_largest_k():
    with pytest.raises(ValueError, match="at least 8 samples"):
        pass_at_k_matrix([16, 4], [1, 1], [1, 8])


def test_curve_is_the_mean_over_questions_rising_in_k_with_intervals_around_it():
    n, c = [16] * 6, [0, 1, 3, 8, 15, 16]
    curve = pass_at_k_curve(n, c, n_boot=300, seed=3)
    assert [p["k"] for p in curve] == list(range(1, 17))
    for point in curve:
        expected = (
            sum(float(_brute_force(16, ci, point["k"])) for ci in c) / len(c) if point["k"] <= 4 else None
        )
        if expected is not None:
            assert point["pass_at_k"] == pytest.approx(expected, abs=1e-12)
        low, high = point["ci95"]
        assert low <= point["pass_at_k"] <= high
        assert point["n_questions"] == 6
    values = [p["pass_at_k"] for p in curve]
    assert (
        values == sorted(values)
        and values[0] == pytest.approx(sum(c) / 96)
        and values[-1] == pytest.approx(5 / 6)
    )
    assert curve == pass_at_k_curve(n, c, n_boot=300, seed=3)  # seeded
    assert curve != pass_at_k_curve(n, c, n_boot=300, seed=4)


def test_paired_delta_resamples_the_same_questions_for_both_policies():
    n = [8] * 5
    same = paired_pass_at_k_delta(n, [0, 2, 4, 6, 8], n, [0, 2, 4, 6, 8], ks=[1, 4])
    assert all(p["delta"] == 0.0 and p["ci95"] == [0.0, 0.0] for p in same)
    # b solves one more sample on every question: a paired interval excludes 0, though the unpaired curves overlap
    better = paired_pass_at_k_delta(n, [0, 2, 4, 6, 7], n, [1, 3, 5, 7, 8], ks=[1], n_boot=500)[0]
    assert better["delta"] == pytest.approx(1 / 8)
    assert better["ci95"][0] == pytest.approx(1 / 8) and better["ci95"][1] == pytest.approx(1 / 8)
    with pytest.raises(ValueError, match="same questions"):
        paired_pass_at_k_delta(n, [0] * 5, n[:4], [0] * 4, ks=[1])


def test_empty_slice_gives_no_numbers():
    assert pass_at_k_curve([], [], ks=[1, 2]) == [
        {"k": 1, "pass_at_k": None, "ci95": [None, None], "n_questions": 0},
        {"k": 2, "pass_at_k": None, "ci95": [None, None], "n_questions": 0},
    ]
