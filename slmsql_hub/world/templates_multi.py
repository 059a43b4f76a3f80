"""The world's join, nested and set-operation templates (two or three tables, subqueries, INTERSECT / EXCEPT /
UNION): the ``join``, ``nested`` and ``setop`` families of :data:`~slmsql_hub.world.templates.TEMPLATES`, which
holds their weights. Each function has the contract of that module's templates.
"""

from __future__ import annotations

from .schemas import CATEGORY, LABEL, NUMBER, Table
from .slots import (
    OPS,
    Context,
    NoFit,
    aggregate_of,
    as_text,
    bridge_on,
    join_on,
    sql_literal,
    tally,
    unique_max,
)


# ---------------------------------------------------------------------------------------------------------
# Join templates
def _join_filter(ctx: Context):
    child, fk, parent = ctx.fk()
    shown = ctx.listed(child)
    pv = ctx.parent_value(child, fk, parent)
    q = ctx.pick(
        (
            "List the {X} of {CP} of the {PS} {V}.",
            "What are the {X}s of the {CP} whose {PS} is {V}?",
            "Show the {X} of {CP} belonging to the {PS} {V}.",
        )
    ).format(X=shown.words, CP=child.plural_words, PS=parent.singular, V=pv)
    return (
        q,
        f"SELECT T1.{shown.name} FROM {join_on(child, fk, parent)} WHERE T2.{parent.label.name} = {sql_literal(pv)}",
    )


def _join_count(ctx: Context):
    child, fk, parent = ctx.fk()
    pv = ctx.pick(ctx.values(parent, parent.label))
    q = ctx.pick(
        (
            "How many {CP} does the {PS} {V} have?",
            "Count the {CP} of the {PS} {V}.",
            "What is the number of {CP} of the {PS} {V}?",
        )
    ).format(CP=child.plural_words, PS=parent.singular, V=pv)
    return (
        q,
        f"SELECT count(*) FROM {join_on(child, fk, parent)} WHERE T2.{parent.label.name} = {sql_literal(pv)}",
    )


def _join_parent_attribute(ctx: Context):
    child, fk, parent = ctx.fk(parent_label=False)
    c = ctx.pick(parent.by_role(CATEGORY))
    v = ctx.pick(ctx.values(parent, c))
    shown = ctx.listed(child)
    q = ctx.pick(
        ("List the {X} of {CP} whose {PS} has {C} {V}.", "Show the {X} of {CP} of {PP} with {C} {V}.")
    ).format(X=shown.words, CP=child.plural_words, PS=parent.singular, PP=parent.plural_words, C=c.words, V=v)
    return q, f"SELECT T1.{shown.name} FROM {join_on(child, fk, parent)} WHERE T2.{c.name} = {sql_literal(v)}"


def _join_lookup(ctx: Context):
    links = [(c, f, p) for c, f, p in ctx.spec.foreign_keys() if c.label is not None and p.label is not None]
    child, fk, parent = ctx.pick(links)
    v = ctx.pick(ctx.values(child, child.label))
    q = ctx.pick(
        (
            "What is the {PL} of the {PS} of the {CS} {V}?",
            "Give the {PL} of the {PS} that the {CS} {V} belongs to.",
        )
    ).format(PL=parent.label.words, PS=parent.singular, CS=child.singular, V=v)
    return q, (
        f"SELECT T2.{parent.label.name} FROM {join_on(child, fk, parent)} WHERE T1.{child.label.name} = {sql_literal(v)}"
    )


def _join_group_count(ctx: Context):
    child, fk, parent = ctx.fk()
    q = ctx.pick(
        (
            "For each {PS}, how many {CP} are there? Show the {PL} and the count.",
            "Show the {PL} of each {PS} and the number of their {CP}.",
        )
    ).format(PS=parent.singular, CP=child.plural_words, PL=parent.label.words)
    return (
        q,
        f"SELECT T2.{parent.label.name}, count(*) FROM {join_on(child, fk, parent)} GROUP BY T1.{fk.name}",
    )


