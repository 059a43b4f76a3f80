"""Publishing a run to the Hugging Face Hub: the model repo, the filtered band, the ``ex`` metric Space, the demo.

``slmsql push RUN_DIR --repo-id NAMESPACE/NAME`` (see :mod:`slmsql_hub.commands.push`) runs two steps:

1. :func:`plan_push` decides *what goes where* from the run folder alone, before any network call, and fails
   with one clear :class:`~slmsql_hub.errors.UsageError` when an input is missing;
2. :func:`push` uploads the plan with ``huggingface_hub`` (or :func:`write_dry_run` writes the exact folders
   that would be uploaded, plus ``plan.json``, and touches no network: ``huggingface_hub`` has no dry run).

The targets (``--what``, comma-separated, or ``all``) and their default repository ids, all derived from
``--repo-id NAMESPACE/NAME``:

================  ==========  ===========================  ===================================================
``--what``        repo type   default id                   content
================  ==========  ===========================  ===================================================
``model``         model       ``NAMESPACE/NAME``           ``RUN_DIR/card/`` as ``slmsql card`` assembled it: the
                                                           card (README.md), plots, ``.eval_results/``, the
                                                           adapter and tokenizer, telemetry, run summary, eval
                                                           predictions
(with ``model``)  model       ``NAMESPACE/NAME-base``      a local base model (``RUN_DIR/card/base/``) as its own
                                                           repository, with a short card; pushed first
``dataset``       dataset     ``NAMESPACE/NAME-band``      the pass-rate band (``RUN_DIR/filter/band``) as
                                                           parquet through ``Dataset.push_to_hub`` (LFS), and a
                                                           dataset card with the counts of ``filter_report.json``
``metric-space``  space       ``NAMESPACE/ex``             the ``ex`` metric: ``ex.py``, its card as the Space's
                                                           README, ``app.py`` (Gradio 6), ``requirements.txt``
``demo-space``    space       ``NAMESPACE/NAME-demo``      whatever ``spaces/demo/`` holds
================  ==========  ===========================  ===================================================

The adapter that is uploaded names its base as the Hub knows it (``base_model_name_or_path`` in
``adapter_config.json``, ``base_model`` + ``base_model_relation: adapter`` in the card), so
``AutoPeftModelForCausalLM.from_pretrained("NAMESPACE/NAME")`` loads it anywhere; see :mod:`slmsql_hub.base_model`.

Repositories are created **private** unless asked otherwise; an existing repository keeps its visibility.
``revision`` pushes to a branch (created from ``main`` when missing); ``create_pr`` opens a pull request
instead of committing to the branch. A re-push of unchanged files makes no commit (the client compares
hashes with the Hub's).

Training recipes with ``push_to_hub: true`` push checkpoints as TRL does (``hub_strategy``); TRL's draft card
is kept out of ``README.md`` by the GRPO trainer, and :func:`push_training_card` puts the project's card there
at the end of training.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import logging
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__, card_templates
from .errors import InfrastructureError, UsageError
from .repo_ids import check_repo_id, looks_like_hub_id
from .training.metric_names import EXACT_ZERO_STD_METRIC, TRL_ZERO_STD_METRIC

if TYPE_CHECKING:
    from huggingface_hub import HfApi

logger = logging.getLogger(__name__)

MODEL = "model"
BASE_MODEL = "base-model"
"""The plan entry (and dry-run folder) of a local base model pushed with ``model`` as its own repository."""
DATASET = "dataset"
METRIC_SPACE = "metric-space"
DEMO_SPACE = "demo-space"
TARGETS: tuple[str, ...] = (MODEL, DATASET, METRIC_SPACE, DEMO_SPACE)
"""The ``--what`` choices, in the order they are pushed."""

REPO_TYPES = {
    MODEL: "model",
    BASE_MODEL: "model",
    DATASET: "dataset",
    METRIC_SPACE: "space",
    DEMO_SPACE: "space",
}
METRIC_FILES: tuple[str, ...] = ("ex.py", "README.md", "app.py", "requirements.txt")
"""The files of ``slmsql_hub/metric/`` that make the ``ex`` Space (the card is its README)."""

STALE_MODEL_FILES: tuple[str, ...] = ("trl_model_card.md",)
"""Deleted from the model repository on push when present: TRL's draft card, which ours replaces."""

CARD_DIR = "card"
FILTER_DIR = "filter"
BAND_DIR = "band"
FILTER_REPORT = "filter_report.json"
DRY_RUN_DIR = "push_dry_run"
PLAN_FILE = "plan.json"
BAND_SPLIT = "train"
BAND_SHARD = f"data/{BAND_SPLIT}-00000-of-00001.parquet"
"""Where ``Dataset.push_to_hub`` puts a one-shard split (``data/<split>-<i>-of-<n>.parquet``)."""

# Never uploaded: caches, editor and OS droppings, Python bytecode, half-written files.
_CACHE_FOLDERS = (".git", ".cache", "__pycache__", ".ipynb_checkpoints", ".pytest_cache")
IGNORE_PATTERNS: tuple[str, ...] = (
    *(pattern for name in _CACHE_FOLDERS for pattern in (f"{name}/*", f"*/{name}/*")),
    ".DS_Store",
    "*/.DS_Store",
    *(f"*{suffix}" for suffix in (".pyc", ".partial", ".tmp", ".lock")),
)
"""Never uploaded (``upload_folder``'s ``ignore_patterns``; :func:`folder_files` lists with them too)."""
_BENCHMARK_LICENSES = {"spider": "cc-by-sa-4.0", "bird": "cc-by-sa-4.0", "world": "apache-2.0"}


