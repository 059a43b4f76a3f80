"""Read prediction and gold files in the formats the official evaluators use, plus one JSONL format.

Three formats, each turned into a list of :class:`PredictionRecord` in question order:

- ``spider``: predictions one SQL per line (the Spider evaluator's ``--pred`` file; text after a TAB is
  ignored, as the official evaluator does), gold ``SQL<TAB>db_id`` per line (``dev_gold.sql``).
- ``bird``: predictions as BIRD's JSON ``{"0": "SQL\\t----- bird -----\\tdb_id", ...}``, gold
  ``SQL<TAB>db_id`` per line (BIRD's ``dev.sql``), difficulty optionally from a JSONL file of objects with
  a ``difficulty`` key or from a JSON list such as BIRD's ``dev.json``.
- ``jsonl``: one object per line with ``prediction``, ``gold_sql``, ``db_id`` or ``db_path`` and an optional
  ``difficulty``; no gold file.

Every problem with the files (missing, not UTF-8, malformed line, lengths that differ) raises one
:class:`~slmsql_hub.errors.UsageError` that names the file and, where it applies, the line.

Example:

```python
>>> import json, tempfile
>>> from pathlib import Path
>>> folder = Path(tempfile.mkdtemp())
>>> def write(name, text):
...     _ = (folder / name).write_text(text)
...     return folder / name
>>> pred = write("pred.txt", "SELECT count(*) FROM singer\\n\\nSELECT name FROM singer\\tdb\\n\\n")
>>> read_spider_predictions(pred), detect_format(pred)
(['SELECT count(*) FROM singer', '', 'SELECT name FROM singer'], 'spider')
>>> gold = write("gold.sql", "SELECT count(*) FROM singer\\tconcert_singer\\n" * 3)
>>> read_gold_file(gold)[0]
('SELECT count(*) FROM singer', 'concert_singer')
>>> [(r.index, r.prediction, r.db_id) for r in load_prediction_records(pred, gold)][:2]
[(0, 'SELECT count(*) FROM singer', 'concert_singer'), (1, '', 'concert_singer')]
>>> bird = write("pred.json", json.dumps({"1": "SELECT 2", "0": "SELECT 1\\t----- bird -----\\tfinancial"}))
>>> read_bird_predictions(bird)
[('SELECT 1', 'financial'), ('SELECT 2', None)]
>>> read_difficulties(write("diff.jsonl", '{"difficulty": "simple"}\\n{"difficulty": "Challenging"}\\n'))
['simple', 'challenging']
>>> _ = write("dev.sql", "SELECT 1\\tfinancial\\nSELECT 2\\tfinancial\\n")
>>> load_prediction_records(bird, folder / "dev.sql", difficulty_path=folder / "diff.jsonl")[0]
PredictionRecord(index=0, prediction='SELECT 1', gold_sql='SELECT 1', db_id='financial', db_path=None, difficulty='simple')
>>> row = {"prediction": "```sql\\nSELECT 1\\n```", "gold_sql": "SELECT 1", "db_path": "toy.sqlite"}
>>> read_jsonl_records(write("preds.jsonl", json.dumps(row) + "\\n"))[0].db_path
'toy.sqlite'
>>> (folder / "toy").mkdir()
>>> _ = write("toy/toy.sqlite", "")
>>> [p.name for p in resolve_db_paths([PredictionRecord(0, "SELECT 1", "SELECT 1", db_id="toy")], folder)]
['toy.sqlite']

```
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError

logger = logging.getLogger(__name__)

_FORMATS = ("spider", "bird", "jsonl")
_BIRD_SEPARATOR = "\t----- bird -----\t"


@dataclass(frozen=True)
class PredictionRecord:
    """One question to judge (``index``: 0-based position in the files): the prediction (SQL or raw output,
    ``""`` when the file gives none), its gold SQL and its database, as ``db_id``
    (``<db-root>/<db_id>/<db_id>.sqlite``) or a JSONL file's ``db_path``."""

    index: int
    prediction: str
    gold_sql: str
    db_id: str | None = None
    db_path: str | None = None
    difficulty: str | None = None


