"""The training recipe dataclasses: YAML + overrides, validation that names the fix, resolved configs."""

from __future__ import annotations

import argparse

import pytest
import yaml

from slmsql_hub.errors import UsageError
from slmsql_hub.recipes import parse_recipe, save_resolved_config
from slmsql_hub.training.configs import (
    BASE_ARGUMENTS,
    SFT_ARGUMENTS,
    BaseScriptArguments,
    GRPOTrainingConfig,
    ModelArguments,
    SFTScriptArguments,
    SFTTrainingConfig,
    TinyModelArguments,
)


def _write(tmp_path, text, name="sft.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


SFT_RECIPE = """
model_name_or_path: outputs/world/base
dataset_paths: [outputs/world/datasets/foundation]
output_dir: outputs/world/sft_stage1
learning_rate: 5.0e-4
max_steps: 7
report_to: none
"""


def test_recipe_values_fill_the_dataclasses(tmp_path):
    script, model, training = parse_recipe(SFT_ARGUMENTS, _write(tmp_path, SFT_RECIPE))
    assert script.dataset_paths == ["outputs/world/datasets/foundation"]
    assert model.model_name_or_path == "outputs/world/base"
    assert training.learning_rate == 5.0e-4
    assert training.max_steps == 7
    assert training.output_dir == "outputs/world/sft_stage1"


def test_command_line_override_wins_over_the_recipe(tmp_path):
    _, model, training = parse_recipe(
        SFT_ARGUMENTS, _write(tmp_path, SFT_RECIPE), ["--learning_rate", "1e-4", "--lora_r", "8"]
    )
    assert training.learning_rate == 1e-4
    assert model.lora_r == 8
    assert training.max_steps == 7  # untouched recipe value stays


def test_override_can_replace_a_list_field(tmp_path):
    script, _, _ = parse_recipe(SFT_ARGUMENTS, _write(tmp_path, SFT_RECIPE), ["--dataset_paths", "a", "b"])
    assert script.dataset_paths == ["a", "b"]


def test_yaml_exponent_without_a_dot_is_still_a_float(tmp_path):
    # PyYAML reads 5e-4 (no dot) as a string; the parser must still turn it into a float.
    _, _, training = parse_recipe(SFT_ARGUMENTS, _write(tmp_path, SFT_RECIPE.replace("5.0e-4", "5e-4")))
    assert training.learning_rate == pytest.approx(5e-4)


def test_defaults_are_the_studys_lora_adapter(tmp_path):
    _, model, training = parse_recipe(SFT_ARGUMENTS, _write(tmp_path, SFT_RECIPE))
    assert (model.lora_r, model.lora_alpha, model.lora_target_modules) == (32, 64, "all-linear")
    assert training.stage == 1 and training.adapter_path is None


def test_stage_two_without_adapter_path_names_the_fix(tmp_path):
    with pytest.raises(UsageError, match="set adapter_path to the stage-1 output folder"):
        parse_recipe(SFT_ARGUMENTS, _write(tmp_path, SFT_RECIPE + "stage: 2\n"))


def test_stage_one_with_an_adapter_path_is_refused(tmp_path):
    with pytest.raises(UsageError, match="only read by stage 2"):
        parse_recipe(SFT_ARGUMENTS, _write(tmp_path, SFT_RECIPE + "adapter_path: out/sft1\n"))


def test_stage_must_be_one_or_two():
    with pytest.raises(UsageError, match="stage must be 1"):
        SFTTrainingConfig(output_dir="o", stage=3, report_to="none")


def test_missing_dataset_names_the_fix(tmp_path):
    recipe = SFT_RECIPE.replace("dataset_paths: [outputs/world/datasets/foundation]\n", "")
    with pytest.raises(UsageError, match="nothing to train on: set dataset_paths"):
        parse_recipe(SFT_ARGUMENTS, _write(tmp_path, recipe))


def test_missing_model_names_the_fix(tmp_path):
    recipe = SFT_RECIPE.replace("model_name_or_path: outputs/world/base\n", "")
    with pytest.raises(UsageError, match="model_name_or_path is not set"):
        parse_recipe(SFT_ARGUMENTS, _write(tmp_path, recipe))


@pytest.mark.parametrize("alpha", [0, -16])
def test_lora_alpha_must_be_positive(alpha):
    with pytest.raises(UsageError, match="lora_alpha must be > 0"):
        ModelArguments(model_name_or_path="m", lora_alpha=alpha)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lora_r": 0}, "lora_r must be >= 1"),
        ({"lora_dropout": 1.0}, "lora_dropout must be in"),
        ({"dtype": "float8"}, "dtype must be one of"),
        ({"lora_target_modules": ["all-linear", "q_proj"]}, "list it alone"),
        ({"lora_target_modules": ["q_proj", "lm_head"]}, "must not include lm_head"),
    ],
)
def test_bad_model_arguments_name_the_fix(kwargs, message):
    with pytest.raises(UsageError, match=message):
        ModelArguments(model_name_or_path="m", **kwargs)


