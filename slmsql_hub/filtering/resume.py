"""The resume log (``results.jsonl``) and the settings fingerprint a resumed run must match."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..data.config import BenchmarkArguments
from ..data.prompts import PROMPT_TEXT_FIELDS, PromptConfig
from ..errors import UsageError
from ..generation.config import FILTER_KEYS
from ..recipes import config_to_dict
from ..run.files import read_json_object, read_jsonl, write_atomic
from ..run.layout import BAND_DIR
from .config import REPORT_FILE, RESULTS_FILE, STATE_FILE, FilterConfig

logger = logging.getLogger(__name__)

_ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")


# Fields that cannot change what a question's samples and verdicts are: a resume may change them freely.
_FREE_FIELDS = frozenset(
    {
        "pass_rate_low",
        "pass_rate_high",
        "batch_size",
        "skip_missing_db",
        "output_dir",
        "overwrite",
        "device",
        "num_threads",
        "sandbox_workers",
        "timeout_s",  # deprecated: moved into sql_timeout_s
    }
)


def read_results(path: str | os.PathLike) -> dict[str, dict]:
    """Read a results log, repairing a torn last line (a run killed mid-write) by truncating it away.

    A missing file reads as empty. Returns ``{question_id: row}`` (a later row for the same id wins); raises
    :class:`UsageError` when a complete line is not a JSON object with a ``question_id``.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> from slmsql_hub.filtering import read_results
    >>> log = pathlib.Path(tempfile.mkdtemp()) / "results.jsonl"
    >>> _ = log.write_text('{"question_id": "q1", "n_correct": 3}\\n{"question_id": "q2", "n_cor')
    >>> sorted(read_results(log)), log.read_text()
    (['q1'], '{"question_id": "q1", "n_correct": 3}\\n')

    ```
    """
    path = Path(path)
    if not path.is_file():
        return {}
    data = path.read_bytes()
    # Rows are written whole, newline-terminated: anything after the last newline is a write cut short.
    end = data.rfind(b"\n") + 1
    if end < len(data):
        logger.warning(
            "%s: dropping a torn last line (%d bytes) left by an interrupted run", path, len(data) - end
        )
        with path.open("r+b") as handle:
            handle.truncate(end)
            handle.flush()
            os.fsync(handle.fileno())
    records = read_jsonl(path)  # the torn tail is cut: a line it skips is damage, not a kill
    lines = sum(1 for raw in data[:end].split(b"\n") if raw.strip())
    if len(records) != lines or any("question_id" not in row for row in records):
        raise UsageError(
            f"{path} has lines that are not result rows; fix or delete the file, or set `overwrite: true` "
            "to start over"
        )
    return {str(row["question_id"]): row for row in records}


def _append_rows(handle: Any, rows: Sequence[dict]) -> None:
    """Append rows as JSON lines and make them durable (flush + fsync) before returning."""
    handle.write("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    handle.flush()
    os.fsync(handle.fileno())


def _adapter_digest(adapter: str | None) -> str | None:
    """sha256 of a local adapter's weights (so retraining it in place is caught on resume); None otherwise."""
    if adapter is None:
        return None
    folder = Path(adapter).expanduser()
    for name in _ADAPTER_WEIGHTS:
        weights = folder / name
        if weights.is_file():
            digest = hashlib.sha256()
            with weights.open("rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
            return digest.hexdigest()
    return None


def _fingerprint(
    config: FilterConfig,
    prompt_config: PromptConfig,
    adapter_sha256: str | None,
    sft_record_sha256: str | None = None,
) -> dict:
    """The settings that decide a question's samples and verdicts, and which questions the pool may hold (the SFT
    record left out of it): a resume must match them all, so it never mixes pools."""
    shared = {f.name for f in dataclasses.fields(BenchmarkArguments)}
    values = {
        f.name: getattr(config, f.name)
        for f in dataclasses.fields(config)
        if f.name not in _FREE_FIELDS and f.name not in shared
    }
    if values.get("backend") == "transformers":
        del values[
            "backend"
        ]  # runs from before the vLLM backend have no such key, and sampled with transformers
    if values.get("key_namespace") == FILTER_KEYS:
        del values["key_namespace"]  # nor a key namespace: they drew the filter's keys
    # The pool under the names earlier runs recorded, so they still resume (its limit stays free).
    values["benchmark"] = config.pool.name
    values["data_root"] = str(Path(config.pool_root).expanduser().resolve())
    values["split"] = config.pool.split
    values["adapter_sha256"] = adapter_sha256
    values["sft_record_sha256"] = sft_record_sha256
    default = PromptConfig().record()
    for name, value in prompt_config.record().items():  # prompt text as the default: as runs before it recorded
        if name in PROMPT_TEXT_FIELDS and value == default[name]:
            values.pop(f"prompt_{name}", None)
        else:
            values[f"prompt_{name}"] = value
    return values


def _check_or_write_state(out: Path, fingerprint: dict, config: FilterConfig, have_results: bool) -> None:
    state_file = out / STATE_FILE
    if have_results:
        if not state_file.is_file():
            raise UsageError(
                f"{out / RESULTS_FILE} exists without its {STATE_FILE}, so its settings are unknown; choose "
                "another output_dir or set `overwrite: true` to start over"
            )
        fix = "choose another output_dir or set `overwrite: true` to start over"
        stored = read_json_object(state_file, fix).get("fingerprint", {})
        changed = [
            f"{key}: {stored.get(key)!r} there, {value!r} now"
            for key, value in fingerprint.items()
            if stored.get(key) != value
        ]
        if changed:
            raise UsageError(
                f"{out} holds results produced with other settings ({'; '.join(changed)}); rerun with the same "
                "settings to resume, choose another output_dir, or set `overwrite: true` to start over"
            )
        return
    payload = {"fingerprint": fingerprint, "config": config_to_dict(config)}
    write_atomic(state_file, json.dumps(payload, indent=2, default=str) + "\n")


def _clear_outputs(out: Path) -> None:
    import shutil

    for name in (RESULTS_FILE, STATE_FILE, REPORT_FILE):
        (out / name).unlink(missing_ok=True)
    if (out / BAND_DIR).is_dir():
        shutil.rmtree(out / BAND_DIR)
