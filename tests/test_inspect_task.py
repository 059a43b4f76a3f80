"""The Inspect AI task (slmsql_hub/evaluation/inspect_task.py): its scorer gives `slmsql ex`'s verdicts on the same
predictions, an unscorable gold is unscored (left out of accuracy), the limits are in the metadata, the samples are
`slmsql eval`'s prompts; and (slow) `inspect eval` of the world task with a tiny base + adapter gives `slmsql eval`'s
EX at batch size 1."""

from __future__ import annotations

import asyncio
import inspect
import json
import math
from pathlib import Path

import pytest
from _helpers import shop_db, tiny_world

from slmsql_hub.cli import main
from slmsql_hub.evaluation import eval_benchmarks
from slmsql_hub.evaluation import inspect_registry as registry
from slmsql_hub.sql import Limits

inspect_ai = pytest.importorskip("inspect_ai", reason="the [inspect] extra (inspect_ai) is not installed")

# (model output, gold): one per verdict slmsql ex can give without a runaway query
CASES = [
    ("```sql\nSELECT count(*) FROM item\n```", "SELECT count(*) FROM item"),  # correct
    ("```sql\nSELECT name FROM item ORDER BY price\n```", "SELECT name FROM item WHERE price > 2"),  # wrong
    ("```sql\nSELECT nme FROM item\n```", "SELECT name FROM item"),  # pred_error
    ("I do not know.", "SELECT name FROM item"),  # no_sql
    ("```sql\nSELECT 1; DROP TABLE item\n```", "SELECT 1"),  # refused (two statements)
    ("```sql\nSELECT count(*) FROM item\n```", "SELECT count(*) FROM no_such_table"),  # unscorable gold
    ("```sql\nSELECT name, price FROM item\n```", "SELECT price, name FROM item"),  # wrong: column order
]


def _score_all(scorer, db_path: Path) -> list:
    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import Target
    from inspect_ai.solver import TaskState

    async def run() -> list:
        scores = []
        for index, (output, gold) in enumerate(CASES):
            state = TaskState(
                model="slmsql/test", sample_id=index, epoch=1, input="q", messages=[],
                output=ModelOutput.from_content("slmsql/test", output), metadata={"db_path": str(db_path)},
            )  # fmt: skip
            scores.append(await scorer(state, Target(gold)))
        return scores

    return asyncio.run(run())


def test_the_scorer_gives_slmsql_ex_verdicts_on_the_same_predictions(tmp_path):
    """The hard assertion of issue #37: per question, the Inspect score's verdict is the one `slmsql ex` writes,
    C exactly where ex says correct, and the unscorable gold is an unscored (NaN) score."""
    from inspect_ai.scorer import CORRECT, INCORRECT

    from slmsql_hub.evaluation.inspect_task import execution_scorer

    db = shop_db(tmp_path / "shop" / "shop.sqlite")
    pred = tmp_path / "pred.jsonl"
    pred.write_text("".join(json.dumps({"prediction": p, "gold_sql": g, "db_path": str(db)}) + "\n" for p, g in CASES))
    out = tmp_path / "verdicts.jsonl"
    assert main(["ex", "--pred", str(pred), "--format", "jsonl", "--out", str(out), "--timeout", "5",
                 "--workers", "1"]) == 0  # fmt: skip
    ex = [json.loads(line) for line in out.read_text().splitlines()]

    limits = Limits(timeout_s=5)
    scores = _score_all(execution_scorer("bird", limits=limits, workers=1), db)

    assert [s.metadata["verdict"] for s in scores] == [row["verdict"] for row in ex]
    assert {row["verdict"] for row in ex} >= {"correct", "wrong", "pred_error", "no_sql", "unscorable"}
    for score, row in zip(scores, ex):
        if row["correct"] is None:
            assert isinstance(score.value, float) and math.isnan(score.value) and score.reason == "unscorable"
        else:
            assert score.value == (CORRECT if row["correct"] else INCORRECT)
        assert score.answer == row["pred_sql"]
        assert score.metadata["limits"]["timeout_s"] == 5 and score.metadata["limits"]["max_ops"] == Limits.max_ops


def test_inspect_accuracy_leaves_the_unscored_gold_out(tmp_path):
    """Inspect's own aggregation of these scores: accuracy over the scored questions only (2 of 6), the
    unscorable one counted as unscored, not as wrong."""
    from inspect_ai._eval.task.results import eval_results
    from inspect_ai.scorer import SampleScore

    from slmsql_hub.evaluation.inspect_task import execution_scorer

    db = shop_db(tmp_path / "shop" / "shop.sqlite")
    scorer = execution_scorer("bird", limits=Limits(timeout_s=5), workers=1)
    scores = [
        {"execution_accuracy": SampleScore(score=s, sample_id=i)} for i, s in enumerate(_score_all(scorer, db))
    ]
    results, _ = eval_results(len(scores), scores, None, [scorer], None)
    (entry,) = results.scores
    assert entry.unscored_samples == 1 and entry.scored_samples == len(CASES) - 1
    assert entry.metrics["accuracy"].value == pytest.approx(1 / 6)


