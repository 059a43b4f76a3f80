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
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [captured.err.strip()]  # one line: no usage block before it
    assert captured.err.startswith(f"{prog}: error: ") and message in captured.err
    assert captured.err.strip().endswith(f"(see {prog} --help)")


def test_help_still_prints_the_usage_and_exits_0(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["ex", "--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("usage: slmsql ex")
