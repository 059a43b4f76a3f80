"""What every stage's configuration shares: the recipe parser, the prompt settings and the benchmark vocabulary.

A recipe is one flat YAML file filling a stage's dataclasses (as in open-r1); ``--field value`` on the command
line wins over the recipe (:func:`parse_recipe`). The stages' own dataclasses build on:

- :class:`PromptArguments`: ``prompt_sample_rows`` / ``prompt_max_value_chars``. Unset, a stage that continues
  an adapter uses the values the adapter was trained with (its ``run_summary.json``), else the defaults
  :data:`DEFAULT_PROMPT_SAMPLE_ROWS` / :data:`DEFAULT_PROMPT_MAX_VALUE_CHARS` (:func:`resolve_prompt_config`).
- :class:`BenchmarkArguments`: ``benchmarks: [NAME:SPLIT[:LIMIT], ...]`` plus one root folder per benchmark
  (``world_root``, ``bird_root``, ``spider_root``, ``synsql_root``). The older spellings (``benchmarks:
  [bird=data/bird]`` + ``benchmark_split``; ``benchmark`` + ``data_root`` + ``split``; ``world_dir``) still load
  for one release, each with one logged deprecation line naming the new spelling.

Nothing here reads datasets or models: a recipe for a model this machine cannot run still validates.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from .errors import UsageError
from .model_refs import DTYPES
from .sql.recipe_limits import SQLLimitsArguments

if TYPE_CHECKING:
    from .prompts import PromptConfig

logger = logging.getLogger(__name__)

DEFAULT_PROMPT_SAMPLE_ROWS = 3
"""Sample rows per table in the schema text when neither the recipe nor the adapter says."""
DEFAULT_PROMPT_MAX_VALUE_CHARS = 40
"""Longest value shown in a sample row when neither the recipe nor the adapter says."""
BACKENDS = ("transformers", "vllm")


def resolve_prompt_config(
    adapter: str | os.PathLike | None, sample_rows: int | None = None, max_value_chars: int | None = None
) -> tuple[PromptConfig, str]:
    """``(PromptConfig, source)``: the given values, else the ``prompt`` section of a local adapter's
    ``run_summary.json``, else the defaults; ``source`` (``recipe``, ``adapter`` or ``default``) says where
    ``sample_rows`` came from. :class:`UsageError` when that file is not valid JSON.

    Example:

    ```python
    >>> config, source = resolve_prompt_config("org/hub-adapter", sample_rows=0)
    >>> config.sample_rows, config.max_value_chars, source
    (0, 40, 'recipe')

    ```
    """
    from .prompts import PromptConfig

    source = "recipe" if sample_rows is not None else "default"
    summary_file = Path(adapter).expanduser() / "run_summary.json" if adapter else None
    if (sample_rows is None or max_value_chars is None) and summary_file is not None and summary_file.is_file():
        try:
            trained = json.loads(summary_file.read_text(encoding="utf-8")).get("prompt") or {}
        except json.JSONDecodeError as err:
            raise UsageError(f"{summary_file} is not valid JSON ({err}); fix it or set prompt_sample_rows") from err
        if sample_rows is None and "sample_rows" in trained:
            sample_rows, source = int(trained["sample_rows"]), "adapter"
        if max_value_chars is None and "max_value_chars" in trained:
            max_value_chars = int(trained["max_value_chars"])
    return (
        PromptConfig(
            sample_rows=DEFAULT_PROMPT_SAMPLE_ROWS if sample_rows is None else sample_rows,
            max_value_chars=DEFAULT_PROMPT_MAX_VALUE_CHARS if max_value_chars is None else max_value_chars,
        ),
        source,
    )


@dataclass
class PromptArguments:
    """How the schema text of a prompt is built (``None``: as the adapter was trained, else the defaults).

    Example:

    ```python
    >>> PromptArguments(prompt_sample_rows=0).resolve_prompt_config(None)[0].max_value_chars
    40
    >>> PromptArguments(prompt_sample_rows=-1)
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: prompt_sample_rows must be >= 0 (0 shows no sample rows), or null; got -1

    ```
    """

    prompt_sample_rows: int | None = field(
        default=None,
        metadata={"help": "Sample rows per table in the schema text; null: as the adapter was trained, else 3."},
    )
    prompt_max_value_chars: int | None = field(
        default=None, metadata={"help": "Longest value shown in a sample row; null: as the adapter, else 40."}
    )

    def __post_init__(self) -> None:
        rows, chars = self.prompt_sample_rows, self.prompt_max_value_chars
        if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 0):
            raise UsageError(f"prompt_sample_rows must be >= 0 (0 shows no sample rows), or null; got {rows!r}")
        if chars is not None and (isinstance(chars, bool) or not isinstance(chars, int) or chars < 1):
            raise UsageError(f"prompt_max_value_chars must be >= 1, or null; got {chars!r}")

    def fill_prompt_defaults(self) -> None:
        """Set unset prompt fields to the defaults (for stages that start from a base model)."""
        if self.prompt_sample_rows is None:
            self.prompt_sample_rows = DEFAULT_PROMPT_SAMPLE_ROWS
        if self.prompt_max_value_chars is None:
            self.prompt_max_value_chars = DEFAULT_PROMPT_MAX_VALUE_CHARS

    def resolve_prompt_config(self, adapter: str | os.PathLike | None) -> tuple[PromptConfig, str]:
        """:func:`resolve_prompt_config` with this recipe's values."""
        return resolve_prompt_config(adapter, self.prompt_sample_rows, self.prompt_max_value_chars)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass
class InferenceArguments(SQLLimitsArguments):
    """What the filter and the evaluation share: the base model, decoding budget, sandbox and output folder.

    Example:

    ```python
    >>> InferenceArguments(model_name_or_path="m", output_dir="o", batch_size=0)
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: batch_size must be a positive integer; got 0

    ```
    """

    model_name_or_path: str | None = field(default=None, metadata={"help": "Base model: a local folder or a Hub id."})
    model_revision: str | None = field(
        default=None, metadata={"help": "Hub revision (commit sha or tag) of model_name_or_path; null: main."}
    )
    tokenizer_name_or_path: str | None = field(
        default=None, metadata={"help": "Tokenizer location; null uses the base model's."}
    )
    dtype: str = field(default="auto", metadata={"help": "Weights' dtype.", "choices": list(DTYPES)})
    device: str | None = field(default=None, metadata={"help": "cuda, cpu...; null picks CUDA when present."})
    num_threads: int | None = field(default=None, metadata={"help": "torch.set_num_threads for this run."})
    backend: str = field(
        default="transformers",
        metadata={"help": "Generation backend: transformers or vllm.", "choices": list(BACKENDS)},
    )
    seed: int = field(default=0, metadata={"help": "Seeds the LIMIT subset (and the filter's sampling)."})
    skip_missing_db: bool = field(default=False, metadata={"help": "Drop questions whose database is missing."})
    max_new_tokens: int = field(default=256, metadata={"help": "Most tokens per completion."})
    batch_size: int = field(default=8, metadata={"help": "Questions per generate call (the filter: per save)."})
    keep_distinct: bool = field(default=False, metadata={"help": "Spider comparison: keep DISTINCT."})
    timeout_s: float | None = field(default=None, metadata={"help": "Deprecated: use sql_timeout_s."})
    sandbox_workers: int | None = field(default=None, metadata={"help": "Sandbox processes (null: CPUs)."})
    output_dir: str | None = field(default=None, metadata={"help": "Where this stage writes its outputs."})

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise UsageError(f"dtype must be one of {', '.join(DTYPES)}; got {self.dtype!r}")
        if self.backend not in BACKENDS:
            raise UsageError(f"backend must be 'transformers' or 'vllm'; got {self.backend!r}")
        for name in ("max_new_tokens", "batch_size"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise UsageError(f"{name} must be a positive integer; got {value!r}")
        for name in ("sandbox_workers", "num_threads"):
            value = getattr(self, name)
            if value is not None and (not _is_int(value) or value < 1):
                raise UsageError(f"{name} must be a positive integer, or null; got {value!r}")
        if not _is_int(self.seed):
            raise UsageError(f"seed must be an integer; got {self.seed!r}")
        self.resolve_sql_limits(deprecated_timeout="timeout_s")

    def load_policy(self, adapter: str | None = None, **adapter_kwargs: Any) -> Any:
        """:func:`~slmsql_hub.generation.load_policy` of this base model (tokenizer, dtype, device, backend,
        revision) with ``adapter`` or ``adapters=``/``adapter_revisions=``."""
        from .generation import load_policy

        return load_policy(
            self.model_name_or_path,
            adapter,
            tokenizer=self.tokenizer_name_or_path,
            dtype=self.dtype,
            device=self.device,
            backend=self.backend,
            revision=self.model_revision,
            **adapter_kwargs,
        )


BENCHMARK_NAMES = ("world", "spider", "bird", "synsql")
"""The benchmarks a recipe can name; each has a ``<name>_root`` field."""


class BenchmarkEntry(NamedTuple):
    """One ``NAME:SPLIT[:LIMIT]`` entry of ``benchmarks``.

    Example:

    ```python
    >>> BenchmarkEntry.parse("spider:dev:200")
    BenchmarkEntry(name='spider', split='dev', limit=200)
    >>> BenchmarkEntry.parse("spider")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: benchmarks entry 'spider' must be NAME:SPLIT or NAME:SPLIT:LIMIT, e.g. world:dev:200 or bird:train

    ```
    """

    name: str
    split: str
    limit: int | None = None

    @classmethod
    def parse(cls, text: str) -> BenchmarkEntry:
        parts = [part.strip() for part in str(text).split(":")]
        if len(parts) not in (2, 3) or not all(parts):
            raise UsageError(
                f"benchmarks entry {text!r} must be NAME:SPLIT or NAME:SPLIT:LIMIT, e.g. world:dev:200 or bird:train"
            )
        name = parts[0].lower()
        if name not in BENCHMARK_NAMES:
            raise UsageError(f"benchmarks entry {text!r}: unknown benchmark {name!r}; use one of {', '.join(BENCHMARK_NAMES)}")
        limit = None
        if len(parts) == 3:
            if not parts[2].isdigit() or int(parts[2]) < 1:
                raise UsageError(f"benchmarks entry {text!r}: LIMIT must be a whole number >= 1")
            limit = int(parts[2])
        return cls(name, parts[1], limit)

    def __str__(self) -> str:
        return f"{self.name}:{self.split}" + (f":{self.limit}" if self.limit is not None else "")


DEPRECATED_FIELDS = frozenset(
    {"benchmark_split", "benchmark_limit", "benchmark", "data_root", "split", "limit", "world_dir"}
)
"""The old benchmark spellings :class:`BenchmarkArguments` still reads (left out of saved configs when unset)."""


def _deprecated(old: str, new: str) -> None:
    logger.warning("%s is deprecated and will be removed in the next release; write %s", old, new)


@dataclass
class BenchmarkArguments:
    """Benchmarks read from their release files: ``benchmarks: [NAME:SPLIT[:LIMIT]]`` plus ``<name>_root``.

    Example:

    ```python
    >>> args = BenchmarkArguments(benchmarks=["bird:train", "spider:train:500"], bird_root="data/bird",
    ...                           spider_root="data/spider")
    >>> [(entry.name, args.root(entry.name), entry.limit) for entry in args.benchmark_entries()]
    [('bird', 'data/bird', None), ('spider', 'data/spider', 500)]
    >>> BenchmarkArguments(benchmarks=["bird:train"])
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: benchmarks lists bird but bird_root is not set; e.g. `bird_root: data/bird`

    ```
    """

    benchmarks: list[str] = field(
        default_factory=list,
        metadata={"help": "Benchmarks as NAME:SPLIT[:LIMIT] (e.g. world:dev:200, bird:train)."},
    )
    world_root: str | None = field(default=None, metadata={"help": "The world folder (slmsql world build)."})
    bird_root: str | None = field(default=None, metadata={"help": "BIRD folder (train.json / dev.json)."})
    spider_root: str | None = field(default=None, metadata={"help": "Spider folder (train/dev json, database/)."})
    synsql_root: str | None = field(default=None, metadata={"help": "SynSQL-2.5M folder."})
    # Deprecated spellings, read for one release (see _upgrade_old_spellings).
    benchmark_split: str | None = field(default=None, metadata={"help": "Deprecated: NAME:SPLIT in benchmarks."})
    benchmark_limit: int | None = field(default=None, metadata={"help": "Deprecated: NAME:SPLIT:LIMIT."})
    benchmark: str | None = field(default=None, metadata={"help": "Deprecated: benchmarks: [NAME:SPLIT]."})
    data_root: str | None = field(default=None, metadata={"help": "Deprecated: <name>_root."})
    split: str | None = field(default=None, metadata={"help": "Deprecated: NAME:SPLIT in benchmarks."})
    limit: int | None = field(default=None, metadata={"help": "Deprecated: NAME:SPLIT:LIMIT in benchmarks."})
    world_dir: str | None = field(default=None, metadata={"help": "Deprecated: world_root."})

    def __post_init__(self) -> None:
        if isinstance(self.benchmarks, str):
            self.benchmarks = [self.benchmarks]
        self.benchmarks = [str(b).strip() for b in (self.benchmarks or []) if str(b).strip()]
        self._upgrade_old_spellings()
        entries = self.benchmark_entries()
        seen: set[str] = set()
        for entry in entries:
            if entry.name in seen:
                raise UsageError(f"benchmark {entry.name!r} is listed twice in benchmarks; keep one entry")
            seen.add(entry.name)
            if not self.root(entry.name):
                raise UsageError(
                    f"benchmarks lists {entry.name} but {entry.name}_root is not set; "
                    f"e.g. `{entry.name}_root: {'outputs/world' if entry.name == 'world' else 'data/' + entry.name}`"
                )

    def benchmark_entries(self) -> list[BenchmarkEntry]:
        """The parsed ``benchmarks``, in recipe order."""
        return [BenchmarkEntry.parse(text) for text in self.benchmarks]

    def root(self, name: str) -> str | None:
        """The root folder of benchmark ``name`` (``<name>_root``)."""
        return getattr(self, f"{name}_root")

    def _upgrade_old_spellings(self) -> None:
        """Rewrite the deprecated spellings into ``benchmarks`` + ``<name>_root``, one warning each."""
        if self.world_dir is not None:
            _deprecated("world_dir", f"world_root: {self.world_dir}")
            self._set_root("world", self.world_dir, "world_dir")
            self.world_dir = None
        # Old run folders' config.yaml hold benchmark_split/benchmark_limit beside no NAME=ROOT entry: nothing to read.
        if not any("=" in b for b in self.benchmarks):
            self.benchmark_split = self.benchmark_limit = None
        else:
            if self.benchmark_limit is not None and self.benchmark_limit < 1:
                raise UsageError(f"benchmark_limit must be >= 1, or null for all; got {self.benchmark_limit}")
            upgraded = [self._upgrade_entry(b) if "=" in b else b for b in self.benchmarks]
            roots = ", ".join(f"{BenchmarkEntry.parse(u).name}_root: {b.partition('=')[2].strip()}"
                              for b, u in zip(self.benchmarks, upgraded) if "=" in b)
            _deprecated(
                "benchmarks: [NAME=ROOT] with benchmark_split/benchmark_limit",
                f"benchmarks: [{', '.join(upgraded)}]" + (f" and {roots}" if roots else ""),
            )
            self.benchmarks, self.benchmark_split, self.benchmark_limit = upgraded, None, None
        if self.benchmark is not None or self.data_root is not None or self.split is not None or self.limit is not None:
            name = (self.benchmark or "world").strip().lower()
            split = self.split or ("train" if name == "synsql" else "dev")  # the loader's default split
            if self.limit is not None and self.limit < 1:
                raise UsageError(f"limit must be >= 1, or null for all; got {self.limit}")
            entry = f"{name}:{split}" + (f":{self.limit}" if self.limit is not None else "")
            if self.benchmarks:
                raise UsageError(
                    f"benchmarks: {self.benchmarks} and the deprecated benchmark/data_root/split/limit are both "
                    f"given; keep one: benchmarks: [{entry}] and {name}_root"
                )
            if name in BENCHMARK_NAMES and self.data_root:
                self._set_root(name, self.data_root, "data_root")
            _deprecated(
                "benchmark/data_root/split/limit",
                f"benchmarks: [{entry}]" + (f" and {name}_root: {self.data_root}" if self.data_root else ""),
            )
            self.benchmarks = [*self.benchmarks, entry]
            self.benchmark = self.data_root = self.split = self.limit = None

    def _set_root(self, name: str, root: str, old_field: str) -> None:
        current = self.root(name)
        if current and current != root:
            raise UsageError(f"{old_field} {root} disagrees with {name}_root: {current}; keep {name}_root")
        setattr(self, f"{name}_root", root)

    def _upgrade_entry(self, text: str) -> str:
        name, _, root = (part.strip() for part in text.partition("="))
        name = name.lower()
        if not root or name not in BENCHMARK_NAMES:
            raise UsageError(
                f"benchmarks entry {text!r} must be NAME:SPLIT[:LIMIT] with NAME one of "
                f"{', '.join(BENCHMARK_NAMES)}, e.g. bird:train (and bird_root: data/bird)"
            )
        current = self.root(name)
        if current and current != root:
            raise UsageError(f"benchmarks entry {text!r} disagrees with {name}_root: {current}; keep one")
        setattr(self, f"{name}_root", root)
        limit = f":{self.benchmark_limit}" if self.benchmark_limit is not None else ""
        return f"{name}:{self.benchmark_split or 'train'}{limit}"


def _field_names(dataclass_types: Sequence[type]) -> set[str]:
    return {f.name for cls in dataclass_types for f in dataclasses.fields(cls) if f.init}


def _build_parser(dataclass_types: Sequence[type]):
    from trl import TrlParser

    # No abbreviations: `--learning_r 1e-4` must fail like any other misspelling, not set learning_rate.
    parser = TrlParser(dataclass_types=list(dataclass_types), allow_abbrev=False)

    def refuse(message: str) -> NoReturn:
        # argparse would print its usage block and exit; the caller wants one line it can report.
        raise UsageError(f"invalid value in the recipe or an override: {message}")

    parser.error = refuse
    return parser


def parse_recipe(
    dataclass_types: Sequence[type],
    config: str | os.PathLike | None = None,
    overrides: Sequence[str] = (),
) -> tuple:
    """Fill ``dataclass_types`` from a flat YAML recipe, then from ``--key value`` overrides (which win).

    Returns one validated instance per dataclass, in the order given. Raises :class:`UsageError` when the recipe
    is missing or not a mapping, a key is unknown (recipe or overrides), or a value fails validation.

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
    import yaml

    argv: list[str] = []
    if config is not None:
        path = Path(config)
        if not path.is_file():
            raise UsageError(f"recipe not found: {path}; pass an existing YAML file to --config")
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as err:
            raise UsageError(f"recipe {path} is not valid YAML: {err}") from err
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise UsageError(f"recipe {path} must be a YAML mapping of field: value")
        unknown = sorted(set(loaded) - (_field_names(dataclass_types) | {"env"}))
        if unknown:
            raise UsageError(
                f"unknown key(s) in {path}: {', '.join(unknown)}; remove them or check the spelling "
                f"(known fields are those of {', '.join(c.__name__ for c in dataclass_types)})"
            )
        argv = ["--config", str(path)]
    parser = _build_parser(dataclass_types)
    # A rejected value raises UsageError (see _build_parser); only --help exits, with code 0.
    parsed = parser.parse_args_and_config(
        [*argv, *overrides], return_remaining_strings=True, separate_remaining_strings=True
    )
    *instances, config_rest, cli_rest = parsed
    if config_rest or cli_rest:
        raise UsageError(
            f"unknown argument(s) {' '.join(config_rest + cli_rest)}; overrides are --field value with fields of "
            f"{', '.join(c.__name__ for c in dataclass_types)}"
        )
    return tuple(instances)


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
    """Flatten config dataclasses into one recipe-shaped mapping (later instances win; ``hub_token`` and unset
    deprecated spellings left out).

    Example:

    ```python
    >>> config_to_dict(PromptArguments(prompt_sample_rows=0))
    {'prompt_sample_rows': 0, 'prompt_max_value_chars': None}

    ```
    """
    out: dict[str, Any] = {}
    for instance in instances:
        for f in dataclasses.fields(instance):
            value = getattr(instance, f.name)
            if not f.init or f.name in _SECRET_FIELDS or (f.name in DEPRECATED_FIELDS and value is None):
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


RECIPE_KINDS: dict[str, str] = {
    "base": "slmsql_hub.training.configs:BASE_ARGUMENTS",
    "sft": "slmsql_hub.training.configs:SFT_ARGUMENTS",
    "grpo": "slmsql_hub.training.configs:GRPO_ARGUMENTS",
    "filter": "slmsql_hub.filtering:load_filter_config",
    "eval": "slmsql_hub.evaluation:load_eval_config",
    "ablations": "slmsql_hub.ablate.config:load_recipe",
    "transfer": "slmsql_hub.ablate.config:load_recipe",
}
"""How to read a recipe, by the first ``_``-separated word of its file name (``sft_stage1_synsql.yaml`` is an
``sft`` recipe): ``"module:NAME"`` of a tuple of dataclasses (read with :func:`parse_recipe`) or of a loader
``(config, overrides) -> config``. Register a new kind here and ``tests/test_recipes.py`` checks it."""


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
    import importlib

    kind = recipe_kind(path)
    if kind not in RECIPE_KINDS:
        raise UsageError(
            f"cannot tell what {path} configures: its name starts with {kind!r}, not one of "
            f"{', '.join(sorted(RECIPE_KINDS))}; rename it or register the kind in RECIPE_KINDS"
        )
    module_name, _, attribute = RECIPE_KINDS[kind].partition(":")
    target = getattr(importlib.import_module(module_name), attribute)
    if isinstance(target, tuple):
        return parse_recipe(target, path, overrides)
    return (target(path, overrides),)
