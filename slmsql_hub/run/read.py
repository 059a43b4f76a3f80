"""Reading a run folder: :func:`read_run` is tolerant (a run in progress reads as the stages it has; a
malformed file is one :class:`~slmsql_hub.errors.UsageError`); :func:`load_run` is the same reader plus the
checks of a finished run that the model card needs. It reads JSON and YAML only (no ``transformers``)."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import UsageError
from .files import read_json_object, read_jsonl, read_yaml_mapping
from .layout import (
    ABLATIONS_DIR,
    ATTEMPT_FOLDERS,
    HUB_REF,
    REPORT_JSON,
    RUN_SUMMARY,
    SHIPPED_ATTEMPT,
    TELEMETRY,
    Layout,
    RunLayout,
    StageFolder,
    layout_of,
)

logger = logging.getLogger(__name__)


@dataclass
class Attempt:
    """One GRPO attempt of a run (``number`` 1: mastered data, 2: the pass-rate band); ``summary`` is ``None``
    while it trains, ``config`` ``{}`` when missing, ``telemetry_file`` ``None`` when there is none yet."""

    name: str
    number: int
    folder: Path
    summary: dict[str, Any] | None
    config: dict[str, Any]
    records: list[dict[str, Any]]
    telemetry_file: Path | None = None

    @property
    def label(self) -> str:
        """``attempt #N``."""
        return f"attempt #{self.number}"

    @property
    def shipped(self) -> bool:
        """Whether this attempt's adapter is the one the card ships."""
        return self.name == SHIPPED_ATTEMPT


@dataclass
class Stage:
    """A base or SFT stage of the lineage: its folder, ``run_summary.json`` and ``config.yaml``."""

    name: str
    folder: Path
    summary: dict[str, Any]
    config: dict[str, Any]


@dataclass(frozen=True)
class ModelRef:
    """What a later stage loads for a base or adapter stage: ``name`` (a Hub repo id, or the stage's folder) and
    the Hub ``revision`` (``None``: main, or a local folder); ``hub`` says which."""

    name: str
    revision: str | None = None
    hub: bool = False

    def as_record(self) -> dict[str, str | None]:
        """``hub.json``'s contents."""
        return {"repo_id": self.name, "revision": self.revision}


def model_ref(stage: StageFolder) -> ModelRef:
    """What loads ``stage``: the Hub repo its ``hub.json`` names (a stage taken from the Hub), else its folder.

    Example:

    ```python
    >>> import json, tempfile
    >>> from slmsql_hub.run.layout import RunLayout
    >>> from slmsql_hub.run.read import model_ref
    >>> run = RunLayout(tempfile.mkdtemp())
    >>> model_ref(run.base).hub
    False
    >>> run.base.path.mkdir()
    >>> _ = run.base.hub.write_text(json.dumps({"repo_id": "Qwen/Qwen2.5-Coder-1.5B-Instruct", "revision": "2e1f"}))
    >>> model_ref(run.base)
    ModelRef(name='Qwen/Qwen2.5-Coder-1.5B-Instruct', revision='2e1f', hub=True)

    ```
    """
    if not stage.hub.is_file():
        return ModelRef(str(stage.path))
    record = read_json_object(stage.hub, "rerun `slmsql quickstart`: it records a stage taken from the Hub")
    repo_id, revision = record.get("repo_id"), record.get("revision")
    if not isinstance(repo_id, str) or not repo_id or not isinstance(revision, (str, type(None))):
        raise UsageError(
            f'{stage.hub} must hold {{"repo_id": str, "revision": str or null}}; rerun the stage'
        )
    return ModelRef(repo_id, revision, hub=True)


