"""What the Space shows besides live answers, found once at startup: :func:`load_space_data`.

The databases (the embedded world, and Spider when configured) with their example questions; where the base model
and both adapters are; and, through :func:`slmsql_hub.run.read.read_run`, the evaluation, GRPO telemetry, model
card and ablation report of the run folder, its card folder or a Hub GRPO repo written by ``slmsql card``. What
is missing becomes a problem message for the page, never a traceback. Importing this module does no I/O.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from space_settings import SpaceSettings

from slmsql_hub.card.diagnosis import find_diagnosis
from slmsql_hub.data.trained_databases import (
    TRAINED_DATABASES_FILE,
    read_trained_databases,
    trained_databases,
)
from slmsql_hub.diagnosis.run import PLOT_FILE, REPORT_FILE
from slmsql_hub.errors import UsageError
from slmsql_hub.run.files import read_json_object
from slmsql_hub.run.layout import ABLATIONS_DIR as CARD_FOLDER
from slmsql_hub.run.layout import (
    DIAGNOSIS_DIR,
    FOREST_PLOT,
    REPORT_JSON,
    REPORT_MD,
    WORLD_MANIFEST,
    CardLayout,
    RunLayout,
)
from slmsql_hub.run.read import Run, read_run

logger = logging.getLogger(__name__)

POLICY_NAMES: tuple[str, str] = ("sft", "grpo")

POLICY_LABELS: dict[str, str] = {"sft": "SFT", "grpo": "GRPO"}

# The card folder files the Space reads from a Hub adapter repo (slmsql card ships them with the GRPO adapter).
_CARD = CardLayout("")
_HUB_PATTERNS = [
    "adapter_config.json",
    "adapter_model.safetensors",
    *(
        path.as_posix()
        for path in (
            _CARD.grpo.summary,
            _CARD.readme,
            _CARD.grpo.telemetry,
            _CARD.grpo_attempt1.telemetry,
            _CARD.grpo_attempt1.summary,
            _CARD.eval_results,
            _CARD.predictions_file("*"),
        )
    ),
    f"{CARD_FOLDER}/{REPORT_MD}",
    f"{CARD_FOLDER}/{REPORT_JSON}",
    f"{CARD_FOLDER}/{FOREST_PLOT}",
    *(f"{DIAGNOSIS_DIR}/{name}" for name in (REPORT_FILE, PLOT_FILE)),
]
_MISSING_RUN_HINT = (
    "run `slmsql quickstart` (it writes a run folder), point --run-dir or SLMSQL_RUN_DIR at a run folder, "
    "or set SLMSQL_BASE_MODEL, SLMSQL_SFT_ADAPTER and SLMSQL_GRPO_ADAPTER (Hub ids or folders)"
)


@dataclass(frozen=True)
class Database:
    """One database the page offers: ``key`` ``<source>/<db_id>`` (what ``/compare`` takes); ``mode`` the
    judge's rule (``bird`` for the world, ``spider`` for Spider)."""

    key: str
    db_id: str
    source: str
    path: Path
    mode: str

    @property
    def label(self) -> str:
        """What the dropdown shows: ``library (world)``."""
        return f"{self.db_id} ({self.source})"


@dataclass(frozen=True)
class Example:
    """An example question with its gold SQL (``difficulty`` and ``evidence`` may be empty)."""

    question_id: str
    question: str
    gold_sql: str
    difficulty: str = ""
    evidence: str = ""


@dataclass(frozen=True)
class PolicySpec:
    """One adapter: ``source`` as configured (folder or Hub id), ``adapter`` its folder, and its training prompt."""

    name: str
    adapter: str
    source: str
    prompt: Any

    @property
    def label(self) -> str:
        return POLICY_LABELS.get(self.name, self.name)


