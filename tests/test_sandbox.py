"""Safety and behaviour of the SQL sandbox (slmsql_hub.sql.sandbox)."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import sqlite3
import time

import psutil
import pytest
from _scripts import load_benchmark_script

from slmsql_hub.sql import ExecStatus, Limits, Sandbox
from slmsql_hub.sql.sandbox import check_sql, split_statements

DEADLINE_S = 1.0


def _sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sandbox_db")
    path = folder / "shop.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE customer (id INTEGER PRIMARY KEY, name TEXT, city TEXT, score REAL);
        CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customer(id), total REAL,
                             note BLOB);
        CREATE VIEW big_orders AS SELECT * FROM orders WHERE total > 50;
        """
    )
    conn.executemany(
        "INSERT INTO customer VALUES (?, ?, ?, ?)",
        [(i, f"name{i}", ["Oslo", "Lima", None][i % 3], i * 1.5 if i % 4 else None) for i in range(1, 301)],
    )
    conn.executemany(
        "INSERT INTO orders VALUES (?, ?, ?, ?)",
        [(i, 1 + i % 300, float(i % 97), b"\x00\x01" if i % 2 else "mixed") for i in range(1, 1001)],
    )
    # Invalid UTF-8 stored as TEXT: must not break queries that read it.
    conn.execute("INSERT INTO customer VALUES (999, CAST(x'ff41fe42' AS TEXT), 'Oslo', 1)")
    conn.commit()
    conn.close()
    return path


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(Limits(timeout_s=DEADLINE_S, max_rows=10_000), workers=2) as sb:
        yield sb


ATTACKS = {
    # writes of every kind
    "insert": "INSERT INTO customer VALUES (1000, 'x', 'y', 1)",
    "update": "UPDATE customer SET name = 'x'",
    "delete": "DELETE FROM orders",
    "replace": "REPLACE INTO customer VALUES (1, 'x', 'y', 1)",
    "insert_returning": "INSERT INTO customer (name) VALUES ('x') RETURNING id",
    "cte_insert": "WITH x AS (SELECT 1) INSERT INTO customer (name) SELECT * FROM x",
    "cte_delete": "WITH x AS (SELECT 1) DELETE FROM orders",
    "create_table": "CREATE TABLE evil (x)",
    "create_index": "CREATE INDEX evil_idx ON customer(name)",
    "create_view": "CREATE VIEW evil AS SELECT 1",
    "create_trigger": "CREATE TRIGGER evil AFTER INSERT ON customer BEGIN DELETE FROM orders; END",
    "create_temp_table": "CREATE TEMP TABLE customer (id, name)",
    "create_temp_view": "CREATE TEMP VIEW customer AS SELECT 1 AS id",
    "create_virtual_table": "CREATE VIRTUAL TABLE evil USING fts5(x)",
    "drop_table": "DROP TABLE customer",
    "drop_view": "DROP VIEW big_orders",
    "alter": "ALTER TABLE customer ADD COLUMN evil",
    "vacuum": "VACUUM",
    "vacuum_into": "VACUUM INTO '{dir}/copy.sqlite'",
    "reindex": "REINDEX",
    "analyze": "ANALYZE",
    "begin": "BEGIN IMMEDIATE",
    "savepoint": "SAVEPOINT s1",
    # attach / detach
    "attach_new_file": "ATTACH DATABASE '{dir}/new.sqlite' AS evil",
    "attach_memory": "ATTACH DATABASE ':memory:' AS evil",
    "attach_in_select": "SELECT * FROM (SELECT 1) WHERE 1 = (ATTACH ':memory:' AS e)",
    "detach": "DETACH DATABASE main",
    # pragmas that change state
    "pragma_journal": "PRAGMA journal_mode = DELETE",
    "pragma_user_version": "PRAGMA user_version = 7",
    "pragma_writable_schema": "PRAGMA writable_schema = ON",
    "pragma_hard_heap_limit": "PRAGMA hard_heap_limit = 100000",
    "explain_pragma_hard_heap_limit": "EXPLAIN PRAGMA hard_heap_limit = 100000",
    "pragma_query_only_off": "PRAGMA query_only = OFF",
    "pragma_function_write": "SELECT * FROM pragma_journal_mode('delete')",
    # extensions and dangerous functions
    "load_extension": "SELECT load_extension('/tmp/libevil.so')",
    "fts3_tokenizer": "SELECT fts3_tokenizer('simple')",
    # stacked statements
    "stacked_write": "SELECT 1; DELETE FROM orders",
    "stacked_reads": "SELECT 1; SELECT 2",
    "stacked_in_comment_trick": "SELECT 1 /* ; */ ; DROP TABLE customer",
    # runaway work
    "infinite_recursive_cte": "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r",
    "cartesian_explosion": "SELECT count(*) FROM orders a, orders b, orders c, orders d",
    "randomblob_bomb": "SELECT length(randomblob(2000000000))",
    "zeroblob_bomb": "SELECT zeroblob(2000000000)",
    "printf_bomb": "SELECT length(printf('%.*c', 2000000000, 'x'))",
    "replace_bomb": "SELECT length(replace(hex(zeroblob(100000)), '0', hex(zeroblob(100000))))",
    "like_bomb": "SELECT count(*) FROM customer WHERE name LIKE '" + "%a" * 40000 + "'",
    "deep_nesting_parens": "SELECT " + "(" * 3000 + "1" + ")" * 3000,
    "deep_nesting_subqueries": "SELECT " + "(SELECT " * 400 + "1" + ")" * 400,
    "very_long_sql": "SELECT 1 " + "+ 1 " * 60_000,
    # malformed input
    "nul_byte": "SELECT 1\x00; DROP TABLE customer",
    "lone_surrogate": "SELECT '\ud800'",
    "empty": "",
    "whitespace": "   \n\t ",
    "lone_semicolon": ";",
    "only_comment": "-- nothing here",
    "none": None,
    "not_a_string": 42,
}