def test_each_named_task_builds_its_own_benchmark_and_the_generic_one_any():
    """Each named @task is an evaluable benchmark of the registry and builds it; ``benchmark`` takes any name."""
    named = {name for name, value in vars(registry).items() if inspect.isfunction(value) and name in eval_benchmarks()}
    assert named == {"world", "spider", "bird"}
    source = inspect.getsource(registry)
    for name in named:
        assert f'benchmark_task("{name}", root, split, **options)' in source
    assert "benchmark_task(name, root, split, **options)" in source


def test_the_world_samples_are_slmsql_evals_prompts(tmp_path):
    """Sample input = build_prompts' chat with the adapter's prompt settings; target, id and db_path are the row's."""
    from slmsql_hub.data.benchmarks import load_world
    from slmsql_hub.data.prompts import PromptConfig, build_prompts

    world = tiny_world(tmp_path / "world", dev=4)
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "run_summary.json").write_text(json.dumps({"prompt": {"sample_rows": 0, "max_value_chars": 40}}))
    task = registry.world(str(world), "dev", adapter=str(adapter), limit=3, sql_timeout_s=7.0, sql_max_ops=100_000_000)
    rows = list(load_world(world, "dev", limit=3))
    expected = build_prompts(rows, PromptConfig(sample_rows=0))
    samples = list(task.dataset)
    assert [s.id for s in samples] == [r["question_id"] for r in rows]
    assert [s.target for s in samples] == [r["gold_sql"] for r in rows]
    assert [[{"role": m.role, "content": m.text} for m in s.input] for s in samples] == expected
    assert [s.metadata["db_path"] for s in samples] == [r["db_path"] for r in rows]
    assert task.metadata["limits"]["timeout_s"] == 7.0 and task.metadata["mode"] == "bird"


def test_bad_task_arguments_are_one_usage_error_before_any_data_loads(tmp_path):
    from slmsql_hub.errors import UsageError

    with pytest.raises(UsageError, match="evaluate world on dev or test"):
        registry.world(str(tmp_path / "nowhere"), "rl_pool")
    with pytest.raises(UsageError, match="sql_timeout_s"):
        registry.world(str(tmp_path / "nowhere"), "dev", sql_timeout_s=0)
    with pytest.raises(UsageError, match="world root is not a directory"):
        registry.world(str(tmp_path / "nowhere"), "dev")


@pytest.mark.slow
def test_inspect_eval_of_the_world_task_gives_slmsql_evals_ex_at_batch_size_1(space_run, tmp_path):
    """`inspect_ai.eval` of the world task with the tiny base + each adapter (the `slmsql` provider), offline:
    per question the verdict of `slmsql eval` at batch_size 1, and so the same EX."""
    from slmsql_hub.evaluation import EvalConfig, run_eval

    world, base = space_run / "world", space_run / "base"
    adapters = {"sft": space_run / "sft" / "stage2", "grpo": space_run / "grpo"}
    config = EvalConfig(
        model_name_or_path=str(base), sft_adapter=str(adapters["sft"]), grpo_adapter=str(adapters["grpo"]),
        dtype="float32", device="cpu", benchmarks=["world:dev"], world_root=str(world), max_new_tokens=16,
        batch_size=1, sql_timeout_s=10.0, sandbox_workers=1, output_dir=str(tmp_path / "eval"),
    )  # fmt: skip
    results = run_eval(config, progress=False)["benchmarks"]["world_dev"]
    predictions = [json.loads(line) for line in (tmp_path / "eval" / results["predictions_file"]).read_text().splitlines()]

    for name, adapter in adapters.items():
        (log,) = inspect_ai.eval(
            registry.world(str(world), "dev", adapter=str(adapter), max_new_tokens=16, sql_timeout_s=10.0, workers=1),
            model=f"slmsql/{base}", model_args={"adapter": str(adapter), "dtype": "float32", "device": "cpu"},
            log_dir=str(tmp_path / "logs"), display="none",
        )  # fmt: skip
        assert log.status == "success", log.error
        verdicts = {s.id: s.scores["execution_accuracy"].metadata["verdict"] for s in log.samples}
        assert verdicts == {p["question_id"]: p[f"{name}_verdict"] for p in predictions}
        (score,) = log.results.scores
        ex = results["policies"][name]["ex"]
        assert score.metrics["accuracy"].value == pytest.approx(ex)
        assert score.scored_samples == results["n_scorable"]
    assert results["policies"]["sft"]["correct"] > 0  # the tiny policies give known answers: one is right
