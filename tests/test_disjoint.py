"""Held-out means disjoint by meaning (issue #32): the normalised gold, the world build's guard and the rule
that keeps a dev/test/probe paraphrase out of the study's pool."""

from __future__ import annotations

import pytest

from slmsql_hub.sql.shape import meaning_key, normalized_gold
from slmsql_hub.study.band import left_out_by
from slmsql_hub.world.build import _apart, _check_disjoint
from slmsql_hub.world.questions import Candidate

OR_AB = "SELECT name FROM member WHERE city = 'Bath' OR city = 'Exeter'"
OR_BA = "SELECT name FROM member WHERE city = 'Exeter' OR city = 'Bath'"


@pytest.mark.parametrize(
    "one, other",
    [
        (OR_AB, OR_BA),
        (
            "SELECT T1.Name FROM Singer AS T1 WHERE (T1.Age >= 30);",
            "select t1.name from singer as t1 where t1.age>=30",
        ),
        (
            "SELECT count(*) FROM a WHERE ((x > 1) AND (y < 2))",
            "SELECT COUNT(*)\nFROM a WHERE x > 1 AND y < 2",
        ),
    ],
)
def test_the_same_meaning_spelled_apart_normalises_alike(one, other):
    assert one != other and normalized_gold(one) == normalized_gold(other)


@pytest.mark.parametrize(
    "one, other",
    [
        ("SELECT name FROM t WHERE city = 'Bath'", "SELECT name FROM t WHERE city = 'bath'"),
        ("SELECT name FROM t WHERE age >= 30", "SELECT name FROM t WHERE age > 30"),
        ("SELECT name FROM t WHERE age >= 30", "SELECT name FROM t WHERE age >= 31"),
        ("SELECT name FROM t LIMIT 1", "SELECT name FROM u LIMIT 1"),
    ],
)
def test_another_literal_operator_or_table_normalises_apart(one, other):
    assert normalized_gold(one) != normalized_gold(other)


def test_unparsable_sql_falls_back_to_its_text_and_the_key_names_the_database():
    assert normalized_gold("SELEC  Name\nFROM (") == "selec name from ("
    assert meaning_key("a", OR_AB) == ("a", normalized_gold(OR_BA)) != meaning_key("b", OR_AB)


def _candidate(question: str, sql: str, db: str = "club") -> Candidate:
    return Candidate(db, question, sql, "or_filter", "filter", "easy")


def test_the_world_build_refuses_a_held_out_paraphrase_in_a_training_split():
    dev = _candidate("List the name of members whose city is Bath or Exeter.", OR_AB)
    twin = _candidate("Which members have city Exeter or Bath? Give their name.", OR_BA)
    with pytest.raises(
        RuntimeError, match="^1 dev questions share database and normalised gold with grounding$"
    ):
        _check_disjoint({"grounding": [twin], "dev": [dev]})
    _check_disjoint({"grounding": [twin], "dev": [_candidate(dev.question, OR_AB, db="other")]})
    _check_disjoint({"dev": [dev], "test": [twin]})  # held-out splits may share a meaning with each other


def test_training_candidates_that_paraphrase_dev_or_test_are_dropped_in_order():
    dev = _candidate("List the name of members whose city is Bath or Exeter.", OR_AB)
    train = [_candidate(f"q{i}", f"SELECT name FROM member WHERE id = {i}") for i in range(3)]
    twin = _candidate("Which members have city Exeter or Bath? Give their name.", OR_BA)
    assert _apart([train[0], twin, train[1], train[2]], [dev]) == train


def test_the_pool_rule_names_the_first_rule_that_holds_a_row():
    held = {"db_id": ["club", "club"], "question": ["Bath or Exeter members?", "How many members?"],
            "gold_sql": [OR_AB, "SELECT count(*) FROM member"]}  # fmt: skip
    rows = {
        "db_id": ["club", "club", "club", "other", "club"],
        "question": ["Bath or Exeter members?", "how many  MEMBERS", "Exeter or Bath members?", "Exeter or Bath?",
                     "Bath members?"],
        "gold_sql": [OR_AB, "SELECT count(*) FROM member WHERE 1", OR_BA, OR_BA,
                     "SELECT name FROM member WHERE city = 'Bath'"],
    }  # fmt: skip
    assert left_out_by(rows, [held]) == ["key", "text", "meaning", None, None]
    assert left_out_by(rows, []) == [None] * 5
