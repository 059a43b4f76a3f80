"""The slots of the world's question templates: tables, columns and values drawn from a database's schema
and data, and the SQL fragments they fill.

A template asks :class:`Context` for what it needs (a table with a label and a number column, a foreign key,
a threshold that leaves rows on both sides); when the database has none, the draw raises :class:`NoFit` and
the generator draws again.
"""

from __future__ import annotations

import random

from .populate import Rows
from .schemas import CATEGORY, DATE, FK, NUMBER, Column, DatabaseSpec, Table

OPS = (("greater than", ">"), ("more than", ">"), ("less than", "<"), ("at least", ">="), ("at most", "<="))
_AGGS = (("average", "avg"), ("maximum", "max"), ("minimum", "min"), ("total", "sum"))


def sql_literal(value: object) -> str:
    """A value as an SQL literal: numbers as they are, text single-quoted with quotes doubled.

    Example:

    ```python
    >>> from slmsql_hub.world.slots import sql_literal
    >>> sql_literal("O'Neil"), sql_literal(12), sql_literal(2.5)
    ("'O''Neil'", '12', '2.5')

    ```
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "'" + str(value).replace("'", "''") + "'"
    return f"{value:g}" if isinstance(value, float) else str(value)


def as_text(value: object) -> str:
    """A value as a question shows it (floats without trailing zeros)."""
    return f"{value:g}" if isinstance(value, float) else str(value)


class NoFit(Exception):
    """This draw of a template does not fit the database (no table with the needed columns); draw again."""


class Context:
    """The schema, data and random stream one database's questions are drawn from."""

    def __init__(self, spec: DatabaseSpec, rows: Rows, rng: random.Random) -> None:
        self.spec = spec
        self.rows = rows
        self.rng = rng

    def values(self, table: Table, column: Column) -> list:
        index = table.columns.index(column)
        return [row[index] for row in self.rows[table.name]]

    def pick(self, options):
        options = list(options)
        if not options:
            raise NoFit
        return self.rng.choice(options)

    def table(self, *need: str) -> Table:
        """A random table having every role in ``need`` (``label``, ``category``, ``number``, ``date``)."""
        tables = [t for t in self.spec.tables if all(t.by_role(role) for role in need)]
        if not tables:
            raise NoFit
        return self.pick(tables)

    def threshold(self, table: Table, column: Column, op: str) -> int | float:
        """A comparison value from the data that leaves rows on both sides of most comparisons."""
        values = sorted(set(self.values(table, column)))
        low, high = (0.1, 0.75) if op in (">", ">=") else (0.25, 0.9)
        return values[self.rng.randint(int(low * (len(values) - 1)), int(high * (len(values) - 1)))]

    def fk(self, *, parent_label: bool = True) -> tuple[Table, Column, Table]:
        links = [link for link in self.spec.foreign_keys() if not parent_label or link[2].label is not None]
        if not links:
            raise NoFit
        return self.pick(links)

    def bridge(self) -> tuple[Table, Column, Table, Column, Table]:
        """A table with two foreign keys to labelled parents: ``(event, fk_a, parent_a, fk_b, parent_b)``."""
        bridges = []
        for table in self.spec.tables:
            fks = [c for c in table.by_role(FK) if self.spec.table(c.references).label is not None]
            for a in fks:
                for b in fks:
                    if a is not b:
                        bridges.append(
                            (table, a, self.spec.table(a.references), b, self.spec.table(b.references))
                        )
        return self.pick(bridges)

    def parent_value(self, child: Table, fk: Column, parent: Table):
        """The label of a random parent that has rows in ``child``."""
        return self.values(parent, parent.label)[self.pick(self.values(child, fk)) - 1]

    def listed(self, table: Table) -> Column:
        """What to list for rows of ``table``: its label, else a number, date or category column."""
        if table.label is not None:
            return table.label
        return self.pick(table.by_role(NUMBER) + table.by_role(DATE) + table.by_role(CATEGORY))


def aggregate_of(ctx: Context, column: Column) -> tuple[str, str]:
    """An aggregate for ``column``: years are only compared (max / min), non-additive measures never summed."""
    if column.name.endswith("year"):
        return ctx.pick(_AGGS[1:3])
    return ctx.pick(_AGGS if column.additive else _AGGS[:3])


def unique_max(values: list) -> bool:
    ordered = sorted(values, reverse=True)
    return len(ordered) == 1 or ordered[0] != ordered[1]


def join_on(child: Table, fk: Column, parent: Table) -> str:
    return f"{child.name} AS T1 JOIN {parent.name} AS T2 ON T1.{fk.name} = T2.{parent.pk.name}"


def bridge_on(event: Table, fa: Column, a: Table, fb: Column, b: Table) -> str:
    """The FROM clause joining a :meth:`Context.bridge` table to both parents (T1, T2, T3)."""
    return f"{join_on(event, fa, a)} JOIN {b.name} AS T3 ON T1.{fb.name} = T3.{b.pk.name}"


def tally(values: list) -> list[int]:
    """How often each distinct value occurs (in no particular order).

    >>> sorted(tally(["a", "b", "a"]))
    [1, 2]
    """
    return [values.count(v) for v in set(values)]
