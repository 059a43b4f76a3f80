"""Schema text for prompts: a database's ``CREATE TABLE`` statements, each followed by a few sample rows.

The text is read from the SQLite file itself, through the :class:`~slmsql_hub.sql.Sandbox` (read-only,
under limits), never by opening the file here. Results are memoised per (path, modification time, size,
options), so building prompts for thousands of questions over a handful of databases reads each database
once.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:
    from .sandbox import Sandbox

logger = logging.getLogger(__name__)

_TABLES_SQL = (
    "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
    "AND sql IS NOT NULL ORDER BY name"
)
_MEMO_SIZE = 256


class _SchemaMemo:
    """A small thread-safe LRU map from (path, mtime, size, options) to schema text."""

    def __init__(self, maxsize: int) -> None:
        self._maxsize = maxsize
        self._items: OrderedDict[tuple, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple) -> str | None:
        with self._lock:
            text = self._items.get(key)
            if text is not None:
                self._items.move_to_end(key)
            return text

    def put(self, key: tuple, text: str) -> None:
        with self._lock:
            self._items[key] = text
            self._items.move_to_end(key)
            while len(self._items) > self._maxsize:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


# A memo of a pure function of the file's bytes (keyed by mtime and size), not configuration state.
_memo = _SchemaMemo(_MEMO_SIZE)


def clear_schema_cache() -> None:
    """Forget every memoised schema text (the next :func:`schema_text` call reads the database again).

    >>> clear_schema_cache()
    """
    _memo.clear()


def _quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _compact_create(sql: str) -> str:
    """Strip indentation and blank lines from a ``CREATE TABLE`` statement; end it with ``;``."""
    lines = [re.sub(r"\s+", " ", line).strip() for line in sql.strip().splitlines()]
    text = "\n".join(line for line in lines if line)
    return text if text.endswith(";") else text + ";"


def _format_value(value: object, max_value_chars: int = 40) -> str:
    """One cell as prompt text: ``NULL`` for None, ``<blob>`` for bytes, text on one line, cut after
    ``max_value_chars`` characters with ``...``.

    Example:

    ```python
    >>> _format_value(None), _format_value(3.5), _format_value("a very long title indeed", max_value_chars=10)
    ('NULL', '3.5', 'a very lon...')

    ```
    """
    if value is None:
        return "NULL"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "<blob>"
    text = re.sub(r"\s+", " ", str(value)).strip()
    if max_value_chars > 0 and len(text) > max_value_chars:
        text = text[:max_value_chars] + "..."
    return text


def _sample_block(table: str, columns: tuple[str, ...], rows: tuple[tuple, ...], max_value_chars: int) -> str:
    header = " | ".join(columns)
    body = [" | ".join(_format_value(v, max_value_chars) for v in row) for row in rows]
    return "\n".join([f"/* sample rows of {table}:", header, *body, "*/"])


def _read_schema(path: Path, sandbox: Sandbox, sample_rows: int, max_value_chars: int) -> str:
    listing = sandbox.execute(str(path), _TABLES_SQL)
    if not listing.ok:
        raise UsageError(f"cannot read the schema of {path}: {listing.status}: {listing.error}")
    if not listing.rows:
        raise UsageError(f"{path} has no tables; pass a SQLite database with at least one table")
    blocks: list[str] = []
    for name, create_sql in listing.rows:
        block = _compact_create(create_sql)
        if sample_rows > 0:
            sample = sandbox.execute(
                str(path), f"SELECT * FROM {_quote_identifier(name)} LIMIT {sample_rows}"
            )
            if not sample.ok:
                raise RuntimeError(
                    f"reading sample rows of table {name!r} in {path} failed: {sample.status}: {sample.error}"
                )
            if sample.rows:
                block += "\n" + _sample_block(name, sample.columns, sample.rows, max_value_chars)
        blocks.append(block)
    return "\n\n".join(blocks)


def schema_text(
    db_path: str | os.PathLike,
    sandbox: Sandbox | None = None,
    *,
    sample_rows: int = 3,
    max_value_chars: int = 40,
) -> str:
    """The prompt text of one database: its tables' ``CREATE TABLE`` statements (no ``sqlite_*``), in name
    order, each followed by up to ``sample_rows`` rows. ``sandbox=None`` starts a short-lived one (pass yours
    when building many prompts). UsageError for a missing, unreadable or table-less database.

    Example:

    ```python
    >>> import sqlite3, tempfile, pathlib
    >>> from slmsql_hub.sql import Sandbox
    >>> db = pathlib.Path(tempfile.mkdtemp()) / "pets.sqlite"
    >>> _ = sqlite3.connect(db).executescript("CREATE TABLE pet (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO pet VALUES (1, 'Rex')")
    >>> with Sandbox(workers=1) as sandbox:
    ...     print(schema_text(db, sandbox, sample_rows=1))
    CREATE TABLE pet (id INTEGER PRIMARY KEY, name TEXT);
    /* sample rows of pet:
    id | name
    1 | Rex
    */

    ```
    """
    if sample_rows < 0:
        raise UsageError(f"sample_rows must be >= 0, got {sample_rows}")
    path = Path(db_path).expanduser().resolve()
    if not path.is_file():
        raise UsageError(f"database file not found: {path}")
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size, sample_rows, max_value_chars)
    cached = _memo.get(key)
    if cached is not None:
        return cached
    if sandbox is None:
        from .sandbox import Sandbox

        with Sandbox(workers=1) as own_sandbox:
            text = _read_schema(path, own_sandbox, sample_rows, max_value_chars)
    else:
        text = _read_schema(path, sandbox, sample_rows, max_value_chars)
    logger.debug("schema text of %s: %d chars", path, len(text))
    _memo.put(key, text)
    return text
