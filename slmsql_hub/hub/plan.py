"""What ``slmsql push`` uploads where, decided from the run folder alone (no network), and the dry run that
writes it out: see :mod:`slmsql_hub.hub` for the targets and their default repository ids.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .. import __version__
from ..card.build import ADAPTER_FILES, CARD_OPTIONS_FILE, RUN_FILES, render_for_repo
from ..card.training import training_card
from ..data.trained_databases import with_trained_databases
from ..errors import UsageError
from ..refs import check_repo_id, repo_url
from ..resources import PACKAGE_DIR
from ..run.artifacts import check_model_folder
from ..run.files import read_json_object, write_atomic
from ..run.layout import CARD_README, PLAN_FILE, CardLayout, RunLayout
from ..run.read import model_ref, read_run
from ..runtime import bar_disabled
from .band import BAND_SHARD, band_databases, dataset_card, load_band
from .targets import (
    BASE_MODEL,
    DATASET,
    DEMO_DATA,
    DEMO_SPACE,
    METRIC_FILES,
    METRIC_SPACE,
    MODEL,
    PROJECT_HOME,
    SFT_MODEL,
    STALE_MODEL_FILES,
    TARGETS,
    WORLD_BENCHMARK,
    PushTarget,
    default_repo_ids,
    folder_files,
    parse_what,
    sha256_of,
)
from .wheel import WHEEL_FOLDER, package_wheel, pinned_requirements, wheel_requirement

logger = logging.getLogger(__name__)

def _load_card(readme: Path, card_class: Any = None, fix: str = "fix the card") -> Any:
    """``card_class.load(readme)`` (default ``RepoCard``); malformed YAML metadata is one UsageError."""
    import yaml
    from huggingface_hub import RepoCard

    try:
        return (card_class or RepoCard).load(readme)
    except (ValueError, yaml.YAMLError) as err:
        raise UsageError(f"{readme}: the YAML metadata does not parse into a mapping ({err}); {fix}") from err


def _card_and_base(run_dir: Path, base_repo_id: str, revision: str | None) -> tuple[Path, Any, Any]:
    """The card folder, its loaded card and the base model the pushed adapters name (:func:`resolve_base`)."""
    from huggingface_hub import ModelCard

    from . import base_model as bm

    card_dir = RunLayout(run_dir).card.root
    readme = RunLayout(run_dir).card.readme
    if not readme.is_file():
        raise UsageError(
            f"no model card folder at {card_dir}: run `slmsql card --run-dir {run_dir}` first (it assembles the "
            "card, plots, .eval_results and adapter files that `slmsql push` uploads)"
        )
    if not (card_dir / bm.ADAPTER_CONFIG).is_file():
        raise UsageError(
            f"{card_dir} has a card but no adapter_config.json: rerun `slmsql card --run-dir {run_dir} --overwrite` after "
            "GRPO training so the adapter files are copied in"
        )
    fix = f"rerun `slmsql card --run-dir {run_dir}` after the stage that writes it finished"
    check_model_folder(card_dir, "adapter", fix)  # a missing or truncated adapter is never shipped
    check_model_folder(CardLayout(card_dir).lineage["base"].path, "base", fix)
    card = _load_card(readme, ModelCard, "rerun `slmsql card`")
    return card_dir, card, bm.resolve_base(card_dir, card, base_repo_id, revision=revision)


def _model_targets(
    run_dir: Path,
    repo_id: str,
    base_repo_id: str,
    revision: str | None,
    band_repo_id: str | None = None,
    wheel_space: tuple[str, str] | None = None,
    eval_datasets: dict[str, str] | None = None,
) -> list[PushTarget]:
    """The adapter's repository and, when its base is a local folder, the base's (pushed first, and then not
    shipped in the adapter's repository a second time). The card and ``.eval_results`` are rendered again for
    ``repo_id`` (:func:`~slmsql_hub.card.render_for_repo`), so every id, URL and snippet they hold is its own;
    ``band_repo_id`` (the band pushed with it) joins the card's ``datasets:``; ``eval_datasets`` (``{benchmark:
    dataset id}``, the world benchmark pushed with it) are the datasets its evaluation results name."""
    from . import base_model as bm

    card_dir, card, base = _card_and_base(run_dir, base_repo_id, revision)
    base_folder = CardLayout(card_dir).lineage["base"].path.name
    leave_out = (base_folder,) if base.local_dir is not None else ()
    files: dict[str, Path | bytes] = {
        path: local for path, local in folder_files(card_dir) if path.split("/")[0] not in leave_out
    }
    rendered = render_for_repo(
        run_dir,
        card_dir,
        repo_id,
        base_model_id=base.repo_id,
        leave_out=leave_out,
        datasets=(band_repo_id,) if band_repo_id else (),
        install=wheel_space[1] if wheel_space else None,
        source_url=repo_url("space", wheel_space[0]) if wheel_space else None,
        eval_datasets=eval_datasets or {},
    )
    if rendered is None:
        logger.warning(
            "%s was not written by `slmsql card` (no %s): its README.md is uploaded as it is, naming whatever "
            "repository it names; rerun `slmsql card` to have it rendered for %s",
            card_dir,
            CARD_OPTIONS_FILE,
            repo_id,
        )
    else:
        for path in [p for p in files if p.startswith(f"{CardLayout(card_dir).eval_result_files.name}/")]:
            del files[path]  # rendered again below, for this repository
        files.update(rendered)
        card = type(card)(rendered[CARD_README].decode("utf-8"))
    # Rewritten in what is uploaded only; card_for_hub edits `card`, so it runs after resolve_base read it.
    rewritten = {
        bm.ADAPTER_CONFIG: bm.adapter_config_for_hub(card_dir, base),
        CARD_README: bm.card_for_hub(card, base),
    }
    files.update({path: content for path, content in rewritten.items() if content is not None})
    targets = []
    if base.local_dir is not None:
        base_files: dict[str, Path | bytes] = dict(folder_files(base.local_dir))
        base_files[CARD_README] = bm.base_card(
            base, repo_id, license=card.data.license, adapter_url=repo_url("model", repo_id)
        ).encode("utf-8")
        targets.append(PushTarget(BASE_MODEL, "model", base.repo_id, tuple(sorted(base_files.items()))))
    targets.append(PushTarget(MODEL, "model", repo_id, tuple(sorted(files.items()))))
    return targets


def _sft_target(
    run_dir: Path, repo_id: str, base_repo_id: str, grpo_repo_id: str, revision: str | None
) -> PushTarget:
    """The SFT stage-2 adapter as its own repository: its adapter files and run record, the adapter config naming
    the same base as the GRPO adapter's, and the training card."""
    from . import base_model as bm

    folder = RunLayout(run_dir).sft_stage2.path
    if not (folder / bm.ADAPTER_CONFIG).is_file():
        raise UsageError(
            f"no SFT adapter at {folder} (adapter_config.json): train SFT stage 2 into the run folder first, or "
            "leave sft-model out of --what"
        )
    check_model_folder(folder, "adapter", "retrain SFT stage 2, or leave sft-model out of --what")
    _, _, base = _card_and_base(run_dir, base_repo_id, revision)
    files: dict[str, Path | bytes] = {
        name: folder / name for name in (*ADAPTER_FILES, *RUN_FILES) if (folder / name).is_file()
    }
    config = bm.adapter_config_for_hub(folder, base)
    if config is not None:
        files[bm.ADAPTER_CONFIG] = config
    record = folder / "run_summary.json"
    summary = read_json_object(record, "rerun SFT stage 2") if record.is_file() else {}
    summary = {**summary, "kind": summary.get("kind") or "sft", "base_model": base.repo_id}
    files[CARD_README] = training_card(summary, repo_id, grpo_repo_id=grpo_repo_id).encode("utf-8")
    return PushTarget(SFT_MODEL, "model", repo_id, tuple(sorted(files.items())))