@dataclasses.dataclass(frozen=True)
class PushTarget:
    """One repository to push to and what goes in it.

    Attributes:
        what: one of :data:`TARGETS`, or :data:`BASE_MODEL`.
        repo_type: ``"model"``, ``"dataset"`` or ``"space"``.
        repo_id: ``namespace/name``.
        files: ``(path_in_repo, content)`` pairs, sorted by path: a local file's path, or the bytes of a file
            written for the upload (a rewritten ``adapter_config.json``, a generated card). The dataset's parquet
            shard is not among them: ``datasets`` writes it.
        dataset_path: the saved band (``save_to_disk`` folder), for the dataset target.
        space_sdk: the Space's SDK (from its README's front matter), for Spaces.
        card: the README text for targets whose card is generated here (the dataset).

    Example:

    ```python
    >>> target = PushTarget("metric-space", "space", "alice/ex", space_sdk="gradio")
    >>> target.repo_type, target.files
    ('space', ())

    ```
    """

    what: str
    repo_type: str
    repo_id: str
    files: tuple[tuple[str, Path | bytes], ...] = ()
    dataset_path: Path | None = None
    space_sdk: str | None = None
    card: str | None = None


@dataclasses.dataclass(frozen=True)
class PushResult:
    """What one push did: the repository URL, the commit and, with ``create_pr``, the pull request.

    Example:

    ```python
    >>> PushResult("model", "model", "alice/x", "https://huggingface.co/alice/x", None, None).pr_url is None
    True

    ```
    """

    what: str
    repo_type: str
    repo_id: str
    url: str
    commit_url: str | None
    commit_oid: str | None
    pr_url: str | None = None


# ----------------------------------------------------------------------------------------------------------
# planning (no network)
# ----------------------------------------------------------------------------------------------------------
def parse_what(text: str | Sequence[str]) -> tuple[str, ...]:
    """The targets named by ``--what``: comma-separated names of :data:`TARGETS`, or ``all``.

    Args:
        text: e.g. ``"model,dataset"``, ``"all"``, or a list of names.

    Returns:
        The targets, de-duplicated, in push order.

    Raises:
        UsageError: an unknown or empty name.

    Example:

    ```python
    >>> parse_what("dataset,model")
    ('model', 'dataset')
    >>> parse_what("all")
    ('model', 'dataset', 'metric-space', 'demo-space')

    ```
    """
    names = [text] if isinstance(text, str) else list(text)
    wanted = {part.strip() for name in names for part in name.split(",") if part.strip()}
    if "all" in wanted:
        return TARGETS
    unknown = sorted(wanted - set(TARGETS))
    if unknown or not wanted:
        raise UsageError(
            f"--what {','.join(names)!r}: choose among {', '.join(TARGETS)} (comma-separated) or all"
            + (f"; unknown: {', '.join(unknown)}" if unknown else "")
        )
    return tuple(name for name in TARGETS if name in wanted)


def default_repo_ids(repo_id: str) -> dict[str, str]:
    """The repository id of each target, derived from the model's ``NAMESPACE/NAME``.

    A local base model is ``NAMESPACE/NAME-base``, the dataset ``NAMESPACE/NAME-band``, the metric Space
    ``NAMESPACE/ex`` (one per namespace, as ``evaluate.load("NAMESPACE/ex")`` expects), the demo Space
    ``NAMESPACE/NAME-demo``.

    Args:
        repo_id: the model repository.

    Returns:
        ``{target: repo_id}`` for every target of :data:`TARGETS` and :data:`BASE_MODEL`.

    Example:

    ```python
    >>> default_repo_ids("alice/qwen-grpo")["base-model"]
    'alice/qwen-grpo-base'
    >>> default_repo_ids("alice/qwen-grpo")["metric-space"]
    'alice/ex'

    ```
    """
    namespace = repo_id.split("/")[0]
    return {
        MODEL: repo_id,
        BASE_MODEL: f"{repo_id}-base",
        DATASET: f"{repo_id}-band",
        METRIC_SPACE: f"{namespace}/ex",
        DEMO_SPACE: f"{repo_id}-demo",
    }


def repo_url(repo_type: str, repo_id: str, endpoint: str | None = None) -> str:
    """The web address of a repository on the Hub (``HF_ENDPOINT`` when set).

    Args:
        repo_type: ``"model"``, ``"dataset"`` or ``"space"``.
        repo_id: ``namespace/name``.
        endpoint: the Hub; ``None`` reads ``HF_ENDPOINT``, else huggingface.co.

    Returns:
        The URL.

    Example:

    ```python
    >>> repo_url("space", "alice/ex", endpoint="https://huggingface.co")
    'https://huggingface.co/spaces/alice/ex'

    ```
    """
    endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
    prefix = {"model": "", "dataset": "datasets/", "space": "spaces/"}[repo_type]
    return f"{endpoint}/{prefix}{repo_id}"


def folder_files(folder: str | os.PathLike) -> list[tuple[str, Path]]:
    """Every file under ``folder`` as ``(path_in_repo, local_path)``, sorted; caches and bytecode left out.

    Hidden folders the Hub uses (``.eval_results/``) are kept; ``.git``, ``.cache``, ``__pycache__`` and
    half-written files (``*.partial``, ``*.tmp``, ``*.lock``) are not.

    Args:
        folder: the folder to list.

    Returns:
        ``(path_in_repo, local_path)`` pairs, ``path_in_repo`` with ``/`` separators.

    Example:

    ```python
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> (root / ".eval_results").mkdir(); (root / ".eval_results" / "dev.yaml").write_text("[]")
    2
    >>> (root / "__pycache__").mkdir(); (root / "__pycache__" / "x.pyc").write_bytes(b"")
    0
    >>> [path for path, _ in folder_files(root)]
    ['.eval_results/dev.yaml']

    ```
    """
    from huggingface_hub.utils import filter_repo_objects

    root = Path(folder)
    files = {path.relative_to(root).as_posix(): path for path in root.rglob("*") if path.is_file()}
    return sorted((name, files[name]) for name in filter_repo_objects(files, ignore_patterns=list(IGNORE_PATTERNS)))


