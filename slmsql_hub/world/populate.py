"""Deterministic data for the world's databases, and writing them as SQLite files.

Every value comes from a ``random.Random`` seeded with ``"<seed>:<db_id>"``, so a seed always yields the same
rows (and byte-identical files). Foreign keys are skewed: some parents get many children, a share get none (so
"which authors have no books?" has an answer).

Building a database is the one place that opens SQLite directly; everything that *reads* the world goes
through the sandbox. ``benchmarks/execution_loads.py`` builds the execution benchmark's retail database with
the same two functions.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import random
import sqlite3
from pathlib import Path

from .schemas import (
    CATEGORY,
    DATE,
    FK,
    ID,
    LABEL,
    NUMBER,
    PERSON_NAMES,
    Column,
    DatabaseSpec,
    Table,
    create_table_sql,
)

logger = logging.getLogger(__name__)

Rows = dict[str, list[tuple]]


def _labels(column: Column, n: int, rng: random.Random) -> list[str]:
    kind = column.gen[0]
    if kind == "person":
        pool = [f"{first} {last}" for first, last in itertools.product(*PERSON_NAMES)]
    elif kind == "combo":
        pool = [f"{a} {b}" for a, b in itertools.product(column.gen[1], column.gen[2])]
        pool = [("The " + p if column.name == "title" else p) for p in pool]
    elif kind == "code":
        return [f"{column.gen[1]}{number}" for number in rng.sample(range(1000, 10000), n)]
    elif kind == "fixed":
        return list(column.gen[1])[:n]
    else:
        raise ValueError(f"unknown label generator {kind!r} for column {column.name}")
    if n > len(pool):
        raise ValueError(f"column {column.name}: {n} rows but only {len(pool)} distinct labels")
    return rng.sample(pool, n)


def _number(column: Column, rng: random.Random) -> int | float:
    low, high = column.gen[0], column.gen[1]
    if column.sql_type == "REAL":
        return round(rng.uniform(low, high), column.gen[2])
    return rng.randint(low, high)


def _date(column: Column, rng: random.Random) -> str:
    first = dt.date(column.gen[0], 1, 1).toordinal()
    last = dt.date(column.gen[1], 12, 31).toordinal()
    return dt.date.fromordinal(rng.randint(first, last)).isoformat()


def _foreign_keys(column: Column, parent_ids: list[int], n: int, rng: random.Random) -> list[int]:
    childless_share = column.gen[0] if column.gen else 0.0
    active = list(parent_ids)
    rng.shuffle(active)
    active = sorted(active[int(round(childless_share * len(active))) :])
    weights = [rng.uniform(0.3, 3.0) for _ in active]
    return rng.choices(active, weights=weights, k=n)


def _table_rows(table: Table, rows: Rows, rng: random.Random) -> list[tuple]:
    label = table.label
    n = len(label.gen[1]) if label is not None and label.gen[0] == "fixed" else table.rows
    columns: dict[str, list] = {}
    for column in table.columns:
        if column.role == ID:
            columns[column.name] = list(range(1, n + 1))
        elif column.role == LABEL:
            columns[column.name] = _labels(column, n, rng)
        elif column.role == CATEGORY and column.gen[0] == "by_label":
            mapping = dict(column.gen[1])
            columns[column.name] = [mapping[value] for value in columns[label.name]]
        elif column.role == CATEGORY:
            columns[column.name] = [rng.choice(column.gen[1]) for _ in range(n)]
        elif column.role == NUMBER:
            columns[column.name] = [_number(column, rng) for _ in range(n)]
        elif column.role == DATE:
            columns[column.name] = [_date(column, rng) for _ in range(n)]
        elif column.role == FK:
            parent_ids = [row[0] for row in rows[column.references]]
            columns[column.name] = _foreign_keys(column, parent_ids, n, rng)
        else:
            raise ValueError(f"unknown role {column.role!r} of {table.name}.{column.name}")
    return list(zip(*(columns[c.name] for c in table.columns)))


def generate_rows(spec: DatabaseSpec, seed: int = 0) -> Rows:
    """``{table name: [row tuple, ...]}`` (values in column order) of one world database, deterministic in ``seed``.

    Example:

    ```python
    >>> from slmsql_hub.world.populate import generate_rows
    >>> from slmsql_hub.world.schemas import LIBRARY
    >>> rows = generate_rows(LIBRARY, seed=0)
    >>> len(rows["book"]), rows["book"] == generate_rows(LIBRARY, seed=0)["book"]
    (90, True)

    ```
    """
    rng = random.Random(f"{seed}:{spec.db_id}")
    rows: Rows = {}
    for table in spec.tables:
        rows[table.name] = _table_rows(table, rows, rng)
    return rows


def write_database(spec: DatabaseSpec, rows: Rows, path: str | Path) -> Path:
    """Write ``spec``'s database with ``rows`` (from :func:`generate_rows`) as a fresh SQLite file at ``path``
    (replacing any file there); returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA foreign_keys = ON")
        for table in spec.tables:
            con.execute(create_table_sql(table))
            marks = ", ".join("?" for _ in table.columns)
            con.executemany(f"INSERT INTO {table.name} VALUES ({marks})", rows[table.name])
        con.commit()
        violations = con.execute("PRAGMA foreign_key_check").fetchall()
        if violations:
            raise ValueError(f"{spec.db_id}: foreign-key violations {violations[:3]}")
    finally:
        con.close()
    logger.debug("wrote %s (%d tables)", path, len(spec.tables))
    return path