@dataclass
class SpaceData:
    """Everything the page shows besides live answers.

    ``base_model`` ``None`` and ``policies`` empty when unavailable; ``eval_dir`` holds ``eval_results.json``;
    ``attempts`` are telemetry records per attempt label (attempt #1 first), ``adapter_updates`` each attempt's
    ``adapter_update``; ``ablations`` the study's report folder, ``diagnosis`` ``slmsql diagnose``'s; ``trained``
    the databases each adapter trained on (``None`` when the run does not record them); ``problems`` one sentence
    per missing piece, with its fix; ``sources`` what was loaded from where.
    """

    databases: dict[str, Database] = field(default_factory=dict)
    examples: dict[str, list[Example]] = field(default_factory=dict)
    base_model: str | None = None
    policies: dict[str, PolicySpec] = field(default_factory=dict)
    eval_results: dict | None = None
    eval_dir: Path | None = None
    attempts: dict[str, list[dict]] = field(default_factory=dict)
    adapter_updates: dict[str, dict] = field(default_factory=dict)
    card_text: str | None = None
    ablations: Path | None = None
    diagnosis: Path | None = None
    trained: dict[str, list[str]] | None = None
    max_new_tokens: int = 256
    problems: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)


def _looks_like_hub_id(ref: str) -> bool:
    return (
        bool(re.fullmatch(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*", ref))
        and not Path(ref).expanduser().exists()
    )


def _fetch(ref: str, problems: list[str], what: str) -> Path | None:
    """``ref`` as a folder, or a snapshot of the Hub repo (adapter and card files); ``None`` with a problem."""
    path = Path(ref).expanduser()
    if path.is_dir():
        return path
    if not _looks_like_hub_id(ref):
        problems.append(f"{what} {ref!r} is neither a folder nor a Hub repo id (owner/name)")
        return None
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id=ref, allow_patterns=_HUB_PATTERNS))
    except (OSError, ValueError) as err:  # the Hub's errors: HTTP, offline, not found, invalid id
        logger.error("could not download %s %s from the Hub: %s", what, ref, err)
        problems.append(f"could not download {what} {ref!r} from the Hub: {err}")
        return None


def _world_databases(
    world: Path, split: str, problems: list[str]
) -> tuple[list[Database], dict[str, list[Example]]]:
    from slmsql_hub.data.benchmarks import get_benchmark, load_world

    try:
        manifest = read_json_object(world / WORLD_MANIFEST, "rebuild it with `slmsql world build`")
    except UsageError as err:
        problems.append(str(err))
        return [], {}
    databases = []
    for db_id in manifest.get("databases", []):
        path = world / "databases" / db_id / f"{db_id}.sqlite"
        if path.is_file():
            databases.append(Database(f"world/{db_id}", db_id, "world", path.resolve(), get_benchmark("world").compare_mode.value))
        else:
            problems.append(
                f"the world's database {db_id} is missing ({path}); rebuild with `slmsql world build`"
            )
    examples: dict[str, list[Example]] = {}
    try:
        rows = load_world(world, split, skip_missing_db=True)
    except UsageError as err:
        problems.append(f"no example questions from the world: {err}")
        rows = []
    for row in rows:
        examples.setdefault(f"world/{row['db_id']}", []).append(
            Example(row["question_id"], row["question"], row["gold_sql"], row["difficulty"], row["evidence"])
        )
    return databases, examples


def _spider_databases(root: Path, problems: list[str]) -> tuple[list[Database], dict[str, list[Example]]]:
    from slmsql_hub.data.benchmarks import get_benchmark, load_spider

    db_dir = root / "database" if (root / "database").is_dir() else root / "databases"
    databases = [
        Database(
            f"spider/{folder.name}",
            folder.name,
            "spider",
            (folder / f"{folder.name}.sqlite").resolve(),
            get_benchmark("spider").compare_mode.value,
        )
        for folder in sorted(db_dir.glob("*"))
        if (folder / f"{folder.name}.sqlite").is_file()
    ]
    if not databases:
        problems.append(f"no Spider databases under {db_dir} (expected database/<db>/<db>.sqlite)")
    examples: dict[str, list[Example]] = {}
    if (root / "dev.json").is_file():
        try:
            rows = load_spider(root, "dev", skip_missing_db=True)
        except UsageError as err:
            problems.append(f"no example questions from {root / 'dev.json'}: {err}")
            rows = []
        for row in rows:
            examples.setdefault(f"spider/{row['db_id']}", []).append(
                Example(row["question_id"], row["question"], row["gold_sql"], row["difficulty"])
            )
    return databases, examples


