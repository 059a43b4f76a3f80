"""Benchmark of the execution core on GRPO-like loads: the sandbox's batch path against the physical limit
and against a faithful BIRD-style evaluator, each defending against a runaway query the way it ships.

The database and the loads are in ``execution_loads.py`` (a retail database built by the world's generator):
the default load (``--questions``, heavy joins, paths (a), (b) and (c)), the long-tail load
(``--longtail-questions``, indexed lookups and the runaway last, 2 s deadline, paths (a) and (b)) and the
runaway load (``--runaway-questions``, the default load's shape with about 5 % of its distinct statements
runaways of six families, 2 s, paths (a) and (b)).

(a) the physical limit: every distinct (database, SQL) once, serially, plain ``sqlite3``, the total divided
    by ``os.cpu_count()``; a progress handler counts VDBE instructions and stops a query at the op budget or
    the deadline. Unless ``--max-ops`` is given the budget is calibrated here (``--ops-factor`` x the
    heaviest query that finished, rounded up).
(b) ``Judge(mode="bird").judge_many(...)`` on a NEW sandbox with ``Limits(timeout_s, max_ops=<that budget>)``.
(c) a BIRD-style evaluator: a ``multiprocessing.Pool``, a new connection per pair, prediction then gold,
    ``func_timeout(--timeout)`` (which cannot stop a thread inside SQLite), ``apply_async`` callbacks.

It prints (b)/(a) for the three loads (target <= 1.25) and (c)/(b) in wall-clock and CPU seconds, the time
to the verdict of each runaway family alone under the time limit (the default op budget never fires first),
the peak RSS growth for two results just under the byte budget at once (target <= 300 MB), the per-query
overhead, and exits 1 when a load contradicts its labels under (a), the sandbox cuts a legitimate query or a
verdict of (b) does not follow from (a), or (b) and (c) disagree where the baseline finished. What it
measures and the recorded numbers: ``benchmarks/README.md``.

Usage::

    python benchmarks/bench_execution.py                      # both loads, temporary work dir
    python benchmarks/bench_execution.py --work-dir /tmp/slmsql-bench --json bench.json
    python benchmarks/bench_execution.py --scale 0.05 --questions 10 --longtail-questions 13 --timeout 5  # quick
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bird_baseline import compare_verdicts, run_bird_style
from execution_loads import (
    LONGTAIL_HEAVY_EVERY,
    LONGTAIL_TIMEOUT_S,
    MAX_SCALE,
    REGIONS,
    RUNAWAY_FAMILIES,
    RUNAWAY_SHARE,
    RUNAWAY_TIMEOUT_S,
    Load,
    build_database,
    build_load,
    database_path,
    with_runaways,
)

from slmsql_hub.sql import ExecStatus, Judge, Judgement, Limits, Sandbox

TARGET_SANDBOX_OVER_LIMIT = 1.25
DEFAULT_TIMEOUT_S = 30.0  # BIRD's evaluator ships meta_time_out = 30.0
DEFAULT_OPS_FACTOR = 5.0  # the calibrated op budget: this many times the heaviest query that finished
CALIBRATION_EVERY = 1000  # VDBE instructions between two calls of path (a)'s counting progress handler


# ----------------------------------------------------------------------------------------------------------
# CPU accounting: wall-clock ratios on a shared machine are noise; CPU seconds say where the work went.
# ----------------------------------------------------------------------------------------------------------
def _cpu_seconds() -> tuple[float, float]:
    """CPU seconds used so far by this process, and by its children that have been waited for."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time(), children.ru_utime + children.ru_stime


def _cpu_since(before: tuple[float, float]) -> float:
    now = _cpu_seconds()
    return (now[0] - before[0]) + (now[1] - before[1])


