"""The Judge: prediction + gold + database -> verdict (slmsql_hub.sql.judge)."""

from __future__ import annotations

import sqlite3

import pytest
from _runaways import starved

from slmsql_hub.sql import Judge, Limits, Sandbox, Verdict


def _make_db(path, people):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE person (name TEXT, age INTEGER, city TEXT)")
    conn.executemany("INSERT INTO person VALUES (?, ?, ?)", people)
    conn.commit()
    conn.close()
    return path


PEOPLE = [("ann", 30, "Oslo"), ("bob", 41, "Lima"), ("cid", 41, "Oslo"), ("dee", 25, None)]


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return _make_db(tmp_path_factory.mktemp("judge") / "people.sqlite", PEOPLE)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(Limits(timeout_s=1.0), workers=2) as sb:
        yield sb


def test_failing_gold_is_unscorable_never_zero(db, sandbox):
    judge = Judge(sandbox)
    for prediction in ("SELECT name FROM person", "SELECT nope FROM person", None, ""):
        j = judge.judge(prediction, "SELECT missing_column FROM person", db)
        assert j.verdict is Verdict.UNSCORABLE
        assert j.correct is None and not j.scorable
        assert "gold SQL failed" in j.error


def test_prediction_that_fails_never_matches(db, sandbox):
    judge = Judge(sandbox)
    j = judge.judge("SELECT nope FROM person", "SELECT name FROM person WHERE age > 100", db)
    assert j.verdict is Verdict.PRED_ERROR and j.correct == 0
    assert j.gold.ok and j.gold.rows == ()


def test_empty_prediction_does_not_match_an_empty_gold(db, sandbox):
    judge = Judge(sandbox)
    empty_gold = "SELECT name FROM person WHERE age > 100"
    assert judge.judge("", empty_gold, db).verdict is Verdict.NO_SQL
    assert judge.judge("```sql\n;\n```", empty_gold, db).correct == 0
    assert judge.judge("no sql here, sorry", empty_gold, db).verdict is Verdict.NO_SQL


RUNAWAY = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r"


def test_runaway_prediction_out_of_op_budget_is_a_timeout_and_wrong(db):
    with Judge(limits=Limits(timeout_s=30, max_ops=5_000_000), workers=1) as judge:
        j = judge.judge(RUNAWAY, "SELECT 1", db)
    assert j.verdict is Verdict.PRED_TIMEOUT and j.correct == 0 and j.scorable


def test_a_runaway_past_its_time_budget_is_the_query_s_fault_not_the_machine_s(db, sandbox):
    # The 1 s time budget comes long before the 1e9-op budget: still the query's fault (issue #18).
    judge = Judge(sandbox)
    j = judge.judge(RUNAWAY, "SELECT 1", db)
    assert j.verdict is Verdict.PRED_TIMEOUT and j.correct == 0 and j.scorable and not j.pred.infra
    gold_side = judge.judge("SELECT 1", RUNAWAY, db)
    assert gold_side.verdict is Verdict.UNSCORABLE and gold_side.correct is None
    assert sandbox.stats["infra_failures"] == 0


def test_a_query_the_machine_starves_of_cpu_is_an_infrastructure_failure(db):
    with Sandbox(Limits(timeout_s=0.3), workers=1) as sandbox:
        judge = Judge(sandbox)
        assert judge.judge("SELECT 1", "SELECT 1", db).correct == 1
        with starved(sandbox):
            j = judge.judge("SELECT 2", "SELECT 1", db)
    assert j.verdict is Verdict.INFRA_FAILURE and j.correct is None and not j.scorable
    assert j.pred.infra and "infrastructure failure on the prediction" in j.error


def test_writes_in_predictions_are_refused(db, sandbox):
    j = Judge(sandbox).judge("```sql\nDELETE FROM person\n```", "SELECT 1", db)
    assert j.verdict is Verdict.PRED_REFUSED and j.correct == 0


