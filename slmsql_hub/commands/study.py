"""A study's stage table, said once as data: ``study.yaml`` in its recipe folder (``recipes/world/study.yaml``,
``recipes/qwen2.5-coder-1.5b/study.yaml``), which ``slmsql quickstart --recipes FOLDER`` runs into one run folder
laid out by :class:`~slmsql_hub.run.layout.RunLayout`.

A stage either runs an ``slmsql`` subcommand (``command``, with a ``recipe`` of the folder and ``options`` that
point its paths into the run folder), or is taken from the Hub (``hub``: a repo id and a revision, recorded in its
``folder``'s ``hub.json``; no weights are copied). A stage with both is trained unless it is taken from the Hub
(the study's ``from_hub`` list, or ``slmsql quickstart --from-hub``); a stage that only ``feeds`` stages taken from
the Hub is skipped. An optional stage may run ``beside`` the stage right before it: in its own process at
the same time (two one-thread runs on a machine with two cores or more cost one run's wall time). Option values name the run's places in braces, filled by :func:`_run_values`: ``{out}``,
``{repo_id}``, ``{world}``, ``{world_<split>}``, ``{filter}``, ``{band}``, ``{eval}``, and for each base, SFT
and GRPO stage ``{<stage>}`` (what loads it: the Hub repo id of a stage taken from the Hub, else its folder),
``{<stage>_revision}`` (an option whose value is this alone and empty is left out) and ``{<stage>_dir}``.

Example ``study.yaml`` stage::

    - name: filter
      description: pass-rate filter on the SFT policy
      command: filter
      recipe: filter.yaml
      marker: filter_report
      options: {--model_name_or_path: "{base}", --model_revision: "{base_revision}",
                --adapter_path: "{sft_stage2}", --output_dir: "{filter}"}
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..refs import check_repo_id
from ..resources import PACKAGE_DIR
from ..run.files import read_yaml_mapping
from ..run.layout import RunLayout, StageFolder
from ..run.read import model_ref

_STUDY_FILE = "study.yaml"
COMMANDS = ("world build", "train base", "train sft", "train grpo", "filter", "eval", "card", "push {out}")
"""The subcommands a stage may run (``{out}``: the run folder)."""
SPLITS = ("foundation", "grounding", "rl_pool", "dev", "test")
_MODEL_STAGES = ("base", "sft_stage1", "sft_stage2", "grpo_attempt1", "grpo")
"""The run's stage folders a study may name (``folder``) and load (``{<stage>}``)."""

Options = dict[str, str | bool]


def flat_options(options: Options) -> list[str]:
    """Options as command-line strings (``True``: a bare flag): the command line :meth:`Stage.argv` shows."""
    flat: list[str] = []
    for key, value in options.items():
        flat += [key] if value is True else [key, str(value)]
    return flat


@dataclass(frozen=True)
class HubSource:
    """A stage taken from the Hub: its repo id and revision (``None``: the default branch)."""

    repo_id: str
    revision: str | None = None


@dataclass(frozen=True)
class Stage:
    """One row of a study's table (see the module docstring); ``raw_options`` are the options as written."""

    name: str
    description: str
    command: str | None = None
    recipe: str | None = None
    folder: str | None = None
    marker_name: str | None = None
    hub: HubSource | None = None
    optional: bool = False
    feeds: tuple[str, ...] = ()
    beside: str | None = None
    raw_options: Mapping[str, str | bool] = field(default_factory=dict)

    def stage_folder(self, run: RunLayout) -> StageFolder | None:
        return getattr(run, self.folder) if self.folder else None

    def marker(self, run: RunLayout, from_hub: bool = False) -> Path:
        """The file this stage writes last: its folder's ``hub.json`` when taken from the Hub, its folder's
        ``run_summary.json``, else the layout path ``marker`` names (e.g. ``filter_report``, ``card.readme``)."""
        if from_hub:
            return self.stage_folder(run).hub
        if self.marker_name is None:
            return self.stage_folder(run).summary
        target: Any = run
        for part in self.marker_name.split("."):
            target = getattr(target, part)
        return Path(target)

    def options(self, run: RunLayout, repo_id: str) -> Options:
        """The options with the run's places filled in (:func:`_run_values`)."""
        values = _run_values(run, repo_id)
        options: Options = {}
        for key, value in self.raw_options.items():
            if value is True:
                options[key] = True
                continue
            text = str(value)
            if (
                text.startswith("{")
                and text.endswith("}")
                and text[1:-1] in values
                and values[text[1:-1]] is None
            ):
                continue  # e.g. {base_revision} of a local base: no revision to pass
            options[key] = text.format_map({k: "" if v is None else v for k, v in values.items()})
        return options

    def values(self, run: RunLayout, repo_id: str) -> dict[str, str | bool]:
        """The options as the field values the stage's library call takes (``--model_name_or_path``:
        ``model_name_or_path``, ``--run-dir``: ``run_dir``), the run's places filled in.

        Example:

        ```python
        >>> from slmsql_hub.commands.study import load_study
        >>> load_study("recipes/world").stage("card").values(RunLayout("runs/q"), "me/model")
        {'run_dir': 'runs/q', 'repo_id': 'me/model'}

        ```
        """
        return {key.lstrip("-").replace("-", "_"): value for key, value in self.options(run, repo_id).items()}

    def argv(
        self, out: str | os.PathLike, recipes: str | os.PathLike, repo_id: str, sets: Mapping[str, str] | None = None
    ) -> list[str]:
        """The ``slmsql`` command line that does what this stage does (``sets``: its fields of ``quickstart
        --set``, last), for a person to read or rerun: the quickstart logs it and calls the library with
        :meth:`values`.

        Example:

        ```python
        >>> from pathlib import Path
        >>> from slmsql_hub.commands.study import load_study
        >>> load_study(Path("recipes/world")).stages[0].argv(Path("runs/q"), Path("recipes/world"), "me/model")
        ['world', 'build', '--out', 'runs/q/world']

        ```
        """
        if self.command is None:
            raise UsageError(f"stage '{self.name}' is taken from the Hub; it has no command line")
        command = [part.format(out=Path(out).as_posix()) for part in self.command.split()]
        config = ["--config", (Path(recipes) / self.recipe).as_posix()] if self.recipe else []
        sets_options = {f"--{key}": value for key, value in (sets or {}).items()}
        return [*command, *config, *flat_options({**self.options(RunLayout(out), repo_id), **sets_options})]