def _dataset_target(run_dir: Path, repo_id: str, model_repo_id: str | None) -> PushTarget:
    layout = RunLayout(run_dir)
    if not layout.filter_report.is_file() or not layout.band.is_dir():
        raise UsageError(
            f"no filtered band at {layout.band} (with {layout.filter_report.name} beside it): run `slmsql filter "
            "--config recipes/world/filter.yaml` with output_dir under the run folder first"
        )
    databases = band_databases(layout.band)  # the SQLite files the rows name, uploaded beside the parquet
    card = dataset_card(
        read_run(run_dir).filter_report, repo_id, model_repo_id=model_repo_id, n_databases=len(databases)
    )
    return PushTarget(DATASET, "dataset", repo_id, files=databases, dataset_path=layout.band, card=card)


def _space_install(
    space_id: str, requirements: Path, wheel: Path, revision: str | None
) -> list[tuple[str, Path | bytes]]:
    """The wheel under ``wheels/`` and ``requirements.txt`` pinned to it by URL (:mod:`slmsql_hub.hub.wheel`)."""
    text = requirements.read_text(encoding="utf-8") if requirements.is_file() else ""
    pinned = pinned_requirements(text, space_id, wheel.name, revision=revision)
    return [(f"{WHEEL_FOLDER}/{wheel.name}", wheel), ("requirements.txt", pinned.encode("utf-8"))]


