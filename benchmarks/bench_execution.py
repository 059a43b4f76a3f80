"""Benchmark of the execution core on GRPO-like loads: the sandbox's batch path against the physical limit
and against a faithful BIRD-style evaluator, each defending against a runaway query the way it ships.

The database and the loads are in ``execution_loads.py`` (a retail database built by the world's generator):
the default load (``--questions``, heavy joins, paths (a), (b) and (c)), the long-tail load
(``--longtail-questions``, indexed lookups and the runaway last, 2 s deadline, paths (a) and (b)) and the
runaway load (``--runaway-questions``, the default load's shape with about 5 % of its distinct statements
runaways of six families, 2 s, paths (a) and (b)). The paths and their checks are in ``execution_paths.py``
(path (c)'s evaluator in ``bird_baseline.py``), the other measures in ``execution_measures.py``, the
measure-and-print phases in ``execution_report.py``; this script holds the command line.

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
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from execution_loads import MAX_SCALE, RUNAWAY_SHARE, Load, build_database, build_load, database_path
from execution_paths import DEFAULT_OPS_FACTOR
from execution_report import measure_alone, measure_baseline, measure_limit_and_sandbox, measure_other_loads

DEFAULT_TIMEOUT_S = 30.0  # BIRD's evaluator ships meta_time_out = 30.0


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
        f"shape with {RUNAWAY_SHARE:.0%}% of the distinct statements runaways), timed with (a) and (b) in the "
        "same run (default 40; 0: skip it)")  # fmt: skip
    add("--json", metavar="OUT", default=None, help="write every number to this JSON file")
    return parser


def _print_load(
    args: argparse.Namespace, load: Load, cores: int, load_before: tuple[float, float, float]
) -> None:
    """The default load's line, each path's runaway defence, and a warning when other processes use the CPUs."""
    budget_how = f"{args.max_ops:,} (given)" if args.max_ops else f"calibrated in (a), {args.ops_factor:g}x"
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
        _print_load(args, load, cores, load_before)
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
            measure_baseline(load, limit, sandbox, args.timeout, numbers)
        measure_other_loads(args, db_path, numbers)
        ratios = {"default load": numbers["ratios"]["sandbox_over_limit"]}
        for name, key in (("long-tail load", "longtail"), ("runaway load", "runaways")):
            if key in numbers:
                ratios[name] = numbers[key]["ratios"]["sandbox_over_limit"]
        print("(b)/(a), side by side in this run: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()))
        measure_alone(db_path, work_dir, args, numbers)
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
