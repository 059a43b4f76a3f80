"""The world as a benchmark dataset (slmsql_hub/data/world_benchmark.py): it loads with `datasets.load_dataset`, its
`eval.yaml` follows the Hub's eval-results specification (checked here against the fields that page requires and
against the pydantic model Inspect reads a Hub `eval.yaml` with; acceptance by the real Hub cannot be tested
offline), and the folder is still a world root for `slmsql eval`."""

from __future__ import annotations

import pytest
import yaml
from _helpers import check_eval_yaml, tiny_world

from slmsql_hub.data.benchmarks import BENCHMARK_COLUMNS, load_world
from slmsql_hub.data.world_benchmark import BENCHMARK_SPLITS, build_world_benchmark
from slmsql_hub.errors import UsageError


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    world = tiny_world(root / "world", dev=6)
    return world, build_world_benchmark(world, root / "benchmark", repo_id="alice/world-bench")


def test_the_benchmark_loads_with_load_dataset_and_holds_the_worlds_eval_splits(built):
    import datasets

    world, folder = built
    loaded = datasets.load_dataset(str(folder))
    assert sorted(loaded) == sorted(BENCHMARK_SPLITS)
    for split in BENCHMARK_SPLITS:
        original = list(load_world(world, split))
        rows = list(loaded[split])
        assert [r["question_id"] for r in rows] == [r["question_id"] for r in original]
        assert [r["gold_sql"] for r in rows] == [r["gold_sql"] for r in original]
        assert set(rows[0]) == {*BENCHMARK_COLUMNS, "prompt"}
        for row in rows:
            assert (folder / row["db_path"]).is_file() and row["question"] in row["prompt"]
            assert "CREATE TABLE" in row["prompt"]


def test_eval_yaml_follows_the_hub_specification(built):
    _, folder = built
    check_eval_yaml((folder / "eval.yaml").read_text(), BENCHMARK_SPLITS, {*BENCHMARK_COLUMNS, "prompt"})


def test_eval_yaml_tasks_are_what_inspect_runs_from_the_hub(built):
    """Inspect's own reader of a Hub `eval.yaml` (`inspect eval hf/<repo>`) accepts every task and turns a row of
    the loaded split into a sample whose input is the prompt and target the gold."""
    hf = pytest.importorskip("inspect_ai._eval.task.hf", reason="the [inspect] extra (inspect_ai) is not installed")
    import datasets

    _, folder = built
    spec = yaml.safe_load((folder / "eval.yaml").read_text())
    for task in spec["tasks"]:
        parsed = hf.HFTask.model_validate(task)
        row = datasets.load_dataset(str(folder), split=parsed.split)[0]
        sample = hf._record_to_sample_hf(row, parsed.field_spec)
        assert sample.target == row["gold_sql"]
        assert row["question"] in str(sample.input)


def test_the_benchmark_folder_is_also_a_world_root(built):
    world, folder = built
    for split in BENCHMARK_SPLITS:
        here = [{k: v for k, v in r.items() if k != "db_path"} for r in load_world(folder, split)]
        there = [{k: v for k, v in r.items() if k != "db_path"} for r in load_world(world, split)]
        assert here == there


def test_the_card_names_the_splits_and_the_repository(built):
    from huggingface_hub import DatasetCard

    _, folder = built
    card = DatasetCard.load(folder / "README.md")
    (config,) = card.data.configs
    assert [f["split"] for f in config["data_files"]] == list(BENCHMARK_SPLITS)
    assert "alice/world-bench" in card.text and "benchmark" in card.data.tags


def test_an_output_with_files_or_inside_the_world_is_refused(built, tmp_path):
    world, folder = built
    with pytest.raises(UsageError, match="is not empty"):
        build_world_benchmark(world, folder)
    with pytest.raises(UsageError, match="inside the input"):
        build_world_benchmark(world, world / "bench")
    with pytest.raises(UsageError, match="world split 'probe_same' not found"):
        build_world_benchmark(world, tmp_path / "b", splits=("probe_same",))


def test_slmsql_world_benchmark_writes_the_folder_and_refuses_bad_input_in_one_line(built, tmp_path, capsys):
    from slmsql_hub.cli import main

    world, _ = built
    out = tmp_path / "bench"
    assert main(["world", "benchmark", "--world", str(world), "--out", str(out), "--repo-id", "alice/wb"]) == 0
    assert f"world benchmark at {out}" in capsys.readouterr().out
    assert (out / "eval.yaml").is_file() and "alice/wb" in (out / "README.md").read_text()
    assert main(["world", "benchmark", "--world", str(world), "--out", str(world / "inside")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "inside the input" in err[0]


def test_a_world_run_naming_the_benchmark_gets_eval_results_whose_task_ids_it_defines(built):
    """With `dataset_ids: [world=<the pushed benchmark>]` in the eval recipe, the card's .eval_results entries name
    that dataset with a task_id that its eval.yaml defines (the split)."""
    from pathlib import Path, PurePosixPath

    from slmsql_hub.card import Run, eval_result_entries

    _, folder = built
    task_ids = {task["id"] for task in yaml.safe_load((folder / "eval.yaml").read_text())["tasks"]}
    comparison = {"n": 4, "delta_ex": 0.0, "significant": False, "mcnemar_p": 1.0, "ci95": [-0.1, 0.1],
                  "discordant": {"a_only": 0, "b_only": 0}, "verdict": "v", "summary": "s"}  # fmt: skip
    benchmarks = {
        f"world_{split}": {"benchmark": "world", "split": split, "dataset_id": "alice/world-bench", "mode": "bird",
                           "n": 4, "policies": {"sft": {"ex": 0.5}, "grpo": {"ex": 0.25}}, "comparison": comparison,
                           "predictions_file": f"predictions/world_{split}.jsonl"}  # fmt: skip
        for split in BENCHMARK_SPLITS
    }
    run = Run(Path("run"), PurePosixPath("outputs/q"), {"created_at": "2026-12-02T16:40:00Z", "benchmarks": benchmarks}, [])
    files = eval_result_entries(run, "alice/model")
    assert sorted(files) == [f"world_{split}.yaml" for split in BENCHMARK_SPLITS]
    for entries in files.values():
        (entry,) = entries
        assert entry["dataset"]["id"] == "alice/world-bench" and entry["dataset"]["task_id"] in task_ids
