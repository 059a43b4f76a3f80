"""The ONE result comparator of slmsql-hub: do a prediction's rows match the gold rows?

The reward, the ``slmsql/ex`` metric, evaluation and the Space all call these three functions, so a verdict
means the same thing everywhere. Two rules (``CompareMode``) are implemented, each to the letter of the
official evaluator it is named after:

``bird`` -- BIRD's rule (mini_dev ``evaluation_ex.py``): ``set(pred_rows) == set(gold_rows)``. Row order and
duplicate rows are ignored; column order matters. :func:`prepare_sql` returns the SQL unchanged and
:func:`order_matters` is always ``False``.

``spider`` -- the Spider test-suite rule (``exec_eval.eval_exec_match`` with default flags):

1. Both queries are rewritten before execution (:func:`prepare_sql`): the literal texts ``> =``, ``< =`` and
   ``! =`` become ``>=``, ``<=`` and ``!=`` (plain text replacement, as the official code does it, so also
   inside string literals); every ``DISTINCT`` keyword is removed (unless ``keep_distinct``) exactly the way
   the official code does it -- the keyword token is cut out and nothing else changes, so ``SELECT DISTINCT
   a`` becomes ``SELECT  a`` and ``count(DISTINCT a)`` becomes ``count( a)``: the official evaluator really
   turns COUNT(DISTINCT) into COUNT, and we keep that for parity; ``distinct`` inside string literals,
   quoted identifiers and comments is never touched. The official removal also keeps only the *first*
   statement of the text (it tokenizes with ``sqlparse.parse(sql)[0]``), so text after the first top-level
   ``;`` is dropped too. Finally ``YEAR(CURDATE())`` (case-insensitive, any whitespace inside, and the
   whitespace after it) becomes ``2020``.
2. Row order matters only when the *prepared gold* SQL contains ``order by`` (lower-cased substring test,
   :func:`order_matters`).
3. :func:`rows_match`: two empty results match; results with different row counts or different column
   counts do not; then a quick reject compares the rows with each row's values sorted (sorted by
   ``str(value) + str(type(value))`` as the official code does): as lists when order matters, else as sets;
   finally some permutation of the *prediction's* columns must make the rows equal -- as a multiset, or as
   a list when order matters. Candidate permutations are constrained deterministically, over all rows: a
   prediction column can only take a gold column's place when all its values appear in that gold column
   (the official code samples 20 random rows for this; since a matching permutation always satisfies the
   constraint on every row, the verdict is the same and ours is deterministic). The quick reject is only
   run when it can change the verdict -- when equal values can sort differently (an int and a float of
   the same value, or ``-0.0``); otherwise a matching permutation implies it passes, and skipping it keeps
   100k-row comparisons fast.

Values compare with plain Python equality (``1 == 1.0``, ``None == None``) in both modes. Rows may be
tuples or lists (lists are converted to tuples).

Example:

```python
>>> from slmsql_hub.sql.compare import prepare_sql, order_matters, rows_match
>>> gold = prepare_sql("SELECT DISTINCT name, age FROM singer ORDER BY age", "spider")
>>> gold
'SELECT  name, age FROM singer ORDER BY age'
>>> rows_match([(30, "Ann"), (41, "Bob")], [("Ann", 30), ("Bob", 41)], "spider",
...            order_matters=order_matters(gold, "spider"))
True
>>> rows_match([(30, "Ann"), (41, "Bob")], [("Ann", 30), ("Bob", 41)], "bird")
False

```
"""

from __future__ import annotations

import enum
import logging
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import chain
from operator import itemgetter

from ..errors import UsageError
from .extract import skip_quoted_or_comment

logger = logging.getLogger(__name__)

__all__ = ["CompareMode", "order_matters", "prepare_sql", "result_key", "rows_match"]

_CURDATE_YEAR = re.compile(r"YEAR\s*\(\s*CURDATE\s*\(\s*\)\s*\)\s*", flags=re.IGNORECASE)
_SPACED_OPERATORS = (("> =", ">="), ("< =", "<="), ("! =", "!="))


class CompareMode(str, enum.Enum):
    """Which official rule decides a match: ``bird`` (set equality) or ``spider`` (test-suite rule).

    >>> str(CompareMode("spider"))
    'spider'
    """

    BIRD = "bird"
    SPIDER = "spider"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, mode: CompareMode | str) -> CompareMode:
        """The mode ``mode`` names (any case): the ONE check of a compare mode, wherever a recipe, a CLI flag or
        a caller gives one.

        >>> CompareMode.parse("exact")
        Traceback (most recent call last):
        ...
        slmsql_hub.errors.UsageError: unknown compare mode 'exact': use one of 'bird', 'spider'
        """
        if isinstance(mode, CompareMode):
            return mode
        try:
            return cls(str(mode).strip().lower())
        except ValueError:
            choices = ", ".join(repr(m.value) for m in cls)
            raise UsageError(f"unknown compare mode {mode!r}: use one of {choices}") from None


