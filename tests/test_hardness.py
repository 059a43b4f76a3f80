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


def case(sql: str, expected, rule: str):
    return pytest.param(sql, expected, id=rule)


# (component1, component2, others) as the official evaluation counts them.
COUNTS = [
    # component 1: clauses, joins, or, like
    case("SELECT count(*) FROM singer", (0, 0, 0), "single-table-count"),
    case(
        "SELECT a FROM t WHERE b = 1 GROUP BY a ORDER BY a LIMIT 3",
        (4, 0, 0),
        "where-group-order-limit-once-each",
    ),
    case("SELECT T1.a FROM t AS T1 JOIN u AS T2 ON T1.id = T2.id", (1, 0, 0), "one-join"),
    case(
        "SELECT T1.a FROM t AS T1 JOIN u AS T2 ON T1.id = T2.id JOIN v ON T2.k = v.k", (2, 0, 0), "two-joins"
    ),
    case("SELECT a FROM t WHERE b = 1 OR b = 2", (2, 0, 1), "or-connector"),
    case("SELECT a FROM t WHERE b LIKE '%x%'", (2, 0, 0), "like"),
    case("SELECT a FROM t WHERE b NOT LIKE '%x%' OR c LIKE 'y%'", (4, 0, 1), "not-like-or-like"),
    # The official parser reads the value "T2.y" on to the next "and", so the OR and its condition vanish...
    case(
        "SELECT a FROM t AS T1 JOIN u AS T2 ON T1.x = T2.y OR T1.x = T2.z", (1, 0, 0), "or-after-column-value"
    ),
    # ...while with a literal value the OR is seen.
    case(
        "SELECT a FROM t AS T1 JOIN u AS T2 ON T1.x = T2.y WHERE T1.b = 1 OR T1.b = 2",
        (3, 0, 1),
        "or-after-literal-value",
    ),
    case("SELECT count(*) FROM (SELECT a FROM t)", (0, 0, 0), "from-subquery-is-a-table-unit"),
    # component 2: nested queries and set operations
    case("SELECT a FROM t WHERE b IN (SELECT b FROM u)", (1, 1, 0), "in-subquery"),
    case("SELECT a FROM t WHERE b > (SELECT avg(b) FROM t)", (1, 1, 0), "compared-subquery"),
    case(
        "SELECT a FROM t WHERE b BETWEEN (SELECT min(x) FROM u) AND (SELECT max(x) FROM u)",
        (1, 2, 0),
        "between-two-subqueries",
    ),
    case("SELECT a FROM t UNION SELECT a FROM u", (0, 1, 0), "set-operation-once"),
    # The trailing ORDER BY / LIMIT belong to the second query in the official parse.
    case("SELECT a FROM t UNION SELECT a FROM u ORDER BY a LIMIT 1", (0, 1, 0), "only-first-query-scored"),
    case(
        "SELECT a FROM t WHERE b = 1 INTERSECT SELECT a FROM u EXCEPT SELECT a FROM v",
        (1, 1, 0),
        "chained-set-operations",
    ),
    # others, with the official aggregate-count quirks
    case("SELECT max(a), min(a) FROM t", (0, 0, 2), "two-aggregates-two-columns"),
    case("SELECT a, b FROM t", (0, 0, 1), "two-select-columns"),
    case("SELECT a FROM t ORDER BY sum(a) - sum(b)", (1, 0, 1), "aggregates-in-order-by"),
    case("SELECT a FROM t WHERE b = 1 AND c = 2", (1, 0, 1), "two-where-conditions"),
    case("SELECT a FROM t GROUP BY a, b", (1, 0, 1), "two-group-columns"),
    # A WHERE condition's "not" flag is read where the aggregate id is expected.
    case(
        "SELECT count(*) FROM t WHERE a NOT IN (SELECT b FROM u)",
        (1, 1, 1),
        "negated-condition-is-an-aggregate",
    ),
    # HAVING connectors count as aggregates, HAVING's aggregates do not.
    case(
        "SELECT a FROM t GROUP BY a HAVING count(*) > 1 ORDER BY count(*)", (2, 0, 0), "having-one-condition"
    ),
    case(
        "SELECT a FROM t GROUP BY a HAVING count(*) > 1 AND count(*) < 5", (1, 0, 0), "having-one-connector"
    ),
    case(
        "SELECT a FROM t GROUP BY a HAVING count(*) > 1 AND count(*) < 5 OR count(*) = 9",
        (2, 0, 1),
        "having-two-connectors",
    ),
]


@pytest.mark.parametrize(("sql", "expected"), COUNTS)
def test_components_are_counted_like_the_official_evaluation(sql, expected):
    assert counts(sql) == expected


@pytest.mark.parametrize(
    ("sql", "label"),
    [
        case("SELECT count(*) FROM singer", "easy", "single-table-count"),
        case("SELECT count(*) FROM singer;", "easy", "trailing-semicolon-is-one-statement"),
        case("SELECT a FROM t WHERE b = 1 GROUP BY a ORDER BY a LIMIT 3", "extra", "four-clauses"),
        case("SELECT count(*) FROM t WHERE a NOT IN (SELECT b FROM u)", "extra", "negated-nested"),
        case("SELECT count(*) FROM t WHERE a IN (SELECT b FROM u)", "hard", "nested"),
    ],
)
def test_spider_hardness_labels_queries(sql, label):
    assert spider_hardness(sql) == label


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