# ----------------------------------------------------------------------------------------------------------
# (a) The physical limit: each distinct (database, SQL) once, serially, with plain sqlite3 under the same
#     deadline and op budget as the sandbox; the budget is calibrated here unless given.
# ----------------------------------------------------------------------------------------------------------
def calibrated_budget(max_finished_ops: int, factor: float = DEFAULT_OPS_FACTOR) -> int:
    """The op budget for a load whose heaviest finished query ran ``max_finished_ops`` VDBE instructions:
    ``factor`` times that, rounded up to two significant digits.

    >>> calibrated_budget(8_781_000)
    44000000
    >>> calibrated_budget(1234, factor=1.0)
    1300
    """
    raw = max(1, math.ceil(factor * max_finished_ops))
    step = 10 ** max(0, len(str(raw)) - 2)
    return -(-raw // step) * step


@dataclass
class PhysicalLimit:
    """Path (a): every distinct (database, SQL) once, serially; ``limit_s`` is the serial time per core.

    ``max_ops`` is the op budget the final runs used (``None``: deadline only) and ``calibrated`` says whether
    path (a) derived it. ``calibration_s`` is the time of provisional attempts that a calibration cut and ran
    again (not part of ``serial_s``: with a known budget they would not happen)."""

    serial_s: float
    cores: int
    distinct: int
    budget_stops: int
    deadline_stops: int
    errors: int
    cpu_s: float = 0.0
    max_ops: int | None = None
    calibrated: bool = False
    max_finished_ops: int = 0
    calibration_s: float = 0.0
    # (db, sql) -> the set of rows, or None when it failed or was stopped (used to check the load itself)
    rows: dict[tuple[str, str], frozenset | None] = field(repr=False, default_factory=dict)
    # (db, sql) -> real seconds its final run took (until it finished, failed or was stopped)
    seconds: dict[tuple[str, str], float] = field(repr=False, default_factory=dict)
    # (db, sql) -> VDBE instructions counted (to the progress handler's granularity)
    ops: dict[tuple[str, str], int] = field(repr=False, default_factory=dict)
    # (db, sql) -> "budget" or "deadline" when the final run was stopped, None otherwise
    stopped: dict[tuple[str, str], str | None] = field(repr=False, default_factory=dict)

    @property
    def limit_s(self) -> float:
        return self.serial_s / self.cores

    @property
    def timeouts(self) -> int:
        return self.budget_stops + self.deadline_stops


def _run_counted(
    conn: sqlite3.Connection, sql: str, timeout_s: float, max_ops: int | None
) -> tuple[frozenset | None, float, int, str | None, bool]:
    """Run ``sql`` to the end, counting VDBE instructions; stop it at ``max_ops`` or at the deadline.

    Returns ``(rows or None, real elapsed seconds, ops counted, "budget" | "deadline" | None, failed)``."""
    state = {"ops": 0, "stop": None}
    deadline = time.monotonic() + timeout_s

    def progress() -> int:
        state["ops"] += CALIBRATION_EVERY
        if max_ops is not None and state["ops"] > max_ops:
            state["stop"] = "budget"
            return 1
        if time.monotonic() > deadline:
            state["stop"] = "deadline"
            return 1
        return 0

    conn.set_progress_handler(progress, CALIBRATION_EVERY)
    started = time.perf_counter()
    try:
        rows, failed = frozenset(conn.execute(sql).fetchall()), False
    except sqlite3.Error:
        rows, failed = None, state["stop"] is None
    finally:
        elapsed = time.perf_counter() - started
        conn.set_progress_handler(None, 0)
    return rows, elapsed, state["ops"], state["stop"], failed


def time_physical_limit(
    load: Load,
    timeout_s: float,
    cores: int | None = None,
    max_ops: int | None = None,
    ops_factor: float = DEFAULT_OPS_FACTOR,
) -> PhysicalLimit:
    """Run every distinct (database, SQL) once with plain ``sqlite3`` (one connection per database), timing
    each and counting its VDBE instructions with a progress handler (every :data:`CALIBRATION_EVERY`); a
    query is stopped at ``max_ops`` instructions or at ``timeout_s``, whichever comes first, and counts
    with its real elapsed time.

    With ``max_ops=None`` the budget is calibrated on the way: ``ops_factor`` times the largest count among
    the queries that finished, rounded up (:func:`calibrated_budget`). In first-seen order a query runs under
    the provisional budget of the queries finished before it; one cut by a provisional budget is run again,
    after the pass, under the budget of everything that finished (repeated until the budget stops growing),
    so the final budget never cuts a query that finishes below it, whatever the order. Those first attempts
    are reported as ``calibration_s``, not counted in ``serial_s``."""
    cores = cores or os.cpu_count() or 1
    calibrate = max_ops is None
    conns: dict[str, sqlite3.Connection] = {}
    limit = PhysicalLimit(0.0, cores, 0, 0, 0, 0, max_ops=max_ops, calibrated=calibrate)
    cpu_before = _cpu_seconds()

    def budget_now() -> int | None:
        if not calibrate:
            return max_ops
        return calibrated_budget(limit.max_finished_ops, ops_factor) if limit.max_finished_ops else None

    def run(request: tuple[str, str], budget: int | None) -> tuple:
        db_path, sql = request
        conn = conns.get(db_path)
        if conn is None:
            conn = conns[db_path] = sqlite3.connect(db_path)
        outcome = _run_counted(conn, sql, timeout_s, budget)
        if outcome[0] is not None:
            limit.max_finished_ops = max(limit.max_finished_ops, outcome[2])
        return outcome

    final: dict[tuple[str, str], tuple] = {}
    try:
        requests = load.distinct_requests()
        deferred = []
        for request in requests:
            outcome = run(request, budget_now())
            if calibrate and outcome[3] == "budget":
                deferred.append(request)
                limit.calibration_s += outcome[1]
            else:
                final[request] = outcome
        while deferred:
            budget = budget_now()
            again = []
            for request in deferred:
                final[request] = outcome = run(request, budget)
                if outcome[3] == "budget":
                    again.append(request)
            if budget_now() == budget:  # nothing that finished raised the budget: the cuts are final
                break
            for request in again:  # the budget grew: what it cut may finish under the new one
                limit.calibration_s += final.pop(request)[1]
            deferred = again
    finally:
        for conn in conns.values():
            conn.close()
    limit.max_ops = budget_now()
    for request in requests:
        rows, elapsed, ops, stop, failed = final[request]
        limit.serial_s += elapsed
        limit.rows[request], limit.seconds[request] = rows, elapsed
        limit.ops[request], limit.stopped[request] = ops, stop
        limit.budget_stops += stop == "budget"
        limit.deadline_stops += stop == "deadline"
        limit.errors += failed
    limit.distinct = len(requests)
    limit.cpu_s = _cpu_since(cpu_before)
    return limit


def check_load(load: Load, limit: PhysicalLimit) -> dict[str, int]:
    """Count samples whose kind the plain-sqlite3 results contradict (a rewrite that does not return the gold's
    rows, a wrong answer that does, an error that runs, a runaway that finishes): all zero for a sound load."""
    problems = Counter()
    db = str(load.db_path)
    for sample, gold in zip(load.samples, load.golds):
        got, want = limit.rows[(db, sample.sql)], limit.rows[(db, gold)]
        if want is None:
            problems["gold_failed"] += 1
        elif sample.kind in ("identical", "rewrite") and got != want:
            problems[f"{sample.kind}_differs"] += 1
        elif sample.kind == "wrong" and (got is None or got == want):
            problems["wrong_matches_or_fails"] += 1
        elif sample.kind in ("error", "runaway") and got is not None:
            problems[f"{sample.kind}_ran"] += 1
    return dict(problems)


def baseline_serial_work(load: Load, limit: PhysicalLimit, timeout_s: float) -> tuple[float, int]:
    """What a BIRD-style evaluator must do, from path (a)'s results: ``(serial seconds, SQLite executions)``.

    Every pair runs its prediction, and its gold too unless the prediction failed or did not finish (nothing
    is deduplicated). A prediction that did not finish in (a) costs the baseline the whole ``timeout_s`` (and
    its thread goes on running after that, which this does not count)."""
    db = str(load.db_path)
    seconds, executions = 0.0, 0
    for sample, gold in zip(load.samples, load.golds):
        pred = (db, sample.sql)
        executions += 1
        if limit.stopped[pred] is not None:
            seconds += timeout_s
        else:
            seconds += limit.seconds[pred]
        if limit.rows[pred] is not None:
            seconds += limit.seconds[(db, gold)]
            executions += 1
    return seconds, executions


# ----------------------------------------------------------------------------------------------------------
# (b) The metric's batch path: Judge(mode="bird").judge_many on a new sandbox with the same limits.
# ----------------------------------------------------------------------------------------------------------
@dataclass
class SandboxRun:
    """Path (b): wall and CPU seconds (this process and its workers), the judgements, the sandbox's stats, the
    seconds SQLite spent inside the workers (summed over the executions, as the workers timed them), and how
    many executions the op budget and the deadline stopped."""

    seconds: float
    cpu_s: float
    judgements: list[Judgement] = field(repr=False)
    stats: dict
    in_worker_s: float
    budget_stops: int = 0
    deadline_stops: int = 0


def time_sandbox(
    load: Load, timeout_s: float, workers: int | None = None, max_ops: int | None = None
) -> SandboxRun:
    """Judge the whole load in one ``judge_many`` call on a NEW sandbox with
    ``Limits(timeout_s=timeout_s, max_ops=max_ops)`` (cold cache; worker start-up timed).

    CPU seconds include the worker processes (counted once they are closed and reaped)."""
    cpu_before = _cpu_seconds()
    started = time.perf_counter()
    sandbox = Sandbox(Limits(timeout_s=timeout_s, max_ops=max_ops), workers=workers)
    try:
        judge = Judge(sandbox, mode="bird")
        judgements = judge.judge_many(load.predictions, load.golds, load.db_paths)
        elapsed = time.perf_counter() - started
        stats = dict(sandbox.stats)
    finally:
        sandbox.close()
    executed = {}  # one entry per execution: duplicates and cache hits come back marked ``cached``
    for judgement in judgements:
        for result in (judgement.pred, judgement.gold):
            if result is not None and not result.cached:
                executed[id(result)] = result
    stops = Counter(_stop_reason(result) for result in executed.values())
    in_worker = sum(result.elapsed_s for result in executed.values())
    return SandboxRun(
        elapsed, _cpu_since(cpu_before), judgements, stats, in_worker, stops["budget"], stops["deadline"]
    )


def _stop_reason(result) -> str | None:
    """``"budget"`` or ``"deadline"`` for a timed-out sandbox result (from its error text), else ``None``."""
    if result is None or result.status is not ExecStatus.TIMEOUT:
        return None
    return "budget" if "op budget" in (result.error or "") else "deadline"


def check_against_limit(load: Load, limit: PhysicalLimit, judgements: Sequence[Judgement]) -> dict:
    """Do the judge's verdicts follow from path (a)'s plain-sqlite3 results, and did the sandbox's limits stop
    only the runaway?

    ``budget_cuts`` lists the samples whose prediction or gold the sandbox stopped (op budget or deadline)
    although the query is legitimate: not the load's runaway, or it finished in (a). ``disagreeing`` lists
    the samples whose verdict does not follow from (a)'s results (in ``bird`` mode a sample is correct exactly
    when its prediction finished in (a) with the gold's set of rows). Both must be empty."""
    db = str(load.db_path)
    cuts, disagreeing = [], []
    for i, (sample, gold, judgement) in enumerate(zip(load.samples, load.golds, judgements)):
        pred_rows, gold_rows = limit.rows[(db, sample.sql)], limit.rows[(db, gold)]
        pred_legitimate = sample.kind != "runaway" or pred_rows is not None
        pred_cut = pred_legitimate and judgement.pred_status is ExecStatus.TIMEOUT
        if pred_cut or judgement.gold_status is ExecStatus.TIMEOUT:  # every gold is legitimate
            cuts.append(i)
        expected = int(pred_rows is not None and pred_rows == gold_rows) if gold_rows is not None else None
        if judgement.correct != expected:
            disagreeing.append(i)
    return {"budget_cuts": cuts, "disagreeing": disagreeing}


# ----------------------------------------------------------------------------------------------------------
# (c) The BIRD-style baseline (bird_baseline.py), timed with its CPU
# ----------------------------------------------------------------------------------------------------------
@dataclass
class BaselineRun:
    """Path (c): wall and CPU seconds (this process and the pool's), one result per sample (``None``: lost)."""

    seconds: float
    cpu_s: float
    results: list[dict | None] = field(repr=False)


def time_bird_baseline(load: Load, timeout_s: float, num_cpus: int | None = None) -> BaselineRun:
    """Run the load through the BIRD-style evaluator (``num_cpus`` pool processes, default every core); the
    CPU of a timed-out query that keeps running in its pool process is counted, as it is paid."""
    cpu_before = _cpu_seconds()
    results, seconds = run_bird_style(load.predictions, load.golds, load.db_paths, timeout_s, num_cpus)
    return BaselineRun(seconds, _cpu_since(cpu_before), results)


# ----------------------------------------------------------------------------------------------------------
# Verdict agreement and per-query overhead
# ----------------------------------------------------------------------------------------------------------
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
        cpu_before = _cpu_seconds()
        started = time.perf_counter()
        for sql in sqls:
            conn.execute(sql).fetchall()
        direct = time.perf_counter() - started
        direct_cpu = _cpu_since(cpu_before)
    finally:
        conn.close()
    limits = Limits(timeout_s=timeout_s)
    cpu_before = _cpu_seconds()
    with Sandbox(limits, workers=1) as sandbox:
        sandbox.execute(db, "SELECT 1")  # start the worker and open the database
        started = time.perf_counter()
        for sql in sqls:
            sandbox.execute(db, sql)
        single = time.perf_counter() - started
    single_cpu = _cpu_since(cpu_before)  # the worker is reaped by close(): its CPU is in
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
# Memory: peak RSS growth of this process and its workers for results just under the byte budget
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


# ----------------------------------------------------------------------------------------------------------
# The command line
# ----------------------------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Time the execution core on GRPO-like loads against the physical limit and a BIRD-style "
        "evaluator, each with its own defence against a runaway query, and check that their verdicts agree."
    )
    add = parser.add_argument
    add("--questions", type=int, default=40, help="questions in the default load (default 40)")
    add("--samples", type=int, default=8, help="samples per question (default 8)")
    add("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="deadline per query of the default load, "
        "the same for every path, s (default 30: BIRD's meta_time_out)")  # fmt: skip
    add("--max-ops", type=int, default=None, help="op budget (VDBE instructions) of paths (a) and (b) "
        "(default: calibrated in path (a) as --ops-factor times the heaviest query that finished)")  # fmt: skip
    add("--ops-factor", type=float, default=DEFAULT_OPS_FACTOR, help="margin of the calibrated op budget "
        "over the heaviest finished query (default 5)")  # fmt: skip
    add(
        "--work-dir",
        default=None,
        help="where the database is built and reused (default: a temporary folder)",
    )
    add("--seed", type=int, default=0, help="seed of the database and the loads (default 0)")
    add(
        "--scale",
        type=float,
        default=1.0,
        help=f"database size factor (default 1: about 30 MB; at most {MAX_SCALE:g})",
    )
    add("--overhead-queries", type=int, default=2000, help="trivial queries timed for the overhead")
    add("--skip-baseline", action="store_true", help="time (a) and (b) only (no baseline): for profiling")
    add("--longtail-questions", type=int, default=48, help="questions of the long-tail load, timed with (a) "
        "and (b) in the same run (default 48; 0: skip it)")  # fmt: skip
    add("--runaway-questions", type=int, default=40, help="questions of the runaway load (the default load's "
        f"shape with {RUNAWAY_SHARE:.0%} of the distinct statements runaways), timed with (a) and (b) in the "
        "same run (default 40; 0: skip it)")  # fmt: skip
    add("--json", metavar="OUT", default=None, help="write every number to this JSON file")
    return parser


