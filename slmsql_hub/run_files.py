"""The run folder as a typed contract: :class:`RunLayout` names every path of a run, :func:`read_run` reads one.

``slmsql quickstart`` lays a run out as::

    world/            world.json, datasets/<split>/, databases/<db>/<db>.sqlite   (slmsql world build)
    base/             the tiny base model, run_summary.json, config.yaml          (slmsql train base)
    sft/stage1/ sft/stage2/   adapter, run_summary.json, config.yaml, sft_questions.json   (slmsql train sft)
    filter/           filter_report.json, filter_config.json, results.jsonl, band/ (slmsql filter)
    grpo/ grpo_attempt1/      adapter, run_summary.json, config.yaml, telemetry.jsonl      (slmsql train grpo)
    eval/             eval_results.json, predictions/<benchmark>.jsonl            (slmsql eval)
    card/             the model repo's folder (slmsql card), see :class:`CardLayout`
    push_dry_run/     plan.json and one folder per push target                    (slmsql push --dry-run)

Every writer and reader names these paths through :class:`RunLayout` (a run folder) or :class:`CardLayout` (the
card folder, also what a Hub model repo written by ``slmsql card`` holds), and reads them through one reader:
:func:`read_run` is tolerant (a run in progress reads as the stages it has; a malformed file is one
:class:`UsageError`); :func:`load_run` is the same reader plus the checks of a finished run that the model card
needs. It reads JSON and YAML only (no ``transformers``).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from .errors import UsageError

logger = logging.getLogger(__name__)

# File and folder names of a run, said once.
RUN_SUMMARY = "run_summary.json"
STAGE_CONFIG = "config.yaml"
TELEMETRY = "telemetry.jsonl"
SFT_QUESTIONS = "sft_questions.json"
WORLD_MANIFEST = "world.json"
FILTER_REPORT = "filter_report.json"
FILTER_STATE = "filter_config.json"
FILTER_RESULTS = "results.jsonl"
BAND_DIR = "band"
EVAL_RESULTS = "eval_results.json"
PREDICTIONS_DIR = "predictions"
CARD_README = "README.md"
PLAN_FILE = "plan.json"

SHIPPED_ATTEMPT = "grpo"  # the GRPO folder whose adapter the card ships (attempt #2, on the pass-rate band)
ATTEMPT_FOLDERS: dict[str, int] = {"grpo_attempt1": 1, SHIPPED_ATTEMPT: 2}  # folder -> attempt number


@dataclass(frozen=True)
class StageFolder:
    """One training stage's output folder and the files every stage writes there (``config.yaml`` is the
    resolved recipe; ``telemetry.jsonl`` is GRPO's, ``sft_questions.json`` SFT's).

    Example:

    ```python
    >>> from slmsql_hub.run_files import RunLayout
    >>> RunLayout("runs/q").sft_stage2.summary.as_posix()
    'runs/q/sft/stage2/run_summary.json'

    ```
    """

    path: Path

    @property
    def summary(self) -> Path:
        return self.path / RUN_SUMMARY

    @property
    def config(self) -> Path:
        return self.path / STAGE_CONFIG

    @property
    def telemetry(self) -> Path:
        return self.path / TELEMETRY

    @property
    def sft_questions(self) -> Path:
        return self.path / SFT_QUESTIONS

    def __fspath__(self) -> str:
        return os.fspath(self.path)


@dataclass(frozen=True)
class _Folder:
    """What a run folder and a card folder lay out alike below ``root``: ``filter/``, ``eval/``,
    ``grpo_attempt1/``; a subclass names ``grpo``, the shipped attempt."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def filter(self) -> Path:
        return self.root / "filter"

    @property
    def filter_report(self) -> Path:
        return self.filter / FILTER_REPORT

    @property
    def filter_state(self) -> Path:
        """``filter/filter_config.json``: the settings an interrupted filter resumes with."""
        return self.filter / FILTER_STATE

    @property
    def eval(self) -> Path:
        return self.root / "eval"

    @property
    def eval_results(self) -> Path:
        return self.eval / EVAL_RESULTS

    def predictions_file(self, benchmark: str) -> Path:
        """``eval/predictions/<benchmark>.jsonl``."""
        return self.eval / PREDICTIONS_DIR / f"{benchmark}.jsonl"

    @property
    def grpo_attempt1(self) -> StageFolder:
        """GRPO attempt #1 (unfiltered data, the mechanism's control)."""
        return StageFolder(self.root / "grpo_attempt1")

    @property
    def attempts(self) -> dict[str, StageFolder]:
        """The GRPO attempt folders by name, attempt #1 first."""
        return {"grpo_attempt1": self.grpo_attempt1, SHIPPED_ATTEMPT: self.grpo}


