"""Benchmark loaders: Spider (real dev data), BIRD and SynSQL layouts written by the tests, the world."""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
from pathlib import Path

import pytest

from slmsql_hub.data.benchmarks import (
    BENCHMARK_COLUMNS,
    load_benchmark,
    load_bird,
    load_spider,
    load_synsql,
    load_world,
    seeded_subset,
)
from slmsql_hub.errors import UsageError
from slmsql_hub.world import WorldSizes, build_world

SPIDER_DEV = Path(__file__).resolve().parents[1].parent / "shared/data/spider_dev"


@pytest.fixture(scope="module")
def spider_root():
    if not (SPIDER_DEV / "dev.json").is_file():
        pytest.skip(f"Spider dev data not found at {SPIDER_DEV}")
    return SPIDER_DEV


def _db(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)  # building a fixture database
    con.execute("CREATE TABLE item (item_id INTEGER PRIMARY KEY, name TEXT, price REAL)")
    con.execute("INSERT INTO item VALUES (1, 'pen', 1.5)")
    con.commit()
    con.close()


@pytest.fixture()
def bird_root(tmp_path):
    for db in ("shop", "school"):
        _db(tmp_path / "dev_databases" / db / f"{db}.sqlite")
    questions = [
        {
            "question_id": 10 + i,
            "db_id": db,
            "question": f"Question {i}?",
            "evidence": f"hint {i}" if i % 2 else "",
            "SQL": f"SELECT name FROM item WHERE item_id = {i}",
            "difficulty": ("simple", "moderate", "challenging")[i % 3],
        }
        for i, db in enumerate(["shop", "school", "shop", "school", "shop", "shop"])
    ]
    (tmp_path / "dev.json").write_text(json.dumps(questions))
    return tmp_path


@pytest.mark.spider
def test_spider_dev_refuses_questions_on_a_missing_database_by_default(spider_root):
    with pytest.raises(
        UsageError, match=r"62 questions use missing database files .*wta_1\.sqlite.*skip_missing_db"
    ):
        load_spider(spider_root)


@pytest.mark.spider
def test_spider_dev_skips_missing_databases_with_a_logged_count(spider_root, caplog):
    with caplog.at_level(logging.WARNING, logger="slmsql_hub.data.benchmarks"):
        data = load_spider(spider_root, skip_missing_db=True)
    assert "skipping 62 of 1034 questions" in caplog.text and "wta_1" in caplog.text
    assert len(data) == 972 and list(data.column_names) == list(BENCHMARK_COLUMNS)
    assert "wta_1" not in set(data["db_id"])
    assert all(Path(p).is_absolute() and Path(p).is_file() for p in set(data["db_path"]))
    assert set(data["benchmark"]) == {"spider"} and set(data["evidence"]) == {""}
    assert set(data["difficulty"]) <= {"easy", "medium", "hard", "extra", ""}
    assert sum(1 for d in data["difficulty"] if d) >= 0.95 * len(data)
    gold_lines = (spider_root / "dev_gold.sql").read_text().splitlines()
    assert data[0]["gold_sql"].strip() == gold_lines[0].split("\t")[0].strip()


@pytest.mark.spider
def test_spider_limit_draws_the_same_subset_for_the_same_seed(spider_root):
    first = load_spider(spider_root, limit=200, seed=3, skip_missing_db=True)
    again = load_spider(spider_root, limit=200, seed=3, skip_missing_db=True)
    other = load_spider(spider_root, limit=200, seed=4, skip_missing_db=True)
    assert len(first) == 200 and first["question_id"] == again["question_id"]
    assert first["question_id"] != other["question_id"]
    positions = [int(q.rsplit("-", 1)[1]) for q in first["question_id"]]
    assert positions == sorted(positions)  # the subset keeps file order


def test_bird_loader_keeps_evidence_difficulty_and_ids(bird_root):
    data = load_bird(bird_root)
    assert list(data.column_names) == list(BENCHMARK_COLUMNS)
    assert data["question_id"][:2] == ["bird-dev-10", "bird-dev-11"]
    assert data["evidence"][:2] == ["", "hint 1"]
    assert data["difficulty"][:3] == ["simple", "moderate", "challenging"]
    assert data[1]["db_path"] == str((bird_root / "dev_databases/school/school.sqlite").resolve())
    assert set(data["benchmark"]) == {"bird"}


def test_bird_release_root_serves_train_and_dev_from_their_subfolders(tmp_path):
    """The release unpacks to train/train.json + train/train_databases/ and dev/dev.json + dev/dev_databases/:
    ``bird=<release root>`` (the recipes' README) reads either split; train rows have no question_id."""
    from _benchmark_layouts import build_bird

    root = build_bird(tmp_path / "bird")
    train, dev = load_bird(root, "train"), load_bird(root, "dev")
    assert len(train) == len(dev) == 4
    assert train["question_id"][:2] == ["bird-train-0", "bird-train-1"] and set(train["difficulty"]) == {""}
    assert Path(train[0]["db_path"]) == (root / "train/train_databases/bird_train/bird_train.sqlite").resolve()
    assert Path(dev[0]["db_path"]) == (root / "dev/dev_databases/bird_dev/bird_dev.sqlite").resolve()
    assert load_benchmark("bird", root / "dev", "dev")["question_id"] == dev["question_id"]  # one split's folder


