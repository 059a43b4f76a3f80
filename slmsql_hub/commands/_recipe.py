"""Shared plumbing of the recipe commands (``slmsql eval``, ``slmsql filter``): one ``--field value`` override per
field of the command's config dataclass, handed to the recipe parser so overrides win over the YAML."""

from __future__ import annotations

import argparse
import dataclasses

_BOOLEAN_VALUE = "true"


def add_recipe_arguments(parser: argparse.ArgumentParser, config_cls: type, example: str) -> None:
    """Add ``--config`` and one override per field of ``config_cls`` (absent from the namespace unless given).

    A boolean field alone (``--overwrite``) means true; a ``list[str]`` field takes several values.
    """
    parser.add_argument("--config", required=True, help=f"the YAML recipe (e.g. {example})")
    overrides = parser.add_argument_group("overrides (win over the recipe)")
    for f in dataclasses.fields(config_cls):
        help_text = f.metadata.get("help", "").replace("%", "%%")
        if f.type in ("bool", bool):
            overrides.add_argument(
                f"--{f.name}",
                nargs="?",
                const=_BOOLEAN_VALUE,
                default=argparse.SUPPRESS,
                metavar="BOOL",
                help=help_text,
            )
        elif f.type in ("list[str]", list[str]):
            overrides.add_argument(
                f"--{f.name}", nargs="+", default=argparse.SUPPRESS, metavar="VALUE", help=help_text
            )
        else:
            overrides.add_argument(f"--{f.name}", default=argparse.SUPPRESS, metavar="VALUE", help=help_text)


def recipe_overrides(args: argparse.Namespace, config_cls: type) -> list[str]:
    """The overrides given on the command line, as ``--field value ...`` strings for the recipe parser.

    Example:

    ```python
    >>> import argparse, dataclasses
    >>> @dataclasses.dataclass
    ... class C:
    ...     k: int = 1
    ...     names: list[str] = dataclasses.field(default_factory=list)
    >>> recipe_overrides(argparse.Namespace(k="4", names=["a", "b"]), C)
    ['--k', '4', '--names', 'a', 'b']

    ```
    """
    given: list[str] = []
    for f in dataclasses.fields(config_cls):
        if hasattr(args, f.name):
            value = getattr(args, f.name)
            given += [f"--{f.name}", *(value if isinstance(value, list) else [str(value)])]
    return given
