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

Held-out splits are kept apart from training by meaning as well as by text (issue #32): a paraphrase of a
probe with the same gold on the same database is the same question to a model that reads the schema. The
:func:`meaning_key` of a question is its database and its :func:`normalized_gold`: the gold parsed and
re-printed by sqlglot (keyword and identifier case, whitespace and redundant parentheses as sqlglot
normalises them, the operands of ``AND`` / ``OR`` in its order; literals kept, so ``'Bob'`` and ``'bob'``
stay apart).
"""

from __future__ import annotations

from functools import lru_cache

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


def _parse_one(sql: str):
    """The single query sqlglot (SQLite dialect) reads in ``sql``; ``None`` when it reads none, several, or a
    statement that is not a query."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        trees = [t for t in sqlglot.parse(sql or "", read="sqlite") if t is not None]
    except SqlglotError:
        return None
    return trees[0] if len(trees) == 1 and isinstance(trees[0], exp.Query) else None


@lru_cache(maxsize=2**16)  # a world build keys each gold several times
def normalized_gold(sql: str) -> str:
    """``sql`` as sqlglot re-prints it for SQLite after normalising identifiers and simplifying (keywords
    upper case, identifiers and function names lower case, one space, redundant parentheses gone, literals
    kept; the operands of ``AND`` / ``OR`` in sqlglot's order); SQL sqlglot cannot read falls back to
    lower-case, single-spaced text.

    Example:

    ```python
    >>> from slmsql_hub.sql.shape import normalized_gold
    >>> normalized_gold("select T1.Name from Singer as T1 where (T1.age >= 30);")
    'SELECT t1.name FROM singer AS t1 WHERE t1.age >= 30'
    >>> normalized_gold("SELECT t1.name FROM singer AS t1 WHERE t1.age>=30")
    'SELECT t1.name FROM singer AS t1 WHERE t1.age >= 30'
    >>> normalized_gold("SELECT name FROM singer WHERE city = 'Rome' OR city = 'Bath'")
    "SELECT name FROM singer WHERE city = 'Bath' OR city = 'Rome'"
    >>> normalized_gold("SELECT count(*) FROM singer WHERE name = 'Bob'")
    "SELECT count(*) FROM singer WHERE name = 'Bob'"
    >>> normalized_gold("SELEC  Nonsense (")
    'selec nonsense ('

    ```
    """
    from sqlglot.errors import SqlglotError
    from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
    from sqlglot.optimizer.simplify import simplify

    tree = _parse_one(sql)
    if tree is not None:
        try:
            tree = simplify(normalize_identifiers(tree, dialect="sqlite"), dialect="sqlite")
            return tree.sql(dialect="sqlite", normalize=True, normalize_functions="lower")
        except SqlglotError:
            pass
    return " ".join((sql or "").lower().split()).rstrip("; ")


def meaning_key(db_id: str, sql: str) -> tuple[str, str]:
    """``(db_id, normalized_gold(sql))``: two questions with this key ask the same thing of the same database.

    Example:

    ```python
    >>> from slmsql_hub.sql.shape import meaning_key
    >>> meaning_key("pets", "select count(*) from Pets") == meaning_key("pets", "SELECT COUNT(*) FROM pets")
    True

    ```
    """
    return db_id, normalized_gold(sql)


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
    from sqlglot import exp

    tree = _parse_one(sql)
    if tree is None:
        return "unparsed"
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
