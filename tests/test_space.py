"""The comparison Space (``spaces/demo/``): settings, the run's files, the page, and ``/compare`` end to end.

Fast tests build the page and its data from small folders written here. The slow ones use a tiny but complete run
folder (``tests/_space_run.py``: a tiny world, a tiny Qwen2 base, SFT and GRPO LoRA adapters that give known
answers, telemetry, a real evaluation and a card), call the engine directly, and call the ``/compare`` endpoint
with ``gradio_client`` on the app launched as the Space runs it (``python app.py``, port from
``GRADIO_SERVER_PORT``), 20 calls at once included.
"""

from __future__ import annotations

import dataclasses
import doctest
import importlib.util
import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _helpers import add_maj_at_k
from _space_run import (
    CARD_TLDR,
    DB_ID,
    DEMO_DIR,
    GRPO_SQL,
    QUESTION,
    SFT_SQL,
    free_port,
    launched_app,
)

from slmsql_hub.errors import UsageError
from slmsql_hub.sql import ExecResult, ExecStatus

sys.path.insert(0, str(DEMO_DIR))
import space_backend  # noqa: E402
import space_compare  # noqa: E402
import space_config  # noqa: E402
import space_data  # noqa: E402
import space_settings  # noqa: E402
import space_views  # noqa: E402
from space_backend import ComparisonSpace, SpaceSettings, load_space_data  # noqa: E402

SPIDER_DEV = Path(__file__).resolve().parents[1].parent / "shared/data/spider_dev"


def load_app():
    """``spaces/demo/app.py`` loaded by path, as the Hub's tooling does (not as ``import app``)."""
    spec = importlib.util.spec_from_file_location("slmsql_demo_app", DEMO_DIR / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


demo_app = load_app()


def component_values(demo) -> list:
    return [block.value for block in demo.blocks.values() if hasattr(block, "value")]


def compare_fn(demo):
    return next(fn for fn in demo.fns.values() if fn.api_name == "compare")


# ----------------------------------------------------------------------------------------------------------
# Fast: settings, files, views
# ----------------------------------------------------------------------------------------------------------


def test_space_modules_doctests_pass():
    import space_sql

    modules = (space_backend, space_compare, space_config, space_data, space_settings, space_views, space_sql)
    for module in (*modules, demo_app):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_command_line_wins_over_environment_and_port_comes_from_gradio_server_port():
    environ = {"SLMSQL_RUN_DIR": "runs/env", "SLMSQL_MAX_NEW_TOKENS": "64", "GRADIO_SERVER_PORT": "7123"}
    settings, host, port = demo_app.parse_args([], environ)
    assert (settings.run_dir, settings.max_new_tokens, port, host) == ("runs/env", 64, 7123, "127.0.0.1")
    settings, _, port = demo_app.parse_args(["--run-dir", "runs/cli", "--port", "7001"], environ)
    assert (settings.run_dir, port) == ("runs/cli", 7001)
    settings, _, port = demo_app.parse_args([], {})
    assert (settings.run_dir, port) == ("outputs/quickstart", 7860)


def test_bad_environment_numbers_are_usage_errors_naming_the_variable():
    with pytest.raises(UsageError, match="SLMSQL_CONCURRENCY='many'"):
        demo_app.parse_args([], {"SLMSQL_CONCURRENCY": "many"})
    with pytest.raises(UsageError, match="GRADIO_SERVER_PORT"):
        demo_app.parse_args([], {"GRADIO_SERVER_PORT": "http"})
    with pytest.raises(UsageError, match="concurrency must be a positive integer"):
        demo_app.parse_args([], {"SLMSQL_CONCURRENCY": "0"})


def test_missing_run_dir_is_a_message_in_the_page_and_the_log_not_a_traceback(tmp_path, caplog):
    import gradio as gr

    missing = tmp_path / "no-run"
    with caplog.at_level(logging.ERROR, logger="space_data"):
        space = ComparisonSpace(SpaceSettings(run_dir=str(missing)))
    try:
        assert any(f"No run folder at {missing}" in record.getMessage() for record in caplog.records)
        assert not space.ready and not space.preload()
        demo = demo_app.build_demo(space)
        shown = [v for v in component_values(demo) if isinstance(v, str) and "No run folder" in v]
        assert shown and "slmsql quickstart" in shown[0] and "SLMSQL_RUN_DIR" in shown[0]
        with pytest.raises(gr.Error, match="No run folder"):
            compare_fn(demo).fn(None, "How many books are there?")
    finally:
        space.close()


def test_page_without_run_serves_and_compare_answers_with_the_reason(tmp_path):
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    space = ComparisonSpace(SpaceSettings(run_dir=str(tmp_path / "no-run")))
    demo = demo_app.build_demo(space)
    port = free_port()
    try:
        demo_app.launch(demo, space.settings, "127.0.0.1", port, prevent_thread_lock=True, quiet=True)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/config", timeout=10) as response:
            assert "No run folder at" in response.read().decode()
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        with pytest.raises(AppError, match="No run folder") as caught:
            client.predict(None, "How many books are there?", api_name="/compare")
        assert "Traceback" not in str(caught.value)
    finally:
        demo.close()
        space.close()


def test_an_over_long_question_is_refused_by_the_validator_before_it_is_queued(tmp_path):
    from gradio_client import Client
    from gradio_client.exceptions import ValidationError

    space = ComparisonSpace(SpaceSettings(run_dir=str(tmp_path / "no-run"), max_question_chars=20))
    demo = demo_app.build_demo(space)
    port = free_port()
    try:
        demo_app.launch(demo, space.settings, "127.0.0.1", port, prevent_thread_lock=True, quiet=True)
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        # The handler would answer "No run folder": the validator's message shows it never ran or queued.
        with pytest.raises(ValidationError, match="21 characters; the limit is 20"):
            client.predict(None, "x" * 21, api_name="/compare")
    finally:
        demo.close()
        space.close()


@pytest.fixture
def spider_folder(tmp_path):
    """A Spider-layout folder: two databases, a dev.json with one question per database."""
    root = tmp_path / "spider"
    for db_id, rows in (("pets", [(1, "Rex"), (2, "Tom")]), ("shop", [(1, "pen")])):
        path = root / "database" / db_id / f"{db_id}.sqlite"
        path.parent.mkdir(parents=True)
        with sqlite3.connect(path) as conn:  # building a test database, not judging
            conn.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT, photo BLOB)")
            conn.executemany("INSERT INTO item VALUES (?, ?, x'00ff')", rows)
        conn.close()
    dev = [
        {"db_id": "pets", "question": "How many pets?", "query": "SELECT count(*) FROM item"},
        {"db_id": "shop", "question": "Names of items?", "query": "SELECT name FROM item"},
    ]
    (root / "dev.json").write_text(json.dumps(dev))
    return root