def _front_matter(readme: Path) -> dict:
    """The YAML metadata of a card (``{}`` when it has none); a malformed block is a UsageError."""
    import yaml

    text = readme.read_text(encoding="utf-8")
    match = re.match(r"^---\s*\n(.*?)\n---\s*(\n|$)", text, re.DOTALL)
    if not match:
        return {}
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError as err:
        raise UsageError(f"{readme}: the YAML metadata does not parse ({err}); fix the card") from err
    if not isinstance(data, dict):
        raise UsageError(f"{readme}: the YAML metadata is not a mapping; fix the card")
    return data


def _model_targets(run_dir: Path, repo_id: str, base_repo_id: str, revision: str | None) -> list[PushTarget]:
    """The adapter's repository and, when its base is a local folder, the base's (pushed first)."""
    from . import base_model as bm

    card_dir = run_dir / CARD_DIR
    readme = card_dir / "README.md"
    if not readme.is_file():
        raise UsageError(
            f"no model card folder at {card_dir}: run `slmsql card --run-dir {run_dir}` first (it assembles the "
            "card, plots, .eval_results and adapter files that `slmsql push` uploads)"
        )
    if not (card_dir / "adapter_config.json").is_file():
        raise UsageError(
            f"{card_dir} has a card but no adapter_config.json: rerun `slmsql card --run-dir {run_dir}` after "
            "GRPO training so the adapter files are copied in"
        )
    from huggingface_hub import ModelCard

    try:
        card = ModelCard.load(readme)
    except ValueError as err:  # the card's own parser: malformed metadata
        raise UsageError(f"{readme} is not a valid model card ({err}); rerun `slmsql card`") from err
    _front_matter(readme)
    base = bm.resolve_base(card_dir, card, base_repo_id, revision=revision)
    files: dict[str, Path | bytes] = dict(folder_files(card_dir))
    # Rewritten in what is uploaded only; card_for_hub edits `card`, so it runs after resolve_base read it.
    rewritten = {
        bm.ADAPTER_CONFIG: bm.adapter_config_for_hub(card_dir, base),
        "README.md": bm.card_for_hub(card, base),
    }
    files.update({path: content for path, content in rewritten.items() if content is not None})
    targets = []
    if base.local_dir is not None:
        base_files: dict[str, Path | bytes] = dict(folder_files(base.local_dir))
        base_files["README.md"] = bm.base_card(
            base, repo_id, license=card.data.license, adapter_url=repo_url("model", repo_id)
        ).encode("utf-8")
        targets.append(PushTarget(BASE_MODEL, "model", base.repo_id, tuple(sorted(base_files.items()))))
    targets.append(PushTarget(MODEL, "model", repo_id, tuple(sorted(files.items()))))
    return targets


def _read_filter_report(run_dir: Path) -> dict:
    path = run_dir / FILTER_DIR / FILTER_REPORT
    band = run_dir / FILTER_DIR / BAND_DIR
    if not path.is_file() or not band.is_dir():
        raise UsageError(
            f"no filtered band at {band} (with {FILTER_REPORT} beside it): run `slmsql filter --config "
            "recipes/world/filter.yaml` with output_dir under the run folder first"
        )
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise UsageError(f"{path} is not valid JSON ({err}); rerun `slmsql filter`") from err


def _dataset_target(run_dir: Path, repo_id: str, model_repo_id: str | None) -> PushTarget:
    report = _read_filter_report(run_dir)
    card = dataset_card(report, repo_id, model_repo_id=model_repo_id)
    return PushTarget(DATASET, "dataset", repo_id, dataset_path=run_dir / FILTER_DIR / BAND_DIR, card=card)


def _metric_target(repo_id: str) -> PushTarget:
    folder = Path(__file__).resolve().parent / "metric"
    missing = [name for name in METRIC_FILES if not (folder / name).is_file()]
    if missing:
        raise UsageError(
            f"the installed slmsql_hub lacks metric files {missing} in {folder}; reinstall the package"
        )
    sdk = _front_matter(folder / "README.md").get("sdk", "gradio")
    return PushTarget(
        METRIC_SPACE,
        "space",
        repo_id,
        tuple(sorted((name, folder / name) for name in METRIC_FILES)),
        space_sdk=sdk,
    )


def default_demo_dir() -> Path:
    """``spaces/demo`` in the working directory, else in the source checkout this package runs from, else the
    copy a wheel installs as ``slmsql_hub/demo_space/``.

    Returns:
        The folder (it may not exist; :func:`plan_push` then says so).

    Example:

    ```python
    >>> default_demo_dir().parts[-2:]
    ('spaces', 'demo')

    ```
    """
    from .resources import shipped_path

    here = Path.cwd() / "spaces" / "demo"
    return here if here.is_dir() else shipped_path("spaces/demo", "demo_space")