NAMED_METRIC_FILES: tuple[str, ...] = ("ex.py", CARD_README, "app.py")
"""The metric files that name the metric's id, rendered for the Space they are pushed to (:func:`_named_metric`)."""


def _named_metric(text: str, repo_id: str, install: str) -> str:
    """A metric file's text naming the Space ``repo_id`` it is pushed to instead of ``slmsql/ex``, and installing
    ``install`` (the wheel's requirement) instead of ``slmsql-hub``, which is on no index; the offline install
    line, which holds for ``slmsql/ex`` only, goes.

    Example:

    ```python
    >>> print(_named_metric('pip install slmsql-hub\\nevaluate.load("slmsql/ex")  # https://huggingface.co/spaces/slmsql/ex',
    ...                    "bob/ex", "slmsql-hub @ https://hub/w.whl"))  # doctest: +ELLIPSIS
    pip install "slmsql-hub @ https://hub/w.whl"
    evaluate.load("bob/ex")  # https://.../spaces/bob/ex

    ```
    """
    from ..metric.install import METRIC_ID

    space = repo_url("space", repo_id)
    text = text.replace(f"https://huggingface.co/spaces/{METRIC_ID}", space)
    text = text.replace(PROJECT_HOME, space)
    text = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("slmsql install-metric"))
    text = text.replace("pip install slmsql-hub", f'pip install "{install}"')
    return re.sub(rf"(?<![\w/.-]){re.escape(METRIC_ID)}(?![\w/.-])", repo_id, text)


def _metric_target(repo_id: str, wheel: Path, revision: str | None) -> PushTarget:
    folder = PACKAGE_DIR / "metric"
    missing = [name for name in METRIC_FILES if not (folder / name).is_file()]
    if missing:
        raise UsageError(
            f"the installed slmsql_hub lacks metric files {missing} in {folder}; reinstall the package"
        )
    sdk = _load_card(folder / CARD_README).data.get("sdk", "gradio")
    files: dict[str, Path | bytes] = dict((name, folder / name) for name in METRIC_FILES)
    install = wheel_requirement(repo_id, wheel.name, revision=revision)
    for name in NAMED_METRIC_FILES:
        text = (folder / name).read_text(encoding="utf-8")
        files[name] = _named_metric(text, repo_id, install).encode("utf-8")
    files.update(_space_install(repo_id, folder / "requirements.txt", wheel, revision))
    return PushTarget(METRIC_SPACE, "space", repo_id, tuple(sorted(files.items())), space_sdk=sdk)


def _default_demo_dir() -> Path:
    """``spaces/demo`` in the working directory, else in the source checkout this package runs from, else the
    copy a wheel installs as ``slmsql_hub/demo_space/`` (it may not exist; :func:`plan_push` then says so).

    Example:

    ```python
    >>> _default_demo_dir().parts[-2:]
    ('spaces', 'demo')

    ```
    """
    from ..resources import shipped_path

    here = Path.cwd() / "spaces" / "demo"
    return here if here.is_dir() else shipped_path("spaces/demo", "demo_space")


def _demo_base(run_dir: Path, base_repo_id: str, revision: str | None) -> Any:
    """The base the Space loads: the one the pushed adapters name (:func:`_card_and_base`); before ``slmsql card``,
    the GRPO adapter's base when it is a Hub id, else ``base_repo_id`` (where ``--what model`` will put it)."""
    from ..refs import looks_like_hub_id
    from .base_model import BaseModel

    if RunLayout(run_dir).card.readme.is_file():
        return _card_and_base(run_dir, base_repo_id, revision)[2]
    config = RunLayout(run_dir).grpo.path / "adapter_config.json"
    recorded = (
        read_json_object(config, "rerun GRPO").get("base_model_name_or_path") if config.is_file() else None
    )
    if isinstance(recorded, str) and looks_like_hub_id(recorded):
        return BaseModel(recorded)
    return BaseModel(base_repo_id)