# ---------------------------------------------------------------------------------------------------------
# SQL preparation (spider rule)


def check_keep_distinct(
    mode: CompareMode | str, keep_distinct: bool, option: str = "keep_distinct", mode_option: str = "compare_mode"
) -> None:
    """One :class:`UsageError` line when ``keep_distinct`` is set with a mode other than spider (it changes only
    Spider's rule); ``option`` and ``mode_option`` are the names the user wrote.

    >>> check_keep_distinct("spider", True)
    >>> check_keep_distinct("bird", True, "--keep-distinct", "--mode")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: --keep-distinct only applies to --mode spider; remove it or switch the mode
    """
    if keep_distinct and CompareMode.parse(mode) is not CompareMode.SPIDER:
        raise UsageError(f"{option} only applies to {mode_option} spider; remove it or switch the mode")


def _distinct_spans_with_tokenizer(sql: str) -> tuple[list[tuple[int, int]], int | None]:
    """Spans ``[start, end)`` of DISTINCT keyword tokens and the end of the first statement, via sqlglot."""
    from sqlglot.dialects.sqlite import SQLite
    from sqlglot.tokens import TokenType

    spans: list[tuple[int, int]] = []
    for token in SQLite().tokenize(sql):
        if token.token_type == TokenType.SEMICOLON:
            return spans, token.end + 1
        # A token's span includes its quotes, so a quoted "distinct" or 'distinct' never equals the keyword.
        if sql[token.start : token.end + 1].lower() == "distinct":
            spans.append((token.start, token.end + 1))
    return spans, None


_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")


def _distinct_spans_fallback(sql: str) -> tuple[list[tuple[int, int]], int | None]:
    """:func:`_distinct_spans_with_tokenizer` by a quote- and comment-aware scanner, for text the tokenizer
    rejects (an unterminated string, a stray character)."""
    spans: list[tuple[int, int]] = []
    index, length = 0, len(sql)
    while index < length:
        char = sql[index]
        end = skip_quoted_or_comment(sql, index) if char in "'\"`[-/" else index
        if end != index:
            index = end
        elif char == ";":
            return spans, index + 1
        elif char in _WORD_CHARS:
            start = index
            while index < length and sql[index] in _WORD_CHARS:
                index += 1
            if sql[start:index].lower() == "distinct":
                spans.append((start, index))
        else:
            index += 1
    return spans, None


def _remove_distinct(sql: str) -> str:
    """Cut every DISTINCT keyword out of the first statement of ``sql``, as the official evaluator does."""
    from sqlglot.errors import TokenError

    try:
        spans, statement_end = _distinct_spans_with_tokenizer(sql)
    except TokenError as err:
        logger.debug("sqlglot cannot tokenize %r (%s); using the quote-aware fallback scanner", sql, err)
        spans, statement_end = _distinct_spans_fallback(sql)
    text = sql if statement_end is None else sql[:statement_end]
    pieces, position = [], 0
    for start, end in spans:
        pieces.append(text[position:start])
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def prepare_sql(sql: str, mode: CompareMode | str, keep_distinct: bool = False) -> str:
    """The SQL to execute for a prediction or gold, rewritten as the official evaluator of ``mode`` does.

    ``bird`` returns ``sql`` unchanged; ``spider`` joins spaced operators, removes DISTINCT, keeps the first
    statement and turns ``YEAR(CURDATE())`` into ``2020`` (module docstring). ``keep_distinct`` is the official
    ``--keep_distinct`` flag (the text after a first ``;`` is then kept too, as the official code does).

    Example:

    ```python
    >>> prepare_sql("SELECT count(DISTINCT name) FROM t WHERE age > = 3", "spider")
    'SELECT count( name) FROM t WHERE age >= 3'
    >>> prepare_sql("SELECT name FROM t WHERE note = 'distinct'", "spider")
    "SELECT name FROM t WHERE note = 'distinct'"
    >>> prepare_sql("SELECT DISTINCT a FROM t", "spider", keep_distinct=True)
    'SELECT DISTINCT a FROM t'
    >>> prepare_sql("SELECT DISTINCT a FROM t", "bird")
    'SELECT DISTINCT a FROM t'

    ```
    """
    if CompareMode.parse(mode) is CompareMode.BIRD:
        return sql
    for spaced, joined in _SPACED_OPERATORS:
        sql = sql.replace(spaced, joined)
    if not keep_distinct:
        sql = _remove_distinct(sql)
    return _CURDATE_YEAR.sub("2020", sql)


