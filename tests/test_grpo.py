"""GRPO training: recipes, the prompt dataset, a real (tiny) run end to end, guards on bad runs, resume after
kill -9 and a 2-process accelerate run.

The policy is a tiny Qwen2 trained in a second to answer every question with one of two SQL blocks (about half
the samples right, half wrong), saved with a zero-initialised LoRA adapter beside it: GRPO then sees reward
variance in every group and must move the adapter.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from _benchmark_layouts import ANSWERS, nums_database
from _benchmark_layouts import QUESTIONS as QUESTION_PAIRS
from _helpers import free_port, trackio_logs
from _tiny_model import build_model, build_tokenizer, train_to_answer

from slmsql_hub import cli
from slmsql_hub.data.prompts import PromptConfig
from slmsql_hub.errors import UsageError
from slmsql_hub.recipes import parse_recipe
from slmsql_hub.training import grpo
from slmsql_hub.training.configs import GRPO_ARGUMENTS, GRPOScriptArguments, GRPOTrainingConfig
from slmsql_hub.training.telemetry import read_telemetry

REPO = Path(__file__).resolve().parents[1]
RECIPES = REPO / "recipes"

QUESTIONS = dict(QUESTION_PAIRS)  # question -> gold SQL, over nums_database's t(x)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A database, a saved prompt dataset, a tiny base model and a LoRA adapter saved beside it."""
    from datasets import Dataset
    from peft import LoraConfig, get_peft_model

    root = tmp_path_factory.mktemp("grpo_world")
    db = nums_database(root / "databases" / "nums" / "nums.sqlite")
    rows = Dataset.from_dict(
        {
            "question": list(QUESTIONS),
            "gold_sql": list(QUESTIONS.values()),
            "db_path": ["databases/nums/nums.sqlite"] * len(QUESTIONS),  # relative: resolved from the dataset
        }
    )
    rows.save_to_disk(str(root / "datasets" / "prompts"))
    Dataset.from_dict(
        {
            "question": ["How many rows?"],
            "gold_sql": ["SELECT count(*) FROM missing_table"],
            "db_path": [str(db)],
        }
    ).save_to_disk(str(root / "datasets" / "unscorable"))

    tokenizer = build_tokenizer()
    model = build_model(tokenizer, hidden_size=32)
    config = PromptConfig(sample_rows=0)
    schema = config.schema(db)
    pairs = [(config.messages(q, schema), answer) for q in QUESTIONS for answer in ANSWERS]
    train_to_answer(model, tokenizer, pairs, steps=60)
    model.save_pretrained(str(root / "base"))
    tokenizer.save_pretrained(str(root / "base"))

    lora = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM")
    adapter = get_peft_model(model, lora)
    adapter.save_pretrained(str(root / "adapter"))
    tokenizer.save_pretrained(str(root / "adapter"))
    (root / "adapter" / "run_summary.json").write_text(
        json.dumps({"prompt": {"sample_rows": 0, "max_value_chars": 40}})
    )
    return root


def _recipe(world: Path, out: Path, **overrides) -> Path:
    recipe = {
        "model_name_or_path": str(world / "base"),
        "adapter_path": str(world / "adapter"),
        "dataset_paths": [str(world / "datasets" / "prompts")],
        "output_dir": str(out),
        "num_generations": 4,
        "per_device_train_batch_size": 8,
        "max_completion_length": 24,
        "max_steps": 2,
        "logging_steps": 1,
        "learning_rate": 5.0e-3,
        "temperature": 1.0,
        "beta": 0.0,
        "sandbox_workers": 1,
        "num_threads": 1,
        "save_strategy": "no",
        "report_to": "none",
        "use_cpu": True,
        "seed": 0,
        "disable_tqdm": True,
    }
    recipe.update(overrides)
    path = out.parent / f"{out.name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(recipe))
    return path


def _parse(path: Path, *overrides: str):
    return parse_recipe(GRPO_ARGUMENTS, path, list(overrides))


# ----------------------------------------------------------------------------------------------------------
# Recipes and configuration
# ----------------------------------------------------------------------------------------------------------

GRPO_RECIPES = sorted(RECIPES.glob("*/grpo*.yaml"))


def test_every_grpo_recipe_parses_and_validates():
    assert len(GRPO_RECIPES) >= 7, GRPO_RECIPES
    for path in GRPO_RECIPES:
        script, model, training = _parse(path)
        assert training.reward_funcs, path
        assert len(training.reward_weights or training.reward_funcs) == len(training.reward_funcs), path
        assert training.output_dir.startswith("outputs/"), path


