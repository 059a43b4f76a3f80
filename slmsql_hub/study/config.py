"""The study's recipe (``recipes/*/ablations.yaml``): the run it starts from, the band, and the variant grid.

Every variant is a named set of overrides on the band GRPO recipe. :func:`load_ablation_config` checks each
override against the GRPO config dataclasses (names and values, through the same parser ``slmsql train grpo``
uses), so a typo fails in one line before any training starts.

A recipe may name several **worlds** (``recipes/world/transfer.yaml``): each a run folder of its own (its world,
base and SFT adapter), its output folder and its evaluation slices; every variant then names its ``world``. One
study runs one world at a time: ``--run-dir`` picks the world whose ``run_dir`` it is (default: the recipe's
``run_dir``), and the loaded config holds that world's variants, output folder and slices only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..data.sources import check_dataset_name
from ..errors import UsageError

_RUN_DIR = "{run_dir}"


@dataclass(frozen=True)
class Variant:
    """One named set of GRPO overrides and the hypothesis it tests.

    Example:

    ```python
    >>> from slmsql_hub.study.config import Variant
    >>> Variant("kl", "a KL penalty", {"beta": 0.04}).override_values("runs/q")
    {'beta': 0.04}
    >>> Variant("x", "", {"dataset_paths": ["{run_dir}/world/datasets/grounding"]}).override_values("runs/q")
    {'dataset_paths': ['runs/q/world/datasets/grounding']}

    ```
    """

    name: str
    hypothesis: str
    overrides: dict[str, Any] = field(default_factory=dict)
    world: str | None = None
    seeds: tuple[int, ...] | None = None
    """The seeds this variant runs (``None``: the recipe's ``seeds``)."""
    drop_affected: bool = False
    """Train on band_train without the prompts the world's plant affects (a dose control)."""

    @property
    def trains_on_band(self) -> bool:
        """False when the variant brings its own training data (``dataset_paths``), as ``unfiltered`` does."""
        return "dataset_paths" not in self.overrides

    def override_values(self, run_dir: str | Path) -> dict[str, Any]:
        """The overrides as typed field values, ``{run_dir}`` filled in (in strings and lists of them)."""

        def filled(value: Any) -> Any:
            if isinstance(value, list):
                return [filled(v) for v in value]
            return value.replace(_RUN_DIR, Path(run_dir).as_posix()) if isinstance(value, str) else value

        return {key: filled(value) for key, value in self.overrides.items()}


@dataclass
class WorldArm:
    """One world of a multi-world study: the finished run folder whose world, base and SFT adapter it starts
    from, where its runs and report go, its evaluation slices (``None``: the recipe's ``transfer``) and how its
    world was built (``plant``: ``{name, rate}`` as ``slmsql world build --plant NAME --plant-rate RATE``;
    ``None``: the natural world)."""

    run_dir: str
    output_dir: str
    hypothesis: str = ""
    plant: dict[str, Any] | None = None
    transfer: list[str] | None = None

    def world_build_args(self) -> list[str]:
        """The ``slmsql world build`` options that build this world.

        Example:

        ```python
        >>> from slmsql_hub.study.config import WorldArm
        >>> WorldArm("r", "o", plant={"name": "comparison_inclusive", "rate": 0.7}).world_build_args()
        ['--plant', 'comparison_inclusive', '--plant-rate', '0.7']
        >>> WorldArm("r", "o").world_build_args()
        []

        ```
        """
        if not self.plant:
            return []
        return ["--plant", str(self.plant["name"]), "--plant-rate", str(self.plant["rate"])]


@dataclass
class BandSettings:
    """Where the band comes from and how it is split.

    ``pool_rl_pool: null`` uses ``band_dir`` (default: the run's own ``filter/band``; a Hub dataset id, at
    ``band_revision``, reads a band ``slmsql push`` published, databases included); a number builds a pool world with that many
    ``rl_pool`` questions under ``<output_dir>/pool`` and filters ``pool_limit`` of them (seeded) there.
    """

    filter_recipe: str = "filter.yaml"
    band_dir: str | None = None
    band_revision: str | None = None
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
    passk_samples: int = 0
    passk_slices: list[str] | None = None
    diagnostic_samples: int = 0
    support_samples: int = 0
    band: BandSettings = field(default_factory=BandSettings)
    worlds: dict[str, WorldArm] = field(default_factory=dict)
    world: str | None = None
    cli_seeds: list[int] | None = None

    def seeds_of(self, variant: Variant) -> list[int]:
        """The seeds ``variant`` runs: its own ``seeds`` (only those ``--seeds`` names, when given), else
        ``seeds`` (the recipe's, or ``--seeds``)."""
        if variant.seeds is None:
            return list(self.seeds)
        return [s for s in variant.seeds if self.cli_seeds is None or s in self.cli_seeds]

    def grid(self, variants: list[Variant]) -> list[tuple[Variant, int]]:
        """Every (variant, seed) pair of ``variants``, in recipe order.

        Example:

        ```python
        >>> from slmsql_hub.study.config import AblationConfig, Variant
        >>> config = AblationConfig("g.yaml", "e.yaml", [], seeds=[0, 1])
        >>> variants = [Variant("a", ""), Variant("b", "", seeds=(0, 1, 2))]
        >>> [(v.name, s) for v, s in config.grid(variants)]
        [('a', 0), ('a', 1), ('b', 0), ('b', 1), ('b', 2)]
        >>> config.cli_seeds = config.seeds = [2]
        >>> [(v.name, s) for v, s in config.grid(variants)]
        [('a', 2), ('b', 2)]

        ```
        """
        return [(v, s) for v in variants for s in self.seeds_of(v)]

    @property
    def plant(self) -> Any:
        """The :class:`~slmsql_hub.study.plant.Plant` of this study's world (``None``: a natural world, or a
        recipe without ``worlds``)."""
        from .plant import Plant

        arm = self.worlds.get(self.world) if self.world else None
        return Plant(arm.plant["name"], float(arm.plant["rate"])) if arm and arm.plant else None

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
        >>> from slmsql_hub.study.config import AblationConfig
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

    def base_values(self, seed: int, output_dir: Path, dataset: Path) -> dict[str, Any]:
        """The GRPO field values every variant's run gets: the run's base and SFT adapter, band_train, seed (an
        unset revision, ``max_steps`` or ``num_threads`` leaves the recipe's).

        Example:

        ```python
        >>> from pathlib import Path
        >>> from slmsql_hub.study.config import AblationConfig
        >>> AblationConfig("g.yaml", "e.yaml", [], run_dir="runs/q", max_steps=2).base_values(
        ...     1, Path("o"), Path("band_train"))  # doctest: +NORMALIZE_WHITESPACE
        {'model_name_or_path': 'runs/q/base', 'adapter_path': 'runs/q/sft/stage2', 'dataset_paths': ['band_train'],
         'output_dir': 'o', 'seed': 1, 'save_strategy': 'no', 'max_steps': 2}

        ```
        """
        given = {"model_revision": self.model_revision, "adapter_revision": self.sft_adapter_revision,
                 "max_steps": self.max_steps, "num_threads": self.num_threads}  # fmt: skip
        return {
            "model_name_or_path": self.base_path,
            "adapter_path": self.sft_path,
            "dataset_paths": [str(dataset)],
            "output_dir": str(output_dir),
            "seed": seed,
            "save_strategy": "no",
            **{key: value for key, value in given.items() if value is not None},
        }


def _known(cls: type, data: dict[str, Any], where: str) -> dict[str, Any]:
    from ..recipes import did_you_mean

    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        named = ", ".join(f"{key}{did_you_mean(key, names)}" for key in unknown)
        raise UsageError(f"unknown key(s) in {where}: {named}; known: {', '.join(sorted(names))}")
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
        world = entry.get("world")
        if world is not None and not isinstance(world, str):
            raise UsageError(f"{path}: variant {entry['name']!r} world must be the name of one of `worlds`")
        variants.append(Variant(entry["name"], str(entry.get("hypothesis", "")), dict(overrides), world,
                                _variant_seeds(entry, path), _drop_affected(entry, overrides, path)))  # fmt: skip
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise UsageError(f"{path}: variant names repeat: {', '.join(names)}")
    return variants


def _variant_seeds(entry: dict, path: Path) -> tuple[int, ...] | None:
    seeds = entry.get("seeds")
    if seeds is None:
        return None
    if (not isinstance(seeds, list) or not seeds or len(set(seeds)) != len(seeds)
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)):  # fmt: skip
        raise UsageError(
            f"{path}: variant {entry['name']!r} seeds must be a list of distinct whole numbers >= 0, e.g. [0, 1, 2]; "
            f"got {seeds!r}"
        )
    return tuple(seeds)


