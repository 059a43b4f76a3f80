"""The generated model card: ``slmsql card --run-dir RUN`` turns a run folder into the model repo folder.

:func:`~slmsql_hub.run.read.load_run` reads the run's files, :mod:`slmsql_hub.card.context` turns them into the
numbers the template ``model_card/model_card.md`` shows, and this module renders it with
``huggingface_hub.ModelCard.from_template`` and assembles the folder (default ``RUN/card``). What the card reads
and writes, and why the folder is separate from TRL's output folders: ``model_card/README.md``. Importing this
module does no I/O.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..data.prompts import PromptConfig
from ..errors import UsageError
from ..refs import check_repo_id, looks_like_hub_id, repo_url
from ..render import templates
from ..render.fmt import percent
from ..run.artifacts import check_model_folder
from ..run.guard import atomic_folder, check_output
from ..run.layout import (
    ABLATIONS_DIR,
    CARD_README,
    DIAGNOSIS_DIR,
    RUN_SUMMARY,
    STAGE_CONFIG,
    TELEMETRY,
    CardLayout,
    RunLayout,
)
from ..run.read import Run, load_run
from .ablations import card_section, find_transfer, ship_reports, world_report
from .context import (
    COMPARE_RULES,
    describe_data,
    filter_context,
    guards_context,
    is_significant_outcome,
    limits_context,
    lineage_items,
    mechanism_context,
    result_rows,
    results_context,
    tldr_numbers,
    training_context,
    training_scope,
)
from .diagnosis import diagnosis_section, find_diagnosis, ship_diagnosis

if TYPE_CHECKING:  # pragma: no cover
    from huggingface_hub import ModelCard, ModelCardData

logger = logging.getLogger(__name__)

_BASE_TAGS: tuple[str, ...] = ("text-to-sql", "grpo", "trl", "peft")
NULL_TAG = "negative-result"

ADAPTER_FILES: tuple[str, ...] = (
    "adapter_config.json",
    "adapter_model.safetensors",
    "adapter_model.bin",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
    "generation_config.json",
)
"""Copied from the GRPO output folder when present."""

RUN_FILES: tuple[str, ...] = (TELEMETRY, RUN_SUMMARY, STAGE_CONFIG)

CARD_OPTIONS_FILE = ".slmsql_card.json"
"""The options ``slmsql card`` ran with (all but the repository id), so that ``slmsql push`` renders the card again
for the repository it targets (:func:`render_for_repo`); never uploaded."""

_BASE_FILES: tuple[str, ...] = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    RUN_SUMMARY,
    STAGE_CONFIG,
)
"""Files of a local base model folder shipped in ``base/`` when the base is not on the Hub."""

_LAYOUT = CardLayout(Path())
_CARD_ENTRIES = frozenset(
    {
        path.name
        for path in (
            _LAYOUT.readme,
            _LAYOUT.plots,
            _LAYOUT.eval_result_files,
            _LAYOUT.eval,
            _LAYOUT.configs,
            _LAYOUT.filter,
            _LAYOUT.grpo_attempt1.path,
            *(stage.path for stage in _LAYOUT.lineage.values()),
        )
    }
    | set(ADAPTER_FILES)
    | set(RUN_FILES)
    | {ABLATIONS_DIR, DIAGNOSIS_DIR, CARD_OPTIONS_FILE}
)


BASE_REVISION_KEY = "base_model_revision"
"""The card metadata key naming the commit of the base the adapter loads (the Hub has no field of its own)."""


@dataclass
class CardOptions:
    """What the run's files cannot say. ``repo_id=None``: a local folder (the usage snippet loads from
    ``card_path``); ``base_model_id``: the Hub id of a base the run used a local copy of (``None``: the run's
    ``base_model`` when it is a Hub id, else the base ships in ``base/``); ``model_name`` defaults to the repo's
    name, else ``slmsql-<run>-grpo``."""

    repo_id: str | None = None
    base_model_id: str | None = None
    license: str | None = None
    model_name: str | None = None
    datasets: Sequence[str] = ()
    card_path: str | None = None


def _package_metadata() -> Any:
    """The installed package's metadata (``None``: not installed)."""
    import importlib.metadata

    try:
        return importlib.metadata.metadata("slmsql-hub")
    except importlib.metadata.PackageNotFoundError:
        return None


