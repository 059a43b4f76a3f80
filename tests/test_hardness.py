"""Spider hardness by the official rules, checked on hand-made queries and on the real Spider dev gold."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from slmsql_hub.sql.hardness import HardnessCounts, hardness_counts, spider_hardness

DATA = Path(__file__).resolve().parents[1].parent / "shared/data/spider_dev"


def counts(sql: str) -> tuple[int, int, int]:
    result = hardness_counts(sql)
    return result.component1, result.component2, result.others


# ---------------------------------------------------------------------------------------------------------
# the label formula


@pytest.mark.parametrize(
    ("c1", "c2", "others", "label"),
    [
        (0, 0, 0, "easy"),
        (1, 0, 0, "easy"),
        (1, 0, 2, "medium"),
        (2, 0, 1, "medium"),
        (2, 0, 2, "extra"),
        (2, 0, 3, "hard"),
        (3, 0, 2, "hard"),
        (1, 1, 0, "hard"),
        (0, 1, 1, "extra"),
        (4, 0, 0, "extra"),
        (1, 2, 0, "extra"),
        (3, 0, 3, "extra"),
    ],
)
def test_label_follows_the_official_thresholds(c1, c2, others, label):
    assert HardnessCounts(component1=c1, component2=c2, others=others).label == label


# ---------------------------------------------------------------------------------------------------------
# component 1: clauses, joins, or, like


def test_single_table_count_is_easy():
    assert counts("SELECT count(*) FROM singer") == (0, 0, 0)
    assert spider_hardness("SELECT count(*) FROM singer") == "easy"


def test_where_group_order_and_limit_each_count_once():
    sql = "SELECT a FROM t WHERE b = 1 GROUP BY a ORDER BY a LIMIT 3"
    assert counts(sql) == (4, 0, 0)
    assert spider_hardness(sql) == "extra"


def test_each_join_counts_one():
    assert counts("SELECT T1.a FROM t AS T1 JOIN u AS T2 ON T1.id = T2.id") == (1, 0, 0)
    assert counts("SELECT T1.a FROM t AS T1 JOIN u AS T2 ON T1.id = T2.id JOIN v ON T2.k = v.k") == (2, 0, 0)


def test_or_connectors_and_like_conditions_count():
    assert counts("SELECT a FROM t WHERE b = 1 OR b = 2") == (2, 0, 1)
    assert counts("SELECT a FROM t WHERE b LIKE '%x%'") == (2, 0, 0)
    assert counts("SELECT a FROM t WHERE b NOT LIKE '%x%' OR c LIKE 'y%'") == (4, 0, 1)


def test_or_after_a_column_valued_condition_is_swallowed_like_the_official_parser():
    # The official parser reads the value "T2.y" on to the next "and", so the OR and its condition vanish.
    assert counts("SELECT a FROM t AS T1 JOIN u AS T2 ON T1.x = T2.y OR T1.x = T2.z") == (1, 0, 0)
    # With a literal value the OR is seen.
    assert counts("SELECT a FROM t AS T1 JOIN u AS T2 ON T1.x = T2.y WHERE T1.b = 1 OR T1.b = 2") == (3, 0, 1)


def test_from_subquery_is_a_table_unit_not_a_nested_query():
    assert counts("SELECT count(*) FROM (SELECT a FROM t)") == (0, 0, 0)


# ---------------------------------------------------------------------------------------------------------
# component 2: nested queries and set operations


def test_subquery_values_count_as_nested():
    assert counts("SELECT a FROM t WHERE b IN (SELECT b FROM u)") == (1, 1, 0)
    assert counts("SELECT a FROM t WHERE b > (SELECT avg(b) FROM t)") == (1, 1, 0)
    between = "SELECT a FROM t WHERE b BETWEEN (SELECT min(x) FROM u) AND (SELECT max(x) FROM u)"
    assert counts(between) == (1, 2, 0)


def test_set_operation_counts_once_and_only_the_first_query_is_scored():
    assert counts("SELECT a FROM t UNION SELECT a FROM u") == (0, 1, 0)
    # The trailing ORDER BY / LIMIT belong to the second query in the official parse.
    assert counts("SELECT a FROM t UNION SELECT a FROM u ORDER BY a LIMIT 1") == (0, 1, 0)
    assert counts("SELECT a FROM t WHERE b = 1 INTERSECT SELECT a FROM u EXCEPT SELECT a FROM v") == (1, 1, 0)


# ---------------------------------------------------------------------------------------------------------
# others, with the official aggregate-count quirks


def test_several_aggregates_and_select_columns_count():
    assert counts("SELECT max(a), min(a) FROM t") == (0, 0, 2)
    assert counts("SELECT a, b FROM t") == (0, 0, 1)
    assert counts("SELECT a FROM t ORDER BY sum(a) - sum(b)") == (1, 0, 1)


def test_several_where_conditions_and_group_columns_count():
    assert counts("SELECT a FROM t WHERE b = 1 AND c = 2") == (1, 0, 1)
    assert counts("SELECT a FROM t GROUP BY a, b") == (1, 0, 1)


def test_negated_where_condition_counts_as_an_aggregate():
    # Official quirk: a WHERE condition's "not" flag is read where the aggregate id is expected.
    assert counts("SELECT count(*) FROM t WHERE a NOT IN (SELECT b FROM u)") == (1, 1, 1)
    assert spider_hardness("SELECT count(*) FROM t WHERE a NOT IN (SELECT b FROM u)") == "extra"
    assert spider_hardness("SELECT count(*) FROM t WHERE a IN (SELECT b FROM u)") == "hard"


def test_having_connectors_count_as_aggregates_but_having_aggregates_do_not():
    assert counts("SELECT a FROM t GROUP BY a HAVING count(*) > 1 ORDER BY count(*)") == (2, 0, 0)
    assert counts("SELECT a FROM t GROUP BY a HAVING count(*) > 1 AND count(*) < 5") == (1, 0, 0)
    two_connectors = "SELECT a FROM t GROUP BY a HAVING count(*) > 1 AND count(*) < 5 OR count(*) = 9"
    assert counts(two_connectors) == (2, 0, 1)


# ---------------------------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize(
    "sql",
    [
        "",
        "   ",
        "SELEC name FROM t",
        "SELECT a FROM t WHERE",
        "DROP TABLE t",
        "SELECT 1; SELECT 2",
        "hello world",
    ],
)
def test_unparseable_or_non_query_sql_raises_value_error(sql):
    with pytest.raises(ValueError, match="spider_hardness"):
        spider_hardness(sql)


def test_trailing_semicolon_is_one_statement():
    assert spider_hardness("SELECT count(*) FROM singer;") == "easy"


# ---------------------------------------------------------------------------------------------------------
# Spider dev: the published distribution, and every question against the official parse in dev.json


def _official_counts(sql: dict) -> tuple[int, int, int]:
    """The official count_component1 / count_component2 / count_others on dev.json's parsed ``sql``."""
    like, not_agg = 9, 0  # WHERE_OPS.index("like"); AGG_OPS.index("none")
    conds = sql["from"]["conds"][::2] + sql["where"][::2] + sql["having"][::2]
    connectors = sql["from"]["conds"][1::2] + sql["where"][1::2] + sql["having"][1::2]
    c1 = sum([bool(sql["where"]), bool(sql["groupBy"]), bool(sql["orderBy"]), sql["limit"] is not None])
    c1 += max(len(sql["from"]["table_units"]) - 1, 0) + connectors.count("or")
    c1 += sum(1 for cond in conds if cond[1] == like)
    c2 = sum(isinstance(cond[3], dict) + isinstance(cond[4], dict) for cond in conds)
    c2 += sum(sql[op] is not None for op in ("intersect", "except", "union"))
    units = list(sql["select"][1]) + sql["where"][::2] + sql["groupBy"] + sql["having"]
    if sql["orderBy"]:
        units += [u[1] for u in sql["orderBy"][1] if u[1]] + [u[2] for u in sql["orderBy"][1] if u[2]]
    aggregates = sum(1 for unit in units if unit[0] != not_agg)
    others = sum([aggregates > 1, len(sql["select"][1]) > 1, len(sql["where"]) > 1, len(sql["groupBy"]) > 1])
    return c1, c2, others


@pytest.fixture(scope="module")
def spider_dev():
    if not (DATA / "dev_gold.sql").is_file() or not (DATA / "dev.json").is_file():
        pytest.skip(f"Spider dev data not found at {DATA}")
    gold = [line.strip().split("\t")[0] for line in (DATA / "dev_gold.sql").read_text().splitlines()]
    dev = json.loads((DATA / "dev.json").read_text())
    assert len(gold) == len(dev) == 1034
    return gold, dev


@pytest.mark.spider
def test_spider_dev_gold_reproduces_the_published_hardness_distribution(spider_dev):
    gold, _ = spider_dev
    assert Counter(map(spider_hardness, gold)) == {"easy": 248, "medium": 446, "hard": 174, "extra": 166}


@pytest.mark.spider
def test_spider_dev_counts_equal_the_official_parse_question_by_question(spider_dev):
    gold, dev = spider_dev
    mismatches = [
        (index, sql, counts(sql), _official_counts(entry["sql"]))
        for index, (sql, entry) in enumerate(zip(gold, dev))
        if counts(sql) != _official_counts(entry["sql"])
    ]
    assert mismatches == []