def _join_aggregate(ctx: Context):
    child, fk, parent = ctx.fk()
    n = ctx.pick(child.by_role(NUMBER))
    pv = ctx.parent_value(child, fk, parent)
    words, fn = aggregate_of(ctx, n)
    q = ctx.pick(
        ("What is the {A} {N} of {CP} of the {PS} {V}?", "Find the {A} {N} of the {CP} of the {PS} {V}.")
    ).format(A=words, N=n.words, CP=child.plural_words, PS=parent.singular, V=pv)
    return (
        q,
        f"SELECT {fn}(T1.{n.name}) FROM {join_on(child, fk, parent)} WHERE T2.{parent.label.name} = {sql_literal(pv)}",
    )


def _join_group_argmax(ctx: Context):
    child, fk, parent = ctx.fk()
    if not unique_max(tally(ctx.values(child, fk))):
        return None
    q = ctx.pick(
        (
            "Which {PS} has the most {CP}? Give its {PL}.",
            "What is the {PL} of the {PS} with the largest number of {CP}?",
        )
    ).format(PS=parent.singular, CP=child.plural_words, PL=parent.label.words)
    return q, (
        f"SELECT T2.{parent.label.name} FROM {join_on(child, fk, parent)} "
        f"GROUP BY T1.{fk.name} ORDER BY count(*) DESC LIMIT 1"
    )