def project_license() -> str | None:
    """The project's license as a Hub license id (``apache-2.0``), from the installed package's metadata."""
    meta = _package_metadata()
    text = None if meta is None else meta.get("License-Expression") or meta.get("License")
    return text.strip().lower() if text else None


def _base_info(run: Run, options: CardOptions) -> dict[str, Any]:
    recorded = str(run.shipped.summary.get("base_model") or "")
    hub_id = options.base_model_id or (recorded if looks_like_hub_id(recorded, run) else None)
    local = run.local(recorded) if recorded and not hub_id else None
    ships = bool(local is not None and (local / "config.json").is_file())
    stage = run.stages.get("base")
    revisions = run.shipped.summary.get("revisions") or {}
    commit = revisions.get("model_commit") if hub_id and hub_id == recorded else None
    info: dict[str, Any] = {
        "recorded": recorded, "hub_id": hub_id, "ships": ships, "local": local, "revision": commit or None
    }  # fmt: skip
    if stage is not None:
        model = stage.summary.get("model", {})
        info["from_scratch"] = stage.summary.get("kind") == "base"
        info["architecture"] = model.get("architecture")
        info["parameters"] = (stage.summary.get("parameters") or {}).get("total")
        info["steps"] = stage.summary.get("steps")
        info["final_loss"] = stage.summary.get("final_loss")
        info["world_dir"] = stage.summary.get("world_dir")
    return info


def _reproduce(run: Run, options: CardOptions, configs: Mapping[str, str]) -> list[str]:
    """The commands, in order, from the world to this card (``configs``: stage -> shipped config)."""
    commands = []
    if run.world is not None:
        world_dir = None
        if "base" in run.stages:
            world_dir = run.stages["base"].summary.get("world_dir")
        world_dir = world_dir or (run.filter_report or {}).get("dataset", {}).get("data_root")
        world_dir = world_dir or str(run.recorded_root / "world")
        sizes = run.world.get("sizes") or {}
        flags = " ".join(
            f"--{split.replace('_', '-')} {sizes[split]}"
            for split in ("foundation", "grounding", "rl_pool", "dev", "test")
            if split in sizes
        )
        commands.append(
            f"slmsql world build --out {world_dir} --seed {run.world.get('seed')} {flags}".strip()
        )
    order = (
        ("base", "slmsql train base"),
        ("sft_stage1", "slmsql train sft"),
        ("sft_stage2", "slmsql train sft"),
        ("filter", "slmsql filter"),
        ("grpo_attempt1", "slmsql train grpo"),
        ("grpo", "slmsql train grpo"),
        ("eval", "slmsql eval"),
    )
    for name, command in order:
        if name in configs:
            commands.append(f"{command} --config {configs[name]}")
    card = f"slmsql card --run-dir {run.recorded_root}"
    if options.repo_id:
        card += f" --repo-id {options.repo_id}"
    commands.append(card)
    return commands


def _stage_configs(run: Run) -> dict[str, Any]:
    """Stage name -> resolved configuration, for ``configs/``."""
    configs: dict[str, Any] = {}
    for name in ("base", "sft_stage1", "sft_stage2"):
        if name in run.stages and run.stages[name].config:
            configs[name] = run.stages[name].config
    if run.filter_config:
        configs["filter"] = run.filter_config
    for attempt in run.attempts:
        if attempt.config:
            configs[attempt.name] = attempt.config
    if isinstance(run.eval_results.get("config"), dict) and run.eval_results["config"]:
        configs["eval"] = run.eval_results["config"]
    return configs


def _year(created_at: Any) -> str | None:
    text = str(created_at or "")
    return text[:4] if text[:4].isdigit() else None