BAD_STATUSES = {ExecStatus.REFUSED, ExecStatus.ERROR, ExecStatus.TIMEOUT, ExecStatus.TOO_LARGE}


def test_attack_corpus_leaves_database_untouched_and_returns_in_time(db, sandbox):
    folder = db.parent
    before_hash, before_files = _sha256(db), sorted(os.listdir(folder))
    outcomes = {}
    for name, sql in ATTACKS.items():
        if isinstance(sql, str):
            sql = sql.replace("{dir}", str(folder))
        started = time.monotonic()
        result = sandbox.execute(db, sql)
        elapsed = time.monotonic() - started
        outcomes[name] = result.status
        assert elapsed <= 2 * DEADLINE_S + 1.5, f"{name} took {elapsed:.2f} s"  # T + 1 s on a free core
        assert result.status in BAD_STATUSES, f"{name} was allowed: {result}"
        assert result.error, f"{name} has no error text"
    assert _sha256(db) == before_hash
    assert sorted(os.listdir(folder)) == before_files
    # The caller is alive and the sandbox still answers correctly afterwards.
    after = sandbox.execute(db, "SELECT count(*) FROM customer")
    assert after.ok and after.rows == ((301,),)
    # Writes are refused (not merely errors), runaways time out.
    for name in ("insert", "cte_delete", "attach_memory", "pragma_hard_heap_limit", "load_extension", "stacked_write"):
        assert outcomes[name] is ExecStatus.REFUSED, name
    for name in ("infinite_recursive_cte", "cartesian_explosion", "printf_bomb"):
        assert outcomes[name] is ExecStatus.TIMEOUT, name