def order_matters(prepared_gold_sql: str, mode: CompareMode | str) -> bool:
    """Whether rows must match in order against this gold (the SQL *after* :func:`prepare_sql`): never in
    ``bird`` mode, in ``spider`` mode when the text contains ``order by`` (case-insensitive).

    Example:

    ```python
    >>> order_matters("SELECT a FROM t ORDER BY a", "spider"), order_matters("SELECT a FROM t ORDER BY a", "bird")
    (True, False)

    ```
    """
    if CompareMode.parse(mode) is CompareMode.BIRD:
        return False
    return "order by" in prepared_gold_sql.lower()


# ---------------------------------------------------------------------------------------------------------
# Row comparison


def _as_rows(rows: Iterable[Sequence]) -> list[tuple]:
    return list(map(tuple, rows))  # tuple(t) returns t itself for a tuple


def _value_key(value) -> str:
    return str(value) + str(type(value))


def _unordered_row(row: tuple) -> tuple:
    return tuple(sorted(row, key=_value_key))


def _passes_quick_check(gold: list[tuple], pred: list[tuple], ordered: bool) -> bool:
    """The official quick reject: rows with their values sorted must agree (as lists or as sets)."""
    gold_unordered = map(_unordered_row, gold)
    pred_unordered = map(_unordered_row, pred)
    if ordered:
        return all(g == p for g, p in zip(gold_unordered, pred_unordered))
    return set(gold_unordered) == set(pred_unordered)


def _quick_check_can_decide(value_sets: list[set], rows: tuple[list[tuple], ...]) -> bool:
    """Whether the quick reject can say no where a matching column permutation exists: only when equal values
    have different sort keys (an int and a float of the same value, or ``0.0`` and ``-0.0``). ``value_sets``:
    the distinct values of every column of both results; ``rows``: both results (scanned only for a float zero).
    """
    types = set(map(type, chain.from_iterable(value_sets)))
    if float not in types:
        return False
    if types - {float, str, bytes, type(None)}:
        return True
    if not any(type(value) is float and value == 0 for value in chain.from_iterable(value_sets)):
        return False
    # A set keeps one of 0.0 / -0.0: look at every value.
    return any(
        type(value) is float and value == 0 and math.copysign(1.0, value) < 0
        for result in rows
        for value in chain.from_iterable(result)
    )


def _same_multiset(left: Iterable, right: Iterable) -> bool:
    # dict equality runs in C; Counters built from iterables hold no zero counts, so it equals Counter ==.
    return dict.__eq__(Counter(left), Counter(right))


def _columns(rows: list[tuple], width: int) -> list[tuple]:
    return [tuple(map(itemgetter(i), rows)) for i in range(width)]


def _spider_rows_match(gold: list[tuple], pred: list[tuple], ordered: bool) -> bool:
    """The spider rule on two non-empty results of equal size and width (see the module docstring)."""
    width = len(gold[0])
    if width == 1:  # a one-value row is its own sorted row: the quick reject adds nothing
        return gold == pred if ordered else _same_multiset(gold, pred)
    gold_columns, pred_columns = _columns(gold, width), _columns(pred, width)
    gold_value_sets = [set(column) for column in gold_columns]
    pred_value_sets = [set(column) for column in pred_columns]
    # The official verdict is "quick check passes AND some permutation matches". Only a matching result can
    # be turned down by the quick check, so it runs last, and only when it can change the verdict.
    if not _some_permutation_matches(gold_columns, pred_columns, gold_value_sets, pred_value_sets, ordered):
        return False
    if _quick_check_can_decide(gold_value_sets + pred_value_sets, (gold, pred)):
        return _passes_quick_check(gold, pred, ordered)
    return True