def _telemetry(runs: list[Run]) -> tuple[dict[str, list[dict]], dict[str, dict]]:
    """Telemetry records and ``adapter_update`` per attempt label; the first run that has an attempt's wins."""
    found: dict[str, Any] = {}
    for run in runs:
        for attempt in run.attempts:
            key = attempt.label if attempt.number == 1 else "shipped"
            if attempt.telemetry_file is not None and key not in found:
                found[key] = attempt
    if "shipped" in found:
        found["attempt #2" if "attempt #1" in found else "GRPO"] = found.pop("shipped")
    attempts, updates = {}, {}
    for label, attempt in found.items():
        if not attempt.records:
            continue
        attempts[label] = attempt.records
        if isinstance((attempt.summary or {}).get("adapter_update"), dict):
            updates[label] = attempt.summary["adapter_update"]
    return attempts, updates


def _build_world(settings: SpaceSettings) -> Path:
    from slmsql_hub.world import build_world

    cache = Path(settings.cache_dir or Path.home() / ".cache" / "slmsql-hub").expanduser()
    out = cache / f"world-seed{settings.world_seed}"
    logger.info("building the embedded world (seed %d) into %s", settings.world_seed, out)
    build_world(out, seed=settings.world_seed)
    return out


def load_space_data(settings: SpaceSettings) -> SpaceData:
    """Find everything the page shows; a missing piece becomes a problem message, never an error.

    Example:

    ```python
    >>> from space_data import SpaceSettings, load_space_data
    >>> data = load_space_data(SpaceSettings(run_dir="/nowhere/run"))
    >>> data.policies, data.problems[0].split(":")[0]
    ({}, 'No run folder at /nowhere/run')

    ```
    """
    data = SpaceData()
    run = RunLayout(Path(settings.run_dir).expanduser())
    run_exists = run.root.is_dir()
    if not run_exists and not settings.hub_models:
        message = f"No run folder at {run.root}: {_MISSING_RUN_HINT}."
        logger.error("%s", message)
        data.problems.append(message)
    logged = len(data.problems)
    grpo_folder = _load_policies(settings, run if run_exists else None, data)
    _load_databases(settings, run, run_exists, data)
    # Evaluation, telemetry and the card: the run folder's, else the card folder's (a Hub GRPO repo is one).
    _load_run_files([run.root, run.card.root] if run_exists else [], grpo_folder, data)
    configured = (data.eval_results or {}).get("config", {}).get("max_new_tokens")
    data.max_new_tokens = settings.max_new_tokens or (
        configured if isinstance(configured, int) and configured > 0 else 256
    )
    for message in data.problems[logged:]:
        logger.warning("%s", message)
    return data


_SNAPSHOT = re.compile(r"(?:models|datasets|spaces)--([^/\\]+)--([^/\\]+)[/\\]snapshots[/\\]([0-9a-f]{40})")


def hub_name(ref: str) -> str:
    """A model as the page names it: a Hub snapshot folder (a pinned revision) as ``owner/name@commit``, else as
    it is.

    Example:

    ```python
    >>> hub_name("/home/u/.cache/huggingface/hub/models--alice--tiny-sft/snapshots/" + "a" * 40)
    'alice/tiny-sft@aaaaaaaaaaaa'
    >>> hub_name("alice/tiny-sft")
    'alice/tiny-sft'

    ```
    """
    match = _SNAPSHOT.search(str(ref))
    return f"{match.group(1)}/{match.group(2)}@{match.group(3)[:12]}" if match else str(ref)