def _drop_affected(entry: dict, overrides: dict, path: Path) -> bool:
    drop = entry.get("drop_affected", False)
    if not isinstance(drop, bool):
        raise UsageError(f"{path}: variant {entry['name']!r} drop_affected must be true or false, got {drop!r}")
    if drop and "dataset_paths" in overrides:
        raise UsageError(
            f"{path}: variant {entry['name']!r} drop_affected removes prompts from band_train, but the variant "
            "trains on its own dataset_paths"
        )
    return drop


def _check_planted(variants: list[Variant], worlds: dict[str, WorldArm], path: Path) -> None:
    """One line when a ``drop_affected`` variant's world plants nothing (no prompt would be affected)."""
    for v in variants:
        arm = worlds.get(v.world) if v.world else None
        if v.drop_affected and (arm is None or not arm.plant):
            raise UsageError(
                f"{path}: variant {v.name!r} sets drop_affected, but its world plants nothing; name a planted "
                "world (one with `plant: {name, rate}`)"
            )


def _worlds(entries: Any, path: Path) -> dict[str, WorldArm]:
    if entries is None:
        return {}
    if not isinstance(entries, dict) or not all(isinstance(arm, dict) for arm in entries.values()):
        raise UsageError(
            f"{path}: `worlds` must map each world's name to {{run_dir, output_dir, plant, ...}}"
        )
    arms = {}
    for name, entry in entries.items():
        _known(WorldArm, entry, f"{path} world {name!r}")
        if not isinstance(entry.get("run_dir"), str) or not isinstance(entry.get("output_dir"), str):
            raise UsageError(f"{path}: world {name!r} needs a run_dir and an output_dir")
        plant = entry.get("plant")
        if plant is not None:
            from .plant import Plant

            if not isinstance(plant, dict) or set(plant) != {"name", "rate"}:
                raise UsageError(f"{path}: world {name!r} plant must be {{name, rate}} (got {plant!r})")
            Plant(
                plant["name"], float(plant["rate"])
            )  # one line on an unknown plant or a rate outside [0, 1]
        arms[name] = WorldArm(**entry)
    runs = [arm.run_dir for arm in arms.values()]
    if len(set(runs)) != len(runs):
        raise UsageError(f"{path}: two worlds share a run_dir; each world needs its own run folder")
    return arms


