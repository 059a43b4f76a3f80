"""SQL extraction from model answers: the same rule for the reward, the metric and evaluation."""

from __future__ import annotations

import pytest

from slmsql_hub.sql.extract import extract_sql, has_sql_block

# (model output, expected SQL) -- hand-made answers in the shapes small models actually produce.
CASES = [
    pytest.param("```sql\nSELECT name FROM singer\n```", "SELECT name FROM singer", id="plain-sql-block"),
    pytest.param(
        "To count singers we use COUNT.\n\n```sql\nSELECT count(*) FROM singer;\n```\n\nThis returns one row.",
        "SELECT count(*) FROM singer;",
        id="block-between-prose",
    ),
    pytest.param(
        "First try:\n```sql\nSELECT age FROM singer\n```\nBetter:\n```sql\nSELECT avg(age) FROM singer\n```",
        "SELECT avg(age) FROM singer",
        id="last-sql-block-wins",
    ),
    pytest.param("```SQL\nSELECT 1\n```", "SELECT 1", id="tag-upper-case"),
    pytest.param("```Sql  \r\nSELECT 1\r\n```", "SELECT 1", id="tag-mixed-case-crlf"),
    pytest.param("```sql SELECT name FROM singer```", "SELECT name FROM singer", id="one-line-sql-block"),
    pytest.param(
        "```sql\nSELECT name\nFROM singer\nWHERE age > 30\nORDER BY age",
        "SELECT name\nFROM singer\nWHERE age > 30\nORDER BY age",
        id="missing-closing-fence-at-end",
    ),
    pytest.param(
        "```sql\nSELECT a FROM t\n```\n```python\nprint('hi')\n```",
        "SELECT a FROM t",
        id="sql-block-beats-later-python-block",
    ),
    pytest.param(
        "```sql\nSELECT a FROM t\n```\nAlso:\n```\nSELECT b FROM t\n```",
        "SELECT a FROM t",
        id="sql-block-beats-later-untagged-block",
    ),
    pytest.param("```\nSELECT b FROM t\n```", "SELECT b FROM t", id="untagged-block-fallback"),
    pytest.param(
        "```\nSELECT a FROM t\n```\nthen\n```\nSELECT b FROM t\n```",
        "SELECT b FROM t",
        id="last-untagged-block",
    ),
    pytest.param("```sqlite\nSELECT c FROM t\n```", "SELECT c FROM t", id="dialect-tag-fallback"),
    pytest.param("```sql\n```\n```\nSELECT d FROM t\n```", "SELECT d FROM t", id="empty-sql-block-ignored"),
    pytest.param("````sql\nSELECT e FROM t\n````", "SELECT e FROM t", id="four-backtick-fence"),
    pytest.param(
        "  SELECT count(*) FROM singer;\n\n", "SELECT count(*) FROM singer;", id="bare-sql-stripped"
    ),
    pytest.param("select name from singer", "select name from singer", id="bare-sql-lower-case"),
    pytest.param(
        "WITH x AS (SELECT 1 AS v) SELECT v FROM x",
        "WITH x AS (SELECT 1 AS v) SELECT v FROM x",
        id="bare-with",
    ),
    pytest.param("VALUES (1), (2)", "VALUES (1), (2)", id="bare-values"),
    pytest.param("\tSELECT\n  a\nFROM t", "SELECT\n  a\nFROM t", id="bare-multiline-keeps-inner-whitespace"),
    pytest.param(
        "/* model output */ -- note\nSELECT count(*) FROM singer",
        "/* model output */ -- note\nSELECT count(*) FROM singer",
        id="bare-sql-after-block-and-line-comments",
    ),
    pytest.param("-- the answer:\n\n  with x as (select 1) select * from x", "-- the answer:\n\n  with x as (select 1) select * from x", id="bare-with-after-comment"),
    pytest.param("/* unclosed comment SELECT 1", None, id="only-an-unclosed-comment"),
    pytest.param("-- SELECT 1", None, id="sql-inside-a-line-comment-only"),
    pytest.param("/* SELECT 1 */ Sure, here it is.", None, id="prose-after-a-comment"),
    pytest.param("The answer is SELECT a FROM t", None, id="prose-before-sql"),
    pytest.param("SELECTION of rows is not possible.", None, id="word-starting-with-select"),
    pytest.param("I don't know.", None, id="no-sql"),
    pytest.param("```python\nprint('SELECT 1')\n```", None, id="only-python-block"),
    pytest.param("```sql\n   \n```", None, id="only-empty-sql-block"),
    pytest.param("", None, id="empty"),
    pytest.param("  \n\t ", None, id="whitespace"),
    pytest.param(None, None, id="none"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_extract_sql_on_hand_made_answers(text, expected):
    assert extract_sql(text) == expected


def test_plain_sql_predictions_pass_through_unchanged():
    for sql in ["SELECT T1.name FROM singer AS T1 WHERE T1.age  >  20", "select * from t where a = 'x  y'"]:
        assert extract_sql(sql) == sql


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
