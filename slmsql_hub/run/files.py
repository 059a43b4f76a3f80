"""Reading and writing a run's files: JSON objects, YAML mappings and JSON lines, each failure one
:class:`~slmsql_hub.errors.UsageError`, and atomic writes a killed run cannot leave half-written."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from ..errors import UsageError

logger = logging.getLogger(__name__)


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


def write_atomic(path: Path, text: str, errors: str = "strict") -> None:
    """Write ``text`` to ``path`` through a fsynced sibling renamed over it: a reader (or a run resumed after a
    kill) sees the old file or the whole new one, and a failed write leaves no sibling behind. ``errors`` is the
    encoding's (``backslashreplace`` writes text that is not UTF-8 as its escape).

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
    try:
        with tmp.open("w", encoding="utf-8", errors=errors) as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSON-lines file, skipping a line cut short by a killed run (logged); bytes that are not
    UTF-8 are a :class:`UsageError` naming the file and line.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> from slmsql_hub.run.files import read_jsonl
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "telemetry.jsonl"
    >>> _ = path.write_text('{"step": 1}\\n{"step": 2}\\n{"step"')
    >>> read_jsonl(path)
    [{'step': 1}, {'step': 2}]

    ```
    """
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise UsageError(
            f"{path}, line {line}: not UTF-8 text (binary data); rerun the stage that wrote it"
        ) from None
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
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


def last_commit(path: str | os.PathLike) -> str | None:
    """The git commit that last changed ``path`` (a file of this package's checkout, absolute or relative to
    its root), ``None`` outside a git checkout (an installed wheel) or for a path git never saw.

    >>> last_commit("no/such/file") is None
    True
    """
    import subprocess

    root = Path(__file__).resolve().parents[2]
    try:
        done = subprocess.run(["git", "log", "-1", "--format=%H", "--", str(path)], cwd=root,
                              capture_output=True, text=True, check=True)  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.strip() or None