def _one_world(config: AblationConfig, path: Path, output_given: bool) -> None:
    """Narrow a multi-world ``config`` to the world whose ``run_dir`` is ``config.run_dir``."""
    unknown = sorted({v.world for v in config.variants} - set(config.worlds))
    if unknown or any(v.world is None for v in config.variants):
        raise UsageError(
            f"{path}: every variant must name one of the worlds ({', '.join(config.worlds)}) as `world`; "
            f"unknown: {', '.join(str(w) for w in unknown) or 'none given'}"
        )
    chosen = [name for name, arm in config.worlds.items() if Path(arm.run_dir) == Path(config.run_dir)]
    if not chosen:
        choices = ", ".join(f"{name}: {arm.run_dir}" for name, arm in config.worlds.items())
        raise UsageError(f"{path} runs one world at a time: pass --run-dir of one of its worlds ({choices})")
    config.world = chosen[0]
    arm = config.worlds[config.world]
    config.variants = [v for v in config.variants if v.world == config.world]
    if not output_given:
        config.output_dir = arm.output_dir
    if arm.transfer is not None:
        config.transfer = list(arm.transfer)


def _check_passk_slices(config: AblationConfig, path: Path) -> None:
    """One line unless ``passk_slices`` lists slices the study samples (band halves, any world's probes)."""
    from ..evaluation import BenchmarkSpec
    from .sampled import BAND_SLICES, sampled_slices

    value = config.passk_slices
    texts = [*config.transfer, *(t for arm in config.worlds.values() for t in arm.transfer or [])]
    known = list(dict.fromkeys(sampled_slices([*BAND_SLICES, *(BenchmarkSpec.parse(t).key for t in texts)])))
    if not isinstance(value, list) or not value or not all(isinstance(name, str) for name in value):
        raise UsageError(f"{path}: passk_slices must be a list of slice names, some of {', '.join(known)} "
                         f"(null: all), got {value!r}")  # fmt: skip
    unknown = [name for name in value if name not in known]
    if unknown:
        raise UsageError(
            f"{path}: passk_slices: {', '.join(unknown)} is not a sampled slice of this study ({', '.join(known)})"
        )


def _validate_variant(config: AblationConfig, variant: Variant) -> None:
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
    base = config.base_values(0, Path(config.output_dir), Path(config.output_dir))
    try:
        parse_recipe(GRPO_ARGUMENTS, config.grpo_recipe, values={**base, **variant.override_values(config.run_dir)})
    except UsageError as err:
        raise UsageError(f"variant {variant.name!r}: {err}") from err