@dataclass(frozen=True)
class RunLayout(_Folder):
    """Every path of a run folder (the module docstring says what writes each).

    Example:

    ```python
    >>> from slmsql_hub.run_files import RunLayout
    >>> run = RunLayout("outputs/quickstart")
    >>> run.grpo.telemetry.as_posix(), run.band.as_posix(), run.eval_results.as_posix()
    ('outputs/quickstart/grpo/telemetry.jsonl', 'outputs/quickstart/filter/band', 'outputs/quickstart/eval/eval_results.json')

    ```
    """

    @property
    def world(self) -> Path:
        return self.root / "world"

    @property
    def world_manifest(self) -> Path:
        return self.world / WORLD_MANIFEST

    def world_split(self, split: str) -> Path:
        """``world/datasets/<split>`` (``foundation``, ``grounding``, ``rl_pool``, ``dev``, ``test``)."""
        return self.world / "datasets" / split

    @property
    def base(self) -> StageFolder:
        return StageFolder(self.root / "base")

    @property
    def sft_stage1(self) -> StageFolder:
        return StageFolder(self.root / "sft" / "stage1")

    @property
    def sft_stage2(self) -> StageFolder:
        return StageFolder(self.root / "sft" / "stage2")

    @property
    def grpo(self) -> StageFolder:
        """The shipped GRPO attempt (#2, on the band)."""
        return StageFolder(self.root / SHIPPED_ATTEMPT)

    @property
    def lineage(self) -> dict[str, StageFolder]:
        """The base and SFT stages by name (``base``, ``sft_stage1``, ``sft_stage2``)."""
        return {"base": self.base, "sft_stage1": self.sft_stage1, "sft_stage2": self.sft_stage2}

    @property
    def filter_results(self) -> Path:
        """``filter/results.jsonl``: per-question pass rates, appended as batches are judged."""
        return self.filter / FILTER_RESULTS

    @property
    def band(self) -> Path:
        """``filter/band``: the pass-rate band (a ``datasets`` folder), GRPO attempt #2's data."""
        return self.filter / BAND_DIR

    @property
    def card(self) -> CardLayout:
        return CardLayout(self.root / "card")

    @property
    def card_readme(self) -> Path:
        return self.card.readme

    @property
    def push_dry_run(self) -> Path:
        return self.root / "push_dry_run"

    @property
    def push_plan(self) -> Path:
        return self.push_dry_run / PLAN_FILE


@dataclass(frozen=True)
class CardLayout(_Folder):
    """The card folder (``RUN/card``, and a Hub model repo written by ``slmsql card``): the shipped GRPO
    attempt's files at the top, beside ``README.md``, ``eval/``, ``filter/``, ``base/``, ``grpo_attempt1/``.

    Example:

    ```python
    >>> from slmsql_hub.run_files import CardLayout
    >>> card = CardLayout("runs/q/card")
    >>> card.grpo.telemetry.as_posix(), card.readme.as_posix()
    ('runs/q/card/telemetry.jsonl', 'runs/q/card/README.md')

    ```
    """

    @property
    def readme(self) -> Path:
        return self.root / CARD_README

    @property
    def card_readme(self) -> Path:
        """The model card, named as :attr:`RunLayout.card_readme` names a run's."""
        return self.readme

    @property
    def grpo(self) -> StageFolder:
        """The shipped attempt: the card folder itself."""
        return StageFolder(self.root)

    @property
    def lineage(self) -> dict[str, StageFolder]:
        return {"base": StageFolder(self.root / "base")}

    @property
    def plots(self) -> Path:
        return self.root / "plots"

    @property
    def configs(self) -> Path:
        """``configs/``: each stage's recipe."""
        return self.root / "configs"

    @property
    def eval_result_files(self) -> Path:
        """``.eval_results/``: the Hub's per-benchmark result files."""
        return self.root / ".eval_results"


