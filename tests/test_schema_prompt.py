"""Schema text (read through the sandbox) and the chat prompt built from it."""

from __future__ import annotations

import os
import sqlite3
import time

import pytest

from slmsql_hub.data.prompts import SYSTEM_PROMPT, PromptConfig, build_messages, build_prompts, format_answer
from slmsql_hub.errors import UsageError
from slmsql_hub.sql import Limits, Sandbox
from slmsql_hub.sql.schema import clear_schema_cache, schema_text


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(Limits(timeout_s=5), workers=1) as sb:
        yield sb


def _make_db(path, extra_long_title: bool = False):
    con = sqlite3.connect(path)  # building the test database (allowed outside slmsql_hub/sql)
    con.executescript(
        """
        CREATE TABLE zoo (zoo_id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT, city TEXT);
        CREATE TABLE animal (
            animal_id INTEGER PRIMARY KEY,
            name TEXT,
            species TEXT,
            zoo_id INTEGER REFERENCES zoo (zoo_id)
        );
        """
    )
    con.executemany(
        "INSERT INTO zoo (name, city) VALUES (?, ?)", [("North Park", "Oslo"), ("Sea World", None)]
    )
    title = "a" * 100 if extra_long_title else "Leo"
    con.executemany(
        "INSERT INTO animal VALUES (?, ?, ?, ?)",
        [(1, title, "lion", 1), (2, "Tess", "tiger", 1), (3, "Pip", "penguin", 2), (4, "Olaf", "otter", 2)],
    )
    con.commit()
    con.close()
    return path


def test_schema_text_lists_user_tables_in_name_order_with_create_statements(tmp_path, sandbox):
    db = _make_db(tmp_path / "zoo.sqlite")
    text = schema_text(db, sandbox)
    assert "sqlite_sequence" not in text  # AUTOINCREMENT created it; internal tables stay out
    assert text.index("CREATE TABLE animal") < text.index("CREATE TABLE zoo")
    assert "zoo_id INTEGER REFERENCES zoo (zoo_id)" in text
    assert (
        "/* sample rows of zoo:\nzoo_id | name | city\n1 | North Park | Oslo\n2 | Sea World | NULL\n*/"
        in text
    )


def test_schema_text_shows_at_most_sample_rows_rows_per_table(tmp_path, sandbox):
    db = _make_db(tmp_path / "zoo.sqlite")
    text = schema_text(db, sandbox, sample_rows=2)
    animal_block = text.split("/* sample rows of animal:")[1].split("*/")[0]
    assert "Leo" in animal_block and "Tess" in animal_block
    assert "Pip" not in animal_block and "Olaf" not in animal_block


def test_schema_text_without_sample_rows_is_only_create_statements(tmp_path, sandbox):
    db = _make_db(tmp_path / "zoo.sqlite")
    text = schema_text(db, sandbox, sample_rows=0)
    assert "sample rows" not in text and "Leo" not in text
    assert text.count("CREATE TABLE") == 2


def test_schema_text_truncates_long_values(tmp_path, sandbox):
    db = _make_db(tmp_path / "zoo.sqlite", extra_long_title=True)
    text = schema_text(db, sandbox, max_value_chars=12)
    assert "aaaaaaaaaaaa... | lion" in text
    assert "a" * 13 not in text


def test_schema_text_reads_the_database_again_after_it_changes(tmp_path, sandbox):
    db = _make_db(tmp_path / "zoo.sqlite")
    first = schema_text(db, sandbox)
    requests = sandbox.stats["requests"]
    assert schema_text(db, sandbox) == first
    assert sandbox.stats["requests"] == requests  # memoised: the sandbox was not asked again
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE keeper (keeper_id INTEGER PRIMARY KEY, name TEXT)")
    con.commit()
    con.close()
    later = time.time() + 5
    os.utime(db, (later, later))  # mtime resolution must not hide the change
    assert "CREATE TABLE keeper" in schema_text(db, sandbox)
    clear_schema_cache()


