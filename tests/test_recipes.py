"""Every YAML file under recipes/ parses and validates offline, and the recipe chains agree with each other.

Recipes are found by globbing, so a new recipe is covered the moment it is added; its kind comes from the first
word of its file name (``RECIPE_KINDS``), and an unregistered kind fails here with the fix.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
import yaml

from slmsql_hub.commands._recipe import RECIPE_KINDS, load_recipe, recipe_kind
from slmsql_hub.errors import UsageError

RECIPES = Path(__file__).resolve().parents[1] / "recipes"
ACCELERATE_CONFIGS = RECIPES / "accelerate_configs"
ALL_YAML = sorted(p for p in RECIPES.rglob("*") if p.suffix in (".yaml", ".yml"))
TRAINING_RECIPES = [p for p in ALL_YAML if ACCELERATE_CONFIGS not in p.parents]
QWEN = RECIPES / "qwen2.5-coder-1.5b"
WORLD = RECIPES / "world"


def _id(path: Path) -> str:
    return str(path.relative_to(RECIPES))


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a connection fails the test: validating a recipe must not touch the network."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"recipe validation tried to open a network connection: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_recipes_folder_holds_the_training_recipes():
    names = {p.name for p in TRAINING_RECIPES}
    for expected in (
        "base.yaml",
        "base_smoke.yaml",
        "sft_stage1.yaml",
        "sft_stage1_smoke.yaml",
        "sft_stage2.yaml",
        "sft_stage2_smoke.yaml",
        "sft_stage1_synsql.yaml",
        "sft_stage2_bird_spider.yaml",
    ):
        assert expected in names


@pytest.mark.parametrize("path", TRAINING_RECIPES, ids=_id)
def test_every_recipe_is_of_a_registered_kind(path):
    assert recipe_kind(path) in RECIPE_KINDS, (
        f"{_id(path)}: name it <kind>_... with kind in {sorted(RECIPE_KINDS)}, or register its kind in "
        "slmsql_hub.commands._recipe.RECIPE_KINDS"
    )


@pytest.mark.parametrize("path", TRAINING_RECIPES, ids=_id)
def test_every_recipe_parses_and_validates_offline(path, no_network):
    configs = load_recipe(path)
    assert configs and all(c is not None for c in configs)


@pytest.mark.parametrize("path", [p for p in ALL_YAML if ACCELERATE_CONFIGS in p.parents], ids=_id)
def test_every_accelerate_config_loads(path):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(path))
    assert config.num_processes >= 1


def test_an_unregistered_recipe_kind_is_refused_with_the_fix(tmp_path):
    recipe = tmp_path / "distill_tiny.yaml"
    recipe.write_text("learning_rate: 1.0e-4\n")
    with pytest.raises(UsageError, match="register the kind in RECIPE_KINDS"):
        load_recipe(recipe)


def _raw(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


@pytest.mark.parametrize("suffix", ["", "_smoke"])
def test_world_chain_base_then_stage1_then_stage2_agree(suffix, no_network):
    (base_script, _, base_training) = load_recipe(WORLD / f"base{suffix}.yaml")
    (s1_script, s1_model, s1_training) = load_recipe(WORLD / f"sft_stage1{suffix}.yaml")
    (s2_script, s2_model, s2_training) = load_recipe(WORLD / f"sft_stage2{suffix}.yaml")
    assert s1_model.model_name_or_path == s2_model.model_name_or_path == base_training.output_dir
    assert (s1_training.stage, s2_training.stage) == (1, 2)
    assert s1_training.adapter_path is None
    assert s2_training.adapter_path == s1_training.output_dir
    assert s1_script.dataset_paths == [f"{base_script.world_dir}/datasets/foundation"]
    assert s2_script.dataset_paths == [f"{base_script.world_dir}/datasets/grounding"]
    # The base learns the schema texts the SFT prompts show.
    assert base_script.prompt_sample_rows == s1_script.prompt_sample_rows == s2_script.prompt_sample_rows
    for training in (base_training, s1_training, s2_training):
        assert training.report_to in ([], ["none"], "none")


def test_world_stage2_adapter_is_what_grpo_filter_and_eval_start_from():
    (_, _, stage2) = load_recipe(WORLD / "sft_stage2.yaml")
    (_, _, base) = load_recipe(WORLD / "base.yaml")
    for name in ("grpo_band.yaml", "grpo_attempt1.yaml", "filter.yaml"):
        raw = _raw(WORLD / name)
        assert raw["adapter_path"] == stage2.output_dir, name
        assert raw["model_name_or_path"] == base.output_dir, name
    raw = _raw(WORLD / "eval.yaml")
    assert raw["sft_adapter"] == stage2.output_dir
    assert raw["model_name_or_path"] == base.output_dir


@pytest.mark.parametrize("path", sorted(RECIPES.rglob("sft_*.yaml")), ids=_id)
def test_every_sft_recipe_trains_the_studys_adapter(path, no_network):
    (_, model, training) = load_recipe(path)
    assert (model.lora_r, model.lora_alpha, model.lora_target_modules) == (32, 64, "all-linear")
    assert training.completion_only_loss in (None, True)  # the answer only


def test_qwen_sft_recipes_reproduce_the_studys_two_stages(no_network):
    (s1_script, s1_model, s1_training) = load_recipe(QWEN / "sft_stage1_synsql.yaml")
    (s2_script, s2_model, s2_training) = load_recipe(QWEN / "sft_stage2_bird_spider.yaml")
    assert s1_model.model_name_or_path == s2_model.model_name_or_path == "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    assert [(e.name, e.split) for e in s1_script.benchmark_entries()] == [("synsql", "train")]
    assert [(e.name, e.split) for e in s2_script.benchmark_entries()] == [
        ("bird", "train"),
        ("spider", "train"),
    ]
    assert s2_training.stage == 2 and s2_training.adapter_path == s1_training.output_dir
    assert s1_script.prompt_sample_rows == s2_script.prompt_sample_rows


def test_world_sft_recipes_keep_prompts_short_enough_for_their_max_length(no_network):
    for name in ("sft_stage1.yaml", "sft_stage2.yaml"):
        (script, _, training) = load_recipe(WORLD / name)
        assert script.prompt_sample_rows == 0
        assert training.max_length >= 256


FIXTURE_RUN = Path(__file__).resolve().parent / "fixtures" / "run"
FIXTURE_CONFIGS = sorted(FIXTURE_RUN.rglob("config.yaml"))


@pytest.mark.parametrize("path", FIXTURE_CONFIGS, ids=lambda p: str(p.relative_to(FIXTURE_RUN)))
def test_fixture_run_resolved_configs_still_parse_with_todays_arguments(path, no_network):
    """The card ships each run's resolved ``config.yaml``; a renamed field must regenerate the fixture run.

    (Fix a failure with ``.venv/bin/python tests/fixtures/make_run.py``.)
    """
    from slmsql_hub.recipes import parse_recipe
    from slmsql_hub.training.configs import BASE_ARGUMENTS, GRPO_ARGUMENTS, SFT_ARGUMENTS

    kind = path.relative_to(FIXTURE_RUN).parts[0]
    arguments = {
        "base": BASE_ARGUMENTS,
        "sft": SFT_ARGUMENTS,
        "grpo": GRPO_ARGUMENTS,
        "grpo_attempt1": GRPO_ARGUMENTS,
    }
    assert kind in arguments, f"no argument set known for the fixture folder {kind!r}"
    assert all(c is not None for c in parse_recipe(arguments[kind], path))


def test_qwen_recipes_pin_one_base_commit_and_name_a_revision_for_every_hub_adapter():
    """Every Qwen recipe loads the base at one pinned commit sha, and each Hub adapter it names has a revision
    field (``null`` until its commit is known: the README says so and how to find it)."""
    pins, adapters = set(), set()
    for path in sorted(QWEN.glob("*.yaml")):
        if path.name in ("study.yaml", "ablations.yaml"):  # tables: they name no recipe model of their own
            continue
        raw = _raw(path)
        assert re.fullmatch(r"[0-9a-f]{40}", str(raw.get("model_revision"))), path.name
        pins.add(raw["model_revision"])
        for key in ("adapter_path", "sft_adapter", "grpo_adapter"):
            value = str(raw.get(key) or "")
            if value.count("/") == 1 and not value.startswith(("outputs/", ".", "/")):
                revision_key = "adapter_revision" if key == "adapter_path" else f"{key}_revision"
                assert revision_key in raw, f"{path.name}: {key} {value} is a Hub id without {revision_key}"
                adapters.add((value, raw[revision_key]))
    study = {stage["name"]: stage for stage in _raw(QWEN / "study.yaml")["stages"]}
    pins.add(study["base"]["hub"]["revision"])
    assert study["base"]["hub"]["repo_id"] == _raw(QWEN / "grpo_band.yaml")["model_name_or_path"]
    assert adapters == {(study["sft2"]["hub"]["repo_id"], study["sft2"]["hub"]["revision"])}
    assert len(pins) == 1  # the whole chain runs on the same base weights, the quickstart's too


@pytest.mark.parametrize("value", ["-1e-4", "-0.0001", "-.5"])
def test_a_negative_number_after_an_override_is_its_value(value, tmp_path):
    """``--learning_rate -1e-4`` reaches the field's own check (argparse alone reads ``-1e-4`` as an option)."""
    from slmsql_hub.recipes import parse_recipe
    from slmsql_hub.training.configs import SFT_ARGUMENTS

    recipe = RECIPES / "world" / "sft_stage1.yaml"
    with pytest.raises(UsageError, match=f"learning_rate must be >= 0; got {float(value)}"):
        parse_recipe(SFT_ARGUMENTS, recipe, ["--learning_rate", value, "--output_dir", str(tmp_path)])


