"""Paths (a), (b) and (c) of ``bench_execution.py`` on one load, timed with their CPU seconds, and the checks
that tie them together (the load against its labels, (b)'s verdicts against (a)'s rows).

:func:`time_physical_limit` is (a), :func:`time_sandbox` is (b), :func:`time_bird_baseline` is (c) (the
evaluator itself is ``bird_baseline.py``); why they are built this way: ``bench_execution.py`` and
``benchmarks/README.md``.
"""

from __future__ import annotations

import math
import os
import resource
import sqlite3
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from bird_baseline import run_bird_style
from execution_loads import Load

from slmsql_hub.sql import ExecStatus, Judge, Judgement, Limits, Sandbox

DEFAULT_OPS_FACTOR = 5.0  # the calibrated op budget: this many times the heaviest query that finished
CALIBRATION_EVERY = 1000  # VDBE instructions between two calls of path (a)'s counting progress handler


# ----------------------------------------------------------------------------------------------------------
# CPU accounting: wall-clock ratios on a shared machine are noise; CPU seconds say where the work went.
# ----------------------------------------------------------------------------------------------------------
def cpu_seconds() -> tuple[float, float]:
    """CPU seconds used so far by this process, and by its children that have been waited for."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time(), children.ru_utime + children.ru_stime


def cpu_since(before: tuple[float, float]) -> float:
    """CPU seconds of this process and its waited-for children since :func:`cpu_seconds` returned ``before``."""
    now = cpu_seconds()
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


class _CountedRuns:
    """Path (a)'s runs: one ``sqlite3`` connection per database, each run counted by :func:`_run_counted`;
    ``limit.max_finished_ops`` follows the heaviest query that finished."""

    def __init__(self, limit: PhysicalLimit, timeout_s: float, ops_factor: float) -> None:
        self.limit, self.timeout_s, self.ops_factor = limit, timeout_s, ops_factor
        self.conns: dict[str, sqlite3.Connection] = {}

    def budget(self) -> int | None:
        """The given budget, or the one calibrated on the queries finished so far (``None`` before any)."""
        limit = self.limit
        if not limit.calibrated:
            return limit.max_ops
        return calibrated_budget(limit.max_finished_ops, self.ops_factor) if limit.max_finished_ops else None

    def run(self, request: tuple[str, str], budget: int | None) -> tuple:
        """:func:`_run_counted`'s outcome for ``request`` under ``budget``."""
        db_path, sql = request
        conn = self.conns.get(db_path)
        if conn is None:
            conn = self.conns[db_path] = sqlite3.connect(db_path)
        outcome = _run_counted(conn, sql, self.timeout_s, budget)
        if outcome[0] is not None:
            self.limit.max_finished_ops = max(self.limit.max_finished_ops, outcome[2])
        return outcome

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()


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
    limit = PhysicalLimit(0.0, cores, 0, 0, 0, 0, max_ops=max_ops, calibrated=max_ops is None)
    cpu_before = cpu_seconds()
    runs = _CountedRuns(limit, timeout_s, ops_factor)
    try:
        requests = load.distinct_requests()
        final, deferred = _first_pass(runs, requests)
        final.update(_run_again(runs, deferred))
    finally:
        runs.close()
    limit.max_ops = runs.budget()
    _tally(limit, requests, final)
    limit.cpu_s = cpu_since(cpu_before)
    return limit


def _first_pass(runs: _CountedRuns, requests: Sequence[tuple[str, str]]) -> tuple[dict, list]:
    """Every request once, in first-seen order, under the budget of the moment: the final outcomes, and the
    requests that a provisional (calibrating) budget cut, their attempts added to ``calibration_s``."""
    final, deferred = {}, []
    for request in requests:
        outcome = runs.run(request, runs.budget())
        if runs.limit.calibrated and outcome[3] == "budget":
            deferred.append(request)
            runs.limit.calibration_s += outcome[1]
        else:
            final[request] = outcome
    return final, deferred


def _run_again(runs: _CountedRuns, deferred: list[tuple[str, str]]) -> dict:
    """The requests a provisional budget cut, run again under the budget of everything that finished until that
    budget stops growing: their final outcomes (an attempt that a grown budget supersedes goes to
    ``calibration_s``)."""
    final = {}
    while deferred:
        budget = runs.budget()
        again = []
        for request in deferred:
            final[request] = outcome = runs.run(request, budget)
            if outcome[3] == "budget":
                again.append(request)
        if runs.budget() == budget:  # nothing that finished raised the budget: the cuts are final
            break
        for request in again:  # the budget grew: what it cut may finish under the new one
            runs.limit.calibration_s += final.pop(request)[1]
        deferred = again
    return final


def _tally(limit: PhysicalLimit, requests: Sequence[tuple[str, str]], final: dict) -> None:
    """Fill ``limit``'s totals and per-request tables from each request's final outcome."""
    for request in requests:
        rows, elapsed, ops, stop, failed = final[request]
        limit.serial_s += elapsed
        limit.rows[request], limit.seconds[request] = rows, elapsed
        limit.ops[request], limit.stopped[request] = ops, stop
        limit.budget_stops += stop == "budget"
        limit.deadline_stops += stop == "deadline"
        limit.errors += failed
    limit.distinct = len(requests)


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
    cpu_before = cpu_seconds()
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
        elapsed, cpu_since(cpu_before), judgements, stats, in_worker, stops["budget"], stops["deadline"]
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
    cpu_before = cpu_seconds()
    results, seconds = run_bird_style(load.predictions, load.golds, load.db_paths, timeout_s, num_cpus)
    return BaselineRun(seconds, cpu_since(cpu_before), results)


# ----------------------------------------------------------------------------------------------------------
# Verdict agreement and per-query overhead