def _model_name(run: Run, options: CardOptions) -> str:
    if options.model_name:
        return options.model_name
    if options.repo_id:
        return options.repo_id.split("/")[-1]
    return f"slmsql-{run.recorded_root.name or run.root.name}-grpo"


def eval_result_entries(run: Run, repo_id: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """``{"<benchmark key>.yaml": entries}``: the GRPO adapter's EX (%) per benchmark as
    ``huggingface_hub.EvalResultEntry`` YAML; ``repo_id`` gives each entry's ``source`` (its predictions file).

    Example:

    ```python
    >>> from pathlib import Path, PurePosixPath
    >>> from slmsql_hub.card import Run, eval_result_entries
    >>> comparison = {"n": 10, "delta_ex": 0.0, "significant": False, "mcnemar_p": 1.0, "ci95": [-0.1, 0.1],
    ...               "discordant": {"a_only": 1, "b_only": 1}, "verdict": "v", "summary": "s"}
    >>> benchmark = {"benchmark": "world", "split": "dev", "dataset_id": "alice/world-splits", "mode": "bird", "n": 10,
    ...              "policies": {"sft": {"ex": 0.5}, "grpo": {"ex": 0.5}}, "comparison": comparison,
    ...              "predictions_file": "predictions/world_dev.jsonl"}
    >>> run = Run(Path("run"), PurePosixPath("outputs/q"), {"created_at": "2026-12-02T16:40:00Z",
    ...                "benchmarks": {"world_dev": benchmark}}, [])
    >>> eval_result_entries(run, "me/model")["world_dev.yaml"][0]["dataset"]
    {'id': 'alice/world-splits', 'task_id': 'dev'}

    ```
    """
    from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

    files = {}
    created = run.eval_results.get("created_at")
    for row in result_rows(run):
        if not row["dataset_id"]:  # published nowhere (the embedded world): the card's body reports it
            logger.info("benchmark %s has no Hub dataset id: no .eval_results entry for it", row["key"])
            continue
        source_url = None
        if repo_id:
            path = f"eval/{row['predictions_file']}" if row["predictions_file"] else "eval/eval_results.json"
            source_url = f"{repo_url('model', repo_id)}/blob/main/{path}"
        entry = EvalResultEntry(
            dataset_id=row["dataset_id"],
            task_id=str(
                run.eval_results["benchmarks"][row["key"]].get("task_id") or row["split"] or row["key"]
            ),
            value=float(percent(row["grpo_ex"])),
            date=created,
            source_url=source_url,
            source_name="slmsql eval: per-question predictions and verdicts" if source_url else None,
            notes=(
                f"execution accuracy (EX, %) of the GRPO adapter, {row['mode']} semantics, greedy decoding, "
                f"n = {row['n']}; SFT adapter {percent(row['sft_ex'])}; {row['summary']}"
            ),
        )
        files[f"{row['key']}.yaml"] = eval_result_entries_to_yaml([entry])
    return files


def training_datasets(options: CardOptions) -> list[str]:
    """The metadata's ``datasets``: by the Hub's convention the training data, and only what is published
    (``options.datasets``, e.g. the band's repository once pushed); never an evaluation set. Each must be a Hub id.

    Example:

    ```python
    >>> training_datasets(CardOptions(datasets=("alice/m-band", "alice/m-band")))
    ['alice/m-band']

    ```
    """
    datasets: list[str] = []
    for item in options.datasets:
        if item and check_repo_id(item, "--dataset", namespace=False) not in datasets:
            datasets.append(item)
    return datasets


def card_data(run: Run, options: CardOptions | None = None) -> ModelCardData:
    """The card's metadata (listed in ``model_card/README.md``), ``model-index`` included."""
    from huggingface_hub import EvalResult, ModelCardData

    options = options or CardOptions()
    rows = result_rows(run)
    outcome = is_significant_outcome(rows)
    tags = list(_BASE_TAGS) + ([NULL_TAG] if outcome == "null" else [])
    base = _base_info(run, options)
    datasets = training_datasets(options)
    source_url = repo_url("model", options.repo_id) if options.repo_id else None
    results = [
        EvalResult(
            task_type="text-generation",
            task_name="Text-to-SQL",
            dataset_type=r["dataset_id"],
            dataset_name=f"{r['benchmark']} {r['split']}".strip(),
            dataset_split=r["split"] or None,
            metric_type="execution_accuracy",
            metric_name=f"EX ({r['mode']}, %)",
            metric_value=float(percent(r["grpo_ex"])),
            source_name="Model card" if source_url else None,
            source_url=source_url,
        )
        for r in rows
        if r["dataset_id"]
    ]
    data = ModelCardData(
        base_model=base["hub_id"],
        datasets=datasets or None,
        eval_results=results or None,
        library_name="peft",
        license=options.license or project_license(),
        model_name=_model_name(run, options),
        pipeline_tag="text-generation",
        tags=tags,
    )
    if base["hub_id"]:
        data.base_model_relation = "adapter"
    if base["revision"]:
        setattr(data, BASE_REVISION_KEY, base["revision"])
    return data


def card_context(
    run: Run,
    options: CardOptions | None = None,
    plots: Iterable[str] = (),
    files: Sequence[str] = (),
    configs: Mapping[str, str] | None = None,
    install: str | None = None,
    source_url: str | None = None,
) -> dict[str, Any]:
    """Every value the template renders; ``plots``: the stems drawn, ``files``: the folder's top-level entries,
    ``configs``: stage -> shipped config; ``install``: the requirement that installs slmsql-hub (the wheel a push
    uploads; ``None``: from its source) and ``source_url`` the page holding it."""
    options = options or CardOptions()
    rows = result_rows(run)
    outcome = is_significant_outcome(rows)
    mechanism = mechanism_context(run)
    base = _base_info(run, options)
    shipped = run.shipped
    eval_config = run.eval_results.get("config") or {}
    max_new_tokens = eval_config.get("max_new_tokens") or shipped.config.get("max_completion_length")
    folder = options.card_path or str(RunLayout(run.root).card.root)
    if base["hub_id"]:
        base_load = f'"{base["hub_id"]}"' + (f', revision="{base["revision"]}"' if base["revision"] else "")
    elif base["ships"]:
        # Not `from_pretrained(repo, subfolder="base")`: transformers then finds the adapter_config.json at the
        # repo's root and loads the base named there (a local path of the training machine) instead.
        base_load = 'f"{folder}/base"'
    else:
        base_load = f'"{base["recorded"]}"'
    prompt = shipped.summary.get("prompt") or {}
    first_row = rows[0]
    guards = guards_context(run)
    return {
        "model_name": _model_name(run, options),
        "repo_id": options.repo_id,
        "training_datasets": [
            {"id": name, "url": repo_url("dataset", name)} for name in training_datasets(options)
        ],
        "outcome": outcome,
        "is_null": outcome == "null",
        "tldr": tldr_numbers(rows, mechanism),
        "results": rows,
        **results_context(rows),
        "maj_sampling": run.eval_results.get("self_consistency"),  # maj@K's decoding, when eval voted
        "rule": first_row.get("rule"),
        "resamples": first_row.get("resamples"),
        "bootstrap_seed": first_row.get("seed"),
        **mechanism,
        "filter": filter_context(run),
        "plots": {stem: f"{_LAYOUT.plots.name}/{stem}.png" for stem in plots},
        "base": base,
        "lineage": lineage_items(run, base),
        "training": training_context(run),
        "compare_modes": COMPARE_RULES,
        "limits": limits_context(run),
        "guards": guards,
        "failed_guards": [g for g in guards if g["status"] == "FAIL"],
        "max_new_tokens": max_new_tokens,
        "usage": {
            "folder": folder,
            "base_load": base_load,
            "prompt_args": PromptConfig.from_record(prompt).python_args(),
            "max_new_tokens": max_new_tokens,
        },
        "benchmarks_text": ", ".join(f"{r['benchmark']} {r['split']}".strip() for r in rows),
        "training_scope": training_scope(run),
        "world": run.world is not None or any(r["benchmark"] == "world" for r in rows),
        "commands": _reproduce(run, options, configs or {}),
        "files": list(files),
        "slmsql_package_version": __version__,
        "eval_year": _year(run.eval_results.get("created_at")),
        "project_url": source_url,
        "install": install,
        "eval_created_at": run.eval_results.get("created_at"),
        "slmsql_hub_version": run.eval_results.get("slmsql_hub_version"),
        "ablations": _ablations(run),
        "diagnosis": diagnosis_section(found) if (found := find_diagnosis(run.root)) else None,
        "plant_statement": _plant_statement(run),
    }


def _plant_statement(run: Run) -> str | None:
    """What the run's world planted, as the world's dataset card states it
    (:func:`~slmsql_hub.world.build.read_plant_statement`), ``None`` in a natural world."""
    from ..world.build import read_plant_statement

    return read_plant_statement(RunLayout(run.root).world) if (run.world or {}).get("plant") else None


def _ablations(run: Run) -> str | None:
    """The card's "Ablations" section: the run's ablation report (else its world's in the transfer report that
    covers it) and that transfer report's finding; ``None`` when there is neither."""
    transfer = find_transfer(run.root)
    report = run.ablations or world_report(transfer)
    return card_section(report, transfer) if report is not None or transfer is not None else None


def default_template_path() -> Path:
    """The card template: ``model_card/model_card.md`` of the clone, else the wheel's copy."""
    return templates.template_path(templates.MODEL_CARD)


def render_card(
    run: Run,
    options: CardOptions | None = None,
    template_path: str | os.PathLike | None = None,
    **context_args: Any,
) -> ModelCard:
    """The ``ModelCard`` rendered from the template (default :func:`default_template_path`) by
    :func:`~slmsql_hub.render.templates.render`; ``context_args`` go to :func:`card_context`."""
    from huggingface_hub import ModelCard

    options = options or CardOptions()
    path = template_path if template_path else default_template_path()
    return templates.render(
        ModelCard, card_data(run, options), path, **card_context(run, options, **context_args)
    )


@dataclass
class CardBuild:
    """What :func:`build_card` wrote; ``outcome`` is ``null``, ``improved``, ``regressed`` or ``mixed``."""

    folder: Path
    readme: Path
    plots: dict[str, Path]
    eval_results: list[Path]
    outcome: str
    files: list[str]


def _check_replaceable(out: Path) -> None:
    if not out.exists():
        return
    if not out.is_dir():
        raise UsageError(f"--out {out} is a file; choose a folder for the card")
    foreign = sorted(p.name for p in out.iterdir() if p.name not in _CARD_ENTRIES)
    if foreign:
        raise UsageError(
            f"--out {out} holds files a card folder does not ({', '.join(foreign[:5])}); it is not replaced. "
            "Choose an empty or new folder (the card folder is separate from TRL's output folders)"
        )


def _check_shipped_models(run: Run, options: CardOptions) -> None:
    """The adapter (and a local base the card ships) whole before anything is copied: never ship a truncated one."""
    shipped = run.shipped.folder
    if not (shipped / ADAPTER_FILES[0]).is_file():
        raise UsageError(f"{shipped} has no adapter_config.json: the GRPO run did not save its adapter")
    check_model_folder(shipped, "adapter", "the GRPO run did not save its adapter whole; rerun or resume it")
    base = _base_info(run, options)
    if base["ships"]:
        check_model_folder(base["local"], "base", "retrain the base (`slmsql train base`) or pass --base-repo-id")


def _copy_files(source: Path, names: Iterable[str], target: Path) -> list[str]:
    copied = []
    for name in names:
        if (source / name).is_file():
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, target / name)
            copied.append(name)
    return copied


