"""Path (c) of ``bench_execution.py``: a BIRD-style evaluator, structured as BIRD's ``evaluation.py``.

A ``multiprocessing.Pool(os.cpu_count())``, ``apply_async`` per pair with a callback that collects results,
each pair under ``func_timeout(T, execute_sql, ...)``; ``execute_sql`` opens a new connection, runs the
prediction, then the gold, and compares ``set(pred) == set(gold)``. Nothing is deduplicated, and a timed-out
query is not stopped (``func_timeout`` raises into a thread that is inside SQLite's C code): it keeps its pool
process busy until the pool ends.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Sequence

from func_timeout import FunctionTimedOut, func_timeout

from slmsql_hub.sql import Judgement


def _bird_execute_sql(predicted_sql: str, ground_truth: str, db_path: str) -> int:
    conn = sqlite3.connect(db_path)
    cursor = conn.cursor()
    cursor.execute(predicted_sql)
    predicted_res = cursor.fetchall()
    cursor.execute(ground_truth)
    ground_truth_res = cursor.fetchall()
    res = 0
    if set(predicted_res) == set(ground_truth_res):
        res = 1
    return res


def _bird_execute_model(
    predicted_sql: str, ground_truth: str, db_place: str, idx: int, meta_time_out: float
) -> dict:
    # BIRD records timeout / error and scores both 0; we keep which one it was to compare verdicts.
    try:
        res = func_timeout(meta_time_out, _bird_execute_sql, args=(predicted_sql, ground_truth, db_place))
        outcome = "ran"
    except KeyboardInterrupt:
        sys.exit(0)
    except FunctionTimedOut:
        res, outcome = 0, "timeout"
    except Exception:  # BIRD's evaluator catches everything: an error scores 0
        res, outcome = 0, "error"
    return {"sql_idx": idx, "res": res, "outcome": outcome}


def run_bird_style(
    predictions: Sequence[str],
    golds: Sequence[str],
    db_paths: Sequence[str],
    timeout_s: float,
    num_cpus: int | None = None,
) -> tuple[list[dict | None], float]:
    """The BIRD-style evaluator on parallel lists: ``(one result per pair, None when lost; wall seconds)``."""
    num_cpus = num_cpus or os.cpu_count() or 1
    exec_result: list[dict] = []
    started = time.perf_counter()
    pool = mp.Pool(processes=num_cpus)
    for i, (predicted_sql, ground_truth, db_place) in enumerate(zip(predictions, golds, db_paths)):
        pool.apply_async(
            _bird_execute_model,
            args=(predicted_sql, ground_truth, db_place, i, timeout_s),
            callback=exec_result.append,
        )
    pool.close()
    pool.join()
    elapsed = time.perf_counter() - started
    by_index: list[dict | None] = [None] * len(predictions)
    for result in exec_result:
        by_index[result["sql_idx"]] = result
    return by_index, elapsed


def compare_verdicts(judgements: Sequence[Judgement], baseline: Sequence[dict | None]) -> dict:
    """Compare the judge's 1/0 with the baseline's wherever the baseline finished (no timeout).

    An unscorable judgement (``correct is None``) where the baseline finished counts as a disagreement: every
    gold of the load runs, so it would be a sandbox failure."""
    disagreements, compared, unfinished, lost = [], 0, 0, 0
    table: Counter = Counter()
    for i, (judgement, base) in enumerate(zip(judgements, baseline)):
        if base is None:
            lost += 1
            continue
        table[(judgement.verdict.value, base["outcome"], base["res"])] += 1
        if base["outcome"] == "timeout":
            unfinished += 1
            continue
        compared += 1
        if judgement.correct != base["res"]:
            disagreements.append(i)
    return {
        **{"compared": compared, "baseline_unfinished": unfinished, "baseline_lost": lost},
        **{"disagreements": len(disagreements), "disagreeing_indices": disagreements},
        "table": {f"{v} | baseline {o} res={r}": n for (v, o, r), n in sorted(table.items())},
    }
