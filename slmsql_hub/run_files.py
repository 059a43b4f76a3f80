"""A finished run's folder, read: what ``slmsql card`` (and anything else that reports on a run) is made of.

:func:`load_run` reads the layout ``slmsql quickstart`` writes — ``grpo/`` and ``grpo_attempt1/``
(``run_summary.json``, ``config.yaml``, ``telemetry.jsonl``), ``eval/eval_results.json``, ``filter/``,
``base/`` and ``sft/stage1|2/``, ``world/world.json`` — into a :class:`RunFiles`, and says in one line which
command writes a file that is missing or broken. It reads JSON and YAML only (no ``transformers``).
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

SHIPPED_ATTEMPT = "grpo"
"""The run's GRPO folder whose adapter the card ships (attempt #2, trained on the pass-rate band)."""

ATTEMPT_FOLDERS: dict[str, int] = {"grpo_attempt1": 1, SHIPPED_ATTEMPT: 2}
"""GRPO attempt folders of a run and their numbers in the study."""


@dataclass
class Attempt:
    """One GRPO attempt of a run: its folder and files.

    Args:
        name: the folder name (``grpo`` or ``grpo_attempt1``).
        number: the attempt's number in the study (1: mastered data, 2: the pass-rate band).
        folder: the folder.
        summary: its ``run_summary.json``.
        config: its ``config.yaml`` (the resolved recipe; empty when missing).
        records: its ``telemetry.jsonl`` training records.
    """

    name: str
    number: int
    folder: Path
    summary: dict[str, Any]
    config: dict[str, Any]
    records: list[dict[str, Any]]

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
class RunFiles:
    """Everything the card reads from a run folder (see :func:`load_run`).

    Args:
        root: the run folder.
        recorded_root: the run folder as its files name it (e.g. ``outputs/quickstart``): the parent of the
            GRPO run's ``output_dir``.
        eval_results: ``eval/eval_results.json``.
        attempts: the GRPO attempts, attempt #1 first.
        filter_report: ``filter/filter_report.json`` (``None`` without a filter).
        filter_config: the filter's settings (``filter/filter_config.json``'s ``config``).
        stages: the base and SFT stages found (``base``, ``sft_stage1``, ``sft_stage2``).
        world: ``world/world.json`` (``None`` when the run has no world).
    """

    root: Path
    recorded_root: PurePosixPath
    eval_results: dict[str, Any]
    attempts: list[Attempt]
    filter_report: dict[str, Any] | None = None
    filter_config: dict[str, Any] | None = None
    stages: dict[str, Stage] = field(default_factory=dict)
    world: dict[str, Any] | None = None

    @property
    def shipped(self) -> Attempt:
        """The attempt whose adapter ships (``grpo/``)."""
        return next(a for a in self.attempts if a.shipped)

    def local(self, recorded: str | os.PathLike) -> Path:
        """A path as the run's files record it, mapped into this run folder when it lies under the recorded
        root (``outputs/quickstart/base`` -> ``RUN/base``), else as it is.

        Example:

        ```python
        >>> from pathlib import Path, PurePosixPath
        >>> from slmsql_hub.run_files import RunFiles
        >>> run = RunFiles(Path("/data/run"), PurePosixPath("outputs/quickstart"), {}, [])
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
    """The JSON object in ``path``; a missing file, bad JSON or a non-object is one :class:`UsageError` ending in
    ``fix`` (what to run to write the file again)."""
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
    """Write ``text`` to ``path`` so that a reader (or a resumed run after a kill) sees the old file or the whole
    new one, never a part: write a sibling, fsync it, rename it over ``path``.

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
    """The records of a JSON-lines file, skipping a last line cut short by a killed run (as
    :func:`slmsql_hub.training.telemetry.read_telemetry` does, without importing ``transformers``).

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


def _load_attempt(root: Path, name: str, number: int) -> Attempt | None:
    folder = root / name
    if not (folder / "run_summary.json").is_file():
        return None
    summary = read_json_object(folder / "run_summary.json", f"rerun `slmsql train grpo` for {folder}")
    telemetry = folder / str(summary.get("telemetry_file") or "telemetry.jsonl")
    if not telemetry.is_file():
        raise UsageError(
            f"{telemetry} not found: the card's mechanism section and plots need the GRPO telemetry"
        )
    records = [r for r in read_jsonl(telemetry) if r.get("kind", "train") == "train"]
    return Attempt(name, number, folder, summary, read_yaml_mapping(folder / "config.yaml"), records)


def load_run(run_dir: str | os.PathLike) -> RunFiles:
    """Read the files of a run folder that the card is made of.

    Args:
        run_dir: the run folder (``outputs/quickstart``), laid out as ``slmsql quickstart`` writes it.

    Returns:
        A :class:`RunFiles`.

    Raises:
        UsageError: the folder, ``grpo/run_summary.json``, its telemetry or ``eval/eval_results.json`` is
            missing or unreadable, or the evaluation lacks a policy comparison; the message names the command
            that writes the missing file.

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
    root = Path(run_dir).expanduser()
    if not root.is_dir():
        raise UsageError(f"run folder not found: {root}; pass the folder `slmsql quickstart --out` wrote")
    attempts = [a for name, n in ATTEMPT_FOLDERS.items() if (a := _load_attempt(root, name, n)) is not None]
    if not any(a.shipped for a in attempts):
        raise UsageError(
            f"no GRPO run in {root}: {SHIPPED_ATTEMPT}/run_summary.json is missing; train it first "
            f"(`slmsql train grpo --config recipes/world/grpo_band.yaml --output_dir {root / SHIPPED_ATTEMPT}`)"
        )
    eval_results = read_json_object(
        root / "eval" / "eval_results.json",
        f"evaluate the policies first (`slmsql eval --config ...`) into {root / 'eval'}",
    )
    benchmarks = eval_results.get("benchmarks")
    if not isinstance(benchmarks, dict) or not benchmarks:
        raise UsageError(f"{root / 'eval' / 'eval_results.json'} has no benchmarks; rerun `slmsql eval`")
    for key, entry in benchmarks.items():
        if "comparison" not in entry or not {"sft", "grpo"} <= set(entry.get("policies", {})):
            raise UsageError(
                f"benchmark {key} of {root / 'eval' / 'eval_results.json'} lacks the sft/grpo comparison; evaluate "
                "both adapters (`slmsql eval` with policies sft and grpo)"
            )
    shipped = next(a for a in attempts if a.shipped)
    output_dir = str(shipped.summary.get("output_dir") or f"{root}/{SHIPPED_ATTEMPT}")
    run = RunFiles(root, PurePosixPath(output_dir).parent, eval_results, attempts)
    filter_dir = root / "filter"
    if (filter_dir / "filter_report.json").is_file():
        run.filter_report = read_json_object(filter_dir / "filter_report.json", "rerun `slmsql filter`")
        if (filter_dir / "filter_config.json").is_file():
            run.filter_config = read_json_object(
                filter_dir / "filter_config.json", "rerun `slmsql filter`"
            ).get("config")
    for name, folder in (
        ("base", root / "base"),
        ("sft_stage1", root / "sft" / "stage1"),
        ("sft_stage2", root / "sft" / "stage2"),
    ):
        if (folder / "run_summary.json").is_file():
            summary = read_json_object(folder / "run_summary.json", f"rerun the stage that wrote {folder}")
            run.stages[name] = Stage(name, folder, summary, read_yaml_mapping(folder / "config.yaml"))
    if (root / "world" / "world.json").is_file():
        run.world = read_json_object(
            root / "world" / "world.json", "rebuild the world (`slmsql world build`)"
        )
    return run
