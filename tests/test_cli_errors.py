"""A newcomer's bad inputs (issue #20): each is one line on stderr, exit code 2 for bad input and 1 for a failing
service, before any data or model loads.

One test per row of the issue's table, then a walk over every subcommand's ``argparse`` parser (built from
``cli.build_parser``) and every recipe command's field parser that gives each typed or constrained option a bad
value. Everything runs in-process except the old ``-m`` targets and the Hub checks, which need a fresh interpreter.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _helpers import REPO, clean_env, free_port, hub_client_env
from hub_server import HubServer

from slmsql_hub import cli
from slmsql_hub.commands import OneLineParser

WORLD = REPO / "recipes" / "world"
FIXTURE_RUN = REPO / "tests" / "fixtures" / "run"


def _one_line(capsys, prog: str = "slmsql") -> str:
    """The single stderr line of the last command (its stdout empty)."""
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert captured.out == "", captured.out
    assert err and len(err.splitlines()) == 1, err
    assert err.startswith(f"{prog}"), err
    return err


# -- one test per row ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command", [["train", "sft"], ["train", "grpo"], ["train", "base"], ["filter"], ["eval"], ["ablate"]]
)
def test_an_empty_recipe_is_one_line(command, tmp_path, capsys):
    recipe = tmp_path / f"{command[-1]}.yaml"
    recipe.write_text("# nothing yet\n", encoding="utf-8")
    assert cli.main([*command, "--config", str(recipe)]) == 2
    assert f"recipe {recipe} is empty" in _one_line(capsys)


@pytest.mark.parametrize(
    ("kind", "recipe"), [("sft", "sft_stage1.yaml"), ("grpo", "grpo_band.yaml"), ("base", "base.yaml")]
)
@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("per_device_train_batch_size", "-3", "per_device_train_batch_size must be >= 1; got -3"),
        ("gradient_accumulation_steps", "0", "gradient_accumulation_steps must be >= 1; got 0"),
        ("learning_rate", "-1e-4", "learning_rate must be >= 0"),
        ("max_steps", "0", "max_steps must be >= 1, or -1"),
        ("num_train_epochs", "-1", "num_train_epochs must be >= 0"),
        ("warmup_steps", "-2", "warmup_steps must be >= 0"),
    ],
)
def test_an_out_of_range_training_number_is_one_line_before_data_or_model(
    kind, recipe, field, value, message, tmp_path, capsys
):
    # The data and the model named here do not exist: a check after loading would report them instead.
    missing = ["--world_dir", str(tmp_path / "no-world")] if kind == "base" else []
    missing = missing or ["--model_name_or_path", str(tmp_path / "no-model")]
    overrides = ["--output_dir", str(tmp_path / "out"), *missing]
    started = time.monotonic()
    assert cli.main(["train", kind, "--config", str(WORLD / recipe), *overrides, f"--{field}={value}"]) == 2
    assert message in _one_line(capsys)
    assert time.monotonic() - started < 30
    assert not (tmp_path / "out").exists()


def test_a_negative_batch_size_in_the_recipe_file_is_refused_too(tmp_path, capsys):
    recipe = tmp_path / "sft.yaml"
    text = (WORLD / "sft_stage1.yaml").read_text(encoding="utf-8")
    recipe.write_text(
        re.sub(r"(?m)^per_device_train_batch_size: .*$", "per_device_train_batch_size: -3", text)
    )
    assert "per_device_train_batch_size: -3" in recipe.read_text()
    assert cli.main(["train", "sft", "--config", str(recipe)]) == 2
    assert "per_device_train_batch_size must be >= 1; got -3" in _one_line(capsys)


def test_malformed_yaml_is_file_line_col_message(tmp_path, capsys):
    recipe = tmp_path / "sft.yaml"
    recipe.write_text("learning_rate: 1e-4\nbenchmarks: [world:dev\nstage: 1\n", encoding="utf-8")
    assert cli.main(["train", "sft", "--config", str(recipe)]) == 2
    err = _one_line(capsys)
    assert re.search(rf"error: {re.escape(str(recipe))}:3:\d+: ", err), err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--repo-id", "bad id"], "argument --repo-id: 'bad id' is not a Hub repository id"),
        (["--repo-id", "no-namespace"], "a namespace is needed"),
        (["--license", "not-a-license"], "argument --license: 'not-a-license' is not a Hub license id"),
        (["--license", "apache2"], "did you mean apache-2.0?"),
    ],
)
def test_card_refuses_what_push_would_refuse(argv, message, tmp_path, capsys):
    out = tmp_path / "card"
    assert cli.main(["card", "--run-dir", str(FIXTURE_RUN), "--out", str(out), *argv]) == 2
    assert message in _one_line(capsys, "slmsql card")
    assert not out.exists()


def test_push_refuses_the_same_repo_id_as_card(capsys):
    assert cli.main(["push", str(FIXTURE_RUN), "--repo-id", "bad id", "--dry-run"]) == 2
    assert "'bad id' is not a Hub repository id" in _one_line(capsys, "slmsql push")


def test_ablate_from_another_folder_names_the_missing_run_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the recipe's own references resolve against its folder, not this one
    assert cli.main(["ablate", "--config", str(WORLD / "ablations.yaml"), "--run_dir", "/missing"]) == 2
    assert "run folder /missing not found" in _one_line(capsys)


def test_a_recipe_names_other_recipes_relative_to_its_own_folder(tmp_path, monkeypatch):
    from slmsql_hub.study.config import load_ablation_config

    monkeypatch.chdir(tmp_path)
    config = load_ablation_config(WORLD / "ablations.yaml")
    assert Path(config.grpo_recipe) == WORLD / "grpo_band.yaml"
    assert Path(config.eval_recipe) == WORLD / "eval.yaml"
    assert Path(config.band.filter_recipe) == WORLD / "filter.yaml"
    assert (
        config.run_dir == "outputs/quickstart"
    )  # data and output paths stay relative to the working directory


@pytest.mark.parametrize(
    ("argv", "dest", "value"),
    [
        (["card", "--run_dir", "r"], "run_dir", "r"),
        (["card", "--run-dir", "r"], "run_dir", "r"),
        (["ablate", "--config", "a.yaml", "--run_dir", "r"], "run_dir", "r"),
        (["ablate", "--config", "a.yaml", "--run-dir", "r"], "run_dir", "r"),
        (["ablate", "--config", "a.yaml", "--max_steps=3"], "max_steps", 3),
        (["world", "build", "--out", "w", "--rl_pool", "5"], "rl_pool", 5),
        (["world", "build", "--out", "w", "--rl-pool", "5"], "rl_pool", 5),
        (["push", "r", "--repo_id", "a/b", "--dry_run"], "dry_run", True),
        (["ex", "--pred", "p", "--keep_distinct"], "keep_distinct", True),
    ],
)
def test_both_flag_spellings_are_taken(argv, dest, value):
    assert getattr(cli.build_parser().parse_args(argv), dest) == value


def test_every_option_is_taken_in_the_other_spelling_too():
    for prog, parser in _leaf_parsers():
        for option in [o for o in parser._option_string_actions if o.startswith("--")]:
            other = option.replace("-", "_").replace("__", "--", 1)
            assert parser._respelt([other, "x"])[0] == option, (prog, option)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["card", "--run-dir", "r", "--licence", "mit"], "--licence: did you mean --license?"),
        (["ablate", "--config", "a.yaml", "--run_dri", "r"], "--run_dri: did you mean --run-dir?"),
        (["world", "build", "--out", "w", "--rl-pol", "5"], "--rl-pol: did you mean --rl-pool?"),
    ],
)
def test_an_unknown_flag_names_the_closest(argv, message, capsys):
    assert cli.main(argv) == 2
    err = _one_line(capsys)
    assert "unrecognized arguments" in err and message in err


@pytest.mark.parametrize("where", ["recipe", "override"])
def test_an_unknown_recipe_key_names_the_closest(where, tmp_path, capsys):
    recipe = tmp_path / "sft.yaml"
    text = (WORLD / "sft_stage1.yaml").read_text(encoding="utf-8")
    recipe.write_text(text + ("learnig_rate: 1e-4\n" if where == "recipe" else ""), encoding="utf-8")
    extra = ["--learnig_rate", "1e-4"] if where == "override" else []
    assert cli.main(["train", "sft", "--config", str(recipe), *extra]) == 2
    assert re.search(r"learnig_rate \(did you mean (--)?learning_rate\?\)", _one_line(capsys))


def test_an_unknown_ablation_key_names_the_closest(tmp_path, capsys):
    recipe = tmp_path / "ablations.yaml"
    recipe.write_text(
        (WORLD / "ablations.yaml").read_text(encoding="utf-8") + "sedes: [0]\n", encoding="utf-8"
    )
    assert cli.main(["ablate", "--config", str(recipe)]) == 2
    assert "sedes (did you mean seeds?)" in _one_line(capsys)


def test_world_build_names_the_flag(tmp_path, capsys):
    assert cli.main(["world", "build", "--out", str(tmp_path / "w"), "--dev", "-5"]) == 2
    err = _one_line(capsys, "slmsql world build")
    assert "argument --dev: must be >= 0; got -5" in err and "WorldSizes" not in err
    assert not (tmp_path / "w").exists()


# -- entry points -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sft", "base", "grpo"])
def test_old_module_targets_say_what_to_run_instead(kind, tmp_path):
    env = clean_env(PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-m", f"slmsql_hub.training.{kind}", "--config", "/nonexistent.yaml"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"slmsql_hub train {kind}" in done.stderr


def test_python_dash_m_slmsql_hub_is_the_command(tmp_path):
    env = clean_env(PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-m", "slmsql_hub", "world", "build", "--out", str(tmp_path / "w"), "--dev", "-5"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and "argument --dev: must be >= 0" in done.stderr


@pytest.mark.slow
def test_accelerate_launch_runs_sft_on_two_processes_and_prints_one_headline(tmp_path):
    assert cli.main(["world", "build", "--out", str(tmp_path / "w"), "--foundation", "64", "--grounding", "16",
                     "--rl-pool", "16", "--dev", "8", "--test", "8"]) == 0  # fmt: skip
    port = free_port()
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--main_process_port", str(port),
        "--config_file", str(REPO / "recipes" / "accelerate_configs" / "cpu_2proc.yaml"),
        "-m", "slmsql_hub", "train", "sft", "--config", str(WORLD / "sft_stage1_smoke.yaml"),
        "--model_name_or_path", str(FIXTURE_RUN / "base"), "--max_steps", "2",
        "--dataset_paths", str(tmp_path / "w" / "datasets" / "foundation"), "--output_dir", str(tmp_path / "sft"),
    ]  # fmt: skip
    env = clean_env(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    headlines = [line for line in done.stdout.splitlines() if line.startswith('{"kind"')]
    assert len(headlines) == 1 and '"steps": 2' in headlines[0]  # cpu_2proc.yaml: two processes, one headline
    assert (tmp_path / "sft" / "adapter_model.safetensors").is_file()
    # only the main process writes the stage's files (the other returns after training)
    summary = json.loads((tmp_path / "sft" / "run_summary.json").read_text(encoding="utf-8"))
    assert summary["steps"] == 2 and (tmp_path / "sft" / summary["sft_questions"]["file"]).is_file()
    assert (tmp_path / "sft" / "config.yaml").is_file() and done.stderr.count("SFT stage 1 done") == 1


# -- the Hub ------------------------------------------------------------------------------------------------------

HUB_COMMANDS = {
    "train grpo": [
        "train", "grpo", "--config", str(WORLD / "grpo_band_smoke.yaml"),
        "--model_name_or_path", str(FIXTURE_RUN / "base"), "--adapter_path", "alice/no-such-adapter",
    ],
    "eval": [
        "eval", "--config", str(WORLD / "eval_smoke.yaml"), "--model_name_or_path", str(FIXTURE_RUN / "base"),
        "--sft_adapter", str(FIXTURE_RUN / "grpo"), "--grpo_adapter", "alice/no-such-adapter",
    ],
    "train sft": [
        "train", "sft", "--config", str(WORLD / "sft_stage1_smoke.yaml"), "--model_name_or_path", "alice/no-such-base",
    ],
}  # fmt: skip


def _run_cli(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "slmsql_hub", *argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _error_lines(stderr: str) -> list[str]:
    """The command's own lines (``slmsql ...``): log records and retries aside, no traceback."""
    assert "Traceback" not in stderr, stderr[-3000:]
    return [line for line in stderr.splitlines() if line.startswith("slmsql ")]