def _demo_target(repo_id: str, demo_dir: Path | None) -> PushTarget:
    folder = Path(demo_dir) if demo_dir is not None else default_demo_dir()
    files = folder_files(folder) if folder.is_dir() else []
    if not files:
        raise UsageError(f"no demo Space files in {folder}: build the demo there first, or pass --demo-dir")
    readme = folder / "README.md"
    if not readme.is_file():
        raise UsageError(
            f"{folder} has no README.md: a Space needs one with its metadata (sdk: gradio, app_file)"
        )
    sdk = _front_matter(readme).get("sdk")
    if sdk not in ("gradio", "streamlit", "docker", "static"):
        raise UsageError(f"{readme}: set `sdk:` in its YAML metadata to gradio, streamlit, docker or static")
    return PushTarget(DEMO_SPACE, "space", repo_id, tuple(files), space_sdk=sdk)


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
    revision: str | None = None,
) -> list[PushTarget]:
    """Decide what each target repository receives, from the run folder alone (no network).

    Args:
        run_dir: the run folder (``outputs/quickstart``): ``card/`` for the model, ``filter/`` for the dataset.
        repo_id: the model repository ``NAMESPACE/NAME``; the other ids default to names derived from it (see
            :func:`default_repo_ids`). May be ``None`` when every target needed has its own id.
        what: targets, as for :func:`parse_what`.
        dataset_repo_id: the dataset repository (default ``NAMESPACE/NAME-band``).
        metric_space_id: the metric Space (default ``NAMESPACE/ex``).
        demo_space_id: the demo Space (default ``NAMESPACE/NAME-demo``).
        demo_dir: the demo Space's files (default :func:`default_demo_dir`).
        base_repo_id: where a local base model is published with ``model`` (default ``NAMESPACE/NAME-base``).
        revision: the branch the push goes to; a local base pushed there is pinned to it in the adapter config.

    Returns:
        One :class:`PushTarget` per target, in push order; a local base model's (:data:`BASE_MODEL`) comes
        just before the model's.

    Raises:
        UsageError: a repository id is missing or malformed, or the run lacks what a target needs (the
            message names the command that makes it).

    Example:

    ```python
    >>> [(t.what, t.repo_id, t.space_sdk) for t in plan_push(".", "alice/qwen-grpo", "metric-space")]
    [('metric-space', 'alice/ex', 'gradio')]

    ```
    """
    targets = parse_what(what)
    run_dir = Path(run_dir)
    explicit = {
        DATASET: dataset_repo_id,
        METRIC_SPACE: metric_space_id,
        DEMO_SPACE: demo_space_id,
        BASE_MODEL: base_repo_id,
    }
    options = {
        DATASET: "--dataset-repo-id",
        METRIC_SPACE: "--metric-space-id",
        DEMO_SPACE: "--demo-space-id",
        BASE_MODEL: "--base-repo-id",
    }
    derived = default_repo_ids(check_repo_id(repo_id)) if repo_id or MODEL in targets else {}
    if not derived and any(explicit.get(name) is None for name in targets):
        check_repo_id(repo_id)  # raises: some target has neither its own id nor one to derive it from
    ids = {}
    for name in (*targets, BASE_MODEL) if MODEL in targets else targets:
        given = explicit.get(name)
        ids[name] = check_repo_id(given or derived[name], options.get(name, "--repo-id"))
    if {MODEL, DATASET} & set(targets) and not run_dir.is_dir():
        raise UsageError(
            f"run folder not found: {run_dir}; pass the folder `slmsql quickstart` wrote (--out)"
        )
    plan = []
    for name in targets:
        if name == MODEL:
            plan += _model_targets(run_dir, ids[name], ids[BASE_MODEL], revision)
        elif name == DATASET:
            plan.append(_dataset_target(run_dir, ids[name], ids.get(MODEL) or derived.get(MODEL)))
        elif name == METRIC_SPACE:
            plan.append(_metric_target(ids[name]))
        else:
            plan.append(_demo_target(ids[name], Path(demo_dir) if demo_dir is not None else None))
    return plan