def test_spider_layout_folder_offers_its_databases_with_examples_and_the_spider_rule(tmp_path, spider_folder):
    settings = SpaceSettings(run_dir=str(tmp_path / "no-run"), spider_dir=str(spider_folder))
    with ComparisonSpace(settings) as space:
        assert list(space.data.databases) == ["spider/pets", "spider/shop"]
        assert {db.mode for db in space.data.databases.values()} == {"spider"}
        assert [e.gold_sql for e in space.examples("spider/pets")] == ["SELECT count(*) FROM item"]
        assert space.find_example("spider/pets", "  how many   PETS? ").question == "How many pets?"
        assert space.find_example("spider/pets", "How many pets now?") is None
        assert "CREATE TABLE item" in space.schema("spider/shop")
        with pytest.raises(UsageError, match="unknown database 'spider/nowhere'"):
            space.database("spider/nowhere")


def test_questions_must_be_present_and_within_the_length_limit(tmp_path):
    with ComparisonSpace(SpaceSettings(run_dir=str(tmp_path / "no-run"), max_question_chars=20)) as space:
        assert space.check_question("  How many pets?  ") == "How many pets?"
        with pytest.raises(UsageError, match="type a question"):
            space.check_question("   ")
        with pytest.raises(UsageError, match="21 characters; the limit is 20"):
            space.check_question("x" * 21)


def test_result_tables_are_capped_and_failed_queries_show_no_rows():
    ok = ExecResult(ExecStatus.OK, tuple((i, b"\x00") for i in range(120)), ("n", "photo"))
    frame = space_compare.result_frame(ok, display_rows=50)
    assert frame.shape == (50, 2) and frame.iloc[0].tolist() == [0, "<blob>"]
    assert space_compare.result_frame(ExecResult(ExecStatus.TIMEOUT, error="deadline"), 50).empty
    assert space_compare.result_frame(None, 50).empty
    assert "120 rows (showing the first 50)" in space_compare._rows_line(ok, 50)


