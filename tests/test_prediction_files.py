"""Readers for prediction and gold files: aligned records, format detection, one clear error per problem."""

import json

import pytest

from slmsql_hub.data.prediction_files import (
    PredictionRecord,
    detect_format,
    load_prediction_records,
    read_bird_predictions,
    read_difficulties,
    read_gold_file,
    read_jsonl_records,
    read_spider_predictions,
    resolve_db_paths,
)
from slmsql_hub.errors import UsageError


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_spider_predictions_keep_alignment_through_blank_lines_and_ignore_text_after_tab(tmp_path):
    path = write(tmp_path / "pred.txt", "SELECT 1\n\n  SELECT 2  \tconcert_singer\nSELECT 3\n\n\n")
    assert read_spider_predictions(path) == ["SELECT 1", "", "SELECT 2", "SELECT 3"]


def test_gold_file_splits_on_the_last_tab(tmp_path):
    path = write(tmp_path / "gold.sql", "SELECT 'a\tb' FROM t\tdb_one\r\nSELECT 2\tdb_two\n")
    assert read_gold_file(path) == [("SELECT 'a\tb' FROM t", "db_one"), ("SELECT 2", "db_two")]


def test_gold_line_without_db_id_names_file_and_line(tmp_path):
    path = write(tmp_path / "gold.sql", "SELECT 1\tdb\nSELECT 2\n")
    with pytest.raises(UsageError, match=r"gold\.sql, line 2: expected 'SQL<TAB>db_id'"):
        read_gold_file(path)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(UsageError, match="predictions file not found: .*nope.txt"):
        read_spider_predictions(tmp_path / "nope.txt")


def test_file_that_is_not_utf8_is_a_usage_error(tmp_path):
    path = tmp_path / "pred.txt"
    path.write_bytes(b"SELECT '\xff\xfe'\n")
    with pytest.raises(UsageError, match="not UTF-8"):
        read_spider_predictions(path)


def test_bird_predictions_are_ordered_by_index_and_split_on_the_separator(tmp_path):
    data = {
        "1": "SELECT 2\t----- bird -----\tcard_games",
        "0": "SELECT 1\t----- bird -----\tfinancial",
        "2": None,
    }
    path = write(tmp_path / "predict_dev.json", json.dumps(data))
    assert read_bird_predictions(path) == [("SELECT 1", "financial"), ("SELECT 2", "card_games"), ("", None)]


def test_bird_predictions_with_a_gap_in_the_indices_are_rejected(tmp_path):
    path = write(tmp_path / "predict_dev.json", json.dumps({"0": "SELECT 1", "2": "SELECT 2"}))
    with pytest.raises(UsageError, match=r"indices must run 0\.\.1 without gaps; missing \[1\]"):
        read_bird_predictions(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ('["SELECT 1"]', "expected a JSON object"),
        ('{"a": "x"}', "'a' is not"),
    ],
)
def test_malformed_bird_predictions_name_the_problem(tmp_path, text, message):
    path = write(tmp_path / "predict_dev.json", text)
    with pytest.raises(UsageError, match=message):
        read_bird_predictions(path)


def test_difficulties_from_jsonl_and_from_a_bird_dev_json_list(tmp_path):
    jsonl = write(tmp_path / "d.jsonl", '{"difficulty": "Simple"}\n{"difficulty": null}\n{"x": 1}\n')
    listed = write(tmp_path / "dev.json", json.dumps([{"question_id": 0, "difficulty": "challenging"}]))
    assert read_difficulties(jsonl) == ["simple", None, None]
    assert read_difficulties(listed) == ["challenging"]


def test_difficulty_line_that_is_not_an_object_names_the_line(tmp_path):
    path = write(tmp_path / "d.jsonl", '{"difficulty": "simple"}\n"moderate"\n')
    with pytest.raises(UsageError, match=r"d\.jsonl, line 2: expected an object"):
        read_difficulties(path)


