"""Data that travels: a band pushed with ``slmsql push --what dataset`` carries its SQLite databases, and
``dataset_paths`` takes its Hub id (``datasets.load_dataset``), so GRPO trains from the Hub in a fresh cache.

The local Hub API server (:mod:`hub_server`) runs in this process; every client runs in a subprocess with
``HF_ENDPOINT`` at it and a fresh ``HF_HOME`` (:func:`_helpers.hub_client_env`). Nothing is mocked.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from _helpers import TESTS, hub_client_env, python_json, shop_db, slmsql
from hub_server import HubServer

from slmsql_hub.errors import UsageError
from slmsql_hub.training.common import load_datasets

TOKEN = "hf_test_alice"
FIXTURE_RUN = TESTS / "fixtures" / "run"
QUESTIONS = [
    ("How many items are there?", "SELECT count(*) FROM item"),
    ("What is the most expensive item?", "SELECT name FROM item ORDER BY price DESC LIMIT 1"),
    ("Which items are on shelf a?", "SELECT name FROM item WHERE shelf = 'a'"),
    ("What is the total price?", "SELECT sum(price) FROM item"),
]


@pytest.fixture(scope="module")
def server():
    with HubServer({TOKEN: "alice"}) as hub_server:
        yield hub_server


def band_run(root: Path) -> Path:
    """A run folder holding what ``slmsql push --what dataset`` reads: a band naming one database by its absolute
    path (``world/databases/shop/shop.sqlite``), and the fixture run's ``filter_report.json``."""
    import datasets

    db = shop_db(root / "world" / "databases" / "shop" / "shop.sqlite")
    n = len(QUESTIONS)
    rows = {
        "question_id": [f"q{i}" for i in range(n)],
        "question": [q for q, _ in QUESTIONS],
        "evidence": [""] * n,
        "db_id": ["shop"] * n,
        "db_path": [str(db)] * n,
        "gold_sql": [sql for _, sql in QUESTIONS],
        "pass_rate": [0.5] * n,
    }
    (root / "filter").mkdir(parents=True)
    datasets.Dataset.from_dict(rows).save_to_disk(str(root / "filter" / "band"))
    shutil.copy(FIXTURE_RUN / "filter" / "filter_report.json", root / "filter" / "filter_report.json")
    return root


def grpo_recipe(path: Path, out: Path, model: str) -> Path:
    """One GRPO step on CPU with a fresh LoRA on ``model``; a random reward beside the execution one gives the
    group reward variance, so the step changes the adapter."""
    recipe = {
        "model_name_or_path": model,
        "dataset_paths": ["outputs/none/band"],
        "output_dir": str(out),
        "lora_r": 4,
        "lora_alpha": 8,
        "lora_dropout": 0.0,
        "prompt_sample_rows": 0,
        "reward_funcs": ["execution", "random"],
        "reward_weights": [1.0, 1.0],
        "num_generations": 4,
        "per_device_train_batch_size": 4,
        "max_completion_length": 16,
        "max_steps": 1,
        "logging_steps": 1,
        "beta": 0.0,
        "sandbox_workers": 1,
        "num_threads": 1,
        "save_strategy": "no",
        "report_to": "none",
        "use_cpu": True,
        "seed": 0,
        "disable_tqdm": True,
    }
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    return path


def test_the_band_card_has_no_na_where_the_filter_report_has_the_number():
    from slmsql_hub.hub import dataset_card

    report = json.loads((FIXTURE_RUN / "filter" / "filter_report.json").read_text())
    card = dataset_card(report, "alice/shop-grpo-band", n_databases=3)
    limits = report["limits"]
    assert f"{limits['timeout_s']} s per query" in card
    assert f"at most {limits['max_ops']} SQLite VM steps and {limits['max_rows']} result rows" in card
    assert "n/a" not in card  # every field the template reads is in this report
    assert "the SQLite databases the rows name (3)" in card and "--dataset_paths alice/shop-grpo-band" in card