def test_attack_corpus_as_one_batch_is_planned_then_judged_like_one_at_a_time(db):
    """A batch is ordered by EXPLAIN QUERY PLAN first: planning the attacks changes no byte and no verdict."""
    before = _sha256(db)
    sqls = [sql.replace("{dir}", str(db.parent)) if isinstance(sql, str) else sql for sql in ATTACKS.values()]
    with Sandbox(Limits(timeout_s=DEADLINE_S, max_rows=10_000), workers=2) as sb:
        one_by_one = [sb.execute(db, sql).status for sql in sqls]
    with Sandbox(Limits(timeout_s=DEADLINE_S, max_rows=10_000), workers=2) as sb:
        started = time.monotonic()
        batch = [r.status for r in sb.execute_many([(db, sql) for sql in sqls])]
        elapsed = time.monotonic() - started
    assert batch == one_by_one and set(batch) <= BAD_STATUSES
    assert _sha256(db) == before
    assert elapsed <= len(sqls) * (2 * DEADLINE_S + 1.5) / 2


def test_temp_objects_cannot_shadow_real_tables_for_later_queries(db, sandbox):
    assert sandbox.execute(db, "CREATE TEMP TABLE customer (id)").status is ExecStatus.REFUSED
    result = sandbox.execute(db, "SELECT count(*) FROM customer WHERE id < 10")
    assert result.ok and result.rows == ((9,),)


LEGITIMATE = {
    "trailing_semicolon": ("SELECT count(*) FROM customer;", ((301,),)),
    "trailing_comment": ("SELECT count(*) FROM customer -- how many\n", ((301,),)),
    "semicolon_then_comment": ("SELECT count(*) FROM customer; /* done */", ((301,),)),
    "semicolon_in_string": ("SELECT ';' || 'x'", ((";x",),)),
    "values": ("VALUES (1, 'a'), (2, 'b')", ((1, "a"), (2, "b"))),
    "cte": ("WITH c AS (SELECT city FROM customer WHERE id <= 3) SELECT count(*) FROM c", ((3,),)),
    "bounded_recursion": (
        "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 5) SELECT sum(i) FROM r",
        ((15,),),
    ),
    "window": (
        "SELECT id, rank() OVER (ORDER BY total DESC) FROM orders WHERE id IN (1, 2) ORDER BY id",
        ((1, 2), (2, 1)),
    ),
    "view": ("SELECT count(*) FROM big_orders WHERE id <= 100", ((46,),)),
    "sqlite_master": ("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name", (("customer",), ("orders",))),
    "json_each": ("SELECT sum(value) FROM json_each('[1, 2, 3]')", ((6,),)),
    "json_functions": ("SELECT json_extract('{\"a\": [5, 6]}', '$.a[1]'), json_array(1, 2)", ((6, "[1,2]"),)),
    "pragma_function": ("SELECT name FROM pragma_table_info('orders') ORDER BY cid LIMIT 2", (("id",), ("customer_id",))),
    "nulls": ("SELECT count(*), count(score) FROM customer WHERE id <= 8", ((8, 6),)),
    "mixed_types": ("SELECT typeof(note) FROM orders WHERE id IN (1, 2) ORDER BY id", (("blob",), ("text",))),
    "invalid_utf8_data": ("SELECT name FROM customer WHERE id = 999", (("AB",),)),
    "leading_comment": ("/* hello */ -- there\nSELECT 1", ((1,),)),
    "lowercase_with_parens": ("select (1 + 2) * 3", ((9,),)),
}


@pytest.mark.parametrize("name", sorted(LEGITIMATE))
def test_legitimate_sql_keeps_working(db, sandbox, name):
    sql, expected = LEGITIMATE[name]
    result = sandbox.execute(db, sql)
    assert result.status is ExecStatus.OK, result.error
    assert result.rows == expected
    assert result.columns


def test_results_over_max_rows_are_too_large_without_reading_the_rest(db):
    with Sandbox(Limits(timeout_s=5, max_rows=100), workers=1) as sb:
        result = sb.execute(db, "SELECT * FROM orders")
        assert result.status is ExecStatus.TOO_LARGE and result.rows == ()
        assert sb.execute(db, "SELECT * FROM orders LIMIT 100").ok


def _peak_rss_growth_mb(run) -> tuple[object, float]:
    """The bench's measure (benchmarks/execution_measures.py): ``run()``'s value and the peak RSS growth in MB."""
    return load_benchmark_script("execution_measures").peak_rss_growth_mb(run)


