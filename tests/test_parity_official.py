"""Per-question parity with the official evaluators on Spider dev: the slmsql/ex metric and `slmsql ex` must
give exactly the official verdict on each of the 972 scorable questions, for four published prediction sets,
under the BIRD rule, the Spider test-suite rule, and the Spider rule with --keep_distinct."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import evaluate
import pytest

from slmsql_hub.cli import main
from slmsql_hub.metric import METRIC_SCRIPT
from slmsql_hub.sql import Limits, Sandbox

pytestmark = pytest.mark.spider

SPIDER = Path(__file__).resolve().parents[1].parent / "shared/data/spider_dev"
SETTINGS = {  # verdict key -> (mode, keep_distinct)
    "bird": ("bird", False),
    "spider": ("spider", False),
    "spider_keep_distinct": ("spider", True),
}


def verdict_files() -> list[Path]:
    return sorted((SPIDER / "verdicts").glob("*.jsonl")) if SPIDER.is_dir() else []


@pytest.fixture(scope="module")
def spider():
    if not (SPIDER / "dev_gold.sql").is_file():
        pytest.skip(f"Spider dev data not found at {SPIDER}")
    gold = [
        line.rsplit("\t", 1) for line in (SPIDER / "dev_gold.sql").read_text(encoding="utf-8").splitlines()
    ]
    return gold


@pytest.fixture(scope="module")
def official(spider):
    """name -> (official verdict rows, predictions of those rows)."""
    loaded = {}
    for path in verdict_files():
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        preds = (SPIDER / "preds" / f"{path.stem}.txt").read_text(encoding="utf-8").splitlines()
        loaded[path.stem] = (rows, [preds[row["index"]] for row in rows])
    assert loaded, f"no verdict files in {SPIDER / 'verdicts'}"
    return loaded


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(Limits(timeout_s=30)) as box:
        yield box


@pytest.fixture(scope="module")
def ex():
    return evaluate.load(str(METRIC_SCRIPT), keep_in_memory=True)


def mismatches(rows, key, got):
    return [(row["index"], row[key], g) for row, g in zip(rows, got) if row[key] != g]


def test_official_verdicts_cover_the_972_scorable_questions(official, spider):
    for rows, _ in official.values():
        assert len(rows) == 972
        assert all(spider[row["index"]][1] == row["db_id"] != "wta_1" for row in rows)


@pytest.mark.parametrize("key", list(SETTINGS))
def test_metric_matches_official_verdicts_question_by_question(official, spider, sandbox, ex, key):
    mode, keep_distinct = SETTINGS[key]
    for name, (rows, preds) in official.items():
        golds = [spider[row["index"]] for row in rows]
        results = ex.compute(
            predictions=preds,
            references=[sql for sql, _ in golds],
            db_path=[str(SPIDER / "database" / db / f"{db}.sqlite") for _, db in golds],
            mode=mode,
            keep_distinct=keep_distinct,
            return_details=True,
            sandbox=sandbox,
        )
        assert results["num_scored"] == 972, name
        got = [detail["correct"] for detail in results["details"]]
        assert mismatches(rows, key, got) == [], name
        assert results["execution_accuracy"] == pytest.approx(sum(row[key] for row in rows) / 972)


def write_slice(folder: Path, spider, rows, preds) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    pred = folder / "pred.txt"
    gold = folder / "gold.sql"
    pred.write_text("".join(p + "\n" for p in preds), encoding="utf-8")
    gold.write_text("".join("\t".join(spider[row["index"]]) + "\n" for row in rows), encoding="utf-8")
    return pred, gold


@pytest.mark.parametrize("key", list(SETTINGS))
def test_cli_matches_official_verdicts_question_by_question(official, spider, tmp_path, key, capsys):
    mode, keep_distinct = SETTINGS[key]
    for name, (rows, preds) in official.items():
        pred, gold = write_slice(tmp_path / name, spider, rows, preds)
        out = tmp_path / name / f"{key}.jsonl"
        argv = ["ex", "--pred", str(pred), "--gold", str(gold), "--db-root", str(SPIDER / "database")]
        argv += ["--mode", mode, "--out", str(out)] + (["--keep-distinct"] if keep_distinct else [])
        assert main(argv) == 0, capsys.readouterr().err
        expected_ex = 100 * sum(row[key] for row in rows) / 972
        assert capsys.readouterr().out.startswith(f"EX {expected_ex:.2f}% (")
        per_question = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
        assert mismatches(rows, key, [q["correct"] for q in per_question]) == [], name


def test_console_script_matches_official_verdicts_on_a_slice(official, spider, tmp_path):
    slmsql = shutil.which("slmsql", path=str(Path(sys.executable).parent))
    assert slmsql is not None, "the slmsql console script is not installed (pip install -e .)"
    rows, preds = official["spider_repo_pred_example_dev"]  # the weakest system: the most wrong answers
    rows, preds = rows[::10], preds[::10]
    pred, gold = write_slice(tmp_path, spider, rows, preds)
    out = tmp_path / "out.jsonl"
    argv = [slmsql, "ex", "--pred", pred, "--gold", gold, "--db-root", SPIDER / "database"]
    run = subprocess.run(
        [*map(str, argv), "--mode", "spider", "--out", str(out)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-2000:]
    per_question = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(per_question) == len(rows) == 98
    assert mismatches(rows, "spider", [q["correct"] for q in per_question]) == []
    assert any(row["spider"] == 0 for row in rows) and any(row["spider"] == 1 for row in rows)
