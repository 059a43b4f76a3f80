"""The world's question templates: one function per SQL shape, and the table that weighs them.

Each function draws its slots from a :class:`~slmsql_hub.world.slots.Context` and returns ``(question, sql)``
or ``(question, sql, evidence)``; a draw that does not fit returns ``None`` or raises
:class:`~slmsql_hub.world.slots.NoFit` (an empty pick does). Families: ``single`` (one table),
``join`` (two or three tables), ``nested``, ``setop`` (INTERSECT / EXCEPT / UNION) and ``evidence`` (a domain
word defined by BIRD-style evidence: "long books" with "long refers to pages > 500").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .schemas import CATEGORY, DATE, LABEL, NUMBER, Column, Table
from .slots import OPS, Context, aggregate_of, as_text, join_on, sql_literal, tally, unique_max
from .templates_multi import (
    _above_average,
    _above_average_filter,
    _except,
    _except_join,
    _in_subquery,
    _intersect,
    _intersect_join,
    _intersect_join_number,
    _join_aggregate,
    _join_count,
    _join_filter,
    _join_group_argmax,
    _join_group_count,
    _join_having,
    _join_lookup,
    _join_order,
    _join_parent_attribute,
    _join_where_argmax,
    _not_in,
    _not_in_filter,
    _three_join,
    _three_join_argmax,
    _three_join_count,
    _union,
)


# ---------------------------------------------------------------------------------------------------------
# Single-table templates
def _count_all(ctx: Context):
    t = ctx.pick(ctx.spec.tables)
    q = ctx.pick(
        ("How many {P} are there?", "Count the number of {P}.", "What is the total number of {P}?")
    ).format(P=t.plural_words)
    return q, f"SELECT count(*) FROM {t.name}"


def _list_label(ctx: Context):
    t = ctx.table(LABEL)
    lab = t.label
    q = ctx.pick(
        ("List the {L} of all {P}.", "What are the {L}s of all {P}?", "Show the {L} of every {S}.")
    ).format(L=lab.words, P=t.plural_words, S=t.singular)
    return q, f"SELECT {lab.name} FROM {t.name}"


def _filtered(need: tuple[str, ...], *phrasings: str):
    """A template over one table (a :meth:`Context.table` with ``need``) filtered on a category value (``{C}``
    ``{V}``) or a number threshold (``{N}`` ``{O}`` ``{X}``); lists its label ``{L}`` when ``need`` has one,
    else counts its rows ``{P}``."""

    def make(ctx: Context):
        t = ctx.table(*need)
        if CATEGORY in need:
            c = ctx.pick(t.by_role(CATEGORY))
            v = ctx.pick(ctx.values(t, c))
            slots, where = {"C": c.words, "V": v}, f"{c.name} = {sql_literal(v)}"
        else:
            n = ctx.pick(t.by_role(NUMBER))
            words, op = ctx.pick(OPS)
            x = ctx.threshold(t, n, op)
            slots, where = {"N": n.words, "O": words, "X": as_text(x)}, f"{n.name} {op} {sql_literal(x)}"
        listed = LABEL in need
        q = ctx.pick(phrasings).format(L=t.label.words if listed else "", P=t.plural_words, **slots)
        return q, f"SELECT {t.label.name if listed else 'count(*)'} FROM {t.name} WHERE {where}"

    return make


_filter_category = _filtered(
    (LABEL, CATEGORY),
    "List the {L} of {P} whose {C} is {V}.",
    "Which {P} have {C} {V}? Give their {L}.",
    "Show the {L} of {P} with {C} {V}.",
)
_count_category = _filtered(
    (CATEGORY,),
    "How many {P} have {C} {V}?",
    "Count the {P} whose {C} is {V}.",
    "What is the number of {P} with {C} {V}?",
)
_filter_number = _filtered(
    (LABEL, NUMBER),
    "List the {L} of {P} with {N} {O} {X}.",
    "Which {P} have {N} {O} {X}? Give their {L}.",
    "Show the {L} of {P} whose {N} is {O} {X}.",
)
_count_number = _filtered((NUMBER,), "How many {P} have {N} {O} {X}?", "Count the {P} whose {N} is {O} {X}.")


def _per_category(sql: str, *phrasings: str):
    """A template over one category column (``{C}``; ``{c}`` in ``sql``) of a table (``{P}``; ``{t}``)."""

    def make(ctx: Context):
        t = ctx.table(CATEGORY)
        c = ctx.pick(t.by_role(CATEGORY))
        return ctx.pick(phrasings).format(C=c.words, P=t.plural_words), sql.format(c=c.name, t=t.name)

    return make


_distinct = _per_category(
    "SELECT DISTINCT {c} FROM {t}",
    "List the distinct {C} values of {P}.",
    "What are the different {C}s of {P}?",
    "Show all distinct {C} of {P}.",
)
_count_distinct = _per_category(
    "SELECT count(DISTINCT {c}) FROM {t}",
    "How many different {C}s do the {P} have?",
    "Count the distinct {C} values among {P}.",
)
_group_count = _per_category(
    "SELECT {c}, count(*) FROM {t} GROUP BY {c}",
    "How many {P} are there for each {C}?",
    "For each {C}, count the {P}.",
    "Show each {C} and the number of {P}.",
)


def _aggregate(ctx: Context):
    t = ctx.table(NUMBER)
    n = ctx.pick(t.by_role(NUMBER))
    words, fn = aggregate_of(ctx, n)
    q = ctx.pick(
        ("What is the {A} {N} of all {P}?", "Find the {A} {N} of {P}.", "Show the {A} {N} across all {P}.")
    ).format(A=words, N=n.words, P=t.plural_words)
    return q, f"SELECT {fn}({n.name}) FROM {t.name}"


def _aggregate_where(ctx: Context):
    t = ctx.table(NUMBER, CATEGORY)
    n = ctx.pick(t.by_role(NUMBER))
    c = ctx.pick(t.by_role(CATEGORY))
    v = ctx.pick(ctx.values(t, c))
    words, fn = aggregate_of(ctx, n)
    q = ctx.pick(
        ("What is the {A} {N} of {P} whose {C} is {V}?", "Find the {A} {N} of {P} with {C} {V}.")
    ).format(A=words, N=n.words, P=t.plural_words, C=c.words, V=v)
    return q, f"SELECT {fn}({n.name}) FROM {t.name} WHERE {c.name} = {sql_literal(v)}"


def _lookup(ctx: Context):
    t = ctx.table(LABEL)
    c = ctx.pick(t.by_role(NUMBER) + t.by_role(CATEGORY) + t.by_role(DATE))
    v = ctx.pick(ctx.values(t, t.label))
    q = ctx.pick(
        (
            "What is the {C} of the {S} whose {L} is {V}?",
            "Show the {C} of the {S} with {L} {V}.",
            "Find the {C} of the {S} {V}.",
        )
    ).format(C=c.words, S=t.singular, L=t.label.words, V=v)
    return q, f"SELECT {c.name} FROM {t.name} WHERE {t.label.name} = {sql_literal(v)}"


def _date_compare(ctx: Context):
    t = ctx.table(DATE)
    d = ctx.pick(t.by_role(DATE))
    v = ctx.pick(sorted(ctx.values(t, d))[20:-20])
    word, op = ctx.pick((("after", ">"), ("before", "<")))
    q = ctx.pick(("How many {P} have a {D} {W} {V}?", "Count the {P} with {D} {W} {V}.")).format(
        P=t.plural_words, D=d.words, W=word, V=v
    )
    return q, f"SELECT count(*) FROM {t.name} WHERE {d.name} {op} {sql_literal(v)}"


def _date_year(ctx: Context):
    t = ctx.table(DATE)
    d = ctx.pick(t.by_role(DATE))
    year = ctx.pick(sorted({v[:4] for v in ctx.values(t, d)}))
    if t.label is not None or ctx.rng.random() < 0.5:
        q = ctx.pick(("How many {P} have a {D} in {Y}?", "Count the {P} whose {D} is in {Y}.")).format(
            P=t.plural_words, D=d.words, Y=year
        )
        return q, f"SELECT count(*) FROM {t.name} WHERE {d.name} LIKE '{year}%'"
    n = ctx.pick(t.by_role(NUMBER))
    words, fn = aggregate_of(ctx, n)
    q = f"What is the {words} {n.words} of {t.plural_words} with a {d.words} in {year}?"
    return q, f"SELECT {fn}({n.name}) FROM {t.name} WHERE {d.name} LIKE '{year}%'"


def _sorted(ctx: Context):
    t = ctx.table(LABEL, NUMBER)
    n = ctx.pick(t.by_role(NUMBER))
    desc = ctx.rng.random() < 0.5
    q = ctx.pick(
        ("List the {L} of all {P} ordered by {N} {D}.", "Show the {L} of {P} sorted by {N} {D}.")
    ).format(
        L=t.label.words,
        P=t.plural_words,
        N=n.words,
        D="from highest to lowest" if desc else "from lowest to highest",
    )
    return q, f"SELECT {t.label.name} FROM {t.name} ORDER BY {n.name} {'DESC' if desc else 'ASC'}"


def _two_columns(ctx: Context):
    t = ctx.table(LABEL, NUMBER, CATEGORY)
    n = ctx.pick(t.by_role(NUMBER))
    c = ctx.pick(t.by_role(CATEGORY))
    v = ctx.pick(ctx.values(t, c))
    q = ctx.pick(
        ("List the {L} and {N} of {P} whose {C} is {V}.", "Show the {L} and the {N} of {P} with {C} {V}.")
    ).format(L=t.label.words, N=n.words, P=t.plural_words, C=c.words, V=v)
    return q, f"SELECT {t.label.name}, {n.name} FROM {t.name} WHERE {c.name} = {sql_literal(v)}"


def _group_aggregate(ctx: Context):
    t = ctx.table(CATEGORY, NUMBER)
    c = ctx.pick(t.by_role(CATEGORY))
    n = ctx.pick(t.by_role(NUMBER))
    words, fn = aggregate_of(ctx, n)
    q = ctx.pick(
        ("What is the {A} {N} of {P} for each {C}?", "For each {C}, show the {A} {N} of {P}.")
    ).format(A=words, N=n.words, P=t.plural_words, C=c.words)
    return q, f"SELECT {c.name}, {fn}({n.name}) FROM {t.name} GROUP BY {c.name}"


def _argmax(ctx: Context):
    t = ctx.table(LABEL, NUMBER)
    n = ctx.pick(t.by_role(NUMBER))
    values = ctx.values(t, n)
    highest = ctx.rng.random() < 0.5
    if not unique_max(values if highest else [-v for v in values]):
        return None
    q = ctx.pick(
        ("Which {S} has the {W} {N}? Give its {L}.", "What is the {L} of the {S} with the {W} {N}?")
    ).format(S=t.singular, W="highest" if highest else "lowest", N=n.words, L=t.label.words)
    return q, f"SELECT {t.label.name} FROM {t.name} ORDER BY {n.name} {'DESC' if highest else 'ASC'} LIMIT 1"


def _top_k(ctx: Context):
    t = ctx.table(LABEL, NUMBER)
    n = ctx.pick(t.by_role(NUMBER))
    k = ctx.rng.randint(2, 5)
    highest = ctx.rng.random() < 0.5
    ordered = sorted(ctx.values(t, n), reverse=highest)
    if ordered[k - 1] == ordered[k]:
        return None
    q = ctx.pick(
        ("List the {L} of the {K} {P} with the {W} {N}.", "Show the {L} of the top {K} {P} by {W} {N}.")
    ).format(L=t.label.words, K=k, P=t.plural_words, W="highest" if highest else "lowest", N=n.words)
    return (
        q,
        f"SELECT {t.label.name} FROM {t.name} ORDER BY {n.name} {'DESC' if highest else 'ASC'} LIMIT {k}",
    )


def _and(ctx: Context):
    t = ctx.table(LABEL, NUMBER, CATEGORY)
    c = ctx.pick(t.by_role(CATEGORY))
    v = ctx.pick(ctx.values(t, c))
    n = ctx.pick(t.by_role(NUMBER))
    words, op = ctx.pick(OPS)
    x = ctx.threshold(t, n, op)
    q = ctx.pick(
        (
            "List the {L} of {P} whose {C} is {V} and whose {N} is {O} {X}.",
            "Which {P} have {C} {V} and {N} {O} {X}? Give their {L}.",
        )
    ).format(L=t.label.words, P=t.plural_words, C=c.words, V=v, N=n.words, O=words, X=as_text(x))
    return q, (
        f"SELECT {t.label.name} FROM {t.name} WHERE {c.name} = {sql_literal(v)} AND {n.name} {op} {sql_literal(x)}"
    )


def _or(ctx: Context):
    t = ctx.table(LABEL, CATEGORY)
    c = ctx.pick(t.by_role(CATEGORY))
    choices = sorted(set(ctx.values(t, c)))
    if len(choices) < 2:
        return None
    v1, v2 = ctx.rng.sample(choices, 2)
    q = ctx.pick(
        ("List the {L} of {P} whose {C} is {V1} or {V2}.", "Which {P} have {C} {V1} or {V2}? Give their {L}.")
    ).format(L=t.label.words, P=t.plural_words, C=c.words, V1=v1, V2=v2)
    return q, (
        f"SELECT {t.label.name} FROM {t.name} WHERE {c.name} = {sql_literal(v1)} OR {c.name} = {sql_literal(v2)}"
    )


def _like(ctx: Context):
    t = ctx.table(LABEL)
    labels = [str(v) for v in ctx.values(t, t.label)]
    words = sorted({w for v in labels for w in v.replace("-", " ").split() if len(w) > 2})
    # a word in most labels ("The" of every title) would make a filter that keeps everything
    words = [w for w in words if sum(w.lower() in v.lower() for v in labels) <= len(labels) // 2]
    if t.label.gen[0] == "code":
        return None
    w = ctx.pick(words)
    q = ctx.pick(
        ("List the {L} of {P} whose {L} contains '{W}'.", "Which {P} have '{W}' in their {L}?")
    ).format(L=t.label.words, P=t.plural_words, W=w)
    return q, f"SELECT {t.label.name} FROM {t.name} WHERE {t.label.name} LIKE '%{w}%'"


def _between(ctx: Context):
    t = ctx.table(LABEL, NUMBER)
    n = ctx.pick(t.by_role(NUMBER))
    a = ctx.threshold(t, n, ">")
    b = ctx.threshold(t, n, "<")
    if a >= b:
        return None
    q = ctx.pick(
        (
            "List the {L} of {P} with {N} between {A} and {B}.",
            "Which {P} have {N} between {A} and {B}? Give their {L}.",
        )
    ).format(L=t.label.words, P=t.plural_words, N=n.words, A=as_text(a), B=as_text(b))
    return (
        q,
        f"SELECT {t.label.name} FROM {t.name} WHERE {n.name} BETWEEN {sql_literal(a)} AND {sql_literal(b)}",
    )


def _having(ctx: Context):
    t = ctx.table(CATEGORY)
    c = ctx.pick(t.by_role(CATEGORY))
    k = ctx.pick(sorted(set(tally(ctx.values(t, c))))[:-1])
    words, op = ctx.pick((("more than", ">"), ("at least", ">=")))
    q = ctx.pick(("Which {C} values have {O} {K} {P}?", "List the {C}s that have {O} {K} {P}.")).format(
        C=c.words, O=words, K=k, P=t.plural_words
    )
    return q, f"SELECT {c.name} FROM {t.name} GROUP BY {c.name} HAVING count(*) {op} {k}"


def _group_having_aggregate(ctx: Context):
    t = ctx.table(CATEGORY, NUMBER)
    c = ctx.pick(t.by_role(CATEGORY))
    n = ctx.pick(t.by_role(NUMBER))
    k = ctx.pick(sorted(set(tally(ctx.values(t, c))))[:-1])
    words, fn = aggregate_of(ctx, n)
    q = f"For each {c.words} with more than {k} {t.plural_words}, show the {c.words} and the {words} {n.words}."
    return q, f"SELECT {c.name}, {fn}({n.name}) FROM {t.name} GROUP BY {c.name} HAVING count(*) > {k}"


def _group_argmax(ctx: Context):
    t = ctx.table(CATEGORY)
    c = ctx.pick(t.by_role(CATEGORY))
    most = ctx.rng.random() < 0.6
    counts = tally(ctx.values(t, c))
    if not unique_max(counts if most else [-n for n in counts]):
        return None
    q = ctx.pick(("Which {C} has the {W} {P}?", "What is the {C} with the {W} {P}?")).format(
        C=c.words, W="most" if most else "fewest", P=t.plural_words
    )
    return (
        q,
        f"SELECT {c.name} FROM {t.name} GROUP BY {c.name} ORDER BY count(*) {'DESC' if most else 'ASC'} LIMIT 1",
    )


# ---------------------------------------------------------------------------------------------------------
# Evidence templates (BIRD-style external knowledge)
def _adjective(ctx: Context, *need: str) -> tuple[Table, Column]:
    found = [
        (t, c)
        for t in ctx.spec.tables
        for c in t.by_role(NUMBER)
        if c.adjective and all(t.by_role(r) for r in need)
    ]
    return ctx.pick(found)


def _evidence_text(table: Table, column: Column) -> str:
    word, op, value = column.adjective
    return f"{word} {table.plural_words} refers to {column.name} {op} {as_text(value)}"


def _adjective_sql(column: Column, alias: str = "") -> str:
    """The condition an adjective stands for (``pages > 400``)."""
    _, op, value = column.adjective
    return f"{alias}{column.name} {op} {sql_literal(value)}"


def _evidence_count(ctx: Context):
    t, n = _adjective(ctx)
    q = ctx.pick(("How many {W} {P} are there?", "Count the {W} {P}.")).format(
        W=n.adjective[0], P=t.plural_words
    )
    return q, f"SELECT count(*) FROM {t.name} WHERE {_adjective_sql(n)}", _evidence_text(t, n)


def _evidence_list(ctx: Context):
    t, n = _adjective(ctx, LABEL)
    q = ctx.pick(("List the {L} of {W} {P}.", "Which {P} are {W}? Give their {L}.")).format(
        L=t.label.words, W=n.adjective[0], P=t.plural_words
    )
    return q, f"SELECT {t.label.name} FROM {t.name} WHERE {_adjective_sql(n)}", _evidence_text(t, n)


def _evidence_filter(ctx: Context):
    t, n = _adjective(ctx, CATEGORY)
    c = ctx.pick(t.by_role(CATEGORY))
    v = ctx.pick(ctx.values(t, c))
    q = ctx.pick(("How many {W} {P} have {C} {V}?", "Count the {W} {P} whose {C} is {V}.")).format(
        W=n.adjective[0], P=t.plural_words, C=c.words, V=v
    )
    sql = f"SELECT count(*) FROM {t.name} WHERE {c.name} = {sql_literal(v)} AND {_adjective_sql(n)}"
    return q, sql, _evidence_text(t, n)


def _evidence_join_count(ctx: Context):
    links = [
        (child, fk, parent, n)
        for child, fk, parent in ctx.spec.foreign_keys()
        if parent.label is not None
        for n in child.by_role(NUMBER)
        if n.adjective
    ]
    child, fk, parent, n = ctx.pick(links)
    pv = ctx.parent_value(child, fk, parent)
    q = ctx.pick(("How many {W} {CP} does the {PS} {V} have?", "Count the {W} {CP} of the {PS} {V}.")).format(
        W=n.adjective[0], CP=child.plural_words, PS=parent.singular, V=pv
    )
    sql = (
        f"SELECT count(*) FROM {join_on(child, fk, parent)} "
        f"WHERE T2.{parent.label.name} = {sql_literal(pv)} AND {_adjective_sql(n, 'T1.')}"
    )
    return q, sql, _evidence_text(child, n)


@dataclass(frozen=True)
class Template:
    """One SQL shape: ``label`` is its own hardness label, ``make`` one of the functions above."""

    id: str
    family: str
    label: str
    weight: float
    make: Callable


TEMPLATES: tuple[Template, ...] = (
    Template("count_all", "single", "easy", 0.5, _count_all),
    Template("list_label", "single", "easy", 0.5, _list_label),
    Template("filter_category", "single", "easy", 1.0, _filter_category),
    Template("count_category", "single", "easy", 1.0, _count_category),
    Template("filter_number", "single", "easy", 1.5, _filter_number),
    Template("count_number", "single", "easy", 1.0, _count_number),
    Template("aggregate", "single", "easy", 1.0, _aggregate),
    Template("lookup", "single", "easy", 1.0, _lookup),
    Template("distinct", "single", "easy", 0.4, _distinct),
    Template("count_distinct", "single", "easy", 0.4, _count_distinct),
    Template("date_compare", "single", "easy", 0.7, _date_compare),
    Template("sorted", "single", "easy", 0.6, _sorted),
    Template("aggregate_where", "single", "easy", 1.0, _aggregate_where),
    Template("date_year", "single", "medium", 0.6, _date_year),
    Template("two_columns", "single", "medium", 1.0, _two_columns),
    Template("group_count", "single", "medium", 0.6, _group_count),
    Template("group_aggregate", "single", "medium", 0.8, _group_aggregate),
    Template("argmax", "single", "medium", 1.0, _argmax),
    Template("top_k", "single", "medium", 1.0, _top_k),
    Template("and", "single", "medium", 1.2, _and),
    Template("or", "single", "medium", 0.8, _or),
    Template("like", "single", "medium", 0.6, _like),
    Template("between", "single", "medium", 0.8, _between),
    Template("having", "single", "medium", 0.6, _having),
    Template("group_having_aggregate", "single", "hard", 0.6, _group_having_aggregate),
    Template("group_argmax", "single", "hard", 0.5, _group_argmax),
    Template("join_filter", "join", "medium", 1.5, _join_filter),
    Template("join_count", "join", "medium", 1.0, _join_count),
    Template("join_parent_attribute", "join", "medium", 1.0, _join_parent_attribute),
    Template("join_lookup", "join", "medium", 0.6, _join_lookup),
    Template("join_group_count", "join", "medium", 0.4, _join_group_count),
    Template("join_aggregate", "join", "medium", 1.0, _join_aggregate),
    Template("join_having", "join", "hard", 0.8, _join_having),
    Template("join_group_argmax", "join", "extra", 0.5, _join_group_argmax),
    Template("join_order", "join", "extra", 0.8, _join_order),
    Template("three_join", "join", "hard", 1.2, _three_join),
    Template("three_join_count", "join", "hard", 1.0, _three_join_count),
    Template("above_average", "nested", "hard", 0.8, _above_average),
    Template("not_in", "nested", "hard", 0.4, _not_in),
    Template("in_subquery", "nested", "hard", 1.0, _in_subquery),
    Template("intersect", "setop", "hard", 0.8, _intersect),
    Template("except", "setop", "hard", 0.6, _except),
    Template("union", "setop", "hard", 0.6, _union),
    Template("except_join", "setop", "extra", 0.6, _except_join),
    Template("intersect_join", "setop", "extra", 0.6, _intersect_join),
    Template("intersect_join_number", "setop", "extra", 0.8, _intersect_join_number),
    Template("join_where_argmax", "join", "extra", 1.2, _join_where_argmax),
    Template("three_join_argmax", "join", "extra", 1.0, _three_join_argmax),
    Template("above_average_filter", "nested", "extra", 0.8, _above_average_filter),
    Template("not_in_filter", "nested", "extra", 0.6, _not_in_filter),
    Template("evidence_count", "evidence", "easy", 1.0, _evidence_count),
    Template("evidence_list", "evidence", "easy", 1.0, _evidence_list),
    Template("evidence_filter", "evidence", "medium", 1.0, _evidence_filter),
    Template("evidence_join_count", "evidence", "medium", 1.0, _evidence_join_count),
)