@dataclass
class Run:
    """What a run folder (or a card folder) holds, as :func:`read_run` found it; a missing piece is ``None`` or
    absent. ``recorded_root`` is the run folder as its files name it (e.g. ``outputs/quickstart``: the parent of
    the shipped GRPO run's ``output_dir``); ``attempts`` run #1 first; ``filter_config`` is
    ``filter_config.json``'s ``config``; ``ablations`` the folder of the ablation report
    (:func:`~slmsql_hub.run.read.find_report`: a card folder's shipped ``ablations/``, a run's study);
    ``hub_stages`` the base and SFT stages taken from the Hub (their ``hub.json``), by name."""

    root: Path
    recorded_root: PurePosixPath
    eval_results: dict[str, Any] | None
    attempts: list[Attempt]
    filter_report: dict[str, Any] | None = None
    filter_config: dict[str, Any] | None = None
    stages: dict[str, Stage] = field(default_factory=dict)
    world: dict[str, Any] | None = None
    card_text: str | None = None
    layout: Layout | None = None
    ablations: Path | None = None
    hub_stages: dict[str, ModelRef] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.layout is None:
            self.layout = RunLayout(self.root)

    @property
    def shipped(self) -> Attempt:
        """The attempt whose adapter ships (``grpo/``)."""
        return next(a for a in self.attempts if a.shipped)

    @property
    def eval_dir(self) -> Path | None:
        """The folder of ``eval_results.json`` (``predictions/`` is relative to it); ``None`` without one."""
        return self.layout.eval if self.eval_results is not None else None

    def local(self, recorded: str | os.PathLike) -> Path:
        """A path as the run's files record it, mapped into this run folder when it lies under the recorded
        root (``outputs/quickstart/base`` -> ``RUN/base``), else as it is.

        Example:

        ```python
        >>> from pathlib import Path, PurePosixPath
        >>> from slmsql_hub.run.read import Run
        >>> run = Run(Path("/data/run"), PurePosixPath("outputs/quickstart"), {}, [])
        >>> run.local("outputs/quickstart/sft/stage2"), run.local("Qwen/Qwen2.5-Coder-1.5B-Instruct")
        (PosixPath('/data/run/sft/stage2'), PosixPath('Qwen/Qwen2.5-Coder-1.5B-Instruct'))

        ```
        """
        path = PurePosixPath(str(recorded))
        try:
            return self.root / path.relative_to(self.recorded_root)
        except ValueError:
            return Path(str(recorded))


def _read_attempt(stage: StageFolder, name: str, number: int) -> Attempt | None:
    summary = None
    if stage.summary.is_file():
        summary = read_json_object(stage.summary, f"rerun `slmsql train grpo` for {stage.path}")
    telemetry = stage.path / str((summary or {}).get("telemetry_file") or TELEMETRY)
    if summary is None and not telemetry.is_file():
        return None
    records = (
        [r for r in read_jsonl(telemetry) if r.get("kind", "train") == "train"] if telemetry.is_file() else []
    )
    return Attempt(
        name,
        number,
        stage.path,
        summary,
        read_yaml_mapping(stage.config),
        records,
        telemetry if telemetry.is_file() else None,
    )


def read_run(folder: str | os.PathLike) -> Run:
    """Read what a run folder (or a card folder, see :func:`layout_of`) holds, tolerating missing stages.

    A run in progress reads as the stages it has: an attempt with telemetry but no summary yet has
    ``summary=None``; no evaluation is ``eval_results=None``. A missing folder, or a file that is there but
    malformed (bad JSON or YAML, not an object), is one :class:`UsageError` naming the command that writes it.

    Example:

    ```python
    >>> import tempfile
    >>> from slmsql_hub.run.read import read_run
    >>> run = read_run(tempfile.mkdtemp())
    >>> run.attempts, run.eval_results, run.stages
    ([], None, {})

    ```
    """
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise UsageError(f"run folder not found: {root}; pass the folder `slmsql quickstart --out` wrote")
    layout = layout_of(root)
    attempts = [
        attempt
        for name, stage in layout.attempts.items()
        if (attempt := _read_attempt(stage, name, ATTEMPT_FOLDERS[name])) is not None
    ]
    shipped = next((a for a in attempts if a.shipped and a.summary is not None), None)
    output_dir = (shipped.summary if shipped else {}).get("output_dir")
    recorded_root = PurePosixPath(str(output_dir)).parent if output_dir else PurePosixPath(root.as_posix())
    run = Run(root, recorded_root, None, attempts, layout=layout)
    if layout.eval_results.is_file():
        run.eval_results = read_json_object(layout.eval_results, "rerun `slmsql eval`")
    if layout.filter_report.is_file():
        run.filter_report = read_json_object(layout.filter_report, "rerun `slmsql filter`")
        if layout.filter_state.is_file():
            run.filter_config = read_json_object(layout.filter_state, "rerun `slmsql filter`").get("config")
    for name, stage in layout.lineage.items():
        if (stage.path / HUB_REF).is_file():
            run.hub_stages[name] = model_ref(stage)
        if stage.summary.is_file():
            summary = read_json_object(stage.summary, f"rerun the stage that wrote {stage.path}")
            run.stages[name] = Stage(name, stage.path, summary, read_yaml_mapping(stage.config))
    if layout.card_readme.is_file():
        run.card_text = layout.card_readme.read_text(encoding="utf-8")
    if isinstance(layout, RunLayout) and layout.world_manifest.is_file():
        run.world = read_json_object(layout.world_manifest, "rebuild the world (`slmsql world build`)")
    run.ablations = find_report(root)
    return run