def _demo_targets(
    repo_id: str, demo_dir: Path | None, run_dir: Path, ids: dict[str, str], wheel: Path, revision: str | None
) -> list[PushTarget]:
    """The demo Space and, before it, the dataset repository of the run's benchmark databases when it has some
    (:func:`~slmsql_hub.hub.demo.benchmark_files`)."""
    from .demo import benchmark_files, demo_files

    folder = Path(demo_dir) if demo_dir is not None else _default_demo_dir()
    files = dict(folder_files(folder)) if folder.is_dir() else {}
    if not files:
        raise UsageError(f"no demo Space files in {folder}: build the demo there first, or pass --demo-dir")
    readme = folder / CARD_README
    if not readme.is_file():
        raise UsageError(
            f"{folder} has no README.md: a Space needs one with its metadata (sdk: gradio, app_file)"
        )
    card = _load_card(readme)
    sdk = card.data.get("sdk")
    if sdk not in ("gradio", "streamlit", "docker", "static"):
        raise UsageError(f"{readme}: set `sdk:` in its YAML metadata to gradio, streamlit, docker or static")
    data = benchmark_files(run_dir) if run_dir.is_dir() else {}
    data_repo = ids[DEMO_DATA] if data else None
    base = _demo_base(run_dir, ids[BASE_MODEL], revision)
    files.update(demo_files(card, run_dir, ids, base, revision, benchmark_repo=data_repo))
    files.update(_space_install(repo_id, folder / "requirements.txt", wheel, revision))
    if run_dir.is_dir():  # the run's trained-on databases, so the Space can name a held-out one
        files = dict(with_trained_databases(list(files.items()), read_run(run_dir)))
    space = PushTarget(DEMO_SPACE, "space", repo_id, tuple(sorted(files.items())), space_sdk=sdk)
    if data_repo is None:
        return [space]
    return [PushTarget(DEMO_DATA, "dataset", data_repo, tuple(sorted(data.items()))), space]


