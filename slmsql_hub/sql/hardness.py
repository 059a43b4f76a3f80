"""Spider hardness labels (``easy`` / ``medium`` / ``hard`` / ``extra``) by the official Spider rules.

The official evaluator (``evaluation.py``, ``Evaluator.eval_hardness``) parses the gold SQL with its own parser
into a nested dict and counts three things on the *top-level* query only:

- **component 1**: one each for a WHERE, a GROUP BY, an ORDER BY and a LIMIT clause; the number of table
  units in FROM minus one (joins; a FROM subquery is a table unit); the number of ``or`` connectors in the
  join conditions, WHERE and HAVING; the number of ``LIKE`` conditions there (``NOT LIKE`` included).
- **component 2**: nested queries: every condition value in the join conditions / WHERE / HAVING that is a
  subquery (``x IN (SELECT ...)``, ``x > (SELECT ...)``, both ends of a ``BETWEEN``), plus one for a
  top-level ``INTERSECT`` / ``UNION`` / ``EXCEPT``. Subqueries in FROM are *not* counted here.
- **others**: one for each of: more than one "aggregate", more than one SELECT column, more than one WHERE
  condition, more than one GROUP BY column. The "aggregate" count keeps the official code's quirks: it
  counts aggregated SELECT items, aggregated GROUP BY columns and aggregates in the ORDER BY operands; a
  WHERE condition counts only when it is *negated* (``NOT IN``, ``NOT LIKE``, ``NOT BETWEEN``) because the
  official code reads the condition's ``not`` flag where it means the aggregate id; and in HAVING, negated
  conditions *and every* ``and`` / ``or`` *connector* count, for the same reason.

The label follows from the three counts (:attr:`HardnessCounts.label`).

Where the official parser and SQL disagree on structure, this module follows the official parser:
``A UNION B ORDER BY x LIMIT 1`` counts only ``A``'s own clauses (the official parser gives the trailing
ORDER BY / LIMIT to ``B``); conditions are one flat ``and`` / ``or`` chain (parentheses are looked
through); and after a condition whose value is a column (``T1.a = T2.b``) the official parser reads on to the
next ``and``, so ``T1.a = T2.b OR T1.a = T2.c`` is *one* condition with no ``or`` (four Spider dev gold
queries rely on this). The SQL itself is parsed with sqlglot (SQLite dialect). On the 1034 Spider dev gold
queries these counts equal, query by query, the ones computed from the official parse in ``dev.json``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HardnessCounts", "hardness_counts", "spider_hardness"]


@dataclass(frozen=True)
class HardnessCounts:
    """The three counts the official Spider hardness rule is computed from (module docstring)."""

    component1: int
    component2: int
    others: int

    @property
    def label(self) -> str:
        """The hardness label these counts give (``easy``, ``medium``, ``hard`` or ``extra``)."""
        c1, c2, others = self.component1, self.component2, self.others
        if c1 <= 1 and others == 0 and c2 == 0:
            return "easy"
        if (others <= 2 and c1 <= 1 and c2 == 0) or (c1 <= 2 and others < 2 and c2 == 0):
            return "medium"
        if (
            (others > 2 and c1 <= 2 and c2 == 0)
            or (2 < c1 <= 3 and others <= 2 and c2 == 0)
            or (c1 <= 1 and others == 0 and c2 <= 1)
        ):
            return "hard"
        return "extra"


@dataclass
class _Condition:
    """A condition flattened the way the official parser sees it: leaves joined by ``and`` / ``or``."""

    leaves: list
    connectors: list[str]


def _unparen(node):
    from sqlglot import exp

    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _flatten(node) -> _Condition:
    """Flatten an AND/OR tree into leaves and connectors, looking through parentheses."""
    from sqlglot import exp

    if node is None:
        return _Condition([], [])
    node = _unparen(node)
    if isinstance(node, (exp.And, exp.Or)):
        left, right = _flatten(node.this), _flatten(node.expression)
        connector = "and" if isinstance(node, exp.And) else "or"
        return _Condition(left.leaves + right.leaves, left.connectors + [connector] + right.connectors)
    return _Condition([node], [])


def _official_condition(node) -> _Condition:
    """A condition as the official parser reads it: flattened, with its swallowing quirk applied."""
    return _swallow_after_column_values(_flatten(node))


def _is_plain_value(node) -> bool:
    """Whether the official parser reads ``node`` as a number, a string or a subquery (not a column)."""
    from sqlglot import exp

    node = _unparen(node)
    if isinstance(node, exp.Neg):
        node = _unparen(node.this)
    if isinstance(node, exp.Literal):
        return True
    if isinstance(node, exp.Column) and not node.table and node.this.args.get("quoted"):
        return True  # a double-quoted "text": SQLite's identifier-or-string, a string to the official parser
    return _is_query(node)


def _value_operand(predicate):
    """The operand the official parser reads as the condition's (last) value, ``None`` when there is none."""
    from sqlglot import exp

    if isinstance(predicate, exp.Between):
        return predicate.args.get("high")
    if isinstance(predicate, exp.Binary):
        return predicate.expression
    return None


