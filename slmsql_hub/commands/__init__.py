"""Subcommands of the ``slmsql`` CLI. Each module defines ``add_parser(subparsers)``; the parser it adds
sets ``run=<function(args) -> int>`` as its default. Keep them thin: parse, call the library, print."""

from __future__ import annotations

import argparse
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """An ``argparse`` parser whose errors are one line, ``PROG: error: MESSAGE (see PROG --help)``, exit code 2;
    subcommand parsers inherit it. ``keep_overrides=True`` keeps unknown options, in order, as ``args.overrides``
    (the recipe commands' ``--field value``).

    Example:

    ```python
    >>> from slmsql_hub.commands import OneLineParser
    >>> parser = OneLineParser(prog="slmsql demo")
    >>> _ = parser.add_argument("--n", type=int)
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

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if not self.keep_overrides:
            return namespace, extras
        namespace.overrides = extras
        return namespace, []

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def print_result(*lines: str) -> int:
    """Print a command's output, one line each; the exit code 0."""
    print("\n".join(lines))  # noqa: T201 - the command's output
    return 0
