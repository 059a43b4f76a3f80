"""Run untrusted SQL against SQLite files, read-only and under limits, in supervised worker processes.

This is the only code in slmsql-hub that executes SQL. Model output is untrusted input: during GRPO a policy
writes thousands of queries a minute, some of them pathological. What the sandbox does, honestly:

Protects against
    - **Changing the database.** Connections are opened with the URI ``mode=ro`` and ``PRAGMA query_only``;
      an authorizer allows only reads (SELECT, READ, recursive CTEs, functions outside a deny-list, and
      argument-free schema PRAGMA functions such as ``pragma_table_info``). INSERT/UPDATE/DELETE, DDL,
      temp tables and views (which could shadow real tables for later queries), transactions, ATTACH/DETACH
      (also ``SQLITE_LIMIT_ATTACHED = 0``), ``VACUUM INTO``, PRAGMA writes, ``load_extension``,
      ``fts3_tokenizer``, ``readfile``/``writefile`` are refused.
    - **Anything but one query.** Only one statement starting with SELECT, WITH or VALUES runs; stacked
      statements are refused, a trailing ``;`` or comment is fine, empty text / a lone ``;`` / a comment /
      a statement with no result columns is a clean ``error`` (it would otherwise "match" any empty gold).
    - **Runaway queries.** A progress handler interrupts SQLite itself when an instruction budget
      (``max_ops``) is exceeded, or when the query has used ``timeout_s`` seconds of **CPU time**. A few SQL
      functions spend seconds inside ONE SQLite instruction (``printf('%.*c', …)`` with a huge precision,
      long LIKE patterns, a sort spilling to disk) where no handler fires: the parent reads the worker's CPU
      time from ``deadline + 0.5 s`` on and kills it (and replaces it) once that time is used up.
    - **Huge results and memory.** At most ``max_rows`` rows are materialised (``too_large`` beyond, the
      rest never read); strings and blobs are capped at 5 MB each (``SQLITE_LIMIT_LENGTH``: zeroblob/
      randomblob/replace bombs), expression depth, compound selects, LIKE pattern length and VDBE program
      size are capped; each worker has an address-space cap (``memory_mb``); big sorts spill to temporary
      files.
    - **Results whose total size is huge.** Values under 5 MB each still add up: ``SELECT randomblob(900000)
      FROM t`` over 5,000 rows is 4.5 GB. The byte budget (``max_result_bytes``, 64 MiB by default; text and
      blobs by length, other values as 8 bytes) is checked while the rows are read, in chunks no bigger than
      the budget has room for, so a worker holds at most the budget plus one row, the reply the caller
      receives is no bigger, and the verdict is ``too_large`` (deterministic, so it is cached). It protects
      the memory of the worker, the pipe, and the caller (and the cache, which is bounded by bytes too),
      not the disk or the deadline.
    - **Crashes.** Inputs that are not ``sqlite3.Error`` (``None``, lone surrogates, NUL characters,
      ``MemoryError``) are clean errors; a worker that dies is replaced and the query retried once on a fresh
      worker (a query that kills two workers is an ``error``, unless both were killed from outside). A
      process-wide poison such as ``PRAGMA hard_heap_limit`` never reaches SQLite (refused), and would stay
      inside one worker.

Verdicts do not depend on the machine's load. ``timeout_s`` means what it means to the official evaluators (a
query that needs more time than that is wrong), counted in CPU seconds of the worker instead of wall-clock
seconds: the two agree on a free core, and only the CPU time is the query's own. A query still running at the
wall-clock deadline without having used its CPU time was waiting for a core, so it keeps running, and keeps its
work, until it has used ``timeout_s`` of CPU (the query's fault: ``timeout``, cached), finishes (its result),
exhausts the op budget, or reaches the wall-clock cap of ``2 x timeout_s + 1.5 s``. At the cap a query that
has used more than half of its CPU time ("most of its budget") is the query's fault; one that has used less
was starved by the machine: ``infra``, no verdict, not cached. Only queries needing between half and all of
``timeout_s`` on a machine too busy to give them that much within the cap can be judged differently from a
free core; a runaway never is (it needs a quarter of a core at ``timeout_s = 0.5``, a fifth at ``2``). This is
a re-run without the restart: a second run from scratch would throw away the CPU the first one got and cost
a full run whenever a deadline is hit, while reading the CPU time costs nothing until the deadline. So a
caller waits ``timeout_s`` + about 0.5 s for a runaway on a free core, and at most ``2 x timeout_s + 1.5 s``
on a busy one. The op budget stays a separate, machine-independent limit; it is not derived from
``timeout_s`` because SQLite's instructions per second differ fivefold between runaways alone (and by far
more for legitimate joins), so any rate assumed would either cut legitimate queries well inside ``timeout_s``
or never fire first. The other outcomes that are the machine's: a worker that cannot start
(:class:`SandboxError`) and one killed from outside twice.

Does not protect against
    - Semantic equivalence (two different queries with equal results are equal; that is what EX means).
    - Disk filling through temporary files of one huge sort within the deadline (bounded by time only).
    - Resource exhaustion by the *caller* that asks for many results at once: each result up to
      ``max_rows`` rows and ``max_result_bytes`` is returned in memory (the cache is bounded by entries,
      total rows and total bytes; a batch's results are not).
    - A malicious *database file*: the files are trusted (``trusted_schema`` is off, but SQLite still parses them).
    - Other processes writing the database while it is being read (results are cached by path, size and
      mtime; a change of size or mtime invalidates them).

Performance: each worker keeps one connection per database (at most ``max_connections``, least recently
used closed first); results are cached by (path, size, mtime, SQL, limits); a batch executes each distinct
(database, SQL) once, spread over ``workers`` processes, so SQLite runs on every core (threads in one
process would serialise on the GIL through the progress handler), longest expected first: the statements
with the most full-table scans in SQLite's query plan start first, so a runaway does not start last and
add all of its time to the batch's tail.
"""

