"""Tiny benchmarks in the real on-disk layouts of SynSQL-2.5M, BIRD and Spider, and a tiny policy that answers them.

The layouts are the releases' own (only far smaller), so a recipe that reads them here reads the real files the
same way:

- SynSQL-2.5M: ``data.json``, ``tables.json``, ``databases/<db>/<db>.sqlite``;
- BIRD: ``train/train.json`` + ``train/train_databases/<db>/<db>.sqlite`` and ``dev/dev.json`` +
  ``dev/dev_databases/<db>/<db>.sqlite`` (train rows have no ``question_id`` or ``difficulty``, as in the release);
- Spider: ``train_spider.json``, ``train_others.json``, ``dev.json``, ``tables.json``, ``database/<db>/<db>.sqlite``.

Every database holds ``t(x)`` with the rows 1, 2, 3, 4, 10, and every question asks for ``count(*)`` or
``max(x)``. :func:`save_tiny_policy` trains the tiny Qwen2 of :mod:`_tiny_model` to answer each of these prompts
(built as the Qwen recipes build them: 3 sample rows per table) with one of two SQL blocks, about half right and
half wrong: the pass-rate filter then finds a band and GRPO sees reward variance, on any of the benchmarks.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

QUESTIONS = (
    ("How many rows does t have?", "SELECT count(*) FROM t"),
    ("What is the largest x in t?", "SELECT max(x) FROM t"),
    ("Count the rows of t.", "SELECT count(*) FROM t"),
    ("Give the biggest value of x.", "SELECT max(x) FROM t"),
)
ANSWERS = ("```sql\nSELECT count(*) FROM t\n```<|im_end|>", "```sql\nSELECT max(x) FROM t\n```<|im_end|>")
EVIDENCE = "x is a number"


def nums_database(path: Path) -> Path:
    """The one-table database every question here asks about: ``t(x)`` with 1, 2, 3, 4, 10 (count 5, max 10).
    Returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:  # test fixture: builds the database
        conn.execute("CREATE TABLE t (x INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?)", [(1,), (2,), (3,), (4,), (10,)])
    conn.close()
    return path


def _tables_json(db_ids: list[str]) -> list[dict]:
    """Spider's ``tables.json`` shape (also SynSQL's), for the one-table databases."""
    return [
        {
            "db_id": db,
            "table_names_original": ["t"],
            "table_names": ["t"],
            "column_names_original": [[-1, "*"], [0, "x"]],
            "column_names": [[-1, "*"], [0, "x"]],
            "column_types": ["text", "number"],
            "primary_keys": [],
            "foreign_keys": [],
        }
        for db in db_ids
    ]


def _write(path: Path, payload) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1), encoding="utf-8")


def build_synsql(root: Path) -> Path:
    """SynSQL-2.5M's layout with 16 questions over 4 databases (SFT takes some, the filter draws from the rest)."""
    dbs = ["synsql_a", "synsql_b", "synsql_c", "synsql_d"]
    for db in dbs:
        nums_database(root / "databases" / db / f"{db}.sqlite")
    rows = [
        {
            "db_id": db,
            "sql_complexity": "Simple",
            "question_style": "Formal",
            "question": question,
            "external_knowledge": EVIDENCE if n % 2 else "",
            "cot": "",
            "sql": sql,
        }
        for db in dbs
        for n, (question, sql) in enumerate(QUESTIONS)
    ]
    _write(root / "data.json", rows)
    _write(root / "tables.json", _tables_json(dbs))
    return root


def build_bird(root: Path) -> Path:
    """BIRD's layout: ``train/`` (4 questions, no ids) and ``dev/`` (4 questions with ids and difficulty)."""
    for split, db in (("train", "bird_train"), ("dev", "bird_dev")):
        nums_database(root / split / f"{split}_databases" / db / f"{db}.sqlite")
        rows = []
        for n, (question, sql) in enumerate(QUESTIONS):
            row = {"db_id": db, "question": question, "evidence": EVIDENCE, "SQL": sql}
            if split == "dev":
                row = {"question_id": n, **row, "difficulty": ("simple", "moderate")[n % 2]}
            rows.append(row)
        _write(root / split / f"{split}.json", rows)
        _write(root / split / f"{split}_tables.json", _tables_json([db]))
    return root


def build_spider(root: Path) -> Path:
    """Spider's layout: ``train_spider.json`` + ``train_others.json`` (train) and ``dev.json``."""
    files = {"train_spider.json": "spider_a", "train_others.json": "spider_b", "dev.json": "spider_dev"}
    for name, db in files.items():
        nums_database(root / "database" / db / f"{db}.sqlite")
        rows = [
            {"db_id": db, "query": sql, "question": question, "query_toks": sql.split()}
            for question, sql in QUESTIONS[:2]
        ]
        _write(root / name, rows)
    _write(root / "tables.json", _tables_json(list(files.values())))
    return root


def build_benchmarks(root: Path) -> dict[str, Path]:
    """All three benchmarks under ``root``: ``{"synsql": ..., "bird": ..., "spider": ...}``."""
    return {
        "synsql": build_synsql(root / "synsql"),
        "bird": build_bird(root / "bird"),
        "spider": build_spider(root / "spider"),
    }


def save_tiny_policy(path: Path, benchmarks: dict[str, Path], steps: int = 60) -> Path:
    """Train the tiny Qwen2 to answer every fixture prompt with one of :data:`ANSWERS`; save model + tokenizer.

    The prompts are the recipes' (3 sample rows per table, 40 characters per value), with and without evidence.
    """
    from _tiny_model import build_model, build_tokenizer, train_to_answer

    from slmsql_hub.data.prompts import PromptConfig

    config = PromptConfig(sample_rows=3, max_value_chars=40)
    databases = sorted(p for root in benchmarks.values() for p in root.rglob("*.sqlite"))
    schema = config.schema(databases[0])  # every fixture database has the same schema and rows
    assert all(config.schema(db) == schema for db in databases[1:])
    pairs = [
        (config.messages(question, schema, evidence), answer)
        for question, _ in QUESTIONS
        for evidence in ("", EVIDENCE)
        for answer in ANSWERS
    ]
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, hidden_size=32, max_position_embeddings=1024)
    train_to_answer(model, tokenizer, pairs, steps=steps)
    model.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path