@pytest.mark.spider
def test_the_spider_fixture_has_the_real_releases_files_and_fields(spider_root, tmp_path):
    """The rehearsal's Spider fixture (tests/_benchmark_layouts.py) is laid out and keyed as the real dev set."""
    from _benchmark_layouts import build_spider

    fixture = build_spider(tmp_path / "spider")
    for name in ("dev.json", "tables.json"):
        real = json.loads((spider_root / name).read_text(encoding="utf-8"))[0]
        ours = json.loads((fixture / name).read_text(encoding="utf-8"))[0]
        assert set(ours) <= set(real), name
    assert set(json.loads((fixture / "tables.json").read_text())[0]) == set(
        json.loads((spider_root / "tables.json").read_text())[0]
    )
    for root in (spider_root, fixture):
        db = sorted((root / "database").iterdir())[0]
        assert (db / f"{db.name}.sqlite").is_file()


def test_bird_limit_gives_a_seeded_subset(bird_root):
    picked = load_bird(bird_root, limit=3, seed=1)["question_id"]
    assert len(picked) == 3 and picked == load_bird(bird_root, limit=3, seed=1)["question_id"]
    assert len(load_bird(bird_root, limit=100)) == 6


def test_bird_missing_database_names_the_file_or_is_skipped(bird_root, caplog):
    shutil.rmtree(bird_root / "dev_databases" / "school")
    with pytest.raises(UsageError, match=r"2 questions use missing database files \(.*school\.sqlite\)"):
        load_bird(bird_root)
    with caplog.at_level(logging.WARNING):
        data = load_bird(bird_root, skip_missing_db=True)
    assert set(data["db_id"]) == {"shop"} and len(data) == 4
    assert "skipping 2 of 6 questions" in caplog.text


def test_malformed_json_is_one_usage_error_naming_the_file(bird_root):
    (bird_root / "dev.json").write_text('[{"question": "broken"')
    with pytest.raises(UsageError, match=r"malformed JSON in .*dev\.json: .* line 1"):
        load_bird(bird_root)
    (bird_root / "dev.json").write_text('{"not": "a list"}')
    with pytest.raises(UsageError, match=r"dev\.json must hold a JSON list"):
        load_bird(bird_root)
    (bird_root / "dev.json").write_text('[{"question": "no sql", "db_id": "shop"}]')
    with pytest.raises(UsageError, match=r"dev\.json: question 0 has no 'SQL' field"):
        load_bird(bird_root)


def test_missing_benchmark_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match=r"benchmark file not found: .*train\.json"):
        load_bird(tmp_path, "train")
    with pytest.raises(UsageError, match="root is not a directory"):
        load_spider(tmp_path / "nowhere")


def test_synsql_loader_maps_external_knowledge_and_complexity(tmp_path):
    _db(tmp_path / "databases" / "farm_1" / "farm_1.sqlite")
    rows = [
        {
            "db_id": "farm_1",
            "question": "Names of items?",
            "sql": "SELECT name FROM item",
            "external_knowledge": "",
            "sql_complexity": "Simple",
        },
        {
            "db_id": "farm_1",
            "question": "Cheap items?",
            "sql": "SELECT name FROM item WHERE price < 2",
            "external_knowledge": "cheap means price < 2",
            "sql_complexity": "Moderate",
        },
    ]
    (tmp_path / "data.json").write_text(json.dumps(rows))
    data = load_benchmark("synsql", tmp_path)
    assert data["question_id"] == ["synsql-0", "synsql-1"]
    assert data["evidence"] == ["", "cheap means price < 2"]
    assert data["difficulty"] == ["Simple", "Moderate"]
    assert data["gold_sql"][1] == "SELECT name FROM item WHERE price < 2"
    with pytest.raises(UsageError, match="synsql has no split .dev.; use train"):
        load_synsql(tmp_path, "dev")


def test_world_loader_repoints_database_paths_when_the_world_moves(tmp_path):
    sizes = WorldSizes(foundation=30, grounding=15, rl_pool=10, dev=20, test=20)
    built = build_world(tmp_path / "built", sizes=sizes)
    moved = tmp_path / "moved"
    shutil.copytree(built.root, moved)
    shutil.rmtree(built.root)
    data = load_benchmark("world", moved, "dev")
    assert len(data) == 20 and set(data["benchmark"]) == {"world"}
    assert all(p.startswith(str(moved.resolve())) and Path(p).is_file() for p in data["db_path"])
    # the databases keep Spider's layout: a Spider-format question file beside them loads with the Spider loader
    spider_style = [{"db_id": "library", "question": "How many books?", "query": "SELECT count(*) FROM book"}]
    (moved / "dev.json").write_text(json.dumps(spider_style))
    assert load_spider(moved)[0]["db_path"] == str((moved / "databases/library/library.sqlite").resolve())
    with pytest.raises(UsageError, match="world split 'validation' not found"):
        load_world(moved, "validation")
    with pytest.raises(UsageError, match="not an embedded world"):
        load_world(tmp_path)


def test_unknown_benchmark_lists_the_choices(tmp_path):
    with pytest.raises(UsageError, match="choose one of spider, bird, synsql, world"):
        load_benchmark("wikisql", tmp_path)


def test_seeded_subset_is_sorted_deterministic_and_bounded():
    picked = seeded_subset(1000, 149, seed=7)
    assert picked == seeded_subset(1000, 149, seed=7) and picked == sorted(picked)
    assert len(set(picked)) == 149 and picked != seeded_subset(1000, 149, seed=8)
    assert seeded_subset(5, 10) == [0, 1, 2, 3, 4]
    with pytest.raises(UsageError):
        seeded_subset(5, -1)