from __future__ import annotations

import functools
import logging
import os
import queue
import signal
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from tqdm.auto import tqdm

from ..runtime import bar_disabled
from ._process import _KILL_GRACE_S, SandboxError, _limits_key, _Outcome, _Worker
from .extract import first_keyword, skip_quoted_or_comment
from .result import ExecResult, ExecStatus, Limits

logger = logging.getLogger(__name__)

_ALLOWED_FIRST_KEYWORDS = frozenset({"select", "with", "values"})


# ----------------------------------------------------------------------------------------------------------
# Static checks (cheap, in the caller): one statement, a reading one.
# ----------------------------------------------------------------------------------------------------------
def split_statements(sql: str) -> list[str]:
    """Split SQL text into statements at top-level ``;`` (never inside quotes or comments), dropping empty
    ones and pure comments.

    Example:

    ```python
    >>> split_statements("SELECT ';' FROM t; -- trailing comment")
    ["SELECT ';' FROM t"]
    >>> split_statements("SELECT 1; DROP TABLE t")
    ['SELECT 1', 'DROP TABLE t']
    >>> split_statements(" ; /* nothing */ ")
    []

    ```
    """
    if ";" not in sql and "--" not in sql and "/*" not in sql:  # fast path: the common single statement
        stripped = sql.strip()
        return [stripped] if stripped else []
    statements: list[str] = []
    start = i = 0
    n = len(sql)
    has_code = False
    while i < n:
        c = sql[i]
        end = skip_quoted_or_comment(sql, i) if c in "'\"`[-/" else i
        if end != i:
            has_code = has_code or c in "'\"`["  # a quoted string is code, a comment is not
            i = end
            continue
        if c == ";":
            if has_code:
                statements.append(sql[start:i].strip())
            start, has_code = i + 1, False
        elif not c.isspace():
            has_code = True
        i += 1
    if has_code:
        statements.append(sql[start:].strip())
    return statements


