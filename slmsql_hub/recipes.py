"""A recipe is one flat YAML file filling a stage's dataclasses (as in open-r1); ``--field value`` on the command
line wins over the recipe (:func:`parse_recipe`). :func:`save_resolved_config` writes back what a run used.

A stage called in-process (ablate, the quickstart, the sampler) passes typed ``values`` instead of ``--flag value``
strings to parse again (which once read a negative learning rate as an option, 4fee998): they become the parser's
defaults as the recipe's keys do, so the dataclasses are built once. ``dataclasses.replace`` on a parsed TRL or
transformers config would run its ``__post_init__`` again over fields it already derived.

The sections stages share live with their stage: :class:`~slmsql_hub.data.prompts.PromptArguments` and
:class:`~slmsql_hub.data.config.BenchmarkArguments` (data), :class:`~slmsql_hub.generation.loading.InferenceArguments`
(the filter's and the evaluation's model and decoding budget).

Nothing here reads datasets or models: a recipe for a model this machine cannot run still validates.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import enum
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from .errors import UsageError

logger = logging.getLogger(__name__)

def _field_names(dataclass_types: Sequence[type]) -> set[str]:
    return {f.name for cls in dataclass_types for f in dataclasses.fields(cls) if f.init}


def did_you_mean(name: str, known: Sequence[str] | set[str]) -> str:
    """`` (did you mean X?)`` for the closest of ``known`` to a misspelt ``name``; ``""`` when none is close.

    Example:

    ```python
    >>> did_you_mean("learnig_rate", {"learning_rate", "lora_r"})
    ' (did you mean learning_rate?)'
    >>> did_you_mean("zzz", {"learning_rate"})
    ''

    ```
    """
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _unknown_keys(keys: Sequence[str], known: set[str]) -> str:
    """``a (did you mean b?), c`` for the unknown ``keys``."""
    return ", ".join(f"{key}{did_you_mean(key, known)}" for key in keys)


def _yaml_error_line(path: str | os.PathLike, err: Exception) -> str:
    """A YAML parse error as one ``file:line:col: message`` line (1-based, as editors count).

    Example:

    ```python
    >>> import yaml
    >>> try:
    ...     yaml.safe_load("a: [1, 2\\nb: 3\\n")
    ... except yaml.YAMLError as err:
    ...     print(_yaml_error_line("r.yaml", err))
    r.yaml:2:2: expected ',' or ']', but got ':' (while parsing a flow sequence at 1:4)

    ```
    """
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    context, context_mark = getattr(err, "context", None), getattr(err, "context_mark", None)
    if context and context_mark is not None:
        problem += f" ({context} at {context_mark.line + 1}:{context_mark.column + 1})"
    elif context:
        problem += f" ({context})"
    return f"{where}: {problem}"


def read_recipe_mapping(path: str | os.PathLike, option: str = "--config") -> dict[str, Any]:
    """The mapping of a recipe file; a missing, empty, malformed or non-mapping file is one :class:`UsageError`.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> recipe = pathlib.Path(tempfile.mkdtemp()) / "sft.yaml"
    >>> _ = recipe.write_text("")
    >>> read_recipe_mapping(recipe)
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: recipe ... is empty: a recipe is a YAML mapping of field: value (see recipes/world/)

    ```
    """
    import yaml

    path = Path(path)
    if not path.is_file():
        raise UsageError(f"recipe not found: {path}; pass an existing YAML file to {option}")
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise UsageError(_yaml_error_line(path, err)) from err
    except UnicodeDecodeError as err:
        raise UsageError(f"recipe {path} is not UTF-8 text ({err.reason} at byte {err.start})") from err
    if loaded is None:
        raise UsageError(
            f"recipe {path} is empty: a recipe is a YAML mapping of field: value (see recipes/world/)"
        )
    if not isinstance(loaded, dict):
        raise UsageError(
            f"recipe {path} must be a YAML mapping of field: value, not a {type(loaded).__name__}"
        )
    return loaded


def recipe_reference(recipe: str | os.PathLike, reference: str | os.PathLike) -> Path:
    """Where a recipe's reference to another recipe points: relative to the folder of the recipe that names it
    (data and output paths stay relative to the working directory).

    Example:

    ```python
    >>> recipe_reference("recipes/world/ablations.yaml", "grpo_band.yaml").as_posix()
    'recipes/world/grpo_band.yaml'
    >>> recipe_reference("recipes/world/ablations.yaml", "/abs/eval.yaml").as_posix()
    '/abs/eval.yaml'

    ```
    """
    return Path(recipe).parent / Path(reference).expanduser()


def _build_parser(dataclass_types: Sequence[type]):
    from trl import TrlParser

    class RecipeParser(TrlParser):
        """TrlParser that keeps the action ``add_argument`` returns for each field, in ``field_actions``."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.field_actions: dict[str, argparse.Action] = {}
            super().__init__(*args, **kwargs)

        def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
            action = super().add_argument(*args, **kwargs)
            self.field_actions.setdefault(action.dest, action)  # --no_FIELD comes second: keep the field's own
            return action

    # No abbreviations: `--learning_r 1e-4` must fail like any other misspelling, not set learning_rate.
    parser = RecipeParser(dataclass_types=list(dataclass_types), allow_abbrev=False)

    def refuse(message: str) -> NoReturn:
        # argparse would print its usage block and exit; the caller wants one line it can report.
        raise UsageError(f"invalid value in the recipe or an override: {message}")

    parser.error = refuse
    return parser


def parse_recipe(
    dataclass_types: Sequence[type],
    config: str | os.PathLike | None = None,
    overrides: Sequence[str] = (),
    values: Mapping[str, Any] | None = None,
) -> tuple:
    """Fill ``dataclass_types`` from a flat YAML recipe, then from typed ``values`` (``{field: value}``, what a
    stage called in-process passes: :func:`_typed_values`), then from ``--key value`` command-line ``overrides``
    (later wins).

    Returns one validated instance per dataclass, in the order given. Raises :class:`UsageError` when the recipe
    is missing, empty, malformed or not a mapping, a key is unknown (recipe, values or overrides; the closest
    field is suggested), or a value fails validation. Nothing is loaded: every check runs before data or a model.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> from slmsql_hub.training.configs import SFT_ARGUMENTS
    >>> recipe = pathlib.Path(tempfile.mkdtemp()) / "sft.yaml"
    >>> _ = recipe.write_text(
    ...     "model_name_or_path: outputs/world/base\\n"
    ...     "dataset_paths: [outputs/world/datasets/foundation]\\n"
    ...     "output_dir: outputs/world/sft_stage1\\n"
    ...     "learning_rate: 5.0e-4\\n"
    ...     "report_to: none\\n"
    ... )
    >>> script, model, training = parse_recipe(SFT_ARGUMENTS, recipe, ["--learning_rate", "1e-4"])
    >>> training.learning_rate, model.lora_r, model.lora_alpha, script.dataset_paths
    (0.0001, 32, 64, ['outputs/world/datasets/foundation'])

    ```
    """
    known = _field_names(dataclass_types)
    classes = ", ".join(c.__name__ for c in dataclass_types)
    recipe: dict[str, Any] = {}
    if config is not None:
        recipe = read_recipe_mapping(config)
        unknown = sorted(set(recipe) - (known | {"env"}))
        if unknown:
            raise UsageError(
                f"unknown key(s) in {config}: {_unknown_keys(unknown, known)}; remove them or check the spelling "
                f"(known fields are those of {classes})"
            )
    unknown = sorted(set(values or {}) - known)
    if unknown:
        raise UsageError(f"unknown field(s) {_unknown_keys(unknown, known)}; known fields are those of {classes}")
    # HfArgumentParser takes --field and --field-name alike, and --no_FIELD for a boolean that defaults to true.
    flags = [arg.split("=", 1)[0][2:].replace("-", "_") for arg in overrides if arg.startswith("--")]
    unknown = [f for f in flags if f not in known | {"config", "help"} and f.removeprefix("no_") not in known]
    if unknown:
        raise UsageError(
            f"unknown argument(s) {_unknown_keys([f'--{u}' for u in unknown], {f'--{k}' for k in known})}; "
            f"overrides are --field value with fields of {classes}"
        )
    overrides = _glue_negative_numbers(overrides)
    parser = _build_parser(dataclass_types)
    _set_recipe_env(recipe.pop("env", None), config)
    # As TrlParser.parse_args_and_config does with its --config file: the recipe (then the values) become the
    # parser's defaults, and the command line is parsed over them.
    parser.set_defaults_with_config(**{**recipe, **_typed_values(parser, values or {})})
    # A rejected value raises UsageError (see _build_parser); only --help exits, with code 0. The dataclasses'
    # own checks (TRL's and transformers' included) raise ValueError: bad input as well, one line.
    try:
        *instances, cli_rest = parser.parse_args_into_dataclasses(args=overrides, return_remaining_strings=True)
    except ValueError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UsageError(f"invalid value in {config or 'the overrides'}: {first}") from err
    if cli_rest:
        raise UsageError(
            f"unknown argument(s) {' '.join(cli_rest)}; overrides are --field value with fields of {classes}"
        )
    return tuple(instances)


def _set_recipe_env(env: Any, config: str | os.PathLike | None) -> None:
    """A recipe's ``env: {NAME: value}`` into ``os.environ``, as TRL's parser sets it."""
    if env is None:
        return
    if not isinstance(env, dict):
        raise UsageError(f"invalid value in {config}: `env` must be a mapping of NAME: value")
    for key, value in env.items():
        os.environ[key] = str(value)


def _typed_values(parser: Any, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` typed as the recipe parser types a field: a string through the field's type (``"2"`` for an
    int field is 2), a whole number for a float field as a float, a single value for a list field as a
    one-element list; other values (numbers, lists of them, mappings) as given. One :class:`UsageError` line for
    a value the field's type or choices refuse.

    Example:

    ```python
    >>> from slmsql_hub.training.configs import GRPO_ARGUMENTS
    >>> parser = _build_parser(GRPO_ARGUMENTS)
    >>> _typed_values(parser, {"learning_rate": 0, "max_steps": "2", "dataset_paths": "runs/q/filter/band"})
    {'learning_rate': 0.0, 'max_steps': 2, 'dataset_paths': ['runs/q/filter/band']}
    >>> _typed_values(parser, {"beta": "x"})
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: invalid value for beta: 'x' (expected float)

    ```
    """
    actions = {dest: action for dest, action in parser.field_actions.items() if action.type is not None}
    typed: dict[str, Any] = {}
    for name, value in values.items():
        action = actions.get(name)
        if action is None or value is None:
            typed[name] = value
        elif action.nargs in ("+", "*"):
            items = value if isinstance(value, (list, tuple)) else [value]
            typed[name] = [_typed_value(action, name, item) for item in items]
        else:
            typed[name] = _typed_value(action, name, value)
    return typed