@dataclass(frozen=True)
class Study:
    """A study's table: its stages in order, the stages it takes from the Hub by default (``from_hub``), the
    repo id its card and dry-run push are written for, its default run folder (``out``), and its attempt #1 policy (``auto``, ``always``,
    ``never``)."""

    name: str
    folder: Path
    stages: tuple[Stage, ...]
    repo_id: str
    out: Path
    from_hub: tuple[str, ...] = ()
    attempt1: str = "auto"

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)

    def check_from_hub(self, names: tuple[str, ...]) -> tuple[str, ...]:
        """``names`` when each is a stage with a Hub source, else one UsageError line."""
        sources = [s.name for s in self.stages if s.hub is not None]
        unknown = [n for n in names if n not in sources]
        if unknown:
            raise UsageError(
                f"--from-hub {','.join(unknown)}: the study {self.name} takes only "
                f"{', '.join(sources) or 'no stage'} from the Hub ({self.folder / _STUDY_FILE})"
            )
        return names


def _run_values(run: RunLayout, repo_id: str) -> dict[str, str | None]:
    """The names a stage's options may use, for ``run`` (see the module docstring).

    Example:

    ```python
    >>> import tempfile
    >>> values = _run_values(RunLayout("runs/q"), "me/model")
    >>> values["sft_stage2"], values["sft_stage2_revision"], values["band"]
    ('runs/q/sft/stage2', None, 'runs/q/filter/band')

    ```
    """
    values: dict[str, str | None] = {
        "out": str(run.root),
        "repo_id": repo_id,
        "world": str(run.world),
        "filter": str(run.filter),
        "band": str(run.band),
        "eval": str(run.eval),
        **{f"world_{split}": str(run.world_split(split)) for split in SPLITS},
    }
    for name in _MODEL_STAGES:
        folder: StageFolder = getattr(run, name)
        ref = model_ref(folder)
        values.update({name: ref.name, f"{name}_revision": ref.revision, f"{name}_dir": str(folder.path)})
    return values


def _hub_source(value: Any, where: str) -> HubSource | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not isinstance(value.get("repo_id"), str):
        raise UsageError(f"{where}: hub must be {{repo_id: NAMESPACE/NAME, revision: SHA or null}}")
    revision = value.get("revision")
    return HubSource(check_repo_id(value["repo_id"], f"{where}: hub.repo_id", namespace=False),
                     None if revision is None else str(revision))  # fmt: skip


