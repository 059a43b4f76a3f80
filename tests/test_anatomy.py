"""The structural diff of a wrong sample against its gold (slmsql_hub.sql.anatomy): hand-written pairs for every
class, the literal's provenance, the abstraction that makes one mistake on two questions one signature, and the
Spider components."""

from __future__ import annotations

import pytest

from slmsql_hub.sql.anatomy import ERROR_CLASSES, SPIDER_COMPONENT, anatomy, error_kind

GOLD = "SELECT T1.name FROM singer AS T1 WHERE T1.age >= 30 AND T1.city = 'Rome'"

# (class, prediction, expected detail, expected trigger, expected output)
PAIRS = [
    ("wrong_literal", "SELECT name FROM singer WHERE age >= 30 AND city = 'rome'", "in_question", "in_question", "case"),
    ("wrong_operator", "SELECT name FROM singer WHERE age > 30 AND city = 'Rome'", None, ">=", ">"),
    ("wrong_column", "SELECT name FROM singer WHERE birth_year >= 30 AND city = 'Rome'", None, "age", "birth_year"),
    ("wrong_table_or_join", "SELECT name FROM artist WHERE age >= 30 AND city = 'Rome'", None, "singer", "artist"),
    ("condition", "SELECT name FROM singer WHERE age >= 30", "missing", "missing", "city = '?'"),
    ("condition", GOLD + " AND T1.name = 'x'", "extra", "extra", "name = '?'"),
]


@pytest.mark.parametrize(("kind", "pred", "detail", "trigger", "output"), PAIRS)
def test_a_single_difference_in_the_where_part_gets_its_class(kind, pred, detail, trigger, output):
    found = anatomy(pred, GOLD, question="Which singers from Rome are at least 30?")
    assert (found.kind, found.detail, found.trigger, found.output) == (kind, detail, trigger, output)


def test_aggregate_grouping_ordering_and_joins():
    gold = "SELECT count(*) FROM singer WHERE age > 20"
    assert anatomy("SELECT * FROM singer WHERE age > 20", gold).kind == "aggregate"
    agg = anatomy("SELECT max(age) FROM singer", "SELECT avg(age) FROM singer")
    assert (agg.kind, agg.trigger, agg.output, agg.components) == ("aggregate", "avg", "max", ("select",))
    order = anatomy("SELECT name FROM singer ORDER BY age LIMIT 1", "SELECT name FROM singer ORDER BY age DESC LIMIT 1")
    assert (order.kind, order.components) == ("group_order_limit", ("order",))
    group = anatomy("SELECT city, count(*) FROM singer", "SELECT city, count(*) FROM singer GROUP BY city")
    assert (group.kind, group.components) == ("group_order_limit", ("group", "keywords"))
    join = anatomy(
        "SELECT s.name FROM singer AS s",
        "SELECT s.name FROM singer AS s JOIN concert AS c ON s.id = c.singer_id",
    )
    assert (join.kind, join.trigger, join.output) == ("wrong_table_or_join", "concert singer", "singer")


def test_several_differences_or_a_new_shape_are_other_structure():
    other = anatomy("SELECT name FROM singer WHERE age > 31", "SELECT name FROM singer WHERE age >= 30")
    assert (other.kind, other.components) == ("other_structure", ("where",))
    nested = anatomy("SELECT name FROM singer UNION SELECT name FROM band", "SELECT name FROM singer")
    assert (nested.kind, nested.components) == ("other_structure", ("IUEN",))
    assert anatomy("SELECT name FROM singer WHERE", "SELECT name FROM singer").detail == "unparsed"


def test_predictions_that_do_not_run_or_hold_no_sql():
    assert anatomy(None, GOLD).kind == "no_sql"
    assert anatomy("SELECT 1", GOLD, verdict="no_sql").kind == "no_sql"
    failed = anatomy("SELECT nme FROM singer", GOLD, verdict="pred_error", error="no such column: NME")
    assert (failed.kind, failed.detail, failed.output) == ("not_executed", "no_such_column", "nme")
    assert anatomy("SELECT 1", GOLD, verdict="pred_timeout").detail == "timeout"
    assert error_kind("no such table: x") == "no_such_table"
    assert error_kind('near "FORM": syntax error') == "syntax"
    assert error_kind("ambiguous column name: id") == "ambiguous_column"
    assert error_kind("something odd") == "other_error"
    assert error_kind(None, "pred_refused") == "refused"


def test_where_the_right_literal_appears():
    gold = "SELECT name FROM singer WHERE city = 'Rome'"
    wrong = "SELECT name FROM singer WHERE city = 'Paris'"
    assert anatomy(wrong, gold, question="Singers from Rome?").detail == "in_question"
    assert anatomy(wrong, gold, question="Italian singers?", schema="city: Rome, Oslo").detail == "in_schema"
    absent = anatomy(wrong, gold, question="Italian singers?", schema="city TEXT")
    assert (absent.detail, absent.output) == ("absent", "other")
    assert anatomy("SELECT name FROM singer WHERE city = 'Rom'", gold).output == "substring"


def test_the_same_rule_on_two_questions_gives_one_signature():
    one = anatomy("SELECT name FROM singer WHERE age > 30", "SELECT name FROM singer WHERE age >= 30")
    two = anatomy("SELECT title FROM song WHERE T.sales > 5", "SELECT title FROM song AS T WHERE T.sales >= 5")
    assert one.signature == two.signature == ("wrong_operator", ">=", ">")


def test_every_class_is_covered_here_and_mapped_to_spider():
    covered = {kind for kind, *_ in PAIRS} | {"aggregate", "group_order_limit", "other_structure", "no_sql",
                                               "not_executed"}  # fmt: skip
    assert covered == set(ERROR_CLASSES) == set(SPIDER_COMPONENT)