# Typed values (issue #33): a stage called in-process gets {field: value}, never --flag strings to parse again.

_TYPED = [
    {"learning_rate": 0.0},
    {"learning_rate": 0},
    {"learning_rate": 2.0e-4, "seed": 1},
    {"reward_funcs": ["execution"], "reward_weights": [1.0], "reward_executes": 0.0, "reward_fails": 0.0},
    {"scale_rewards": "none"},
    {"num_iterations": 2},
    {"beta": 0.04},
    {"dataset_paths": ["runs/q/world/datasets/grounding", "runs/q/filter/band"]},
    {"max_train_samples": 8},
    {"max_train_samples": None},
]


@pytest.mark.parametrize("values", _TYPED, ids=lambda v: ",".join(v))
def test_typed_values_fill_the_grpo_configs_as_the_same_keys_in_the_recipe_and_on_the_command_line(tmp_path, values):
    from slmsql_hub.recipes import config_to_dict, parse_recipe
    from slmsql_hub.training.configs import GRPO_ARGUMENTS

    recipe = WORLD / "grpo_band.yaml"
    typed = config_to_dict(*parse_recipe(GRPO_ARGUMENTS, recipe, values=values))
    written = tmp_path / "grpo.yaml"
    written.write_text(yaml.safe_dump({**yaml.safe_load(recipe.read_text(encoding="utf-8")), **values}))
    assert typed == config_to_dict(*parse_recipe(GRPO_ARGUMENTS, written))
    argv = [item for key, value in values.items() if value is not None
            for item in (f"--{key}", *map(str, value if isinstance(value, list) else [value]))]  # fmt: skip
    assert typed == config_to_dict(*parse_recipe(GRPO_ARGUMENTS, recipe, argv))
    for key, value in values.items():
        assert typed[key] == value, key
    assert isinstance(typed["learning_rate"], float)  # a whole number for a float field, as the parser types it