def _models_from_run(config: AblationConfig) -> None:
    """Fill an unset base model or SFT adapter that the run took from the Hub (its ``base/`` or ``sft/stage2/``
    ``hub.json``, read by :func:`~slmsql_hub.run.read.model_ref`) with that repo id and revision; a trained one
    stays the run's folder (:attr:`AblationConfig.base_path`, :attr:`AblationConfig.sft_path`)."""
    from ..run.layout import RunLayout
    from ..run.read import model_ref

    run = RunLayout(config.run_dir)
    for stage, name, revision in ((run.base, "model_name_or_path", "model_revision"),
                                  (run.sft_stage2, "sft_adapter", "sft_adapter_revision")):  # fmt: skip
        ref = model_ref(stage)
        if getattr(config, name) is None and ref.hub:
            setattr(config, name, ref.name)
            if getattr(config, revision) is None:
                setattr(config, revision, ref.revision)


def load_ablation_config(path: str | Path, **cli: Any) -> AblationConfig:
    """Read ``ablations.yaml``, apply the command line (``run_dir``, ``output_dir``, ``seeds``, ``max_steps``,
    ``jobs`` given as not ``None``), narrow a multi-world recipe to the world of ``run_dir``, and validate every
    variant's overrides.

    Raises:
        UsageError: a missing or malformed recipe, an unknown key or variant field, or a bad value.
    """
    from ..recipes import read_recipe_mapping, recipe_reference

    path = Path(path)
    data = _known(AblationConfig, read_recipe_mapping(path), str(path))
    band = BandSettings(**_known(BandSettings, data.pop("band", None) or {}, f"{path} band"))
    variants = _variants(data.pop("variants", None), path)
    worlds = _worlds(data.pop("worlds", None), path)
    if data.pop("world", None) is not None:
        raise UsageError(f"{path}: `world` is chosen with --run-dir, not set in the recipe")
    if data.pop("cli_seeds", None) is not None:
        raise UsageError(f"{path}: `cli_seeds` is --seeds on the command line, not set in the recipe")
    _check_planted(variants, worlds, path)
    for key in ("grpo_recipe", "eval_recipe"):
        if not isinstance(data.get(key), str):
            raise UsageError(f"{path}: `{key}` (the path of a recipe) is required")
        data[key] = str(recipe_reference(path, data[key]))
    band.filter_recipe = str(recipe_reference(path, band.filter_recipe))
    config = AblationConfig(variants=variants, band=band, worlds=worlds, **data)
    for key, value in cli.items():
        if value is not None:
            setattr(config, key, value)
    if cli.get("seeds") is not None:  # a filter on the variants' own seeds too
        config.cli_seeds = list(cli["seeds"])
    if config.passk_slices is not None:  # before a world narrows `transfer`: any world's probe is a name
        _check_passk_slices(config, path)
    if worlds:
        _one_world(config, path, cli.get("output_dir") is not None)
    elif any(v.world is not None for v in variants):
        raise UsageError(f"{path}: a variant names a world but the recipe has no `worlds`")
    _models_from_run(config)
    if not config.seeds:
        raise UsageError("no seeds: give at least one (e.g. --seeds 0)")
    if config.jobs < 1:
        raise UsageError(f"jobs must be >= 1, got {config.jobs}")
    for key, off in (("passk_samples", "no sampled pass@k"), ("diagnostic_samples", "no KL or entropy"),
                     ("support_samples", "no pass@k on the held-out database")):  # fmt: skip
        value = getattr(config, key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UsageError(f"{key} must be a whole number >= 0 (0: {off}), got {value!r}")
    if config.max_steps is not None and config.max_steps < 1:
        raise UsageError(f"max_steps must be >= 1, got {config.max_steps}")
    if band.band_dir:
        check_dataset_name(str(band.band_dir), "band.band_dir")
    if not 0.0 < band.heldout_share < 1.0:
        raise UsageError(f"band.heldout_share must be in (0, 1), got {band.heldout_share}")
    for variant in variants:
        _validate_variant(config, variant)
    return config


def recipe_worlds(path: str | Path) -> dict[str, WorldArm]:
    """The ``worlds`` of a study's recipe, validated as :func:`load_ablation_config` validates them (``{}``: a
    single-world recipe); nothing else is read."""
    from ..recipes import read_recipe_mapping

    return _worlds(read_recipe_mapping(Path(path)).get("worlds"), Path(path))


def load_recipe(path: str | Path, overrides: Sequence[str] = ()) -> AblationConfig:
    """The ``RECIPE_KINDS`` loader of ``ablations*.yaml``: :func:`load_ablation_config` (no ``--field`` overrides)."""
    if overrides:
        raise UsageError(f"an ablation recipe takes no --field overrides (got {' '.join(overrides)})")
    return load_ablation_config(path)