def _against(ratio: float, target: float) -> str:
    return f"target <= {target:g}: {'PASS' if ratio <= target else 'MISS'}"


def measure_limit_and_sandbox(load: Load, timeout_s: float, max_ops: int | None, ops_factor: float) -> tuple:
    """Paths (a) and (b) on one load, side by side, printed; returns ``(limit, sandbox run, numbers)``."""
    cores = os.cpu_count() or 1
    print("(a) physical limit: every distinct (db, SQL) once, serially, plain sqlite3 ...", flush=True)
    limit = time_physical_limit(load, timeout_s, cores, max_ops, ops_factor)
    problems = check_load(load, limit)
    calibration = (
        f"calibrated: {ops_factor:g}x the heaviest finished query ({limit.max_finished_ops:,} ops), rounded up; "
        f"provisional attempts cut and run again: {limit.calibration_s:.2f} s, not counted"
        if limit.calibrated
        else "given"
    )
    print(
        f"    op budget {'none' if limit.max_ops is None else f'{limit.max_ops:,}'} ({calibration})\n"
        f"    {limit.distinct} distinct ({limit.budget_stops} stopped by the op budget, {limit.deadline_stops} "
        f"by the deadline, {limit.errors} errors): serial {limit.serial_s:.2f} s / {cores} cores = "
        f"{limit.limit_s:.2f} s; CPU {limit.cpu_s:.2f} s"
    )
    for request, stop in [(r, stop) for r, stop in limit.stopped.items() if stop is not None][:5]:
        print(f"    stopped by the {stop} after {limit.seconds[request]:.2f} s: {request[1][:90]}")
    if problems:
        print(f"    ERROR: the load contradicts its own labels (too small an op budget?): {problems}")
    print(
        f"(b) Judge(mode='bird').judge_many on a new Sandbox(Limits(timeout_s={timeout_s:g}, "
        f"max_ops={limit.max_ops})) ...",
        flush=True,
    )
    sandbox = time_sandbox(load, timeout_s, max_ops=limit.max_ops)
    over_limit = sandbox.seconds / limit.limit_s
    checked = check_against_limit(load, limit, sandbox.judgements)
    print(
        f"    {sandbox.seconds:.2f} s: (b)/(a) = {over_limit:.2f} ({_against(over_limit, TARGET_SANDBOX_OVER_LIMIT)})"
        f"\n    CPU {sandbox.cpu_s:.2f} s: (b)/(a) CPU = {sandbox.cpu_s / limit.cpu_s:.2f}; it ran on "
        f"{sandbox.cpu_s / sandbox.seconds:.1f} of the {cores} cores on average; SQLite time inside "
        f"the workers {sandbox.in_worker_s:.2f} s ({sandbox.in_worker_s / limit.serial_s:.2f}x path (a)'s "
        f"serial); {sandbox.budget_stops} stopped by the op budget, {sandbox.deadline_stops} by the deadline; "
        f"stats {sandbox.stats}\n    samples with a legitimate query cut by the sandbox's limits: "
        f"{len(checked['budget_cuts'])}; verdicts contradicting path (a)'s results: {len(checked['disagreeing'])}"
    )
    if checked["budget_cuts"] or checked["disagreeing"]:
        print(
            f"    ERROR: samples cut {checked['budget_cuts'][:20]}, disagreeing {checked['disagreeing'][:20]}"
            " (raise --max-ops or --ops-factor)"
        )
    numbers = {
        "load": {
            "predictions": len(load.samples),
            "kinds": load.kind_counts(),
            "distinct_requests": limit.distinct,
            "timeout_s": timeout_s,
            "label_problems": problems,
        },
        "physical_limit": {
            **{k: getattr(limit, k) for k in ("serial_s", "cores", "limit_s", "cpu_s", "max_ops", "errors")},
            **{
                k: getattr(limit, k)
                for k in ("max_finished_ops", "calibration_s", "budget_stops", "deadline_stops")
            },
            "max_ops_calibrated": limit.calibrated,
        },
        "sandbox": {
            **{
                k: getattr(sandbox, k)
                for k in ("seconds", "cpu_s", "in_worker_s", "budget_stops", "deadline_stops")
            },
            "cores_used_on_average": sandbox.cpu_s / sandbox.seconds,
            "executions": sandbox.stats["executed"],
            "stats": sandbox.stats,
            "legitimate_cut": checked["budget_cuts"],
            "disagreeing_with_limit": checked["disagreeing"],
        },
        "ratios": {
            "sandbox_over_limit": over_limit,
            "sandbox_over_limit_target": TARGET_SANDBOX_OVER_LIMIT,
            "sandbox_cpu_over_limit_cpu": sandbox.cpu_s / limit.cpu_s,
        },
    }
    return limit, sandbox, numbers