def _swallow_after_column_values(cond: _Condition) -> _Condition:
    """``cond`` without the ``or``-joined conditions after a column-valued one, which the official parser
    swallows up to the next ``and`` (module docstring)."""
    leaves = [cond.leaves[0]] if cond.leaves else []
    connectors: list[str] = []
    index = 0
    while index < len(cond.connectors):
        predicate, _ = _leaf_predicate(cond.leaves[index])
        value = _value_operand(predicate)
        if cond.connectors[index] == "or" and value is not None and not _is_plain_value(value):
            # The swallowed condition goes too; the scan only stops at the next "and".
            cond = _Condition(
                cond.leaves[: index + 1] + cond.leaves[index + 2 :],
                cond.connectors[:index] + cond.connectors[index + 1 :],
            )
            continue
        connectors.append(cond.connectors[index])
        leaves.append(cond.leaves[index + 1])
        index += 1
    return _Condition(leaves, connectors)


def _leaf_predicate(leaf):
    """Return ``(predicate, negated)`` for one condition leaf (``NOT x`` and ``x NOT LIKE y`` are negated)."""
    from sqlglot import exp

    negated = False
    while isinstance(leaf, (exp.Not, exp.Paren)):
        if isinstance(leaf, exp.Not):
            negated = not negated
        leaf = leaf.this
    if leaf.args.get("negate"):
        negated = not negated
    return leaf, negated


def _is_query(node) -> bool:
    from sqlglot import exp

    return isinstance(_unparen(node), (exp.Subquery, exp.Query))


def _nested_values(predicate) -> int:
    """How many of a condition's operands are subqueries (the official parser's dict-valued ``val1/val2``)."""
    from sqlglot import exp

    if isinstance(predicate, exp.Exists):
        return 1
    count = 0
    for key, value in predicate.args.items():
        if key == "negate":
            continue
        values = value if isinstance(value, list) else [value]
        count += sum(1 for item in values if isinstance(item, exp.Expression) and _is_query(item))
    return count


def _is_aggregate(node) -> bool:
    from sqlglot import exp

    return isinstance(_unparen(node), (exp.Count, exp.Max, exp.Min, exp.Sum, exp.Avg))


def _order_aggregates(node) -> int:
    """Aggregates among an ORDER BY item's one or two operands (``sum(a) - sum(b)`` counts two)."""
    from sqlglot import exp

    node = _unparen(node)
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div)):
        return int(_is_aggregate(node.this)) + int(_is_aggregate(node.expression))
    return int(_is_aggregate(node))


def _top_select(tree):
    """The query the official parser puts at the top, and whether a set operation follows it."""
    from sqlglot import exp

    node = _unparen(tree)
    has_set_op = False
    while True:
        if isinstance(node, exp.Subquery):
            node = _unparen(node.this)
        elif isinstance(node, getattr(exp, "SetOperation", exp.Union)):  # older sqlglot: Union is the base
            has_set_op = True
            node = _unparen(node.this)
        else:
            break
    if not isinstance(node, exp.Select):
        raise ValueError(f"spider_hardness needs a SELECT query, got {type(node).__name__}")
    return node, has_set_op


