"""The measure-and-print phases of ``bench_execution.py``: each prints its lines and adds its numbers (the keys
``--json`` writes) to the dict it is given or returns. What the lines mean: ``bench_execution.py``'s docstring
and ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from bird_baseline import compare_verdicts
from execution_loads import (
    LONGTAIL_HEAVY_EVERY,
    LONGTAIL_TIMEOUT_S,
    RUNAWAY_SHARE,
    RUNAWAY_TIMEOUT_S,
    Load,
    build_load,
    with_runaways,
)
from execution_measures import measure_overhead, measure_result_memory, measure_runaway_times
from execution_paths import (
    PhysicalLimit,
    SandboxRun,
    baseline_serial_work,
    check_against_limit,
    check_load,
    time_bird_baseline,
    time_physical_limit,
    time_sandbox,
)

TARGET_SANDBOX_OVER_LIMIT = 1.25


def measure_limit_and_sandbox(load: Load, timeout_s: float, max_ops: int | None, ops_factor: float) -> tuple:
    """Paths (a) and (b) on one load, side by side, printed; returns ``(limit, sandbox run, numbers)``."""
    cores = os.cpu_count() or 1
    print("(a) physical limit: every distinct (db, SQL) once, serially, plain sqlite3 ...", flush=True)
    limit = time_physical_limit(load, timeout_s, cores, max_ops, ops_factor)
    problems = check_load(load, limit)
    _print_limit(limit, problems, ops_factor, cores)
    print(
        f"(b) Judge(mode='bird').judge_many on a new Sandbox(Limits(timeout_s={timeout_s:g}, "
        f"max_ops={limit.max_ops})) ...",
        flush=True,
    )
    sandbox = time_sandbox(load, timeout_s, max_ops=limit.max_ops)
    checked = check_against_limit(load, limit, sandbox.judgements)
    _print_sandbox(limit, sandbox, checked, cores)
    return limit, sandbox, _limit_and_sandbox_numbers(load, timeout_s, limit, sandbox, problems, checked)


def _print_limit(limit: PhysicalLimit, problems: dict[str, int], ops_factor: float, cores: int) -> None:
    """Path (a)'s lines: its op budget, its stops and times, and the load's label problems."""
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


def _print_sandbox(limit: PhysicalLimit, sandbox: SandboxRun, checked: dict, cores: int) -> None:
    """Path (b)'s lines: (b)/(a) in wall-clock and CPU seconds, its stops, and what (a)'s results contradict."""
    over_limit = sandbox.seconds / limit.limit_s
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


def _limit_and_sandbox_numbers(
    load: Load,
    timeout_s: float,
    limit: PhysicalLimit,
    sandbox: SandboxRun,
    problems: dict[str, int],
    checked: dict,
) -> dict:
    """The numbers of (a) and (b) on one load: ``load``, ``physical_limit``, ``sandbox`` and ``ratios``."""
    return {
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
            "sandbox_over_limit": sandbox.seconds / limit.limit_s,
            "sandbox_over_limit_target": TARGET_SANDBOX_OVER_LIMIT,
            "sandbox_cpu_over_limit_cpu": sandbox.cpu_s / limit.cpu_s,
        },
    }


def measure_baseline(
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


def measure_other_loads(args: argparse.Namespace, db_path: Path, numbers: dict) -> None:
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


def measure_alone(db_path: Path, work_dir: Path, args: argparse.Namespace, numbers: dict) -> None:
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


def _against(ratio: float, target: float) -> str:
    """``"target <= 1.25: PASS"`` (or ``MISS``) for a measured ``ratio``."""
    return f"target <= {target:g}: {'PASS' if ratio <= target else 'MISS'}"
