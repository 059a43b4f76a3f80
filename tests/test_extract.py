"""SQL extraction from model answers: the same rule for the reward, the metric and evaluation."""

from __future__ import annotations

import pytest

from slmsql_hub.sql.extract import extract_sql, has_sql_block

# Hand-made answers in the shapes small models actually produce. id: (model output, expected SQL)
ANSWERS = {
    "plain-sql-block": ("```sql\nSELECT name FROM singer\n```", "SELECT name FROM singer"),
    "block-between-prose": (
        "To count singers we use COUNT.\n\n```sql\nSELECT count(*) FROM singer;\n```\n\nThis returns one row.",
        "SELECT count(*) FROM singer;",
    ),
    "last-sql-block-wins": (
        "First try:\n```sql\nSELECT age FROM singer\n```\nBetter:\n```sql\nSELECT avg(age) FROM singer\n```",
        "SELECT avg(age) FROM singer",
    ),
    "tag-upper-case": ("```SQL\nSELECT 1\n```", "SELECT 1"),
    "tag-mixed-case-crlf": ("```Sql  \r\nSELECT 1\r\n```", "SELECT 1"),
    "one-line-sql-block": ("```sql SELECT name FROM singer```", "SELECT name FROM singer"),
    "missing-closing-fence-at-end": (
        "```sql\nSELECT name\nFROM singer\nWHERE age > 30\nORDER BY age",
        "SELECT name\nFROM singer\nWHERE age > 30\nORDER BY age",
    ),
    "sql-block-beats-later-python-block": (
        "```sql\nSELECT a FROM t\n```\n```python\nprint('hi')\n```",
        "SELECT a FROM t",
    ),
    "sql-block-beats-later-untagged-block": (
        "```sql\nSELECT a FROM t\n```\nAlso:\n```\nSELECT b FROM t\n```",
        "SELECT a FROM t",
    ),
    "untagged-block-fallback": ("```\nSELECT b FROM t\n```", "SELECT b FROM t"),
    "last-untagged-block": ("```\nSELECT a FROM t\n```\nthen\n```\nSELECT b FROM t\n```", "SELECT b FROM t"),
    "dialect-tag-fallback": ("```sqlite\nSELECT c FROM t\n```", "SELECT c FROM t"),
    "empty-sql-block-ignored": ("```sql\n```\n```\nSELECT d FROM t\n```", "SELECT d FROM t"),
    "four-backtick-fence": ("````sql\nSELECT e FROM t\n````", "SELECT e FROM t"),
    "bare-sql-stripped": ("  SELECT count(*) FROM singer;\n\n", "SELECT count(*) FROM singer;"),
    "bare-multiline-keeps-inner-whitespace": ("\tSELECT\n  a\nFROM t", "SELECT\n  a\nFROM t"),
}
# Bare SQL comes back unchanged.
UNCHANGED = {
    "bare-sql-lower-case": "select name from singer",
    "bare-with": "WITH x AS (SELECT 1 AS v) SELECT v FROM x",
    "bare-values": "VALUES (1), (2)",
    "bare-sql-after-block-and-line-comments": "/* model output */ -- note\nSELECT count(*) FROM singer",
    "bare-with-after-comment": "-- the answer:\n\n  with x as (select 1) select * from x",
    "plain-sql-double-spaces": "SELECT T1.name FROM singer AS T1 WHERE T1.age  >  20",
    "plain-sql-spaces-in-a-string": "select * from t where a = 'x  y'",
}
# Answers without SQL give None.
NO_SQL = {
    "only-an-unclosed-comment": "/* unclosed comment SELECT 1",
    "sql-inside-a-line-comment-only": "-- SELECT 1",
    "prose-after-a-comment": "/* SELECT 1 */ Sure, here it is.",
    "prose-before-sql": "The answer is SELECT a FROM t",
    "word-starting-with-select": "SELECTION of rows is not possible.",
    "no-sql": "I don't know.",
    "only-python-block": "```python\nprint('SELECT 1')\n```",
    "only-empty-sql-block": "```sql\n   \n```",
    "empty": "",
    "whitespace": "  \n\t ",
    "none": None,
}
CASES = [
    *(pytest.param(text, sql, id=name) for name, (text, sql) in ANSWERS.items()),
    *(pytest.param(sql, sql, id=name) for name, sql in UNCHANGED.items()),
    *(pytest.param(text, None, id=name) for name, text in NO_SQL.items()),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_extract_sql_on_hand_made_answers(text, expected):
    assert extract_sql(text) == expected


def test_extraction_is_idempotent_on_its_own_output():
    for text, _ in (case.values for case in CASES):
        sql = extract_sql(text)
        if sql is not None and sql.lstrip().lower().startswith(("select", "with", "values")):
            assert extract_sql(sql) == sql


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("```sql\nSELECT 1\n```", True),
        ("Here:\n```SQL\nSELECT 1", True),
        ("```sql SELECT 1```", True),
        ("SELECT 1", False),
        ("```\nSELECT 1\n```", False),
        ("```sqlite\nSELECT 1\n```", False),
        ("```sql\n\n```", False),
        ("", False),
        (None, False),
    ],
)
def test_has_sql_block(text, expected):
    assert has_sql_block(text) is expected


def test_has_sql_block_agrees_with_extraction_source():
    for text, _ in (case.values for case in CASES):
        if has_sql_block(text):
            assert extract_sql(text) is not None


def test_comment_led_prediction_is_executed_by_every_judging_path(tmp_path):
    """The metric, the reward and the judge (filter, eval, slmsql ex) share one extraction rule."""
    from slmsql_hub.metric import compute_execution_accuracy, make_demo_database
    from slmsql_hub.rewards import ExecutionReward
    from slmsql_hub.sql import Judge, Verdict

    db = str(make_demo_database(tmp_path))
    pred, gold = "/* model output */ -- note\nSELECT count(*) FROM singer", "SELECT count(*) FROM singer"
    with Judge(workers=1) as judge:
        assert judge.judge(pred, gold, db).verdict is Verdict.CORRECT
    assert compute_execution_accuracy([pred], [gold], [db], workers=1)["num_correct"] == 1
    reward = ExecutionReward(workers=1)
    assert reward(completions=[pred], gold_sql=[gold], db_path=[db]) == [1.0]
    reward.close()