def _write_yaml(path: Path, data: Any, header: str = "") -> None:
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")


def build_card(
    run_dir: str | os.PathLike,
    out_dir: str | os.PathLike | None = None,
    *,
    options: CardOptions | None = None,
    template_path: str | os.PathLike | None = None,
) -> CardBuild:
    """Assemble the model repo folder of a run into ``out_dir`` (default ``<run_dir>/card``), built beside it
    and swapped in at the end (:func:`~slmsql_hub.run.guard.atomic_folder`). UsageError: ``out_dir`` holds other
    files or overlaps a folder of the run (``RunLayout.stage_folders``), or the run lacks a file the card needs."""
    run = load_run(run_dir)
    out = Path(out_dir) if out_dir is not None else RunLayout(run.root).card.root
    options = options or CardOptions()
    if options.card_path is None:
        options = CardOptions(**{**options.__dict__, "card_path": str(out)})
    check_output(out, RunLayout(run.root).stage_folders, "--out")
    _check_replaceable(out)
    _check_shipped_models(run, options)
    with atomic_folder(out) as staging:
        card, plots, written = _assemble(run, options, CardLayout(staging), template_path)
        _record_options(staging, options, template_path)
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    outcome = "null" if NULL_TAG in (card.data.tags or []) else is_significant_outcome(result_rows(run))
    done = CardLayout(out)
    logger.info("model card: %s (%s; %d files)", done.readme, outcome, len(files))
    return CardBuild(
        folder=out,
        readme=done.readme,
        plots={stem: done.plots / path.name for stem, path in plots.items()},
        eval_results=[done.eval_result_files / name for name in written],
        outcome=outcome,
        files=files,
    )