def _time_baseline(
    load: Load, limit: PhysicalLimit, sandbox: SandboxRun, timeout_s: float, numbers: dict
) -> None:
    """Path (c) on the default load and its verdict agreement with (b): printed and added to ``numbers``."""
    cores = os.cpu_count() or 1
    work, executions = baseline_serial_work(load, limit, timeout_s)
    print(
        f"(c) BIRD-style evaluator: Pool({cores}), apply_async, func_timeout({timeout_s:g}), new connection per "
        f"pair, prediction then gold ...\n    work: {executions} SQLite executions vs (b)'s "
        f"{sandbox.stats['executed']} ({executions / sandbox.stats['executed']:.1f}x); at least {work:.1f} s of "
        f"serial SQLite time vs (a)'s {limit.serial_s:.1f} s ({work / limit.serial_s:.1f}x)",
        flush=True,
    )
    baseline = time_bird_baseline(load, timeout_s, cores)
    over_sandbox = baseline.seconds / sandbox.seconds
    print(
        f"    {baseline.seconds:.2f} s: (c)/(b) = {over_sandbox:.1f} (no target: (b) runs near the limit (a), so "
        f"(c)/(b) is bounded by (c)'s work over (a)'s, {work / limit.serial_s:.1f}x on this load)\n"
        f"    CPU {baseline.cpu_s:.2f} s: (c)/(b) CPU = {baseline.cpu_s / sandbox.cpu_s:.1f}; it ran on "
        f"{baseline.cpu_s / baseline.seconds:.1f} of the {cores} cores on average"
    )
    agreement = compare_verdicts(sandbox.judgements, baseline.results)
    print(
        f"verdicts: {agreement['compared']} compared where the baseline finished "
        f"({agreement['baseline_unfinished']} baseline timeouts, {agreement['baseline_lost']} lost): "
        f"{agreement['disagreements']} disagreements"
    )
    for row, n in agreement["table"].items():
        print(f"    {n:4d}  judge {row}")
    if agreement["disagreements"]:
        print(f"    disagreeing samples: {agreement['disagreeing_indices'][:20]}")
    numbers["baseline"] = {
        "seconds": baseline.seconds,
        "cpu_s": baseline.cpu_s,
        "serial_work_s": work,
        "executions": executions,
    }
    numbers["ratios"].update(
        {
            "baseline_over_sandbox": over_sandbox,
            "baseline_cpu_over_sandbox_cpu": baseline.cpu_s / sandbox.cpu_s,
            "baseline_executions_over_sandbox_executions": executions / sandbox.stats["executed"],
            "baseline_work_over_limit_work": work / limit.serial_s,
        }
    )
    numbers["verdicts"] = agreement


