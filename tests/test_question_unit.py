"""The question is the unit of inference over seeds (#32): a repeated seed adds no question, the sign-flip p
equals brute-force enumeration (and McNemar with one seed), n counts questions, and a bootstrap clustered by
template is wider than one over questions when a template's questions move together."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from slmsql_hub.errors import UsageError
from slmsql_hub.evaluation.stats import (
    bootstrap_mean_ci,
    cluster_bootstrap_ci,
    mcnemar_exact,
    question_comparison,
    sign_flip_p,
)
from slmsql_hub.study.report import pool_variants


def _write(path: Path, correct: list[int]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"question_id": f"q{i}", "db_id": "db", "correct": c} for i, c in enumerate(correct)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _pooled(out: Path, seeds: list[list[int]]) -> dict:
    """The pooled band_train entry of one variant whose seeds answered ``seeds``."""
    entries = []
    for seed, correct in enumerate(seeds):
        folder = out / "runs" / f"v-seed{seed}"
        _write(folder / "answers" / "band_train.jsonl", correct)
        slices = {"band_train": {"delta": 0.0, "p": 1.0, "n": len(correct)}}
        entries.append({"name": "v", "seed": seed, "folder": str(folder), "hypothesis": "", "overrides": {},
                        "adapter_update": {"relative_norm": None}, "slices": slices})  # fmt: skip
    return pool_variants(out, entries, {})[0]["slices"]["band_train"]


def test_two_identical_seeds_give_the_ci_p_and_n_of_one_seed(tmp_path):
    """Fails on the old pooling, which stacked the seeds as extra pairs (n 120, a narrower CI, a smaller p)."""
    rng = np.random.default_rng(3)
    sft = rng.integers(0, 2, 60).tolist()
    grpo = [1 if rng.random() < 0.3 else c for c in sft]
    _write(tmp_path / "one" / "sft" / "band_train.jsonl", sft)
    _write(tmp_path / "two" / "sft" / "band_train.jsonl", sft)
    one = _pooled(tmp_path / "one", [grpo])
    two = _pooled(tmp_path / "two", [grpo, grpo])
    assert (two["n"], two["ci"], two["p"], two["delta"]) == (one["n"], one["ci"], one["p"], one["delta"])
    assert one["n"] == 60 and one["p"] < 1


def test_the_sign_flip_p_is_the_brute_force_enumeration_of_every_sign_vector():
    rng = np.random.default_rng(0)
    for _ in range(20):
        units = rng.integers(-3, 4, size=int(rng.integers(1, 12)))  # three seeds: d_i * 3 in -3..3
        t = abs(units.sum())
        sums = [abs(np.dot(signs, units)) for signs in itertools.product((-1, 1), repeat=len(units))]
        brute = np.mean([s >= t for s in sums])
        p = sign_flip_p(units)
        assert p == pytest.approx(brute, rel=1e-12) and 0 < p <= 1
        assert sign_flip_p(-units) == p  # symmetric: swapping the arms leaves p


def test_with_one_seed_the_sign_flip_p_is_mcnemars_and_monte_carlo_agrees_with_the_exact_p():
    for a_only, b_only in [(0, 5), (3, 9), (40, 60), (7, 7)]:
        units = [-1] * a_only + [1] * b_only + [0] * 30
        assert sign_flip_p(units) == pytest.approx(mcnemar_exact(a_only, b_only), rel=1e-9)
    units = np.random.default_rng(1).integers(-2, 3, size=200)
    units[:15] = 2  # a shift, so p is small but not tiny
    exact = sign_flip_p(units)
    drawn = sign_flip_p(units, exact_max=0, permutations=20_000, seed=5)
    assert drawn == sign_flip_p(units, exact_max=0, permutations=20_000, seed=5)  # seeded
    assert drawn >= 1 / 20_001 and drawn == pytest.approx(exact, abs=0.01)


def test_n_counts_questions_and_unscorable_questions_leave_every_seed():
    sft = [0, 1, None, 1, 0]
    seeds = [[1, 1, 1, 0, 0], [1, 0, 0, None, 0], [0, 1, 1, 1, 0]]
    result = question_comparison(sft, seeds)
    assert (result.n, result.seeds) == (3, 3)  # q2 (SFT) and q3 (seed 1) unscorable
    # kept q0, q1, q4: GRPO means 2/3, 2/3, 0; SFT 0, 1, 0
    assert result.ex_a == pytest.approx(1 / 3) and result.ex_b == pytest.approx(4 / 9)
    assert result.delta == pytest.approx(1 / 9)
    assert result.discordant == [
        {"a_only": 0, "b_only": 1},
        {"a_only": 1, "b_only": 1},
        {"a_only": 0, "b_only": 0},
    ]
    with pytest.raises(UsageError, match="one answer per question"):
        question_comparison(sft, [[1, 0]])
    with pytest.raises(UsageError, match="correctness must be"):
        question_comparison(sft, [[2, 0, 0, 0, 0]])


def test_the_template_clustered_bootstrap_is_wider_when_a_templates_questions_move_together():
    templates = [f"t{i // 20}" for i in range(200)]  # 10 templates of 20 questions each
    d = np.repeat([1.0, 1.0, 0.0, 0.0, 0.0, 1.0, -1.0, 0.0, 1.0, 0.0], 20)  # identical within a template
    low, high = bootstrap_mean_ci(d, seed=0)
    c_low, c_high = cluster_bootstrap_ci(d, templates, seed=0)
    assert c_high - c_low > 2 * (high - low)
    assert c_low < d.mean() < c_high


def test_a_pooled_slice_with_template_families_carries_the_clustered_ci(tmp_path):
    """The report's ``ci_template``: families from ``sft/shapes.json``, whole families resampled."""
    sft = [0] * 80
    grpo = [1] * 20 + [0] * 20 + [1] * 20 + [0] * 20  # the "join" and "nested" families fixed, the others not
    families = ["join"] * 20 + ["filter"] * 20 + ["nested"] * 20 + ["aggregate"] * 20
    _write(tmp_path / "sft" / "band_train.jsonl", sft)
    shapes = {"band_train": {f"q{i}": f for i, f in enumerate(families)}}
    (tmp_path / "sft" / "shapes.json").write_text(json.dumps(shapes))
    entry = _pooled(tmp_path, [grpo, grpo])
    assert entry["templates"] == 4 and entry["n"] == 80
    assert entry["ci_template"][1] - entry["ci_template"][0] > entry["ci"][1] - entry["ci"][0]
    assert entry["ci_template"] == list(cluster_bootstrap_ci([float(x) for x in grpo], families, seed=0))
