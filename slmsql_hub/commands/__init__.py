"""Subcommands of the ``slmsql`` CLI. Each module defines ``add_parser(subparsers)``; the parser it adds
sets ``run=<function(args) -> int>`` as its default. Keep them thin: parse, call the library, print."""

from __future__ import annotations

import argparse
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """An ``argparse`` parser whose errors are one line on stderr, ``PROG: error: MESSAGE (see PROG --help)``, and
    exit code 2, instead of the usage block followed by the message. Subcommand parsers inherit the class.

    Example:

    ```python
    >>> from slmsql_hub.commands import OneLineParser
    >>> parser = OneLineParser(prog="slmsql demo")
    >>> _ = parser.add_argument("--n", type=int)
    >>> parser.parse_args(["--n", "x"])
    Traceback (most recent call last):
    ...
    SystemExit: 2

    ```
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")