def _measure_other_loads(args: argparse.Namespace, db_path: Path, numbers: dict) -> None:
    """(a) and (b) on the long-tail load and on the runaway load, into ``numbers["longtail"]`` / ``["runaways"]``."""
    if args.longtail_questions:
        longtail = build_load(db_path, args.longtail_questions, args.samples, args.seed, longtail=True)
        print(
            f"long-tail load: {args.longtail_questions} questions x {args.samples} samples ("
            + ", ".join(f"{k} {n}" for k, n in longtail.kind_counts().items())
            + f"): indexed lookups, one question in {LONGTAIL_HEAVY_EVERY} a heavy join, the runaway last; "
            f"deadline {LONGTAIL_TIMEOUT_S:g} s; load average {os.getloadavg()[0]:.1f}"
        )
        tail = measure_limit_and_sandbox(longtail, LONGTAIL_TIMEOUT_S, args.max_ops, args.ops_factor)
        numbers["longtail"] = tail[2]
    if args.runaway_questions:
        base = build_load(db_path, args.runaway_questions, args.samples, args.seed)
        runaways = with_runaways(base, RUNAWAY_SHARE, args.seed)
        n_run = runaways.kind_counts()["runaway"]
        n_distinct = len(runaways.distinct_requests())
        print(
            f"runaway load: the default load's shape ({args.runaway_questions} questions x {args.samples}) with "
            f"{n_run} of its {n_distinct} distinct statements ({n_run / n_distinct:.1%}) runaways of six "
            f"families; time limit {RUNAWAY_TIMEOUT_S:g} s; load average {os.getloadavg()[0]:.1f}"
        )
        tail = measure_limit_and_sandbox(runaways, RUNAWAY_TIMEOUT_S, args.max_ops, args.ops_factor)
        numbers["runaways"] = tail[2]
        numbers["runaways"]["load"]["runaway_share"] = n_run / n_distinct
        stops = [
            j.pred.elapsed_s for s, j in zip(runaways.samples, tail[1].judgements) if s.kind == "runaway"
        ]
        print(
            f"    runaways judged after {min(stops):.2f}-{max(stops):.2f} s each (their own time in the sandbox)"
        )