def test_jsonl_records_carry_db_path_db_id_and_difficulty(tmp_path):
    rows = [
        {"prediction": "```sql\nSELECT 1\n```", "gold_sql": "SELECT 1", "db_path": "a/a.sqlite"},
        {"prediction": None, "gold_sql": "SELECT 2", "db_id": "b", "difficulty": "Moderate"},
    ]
    path = write(tmp_path / "p.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    records = read_jsonl_records(path)
    assert records == [
        PredictionRecord(0, "```sql\nSELECT 1\n```", "SELECT 1", None, "a/a.sqlite", None),
        PredictionRecord(1, "", "SELECT 2", "b", None, "moderate"),
    ]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"gold_sql": "SELECT 1", "db_id": "a"}, "missing 'prediction'"),
        ({"prediction": "SELECT 1", "gold_sql": "SELECT 1"}, "needs 'db_id' or 'db_path'"),
        ({"prediction": 3, "gold_sql": "SELECT 1", "db_id": "a"}, "'prediction' must be a string"),
        ({"prediction": "x", "gold_sql": " ", "db_id": "a"}, "'gold_sql' must be a non-empty string"),
        (["not", "an", "object"], "expected a JSON object"),
    ],
)
def test_bad_jsonl_line_names_file_line_and_field(tmp_path, row, message):
    good = {"prediction": "SELECT 1", "gold_sql": "SELECT 1", "db_id": "a"}
    path = write(tmp_path / "p.jsonl", json.dumps(good) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(UsageError, match=rf"p\.jsonl, line 2: {message}"):
        read_jsonl_records(path)


def test_format_detection_by_extension_then_content(tmp_path):
    jsonl_as_txt = write(
        tmp_path / "a.txt", json.dumps({"prediction": "x", "gold_sql": "y", "db_id": "z"}) + "\n"
    )
    bird_as_txt = write(tmp_path / "b.txt", '{\n  "0": "SELECT 1"\n}\n')
    assert detect_format(write(tmp_path / "c.jsonl", "")) == "jsonl"
    assert detect_format(write(tmp_path / "d.json", "{}")) == "bird"
    assert detect_format(write(tmp_path / "e.sql", "SELECT 1\n")) == "spider"
    assert detect_format(jsonl_as_txt) == "jsonl"
    assert detect_format(bird_as_txt) == "bird"


def test_prediction_and_gold_of_different_lengths_are_rejected_with_both_counts(tmp_path):
    pred = write(tmp_path / "pred.txt", "SELECT 1\nSELECT 2\n")
    gold = write(tmp_path / "gold.sql", "SELECT 1\tdb\n")
    with pytest.raises(UsageError, match=r"pred\.txt has 2 entries but .*gold\.sql has 1"):
        load_prediction_records(pred, gold)


def test_difficulty_file_of_another_length_is_rejected(tmp_path):
    pred = write(tmp_path / "pred.txt", "SELECT 1\n")
    gold = write(tmp_path / "gold.sql", "SELECT 1\tdb\n")
    diff = write(tmp_path / "d.jsonl", '{"difficulty": "simple"}\n{"difficulty": "simple"}\n')
    with pytest.raises(UsageError, match="has 1 entries but .*d.jsonl has 2"):
        load_prediction_records(pred, gold, difficulty_path=diff)


def test_explicit_format_overrides_detection(tmp_path):
    pred = write(tmp_path / "pred.json", "SELECT 1\n")  # a .json name, but one SQL per line
    gold = write(tmp_path / "gold.sql", "SELECT 1\tdb\n")
    with pytest.raises(UsageError, match="not valid JSON"):
        load_prediction_records(pred, gold)
    assert load_prediction_records(pred, gold, fmt="spider")[0].prediction == "SELECT 1"


def test_gold_file_is_required_for_spider_and_refused_for_jsonl(tmp_path):
    pred = write(tmp_path / "pred.txt", "SELECT 1\n")
    jsonl = write(tmp_path / "p.jsonl", json.dumps({"prediction": "x", "gold_sql": "y", "db_id": "z"}) + "\n")
    with pytest.raises(UsageError, match="needs a gold file"):
        load_prediction_records(pred)
    with pytest.raises(UsageError, match="drop the gold file"):
        load_prediction_records(jsonl, pred)


def test_empty_predictions_file_is_rejected(tmp_path):
    pred = write(tmp_path / "pred.txt", "\n")
    gold = write(tmp_path / "gold.sql", "")
    with pytest.raises(UsageError, match="holds no predictions"):
        load_prediction_records(pred, gold)


def test_bird_prediction_naming_another_database_is_judged_on_the_gold_database(tmp_path, caplog):
    pred = write(tmp_path / "p.json", json.dumps({"0": "SELECT 1\t----- bird -----\tother"}))
    gold = write(tmp_path / "dev.sql", "SELECT 1\tfinancial\n")
    with caplog.at_level("WARNING"):
        records = load_prediction_records(pred, gold)
    assert records[0].db_id == "financial"
    assert "names database 'other'" in caplog.text


def test_db_ids_resolve_under_the_root_and_missing_ones_name_the_expected_path(tmp_path):
    (tmp_path / "db" / "here").mkdir(parents=True)
    (tmp_path / "db" / "here" / "here.sqlite").write_bytes(b"")
    records = [PredictionRecord(0, "x", "y", db_id="here"), PredictionRecord(1, "x", "y", db_id="gone")]
    assert resolve_db_paths(records[:1], tmp_path / "db") == [tmp_path / "db" / "here" / "here.sqlite"]
    with pytest.raises(
        UsageError, match=r"database 'gone' \(question 1\) not found: expected .*gone/gone\.sqlite"
    ):
        resolve_db_paths(records, tmp_path / "db")


def test_db_id_without_a_root_asks_for_one():
    with pytest.raises(UsageError, match="--db-root"):
        resolve_db_paths([PredictionRecord(0, "x", "y", db_id="a")], None)


def test_relative_db_path_is_tried_in_the_working_directory_then_the_root(tmp_path, monkeypatch):
    (tmp_path / "cwd").mkdir()
    (tmp_path / "root" / "sub").mkdir(parents=True)
    (tmp_path / "cwd" / "a.sqlite").write_bytes(b"")
    (tmp_path / "root" / "sub" / "b.sqlite").write_bytes(b"")
    monkeypatch.chdir(tmp_path / "cwd")
    records = [
        PredictionRecord(0, "x", "y", db_path="a.sqlite"),
        PredictionRecord(1, "x", "y", db_path="sub/b.sqlite"),
    ]
    paths = resolve_db_paths(records, tmp_path / "root")
    assert [p.resolve() for p in paths] == [
        (tmp_path / "cwd" / "a.sqlite").resolve(),
        (tmp_path / "root" / "sub" / "b.sqlite").resolve(),
    ]
    with pytest.raises(UsageError, match="'c.sqlite' not found"):
        resolve_db_paths([PredictionRecord(0, "x", "y", db_path="c.sqlite")], tmp_path / "root")
