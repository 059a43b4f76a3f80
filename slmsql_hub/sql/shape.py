"""The template family of a question, read from its gold SQL's shape: one label per query, for any SQLite
benchmark (the world, Spider, BIRD), so ΔEX can be split by family without a template column.

The family is the FIRST of these, in order, that the query has anywhere (subqueries included):

1. ``set_operation``: ``UNION`` / ``INTERSECT`` / ``EXCEPT``;
2. ``nested``: a subquery (in WHERE, HAVING, FROM or SELECT; ``EXISTS`` too);
3. ``join``: more than one table unit in a FROM (a ``JOIN``, or a comma list);
4. ``group_by``: a ``GROUP BY`` (with or without ``HAVING``);
5. ``order_limit``: an ``ORDER BY`` or a ``LIMIT``;
6. ``aggregate``: an aggregate function (``count``, ``sum``, ``avg``, ``min``, ``max``) without grouping;
7. ``filter``: anything else (a plain ``SELECT ... WHERE ...`` or a bare ``SELECT``).

The order runs from the rarest, structurally hardest construct to the most common, so a query lands in the
family of its hardest part (a join that also groups is a ``join``). Gold SQL that sqlglot cannot parse is
``unparsed``. The parse is sqlglot's SQLite dialect, as :mod:`.hardness`.
"""

from __future__ import annotations

FAMILIES = ("set_operation", "nested", "join", "group_by", "order_limit", "aggregate", "filter", "unparsed")
"""Every family :func:`sql_family` returns, in its precedence order (``unparsed`` last)."""

_AGGREGATES = ("Count", "Sum", "Avg", "Min", "Max")


def _has_subquery(tree) -> bool:
    from sqlglot import exp

    outer = tree
    for node in tree.find_all(exp.Select):
        if node is outer:
            continue
        parent = node.parent
        while isinstance(parent, exp.Paren):
            parent = parent.parent
        if not isinstance(parent, (exp.Union, getattr(exp, "SetOperation", exp.Union))):
            return True  # a SELECT that is not just one side of a set operation
    return False


def _has_join(tree) -> bool:
    from sqlglot import exp

    for select in tree.find_all(exp.Select):
        source = select.args.get("from_", select.args.get("from"))
        units = (1 if source is not None else 0) + len(select.args.get("joins") or [])
        if source is not None and len(source.expressions or []) > 1:  # FROM a, b (older sqlglot)
            units += len(source.expressions) - 1
        if units > 1:
            return True
    return False


def sql_family(sql: str) -> str:
    """The :data:`FAMILIES` label of one SQLite query (module docstring for the order).

    Example:

    ```python
    >>> from slmsql_hub.sql.shape import sql_family
    >>> sql_family("SELECT name FROM a UNION SELECT name FROM b")
    'set_operation'
    >>> sql_family("SELECT name FROM singer WHERE age > (SELECT avg(age) FROM singer)")
    'nested'
    >>> sql_family("SELECT T1.name FROM a AS T1 JOIN b AS T2 ON T1.id = T2.id GROUP BY T1.name")
    'join'
    >>> sql_family("SELECT year, count(*) FROM concert GROUP BY year HAVING count(*) > 1")
    'group_by'
    >>> sql_family("SELECT name FROM singer ORDER BY age DESC LIMIT 1")
    'order_limit'
    >>> sql_family("SELECT count(*) FROM singer WHERE age >= 30")
    'aggregate'
    >>> sql_family("SELECT name FROM singer WHERE age >= 30")
    'filter'
    >>> sql_family("SELEC nonsense (")
    'unparsed'

    ```
    """
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        trees = [t for t in sqlglot.parse(sql or "", read="sqlite") if t is not None]
    except SqlglotError:
        return "unparsed"
    if len(trees) != 1 or not isinstance(trees[0], exp.Query):
        return "unparsed"
    tree = trees[0]
    if tree.find(getattr(exp, "SetOperation", exp.Union)) is not None:
        return "set_operation"
    if tree.find(exp.Exists) is not None or _has_subquery(tree):
        return "nested"
    if _has_join(tree):
        return "join"
    if tree.find(exp.Group) is not None:
        return "group_by"
    if tree.find(exp.Order) is not None or tree.find(exp.Limit) is not None:
        return "order_limit"
    if any(tree.find(getattr(exp, name)) is not None for name in _AGGREGATES):
        return "aggregate"
    return "filter"