def test_sql_is_formatted_wrapped_in_a_block_and_left_as_written_when_it_does_not_parse():
    import space_sql

    long = (
        "SELECT name FROM member WHERE city = 'Derby' AND join_year >= 2014 AND name LIKE 'A%' ORDER BY name"
    )
    formatted = space_sql.format_sql(long)
    assert formatted.splitlines()[:3] == ["SELECT", "  name", "FROM member"] and "'Derby'" in formatted
    assert space_sql.format_sql("SELECT name FROM WHERE") == "SELECT name FROM WHERE"  # does not parse
    assert space_sql.format_sql("SELECT 1; SELECT 2") == "SELECT 1; SELECT 2"  # not one query
    assert space_sql.sql_block("SELECT a FROM t WHERE b < '<x>'").count("&lt;") == 2


def test_the_difference_between_two_answers_is_marked_token_by_token():
    import space_sql

    diff = space_sql.sql_diff(
        "SELECT name FROM member WHERE age > 30", "SELECT name, city FROM member WHERE age >= 30"
    )
    assert (diff.removed, diff.added) == (1, 3)  # `>` out; `,`, `city`, `>=` in
    assert "<del>&gt;</del> <ins>&gt;=</ins>" in diff.html and "<ins>,\n  city</ins>" in diff.html
    # Layout and keyword case are no difference; raw text that does not parse is still compared word by word.
    assert space_sql.sql_diff("select name from member", "SELECT name\nFROM member").same
    broken = space_sql.sql_diff("SELECT name FROM WHERE x", "SELECT city FROM WHERE x")
    assert (broken.removed, broken.added) == (1, 1) and "<del>name</del>" in broken.html
    page = space_sql.differences_html("SELECT a FROM t", "SELECT b FROM t", "SELECT a FROM t")
    assert "SFT → GRPO (1 token out, 1 in)" in page and "Gold → GRPO (1 token out, 1 in)" in page
    assert "The same query, once formatted: Gold and SFT." in page
    assert "Nothing to compare" in space_sql.differences_html(None, "SELECT 1", None)


def test_a_failed_answer_shows_its_error_and_an_empty_one_says_0_rows_neither_draws_a_table():
    answer = space_backend.Answer(
        "sft",
        "SELECT x FROM patient",
        "SELECT x FROM patient",
        "error",
        ExecResult(ExecStatus.ERROR, error="no such table: patient"),
        0.1,
        7,
        True,
    )
    assert "no such table: patient" in space_compare.answer_status(answer, 50)
    assert not space_compare._has_rows(answer.result)
    empty = ExecResult(ExecStatus.OK, (), ("name",))
    ran = dataclasses.replace(answer, status="ran", result=empty)
    assert "0 rows" in space_compare.answer_status(ran, 50)
    assert not space_compare._has_rows(empty) and not space_compare._has_rows(None)
    assert space_compare._has_rows(ExecResult(ExecStatus.OK, ((1,),), ("n",)))


def _run_with_training_record(root: Path, sft_databases: list[str], grpo_databases: list[str]) -> Path:
    """A run folder holding what `slmsql train sft` (both stages) and `slmsql train grpo` record of their data."""
    from slmsql_hub.data.sft_record import write_sft_record

    continued = None
    for stage in (1, 2):
        folder = root / "sft" / f"stage{stage}"
        record = write_sft_record(
            folder, [f"k{stage}"], stage=stage, continued=continued, databases=sft_databases
        )
        (folder / "run_summary.json").write_text(
            json.dumps({"sft_questions": {**record.summary(), "file": record.path.name}})
        )
        continued = str(folder)
    (root / "grpo").mkdir(parents=True)
    (root / "grpo" / "run_summary.json").write_text(json.dumps({"data": {"database_names": grpo_databases}}))
    return root


