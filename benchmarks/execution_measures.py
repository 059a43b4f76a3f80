"""Measures of ``bench_execution.py`` outside the three paths' loads: the per-query overhead on trivial
queries, each runaway family's time to its verdict alone, and the peak RSS growth for results just under the
byte budget (with :func:`peak_rss_growth_mb`, which the sandbox's memory tests share). What they show and the
recorded numbers: ``benchmarks/README.md``.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

from bird_baseline import run_bird_style
from execution_loads import REGIONS, RUNAWAY_FAMILIES, RUNAWAY_TIMEOUT_S
from execution_paths import cpu_seconds, cpu_since

from slmsql_hub.sql import Limits, Sandbox


def measure_overhead(db_path: str | os.PathLike, n: int = 2000, timeout_s: float = 5.0) -> dict[str, float]:
    """Microseconds per trivial query: plain sqlite3; one sandbox call at a time (a round trip to one warm
    worker; also in CPU microseconds, the worker's included, its start-up amortised over the ``n`` calls);
    one ``execute_many`` batch over all workers; and the BIRD-style evaluator on ``n // 2`` trivial pairs
    (two queries each). Every SQL string is distinct: no cache hits."""
    db = str(db_path)
    sqls = [
        f"SELECT name FROM region WHERE region_id = {i % len(REGIONS) + 1} AND {i} >= 0" for i in range(n)
    ]
    conn = sqlite3.connect(db)
    try:
        cpu_before = cpu_seconds()
        started = time.perf_counter()
        for sql in sqls:
            conn.execute(sql).fetchall()
        direct = time.perf_counter() - started
        direct_cpu = cpu_since(cpu_before)
    finally:
        conn.close()
    limits = Limits(timeout_s=timeout_s)
    cpu_before = cpu_seconds()
    with Sandbox(limits, workers=1) as sandbox:
        sandbox.execute(db, "SELECT 1")  # start the worker and open the database
        started = time.perf_counter()
        for sql in sqls:
            sandbox.execute(db, sql)
        single = time.perf_counter() - started
    single_cpu = cpu_since(cpu_before)  # the worker is reaped by close(): its CPU is in
    bird_sqls = [sql.replace(">= 0", ">= -2") for sql in sqls]
    bird_s = run_bird_style(bird_sqls[: n // 2], bird_sqls[n // 2 :], [db] * (n // 2), timeout_s)[1]
    with Sandbox(limits) as sandbox:
        sandbox.execute_many([(db, f"SELECT {i}") for i in range(2 * sandbox.workers)])  # start every worker
        batch_sqls = [sql.replace(">= 0", ">= -1") for sql in sqls]
        started = time.perf_counter()
        sandbox.execute_many([(db, sql) for sql in batch_sqls])
        batch = time.perf_counter() - started
        workers = sandbox.workers
    return {
        "queries": n,
        "sqlite3_us": 1e6 * direct / n,
        "sandbox_execute_us": 1e6 * single / n,
        "sandbox_overhead_us": 1e6 * (single - direct) / n,
        "sqlite3_cpu_us": 1e6 * direct_cpu / n,
        "sandbox_execute_cpu_us": 1e6 * single_cpu / n,
        "sandbox_execute_many_us": 1e6 * batch / n,
        "execute_many_workers": workers,
        "bird_style_us": 1e6 * bird_s / n,
    }


# ----------------------------------------------------------------------------------------------------------
# Runaways alone, and memory: peak RSS growth of this process and its workers for big results
# ----------------------------------------------------------------------------------------------------------
def peak_rss_growth_mb(run) -> tuple[object, float]:
    """``run()``'s return value and the peak growth of the RSS summed over this process and its children
    (sampled every 10 ms), against the sum just before ``run`` started."""
    import psutil

    me = psutil.Process()

    def total_rss() -> int:
        total = 0
        for p in [me, *me.children(recursive=True)]:
            try:
                total += p.memory_info().rss
            except psutil.NoSuchProcess:
                pass
        return total

    baseline, peak, stop = total_rss(), [0], threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], total_rss())
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        out = run()
    finally:
        stop.set()
        sampler.join()
    return out, (max(peak[0], baseline) - baseline) / 2**20


def measure_runaway_times(db_path: str | os.PathLike, timeout_s: float = RUNAWAY_TIMEOUT_S) -> list[dict]:
    """Each of :data:`RUNAWAY_FAMILIES` alone on a warm worker under ``Limits(timeout_s)`` and the default op
    budget (1e9, far past ``timeout_s``: the time limit decides): wall seconds to the verdict, and the verdict."""
    out = []
    with Sandbox(Limits(timeout_s=timeout_s), workers=1) as sandbox:
        sandbox.execute(str(db_path), "SELECT 1")
        for k, family in enumerate(RUNAWAY_FAMILIES):
            started = time.perf_counter()
            result = sandbox.execute(str(db_path), family.format(k=1000 + k))
            seconds = time.perf_counter() - started
            out.append(
                {"sql": family, "seconds": seconds, "status": result.status.value, "infra": result.infra}
            )
    return out


def measure_result_memory(work_dir: Path, value_bytes: int = 900_000) -> dict[str, float]:
    """Peak RSS growth (MB) of this process and the sandbox's workers for one, then two at once, results just
    under the default byte budget (blobs of ``value_bytes``), on warm workers."""
    path = work_dir / "blobs.sqlite"
    if not path.is_file():
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE t (x INTEGER)")
            conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(1000)])
        conn.close()
    budget = Limits().max_result_bytes
    n = budget // value_bytes
    sqls = [
        f"SELECT randomblob({value_bytes}) FROM t LIMIT {n}",
        f"SELECT randomblob({value_bytes}), x FROM t LIMIT {n}",
    ]
    with Sandbox(Limits(timeout_s=60), workers=2) as sandbox:
        sandbox.execute_many([(str(path), "SELECT 1"), (str(path), "SELECT 2")])  # both workers started
        one, one_mb = peak_rss_growth_mb(lambda: sandbox.execute(str(path), sqls[0] + " -- alone"))
        del one
        two, two_mb = peak_rss_growth_mb(lambda: sandbox.execute_many([(str(path), sql) for sql in sqls]))
        assert all(r.ok for r in two), [r.error for r in two]
    return {
        "result_mb": n * value_bytes / 1e6,
        "budget_mb": budget / 1e6,
        "one_mb": one_mb,
        "two_at_once_mb": two_mb,
    }
