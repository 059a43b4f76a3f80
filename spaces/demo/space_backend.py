"""The comparison Space without the page: settings, the run's files, the policy, and one comparison.

:mod:`app` draws the page; everything it shows comes from here, so the logic is testable without a browser:

- :class:`SpaceSettings`: where the run folder is (``--run-dir`` / ``SLMSQL_RUN_DIR``), or the Hub ids of the base
  model and both adapters for the real Space, plus the safety limits (question length, rows shown, sandbox
  deadline, queue concurrency);
- :func:`load_space_data`: the databases to pick from (the embedded world, and a Spider-layout folder when
  configured), their example questions with gold SQL, the evaluation, the GRPO telemetry and the model card's
  summary. What is missing becomes a problem message for the page, never a traceback;
- :class:`ComparisonSpace`: the base model loaded ONCE with both LoRA adapters (switched with PEFT through
  :func:`~slmsql_hub.generation.use_adapter`), one :class:`~slmsql_hub.sql.Sandbox` through which EVERY query
  runs, and :meth:`ComparisonSpace.compare`: both policies' answers to one question, executed and judged
  against the gold when the question is one of the examples.

Importing this module does no I/O and imports neither torch nor gradio.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slmsql_hub.errors import UsageError
from slmsql_hub.training.metric_names import EXACT_ZERO_STD_METRIC, TRL_ZERO_STD_METRIC

logger = logging.getLogger(__name__)

DEFAULT_RUN_DIR = "outputs/quickstart"
"""The run folder used when neither ``--run-dir`` nor ``SLMSQL_RUN_DIR`` is given."""

POLICY_NAMES: tuple[str, str] = ("sft", "grpo")
"""The two adapters compared, left to right."""

POLICY_LABELS: dict[str, str] = {"sft": "SFT", "grpo": "GRPO"}

STATUS_TEXT: dict[str, str] = {
    "matches_gold": "matches gold",
    "wrong": "wrong: it runs, but returns other rows than the gold",
    "error": "error",
    "timeout": "timeout",
    "too_large": "too many rows",
    "refused": "refused: not one read-only query",
    "no_sql": "no SQL in the answer",
    "ran": "ran (no gold to compare with)",
    "unscorable": "the gold query failed: cannot judge",
    "infra_failure": "the machine was too slow or a worker died: not judged, try again",
}
"""Every status a column can show, by key (the key is what ``/compare`` returns in its details)."""

_VERDICT_STATUS = {
    "correct": "matches_gold",
    "wrong": "wrong",
    "pred_error": "error",
    "pred_timeout": "timeout",
    "pred_too_large": "too_large",
    "pred_refused": "refused",
    "no_sql": "no_sql",
    "unscorable": "unscorable",
    "infra_failure": "infra_failure",
}
_EXEC_STATUS = {
    "ok": "ran",
    "error": "error",
    "timeout": "timeout",
    "too_large": "too_large",
    "refused": "refused",
}

# The card folder files the Space reads from a Hub adapter repo (slmsql card ships them with the GRPO adapter).
_HUB_PATTERNS = [
    "adapter_config.json",
    "adapter_model.safetensors",
    "run_summary.json",
    "README.md",
    "telemetry.jsonl",
    "grpo_attempt1/telemetry.jsonl",
    "grpo_attempt1/run_summary.json",
    "eval/eval_results.json",
    "eval/predictions/*.jsonl",
]
_MISSING_RUN_HINT = (
    "run `make quickstart` (it writes outputs/quickstart), point --run-dir or SLMSQL_RUN_DIR at a run folder, "
    "or set SLMSQL_BASE_MODEL, SLMSQL_SFT_ADAPTER and SLMSQL_GRPO_ADAPTER (Hub ids or folders)"
)


# ----------------------------------------------------------------------------------------------------------
# Settings
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpaceSettings:
    """What the Space serves and under which limits.

    Args:
        run_dir (`str`, defaults to `"outputs/quickstart"`):
            A run folder (``world/``, ``base/``, ``sft/stage2/``, ``grpo/``, ``eval/``, ``card/``).
        base_model (`str`, *optional*):
            The base model (folder or Hub id) instead of ``<run_dir>/base``.
        sft_adapter (`str`, *optional*):
            The SFT adapter (folder or Hub id) instead of ``<run_dir>/sft/stage2``.
        grpo_adapter (`str`, *optional*):
            The GRPO adapter (folder or Hub id) instead of ``<run_dir>/grpo``. A Hub repo written by
            ``slmsql card`` / ``slmsql push`` also carries the telemetry, the evaluation and the card.
        world_dir (`str`, *optional*):
            The embedded world instead of ``<run_dir>/world``. With Hub models and no world, the world is built
            at startup (deterministic in ``world_seed``, about 15 s) into ``cache_dir``.
        world_seed (`int`, defaults to `0`):
            The seed of a world built at startup (the quickstart's).
        spider_dir (`str`, *optional*):
            A Spider-layout folder (``database/<db>/<db>.sqlite``, optionally ``dev.json``) whose databases
            are offered too, judged with Spider's test-suite rule.
        example_split (`str`, defaults to `"dev"`):
            The world split whose questions are offered as examples.
        max_new_tokens (`int`, *optional*):
            Most tokens per answer; ``None`` uses the evaluation's setting, else 256.
        timeout_s (`float`, defaults to `10.0`):
            Sandbox deadline per query.
        max_rows (`int`, defaults to `10000`):
            Rows a query may return before it counts as too large.
        display_rows (`int`, defaults to `50`):
            Rows shown per result table.
        max_question_chars (`int`, defaults to `500`):
            Longest question accepted.
        concurrency (`int`, defaults to `2`):
            Comparisons running at once (the queue holds the others; generation itself is serialized).
        queue_size (`int`, defaults to `64`):
            Requests the queue holds before it turns new ones away.
        device (`str`, *optional*):
            ``cpu`` or ``cuda``; defaults to CUDA when available.
        dtype (`str`, defaults to `"auto"`):
            Weights dtype: ``auto``, ``float32``, ``bfloat16`` or ``float16``.
        sandbox_workers (`int`, defaults to `2`):
            Sandbox worker processes.
        cache_dir (`str`, *optional*):
            Where a world built at startup goes (default ``~/.cache/slmsql-hub``).

    Example:

    ```python
    >>> from space_backend import SpaceSettings
    >>> SpaceSettings().run_dir
    'outputs/quickstart'
    >>> SpaceSettings(max_question_chars=0)
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: max_question_chars must be a positive integer, got 0

    ```
    """

    run_dir: str = DEFAULT_RUN_DIR
    base_model: str | None = None
    sft_adapter: str | None = None
    grpo_adapter: str | None = None
    world_dir: str | None = None
    world_seed: int = 0
    spider_dir: str | None = None
    example_split: str = "dev"
    max_new_tokens: int | None = None
    timeout_s: float = 10.0
    max_rows: int = 10_000
    display_rows: int = 50
    max_question_chars: int = 500
    concurrency: int = 2
    queue_size: int = 64
    device: str | None = None
    dtype: str = "auto"
    sandbox_workers: int = 2
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        for name in (
            "max_rows",
            "display_rows",
            "max_question_chars",
            "concurrency",
            "queue_size",
            "sandbox_workers",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{name} must be a positive integer, got {value!r}")
        if self.max_new_tokens is not None and (
            not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1
        ):
            raise UsageError(f"max_new_tokens must be a positive integer, got {self.max_new_tokens!r}")
        if not isinstance(self.timeout_s, (int, float)) or not self.timeout_s > 0:
            raise UsageError(f"timeout_s must be > 0 seconds, got {self.timeout_s!r}")
        if self.dtype not in ("auto", "float32", "bfloat16", "float16"):
            raise UsageError(f"dtype must be auto, float32, bfloat16 or float16, got {self.dtype!r}")

    @property
    def hub_models(self) -> bool:
        """Whether a model or adapter is set explicitly (the real Space sets Hub ids)."""
        return any((self.base_model, self.sft_adapter, self.grpo_adapter))


# ----------------------------------------------------------------------------------------------------------
# The run's files
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Database:
    """One database the page offers.

    Args:
        key (`str`): ``<source>/<db_id>``, the value the ``/compare`` endpoint takes.
        db_id (`str`): the database name.
        source (`str`): ``world`` or ``spider``.
        path (`Path`): the SQLite file.
        mode (`str`): how answers are judged: ``bird`` (set equality) for the world, ``spider`` for Spider.
    """

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
    """An example question with its gold SQL.

    Args:
        question_id (`str`): the benchmark's id.
        question (`str`): the question.
        gold_sql (`str`): the gold query.
        difficulty (`str`): the benchmark's difficulty or hardness label (may be empty).
        evidence (`str`): external knowledge given with the question (may be empty).
    """

    question_id: str
    question: str
    gold_sql: str
    difficulty: str = ""
    evidence: str = ""


@dataclass(frozen=True)
class PolicySpec:
    """One adapter: where it is, and the prompt settings it was trained with.

    Args:
        name (`str`): ``sft`` or ``grpo``.
        adapter (`str`): the adapter folder.
        source (`str`): where it came from, as configured (a folder or a Hub id).
        prompt: its :class:`~slmsql_hub.prompts.PromptConfig`.
    """

    name: str
    adapter: str
    source: str
    prompt: Any

    @property
    def label(self) -> str:
        return POLICY_LABELS.get(self.name, self.name)


@dataclass
class SpaceData:
    """Everything the page shows besides live answers; what could not be found is in ``problems``.

    Args:
        databases (`dict[str, Database]`): by key, in display order.
        examples (`dict[str, list[Example]]`): example questions per database key.
        base_model (`str`, *optional*): the base model (folder or Hub id); ``None`` when unavailable.
        policies (`dict[str, PolicySpec]`): both adapters; empty when unavailable.
        eval_results (`dict`, *optional*): ``eval_results.json``.
        eval_dir (`Path`, *optional*): the folder holding it (``predictions/`` is relative to it).
        attempts (`dict[str, list[dict]]`): GRPO telemetry records per attempt label, attempt #1 first.
        adapter_updates (`dict[str, dict]`): per attempt label, ``adapter_update`` of its ``run_summary.json``.
        card_text (`str`, *optional*): the model card (``README.md``).
        max_new_tokens (`int`): the answer length limit used.
        problems (`list[str]`): one sentence per missing piece, with its fix.
        sources (`dict[str, str]`): what was loaded from where, for the About tab.
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
    max_new_tokens: int = 256
    problems: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)


