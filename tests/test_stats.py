"""Paired statistics: McNemar exact on hand-computed tables, the seeded paired bootstrap CI (deterministic,
covering the true ΔEX in simulations, equal to index resampling), the significance rule and verdict sentences."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from slmsql_hub.errors import UsageError
from slmsql_hub.evaluation.stats import (
    NO_DIFFERENCE,
    is_significant,
    mcnemar_exact,
    paired_bootstrap_ci,
    paired_comparison,
    verdict_sentence,
)
from slmsql_hub.render.fmt import format_p, format_points

# ------------------------------------------------------------------------------------------------------
# McNemar exact
# ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a_only", "b_only", "expected"),
    [
        (0, 5, 2 / 32),  # 2 * C(5,0) / 2^5
        (1, 10, 2 * (1 + 11) / 2**11),  # 2 * (C(11,0) + C(11,1)) / 2^11 = 0.01171875
        (2, 8, 2 * (1 + 10 + 45) / 2**10),  # 0.109375
        (9, 11, 2 * 431910 / 2**20),  # sum_{i<=9} C(20,i) = 431910 -> 0.82381...
        (0, 1, 1.0),  # 2 * 1/2 = 1
        (3, 3, 1.0),  # 2 * 42/64 > 1 is capped at 1
    ],
)
def test_mcnemar_exact_equals_the_hand_computed_binomial_tail(a_only, b_only, expected):
    assert mcnemar_exact(a_only, b_only) == pytest.approx(expected, rel=1e-12)


def test_mcnemar_is_symmetric_in_the_two_policies():
    for a_only, b_only in [(0, 7), (4, 13), (25, 40)]:
        assert mcnemar_exact(a_only, b_only) == mcnemar_exact(b_only, a_only)


def test_mcnemar_without_discordant_pairs_is_one():
    assert mcnemar_exact(0, 0) == 1.0


def test_mcnemar_on_thousands_of_discordant_pairs_stays_exact_and_finite():
    p = mcnemar_exact(400, 600)
    # normal approximation with continuity correction: z = (|400-600| - 1) / sqrt(1000) ~ 6.29
    z = (200 - 1) / math.sqrt(1000)
    assert 0 < p < 1e-8
    assert p == pytest.approx(math.erfc(z / math.sqrt(2)), rel=0.2)


@pytest.mark.parametrize("bad", [(-1, 3), (1.5, 2), (True, 2)])
def test_mcnemar_refuses_counts_that_are_not_counts(bad):
    with pytest.raises(UsageError, match="count >= 0"):
        mcnemar_exact(*bad)


# ------------------------------------------------------------------------------------------------------
# Paired bootstrap
# ------------------------------------------------------------------------------------------------------


def simulate_pairs(rng, n, p_a, p_b, p_both):
    """Correlated paired 0/1 outcomes: P(both right) = p_both, marginals p_a and p_b."""
    probs = [p_both, p_a - p_both, p_b - p_both, 1 - p_a - p_b + p_both]  # (1,1), (1,0), (0,1), (0,0)
    kinds = rng.choice(4, size=n, p=probs)
    a = np.isin(kinds, (0, 1)).astype(int)
    b = np.isin(kinds, (0, 2)).astype(int)
    return a.tolist(), b.tolist()


def test_bootstrap_ci_is_deterministic_for_a_seed_and_uses_the_seed():
    a, b = simulate_pairs(np.random.default_rng(1), 200, 0.6, 0.65, 0.5)
    assert paired_bootstrap_ci(a, b, seed=0) == paired_bootstrap_ci(a, b, seed=0)
    # with few resamples the seed shows; with 10,000 the interval barely moves from seed to seed
    assert len({paired_bootstrap_ci(a, b, resamples=50, seed=s) for s in range(5)}) > 1
    bounds = np.array([paired_bootstrap_ci(a, b, seed=s) for s in range(5)])
    assert np.ptp(bounds, axis=0).max() <= 0.005


def test_bootstrap_ci_covers_the_true_delta_in_at_least_90_of_100_simulated_datasets():
    rng = np.random.default_rng(2024)
    true_delta = 0.65 - 0.60
    covered = 0
    for dataset in range(100):
        a, b = simulate_pairs(rng, 200, 0.60, 0.65, 0.50)
        low, high = paired_bootstrap_ci(a, b, resamples=10_000, seed=dataset)
        covered += low <= true_delta <= high
    assert covered >= 90


def test_bootstrap_ci_equals_resampling_question_indices():
    a, b = simulate_pairs(np.random.default_rng(7), 300, 0.55, 0.58, 0.45)
    xa, xb = np.array(a), np.array(b)
    rng = np.random.default_rng(123)
    indices = rng.integers(0, len(a), size=(20_000, len(a)))
    naive = np.quantile(xb[indices].mean(axis=1) - xa[indices].mean(axis=1), [0.025, 0.975])
    low, high = paired_bootstrap_ci(a, b, resamples=20_000, seed=0)
    assert low == pytest.approx(naive[0], abs=0.005)
    assert high == pytest.approx(naive[1], abs=0.005)


def test_bootstrap_ci_of_two_identical_policies_is_exactly_zero():
    same = [1, 0, 1, 1, 0] * 20
    assert paired_bootstrap_ci(same, same) == (0.0, 0.0)


def test_bootstrap_ci_narrows_as_questions_grow():
    small = paired_bootstrap_ci(*simulate_pairs(np.random.default_rng(3), 100, 0.6, 0.6, 0.45))
    large = paired_bootstrap_ci(*simulate_pairs(np.random.default_rng(3), 10_000, 0.6, 0.6, 0.45))
    assert large[1] - large[0] < (small[1] - small[0]) / 5


# ------------------------------------------------------------------------------------------------------
# Unscorable examples and bad input
# ------------------------------------------------------------------------------------------------------


def test_unscorable_questions_are_left_out_of_every_statistic():
    a, b = simulate_pairs(np.random.default_rng(5), 120, 0.5, 0.6, 0.4)
    with_unscorable_a = [None, *a[:60], None, *a[60:], None]
    with_unscorable_b = [None, *b[:60], None, *b[60:], None]
    full = paired_comparison(with_unscorable_a, with_unscorable_b, seed=3)
    clean = paired_comparison(a, b, seed=3)
    assert full.n == clean.n == 120
    assert full.to_dict() == clean.to_dict()
    assert full.ex_a == pytest.approx(sum(a) / 120)


def test_mismatched_lengths_are_one_usage_error():
    with pytest.raises(UsageError, match="one result per question"):
        paired_comparison([1, 0], [1])


def test_values_other_than_one_zero_or_none_are_refused():
    with pytest.raises(UsageError, match="question 1: correctness must be 1, 0 or None"):
        paired_comparison([1, 2], [1, 0])


def test_no_scorable_pair_is_one_usage_error():
    with pytest.raises(UsageError, match="no scorable question pairs"):
        paired_comparison([None, None], [None, None])


def test_too_few_resamples_or_a_bad_confidence_is_refused():
    with pytest.raises(UsageError, match="resamples"):
        paired_bootstrap_ci([1, 0], [0, 1], resamples=0)
    with pytest.raises(UsageError, match="confidence"):
        paired_bootstrap_ci([1, 0], [0, 1], confidence=1.0)


# ------------------------------------------------------------------------------------------------------
# Decision rule and sentences
# ------------------------------------------------------------------------------------------------------


def test_verdict_sentence_reads_like_the_study_example():
    sentence = verdict_sentence(NO_DIFFERENCE, 0.007, (-0.034, 0.047), 0.81, 200)
    assert sentence == "no significant difference: ΔEX = +0.7 points, 95% CI [−3.4, +4.7], p = 0.81, n = 200"


def test_points_use_a_true_minus_sign_and_never_print_negative_zero():
    assert format_points(-0.0349) == "\u22123.5"
    assert format_points(0.1) == "+10.0"
    assert format_points(-0.0004) == "0.0"
    assert format_points(0.0) == "0.0"


def test_p_values_near_the_threshold_keep_three_decimals():
    assert format_p(0.0496) == "p = 0.050"
    assert format_p(0.0504) == "p = 0.050"
    assert format_p(0.049) == "p = 0.049"
    assert format_p(0.81) == "p = 0.81"
    assert format_p(1e-7) == "p < 0.001"


@pytest.mark.parametrize(
    ("ci", "p", "expected"),
    [
        ((0.01, 0.09), 0.01, True),  # CI above 0, p small
        ((-0.09, -0.01), 0.01, True),  # CI below 0, p small
        ((-0.01, 0.09), 0.01, False),  # CI covers 0
        ((0.01, 0.09), 0.06, False),  # p not below 0.05
        ((0.0, 0.09), 0.01, False),  # CI touching 0 does not exclude it
    ],
)
def test_significant_needs_the_ci_to_exclude_zero_and_p_below_five_percent(ci, p, expected):
    assert is_significant(ci, p) is expected


def test_a_clear_gain_is_called_significantly_better():
    sft = [1] * 50 + [0] * 50
    grpo = [1] * 50 + [1] * 20 + [0] * 30
    result = paired_comparison(sft, grpo)
    assert result.significant
    assert result.discordant == {"a_only": 0, "b_only": 20}
    assert result.delta_ex == pytest.approx(0.2)
    assert result.mcnemar_p == pytest.approx(2 / 2**20)
    low, high = result.ci95
    assert 0 < low < 0.2 < high
    assert result.summary == (
        f"grpo significantly better than sft: ΔEX = +20.0 points, 95% CI [{format_points(low)}, "
        f"{format_points(high)}], p < 0.001, n = 100"
    )


def test_a_clear_loss_is_called_significantly_worse():
    sft = [1] * 80 + [0] * 20
    grpo = [0] * 25 + [1] * 55 + [0] * 20
    result = paired_comparison(sft, grpo, a_name="sft", b_name="grpo")
    assert result.significant
    assert result.verdict == "grpo significantly worse than sft"
    assert result.summary.startswith("grpo significantly worse than sft: ΔEX = −25.0 points")


def test_a_small_difference_is_no_significant_difference():
    sft = [1] * 60 + [0] * 30 + [1] * 9 + [0] * 11
    grpo = [1] * 60 + [0] * 30 + [0] * 9 + [1] * 11
    result = paired_comparison(sft, grpo)
    assert not result.significant
    assert result.verdict == NO_DIFFERENCE
    assert result.mcnemar_p == pytest.approx(2 * 431910 / 2**20)
    assert result.summary.startswith("no significant difference: ΔEX = +1.8 points, 95% CI [−")
    assert result.summary.endswith("p = 0.82, n = 110")


def test_comparison_dict_has_every_key_of_the_shared_contract():
    entry = paired_comparison([1, 0, 1, 0], [1, 1, 0, 0]).to_dict()
    for key in (
        "a",
        "b",
        "delta_ex",
        "ci95",
        "bootstrap_resamples",
        "bootstrap_seed",
        "mcnemar_p",
        "discordant",
        "n",
        "significant",
        "verdict",
        "summary",
    ):
        assert key in entry
    assert entry["bootstrap_resamples"] >= 10_000
    assert entry["discordant"] == {"a_only": 1, "b_only": 1}
    assert isinstance(entry["ci95"], list) and len(entry["ci95"]) == 2


# ------------------------------------------------------------------------------------------------------
# Real data: published systems on Spider dev, from the official evaluators' verdicts
# ------------------------------------------------------------------------------------------------------

SPIDER_DEV = Path(__file__).resolve().parents[1].parent / "shared/data/spider_dev"


def official_correctness(system: str) -> list[int | None]:
    """1/0 per dev question from the official Spider evaluator; None where the database is missing."""
    path = SPIDER_DEV / "verdicts" / f"{system}.jsonl"
    if not path.is_file():
        pytest.skip(f"Spider dev verdicts not available at {path}")
    correct: list[int | None] = [None] * 1034
    for line in path.read_text().splitlines():
        verdict = json.loads(line)
        correct[verdict["index"]] = verdict["spider"]
    return correct


def test_published_systems_on_spider_dev_compare_as_their_official_ex_says():
    din_sql = official_correctness("din_sql_codex_dev")
    dail_sql = official_correctness("dail_sql_gpt4_dev")
    result = paired_comparison(din_sql, dail_sql, a_name="din_sql", b_name="dail_sql")
    # the 62 questions on the missing wta_1 database are unscorable: 972 pairs remain
    assert result.n == 972
    assert round(100 * result.ex_a, 2) == 75.93
    assert round(100 * result.ex_b, 2) == 83.23
    low, high = result.ci95
    assert low < result.delta_ex < high
    assert low > 0 and result.mcnemar_p < 0.001
    assert result.verdict == "dail_sql significantly better than din_sql"
    assert result.summary.startswith(
        "dail_sql significantly better than din_sql: ΔEX = +7.3 points, 95% CI [+"
    )
    assert result.summary.endswith("p < 0.001, n = 972")
    assert result.discordant["b_only"] - result.discordant["a_only"] == round(result.delta_ex * 972)