def test_a_held_out_database_carries_one_line_taken_from_the_runs_record(tmp_path):
    run = _run_with_training_record(tmp_path / "run", ["clinic", "library"], ["library"])
    data = load_space_data(SpaceSettings(run_dir=str(run)))
    assert data.trained == {"sft": ["clinic", "library"], "grpo": ["clinic", "library"]}
    assert "training databases" in data.sources
    assert space_views.untrained_note(data.trained, "clinic") is None  # SFT trained on it; GRPO continues SFT
    note = space_views.untrained_note(data.trained, "farm_coop")
    assert (
        note.startswith("**Held out:** no adapter trained on a question about farm_coop") and "\n" not in note
    )
    record = {
        "question_id": "q",
        "db_id": "farm_coop",
        "question": "Q?",
        "gold_sql": "SELECT 1",
        "sft_sql": "SELECT 2",
        "grpo_sql": "SELECT 1",
        "grpo_correct": 1,
    }
    assert "held out" in space_views.disagreement_html([record], data.trained)
    assert "held out" not in space_views.disagreement_html([{**record, "db_id": "clinic"}], data.trained)
    # A run made before the record was kept: no line at all, rather than a wrong one.
    (run / "grpo" / "run_summary.json").write_text("{}")
    assert load_space_data(SpaceSettings(run_dir=str(run))).trained is None


def test_a_demo_space_push_ships_the_record_and_the_space_reads_it_from_its_folder(tmp_path):
    from slmsql_hub.data.trained_databases import TRAINED_DATABASES_FILE
    from slmsql_hub.hub import plan as hub_plan

    run = _run_with_training_record(tmp_path / "run", ["clinic"], ["clinic"])
    [target] = hub_plan.plan_push(run, "alice/x", "demo-space", demo_dir=DEMO_DIR)
    files = dict(target.files)
    assert {"app.py", "space_sql.py", TRAINED_DATABASES_FILE} <= set(files)
    space = tmp_path / "space"
    hub_plan.stage_files(target.files, space)
    data = space_data.SpaceData()
    space_data._load_trained([], data, shipped_dir=space)  # the Space on the Hub: no run folder, its own file
    assert data.trained == {"sft": ["clinic"], "grpo": ["clinic"]}
    assert space_views.untrained_note(data.trained, "library") is not None
    (tmp_path / "bare").mkdir()  # a run folder without the record: the Space ships without it
    [plain] = hub_plan.plan_push(tmp_path / "bare", "alice/x", "demo-space", demo_dir=DEMO_DIR)
    assert TRAINED_DATABASES_FILE not in dict(plain.files)


def write_card_folder(folder: Path, eval_results: dict, predictions: list[dict]) -> None:
    """What `slmsql push` puts in the GRPO model repo: adapter files, card, telemetry, eval."""
    (folder / "eval" / "predictions").mkdir(parents=True)
    (folder / "grpo_attempt1").mkdir()
    (folder / "adapter_config.json").write_text("{}")
    (folder / "README.md").write_text(
        "---\nlicense: mit\n---\n# m\n\n> **TL;DR — nothing moved.** See below.\n"
    )
    # As real runs log it: TRL's float32 zero-variance share reads 0 where the exact one does not; attempt #1 is
    # an older run with TRL's share only.
    (folder / "telemetry.jsonl").write_text(
        '{"step": 1, "reward": 0.5, "frac_reward_zero_std": 0.0, "frac_reward_zero_std_exact": 0.25}\n'
        '{"step": 2, "reward": 0.7, "frac_reward_zero_std": 0.0, "frac_reward_zero_std_exact": 0.75}\n'
    )
    (folder / "grpo_attempt1" / "telemetry.jsonl").write_text(
        '{"step": 1, "reward": 0.9, "frac_reward_zero_std": 0.4}\n'
    )
    # the shipped attempt's summary says how far its adapter moved; attempt #1's summary predates the record
    (folder / "run_summary.json").write_text(json.dumps({"adapter_update": {"relative_norm": 0.000321}}))
    (folder / "grpo_attempt1" / "run_summary.json").write_text(json.dumps({"steps": 1}))
    (folder / "eval" / "eval_results.json").write_text(json.dumps(eval_results))
    (folder / "eval" / "predictions" / "world_dev.jsonl").write_text(
        "".join(json.dumps(p) + "\n" for p in predictions)
    )


