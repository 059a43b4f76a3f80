"""The demo of a Spider or BIRD run compares on the run's own databases (issue #35): ``slmsql push`` ships the
evaluated questions' databases in a dataset repository the Space reads at a pinned commit, the run's SFT/GRPO
disagreements first among the examples, under a size cap; ``spaces/demo/app.py --run-dir`` does the same locally."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from _helpers import REPO, TESTS, music_spider

from slmsql_hub import hub
from slmsql_hub.hub.demo import BENCHMARK_DATA, benchmark_files

sys.path.insert(0, str(REPO / "spaces" / "demo"))
from space_backend import SpaceSettings, load_space_data  # noqa: E402

QUESTIONS = [("How many singers?", "SELECT count(*) FROM singer"), ("Oldest age?", "SELECT max(age) FROM singer"),
             ("Youngest?", "SELECT min(age) FROM singer")]  # fmt: skip


def spider_run(root: Path) -> Path:
    """The fixture run, evaluated on a one-database Spider slice too: question 1 (``Oldest age?``) is the one
    where SFT and GRPO disagree."""
    run = root / "run"
    shutil.copytree(TESTS / "fixtures" / "run", run)
    spider = music_spider(root / "spider", QUESTIONS)
    results = json.loads((run / "eval" / "eval_results.json").read_text())
    results["config"]["spider_root"] = str(spider)
    results["benchmarks"]["spider_dev"] = {
        **results["benchmarks"]["world_dev"], "benchmark": "spider", "split": "dev",
        "predictions_file": "predictions/spider_dev.jsonl",
    }  # fmt: skip
    (run / "eval" / "eval_results.json").write_text(json.dumps(results))
    rows = [
        {"question_id": f"spider-dev-{i}", "db_id": "music", "question": q, "gold_sql": gold,
         "sft_correct": 1, "grpo_correct": 0 if i == 1 else 1}
        for i, (q, gold) in enumerate(QUESTIONS)
    ]  # fmt: skip
    (run / "eval" / "predictions" / "spider_dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_the_demo_space_of_a_spider_run_ships_its_databases_and_disagreements_in_a_dataset_repo(tmp_path):
    run = spider_run(tmp_path)
    data, space = hub.plan_push(run, "bob/my-sql", "demo-space")  # today: the demo Space alone, the toy world
    assert (data.what, data.repo_type, data.repo_id) == ("demo-data", "dataset", "bob/my-sql-demo-data")
    files = dict(data.files)
    assert files["database/music/music.sqlite"] == tmp_path / "spider" / "database" / "music" / "music.sqlite"
    examples = json.loads(files["dev.json"])
    assert [e["question"] for e in examples] == ["Oldest age?", "How many singers?", "Youngest?"]  # disagreement first
    config = json.loads(dict(space.files)["space_config.json"])
    assert config[BENCHMARK_DATA] == {"repo_id": "bob/my-sql-demo-data", "revision": "main", "repo_type": "dataset"}


def test_a_database_over_the_cap_is_left_out_and_the_demo_falls_back_to_the_world(tmp_path, caplog):
    run = spider_run(tmp_path)
    assert benchmark_files(run, cap_bytes=1) == {}  # music.sqlite is larger than one byte
    assert "database music" in caplog.text and "left out" in caplog.text


def test_the_local_space_on_a_spider_run_lists_its_databases_and_disagreements(tmp_path):
    run = spider_run(tmp_path)
    data = load_space_data(SpaceSettings(run_dir=str(run), cache_dir=str(tmp_path / "cache")))
    assert "spider/music" in data.databases  # today: only the world's databases
    assert [e.question for e in data.examples["spider/music"]][0] == "Oldest age?"


def test_a_benchmark_rooted_by_benchmark_roots_ships_its_databases_too(tmp_path):
    """BIRD mini-dev has no ``<name>_root`` field: its root is the eval config's ``benchmark_roots`` entry."""
    run = spider_run(tmp_path)
    minidev = tmp_path / "minidev"
    (minidev / "dev_databases" / "music").mkdir(parents=True)
    shutil.copy(tmp_path / "spider" / "database" / "music" / "music.sqlite", minidev / "dev_databases" / "music")
    questions = [{"question_id": i, "question": q, "evidence": "", "SQL": gold, "db_id": "music",
                  "difficulty": "simple"} for i, (q, gold) in enumerate(QUESTIONS)]  # fmt: skip
    (minidev / "mini_dev_sqlite.json").write_text(json.dumps(questions))
    results = json.loads((run / "eval" / "eval_results.json").read_text())
    results["config"] |= {"spider_root": None, "benchmark_roots": [f"bird_mini_dev={minidev}"]}
    results["benchmarks"] = {"world_dev": results["benchmarks"]["world_dev"], "bird_mini_dev_dev": {
        **results["benchmarks"]["spider_dev"], "benchmark": "bird_mini_dev", "predictions_file": "predictions/m.jsonl"}}
    (run / "eval" / "eval_results.json").write_text(json.dumps(results))
    rows = (run / "eval" / "predictions" / "spider_dev.jsonl").read_text().replace("spider-dev-", "bird_mini_dev-")
    (run / "eval" / "predictions" / "m.jsonl").write_text(rows)
    files = benchmark_files(run)
    assert files["database/music/music.sqlite"] == minidev / "dev_databases" / "music" / "music.sqlite"
    assert [e["question"] for e in json.loads(files["dev.json"])][0] == "Oldest age?"
