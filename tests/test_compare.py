"""The comparator: SQL preparation and row matching under the ``bird`` and ``spider`` rules."""

from __future__ import annotations

import random
import time

import pytest

from slmsql_hub.errors import UsageError
from slmsql_hub.sql.compare import CompareMode, order_matters, prepare_sql, rows_match

# ---------------------------------------------------------------------------------------------------------
# modes


def test_compare_mode_prints_as_its_value():
    assert str(CompareMode.SPIDER) == "spider"
    assert f"{CompareMode.BIRD}" == "bird"
    assert CompareMode("bird") is CompareMode.BIRD


def test_unknown_mode_raises_usage_error_naming_the_choices():
    with pytest.raises(UsageError, match="'bird', 'spider'"):
        rows_match([(1,)], [(1,)], "exact")
    with pytest.raises(UsageError):
        prepare_sql("SELECT 1", "test-suite")


def test_mode_string_is_case_insensitive():
    assert rows_match([(1,), (1,)], [(1,)], "BIRD")
    assert not rows_match([(1,), (1,)], [(1,)], " Spider ")


# ---------------------------------------------------------------------------------------------------------
# prepare_sql


def test_bird_preparation_leaves_sql_untouched():
    sql = "SELECT DISTINCT a FROM t WHERE b > = 2 AND c = YEAR(CURDATE())"
    assert prepare_sql(sql, "bird") == sql
    assert prepare_sql(sql, CompareMode.BIRD, keep_distinct=True) == sql


def test_spider_removes_only_the_distinct_keyword_token():
    assert prepare_sql("SELECT DISTINCT name FROM singer", "spider") == "SELECT  name FROM singer"
    assert prepare_sql("select distinct(name) from singer", "spider") == "select (name) from singer"


def test_spider_turns_count_distinct_into_count_like_the_official_evaluator():
    assert (
        prepare_sql("SELECT count(DISTINCT name) FROM singer", "spider") == "SELECT count( name) FROM singer"
    )


def test_distinct_inside_literals_identifiers_and_comments_survives():
    sql = (
        "SELECT DISTINCT \"distinct\", [distinct], `distinct`, 'distinct', 'it''s distinct' "
        "FROM t -- distinct\n/* distinct */ WHERE note LIKE '%distinct%'"
    )
    expected = (
        "SELECT  \"distinct\", [distinct], `distinct`, 'distinct', 'it''s distinct' "
        "FROM t -- distinct\n/* distinct */ WHERE note LIKE '%distinct%'"
    )
    assert prepare_sql(sql, "spider") == expected


def test_words_containing_distinct_are_kept():
    sql = "SELECT distinct_count, indistinct FROM t"
    assert prepare_sql(sql, "spider") == sql


def test_unterminated_string_falls_back_to_quote_aware_scan():
    # sqlglot's tokenizer rejects the unterminated literal; the fallback still spares the quoted text.
    sql = "SELECT DISTINCT a FROM t WHERE b = 'it is distinct"
    assert prepare_sql(sql, "spider") == "SELECT  a FROM t WHERE b = 'it is distinct"
    sql = 'SELECT Distinct a FROM t WHERE b = "distinct'
    assert prepare_sql(sql, "spider") == 'SELECT  a FROM t WHERE b = "distinct'


def test_distinct_removal_keeps_only_the_first_statement_like_sqlparse_index_zero():
    assert prepare_sql("SELECT DISTINCT a FROM t; SELECT DISTINCT b FROM u", "spider") == "SELECT  a FROM t;"
    assert prepare_sql("SELECT 'a;b' FROM t; DROP TABLE t", "spider") == "SELECT 'a;b' FROM t;"


def test_keep_distinct_keeps_the_keyword_and_the_whole_text():
    sql = "SELECT DISTINCT a FROM t WHERE b < = 3; SELECT 2"
    assert prepare_sql(sql, "spider", keep_distinct=True) == "SELECT DISTINCT a FROM t WHERE b <= 3; SELECT 2"


def test_spaced_comparison_operators_are_joined():
    sql = "SELECT a FROM t WHERE b > = 1 AND c < = 2 AND d ! = 3"
    assert prepare_sql(sql, "spider") == "SELECT a FROM t WHERE b >= 1 AND c <= 2 AND d != 3"


def test_year_of_curdate_becomes_2020_eating_trailing_whitespace():
    sql = "SELECT name FROM people WHERE year( curdate ( ) )  - birth_year > 30"
    assert prepare_sql(sql, "spider") == "SELECT name FROM people WHERE 2020- birth_year > 30"
    assert prepare_sql("SELECT YEAR(CURDATE())", "spider", keep_distinct=True) == "SELECT 2020"


# ---------------------------------------------------------------------------------------------------------
# order_matters


def test_order_matters_only_in_spider_mode_when_gold_has_order_by():
    assert order_matters("SELECT a FROM t ORDER BY a DESC", "spider")
    assert order_matters("select a from t order by a", CompareMode.SPIDER)
    assert not order_matters("SELECT a FROM t", "spider")
    assert not order_matters("SELECT a FROM t ORDER BY a", "bird")


def test_order_matters_is_the_official_plain_substring_test():
    # "ORDER  BY" (two spaces) or a line break is not "order by" to the official evaluator.
    assert not order_matters("SELECT a FROM t ORDER  BY a", "spider")
    assert not order_matters("SELECT a FROM t ORDER\nBY a", "spider")
    assert order_matters("SELECT 'order by' FROM t", "spider")


