"""One override style for the recipe commands (``slmsql train KIND``, ``slmsql filter``, ``slmsql eval``):
``--config RECIPE.yaml`` plus any ``--field value`` options, passed through in order to
:func:`~slmsql_hub.recipes.parse_recipe`, where they win over the YAML and an unknown field is one
:class:`~slmsql_hub.errors.UsageError` line (exit 2). Only the light configs (filter, eval) are imported to list
their fields in ``--help``; the training configs import TRL and torch, so ``slmsql train`` does not."""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import textwrap


def add_recipe_parser(
    subparsers: argparse._SubParsersAction,
    name: str,
    *,
    help: str,  # noqa: A002 - argparse's own keyword
    description: str,
    example: str,
    config_cls: type | None = None,
) -> argparse.ArgumentParser:
    """Register ``NAME --config RECIPE [--field value ...]``; ``args.overrides`` holds the overrides and
    ``--help`` lists the fields of the dataclass ``config_cls`` (when given)."""
    width = max(shutil.get_terminal_size().columns - 2, 40)
    parser = subparsers.add_parser(
        name,
        help=help,
        description=textwrap.fill(description, width),
        epilog=fields_help(config_cls, width) if config_cls else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        keep_overrides=True,
    )
    parser.add_argument("--config", required=True, help=f"the YAML recipe (e.g. {example})")
    return parser


def fields_help(config_cls: type, width: int = 100) -> str:
    """The ``--help`` section naming each field of ``config_cls`` with its ``help`` metadata.

    Example:

    ```python
    >>> @dataclasses.dataclass
    ... class C:
    ...     k: int = dataclasses.field(default=1, metadata={"help": "samples per question"})
    >>> print(fields_help(C))
    recipe fields (each as --field value wins over the recipe):
      --k
          samples per question

    ```
    """
    lines = ["recipe fields (each as --field value wins over the recipe):"]
    for field in dataclasses.fields(config_cls):
        lines.append(f"  --{field.name}")
        lines += textwrap.wrap(
            field.metadata.get("help", ""), width, initial_indent=" " * 6, subsequent_indent=" " * 6
        )
    return "\n".join(lines)