def test_target_modules_given_as_a_string_or_names_reach_peft_as_it_expects():
    from trl import get_peft_config

    assert get_peft_config(ModelArguments(model_name_or_path="m", lora_target_modules="all-linear")).target_modules == (
        "all-linear"
    )
    # One name stays a list: PEFT would read a lone string as a regular expression.
    single = ModelArguments(model_name_or_path="m", lora_target_modules=["q_proj"])
    assert single.lora_target_modules == ["q_proj"]
    named = get_peft_config(ModelArguments(model_name_or_path="m", lora_target_modules=["q_proj", "v_proj"]))
    assert named.target_modules == {"q_proj", "v_proj"}


def test_model_arguments_refuse_full_fine_tuning_and_quantized_loading():
    with pytest.raises(UsageError, match="use_peft: true"):
        ModelArguments(model_name_or_path="m", use_peft=False)
    with pytest.raises(UsageError, match="load_in_"):
        ModelArguments(model_name_or_path="m", load_in_4bit=True)


def test_unknown_recipe_key_is_refused_by_name(tmp_path):
    with pytest.raises(UsageError, match="unknown key.*learnin_rate"):
        parse_recipe(SFT_ARGUMENTS, _write(tmp_path, SFT_RECIPE + "learnin_rate: 0.1\n"))


def test_unknown_override_is_refused_by_name(tmp_path):
    with pytest.raises(UsageError, match="unknown argument.*--no_such_field"):
        parse_recipe(SFT_ARGUMENTS, _write(tmp_path, SFT_RECIPE), ["--no_such_field", "1"])


def test_abbreviated_override_is_refused_instead_of_setting_the_field_it_prefixes(tmp_path):
    with pytest.raises(UsageError, match="unknown argument.*--learning_r "):
        parse_recipe(SFT_ARGUMENTS, _write(tmp_path, SFT_RECIPE), ["--learning_r", "1e-4"])
    *_, training = parse_recipe(SFT_ARGUMENTS, _write(tmp_path, SFT_RECIPE), ["--learning_rate", "1e-4"])
    assert training.learning_rate == 1e-4


def test_bad_value_in_an_override_or_the_recipe_is_one_usage_error_naming_the_field(tmp_path, capsys):
    with pytest.raises(UsageError, match="--max_steps.*invalid int value: 'abc'"):
        parse_recipe(SFT_ARGUMENTS, _write(tmp_path, SFT_RECIPE), ["--max_steps", "abc"])
    with pytest.raises(UsageError, match="--max_steps.*invalid int value: 'ten'"):
        parse_recipe(SFT_ARGUMENTS, _write(tmp_path, SFT_RECIPE + "max_steps: ten\n"))
    assert capsys.readouterr().err == ""  # argparse printed no usage block: the one line is the caller's


def test_missing_or_malformed_recipe_file_is_one_clear_error(tmp_path):
    with pytest.raises(UsageError, match="recipe not found"):
        parse_recipe(SFT_ARGUMENTS, tmp_path / "absent.yaml")
    with pytest.raises(UsageError, match="must be a YAML mapping"):
        parse_recipe(SFT_ARGUMENTS, _write(tmp_path, "- a\n- b\n"))


def test_benchmarks_entries_must_be_name_split_with_a_root():
    with pytest.raises(UsageError, match="NAME:SPLIT"):
        SFTScriptArguments(benchmarks=["bird"])
    with pytest.raises(UsageError, match="unknown benchmark 'imdb'"):
        SFTScriptArguments(benchmarks=["imdb:train"])
    with pytest.raises(UsageError, match="needs bird_root"):
        SFTScriptArguments(benchmarks=["bird:train"])
    with pytest.raises(UsageError, match="listed twice"):
        SFTScriptArguments(benchmarks=["bird:train", "bird:dev"], bird_root="a")