# ---------------------------------------------------------------------------------------------------------
# rows_match: bird


def test_bird_ignores_row_order_and_duplicates():
    assert rows_match([(2,), (1,), (1,)], [(1,), (2,)], "bird")


def test_bird_requires_same_column_order():
    assert not rows_match([("Ann", 30)], [(30, "Ann")], "bird")


def test_bird_compares_values_with_python_equality():
    assert rows_match([(1.0, None)], [(1, None)], "bird")
    assert not rows_match([("1",)], [(1,)], "bird")


def test_bird_empty_prediction_matches_only_empty_gold():
    assert rows_match([], [], "bird")
    assert not rows_match([], [(1,)], "bird")


# ---------------------------------------------------------------------------------------------------------
# rows_match: spider


def test_spider_both_empty_match():
    assert rows_match([], [], "spider")


def test_spider_different_row_counts_never_match():
    assert not rows_match([(1,)], [], "spider")
    assert not rows_match([(1,), (1,)], [(1,)], "spider")


def test_spider_different_column_counts_never_match():
    assert not rows_match([(1, 2)], [(1,)], "spider")


def test_spider_duplicates_count_as_a_multiset():
    assert rows_match([(1,), (2,), (1,)], [(1,), (1,), (2,)], "spider")
    assert not rows_match([(1,), (2,), (2,)], [(1,), (1,), (2,)], "spider")


def test_spider_accepts_a_column_permutation_of_the_prediction():
    gold = [("Ann", 30, "UK"), ("Bob", 41, "US")]
    pred = [(30, "UK", "Ann"), (41, "US", "Bob")]
    assert rows_match(pred, gold, "spider")
    assert rows_match(pred, gold, "spider", order_matters=True)


def test_spider_row_order_counts_only_when_order_matters():
    gold = [(1, "a"), (2, "b")]
    pred = [(2, "b"), (1, "a")]
    assert rows_match(pred, gold, "spider", order_matters=False)
    assert not rows_match(pred, gold, "spider", order_matters=True)


def test_spider_needs_one_permutation_for_all_rows():
    # Each row alone can be reordered to its gold row, but no single column permutation fits both.
    assert not rows_match([(2, 1), (3, 4)], [(1, 2), (3, 4)], "spider")
    assert not rows_match([(1, 2, 3), (4, 6, 5)], [(1, 2, 3), (4, 5, 6)], "spider")


def test_spider_rows_must_agree_as_a_multiset_not_just_column_by_column():
    # Same values per column after any permutation, but the pairing of values in rows differs.
    gold = [(1, "a", "x"), (2, "b", "y")]
    pred = [(1, "b", "x"), (2, "a", "y")]
    assert not rows_match(pred, gold, "spider")


def test_spider_search_is_exhaustive_when_value_sets_overlap():
    # Every column holds the same values, so all 4! permutations are candidates; only one fits.
    gold = [(1, 2, 3, 4), (2, 3, 4, 1), (3, 4, 1, 2), (4, 1, 2, 3)]
    permutation = (2, 0, 3, 1)
    pred = [tuple(row[i] for i in permutation) for row in gold]
    assert rows_match(pred, gold, "spider")
    pred[0] = (pred[0][1], pred[0][0], *pred[0][2:])
    assert not rows_match(pred, gold, "spider")


def test_spider_values_use_python_equality():
    assert rows_match([(1.0,), (None,)], [(1,), (None,)], "spider")
    assert rows_match([(1.0, "a")], [(1, "a")], "spider")
    assert not rows_match([("1", "a")], [(1, "a")], "spider")


def test_spider_keeps_the_official_quick_reject_on_mixed_int_and_float_rows():
    # The official quick reject sorts each row by str(value) + str(type(value)): (1, 1.5) sorts as
    # (1.5, 1) while (1.0, 1.5) sorts as (1.0, 1.5), so the official evaluator says no although the
    # values are equal position by position. Parity keeps that verdict.
    assert not rows_match([(1.0, 1.5)], [(1, 1.5)], "spider")
    assert rows_match([(1, 1.5)], [(1, 1.5)], "spider")


def test_spider_accepts_lists_as_rows():
    assert rows_match([[1, "a"], [2, "b"]], [(2, "b"), (1, "a")], "spider")
    assert rows_match([[1, "a"]], [[1, "a"]], "bird")


def test_spider_many_identical_columns_stay_fast():
    gold = [(None,) * 9 + (i,) for i in range(2000)]
    pred = [(i,) + (None,) * 9 for i in range(2000)]
    start = time.perf_counter()
    assert rows_match(pred, gold, "spider")
    assert not rows_match(pred[:-1] + [(None,) * 10], gold, "spider")
    assert time.perf_counter() - start < 2.0


def test_spider_large_results_compare_quickly():
    rng = random.Random(0)
    gold = [(i, f"name{i}", f"group{i % 7}") for i in range(100_000)]
    pred = [(row[2], row[0], row[1]) for row in gold]
    rng.shuffle(pred)
    start = time.perf_counter()
    assert rows_match(pred, gold, "spider")
    pred[0] = (pred[0][0], pred[0][1], "name-1")
    assert not rows_match(pred, gold, "spider")
    # Generous bound: the CPU is shared; a quadratic or per-value-str implementation takes far longer.
    assert time.perf_counter() - start < 10.0