def test_a_name_that_is_neither_a_folder_nor_a_hub_id_is_one_line(tmp_path):
    with pytest.raises(UsageError, match="neither a dataset folder nor a Hub dataset id"):
        load_datasets(["my band!"])
    with pytest.raises(UsageError, match="dataset folder not found: outputs/none/band"):
        load_datasets(["outputs/none/band"])


@pytest.mark.slow
def test_bad_dataset_names_stop_before_the_model_loads_with_exit_code_2(server, tmp_path):
    """The model is a whole base (the fixture run's), checked before the data: the dataset's name is what fails,
    before the model loads (loading it would take seconds and name it)."""
    env = hub_client_env(server.endpoint, tmp_path / "home", TOKEN)
    base = Path(__file__).parent / "fixtures" / "run" / "base"
    recipe = grpo_recipe(tmp_path / "grpo.yaml", tmp_path / "out", str(base))
    for name, message in (
        ("my band!", "is neither a dataset folder nor a Hub dataset id"),
        ("alice/no-such-band", "no such folder here, and no dataset"),
    ):
        done = slmsql(["train", "grpo", "--config", str(recipe), "--dataset_paths", name], env)
        assert done.returncode == 2, done.stderr
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert message in lines[-1] and "Traceback" not in done.stderr and "fixtures/run/base" not in done.stderr


@pytest.fixture(scope="module")
def pushed_band(server, tmp_path_factory) -> dict[str, bytes]:
    """``alice/shop-grpo-band`` pushed by ``slmsql push --what dataset``; the database then exists only in the
    dataset repository. Returns the repository's files."""
    root = tmp_path_factory.mktemp("pushed")
    run = band_run(root / "run")
    pushed = slmsql(
        ["push", str(run), "--repo-id", "alice/shop-grpo", "--what", "dataset"],
        hub_client_env(server.endpoint, root / "pusher", TOKEN),
    )
    assert pushed.returncode == 0, pushed.stderr
    files = server.files("dataset", "alice/shop-grpo-band")
    assert (
        files["databases/shop/shop.sqlite"]
        == (run / "world" / "databases" / "shop" / "shop.sqlite").read_bytes()
    )
    shutil.rmtree(run / "world")
    return files