def _assemble(
    run: Run, options: CardOptions, card: CardLayout, template_path: str | os.PathLike | None
) -> tuple[ModelCard, dict[str, Path], list[str]]:
    """Write the card folder's files into ``card``: the card, its plots and the ``.eval_results`` file names."""
    from ..render.plots import write_card_plots

    shipped = run.shipped
    _copy_files(shipped.folder, ADAPTER_FILES, card.root)  # checked whole by _check_shipped_models
    _copy_files(shipped.folder, RUN_FILES, card.root)
    layout = RunLayout(run.root)
    _copy_files(layout.eval, [layout.eval_results.name], card.eval)
    for row in result_rows(run):
        source = layout.eval / str(row["predictions_file"] or "")
        if row["predictions_file"] and source.is_file():
            target = card.eval / row["predictions_file"]
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    for attempt in run.attempts:
        if not attempt.shipped:
            _copy_files(attempt.folder, RUN_FILES, card.attempts[attempt.name].path)
    if run.filter_report is not None:
        _copy_files(layout.filter, [layout.filter_report.name], card.filter)
    # the ablation study's report, and the transfer report that covers the run, ship with the model repo
    transfer = find_transfer(run.root)
    ship_reports(run.ablations or world_report(transfer), transfer, card.root)
    if (diagnosis := find_diagnosis(run.root)) is not None:  # `slmsql diagnose`'s report ships too
        ship_diagnosis(diagnosis, card.root)
    base = _base_info(run, options)
    if base["ships"]:
        _copy_files(base["local"], _BASE_FILES, card.lineage["base"].path)
    header = "# Resolved configuration of this run's stage, as it ran; rerun with --config on this file.\n"
    configs = {}
    for name, config in _stage_configs(run).items():
        _write_yaml(card.configs / f"{name}.yaml", config, header)
        configs[name] = f"{card.configs.name}/{name}.yaml"
    labels = {
        f"{a.label}: {describe_data(run, a, with_count=False).replace('`', '')}": a.records
        for a in run.attempts
    }
    plots = write_card_plots(labels, run.filter_report, card.plots)
    written = []
    for name, entries in eval_result_entries(run, options.repo_id).items():
        _write_yaml(card.eval_result_files / name, entries)
        written.append(name)
    top = sorted({p.name for p in card.root.iterdir()} | {CARD_README}, key=lambda n: (n != CARD_README, n))
    model_card = render_card(run, options, template_path, plots=list(plots), files=top, configs=configs)
    model_card.save(card.readme)
    return model_card, plots, written


