"""The sandbox's worker process: runs one SQL string at a time against read-only SQLite connections.

Started by :class:`slmsql_hub.sql.sandbox.Sandbox` as ``python <this file>`` (a fresh interpreter: never a
fork of the caller, so a CUDA context or threads of the caller never leak in). It imports the standard
library only. Protocol on stdin/stdout: 8-byte big-endian length + pickle, one request, one reply.

Command line: ``python _worker.py MEMORY_MB|none MAX_CONNECTIONS``.
Requests and their replies:

- ``("run", db_path, sql, timeout_s, max_ops, max_rows, max_result_bytes)`` ->
  ``(status, rows, columns, error, elapsed_s, infra, result_bytes, cpu_s, cpu_total_s, frames)``: ``cpu_s`` is
  the CPU time the query used, ``cpu_total_s`` the worker's CPU time so far (the parent's baseline for the next
  query). ``infra`` marks a query that could not get ``timeout_s`` of CPU before the wall-clock cap (the machine
  was too busy: see :mod:`slmsql_hub.sql.sandbox`); a query that used up its CPU time, its op budget or the
  memory cap is the query's own ``timeout``/``error``. ``result_bytes`` is the rows' size as
  :func:`result_bytes` counts it. A big result comes as ``frames`` more messages after the reply (its ``rows``
  empty), each a list of rows, freed in the worker as it is sent: the result exists about once, in the worker or
  in the parent, never as a whole pickle next to its rows.
- ``("plan", db_path, statements)`` -> one ``(full scans, plan steps)`` per statement (:func:`_plan`).

Everything that protects the database and the process *inside* SQLite lives here; the parent adds what an
in-process guard cannot give (a kill once the CPU time is used up inside one SQLite step, a restart after a crash).
"""

from __future__ import annotations

import os
import pickle
import resource
import sqlite3
import struct
import sys
import time
import urllib.parse
from collections import OrderedDict

# --- limits on what one statement may do (sqlite3.Connection.setlimit) -------------------------------------
_SQLITE_LIMITS = {
    "SQLITE_LIMIT_LENGTH": 5_000_000,  # largest string/blob: stops zeroblob/randomblob/replace/printf bombs
    "SQLITE_LIMIT_SQL_LENGTH": 1_000_000,
    "SQLITE_LIMIT_COLUMN": 1_000,
    "SQLITE_LIMIT_EXPR_DEPTH": 300,
    "SQLITE_LIMIT_COMPOUND_SELECT": 64,
    "SQLITE_LIMIT_VDBE_OP": 2_000_000,
    "SQLITE_LIMIT_FUNCTION_ARG": 64,
    "SQLITE_LIMIT_ATTACHED": 0,  # no ATTACH at all, of any file or :memory:
    "SQLITE_LIMIT_LIKE_PATTERN_LENGTH": 1_000,
    "SQLITE_LIMIT_VARIABLE_NUMBER": 32,
    "SQLITE_LIMIT_TRIGGER_DEPTH": 1,
    "SQLITE_LIMIT_WORKER_THREADS": 0,
}

# --- the authorizer: an allow-list of actions a read-only query needs ---------------------------------------
_ALLOWED_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE}
_FORBIDDEN_FUNCTIONS = frozenset(
    {
        "load_extension",
        "fts3_tokenizer",  # can crash the interpreter
        "readfile",
        "writefile",
        "edit",
        "sqlite_offset",
    }
)
# Table-valued PRAGMA functions that only read the schema (``SELECT * FROM pragma_table_info('t')``).
_READONLY_PRAGMAS = frozenset(
    {
        "table_info",
        "table_xinfo",
        "table_list",
        "index_list",
        "index_info",
        "index_xinfo",
        "foreign_key_list",
        "collation_list",
        "function_list",
    }
)

_PROGRESS_EVERY = 10_000  # VDBE instructions between two progress-handler calls
_FETCH_ROWS = 256  # most rows read from SQLite between two checks of the row and byte budgets
_SIZED = (str, bytes)
_OUT_OF_MEMORY = "MemoryError: the query exhausted the worker's memory cap"
_FRAME_BYTES = 1 << 20  # a result bigger than this (by result_bytes) is sent in frames of about this size
_FRAME_ROWS = 8192  # ... or with more rows than this
_STARVED_EXTRA_S = 1.0  # the wall-clock cap of a starved query: 2 x timeout_s + this (see the sandbox)


def result_bytes(rows) -> int:
    """The size of result rows as the byte budget counts it: ``len`` of each text or blob, 8 for any other value.

    Deterministic (a function of the rows alone), so a ``too_large`` verdict may be cached.

    >>> result_bytes([(1, "abc", None), (2.5, b"ab", "")])
    29
    """
    return sum(len(v) if v.__class__ in _SIZED else 8 for row in rows for v in row)


