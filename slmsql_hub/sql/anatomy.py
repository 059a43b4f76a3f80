"""Error anatomy: how a wrong prediction differs from its gold SQL, as one structural class.

Both queries are parsed with sqlglot (SQLite dialect, as :mod:`.shape`), identifiers normalised, table
aliases and column qualifiers dropped (``T1.name`` and ``singer.name`` are one column), then compared with one
kind of part masked at a time. The class is the FIRST of these that holds:

``no_sql``             the answer holds no SQL;
``not_executed``       the prediction did not run; ``detail`` is the error kind (``no_such_column``,
                       ``no_such_table``, ``syntax``, ``ambiguous_column``, ``no_such_function``,
                       ``other_error``, ``timeout``, ``too_large``, ``refused``);
``wrong_literal``      the queries are equal with every literal masked; ``detail`` says where the gold's value
                       appears: ``in_question``, ``in_schema`` (the prompt's schema text and sample rows),
                       ``absent``;
``wrong_operator``     equal with every comparison operator (``= != < <= > >= LIKE GLOB``) made one;
``wrong_column``       equal with every column name masked;
``wrong_table_or_join`` equal with every table name masked, or only the FROM / JOIN part differs;
``condition``          only WHERE differs and one side's conjuncts are a strict subset of the other's
                       (``detail``: ``missing`` or ``extra`` in the prediction);
``aggregate``          only the SELECT list differs and it is equal with the aggregate calls unwrapped;
``group_order_limit``  only GROUP BY / HAVING / ORDER BY / LIMIT differ;
``other_structure``    anything else (several kinds at once, a set operation, a subquery, SQL sqlglot cannot
                       read).

Each :class:`Anatomy` also names the differing part as a ``trigger`` (the gold's side) and an ``output`` (what
the prediction put there), abstracted so that the same rule-like mistake on two questions gives the same pair:
an operator ``>=`` -> ``>``, a column ``age`` -> ``birth_year``, a literal ``absent`` -> ``case`` (the value
differs only in letter case; else ``number``, ``substring`` or ``other``). ``components`` are the clauses that
differ, in Spider's component categories (``select``, ``where``, ``group``, ``order``, ``keywords``, ``IUEN``);
:data:`SPIDER_COMPONENT` maps each class onto the one it corresponds to (``None``: Spider's exact-set match
has none, e.g. it ignores values).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .shape import _parse_one

ERROR_CLASSES = (
    "no_sql",
    "not_executed",
    "wrong_literal",
    "wrong_operator",
    "wrong_column",
    "wrong_table_or_join",
    "condition",
    "aggregate",
    "group_order_limit",
    "other_structure",
)
"""Every class :func:`anatomy` returns, in its precedence order."""

SPIDER_COMPONENT: dict[str, str | None] = {
    "no_sql": None,
    "not_executed": None,
    "wrong_literal": None,  # Spider's component match ignores values
    "wrong_operator": "where",  # counted by 'where', not by 'where(no OP)'
    "wrong_column": "select",  # or the clause it sits in: see Anatomy.components
    "wrong_table_or_join": None,  # Spider compares table units inside each component, not as one
    "condition": "and/or",
    "aggregate": "select",  # counted by 'select', not by 'select(no AGG)'
    "group_order_limit": "group / order",
    "other_structure": None,
}
"""The Spider component category each class corresponds to (``None``: none does)."""

_ERROR_KINDS = (
    ("no such column", "no_such_column"),
    ("no such table", "no_such_table"),
    ("ambiguous column", "ambiguous_column"),
    ("no such function", "no_such_function"),
    ("syntax error", "syntax"),
    ("incomplete input", "syntax"),
    ("unrecognized token", "syntax"),
)
_STATUS_KINDS = {"pred_timeout": "timeout", "pred_too_large": "too_large", "pred_refused": "refused"}
_AGGREGATES = ("Count", "Sum", "Avg", "Min", "Max")
_COMPARISONS = ("EQ", "NEQ", "GT", "GTE", "LT", "LTE", "Like", "ILike", "Glob")
_CLAUSES = {"select": ("expressions", "distinct"), "from": ("from_", "from", "joins"), "where": ("where",),
            "group": ("group", "having"), "order": ("order", "limit")}  # fmt: skip


@dataclass(frozen=True)
class Anatomy:
    """One wrong sample's class (:data:`ERROR_CLASSES`), its ``detail``, the differing part as ``trigger`` ->
    ``output``, and the Spider ``components`` that differ."""

    kind: str
    detail: str | None = None
    trigger: str | None = None
    output: str | None = None
    components: tuple[str, ...] = ()

    @property
    def signature(self) -> tuple[str, str | None, str | None]:
        """``(kind, trigger, output)``: what two questions share when they make the same mistake."""
        return (self.kind, self.trigger, self.output)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "detail": self.detail, "trigger": self.trigger, "output": self.output,
                "components": list(self.components)}  # fmt: skip


def error_kind(error: str | None, verdict: str = "pred_error") -> str:
    """The kind of a prediction's execution failure, from its verdict and the sandbox's message.

    Example:

    ```python
    >>> error_kind("no such column: nme"), error_kind('near "FORM": syntax error'), error_kind(None, "pred_timeout")
    ('no_such_column', 'syntax', 'timeout')

    ```
    """
    if verdict in _STATUS_KINDS:
        return _STATUS_KINDS[verdict]
    text = (error or "").lower()
    return next((kind for needle, kind in _ERROR_KINDS if needle in text), "other_error")


def _canonical(tree):
    """The tree with identifiers normalised, table aliases and column qualifiers dropped."""
    from sqlglot import exp
    from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

    tree = normalize_identifiers(tree.copy(), dialect="sqlite")
    for column in list(tree.find_all(exp.Column)):
        column.set("table", None)
    for table in list(tree.find_all(exp.Table)):
        table.set("alias", None)
    return tree


def _masked(tree, kind: str) -> str:
    """``tree`` printed with every part of ``kind`` (``literal``, ``operator``, ``column``, ``table``,
    ``aggregate``) made alike."""
    from sqlglot import exp

    def mask(node):
        if kind == "literal" and isinstance(node, exp.Literal):
            return exp.Literal.string("?")
        if kind == "operator" and type(node).__name__ in _COMPARISONS:
            return exp.EQ(this=node.this, expression=node.expression)
        if kind == "column" and isinstance(node, exp.Column):
            return exp.column("?")
        if kind == "table" and isinstance(node, exp.Table):
            return exp.table_("?")
        if kind == "aggregate" and type(node).__name__ in _AGGREGATES:
            return node.this.copy() if node.this is not None else exp.Star()
        return node

    return tree.copy().transform(mask).sql(dialect="sqlite")


def _parts(tree, kind: str) -> list[str]:
    """The ``kind`` parts of ``tree`` in order, as text (the operators as SQL, e.g. ``>=``)."""
    from sqlglot import exp

    if kind == "literal":
        return [node.this for node in tree.find_all(exp.Literal)]
    if kind == "operator":
        return [_operator(node) for node in tree.find_all(exp.Binary) if type(node).__name__ in _COMPARISONS]
    if kind == "column":
        return [node.name for node in tree.find_all(exp.Column)]
    if kind == "table":
        return [node.name for node in tree.find_all(exp.Table)]
    return sorted(type(node).__name__.lower() for node in tree.find_all(exp.AggFunc))


def _operator(node) -> str:
    sql = node.sql(dialect="sqlite")
    left, right = node.this.sql(dialect="sqlite"), node.expression.sql(dialect="sqlite")
    return sql[len(left) : len(sql) - len(right)].strip()


def _first_difference(gold: list[str], pred: list[str]) -> tuple[str, str]:
    return next(((g, p) for g, p in zip(gold, pred) if g != p), (" ".join(gold), " ".join(pred)))


def _literal_relation(gold: str, pred: str) -> str:
    if gold.lower() == pred.lower():
        return "case"
    if re.fullmatch(r"-?[\d.]+", gold) and re.fullmatch(r"-?[\d.]+", pred):
        return "number"
    if pred and (pred.lower() in gold.lower() or gold.lower() in pred.lower()):
        return "substring"
    return "other"


def _where_found(value: str, question: str, schema: str) -> str:
    text = value.strip("%").lower()
    if text and text in question.lower():
        return "in_question"
    if text and text in schema.lower():
        return "in_schema"
    return "absent"


def _clause(tree, name: str) -> str:
    return " ".join(str(tree.args.get(arg) or "") for arg in _CLAUSES[name])


def _components(gold, pred) -> tuple[str, ...]:
    """The Spider components that differ between two canonical trees."""
    from sqlglot import exp

    set_op = getattr(exp, "SetOperation", exp.Union)
    if isinstance(gold, set_op) or isinstance(pred, set_op):
        return ("IUEN",)
    differ = [name for name in ("select", "where", "group", "order") if _clause(gold, name) != _clause(pred, name)]
    present = [{name for name in ("where", "group", "order") if _clause(tree, name).strip()} for tree in (gold, pred)]
    return tuple(differ + (["keywords"] if present[0] != present[1] else []))


def _conjuncts(tree) -> dict[str, object]:
    """The WHERE conjuncts of ``tree`` by their text."""
    from sqlglot import exp

    where = tree.args.get("where")
    if where is None:
        return {}
    nodes = list(where.this.flatten()) if isinstance(where.this, exp.And) else [where.this]
    return {node.sql(dialect="sqlite"): node for node in nodes}


def _masked_class(gold, pred, question: str, schema: str) -> Anatomy | None:
    """The class one masked kind of part explains, when one does."""
    for kind, name in (("literal", "wrong_literal"), ("operator", "wrong_operator"), ("column", "wrong_column"),
                       ("table", "wrong_table_or_join")):  # fmt: skip
        if _masked(gold, kind) != _masked(pred, kind):
            continue
        trigger, output = _first_difference(_parts(gold, kind), _parts(pred, kind))
        if kind == "table":
            trigger, output = " ".join(sorted(_parts(gold, kind))), " ".join(sorted(_parts(pred, kind)))
        if kind != "literal":
            return Anatomy(name, None, trigger, output, _components(gold, pred))
        found = _where_found(trigger, question, schema)
        return Anatomy(name, found, found, _literal_relation(trigger, output), _components(gold, pred))
    return None


def _clause_class(gold, pred) -> Anatomy | None:
    """The class of a difference confined to one clause of two plain SELECTs, when it is one."""
    from sqlglot import exp

    if not (isinstance(gold, exp.Select) and isinstance(pred, exp.Select)):
        return None
    differ = {name for name in _CLAUSES if _clause(gold, name) != _clause(pred, name)}
    components = _components(gold, pred)
    if differ == {"from"}:
        tables = [" ".join(sorted(_parts(tree, "table"))) for tree in (gold, pred)]
        return Anatomy("wrong_table_or_join", None, *tables, components)
    if differ == {"where"}:
        mine, theirs = _conjuncts(pred), _conjuncts(gold)
        if mine.keys() < theirs.keys() or theirs.keys() < mine.keys():
            side, more, fewer = ("missing", theirs, mine) if mine.keys() < theirs.keys() else ("extra", mine, theirs)
            shown = " AND ".join(sorted(_masked(more[key], "literal") for key in more.keys() - fewer.keys()))
            return Anatomy("condition", side, side, shown, components)
    if differ == {"select"} and _masked(gold, "aggregate") == _masked(pred, "aggregate"):
        return Anatomy("aggregate", None, " ".join(_parts(gold, "aggregate")), " ".join(_parts(pred, "aggregate")),
                       components)  # fmt: skip
    if differ and differ <= {"group", "order"}:
        clauses = [" ".join(_clause(tree, name).strip() for name in ("group", "order")).strip()
                   for tree in (gold, pred)]  # fmt: skip
        return Anatomy("group_order_limit", None, *clauses, components)
    return None


def anatomy(
    pred_sql: str | None,
    gold_sql: str,
    *,
    verdict: str = "wrong",
    error: str | None = None,
    question: str = "",
    schema: str = "",
) -> Anatomy:
    """The class of one wrong sample (module docstring): ``pred_sql`` (the extracted SQL, ``None``: none),
    its judge ``verdict`` (``wrong``, ``no_sql``, ``pred_error``...) and ``error``; ``question`` and ``schema``
    (the prompt's schema text) say where a literal's right value appears.

    Example:

    ```python
    >>> from slmsql_hub.sql.anatomy import anatomy
    >>> gold = "SELECT name FROM singer WHERE age >= 30"
    >>> a = anatomy("SELECT name FROM singer WHERE age > 30", gold)
    >>> a.kind, a.trigger, a.output, a.components
    ('wrong_operator', '>=', '>', ('where',))
    >>> a = anatomy("SELECT T1.name FROM singer AS T1 WHERE T1.age >= 31", gold, question="Singers over 30?")
    >>> a.kind, a.detail, a.output
    ('wrong_literal', 'in_question', 'number')
    >>> anatomy("SELECT nme FROM singer", gold, verdict="pred_error", error="no such column: nme").detail
    'no_such_column'

    ```
    """
    if pred_sql is None or verdict == "no_sql":
        return Anatomy("no_sql")
    if verdict != "wrong" and verdict.startswith("pred_"):
        kind = error_kind(error, verdict)
        named = re.search(r"no such (?:column|table|function): (\S+)", error or "")
        return Anatomy("not_executed", kind, kind, named.group(1).lower() if named else None)
    gold_tree, pred_tree = _parse_one(gold_sql), _parse_one(pred_sql)
    if gold_tree is None or pred_tree is None:
        return Anatomy("other_structure", "unparsed")
    gold_tree, pred_tree = _canonical(gold_tree), _canonical(pred_tree)
    found = _masked_class(gold_tree, pred_tree, question, schema) or _clause_class(gold_tree, pred_tree)
    if found is not None:
        return found
    components = _components(gold_tree, pred_tree)
    return Anatomy("other_structure", None, " ".join(components), None, components)
