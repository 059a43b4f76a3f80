"""The world as a benchmark dataset on the Hub (issue #37 item 2): ``slmsql push --what world-benchmark`` (and
``all`` for a world run) publishes the world's evaluation splits with their databases and ``eval.yaml``, and the
model card pushed with it names that dataset, at the commit pushed, in ``model-index`` and ``.eval_results``.

The round trip runs against the local Hub-API server (``tests/hub_server.py``) with the real clients; acceptance of
``eval.yaml`` and ``.eval_results`` by the real Hub cannot be tested offline (the files are checked against the
specification's required fields instead, :func:`_helpers.check_eval_yaml`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from _helpers import TESTS, check_eval_yaml, hub_client_env, python_json, slmsql, tiny_world
from hub_server import HubServer

from slmsql_hub import hub
from slmsql_hub.data.benchmarks import BENCHMARK_COLUMNS
from slmsql_hub.data.world_benchmark import BENCHMARK_SPLITS
from slmsql_hub.errors import UsageError
from slmsql_hub.hub.world_benchmark import pin_benchmark, world_benchmark_target

TOKEN = "hf_test_alice"
FIXTURE_RUN = TESTS / "fixtures" / "run"
COLUMNS = {*BENCHMARK_COLUMNS, "prompt"}


def _world_run(root: Path, dataset_id: str | None = None) -> Path:
    """The fixture run (a world run: real tiny base and adapter, evaluated on world:dev and world:test) with a tiny
    world in ``world/`` and its card built; ``dataset_id``: its evaluation names that dataset for the world."""
    from slmsql_hub.card import build_card

    run = root / "run"
    shutil.copytree(FIXTURE_RUN, run)
    shutil.rmtree(run / "world")
    tiny_world(run / "world", dev=6)
    if dataset_id:
        results = run / "eval" / "eval_results.json"
        results.write_text(results.read_text().replace('"dataset_id": null', f'"dataset_id": "{dataset_id}"'))
    build_card(run)
    return run


@pytest.fixture(scope="module")
def world_run(tmp_path_factory) -> Path:
    return _world_run(tmp_path_factory.mktemp("world-run"))


def _eval_results(folder: Path) -> list[dict]:
    return [entry for path in sorted((folder / ".eval_results").glob("*.yaml")) for entry in yaml.safe_load(path.read_text())]


def _model_index_datasets(readme: str) -> list[dict]:
    meta = yaml.safe_load(readme.split("---\n")[1])
    return [result["dataset"] for index in meta["model-index"] for result in index["results"]]


def test_dry_run_plans_the_benchmark_first_and_the_card_names_it_with_task_ids_it_defines(world_run, tmp_path):
    out = tmp_path / "dry"
    env = hub_client_env("http://127.0.0.1:9", tmp_path / "home", None)  # no network, no token: a dry run
    args = ["push", str(world_run), "--repo-id", "alice/w", "--what", "model,world-benchmark", "--dry-run"]
    done = slmsql([*args, "--dry-run-dir", str(out)], env)
    assert done.returncode == 0, done.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert [(t["what"], t["repo_id"]) for t in plan["targets"]] == [
        ("world-benchmark", "alice/w-world-benchmark"), ("base-model", "alice/w-base"), ("model", "alice/w"),
    ]  # fmt: skip
    bench = plan["targets"][0]
    assert bench["repo_type"] == "dataset" and bench["task_ids"] == list(BENCHMARK_SPLITS)
    staged = out / "world-benchmark"
    assert {"eval.yaml", "README.md", "data/dev.parquet", "data/test.parquet"} <= {f["path"] for f in bench["files"]}
    check_eval_yaml((staged / "eval.yaml").read_text(), BENCHMARK_SPLITS, COLUMNS)
    entries = _eval_results(out / "model")
    assert len(entries) == 2 and {e["dataset"]["id"] for e in entries} == {"alice/w-world-benchmark"}
    assert {e["dataset"]["task_id"] for e in entries} <= set(bench["task_ids"])
    assert {d["type"] for d in _model_index_datasets((out / "model" / "README.md").read_text())} == {
        "alice/w-world-benchmark"
    }
    assert not list((world_run / "card").glob(".eval_results/*"))  # the card folder on disk is left as it was


def test_benchmark_repo_id_names_the_dataset_everywhere(world_run, tmp_path):
    plan = hub.plan_push(world_run, "alice/w", "world-benchmark,model", benchmark_repo_id="org/world-bench")
    assert plan[0].repo_id == "org/world-bench" and b"org/world-bench" in dict(plan[0].files)["README.md"].read_bytes()
    model = dict(plan[-1].files)
    assert {e["dataset"]["id"] for e in yaml.safe_load(model[".eval_results/world_dev.yaml"])} == {"org/world-bench"}


def test_all_leaves_out_a_run_that_names_a_benchmark_and_asking_for_it_on_a_run_without_world_eval_is_one_line(
    tmp_path,
):
    named = _world_run(tmp_path / "named", dataset_id="pub/world")
    assert world_benchmark_target(named, "alice/w-world-benchmark", explicit=False) is None
    assert not (named / "world_benchmark").exists()
    no_eval = tmp_path / "no-eval"
    shutil.copytree(named, no_eval)
    shutil.rmtree(no_eval / "eval")
    assert world_benchmark_target(no_eval, "alice/w-world-benchmark", explicit=False) is None
    with pytest.raises(UsageError, match="has no evaluation on the world"):
        world_benchmark_target(no_eval, "alice/w-world-benchmark", explicit=True)
    done = slmsql(["push", str(no_eval), "--repo-id", "alice/w", "--what", "world-benchmark"], hub_client_env(
        "http://127.0.0.1:9", tmp_path / "home", TOKEN))  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "has no evaluation on the world" in done.stderr


def test_pinning_names_the_commit_only_for_the_benchmark_pushed(world_run):
    plan = hub.plan_push(world_run, "alice/w", "world-benchmark,model")
    files = dict(plan[-1].files)
    files[".eval_results/other.yaml"] = b"- dataset: {id: xlangai/spider, task_id: dev}\n  value: 1.0\n"
    pinned = pin_benchmark(files, "alice/w-world-benchmark", "c0ffee")
    for split in BENCHMARK_SPLITS:
        (entry,) = yaml.safe_load(pinned[f".eval_results/world_{split}.yaml"])
        assert entry["dataset"] == {"id": "alice/w-world-benchmark", "task_id": split, "revision": "c0ffee"}
    assert pinned[".eval_results/other.yaml"] == files[".eval_results/other.yaml"]
    datasets = _model_index_datasets(pinned["README.md"].decode())
    assert datasets and all(d["revision"] == "c0ffee" for d in datasets)
    assert pinned["adapter_config.json"] == files["adapter_config.json"]


# ----------------------------------------------------------------------------------------------------------
# the round trip: push --what all, then read everything back from an empty cache
# ----------------------------------------------------------------------------------------------------------
def _complete(run: Path) -> Path:
    """``run`` with what ``--what all`` also needs: the SFT stage-2 adapter (the GRPO adapter's files stand in)
    and a saved pass-rate band over the world's databases."""
    import datasets

    from slmsql_hub.data.benchmarks import load_world

    for name in ("adapter_config.json", "adapter_model.safetensors"):
        shutil.copy2(run / "grpo" / name, run / "sft" / "stage2" / name)
    rows = [dict(row, pass_rate=0.5) for row in load_world(run / "world", "rl_pool")][:3]
    datasets.Dataset.from_list(rows).save_to_disk(str(run / "filter" / "band"))
    return run


@pytest.mark.slow
def test_a_world_run_pushed_with_all_names_the_pushed_benchmark_which_loads_from_an_empty_cache(tmp_path):
    run = _complete(_world_run(tmp_path))
    with HubServer({TOKEN: "alice"}) as server:
        done = slmsql(["push", str(run), "--repo-id", "alice/wr", "--what", "all"],
                      hub_client_env(server.endpoint, tmp_path / "home", TOKEN))  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"world-benchmark -> {server.endpoint}/datasets/alice/wr-world-benchmark" in done.stdout
        commit = server.state.repos[("dataset", "alice/wr-world-benchmark")].branches["main"]
        assert commit in done.stdout  # the push says which commit the card names
        result = python_json(
            """
            import json
            from datasets import load_dataset
            from huggingface_hub import hf_hub_download, snapshot_download

            bench = load_dataset("alice/wr-world-benchmark")
            spec = open(hf_hub_download("alice/wr-world-benchmark", "eval.yaml", repo_type="dataset")).read()
            model = snapshot_download("alice/wr", allow_patterns=["README.md", ".eval_results/*"])
            print(json.dumps({"splits": {k: v.num_rows for k, v in bench.items()}, "columns": bench["dev"].column_names,
                              "db_path": bench["dev"][0]["db_path"], "eval_yaml": spec, "model": model}))
            """,
            hub_client_env(server.endpoint, tmp_path / "empty-home", TOKEN),
            tmp_path,
        )
        stored = server.files("dataset", "alice/wr-world-benchmark")
        heads = {key: repo.branches["main"] for key, repo in server.state.repos.items()}
        again = slmsql(["push", str(run), "--repo-id", "alice/wr", "--what", "all"],
                       hub_client_env(server.endpoint, tmp_path / "home", TOKEN))  # fmt: skip
        assert again.returncode == 0, again.stderr[-3000:]
        # the benchmark rebuilt from the same world is the same files: no new commit, and the card's pin holds
        assert {key: repo.branches["main"] for key, repo in server.state.repos.items()} == heads
    assert result["splits"] == {"dev": 6, "test": 10} and set(result["columns"]) == COLUMNS
    assert result["db_path"] in stored  # the databases the rows name are in the repository
    spec = check_eval_yaml(result["eval_yaml"], BENCHMARK_SPLITS, COLUMNS)
    task_ids = {task["id"] for task in spec["tasks"]}
    model = Path(result["model"])
    entries = _eval_results(model)
    assert sorted(p.name for p in (model / ".eval_results").glob("*.yaml")) == ["world_dev.yaml", "world_test.yaml"]
    assert [e["dataset"]["id"] for e in entries] == ["alice/wr-world-benchmark"] * 2
    assert {e["dataset"]["task_id"] for e in entries} <= task_ids and all(
        e["dataset"]["revision"] == commit for e in entries
    )
    datasets = _model_index_datasets((model / "README.md").read_text())
    assert [(d["type"], d["revision"]) for d in datasets] == [("alice/wr-world-benchmark", commit)] * 2
    assert {d["split"] for d in datasets} <= task_ids
