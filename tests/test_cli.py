"""The ``slmsql`` dispatcher: argparse's own errors are one line like every other error, exit code 2."""

from __future__ import annotations

import pytest

from slmsql_hub import cli


@pytest.mark.parametrize(
    ("argv", "prog", "message"),
    [
        (["nosuchcmd"], "slmsql", "invalid choice: 'nosuchcmd'"),
        (["ex", "--workers", "abc"], "slmsql ex", "argument --workers: invalid int value: 'abc'"),
        (["train", "sft"], "slmsql train sft", "the following arguments are required: --config"),
        (["train", "nosuch"], "slmsql train", "invalid choice: 'nosuch'"),
        (["quickstart", "--budget", "soon"], "slmsql quickstart", "invalid float value: 'soon'"),
    ],
)
def test_argparse_errors_are_one_line_naming_the_help_and_exit_2(argv, prog, message, capsys):
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [captured.err.strip()]  # one line: no usage block before it
    assert captured.err.startswith(f"{prog}: error: ") and message in captured.err
    assert captured.err.strip().endswith(f"(see {prog} --help)")


def test_help_still_prints_the_usage_and_exits_0(capsys):
    assert cli.main(["ex", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: slmsql ex")


@pytest.mark.parametrize(
    ("command", "config_name"),
    [(["train", "sft"], "SFTTrainingConfig"), (["filter"], "FilterConfig"), (["eval"], "EvalConfig")],
)
def test_recipe_commands_reject_an_unknown_field_in_the_same_one_line(command, config_name, capsys):
    recipe = {"train": "sft_stage1", "filter": "filter", "eval": "eval"}[command[0]]
    argv = [*command, "--config", f"recipes/world/{recipe}.yaml", "--no_such_field", "3"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [err.strip()]
    assert err.startswith(f"slmsql {command[0]}: error: unknown argument(s) --no_such_field; overrides are")
    assert config_name in err


@pytest.mark.parametrize(("command", "field"), [("filter", "--num_samples"), ("eval", "--sft_adapter")])
def test_filter_and_eval_help_lists_the_recipe_fields(command, field, capsys):
    assert cli.main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "recipe fields" in out and f"\n  {field}\n" in out


def test_recipe_overrides_pass_through_in_order():
    args = cli.build_parser().parse_args(
        ["filter", "--config", "f.yaml", "--num_samples", "4", "--benchmarks", "world:dev", "world:test:6"]
    )
    assert args.config == "f.yaml"
    assert args.overrides == ["--num_samples", "4", "--benchmarks", "world:dev", "world:test:6"]