# ----------------------------------------------------------------------------------------------------------
# the dataset card and the band as published
# ----------------------------------------------------------------------------------------------------------
def _fmt_rate(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def dataset_card(
    report: dict, repo_id: str, *, model_repo_id: str | None = None, endpoint: str | None = None
) -> str:
    """The band's dataset card (``model_card/dataset_card.md``): metadata and a body whose numbers all come from
    ``filter_report.json``.

    Example:

    ```python
    >>> report = {"summary": "2 band / 1 all-fail / 1 all-pass / 0 unscorable of 4", "pool": 4,
    ...           "counts": {"band": 2, "all_fail": 1, "all_pass": 1, "unscorable": 0},
    ...           "num_samples": 8, "pass_rate_low": 0.2, "pass_rate_high": 0.8,
    ...           "dataset": {"benchmark": "world", "split": "train"}}
    >>> card = dataset_card(report, "alice/qwen-grpo-band")
    >>> "| band (kept) | 2 |" in card, card.startswith("---")
    (True, True)

    ```
    """
    from huggingface_hub import DatasetCard, DatasetCardData

    counts = report.get("counts", {})
    benchmark = report.get("dataset", {}).get("benchmark") or "unknown"
    band = counts.get("band", 0)
    pretty_name = f"{repo_id.split('/')[-1]}: GRPO pass-rate band"
    data = DatasetCardData(
        pretty_name=pretty_name,
        license=_BENCHMARK_LICENSES.get(benchmark, "other"),
        task_categories=["text-generation"],
        language=["en"],
        tags=["text-to-sql", "grpo", "dapo", "pass-rate-filter", "slmsql-hub"],
        size_categories=[_size_category(band)],
        configs=[{"config_name": "default", "data_files": [{"split": BAND_SPLIT, "path": f"data/{BAND_SPLIT}-*"}]}],
    )
    classes = [
        ("band (kept)", band),
        ("all-fail", counts.get("all_fail", 0)),
        ("all-pass", counts.get("all_pass", 0)),
        ("unscorable", counts.get("unscorable", 0)),
        ("pool", report.get("pool", sum(counts.values()))),
    ]
    context = {
        "report": report,
        "repo_id": repo_id,
        "split": BAND_SPLIT,
        "benchmark": benchmark,
        "dataset": report.get("dataset", {}),
        "mean_pass_rate": _fmt_rate(report.get("mean_pass_rate")),
        "classes": classes,
        "by_difficulty": report.get("by_difficulty") or {},
        "policy": report.get("policy", {}),
        "generation": report.get("generation", {}),
        "judging": report.get("judging", {}),
        "model_repo_id": model_repo_id,
        "model_url": repo_url("model", model_repo_id, endpoint) if model_repo_id else None,
        "slmsql_hub_version": __version__,
    }
    path = card_templates.template_path(card_templates.DATASET_CARD)
    return str(card_templates.render(DatasetCard, data, path, **context))


def _size_category(n: int) -> str:
    for limit, name in (
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
    ):
        if n < limit:
            return name
    return "n>1M"


def portable_db_path(path: str) -> str:
    """A database path that means something off this machine: from the ``databases/`` folder on, else
    ``<db folder>/<file>``; relative paths stay as they are.

    Args:
        path: the ``db_path`` of a band row.

    Returns:
        The path to publish.

    Example:

    ```python
    >>> portable_db_path("/home/me/outputs/quickstart/world/databases/library/library.sqlite")
    'databases/library/library.sqlite'
    >>> portable_db_path("/data/spider/database/concert_singer/concert_singer.sqlite")
    'database/concert_singer/concert_singer.sqlite'

    ```
    """
    parts = Path(path).parts
    if not Path(path).is_absolute():
        return path
    for folder in ("databases", "database", "dev_databases", "train_databases"):
        if folder in parts:
            return "/".join(parts[len(parts) - 1 - parts[::-1].index(folder) :])
    return "/".join(parts[-2:])


def load_band(path: str | os.PathLike):
    """The saved band as it is published: ``db_path`` made portable (see :func:`portable_db_path`).

    Args:
        path: the ``save_to_disk`` folder ``slmsql filter`` writes (``RUN_DIR/filter/band``).

    Returns:
        A ``datasets.Dataset``.

    Raises:
        UsageError: the folder holds a ``DatasetDict``.

    Example:

    ```python
    >>> import tempfile, datasets
    >>> folder = tempfile.mkdtemp()
    >>> datasets.Dataset.from_dict({"db_path": ["/tmp/w/databases/a/a.sqlite"]}).save_to_disk(folder)
    >>> load_band(folder)[0]["db_path"]
    'databases/a/a.sqlite'

    ```
    """
    import datasets

    band = datasets.load_from_disk(str(path))
    if not isinstance(band, datasets.Dataset):
        raise UsageError(
            f"{path} holds a DatasetDict, not the band Dataset `slmsql filter` saves; rerun the filter"
        )
    if "db_path" in band.column_names:
        band = band.map(lambda row: {"db_path": portable_db_path(row["db_path"])}, desc="portable db_path")
    return band


# ----------------------------------------------------------------------------------------------------------
# dry run
# ----------------------------------------------------------------------------------------------------------
def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def stage_files(files: Iterable[tuple[str, Path | bytes]], folder: Path, *, link: bool = False, desc: str = "") -> None:
    """Write ``(path_in_repo, content)`` pairs under ``folder`` as they land in the repository: bytes written,
    local files copied (``link=True``: symlinked, for a folder that is only uploaded)."""
    from tqdm.auto import tqdm

    for path_in_repo, local in tqdm(list(files), desc=desc or "staging", unit="file", leave=False):
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
        for name in (*TARGETS, BASE_MODEL):
            if (out_dir / name).is_dir():
                shutil.rmtree(out_dir / name)
        (out_dir / PLAN_FILE).unlink()
    out_dir.mkdir(parents=True, exist_ok=True)


def _base_of(folder: Path) -> dict[str, Any]:
    """The base model the written adapter config names (``base_model_name_or_path``, ``revision``)."""
    config = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
    return {"repo_id": config.get("base_model_name_or_path"), "revision": config.get("revision")}


def write_dry_run(
    targets: Sequence[PushTarget],
    out_dir: str | os.PathLike,
    *,
    private: bool = True,
    revision: str | None = None,
    create_pr: bool = False,
    endpoint: str | None = None,
) -> dict:
    """Write the exact folder each target would upload, and ``plan.json``, touching no network.

    ``<out_dir>/<what>/`` holds the files as they would land in the repository: the model card folder (its
    ``adapter_config.json`` and card naming the base on the Hub), a local base model's repository
    (``base-model/``), the metric and demo Space files, and for the dataset the parquet shard
    (``data/train-00000-of-00001.parquet``, the band with portable ``db_path``) and the dataset card. On push,
    ``datasets`` also adds a ``dataset_info`` block (features and sizes) to that card's metadata. An earlier dry
    run in ``out_dir`` is replaced.

    Args:
        targets: from :func:`plan_push`.
        out_dir: the folder (``RUN_DIR/push_dry_run`` by default in the CLI).
        private: the visibility new repositories would get.
        revision: the branch that would be pushed to (``main`` when ``None``).
        create_pr: whether a pull request would be opened instead.
        endpoint: the Hub the URLs name (``HF_ENDPOINT`` or huggingface.co).

    Returns:
        The plan (also written to ``<out_dir>/plan.json``): per target the repository, its URL, the folder
        and every file with its size and sha256.

    Example:

    ```python
    >>> import tempfile
    >>> plan = write_dry_run(plan_push(".", "alice/qwen-grpo", "metric-space"), tempfile.mkdtemp())
    >>> [(t["repo_id"], t["repo_type"], t["private"]) for t in plan["targets"]]
    [('alice/ex', 'space', True)]
    >>> sorted(f["path"] for f in plan["targets"][0]["files"])
    ['README.md', 'app.py', 'ex.py', 'requirements.txt']

    ```
    """
    check_pull_request(revision, create_pr)
    out = Path(out_dir)
    _prepare_dry_run_dir(out)
    plan: dict[str, Any] = {
        "created_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "slmsql_hub_version": __version__,
        "dry_run": True,
        "private": private,
        "revision": revision or "main",
        "create_pr": create_pr,
        "targets": [],
    }
    for target in targets:
        folder = out / target.what
        folder.mkdir(parents=True)
        stage_files(target.files, folder, desc=f"dry run: {target.what}")
        if target.what == DATASET:
            shard = folder / BAND_SHARD
            shard.parent.mkdir(parents=True, exist_ok=True)
            load_band(target.dataset_path).to_parquet(str(shard))
            (folder / "README.md").write_text(target.card or "", encoding="utf-8")
        files = [
            {"path": path, "size": local.stat().st_size, "sha256": _sha256(local)}
            for path, local in folder_files(folder)
        ]
        entry = {
            "what": target.what,
            "repo_type": target.repo_type,
            "repo_id": target.repo_id,
            "url": repo_url(target.repo_type, target.repo_id, endpoint),
            "private": private,
            "revision": revision or "main",
            "create_pr": create_pr,
            "folder": str(folder),
            "files": files,
        }
        if target.space_sdk:
            entry["space_sdk"] = target.space_sdk
        if target.what == MODEL:
            entry["note"] = (
                f"on push, {', '.join(STALE_MODEL_FILES)} (TRL's draft card) is deleted if present"
            )
            entry["base_model"] = _base_of(folder)
        if target.what == BASE_MODEL:
            merge = "; the adapter names the base's main branch, so merge this pull request first"
            entry["note"] = "the adapter's local base model, pushed before the adapter that names it" + (
                merge if create_pr else ""
            )
        if target.what == DATASET:
            entry["note"] = (
                "pushed with Dataset.push_to_hub (parquet through LFS), which adds dataset_info to README.md"
            )
        plan["targets"].append(entry)
        logger.info("dry run: %s -> %s (%d files) in %s", target.what, target.repo_id, len(files), folder)
    (out / PLAN_FILE).write_text(json.dumps(plan, indent=2) + "\n", encoding="utf-8")
    return plan


# ----------------------------------------------------------------------------------------------------------
# push (network)
# ----------------------------------------------------------------------------------------------------------
def _one_line(err: Exception, limit: int = 300) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _hub_api(token: str | None) -> tuple[HfApi, str]:
    """An ``HfApi`` with a token that the Hub accepts, and the user name; UsageErrors name the fix."""
    import httpx2  # huggingface_hub 2.x's transport (pyproject's lower bound)
    from huggingface_hub import HfApi, constants, get_token
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    if constants.is_offline_mode():
        raise UsageError(
            "HF_HUB_OFFLINE is set: unset it to push, or use --dry-run to see what would be pushed"
        )
    token = token or get_token()
    if not token:
        raise UsageError(
            "no Hugging Face token: set HF_TOKEN or run `hf auth login` (a token with write access), or use "
            "--dry-run to see what would be pushed"
        )
    api = HfApi(token=token, library_name="slmsql-hub", library_version=__version__)
    try:
        user = api.whoami()["name"]
    except OfflineModeIsEnabled as err:
        raise UsageError("HF_HUB_OFFLINE is set: unset it to push, or use --dry-run") from err
    except HfHubHTTPError as err:
        status = err.response.status_code if err.response is not None else None
        if status == 401:
            raise UsageError(
                f"the Hub ({api.endpoint}) rejected the token: set HF_TOKEN to a valid token with write access "
                "or run `hf auth login`"
            ) from err
        raise InfrastructureError(
            f"the Hub at {api.endpoint} failed before anything was pushed ({_one_line(err)}); try again later"
        ) from err
    except httpx2.TransportError as err:
        raise InfrastructureError(
            f"cannot reach the Hub at {api.endpoint} ({_one_line(err)}); nothing was pushed: check the network "
            "and HF_ENDPOINT"
        ) from err
    return api, user


def _forbidden(err: Exception, target: PushTarget) -> UsageError | None:
    from huggingface_hub.errors import HfHubHTTPError

    status = (
        err.response.status_code if isinstance(err, HfHubHTTPError) and err.response is not None else None
    )
    if status in (401, 403):
        return UsageError(
            f"the Hub refused to write {target.repo_type} {target.repo_id} (HTTP {status}): use a token with write "
            f"access to the '{target.repo_id.split('/')[0]}' namespace, or another --repo-id"
        )
    return None


def _ensure_branch(api: HfApi, target: PushTarget, revision: str | None) -> None:
    if revision and revision != "main" and not revision.startswith("refs/pr/"):
        api.create_branch(target.repo_id, branch=revision, repo_type=target.repo_type, exist_ok=True)


def check_pull_request(revision: str | None, create_pr: bool) -> None:
    """``upload_folder`` opens pull requests against ``main`` only: a UsageError for one against a branch."""
    if create_pr and revision not in (None, "main"):
        raise UsageError(
            f"--create-pr opens a pull request against main; --revision {revision} cannot be combined with it: "
            "drop one of them"
        )


def _upload(
    api: HfApi,
    target: PushTarget,
    files: Iterable[tuple[str, Path | bytes]],
    *,
    revision: str | None,
    create_pr: bool,
    message: str,
):
    """One ``upload_folder`` commit of ``files`` (staged as symlinks); TRL's draft card is deleted from a model
    repository (``delete_patterns``)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="slmsql-push-") as folder:
        stage_files(files, Path(folder), link=True, desc=f"staging {target.what}")
        return api.upload_folder(
            repo_id=target.repo_id,
            folder_path=folder,
            repo_type=target.repo_type,
            revision=None if create_pr else revision,
            create_pr=create_pr,
            commit_message=message,
            ignore_patterns=list(IGNORE_PATTERNS),
            delete_patterns=list(STALE_MODEL_FILES) if target.what == MODEL else None,
        )


def _push_dataset(api: HfApi, target: PushTarget, *, private: bool, revision: str | None, create_pr: bool):
    """Band as parquet through ``Dataset.push_to_hub``, then our card merged over the one ``datasets`` wrote."""
    from huggingface_hub import DatasetCard, DatasetCardData, hf_hub_download

    band = load_band(target.dataset_path)
    info = band.push_to_hub(
        target.repo_id,
        split=BAND_SPLIT,
        private=private,
        token=api.token,
        revision=revision,
        create_pr=create_pr,
        commit_message=f"Pass-rate band ({len(band)} questions) from slmsql-hub",
    )
    card_revision = info.pr_revision if create_pr else info.oid
    pushed = DatasetCard.load(
        hf_hub_download(
            target.repo_id, "README.md", repo_type="dataset", revision=card_revision, token=api.token
        )
    )
    card = DatasetCard(target.card or "")
    # our metadata over what `datasets` wrote (its dataset_info and configs stay)
    ours = {k: v for k, v in card.data.to_dict().items() if k != "configs"}
    card.data = DatasetCardData(**{**pushed.data.to_dict(), **ours})
    commit = api.upload_file(
        path_or_fileobj=str(card).encode("utf-8"),
        path_in_repo="README.md",
        repo_id=target.repo_id,
        repo_type="dataset",
        revision=info.pr_revision if create_pr else revision,
        parent_commit=None if create_pr else info.oid,
        commit_message="Dataset card: filter counts and how the band was made",
    )
    return commit, info


def push(
    targets: Sequence[PushTarget],
    *,
    token: str | None = None,
    private: bool = True,
    revision: str | None = None,
    create_pr: bool = False,
    commit_message: str | None = None,
) -> list[PushResult]:
    """Create each target repository if needed and upload its plan.

    Args:
        targets: from :func:`plan_push`.
        token: a token with write access; ``None`` uses ``HF_TOKEN`` or the stored login.
        private: visibility of repositories created here (existing ones keep theirs).
        revision: the branch to push to (created from ``main`` when missing); ``None`` is ``main``.
        create_pr: open a pull request against ``revision`` instead of committing to it.
        commit_message: the commit title (a default names the target).

    Returns:
        One :class:`PushResult` per target.

    Raises:
        UsageError: no token, a rejected token, a namespace the token cannot write to, or offline mode.

    Example:

    ```python
    >>> callable(push)  # needs a Hub: see tests/test_hub.py, which runs it against a local Hub API server
    True

    ```
    """
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    if not targets:
        return []
    check_pull_request(revision, create_pr)
    api, user = _hub_api(token)
    logger.info("pushing as %s to %s", user, api.endpoint)
    results = []
    for target in targets:
        try:
            results.append(
                _push_one(
                    api,
                    target,
                    private=private,
                    revision=revision,
                    create_pr=create_pr,
                    commit_message=commit_message,
                )
            )
        except HfHubHTTPError as err:
            refused = _forbidden(err, target)
            if refused is not None:
                raise refused from err
            raise InfrastructureError(_failed_midway(api, target, results, err)) from err
        except httpx2.TransportError as err:
            raise InfrastructureError(_failed_midway(api, target, results, err)) from err
    return results


def _failed_midway(api: HfApi, target: PushTarget, done: list[PushResult], err: Exception) -> str:
    """One line: which target failed and why, what was pushed before it, and how to finish."""
    pushed = ", ".join(f"{r.what} ({r.repo_id})" for r in done) if done else "nothing"
    return (
        f"the Hub at {api.endpoint} failed while pushing {target.what} to {target.repo_id} ({_one_line(err)}); "
        f"pushed before it: {pushed}; rerun the same command to finish (pushing the same files again is safe)"
    )


def _push_one(
    api: HfApi,
    target: PushTarget,
    *,
    private: bool,
    revision: str | None,
    create_pr: bool,
    commit_message: str | None,
) -> PushResult:
    created = api.create_repo(
        target.repo_id,
        repo_type=target.repo_type,
        private=private,
        exist_ok=True,
        space_sdk=target.space_sdk if target.repo_type == "space" else None,
    )
    url = str(created)
    existing = api.repo_info(target.repo_id, repo_type=target.repo_type)
    if existing.private is not None and existing.private != private:
        logger.warning(
            "%s %s already exists and is %s: its visibility is left as it is",
            target.repo_type,
            target.repo_id,
            "private" if existing.private else "public",
        )
    if target.what == DATASET:
        commit, first = _push_dataset(api, target, private=private, revision=revision, create_pr=create_pr)
        pr_url = first.pr_url
    else:
        if not create_pr:
            _ensure_branch(api, target, revision)
        message = (
            commit_message
            or {
                MODEL: "GRPO adapter, model card, plots and eval results from slmsql-hub",
                BASE_MODEL: "Base model of a GRPO adapter, from slmsql-hub",
                METRIC_SPACE: "slmsql ex metric: script, card and Gradio app",
                DEMO_SPACE: "slmsql-hub demo Space",
            }[target.what]
        )
        commit = _upload(
            api, target, target.files, revision=revision, create_pr=create_pr, message=message
        )
        pr_url = commit.pr_url
    logger.info("pushed %s to %s (commit %s)", target.what, url, commit.oid)
    return PushResult(
        target.what, target.repo_type, target.repo_id, url, commit.commit_url, commit.oid, pr_url
    )


# ----------------------------------------------------------------------------------------------------------
# after training with push_to_hub: true
# ----------------------------------------------------------------------------------------------------------
TRAINING_RUN_FILES: tuple[str, ...] = ("run_summary.json", "config.yaml", "telemetry.jsonl")
"""Run files uploaded with the card after training (TRL's last push happens before they are written)."""


def training_card(summary: dict, repo_id: str) -> str:
    """The card a repository gets at the end of training (``model_card/training_card.md``), from
    ``run_summary.json`` only: lineage, status, steps, guards and telemetry means; ``slmsql card`` makes the full
    card that replaces it on ``slmsql push``.

    Example:

    ```python
    >>> card = training_card({"kind": "grpo", "status": "completed", "base_model": "Qwen/Qwen2.5-Coder-1.5B",
    ...                       "adapter_path": "outputs/sft/stage2", "steps": 3}, "alice/qwen-grpo")
    >>> "base_model: Qwen/Qwen2.5-Coder-1.5B" in card, "3 steps" in card
    (True, True)

    ```
    """
    from huggingface_hub import ModelCard, ModelCardData

    from .card_numbers import scientific

    base = summary.get("base_model") or "unknown"
    kind = str(summary.get("kind") or "grpo")
    data = ModelCardData(
        base_model=base if looks_like_hub_id(base) else None,
        library_name="peft",
        pipeline_tag="text-generation",
        tags=["text-to-sql", kind, "trl", "peft", "slmsql-hub"],
    )
    means = ((summary.get("telemetry") or {}).get("mean")) or {}
    relative = (summary.get("adapter_update") or {}).get("relative_norm")
    guards = summary.get("guards") or {}
    context = {
        "model_name": repo_id.split("/")[-1],
        "kind": kind,
        "base": base,
        "summary": summary,
        "checksum": summary.get("adapter_checksum") or {},
        "relative_update": None if relative is None else scientific(relative),
        "telemetry_means": [
            (name, _fmt_rate(means[name]))
            for name in (EXACT_ZERO_STD_METRIC, TRL_ZERO_STD_METRIC, "reward", "reward_std", "grad_norm")
            if name in means
        ],
        "guards": [(r.get("name"), r.get("status")) for r in guards.get("results", [])]
        if isinstance(guards, dict)
        else [],
        "run_files": TRAINING_RUN_FILES,
    }
    path = card_templates.template_path(card_templates.TRAINING_CARD)
    return str(card_templates.render(ModelCard, data, path, **context))


def push_training_card(
    output_dir: str | os.PathLike,
    repo_id: str,
    *,
    token: str | None = None,
    revision: str | None = None,
    card_dir: str | os.PathLike | None = None,
) -> Any:
    """Put the project's card in a repository that training pushed to (``push_to_hub: true``).

    TRL's trainer pushes the output folder at each save (``hub_strategy``) and at the end; the GRPO trainer keeps
    TRL's draft card out of ``README.md`` (it is ``trl_model_card.md``), so the repository has no card of ours.
    Call this on the main process after ``run_summary.json`` is written: one commit adds ``README.md`` (the
    full card from ``card_dir`` when given, else :func:`training_card`), the run files TRL's last push predates,
    and deletes TRL's draft from the repository.

    Args:
        output_dir: the training output folder (holds ``run_summary.json``).
        repo_id: the repository training pushed to (``trainer.hub_model_id``).
        token: a token with write access (``training_args.hub_token``); ``None`` uses ``HF_TOKEN``/login.
        revision: the branch training pushed to (``training_args.hub_revision``).
        card_dir: a folder with a full card (``slmsql card``'s output) to upload instead of the training card.

    Returns:
        The ``CommitInfo`` of the commit.

    Example:

    ```python
    >>> callable(push_training_card)  # needs a Hub: see tests/test_hub.py
    True

    ```
    """
    from huggingface_hub.errors import HfHubHTTPError

    output_dir = Path(output_dir)
    summary_path = output_dir / "run_summary.json"
    if card_dir is None and not summary_path.is_file():
        raise UsageError(
            f"no run_summary.json in {output_dir}: call push_training_card after the run summary is written"
        )
    api, _ = _hub_api(token)
    target = PushTarget(MODEL, "model", check_repo_id(repo_id, "hub_model_id"))
    if card_dir is not None:
        upload: list[tuple[str, Path | bytes]] = folder_files(card_dir)
        if not any(path == "README.md" for path, _ in upload):
            raise UsageError(f"{card_dir} has no README.md: run `slmsql card` first")
    else:
        card = training_card(json.loads(summary_path.read_text(encoding="utf-8")), repo_id)
        upload = [("README.md", card.encode("utf-8"))]
        upload += [(name, output_dir / name) for name in TRAINING_RUN_FILES if (output_dir / name).is_file()]
    message = "Model card from slmsql-hub (replaces TRL's draft)"
    try:
        commit = _upload(api, target, upload, revision=revision, create_pr=False, message=message)
    except HfHubHTTPError as err:
        refused = _forbidden(err, target)
        if refused is not None:
            raise refused from err
        raise
    logger.info("card pushed to %s (commit %s)", repo_id, commit.oid)
    return commit