def test_a_card_folder_as_grpo_adapter_gives_the_evaluation_telemetry_and_summary(tmp_path):
    from slmsql_hub.evaluation.stats import paired_comparison

    sft, grpo = [1, 1, 0, 0, 1, None], [1, 0, 1, 1, 1, None]
    comparison = paired_comparison(sft[:5], grpo[:5], a_name="sft", b_name="grpo", resamples=10_000, seed=0)
    results = {
        "config": {"max_new_tokens": 77},
        "benchmarks": {
            "world_dev": {
                "n": 6,
                "mode": "bird",
                "policies": {"sft": {"ex": 0.6}, "grpo": {"ex": 0.8}},
                "comparison": comparison.to_dict(),
                "predictions_file": "predictions/world_dev.jsonl",
            }
        },
    }
    predictions = [
        {
            "question_id": f"q{i}",
            "sft_correct": a,
            "grpo_correct": b,
            "sft_sql": "SELECT a",
            "grpo_sql": "SELECT b" if i < 2 else "SELECT a",  # q0: both right with other SQL
        }
        for i, (a, b) in enumerate(zip(sft, grpo))
    ]
    card, adapter, base = tmp_path / "card", tmp_path / "sft", tmp_path / "base"
    card.mkdir()
    adapter.mkdir()
    base.mkdir()
    write_card_folder(card, results, predictions)
    (adapter / "adapter_config.json").write_text("{}")
    settings = SpaceSettings(
        run_dir=str(tmp_path / "no-run"),
        base_model=str(base),
        sft_adapter=str(adapter),
        grpo_adapter=str(card),
        world_dir=str(tmp_path / "no-world"),
    )
    data = load_space_data(settings)
    assert data.base_model == str(base) and set(data.policies) == {"sft", "grpo"}
    assert data.max_new_tokens == 77
    assert list(data.attempts) == ["attempt #1", "attempt #2"] and len(data.attempts["attempt #2"]) == 2
    assert "nothing moved" in space_backend.card_summary(data.card_text)
    assert not any("No run folder" in p for p in data.problems)
    assert any("no embedded world" in p for p in data.problems)
    row = space_backend.eval_table(data.eval_results)[0]
    assert (row["SFT EX"], row["GRPO EX"], row["ΔEX (points)"]) == ("60.0", "80.0", "+20.0")
    assert row["SFT-only / GRPO-only"] == "1 / 2"

    def ids(which: str) -> list[str]:
        records = space_backend.disagreements(data.eval_results, data.eval_dir, "world_dev", which)
        return [r["question_id"] for r in records]

    with ComparisonSpace(settings) as space:
        table = space.telemetry_table()
    zero = {row["Attempt"]: row["Zero-variance groups"] for row in table}
    assert zero == {"attempt #1": "0.4", "attempt #2": "0.5"}  # attempt #2: the exact mean, not TRL's 0
    moved = {row["Attempt"]: row["Adapter update ‖ΔW‖/‖W‖"] for row in table}
    assert moved == {"attempt #1": "n/a", "attempt #2": "3.21e-04"}

    assert ids("all") == ["q1", "q2", "q3"]
    assert ids("sft_only") == ["q1"] and ids("grpo_only") == ["q2", "q3"]
    assert ids("sql_differs") == ["q0", "q1"]
    with pytest.raises(UsageError, match="no benchmark 'spider_dev'"):
        space_backend.disagreements(data.eval_results, data.eval_dir, "spider_dev")


def test_a_malformed_run_file_is_a_problem_naming_it_and_the_card_folder_still_feeds_the_page(tmp_path):
    from slmsql_hub.run.layout import RunLayout

    run = RunLayout(tmp_path / "run")
    run.eval.mkdir(parents=True)
    run.eval_results.write_text("{not json")
    run.card.root.mkdir()
    run.card.readme.write_text(f"# m\n\n> **TL;DR — {CARD_TLDR}.**\n")
    data = load_space_data(SpaceSettings(run_dir=str(run.root)))
    assert any(f"{run.eval_results} is not valid JSON" in p and "slmsql eval" in p for p in data.problems)
    assert data.eval_results is None and CARD_TLDR in data.card_text


def test_an_adapter_that_is_neither_folder_nor_hub_id_is_a_problem_not_a_crash(tmp_path):
    data = load_space_data(
        SpaceSettings(
            run_dir=str(tmp_path / "no-run"),
            base_model="m",
            sft_adapter="./nope",
            grpo_adapter="./nope",
            world_dir=str(tmp_path),
        )
    )
    assert not data.policies
    assert any("the SFT adapter './nope' is neither a folder nor a Hub repo id" in p for p in data.problems)