def _join_having(ctx: Context):
    child, fk, parent = ctx.fk()
    counts = sorted(set(tally(ctx.values(child, fk))))
    if len(counts) < 3:
        return None
    k = ctx.pick(counts[len(counts) // 3 : -1])
    q = ctx.pick(
        (
            "List the {PL} of {PP} with at least {K} {CP}.",
            "Which {PP} have at least {K} {CP}? Give their {PL}.",
        )
    ).format(PL=parent.label.words, PP=parent.plural_words, K=k, CP=child.plural_words)
    return q, (
        f"SELECT T2.{parent.label.name} FROM {join_on(child, fk, parent)} GROUP BY T1.{fk.name} HAVING count(*) >= {k}"
    )


def _join_order(ctx: Context):
    child, fk, parent = ctx.fk()
    if child.label is None or not child.by_role(NUMBER):
        return None
    n = ctx.pick(child.by_role(NUMBER))
    parent_id = ctx.pick(ctx.values(child, fk))
    pv = ctx.values(parent, parent.label)[parent_id - 1]
    mine = [v for v, p in zip(ctx.values(child, n), ctx.values(child, fk)) if p == parent_id]
    if not unique_max(mine):
        return None
    q = ctx.pick(
        (
            "What is the {CL} of the {CS} of the {PS} {V} with the highest {N}?",
            "Among the {CP} of the {PS} {V}, which has the highest {N}? Give its {CL}.",
        )
    ).format(
        CL=child.label.words, CS=child.singular, CP=child.plural_words, PS=parent.singular, V=pv, N=n.words
    )
    return q, (
        f"SELECT T1.{child.label.name} FROM {join_on(child, fk, parent)} "
        f"WHERE T2.{parent.label.name} = {sql_literal(pv)} ORDER BY T1.{n.name} DESC LIMIT 1"
    )


def _three_join(ctx: Context):
    event, fa, a, fb, b = ctx.bridge()
    av = ctx.parent_value(event, fa, a)
    q = ctx.pick(
        (
            "List the {BL} of {BP} that have {EP} with the {AS} {V}.",
            "Which {BP} have {EP} with the {AS} {V}? Give their {BL}.",
        )
    ).format(BL=b.label.words, BP=b.plural_words, EP=event.plural_words, AS=a.singular, V=av)
    return q, (
        f"SELECT DISTINCT T3.{b.label.name} FROM {bridge_on(event, fa, a, fb, b)} "
        f"WHERE T2.{a.label.name} = {sql_literal(av)}"
    )


def _three_join_count(ctx: Context):
    event, fa, a, fb, b = ctx.bridge()
    row = ctx.pick(ctx.rows[event.name])
    av = ctx.values(a, a.label)[row[event.columns.index(fa)] - 1]
    bv = ctx.values(b, b.label)[row[event.columns.index(fb)] - 1]
    q = ctx.pick(
        (
            "How many {EP} are there between the {AS} {A} and the {BS} {B}?",
            "Count the {EP} of the {AS} {A} with the {BS} {B}.",
        )
    ).format(EP=event.plural_words, AS=a.singular, A=av, BS=b.singular, B=bv)
    return q, (
        f"SELECT count(*) FROM {bridge_on(event, fa, a, fb, b)} "
        f"WHERE T2.{a.label.name} = {sql_literal(av)} AND T3.{b.label.name} = {sql_literal(bv)}"
    )


# ---------------------------------------------------------------------------------------------------------
# Nested and set-operation templates
def _above_average(ctx: Context):
    t = ctx.table(LABEL, NUMBER)
    n = ctx.pick(t.by_role(NUMBER))
    above = ctx.rng.random() < 0.5
    q = ctx.pick(
        (
            "List the {L} of {P} whose {N} is {W} the average {N}.",
            "Which {P} have a {N} {W} the average? Give their {L}.",
        )
    ).format(L=t.label.words, P=t.plural_words, N=n.words, W="above" if above else "below")
    return (
        q,
        f"SELECT {t.label.name} FROM {t.name} WHERE {n.name} {'>' if above else '<'} (SELECT avg({n.name}) FROM {t.name})",
    )


def _not_in(ctx: Context):
    child, fk, parent = ctx.fk()
    q = ctx.pick(
        ("List the {PL} of {PP} that have no {CP}.", "Which {PP} do not have any {CP}? Give their {PL}.")
    ).format(PL=parent.label.words, PP=parent.plural_words, CP=child.plural_words)
    return q, (
        f"SELECT {parent.label.name} FROM {parent.name} "
        f"WHERE {parent.pk.name} NOT IN (SELECT {fk.name} FROM {child.name})"
    )


def _in_subquery(ctx: Context):
    child, fk, parent = ctx.fk()
    cond_words, cond, _ = _condition(ctx, child)
    q = ctx.pick(
        (
            "List the {PL} of {PP} that have {CP} with {W}.",
            "Which {PP} have any {CS} with {W}? Give their {PL}.",
        )
    ).format(
        PL=parent.label.words, PP=parent.plural_words, CP=child.plural_words, CS=child.singular, W=cond_words
    )
    return q, (
        f"SELECT {parent.label.name} FROM {parent.name} "
        f"WHERE {parent.pk.name} IN (SELECT {fk.name} FROM {child.name} WHERE {cond})"
    )


def _intersect(ctx: Context):
    t = ctx.table(CATEGORY, NUMBER)
    c = ctx.pick(t.by_role(CATEGORY))
    n = ctx.pick(t.by_role(NUMBER))
    x = ctx.threshold(t, n, ">")
    y = ctx.threshold(t, n, "<")
    q = ctx.pick(
        (
            "List the {C}s that have both {P} with {N} greater than {X} and {P} with {N} less than {Y}.",
            "Which {C} values have {P} with {N} greater than {X} and also {P} with {N} less than {Y}?",
        )
    ).format(C=c.words, P=t.plural_words, N=n.words, X=as_text(x), Y=as_text(y))
    return q, (
        f"SELECT {c.name} FROM {t.name} WHERE {n.name} > {sql_literal(x)} "
        f"INTERSECT SELECT {c.name} FROM {t.name} WHERE {n.name} < {sql_literal(y)}"
    )


def _except(ctx: Context):
    t = ctx.table(CATEGORY, NUMBER)
    c = ctx.pick(t.by_role(CATEGORY))
    n = ctx.pick(t.by_role(NUMBER))
    x = sorted(ctx.values(t, n))[-ctx.rng.randint(2, 12)]
    q = ctx.pick(
        (
            "Which {C} values have no {P} with {N} greater than {X}?",
            "List the {C}s without any {S} whose {N} is greater than {X}.",
        )
    ).format(C=c.words, P=t.plural_words, S=t.singular, N=n.words, X=as_text(x))
    return q, (
        f"SELECT {c.name} FROM {t.name} EXCEPT SELECT {c.name} FROM {t.name} WHERE {n.name} > {sql_literal(x)}"
    )


def _union(ctx: Context):
    t = ctx.table(LABEL, CATEGORY, NUMBER)
    c = ctx.pick(t.by_role(CATEGORY))
    v = ctx.pick(ctx.values(t, c))
    n = ctx.pick(t.by_role(NUMBER))
    x = sorted(ctx.values(t, n))[-ctx.rng.randint(2, 8)]
    q = f"Give the {t.label.words} of {t.plural_words} with {c.words} {v}, together with the {t.label.words} of {t.plural_words} whose {n.words} is greater than {as_text(x)}."
    return q, (
        f"SELECT {t.label.name} FROM {t.name} WHERE {c.name} = {sql_literal(v)} "
        f"UNION SELECT {t.label.name} FROM {t.name} WHERE {n.name} > {sql_literal(x)}"
    )


def _except_join(ctx: Context):
    child, fk, parent = ctx.fk()
    c = ctx.pick(child.by_role(CATEGORY))
    v = ctx.pick(ctx.values(child, c))
    q = ctx.pick(
        (
            "List the {PL} of {PP} except those with {CP} whose {C} is {V}.",
            "Which {PP} have no {CP} with {C} {V}? Give their {PL}.",
        )
    ).format(PL=parent.label.words, PP=parent.plural_words, CP=child.plural_words, C=c.words, V=v)
    return q, (
        f"SELECT {parent.label.name} FROM {parent.name} EXCEPT SELECT T2.{parent.label.name} "
        f"FROM {join_on(child, fk, parent)} WHERE T1.{c.name} = {sql_literal(v)}"
    )


def _intersect_join(ctx: Context):
    child, fk, parent = ctx.fk()
    c = ctx.pick(child.by_role(CATEGORY))
    choices = sorted(set(ctx.values(child, c)))
    if len(choices) < 2:
        return None
    v1, v2 = ctx.rng.sample(choices, 2)
    q = ctx.pick(
        (
            "List the {PL} of {PP} that have {CP} with {C} {V1} and also {CP} with {C} {V2}.",
            "Which {PP} have both {CP} with {C} {V1} and {CP} with {C} {V2}? Give their {PL}.",
        )
    ).format(PL=parent.label.words, PP=parent.plural_words, CP=child.plural_words, C=c.words, V1=v1, V2=v2)
    part = f"SELECT T2.{parent.label.name} FROM {join_on(child, fk, parent)} WHERE T1.{c.name} = "
    return q, f"{part}{sql_literal(v1)} INTERSECT {part}{sql_literal(v2)}"


def _condition(ctx: Context, table: Table, alias: str = "") -> tuple[str, str, list[bool]]:
    """A random condition on ``table``: ``(words, sql, mask over its rows)``, a category or a number test."""
    cats, nums = table.by_role(CATEGORY), table.by_role(NUMBER)
    if not cats and not nums:
        raise NoFit
    if cats and (not nums or ctx.rng.random() < 0.5):
        c = ctx.pick(cats)
        v = ctx.pick(ctx.values(table, c))
        mask = [value == v for value in ctx.values(table, c)]
        return f"{c.words} {v}", f"{alias}{c.name} = {sql_literal(v)}", mask
    n = ctx.pick(nums)
    words, op = ctx.pick(OPS)
    x = ctx.threshold(table, n, op)
    compare = {">": lambda a: a > x, "<": lambda a: a < x, ">=": lambda a: a >= x, "<=": lambda a: a <= x}[op]
    mask = [compare(value) for value in ctx.values(table, n)]
    return f"{n.words} {words} {as_text(x)}", f"{alias}{n.name} {op} {sql_literal(x)}", mask


def _join_where_argmax(ctx: Context):
    child, fk, parent = ctx.fk()
    words, sql_cond, mask = _condition(ctx, child, "T1.")
    kept = [p for p, keep in zip(ctx.values(child, fk), mask) if keep]
    counts = tally(kept)
    if not counts or not unique_max(counts):
        return None
    q = ctx.pick(
        (
            "Which {PS} has the most {CP} with {W}? Give its {PL}.",
            "What is the {PL} of the {PS} with the largest number of {CP} with {W}?",
        )
    ).format(PS=parent.singular, CP=child.plural_words, W=words, PL=parent.label.words)
    return q, (
        f"SELECT T2.{parent.label.name} FROM {join_on(child, fk, parent)} WHERE {sql_cond} "
        f"GROUP BY T1.{fk.name} ORDER BY count(*) DESC LIMIT 1"
    )


def _three_join_argmax(ctx: Context):
    event, fa, a, fb, b = ctx.bridge()
    a_id = ctx.pick(ctx.values(event, fa))
    av = ctx.values(a, a.label)[a_id - 1]
    kept = [bid for aid, bid in zip(ctx.values(event, fa), ctx.values(event, fb)) if aid == a_id]
    if not unique_max(tally(kept)):
        return None
    q = ctx.pick(
        (
            "Which {BS} has the most {EP} with the {AS} {V}? Give its {BL}.",
            "What is the {BL} of the {BS} with the most {EP} with the {AS} {V}?",
        )
    ).format(BS=b.singular, EP=event.plural_words, AS=a.singular, V=av, BL=b.label.words)
    return q, (
        f"SELECT T3.{b.label.name} FROM {bridge_on(event, fa, a, fb, b)} WHERE T2.{a.label.name} = {sql_literal(av)} "
        f"GROUP BY T1.{fb.name} ORDER BY count(*) DESC LIMIT 1"
    )


def _above_average_filter(ctx: Context):
    t = ctx.table(LABEL, NUMBER, CATEGORY)
    n = ctx.pick(t.by_role(NUMBER))
    c = ctx.pick(t.by_role(CATEGORY))
    v = ctx.pick(ctx.values(t, c))
    above = ctx.rng.random() < 0.5
    q = ctx.pick(
        (
            "List the {L} of {P} with {C} {V} whose {N} is {W} the average {N}.",
            "Which {P} with {C} {V} have a {N} {W} the average? Give their {L}.",
        )
    ).format(L=t.label.words, P=t.plural_words, C=c.words, V=v, N=n.words, W="above" if above else "below")
    return q, (
        f"SELECT {t.label.name} FROM {t.name} WHERE {c.name} = {sql_literal(v)} "
        f"AND {n.name} {'>' if above else '<'} (SELECT avg({n.name}) FROM {t.name})"
    )


def _not_in_filter(ctx: Context):
    child, fk, parent = ctx.fk()
    words, sql_cond, _ = _condition(ctx, parent)
    q = ctx.pick(
        (
            "List the {PL} of {PP} with {W} that have no {CP}.",
            "Which {PP} with {W} do not have any {CP}? Give their {PL}.",
        )
    ).format(PL=parent.label.words, PP=parent.plural_words, W=words, CP=child.plural_words)
    return q, (
        f"SELECT {parent.label.name} FROM {parent.name} WHERE {sql_cond} "
        f"AND {parent.pk.name} NOT IN (SELECT {fk.name} FROM {child.name})"
    )


def _intersect_join_number(ctx: Context):
    child, fk, parent = ctx.fk()
    n = ctx.pick(child.by_role(NUMBER))
    x = ctx.threshold(child, n, ">")
    y = ctx.threshold(child, n, "<")
    q = ctx.pick(
        (
            "List the {PL} of {PP} that have {CP} with {N} greater than {X} and also {CP} with {N} less than {Y}.",
            "Which {PP} have both {CP} with {N} greater than {X} and {CP} with {N} less than {Y}? Give their {PL}.",
        )
    ).format(
        PL=parent.label.words,
        PP=parent.plural_words,
        CP=child.plural_words,
        N=n.words,
        X=as_text(x),
        Y=as_text(y),
    )
    part = f"SELECT T2.{parent.label.name} FROM {join_on(child, fk, parent)} WHERE T1.{n.name}"
    return q, f"{part} > {sql_literal(x)} INTERSECT {part} < {sql_literal(y)}"
