"""Which databases each training stage of a run trained on, read from the run's own files.

The SFT question record (:mod:`slmsql_hub.data.sft_record`) names each SFT stage's databases; a GRPO run's
``run_summary.json`` names its prompts' databases (``data.database_names``). :func:`trained_databases` gathers
them into one small record, which ``slmsql push --what demo-space`` ships with the comparison Space as
:data:`TRAINED_DATABASES_FILE`, so that the Space can say of a question that no adapter trained on its database
(a held-out database is the finding, not a broken prompt)::

    {"format": "slmsql-trained-databases/1",
     "stages": {"sft/stage1": ["clinic", ...], "sft/stage2": [...], "grpo_attempt1": [...], "grpo": [...]},
     "adapters": {"sft": [...], "grpo": [...]}}

``adapters`` are what each served adapter saw over its lineage: SFT's stages, and the GRPO adapter's SFT
stages plus its own (it continues the SFT adapter).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ..errors import UsageError
from .sft_record import read_sft_record

logger = logging.getLogger(__name__)

TRAINED_DATABASES_FILE = "trained_databases.json"
FORMAT = "slmsql-trained-databases/1"


def trained_databases(run: Any) -> dict[str, Any] | None:
    """The record of a run as :func:`~slmsql_hub.run.read.read_run` read it, or ``None`` when the run does not
    say it all (a missing or broken record logs a warning): no SFT record naming every stage's databases (a run made before they were kept, an incomplete
    lineage) or no shipped GRPO run naming its databases.

    Example:

    ```python
    >>> import tempfile
    >>> from slmsql_hub.run.read import read_run
    >>> trained_databases(read_run(tempfile.mkdtemp())) is None
    True

    ```
    """
    stage = getattr(run, "stages", {}).get("sft_stage2")
    try:
        record = read_sft_record(stage.folder) if stage is not None else None
    except UsageError as err:  # the filter must stop on a broken record; the Space only loses its held-out line
        logger.warning("no trained-databases record: %s", err)
        return None
    if record is None or not record.complete or record.databases is None:
        return None
    stages: dict[str, list[str]] = {
        f"sft/stage{entry['stage']}": sorted(entry["databases"]) for entry in record.stages
    }
    grpo: list[str] | None = None
    for attempt in run.attempts:
        names = ((attempt.summary or {}).get("data") or {}).get("database_names")
        if isinstance(names, list):
            stages[attempt.name] = sorted(names)
            if attempt.shipped:
                grpo = stages[attempt.name]
    if grpo is None:
        return None
    return {
        "format": FORMAT,
        "stages": stages,
        "adapters": {"sft": record.databases, "grpo": sorted(set(record.databases) | set(grpo))},
    }


def _trained_databases_json(run: Any) -> bytes | None:
    """:func:`trained_databases` as the file's bytes (``None`` without a record)."""
    record = trained_databases(run)
    return None if record is None else (json.dumps(record, indent=2) + "\n").encode("utf-8")


def with_trained_databases(files: list[tuple[str, Any]], run: Any) -> list[tuple[str, Any]]:
    """A Space's ``(path_in_repo, content)`` files with :data:`TRAINED_DATABASES_FILE` of ``run`` among them
    (in place of one already there), sorted by path; unchanged when the run has no record.

    Example:

    ```python
    >>> import tempfile
    >>> from slmsql_hub.run.read import read_run
    >>> with_trained_databases([("app.py", b"")], read_run(tempfile.mkdtemp()))
    [('app.py', b'')]

    ```
    """
    record = _trained_databases_json(run)
    if record is None:
        return files
    kept = [(path, content) for path, content in files if path != TRAINED_DATABASES_FILE]
    return sorted([*kept, (TRAINED_DATABASES_FILE, record)], key=lambda pair: pair[0])


def read_trained_databases(text: str) -> dict[str, list[str]] | None:
    """The ``adapters`` of a record's JSON text (``None`` when it is not one).

    Example:

    ```python
    >>> read_trained_databases('{"format": "slmsql-trained-databases/1", "adapters": {"sft": ["a"], "grpo": ["a"]}}')
    {'sft': ['a'], 'grpo': ['a']}
    >>> read_trained_databases("{}") is None
    True

    ```
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    adapters = data.get("adapters") if isinstance(data, dict) and data.get("format") == FORMAT else None
    if not isinstance(adapters, dict) or not all(isinstance(v, list) for v in adapters.values()):
        return None
    return {name: [str(db) for db in dbs] for name, dbs in adapters.items()}