def plan_push(
    run_dir: str | os.PathLike,
    repo_id: str | None,
    what: str | Sequence[str] = MODEL,
    *,
    dataset_repo_id: str | None = None,
    metric_space_id: str | None = None,
    demo_space_id: str | None = None,
    demo_dir: str | os.PathLike | None = None,
    base_repo_id: str | None = None,
    sft_repo_id: str | None = None,
    revision: str | None = None,
    wheel: str | os.PathLike | None = None,
    benchmark_repo_id: str | None = None,
) -> list[PushTarget]:
    """One :class:`PushTarget` per target of ``what`` (:func:`parse_what`), in push order, a local base
    model's (:data:`BASE_MODEL`) just before the model's, decided from ``run_dir`` alone (no network).

    The ids default to :func:`default_repo_ids` of ``repo_id`` (``None`` when every target has its own id);
    ``revision`` pins a local base pushed to that branch in the adapter config. The Spaces carry ``wheel`` (default:
    built from the source tree, :func:`~slmsql_hub.hub.wheel.package_wheel`). UsageError: a repository id is
    missing or malformed, or the run lacks what a target needs (naming the command that makes it).

    Example:

    ```python
    >>> [(t.what, t.repo_id, t.space_sdk) for t in plan_push(".", "alice/qwen-grpo", "metric-space")]
    [('metric-space', 'alice/ex', 'gradio')]

    ```
    """
    from .world_benchmark import eval_datasets, world_benchmark_targets

    targets = parse_what(what)
    run_dir = Path(run_dir)
    explicit = {
        DATASET: dataset_repo_id,
        METRIC_SPACE: metric_space_id,
        DEMO_SPACE: demo_space_id,
        BASE_MODEL: base_repo_id,
        SFT_MODEL: sft_repo_id,
        WORLD_BENCHMARK: benchmark_repo_id,
    }
    options = {
        DATASET: "--dataset-repo-id",
        METRIC_SPACE: "--metric-space-id",
        DEMO_SPACE: "--demo-space-id",
        BASE_MODEL: "--base-repo-id",
        SFT_MODEL: "--sft-repo-id",
        WORLD_BENCHMARK: "--benchmark-repo-id",
    }
    needs_models = {MODEL, SFT_MODEL, DEMO_SPACE} & set(targets)
    derived = default_repo_ids(check_repo_id(repo_id)) if repo_id or needs_models else {}
    if not derived and any(explicit.get(name) is None for name in targets):
        check_repo_id(repo_id)  # raises: some target has neither its own id nor one to derive it from
    ids = {}
    for name in (*targets, BASE_MODEL, MODEL, SFT_MODEL, DATASET, DEMO_DATA) if needs_models else targets:
        given = explicit.get(name)
        ids[name] = check_repo_id(given or derived[name], options.get(name, "--repo-id"))
    if ({MODEL, DATASET, WORLD_BENCHMARK} | needs_models) & set(targets) and not run_dir.is_dir():
        raise UsageError(
            f"run folder not found: {run_dir}; pass the folder `slmsql quickstart` wrote (--out)"
        )
    built = package_wheel(wheel) if {METRIC_SPACE, DEMO_SPACE} & set(targets) else None
    space = next((ids[name] for name in (METRIC_SPACE, DEMO_SPACE) if name in targets), None)
    wheel_space = (space, wheel_requirement(space, built.name, revision=revision)) if space and built else None
    plan = []
    for name in targets:
        if name == WORLD_BENCHMARK:
            plan += world_benchmark_targets(run_dir, ids[name], what)
        elif name == MODEL:
            band = (
                ids[DATASET] if DATASET in targets else None
            )  # the band pushed with it is its training data
            plan += _model_targets(
                run_dir, ids[name], ids[BASE_MODEL], revision, band, wheel_space, eval_datasets(plan)
            )
        elif name == SFT_MODEL:
            sft = model_ref(RunLayout(run_dir).sft_stage2)
            if sft.hub:  # the study's SFT adapter came from the Hub: the Space and card name it there
                logger.info("sft-model: the run's SFT adapter is %s on the Hub already; not pushed", sft.name)
                continue
            plan.append(_sft_target(run_dir, ids[name], ids[BASE_MODEL], ids[MODEL], revision))
        elif name == DATASET:
            plan.append(_dataset_target(run_dir, ids[name], ids.get(MODEL) or derived.get(MODEL)))
        elif name == METRIC_SPACE:
            plan.append(_metric_target(ids[name], built, revision))
        else:
            demo = Path(demo_dir) if demo_dir is not None else None
            plan += _demo_targets(ids[name], demo, run_dir, ids, built, revision)
    return plan


def stage_files(
    files: Iterable[tuple[str, Path | bytes]], folder: Path, *, link: bool = False, desc: str = ""
) -> None:
    """Write ``(path_in_repo, content)`` pairs under ``folder`` as they land in the repository: bytes written,
    local files copied (``link=True``: symlinked, for a folder that is only uploaded)."""
    from tqdm.auto import tqdm

    for path_in_repo, local in tqdm(list(files), desc=desc or "staging", unit="file", leave=False,
                                  disable=bar_disabled()):
        destination = folder / path_in_repo
        destination.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(local, bytes):
            destination.write_bytes(local)
        elif link:
            destination.symlink_to(Path(local).resolve())
        else:
            shutil.copyfile(local, destination)


def _prepare_dry_run_dir(out_dir: Path) -> None:
    """Empty ``out_dir`` if an earlier dry run wrote it; refuse a non-empty folder that is not a dry run."""
    if out_dir.is_dir() and any(out_dir.iterdir()):
        if not (out_dir / PLAN_FILE).is_file():
            raise UsageError(
                f"{out_dir} is not empty and holds no {PLAN_FILE} from an earlier dry run: pass an empty or new "
                "--dry-run-dir"
            )
        for name in (*TARGETS, BASE_MODEL, DEMO_DATA):
            if (out_dir / name).is_dir():
                shutil.rmtree(out_dir / name)
        (out_dir / PLAN_FILE).unlink()
    out_dir.mkdir(parents=True, exist_ok=True)


def _base_of(folder: Path) -> dict[str, Any]:
    """The base model the written adapter config names (``base_model_name_or_path``, ``revision``)."""
    from .base_model import read_adapter_config

    config = read_adapter_config(folder)
    return {"repo_id": config.get("base_model_name_or_path"), "revision": config.get("revision")}