def test_typed_values_win_over_the_recipe_and_lose_to_the_command_line():
    from slmsql_hub.recipes import parse_recipe
    from slmsql_hub.training.configs import GRPO_ARGUMENTS

    _, _, training = parse_recipe(GRPO_ARGUMENTS, WORLD / "grpo_band.yaml", ["--beta", "0.5"],
                                  values={"beta": 0.04, "max_steps": 3})  # fmt: skip
    assert (training.beta, training.max_steps) == (0.5, 3)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"learning_rate": -1e-4}, r"learning_rate must be >= 0.*got -0\.0001"),
        ({"learning_rate": "-1e-4"}, r"learning_rate must be >= 0.*got -0\.0001"),
        ({"learnig_rate": 1e-4}, r"unknown field\(s\) learnig_rate \(did you mean learning_rate\?\)"),
        ({"beta": "high"}, r"invalid value for beta: 'high' \(expected float\)"),
        ({"num_iterations": "2.5"}, r"invalid value for num_iterations: '2\.5'"),
    ],
)
def test_a_bad_typed_value_is_one_usage_error_line(values, message):
    from slmsql_hub.recipes import parse_recipe
    from slmsql_hub.training.configs import GRPO_ARGUMENTS

    with pytest.raises(UsageError, match=message) as err:
        parse_recipe(GRPO_ARGUMENTS, WORLD / "grpo_band.yaml", values=values)
    assert "\n" not in str(err.value)