def test_schema_text_works_without_a_sandbox(tmp_path):
    db = _make_db(tmp_path / "zoo.sqlite")
    assert "CREATE TABLE zoo" in schema_text(db, sample_rows=1, max_value_chars=5)


def test_schema_text_of_a_missing_file_names_the_file(tmp_path, sandbox):
    with pytest.raises(UsageError, match="database file not found: .*nowhere.sqlite"):
        schema_text(tmp_path / "nowhere.sqlite", sandbox)


def test_schema_text_of_a_file_that_is_not_sqlite_is_a_usage_error(tmp_path, sandbox):
    bogus = tmp_path / "notes.sqlite"
    bogus.write_text("this is not a database, just some text " * 20)
    with pytest.raises(UsageError, match="cannot read the schema of .*notes.sqlite"):
        schema_text(bogus, sandbox)


def test_prompt_user_turn_holds_schema_question_and_sql_block_instruction():
    schema = "CREATE TABLE pet (id INTEGER, name TEXT);"
    messages = build_messages("Which pets are called Rex?", schema)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == SYSTEM_PROMPT
    user = messages[1]["content"]
    assert user.startswith(schema)
    assert "Question: Which pets are called Rex?" in user
    assert "```sql" in user
    assert "Evidence" not in user


def test_prompt_includes_evidence_only_when_given():
    with_evidence = build_messages(
        "How many old pets?", "CREATE TABLE pet (age INTEGER);", "old refers to age > 10"
    )
    assert "Evidence: old refers to age > 10\nQuestion: How many old pets?" in with_evidence[1]["content"]
    blank = build_messages("How many pets?", "CREATE TABLE pet (age INTEGER);", "   ")
    assert "Evidence" not in blank[1]["content"]


def test_prompt_template_without_question_placeholder_is_a_usage_error():
    with pytest.raises(UsageError, match=r"\{question\}"):
        build_messages("q", "schema", template="{schema} only")
    with pytest.raises(UsageError, match="evidence"):
        build_messages("q", "schema", "some evidence", template="{schema}\n{question}")


def test_format_answer_wraps_sql_in_a_sql_block():
    assert format_answer("\n SELECT 1 \n") == "```sql\nSELECT 1\n```"


def test_prompt_config_applies_its_template_and_schema_options(tmp_path, sandbox):
    db = _make_db(tmp_path / "zoo.sqlite")
    config = PromptConfig(sample_rows=0, system_prompt="", template="Q: {question}\n{schema}")
    messages = config.messages("How many zoos?", config.schema(db, sandbox))
    assert len(messages) == 1
    assert messages[0]["content"].startswith("Q: How many zoos?\nCREATE TABLE animal")
    assert "sample rows" not in messages[0]["content"]
    with pytest.raises(UsageError, match="sample_rows"):
        PromptConfig(sample_rows=-1)


def test_build_prompts_reads_each_database_schema_once_and_keeps_a_given_schema(tmp_path, sandbox, monkeypatch):
    db = _make_db(tmp_path / "zoo.sqlite")
    config = PromptConfig(sample_rows=1)
    reads = []
    real = PromptConfig.schema
    monkeypatch.setattr(PromptConfig, "schema", lambda self, path, box=None: reads.append(path) or real(self, path, box))
    rows = [
        {"question": "How many zoos?", "db_path": str(db), "evidence": None},
        {"question": "How many lions?", "db_path": str(db), "evidence": "lion is a species"},
        {"question": "Given?", "db_path": str(db), "schema": "CREATE TABLE given (x INT);"},
    ]
    cache: dict = {}
    prompts = build_prompts(rows, config, sandbox, cache)
    assert reads == [str(db)]
    assert prompts[0] == config.messages("How many zoos?", config.schema(db, sandbox))
    assert "Evidence: lion is a species" in prompts[1][-1]["content"]
    assert prompts[2][-1]["content"].startswith("CREATE TABLE given (x INT);")
    build_prompts(rows[:1], config, sandbox, cache)  # the cache is shared across calls
    assert len(reads) == 2  # only the direct config.schema call above read again