@pytest.mark.spider
def test_real_spider_dev_folder_offers_its_databases_and_judges_gold_against_itself():
    if not SPIDER_DEV.is_dir():
        pytest.skip(f"Spider dev data not found at {SPIDER_DEV}")
    settings = SpaceSettings(run_dir="/nowhere/run", spider_dir=str(SPIDER_DEV))
    with ComparisonSpace(settings) as space:
        databases = space.data.databases
        on_disk = sorted(p.parent.name for p in (SPIDER_DEV / "database").glob("*/*.sqlite"))
        assert sorted(db.db_id for db in databases.values()) == on_disk
        example = space.examples("spider/concert_singer")[0]
        path = databases["spider/concert_singer"].path
        assert space.sandbox.execute(path, example.gold_sql).ok
        assert "CREATE TABLE" in space.schema("spider/concert_singer")


# ----------------------------------------------------------------------------------------------------------
# Slow: the engine and the launched app on a tiny run
# ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine(space_run):
    with ComparisonSpace(SpaceSettings(run_dir=str(space_run), sandbox_workers=1)) as space:
        assert space.preload(), space.data.problems
        yield space


@pytest.mark.slow
def test_example_question_is_answered_by_both_adapters_and_judged_against_gold(engine):
    key = f"world/{DB_ID}"
    comparison = engine.compare(key, QUESTION)
    sft, grpo = comparison.answers["sft"], comparison.answers["grpo"]
    assert (sft.sql, grpo.sql) == (SFT_SQL, GRPO_SQL)
    assert (sft.status, grpo.status) == ("matches_gold", "wrong")
    assert comparison.gold_sql == SFT_SQL and comparison.gold.rows == sft.result.rows
    assert len(grpo.result.rows) > 1 and grpo.result.columns == ("name",)
    assert sft.num_tokens > 0 and sft.finished and sft.latency_s > 0
    details = comparison.to_dict()
    assert details["sft"]["status"] == "matches_gold" and details["gold_rows"] == 1


@pytest.mark.slow
def test_typed_question_has_no_gold_and_answers_are_only_run(engine):
    comparison = engine.compare(f"world/{DB_ID}", "Which students play the cello?")
    assert comparison.gold_sql is None and comparison.gold is None
    assert {a.status for a in comparison.answers.values()} == {"ran"}
    other = engine.compare("world/library", "How many students borrowed books?")
    assert {a.status for a in other.answers.values()} == {"error"}
    assert "no such table" in other.answers["sft"].error


@pytest.mark.slow
def test_base_is_loaded_once_with_both_adapters(engine):
    model, _ = engine.load()
    assert engine.load()[0] is model
    assert set(model.peft_config) == {"sft", "grpo"}
    engine.compare(f"world/{DB_ID}", QUESTION)
    assert engine.load()[0] is model and model.active_adapter == "sft"


@pytest.fixture(scope="module")
def app_url(space_run, tmp_path_factory):
    log = tmp_path_factory.mktemp("space-app") / "app.log"
    with launched_app(["--run-dir", str(space_run)], log) as url:
        yield url


@pytest.mark.slow
def test_compare_endpoint_returns_both_sql_results_and_statuses(app_url):
    from gradio_client import Client

    client = Client(app_url, verbose=False)
    assert "/compare" in client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    result = client.predict(f"world/{DB_ID}", QUESTION, api_name="/compare")
    sft_sql, sft_status, sft_rows, grpo_sql, grpo_status, grpo_rows, gold_sql, _, gold_rows, details = result
    assert (sft_sql, grpo_sql, gold_sql) == (SFT_SQL, GRPO_SQL, SFT_SQL)
    assert "matches gold" in sft_status and "wrong" in grpo_status and "tokens" in sft_status
    assert sft_rows["headers"] == ["count(*)"] and sft_rows["data"] == gold_rows["data"]
    assert grpo_rows["headers"] == ["name"] and 1 < len(grpo_rows["data"]) <= 50
    assert (details["sft"]["status"], details["grpo"]["status"]) == ("matches_gold", "wrong")
    assert details["held_out"] is None  # the tiny run trained on this database
    held_out = client.predict("world/farm_coop", "How many farms are there?", api_name="/compare")[-1]
    assert "no adapter trained on a question about farm_coop" in held_out["held_out"]


@pytest.mark.slow
def test_compare_endpoint_reports_bad_input_as_one_message(app_url):
    from gradio_client import Client
    from gradio_client.exceptions import ValidationError

    client = Client(app_url, verbose=False)
    with pytest.raises(ValidationError, match="the limit is 500") as caught:  # refused before queueing
        client.predict(f"world/{DB_ID}", "x" * 501, api_name="/compare")
    assert "Traceback" not in str(caught.value)