def _typed_value(action: Any, name: str, value: Any) -> Any:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, int) and not isinstance(value, bool) and action.type is float:
        return float(value)
    if not isinstance(value, str):
        return value
    try:
        typed = action.type(value)
    except (TypeError, ValueError, argparse.ArgumentTypeError) as err:
        expected = getattr(action.type, "__name__", "its type")
        raise UsageError(f"invalid value for {name}: {value!r} (expected {expected})") from err
    if action.choices is not None and typed not in action.choices:
        raise UsageError(f"invalid value for {name}: {value!r} (choose from {', '.join(map(str, action.choices))})")
    return typed


_NEGATIVE_NUMBER = re.compile(r"-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|-inf(inity)?", re.IGNORECASE)


def _glue_negative_numbers(overrides: Sequence[str]) -> list[str]:
    """``--field -1e-4`` as ``--field=-1e-4``: argparse takes ``-1e-4`` for an option, not a value.

    >>> _glue_negative_numbers(["--learning_rate", "-1e-4", "--seed", "3", "--beta", "-.5"])
    ['--learning_rate=-1e-4', '--seed', '3', '--beta=-.5']
    """
    glued: list[str] = []
    for arg in overrides:
        previous = glued[-1] if glued else ""
        if _NEGATIVE_NUMBER.fullmatch(arg) and previous.startswith("--") and "=" not in previous:
            glued[-1] = f"{previous}={arg}"
        else:
            glued.append(arg)
    return glued


