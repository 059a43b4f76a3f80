"""Smoke test of benchmarks/measure_world_ex.py on a tiny world and a random policy: it runs slmsql eval's
pieces, so what is checked is that its report adds up and that each printed verdict is the judge's."""

from __future__ import annotations

import json

import pytest
from _helpers import tiny_world
from _scripts import load_benchmark_script
from _tiny_model import save_random_policy

from slmsql_hub.sql import Judge, Sandbox


@pytest.fixture(scope="module")
def script():
    return load_benchmark_script("measure_world_ex")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return tiny_world(tmp_path_factory.mktemp("world") / "world", dev=12)


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    """A random tiny base and a random (non-zero) LoRA adapter."""
    return save_random_policy(tmp_path_factory.mktemp("policy"), {"adapter": 1})


@pytest.fixture(scope="module")
def measured(script, world, policy, tmp_path_factory):
    out = tmp_path_factory.mktemp("measured")
    argv = [
        "--world", str(world), "--base", str(policy / "base"), "--adapter", str(policy / "adapter"),
        "--split", "dev", "--max-new-tokens", "8", "--sample-rows", "0",
        "--json", str(out / "report.json"), "--predictions", str(out / "predictions.jsonl"),
    ]  # fmt: skip
    assert script.main(argv) == 0
    report = json.loads((out / "report.json").read_text())
    records = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    return report, records


def test_each_arm_scores_every_question_and_its_groups_add_up(measured, world):
    report, _ = measured
    held_out = json.loads((world / "world.json").read_text())["held_out_db"]
    assert report["n"] == 12 and set(report["models"]) == {"adapter", "base"}
    for scores in report["models"].values():
        assert sum(part["n"] for part in scores["by_db"].values()) == 12
        assert sum(part["n"] for part in scores["by_difficulty"].values()) == 12
        assert scores["held_out_db"]["db_id"] == held_out
        assert scores["held_out_db"]["n"] + scores["seen_dbs"]["n"] == 12
        assert sum(scores["verdicts"].values()) == 12
        assert scores["correct"] == sum(part["correct"] for part in scores["by_db"].values())


def test_predictions_hold_both_arms_and_each_verdict_is_the_judges(measured, world):
    report, records = measured
    assert len(records) == 12
    with Sandbox(workers=1) as sandbox:
        judge = Judge(sandbox=sandbox, mode="bird")
        for arm in ("adapter", "base"):
            db_paths = [str(world / "databases" / r["db_id"] / f"{r['db_id']}.sqlite") for r in records]
            again = judge.judge_many(
                [r[f"{arm}_output"] for r in records], [r["gold_sql"] for r in records], db_paths
            )
            assert [r[f"{arm}_verdict"] for r in records] == [j.verdict.value for j in again]
            assert report["models"][arm]["correct"] == sum(r[f"{arm}_correct"] or 0 for r in records)


def test_a_folder_that_is_not_a_world_is_one_line_and_exit_code_2(script, policy, tmp_path, capsys):
    argv = ["--world", str(tmp_path), "--base", str(policy / "base"), "--adapter", str(policy / "adapter")]
    assert script.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("measure_world_ex: error:") and "world.json" in err and "\n" not in err