def test_bird_mode_ignores_order_and_duplicates_but_not_column_order(db, sandbox):
    judge = Judge(sandbox, mode="bird")
    gold = "SELECT name, age FROM person WHERE age > 26 ORDER BY name"
    assert judge.judge("SELECT name, age FROM person WHERE age > 26 ORDER BY age DESC", gold, db).correct == 1
    assert judge.judge("SELECT name, age FROM person, (SELECT 1 UNION SELECT 2) WHERE age > 26", gold, db).correct == 1
    assert judge.judge("SELECT age, name FROM person WHERE age > 26", gold, db).correct == 0


def test_spider_mode_permits_column_permutation_and_respects_order_by(db, sandbox):
    judge = Judge(sandbox, mode="spider")
    gold = "SELECT name, age FROM person ORDER BY age, name"
    assert judge.judge("SELECT age, name FROM person ORDER BY age, name", gold, db).correct == 1
    assert judge.judge("SELECT name, age FROM person ORDER BY age DESC", gold, db).correct == 0
    # Without ORDER BY in the gold, rows are a multiset: duplicates count.
    gold_bag = "SELECT age FROM person WHERE age = 41"
    assert judge.judge("SELECT DISTINCT age FROM person WHERE age = 41", gold_bag, db).correct == 1  # DISTINCT removed
    assert Judge(sandbox, mode="spider", keep_distinct=True).judge(
        "SELECT DISTINCT age FROM person WHERE age = 41", gold_bag, db
    ).correct == 0


def test_spider_mode_must_agree_on_every_database_of_a_test_suite(tmp_path, sandbox):
    folder = tmp_path / "people"
    folder.mkdir()
    main = _make_db(folder / "people.sqlite", PEOPLE)
    # A distilled-test-suite neighbour where the two queries below disagree.
    _make_db(folder / "people_variant1.sqlite", [("ann", 30, "Oslo"), ("eve", 41, "Rome")])
    gold = "SELECT name FROM person WHERE age = 41"
    lucky = "SELECT name FROM person WHERE age = 41 AND city IS NOT 'Rome'"
    assert Judge(sandbox, mode="bird").judge(lucky, gold, main).correct == 1  # one database: looks right
    j = Judge(sandbox, mode="spider").judge(lucky, gold, main)
    assert j.verdict is Verdict.WRONG  # the suite exposes it


def test_a_group_of_identical_samples_executes_once(db):
    with Sandbox(Limits(timeout_s=5), workers=2) as sb:
        judge = Judge(sb)
        preds = ["```sql\nSELECT name FROM person WHERE age = 41\n```"] * 7 + ["SELECT name FROM person"]
        js = judge.judge_many(preds, ["SELECT name FROM person WHERE age > 40"] * 8, [db] * 8)
        assert [j.correct for j in js] == [1] * 7 + [0]
        assert sb.stats["executed"] == 3  # gold once, two distinct predictions


def test_judgements_keep_input_order_and_serialise(db, sandbox):
    judge = Judge(sandbox)
    preds = [f"SELECT name FROM person WHERE age = {a}" for a in (30, 99, 25)]
    golds = ["SELECT name FROM person WHERE name = 'ann'"] * 3
    js = judge.judge_many(preds, golds, [db] * 3)
    assert [j.correct for j in js] == [1, 0, 0]
    assert js[0].to_dict() == {
        "correct": 1,
        "verdict": "correct",
        "pred_sql": preds[0],
        "pred_status": "ok",
        "gold_status": "ok",
        "error": None,
    }


def test_mismatched_lengths_and_unknown_mode_are_clear_errors(db, sandbox):
    with pytest.raises(ValueError, match="differ in length"):
        Judge(sandbox).judge_many(["SELECT 1"], ["SELECT 1", "SELECT 2"], [db])
    with pytest.raises(Exception, match="bird"):
        Judge(sandbox, mode="exact")