def _record_options(folder: Path, options: CardOptions, template_path: str | os.PathLike | None) -> None:
    import json

    recorded = {k: v for k, v in options.__dict__.items() if k not in ("repo_id", "card_path")}
    recorded["datasets"] = list(recorded["datasets"])
    recorded["template_path"] = str(Path(template_path).resolve()) if template_path else None
    (folder / CARD_OPTIONS_FILE).write_text(json.dumps(recorded, indent=2) + "\n", encoding="utf-8")


def recorded_options(card_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The options :func:`build_card` recorded in ``card_dir`` (``None``: the folder was not made by it)."""
    from ..run.files import read_json_object

    path = Path(card_dir) / CARD_OPTIONS_FILE
    return read_json_object(path, "rerun `slmsql card`") if path.is_file() else None


def _naming_datasets(run: Run, eval_datasets: Mapping[str, str]) -> Run:
    """``run`` with the evaluated benchmarks of ``eval_datasets`` (``{benchmark: dataset id}``) naming that
    dataset (``dataset_id``); the files on disk are left as they are."""
    if not eval_datasets:
        return run
    results = copy.deepcopy(run.eval_results)
    for entry in results["benchmarks"].values():
        if entry.get("benchmark") in eval_datasets:
            entry["dataset_id"] = eval_datasets[entry["benchmark"]]
    return dataclasses.replace(run, eval_results=results)


def render_for_repo(
    run_dir: str | os.PathLike,
    card_dir: str | os.PathLike,
    repo_id: str,
    *,
    base_model_id: str | None = None,
    leave_out: Sequence[str] = (),
    datasets: Sequence[str] = (),
    install: str | None = None,
    source_url: str | None = None,
    eval_datasets: Mapping[str, str] | None = None,
) -> dict[str, bytes] | None:
    """The card folder's files that name its repository, rendered for ``repo_id``: ``README.md`` and every
    ``.eval_results/*.yaml`` (``{path_in_repo: bytes}``), with the options :func:`build_card` recorded;
    ``base_model_id`` names a base published as its own repository, ``leave_out`` top-level entries not uploaded,
    ``datasets`` training data published beside it (added to ``datasets:``), ``install`` and ``source_url`` the
    wheel pushed beside it (:func:`card_context`), ``eval_datasets`` (``{benchmark: dataset id}``) the benchmark
    datasets published beside it, which its evaluation results then name (``model-index``, ``.eval_results``).
    ``None`` when ``card_dir`` was not made by :func:`build_card` (nothing recorded to render it again from).

    Example: ``render_for_repo("outputs/quickstart", "outputs/quickstart/card", "alice/x")["README.md"]``.
    """
    recorded = recorded_options(card_dir)
    if recorded is None:
        return None
    template_path = recorded.pop("template_path", None)
    fields = {k: v for k, v in recorded.items() if k in CardOptions.__dataclass_fields__}
    fields["datasets"] = tuple(dict.fromkeys([*(fields.get("datasets") or ()), *datasets]))
    if base_model_id:
        fields["base_model_id"] = base_model_id
    options = CardOptions(**{**fields, "repo_id": repo_id, "card_path": None})
    run = _naming_datasets(load_run(run_dir), eval_datasets or {})
    layout = CardLayout(Path(card_dir))
    plots = sorted(p.stem for p in layout.plots.glob("*.png")) if layout.plots.is_dir() else []
    configs = (
        {p.stem: f"{layout.configs.name}/{p.name}" for p in sorted(layout.configs.glob("*.yaml"))}
        if layout.configs.is_dir()
        else {}
    )
    names = {p.name for p in layout.root.iterdir()} - set(leave_out) - {CARD_OPTIONS_FILE}
    top = sorted(names | {CARD_README}, key=lambda n: (n != CARD_README, n))
    card = render_card(
        run, options, template_path, plots=plots, files=top, configs=configs, install=install, source_url=source_url
    )
    import yaml

    files = {CARD_README: str(card).encode("utf-8")}
    for name, entries in eval_result_entries(run, repo_id).items():
        path = f"{layout.eval_result_files.name}/{name}"
        files[path] = yaml.safe_dump(entries, sort_keys=False, allow_unicode=True).encode("utf-8")
    return files
