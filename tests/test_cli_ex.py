"""`slmsql ex`: every input format, the printed report, --out, and one clear line + exit 2 for bad input."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _helpers import shop_db

from slmsql_hub.cli import main

GOLD = [
    "SELECT count(*) FROM item",
    "SELECT name FROM item WHERE price > 2 ORDER BY price",
    "SELECT shelf, count(*) FROM item GROUP BY shelf",
]
PRED = [
    "SELECT count(*) FROM item",  # correct
    "SELECT name FROM item ORDER BY price",  # wrong
    "SELECT shelf, count(*) FROM itm GROUP BY shelf",  # does not run
]


@pytest.fixture(scope="module")
def db_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("databases")
    shop_db(root / "shop" / "shop.sqlite")
    return root


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def spider_files(folder: Path, preds=PRED, gold=GOLD, db_id="shop"):
    pred = write(folder / "pred.txt", "".join(p + "\n" for p in preds))
    gold_file = write(folder / "gold.sql", "".join(f"{g}\t{db_id}\n" for g in gold))
    return pred, gold_file


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def run_ex(*args) -> int:
    return main(["ex", *map(str, args), "--workers", "1"])


def test_spider_format_prints_ex_with_a_hardness_table_and_writes_out(tmp_path, db_root, capsys):
    pred, gold = spider_files(tmp_path)
    out = tmp_path / "runs" / "per_example.jsonl"
    assert run_ex("--pred", pred, "--gold", gold, "--db-root", db_root, "--out", out) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("EX 33.33% (1 of 3 scorable; 3 examples, 0 unscorable) [mode bird]")
    table = printed.splitlines()[2:]
    assert table[0].split() == ["easy", "medium", "all"]
    assert table[1].split() == ["count", "1", "2", "3"]
    assert table[3].split() == ["EX", "(%)", "100.00", "0.00", "33.33"]

    rows = read_jsonl(out)
    assert [r["index"] for r in rows] == [0, 1, 2]
    assert [(r["verdict"], r["correct"]) for r in rows] == [("correct", 1), ("wrong", 0), ("pred_error", 0)]
    assert rows[2]["pred_status"] == "error" and "itm" in rows[2]["error"]
    assert rows[1] | {"error": None} == {
        "index": 1,
        "db_id": "shop",
        "db_path": str(db_root / "shop" / "shop.sqlite"),
        "prediction": PRED[1],
        "gold": GOLD[1],
        "correct": 0,
        "verdict": "wrong",
        "pred_sql": PRED[1],
        "pred_status": "ok",
        "gold_status": "ok",
        "error": None,
        "hardness": "medium",
    }


def test_spider_mode_with_and_without_distinct(tmp_path, db_root, capsys):
    pred, gold = spider_files(tmp_path, ["SELECT shelf FROM item"], ["SELECT DISTINCT shelf FROM item"])
    out = tmp_path / "out.jsonl"
    assert run_ex("--pred", pred, "--gold", gold, "--db-root", db_root, "--mode", "spider", "--out", out) == 0
    assert read_jsonl(out)[0]["verdict"] == "correct"
    assert "[mode spider]" in capsys.readouterr().out
    args = ("--pred", pred, "--gold", gold, "--db-root", db_root, "--mode", "spider", "--keep-distinct")
    assert run_ex(*args, "--out", out, "--overwrite") == 0  # a verdict file is replaced only when asked
    assert read_jsonl(out)[0]["verdict"] == "wrong"
    assert "keep DISTINCT" in capsys.readouterr().out


def test_bird_format_with_difficulties_breaks_down_by_difficulty(tmp_path, db_root, capsys):
    sep = "\t----- bird -----\t"
    pred = write(
        tmp_path / "predict_dev.json", json.dumps({str(i): p + sep + "shop" for i, p in enumerate(PRED)})
    )
    gold = write(tmp_path / "dev.sql", "".join(f"{g}\tshop\n" for g in GOLD))
    dev = write(
        tmp_path / "dev.json", json.dumps([{"difficulty": d} for d in ("simple", "challenging", "simple")])
    )
    out = tmp_path / "out.jsonl"
    assert (
        run_ex("--pred", pred, "--gold", gold, "--db-root", db_root, "--difficulty", dev, "--out", out) == 0
    )
    table = capsys.readouterr().out.splitlines()[2:]
    assert table[0].split() == ["simple", "challenging", "all"]
    assert table[3].split() == ["EX", "(%)", "50.00", "0.00", "33.33"]
    assert [r["difficulty"] for r in read_jsonl(out)] == ["simple", "challenging", "simple"]


def test_jsonl_format_extracts_sql_from_model_output_and_resolves_db_paths(
    tmp_path, db_root, monkeypatch, capsys
):
    shutil.copy(db_root / "shop" / "shop.sqlite", tmp_path / "local.sqlite")
    rows = [
        {
            "prediction": "Sure:\n```sql\nSELECT count(*) FROM item\n```",
            "gold_sql": GOLD[0],
            "db_path": "local.sqlite",
        },
        {
            "prediction": "I am not sure.",
            "gold_sql": GOLD[0],
            "db_path": "shop/shop.sqlite",
            "difficulty": "hard",
        },
        {"prediction": "SELECT count(*) FROM item", "gold_sql": "SELECT nope FROM item", "db_id": "shop"},
    ]
    pred = write(tmp_path / "preds.txt", "".join(json.dumps(r) + "\n" for r in rows))  # detected by content
    monkeypatch.chdir(tmp_path)
    assert run_ex("--pred", pred.name, "--db-root", db_root, "--out", "out.jsonl") == 0
    assert capsys.readouterr().out.startswith("EX 50.00% (1 of 2 scorable; 3 examples, 1 unscorable)")
    out = read_jsonl(tmp_path / "out.jsonl")
    assert [r["verdict"] for r in out] == ["correct", "no_sql", "unscorable"]
    assert [r["correct"] for r in out] == [1, 0, None]
    assert out[0]["pred_sql"] == "SELECT count(*) FROM item"
    assert Path(out[0]["db_path"]).resolve() == (tmp_path / "local.sqlite").resolve()
    assert [r["difficulty"] for r in out] == ["unknown", "hard", "unknown"]


def test_format_flag_overrides_detection(tmp_path, db_root, capsys):
    pred = write(tmp_path / "pred.json", PRED[0] + "\n")  # named .json but one SQL per line
    gold = write(tmp_path / "gold.sql", f"{GOLD[0]}\tshop\n")
    assert run_ex("--pred", pred, "--gold", gold, "--db-root", db_root) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert run_ex("--pred", pred, "--gold", gold, "--db-root", db_root, "--format", "spider") == 0
    assert capsys.readouterr().out.startswith("EX 100.00%")


def assert_one_line_error(capsys, *fragments):
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("slmsql ex: error: ")
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def test_missing_prediction_and_gold_files_exit_2_naming_the_file(tmp_path, db_root, capsys):
    pred, gold = spider_files(tmp_path)
    assert run_ex("--pred", tmp_path / "nope.txt", "--gold", gold, "--db-root", db_root) == 2
    assert_one_line_error(capsys, "predictions file not found", "nope.txt")
    assert run_ex("--pred", pred, "--gold", tmp_path / "gold_missing.sql", "--db-root", db_root) == 2
    assert_one_line_error(capsys, "gold file not found", "gold_missing.sql")


def test_missing_database_is_reported_before_anything_runs(tmp_path, db_root, capsys):
    pred, gold = spider_files(tmp_path, db_id="wta_1")
    out = tmp_path / "out.jsonl"
    assert run_ex("--pred", pred, "--gold", gold, "--db-root", db_root, "--out", out) == 2
    assert_one_line_error(capsys, "database 'wta_1'", str(db_root / "wta_1" / "wta_1.sqlite"))
    assert not out.exists()


def test_length_mismatch_exits_2_with_both_counts(tmp_path, db_root, capsys):
    pred, gold = spider_files(tmp_path, preds=PRED[:2])
    assert run_ex("--pred", pred, "--gold", gold, "--db-root", db_root) == 2
    assert_one_line_error(capsys, "has 2 entries", "has 3")


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--keep-distinct"], "--keep-distinct only applies to --mode spider; remove it"),
        (["--timeout", "0"], "argument --timeout: must be > 0"),
        (["--workers", "0"], "argument --workers: must be >= 1"),
    ],
)
def test_bad_options_exit_2(tmp_path, db_root, capsys, extra, fragment):
    pred, gold = spider_files(tmp_path)
    assert main(["ex", "--pred", str(pred), "--gold", str(gold), "--db-root", str(db_root), *extra]) == 2
    assert_one_line_error(capsys, fragment)


def test_malformed_gold_line_names_file_and_line(tmp_path, db_root, capsys):
    pred = write(tmp_path / "pred.txt", "SELECT 1\nSELECT 2\n")
    gold = write(tmp_path / "gold.sql", "SELECT 1\tshop\nSELECT 2 no tab here\n")
    assert run_ex("--pred", pred, "--gold", gold, "--db-root", db_root) == 2
    assert_one_line_error(capsys, "gold.sql, line 2")


def test_out_that_is_a_folder_and_db_root_that_is_missing_are_rejected(tmp_path, db_root, capsys):
    pred, gold = spider_files(tmp_path)
    assert run_ex("--pred", pred, "--gold", gold, "--db-root", db_root, "--out", tmp_path) == 2
    assert_one_line_error(capsys, "is a folder")
    assert run_ex("--pred", pred, "--gold", gold, "--db-root", tmp_path / "no_such_dir") == 2
    assert_one_line_error(capsys, "--db-root", "is not a folder")


def test_all_unscorable_exits_2_after_writing_out(tmp_path, db_root, capsys):
    pred, gold = spider_files(tmp_path, preds=["SELECT 1"], gold=["SELECT missing FROM item"])
    out = tmp_path / "out.jsonl"
    assert run_ex("--pred", pred, "--gold", gold, "--db-root", db_root, "--out", out) == 2
    captured = capsys.readouterr()
    assert "EX n/a" in captured.out
    assert (
        captured.err.strip()
        .splitlines()[-1]
        .startswith("slmsql ex: error: none of the 1 questions could be scored")
    )
    assert read_jsonl(out)[0]["verdict"] == "unscorable"


def test_console_script_error_is_one_line_without_traceback(tmp_path, db_root):
    slmsql = shutil.which("slmsql", path=str(Path(sys.executable).parent))
    assert slmsql is not None, "the slmsql console script is not installed (pip install -e .)"
    pred, gold = spider_files(tmp_path, db_id="absent_db")
    run = subprocess.run(
        [slmsql, "ex", "--pred", pred, "--gold", gold, "--db-root", db_root], capture_output=True, text=True
    )
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        f"slmsql ex: error: database 'absent_db' (question 0) not found: expected "
        f"{db_root / 'absent_db' / 'absent_db.sqlite'}; check --db-root"
    ]
    assert run.stdout == ""
