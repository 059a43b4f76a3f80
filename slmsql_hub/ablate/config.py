"""The study's recipe (``recipes/*/ablations.yaml``): the run it starts from, the band, and the variant grid.

Every variant is a named set of overrides on the band GRPO recipe. :func:`load_ablation_config` checks each
override against the GRPO config dataclasses (names and values, through the same parser ``slmsql train grpo``
uses), so a typo fails in one line before any training starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError

_RUN_DIR = "{run_dir}"


@dataclass(frozen=True)
class Variant:
    """One named set of GRPO overrides and the hypothesis it tests.

    Example:

    ```python
    >>> from slmsql_hub.ablate.config import Variant
    >>> Variant("kl", "a KL penalty", {"beta": 0.04}).override_args("runs/q")
    ['--beta', '0.04']
    >>> Variant("x", "", {"dataset_paths": ["{run_dir}/world/datasets/grounding"]}).override_args("runs/q")
    ['--dataset_paths', 'runs/q/world/datasets/grounding']

    ```
    """

    name: str
    hypothesis: str
    overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def trains_on_band(self) -> bool:
        """False when the variant brings its own training data (``dataset_paths``), as ``unfiltered`` does."""
        return "dataset_paths" not in self.overrides

    def override_args(self, run_dir: str | Path) -> list[str]:
        """The overrides as ``--field value`` strings, ``{run_dir}`` filled in."""
        args: list[str] = []
        for key, value in self.overrides.items():
            values = value if isinstance(value, list) else [value]
            args += [f"--{key}", *(str(v).replace(_RUN_DIR, Path(run_dir).as_posix()) for v in values)]
        return args


@dataclass
class BandSettings:
    """Where the band comes from and how it is split.

    ``pool_rl_pool: null`` uses ``band_dir`` (default: the run's own ``filter/band``); a number builds a pool world with that many
    ``rl_pool`` questions under ``<output_dir>/pool`` and filters ``pool_limit`` of them (seeded) there.
    """

    filter_recipe: str = "recipes/world/filter.yaml"
    band_dir: str | None = None
    pool_rl_pool: int | None = None
    pool_limit: int | None = None
    split_seed: int = 0
    heldout_share: float = 0.5
    min_band: int = 200


@dataclass
class AblationConfig:
    """The whole study: see ``recipes/world/ablations.yaml`` for every field with its reason."""

    grpo_recipe: str
    eval_recipe: str
    variants: list[Variant]
    run_dir: str = "outputs/quickstart"
    output_dir: str = "outputs/ablations"
    seeds: list[int] = field(default_factory=lambda: [0, 1])
    max_steps: int | None = None
    model_name_or_path: str | None = None
    model_revision: str | None = None
    sft_adapter: str | None = None
    sft_adapter_revision: str | None = None
    transfer: list[str] = field(default_factory=lambda: ["world:dev", "world:test"])
    num_threads: int | None = None
    jobs: int = 1
    band: BandSettings = field(default_factory=BandSettings)

    def selected(self, names: list[str] | None) -> list[Variant]:
        """The variants named (in the recipe's order), all when ``names`` is empty; one line for an unknown name."""
        if not names:
            return list(self.variants)
        known = [v.name for v in self.variants]
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UsageError(f"unknown variant(s) {', '.join(unknown)}; the recipe has {', '.join(known)}")
        return [v for v in self.variants if v.name in names]

    @property
    def base_path(self) -> str:
        """The base model: ``model_name_or_path``, else the run's ``base/``."""
        return self.model_name_or_path or str(Path(self.run_dir) / "base")

    @property
    def sft_path(self) -> str:
        """The SFT adapter every variant continues: ``sft_adapter``, else the run's ``sft/stage2``."""
        return self.sft_adapter or str(Path(self.run_dir) / "sft" / "stage2")

    def run_inputs(self) -> list[str]:
        """The parts of ``run_dir`` this study reads: ``base`` and ``sft/stage2`` unless the recipe names a model
        and an adapter (the Qwen recipe's Hub ids), ``world/world.json`` when the pool or a transfer slice is the
        world's.

        Example:

        ```python
        >>> from slmsql_hub.ablate.config import AblationConfig
        >>> AblationConfig("g.yaml", "e.yaml", []).run_inputs()
        ['base', 'sft/stage2', 'world/world.json']
        >>> AblationConfig("g.yaml", "e.yaml", [], model_name_or_path="Qwen/x", sft_adapter="me/sft",
        ...                transfer=["bird:dev:149"]).run_inputs()
        []

        ```
        """
        from ..evaluation import BenchmarkSpec

        world = self.band.pool_rl_pool is not None or any(
            BenchmarkSpec.parse(text).name == "world" for text in self.transfer
        )
        return [
            needed
            for needed, used in (("base", self.model_name_or_path is None), ("sft/stage2", self.sft_adapter is None),
                                 ("world/world.json", world))
            if used
        ]  # fmt: skip

    def base_overrides(self, seed: int, output_dir: Path, dataset: Path) -> list[str]:
        """The overrides every variant's GRPO run gets: the run's base and SFT adapter, band_train, seed."""
        args = [
            "--model_name_or_path", self.base_path,
            "--adapter_path", self.sft_path,
            "--dataset_paths", str(dataset),
            "--output_dir", str(output_dir),
            "--seed", str(seed),
            "--save_strategy", "no",
        ]  # fmt: skip
        for flag, value in (("--model_revision", self.model_revision), ("--adapter_revision", self.sft_adapter_revision),
                            ("--max_steps", self.max_steps)):  # fmt: skip
            if value is not None:
                args += [flag, str(value)]
        if self.num_threads is not None:
            args += ["--num_threads", str(self.num_threads)]
        return args


def _known(cls: type, data: dict[str, Any], where: str) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise UsageError(
            f"unknown key(s) in {where}: {', '.join(unknown)}; known: {', '.join(sorted(names))}"
        )
    return data


def _variants(entries: Any, path: Path) -> list[Variant]:
    if not isinstance(entries, list) or not entries:
        raise UsageError(f"{path}: `variants` must be a non-empty list of {{name, hypothesis, overrides}}")
    variants = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise UsageError(f"{path}: each variant needs a `name` (got {entry!r})")
        _known(Variant, entry, f"{path} variant {entry['name']!r}")
        overrides = entry.get("overrides") or {}
        if not isinstance(overrides, dict):
            raise UsageError(f"{path}: variant {entry['name']!r} overrides must be a mapping of field: value")
        variants.append(Variant(entry["name"], str(entry.get("hypothesis", "")), dict(overrides)))
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise UsageError(f"{path}: variant names repeat: {', '.join(names)}")
    return variants


def validate_variant(config: AblationConfig, variant: Variant) -> None:
    """Parse the band GRPO recipe with the variant's overrides (nothing is loaded): one line on a bad field."""
    from ..recipes import parse_recipe
    from ..training.configs import GRPO_ARGUMENTS

    fields = {f.name for cls in GRPO_ARGUMENTS for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(variant.overrides) - fields)
    if unknown:
        raise UsageError(
            f"variant {variant.name!r}: unknown GRPO field(s) {', '.join(unknown)} (check the spelling against "
            f"{config.grpo_recipe})"
        )
    overrides = config.base_overrides(0, Path(config.output_dir), Path(config.output_dir))
    try:
        parse_recipe(GRPO_ARGUMENTS, config.grpo_recipe, overrides + variant.override_args(config.run_dir))
    except UsageError as err:
        raise UsageError(f"variant {variant.name!r}: {err}") from err


def load_ablation_config(path: str | Path, **cli: Any) -> AblationConfig:
    """Read ``ablations.yaml``, apply the command line (``run_dir``, ``output_dir``, ``seeds``, ``max_steps``,
    ``jobs`` given as not ``None``), and validate every variant's overrides.

    Raises:
        UsageError: a missing or malformed recipe, an unknown key or variant field, or a bad value.
    """
    from ..run.files import read_yaml_mapping

    path = Path(path)
    if not path.is_file():
        raise UsageError(f"ablation recipe not found: {path}")
    data = _known(AblationConfig, dict(read_yaml_mapping(path)), str(path))
    band = BandSettings(**_known(BandSettings, data.pop("band", None) or {}, f"{path} band"))
    variants = _variants(data.pop("variants", None), path)
    for key in ("grpo_recipe", "eval_recipe"):
        if not isinstance(data.get(key), str):
            raise UsageError(f"{path}: `{key}` (the path of a recipe) is required")
    config = AblationConfig(variants=variants, band=band, **data)
    for key, value in cli.items():
        if value is not None:
            setattr(config, key, value)
    if not config.seeds:
        raise UsageError("no seeds: give at least one (e.g. --seeds 0)")
    if config.jobs < 1:
        raise UsageError(f"jobs must be >= 1, got {config.jobs}")
    if config.max_steps is not None and config.max_steps < 1:
        raise UsageError(f"max_steps must be >= 1, got {config.max_steps}")
    if not 0.0 < band.heldout_share < 1.0:
        raise UsageError(f"band.heldout_share must be in (0, 1), got {band.heldout_share}")
    for variant in variants:
        validate_variant(config, variant)
    return config


def load_recipe(path: str | Path, overrides: Sequence[str] = ()) -> AblationConfig:
    """The ``RECIPE_KINDS`` loader of ``ablations*.yaml``: :func:`load_ablation_config` (no ``--field`` overrides)."""
    if overrides:
        raise UsageError(f"an ablation recipe takes no --field overrides (got {' '.join(overrides)})")
    return load_ablation_config(path)