def check_sql(sql: object, limits: Limits) -> tuple[str | None, ExecResult | None]:
    """``(statement, None)`` when SQL text may reach SQLite, else ``(None, result)`` with an ``error`` or
    ``refused`` :class:`ExecResult`.

    Example:

    ```python
    >>> check_sql("SELECT 1;", Limits())
    ('SELECT 1', None)
    >>> check_sql("DELETE FROM t", Limits())[1].status
    <ExecStatus.REFUSED: 'refused'>
    >>> check_sql(None, Limits())[1].error
    'no SQL given'

    ```
    """

    def fail(status: ExecStatus, message: str) -> tuple[None, ExecResult]:
        return None, ExecResult(status=status, error=message)

    if sql is None:
        return fail(ExecStatus.ERROR, "no SQL given")
    if not isinstance(sql, str):
        return fail(ExecStatus.ERROR, f"SQL must be a string, got {type(sql).__name__}")
    if len(sql) > limits.max_sql_chars:
        return fail(ExecStatus.REFUSED, f"SQL longer than {limits.max_sql_chars} characters")
    if "\x00" in sql:
        return fail(ExecStatus.ERROR, "SQL contains a NUL character")
    try:
        sql.encode("utf-8")
    except UnicodeEncodeError as err:
        return fail(ExecStatus.ERROR, f"SQL is not valid text: {err.reason}")
    statements = split_statements(sql)
    if not statements:
        return fail(ExecStatus.ERROR, "empty SQL (only whitespace, ';' or comments)")
    if len(statements) > 1:
        return fail(ExecStatus.REFUSED, f"only one statement may run, got {len(statements)}")
    statement = statements[0]
    keyword = first_keyword(statement)
    if keyword and keyword not in _ALLOWED_FIRST_KEYWORDS:
        return fail(
            ExecStatus.REFUSED, f"only SELECT, WITH or VALUES statements may run, got {keyword.upper()}"
        )
    return statement, None