@pytest.mark.slow
def test_twenty_concurrent_compare_calls_all_complete(app_url):
    from gradio_client import Client

    questions = [QUESTION if i % 2 == 0 else f"How many students are there? ({i})" for i in range(20)]

    def ask(question: str):
        return Client(app_url, verbose=False).predict(f"world/{DB_ID}", question, api_name="/compare")

    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(ask, questions))
    assert len(results) == 20
    statuses = [(r[-1]["sft"]["status"], r[-1]["grpo"]["status"]) for r in results]
    assert statuses[0::2] == [("matches_gold", "wrong")] * 10
    assert statuses[1::2] == [("ran", "ran")] * 10
    assert all(r[0] == SFT_SQL and r[3] == GRPO_SQL for r in results)


HUB_TOKEN = "hf_test_space"


def hub_env(endpoint: str, home: Path) -> dict[str, str]:
    """A Hub client's environment: none of the session's HF_* settings (offline mode), the test Hub's endpoint."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "HUGGINGFACE"))}
    env.update(HF_ENDPOINT=endpoint, HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_TELEMETRY="1", HF_HOME=str(home))
    env["HF_TOKEN"] = HUB_TOKEN
    return env


@pytest.mark.slow
def test_hub_adapters_are_downloaded_and_the_grpo_repo_feeds_the_other_tabs(space_run, tmp_path):
    """The real Space's set-up: adapters by Hub id, the GRPO repo holding what `slmsql push` ships with a card."""
    from gradio_client import Client
    from hub_server import HubServer

    card = tmp_path / "grpo-repo"
    shutil.copytree(space_run / "grpo", card)
    shutil.copytree(space_run / "grpo_attempt1", card / "grpo_attempt1")
    shutil.copytree(space_run / "eval", card / "eval")
    shutil.copy(space_run / "card" / "README.md", card / "README.md")
    with HubServer({HUB_TOKEN: "alice"}) as hub:
        env = hub_env(hub.endpoint, tmp_path / "home")
        upload = (
            "from huggingface_hub import HfApi\n"
            "api = HfApi()\n"
            "for repo, folder in [('alice/tiny-sft', {sft!r}), ('alice/tiny-grpo', {grpo!r})]:\n"
            "    api.create_repo(repo)\n"
            "    api.upload_folder(repo_id=repo, folder_path=folder)\n"
        ).format(sft=str(space_run / "sft" / "stage2"), grpo=str(card))
        done = subprocess.run(
            [sys.executable, "-c", upload], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-3000:]
        env.update(
            SLMSQL_BASE_MODEL=str(space_run / "base"),
            SLMSQL_SFT_ADAPTER="alice/tiny-sft",
            SLMSQL_GRPO_ADAPTER="alice/tiny-grpo",
            SLMSQL_WORLD_DIR=str(space_run / "world"),
        )
        with launched_app(["--run-dir", str(tmp_path / "no-run")], tmp_path / "app.log", env=env) as url:
            with urllib.request.urlopen(url + "config", timeout=10) as response:
                page = response.read().decode()
            result = Client(url, verbose=False).predict(f"world/{DB_ID}", QUESTION, api_name="/compare")
    assert "No run folder" not in page and "Not everything could be loaded" not in page
    assert CARD_TLDR in page and "alice/tiny-grpo" in page and "world_dev" in page
    assert (result[0], result[3]) == (SFT_SQL, GRPO_SQL)
    assert (result[-1]["sft"]["status"], result[-1]["grpo"]["status"]) == ("matches_gold", "wrong")


def _write_study(folder: Path, run: Path, finding: str) -> None:
    (folder / "plots").mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps({"config": {"run_dir": str(run)}}))
    (folder / "report.md").write_text(
        f"## Finding\n\n{finding}\n\n![f](plots/forest.png)\n## Per seed\n\nper-seed rows\n"
    )


def _ablations_text(run: Path) -> list[str]:
    with ComparisonSpace(SpaceSettings(run_dir=str(run))) as space:
        values = component_values(demo_app.build_demo(space))
    return [v for v in values if isinstance(v, str) and ("No ablation study" in v or "## Finding" in v)]


