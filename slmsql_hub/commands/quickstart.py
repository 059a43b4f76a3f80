"""``slmsql quickstart [--recipes FOLDER]``: every stage of a study, end to end, into one run folder.

The stages are the study's table, ``FOLDER/study.yaml`` (:mod:`~slmsql_hub.commands.study`). On the embedded
world (``recipes/world``, the default; ``make quickstart``) it builds the world, pretrains the tiny base, trains
the two SFT stages, runs the pass-rate filter, trains GRPO on the band (and attempt #1 on unfiltered data when the
time budget allows), evaluates SFT vs GRPO with paired statistics, renders the model card and writes the exact
folders a push would upload (a dry run). ``--recipes recipes/qwen2.5-coder-1.5b`` runs the GPU study the same
way, its base model and SFT adapter taken from the Hub. Each stage calls the same library function as its
``slmsql`` subcommand, with the study's recipe and its options as typed field values
(:meth:`~slmsql_hub.commands.study.Stage.values`), which point every path into one run folder laid out by
:class:`~slmsql_hub.run.layout.RunLayout`; :meth:`~slmsql_hub.commands.study.Stage.argv` is the command line that
does the same (logged, never parsed here). A stage taken from the Hub writes its folder's ``hub.json`` (repo id and revision).

A stage whose output marker exists is reused, so re-running after an interruption continues where it stopped;
``--force`` redoes everything.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..run.artifacts import ADAPTER_CONFIG, BASE_CONFIG, check_model_folder
from ..run.files import read_json_object, write_atomic
from ..run.guard import check_output, output_lock
from ..run.layout import WORLD_MANIFEST, RunLayout
from ..run.read import Run, model_ref, read_run
from . import existing_folder, folder_to_write, number, print_result, repo_id
from ._beside import BesideProcess
from .study import Stage, Study, default_recipes_dir, load_study

Values = Mapping[str, Any]
"""A stage's field values (:meth:`~slmsql_hub.commands.study.Stage.values` and ``--set``)."""

logger = logging.getLogger(__name__)

DEFAULT_OUT = Path("outputs/quickstart")
"""The world study's run folder (``out`` in ``recipes/world/study.yaml``), where the demo Space looks by default."""


# ----------------------------------------------------------------------------------------------------------
# Each subcommand's library call (what `slmsql <command>` runs after parsing its arguments)
# ----------------------------------------------------------------------------------------------------------


def _world(run: RunLayout, values: Values, recipe: Path | None) -> dict[str, Any]:
    from ..world.build import WorldSizes, build_world

    manifest = build_world(str(values["out"]), seed=0, sizes=WorldSizes(), overwrite=False)
    return {"world": str(manifest.root), "held_out_db": manifest.held_out_db}


def _train(kind: str) -> Callable[[RunLayout, Values, Path | None], dict[str, Any]]:
    """The call of ``train <kind>`` (a partial: a stage run beside another is handed to a spawned process)."""
    import functools

    return functools.partial(_train_call, kind)


def _train_call(kind: str, run: RunLayout, values: Values, recipe: Path | None) -> dict[str, Any]:
    from ..recipes import parse_recipe
    from ..training import configs

    if kind == "base":
        from ..training.base import train_base

        return train_base(*parse_recipe(configs.BASE_ARGUMENTS, recipe, values=values))
    if kind == "sft":
        from ..training.sft import train_sft

        return train_sft(*parse_recipe(configs.SFT_ARGUMENTS, recipe, values=values))
    from ..training.grpo import train_grpo

    summary = train_grpo(*parse_recipe(configs.GRPO_ARGUMENTS, recipe, values=values))
    if summary["guards"]["failed"]:
        raise UsageError(f"guards failed after training: {', '.join(summary['guards']['failed'])}")
    return summary


def _filter(run: RunLayout, values: Values, recipe: Path | None) -> dict[str, Any]:
    from ..filtering import load_filter_config, run_filter

    return run_filter(load_filter_config(recipe, values=values))


def _eval(run: RunLayout, values: Values, recipe: Path | None) -> dict[str, Any]:
    from ..evaluation import load_eval_config, run_eval

    return run_eval(load_eval_config(recipe, values=values))