def _authorizer(action, arg1, arg2, db_name, trigger):
    if action in _ALLOWED_ACTIONS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_DENY if (arg2 or "").lower() in _FORBIDDEN_FUNCTIONS else sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA:
        # Only argument-free reads of schema pragmas (arg2 is the value: `PRAGMA x = value`).
        if (arg1 or "").lower() in _READONLY_PRAGMAS:
            return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_UPDATE and arg1 in ("sqlite_master", "sqlite_temp_master"):
        # Some table-valued functions (json_each, json_tree) make SQLite check the schema table while
        # preparing; IGNORE lets the SELECT go ahead while still writing nothing.
        return sqlite3.SQLITE_IGNORE
    return sqlite3.SQLITE_DENY


class _Connections:
    """One read-only connection per database file, reopened when the file changes; at most ``limit`` open,
    the least recently used closed first (a corpus such as SynSQL spans thousands of databases)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._by_path: OrderedDict[str, tuple[tuple[int, int], sqlite3.Connection]] = OrderedDict()

    def get(self, db_path: str) -> sqlite3.Connection:
        st = os.stat(db_path)
        identity = (st.st_size, st.st_mtime_ns)
        cached = self._by_path.pop(db_path, None)
        if cached is not None and cached[0] != identity:
            cached[1].close()
            cached = None
        if cached is None:
            cached = (identity, _open(db_path))
        self._by_path[db_path] = cached  # now the most recently used
        while len(self._by_path) > self.limit:
            self._by_path.popitem(last=False)[1][1].close()
        return cached[1]

    def open_paths(self) -> list[str]:
        """The databases with an open connection, least recently used first."""
        return list(self._by_path)


def _open(db_path: str) -> sqlite3.Connection:
    uri = "file:" + urllib.parse.quote(os.path.abspath(db_path)) + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    # Invalid UTF-8 stored in the database must not fail a query (the Spider evaluator's rule).
    conn.text_factory = lambda b: b.decode("utf-8", errors="ignore")
    # Our own settings first, then lock everything down.
    conn.execute("PRAGMA query_only = ON")
    conn.execute("PRAGMA trusted_schema = OFF")
    conn.execute("PRAGMA temp_store = FILE")  # big sorts spill to disk instead of memory
    conn.execute("PRAGMA cache_size = -32000")  # 32 MB page cache per connection
    for name, value in _SQLITE_LIMITS.items():
        category = getattr(sqlite3, name, None)
        if category is not None:
            conn.setlimit(category, value)
    if hasattr(conn, "enable_load_extension"):  # absent when Python is built without extension support
        conn.enable_load_extension(False)
    conn.set_authorizer(_authorizer)
    return conn


def _fetch(cursor: sqlite3.Cursor, max_rows: int, max_bytes: int) -> tuple[list, int, str | None]:
    """Read the rows while both budgets hold; returns ``(rows, result_bytes, why it is too large or None)``.

    A chunk never asks for more rows than the byte budget has room for at the widest possible row (every
    value at ``SQLITE_LIMIT_LENGTH``), so at most ``max_bytes`` plus one row are ever held."""
    widest = len(cursor.description) * _SQLITE_LIMITS["SQLITE_LIMIT_LENGTH"]
    rows: list = []
    size = 0
    while True:
        chunk = cursor.fetchmany(min(_FETCH_ROWS, max_rows + 1 - len(rows), max(1, (max_bytes - size) // widest)))
        if not chunk:
            return rows, size, None
        rows += chunk
        size += result_bytes(chunk)
        if len(rows) > max_rows:
            return rows, size, f"more than {max_rows} rows"
        if size > max_bytes:
            return rows, size, f"more than {max_bytes:,} bytes of values"


def _run(
    conns: _Connections, db_path: str, sql: str, timeout_s: float, max_ops, max_rows: int, max_bytes: int
):
    start, cpu_start = time.monotonic(), time.process_time()
    deadline, cap = start + timeout_s, start + 2 * timeout_s + _STARVED_EXTRA_S
    state = {"ops": 0, "stop": None}

    def progress() -> int:
        state["ops"] += _PROGRESS_EVERY
        if max_ops is not None and state["ops"] > max_ops:
            state["stop"] = "op budget exceeded"
            return 1
        now = time.monotonic()
        if now > deadline:  # the CPU time decides (sandbox module docstring); the wall clock only caps
            if time.process_time() - cpu_start >= timeout_s:
                state["stop"] = f"{timeout_s:g} s of CPU time used up"
                return 1
            if now > cap:  # the machine was busy: half the CPU time ("most of it") is enough to call it
                state["stop"] = "starved" if time.process_time() - cpu_start < timeout_s / 2 else "cap"
                return 1
        return 0

    def reply(status, rows=(), columns=(), error=None, infra=False, size=0):
        cpu_now, elapsed = time.process_time(), time.monotonic() - start
        return (status, rows, columns, error, elapsed, infra, size, cpu_now - cpu_start, cpu_now, 0)

    conn = conns.get(db_path)
    conn.set_progress_handler(progress, _PROGRESS_EVERY)
    try:
        cursor = conn.execute(sql)
        if cursor.description is None:
            cursor.close()
            return reply("error", error="the statement returned no result columns")
        columns = tuple(d[0] for d in cursor.description)
        rows, size, too_large = _fetch(cursor, max_rows, max_bytes)
        cursor.close()
    except sqlite3.Error as err:
        stop = state["stop"]
        if stop == "starved":
            cpu = time.process_time() - cpu_start
            why = f"the machine gave the query {cpu:.2f} s of CPU in {time.monotonic() - start:.1f} s"
            return reply("timeout", error=f"interrupted: {why} (too busy to judge it)", infra=True)
        if stop == "cap":
            cpu = time.process_time() - cpu_start
            why = f"{cpu:.2f} s of CPU time, more than half of {timeout_s:g} s, and still running at the cap"
            return reply("timeout", error=f"interrupted: {why}")
        if stop is not None:
            return reply("timeout", error=f"interrupted: {stop}")
        message = str(err)
        if "not authorized" in message or "prohibited" in message:
            return reply("refused", error=f"refused by the sandbox: {message}")
        return reply("error", error=f"{type(err).__name__}: {message}")
    except MemoryError:  # the memory cap is one of the query's limits: its fault, like the others
        return reply("error", error=_OUT_OF_MEMORY)
    except (ValueError, OverflowError, UnicodeError) as err:  # e.g. NUL characters, values Python cannot hold
        return reply("error", error=f"{type(err).__name__}: {err}")
    finally:
        conn.set_progress_handler(None, 0)
    if too_large is not None:
        return reply("too_large", columns=columns, error=too_large)
    return reply("ok", rows, columns, size=size)


def _frames(rows: list) -> list[tuple[int, int]]:
    """``[start, end)`` ranges of ``rows`` of about :data:`_FRAME_BYTES` (by :func:`result_bytes`) or
    :data:`_FRAME_ROWS` rows each."""
    ranges, begin, size = [], 0, 0
    for i, row in enumerate(rows):
        size += result_bytes((row,))
        if size >= _FRAME_BYTES or i + 1 - begin >= _FRAME_ROWS:
            ranges.append((begin, i + 1))
            begin, size = i + 1, 0
    if begin < len(rows):
        ranges.append((begin, len(rows)))
    return ranges


def _send(stdout, message) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stdout.write(struct.pack(">Q", len(data)))
    stdout.write(data)


def _send_reply(stdout, reply) -> None:
    """Send a reply; a ``run`` reply with a big result goes in frames, each freed once sent."""
    if reply[0] != "ok" or (reply[6] <= _FRAME_BYTES and len(reply[1]) <= _FRAME_ROWS):
        _send(stdout, reply)
        return
    rows, ranges = reply[1], _frames(reply[1])
    _send(stdout, (reply[0], (), *reply[2:9], len(ranges)))
    del reply
    try:
        for begin, end in ranges:
            _send(stdout, rows[begin:end])
            rows[begin:end] = [None] * (end - begin)  # the frame was sent: let its values go
    except MemoryError:
        os._exit(3)  # part of the reply is out: die (the parent retries, then calls it the query's error)


def _plan(conns: _Connections, db_path: str, statements: list[str]) -> tuple[tuple[int, int], ...]:
    """For each statement, the full-table scans and the steps of SQLite's query plan (``EXPLAIN QUERY PLAN``,
    nothing executed): the parent runs the statements with the most scans first. ``(0, 0)`` when a statement
    cannot be planned (it will fail fast)."""
    try:
        conn = conns.get(db_path)
    except (sqlite3.Error, OSError):
        return tuple((0, 0) for _ in statements)
    out = []
    for sql in statements:
        try:
            steps = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]
        except (sqlite3.Error, ValueError, OverflowError, UnicodeError, MemoryError):
            steps = []
        out.append((sum(step.startswith("SCAN") and "CONSTANT ROW" not in step for step in steps), len(steps)))
    return tuple(out)


def _read_exact(stream, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = stream.read(n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def main() -> None:
    memory_mb = int(sys.argv[1]) if sys.argv[1] != "none" else None
    if memory_mb is not None:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    conns = _Connections(int(sys.argv[2]))
    while True:
        header = _read_exact(stdin, 8)
        if header is None:
            return
        payload = _read_exact(stdin, struct.unpack(">Q", header)[0])
        if payload is None:
            return
        op, *args = pickle.loads(payload)
        del payload
        try:
            reply = _plan(conns, *args) if op == "plan" else _run(conns, *args)
        except (sqlite3.Error, OSError) as err:  # opening the database itself failed
            reply = ("error", (), (), f"cannot open database: {err}", 0.0, False, 0, 0.0, time.process_time(), 0)
        except MemoryError:
            reply = ("error", (), (), _OUT_OF_MEMORY, 0.0, False, 0, 0.0, time.process_time(), 0)
        try:
            _send_reply(stdout, reply) if op == "run" else _send(stdout, reply)
        except MemoryError:
            failed = "MemoryError while returning the result"
            _send(stdout, ("error", (), (), failed, 0.0, False, 0, 0.0, time.process_time(), 0))
        del reply  # an idle worker holds no result
        stdout.flush()


if __name__ == "__main__":
    main()