def test_ten_million_rows_are_too_large_with_bounded_memory(db):
    """A 10 M-row result is refused as too_large while the RSS of caller + workers grows by <= 300 MB."""
    sql = (
        "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r LIMIT 10000000) "
        "SELECT i, i * 2, 'row ' || i FROM r"
    )
    with Sandbox(Limits(timeout_s=60, max_rows=100_000), workers=1) as sb:
        sb.execute(db, "SELECT 1")  # start the worker first: its baseline is not growth
        result, growth_mb = _peak_rss_growth_mb(lambda: sb.execute(db, sql))
    assert result.status is ExecStatus.TOO_LARGE
    assert growth_mb <= 300, f"peak RSS grew by {growth_mb:.0f} MB"


@pytest.fixture(scope="module")
def blob_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("blob_db") / "t.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(5000)])
    conn.close()
    return path


def test_many_values_under_the_length_cap_adding_up_to_gigabytes_are_too_large_with_bounded_memory(blob_db):
    """Issue #10: 5,000 values of 900 kB (4.5 GB in all) on both workers at once: too_large by the byte budget
    while the RSS of caller + workers grows by <= 300 MB (it grew by ~640 MB before the address-space cap)."""
    sqls = ["SELECT randomblob(900000) FROM t", "SELECT x, randomblob(900000) FROM t"]
    with Sandbox(Limits(timeout_s=60), workers=2) as sb:
        sb.execute_many([(blob_db, "SELECT 1"), (blob_db, "SELECT 2")])  # both workers started: not growth
        results, growth_mb = _peak_rss_growth_mb(lambda: sb.execute_many([(blob_db, sql) for sql in sqls]))
        again = sb.execute(blob_db, sqls[0])
    assert [r.status for r in results] == [ExecStatus.TOO_LARGE] * 2
    assert all("bytes" in r.error and not r.infra for r in results)
    assert again.cached and again.status is ExecStatus.TOO_LARGE  # deterministic, so cached
    assert growth_mb <= 300, f"peak RSS grew by {growth_mb:.0f} MB"


def test_two_results_just_under_the_byte_budget_at_once_grow_memory_by_at_most_300_mb(blob_db):
    """Issue #18: each result (74 values of 900 kB, 66.6 MB of the 67.1 MB budget) exists about once, in the
    worker or in the caller (sent in frames, each freed once sent), not as rows + pickle + chunks + copy."""
    sqls = ["SELECT randomblob(900000) FROM t LIMIT 74", "SELECT x, randomblob(900000) FROM t LIMIT 74"]
    with Sandbox(Limits(timeout_s=60), workers=2, cache_size=0) as sb:
        sb.execute_many([(blob_db, "SELECT 1"), (blob_db, "SELECT 2")])  # both workers started: not growth
        results, growth_mb = _peak_rss_growth_mb(lambda: sb.execute_many([(blob_db, sql) for sql in sqls]))
        sizes = [sum(len(row[-1]) for row in r.rows) for r in results]
    assert sizes == [74 * 900_000] * 2
    assert growth_mb <= 300, f"peak RSS grew by {growth_mb:.0f} MB"


def test_byte_budget_counts_text_and_blobs_by_length_and_other_values_as_eight(db):
    with Sandbox(Limits(timeout_s=5, max_result_bytes=102), workers=1) as sb:
        exactly = sb.execute(db, "SELECT 'x', 1, NULL FROM customer LIMIT 6")  # 6 x (1 + 8 + 8) = 102
        over = sb.execute(db, "SELECT x'00ff', 1, NULL FROM customer LIMIT 6")  # 6 x 18 = 108
        many_small = sb.execute(db, "SELECT id FROM customer")  # 301 x 8
    assert exactly.ok and len(exactly.rows) == 6
    assert over.status is ExecStatus.TOO_LARGE and over.rows == () and "more than 102 bytes" in over.error
    assert many_small.status is ExecStatus.TOO_LARGE