@pytest.mark.parametrize("path", GRPO_RECIPES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_grpo_recipe_samples_without_dropout_in_its_resolved_config(path, tmp_path):
    # TRL samples in train mode and the filter in eval mode: LoRA dropout on would make them different policies
    from slmsql_hub.recipes import save_resolved_config

    resolved = save_resolved_config(tmp_path / "config.yaml", *_parse(path))
    assert yaml.safe_load(resolved.read_text())["disable_dropout"] is True


@pytest.mark.parametrize("name", ["grpo_spider.yaml", "grpo_band.yaml", "grpo_band_lora_lr.yaml"])
def test_qwen_recipes_carry_the_study_settings(name):
    script, model, training = _parse(RECIPES / "qwen2.5-coder-1.5b" / name)
    assert model.model_name_or_path == "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    assert training.adapter_path == "Anurich/slmsql-qwen2.5-coder-1.5b"
    assert (model.lora_r, model.lora_alpha, model.lora_target_modules) == (32, 64, "all-linear")
    assert training.num_generations == 8
    assert training.beta == 0.0
    assert training.temperature == 0.8
    assert training.epsilon == 0.2
    assert training.max_steps == 400
    assert training.use_vllm is False
    assert (
        str(
            training.lr_scheduler_type.value
            if hasattr(training.lr_scheduler_type, "value")
            else training.lr_scheduler_type
        )
        == "cosine"
    )
    assert training.reward_funcs == ["execution", "format"]
    assert (training.reward_correct, training.reward_executes, training.format_reward_value) == (
        1.0,
        0.1,
        0.2,
    )
    expected_lr = 1e-5 if name == "grpo_band_lora_lr.yaml" else 1e-6
    assert training.learning_rate == expected_lr


def test_world_attempts_differ_only_in_their_prompts():
    from slmsql_hub.recipes import config_to_dict

    attempt1 = config_to_dict(*_parse(RECIPES / "world" / "grpo_attempt1.yaml"))
    band = config_to_dict(*_parse(RECIPES / "world" / "grpo_band.yaml"))
    assert attempt1["dataset_paths"] == ["outputs/world/datasets/grounding"]  # stage-2 SFT data: mastered
    assert band["dataset_paths"] == ["outputs/world/filter/band"]
    assert band["adapter_path"] == "outputs/world/sft_stage2"
    differing = sorted(k for k in attempt1 if attempt1[k] != band[k])
    assert differing == ["dataset_paths", "output_dir", "run_name"] or differing == [
        "dataset_paths",
        "output_dir",
    ]


def test_world_filter_samples_like_the_grpo_it_feeds():
    filter_recipe = yaml.safe_load((RECIPES / "world" / "filter.yaml").read_text())
    _, _, band = _parse(RECIPES / "world" / "grpo_band.yaml")
    assert filter_recipe["output_dir"] + "/band" == "outputs/world/filter/band"
    assert filter_recipe["max_new_tokens"] == band.max_completion_length
    assert filter_recipe["num_samples"] == band.num_generations
    assert (
        filter_recipe["temperature"] == band.temperature
    )  # the band is measured under the policy GRPO samples


def _limits_of(recipe: Path):
    from slmsql_hub.commands._recipe import load_recipe

    return load_recipe(recipe)[-1].sql_limits()


@pytest.mark.parametrize(
    "folder, stages",
    [
        ("world", ["filter.yaml", "grpo_band.yaml", "grpo_attempt1.yaml", "eval.yaml"]),
        (
            "world",
            ["filter_smoke.yaml", "grpo_band_smoke.yaml", "grpo_attempt1_smoke.yaml", "eval_smoke.yaml"],
        ),
        (
            "qwen2.5-coder-1.5b",
            [
                "filter_synsql.yaml",
                "grpo_band.yaml",
                "grpo_band_lora_lr.yaml",
                "grpo_spider.yaml",
                "eval_bird_spider.yaml",
            ],
        ),
    ],
)
def test_filter_reward_and_eval_recipes_judge_under_one_set_of_limits(folder, stages):
    limits = {name: _limits_of(RECIPES / folder / name) for name in stages}
    assert len(set(limits.values())) == 1, limits
    (one,) = set(limits.values())
    assert one.max_ops / 1e8 <= one.timeout_s / 2  # the op budget ends a runaway well before the wall clock


def test_the_reward_judges_under_the_recipes_limits_as_the_filter_does(tmp_path):
    # 20,000 rows: within the limits the filter and eval judge under, beyond the 10,000 the reward once
    # hard-coded, which turned a prediction the filter counted correct into a failure (0) in training.
    from slmsql_hub.filtering import FilterConfig
    from slmsql_hub.sql import Judge

    db = nums_database(tmp_path / "t.sqlite")
    big = "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c LIMIT 20000) SELECT n FROM c"
    filter_config = FilterConfig(model_name_or_path="m", benchmarks=["world:rl_pool"], world_root="w", output_dir="o")
    args = GRPOTrainingConfig(output_dir="o", report_to="none", use_cpu=True, sandbox_workers=1)
    rewards = grpo.build_reward_funcs(args)
    try:
        assert rewards[0].func.judge.sandbox.limits == args.sql_limits() == filter_config.sql_limits()
        assert rewards[0](completions=[big], gold_sql=[big], db_path=[str(db)]) == [1.0]
        with Judge(limits=filter_config.sql_limits(), workers=1) as judge:
            assert judge.judge(big, big, db).correct == 1
    finally:
        grpo.close_rewards(rewards)


def test_an_op_budget_the_deadline_would_cut_short_is_warned_about(caplog):
    with caplog.at_level("WARNING", logger="slmsql_hub"):
        GRPOTrainingConfig(
            output_dir="o", report_to="none", use_cpu=True, sql_timeout_s=5.0
        )  # 1e9 ops ~ 10 s
    assert any("lower sql_max_ops" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level("WARNING", logger="slmsql_hub"):
        GRPOTrainingConfig(
            output_dir="o", report_to="none", use_cpu=True, sql_timeout_s=5.0, sql_max_ops=10**8
        )
    assert not caplog.records


def test_reward_weights_must_match_reward_funcs():
    with pytest.raises(UsageError, match="one weight per reward"):
        GRPOTrainingConfig(output_dir="o", report_to="none", use_cpu=True, reward_weights=[1.0])


def test_unknown_reward_name_is_refused_with_the_choices():
    with pytest.raises(UsageError, match="choose from execution, format, result_f1"):
        GRPOTrainingConfig(output_dir="o", report_to="none", use_cpu=True, reward_funcs=["execution", "bleu"])


def test_trl_batch_inconsistency_becomes_a_usage_error():
    with pytest.raises(UsageError, match="divisible by num_generations"):
        GRPOTrainingConfig(
            output_dir="o", report_to="none", use_cpu=True, num_generations=3, per_device_train_batch_size=4
        )


def test_a_single_generation_per_prompt_is_refused():
    with pytest.raises(UsageError, match="at least 2 generations per prompt"):
        GRPOTrainingConfig(output_dir="o", report_to="none", use_cpu=True, num_generations=1)


def test_script_arguments_need_prompts_from_a_training_split():
    with pytest.raises(UsageError, match="no training prompts"):
        GRPOScriptArguments()
    with pytest.raises(UsageError, match="NAME:SPLIT"):
        GRPOScriptArguments(benchmarks=["spider"])
    with pytest.raises(UsageError, match="what EX is measured on"):
        GRPOScriptArguments(benchmarks=["spider:dev"], spider_root="x")
    # the evaluation splits are the registry's, so the world's probes are refused as well as dev and test
    with pytest.raises(UsageError, match="names probe_cross, what EX is measured on"):
        GRPOScriptArguments(benchmarks=["world:probe_cross"], world_root="x")
    assert GRPOScriptArguments(benchmarks=["world:rl_pool"], world_root="x").benchmarks == ["world:rl_pool"]


def test_benchmark_prompts_come_straight_from_the_release_files(tmp_path):
    from slmsql_hub.world import WorldSizes, build_world

    world = tmp_path / "world"
    build_world(world, sizes=WorldSizes(foundation=20, grounding=10, rl_pool=12, dev=10, test=10))
    script = GRPOScriptArguments(benchmarks=["world:rl_pool:5"], world_root=str(world))
    rows = grpo.load_prompt_rows(script)
    dataset = grpo.build_prompt_dataset(rows, PromptConfig(sample_rows=1), progress=False)
    assert len(dataset) == 5
    assert all(Path(p).is_absolute() and Path(p).is_file() for p in dataset["db_path"])
    assert all("CREATE TABLE" in prompt[-1]["content"] for prompt in dataset["prompt"])


def test_unknown_recipe_key_is_refused(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("dataset_paths: [d]\nmodel_name_or_path: m\noutput_dir: o\nreward_fn: [execution]\n")
    with pytest.raises(UsageError, match="reward_fn"):
        _parse(path)


def test_command_line_overrides_win_over_the_recipe(world, tmp_path):
    path = _recipe(world, tmp_path / "out")
    _, _, training = _parse(path, "--learning_rate", "2e-5", "--reward_funcs", "execution")
    assert training.learning_rate == 2e-5
    assert training.reward_funcs == ["execution"]


# ----------------------------------------------------------------------------------------------------------
# Data, rewards, checkpoints
# ----------------------------------------------------------------------------------------------------------


def test_prompt_dataset_keeps_gold_and_absolute_db_path_for_the_rewards(world):
    script = GRPOScriptArguments(dataset_paths=[str(world / "datasets" / "prompts")], prompt_sample_rows=0)
    rows = grpo.load_prompt_rows(script)
    dataset = grpo.build_prompt_dataset(rows, PromptConfig(sample_rows=0), progress=False)
    assert dataset.column_names == ["prompt", "gold_sql", "db_path"]
    assert len(dataset) == len(QUESTIONS)
    example = dataset[0]
    assert Path(example["db_path"]).is_absolute() and Path(example["db_path"]).is_file()
    assert example["prompt"][-1]["role"] == "user"
    assert "CREATE TABLE t" in example["prompt"][-1]["content"]
    assert list(QUESTIONS)[0] in example["prompt"][-1]["content"]


def test_prompt_settings_follow_the_sft_adapter_unless_the_recipe_sets_them(world):
    from_adapter, source = GRPOScriptArguments(dataset_paths=["d"]).resolve_prompt_config(
        str(world / "adapter")
    )
    assert (from_adapter.sample_rows, source) == (0, "adapter")
    from_recipe, source = GRPOScriptArguments(
        dataset_paths=["d"], prompt_sample_rows=2
    ).resolve_prompt_config(str(world / "adapter"))
    assert (from_recipe.sample_rows, source) == (2, "recipe")
    default, source = GRPOScriptArguments(dataset_paths=["d"]).resolve_prompt_config(None)
    assert (default.sample_rows, source) == (3, "default")


def test_rewards_come_from_the_recipe_with_its_values(world):
    args = GRPOTrainingConfig(
        output_dir="o",
        report_to="none",
        use_cpu=True,
        reward_funcs=["execution", "result_f1", "format"],
        reward_correct=2.0,
        reward_executes=0.5,
        sandbox_workers=1,
    )
    rewards = grpo.build_reward_funcs(args)
    try:
        db = str(world / "databases" / "nums" / "nums.sqlite")
        completions = [[{"role": "assistant", "content": a.replace("<|im_end|>", "")}] for a in ANSWERS]
        logged: dict[str, float] = {}
        kwargs = dict(
            gold_sql=["SELECT count(*) FROM t"] * 2, db_path=[db] * 2, log_metric=logged.__setitem__
        )
        assert [r.__name__ for r in rewards] == ["execution", "result_f1", "format"]
        assert rewards[0](completions=completions, **kwargs) == [2.0, 0.5]
        assert rewards[1](completions=completions, **kwargs) == [1.0, 0.0]
        assert rewards[2](completions=completions, **kwargs) == [0.2, 0.2]
        assert rewards[0].func.judge is rewards[1].func.judge  # one judge: each distinct query runs once
        assert "timing/reward/execution_s" in logged and "sql/correct_rate" in logged
    finally:
        grpo.close_rewards(rewards)


def test_exact_zero_std_counts_groups_trl_misses_by_float_rounding():
    import torch
    from trl.trainer.utils import nanstd

    nan = float("nan")
    rows = (
        [[1.0, 0.2]] * 8  # all correct: 1.2 each
        + [[0.1, 0.2]] * 8  # all wrong the same way: 0.3 each
        + [[0.0, 0.0]] * 8  # all failing without a block: 0.0 each
        + [[1.0, 0.2]] * 4
        + [[0.1, 0.2]] * 4  # mixed: variance
        + [[nan, nan]] * 7
        + [[1.0, 0.2]]  # one scorable sample: no std to speak of
    )
    rewards = torch.tensor(rows)
    assert grpo.frac_zero_std_groups(rewards, torch.ones(2), 8) == 3 / 5
    # TRL's own test (isclose(nanstd, 0), atol 1e-8) sees only the all-zero group: 1.2 and 0.3 sum inexactly
    totals = rewards.nansum(dim=1)
    totals[torch.isnan(rewards).all(dim=1)] = nan
    std = nanstd(totals.view(-1, 8), dim=1)
    assert torch.isclose(std, torch.zeros_like(std)).tolist() == [False, False, True, False, False]
    # weights apply before the comparison, unscorable rows are left out of a group
    weighted = torch.tensor([[1.0, 0.2]] * 4 + [[1.0, 0.0]] * 4)
    assert grpo.frac_zero_std_groups(weighted, torch.tensor([1.0, 0.0]), 8) == 1.0
    partly = torch.tensor([[1.0, 0.2]] * 6 + [[nan, nan]] * 2)
    assert grpo.frac_zero_std_groups(partly, torch.ones(2), 8) == 1.0


def test_flat_groups_compare_totals_or_each_function_as_trl_aggregates_them():
    import torch

    from slmsql_hub.training.zero_variance import flat_groups, zero_flat_advantages

    nan = float("nan")
    # equal totals from different parts (1.0 + 0.2 and 1.2 + 0.0): flat when summed first, not when each
    # function is normalised in its group first; a partly-None row counts its other functions
    rewards = torch.tensor([[1.0, 0.2], [1.2, 0.0]] * 2 + [[1.0, 0.2]] * 3 + [[1.0, nan]])
    assert flat_groups(rewards, torch.ones(2), 4)[0].tolist() == [True, False]
    assert flat_groups(rewards, torch.ones(2), 4, "normalize_then_sum")[0].tolist() == [False, True]
    # a group with nothing scorable is flat: TRL already zeroes its advantages
    flat, scorable = flat_groups(torch.full((4, 2), nan), torch.ones(2), 4)
    assert flat.tolist() == [True] and scorable.tolist() == [0]
    advantages = torch.full((4, 3), 1e-3)  # per-token advantages of a (samples, tokens) subclass
    flat_samples = torch.tensor([False] * 4 + [True] * 4)
    assert zero_flat_advantages(advantages, flat_samples, process_index=1).abs().sum().item() == 0.0
    assert torch.equal(zero_flat_advantages(advantages, flat_samples, process_index=0), advantages)


def test_resume_last_without_checkpoints_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="no complete checkpoint"):
        grpo.resolve_checkpoint("true", tmp_path)
    with pytest.raises(UsageError, match="not found"):
        grpo.resolve_checkpoint(str(tmp_path / "checkpoint-9"), tmp_path)


def test_missing_adapter_folder_names_the_fix(world, tmp_path):
    path = _recipe(world, tmp_path / "out", adapter_path=str(tmp_path / "no_adapter"))
    with pytest.raises(UsageError, match="adapter_config.json missing"):
        grpo.train_grpo(*_parse(path))


# ----------------------------------------------------------------------------------------------------------
# End to end (tiny): the run, its telemetry and summary, and the guards on bad runs
# ----------------------------------------------------------------------------------------------------------


def test_grpo_continues_the_sft_adapter_and_changes_it(world, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "README.md").write_text("our card\n")  # the project's card must survive TRL's and PEFT's drafts
    summary = grpo.train_grpo(*_parse(_recipe(world, out, min_relative_update=0.5)))

    assert summary["status"] == "completed"
    assert summary["fresh_adapter"] is False
    assert summary["steps"] == 2
    assert summary["adapter_checksum"]["changed"] is True
    assert summary["adapter_checksum"]["before"] != summary["adapter_checksum"]["after"]
    assert summary["guards"]["failed"] == []
    assert "clipping" in summary["guards"]["warned"]  # epsilon 0.2 with one iteration: the ratio is 1
    update = summary["adapter_update"]  # how far the effective update moved, relative to the adapted weights
    assert 0.0 < update["relative_norm"] < 0.5 and update["modules_changed"] == update["modules"] > 0
    assert update["relative_to_adapter"] is None  # the fixture's adapter starts at B = 0: no SFT update yet
    assert update["min_relative_update"] == 0.5 and "adapter_update" in summary["guards"]["warned"]
    assert summary["data"]["prompts"] == len(QUESTIONS) and summary["prompt"]["source"] == "adapter"
    assert summary["data"]["database_names"] == ["nums"]  # what the Space calls trained on

    records = read_telemetry(out / "telemetry.jsonl")
    assert [r["step"] for r in records] == [1, 2]
    for key in (
        "reward",
        "reward_std",
        "frac_reward_zero_std",
        "grad_norm",
        "learning_rate",
        "completions/mean_length",
        "rewards/execution/mean",
        "rewards/format/std",
        "clip_ratio/region_mean",
        "entropy",
        "sql/correct_rate",
        "sql/frac_correct_zero_std",
        "timing/reward/execution_s",
        "step_time",
        "frac_reward_zero_std_exact",
    ):
        assert key in records[0], key
    assert any(r["reward_std"] > 0 for r in records)  # the two answers give every group variance

    on_disk = json.loads((out / "run_summary.json").read_text())
    assert on_disk["adapter_checksum"] == summary["adapter_checksum"]
    assert on_disk["adapter_update"] == summary["adapter_update"]
    assert on_disk["config"]["adapter_path"] == str(world / "adapter")
    assert on_disk["telemetry"]["steps_logged"] == 2
    # the limits the rewards judged under, the gold check, and the sandbox's own counts
    assert on_disk["limits"] == dataclasses.asdict(_parse(out / "config.yaml")[2].sql_limits())
    assert on_disk["data"]["unscorable_gold"] == 0
    assert (
        on_disk["sandbox"]["requests"] > 0 and on_disk["sandbox"]["cache_hits"] > 0
    )  # golds: cached at the check
    assert {"worker_kills", "infra_failures"} <= set(on_disk["sandbox"])
    assert all(r["sql/infra_failure_rate"] == 0.0 for r in records)
    assert (out / "README.md").read_text() == "our card\n"
    assert on_disk["trl_model_card"] == "trl_model_card.md" and (out / "trl_model_card.md").is_file()
    assert (out / "adapter_model.safetensors").is_file() and (out / "config.yaml").is_file()
    # config.yaml is a recipe that reproduces the run
    _, _, again = _parse(out / "config.yaml")
    assert again.adapter_path == str(world / "adapter") and again.max_steps == 2


def test_fresh_lora_adapter_when_no_adapter_is_given(world, tmp_path):
    out = tmp_path / "fresh"
    path = _recipe(world, out, adapter_path=None, lora_r=4, lora_alpha=8, lora_dropout=0.0, max_steps=1)
    summary = grpo.train_grpo(*_parse(path))
    assert summary["fresh_adapter"] is True
    config = json.loads((out / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"]) == (4, 8)
    assert summary["parameters"]["trainable"] > 0


def test_frozen_adapter_fails_fast_before_training(world, tmp_path, monkeypatch):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    def load_frozen(model_args, adapter_path):  # the trl#6700 mistake: no is_trainable=True
        base = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
        return (
            PeftModel.from_pretrained(base, adapter_path),
            None,
            AutoTokenizer.from_pretrained(adapter_path),
        )

    monkeypatch.setattr(grpo, "load_model_and_tokenizer", load_frozen)
    out = tmp_path / "frozen"
    with pytest.raises(UsageError, match="0 trainable parameters"):
        grpo.train_grpo(*_parse(_recipe(world, out)))
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["status"] == "failed"
    assert summary["guards"]["failed"] == ["trainable_parameters"]
    assert not (out / "telemetry.jsonl").exists() or read_telemetry(out / "telemetry.jsonl") == []


def test_unchanged_adapter_is_flagged_when_no_group_has_reward_variance(world, tmp_path):
    out = tmp_path / "unchanged"
    path = _recipe(
        world,
        out,
        reward_funcs=["execution"],
        reward_correct=0.0,  # a flat reward: every sample gets 0, so no group has variance
        reward_executes=0.0,
        per_device_train_batch_size=4,
        max_steps=1,
    )
    assert cli.main(["train", "grpo", "--config", str(path)]) == 1  # the run completes, the guard fails it
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["guards"]["failed"] == ["adapter_changed"]
    assert summary["adapter_checksum"]["changed"] is False
    records = read_telemetry(out / "telemetry.jsonl")
    assert records[0]["frac_reward_zero_std"] == 1.0
    assert records[0]["grad_norm"] == 0.0


def test_a_prompt_whose_gold_fails_is_dropped_before_training_and_counted(world, tmp_path):
    # Its rewards would all be None at every step (TRL keeps a format-only reward if any reward is not None).
    out = tmp_path / "mixed"
    datasets = [str(world / "datasets" / "prompts"), str(world / "datasets" / "unscorable")]
    summary = grpo.train_grpo(*_parse(_recipe(world, out, dataset_paths=datasets, max_steps=1)))
    assert summary["data"]["used"] == len(QUESTIONS) + 1
    assert summary["data"]["unscorable_gold"] == 1 and summary["data"]["gold_infra_failures"] == 0
    assert summary["data"]["prompts"] == len(QUESTIONS)
    assert read_telemetry(out / "telemetry.jsonl")[0]["sql/unscorable_rate"] == 0.0


def test_a_run_whose_every_gold_fails_exits_2_with_one_line(world, tmp_path, capsys):
    path = _recipe(world, tmp_path / "out", dataset_paths=[str(world / "datasets" / "unscorable")])
    assert cli.main(["train", "grpo", "--config", str(path)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]  # not the progress bar
    assert len(err) == 1 and "gold queries fails" in err[0] and "sql_max_ops" in err[0]
    assert not (tmp_path / "out" / "run_summary.json").exists()


def test_tensorboard_and_completion_logs_are_written(world, tmp_path):
    import tensorboard  # noqa: F401  (a dev dependency: a missing install fails here instead of skipping)

    out = tmp_path / "tb"
    path = _recipe(world, out, max_steps=1, report_to=["tensorboard"], log_completions=True)
    summary = grpo.train_grpo(*_parse(path))
    assert summary["steps"] == 1
    assert list(out.rglob("events.out.tfevents.*")), "no TensorBoard event file"
    tables = sorted((out / "completions").glob("*.parquet"))
    assert tables, "log_completions wrote no table"
    import pandas

    table = pandas.read_parquet(tables[0])
    assert {"prompt", "completion", "execution", "format", "advantage", "sql_verdict"} <= set(table.columns)


@pytest.mark.slow  # two fresh interpreters (~10 s)
def test_report_to_trackio_logs_every_step_with_the_sql_metrics_offline(world, tmp_path):
    """``report_to: trackio`` with no Space: Trackio writes a local project (``TRACKIO_DIR``), read back here
    through Trackio's own storage; each step's ``sql/*`` values equal ``telemetry.jsonl``'s. A subprocess, since
    Trackio reads ``TRACKIO_DIR`` when it is imported."""
    out, tracked = tmp_path / "tracked", tmp_path / "trackio"
    path = _recipe(world, out, report_to=["trackio"], project="slmsql-test", run_name="band")
    command = [sys.executable, "-m", "slmsql_hub.cli", "train", "grpo", "--config", str(path)]
    env = {**_env(), "TRACKIO_DIR": str(tracked)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = trackio_logs(tracked, "slmsql-test")["band"]
    logged = {row["train/global_step"]: row for row in rows if "train/sql/correct_rate" in row}
    telemetry = read_telemetry(out / "telemetry.jsonl")
    assert sorted(logged) == [r["step"] for r in telemetry] == [1, 2]
    for record in telemetry:
        for name in ("sql/correct_rate", "sql/exec_error_rate", "sql/frac_correct_zero_std"):
            assert logged[record["step"]][f"train/{name}"] == pytest.approx(record[name]), name


def test_slmsql_train_grpo_prints_the_headline(world, tmp_path, capsys):
    from slmsql_hub.cli import main as slmsql

    out = tmp_path / "cli"
    assert slmsql(["train", "grpo", "--config", str(_recipe(world, out))]) == 0
    headline = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert headline["kind"] == "grpo" and headline["steps"] == 2
    assert headline["guards_failed"] == [] and "clipping" in headline["guards_warned"]
    assert "mean_frac_reward_zero_std" in headline


def test_bad_override_exits_2_with_one_line(world, tmp_path, capsys):
    path = _recipe(world, tmp_path / "bad")
    assert cli.main(["train", "grpo", "--config", str(path), "--reward_funcs", "bleu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bleu" in err[0]


def test_fewer_prompts_than_one_generation_round_is_refused_before_training(world, tmp_path):
    """4 prompts, but 8 per device x 4 accumulation steps / 4 generations = 8 prompts per round: TRL's sampler
    drops the incomplete round and would train 0 steps (then blame the reward variance); say why up front."""
    out = tmp_path / "short"
    path = _recipe(world, out, gradient_accumulation_steps=4)
    with pytest.raises(UsageError, match=r"4 prompt\(s\), but one generation round takes 8 .* 0 steps"):
        grpo.train_grpo(*_parse(path))
    assert not (out / "run_summary.json").exists()


def test_an_empty_band_exits_2_with_one_line_naming_the_fix(world, tmp_path, capsys):
    from datasets import load_from_disk

    empty = tmp_path / "band"
    load_from_disk(str(world / "datasets" / "prompts")).select([]).save_to_disk(str(empty))
    path = _recipe(world, tmp_path / "out", dataset_paths=[str(empty)])
    capsys.readouterr()  # save_to_disk's own progress bar
    assert cli.main(["train", "grpo", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "band" in err[0] and "pass_rate_low" in err[0]
    assert not (tmp_path / "out" / "run_summary.json").exists()


# ----------------------------------------------------------------------------------------------------------
# Slow: kill -9 then resume; two processes under accelerate
# ----------------------------------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env["OMP_NUM_THREADS"] = "1"
    return env


@pytest.mark.slow
def test_kill_9_then_resume_reaches_the_same_final_step_with_each_step_logged_once(world, tmp_path):
    out = tmp_path / "resume"
    path = _recipe(world, out, max_steps=8, save_strategy="steps", save_steps=2, disable_tqdm=True)
    command = [sys.executable, "-m", "slmsql_hub", "train", "grpo", "--config", str(path)]
    process = subprocess.Popen(command, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    try:
        # Wait until a checkpoint exists and at least one step past it is logged, then kill -9 mid-run.
        while time.time() < deadline and process.poll() is None:
            steps = [r["step"] for r in read_telemetry(out / "telemetry.jsonl")]
            if (out / "checkpoint-4").is_dir() and steps and max(steps) >= 5:
                break
            time.sleep(0.2)
        assert process.poll() is None, "the run finished before it could be killed; raise max_steps"
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    killed_at = max(r["step"] for r in read_telemetry(out / "telemetry.jsonl"))
    assert 5 <= killed_at < 8 and not (out / "run_summary.json").exists()  # steps past checkpoint-4 to redo

    resumed = subprocess.run(
        [*command, "--resume_from_checkpoint", "last"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["steps"] == 8
    assert Path(summary["resumed_from"]).name.startswith("checkpoint-")
    steps = [r["step"] for r in read_telemetry(out / "telemetry.jsonl")]
    assert steps == list(range(1, 9))


def _launch_two_processes(recipe: Path) -> subprocess.CompletedProcess:
    """``accelerate launch -m slmsql_hub train grpo`` on two CPU processes."""
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(RECIPES / "accelerate_configs" / "cpu_2proc.yaml"),
        "--main_process_port",
        str(free_port()),
        "-m",
        "slmsql_hub",
        "train",
        "grpo",
        "--config",
        str(recipe),
    ]
    return subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_two_processes_under_accelerate_on_cpu(world, tmp_path):
    out = tmp_path / "ddp"
    # Two processes x 4 completions = 8 per step: each prompt's 4 samples may land on either process.
    path = _recipe(world, out, per_device_train_batch_size=4, max_steps=2)
    result = _launch_two_processes(path)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["processes"] == 2
    assert summary["steps"] == 2
    assert summary["adapter_checksum"]["changed"] is True
    steps = [r["step"] for r in read_telemetry(out / "telemetry.jsonl")]
    assert steps == [1, 2]  # rank 0 only: one line per step


@pytest.mark.slow
def test_flat_groups_split_across_two_processes_give_zero_grad_norm(world, tmp_path):
    # Each group of 8 samples spans both processes (4 per device): each zeroes its own slice of the gathered
    # batch's flat groups, so the step is exactly 0 on both and the adapter stays bit-identical.
    out = tmp_path / "ddp_flat"
    path = _recipe(
        world, out, reward_funcs=["format"], num_generations=8, per_device_train_batch_size=4, temperature=0.7
    )
    result = _launch_two_processes(path)
    assert result.returncode == 1, result.stderr[-3000:]  # the adapter_changed guard fails the run
    summary = json.loads((out / "run_summary.json").read_text())
    records = read_telemetry(out / "telemetry.jsonl")
    assert [r["frac_reward_zero_std_exact"] for r in records] == [1.0, 1.0]
    assert [r["grad_norm"] for r in records] == [0.0, 0.0]
    assert (
        summary["adapter_update"]["relative_norm"] == 0.0 and summary["adapter_checksum"]["changed"] is False
    )


@pytest.mark.parametrize("scale_rewards", ["group", "batch", "none"])
def test_a_step_made_only_of_flat_groups_has_zero_grad_norm_and_leaves_the_adapter_bit_identical(
    world, tmp_path, scale_rewards
):
    # The format reward alone, and every completion carries a ```sql block: each group of 8 is 0.2 x 8, whose
    # float32 mean is one ulp off on CPU, so TRL's advantages were ~1e-4 and Adam made full-size steps from them.
    out = tmp_path / f"flat_{scale_rewards}"
    path = _recipe(
        world, out, reward_funcs=["format"], num_generations=8, scale_rewards=scale_rewards, temperature=0.7
    )
    summary = grpo.train_grpo(*_parse(path))
    records = read_telemetry(out / "telemetry.jsonl")
    assert [r["frac_reward_zero_std_exact"] for r in records] == [1.0, 1.0]  # every group flat...
    assert [r["rewards/format/mean"] for r in records] == pytest.approx(
        [0.2, 0.2]
    )  # ...at 0.2: all have a block
    assert [r["grad_norm"] for r in records] == [0.0, 0.0]
    assert summary["adapter_checksum"]["changed"] is False
    assert summary["guards"]["failed"] == ["adapter_changed"]
    assert (
        summary["adapter_update"]["relative_norm"] == 0.0 and "adapter_update" in summary["guards"]["warned"]
    )


def test_every_reward_of_the_table_builds_from_a_recipe_with_its_values():
    from slmsql_hub.rewards import REWARDS
    from slmsql_hub.training.grpo_rewards import build_reward_funcs, close_rewards

    args = GRPOTrainingConfig(output_dir="o", report_to="none", use_cpu=True, reward_funcs=list(REWARDS),
                              reward_correct=3.0, format_reward_value=0.5)  # fmt: skip
    rewards = build_reward_funcs(args)
    try:
        assert [r.__name__ for r in rewards] == list(REWARDS)
        by_name = {r.__name__: r.func for r in rewards}
        assert (by_name["execution"].correct, by_name["format"].value) == (3.0, 0.5)
    finally:
        close_rewards(rewards)


def test_a_dotted_path_reward_trains_and_is_recorded(world, tmp_path, monkeypatch):
    (tmp_path / "r33_grpo_rewards.py").write_text(
        "def length_penalty(prompts, completions, **kwargs):\n"
        "    return [-len(str(c)) / 100 for c in completions]\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "path_reward"
    spec = "r33_grpo_rewards:length_penalty"
    summary = grpo.train_grpo(*_parse(_recipe(world, out, max_steps=1, reward_funcs=["execution", spec])))
    assert summary["steps"] == 1
    assert summary["rewards"][spec] == {"path": spec, "module": "r33_grpo_rewards", "function": "length_penalty",
                                        "distribution": None, "version": None}  # fmt: skip
    logged = read_telemetry(out / "telemetry.jsonl")
    assert any(key.startswith("rewards/length_penalty/") for row in logged for key in row), logged