def _card(run: RunLayout, values: Values, recipe: Path | None) -> dict[str, Any]:
    from ..card import CardOptions, build_card

    result = build_card(str(values["run_dir"]), None, options=CardOptions(repo_id=str(values["repo_id"])))
    return {"card": str(result.readme), "outcome": result.outcome}


def _push_dry_run(run: RunLayout, values: Values, recipe: Path | None) -> dict[str, Any]:
    from ..hub import plan_push, write_dry_run

    targets = plan_push(str(run.root), str(values["repo_id"]), str(values["what"]))
    plan = write_dry_run(targets, run.push_dry_run, revision=None, create_pr=False)
    return {"targets": [target["what"] for target in plan["targets"]]}


_CALLS: dict[str, Callable[[RunLayout, Values, Path | None], dict[str, Any]]] = {  # keyed by study.COMMANDS
    "world build": _world,
    "train base": _train("base"),
    "train sft": _train("sft"),
    "train grpo": _train("grpo"),
    "filter": _filter,
    "eval": _eval,
    "card": _card,
    "push {out}": _push_dry_run,
}


_OVERRIDES_FILE = "quickstart_overrides.json"
"""The run folder's record of ``--set`` (``{"set": {field: value}}``): a rerun must give the same ones."""


def _config_types(command: str | None) -> tuple[type, ...]:
    """The configuration dataclasses a stage's command parses its recipe into (none for the world, card, push)."""
    if command in ("train base", "train sft", "train grpo"):
        from ..training import configs

        return {"train base": configs.BASE_ARGUMENTS, "train sft": configs.SFT_ARGUMENTS,
                "train grpo": configs.GRPO_ARGUMENTS}[command]  # fmt: skip
    if command == "filter":
        from ..filtering.config import FilterConfig

        return (FilterConfig,)
    if command == "eval":
        from ..evaluation.config import EvalConfig

        return (EvalConfig,)
    return ()