def load_run(run_dir: str | os.PathLike) -> Run:
    """Read a finished run folder: :func:`read_run`, plus the checks the model card needs.

    Only attempts with a ``run_summary.json`` are kept; the shipped one must be there with its telemetry, and
    ``eval/eval_results.json`` must compare both policies on every benchmark, else a :class:`UsageError` names
    the command that writes the missing file.

    Example:

    ```python
    >>> import tempfile
    >>> from slmsql_hub.run.read import load_run
    >>> load_run(tempfile.mkdtemp())
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: no GRPO run in ...: grpo/run_summary.json is missing; train it first ...

    ```
    """
    run = read_run(run_dir)
    root, layout = run.root, RunLayout(run.root)
    run.attempts = [a for a in run.attempts if a.summary is not None]
    if not isinstance(run.layout, RunLayout) or not any(a.shipped for a in run.attempts):
        raise UsageError(
            f"no GRPO run in {root}: {SHIPPED_ATTEMPT}/{RUN_SUMMARY} is missing; train it first "
            f"(`slmsql quickstart --recipes RECIPES --out {root}` resumes the study's chain; RECIPES: the study's "
            "recipe folder, e.g. recipes/world or recipes/qwen2.5-coder-1.5b)"
        )
    for attempt in run.attempts:
        if attempt.telemetry_file is None:
            telemetry = attempt.folder / str(attempt.summary.get("telemetry_file") or TELEMETRY)
            raise UsageError(
                f"{telemetry} not found: the card's mechanism section and plots need the GRPO telemetry"
            )
        if not attempt.records:
            raise UsageError(
                f"{attempt.telemetry_file} holds no training step: the card's mechanism section and plots need "
                "the GRPO telemetry; rerun or resume the training"
            )
    if run.eval_results is None:
        read_json_object(
            layout.eval_results,
            f"evaluate the policies first (`slmsql eval --config ...`) into {layout.eval}",
        )
    benchmarks = run.eval_results.get("benchmarks")
    if not isinstance(benchmarks, dict) or not benchmarks:
        raise UsageError(f"{layout.eval_results} has no benchmarks; rerun `slmsql eval`")
    for key, entry in benchmarks.items():
        if "comparison" not in entry or not {"sft", "grpo"} <= set(entry.get("policies", {})):
            raise UsageError(
                f"benchmark {key} of {layout.eval_results} lacks the sft/grpo comparison; evaluate "
                "both adapters (`slmsql eval` with policies sft and grpo)"
            )
    return run


def find_report(run_dir: str | Path) -> Path | None:
    """The folder of RUN's ablation report (see the module docstring), or ``None``."""
    run = Path(run_dir)
    inside = run / ABLATIONS_DIR
    if (inside / REPORT_JSON).is_file():
        return inside
    beside = run.parent / ABLATIONS_DIR
    if (beside / REPORT_JSON).is_file():
        try:
            report = json.loads((beside / REPORT_JSON).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            logger.warning(
                "%s is not a readable report (%s); it is not RUN's study", beside / REPORT_JSON, err
            )
            return None
        recorded = ((report.get("config") if isinstance(report, dict) else None) or {}).get("run_dir")
        if recorded and Path(recorded).resolve() == run.resolve():
            return beside
    return None