def _parse(sql: str):
    import sqlglot
    from sqlglot.errors import SqlglotError

    if not isinstance(sql, str) or not sql.strip():
        raise ValueError("spider_hardness needs a non-empty SQL string")
    try:
        trees = [tree for tree in sqlglot.parse(sql, read="sqlite") if tree is not None]
    except SqlglotError as err:
        first_line = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"cannot parse SQL for spider_hardness: {first_line}: {sql!r}") from err
    if len(trees) != 1:
        raise ValueError(f"spider_hardness needs exactly one SQL statement, got {len(trees)}: {sql!r}")
    return trees[0]


def hardness_counts(sql: str) -> HardnessCounts:
    """The official Spider hardness counts of one SQLite query's top level (set operations allowed);
    ``ValueError`` when the SQL cannot be parsed or is not a query.

    Example:

    ```python
    >>> hardness_counts("SELECT name FROM singer WHERE age > 20 ORDER BY age LIMIT 1")
    HardnessCounts(component1=3, component2=0, others=0)

    ```
    """
    from sqlglot import exp

    select, has_set_op = _top_select(_parse(sql))

    joins = select.args.get("joins") or []
    has_from = select.args.get("from_", select.args.get("from")) is not None  # "from" in older sqlglot
    table_units = int(has_from) + len(joins)
    join_conditions = _Condition([], [])
    for join in joins:
        on = _official_condition(join.args.get("on"))
        if not on.leaves:
            continue
        connectors = join_conditions.connectors + (["and"] if join_conditions.leaves else [])
        join_conditions = _Condition(join_conditions.leaves + on.leaves, connectors + on.connectors)
    where = _official_condition(select.args["where"].this if select.args.get("where") else None)
    having = _official_condition(select.args["having"].this if select.args.get("having") else None)
    group = select.args["group"].expressions if select.args.get("group") else []
    order = select.args["order"].expressions if select.args.get("order") else []

    all_leaves = [_leaf_predicate(leaf) for leaf in join_conditions.leaves + where.leaves + having.leaves]
    all_connectors = join_conditions.connectors + where.connectors + having.connectors

    component1 = sum(
        [bool(where.leaves), bool(group), bool(order), select.args.get("limit") is not None]
    ) + max(table_units - 1, 0)
    component1 += all_connectors.count("or")
    component1 += sum(1 for predicate, _ in all_leaves if isinstance(predicate, exp.Like))

    component2 = sum(_nested_values(predicate) for predicate, _ in all_leaves) + int(has_set_op)

    aggregates = sum(1 for item in select.expressions if _is_aggregate(item.unalias()))
    aggregates += sum(1 for leaf in where.leaves if _leaf_predicate(leaf)[1])
    aggregates += sum(1 for item in group if _is_aggregate(item))
    aggregates += sum(_order_aggregates(item.this) for item in order)
    aggregates += sum(1 for leaf in having.leaves if _leaf_predicate(leaf)[1]) + len(having.connectors)
    others = sum([aggregates > 1, len(select.expressions) > 1, len(where.leaves) > 1, len(group) > 1])
    return HardnessCounts(component1=component1, component2=component2, others=others)


def spider_hardness(sql: str) -> str:
    """``easy``, ``medium``, ``hard`` or ``extra``: the label Spider's ``Evaluator.eval_hardness`` gives one SQLite
    query; ``ValueError`` when the SQL cannot be parsed or is not a query (callers decide what to do).

    Example:

    ```python
    >>> spider_hardness("SELECT count(*) FROM singer")
    'easy'
    >>> spider_hardness("SELECT name FROM singer WHERE age > (SELECT avg(age) FROM singer)")
    'hard'

    ```
    """
    return hardness_counts(sql).label