def _some_permutation_matches(
    gold_columns: list[tuple],
    pred_columns: list[tuple],
    gold_value_sets: list[set],
    pred_value_sets: list[set],
    ordered: bool,
) -> bool:
    """Whether a permutation of the prediction's columns makes the rows equal (multiset, or list if ordered)."""
    width = len(gold_columns)
    if ordered:
        # Rows equal as lists <=> every gold column equals its prediction column as a whole vector, so a
        # permutation exists exactly when both sides hold the same multiset of column vectors.
        return _same_multiset(gold_columns, pred_columns)

    # A prediction column can take gold column g's place only if all its values occur in gold column g
    # (checked over all rows, so the search is deterministic).
    candidates = [[p for p in range(width) if pred_value_sets[p] <= gold_value_sets[g]] for g in range(width)]
    if any(not options for options in candidates):
        return False
    # Identical prediction columns are interchangeable: only the first free one of each class is tried.
    class_of: dict[tuple, int] = {}
    pred_class = [class_of.setdefault(column, len(class_of)) for column in pred_columns]
    # Partial checks only pay off when deeper gold columns still have several candidates.
    branching_after = [any(len(candidates[h]) > 1 for h in range(g + 1, width)) for g in range(width)]
    gold_counts: dict[int, dict] = {}
    chosen: list[int] = []

    def rows_agree_so_far(g: int) -> bool:
        """Do gold columns 0..g and the chosen prediction columns agree as multisets of (partial) rows?"""
        if g not in gold_counts:  # gold columns are placed in order, so the prefix depends on g only
            gold_counts[g] = Counter(zip(*gold_columns[: g + 1]))
        return dict.__eq__(gold_counts[g], Counter(zip(*(pred_columns[p] for p in chosen))))

    def search(g: int) -> bool:
        tried_classes = set()
        for p in candidates[g]:
            if p in chosen or pred_class[p] in tried_classes:
                continue
            tried_classes.add(pred_class[p])
            chosen.append(p)
            if g == width - 1:
                if rows_agree_so_far(g):
                    return True
            elif (not branching_after[g] or rows_agree_so_far(g)) and search(g + 1):
                return True
            chosen.pop()
        return False

    return search(0)


def rows_match(
    pred_rows: Iterable[Sequence],
    gold_rows: Iterable[Sequence],
    mode: CompareMode | str,
    *,
    order_matters: bool = False,
) -> bool:
    """Whether a prediction's result rows (tuples or lists) match the gold rows under ``mode``'s rule:
    ``bird``, ``set(pred) == set(gold)``; ``spider``, the test-suite rule of the module docstring, in order when
    ``order_matters`` (pass ``order_matters(prepare_sql(gold, "spider"), "spider")``; ignored by ``bird``).

    Example:

    ```python
    >>> rows_match([(1,), (1,), (2,)], [(2,), (1,)], "bird")
    True
    >>> rows_match([(1,), (1,), (2,)], [(2,), (1,)], "spider")
    False
    >>> rows_match([(2,), (1,)], [(1,), (2,)], "spider", order_matters=True)
    False
    >>> rows_match([], [], "spider")
    True

    ```
    """
    mode = CompareMode.parse(mode)
    pred = _as_rows(pred_rows)
    gold = _as_rows(gold_rows)
    if mode is CompareMode.BIRD:
        return set(pred) == set(gold)
    if not gold and not pred:
        return True
    if len(gold) != len(pred):
        return False
    if len(gold[0]) != len(pred[0]):
        return False
    return _spider_rows_match(gold, pred, order_matters)


def result_key(rows: Iterable[Sequence], mode: CompareMode | str, *, order_matters: bool = False) -> tuple:
    """A canonical, hashable key of one result under ``mode``, for grouping results that match each other
    (execution-majority voting): ``bird``, the set of rows; ``spider``, each row's values sorted as the
    official quick check sorts them (so a permutation of the columns gives the same key), the rows as a
    multiset, or in order when ``order_matters``. Equal keys are what :func:`rows_match` calls a match, up to
    the spider rule's one coarseness: the key permutes each row's values on its own, not whole columns.

    Example:

    ```python
    >>> result_key([(1, "a"), (1, "a")], "bird") == result_key([(1, "a")], "bird")
    True
    >>> result_key([(1, "a"), (1, "a")], "spider") == result_key([(1, "a")], "spider")
    False
    >>> result_key([("a", 1), ("b", 2)], "spider") == result_key([(2, "b"), (1, "a")], "spider")
    True
    >>> result_key([("a", 1), ("b", 2)], "spider", order_matters=True) == result_key([(2, "b"), (1, "a")], "spider", order_matters=True)
    False

    ```
    """
    rows = _as_rows(rows)
    if CompareMode.parse(mode) is CompareMode.BIRD:
        return ("bird", tuple(sorted(set(rows), key=repr)))
    sorted_rows = [_unordered_row(row) for row in rows]
    if not order_matters:
        sorted_rows.sort(key=repr)
    return ("spider", tuple(sorted_rows))