def test_ablations_tab_shows_the_report_read_run_found_or_says_there_is_none(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert _ablations_text(run)[0].startswith("No ablation study")
    _write_study(tmp_path / "ablations", run, "GRPO learnt its training band.")  # `make ablations`' folder
    assert space_data.read_run(run).ablations == tmp_path / "ablations"
    [shown] = _ablations_text(run)
    assert "GRPO learnt its training band" in shown and "per-seed rows" not in shown and "![f]" not in shown


def test_ablations_tab_prefers_the_report_the_card_ships(tmp_path):
    run = tmp_path / "run"
    (run / "card").mkdir(parents=True)
    (run / "card" / "README.md").write_text("# card\n")
    _write_study(run / "ablations", run, "The run's own study.")
    _write_study(run / "card" / "ablations", run, "The study the card shipped.")
    [shown] = _ablations_text(run)
    assert "The study the card shipped." in shown


def test_diagnosis_tab_shows_the_shipped_section_and_plot_only_when_the_card_folder_has_one(tmp_path):
    from _diagnosis_report import EXPECTED, write_diagnosis
    from huggingface_hub.utils import filter_repo_objects

    run = tmp_path / "run"
    (run / "card").mkdir(parents=True)
    (run / "card" / "README.md").write_text("# card\n")

    def tabs_and_values() -> tuple[list[str], list]:
        with ComparisonSpace(SpaceSettings(run_dir=str(run))) as space:
            demo = demo_app.build_demo(space)
        labels = [block.label for block in demo.blocks.values() if type(block).__name__ == "Tab"]
        return labels, component_values(demo)

    labels, _ = tabs_and_values()
    assert "Ablations" in labels and "Diagnosis" not in labels  # no diagnosis: no tab
    report = write_diagnosis(run / "card" / "diagnosis")
    labels, values = tabs_and_values()
    assert "Diagnosis" in labels
    [shown] = [v for v in values if isinstance(v, str) and "pass@K (ceiling)" in v]
    for name, (n, greedy, passk, maj, all_fail) in EXPECTED.items():
        assert f"| {name} | {n} | {greedy} | {passk} | {maj} | {all_fail} |" in shown
    assert report["prediction"]["sentence"] in shown and "![" not in shown
    assert any(isinstance(v, dict) and v.get("path", "").endswith("diagnosis.png") for v in values)
    fetched = filter_repo_objects(  # what the Space downloads of a Hub GRPO repo holds what the tab reads
        [p.relative_to(run / "card").as_posix() for p in (run / "card").rglob("*") if p.is_file()],
        allow_patterns=space_data._HUB_PATTERNS,
    )
    assert {"diagnosis/report.json", "diagnosis/diagnosis.png"} <= set(fetched)


def test_about_tab_renders_its_template_with_the_card_summary_sources_and_api(tmp_path):
    with ComparisonSpace(SpaceSettings(run_dir=str(tmp_path / "no-run"))) as space:
        space.data.card_text = "# Card\n\n> **TL;DR — GRPO did not move EX.** More.\n"
        space.data.sources["evaluation"] = "runs/a/eval/eval_results.json"
        values = component_values(demo_app.build_demo(space))
    [about] = [v for v in values if isinstance(v, str) and "## What this Space shows" in v]
    assert about.startswith("## From the model card\n\n") and "GRPO did not move EX" in about
    assert "- evaluation: `runs/a/eval/eval_results.json`" in about
    assert about.endswith(space_compare.COMPARE_API_DESCRIPTION) and "{{" not in about


def test_evaluation_tab_shows_maj_at_k_beside_greedy_ex_when_the_results_have_it(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(Path(__file__).resolve().parent / "fixtures" / "run", run)

    def shown() -> str:
        with ComparisonSpace(SpaceSettings(run_dir=str(run))) as space:
            values = component_values(demo_app.build_demo(space))
        return "\n".join(v for v in values if isinstance(v, str) and ("SFT EX" in v or "ΔEX = " in v))

    assert "SFT EX" in shown() and "maj@" not in shown()  # results written before maj@K: the tab as it was
    results = add_maj_at_k(run)
    text = shown()
    for key, bench in results["benchmarks"].items():
        comparison = bench["self_consistency"]["comparison"]
        assert f"- **{key}** maj@8: {comparison['summary']}" in text
    table = space_views.eval_table(results)
    dev = results["benchmarks"]["world_dev"]["self_consistency"]
    assert table[0]["SFT maj@8"] == f"{100 * dev['policies']['sft']['ex']:.1f}"
    assert table[0]["maj@8 SFT-only / GRPO-only"] == "{a_only} / {b_only}".format(**dev["comparison"]["discordant"])
    assert "| SFT maj@8 |" in text and "over 8 samples at temperature 0.7" in text