def _looks_like_hub_id(ref: str) -> bool:
    return (
        bool(re.fullmatch(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*", ref))
        and not Path(ref).expanduser().exists()
    )


def _fetch(ref: str, problems: list[str], what: str) -> Path | None:
    """A local folder for ``ref``: the folder itself, or a snapshot of the Hub repo (adapter + card files)."""
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


def _read_json(path: Path, problems: list[str]) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        problems.append(f"{path} is not valid JSON ({err}); rerun the step that writes it")
        return None
    if not isinstance(data, dict):
        problems.append(f"{path} does not hold a JSON object; rerun the step that writes it")
        return None
    return data


def _world_databases(
    world: Path, split: str, problems: list[str]
) -> tuple[list[Database], dict[str, list[Example]]]:
    from slmsql_hub.data.benchmarks import load_world

    manifest = _read_json(world / "world.json", problems)
    if manifest is None:
        return [], {}
    databases = []
    for db_id in manifest.get("databases", []):
        path = world / "databases" / db_id / f"{db_id}.sqlite"
        if path.is_file():
            databases.append(Database(f"world/{db_id}", db_id, "world", path.resolve(), "bird"))
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
    from slmsql_hub.data.benchmarks import load_spider

    db_dir = root / "database" if (root / "database").is_dir() else root / "databases"
    databases = [
        Database(
            f"spider/{folder.name}",
            folder.name,
            "spider",
            (folder / f"{folder.name}.sqlite").resolve(),
            "spider",
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


def _telemetry(
    folders: Sequence[Path], problems: list[str]
) -> tuple[dict[str, list[dict]], dict[str, dict]]:
    """GRPO telemetry per attempt (a run's ``grpo_attempt1/`` and ``grpo/``, or a card's top-level file), and the
    ``adapter_update`` of the ``run_summary.json`` beside each."""
    from slmsql_hub.training.telemetry import read_telemetry

    found: dict[str, Path] = {}
    for folder in folders:
        first = folder / "grpo_attempt1" / "telemetry.jsonl"
        shipped = next(
            (p for p in (folder / "grpo" / "telemetry.jsonl", folder / "telemetry.jsonl") if p.is_file()),
            None,
        )
        if first.is_file() and "attempt #1" not in found:
            found["attempt #1"] = first
        if shipped is not None and "shipped" not in found:
            found["shipped"] = shipped
    if "shipped" in found:
        found["attempt #2" if "attempt #1" in found else "GRPO"] = found.pop("shipped")
    attempts, updates = {}, {}
    for label, path in found.items():
        records = read_telemetry(path)
        if not records:
            continue
        attempts[label] = records
        summary_file = path.with_name("run_summary.json")
        summary = _read_json(summary_file, problems) if summary_file.is_file() else None
        if isinstance((summary or {}).get("adapter_update"), dict):
            updates[label] = summary["adapter_update"]
    return attempts, updates


def _build_world(settings: SpaceSettings) -> Path:
    from slmsql_hub.world import build_world

    cache = Path(settings.cache_dir or Path.home() / ".cache" / "slmsql-hub").expanduser()
    out = cache / f"world-seed{settings.world_seed}"
    logger.info("building the embedded world (seed %d) into %s", settings.world_seed, out)
    build_world(out, seed=settings.world_seed)
    return out


def load_space_data(settings: SpaceSettings) -> SpaceData:
    """Find everything the page shows. Nothing here raises for a missing piece: it becomes a problem message.

    Args:
        settings: the :class:`SpaceSettings`.

    Returns:
        `SpaceData`: databases, examples, the policy's location, evaluation, telemetry, card and problems.

    Example:

    ```python
    >>> from space_backend import SpaceSettings, load_space_data
    >>> data = load_space_data(SpaceSettings(run_dir="/nowhere/run"))
    >>> data.policies, data.problems[0].split(":")[0]
    ({}, 'No run folder at /nowhere/run')

    ```
    """
    from slmsql_hub.evaluation import resolve_prompt_config

    data = SpaceData()
    problems = data.problems
    run = Path(settings.run_dir).expanduser()
    run_exists = run.is_dir()
    if not run_exists and not settings.hub_models:
        message = f"No run folder at {run}: {_MISSING_RUN_HINT}."
        logger.error("%s", message)
        problems.append(message)
    logged = len(problems)

    # The policy: the base once, both adapters.
    base = settings.base_model or (str(run / "base") if run_exists else None)
    refs = {
        "sft": settings.sft_adapter or (str(run / "sft" / "stage2") if run_exists else None),
        "grpo": settings.grpo_adapter or (str(run / "grpo") if run_exists else None),
    }
    folders: dict[str, Path] = {}
    if base is not None and not settings.base_model and not Path(base).is_dir():
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
        data.sources["base model"] = base
        data.sources.update({f"{POLICY_LABELS[n]} adapter": str(refs[n]) for n in POLICY_NAMES})

    # Databases and examples.
    world = Path(settings.world_dir).expanduser() if settings.world_dir else run / "world"
    if not (world / "world.json").is_file() and settings.world_dir is None and settings.hub_models:
        try:
            world = _build_world(settings)
        except (UsageError, OSError) as err:  # an unwritable cache, a folder holding something else
            problems.append(
                f"could not build the embedded world: {err}; set SLMSQL_WORLD_DIR to a built world"
            )
    if (world / "world.json").is_file():
        databases, examples = _world_databases(world, settings.example_split, problems)
        data.databases.update((db.key, db) for db in databases)
        data.examples.update(examples)
        data.sources["world"] = str(world)
    elif run_exists or settings.world_dir:
        problems.append(f"no embedded world at {world}: build it with `slmsql world build --out {world}`")
    if settings.spider_dir:
        spider = Path(settings.spider_dir).expanduser()
        if spider.is_dir():
            databases, examples = _spider_databases(spider, problems)
            data.databases.update((db.key, db) for db in databases)
            data.examples.update(examples)
            data.sources["Spider databases"] = str(spider)
        else:
            problems.append(f"the Spider folder {spider} does not exist (SLMSQL_SPIDER_DIR / --spider-dir)")

    # Evaluation, telemetry and the card: the run folder's, else the card folder's (a Hub GRPO repo is one).
    roots = [
        p
        for p in (run if run_exists else None, run / "card" if run_exists else None, folders.get("grpo"))
        if p
    ]
    eval_file = next(
        (r / "eval" / "eval_results.json" for r in roots if (r / "eval" / "eval_results.json").is_file()),
        None,
    )
    if eval_file is not None:
        data.eval_results = _read_json(eval_file, problems)
        data.eval_dir = eval_file.parent
        data.sources["evaluation"] = str(eval_file)
    data.attempts, data.adapter_updates = _telemetry(roots, problems)
    card = next(
        (r / "README.md" for r in (run / "card", folders.get("grpo")) if r and (r / "README.md").is_file()),
        None,
    )
    if card is not None:
        data.card_text = card.read_text(encoding="utf-8")
        data.sources["model card"] = str(card)

    configured = (data.eval_results or {}).get("config", {}).get("max_new_tokens")
    data.max_new_tokens = settings.max_new_tokens or (
        configured if isinstance(configured, int) and configured > 0 else 256
    )
    for message in problems[logged:]:
        logger.warning("%s", message)
    return data


# ----------------------------------------------------------------------------------------------------------
# Evaluation and card views
# ----------------------------------------------------------------------------------------------------------


def _points(value: Any, signed: bool = True) -> str:
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return "n/a"
    text = f"{100 * value:+.1f}" if signed else f"{100 * value:.1f}"
    return text.replace("-", "−")


def eval_table(eval_results: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """One row per benchmark: both policies' EX, ΔEX with its 95% CI, McNemar's p, discordant pairs, verdict.

    Args:
        eval_results: ``eval_results.json`` (``None`` gives no rows).

    Returns:
        `list[dict]`: display strings keyed by column name.

    Example:

    ```python
    >>> from space_backend import eval_table
    >>> results = {"benchmarks": {"world_dev": {"n": 250, "n_scorable": 250, "mode": "bird",
    ...     "policies": {"sft": {"ex": 0.612}, "grpo": {"ex": 0.62}},
    ...     "comparison": {"delta_ex": 0.008, "ci95": [-0.024, 0.04], "mcnemar_p": 0.81,
    ...                    "discordant": {"a_only": 9, "b_only": 11}, "n": 250, "verdict": "no significant difference"}}}}
    >>> row = eval_table(results)[0]
    >>> row["SFT EX"], row["GRPO EX"], row["ΔEX (points)"], row["95% CI (points)"], row["McNemar p"]
    ('61.2', '62.0', '+0.8', '[−2.4, +4.0]', '0.81')

    ```
    """
    rows = []
    for key, bench in ((eval_results or {}).get("benchmarks") or {}).items():
        comparison = bench.get("comparison") or {}
        policies = bench.get("policies") or {}
        ci = comparison.get("ci95") or [None, None]
        p = comparison.get("mcnemar_p")
        discordant = comparison.get("discordant") or {}
        rows.append(
            {
                "Benchmark": key,
                "Mode": str(bench.get("mode", "")),
                "n": str(comparison.get("n", bench.get("n_scorable", bench.get("n", "")))),
                "SFT EX": _points((policies.get("sft") or {}).get("ex"), signed=False),
                "GRPO EX": _points((policies.get("grpo") or {}).get("ex"), signed=False),
                "ΔEX (points)": _points(comparison.get("delta_ex")),
                "95% CI (points)": f"[{_points(ci[0])}, {_points(ci[1])}]",
                "McNemar p": "n/a" if not isinstance(p, (int, float)) else f"{p:.2f}",
                "SFT-only / GRPO-only": f"{discordant.get('a_only', 'n/a')} / {discordant.get('b_only', 'n/a')}",
                "Verdict": str(comparison.get("verdict", "")),
            }
        )
    return rows


DISAGREEMENT_FILTERS: dict[str, str] = {
    "all": "every question where exactly one policy is correct",
    "sft_only": "SFT correct, GRPO not",
    "grpo_only": "GRPO correct, SFT not",
}


def disagreements(
    eval_results: Mapping[str, Any] | None, eval_dir: Path | None, benchmark: str, which: str = "all"
) -> list[dict[str, Any]]:
    """The questions of one benchmark where SFT and GRPO disagree, from ``eval/predictions/<benchmark>.jsonl``.

    A disagreement is a scorable question exactly one of the two policies answers correctly.

    Args:
        eval_results: ``eval_results.json``.
        eval_dir: the folder holding it.
        benchmark: the benchmark key (``world_dev``).
        which: ``all``, ``sft_only`` or ``grpo_only`` (see :data:`DISAGREEMENT_FILTERS`).

    Returns:
        `list[dict]`: the prediction records, in file order.

    Raises:
        UsageError: an unknown benchmark or filter, or a missing predictions file.

    Example:

    ```python
    >>> import json, pathlib, tempfile
    >>> from space_backend import disagreements
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> (folder / "predictions").mkdir()
    >>> lines = [{"question_id": "q1", "sft_correct": 1, "grpo_correct": 0},
    ...          {"question_id": "q2", "sft_correct": 1, "grpo_correct": 1},
    ...          {"question_id": "q3", "sft_correct": None, "grpo_correct": 1}]
    >>> _ = (folder / "predictions" / "world_dev.jsonl").write_text("".join(json.dumps(x) + "\\n" for x in lines))
    >>> results = {"benchmarks": {"world_dev": {"predictions_file": "predictions/world_dev.jsonl"}}}
    >>> [r["question_id"] for r in disagreements(results, folder, "world_dev")]
    ['q1']

    ```
    """
    benchmarks = (eval_results or {}).get("benchmarks") or {}
    if benchmark not in benchmarks:
        raise UsageError(f"no benchmark {benchmark!r} in the evaluation; choose one of {sorted(benchmarks)}")
    if which not in DISAGREEMENT_FILTERS:
        raise UsageError(f"unknown filter {which!r}; choose one of {sorted(DISAGREEMENT_FILTERS)}")
    relative = benchmarks[benchmark].get("predictions_file") or f"predictions/{benchmark}.jsonl"
    path = Path(eval_dir or ".") / relative
    if not path.is_file():
        raise UsageError(f"the predictions of {benchmark} are missing ({path}); rerun `slmsql eval`")
    records = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            record = json.loads(line)
            sft, grpo = record.get("sft_correct"), record.get("grpo_correct")
            if sft is None or grpo is None or sft == grpo:
                continue
            if which == "all" or (which == "sft_only") == bool(sft):
                records.append(record)
    return records


def card_summary(card_text: str | None) -> str | None:
    """The model card's summary: its TL;DR block and its Results section (front matter left out).

    Args:
        card_text: the card's ``README.md``.

    Returns:
        `str` or `None`: Markdown; ``None`` without a card.

    Example:

    ```python
    >>> from space_backend import card_summary
    >>> card = "---\\nlicense: mit\\n---\\n# m\\n\\nIntro.\\n\\n> **TL;DR — no change.** Details.\\n\\n## Results\\n\\n| a |\\n\\n## More\\n"
    >>> print(card_summary(card))
    > **TL;DR — no change.** Details.
    <BLANKLINE>
    ## Results
    <BLANKLINE>
    | a |

    ```
    """
    if not card_text:
        return None
    text = card_text
    if text.startswith("---"):
        end = text.find("\n---", 3)
        text = text[end + 4 :] if end != -1 else text
    lines = text.strip().splitlines()
    parts: list[str] = []
    start = next((i for i, line in enumerate(lines) if line.lstrip("> ").startswith("**TL;DR")), None)
    if start is not None:
        block = []
        for line in lines[start:]:
            if not line.startswith(">"):
                break
            block.append(line)
        parts.append("\n".join(block))
    else:
        paragraph = []
        for line in lines:
            if line.startswith("#") or (not line.strip() and paragraph):
                if paragraph:
                    break
                continue
            if line.strip():
                paragraph.append(line)
        if paragraph:
            parts.append("\n".join(paragraph))
    results = next((i for i, line in enumerate(lines) if line.strip() == "## Results"), None)
    if results is not None:
        section = [lines[results]]
        for line in lines[results + 1 :]:
            if line.startswith("## "):
                break
            section.append(line)
        parts.append("\n".join(section).strip())
    return "\n\n".join(parts) if parts else None


# ----------------------------------------------------------------------------------------------------------
# Comparing the two policies
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """One policy's answer to the question, executed (and judged when there is a gold).

    Args:
        policy (`str`): ``sft`` or ``grpo``.
        output (`str`): the raw completion.
        sql (`str`, *optional*): the SQL extracted from it.
        status (`str`): a key of :data:`STATUS_TEXT`.
        result: the :class:`~slmsql_hub.sql.ExecResult` of ``sql`` (``None`` without SQL).
        latency_s (`float`): seconds spent generating.
        num_tokens (`int`): tokens generated.
        finished (`bool`): whether the model ended its turn (``False``: cut at the token limit).
        error (`str`, *optional*): the execution error.
    """

    policy: str
    output: str
    sql: str | None
    status: str
    result: Any
    latency_s: float
    num_tokens: int
    finished: bool
    error: str | None = None

    @property
    def status_text(self) -> str:
        return STATUS_TEXT[self.status]

    def to_dict(self) -> dict[str, Any]:
        result = self.result
        return {
            "policy": self.policy,
            "status": self.status,
            "status_text": self.status_text,
            "sql": self.sql,
            "output": self.output,
            "latency_s": round(self.latency_s, 4),
            "num_tokens": self.num_tokens,
            "finished": self.finished,
            "rows": None if result is None or not result.ok else len(result.rows),
            "error": self.error,
        }


@dataclass(frozen=True)
class Comparison:
    """Both policies' answers to one question, and the gold's result when the question is an example.

    Args:
        database (`Database`): where the queries ran.
        question (`str`): the question asked.
        gold_sql (`str`, *optional*): the gold query (``None`` for a typed question).
        gold: the gold's :class:`~slmsql_hub.sql.ExecResult` (``None`` without a gold).
        answers (`dict[str, Answer]`): by policy name, SFT first.
    """

    database: Database
    question: str
    gold_sql: str | None
    gold: Any
    answers: dict[str, Answer]

    def to_dict(self) -> dict[str, Any]:
        gold = self.gold
        return {
            "database": self.database.key,
            "mode": self.database.mode,
            "question": self.question,
            "gold_sql": self.gold_sql,
            "gold_status": None if gold is None else gold.status.value,
            "gold_rows": None if gold is None or not gold.ok else len(gold.rows),
            "gold_error": None if gold is None else gold.error,
            **{name: answer.to_dict() for name, answer in self.answers.items()},
        }


def _normalize(question: str) -> str:
    return " ".join(question.split()).casefold()


class ComparisonSpace:
    """The Space's engine: one sandbox, one base model with two adapters, and :meth:`compare`.

    The policy is loaded on first use (or by :meth:`load`), once; generation is serialized with a lock because
    switching adapters changes the shared model. Close it (or use it as a context manager) to stop the sandbox
    and remove the plots it drew.

    Args:
        settings (`SpaceSettings`): the settings.
        data (`SpaceData`, *optional*): already loaded data; ``None`` runs :func:`load_space_data`.

    Example:

    ```python
    >>> from space_backend import ComparisonSpace, SpaceSettings
    >>> with ComparisonSpace(SpaceSettings(run_dir="/nowhere/run")) as space:
    ...     space.ready
    False

    ```
    """

    def __init__(self, settings: SpaceSettings, data: SpaceData | None = None) -> None:
        from slmsql_hub.sql import Limits, Sandbox

        self.settings = settings
        self.data = data if data is not None else load_space_data(settings)
        self.sandbox = Sandbox(
            Limits(timeout_s=float(settings.timeout_s), max_rows=settings.max_rows),
            workers=settings.sandbox_workers,
        )
        self._load_lock = threading.Lock()
        self._generate_lock = threading.Lock()
        self._policy: tuple[Any, Any] | None = None
        self._examples = {
            key: {_normalize(example.question): example for example in examples}
            for key, examples in self.data.examples.items()
        }
        self._plot_dir: Path | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        """Whether both adapters and the base were found (answers can be generated)."""
        return bool(self.data.policies) and self.data.base_model is not None

    def load(self) -> tuple[Any, Any]:
        """Load the base model once with both adapters; later calls return the same ``(model, tokenizer)``.

        Raises:
            UsageError: the policy is not available (the message says what is missing and how to fix it).
        """
        if not self.ready:
            reasons = "; ".join(self.data.problems) or "the base model or an adapter is missing"
            raise UsageError(f"the models are not available: {reasons}")
        with self._load_lock:
            if self._policy is None:
                from slmsql_hub.generation import load_policy

                started = time.perf_counter()
                self._policy = load_policy(
                    self.data.base_model,
                    adapters={name: spec.adapter for name, spec in self.data.policies.items()},
                    dtype=None if self.settings.dtype == "auto" else self.settings.dtype,
                    device=self.settings.device,
                )
                logger.info(
                    "loaded the base model and both adapters in %.1f s", time.perf_counter() - started
                )
            return self._policy

    def preload(self) -> bool:
        """Load the policy now (at startup) when it is available; a failure becomes a problem for the page.

        Returns:
            `bool`: whether the model and both adapters are loaded.
        """
        if not self.ready:
            return False
        try:
            self.load()
        except (
            UsageError,
            OSError,
            ValueError,
            RuntimeError,
        ) as err:  # bad weights, missing files, torch errors
            message = f"the models could not be loaded: {type(err).__name__}: {err}"
            logger.error(message)
            self.data.problems.append(message)
            return False
        return True

    def close(self) -> None:
        """Stop the sandbox's workers and delete the plots drawn for the page."""
        self.sandbox.close()
        if self._plot_dir is not None:
            shutil.rmtree(self._plot_dir, ignore_errors=True)
            self._plot_dir = None

    def __enter__(self) -> ComparisonSpace:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- lookups -----------------------------------------------------------------------------------------------
    def database(self, key: str) -> Database:
        """The database with this key.

        Raises:
            UsageError: an unknown key (the message lists the known ones).
        """
        database = self.data.databases.get(key or "")
        if database is None:
            known = ", ".join(list(self.data.databases)[:8]) or "none: see the message at the top of the page"
            raise UsageError(f"unknown database {key!r}; choose one of {known}")
        return database

    def schema(self, key: str, sample_rows: int = 3) -> str:
        """The database's ``CREATE TABLE`` statements with sample rows (read through the sandbox)."""
        from slmsql_hub.sql.schema import schema_text

        return schema_text(self.database(key).path, self.sandbox, sample_rows=sample_rows)

    def examples(self, key: str) -> list[Example]:
        """The example questions of a database (possibly none)."""
        return list(self.data.examples.get(key, []))

    def find_example(self, key: str, question: str) -> Example | None:
        """The example whose question this is (same words, case and spacing ignored), else ``None``."""
        return self._examples.get(key, {}).get(_normalize(question))

    def check_question(self, question: str | None) -> str:
        """The question, stripped; raises a :class:`UsageError` naming the fix when it is empty or too long."""
        text = (question or "").strip()
        if not text:
            raise UsageError("type a question, or pick an example question")
        limit = self.settings.max_question_chars
        if len(text) > limit:
            raise UsageError(f"the question has {len(text)} characters; the limit is {limit}: shorten it")
        return text

    # -- the comparison ----------------------------------------------------------------------------------------
    def _generate(self, name: str, messages: list[dict[str, str]]) -> tuple[Any, float]:
        from slmsql_hub.generation import GenerationConfig, generate_completions, use_adapter

        model, tokenizer = self.load()
        config = GenerationConfig(max_new_tokens=self.data.max_new_tokens, batch_size=1)
        with self._generate_lock:
            started = time.perf_counter()
            with use_adapter(model, name):
                completion = generate_completions(model, tokenizer, [messages], config, progress=False)[0][0]
            return completion, time.perf_counter() - started

    def compare(self, key: str, question: str) -> Comparison:
        """Ask both adapters the question about database ``key``; run and judge what they write.

        When the question is one of the database's examples its gold SQL runs too and each answer is judged
        against it (the benchmark's own rule: set equality for the world, Spider's test-suite rule for Spider).
        A typed question has no gold: each answer is only run.

        Args:
            key: the database key (``world/library``).
            question: the question.

        Returns:
            `Comparison`: both answers with their SQL, result, status, latency and token count; the gold.

        Raises:
            UsageError: an unknown database, an empty or over-long question, or models that are not available.
        """
        from slmsql_hub.sql import Judge, extract_sql

        if not self.ready:
            self.load()  # raises the UsageError that says what is missing
        database = self.database(key)
        question = self.check_question(question)
        self.load()
        example = self.find_example(key, question)
        generated = {}
        for name, spec in self.data.policies.items():
            schema = spec.prompt.schema(database.path, self.sandbox)
            messages = spec.prompt.messages(question, schema, example.evidence if example else "")
            generated[name] = self._generate(name, messages)
        names = list(generated)
        outputs = [generated[name][0].text for name in names]
        sqls = [extract_sql(text) for text in outputs]
        # What each query returns, as written (the judge may rewrite queries, e.g. Spider drops DISTINCT).
        runs = self.sandbox.execute_many(
            [(database.path, sql) for sql in sqls if sql is not None]
            + ([(database.path, example.gold_sql)] if example else [])
        )
        results = iter(runs)
        shown = [next(results) if sql is not None else None for sql in sqls]
        gold = next(results) if example else None
        if example is not None:
            judge = Judge(sandbox=self.sandbox, mode=database.mode)
            judgements = judge.judge_many(
                outputs, [example.gold_sql] * len(names), [database.path] * len(names)
            )
            statuses = [_VERDICT_STATUS[j.verdict.value] for j in judgements]
        else:
            statuses = [
                "no_sql" if r is None else "infra_failure" if r.infra else _EXEC_STATUS[r.status.value] for r in shown
            ]
        answers = {}
        for name, text, sql, result, status in zip(names, outputs, sqls, shown, statuses):
            completion, latency = generated[name]
            answers[name] = Answer(
                policy=name,
                output=text,
                sql=sql,
                status=status,
                result=result,
                latency_s=latency,
                num_tokens=completion.num_tokens,
                finished=completion.finished,
                error=None if result is None or result.ok else result.error,
            )
        comparison = Comparison(database, question, example.gold_sql if example else None, gold, answers)
        logger.info(
            "compare %s %r: %s",
            key,
            question[:80],
            ", ".join(
                f"{name} {answer.status} ({answer.latency_s:.2f} s)" for name, answer in answers.items()
            ),
        )
        return comparison

    # -- telemetry ---------------------------------------------------------------------------------------------
    def telemetry_plots(self) -> list[tuple[str, str]]:
        """Draw the GRPO telemetry plots (one line per attempt) and return ``(png_path, title)`` pairs.

        Drawn once, into a temporary folder removed by :meth:`close`; no telemetry gives no plots.
        """
        from slmsql_hub.plots import TELEMETRY_PLOTS, logged_metric, plot_metric

        if not self.data.attempts:
            return []
        if self._plot_dir is None:
            self._plot_dir = Path(tempfile.mkdtemp(prefix="slmsql-space-plots-"))
        plots = []
        for stem, (metric, title, ylabel) in TELEMETRY_PLOTS.items():
            path = self._plot_dir / f"{stem}.png"
            if not path.is_file():
                key = logged_metric(self.data.attempts, metric)
                if key is None:
                    continue
                plot_metric(self.data.attempts, key, path, title=title, ylabel=ylabel)
            plots.append((str(path), title))
        return plots

    def telemetry_table(self) -> list[dict[str, str]]:
        """Per attempt: steps logged, the mean of the headline metrics (``n/a`` when not logged) and how far the
        adapter moved (``adapter_update.relative_norm`` of its ``run_summary.json``)."""
        from slmsql_hub.card import scientific
        from slmsql_hub.plots import logged_metric
        from slmsql_hub.training.telemetry import summarize_telemetry

        rows = []
        for label, records in self.data.attempts.items():
            summary = summarize_telemetry(records)
            means = summary["mean"]

            def fmt(name: str, means: dict = means) -> str:
                value = means.get(name)
                return "n/a" if value is None else f"{value:.3g}"

            rows.append(
                {
                    "Attempt": label,
                    "Steps logged": str(summary["steps_logged"]),
                    "Mean reward": fmt("reward"),
                    "Zero-variance groups": fmt(
                        logged_metric({label: records}, EXACT_ZERO_STD_METRIC) or TRL_ZERO_STD_METRIC
                    ),
                    "Reward std": fmt("reward_std"),
                    "Grad norm": fmt("grad_norm"),
                    "Completion length": fmt("completions/mean_length"),
                    "Adapter update ‖ΔW‖/‖W‖": scientific(
                        self.data.adapter_updates.get(label, {}).get("relative_norm")
                    ),
                }
            )
        return rows


def env_settings(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """:class:`SpaceSettings` fields from ``SLMSQL_*`` environment variables (only those that are set).

    Variables: ``SLMSQL_RUN_DIR``, ``SLMSQL_BASE_MODEL``, ``SLMSQL_SFT_ADAPTER``, ``SLMSQL_GRPO_ADAPTER``,
    ``SLMSQL_WORLD_DIR``, ``SLMSQL_WORLD_SEED``, ``SLMSQL_SPIDER_DIR``, ``SLMSQL_EXAMPLE_SPLIT``,
    ``SLMSQL_MAX_NEW_TOKENS``, ``SLMSQL_TIMEOUT_S``, ``SLMSQL_MAX_QUESTION_CHARS``, ``SLMSQL_CONCURRENCY``,
    ``SLMSQL_QUEUE_SIZE``, ``SLMSQL_DEVICE``, ``SLMSQL_DTYPE``, ``SLMSQL_CACHE_DIR``.

    Raises:
        UsageError: a number that does not parse.

    Example:

    ```python
    >>> from space_backend import env_settings
    >>> env_settings({"SLMSQL_RUN_DIR": "runs/a", "SLMSQL_CONCURRENCY": "3", "HOME": "/root"})
    {'run_dir': 'runs/a', 'concurrency': 3}

    ```
    """
    environ = os.environ if environ is None else environ
    kinds: dict[str, type] = {
        "run_dir": str,
        "base_model": str,
        "sft_adapter": str,
        "grpo_adapter": str,
        "world_dir": str,
        "world_seed": int,
        "spider_dir": str,
        "example_split": str,
        "max_new_tokens": int,
        "timeout_s": float,
        "max_question_chars": int,
        "concurrency": int,
        "queue_size": int,
        "device": str,
        "dtype": str,
        "cache_dir": str,
    }
    values: dict[str, Any] = {}
    for name, kind in kinds.items():
        variable = f"SLMSQL_{name.upper()}"
        raw = environ.get(variable)
        if raw is None or not raw.strip():
            continue
        try:
            values[name] = kind(raw.strip())
        except ValueError:
            raise UsageError(f"{variable}={raw!r} is not a valid {kind.__name__}") from None
    return values
