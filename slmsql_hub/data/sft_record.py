"""Which questions an SFT adapter was trained on, so that a "held-out" pool can leave them out.

Every SFT run writes :data:`_RECORD_FILE` next to its adapter and names it in ``run_summary.json``
(``sft_questions``). A question is identified by :func:`question_key`: 16 hex digits of sha256 over its
``db_id``, question and gold SQL (whitespace collapsed). The key survives a reload and does not depend on the
loader (a ``question_id`` does: ``synsql-7`` is a position in one file). Stage 2 continues stage 1's adapter,
so its record is the union of stage 1's record and its own questions: the adapter's lineage. A stage that
continues an adapter without a record writes ``complete: false`` (its lineage has questions nobody recorded).

The pass-rate filter (:mod:`slmsql_hub.filtering`) removes the recorded questions from its split BEFORE it
draws its seeded subset and reports ``excluded_sft`` (how many it removed) and ``sft_overlap`` (how many of its
pool are still SFT questions: 0, or ``null`` when the adapter's record is missing or incomplete).

Why exclusion and not another seed: :func:`~slmsql_hub.data.benchmarks.seeded_subset`'s first picks do not
depend on how many are drawn, so two tools drawing from one split with one seed often take nested subsets (the
filter's 1,367 SynSQL questions were the first 1,367 of SFT stage 1's 100,000); independent seeds still share
about k1 * k2 / n questions (all of them when SFT takes a whole shard). Only leaving out what SFT trained on
makes the pool held out, and drawing after the exclusion keeps the pool at its ``limit``.

Each stage entry also names the databases its questions are on (``databases``, sorted ``db_id``s; absent in
records written before it was kept): the comparison Space says from it that a question's database was never
trained on.

The file (about 1.9 MB for 100,000 questions)::

    {"format": "slmsql-sft-questions/1", "key": "...", "complete": true,
     "stages": [{"stage": 1, "output_dir": "...", "questions": 3000, "databases": ["clinic", ...]}, ...],
     "unrecorded": [], "count": 4200, "keys": ["00a1...", ...]}
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..run.layout import RUN_SUMMARY, SFT_QUESTIONS

logger = logging.getLogger(__name__)

_RECORD_FILE = SFT_QUESTIONS  # in the SFT adapter folder (named in run/layout.py)
_SUMMARY_FIELD = "sft_questions"  # run_summary.json's entry naming the record
FORMAT = "slmsql-sft-questions/1"
_KEY_RULE = "sha256(db_id \\x1f question \\x1f gold_sql, whitespace collapsed)[:16]"


def question_key(db_id: str, question: str, gold_sql: str) -> str:
    """A question's identity across loaders and reloads: 16 hex digits of sha256 over its three fields.

    Example:

    ```python
    >>> from slmsql_hub.data.sft_record import question_key
    >>> len(question_key("pets", "How many pets?", "SELECT count(*) FROM pet"))
    16
    >>> question_key("pets", "How many  pets? ", "SELECT count(*)\\nFROM pet") == question_key(
    ...     "pets", "How many pets?", "SELECT count(*) FROM pet")
    True

    ```
    """
    text = "\x1f".join(" ".join(str(part).split()) for part in (db_id, question, gold_sql))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def row_databases(columns: dict[str, Sequence]) -> list[str]:
    """The ``db_id`` of every row of a column mapping (a ``datasets.Dataset`` works), else the stem of its
    ``db_path``, else ``""``.

    Example:

    ```python
    >>> from slmsql_hub.data.sft_record import row_databases
    >>> row_databases({"question": ["Q?", "R?"], "db_path": ["/w/databases/pets/pets.sqlite", None]})
    ['pets', '']

    ```
    """
    names = set(columns.column_names) if hasattr(columns, "column_names") else set(columns)
    if "db_id" in names:
        return [str(d or "") for d in columns["db_id"]]
    if "db_path" in names:
        return [Path(str(p)).stem if p else "" for p in columns["db_path"]]
    return [""] * len(columns["question"])


def row_keys(columns: dict[str, Sequence]) -> list[str]:
    """:func:`question_key` of every row of a column mapping (a ``datasets.Dataset`` works), its ``db_id`` as
    :func:`row_databases` finds it.

    Example:

    ```python
    >>> from slmsql_hub.data.sft_record import question_key, row_keys
    >>> rows = {"question": ["Q?"], "gold_sql": ["SELECT 1"], "db_path": ["/w/databases/pets/pets.sqlite"]}
    >>> row_keys(rows) == [question_key("pets", "Q?", "SELECT 1")]
    True

    ```
    """
    questions, golds = list(columns["question"]), list(columns["gold_sql"])
    return [question_key(d, q, g) for d, q, g in zip(row_databases(columns), questions, golds)]


@dataclass
class SFTRecord:
    """The questions (:func:`question_key` ``keys``) an adapter's SFT lineage trained on; ``complete`` is False
    when some stage continued an adapter (listed in ``unrecorded``) that had no record."""

    keys: frozenset[str]
    complete: bool = True
    stages: list[dict] = field(default_factory=list)
    unrecorded: list[str] = field(default_factory=list)
    path: Path | None = None

    @property
    def sha256(self) -> str:
        """A digest of the keys and ``complete`` (the filter's resume fingerprint holds it)."""
        digest = hashlib.sha256(f"{self.complete}\n".encode())
        digest.update("\n".join(sorted(self.keys)).encode())
        return digest.hexdigest()

    @property
    def databases(self) -> list[str] | None:
        """The sorted ``db_id``s the lineage trained on; ``None`` when a stage did not record its databases."""
        if not self.stages or any("databases" not in stage for stage in self.stages):
            return None
        return sorted({db for stage in self.stages for db in stage["databases"]})

    def summary(self) -> dict:
        """What ``run_summary.json`` and ``filter_report.json`` say about the record."""
        return {
            "file": str(self.path) if self.path else None,
            "questions": len(self.keys),
            "complete": self.complete,
        }


def read_sft_record(adapter: str | os.PathLike | None) -> SFTRecord | None:
    """The record of a local adapter folder, as its ``run_summary.json`` names it; ``None`` for a Hub id or a
    folder without one. UsageError: the summary names a record file that is missing or not a record.

    Example:

    ```python
    >>> from slmsql_hub.data.sft_record import read_sft_record
    >>> read_sft_record("Anurich/slmsql-qwen2.5-coder-1.5b") is None
    True

    ```
    """
    if not adapter:
        return None
    summary_file = Path(adapter).expanduser() / RUN_SUMMARY
    if not summary_file.is_file():
        return None
    entry = json.loads(summary_file.read_text(encoding="utf-8")).get(_SUMMARY_FIELD)
    if not entry:
        return None
    path = summary_file.parent / str(entry.get("file") or _RECORD_FILE)
    fix = "restore it, or retrain the adapter to write it"
    if not path.is_file():
        raise UsageError(f"{summary_file} names the SFT question record {path}, which is missing; {fix}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        data = None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("keys"), list):
        raise UsageError(f"{path} is not an SFT question record ({FORMAT}); {fix}")
    return SFTRecord(
        keys=frozenset(data["keys"]),
        complete=bool(data.get("complete")),
        stages=list(data.get("stages") or []),
        unrecorded=list(data.get("unrecorded") or []),
        path=path,
    )


def write_sft_record(
    output_dir: str | os.PathLike,
    keys: Iterable[str],
    *,
    stage: int,
    continued: str | None = None,
    databases: Iterable[str] | None = None,
) -> SFTRecord:
    """Write and return the record of SFT stage ``stage``: its own ``keys`` (questions on ``databases``; ``None``
    leaves them unrecorded) plus the record of the adapter it ``continued`` (without one, the record is
    incomplete: a warning).

    Example:

    ```python
    >>> import tempfile
    >>> from slmsql_hub.data.sft_record import write_sft_record
    >>> one = tempfile.mkdtemp()
    >>> write_sft_record(one, ["a1", "b2"], stage=1, databases=["pets", "pets", "shop"]).databases
    ['pets', 'shop']
    >>> write_sft_record(tempfile.mkdtemp(), ["c3"], stage=2, continued="Org/hub-adapter").complete
    False
    >>> write_sft_record(tempfile.mkdtemp(), ["d4"], stage=1).databases is None  # not recorded: not "none"
    True

    ```
    """
    own = frozenset(keys)
    out = Path(output_dir)
    record = SFTRecord(keys=own, stages=[], path=out / _RECORD_FILE)
    if continued:
        parent = read_sft_record(continued)
        if parent is None:
            logger.warning(
                "the adapter %s has no SFT question record: this adapter's record lists stage %d's questions "
                "only and is marked incomplete, so a filter pool cannot be shown to be held out from it",
                continued,
                stage,
            )
            record.complete, record.unrecorded = False, [str(continued)]
        else:
            record.keys = own | parent.keys
            record.complete, record.stages = parent.complete, list(parent.stages)
            record.unrecorded = list(parent.unrecorded)
    entry = {"stage": stage, "output_dir": str(out), "questions": len(own)}
    if databases is not None:
        entry["databases"] = sorted(set(databases))
    record.stages.append(entry)
    _write(record, out)
    return record


def _write(record: SFTRecord, out: Path, **extra: str) -> None:
    payload = {
        "format": FORMAT,
        "key": _KEY_RULE,
        "complete": record.complete,
        "stages": record.stages,
        "unrecorded": record.unrecorded,
        **extra,
        "count": len(record.keys),
        "keys": sorted(record.keys),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / _RECORD_FILE).write_text(json.dumps(payload) + "\n", encoding="utf-8")


def carry_sft_record(parent: str | os.PathLike | None, output_dir: str | os.PathLike) -> SFTRecord | None:
    """Copy the record of the adapter ``parent`` (a GRPO run's SFT start) into ``output_dir`` with
    ``carried_from`` naming the parent, and return it; ``None`` (nothing written) when the parent has none.

    The copy is the SFT lineage's questions only, not the prompts GRPO trained on: filtering or sampling with
    the GRPO adapter then leaves out exactly the questions its SFT parent's would, so both draw the same pool
    and their answers pair question by question.

    Example:

    ```python
    >>> import json, pathlib, tempfile
    >>> from slmsql_hub.data.sft_record import carry_sft_record, read_sft_record, write_sft_record
    >>> sft, grpo = pathlib.Path(tempfile.mkdtemp()), pathlib.Path(tempfile.mkdtemp())
    >>> _ = write_sft_record(sft, ["a1", "b2"], stage=1)
    >>> _ = (sft / "run_summary.json").write_text(json.dumps({"sft_questions": {"file": "sft_questions.json"}}))
    >>> sorted(carry_sft_record(sft, grpo).keys)
    ['a1', 'b2']
    >>> carry_sft_record(grpo, tempfile.mkdtemp()) is None  # no run_summary.json names grpo's copy yet
    True

    ```
    """
    record = read_sft_record(parent)
    if record is None:
        return None
    out = Path(output_dir)
    carried = SFTRecord(
        keys=record.keys,
        complete=record.complete,
        stages=list(record.stages),
        unrecorded=list(record.unrecorded),
        path=out / _RECORD_FILE,
    )
    _write(carried, out, carried_from=str(parent))
    return carried


def report_fields(record: SFTRecord | None, adapter: str | None, pool: Sequence[dict], excluded: int) -> dict:
    """``filter_report.json``'s ``excluded_sft``, ``sft_overlap`` (the ``pool`` rows still in the record;
    ``None``, with a warning when there is an ``adapter``, when the record is missing or incomplete) and
    ``sft_record``.

    Example:

    ```python
    >>> from slmsql_hub.data.sft_record import SFTRecord, question_key, report_fields
    >>> record = SFTRecord(keys=frozenset({question_key("pets", "Q?", "SELECT 1")}))
    >>> pool = [{"db_id": "pets", "question": "Other?", "gold_sql": "SELECT 2"}]
    >>> report_fields(record, "sft/stage2", pool, excluded=1)
    {'excluded_sft': 1, 'sft_overlap': 0, 'sft_record': {'file': None, 'questions': 1, 'complete': True}}

    ```
    """
    if record is None or not record.complete:
        if adapter:
            logger.warning(
                "the adapter %s has %s SFT question record (%s named in its run_summary.json): the pool may hold "
                "questions it was trained on, so filter_report.json says sft_overlap: null",
                adapter,
                "an incomplete" if record else "no",
                _RECORD_FILE,
            )
        overlap = None
    else:
        columns = {name: [row[name] for row in pool] for name in ("db_id", "question", "gold_sql")}
        overlap = sum(key in record.keys for key in row_keys(columns))
    return {
        "excluded_sft": excluded,
        "sft_overlap": overlap,
        "sft_record": record.summary() if record else None,
    }