def _plain(value: Any) -> Any:
    """A YAML-safe rendering of a config value."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return _plain(to_dict())
    return str(value)


_SECRET_FIELDS = frozenset({"hub_token"})


def config_to_dict(*instances: Any) -> dict[str, Any]:
    """Flatten config dataclasses into one recipe-shaped mapping (later instances win; ``hub_token`` and the
    fields a class names in its ``omit_when_unset`` left out while ``None``).

    Example:

    ```python
    >>> from slmsql_hub.data.prompts import PromptArguments
    >>> list(config_to_dict(PromptArguments(prompt_sample_rows=0)).items())[:2]
    [('prompt_sample_rows', 0), ('prompt_max_value_chars', None)]

    ```
    """
    out: dict[str, Any] = {}
    for instance in instances:
        for f in dataclasses.fields(instance):
            value = getattr(instance, f.name)
            if not f.init or f.name in _SECRET_FIELDS or (value is None and f.name in getattr(instance, "omit_when_unset", ())):
                continue
            out[f.name] = _plain(value)
    return out


def save_resolved_config(path: str | os.PathLike, *instances: Any) -> Path:
    """Write the resolved configuration as a YAML recipe that :func:`parse_recipe` reads back; returns the path."""
    import yaml

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = "# Resolved configuration (recipe + overrides + defaults); rerun with --config on this file.\n"
    payload = yaml.safe_dump(config_to_dict(*instances), sort_keys=False, allow_unicode=True)
    path.write_text(header + payload, encoding="utf-8")
    return path
