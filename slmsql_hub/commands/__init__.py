"""Subcommands of the ``slmsql`` CLI. Each module defines ``add_parser(subparsers)``; the parser it adds
sets ``run=<function(args) -> int>`` as its default. Keep them thin: parse, call the library, print."""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """An ``argparse`` parser whose errors are one line, ``PROG: error: MESSAGE (see PROG --help)``, exit code 2;
    subcommand parsers inherit it. Options are spelt with hyphens (``--run-dir``) and taken with underscores too
    (``--run_dir``); an unknown option names the closest known one. ``keep_overrides=True`` keeps unknown
    options, in order, as ``args.overrides`` (the recipe commands' ``--field value``).

    Example:

    ```python
    >>> from slmsql_hub.commands import OneLineParser
    >>> parser = OneLineParser(prog="slmsql demo")
    >>> _ = parser.add_argument("--n", type=int)
    >>> _ = parser.add_argument("--run-dir")
    >>> parser.parse_args(["--run_dir", "r"]).run_dir
    'r'
    >>> parser.parse_args(["--n", "x"])
    Traceback (most recent call last):
    ...
    SystemExit: 2
    >>> OneLineParser(prog="slmsql demo", keep_overrides=True).parse_args(["--k", "4"]).overrides
    ['--k', '4']

    ```
    """

    def __init__(self, *args, keep_overrides: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.keep_overrides = keep_overrides

    def _respelt(self, args: list[str]) -> list[str]:
        """``args`` with each option given in the other style (``--run_dir``) spelt as registered (``--run-dir``)."""
        registered = {option.replace("_", "-"): option for option in self._option_string_actions}
        out = []
        for position, arg in enumerate(args):
            if arg == "--":
                return out + args[position:]
            name, eq, value = arg.partition("=")
            if name.startswith("--") and name not in self._option_string_actions:
                name = registered.get(name.replace("_", "-"), name)
            out.append(name + eq + value)
        return out

    def parse_known_args(self, args=None, namespace=None):
        args = self._respelt(list(sys.argv[1:] if args is None else args))
        namespace, extras = super().parse_known_args(args, namespace)
        if self.keep_overrides:
            namespace.overrides = extras
            return namespace, []
        if extras and self._subparsers is None:  # a leaf command: say it here, with its own options
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments:"):
            known = [option for option in self._option_string_actions if option.startswith("--")]
            words = message.split(":", 1)[1].split()
            message += "".join(_suggestion(word, known) for word in words if word.startswith("-"))
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _suggestion(option: str, known: list[str]) -> str:
    """``; did you mean --run-dir?`` for a misspelt ``option`` (``""`` when nothing is close)."""
    close = difflib.get_close_matches(option.split("=", 1)[0].replace("_", "-"), known, n=1)
    return f"; {option}: did you mean {close[0]}?" if close else ""


def print_result(*lines: str) -> int:
    """Print a command's output, one line each; the exit code 0."""
    print("\n".join(lines))  # noqa: T201 - the command's output
    return 0


def number(kind: type = int, *, low: float | None = None, high: float | None = None, above: bool = False):
    """An ``argparse`` ``type`` reading ``kind`` within ``[low, high]`` (``(low, high]`` with ``above=True``), so a
    bad value is the parser's one line naming the flag: ``argument --dev: must be >= 0; got -5``.

    Example:

    ```python
    >>> number(int, low=0)("3"), number(float, low=0, above=True)("0.5")
    (3, 0.5)
    >>> number(int, low=0)("-5")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be >= 0; got -5

    ```
    """

    def read(text: str):
        value = kind(text)  # a ValueError is argparse's "invalid int value: 'x'"
        if value != value:  # nan
            raise argparse.ArgumentTypeError(f"expected a number; got {text!r}")
        if low is not None and high is not None and not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be within [{low}, {high}]; got {text}")
        if low is not None and (value <= low if above else value < low):
            raise argparse.ArgumentTypeError(f"must be {'>' if above else '>='} {low}; got {text}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be <= {high}; got {text}")
        return value

    read.__name__ = kind.__name__
    read.bounds = (low, high, above)  # for tests that walk the parsers
    return read


def repo_id(*, namespace: bool = True):
    """An ``argparse`` ``type`` accepting a Hub repository id as ``push`` would (``NAMESPACE/NAME`` unless
    ``namespace=False``); see :func:`slmsql_hub.refs.check_repo_id`."""
    from ..errors import UsageError
    from ..refs import check_repo_id

    def read(text: str) -> str:
        try:
            return check_repo_id(text, "repository id", namespace=namespace)
        except UsageError as err:
            raise argparse.ArgumentTypeError(str(err).removeprefix("repository id ")) from None

    read.__name__ = "repo_id"
    return read


def hub_license(text: str) -> str:
    """An ``argparse`` ``type`` accepting a license id the Hub accepts (see :func:`slmsql_hub.refs.check_license`)."""
    from ..errors import UsageError
    from ..refs import check_license

    try:
        return check_license(text, "license")
    except UsageError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("license ")) from None


def existing_folder(text: str) -> str:
    """An ``argparse`` ``type`` for a folder that must exist (``--recipes``, ``--db-root``)."""
    from pathlib import Path

    if not Path(text).expanduser().is_dir():
        raise argparse.ArgumentTypeError(f"{text} is not a folder")
    return text


def folder_to_write(text: str) -> str:
    """An ``argparse`` ``type`` for a folder a command writes (``--out``, ``--cache-dir``): created when missing,
    refused when a file is there."""
    from pathlib import Path

    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file; choose a folder")
    return text