def _pinned_ref(ref: Any, record: Path) -> str:
    """A run's stage (:class:`~slmsql_hub.run.read.ModelRef`) as the Space loads it: a folder or Hub id at its
    default branch as it is, a Hub id at a pinned revision as the snapshot of that revision."""
    from space_config import model_ref_path

    return model_ref_path("base_model", ref.as_record(), record) if ref.hub else ref.name


def _load_policies(settings: SpaceSettings, run: RunLayout | None, data: SpaceData) -> Path | None:
    """The base once and both adapters into ``data.policies`` (all or none); returns the GRPO adapter's folder."""
    from slmsql_hub.evaluation import resolve_prompt_config
    from slmsql_hub.run.read import model_ref

    problems = data.problems
    # A run's base and SFT adapter are its folders, or the Hub repos their hub.json names (a study's Hub stages),
    # at the revision it pins (a snapshot of it: space_config's rule).
    base_ref = model_ref(run.base) if run else None
    base = settings.base_model or (_pinned_ref(base_ref, run.base.hub) if base_ref else None)
    refs = {
        "sft": settings.sft_adapter or (_pinned_ref(model_ref(run.sft_stage2), run.sft_stage2.hub) if run else None),
        "grpo": settings.grpo_adapter or (str(run.grpo.path) if run else None),
    }
    folders: dict[str, Path] = {}
    if base is not None and not settings.base_model and not base_ref.hub and not Path(base).is_dir():
        problems.append(
            f"no base model at {base}: train it with `slmsql train base` or set SLMSQL_BASE_MODEL"
        )
        base = None
    for name, ref in refs.items():
        if ref is None:
            continue
        folder = _fetch(ref, problems, f"the {POLICY_LABELS[name]} adapter")
        if folder is not None and not (folder / "adapter_config.json").is_file():
            problems.append(
                f"the {POLICY_LABELS[name]} adapter at {ref} has no adapter_config.json: finish its training, "
                f"or set SLMSQL_{name.upper()}_ADAPTER"
            )
            folder = None
        if folder is not None:
            folders[name] = folder
    if base is not None and len(folders) == len(POLICY_NAMES):
        data.base_model = base
        for name in POLICY_NAMES:
            data.policies[name] = PolicySpec(
                name, str(folders[name]), str(refs[name]), resolve_prompt_config(folders[name])
            )
        data.sources["base model"] = hub_name(base)
        data.sources.update({f"{POLICY_LABELS[n]} adapter": hub_name(str(refs[n])) for n in POLICY_NAMES})
    return folders.get("grpo")


def _run_benchmarks(settings: SpaceSettings, run: RunLayout, problems: list[str]) -> str | None:
    """A run's own benchmark databases and its SFT/GRPO disagreements as a Spider-layout folder in the cache (what
    ``slmsql push`` ships in the demo's dataset repository, :func:`slmsql_hub.hub.demo.benchmark_files`); ``None``
    when the run evaluated only the world."""
    import hashlib
    import shutil

    from slmsql_hub.hub.demo import benchmark_files
    from slmsql_hub.hub.plan import stage_files

    try:
        files = benchmark_files(run.root)
    except UsageError as err:
        problems.append(f"the run's benchmark databases: {err}")
        return None
    if not files:
        return None
    cache = Path(settings.cache_dir or Path.home() / ".cache" / "slmsql-hub").expanduser()
    folder = cache / f"benchmarks-{hashlib.sha256(str(run.root.resolve()).encode()).hexdigest()[:12]}"
    shutil.rmtree(folder, ignore_errors=True)
    stage_files(files.items(), folder, link=True, desc="the run's benchmark databases")
    return str(folder)