def _stage(entry: Any, where: str, known: set[str]) -> Stage:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
        raise UsageError(f"{where}: each stage is a mapping with a name")
    where = f"{where}: stage {entry['name']!r}"
    unknown = set(entry) - {"name", "description", "command", "recipe", "folder", "marker", "hub", "optional",
                            "feeds", "beside", "options"}  # fmt: skip
    if unknown:
        raise UsageError(f"{where} has unknown keys {', '.join(sorted(unknown))}")
    stage = Stage(
        name=entry["name"],
        description=str(entry.get("description") or entry["name"]),
        command=entry.get("command"),
        recipe=entry.get("recipe"),
        folder=entry.get("folder"),
        marker_name=entry.get("marker"),
        hub=_hub_source(entry.get("hub"), where),
        optional=bool(entry.get("optional", False)),
        feeds=tuple(entry.get("feeds") or ()),
        beside=entry.get("beside"),
        raw_options=dict(entry.get("options") or {}),
    )
    if stage.command is None and stage.hub is None:
        raise UsageError(f"{where} needs a command or a hub source")
    if stage.command is not None and stage.command not in COMMANDS:
        raise UsageError(f"{where}: unknown command {stage.command!r}; one of {', '.join(COMMANDS)}")
    if stage.folder is not None and stage.folder not in _MODEL_STAGES:
        raise UsageError(f"{where}: folder must be one of {', '.join(_MODEL_STAGES)}")
    if stage.folder is None and (stage.hub is not None or stage.marker_name is None):
        raise UsageError(f"{where} needs a folder (a stage folder of the run) or a marker (a layout path)")
    if set(stage.feeds) - known:
        raise UsageError(f"{where} feeds unknown stages {', '.join(sorted(set(stage.feeds) - known))}")
    try:
        stage.marker(RunLayout("run"))
        stage.options(RunLayout("run"), "me/model")
    except (AttributeError, KeyError, ValueError, IndexError) as err:
        raise UsageError(f"{where}: a marker or option names no place of the run ({err})") from err
    return stage


def default_recipes_dir() -> Path:
    """``recipes/world`` of the source checkout (the quickstart runs from a clone), else of the cwd."""
    for candidate in (
        PACKAGE_DIR.parent / "recipes" / "world",
        Path.cwd() / "recipes" / "world",
    ):
        if (candidate / _STUDY_FILE).is_file():
            return candidate
    raise UsageError(
        "cannot find the world recipes (recipes/world/study.yaml): run from a clone of slmsql-hub or pass --recipes"
    )


def load_study(recipes: str | os.PathLike) -> Study:
    """The study of the recipe folder ``recipes``: its ``study.yaml``, or the world's table for a folder of
    world recipes without one (the smoke recipes copied under their plain names). One UsageError line for a
    missing folder or a malformed table.

    Example:

    ```python
    >>> from slmsql_hub.commands.study import load_study
    >>> [s.name for s in load_study("recipes/qwen2.5-coder-1.5b").stages][:3]
    ['base', 'sft1', 'sft2']

    ```
    """
    folder = Path(recipes)
    if not folder.is_dir():
        raise UsageError(f"recipe folder not found: {folder}; pass a study's folder, e.g. recipes/world")
    path = folder / _STUDY_FILE
    if not path.is_file():
        path = default_recipes_dir() / _STUDY_FILE
    data = read_yaml_mapping(path)
    entries = data.get("stages")
    if not isinstance(entries, list) or not entries:
        raise UsageError(f"{path}: no stages; a study lists its stages under `stages:`")
    known = {str(e.get("name")) for e in entries if isinstance(e, Mapping)}
    stages = tuple(_stage(entry, str(path), known) for entry in entries)
    if len(known) != len(stages):
        raise UsageError(f"{path}: two stages share a name")
    for before, stage in zip((None, *stages), stages):
        if stage.beside is not None and (before is None or stage.beside != before.name or not stage.optional
                                         or before.beside is not None):  # fmt: skip
            raise UsageError(
                f"{path}: stage {stage.name!r}: beside must name the stage right before it (itself not beside "
                f"another), and only an optional stage runs beside one; got {stage.beside!r}"
            )
    attempt1 = str(data.get("attempt1", "auto"))
    if attempt1 not in ("auto", "always", "never"):
        raise UsageError(f"{path}: attempt1 must be auto, always or never; got {attempt1!r}")
    study = Study(
        name=str(data.get("name") or folder.name),
        folder=folder,
        stages=stages,
        repo_id=check_repo_id(str(data.get("repo_id") or ""), f"{path}: repo_id"),
        out=Path(str(data.get("out") or Path("outputs") / folder.name)),
        attempt1=attempt1,
    )
    return Study(**{**study.__dict__, "from_hub": study.check_from_hub(tuple(data.get("from_hub") or ()))})


def load_recipe(path: str | os.PathLike, overrides: Sequence[str] = ()) -> tuple[Study]:
    """The ``RECIPE_KINDS`` loader of ``study.yaml``: :func:`load_study` of its folder (no ``--field`` overrides);
    each stage's recipe must be in the folder."""
    if overrides:
        raise UsageError(f"a study's table takes no --field overrides (got {' '.join(overrides)})")
    path = Path(path)
    study = load_study(path.parent)
    missing = [s.recipe for s in study.stages if s.recipe and not (path.parent / s.recipe).is_file()]
    if missing:
        raise UsageError(f"{path}: recipes not in {path.parent}: {', '.join(missing)}")
    return (study,)