@pytest.mark.slow
def test_grpo_trains_one_step_from_a_pushed_band_by_its_hub_id(server, pushed_band, tmp_path):
    files = pushed_band
    home = tmp_path / "trainer"  # a fresh cache: everything comes from the server
    out = tmp_path / "grpo"
    recipe = grpo_recipe(tmp_path / "grpo.yaml", out, str(FIXTURE_RUN / "base"))
    done = slmsql(
        ["train", "grpo", "--config", str(recipe), "--dataset_paths", "alice/shop-grpo-band"],
        hub_client_env(server.endpoint, home, TOKEN),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 1
    assert summary["data"]["source"] == ["alice/shop-grpo-band"]
    assert summary["data"]["prompts"] == len(QUESTIONS) and summary["data"]["databases"] == 1
    assert summary["data"]["unscorable_gold"] == 0  # every gold ran on the downloaded database
    head = server.state.repos[("dataset", "alice/shop-grpo-band")].branches["main"]
    assert summary["data"]["dataset_commits"] == {"alice/shop-grpo-band": head}  # the commit it trained on
    downloaded = list(
        (home / "hub").glob("datasets--alice--shop-grpo-band/snapshots/*/databases/shop/shop.sqlite")
    )
    assert len(downloaded) == 1 and downloaded[0].read_bytes() == files["databases/shop/shop.sqlite"]
    assert summary["adapter_checksum"]["changed"] is True

    unknown = slmsql(
        ["train", "grpo", "--config", str(recipe), "--dataset_paths", "alice/shop-grpo-band",
         "--dataset_revision", "no-such-branch", "--output_dir", str(tmp_path / "grpo-again")],
        hub_client_env(server.endpoint, home, TOKEN),
        cwd=tmp_path,
    )  # fmt: skip
    assert unknown.returncode == 2 and "at revision no-such-branch" in unknown.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_sft_trains_from_the_same_hub_id(server, pushed_band, tmp_path):
    """SFT reads dataset_paths through the same reader: the schema comes from the downloaded database."""
    recipe = {
        "model_name_or_path": str(FIXTURE_RUN / "base"),
        "dataset_paths": ["alice/shop-grpo-band"],
        "output_dir": str(tmp_path / "sft"),
        "stage": 1,
        "lora_r": 4,
        "lora_alpha": 8,
        "lora_dropout": 0.0,
        "prompt_sample_rows": 1,
        "max_length": 512,
        "per_device_train_batch_size": 4,
        "max_steps": 1,
        "learning_rate": 1.0e-3,
        "num_threads": 1,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "use_cpu": True,
        "disable_tqdm": True,
    }
    path = tmp_path / "sft.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    done = slmsql(
        ["train", "sft", "--config", str(path)], hub_client_env(server.endpoint, tmp_path / "home", TOKEN)
    )
    assert done.returncode == 0, done.stderr[-4000:]
    summary = json.loads((tmp_path / "sft" / "run_summary.json").read_text())
    assert summary["steps"] == 1 and summary["data"]["trained_on"] == len(QUESTIONS)
    head = server.state.repos[("dataset", "alice/shop-grpo-band")].branches["main"]
    assert summary["datasets"] == ["alice/shop-grpo-band"] and summary["dataset_commits"] == {
        "alice/shop-grpo-band": head
    }


@pytest.mark.slow
def test_the_ablation_splits_a_pushed_band_named_by_its_hub_id(server, pushed_band, tmp_path):
    result = python_json(
        """
        import json, sys
        import datasets
        from slmsql_hub.study.config import AblationConfig, BandSettings
        from slmsql_hub.study.grid import prepare_band

        config = AblationConfig("g.yaml", "e.yaml", [], output_dir=sys.argv[1],
                                band=BandSettings(band_dir="alice/shop-grpo-band", min_band=1))
        band, pool = prepare_band(config)
        train = datasets.load_from_disk(sys.argv[1] + "/band/band_train")
        print(json.dumps({"pool": pool, "source": band.source, "ids": list(train["question_id"]),
                          "db_paths": sorted(set(train["db_path"]))}))
        """,
        hub_client_env(server.endpoint, tmp_path / "home", TOKEN),
        tmp_path,
        str(tmp_path / "ablations"),
    )
    assert result["pool"] == {"source": "run", "band_dir": "alice/shop-grpo-band"}
    assert result["source"] == "alice/shop-grpo-band" and 0 < len(result["ids"]) < len(QUESTIONS)
    [db] = result[
        "db_paths"
    ]  # absolute, in the downloaded repository: band_train trains wherever it is saved
    assert Path(db).is_absolute() and Path(db).read_bytes() == pushed_band["databases/shop/shop.sqlite"]


def test_the_band_card_names_the_policy_by_the_commits_the_filter_recorded():
    from slmsql_hub.hub import dataset_card

    report = json.loads((FIXTURE_RUN / "filter" / "filter_report.json").read_text())
    report["policy"] = {"base": "alice/tiny-qwen", "adapter": "alice/tiny-qwen-sft", "adapter_sha256": None,
                        "model_commit": "a" * 40, "adapter_commit": "b" * 40}  # fmt: skip
    card = dataset_card(report, "alice/shop-grpo-band", n_databases=3)
    line = f"base `alice/tiny-qwen` at commit `{'a' * 40}`, SFT adapter `alice/tiny-qwen-sft` at commit `{'b' * 40}`."
    assert line in card and "sha256 `n/a`" not in card  # today: "(sha256 n/a)" and no commit
