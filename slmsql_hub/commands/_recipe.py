"""One override style for the recipe commands (``slmsql train KIND``, ``slmsql filter``, ``slmsql eval``):
``--config RECIPE.yaml`` plus any ``--field value`` options, passed through in order to
:func:`~slmsql_hub.recipes.parse_recipe`, where they win over the YAML and an unknown field is one
:class:`~slmsql_hub.errors.UsageError` line (exit 2). Only the light configs (filter, eval, diagnose) are imported to list
their fields in ``--help``; the training configs import TRL and torch, so ``slmsql train`` does not.

:func:`load_recipe` reads any recipe by its kind (:data:`RECIPE_KINDS`), the first word of its file name."""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..recipes import parse_recipe


def add_recipe_parser(
    subparsers: argparse._SubParsersAction,
    name: str,
    *,
    help: str,  # noqa: A002 - argparse's own keyword
    description: str,
    example: str,
    config_cls: type | None = None,
    config_required: bool = True,
) -> argparse.ArgumentParser:
    """Register ``NAME --config RECIPE [--field value ...]``; ``args.overrides`` holds the overrides and
    ``--help`` lists the fields of the dataclass ``config_cls`` (when given). ``config_required=False``: the
    command has another mode, and checks ``--config`` itself."""
    width = max(shutil.get_terminal_size().columns - 2, 40)
    parser = subparsers.add_parser(
        name,
        help=help,
        description=textwrap.fill(description, width),
        epilog=fields_help(config_cls, width) if config_cls else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        keep_overrides=True,
    )
    parser.add_argument("--config", required=config_required, help=f"the YAML recipe (e.g. {example})")
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


def _training_arguments(kind: str) -> tuple:
    from ..training.configs import BASE_ARGUMENTS, GRPO_ARGUMENTS, SFT_ARGUMENTS

    return {"base": BASE_ARGUMENTS, "sft": SFT_ARGUMENTS, "grpo": GRPO_ARGUMENTS}[kind]


def _filter_loader(kind: str) -> Callable:
    from ..filtering import load_filter_config

    return load_filter_config


def _eval_loader(kind: str) -> Callable:
    from ..evaluation import load_eval_config

    return load_eval_config


def _diagnose_loader(kind: str) -> Callable:
    from ..diagnosis import load_diagnose_config

    return load_diagnose_config


def _ablations_loader(kind: str) -> Callable:
    from ..study.config import load_recipe as load_ablations

    return load_ablations


def _study_loader(kind: str) -> Callable:
    from .study import load_recipe as load_study_recipe

    return lambda path, overrides: load_study_recipe(path, overrides)[0]


RECIPE_KINDS: dict[str, Callable[[str], Any]] = {
    "base": _training_arguments,
    "sft": _training_arguments,
    "grpo": _training_arguments,
    "filter": _filter_loader,
    "eval": _eval_loader,
    "diagnose": _diagnose_loader,
    "ablations": _ablations_loader,
    "transfer": _ablations_loader,
    "study": _study_loader,
}
"""How to read a recipe, by the first ``_``-separated word of its file name (``sft_stage1_synsql.yaml`` is an
``sft`` recipe): what it returns (imported only then: the training configs load TRL) is a tuple of dataclasses
(read with :func:`~slmsql_hub.recipes.parse_recipe`) or a loader ``(config, overrides) -> config``. Register a new
kind here and ``tests/test_recipes.py`` checks it."""


def recipe_kind(path: str | os.PathLike) -> str:
    """The kind of a recipe: the first ``_``-separated word of its file name (``sft_stage2_x.yaml`` -> ``sft``)."""
    return Path(path).stem.split("_", 1)[0]


def load_recipe(path: str | os.PathLike, overrides: Sequence[str] = ()) -> tuple:
    """Read and validate any registered recipe (see :data:`RECIPE_KINDS`) into a tuple of config objects.

    Example:

    ```python
    >>> import pathlib, slmsql_hub
    >>> recipes = pathlib.Path(slmsql_hub.__file__).resolve().parents[1] / "recipes"
    >>> script, model, training = load_recipe(recipes / "world" / "sft_stage2.yaml")
    >>> training.stage, training.adapter_path
    (2, 'outputs/world/sft_stage1')

    ```
    """
    kind = recipe_kind(path)
    if kind not in RECIPE_KINDS:
        raise UsageError(
            f"cannot tell what {path} configures: its name starts with {kind!r}, not one of "
            f"{', '.join(sorted(RECIPE_KINDS))}; rename it or register the kind in RECIPE_KINDS"
        )
    target = RECIPE_KINDS[kind](kind)
    if isinstance(target, tuple):
        return parse_recipe(target, path, overrides)
    return (target(path, overrides),)
