"""The ``slmsql`` command: a thin dispatcher over the package's subcommands.

Each subcommand lives beside the code it drives and exposes two functions:
``add_parser(subparsers)`` (registers its ``argparse`` parser) and ``run(args) -> int``.
Bad input raises :class:`~slmsql_hub.errors.UsageError`; the dispatcher prints that one line to stderr and
exits with code 2, never a traceback. An :class:`~slmsql_hub.errors.InfrastructureError` or ``OSError`` (the Hub
unreachable, a folder that cannot be created, a full disk) is the machine or a service failing, not bad input:
one line too, exit code 1, and ``-v`` shows its traceback. :func:`main` returns the exit code, argparse's own
(2 for a bad option, 0 for ``--help``) included, so it can be called in-process.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from . import __version__
from .commands import OneLineParser
from .errors import InfrastructureError, UsageError

# huggingface_hub 2.x's HTTP library (httpx2, on httpcore2) logs every request at INFO; -v shows them.
_CHATTY_LOGGERS = ("httpx2", "httpcore2")

# (subcommand module, imported lazily so `slmsql --help` stays fast and imports no torch)
_COMMANDS: tuple[str, ...] = (
    "slmsql_hub.commands.ex",
    "slmsql_hub.commands.install_metric",
    "slmsql_hub.commands.world",
    "slmsql_hub.commands.train",
    "slmsql_hub.commands.filter",
    "slmsql_hub.commands.push",
    "slmsql_hub.commands.eval",
    "slmsql_hub.commands.diagnose",
    "slmsql_hub.commands.card",
    "slmsql_hub.commands.quickstart",
    "slmsql_hub.commands.ablate",
)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="slmsql",
        description="slmsql-hub: outcome-only GRPO for Text-to-SQL, Hub-native.",
    )
    parser.add_argument("--version", action="version", version=f"slmsql-hub {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in _COMMANDS:
        importlib.import_module(module_name).add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exited:  # argparse's one-line error (2) or --help / --version (0)
        return exited.code if isinstance(exited.code, int) else 0
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:
        for name in _CHATTY_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return int(args.run(args) or 0)
    except UsageError as err:
        print(f"slmsql {args.command}: error: {err}", file=sys.stderr)  # noqa: T201
        return 2
    except (InfrastructureError, OSError) as err:
        if args.verbose:
            raise
        print(f"slmsql {args.command}: error: {err} (rerun with -v for the traceback)", file=sys.stderr)  # noqa: T201
        return 1
    except KeyboardInterrupt:
        print(f"slmsql {args.command}: interrupted", file=sys.stderr)  # noqa: T201
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
