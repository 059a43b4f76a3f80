"""Runaway SQL of the kinds models write by accident, one per family, for the judging tests and the bench.

Each query runs far past any reasonable ``timeout_s`` (or past a byte or length cap) on :func:`build_db`'s
database: unbounded recursion, cross joins, heavy string functions per row, spilling sorts, deep nesting.
"""

from __future__ import annotations

import os
import signal
import sqlite3
from contextlib import contextmanager
from pathlib import Path

_CTE = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
_LIKE_PATTERN = "'%" + "a" * 500 + "b%'"  # against a run of 'a's: quadratic per row

RUNAWAYS = {
    # unterminated recursive CTEs
    "cte_count": _CTE + "SELECT count(*) FROM r",
    "cte_union": "WITH RECURSIVE r(i) AS (SELECT 1 UNION SELECT i + 1 FROM r) SELECT count(*) FROM r",
    "cte_order_by": _CTE + "SELECT i FROM r ORDER BY i DESC LIMIT 1",
    "cte_order_by_spilling": _CTE + "SELECT i, hex(randomblob(64)) AS h FROM r ORDER BY h LIMIT 1",
    "cte_group_concat": _CTE + "SELECT count(*) FROM (SELECT group_concat(i) FROM r GROUP BY i % 1000)",
    # cartesian products
    "cross_count": "SELECT count(*) FROM orders a, orders b, orders c, orders d",
    "cross_order_by": "SELECT a.id FROM orders a, orders b, orders c ORDER BY a.total * b.total + c.id LIMIT 1",
    "cross_group_concat": "SELECT count(*) FROM (SELECT group_concat(c.id) FROM orders a, orders b, orders c GROUP BY a.id, b.id)",
    "cross_window": "SELECT max(n) FROM (SELECT row_number() OVER (ORDER BY a.total, b.id) AS n FROM orders a, orders b, orders c)",
    "cross_distinct": "SELECT count(DISTINCT a.id * 1000000 + b.id * 1000 + c.id) FROM orders a, orders b, orders c",
    # heavy functions inside one SQLite step, or per row
    "printf_precision": "SELECT length(printf('%.*c', 2000000000, 'x'))",
    "printf_width_per_row": "SELECT count(*) FROM orders a, orders b WHERE length(printf('%*d', 4000000, a.id)) > 0",
    "like_per_row": "SELECT count(*) FROM orders a, orders b WHERE replace(hex(zeroblob(3000 + (a.id + b.id) % 2)), '0', 'a') LIKE "
    + _LIKE_PATTERN,
    "replace_per_row": "SELECT count(*) FROM orders a, orders b WHERE length(replace(hex(zeroblob(20000 + (a.id + b.id) % 2)), '0', 'ab')) > 0",
    "randomblob_per_row": "SELECT sum(length(randomblob(1000000 + a.id % 2))) FROM orders a, orders b",
    "zeroblob_hex_per_row": "SELECT count(*) FROM orders a, orders b WHERE instr(hex(zeroblob(2000000 + a.id % 2)), 'F') > 0",
    "substr_char_per_row": "SELECT count(*) FROM orders a, orders b WHERE instr(substr(char(65 + a.id % 2) || hex(randomblob(400000)), 2), 'XYZ') > 0",
    # deep nesting: a correlated subquery over a cross join, nested
    "nested_correlated": "SELECT count(*) FROM orders o WHERE (SELECT count(*) FROM orders a, orders b WHERE a.id + b.id > o.id) > 0",
    "nested_derived": "SELECT count(*) FROM "
    + "(SELECT * FROM " * 12
    + "(SELECT a.id AS x FROM orders a, orders b, orders c)"
    + ")" * 12,
}


def build_db(folder: str | Path) -> Path:
    """A small shop database (1,000 orders): big enough for every runaway above to run for minutes."""
    path = Path(folder) / "runaways.sqlite"
    if path.is_file():
        return path
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, total REAL);")
    conn.executemany(
        "INSERT INTO orders VALUES (?, ?, ?)", [(i, 1 + i % 300, float(i % 97)) for i in range(1, 1001)]
    )
    conn.commit()
    conn.close()
    return path


@contextmanager
def starved(sandbox):
    """Stop (SIGSTOP) every started worker of ``sandbox``: a query sent to one gets no CPU at all, the machine's
    failure that the query would not reproduce alone. The sandbox kills and replaces a starved worker."""
    procs = [w.proc for w in sandbox._all_workers if w.proc is not None]
    for proc in procs:
        os.kill(proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