# ----------------------------------------------------------------------------------------------------------
# The sandbox
# ----------------------------------------------------------------------------------------------------------
class Sandbox:
    """Read-only, limited SQL execution with per-database connections, a result cache and batch dedup.

    ``limits`` are the default of each call; ``workers`` (default :func:`_default_workers`) start lazily. The
    cache (LRU) holds at most ``cache_size`` results (``0``: no cache), ``cache_max_rows`` rows and
    ``cache_max_bytes`` bytes, and no result over a sixteenth of either (a series of results near the byte
    budget would otherwise keep the cache full of them: their memory, not a gain); each worker keeps ``max_connections`` connections, each with a page cache of up
    to 32 MB that must fit in ``memory_mb``.

    Example:

    ```python
    >>> import sqlite3, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "toy.sqlite")
    >>> _ = sqlite3.connect(path).executescript("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2)")
    >>> with Sandbox(Limits(timeout_s=5), workers=1) as sandbox:
    ...     ok = sandbox.execute(path, "SELECT x FROM t ORDER BY x;")
    ...     bad = sandbox.execute(path, "DROP TABLE t")
    >>> ok.status.value, ok.rows, ok.columns
    ('ok', ((1,), (2,)), ('x',))
    >>> bad.status.value
    'refused'

    ```
    """

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        workers: int | None = None,
        cache_size: int = 100_000,
        cache_max_rows: int = 2_000_000,
        cache_max_bytes: int = 256 * 2**20,
        max_connections: int = 16,
    ) -> None:
        if max_connections < 1:
            raise ValueError(f"Sandbox max_connections must be >= 1, got {max_connections!r}")
        self.limits = limits or Limits()
        self.workers = max(1, workers or _default_workers())
        self.cache_size = cache_size
        self.cache_max_rows = cache_max_rows
        self.cache_max_bytes = cache_max_bytes
        self._pool: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._all_workers = [_Worker(self.limits.memory_mb, max_connections) for _ in range(self.workers)]
        for worker in self._all_workers:
            self._pool.put(worker)
        self._threads: ThreadPoolExecutor | None = None
        self._cache: OrderedDict[tuple, tuple[ExecResult, int]] = OrderedDict()
        self._cache_rows = self._cache_bytes = 0
        self._lock = threading.Lock()
        self._closed = False
        self.stats = {
            "requests": 0,
            "executed": 0,
            "cache_hits": 0,
            "batch_duplicates": 0,
            "worker_kills": 0,
            "infra_failures": 0,
        }

    # -- public API ------------------------------------------------------------------------------------------
    def execute(
        self, db_path: str | os.PathLike, sql: str | None, limits: Limits | None = None
    ) -> ExecResult:
        """:meth:`execute_many` of one request."""
        return self.execute_many([(db_path, sql)], limits=limits)[0]

    def execute_many(
        self,
        requests: Sequence[tuple[str | os.PathLike, str | None]],
        limits: Limits | None = None,
        *,
        progress: bool | str = False,
    ) -> list[ExecResult]:
        """Run ``(db_path, sql)`` pairs (``sql`` may be ``None``: an ``error``), results in input order; each
        distinct pair runs once per batch, and once ever while cached. ``progress``: a tqdm bar (a string is
        its label). FileNotFoundError, before anything runs, for a missing database."""
        if self._closed:
            raise RuntimeError("this Sandbox is closed")
        limits = limits or self.limits
        identities: dict[str, tuple] = {}
        for db_path, _ in requests:
            key = os.fspath(db_path)
            if key not in identities:
                identities[key] = _db_identity(key)

        results: list[ExecResult | None] = [None] * len(requests)
        pending: dict[tuple, list[int]] = {}
        statements: dict[tuple, tuple[str, str]] = {}
        with self._lock:
            self.stats["requests"] += len(requests)
            for index, (db_path, sql) in enumerate(requests):
                identity = identities[os.fspath(db_path)]
                statement, early = check_sql(sql, limits)
                if early is not None:
                    results[index] = early
                    continue
                key = (identity, statement, _limits_key(limits))
                cached = self._cache.get(key) if self.cache_size else None
                if cached is not None:
                    self._cache.move_to_end(key)
                    self.stats["cache_hits"] += 1
                    results[index] = replace(cached[0], cached=True)
                    continue
                if key in pending:
                    self.stats["batch_duplicates"] += 1
                    pending[key].append(index)
                else:
                    pending[key] = [index]
                    statements[key] = (identity[0], statement)

        if pending:
            keys = list(pending)
            fresh = self._run_distinct([statements[k] for k in keys], limits, progress)
            with self._lock:
                for key, (result, size) in zip(keys, fresh):
                    if size is not None:
                        self._remember(key, result, size)
                    for n, index in enumerate(pending[key]):
                        results[index] = result if n == 0 else replace(result, cached=True)
        return results  # type: ignore[return-value]

    def close(self) -> None:
        """Stop the worker processes. Idempotent."""
        self._closed = True
        if self._threads is not None:
            self._threads.shutdown(wait=True)
            self._threads = None
        for worker in self._all_workers:
            worker.close()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing sensible left to do
            pass

    def __getstate__(self):
        raise TypeError("a Sandbox owns processes and cannot be pickled; create one per process")

    # -- internals -------------------------------------------------------------------------------------------
    def _run_distinct(
        self, items: list[tuple[str, str]], limits: Limits, progress: bool | str
    ) -> list[tuple[ExecResult, int | None]]:
        bar = None
        if progress and len(items) > 1:
            bar = tqdm(
                total=len(items), desc=progress if isinstance(progress, str) else "executing SQL", unit="q",
                disable=bar_disabled(),
            )  # fmt: skip
        try:
            if len(items) == 1 or self.workers == 1:
                out = []
                for db_path, sql in items:
                    out.append(self._run_one(db_path, sql, limits))
                    if bar is not None:
                        bar.update(1)
                return out
            with self._lock:  # concurrent batches (e.g. a Space serving two users) share one thread pool
                if self._threads is None:
                    self._threads = ThreadPoolExecutor(
                        max_workers=self.workers, thread_name_prefix="slmsql-sandbox"
                    )
                threads = self._threads
            order = range(len(items))
            if len(items) > self.workers:
                order = self._longest_first(items, limits, threads)
            futures = {i: threads.submit(self._run_one, *items[i], limits) for i in order}
            out = []
            for i in range(len(items)):
                out.append(futures[i].result())
                if bar is not None:
                    bar.update(1)
            return out
        finally:
            if bar is not None:
                bar.close()

    def _longest_first(
        self, items: list[tuple[str, str]], limits: Limits, threads: ThreadPoolExecutor
    ) -> list[int]:
        """Indices of ``items``, longest expected first (module docstring): by full-table scans, then plan
        steps; ties, and a database without a plan, keep their order (~15 us per statement)."""
        by_db: dict[str, list[int]] = {}
        for i, (db_path, _) in enumerate(items):
            by_db.setdefault(db_path, []).append(i)
        plans = {
            db: threads.submit(self._plan_one, db, [items[i][1] for i in at], limits)
            for db, at in by_db.items()
        }
        cost: dict[int, tuple[int, int]] = {}
        for db, at in by_db.items():
            scores = plans[db].result()
            cost.update(zip(at, scores or [(0, 0)] * len(at)))
        return sorted(range(len(items)), key=lambda i: (-cost[i][0], -cost[i][1]))

    def _plan_one(self, db_path: str, statements: list[str], limits: Limits) -> tuple | None:
        worker = self._pool.get()
        try:
            scores = worker.call(("plan", db_path, statements), limits.timeout_s + _KILL_GRACE_S)
        finally:
            self._pool.put(worker)
        if scores is None:  # the worker was killed (and is restarted on its next request)
            logger.warning(
                "no query plan for %d statements on %s: they run in the given order", len(statements), db_path
            )
        return scores

    def _run_one(self, db_path: str, sql: str, limits: Limits) -> tuple[ExecResult, int | None]:
        """Run on a free worker; returns the result and its size in bytes for the cache (``None``: not cacheable)."""
        worker = self._pool.get()
        try:
            started = time.monotonic()
            for attempt in (1, 2):
                reply = worker.request(db_path, sql, limits)
                if isinstance(reply, tuple):
                    status, rows, columns, error, worker_elapsed, infra, size = reply[:7]
                    with self._lock:
                        self.stats["executed"] += 1
                        self.stats["infra_failures"] += infra
                    result = ExecResult(
                        status=ExecStatus(status),
                        rows=tuple(rows),
                        columns=tuple(columns),
                        error=error,
                        elapsed_s=worker_elapsed,
                        infra=infra,
                    )
                    return result, None if infra else size
                with self._lock:
                    self.stats["worker_kills"] += 1
                if not reply.died:  # stopped by the parent: cached unless starved (no verdict)
                    stopped = self._stopped(reply, sql, limits, time.monotonic() - started)
                    return stopped, None if reply.starved else 0
                logger.warning(
                    "sandbox worker died (attempt %d, exit %s): %.200s", attempt, reply.signal, sql
                )
            # Two fresh workers died on this query. Is it the query, or is the sandbox itself broken?
            stderr = worker.stderr_tail()
            if not isinstance(worker.request(db_path, "SELECT 1", limits), tuple):
                raise SandboxError(
                    "sandbox workers die even on 'SELECT 1' (an infrastructure failure, not a verdict); "
                    f"last worker stderr:\n{stderr or worker.stderr_tail()}"
                )
            # Killed from outside both times (SIGKILL: the OOM killer, an operator) is the machine; any other
            # death the query reproduced on its own is the query's.
            infra = reply.signal == -signal.SIGKILL
            with self._lock:
                self.stats["infra_failures"] += infra
            result = ExecResult(
                status=ExecStatus.ERROR,
                error=f"the query crashed the sandbox worker twice (exit status {reply.signal})",
                elapsed_s=time.monotonic() - started,
                infra=infra,
            )
            return result, None
        finally:
            self._pool.put(worker)

    def _stopped(self, outcome: _Outcome, sql: str, limits: Limits, elapsed: float) -> ExecResult:
        """The result of a query the parent stopped: its CPU time used up inside one SQLite step (the query's
        fault), or starved of CPU until the wall-clock cap (the machine's)."""
        if outcome.starved:
            logger.warning(
                "the machine gave a query %.2f s of CPU in %.1f s (deadline %g s): no verdict: %.200s",
                outcome.cpu_s,
                elapsed,
                limits.timeout_s,
                sql,
            )
            with self._lock:
                self.stats["infra_failures"] += 1
            why = f"the machine gave the query {outcome.cpu_s:.2f} s of CPU in {elapsed:.1f} s (too busy to judge it)"
            return ExecResult(ExecStatus.TIMEOUT, error=f"killed: {why}", elapsed_s=elapsed, infra=True)
        if outcome.cpu_s >= limits.timeout_s:
            why = f"{limits.timeout_s:g} s of CPU time used up inside one SQLite step"
        else:
            why = (
                f"{outcome.cpu_s:.2f} s of CPU time, more than half of {limits.timeout_s:g} s, and still running "
                f"at the {elapsed:.1f} s wall-clock cap"
            )
        return ExecResult(status=ExecStatus.TIMEOUT, error=f"killed: {why}", elapsed_s=elapsed)

    def _remember(self, key: tuple, result: ExecResult, size: int) -> None:
        if not self.cache_size:
            return
        if len(result.rows) > self.cache_max_rows // 16 or size > self.cache_max_bytes // 16:
            return
        self._cache[key] = (result, size)
        self._cache_rows += len(result.rows)
        self._cache_bytes += size
        while (
            len(self._cache) > self.cache_size
            or self._cache_rows > self.cache_max_rows
            or self._cache_bytes > self.cache_max_bytes
        ):
            _, (old, old_size) = self._cache.popitem(last=False)
            self._cache_rows -= len(old.rows)
            self._cache_bytes -= old_size


@functools.lru_cache(maxsize=4096)
def _resolved(db_path: str) -> str:
    return str(Path(db_path).resolve())


def _db_identity(db_path: str) -> tuple[str, int, int]:
    """(resolved path, size, mtime) of a database file: the cache key that a change of the file invalidates."""
    try:
        st = os.stat(db_path)
    except FileNotFoundError:
        raise FileNotFoundError(f"database not found: {db_path}") from None
    if not stat.S_ISREG(st.st_mode):
        raise FileNotFoundError(f"database is not a file: {db_path}")
    return (_resolved(db_path), st.st_size, st.st_mtime_ns)


def _default_workers() -> int:
    """This process's share of the cores it may run on: ``max(1, cores // LOCAL_WORLD_SIZE)`` (the training
    processes of the node, as ``accelerate launch`` and ``torchrun`` set it; each owns a sandbox).

    >>> 1 <= _default_workers() <= (os.cpu_count() or 1)
    True
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    local = os.environ.get("LOCAL_WORLD_SIZE", "1")
    try:
        processes = int(local)
    except ValueError:
        logger.warning("LOCAL_WORLD_SIZE=%r is not a number: sizing the sandbox for one process", local)
        processes = 1
    return max(1, cores // max(1, processes))
