"""The shared configuration vocabulary (recipes.py, data/prompts.py, data/config.py): prompt settings and benchmarks,
old spellings."""

from __future__ import annotations

import json
import logging

import pytest

from slmsql_hub.data.config import BenchmarkArguments
from slmsql_hub.data.prompts import (
    DEFAULT_PROMPT_MAX_VALUE_CHARS,
    DEFAULT_PROMPT_SAMPLE_ROWS,
    PromptArguments,
    resolve_prompt_config,
)
from slmsql_hub.errors import UsageError
from slmsql_hub.recipes import parse_recipe


def _adapter(tmp_path, prompt):
    (tmp_path / "run_summary.json").write_text(json.dumps({"prompt": prompt}))
    return tmp_path


def test_prompt_settings_come_from_the_recipe_then_the_adapter_then_the_defaults(tmp_path):
    adapter = _adapter(tmp_path, {"sample_rows": 0, "max_value_chars": 12})
    config, source = resolve_prompt_config(adapter, sample_rows=2)
    assert (config.sample_rows, config.max_value_chars, source) == (2, 12, "recipe")
    config, source = resolve_prompt_config(adapter)
    assert (config.sample_rows, config.max_value_chars, source) == (0, 12, "adapter")
    config, source = resolve_prompt_config("org/hub-adapter")
    assert (config.sample_rows, config.max_value_chars, source) == (3, 40, "default")
    assert (DEFAULT_PROMPT_SAMPLE_ROWS, DEFAULT_PROMPT_MAX_VALUE_CHARS) == (3, 40)


def test_a_broken_adapter_summary_is_one_usage_error(tmp_path):
    (tmp_path / "run_summary.json").write_text("{not json")
    with pytest.raises(UsageError, match="not valid JSON"):
        resolve_prompt_config(tmp_path)
    with pytest.raises(UsageError, match="set every prompt_"):  # the prompt's text would come from it
        resolve_prompt_config(tmp_path, 1, 5)
    # Every field set: the file is never read.
    text = {"system_prompt": "", "template": "{schema} {question}", "evidence_template": ""}
    assert resolve_prompt_config(tmp_path, 1, 5, **text)[1] == "recipe"


def test_prompt_fields_are_checked():
    with pytest.raises(UsageError, match="prompt_sample_rows must be >= 0"):
        PromptArguments(prompt_sample_rows=-1)
    with pytest.raises(UsageError, match="prompt_max_value_chars must be >= 1"):
        PromptArguments(prompt_max_value_chars=0)
    args = PromptArguments()
    args.fill_prompt_defaults()
    assert (args.prompt_sample_rows, args.prompt_max_value_chars) == (3, 40)


def test_benchmarks_are_name_split_limit_with_one_root_field_each():
    args = BenchmarkArguments(benchmarks=["world:dev:200", "bird:train"], world_root="w", bird_root="b")
    assert [(e.name, e.split, e.limit) for e in args.benchmark_entries()] == [("world", "dev", 200), ("bird", "train", None)]
    assert (args.root("world"), args.root("bird")) == ("w", "b")
    with pytest.raises(UsageError, match="LIMIT must be a whole number"):
        BenchmarkArguments(benchmarks=["world:dev:lots"], world_root="w")


def _deprecations(caplog):
    return [r for r in caplog.records if "deprecated" in r.getMessage()]


def test_the_old_sft_spelling_still_loads_with_one_deprecation_line(tmp_path, caplog):
    recipe = tmp_path / "sft_old.yaml"
    recipe.write_text(
        "model_name_or_path: m\noutput_dir: o\nreport_to: none\n"
        "benchmarks: [bird=data/bird, spider=data/spider]\nbenchmark_split: train\nbenchmark_limit: 50\n"
    )
    from slmsql_hub.training.configs import SFT_ARGUMENTS

    with caplog.at_level(logging.WARNING, logger="slmsql_hub.recipes"):
        script, _, _ = parse_recipe(SFT_ARGUMENTS, recipe)
    assert script.benchmarks == ["bird:train:50", "spider:train:50"]
    assert (script.bird_root, script.spider_root) == ("data/bird", "data/spider")
    assert (script.benchmark_split, script.benchmark_limit) == (None, None)
    (line,) = _deprecations(caplog)
    assert "benchmarks: [bird:train:50, spider:train:50]" in line.getMessage()
    assert "bird_root: data/bird" in line.getMessage()


def test_the_old_filter_and_eval_spellings_still_load_with_one_deprecation_line_each(caplog):
    with caplog.at_level(logging.WARNING, logger="slmsql_hub.recipes"):
        old_filter = BenchmarkArguments(benchmark="world", data_root="outputs/world", split="rl_pool", limit=30)
    assert (old_filter.benchmarks, old_filter.world_root) == (["world:rl_pool:30"], "outputs/world")
    assert len(_deprecations(caplog)) == 1
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="slmsql_hub.recipes"):
        old_eval = BenchmarkArguments(benchmarks=["world:dev"], world_dir="outputs/world")
    assert (old_eval.world_root, old_eval.world_dir) == ("outputs/world", None)
    (line,) = _deprecations(caplog)
    assert "world_root: outputs/world" in line.getMessage()


def test_an_old_run_config_with_only_the_default_benchmark_split_loads_silently(caplog):
    with caplog.at_level(logging.WARNING, logger="slmsql_hub.recipes"):
        args = BenchmarkArguments(benchmarks=[], benchmark_split="train")
    assert args.benchmark_split is None and not _deprecations(caplog)


def test_a_saved_config_keeps_the_new_spelling_only(tmp_path):
    from slmsql_hub.recipes import save_resolved_config

    args = BenchmarkArguments(benchmarks=["bird=data/bird"], benchmark_split="train")
    text = save_resolved_config(tmp_path / "config.yaml", args).read_text()
    assert "bird_root: data/bird" in text and "- bird:train" in text
    assert "benchmark_split" not in text and "data_root" not in text and "world_dir" not in text


def test_an_old_spelling_that_disagrees_with_the_new_one_is_one_error_not_silently_dropped():
    with pytest.raises(UsageError, match="world_dir elsewhere disagrees with world_root: outputs/world"):
        BenchmarkArguments(benchmarks=["world:dev"], world_root="outputs/world", world_dir="elsewhere")
    with pytest.raises(UsageError, match="both given; keep one"):
        BenchmarkArguments(benchmarks=["world:rl_pool"], world_root="outputs/world", data_root="elsewhere")
    same = BenchmarkArguments(benchmarks=["world:dev"], world_root="outputs/world", world_dir="outputs/world")
    assert same.world_root == "outputs/world"
