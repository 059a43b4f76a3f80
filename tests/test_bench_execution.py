"""Smoke test of benchmarks/bench_execution.py and its modules (execution_paths, execution_measures, ...): their
functions on a tiny load, and the verdict agreement.

The numbers it measures are not asserted (a loaded 2-core CI box makes them noise); what must hold is that
the load is labelled truthfully, that path (a) calibrates an op budget that stops the runaway and nothing
else, that the sandbox gets that budget and its verdicts follow the labels, and that the BIRD-style
baseline agrees with the sandbox wherever it finished.
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from _scripts import load_benchmark_script

from slmsql_hub.sql import ExecStatus, Judgement, Verdict
from slmsql_hub.world.populate import generate_rows
from slmsql_hub.world.schemas import create_table_sql

TINY = {"questions": 6, "samples": 4, "scale": 0.02, "timeout": 0.5}


@pytest.fixture(scope="module")
def bench():
    return load_benchmark_script("bench_execution")


@pytest.fixture(scope="module")
def loads(bench):
    return load_benchmark_script("execution_loads")


@pytest.fixture(scope="module")
def paths(bench):
    return load_benchmark_script("execution_paths")


@pytest.fixture(scope="module")
def measures(bench):
    return load_benchmark_script("execution_measures")


@pytest.fixture(scope="module")
def bird(bench):
    return load_benchmark_script("bird_baseline")


@pytest.fixture(scope="module")
def tiny_load(loads, tmp_path_factory):
    work = tmp_path_factory.mktemp("bench")
    db = loads.build_database(work, seed=0, scale=TINY["scale"])
    return loads.build_load(db, TINY["questions"], TINY["samples"], seed=0)


@pytest.fixture(scope="module")
def limit(paths, tiny_load):
    return paths.time_physical_limit(tiny_load, TINY["timeout"], cores=2)


@pytest.fixture(scope="module")
def judged(paths, tiny_load, limit):
    return paths.time_sandbox(tiny_load, TINY["timeout"], workers=2, max_ops=limit.max_ops)


def test_database_is_deterministic_and_reused_from_the_work_dir(loads, tmp_path):
    first = loads.build_database(tmp_path / "a", seed=3, scale=0.005)
    second = loads.build_database(tmp_path / "b", seed=3, scale=0.005)
    other_seed = loads.build_database(tmp_path / "b", seed=4, scale=0.005)

    def dump(path):
        with sqlite3.connect(path) as conn:
            return list(conn.iterdump())

    assert dump(first) == dump(second)
    assert dump(first) != dump(other_seed)
    mtime = first.stat().st_mtime_ns
    assert loads.build_database(tmp_path / "a", seed=3, scale=0.005) == first
    assert first.stat().st_mtime_ns == mtime  # reused, not rebuilt


def test_database_is_built_by_the_worlds_generator_from_the_retail_spec(loads, tiny_load):
    spec = loads.retail_spec(TINY["scale"])
    with sqlite3.connect(tiny_load.db_path) as conn:
        tables = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name <> 'sqlite_stat1'"))
        counts = {t.name: conn.execute(f"SELECT count(*) FROM {t.name}").fetchone()[0] for t in spec.tables}
        indexes = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")

        assert indexes.fetchone()[0] == 8
    assert tables == {t.name: create_table_sql(t) for t in spec.tables}
    assert counts == {name: len(rows) for name, rows in generate_rows(spec, seed=0).items()}
    assert counts["sale_line"] > counts["sale"] > counts["customer"] > counts["product"]


def test_load_has_half_identical_samples_every_kind_and_one_runaway(tiny_load):
    counts = tiny_load.kind_counts()
    assert len(tiny_load.samples) == TINY["questions"] * TINY["samples"]
    assert counts["identical"] == len(tiny_load.samples) // 2
    assert counts["runaway"] == 1
    assert all(counts[kind] > 0 for kind in ("rewrite", "wrong", "error"))
    golds = [q.gold for q in tiny_load.questions]
    assert len(set(golds)) == len(golds)


def test_load_labels_hold_when_run_with_plain_sqlite3(paths, tiny_load, limit):
    assert paths.check_load(tiny_load, limit) == {}
    assert limit.timeouts == 1  # the runaway
    assert limit.serial_s == pytest.approx(sum(limit.seconds.values()))
    assert limit.limit_s == pytest.approx(limit.serial_s / 2)
    assert limit.distinct == len(tiny_load.distinct_requests()) < 2 * len(tiny_load.samples)


def test_calibrated_budget_is_a_rounded_up_multiple_of_the_heaviest_finished_query(paths):
    assert paths.calibrated_budget(8_781_000) == 44_000_000
    assert paths.calibrated_budget(8_781_000, factor=2.0) == 18_000_000
    assert paths.calibrated_budget(999, factor=1.0) == 1000
    assert paths.calibrated_budget(40, factor=1.0) == 40


def test_path_a_calibrates_a_budget_that_stops_the_runaway_and_nothing_else(paths, loads, tiny_load, limit):
    finished = {request: ops for request, ops in limit.ops.items() if limit.rows[request] is not None}
    runaway = (str(tiny_load.db_path), loads.RUNAWAY_SQL)

    assert limit.calibrated
    assert limit.max_finished_ops == max(finished.values()) > 0
    assert limit.max_ops == paths.calibrated_budget(limit.max_finished_ops, paths.DEFAULT_OPS_FACTOR)
    assert limit.max_ops >= paths.DEFAULT_OPS_FACTOR * max(finished.values())
    assert limit.stopped[runaway] == "budget" and limit.budget_stops == 1 and limit.deadline_stops == 0
    assert limit.ops[runaway] > limit.max_ops
    assert limit.seconds[runaway] < TINY["timeout"]  # stopped by the budget, long before the deadline


def test_a_given_budget_is_used_as_is_and_a_too_small_one_shows_as_failures(paths, tiny_load):
    tight = paths.time_physical_limit(tiny_load, TINY["timeout"], cores=2, max_ops=2000)

    assert not tight.calibrated and tight.max_ops == 2000
    assert tight.budget_stops > 1  # legitimate queries cut too
    assert "gold_failed" in paths.check_load(tiny_load, tight)


def test_sandbox_verdicts_follow_the_sample_kinds(tiny_load, judged):
    expected = {
        "identical": Verdict.CORRECT,
        "rewrite": Verdict.CORRECT,
        "wrong": Verdict.WRONG,
        "error": Verdict.PRED_ERROR,
        "runaway": Verdict.PRED_TIMEOUT,
    }
    assert [j.verdict for j in judged.judgements] == [expected[s.kind] for s in tiny_load.samples]
    assert judged.stats["batch_duplicates"] > 0  # identical samples and repeated golds ran once
    assert judged.stats["executed"] == len(tiny_load.distinct_requests())  # each distinct (db, SQL) once


def test_sandbox_gets_the_budget_and_stops_the_runaway_with_it(tiny_load, judged):
    runaway = next(j for j, s in zip(judged.judgements, tiny_load.samples) if s.kind == "runaway")

    assert "op budget" in runaway.error  # not the deadline: the budget reached the worker
    assert runaway.pred.elapsed_s < TINY["timeout"]
    assert judged.budget_stops == 1 and judged.deadline_stops == 0


def test_sandbox_verdicts_follow_path_a_and_no_legitimate_query_is_cut(paths, tiny_load, limit, judged):
    assert paths.check_against_limit(tiny_load, limit, judged.judgements) == {
        "budget_cuts": [],
        "disagreeing": [],
    }


def test_a_budget_too_small_for_legitimate_queries_is_caught(paths, tiny_load, limit):
    cut = paths.time_sandbox(tiny_load, TINY["timeout"], workers=2, max_ops=20_000)
    checked = paths.check_against_limit(tiny_load, limit, cut.judgements)

    assert cut.budget_stops > 1
    assert checked["budget_cuts"]  # queries that finished in (a) but not in the sandbox
    assert checked["disagreeing"]  # and their verdicts no longer follow (a)'s results


def test_bird_style_baseline_agrees_with_the_sandbox_wherever_it_finished(paths, bird, tiny_load, judged):
    baseline = paths.time_bird_baseline(tiny_load, TINY["timeout"], num_cpus=2).results
    agreement = bird.compare_verdicts(judged.judgements, baseline)

    assert agreement["baseline_lost"] == 0
    assert agreement["baseline_unfinished"] == 1  # the runaway
    assert agreement["compared"] == len(tiny_load.samples) - 1
    assert agreement["disagreements"] == 0
    runaway = next(i for i, s in enumerate(tiny_load.samples) if s.kind == "runaway")
    assert baseline[runaway]["outcome"] == "timeout"


def test_a_differing_verdict_or_an_unscorable_one_counts_as_a_disagreement(bird):
    def judgement(verdict):
        return Judgement(verdict, "SELECT 1", ExecStatus.OK, ExecStatus.OK)

    judgements = [judgement(Verdict.CORRECT), judgement(Verdict.WRONG), judgement(Verdict.UNSCORABLE)]
    judgements.append(judgement(Verdict.PRED_TIMEOUT))
    baseline = [
        {"sql_idx": 0, "res": 0, "outcome": "ran"},
        {"sql_idx": 1, "res": 0, "outcome": "ran"},
        {"sql_idx": 2, "res": 0, "outcome": "error"},
        {"sql_idx": 3, "res": 0, "outcome": "timeout"},
    ]
    agreement = bird.compare_verdicts(judgements, baseline)

    assert agreement["disagreeing_indices"] == [0, 2]
    assert agreement["compared"] == 3
    assert agreement["baseline_unfinished"] == 1


def test_main_exits_zero_and_writes_every_number(bench, tiny_load, tmp_path, capsys):
    out = tmp_path / "bench.json"
    argv = [f"--{k}={v}" for k, v in TINY.items()] + [
        f"--work-dir={tiny_load.db_path.parent}",  # reuses the fixture's database
        "--overhead-queries=20",
        "--longtail-questions=13",
        f"--json={out}",
    ]
    assert bench.main(argv) == 0

    numbers = json.loads(out.read_text())
    assert numbers["verdicts"]["disagreements"] == 0
    assert numbers["load"]["label_problems"] == {}
    assert numbers["load"]["predictions"] == TINY["questions"] * TINY["samples"]
    assert numbers["ratios"]["sandbox_over_limit"] > 0 and numbers["ratios"]["baseline_over_sandbox"] > 0
    assert numbers["overhead"]["sandbox_execute_us"] > numbers["overhead"]["sqlite3_us"] > 0
    physical = numbers["physical_limit"]
    assert physical["max_ops_calibrated"] and physical["max_ops"] >= 5 * physical["max_finished_ops"] > 0
    assert numbers["sandbox"]["budget_stops"] == 1 and numbers["sandbox"]["legitimate_cut"] == []
    assert numbers["baseline"]["executions"] > numbers["sandbox"]["executions"]  # nothing deduplicated
    assert "baseline_over_sandbox_target" not in numbers["ratios"]  # issue #10: the >= 20x target is withdrawn
    longtail = numbers["longtail"]
    assert longtail["load"]["predictions"] == 13 * TINY["samples"] and longtail["load"]["label_problems"] == {}
    assert longtail["load"]["timeout_s"] == 2.0 and longtail["sandbox"]["budget_stops"] == 1
    assert longtail["ratios"]["sandbox_over_limit"] > 0 and longtail["sandbox"]["disagreeing_with_limit"] == []
    printed = capsys.readouterr().out
    assert "(b)/(a)" in printed and "(c)/(b)" in printed and "0 disagreements" in printed
    assert "no target: (b) runs near the limit" in printed and ">= 20" not in printed
    assert "(b)/(a), side by side in this run: default load" in printed
    assert f"op budget {physical['max_ops']:,} (calibrated" in printed
    assert "SQLite executions" in printed and "load average" in printed


def test_main_exits_nonzero_when_the_given_budget_cuts_legitimate_queries(bench, tiny_load, capsys):
    argv = [f"--{k}={v}" for k, v in TINY.items()] + [
        f"--work-dir={tiny_load.db_path.parent}",
        "--overhead-queries=10",
        "--max-ops=20000",
        "--skip-baseline",
        "--longtail-questions=0",
    ]
    assert bench.main(argv) == 1
    printed = capsys.readouterr().out
    assert "ERROR: samples cut" in printed and "contradicts its own labels" in printed


@pytest.fixture(scope="module")
def longtail_load(loads, tiny_load):
    return loads.build_load(tiny_load.db_path, 13, TINY["samples"], seed=0, longtail=True)


def test_longtail_load_is_lookups_with_a_heavy_join_in_12_few_distinct_statements_and_the_runaway_last(
    loads, longtail_load
):
    heavy = {q.template for q in loads.make_questions(2)}
    templates = [q.template for q in longtail_load.questions]
    counts = longtail_load.kind_counts()

    assert [t in heavy for t in templates] == [i % 12 == 0 for i in range(13)]
    assert counts["identical"] == 13 * (TINY["samples"] - 1) and counts["runaway"] == 1
    assert all(counts[kind] > 0 for kind in ("rewrite", "wrong", "error"))
    assert [s.question for s in longtail_load.samples if s.kind == "runaway"] == [12]  # in the last question
    assert len(longtail_load.distinct_requests()) <= 2 * 13


def test_longtail_runaway_is_stopped_by_the_op_budget_before_the_deadline_in_both_paths(loads, paths, longtail_load):
    limit = paths.time_physical_limit(longtail_load, loads.LONGTAIL_TIMEOUT_S, cores=2)
    judged = paths.time_sandbox(longtail_load, loads.LONGTAIL_TIMEOUT_S, workers=2, max_ops=limit.max_ops)

    assert paths.check_load(longtail_load, limit) == {}
    assert limit.budget_stops == 1 and limit.deadline_stops == 0
    assert judged.budget_stops == 1 and judged.deadline_stops == 0  # deterministic: not an infra failure
    assert paths.check_against_limit(longtail_load, limit, judged.judgements) == {"budget_cuts": [], "disagreeing": []}
    runaway = next(j for j, s in zip(judged.judgements, longtail_load.samples) if s.kind == "runaway")
    assert runaway.verdict is Verdict.PRED_TIMEOUT and not runaway.pred.infra


def test_runaway_load_has_about_five_percent_distinct_runaways_judged_wrong_in_both_paths(paths, loads, tiny_load):
    """Issue #18's third load: every runaway family stops in path (a) and is a wrong prediction in (b)."""
    load = loads.with_runaways(tiny_load, share=0.35)  # a tiny load needs a bigger share to hold every family
    runaways = [s for s in load.samples if s.kind == "runaway"]
    added = round(0.35 * len(tiny_load.distinct_requests()))
    assert len({s.sql for s in runaways}) == len(runaways) == 1 + added  # the tiny load had one already
    assert added >= len(loads.RUNAWAY_FAMILIES)
    limit = paths.time_physical_limit(load, 0.5, cores=2)
    judged = paths.time_sandbox(load, 0.5, workers=2, max_ops=limit.max_ops)
    assert paths.check_load(load, limit) == {}
    assert paths.check_against_limit(load, limit, judged.judgements) == {"budget_cuts": [], "disagreeing": []}
    verdicts = {j.verdict for j, s in zip(judged.judgements, load.samples) if s.kind == "runaway"}
    assert verdicts <= {Verdict.PRED_TIMEOUT, Verdict.PRED_ERROR} and judged.stats["infra_failures"] == 0


def test_memory_measure_sees_two_results_just_under_the_byte_budget(measures, tmp_path):
    memory = measures.measure_result_memory(tmp_path)
    assert 0.95 * memory["budget_mb"] < memory["result_mb"] <= memory["budget_mb"]
    assert memory["two_at_once_mb"] > memory["result_mb"]  # the two results themselves are held


def test_help_prints_every_option(bench, capsys):
    with pytest.raises(SystemExit) as done:
        bench.main(["--help"])
    assert done.value.code == 0 and "5% of the distinct statements runaways" in capsys.readouterr().out