def test_cache_is_bounded_by_bytes_least_recently_used_out(db):
    sqls = [f"SELECT zeroblob(9000), {i}" for i in range(20)]  # 9,008 bytes each
    with Sandbox(Limits(timeout_s=5), workers=1, cache_max_bytes=160_000) as sb:
        for sql in sqls:
            assert sb.execute(db, sql).ok
        assert not sb.execute(db, sqls[0]).cached  # evicted: 20 x 9,008 bytes do not fit in 160,000
        assert sb.execute(db, sqls[-1]).cached
        big = "SELECT zeroblob(11000)"  # over a sixteenth of the cache: never kept
        assert sb.execute(db, big).ok and not sb.execute(db, big).cached


@pytest.mark.parametrize(("local_world_size", "cores", "expected"), [(None, 16, 16), ("4", 16, 4), ("32", 16, 1), ("x", 8, 8)])
def test_default_workers_share_the_node_s_cores_among_its_training_processes(
    monkeypatch, local_world_size, cores, expected
):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    if local_world_size is None:
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    else:
        monkeypatch.setenv("LOCAL_WORLD_SIZE", local_world_size)
    with Sandbox() as sb:
        assert sb.workers == expected


def test_a_worker_keeps_at_most_max_connections_open_and_closes_the_least_recently_used(tmp_path, db):
    from slmsql_hub.sql import _worker

    paths = []
    for i in range(4):
        paths.append(tmp_path / f"db{i}.sqlite")
        shutil.copy(db, paths[-1])
    conns = _worker._Connections(2)
    first = conns.get(str(paths[0]))
    conns.get(str(paths[1]))
    assert conns.get(str(paths[0])) is first  # reused, and now the most recently used
    conns.get(str(paths[2]))
    assert conns.open_paths() == [str(paths[0]), str(paths[2])]  # paths[1] was the least recently used

    with Sandbox(Limits(timeout_s=5), workers=1, max_connections=2, cache_size=0) as sb:
        for path in paths * 2:
            assert sb.execute(path, "SELECT count(*) FROM orders").rows == ((1000,),)
        worker = psutil.Process(sb._all_workers[0].proc.pid)
        open_dbs = [f.path for f in worker.open_files() if f.path.endswith(".sqlite")]
    assert len(open_dbs) == 2 and set(open_dbs) == {str(paths[2].resolve()), str(paths[3].resolve())}


def test_op_budget_interrupts_sqlite(db):
    with Sandbox(Limits(timeout_s=30, max_ops=200_000), workers=1) as sb:
        started = time.monotonic()
        result = sb.execute(db, "SELECT count(*) FROM orders a, orders b")
        assert result.status is ExecStatus.TIMEOUT and "op budget" in result.error
        assert time.monotonic() - started < 5


def test_distinct_sql_runs_once_per_batch_and_then_comes_from_cache(db):
    with Sandbox(Limits(timeout_s=5), workers=2) as sb:
        group = [(db, "SELECT name FROM customer WHERE id = 7")] * 8 + [(db, "SELECT name FROM customer WHERE id = 8")]
        results = sb.execute_many(group)
        assert [r.rows for r in results] == [(("name7",),)] * 8 + [(("name8",),)]
        assert sb.stats["executed"] == 2 and sb.stats["batch_duplicates"] == 7
        again = sb.execute(db, "SELECT name FROM customer WHERE id = 7")
        assert again.cached and sb.stats["executed"] == 2


def test_cache_is_invalidated_when_the_database_changes(tmp_path, db):
    copy = tmp_path / "copy.sqlite"
    shutil.copy(db, copy)
    with Sandbox(Limits(timeout_s=5), workers=1) as sb:
        assert sb.execute(copy, "SELECT count(*) FROM orders").rows == ((1000,),)
        conn = sqlite3.connect(copy)
        conn.execute("DELETE FROM orders WHERE id > 10")
        conn.commit()
        conn.close()
        os.utime(copy, ns=(time.time_ns(), time.time_ns() + 10_000_000))
        assert sb.execute(copy, "SELECT count(*) FROM orders").rows == ((10,),)


