"""Artifacts checked before use and before shipping (issue #34): a broken one is one
:class:`~slmsql_hub.errors.UsageError` naming the file, raised before any model or data loads.

What is checked is cheap and needs no torch: a safetensors file's 8-byte header length, its JSON header and a file
size equal to the header's end plus the largest data offset (a truncated copy fails); a JSON file parses; a SQLite
database passes ``PRAGMA quick_check`` on a read-only connection and has the tables its world expects; a model
folder (an adapter or a base) has its config and complete weights.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import struct
import urllib.parse
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import UsageError

ADAPTER_CONFIG = "adapter_config.json"
_ADAPTER_WEIGHTS = "adapter_model.safetensors"
BASE_CONFIG = "config.json"
_SAFETENSORS_INDEX = "model.safetensors.index.json"
_HEADER_MAX = 100_000_000  # safetensors' own limit on the JSON header


def check_safetensors(path: str | os.PathLike, fix: str = "rerun the stage that wrote it") -> None:
    """Check a safetensors file's header and size without loading a tensor; :class:`UsageError` naming the file.

    Example:

    ```python
    >>> import tempfile, numpy
    >>> from safetensors.numpy import save_file
    >>> path = Path(tempfile.mkdtemp()) / "w.safetensors"
    >>> save_file({"w": numpy.zeros(4, dtype=numpy.float32)}, str(path))
    >>> check_safetensors(path)
    >>> _ = path.write_bytes(path.read_bytes()[:-3])
    >>> check_safetensors(path)
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: .../w.safetensors is truncated or corrupt (77 bytes, its header says 80); ...

    ```
    """
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path} not found; {fix}")
    size = path.stat().st_size
    with path.open("rb") as handle:
        head = handle.read(8)
        length = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        raw = handle.read(length) if 0 < length <= min(_HEADER_MAX, size - 8) else b""
    try:
        header = json.loads(raw.decode("utf-8")) if raw else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        header = None
    if not isinstance(header, dict):
        raise UsageError(f"{path} is not a safetensors file (no valid header); {fix}")
    ends = [
        entry["data_offsets"][1]
        for name, entry in header.items()
        if name != "__metadata__" and isinstance(entry, dict) and len(entry.get("data_offsets") or ()) == 2
    ]
    expected = 8 + length + max(ends, default=0)
    if size != expected:
        raise UsageError(f"{path} is truncated or corrupt ({size} bytes, its header says {expected}); {fix}")


def check_json(path: str | os.PathLike, fix: str = "rerun the stage that wrote it") -> Any:
    """The parsed JSON in ``path``; missing, unreadable or bad JSON is one :class:`UsageError` naming the file.

    Example:

    ```python
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "config.json"
    >>> _ = path.write_text('{"a": 1')
    >>> check_json(path, "fix it")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: .../config.json is not valid JSON (Expecting ',' delimiter: line 1 column 8 (char 7)); fix it

    ```
    """
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path} not found; {fix}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not UTF-8 text; {fix}") from None
    except json.JSONDecodeError as err:
        raise UsageError(f"{path} is not valid JSON ({err}); {fix}") from None


def check_sqlite(path: str | os.PathLike, tables: Iterable[str] = (), fix: str = "rebuild it") -> None:
    """``PRAGMA quick_check`` on a read-only connection, then the ``tables`` expected; :class:`UsageError` naming
    the file otherwise. Nothing is written (``mode=ro``)."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path} not found; {fix}")
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            verdict = [row[0] for row in conn.execute("PRAGMA quick_check")]
            have = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as err:
        raise UsageError(f"{path} is not a readable SQLite database ({err}); {fix}") from None
    if verdict != ["ok"]:
        raise UsageError(f"{path} fails PRAGMA quick_check ({verdict[0]}); {fix}")
    missing = sorted(set(tables) - have)
    if missing:
        raise UsageError(f"{path} lacks the table(s) {', '.join(missing)}; {fix}")