def _load_databases(settings: SpaceSettings, run: RunLayout, run_exists: bool, data: SpaceData) -> None:
    """The world's databases and example questions (built at startup for Hub models without one, unless the Space
    has benchmark databases), and Spider's: ``spider_dir``, else the run's own (:func:`_run_benchmarks`)."""
    problems = data.problems
    spider_dir = settings.spider_dir or (_run_benchmarks(settings, run, problems) if run_exists else None)
    world = Path(settings.world_dir).expanduser() if settings.world_dir else run.world
    if (
        not (world / WORLD_MANIFEST).is_file()
        and settings.world_dir is None
        and settings.hub_models
        and not spider_dir
    ):
        try:
            world = _build_world(settings)
        except (UsageError, OSError) as err:  # an unwritable cache, a folder holding something else
            problems.append(
                f"could not build the embedded world: {err}; set SLMSQL_WORLD_DIR to a built world"
            )
    if (world / WORLD_MANIFEST).is_file():
        databases, examples = _world_databases(world, settings.example_split, problems)
        data.databases.update((db.key, db) for db in databases)
        data.examples.update(examples)
        data.sources["world"] = str(world)
    elif settings.world_dir or (run_exists and not spider_dir):
        problems.append(f"no embedded world at {world}: build it with `slmsql world build --out {world}`")
    if spider_dir:
        spider = Path(spider_dir).expanduser()
        if spider.is_dir():
            databases, examples = _spider_databases(spider, problems)
            data.databases.update((db.key, db) for db in databases)
            data.examples.update(examples)
            data.sources["Spider databases"] = str(spider)
        else:
            problems.append(f"the Spider folder {spider} does not exist (SLMSQL_SPIDER_DIR / --spider-dir)")


def _load_run_files(roots: list[Path], grpo_folder: Path | None, data: SpaceData) -> None:
    """The evaluation, telemetry, card and ablation report from the first of ``roots`` (then the GRPO adapter's
    folder) that has each; the card folder's shipped report before the run's own study."""
    runs = []
    for root in [*roots, *([grpo_folder] if grpo_folder else [])]:
        if not root.is_dir():
            continue
        try:
            runs.append(read_run(root))
        except UsageError as err:  # a malformed file: say which, keep what the other folders give
            data.problems.append(str(err))
    evaluated = next((run for run in runs if run.eval_results is not None), None)
    if evaluated is not None:
        data.eval_results, data.eval_dir = evaluated.eval_results, evaluated.eval_dir
        data.sources["evaluation"] = str(evaluated.layout.eval_results)
    data.attempts, data.adapter_updates = _telemetry(runs)
    carded = next((run for run in runs if run.card_text is not None), None)
    if carded is not None:
        data.card_text = carded.card_text
        data.sources["model card"] = str(carded.layout.card_readme)
    shipped_first = sorted(runs, key=lambda run: not isinstance(run.layout, CardLayout))
    data.ablations = next((run.ablations for run in shipped_first if run.ablations is not None), None)
    data.diagnosis = next(filter(None, (find_diagnosis(run.root) for run in shipped_first)), None)
    _load_trained(runs, data)


def _load_trained(runs: list[Run], data: SpaceData, shipped_dir: Path | None = None) -> None:
    """The databases each adapter trained on: the runs' own record, else the one `slmsql push` shipped into the
    Space's folder (``shipped_dir``, default this file's); none is no message (a run made before the record)."""
    for run in runs:
        try:
            record = trained_databases(run)
        except UsageError as err:  # a record file named but missing or malformed
            data.problems.append(str(err))
            continue
        if record is not None:
            data.trained = record["adapters"]
            data.sources["training databases"] = (
                f"{run.root} (the SFT question record and GRPO's run summary)"
            )
            return
    shipped = (shipped_dir or Path(__file__).resolve().parent) / TRAINED_DATABASES_FILE
    if shipped.is_file():
        data.trained = read_trained_databases(shipped.read_text(encoding="utf-8"))
        if data.trained is None:
            data.problems.append(f"{shipped} is not a record of trained databases; push the Space again")
        else:
            data.sources["training databases"] = str(shipped)
