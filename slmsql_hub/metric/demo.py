"""A tiny SQLite database for the metric's examples, the Space and smoke tests.

Two tables, in the style of Spider's ``concert_singer``::

    singer(singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER)
    concert(concert_id INTEGER PRIMARY KEY, concert_name TEXT, year INTEGER, singer_id INTEGER)

This module *builds* a database, so it is the one place in the metric package that opens SQLite directly;
everything that runs SQL against it goes through :mod:`slmsql_hub.sql`.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path

_SINGERS = [
    (1, "Joe Sharp", "Netherlands", 52),
    (2, "Timbaland", "United States", 32),
    (3, "Justin Brown", "France", 29),
    (4, "Rose White", "France", 41),
]
_CONCERTS = [
    (1, "Auditions", 2014, 2),
    (2, "Super bootcamp", 2014, 3),
    (3, "Home Visits", 2015, 1),
    (4, "Week 1", 2015, 3),
]


def make_demo_database(directory: str | os.PathLike | None = None) -> Path:
    """Write (or replace) ``concert_demo.sqlite`` in ``directory`` (default: a new temporary folder) and return
    its path.

    Example:

    ```python
    >>> make_demo_database().name
    'concert_demo.sqlite'

    ```
    """
    folder = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="slmsql_demo_"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "concert_demo.sqlite"
    partial = folder / "concert_demo.sqlite.partial"
    partial.unlink(missing_ok=True)
    conn = sqlite3.connect(partial)
    try:
        with conn:
            conn.execute(
                "CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER)"
            )
            conn.execute(
                "CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, concert_name TEXT, year INTEGER, "
                "singer_id INTEGER REFERENCES singer(singer_id))"
            )
            conn.executemany("INSERT INTO singer VALUES (?, ?, ?, ?)", _SINGERS)
            conn.executemany("INSERT INTO concert VALUES (?, ?, ?, ?)", _CONCERTS)
    finally:
        conn.close()
    os.replace(partial, path)
    return path
