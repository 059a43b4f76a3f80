"""Issue #34's broken artifacts and bad inputs: each is one stderr line, exit code 2, no traceback, before any
model or data loads; and reading an input dataset never writes into it.

Broken artifacts are real tiny ones cut short: the fixture run's adapter and base (tests/fixtures/run), a
safetensors file written with ``safetensors.numpy``, a saved dataset. Loading is guarded by monkeypatching the
loaders of each command to fail the test if called.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from dataclasses import asdict
from pathlib import Path

import pytest
from _helpers import REPO

from slmsql_hub import cli
from slmsql_hub.errors import UsageError
from slmsql_hub.run import artifacts

FIXTURE_RUN = REPO / "tests" / "fixtures" / "run"
WORLD = REPO / "recipes" / "world"


def _one_line(capsys, *names: str) -> str:
    """The single stderr line of the last command: no traceback, naming each of ``names``."""
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err and len(err.splitlines()) == 1, err
    assert "Traceback" not in captured.err + captured.out
    for name in names:
        assert name in err, err
    return err


def _cut(path: Path, keep: float = 0.5) -> Path:
    """Truncate ``path`` to ``keep`` of its bytes (a copy cut short by a full disk or a kill)."""
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def _folder_digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _boom(*_args, **_kwargs):
    raise AssertionError("a model or data was loaded before the bad input was refused")


@pytest.fixture
def models(tmp_path) -> dict[str, Path]:
    """Copies of the fixture run's tiny base model and GRPO adapter (real safetensors files)."""
    base, adapter = tmp_path / "base", tmp_path / "adapter"
    shutil.copytree(FIXTURE_RUN / "base", base)
    shutil.copytree(FIXTURE_RUN / "grpo", adapter)
    return {"base": base, "adapter": adapter}


@pytest.fixture
def no_loading(monkeypatch):
    """Every model and data loader of eval, filter and train fails the test when called."""
    for target in (
        "slmsql_hub.evaluation.run._load_eval_policy",
        "slmsql_hub.evaluation.run.load_slice",
        "slmsql_hub.filtering.run._load_filter_policy",
        "slmsql_hub.filtering.run._load_pool",
        "slmsql_hub.training.grpo.load_model_and_tokenizer",
        "slmsql_hub.training.grpo._prepare_data",
        "slmsql_hub.training.sft.load_model_and_tokenizer",
        "slmsql_hub.training.sft._prompt_dataset",
    ):
        monkeypatch.setattr(target, _boom)


# -- the checks themselves ----------------------------------------------------------------------------------------


