"""Smoke test of benchmarks/bench_execution.py: its functions on a tiny load, and its verdict agreement.

The numbers it measures are not asserted (a loaded 2-core CI box makes them noise); what must hold is that
the load is labelled truthfully, that the sandbox's verdicts follow the labels, and that the BIRD-style
baseline agrees with the sandbox wherever it finished.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys
from pathlib import Path

import pytest

from slmsql_hub.sql import ExecStatus, Judgement, Verdict

_SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_execution.py"
TINY = {"questions": 6, "samples": 4, "scale": 0.02, "timeout": 0.5}


def _load_module():
    name = "bench_execution"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # the baseline's Pool pickles its functions by module name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench():
    return _load_module()


@pytest.fixture(scope="module")
def tiny_load(bench, tmp_path_factory):
    work = tmp_path_factory.mktemp("bench")
    db = bench.build_database(work, seed=0, scale=TINY["scale"])
    return bench.build_load(db, TINY["questions"], TINY["samples"], seed=0)


@pytest.fixture(scope="module")
def judged(bench, tiny_load):
    return bench.time_sandbox(tiny_load, TINY["timeout"], workers=2)


def test_database_is_deterministic_and_reused_from_the_work_dir(bench, tmp_path):
    first = bench.build_database(tmp_path / "a", seed=3, scale=0.005)
    second = bench.build_database(tmp_path / "b", seed=3, scale=0.005)
    other_seed = bench.build_database(tmp_path / "b", seed=4, scale=0.005)

    def dump(path):
        with sqlite3.connect(path) as conn:
            return list(conn.iterdump())

    assert dump(first) == dump(second)
    assert dump(first) != dump(other_seed)
    mtime = first.stat().st_mtime_ns
    assert bench.build_database(tmp_path / "a", seed=3, scale=0.005) == first
    assert first.stat().st_mtime_ns == mtime  # reused, not rebuilt


def test_load_has_half_identical_samples_every_kind_and_one_runaway(bench, tiny_load):
    counts = tiny_load.kind_counts()
    assert len(tiny_load.samples) == TINY["questions"] * TINY["samples"]
    assert counts["identical"] == len(tiny_load.samples) // 2
    assert counts["runaway"] == 1
    assert all(counts[kind] > 0 for kind in ("rewrite", "wrong", "error"))
    golds = [q.gold for q in tiny_load.questions]
    assert len(set(golds)) == len(golds)


def test_load_labels_hold_when_run_with_plain_sqlite3(bench, tiny_load):
    limit = bench.time_physical_limit(tiny_load, TINY["timeout"], cores=2)

    assert bench.check_load(tiny_load, limit) == {}
    assert limit.timeouts == 1  # the runaway, counted at the timeout's duration
    assert limit.serial_s >= TINY["timeout"]
    assert limit.limit_s == pytest.approx(limit.serial_s / 2)
    assert limit.distinct == len(tiny_load.distinct_requests()) < 2 * len(tiny_load.samples)


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
    assert judged.in_worker_s >= TINY["timeout"]  # the runaway ran until the deadline


def test_bird_style_baseline_agrees_with_the_sandbox_wherever_it_finished(bench, tiny_load, judged):
    baseline = bench.time_bird_baseline(tiny_load, TINY["timeout"], num_cpus=2).results
    agreement = bench.compare_verdicts(judged.judgements, baseline)

    assert agreement["baseline_lost"] == 0
    assert agreement["baseline_unfinished"] == 1  # the runaway
    assert agreement["compared"] == len(tiny_load.samples) - 1
    assert agreement["disagreements"] == 0
    runaway = next(i for i, s in enumerate(tiny_load.samples) if s.kind == "runaway")
    assert baseline[runaway]["outcome"] == "timeout"


def test_a_differing_verdict_or_an_unscorable_one_counts_as_a_disagreement(bench):
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
    agreement = bench.compare_verdicts(judgements, baseline)

    assert agreement["disagreeing_indices"] == [0, 2]
    assert agreement["compared"] == 3
    assert agreement["baseline_unfinished"] == 1


def test_main_exits_zero_and_writes_every_number(bench, tiny_load, tmp_path, capsys):
    out = tmp_path / "bench.json"
    argv = [f"--{k}={v}" for k, v in TINY.items()] + [
        f"--work-dir={tiny_load.db_path.parent}",  # reuses the fixture's database
        "--overhead-queries=20",
        f"--json={out}",
    ]
    assert bench.main(argv) == 0

    numbers = json.loads(out.read_text())
    assert numbers["verdicts"]["disagreements"] == 0
    assert numbers["load"]["label_problems"] == {}
    assert numbers["load"]["predictions"] == TINY["questions"] * TINY["samples"]
    assert numbers["ratios"]["sandbox_over_limit"] > 0 and numbers["ratios"]["baseline_over_sandbox"] > 0
    assert numbers["overhead"]["sandbox_execute_us"] > numbers["overhead"]["sqlite3_us"] > 0
    printed = capsys.readouterr().out
    assert "(b)/(a)" in printed and "(c)/(b)" in printed and "0 disagreements" in printed