def _measure_alone(db_path: Path, work_dir: Path, args: argparse.Namespace, numbers: dict) -> None:
    """The runaway families alone, the result memory and the per-query overhead, into ``numbers``."""
    times = measure_runaway_times(db_path)
    print(
        f"runaway families alone, timeout_s={RUNAWAY_TIMEOUT_S:g} and the default op budget (the time limit "
        f"decides): verdict after "
        + ", ".join(
            f"{t['seconds']:.2f} s ({t['status']}" + (", infra)" if t["infra"] else ")") for t in times
        )
        + f"; slowest {max(t['seconds'] for t in times):.2f} s (target <= {RUNAWAY_TIMEOUT_S + 1:g} s on free "
        f"cores, <= {2 * RUNAWAY_TIMEOUT_S + 1.5:g} s on busy ones); load average {os.getloadavg()[0]:.1f}"
    )
    numbers["runaway_times"] = times
    memory = measure_result_memory(work_dir)
    print(
        f"memory: a result of {memory['result_mb']:.1f} MB (byte budget {memory['budget_mb']:.1f} MB): peak RSS "
        f"growth of this process and the workers {memory['one_mb']:.0f} MB alone, {memory['two_at_once_mb']:.0f}"
        f" MB for two at once ({_against(memory['two_at_once_mb'], 300)})"
    )
    numbers["memory"] = memory

    overhead = measure_overhead(db_path, args.overhead_queries, args.timeout)
    print(
        f"per-query overhead on trivial queries ({overhead['queries']} distinct): sqlite3 "
        f"{overhead['sqlite3_us']:.0f} us, sandbox execute {overhead['sandbox_execute_us']:.0f} us "
        f"(+{overhead['sandbox_overhead_us']:.0f} us), execute_many over {overhead['execute_many_workers']} "
        f"workers {overhead['sandbox_execute_many_us']:.0f} us/query, BIRD-style "
        f"{overhead['bird_style_us']:.0f} us/query\n    CPU per query: sqlite3 {overhead['sqlite3_cpu_us']:.0f} us, "
        f"sandbox execute {overhead['sandbox_execute_cpu_us']:.0f} us (this process and the worker)"
    )
    numbers["overhead"] = overhead