def test_a_whole_safetensors_file_passes_and_every_cut_or_garbled_one_names_the_file(tmp_path):
    import numpy
    from safetensors.numpy import save_file

    path = tmp_path / "w.safetensors"
    save_file(
        {"a": numpy.ones((3, 5), dtype=numpy.float32), "b": numpy.zeros(7, dtype=numpy.int64)}, str(path)
    )
    artifacts.check_safetensors(path)
    whole = path.read_bytes()
    for broken in (
        whole[:-1],
        whole[: len(whole) // 2],
        whole[:20],
        whole[:5],
        b"",
        whole + b"\0",
        b"x" * 64,
    ):
        path.write_bytes(broken)
        with pytest.raises(UsageError, match="w.safetensors"):
            artifacts.check_safetensors(path)


@pytest.mark.parametrize(
    ("kind", "name", "damage"),
    [
        ("adapter", "adapter_model.safetensors", "cut"),
        ("adapter", "adapter_model.safetensors", "delete"),
        ("adapter", "adapter_config.json", "garble"),
        ("adapter", "tokenizer.json", "cut"),
        ("base", "model.safetensors", "cut"),
        ("base", "config.json", "garble"),
        ("base", "tokenizer.json", "cut"),
    ],
)
def test_a_model_folder_with_a_damaged_file_is_refused_naming_it(models, kind, name, damage):
    folder = models[kind]
    artifacts.check_model_folder(folder, kind)  # the fixture is whole
    target = folder / name
    if damage == "cut":
        _cut(target)
    elif damage == "delete":
        target.unlink()
    else:
        target.write_bytes(b"\xff\xfe{not json")
    with pytest.raises(UsageError, match=name.replace(".", r"\.")):
        artifacts.check_model_folder(folder, kind)


def test_a_database_failing_quick_check_or_lacking_a_table_is_refused(tmp_path):
    db = tmp_path / "a.sqlite"
    with sqlite3.connect(db) as conn:  # building a test database
        conn.execute("CREATE TABLE t (x INTEGER)")
    conn.close()
    before = db.read_bytes()
    artifacts.check_sqlite(db, ["t"])
    assert db.read_bytes() == before  # read-only: nothing written
    with pytest.raises(UsageError, match="lacks the table"):
        artifacts.check_sqlite(db, ["t", "u"])
    db.write_bytes(bytes(range(256)) * 16)
    with pytest.raises(UsageError, match="a.sqlite"):
        artifacts.check_sqlite(db)


# -- eval, filter, train: broken models and bad output folders, before loading ------------------------------------


def _eval(models, tmp_path, **fields) -> list[str]:
    values = {
        "model_name_or_path": models["base"],
        "sft_adapter": models["adapter"],
        "grpo_adapter": models["adapter"],
        "world_root": FIXTURE_RUN / "world",
        "output_dir": tmp_path / "eval",
        **fields,
    }
    return ["eval", "--config", str(WORLD / "eval.yaml"), *(f"--{k}={v}" for k, v in values.items())]


def _filter(models, tmp_path, **fields) -> list[str]:
    values = {
        "model_name_or_path": models["base"],
        "adapter_path": models["adapter"],
        "world_root": FIXTURE_RUN / "world",
        "output_dir": tmp_path / "filter",
        **fields,
    }
    return ["filter", "--config", str(WORLD / "filter.yaml"), *(f"--{k}={v}" for k, v in values.items())]


def _train(kind: str, models, tmp_path, **fields) -> list[str]:
    recipe = {"grpo": "grpo_band.yaml", "sft": "sft_stage2.yaml"}[kind]
    values = {
        "model_name_or_path": models["base"],
        "adapter_path": models["adapter"],
        "output_dir": tmp_path / kind,
        **fields,
    }
    return ["train", kind, "--config", str(WORLD / recipe), *(f"--{k}={v}" for k, v in values.items())]


COMMANDS = {
    "eval": _eval,
    "filter": _filter,
    "train grpo": lambda m, t, **f: _train("grpo", m, t, **f),
    "train sft": lambda m, t, **f: _train("sft", m, t, **f),
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize(
    ("kind", "name"), [("adapter", "adapter_model.safetensors"), ("base", "model.safetensors")]
)
def test_a_truncated_adapter_or_base_is_one_line_before_loading(
    command, kind, name, models, tmp_path, capsys, no_loading
):
    _cut(models[kind] / name)
    assert cli.main(COMMANDS[command](models, tmp_path)) == 2
    _one_line(capsys, str(models[kind] / name), "truncated")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_base_config_that_is_not_json_is_one_line_before_loading(
    command, models, tmp_path, capsys, no_loading
):
    (models["base"] / "config.json").write_text("model_type: qwen2\n")
    assert cli.main(COMMANDS[command](models, tmp_path)) == 2
    _one_line(capsys, "config.json", "not valid JSON")


@pytest.mark.parametrize("command", ["eval", "filter"])
def test_an_output_dir_that_is_a_file_is_one_line_before_loading(
    command, models, tmp_path, capsys, no_loading
):
    target = tmp_path / "results.txt"
    target.write_text("keep me\n")
    assert cli.main(COMMANDS[command](models, tmp_path, output_dir=target)) == 2
    _one_line(capsys, str(target), "is a file")
    assert target.read_text() == "keep me\n"


def test_eval_with_an_adapter_as_the_base_model_says_to_pass_it_as_an_adapter(
    models, tmp_path, capsys, no_loading
):
    assert cli.main(_eval(models, tmp_path, model_name_or_path=models["adapter"])) == 2
    _one_line(capsys, "is a PEFT adapter", "pass it as an adapter")


def test_a_recipe_with_reward_funcs_7_is_one_line(models, tmp_path, capsys, no_loading):
    recipe = tmp_path / "grpo.yaml"
    text = (WORLD / "grpo_band.yaml").read_text(encoding="utf-8")
    recipe.write_text(
        "\n".join(
            "reward_funcs: 7" if line.startswith("reward_funcs:") else line for line in text.splitlines()
        ),
        encoding="utf-8",
    )
    argv = _train("grpo", models, tmp_path)
    argv[argv.index("--config") + 1] = str(recipe)
    assert cli.main(argv) == 2
    _one_line(capsys, "reward_funcs must be a list")


def test_half_an_arrow_file_in_a_training_dataset_is_one_line(models, tmp_path, capsys, monkeypatch):
    import datasets

    monkeypatch.setattr("slmsql_hub.training.sft.load_model_and_tokenizer", _boom)
    data = tmp_path / "data"
    datasets.Dataset.from_dict({"question": ["q"] * 2000, "gold_sql": ["SELECT 1"] * 2000}).save_to_disk(
        str(data)
    )
    _cut(next(data.glob("*.arrow")))
    capsys.readouterr()  # save_to_disk's progress bar
    assert cli.main(_train("sft", models, tmp_path, dataset_paths=data)) == 2
    _one_line(capsys, str(data), "broken dataset")


# -- card and push refuse to ship, quickstart and world build refuse to reuse -------------------------------------


@pytest.fixture
def run_copy(tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(FIXTURE_RUN, run)
    return run


@pytest.mark.parametrize(
    ("path", "damage", "said"),
    [
        ("grpo/adapter_model.safetensors", "cut", "truncated"),
        ("grpo/adapter_model.safetensors", "delete", "not found"),
        ("base/model.safetensors", "cut", "truncated"),
        ("grpo/telemetry.jsonl", "empty", "holds no training step"),
        ("grpo/telemetry.jsonl", "binary", "not UTF-8"),
    ],
)
def test_card_refuses_a_broken_adapter_base_or_telemetry_and_writes_no_card(
    run_copy, path, damage, said, capsys
):
    target = run_copy / path
    if damage == "cut":
        _cut(target)
    elif damage == "delete":
        target.unlink()
    elif damage == "empty":
        target.write_text("")
    else:
        target.write_bytes(target.read_bytes() + b"\xff\xfe\x00garbage\n")
    assert cli.main(["card", "--run-dir", str(run_copy)]) == 2
    _one_line(capsys, said)
    assert not (run_copy / "card").exists()


@pytest.mark.parametrize(
    ("write", "said"),
    [
        (lambda p: p.write_text("# {{ title }}\n", encoding="utf-16"), "not UTF-8"),
        (lambda p: p.write_text("# {% if %}\n", encoding="utf-8"), "Jinja syntax error"),
    ],
)
def test_a_utf16_or_unparsable_card_template_is_one_line(run_copy, tmp_path, write, said, capsys):
    template = tmp_path / "card.md"
    write(template)
    assert cli.main(["card", "--run-dir", str(run_copy), "--template", str(template)]) == 2
    _one_line(capsys, str(template), said)


@pytest.mark.parametrize("path", ["adapter_model.safetensors", "base/model.safetensors"])
def test_push_dry_run_refuses_a_card_folder_whose_adapter_or_base_was_cut(run_copy, path, tmp_path, capsys):
    assert cli.main(["card", "--run-dir", str(run_copy)]) == 0
    capsys.readouterr()
    _cut(run_copy / "card" / path)
    argv = ["push", str(run_copy), "--repo-id", "alice/x", "--what", "model", "--dry-run"]
    assert cli.main([*argv, "--dry-run-dir", str(tmp_path / "plan")]) == 2
    _one_line(capsys, path.split("/")[-1], "truncated")


def test_quickstart_does_not_reuse_a_stage_whose_adapter_was_cut(tmp_path):
    from slmsql_hub.commands.quickstart import run_quickstart
    from slmsql_hub.commands.study import load_study
    from slmsql_hub.run.layout import RunLayout

    stages = load_study(WORLD).stages
    for stage in stages:  # every stage finished, as its marker says
        marker = stage.marker(RunLayout(tmp_path))
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("{}")
    sft2 = RunLayout(tmp_path).sft_stage2.path
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        shutil.copy2(FIXTURE_RUN / "grpo" / name, sft2 / name)
    _cut(sft2 / "adapter_model.safetensors")
    with pytest.raises(UsageError, match="adapter_model.safetensors is truncated.*is not reused"):
        run_quickstart(tmp_path, recipes=WORLD, on_stage=lambda *a: None)


def _fake_world(root: Path) -> Path:
    """A world folder that looks complete for the default seed and sizes: its manifest, each split's
    ``state.json`` and each database with the world's tables (no rows)."""
    from slmsql_hub.world import WorldSizes
    from slmsql_hub.world.build import WORLD_VERSION, WorldManifest
    from slmsql_hub.world.schemas import DATABASES, HELD_OUT_DB, create_table_sql

    manifest = WorldManifest(
        root, WORLD_VERSION, 0, asdict(WorldSizes()), [d.db_id for d in DATABASES], HELD_OUT_DB
    )
    for spec in DATABASES:
        path = manifest.db_path(spec.db_id)
        path.parent.mkdir(parents=True)
        with sqlite3.connect(path) as conn:  # building a test database
            for table in spec.tables:
                conn.execute(create_table_sql(table))
        conn.close()
    for split in manifest.split_names:
        manifest.split_path(split).mkdir(parents=True)
        (manifest.split_path(split) / "state.json").write_text("{}")
    (root / "world.json").write_text(manifest.to_json())
    return root


def test_world_build_does_not_reuse_a_world_with_a_garbled_database_or_manifest(tmp_path, capsys):
    from slmsql_hub.world.schemas import DATABASES

    world = _fake_world(tmp_path / "world")
    damaged = world / "databases" / DATABASES[1].db_id / f"{DATABASES[1].db_id}.sqlite"
    damaged.write_bytes(bytes(range(256)) * 64)
    assert cli.main(["world", "build", "--out", str(world)]) == 2
    _one_line(capsys, str(damaged), "--overwrite")
    _cut(world / "world.json")
    assert cli.main(["world", "build", "--out", str(world)]) == 2
    _one_line(capsys, "world.json", "not valid JSON")


def test_a_corrupt_band_state_or_filter_state_is_one_line(tmp_path):
    import datasets

    from slmsql_hub.filtering.report import read_band
    from slmsql_hub.filtering.resume import _check_or_write_state

    band = tmp_path / "band"
    datasets.Dataset.from_dict({"question": ["q"]}).save_to_disk(str(band))
    (band / "state.json").write_text('{"_data_files": [')
    with pytest.raises(UsageError, match="broken dataset"):
        read_band(band)
    (tmp_path / "filter_config.json").write_text("{oops")
    with pytest.raises(UsageError, match="filter_config.json is not valid JSON"):
        _check_or_write_state(tmp_path, {}, None, have_results=True)


# -- reading never writes -----------------------------------------------------------------------------------------


def test_preparing_training_data_or_a_pushed_band_writes_nothing_into_the_input_folder(tmp_path):
    """TRL's trainers and ``push --what dataset`` map the datasets they load; the maps stay in memory."""
    import datasets

    from slmsql_hub.hub.band import band_databases, load_band
    from slmsql_hub.training.common import load_datasets

    db = tmp_path / "world" / "databases" / "a" / "a.sqlite"
    db.parent.mkdir(parents=True)
    sqlite3.connect(db).close()
    data = tmp_path / "data"
    rows = {"question": ["q1", "q2"], "gold_sql": ["SELECT 1"] * 2, "db_path": [str(db)] * 2}
    datasets.Dataset.from_dict(rows).save_to_disk(str(data))
    before = _folder_digest(data)
    rows = load_datasets([data])
    rows.map(lambda row: {"n": len(row["question"])})  # what SFTTrainer / GRPOTrainer do with it
    rows.filter(lambda row: row["question"] == "q1")
    load_band(data)
    band_databases(data)
    assert _folder_digest(data) == before


# -- ex and the metric --------------------------------------------------------------------------------------------


def test_ex_format_spider_on_a_jsonl_file_is_one_line(tmp_path, capsys):
    pred = tmp_path / "preds.txt"
    pred.write_text(json.dumps({"prediction": "SELECT 1", "gold_sql": "SELECT 1", "db_id": "a"}) + "\n")
    gold = tmp_path / "gold.sql"
    gold.write_text("SELECT 1\ta\n")
    argv = ["ex", "--pred", str(pred), "--gold", str(gold), "--db-root", str(tmp_path), "--format", "spider"]
    assert cli.main(argv) == 2
    _one_line(capsys, str(pred), "--format jsonl")


@pytest.mark.parametrize(
    ("kwargs", "error", "names"),
    [
        ({"predictions": None}, TypeError, "predictions"),
        ({"references": None}, TypeError, "references"),
        ({"db_path": None}, TypeError, "db_path"),
        ({"predictions": "SELECT 1"}, TypeError, "predictions"),
        ({"db_path": "x" * 30}, TypeError, "db_path"),
        ({"timeout_s": "abc"}, TypeError, "timeout_s"),
        ({"db_path": ["x" * 10_000_000]}, UsageError, "db_path[0] is not a usable path"),
    ],
)
def test_the_metric_names_an_argument_of_the_wrong_type_or_an_unusable_path(kwargs, error, names):
    from slmsql_hub.metric import compute_execution_accuracy, make_demo_database

    args = {
        "predictions": ["SELECT 1"],
        "references": ["SELECT 1"],
        "db_path": [make_demo_database()],
        **kwargs,
    }
    with pytest.raises(error) as caught:
        compute_execution_accuracy(**args, workers=1)
    message = str(caught.value)
    assert names in message and "\n" not in message and len(message) < 400


@pytest.fixture
def no_parsing_past_the_cap(monkeypatch) -> int:
    """The judge's SQL extraction and preparation fail the test when handed a text over the length cap."""
    import slmsql_hub.sql.judge as judge_module
    from slmsql_hub.sql import Limits

    cap = Limits().max_sql_chars
    for name in ("prepare_sql", "extract_sql"):
        real = getattr(judge_module, name)

        def guarded(text, *args, _real=real, _name=name):
            assert len(text) <= cap, f"{_name} parsed a {len(text)}-character text"
            return _real(text, *args)

        monkeypatch.setattr(judge_module, name, guarded)
    return cap


HUGE = "SELECT name FROM singer WHERE name = 'a' OR " * 5_000


@pytest.mark.parametrize("mode", ["spider", "bird"])
def test_the_length_cap_comes_before_a_prediction_is_extracted_or_tokenised(mode, no_parsing_past_the_cap):
    from slmsql_hub.metric import compute_execution_accuracy, make_demo_database

    result = compute_execution_accuracy(
        [HUGE, "SELECT 1"],
        ["SELECT 1", "SELECT 1"],
        [make_demo_database()] * 2,
        mode=mode,
        workers=1,
        return_details=True,
    )
    assert f"longer than {no_parsing_past_the_cap} characters" in result["details"][0]["error"]


def test_ex_mode_spider_refuses_an_over_long_prediction_without_parsing_it(tmp_path, no_parsing_past_the_cap):
    from slmsql_hub.metric import make_demo_database

    db = make_demo_database()
    pred = tmp_path / "preds.jsonl"
    rows = [{"prediction": HUGE, "gold_sql": "SELECT 1", "db_path": str(db)}]
    rows.append({"prediction": "SELECT 1", "gold_sql": "SELECT 1", "db_path": str(db)})
    pred.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "verdicts.jsonl"
    assert cli.main(["ex", "--pred", str(pred), "--mode", "spider", "--workers", "1", "--out", str(out)]) == 0
    first = json.loads(out.read_text().splitlines()[0])
    assert f"longer than {no_parsing_past_the_cap} characters" in json.dumps(first)
