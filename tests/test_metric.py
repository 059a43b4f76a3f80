"""The slmsql/ex evaluate metric: verdicts, counts, details, modes, install into the module cache, offline
loading in a fresh environment, and the metric card / Space files."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import evaluate
import pytest
import yaml
from _helpers import clean_env, python_json, shop_db
from _runaways import starved
from evaluate.loading import files_to_hash

from slmsql_hub.errors import InfrastructureError, UsageError
from slmsql_hub.metric import METRIC_SCRIPT, compute_execution_accuracy, install_metric
from slmsql_hub.metric.install import default_modules_cache
from slmsql_hub.sql import Limits, Sandbox

METRIC_DIR = METRIC_SCRIPT.parent


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return str(shop_db(tmp_path_factory.mktemp("db") / "shop.sqlite"))


@pytest.fixture(scope="module")
def ex():
    return evaluate.load(str(METRIC_SCRIPT), keep_in_memory=True)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(Limits(timeout_s=5), workers=1) as box:
        yield box


def test_correct_wrong_error_and_unscorable_are_counted_apart(ex, db, sandbox):
    results = ex.compute(
        predictions=[
            "SELECT name FROM item WHERE price > 2",
            "SELECT name FROM item",
            "SELECT nme FROM item",
            "SELECT 1",
        ],
        references=[
            "SELECT name FROM item WHERE price >= 3",
            "SELECT name FROM item WHERE shelf = 'a'",
            "SELECT name FROM item",
            "SELECT no_such_column FROM item",
        ],
        db_path=[db] * 4,
        sandbox=sandbox,
    )
    assert results == {
        "execution_accuracy": pytest.approx(1 / 3),
        "num_examples": 4,
        "num_scored": 3,
        "num_correct": 1,
        "num_unscorable": 1,
        "num_pred_errors": 1,
        "num_timeouts": 0,
        "num_infra_failures": 0,
    }


def test_details_come_back_in_input_order_with_extracted_sql(ex, db, sandbox):
    fenced = "Let me think.\n```sql\nSELECT count(*) FROM item\n```\nThat counts the items."
    results = ex.compute(
        predictions=["SELECT nme FROM item", fenced, "I don't know.", "SELECT 1"],
        references=["SELECT name FROM item", "SELECT count(*) FROM item", "SELECT 1", "SELECT bad FROM item"],
        db_path=[db] * 4,
        return_details=True,
        sandbox=sandbox,
    )
    details = results["details"]
    assert [(d["verdict"], d["correct"]) for d in details] == [
        ("pred_error", 0),
        ("correct", 1),
        ("no_sql", 0),
        ("unscorable", None),
    ]
    assert details[1]["pred_sql"] == "SELECT count(*) FROM item"
    assert details[0]["pred_status"] == "error" and "nme" in details[0]["error"]
    assert details[3]["gold_status"] == "error" and details[3]["error"].startswith("gold SQL failed")
    assert results["num_pred_errors"] == 2  # the SQLite error and the answer without SQL


def test_prediction_that_fails_never_matches_a_failing_gold(ex, db, sandbox):
    results = ex.compute(
        predictions=["SELECT bad FROM item", "SELECT name FROM item"],
        references=["SELECT bad FROM item", "SELECT name FROM item"],
        db_path=[db] * 2,
        return_details=True,
        sandbox=sandbox,
    )
    assert [d["correct"] for d in results["details"]] == [None, 1]
    assert results["execution_accuracy"] == 1.0


def test_permuted_columns_are_wrong_in_bird_mode_and_correct_in_spider_mode(ex, db, sandbox):
    kwargs = dict(
        predictions=["SELECT price, name FROM item"],
        references=["SELECT name, price FROM item"],
        db_path=[db],
    )
    assert ex.compute(**kwargs, sandbox=sandbox)["execution_accuracy"] == 0.0
    assert ex.compute(**kwargs, mode="spider", sandbox=sandbox)["execution_accuracy"] == 1.0


def test_spider_mode_removes_distinct_unless_asked_to_keep_it(ex, db, sandbox):
    kwargs = dict(
        predictions=["SELECT shelf FROM item"], references=["SELECT DISTINCT shelf FROM item"], db_path=[db]
    )
    assert ex.compute(**kwargs, mode="spider", sandbox=sandbox)["execution_accuracy"] == 1.0
    assert (
        ex.compute(**kwargs, mode="spider", keep_distinct=True, sandbox=sandbox)["execution_accuracy"] == 0.0
    )
    # the bird rule compares sets: duplicates are ignored anyway
    assert ex.compute(**kwargs, sandbox=sandbox)["execution_accuracy"] == 1.0


def test_slow_prediction_times_out_and_is_counted(ex, db):
    endless = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT max(x) FROM n"
    results = ex.compute(
        predictions=[endless],
        references=["SELECT 1"],
        db_path=[db],
        timeout_s=30,
        max_ops=5_000_000,
        workers=1,
        return_details=True,
    )
    assert results["num_timeouts"] == 1 and results["num_pred_errors"] == 0
    assert results["details"][0]["verdict"] == "pred_timeout"
    assert results["execution_accuracy"] == 0.0


ENDLESS = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT max(x) FROM n"


def test_a_prediction_past_timeout_s_is_wrong_as_in_the_official_evaluators(ex, db):
    """Issue #18: the op budget (1e9) would take far longer than timeout_s; the time budget decides, and a
    prediction over it is wrong, even alone (no InfrastructureError), and a gold over it unscorable."""
    results = ex.compute(
        predictions=[ENDLESS, "SELECT 1", "SELECT 1"],
        references=["SELECT 1", "SELECT 1", ENDLESS],
        db_path=[db] * 3,
        timeout_s=0.5,
        workers=1,
        return_details=True,
    )
    assert results["num_infra_failures"] == 0 and results["num_timeouts"] == 1 and results["num_unscorable"] == 1
    assert results["num_scored"] == 2 and results["execution_accuracy"] == 0.5
    assert [d["correct"] for d in results["details"]] == [0, 1, None]
    alone = ex.compute(predictions=[ENDLESS], references=["SELECT 1"], db_path=[db], timeout_s=0.5, workers=1)
    assert alone["execution_accuracy"] == 0.0 and alone["num_timeouts"] == 1


def test_only_a_machine_that_starves_the_queries_raises_an_infrastructure_error(db):
    with Sandbox(Limits(timeout_s=0.3), workers=1) as box:
        box.execute(db, "SELECT 1")
        with starved(box), pytest.raises(InfrastructureError, match="less loaded machine"):
            compute_execution_accuracy(["SELECT 2"], ["SELECT 3"], [db], sandbox=box)


def test_text_that_is_not_utf8_is_a_clean_error_and_the_batch_is_judged(ex, db):
    results = ex.compute(
        predictions=["SELECT '\ud800'", "SELECT 1", "SELECT 1"],
        references=["SELECT 1", "SELECT 1", "SELECT '\udfff'"],
        db_path=[db] * 3,
        workers=1,
        return_details=True,
    )
    assert [d["verdict"] for d in results["details"]] == ["pred_error", "correct", "unscorable"]
    assert "not valid text" in results["details"][0]["error"]
    assert results["details"][0]["pred_sql"] == "SELECT '\ud800'"  # the caller's text, unchanged
    ex.add(prediction="SELECT '\ud800'", reference="SELECT 1", db_path=db)
    assert ex.compute(workers=1)["num_pred_errors"] == 1


def test_no_scorable_example_raises_instead_of_returning_a_number(ex, db, sandbox):
    with pytest.raises(UsageError, match="none of the 2 examples could be scored"):
        ex.compute(
            predictions=["SELECT 1", "SELECT 2"],
            references=["SELECT x FROM nowhere", "SELECT y FROM nowhere"],
            db_path=[db] * 2,
            sandbox=sandbox,
        )


def test_bad_inputs_raise_one_clear_error(db, sandbox, tmp_path):
    with pytest.raises(UsageError, match="got 2, 1 and 1"):
        compute_execution_accuracy(["SELECT 1", "SELECT 2"], ["SELECT 1"], [db], sandbox=sandbox)
    with pytest.raises(UsageError, match="unknown compare mode 'exact'"):
        compute_execution_accuracy(["SELECT 1"], ["SELECT 1"], [db], mode="exact", sandbox=sandbox)
    with pytest.raises(UsageError, match="keep_distinct only applies to mode spider"):  # as the filter and `ex` say
        compute_execution_accuracy(["SELECT 1"], ["SELECT 1"], [db], keep_distinct=True, sandbox=sandbox)
    with pytest.raises(UsageError, match=r"db_path\[1\]: database file not found: .*missing\.sqlite"):
        compute_execution_accuracy(["SELECT 1"] * 2, ["SELECT 1"] * 2, [db, tmp_path / "missing.sqlite"])
    with pytest.raises(UsageError, match="empty"):
        compute_execution_accuracy([], [], [])


def test_a_given_sandbox_is_reused_and_left_open(db, sandbox):
    before = sandbox.stats["requests"]
    compute_execution_accuracy(["SELECT count(*) FROM item"], ["SELECT 4"], [db], sandbox=sandbox)
    assert sandbox.stats["requests"] == before + 2
    assert sandbox.execute(db, "SELECT 1").ok


def test_metric_info_declares_the_three_input_columns(ex):
    assert set(ex.features) == {"predictions", "references", "db_path"}
    assert "execution accuracy" in ex.description.lower()
    assert "yu2018spider" in ex.citation


def test_install_is_idempotent_and_uses_evaluates_hash_layout(tmp_path):
    first = install_metric(cache_dir=tmp_path)
    second = install_metric(cache_dir=tmp_path)
    assert first == second
    assert (
        first
        == tmp_path
        / "evaluate_modules"
        / "metrics"
        / "slmsql--ex"
        / files_to_hash([str(METRIC_SCRIPT)])
        / "ex.py"
    )
    assert first.read_bytes() == METRIC_SCRIPT.read_bytes()
    for package in (tmp_path, tmp_path / "evaluate_modules", first.parent.parent, first.parent):
        assert (package / "__init__.py").is_file()


def test_default_cache_is_evaluates_own_or_resolved_from_the_environment_like_evaluate(monkeypatch, tmp_path):
    assert default_modules_cache() == Path(evaluate.config.HF_MODULES_CACHE)
    monkeypatch.delitem(sys.modules, "evaluate.config")  # as in a process that has not imported evaluate
    monkeypatch.delenv("HF_MODULES_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert default_modules_cache() == tmp_path / "home" / "modules"
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "mods"))
    assert default_modules_cache() == tmp_path / "mods"


def _offline_env(hf_home: Path) -> dict:
    return clean_env(
        HF_HOME=str(hf_home),
        HF_EVALUATE_OFFLINE="1",
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
    )


_OFFLINE_CHECK = """
import json, sys, evaluate
ex = evaluate.load("slmsql/ex")
result = ex.compute(
    predictions=["```sql\\nSELECT name FROM item WHERE price > 2\\n```", "SELECT name FROM item"],
    references=["SELECT name FROM item WHERE price >= 3", "SELECT name FROM item WHERE shelf = 'a'"],
    db_path=[sys.argv[1]] * 2,
    workers=1,
)
print(json.dumps(result))
"""


def test_evaluate_load_works_offline_in_a_fresh_home_after_install_metric(tmp_path, db):
    slmsql = shutil.which("slmsql", path=str(Path(sys.executable).parent))
    assert slmsql is not None, "the slmsql console script is not installed (pip install -e .)"
    hf_home, elsewhere = tmp_path / "hf_home", tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = _offline_env(hf_home)

    installed = subprocess.run(
        [slmsql, "install-metric"], env=env, cwd=elsewhere, capture_output=True, text=True
    )
    assert installed.returncode == 0, installed.stderr
    path = Path(installed.stdout.strip())
    assert path.is_relative_to(hf_home / "modules") and path.name == "ex.py"
    again = subprocess.run([slmsql, "install-metric"], env=env, cwd=elsewhere, capture_output=True, text=True)
    assert Path(again.stdout.strip()) == path

    result = python_json(_OFFLINE_CHECK, env, elsewhere, db)
    assert result["execution_accuracy"] == 0.5 and result["num_scored"] == 2


def test_install_metric_command_takes_a_cache_dir(tmp_path, capsys):
    from slmsql_hub.cli import main

    assert main(["install-metric", "--cache-dir", str(tmp_path)]) == 0
    printed = Path(capsys.readouterr().out.strip())
    assert printed.is_file() and printed.is_relative_to(tmp_path)


def _front_matter(readme: Path) -> dict:
    text = readme.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---", 2)[1])


def test_metric_card_is_a_space_readme_with_evaluates_sections():
    readme = METRIC_DIR / "README.md"
    meta = _front_matter(readme)
    for key in (
        "title",
        "emoji",
        "colorFrom",
        "colorTo",
        "sdk",
        "sdk_version",
        "app_file",
        "pinned",
        "description",
    ):
        assert key in meta, key
    assert meta["sdk"] == "gradio" and {"evaluate", "metric"} <= set(meta["tags"])
    assert (METRIC_DIR / meta["app_file"]).is_file()
    headings = [
        line.lstrip("#").strip()
        for line in readme.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    ]
    for section in (
        "Metric Description",
        "How to Use",
        "Inputs",
        "Output Values",
        "Examples",
        "Limitations and Bias",
        "Citation",
        "Further References",
    ):
        assert section in headings, section


def test_space_app_scores_one_prediction_on_the_toy_database(ex):
    from slmsql_hub.metric import make_demo_database
    from slmsql_hub.metric.app import score

    db = make_demo_database()
    wrong = json.loads(
        score(ex, db, "SELECT age, name FROM singer", "SELECT name, age FROM singer", "bird", False)
    )
    right = json.loads(
        score(ex, db, "SELECT age, name FROM singer", "SELECT name, age FROM singer", "spider", False)
    )
    assert wrong["details"][0]["verdict"] == "wrong" and right["details"][0]["verdict"] == "correct"
    assert "error" in json.loads(score(ex, db, "SELECT 1", "   ", "bird", False))


@pytest.mark.slow
def test_metric_space_app_builds_a_gradio_demo_around_the_metric(ex):
    import gradio as gr

    from slmsql_hub.metric.app import build_demo

    assert isinstance(build_demo(metric=ex), gr.Blocks)


@pytest.mark.slow
def test_readme_examples_run_offline_after_install(tmp_path):
    """The metric card's examples, run as doctests against the installed metric in a fresh offline home."""
    slmsql = shutil.which("slmsql", path=str(Path(sys.executable).parent))
    env = _offline_env(tmp_path / "hf_home")
    subprocess.run([slmsql, "install-metric"], env=env, cwd=tmp_path, check=True, capture_output=True)
    readme = METRIC_DIR / "README.md"
    examples = readme.read_text(encoding="utf-8").split("### Examples", 1)[1].split("## Limitations", 1)[0]
    (tmp_path / "examples.txt").write_text(
        examples.replace("```python", "").replace("```", ""), encoding="utf-8"
    )
    code = "import doctest, sys; r = doctest.testfile(sys.argv[1], module_relative=False); sys.exit(bool(r.failed))"
    run = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "examples.txt")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-3000:]