def test_bf16_null_resolves_to_what_the_machine_supports():
    from transformers.utils import is_torch_bf16_gpu_available

    config = SFTTrainingConfig(output_dir="o", bf16=None, report_to="none")
    assert config.bf16 is is_torch_bf16_gpu_available()


def test_bf16_true_without_a_bf16_gpu_names_the_fix():
    from transformers.utils import is_torch_bf16_gpu_available

    if is_torch_bf16_gpu_available():
        assert SFTTrainingConfig(output_dir="o", bf16=True, report_to="none").bf16 is True
    else:
        with pytest.raises(UsageError, match="set `bf16: null`"):
            SFTTrainingConfig(output_dir="o", bf16=True, report_to="none")


def test_resolved_config_reads_back_to_the_same_values(tmp_path):
    parsed = parse_recipe(
        SFT_ARGUMENTS, _write(tmp_path, SFT_RECIPE), ["--stage", "2", "--adapter_path", "s1"]
    )
    saved = save_resolved_config(tmp_path / "out" / "config.yaml", *parsed)
    assert "hub_token" not in yaml.safe_load(saved.read_text())
    again = parse_recipe(SFT_ARGUMENTS, saved)
    for first, second in zip(parsed, again):
        assert first == second or first.to_dict() == second.to_dict()


def test_base_corpus_never_reads_dev_or_test():
    with pytest.raises(UsageError, match="must not include dev or test"):
        BaseScriptArguments(world_dir="w", corpus_splits=["foundation", "test"])
    with pytest.raises(UsageError, match="paired_splits must be among corpus_splits"):
        BaseScriptArguments(world_dir="w", corpus_splits=["foundation"], paired_splits=["grounding"])
    with pytest.raises(UsageError, match="world_dir is not set"):
        BaseScriptArguments()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hidden_size": 100, "num_attention_heads": 3}, "must divide hidden_size"),
        ({"num_key_value_heads": 3}, "must divide num_attention_heads"),
        ({"num_hidden_layers": 1}, "copy_circuit needs num_hidden_layers >= 2"),
        ({"num_key_value_heads": 2}, "copy_circuit needs num_key_value_heads == num_attention_heads"),
        ({"tie_word_embeddings": False}, "keep tie_word_embeddings"),
    ],
)
def test_bad_tiny_model_shapes_name_the_fix(kwargs, message):
    with pytest.raises(UsageError, match=message):
        TinyModelArguments(**kwargs)


def test_tiny_model_without_the_circuit_may_use_grouped_query_attention():
    shape = TinyModelArguments(num_key_value_heads=2, copy_circuit=False)
    assert shape.head_dim == 32


def test_base_block_length_must_fit_and_be_set(tmp_path):
    recipe = _write(tmp_path, "world_dir: w\noutput_dir: o\nmax_length: 8\nreport_to: none\n", "base.yaml")
    with pytest.raises(UsageError, match="block length"):
        parse_recipe(BASE_ARGUMENTS, recipe)


def test_train_command_keeps_unknown_options_as_overrides_in_order():
    from slmsql_hub.commands import train

    parser = argparse.ArgumentParser()
    train.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "train",
            "sft",
            "--config",
            "r.yaml",
            "--learning_rate",
            "1e-4",
            "--seed",
            "-1",
            "--dataset_paths",
            "a",
            "b",
        ]
    )
    assert (args.kind, args.config) == ("sft", "r.yaml")
    assert args.overrides == ["--learning_rate", "1e-4", "--seed", "-1", "--dataset_paths", "a", "b"]


def test_train_command_turns_a_bad_recipe_into_exit_code_2(tmp_path, capsys):
    from slmsql_hub.cli import main

    recipe = _write(tmp_path, SFT_RECIPE + "stage: 2\n")
    assert main(["train", "sft", "--config", str(recipe)]) == 2
    assert "set adapter_path" in capsys.readouterr().err


@pytest.mark.parametrize("tracker", ["trackio", "tensorboard"])
def test_a_tracker_that_is_not_installed_is_one_line_naming_the_install(tracker, monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    missing = {"trackio"} if tracker == "trackio" else {"tensorboard", "tensorboardX"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in missing else find_spec(name, *a))
    for config in (SFTTrainingConfig, GRPOTrainingConfig):
        with pytest.raises(UsageError, match=rf"report_to: {tracker} needs .*`pip install {tracker}`"):
            config(output_dir="o", report_to=[tracker], use_cpu=True)
    assert SFTTrainingConfig(output_dir="o", report_to="none", use_cpu=True).report_to == []