Layout = RunLayout | CardLayout


def layout_of(folder: str | os.PathLike) -> Layout:
    """The layout of ``folder``: a :class:`CardLayout` when a GRPO attempt's files or a card sit at its top
    (``run_summary.json``, ``telemetry.jsonl``, ``README.md``), else a :class:`RunLayout`.

    Example:

    ```python
    >>> import tempfile
    >>> from slmsql_hub.run_files import layout_of
    >>> type(layout_of(tempfile.mkdtemp())).__name__
    'RunLayout'

    ```
    """
    root = Path(folder)
    if any((root / name).is_file() for name in (RUN_SUMMARY, TELEMETRY, CARD_README)):
        return CardLayout(root)
    return RunLayout(root)


# ----------------------------------------------------------------------------------------------------------
# Reading a run
# ----------------------------------------------------------------------------------------------------------


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


@dataclass
class Run:
    """What a run folder (or a card folder) holds, as :func:`read_run` found it; a missing piece is ``None`` or
    absent. ``recorded_root`` is the run folder as its files name it (e.g. ``outputs/quickstart``: the parent of
    the shipped GRPO run's ``output_dir``); ``attempts`` run #1 first; ``filter_config`` is
    ``filter_config.json``'s ``config``; ``ablations`` the folder of the ablation report
    (:func:`~slmsql_hub.ablate.ship.find_report`: a card folder's shipped ``ablations/``, a run's study)."""

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
        >>> from slmsql_hub.run_files import Run
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


def read_json_object(path: Path, fix: str) -> dict[str, Any]:
    """The JSON object in ``path``; a missing file, bad JSON or a non-object is a :class:`UsageError` ending in
    ``fix``."""
    if not path.is_file():
        raise UsageError(f"{path} not found; {fix}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise UsageError(f"{path} is not valid JSON ({err}); {fix}") from err
    if not isinstance(data, dict):
        raise UsageError(f"{path} does not hold a JSON object; {fix}")
    return data


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """The mapping in a YAML file (``{}`` when the file is missing or holds no mapping); bad YAML is a
    :class:`UsageError`."""
    import yaml

    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise UsageError(f"{path} is not valid YAML ({err}); rerun the stage that wrote it") from err
    return data if isinstance(data, dict) else {}


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a fsynced sibling renamed over it: a reader (or a run resumed after a
    kill) sees the old file or the whole new one.

    Example:

    ```python
    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "report.json"
    >>> write_atomic(target, "{}\\n")
    >>> target.read_text()
    '{}\\n'

    ```
    """
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSON-lines file, skipping a line cut short by a killed run (logged).

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> from slmsql_hub.run_files import read_jsonl
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "telemetry.jsonl"
    >>> _ = path.write_text('{"step": 1}\\n{"step": 2}\\n{"step"')
    >>> read_jsonl(path)
    [{'step': 1}, {'step': 2}]

    ```
    """
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            logger.warning("%s: line %d is not complete JSON (a run killed mid-write); skipped", path, number)
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


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
    >>> from slmsql_hub.run_files import read_run
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
        if stage.summary.is_file():
            summary = read_json_object(stage.summary, f"rerun the stage that wrote {stage.path}")
            run.stages[name] = Stage(name, stage.path, summary, read_yaml_mapping(stage.config))
    if layout.card_readme.is_file():
        run.card_text = layout.card_readme.read_text(encoding="utf-8")
    if isinstance(layout, RunLayout) and layout.world_manifest.is_file():
        run.world = read_json_object(layout.world_manifest, "rebuild the world (`slmsql world build`)")
    from .ablate.ship import find_report  # it imports this module

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
    >>> from slmsql_hub.run_files import load_run
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
            f"(`slmsql train grpo --config recipes/world/grpo_band.yaml --output_dir {layout.grpo.path}`)"
        )
    for attempt in run.attempts:
        if attempt.telemetry_file is None:
            telemetry = attempt.folder / str(attempt.summary.get("telemetry_file") or TELEMETRY)
            raise UsageError(
                f"{telemetry} not found: the card's mechanism section and plots need the GRPO telemetry"
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