def test_results_come_back_in_input_order_across_workers(db):
    with Sandbox(Limits(timeout_s=5), workers=2) as sb:
        requests = [(db, f"SELECT {i}, count(*) FROM orders WHERE id > {i}") for i in range(40)]
        results = sb.execute_many(requests, progress=True)
        assert [r.rows[0][0] for r in results] == list(range(40))


def test_a_killed_worker_is_replaced_and_the_query_still_runs(db):
    with Sandbox(Limits(timeout_s=5), workers=1) as sb:
        assert sb.execute(db, "SELECT 1").ok
        worker_pid = psutil.Process().children()[0].pid
        os.kill(worker_pid, signal.SIGKILL)
        time.sleep(0.05)
        result = sb.execute(db, "SELECT count(*) FROM customer")
        assert result.ok and result.rows == ((301,),)


def test_missing_database_is_a_clear_error_not_a_result(tmp_path):
    with Sandbox(workers=1) as sb, pytest.raises(FileNotFoundError, match="database not found"):
        sb.execute(tmp_path / "nope.sqlite", "SELECT 1")


def test_sandbox_refuses_to_be_pickled():
    import pickle

    with Sandbox(workers=1) as sb, pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(sb)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT 1", ["SELECT 1"]),
        ("SELECT 'a;b'; ", ["SELECT 'a;b'"]),
        ('SELECT "x;y" FROM t', ['SELECT "x;y" FROM t']),
        ("SELECT 'it''s;' ;; ", ["SELECT 'it''s;'"]),
        ("SELECT 1 -- c; DROP\n; SELECT 2", ["SELECT 1 -- c; DROP", "SELECT 2"]),
        ("/* ; */", []),
    ],
)
def test_split_statements_respects_quotes_and_comments(sql, expected):
    assert split_statements(sql) == expected


def test_check_sql_refuses_over_long_text():
    statement, result = check_sql("SELECT 1" + " " * 200, Limits(max_sql_chars=100))
    assert statement is None and result.status is ExecStatus.REFUSED


def test_limits_validate_with_a_message_that_names_the_fix():
    with pytest.raises(ValueError, match="timeout_s must be > 0"):
        Limits(timeout_s=0)
    with pytest.raises(ValueError, match="max_rows"):
        Limits(max_rows=0)
    with pytest.raises(ValueError, match="max_result_bytes must be > 0"):
        Limits(max_result_bytes=0)


def test_concurrent_batches_from_several_threads_share_the_sandbox(db):
    from concurrent.futures import ThreadPoolExecutor

    with Sandbox(Limits(timeout_s=5), workers=2) as sb:

        def batch(k: int):
            return [r.rows for r in sb.execute_many([(db, f"SELECT {k} + {i}") for i in range(10)])]

        with ThreadPoolExecutor(4) as pool:
            outs = list(pool.map(batch, range(8)))
    assert outs == [[((k + i,),) for i in range(10)] for k in range(8)]


def test_a_batch_starts_the_statement_with_the_most_full_scans_first_and_keeps_the_rest_in_order(db):
    """Issue #10: a runaway started last adds all of its time to the batch's tail; SQLite's query plan puts the
    nested full scans of a cartesian product first, and results still come back in input order."""
    from concurrent.futures import ThreadPoolExecutor

    runaway = "SELECT count(*) FROM orders a, orders b, orders c"
    items = [(str(db), f"SELECT {i}") for i in range(4)]
    items += [(str(db), "SELECT nope FROM missing"), (str(db), "SELECT * FROM orders"), (str(db), runaway)]
    with Sandbox(Limits(timeout_s=5, max_ops=100_000), workers=2) as sb, ThreadPoolExecutor(2) as threads:
        order = sb._longest_first(items, sb.limits, threads)
        results = sb.execute_many(items)
    assert order == [6, 5, 0, 1, 2, 3, 4]  # 3 scans, 1 scan, then unplanned or scan-free in input order
    assert [r.status for r in results] == [ExecStatus.OK] * 4 + [ExecStatus.ERROR, ExecStatus.OK, ExecStatus.TIMEOUT]
    assert [r.rows for r in results[:4]] == [((i,),) for i in range(4)]