def run_benchmark(args: argparse.Namespace) -> dict:
    """Run the three paths on the default load, (a) and (b) on the long-tail load, and the overhead
    measurement; returns every number (what ``--json`` writes)."""
    cores = os.cpu_count() or 1
    load_before = os.getloadavg()
    own_dir = args.work_dir is None
    work_dir = Path(tempfile.mkdtemp(prefix="slmsql-bench-")) if own_dir else Path(args.work_dir)
    try:
        started = time.perf_counter()
        cached = database_path(work_dir, args.seed, args.scale).is_file()
        db_path = build_database(work_dir, args.seed, args.scale)
        size_mb = db_path.stat().st_size / 1e6
        how = "reused" if cached else "built"
        print(f"database: {db_path} ({size_mb:.1f} MB, {how} in {time.perf_counter() - started:.1f} s)")
        db_path.read_bytes()  # warm the OS file cache so that no path pays the first disk read
        load = build_load(db_path, args.questions, args.samples, args.seed)
        budget_how = (
            f"{args.max_ops:,} (given)" if args.max_ops else f"calibrated in (a), {args.ops_factor:g}x"
        )
        print(
            f"load: {args.questions} questions x {args.samples} samples = {len(load.samples)} predictions ("
            + ", ".join(f"{k} {n}" for k, n in load.kind_counts().items())
            + f"); {cores} cores; load average {load_before[0]:.1f} / {load_before[1]:.1f} / {load_before[2]:.1f}"
            f" (1 / 5 / 15 min)\nrunaway defences, each path as shipped: wall-clock deadline {args.timeout:g} s "
            f"for all three (BIRD's meta_time_out is 30 s); op budget {budget_how} for (a) and (b), which "
            "stop SQLite itself at whichever comes first; (c) has func_timeout only, which cannot stop a thread "
            "inside SQLite"
        )
        if load_before[0] > 0.5 * cores:
            print(
                "WARNING: other processes are using the CPUs: wall-clock ratios are unreliable; "
                "the CPU-second figures below are not"
            )
        limit, sandbox, numbers = measure_limit_and_sandbox(load, args.timeout, args.max_ops, args.ops_factor)
        numbers["args"] = {k: v for k, v in vars(args).items() if k != "json"}
        numbers["environment"] = {
            "cores": cores,
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "platform": platform.platform(),
            "load_average_before": list(load_before),
        }
        numbers["database"] = {"path": str(db_path), "size_mb": size_mb}
        if not args.skip_baseline:
            _time_baseline(load, limit, sandbox, args.timeout, numbers)
        _measure_other_loads(args, db_path, numbers)
        ratios = {"default load": numbers["ratios"]["sandbox_over_limit"]}
        for name, key in (("long-tail load", "longtail"), ("runaway load", "runaways")):
            if key in numbers:
                ratios[name] = numbers[key]["ratios"]["sandbox_over_limit"]
        print("(b)/(a), side by side in this run: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()))
        _measure_alone(db_path, work_dir, args, numbers)
        load_after = os.getloadavg()
        numbers["environment"]["load_average_after"] = list(load_after)
        print(f"load average at the end: {load_after[0]:.1f} / {load_after[1]:.1f} / {load_after[2]:.1f}")
        return numbers
    finally:
        if own_dir:
            shutil.rmtree(work_dir, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.questions < 1 or args.samples < 2 or args.timeout <= 0 or not 0 < args.scale <= MAX_SCALE:
        parser.error(
            f"--questions >= 1, --samples >= 2, --timeout > 0 and 0 < --scale <= {MAX_SCALE:g} are required"
        )
    if (args.max_ops is not None and args.max_ops <= 0) or args.ops_factor < 1:
        parser.error("--max-ops must be > 0 and --ops-factor >= 1")
    numbers = run_benchmark(args)
    if args.json:
        Path(args.json).write_text(json.dumps(numbers, indent=2) + "\n")
        print(f"numbers written to {args.json}")
    for part in (numbers, numbers.get("longtail"), numbers.get("runaways")):
        if part and (part["load"]["label_problems"] or part["sandbox"]["legitimate_cut"]):
            return 1
        if part and part["sandbox"]["disagreeing_with_limit"]:
            return 1
    agreement = numbers.get("verdicts")
    if agreement is not None and (agreement["disagreements"] or agreement["baseline_lost"]):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
