"""The shared configuration vocabulary (recipes.py, data/prompts.py, data/config.py): prompt settings and benchmarks,
old spellings."""

from __future__ import annotations

import json

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


def test_the_old_spellings_are_gone_one_line_names_the_unknown_key(tmp_path):
    """0.1.0 was never released: benchmark_split, data_root, world_dir... are unknown keys, not silent upgrades."""
    from slmsql_hub.training.configs import SFT_ARGUMENTS

    recipe = tmp_path / "sft_old.yaml"
    recipe.write_text("model_name_or_path: m\noutput_dir: o\nreport_to: none\nbenchmarks: [bird:train]\n"
                      "bird_root: data/bird\nbenchmark_split: train\n")  # fmt: skip
    with pytest.raises(UsageError, match="unknown key.*benchmark_split"):
        parse_recipe(SFT_ARGUMENTS, recipe)
    with pytest.raises(UsageError, match="benchmarks entry 'bird=data/bird'"):
        BenchmarkArguments(benchmarks=["bird=data/bird"])


def test_a_saved_config_records_benchmark_roots_only_when_set(tmp_path):
    from slmsql_hub.recipes import save_resolved_config

    text = save_resolved_config(tmp_path / "a.yaml", BenchmarkArguments(["bird:train"], bird_root="b")).read_text()
    assert "bird_root: b" in text and "benchmark_roots" not in text  # the files of a run stay as they were
    mini = BenchmarkArguments(["bird_mini_dev:dev"], benchmark_roots="bird_mini_dev=data/minidev")
    text = save_resolved_config(tmp_path / "b.yaml", mini).read_text()
    assert "benchmark_roots:\n- bird_mini_dev=data/minidev" in text
    assert parse_recipe((BenchmarkArguments,), tmp_path / "b.yaml")[0].root("bird_mini_dev") == "data/minidev"


def test_a_root_goes_in_one_place_per_benchmark():
    with pytest.raises(UsageError, match="bird has its own field; write `bird_root: x`"):
        BenchmarkArguments(["bird:train"], benchmark_roots=["bird=x"])
    with pytest.raises(UsageError, match=r"needs benchmark_roots.*`benchmark_roots: \[bird_mini_dev=data/bird_mini_dev\]`"):
        BenchmarkArguments(["bird_mini_dev:dev"])
    with pytest.raises(UsageError, match="must be NAME=ROOT"):
        BenchmarkArguments(["bird_mini_dev:dev"], benchmark_roots=["data/minidev"])