def _stage_dry_run(target: PushTarget, folder: Path) -> None:
    """Stage ``target``'s files into ``folder`` as :func:`push` would upload them (the dataset as its parquet shard
    and card)."""
    folder.mkdir(parents=True)
    stage_files(target.files, folder, desc=f"dry run: {target.what}")
    if target.what == DATASET:
        shard = folder / BAND_SHARD
        shard.parent.mkdir(parents=True, exist_ok=True)
        load_band(target.dataset_path).to_parquet(str(shard))
        (folder / CARD_README).write_text(target.card or "", encoding="utf-8")


def _plan_entry(
    target: PushTarget,
    folder: Path,
    *,
    private: bool | None,
    revision: str | None,
    create_pr: bool,
    endpoint: str | None,
) -> dict[str, Any]:
    """``plan.json``'s entry for one staged target: its repository, URL, folder, files (size, sha256) and notes."""
    entry: dict[str, Any] = {
        "what": target.what,
        "repo_type": target.repo_type,
        "repo_id": target.repo_id,
        "url": repo_url(target.repo_type, target.repo_id, endpoint),
        "private": target.private(private),
        "revision": revision or "main",
        "create_pr": create_pr,
        "folder": str(folder),
        "files": [
            {"path": path, "size": local.stat().st_size, "sha256": sha256_of(local)}
            for path, local in folder_files(folder)
        ],
    }
    if target.space_sdk:
        entry["space_sdk"] = target.space_sdk
    if target.what == MODEL:
        entry["note"] = f"on push, {', '.join(STALE_MODEL_FILES)} (TRL's draft card) is deleted if present"
        entry["base_model"] = _base_of(folder)
    if target.what == BASE_MODEL:
        merge = "; the adapter names the base's main branch, so merge this pull request first"
        entry["note"] = "the adapter's local base model, pushed before the adapter that names it" + (
            merge if create_pr else ""
        )
    if target.what == SFT_MODEL:
        entry["base_model"] = _base_of(folder)
    if target.what == WORLD_BENCHMARK:
        from .world_benchmark import plan_entry

        entry.update(plan_entry(target))
    if target.what == DATASET:
        entry["note"] = (
            "pushed with Dataset.push_to_hub (parquet through LFS), which adds dataset_info to README.md; "
            "the databases the rows name follow in the card's commit"
        )
    return entry


def write_dry_run(
    targets: Sequence[PushTarget],
    out_dir: str | os.PathLike,
    *,
    private: bool | None = None,
    revision: str | None = None,
    create_pr: bool = False,
    endpoint: str | None = None,
) -> dict:
    """Write the exact folder each target would upload (``<out_dir>/<what>/``, staged as :func:`push` stages
    it; for the dataset the parquet shard and card, to which ``datasets`` adds ``dataset_info`` on push) and
    ``plan.json``, touching no network; an earlier dry run in ``out_dir`` is replaced. Returns the plan: per
    target the repository, its URL, the folder and every file with its size and sha256.

    Example:

    ```python
    >>> import tempfile
    >>> plan = write_dry_run(plan_push(".", "alice/qwen-grpo", "metric-space"), tempfile.mkdtemp())
    >>> [(t["repo_id"], t["repo_type"], t["private"]) for t in plan["targets"]]
    [('alice/ex', 'space', False)]
    >>> sorted(f["path"] for f in plan["targets"][0]["files"])  # doctest: +ELLIPSIS
    ['README.md', 'app.py', 'ex.py', 'requirements.txt', 'wheels/slmsql_hub-...-py3-none-any.whl']

    ```
    """
    out = Path(out_dir)
    _prepare_dry_run_dir(out)
    plan: dict[str, Any] = {
        "created_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "slmsql_hub_version": __version__,
        "dry_run": True,
        "private": private,  # None: models and datasets private, Spaces public (each target says)
        "revision": revision or "main",
        "create_pr": create_pr,
        "targets": [],
    }
    for target in targets:
        folder = out / target.what
        _stage_dry_run(target, folder)
        entry = _plan_entry(
            target, folder, private=private, revision=revision, create_pr=create_pr, endpoint=endpoint
        )
        plan["targets"].append(entry)
        logger.info(
            "dry run: %s -> %s (%d files) in %s", target.what, target.repo_id, len(entry["files"]), folder
        )
    write_atomic(out / PLAN_FILE, json.dumps(plan, indent=2) + "\n")
    return plan