def _base_weights(folder: Path, fix: str) -> list[Path]:
    index = folder / _SAFETENSORS_INDEX
    if index.is_file():
        data = check_json(index, fix)
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict):
            raise UsageError(f"{index} has no weight_map; {fix}")
        return [folder / name for name in sorted(set(weight_map.values()))]
    return sorted(folder.glob("*.safetensors"))


def check_model_folder(
    folder: str | os.PathLike, kind: str, fix: str = "rerun the stage that wrote it"
) -> None:
    """Check a local model folder before anything loads it: ``kind="adapter"`` needs a JSON ``adapter_config.json``
    and a whole ``adapter_model.safetensors`` (or a legacy ``adapter_model.bin``); ``kind="base"`` a JSON
    ``config.json`` and whole safetensors weights when it has any; either a parsable ``tokenizer.json`` if present.
    A folder that is not a directory is left to the caller (it may name a Hub repository).

    Example:

    ```python
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "adapter_config.json").write_text("{}")
    >>> check_model_folder(folder, "base")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: ... is a PEFT adapter (adapter_config.json, no config.json); pass it as an adapter (adapter_path, --sft_adapter/--grpo_adapter) and name its base model here

    ```
    """
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        return
    if (folder / "tokenizer.json").is_file():
        check_json(folder / "tokenizer.json", fix)
    if kind == "adapter":
        check_json(folder / ADAPTER_CONFIG, fix)
        if not (folder / _ADAPTER_WEIGHTS).is_file() and (folder / "adapter_model.bin").is_file():
            return
        check_safetensors(folder / _ADAPTER_WEIGHTS, fix)
        return
    if not (folder / BASE_CONFIG).is_file() and (folder / ADAPTER_CONFIG).is_file():
        raise UsageError(
            f"{folder} is a PEFT adapter (adapter_config.json, no config.json); pass it as an adapter "
            "(adapter_path, --sft_adapter/--grpo_adapter) and name its base model here"
        )
    check_json(folder / BASE_CONFIG, fix)
    for weights in _base_weights(folder, fix):
        check_safetensors(weights, fix)


def load_saved_dataset(folder: str | os.PathLike, fix: str = "rerun the stage that wrote it") -> Any:
    """``datasets.load_from_disk(folder)`` held in memory, so that a later ``map`` or ``filter`` writes no
    ``cache-*.arrow`` into the input folder (reading never writes); a broken ``state.json`` or a cut arrow file
    is one :class:`UsageError` naming the folder.

    Example:

    ```python
    >>> import tempfile, datasets
    >>> folder = Path(tempfile.mkdtemp())
    >>> datasets.Dataset.from_dict({"x": [1, 2]}).save_to_disk(str(folder))
    >>> rows = load_saved_dataset(folder).map(lambda row: {"y": row["x"] * 2})
    >>> list(rows["y"]), sorted(p.name for p in folder.glob("cache-*"))
    ([2, 4], [])

    ```
    """
    import datasets

    path = Path(folder).expanduser()
    try:
        return datasets.load_from_disk(str(path), keep_in_memory=True)
    except FileNotFoundError as err:
        raise UsageError(f"{path} is not a dataset saved with save_to_disk ({err}); {fix}") from None
    except (OSError, ValueError) as err:  # a cut arrow file, a broken state.json or dataset_info.json
        raise UsageError(f"{path} holds a broken dataset ({err}); {fix}") from None


def check_folder_to_write(path: str | os.PathLike, option: str = "output_dir") -> None:
    """A folder a command will write: refused when a file is there (checked before anything loads).

    Example:

    ```python
    >>> check_folder_to_write(__file__)
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: output_dir .../artifacts.py is a file; choose a folder

    ```
    """
    target = Path(path).expanduser()
    if target.exists() and not target.is_dir():
        raise UsageError(f"{option} {target} is a file; choose a folder")