@pytest.mark.parametrize("command", sorted(HUB_COMMANDS))
def test_a_hub_repo_that_does_not_exist_is_one_line_and_exit_2(command, tmp_path):
    with HubServer({"hf_test": "alice"}) as server:
        env = hub_client_env(server.endpoint, tmp_path / "home", "hf_test")
        argv = [*HUB_COMMANDS[command], "--output_dir", str(tmp_path / "out")]
        done = _run_cli(argv, env, tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    [line] = _error_lines(done.stderr)
    assert "no-such-" in line and f"not found on {server.endpoint}" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # huggingface_hub retries a refused connection for ~30 s
def test_an_unreachable_hub_is_one_line_and_exit_1(tmp_path):
    env = hub_client_env("http://127.0.0.1:9", tmp_path / "home", "hf_test")
    done = _run_cli([*HUB_COMMANDS["eval"], "--output_dir", str(tmp_path / "out")], env, tmp_path)
    assert done.returncode == 1, done.stderr[-3000:]
    [line] = _error_lines(done.stderr)
    assert "could not reach http://127.0.0.1:9" in line


# -- every typed option of every subcommand -----------------------------------------------------------------------


def _leaf_parsers(parser: argparse.ArgumentParser | None = None) -> list[tuple[str, OneLineParser]]:
    """``(prog, parser)`` of every subcommand that runs (``slmsql world build``, ``slmsql train sft``...)."""
    parser = parser or cli.build_parser()
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        return [(parser.prog, parser)]
    return [
        leaf for action in subparsers for child in action.choices.values() for leaf in _leaf_parsers(child)
    ]


REQUIRED = {
    "slmsql ex": ["--pred", "{tmp}/p.sql"],
    "slmsql world build": ["--out", "{tmp}/w"],
    "slmsql world benchmark": ["--world", "{tmp}", "--out", "{tmp}/b"],
    "slmsql card": ["--run-dir", "{tmp}/run"],
    "slmsql push": ["{tmp}/run"],
    "slmsql ablate": ["--config", str(WORLD / "ablations.yaml")],
}
"""What each subcommand needs besides the option under test (a bad value must fail at parsing, before them)."""


def _bad_values(action: argparse.Action, tmp: Path) -> list[str]:
    """Values ``action`` must refuse: not a number, out of its bounds, not a choice, not a repo id or license,
    a file where a folder goes, a folder that is missing."""
    kind = action.type
    name = getattr(kind, "__name__", "")
    if action.choices:
        return ["not-a-choice"]
    if name in ("int", "float"):
        bad = ["not-a-number"]
        low, high, above = getattr(kind, "bounds", (None, None, False))
        if low is not None:
            bad.append(str(low if above else low - 1))
        if high is not None:
            bad.append(str(high + 1))
        return bad
    if name == "repo_id":
        return ["bad id"]
    if name == "hub_license":
        return ["not-a-license"]
    if name == "folder_to_write":
        (tmp / "a-file").write_text("x", encoding="utf-8")
        return [str(tmp / "a-file")]
    if name == "existing_folder":
        return [str(tmp / "missing")]
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return ["=yes"]  # a flag takes no value
    return []


def test_every_typed_option_of_every_subcommand_refuses_a_bad_value_in_one_line(tmp_path, capsys):
    started, checked = time.monotonic(), []
    for prog, parser in _leaf_parsers():
        command = prog.split()[1:]
        for action in parser._actions:
            options = [o for o in action.option_strings if o.startswith("--")]
            if not options or isinstance(action, argparse._HelpAction):
                continue
            for bad in _bad_values(action, tmp_path):
                value = [options[0] + bad] if bad.startswith("=") else [options[0], bad]
                required = [a.format(tmp=tmp_path) for a in REQUIRED.get(prog, [])]
                if options[0] in required:
                    required = required[: required.index(options[0])]
                recipe = ["--config", str(WORLD / "eval.yaml")] if parser.keep_overrides else []
                argv = [*command, *required, *recipe, *value]
                assert cli.main(argv) == 2, argv
                err = _one_line(capsys, prog)
                assert "error:" in err, (argv, err)
                checked.append((prog, options[0]))
    assert time.monotonic() - started < 60  # nothing was loaded
    progs = {prog for prog, _ in checked}
    assert {"slmsql ex", "slmsql world build", "slmsql card", "slmsql push", "slmsql ablate"} <= progs
    assert {"slmsql quickstart", "slmsql install-metric"} <= progs
    assert len(checked) >= 25, checked


RECIPE_COMMANDS = {
    ("train", "sft"): ("slmsql_hub.training.configs", "SFT_ARGUMENTS", WORLD / "sft_stage1.yaml"),
    ("train", "grpo"): ("slmsql_hub.training.configs", "GRPO_ARGUMENTS", WORLD / "grpo_band.yaml"),
    ("train", "base"): ("slmsql_hub.training.configs", "BASE_ARGUMENTS", WORLD / "base.yaml"),
    ("filter",): ("slmsql_hub.filtering", "FilterConfig", WORLD / "filter.yaml"),
    ("eval",): ("slmsql_hub.evaluation", "EvalConfig", WORLD / "eval.yaml"),
}


def _typed_fields(classes: tuple[type, ...]) -> list[tuple[str, str]]:
    """``(--field, bad value)`` for every int, float, bool or choice field of the recipe's parser."""
    from slmsql_hub.recipes import _build_parser

    typed = []
    for action in _build_parser(classes)._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        option = action.option_strings[0]
        name = getattr(action.type, "__name__", "")
        if option.startswith("--no_") or not option.startswith("--"):
            continue
        if action.choices:
            typed.append((option, "not-a-choice"))
        elif name in ("int", "float"):
            typed.append((option, "not-a-number"))
        elif name == "string_to_bool":
            typed.append((option, "maybe"))
    return typed


@pytest.mark.parametrize("command", sorted(RECIPE_COMMANDS), ids=" ".join)
def test_every_typed_recipe_field_refuses_a_bad_value_in_one_line(command, tmp_path, capsys):
    import importlib

    module, name, recipe = RECIPE_COMMANDS[command]
    classes = getattr(importlib.import_module(module), name)
    classes = classes if isinstance(classes, tuple) else (classes,)
    fields = _typed_fields(classes)
    assert len(fields) >= 5, fields
    started = time.monotonic()
    for option, bad in fields:
        argv = [*command, "--config", str(recipe), "--output_dir", str(tmp_path / "out"), option, bad]
        assert cli.main(argv) == 2, argv
        err = _one_line(capsys)
        assert option in err or option.replace("_", "-") in err, (argv, err)
    assert time.monotonic() - started < 10 + 0.2 * len(fields)  # nothing was loaded
    assert not (tmp_path / "out").exists()