def _stage_overrides(study: Study, sets: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """``--set`` fields by stage: each field goes to every stage whose configuration has it (its recipe parser
    types and validates the value as it would the recipe's); a field no stage has is a UsageError, before
    anything runs.

    Example:

    ```python
    >>> from slmsql_hub.commands.study import default_recipes_dir
    >>> by_stage = _stage_overrides(load_study(default_recipes_dir()), {"max_steps": "2"})
    >>> sorted(by_stage)
    ['base', 'grpo', 'grpo_attempt1', 'sft1', 'sft2']

    ```
    """
    fields = {
        stage.name: {f.name for t in _config_types(stage.command) for f in dataclasses.fields(t)}
        for stage in study.stages
    }
    unknown = sorted(key for key in sets if not any(key in names for names in fields.values()))
    if unknown:
        raise UsageError(
            f"--set {', '.join(unknown)}: no stage of {study.folder} has such a field (a field of its training, "
            "filter or eval configuration, e.g. max_steps or model_name_or_path)"
        )
    return {
        name: {key: value for key, value in sets.items() if key in names}
        for name, names in fields.items()
        if any(key in names for key in sets)
    }


def _record_overrides(run: RunLayout, sets: Mapping[str, str], force: bool) -> None:
    """Record ``sets`` in the run folder; a run made with other ones is a UsageError (its stages would mix them)."""
    path = run.root / _OVERRIDES_FILE
    recorded = read_json_object(path, "remove it and rerun with --force").get("set") if path.is_file() else None
    if recorded is None:
        recorded = {} if any(run.root.iterdir()) else dict(sets)  # a run made before --set had none
    if not force and recorded != dict(sets):
        raise UsageError(
            f"{run.root} was run with --set {recorded or 'none'}, not {dict(sets) or 'none'}: give the same "
            "overrides to resume it, or --force to start over"
        )
    write_atomic(path, json.dumps({"set": dict(sets)}, indent=2) + "\n")


@dataclass
class QuickstartResult:
    """What ran, what was reused, what was skipped, and how long each stage took."""

    out: Path
    ran: dict[str, float] = field(default_factory=dict)
    reused: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0


def _take_from_hub(stage: Stage, run: RunLayout) -> dict[str, Any]:
    """Record a stage taken from the Hub in its folder's ``hub.json`` (nothing is downloaded here: the stages
    that load it do, by repo id and revision)."""
    folder = stage.stage_folder(run)
    folder.path.mkdir(parents=True, exist_ok=True)
    record = {"repo_id": stage.hub.repo_id, "revision": stage.hub.revision}
    write_atomic(folder.hub, json.dumps(record, indent=2) + "\n")
    return record


def check_hub_sources(study: Study, hub_stages: Sequence[str]) -> None:
    """Every stage taken from the Hub exists at its revision (its config fetched into the cache,
    :func:`~slmsql_hub.refs.check_hub_repo`), checked before the first stage runs: a wrong id or pin is one line
    now, not when the first stage that loads it starts, minutes or hours in."""
    from ..refs import check_hub_repo

    for stage in study.stages:
        if stage.name in hub_stages and stage.hub is not None:
            config = "config.json" if stage.folder == "base" else "adapter_config.json"
            what = f"stage '{stage.name}' ({study.folder / 'study.yaml'})"
            check_hub_repo(stage.hub.repo_id, config, what=what, revision=stage.hub.revision)


def _check_source(stage: Stage, run: RunLayout, from_hub: bool) -> None:
    """One line when the stage's folder already holds the other source (a trained adapter where the study now
    takes it from the Hub, or the reverse), or another Hub repo than the study names."""
    folder = stage.stage_folder(run)
    if folder is None:
        return
    if from_hub and folder.summary.is_file():
        raise UsageError(
            f"{folder.path} holds a trained stage '{stage.name}' but the study now takes it from the Hub; "
            f"remove the folder, or run with --from-hub none"
        )
    if folder.hub.is_file():
        recorded = model_ref(folder)
        if not from_hub:
            raise UsageError(
                f"{folder.hub} records stage '{stage.name}' from the Hub ({recorded.name}) but it is to be trained "
                f"now; remove {folder.path}, or pass --from-hub {stage.name}"
            )
        if (recorded.name, recorded.revision) != (stage.hub.repo_id, stage.hub.revision):
            raise UsageError(
                f"{folder.hub} records {recorded.name} at {recorded.revision} but the study names "
                f"{stage.hub.repo_id} at {stage.hub.revision}; remove {folder.path} (and the stages after it) or "
                "use --force"
            )


def _check_finished_model(stage: Stage, run: RunLayout, from_hub: bool) -> None:
    """A reused training stage counts as finished only when the model it saved is whole (its configs parse, its
    safetensors are complete): a truncated adapter or base is one line naming the file, not reused."""
    folder = stage.stage_folder(run)
    if folder is None or from_hub:
        return
    kind = "adapter" if (folder.path / ADAPTER_CONFIG).is_file() else "base"
    if kind == "adapter" or (folder.path / BASE_CONFIG).is_file():
        fix = f"stage '{stage.name}' is not reused; remove {folder.path} to train it again, or use --force"
        check_model_folder(folder.path, kind, fix)


def _check_world_version(stage: Stage, run: RunLayout) -> None:
    """A reused world built by another version of the world code is not reused silently: its questions differ
    (version 2 keeps dev and test apart from training by meaning), and every later stage trained on it."""
    from ..world.build import WORLD_VERSION

    manifest = stage.marker(run)
    if manifest.name != WORLD_MANIFEST:
        return
    version = read_json_object(manifest, "rebuild the run with --force").get("version")
    if version is not None and str(version) != WORLD_VERSION:
        raise UsageError(
            f"stage '{stage.name}': {manifest} is a world of version {version}, this code builds version "
            f"{WORLD_VERSION}; rerun with --force to rebuild the run (its later stages trained on the old world)"
        )


def _run_stage(
    stage: Stage,
    run: RunLayout,
    recipes: Path,
    repo_id: str,
    *,
    from_hub: bool = False,
    overrides: Mapping[str, str] | None = None,
    call: Callable[[RunLayout, Values, Path | None], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run one stage into the run folder (its subcommand's library call, or its Hub record), check it wrote its
    marker and return what the call returned; a UsageError names the stage that failed or wrote no marker.
    ``overrides`` (its fields of ``--set``, :func:`_stage_overrides`) win over the study's options and the recipe;
    ``call`` (default: the command's, :data:`_CALLS`) is what runs it."""
    _check_source(stage, run, from_hub)
    if from_hub:
        logger.info("%s: from the Hub, %s at %s", stage.name, stage.hub.repo_id, stage.hub.revision or "main")
        return _take_from_hub(stage, run)
    logger.info("%s: slmsql %s", stage.name, " ".join(stage.argv(run.root, recipes, repo_id, overrides)))
    recipe = Path(recipes) / stage.recipe if stage.recipe else None
    try:
        result = (call or _CALLS[stage.command])(run, {**stage.values(run, repo_id), **(overrides or {})}, recipe)
    except UsageError as err:
        raise UsageError(
            f"stage '{stage.name}' failed: {err}; fix the cause and rerun: finished stages are reused"
        ) from err
    if not stage.marker(run).is_file():
        raise UsageError(f"stage '{stage.name}' finished without writing {stage.marker(run)}")
    return result


def _from_hub_names(study: Study, from_hub: str | Sequence[str] | None) -> tuple[str, ...]:
    """The stages taken from the Hub: every stage with only a Hub source, plus ``from_hub`` (a comma-separated
    string, ``none``, or names; ``None``: the study's default)."""
    if from_hub is None:
        chosen: tuple[str, ...] = study.from_hub
    elif isinstance(from_hub, str):
        chosen = tuple(n.strip() for n in from_hub.split(",") if n.strip() and n.strip() != "none")
    else:
        chosen = tuple(from_hub)
    study.check_from_hub(chosen)
    return tuple(
        s.name for s in study.stages if s.hub is not None and (s.command is None or s.name in chosen)
    )


def run_quickstart(
    out: str | Path | None = None,
    *,
    recipes: str | Path | None = None,
    repo_id: str | None = None,
    budget_s: float = 600.0,
    attempt1: str | None = None,
    from_hub: str | Sequence[str] | None = None,
    until: str | None = None,
    force: bool = False,
    on_stage: Callable[[int, int, Stage, str], None] | None = None,
    sets: Mapping[str, str] | None = None,
    beside: bool = True,
) -> QuickstartResult:
    """Run (or resume) every stage of the study in ``recipes`` (default ``recipes/world``) into ``out`` (default:
    the study's ``out``); ``force`` deletes it first.

    ``repo_id`` (default: the study's) is what the card and the dry-run push are written for (nothing is
    uploaded). ``from_hub`` names the stages taken from the Hub instead of trained (default: the study's
    ``from_hub``; ``"none"``: train them all). An optional stage ``beside`` another (attempt #1 beside the band
    run in the world study) runs in its own process at the same time when the machine has two cores or more,
    ``beside`` is true and ``attempt1`` is not ``"never"``. Otherwise, with ``attempt1="auto"`` it runs only when
    ``budget_s`` leaves room for it (estimated from the band run) and for evaluation (``"always"``, ``"never"``;
    default: the study's). ``until`` names the last stage to run; the later ones are skipped (a UsageError names
    the study's stages when it is not one of them, before anything runs). ``on_stage(index, total, stage,
    state)`` is told ``start``, ``done``, ``reused`` or ``skipped``.
    ``sets`` (``--set FIELD=VALUE``) go to every stage whose configuration has the field (:func:`_stage_overrides`)
    and are recorded in the run folder (:data:`_OVERRIDES_FILE`). A failed stage is a UsageError naming it;
    rerunning resumes from it.
    """
    study = load_study(Path(recipes) if recipes is not None else default_recipes_dir())
    attempt1 = attempt1 or study.attempt1
    if attempt1 not in ("auto", "always", "never"):
        raise UsageError(f"attempt1 must be auto, always or never; got {attempt1!r}")
    hub_stages = _from_hub_names(study, from_hub)
    names = [s.name for s in study.stages]
    if until is not None and until not in names:
        raise UsageError(f"--until {until!r} is not a stage of {study.name}; its stages: {', '.join(names)}")
    last = names.index(until) + 1 if until is not None else len(names)
    repo_id = repo_id or study.repo_id
    out = check_output(out if out is not None else study.out, [study.folder], "--out")
    overrides = _stage_overrides(study, sets or {})
    check_hub_sources(study, hub_stages)
    with output_lock(out):
        if force and Path(out).exists():
            shutil.rmtree(out)
        Path(out).mkdir(parents=True, exist_ok=True)
        _record_overrides(RunLayout(out), sets or {}, force)
        return _run_stages(
            study, RunLayout(out), hub_stages, (last, until), repo_id, budget_s, attempt1, on_stage, overrides,
            beside and _cores() >= 2,
        )


def _run_stages(
    study: Study, run: RunLayout, hub_stages: tuple[str, ...], until: tuple[int, str | None], repo_id: str,
    budget_s: float, attempt1: str, on_stage: Callable[[int, int, Stage, str], None] | None,
    overrides: Mapping[str, Mapping[str, str]], parallel: bool,
) -> QuickstartResult:
    """:func:`run_quickstart`'s loop over the stages, under the run folder's lock; ``parallel``: run a stage
    ``beside`` another at the same time."""
    (last, until), out = until, run.root
    result = QuickstartResult(out=out)
    started = time.monotonic()
    total = len(study.stages)

    def notify(i: int, stage: Stage, state: str) -> None:
        if on_stage is not None:
            on_stage(i, total, stage, state)

    beside = _beside_pairs(study, run, hub_stages, last, attempt1, parallel)
    ready: dict[str, BesideProcess] = {}  # beside processes started early, by the stage they run beside
    try:
        _loop(study, run, hub_stages, (last, until), repo_id, budget_s, attempt1, notify, overrides, beside, ready,
              result, started)  # fmt: skip
    finally:
        for process in ready.values():
            process.stop()
    result.wall_s = time.monotonic() - started
    return result


def _beside_pairs(
    study: Study, run: RunLayout, hub_stages: tuple[str, ...], last: int, attempt1: str, parallel: bool
) -> dict[str, tuple[int, Stage]]:
    """The stages that will run beside another in this invocation: ``{the stage it runs beside: (index, it)}``."""
    pairs = {}
    for i, stage in enumerate(study.stages[:-1], start=1):
        following = study.stages[i]
        if (following.beside == stage.name and i + 1 <= last and attempt1 != "never" and parallel
                and stage.name not in hub_stages and not stage.marker(run).is_file()
                and not following.marker(run).is_file()):  # fmt: skip
            pairs[stage.name] = (i + 1, following)
    return pairs


def _loop(
    study: Study, run: RunLayout, hub_stages: tuple[str, ...], until: tuple[int, str | None], repo_id: str,
    budget_s: float, attempt1: str, notify: Callable[[int, Stage, str], None],
    overrides: Mapping[str, Mapping[str, str]], beside: dict[str, tuple[int, Stage]],
    ready: dict[str, BesideProcess], result: QuickstartResult, started: float,
) -> None:
    """:func:`_run_stages`'s loop; a beside stage's process starts with the first stage that leaves a core idle
    (:data:`_ONE_CORE`), so its imports are done when its turn comes, or else at its turn."""
    last, until_name = until
    for i, stage in enumerate(study.stages, start=1):
        hub = stage.name in hub_stages
        if stage.name in result.ran:
            continue  # it ran beside the stage before it
        if stage.marker(run, from_hub=hub).is_file():
            _check_source(stage, run, hub)
            _check_finished_model(stage, run, hub)
            _check_world_version(stage, run)
            result.reused.append(stage.name)
            notify(i, stage, "reused")
            continue
        reason = None
        if i > last:
            reason = f"after --until {until_name}"
        elif stage.feeds and set(stage.feeds) <= set(hub_stages):
            reason = f"it only feeds {', '.join(stage.feeds)}, taken from the Hub"
        elif stage.optional:
            reason = _skip_attempt1(attempt1, result, time.monotonic() - started, budget_s)
        if reason:
            result.skipped[stage.name] = reason
            logger.info("skipping %s: %s", stage.name, reason)
            notify(i, stage, "skipped")
            if stage.name in beside:  # its partner runs on its own turn
                del beside[stage.name]
                if stage.name in ready:
                    ready.pop(stage.name).stop()
            continue
        if stage.command in _ONE_CORE:
            for name, (_, other) in beside.items():
                if name not in ready:  # one process per pair, however many one-core stages come first
                    ready[name] = _beside_process(other)
        _run_turn(i, stage, run, study.folder, repo_id, hub, overrides, beside, ready, result, notify)


def _run_turn(
    i: int, stage: Stage, run: RunLayout, recipes: Path, repo_id: str, hub: bool,
    overrides: Mapping[str, Mapping[str, str]], beside: dict[str, tuple[int, Stage]],
    ready: dict[str, BesideProcess], result: QuickstartResult, notify: Callable[[int, Stage, str], None],
) -> None:
    """Run one stage (and the one beside it, if any) and record their seconds in ``result``."""
    notify(i, stage, "start")
    t0 = time.monotonic()
    if stage.name in beside:
        k, other = beside[stage.name]
        notify(k, other, "start")
        process = ready.pop(stage.name, None) or _beside_process(other)
        result.ran.update(_run_beside(stage, process, run, recipes, repo_id, overrides))
        notify(k, other, "done")
    else:
        _run_stage(stage, run, recipes, repo_id, from_hub=hub, overrides=overrides.get(stage.name))
        result.ran[stage.name] = time.monotonic() - t0
    notify(i, stage, "done")


def _beside_job(
    stage: Stage, root: Path, recipes: Path, repo_id: str, overrides: dict[str, str], call: Callable
) -> None:
    """What a beside process runs: the stage, with the call the parent hands it (its own ``_CALLS`` entry)."""
    _run_stage(stage, RunLayout(root), recipes, repo_id, overrides=overrides, call=call)


def _beside_process(stage: Stage) -> BesideProcess:
    """A process for ``stage``, run beside another, that imports its command's modules as it starts."""
    return BesideProcess(stage, _WARM.get(stage.command, ()))


_WARM = {
    "train base": ("slmsql_hub.training.base", "transformers:Trainer"),
    "train sft": ("slmsql_hub.training.sft", "trl:SFTTrainer"),
    "train grpo": ("slmsql_hub.training.grpo", "trl:GRPOTrainer"),
}
"""What a training stage's process imports before its job (~5 s on one core: torch, transformers, PEFT, TRL)."""


_ONE_CORE = frozenset({"world build"})
"""Commands that run on one core (pure Python): a beside stage's process starts with them, so its imports
(torch, transformers, TRL: ~5 s) use the idle core, not the band run's time."""


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _run_beside(
    stage: Stage, process: BesideProcess, run: RunLayout, recipes: Path, repo_id: str,
    overrides: Mapping[str, Mapping[str, str]],
) -> dict[str, float]:
    """Run ``stage`` here and ``process.stage`` (``beside`` it) in ``process`` at the same time; each one's
    seconds. When ``stage`` fails the child is ended; when the child fails, its UsageError is one naming it here,
    and a crash (its traceback printed above) a RuntimeError."""
    other = process.stage
    t0 = time.monotonic()
    process.run(_beside_job, other, run.root, recipes, repo_id, dict(overrides.get(other.name) or {}),
                _CALLS[other.command])  # fmt: skip
    try:
        _run_stage(stage, run, recipes, repo_id, overrides=overrides.get(stage.name))
    except BaseException:
        process.stop()
        raise
    ran = {stage.name: time.monotonic() - t0}
    outcome = process.result()
    if outcome[0] == "usage":
        raise UsageError(f"stage '{other.name}' (run beside '{stage.name}') failed: {outcome[1]}")
    if outcome[0] != "done":
        raise RuntimeError(
            f"stage '{other.name}' (run beside '{stage.name}') crashed, exit code {process.process.exitcode}"
        )
    ran[other.name] = outcome[1]
    return ran


def _skip_attempt1(policy: str, result: QuickstartResult, elapsed: float, budget_s: float) -> str | None:
    if policy == "never":
        return "attempt1=never"
    if policy == "always":
        return None
    band_s = result.ran.get("grpo")
    if band_s is None:  # the band run was reused: no fresh estimate, keep the quickstart short
        return "no timing of the band run in this invocation to budget it (run with --attempt1 always)"
    reserve_s = 90.0  # evaluation + card + dry run on 2 cores
    if elapsed + band_s + reserve_s > budget_s:
        return (
            f"it would not fit the {budget_s:.0f} s budget ({elapsed:.0f} s used, ~{band_s:.0f} s needed); "
            "run with --attempt1 always"
        )
    return None


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "quickstart",
        help="run every stage of a study into one run folder (default: the embedded world, on CPU)",
        description="Run (or resume) a study's stages (RECIPES/study.yaml) into one run folder: on the embedded "
        "world (default) world, base, SFT 1-2, filter, GRPO, eval, card, dry-run push; with --recipes "
        "recipes/qwen2.5-coder-1.5b the GPU study, its base and SFT adapter from the Hub. Finished stages are "
        "reused; --force starts over.",
    )
    parser.add_argument(
        "--out",
        default=None,
        type=folder_to_write,
        help="the run folder (default: the study's, outputs/quickstart)",
    )
    parser.add_argument(
        "--recipes",
        default=None,
        type=existing_folder,
        help="the study's recipe folder, with its study.yaml (default: recipes/world)",
    )
    parser.add_argument(
        "--repo-id",
        default=None,
        type=repo_id(),
        help="Hub id the card and dry-run push are written for (default: the study's)",
    )
    parser.add_argument(
        "--from-hub",
        default=None,
        metavar="STAGES",
        help="stages taken from the Hub instead of trained, comma-separated, or none (default: the study's "
        "from_hub; the Qwen study takes sft2, the study's SFT adapter)",
    )
    parser.add_argument(
        "--budget",
        type=number(float, low=0, above=True),
        default=600.0,
        help="time budget in seconds (default 600)",
    )
    parser.add_argument(
        "--attempt1",
        choices=("auto", "always", "never"),
        default=None,
        help="GRPO attempt #1: auto runs it when it fits the budget (default: the study's)",
    )
    parser.add_argument(
        "--until",
        default=None,
        metavar="STAGE",
        help="the last stage to run (e.g. sft2 for a world that only feeds `slmsql ablate`); the rest are skipped",
    )
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        type=_field_value,
        metavar="FIELD=VALUE",
        help="override FIELD in every stage whose configuration has it (repeatable), e.g. --set max_steps=2; "
        "recorded in the run folder",
    )
    parser.add_argument("--force", action="store_true", help="delete the run folder and start over")
    parser.set_defaults(run=run)
    return parser


def _field_value(text: str) -> tuple[str, str]:
    """``FIELD=VALUE`` as a pair (an ``argparse`` ``type``: anything else is the parser's one line)."""
    field_name, equals, value = text.partition("=")
    if not equals or not field_name.strip().isidentifier():
        raise argparse.ArgumentTypeError(f"expected FIELD=VALUE (e.g. max_steps=2), got {text!r}")
    return field_name.strip(), value


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()

    def progress(i: int, total: int, stage, state: str) -> None:
        said = f"{stage.description} ..." if state == "start" else state
        print(f"[{i}/{total}] {time.monotonic() - started:6.0f}s  {stage.name}: {said}", flush=True)  # noqa: T201

    result = run_quickstart(
        args.out,
        recipes=args.recipes,
        repo_id=args.repo_id,
        budget_s=args.budget,
        attempt1=args.attempt1,
        from_hub=args.from_hub,
        until=args.until,
        force=args.force,
        on_stage=progress,
        sets=dict(args.sets),
    )
    run = RunLayout(result.out)
    out = run.root
    lines = [f"\nquickstart finished in {result.wall_s:.0f} s -> {out}/"]
    if result.skipped:
        lines += [f"  skipped {name}: {why}" for name, why in result.skipped.items()]
    if args.until is not None and result.skipped:
        lines.append(f"  the stages after {args.until} were not run: rerun without --until to finish them")
    lines += _headline(read_run(out))
    lines += [
        "",
        "Where things are:",
        f"  model card:        {run.card.readme}  (plots in {run.card.plots}/)",
        f"  evaluation:        {run.eval_results}",
        f"  GRPO telemetry:    {run.grpo.telemetry}",
        f"  filter report:     {run.filter_report}",
        f"  dry-run push:      {run.push_dry_run}/  (publish: slmsql push {out} --repo-id "
        f"{args.repo_id or 'NAMESPACE/NAME'} --what all)",
        f"  open the Space:    python spaces/demo/app.py --run-dir {out}   (then http://127.0.0.1:7860)",
    ]
    return print_result(*lines)


def _headline(run: Run) -> list[str]:
    lines = []
    if (run.filter_report or {}).get("summary"):
        lines.append(f"  filter:  {run.filter_report['summary']}")
    for key, bench in (run.eval_results or {}).get("benchmarks", {}).items():
        lines.append(f"  {key}: {bench['comparison']['summary']}")
    return lines