def _read_text(path: str | os.PathLike, what: str) -> str:
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{what} file not found: {path}")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(
            f"{what} file {path} is not UTF-8 text (byte {err.start}): re-save it as UTF-8"
        ) from None


def _lines(text: str) -> list[str]:
    """The file's lines without line endings; blank lines at the end of the file are dropped."""
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def _json(text: str, where: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise UsageError(f"{where}: not valid JSON (line {err.lineno}: {err.msg})") from None


def _json_lines(text: str, where: str) -> Iterator[tuple[str, object]]:
    """Each line of a JSONL text parsed, with its place (``<where>, line N``) for an error."""
    for number, line in enumerate(_lines(text), start=1):
        at = f"{where}, line {number}"
        if not line.strip():
            raise UsageError(f"{at}: blank line; every line must be one JSON object")
        try:
            yield at, json.loads(line)
        except json.JSONDecodeError as err:
            raise UsageError(f"{at}: not valid JSON ({err.msg})") from None


def read_spider_predictions(path: str | os.PathLike) -> list[str]:
    """Spider-style predictions, one SQL per line, text after a TAB ignored. A blank line inside the file is an
    empty prediction (judged ``no_sql``), so the alignment never shifts; blank lines at the end are ignored."""
    return [line.split("\t", 1)[0].strip() for line in _lines(_read_text(path, "predictions"))]


def read_gold_file(path: str | os.PathLike) -> list[tuple[str, str]]:
    """``(gold_sql, db_id)`` pairs of a gold file with one ``SQL<TAB>db_id`` per line (Spider's ``dev_gold.sql``,
    BIRD's ``dev.sql``), split on the last TAB; a blank line or one without a db_id is refused."""
    pairs = []
    for number, line in enumerate(_lines(_read_text(path, "gold")), start=1):
        sql, tab, db_id = line.rpartition("\t")
        if not tab or not sql.strip() or not db_id.strip():
            raise UsageError(f"gold file {path}, line {number}: expected 'SQL<TAB>db_id', got {line[:80]!r}")
        pairs.append((sql.strip(), db_id.strip()))
    return pairs


def read_bird_predictions(path: str | os.PathLike) -> list[tuple[str, str | None]]:
    """``(sql, db_id or None)`` pairs, in index order, of BIRD-style predictions (keys ``0 .. n-1`` in any
    order). A value without the separator is the SQL whole; a non-string (``null``) is an empty prediction,
    as BIRD's evaluator treats it."""
    data = _json(_read_text(path, "predictions"), f"predictions file {path}")
    if not isinstance(data, dict):
        raise UsageError(
            f'predictions file {path}: expected a JSON object {{"0": "SQL\\t----- bird -----\\tdb_id", ...}}, '
            f"got a JSON {type(data).__name__}"
        )
    by_index: dict[int, object] = {}
    for key, value in data.items():
        try:
            index = int(key)
        except ValueError:
            raise UsageError(f"predictions file {path}: key {key!r} is not a question index") from None
        by_index[index] = value
    missing = sorted(set(range(len(by_index))) - set(by_index))
    if missing:
        raise UsageError(
            f"predictions file {path}: indices must run 0..{len(by_index) - 1} without gaps; "
            f"missing {missing[:5]}{' ...' if len(missing) > 5 else ''}"
        )
    predictions: list[tuple[str, str | None]] = []
    for index in range(len(by_index)):
        value = by_index[index]
        if not isinstance(value, str):
            predictions.append(("", None))
        elif _BIRD_SEPARATOR in value:
            sql, _, db_id = value.rpartition(_BIRD_SEPARATOR)
            predictions.append((sql.strip(), db_id.strip() or None))
        else:
            predictions.append((value.strip(), None))
    return predictions


def read_difficulties(path: str | os.PathLike) -> list[str | None]:
    """Each object's ``difficulty`` (lower case; ``None`` when null or absent), from a JSON list of objects
    (BIRD's ``dev.json``) or JSONL."""
    text, where = _read_text(path, "difficulty"), f"difficulty file {path}"
    if text.lstrip().startswith("["):
        items = enumerate(_json(text, where), start=1)
        rows: Iterator[tuple[str, object]] = ((f"{where}, item {n}", item) for n, item in items)
    else:
        rows = _json_lines(text, where)
    labels: list[str | None] = []
    for at, item in rows:
        if not isinstance(item, dict):
            raise UsageError(f"{at}: expected an object with 'difficulty'")
        label = item.get("difficulty")
        if label is not None and not isinstance(label, str):
            raise UsageError(f"{at}: 'difficulty' must be a string")
        labels.append(label.strip().lower() if label else None)
    return labels


def read_jsonl_records(path: str | os.PathLike) -> list[PredictionRecord]:
    """The records, in line order, of the JSONL format (module docstring); a ``null`` prediction is an empty
    one (``no_sql``)."""
    records, text = [], _read_text(path, "predictions")
    for index, (where, row) in enumerate(_json_lines(text, f"predictions file {path}")):
        if not isinstance(row, dict):
            raise UsageError(f"{where}: expected a JSON object, got a JSON {type(row).__name__}")
        missing = [key for key in ("prediction", "gold_sql") if key not in row]
        if missing:
            raise UsageError(f"{where}: missing {', '.join(repr(k) for k in missing)}")
        if not row.get("db_id") and not row.get("db_path"):
            raise UsageError(f"{where}: needs 'db_id' or 'db_path'")
        prediction, gold = row["prediction"], row["gold_sql"]
        if prediction is not None and not isinstance(prediction, str):
            raise UsageError(f"{where}: 'prediction' must be a string or null")
        if not isinstance(gold, str) or not gold.strip():
            raise UsageError(f"{where}: 'gold_sql' must be a non-empty string")
        for key in ("db_id", "db_path", "difficulty"):
            if row.get(key) is not None and not isinstance(row[key], str):
                raise UsageError(f"{where}: {key!r} must be a string")
        difficulty = row.get("difficulty")
        records.append(
            PredictionRecord(
                index=index,
                prediction=prediction or "",
                gold_sql=gold,
                db_id=row.get("db_id") or None,
                db_path=row.get("db_path") or None,
                difficulty=difficulty.strip().lower() if difficulty else None,
            )
        )
    return records


def detect_format(pred_path: str | os.PathLike) -> str:
    """The format (``spider``, ``bird``, ``jsonl``) of a predictions file: ``.jsonl`` -> ``jsonl``, ``.json`` ->
    ``bird``; otherwise a first line that is a JSON object with a ``prediction`` key -> ``jsonl``, a file that
    starts with ``{`` -> ``bird``, anything else -> ``spider``."""
    suffix = Path(pred_path).suffix.lower()
    if suffix == ".jsonl":
        return "jsonl"
    if suffix == ".json":
        return "bird"
    text = _read_text(pred_path, "predictions").lstrip()
    if text.startswith("{"):
        first_line = text.splitlines()[0]
        try:
            first = json.loads(first_line)
        except json.JSONDecodeError:
            return "bird"
        return "jsonl" if isinstance(first, dict) and "prediction" in first else "bird"
    return "spider"


def _starts_with_json(path: str | os.PathLike) -> bool:
    """Whether the file's text starts with ``{`` or ``[``, which no SQL statement does."""
    return _read_text(path, "predictions").lstrip()[:1] in ("{", "[")


def load_prediction_records(
    pred_path: str | os.PathLike,
    gold_path: str | os.PathLike | None = None,
    *,
    fmt: str | None = None,
    difficulty_path: str | os.PathLike | None = None,
) -> list[PredictionRecord]:
    """Predictions (and gold) in any of :data:`_FORMATS` (``None``: :func:`detect_format`) as aligned
    :class:`PredictionRecord` objects. ``gold_path`` is required for ``spider`` and ``bird``, refused for
    ``jsonl``; ``difficulty_path`` labels (:func:`read_difficulties`) override a JSONL file's. UsageError: a
    file is missing or malformed, or the files differ in length."""
    fmt = fmt or detect_format(pred_path)
    if fmt not in _FORMATS:
        raise UsageError(f"unknown predictions format {fmt!r}: use one of {', '.join(_FORMATS)}")
    if fmt == "spider" and (found := detect_format(pred_path)) != "spider" and _starts_with_json(pred_path):
        raise UsageError(
            f"predictions file {pred_path} holds JSON ({found} format), not one SQL per line: pass --format "
            f"{found}, or leave --format out to detect it"
        )
    if fmt == "jsonl":
        if gold_path is not None:
            raise UsageError(
                f"the jsonl format carries its gold SQL in each line ('gold_sql'): drop the gold file {gold_path}"
            )
        records = read_jsonl_records(pred_path)
    else:
        records = _paired_records(pred_path, gold_path, fmt)
    if difficulty_path is not None:
        labels = read_difficulties(difficulty_path)
        _check_lengths(pred_path, len(records), difficulty_path, len(labels))
        records = [
            PredictionRecord(r.index, r.prediction, r.gold_sql, r.db_id, r.db_path, label)
            for r, label in zip(records, labels)
        ]
    if not records:
        raise UsageError(f"predictions file {pred_path} holds no predictions")
    return records


def _paired_records(
    pred_path: str | os.PathLike, gold_path: str | os.PathLike | None, fmt: str
) -> list[PredictionRecord]:
    """Spider or BIRD predictions aligned with their gold file; the gold's database wins a disagreement."""
    if gold_path is None:
        raise UsageError(f"the {fmt} format needs a gold file (one 'SQL<TAB>db_id' per line)")
    gold = read_gold_file(gold_path)
    if fmt == "spider":
        predictions = [(sql, None) for sql in read_spider_predictions(pred_path)]
    else:
        predictions = read_bird_predictions(pred_path)
    _check_lengths(pred_path, len(predictions), gold_path, len(gold))
    records = []
    for index, ((pred_sql, pred_db), (gold_sql, db_id)) in enumerate(zip(predictions, gold)):
        if pred_db is not None and pred_db != db_id:
            logger.warning(
                "question %d: the prediction names database %r but the gold names %r; judging on %r",
                index,
                pred_db,
                db_id,
                db_id,
            )
        records.append(PredictionRecord(index=index, prediction=pred_sql, gold_sql=gold_sql, db_id=db_id))
    return records


def _check_lengths(path_a: str | os.PathLike, n_a: int, path_b: str | os.PathLike, n_b: int) -> None:
    if n_a != n_b:
        raise UsageError(
            f"{path_a} has {n_a} entries but {path_b} has {n_b}: they must be aligned one question per entry"
        )


def resolve_db_paths(
    records: Sequence[PredictionRecord], db_root: str | os.PathLike | None = None
) -> list[Path]:
    """The database file of every record, each checked to exist before anything runs: a ``db_id`` is
    ``<db_root>/<db_id>/<db_id>.sqlite``; a relative ``db_path`` is tried in the working directory, then under
    ``db_root``. A missing database, or a ``db_id`` without ``db_root``, is a ``UsageError``."""
    resolved: dict[tuple[str | None, str | None], Path] = {}
    paths = []
    for record in records:
        key = (record.db_id, record.db_path)
        if key not in resolved:
            resolved[key] = _resolve_one(record, db_root)
        paths.append(resolved[key])
    return paths


def _resolve_one(record: PredictionRecord, db_root: str | os.PathLike | None) -> Path:
    if record.db_path is not None:
        given = Path(record.db_path)
        candidates = [given] if given.is_absolute() else [Path.cwd() / given]
        if not given.is_absolute() and db_root is not None:
            candidates.append(Path(db_root) / given)
        for candidate in candidates:
            if candidate.is_file():
                return candidate
        tried = " or ".join(str(c) for c in candidates)
        raise UsageError(
            f"question {record.index}: database {record.db_path!r} not found (looked for {tried})"
        )
    if db_root is None:
        raise UsageError(
            f"question {record.index} names database {record.db_id!r}: give the databases folder (--db-root DIR)"
        )
    expected = Path(db_root) / record.db_id / f"{record.db_id}.sqlite"
    if not expected.is_file():
        raise UsageError(
            f"database {record.db_id!r} (question {record.index}) not found: expected {expected}; "
            "check --db-root"
        )
    return expected
