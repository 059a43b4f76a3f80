"""Benchmark of the execution core on GRPO-like loads: the sandbox's batch path against the physical limit
and against a faithful BIRD-style evaluator, each defending against a runaway query the way it ships.

One run builds (or reuses) a generated SQLite database of several indexed tables (~32 MB at scale 1) and
times two loads of ``--samples`` predictions per question, each with one runaway cartesian product:

- the default load (``--questions``): joins of 50-600 ms, half the samples identical to their gold, the rest
  equivalent rewrites, wrong answers and errors; paths (a), (b) and (c);
- the long-tail load (``--longtail-questions``): few distinct statements, mostly indexed lookups of a few
  ms, one question in 12 a heavy join, the runaway in the last question (so it starts last), a 2 s
  deadline; paths (a) and (b).

(a) the physical limit: every distinct (database, SQL) once, serially, plain ``sqlite3``, the total divided
    by ``os.cpu_count()``; a progress handler (every 1000 VDBE instructions) counts instructions and stops a
    query at the op budget or the deadline. Unless ``--max-ops`` is given the budget is calibrated here:
    ``--ops-factor`` (5) times the heaviest query that finished, rounded up.
(b) ``Judge(mode="bird").judge_many(...)`` on a NEW sandbox (cold cache, worker start-up timed) with
    ``Limits(timeout_s=<the deadline>, max_ops=<that budget>)``.
(c) a BIRD-style evaluator: a ``multiprocessing.Pool``, a new connection per pair, prediction then gold,
    ``func_timeout(--timeout)`` (which cannot stop a thread inside SQLite), ``apply_async`` callbacks.

It prints (b)/(a) for both loads (target <= 1.25) and (c)/(b) (no target: (b) runs near the limit, so the
ratio is bounded by (c)'s SQLite work over (a)'s, about 6x on the default load), in wall-clock and CPU
seconds, the load average, the per-query overhead on trivial queries, and checks that make the exit status
1: each load keeps its labels under (a)'s limits; the sandbox cuts no legitimate query and every verdict of
(b) follows from (a)'s results; (b) and (c) agree wherever the baseline finished. ``--json OUT`` writes
every number. See ``benchmarks/README.md`` for measured numbers and how to read them.

Usage::

    python benchmarks/bench_execution.py                      # both loads, temporary work dir
    python benchmarks/bench_execution.py --work-dir /tmp/slmsql-bench --json bench.json
    python benchmarks/bench_execution.py --max-ops 200000000  # the GRPO reward's default budget instead
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import platform
import random
import resource
import shutil
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from func_timeout import FunctionTimedOut, func_timeout

from slmsql_hub.sql import ExecStatus, Judge, Judgement, Limits, Sandbox

DB_FORMAT_VERSION = 1  # bump when the generator changes, so cached databases are rebuilt
TARGET_SANDBOX_OVER_LIMIT = 1.25
DEFAULT_TIMEOUT_S = 30.0  # BIRD's evaluator ships meta_time_out = 30.0
DEFAULT_OPS_FACTOR = 5.0  # the calibrated op budget: this many times the heaviest query that finished
CALIBRATION_EVERY = 1000  # VDBE instructions between two calls of path (a)'s counting progress handler

# ----------------------------------------------------------------------------------------------------------
# The database: a retail schema with joins, indexes and enough rows for 50-600 ms queries.
# ----------------------------------------------------------------------------------------------------------
_SCHEMA = """
CREATE TABLE regions (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE stores (
    id INTEGER PRIMARY KEY, region_id INTEGER NOT NULL REFERENCES regions(id),
    name TEXT NOT NULL, opened_year INTEGER NOT NULL);
CREATE TABLE customers (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL, region_id INTEGER NOT NULL REFERENCES regions(id),
    segment TEXT NOT NULL, signup_year INTEGER NOT NULL);
CREATE TABLE categories (id INTEGER PRIMARY KEY, name TEXT NOT NULL, department TEXT NOT NULL);
CREATE TABLE products (
    id INTEGER PRIMARY KEY, category_id INTEGER NOT NULL REFERENCES categories(id),
    name TEXT NOT NULL, brand TEXT NOT NULL, price_cents INTEGER NOT NULL);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
    store_id INTEGER NOT NULL REFERENCES stores(id), order_date TEXT NOT NULL,
    status TEXT NOT NULL, channel TEXT NOT NULL);
CREATE TABLE order_items (
    order_id INTEGER NOT NULL REFERENCES orders(id), line_no INTEGER NOT NULL,
    product_id INTEGER NOT NULL REFERENCES products(id), quantity INTEGER NOT NULL,
    unit_price_cents INTEGER NOT NULL, discount_pct INTEGER NOT NULL,
    PRIMARY KEY (order_id, line_no));
CREATE INDEX idx_stores_region ON stores(region_id);
CREATE INDEX idx_customers_region ON customers(region_id);
CREATE INDEX idx_products_category ON products(category_id);
CREATE INDEX idx_orders_customer ON orders(customer_id);
CREATE INDEX idx_orders_store ON orders(store_id);
CREATE INDEX idx_orders_date ON orders(order_date);
CREATE INDEX idx_items_product ON order_items(product_id);
"""

REGIONS = ("North", "South", "East", "West", "Central", "Coast", "Mountain", "Islands")
SEGMENTS = ("consumer", "corporate", "small_business", "education")
DEPARTMENTS = ("electronics", "home", "garden", "sports", "toys", "grocery")
BRANDS = tuple(f"brand_{c}" for c in "abcdefghijklmnop")
STATUSES = ("delivered", "delivered", "delivered", "shipped", "returned", "cancelled")
CHANNELS = ("web", "web", "store", "phone", "app")
YEARS = (2019, 2020, 2021, 2022, 2023, 2024)


def database_path(work_dir: str | os.PathLike, seed: int = 0, scale: float = 1.0) -> Path:
    """Where :func:`build_database` puts the database for these arguments (inside ``work_dir``)."""
    return Path(work_dir) / f"bench_retail_v{DB_FORMAT_VERSION}_seed{seed}_scale{scale:g}.sqlite"


def build_database(work_dir: str | os.PathLike, seed: int = 0, scale: float = 1.0) -> Path:
    """Build the benchmark database deterministically, or reuse the one already built for these arguments.

    At ``scale=1`` the file is about 20 MB: 120k orders, ~400k order lines. The file is written under a
    temporary name and renamed, so an interrupted build never leaves a half-written database behind.
    """
    path = database_path(work_dir, seed, scale)
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    n_stores = max(8, int(120 * scale))
    n_customers = max(50, int(25_000 * scale))
    n_products = max(40, int(4_000 * scale))
    n_orders = max(100, int(120_000 * scale))
    n_categories = 30

    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.unlink(missing_ok=True)
    conn = sqlite3.connect(tmp)
    try:
        conn.executescript("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;" + _SCHEMA)
        conn.executemany(
            "INSERT INTO regions VALUES (?, ?)", [(i + 1, name) for i, name in enumerate(REGIONS)]
        )
        conn.executemany(
            "INSERT INTO stores VALUES (?, ?, ?, ?)",
            [
                (i, rng.randint(1, len(REGIONS)), f"store_{i:03d}", rng.choice(YEARS) - 10)
                for i in range(1, n_stores + 1)
            ],
        )
        conn.executemany(
            "INSERT INTO customers VALUES (?, ?, ?, ?, ?)",
            [
                (i, f"customer_{i:05d}", rng.randint(1, len(REGIONS)), rng.choice(SEGMENTS), rng.randint(2010, 2024))
                for i in range(1, n_customers + 1)
            ],
        )
        conn.executemany(
            "INSERT INTO categories VALUES (?, ?, ?)",
            [(i, f"category_{i:02d}", DEPARTMENTS[i % len(DEPARTMENTS)]) for i in range(1, n_categories + 1)],
        )
        prices = [rng.randint(199, 99_999) for _ in range(n_products)]
        conn.executemany(
            "INSERT INTO products VALUES (?, ?, ?, ?, ?)",
            [
                (i, rng.randint(1, n_categories), f"product_{i:04d}", rng.choice(BRANDS), prices[i - 1])
                for i in range(1, n_products + 1)
            ],
        )
        # Skewed customers (some buy a lot), dates spread over six years.
        orders, items = [], []
        for order_id in range(1, n_orders + 1):
            customer = 1 + int((rng.paretovariate(1.2) - 1.0) * n_customers / 8) % n_customers
            date = f"{rng.choice(YEARS)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            orders.append(
                (order_id, customer, rng.randint(1, n_stores), date, rng.choice(STATUSES), rng.choice(CHANNELS))
            )
            for line in range(1, rng.randint(1, 6) + 1):
                product = rng.randint(1, n_products)
                quantity = rng.randint(1, 5)
                items.append((order_id, line, product, quantity, prices[product - 1], rng.choice((0, 0, 0, 5, 10, 25))))
        conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)", orders)
        conn.executemany("INSERT INTO order_items VALUES (?, ?, ?, ?, ?, ?)", items)
        conn.commit()
        conn.execute("ANALYZE")
        conn.commit()
    finally:
        conn.close()
    os.replace(tmp, path)
    return path


# ----------------------------------------------------------------------------------------------------------
# The questions: templates with a gold query, equivalent rewrites, wrong answers and errors.
# ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Question:
    """One question of the load: its gold SQL and the kinds of answers a policy writes for it."""

    template: str
    gold: str
    rewrites: tuple[str, ...]  # return the gold's rows (as a set), written differently
    wrongs: tuple[str, ...]  # run, but return other rows
    errors: tuple[str, ...]  # rejected by SQLite (unknown column/table, syntax, ambiguity)


def _category_revenue(rng: random.Random) -> Question:
    y = rng.choice(YEARS)
    join = (
        "FROM order_items AS oi JOIN orders AS o ON o.id = oi.order_id JOIN products AS p ON p.id = oi.product_id "
        "JOIN categories AS c ON c.id = p.category_id"
    )
    where = f"WHERE o.order_date BETWEEN '{y}-01-01' AND '{y}-12-31'"
    return Question(
        template="category_revenue",
        gold=f"SELECT c.name, SUM(oi.quantity * oi.unit_price_cents) AS revenue {join} {where} GROUP BY c.name",
        rewrites=(
            "SELECT categories.name, SUM(order_items.quantity * order_items.unit_price_cents) "
            "FROM categories, products, order_items, orders WHERE categories.id = products.category_id "
            "AND products.id = order_items.product_id AND orders.id = order_items.order_id "
            f"AND orders.order_date >= '{y}-01-01' AND orders.order_date < '{y + 1}-01-01' GROUP BY categories.name",
            "select c.name, sum(oi.unit_price_cents * oi.quantity) from orders o join order_items oi on "
            "oi.order_id = o.id join products p on oi.product_id = p.id join categories c on p.category_id = c.id "
            f"where o.order_date between '{y}-01-01' and '{y}-12-31' group by c.name",
        ),
        wrongs=(
            f"SELECT c.name, SUM(oi.quantity) AS revenue {join} {where} GROUP BY c.name",
            f"SELECT c.name, SUM(oi.quantity * oi.unit_price_cents) AS revenue {join} "
            f"WHERE o.order_date BETWEEN '{y}-01-01' AND '{y}-06-30' GROUP BY c.name",
        ),
        errors=(
            f"SELECT c.name, SUM(oi.quantity * oi.unit_price) AS revenue {join} {where} GROUP BY c.name",
            f"SELECT c.name, SUM(oi.quantity * oi.unit_price_cents) AS revenue {join} {where} GROUP BY c.nme",
        ),
    )


def _top_customers(rng: random.Random) -> Question:
    r, n = rng.randint(1, len(REGIONS)), rng.choice((5, 10, 20))
    total = "SUM(oi.quantity * oi.unit_price_cents)"
    body = (
        f"FROM customers AS cu JOIN orders AS o ON o.customer_id = cu.id JOIN order_items AS oi ON oi.order_id = o.id "
        f"WHERE cu.region_id = {r} GROUP BY cu.id"
    )
    return Question(
        template="top_customers",
        gold=f"SELECT cu.name, {total} AS spent {body} ORDER BY spent DESC, cu.id LIMIT {n}",
        rewrites=(
            f"SELECT name, total FROM (SELECT c.id, c.name, SUM(i.quantity * i.unit_price_cents) AS total "
            f"FROM customers c JOIN orders o ON o.customer_id = c.id JOIN order_items i ON i.order_id = o.id "
            f"WHERE c.region_id = {r} GROUP BY c.id) ORDER BY total DESC, id LIMIT {n}",
            f"SELECT cu.name, {total} AS spent FROM customers AS cu JOIN regions AS rg ON rg.id = cu.region_id "
            f"JOIN orders AS o ON o.customer_id = cu.id JOIN order_items AS oi ON oi.order_id = o.id "
            f"WHERE rg.name = '{REGIONS[r - 1]}' GROUP BY cu.id ORDER BY spent DESC, cu.id LIMIT {n}",
        ),
        wrongs=(
            f"SELECT cu.name, {total} AS spent {body} ORDER BY spent ASC, cu.id LIMIT {n}",
            f"SELECT cu.name, {total} AS spent {body} ORDER BY spent DESC, cu.id LIMIT {n + 3}",
        ),
        errors=(
            f"SELECT cu.name, {total} AS spent {body} ORDER BY spent DESC, cu.id LIMT {n}",
            f"SELECT cu.name, {total} AS spent {body.replace('customers AS', 'customer AS')} LIMIT {n}",
        ),
    )


def _store_basket(rng: random.Random) -> Question:
    r = rng.randint(1, len(REGIONS))
    inner = (
        "(SELECT o.store_id, o.id, COUNT(*) AS lines FROM orders AS o JOIN order_items AS oi "
        "ON oi.order_id = o.id GROUP BY o.id) AS t"
    )
    return Question(
        template="store_basket",
        gold=f"SELECT s.name, AVG(t.lines) FROM stores AS s JOIN {inner} ON t.store_id = s.id "
        f"WHERE s.region_id = {r} GROUP BY s.id",
        rewrites=(
            "SELECT s.name, CAST(COUNT(*) AS REAL) / COUNT(DISTINCT oi.order_id) FROM stores s "
            f"JOIN orders o ON o.store_id = s.id JOIN order_items oi ON oi.order_id = o.id WHERE s.region_id = {r} "
            "GROUP BY s.id",
            f"SELECT s.name, AVG(t.lines) FROM {inner} JOIN stores AS s ON s.id = t.store_id JOIN regions AS rg "
            f"ON rg.id = s.region_id WHERE rg.name = '{REGIONS[r - 1]}' GROUP BY s.name",
        ),
        wrongs=(
            f"SELECT s.name, AVG(t.lines) FROM stores AS s JOIN {inner} ON t.store_id = s.id GROUP BY s.id",
            f"SELECT s.name, COUNT(t.lines) FROM stores AS s JOIN {inner} ON t.store_id = s.id "
            f"WHERE s.region_id = {r} GROUP BY s.id",
        ),
        errors=(
            f"SELECT s.name, AVG(t.line) FROM stores AS s JOIN {inner} ON t.store_id = s.id "
            f"WHERE s.region_id = {r} GROUP BY s.id",
        ),
    )


def _products_never_ordered(rng: random.Random) -> Question:
    d, y, q = rng.choice(DEPARTMENTS), rng.choice(YEARS), rng.randint(0, 3)
    first, last = f"{y}-{3 * q + 1:02d}", f"{y}-{3 * q + 3:02d}"
    base = "SELECT p.name FROM products AS p JOIN categories AS c ON c.id = p.category_id"
    sold = (
        "SELECT oi.product_id FROM order_items AS oi JOIN orders AS o ON o.id = oi.order_id "
        f"WHERE substr(o.order_date, 1, 7) BETWEEN '{first}' AND '{last}'"
    )
    return Question(
        template="products_never_ordered",
        gold=f"{base} WHERE c.department = '{d}' AND p.id NOT IN ({sold})",
        rewrites=(
            "SELECT p.name FROM products p JOIN categories c ON c.id = p.category_id "
            f"WHERE c.department = '{d}' AND NOT EXISTS (SELECT 1 FROM order_items oi JOIN orders o "
            f"ON o.id = oi.order_id WHERE oi.product_id = p.id AND o.order_date BETWEEN '{first}-01' "
            f"AND '{last}-31')",
            f"{base} WHERE c.department = '{d}' AND p.id NOT IN (SELECT product_id FROM order_items WHERE "
            f"order_id IN (SELECT id FROM orders WHERE order_date BETWEEN '{first}-01' AND '{last}-31'))",
        ),
        wrongs=(
            f"{base} WHERE c.department = '{d}' AND p.id IN ({sold})",
            f"{base} WHERE p.id NOT IN ({sold})",
        ),
        errors=(f"{base} WHERE c.dept = '{d}' AND p.id NOT IN ({sold})",),
    )


def _monthly_revenue(rng: random.Random) -> Question:
    y, ch = rng.choice(YEARS), rng.choice(sorted(set(CHANNELS)))
    value = "oi.quantity * oi.unit_price_cents * (100 - oi.discount_pct)"
    body = (
        f"FROM orders AS o JOIN order_items AS oi ON oi.order_id = o.id WHERE o.channel = '{ch}' "
        f"AND o.order_date >= '{y}-01-01' AND o.order_date < '{y + 1}-01-01' GROUP BY month"
    )
    return Question(
        template="monthly_revenue",
        gold=f"SELECT strftime('%m', o.order_date) AS month, SUM({value}) / 100 {body}",
        rewrites=(
            f"SELECT substr(o.order_date, 6, 2) AS month, SUM({value}) / 100 {body}",
            "SELECT m, SUM(v) / 100 FROM (SELECT substr(order_date, 6, 2) AS m, "
            "quantity * unit_price_cents * (100 - discount_pct) AS v FROM order_items JOIN orders "
            f"ON orders.id = order_items.order_id WHERE channel = '{ch}' AND order_date LIKE '{y}%') GROUP BY m",
        ),
        wrongs=(
            f"SELECT strftime('%m', o.order_date) AS month, SUM(oi.quantity * oi.unit_price_cents) {body}",
            f"SELECT strftime('%m', o.order_date) AS month, SUM({value}) / 100 "
            + body.replace(f"o.channel = '{ch}'", f"o.channel <> '{ch}'"),
        ),
        errors=(f"SELECT strftime('%m', o.orderdate) AS month, SUM({value}) / 100 {body}",),
    )


def _loyal_customers(rng: random.Random) -> Question:
    seg, k = rng.choice(SEGMENTS), rng.choice((10, 20, 40, 80))
    lines = "FROM orders AS o JOIN order_items AS oi ON oi.order_id = o.id"
    return Question(
        template="loyal_customers",
        gold=f"SELECT COUNT(*) FROM (SELECT o.customer_id {lines} JOIN customers AS cu ON cu.id = o.customer_id "
        f"WHERE cu.segment = '{seg}' GROUP BY o.customer_id HAVING SUM(oi.quantity) > {k})",
        rewrites=(
            f"SELECT COUNT(*) FROM customers cu WHERE cu.segment = '{seg}' AND (SELECT SUM(oi.quantity) {lines} "
            f"WHERE o.customer_id = cu.id) > {k}",
            "SELECT COUNT(*) FROM (SELECT cu.id FROM customers cu JOIN orders o ON o.customer_id = cu.id JOIN "
            f"order_items oi ON oi.order_id = o.id WHERE cu.segment = '{seg}' GROUP BY cu.id "
            f"HAVING SUM(oi.quantity) >= {k + 1})",
        ),
        wrongs=(
            f"SELECT COUNT(*) FROM (SELECT o.customer_id {lines} JOIN customers AS cu ON cu.id = o.customer_id "
            f"WHERE cu.segment = '{seg}' GROUP BY o.customer_id HAVING SUM(oi.quantity) > {2 * k})",
            f"SELECT COUNT(*) FROM (SELECT o.customer_id {lines} JOIN customers AS cu ON cu.id = o.customer_id "
            f"WHERE cu.segment = '{seg}' GROUP BY o.customer_id HAVING COUNT(*) > {k})",
        ),
        errors=(
            f"SELECT COUNT(*) FROM (SELECT o.customer_id {lines} JOIN customers AS cu ON cu.id = o.customer_id "
            f"WHERE cu.segment = '{seg}' GROUP BY o.customer_id HAVING SUM(oi.quantity) > {k}",
        ),
    )


def _brand_discount(rng: random.Random) -> Question:
    d, st = rng.choice(DEPARTMENTS), rng.choice(sorted(set(STATUSES)))
    joins = (
        "FROM order_items AS oi JOIN products AS p ON p.id = oi.product_id JOIN categories AS c ON c.id = "
        "p.category_id JOIN orders AS o ON o.id = oi.order_id"
    )
    where = f"WHERE c.department = '{d}' AND o.status = '{st}' GROUP BY p.brand"
    return Question(
        template="brand_discount",
        gold=f"SELECT p.brand, AVG(oi.discount_pct) {joins} {where}",
        rewrites=(
            f"SELECT p.brand, SUM(oi.discount_pct) * 1.0 / COUNT(*) {joins} {where}",
            "SELECT products.brand, AVG(order_items.discount_pct) FROM orders, order_items, products, categories "
            "WHERE orders.id = order_items.order_id AND products.id = order_items.product_id AND categories.id = "
            f"products.category_id AND categories.department = '{d}' AND orders.status = '{st}' "
            "GROUP BY products.brand",
        ),
        wrongs=(
            f"SELECT p.brand, MAX(oi.discount_pct) {joins} {where}",
            f"SELECT p.brand, AVG(oi.discount_pct) {joins} WHERE c.department = '{d}' GROUP BY p.brand",
        ),
        errors=(f"SELECT p.brandname, AVG(oi.discount_pct) {joins} {where}",),
    )


def _region_channel(rng: random.Random) -> Question:
    y = rng.choice(YEARS)
    joins = "FROM orders AS o JOIN customers AS cu ON cu.id = o.customer_id JOIN regions AS r ON r.id = cu.region_id"
    return Question(
        template="region_channel",
        gold=f"SELECT r.name, o.channel, COUNT(*) {joins} WHERE o.order_date LIKE '{y}-%' GROUP BY r.name, o.channel",
        rewrites=(
            f"SELECT r.name, o.channel, COUNT(o.id) {joins} WHERE substr(o.order_date, 1, 4) = '{y}' "
            "GROUP BY o.channel, r.name",
            "SELECT regions.name, orders.channel, COUNT(*) FROM regions, customers, orders WHERE "
            "customers.region_id = regions.id AND orders.customer_id = customers.id AND orders.order_date "
            f"BETWEEN '{y}-01-01' AND '{y}-12-31' GROUP BY regions.name, orders.channel",
        ),
        wrongs=(
            "SELECT r.name, o.channel, COUNT(*) FROM orders AS o JOIN stores AS s ON s.id = o.store_id JOIN "
            f"regions AS r ON r.id = s.region_id WHERE o.order_date LIKE '{y}-%' GROUP BY r.name, o.channel",
            f"SELECT r.name, o.channel, COUNT(DISTINCT cu.id) {joins} WHERE o.order_date LIKE '{y}-%' "
            "GROUP BY r.name, o.channel",
        ),
        errors=(
            "SELECT name, channel, COUNT(*) FROM orders JOIN customers ON customers.id = orders.customer_id "
            f"JOIN regions ON regions.id = customers.region_id WHERE order_date LIKE '{y}-%' GROUP BY name, channel",
        ),
    )


def _big_orders(rng: random.Random) -> Question:
    t = rng.choice((25_000, 50_000, 75_000, 100_000, 150_000, 200_000, 300_000, 400_000))
    total = "SUM(oi.quantity * oi.unit_price_cents)"
    return Question(
        template="big_orders",
        gold="SELECT o.status, COUNT(*) FROM orders AS o WHERE o.id IN (SELECT oi.order_id FROM order_items AS oi "
        f"GROUP BY oi.order_id HAVING {total} > {t}) GROUP BY o.status",
        rewrites=(
            "SELECT status, COUNT(*) FROM (SELECT o.id, o.status FROM orders o JOIN order_items oi ON "
            f"oi.order_id = o.id GROUP BY o.id HAVING {total} > {t}) GROUP BY status",
            "WITH totals AS (SELECT order_id, SUM(unit_price_cents * quantity) AS total FROM order_items GROUP BY "
            f"order_id) SELECT o.status, COUNT(*) FROM orders o WHERE o.id IN (SELECT order_id FROM totals "
            f"WHERE total > {t}) GROUP BY o.status",
        ),
        wrongs=(
            "SELECT o.status, COUNT(*) FROM orders AS o WHERE o.id IN (SELECT oi.order_id FROM order_items AS oi "
            f"GROUP BY oi.order_id HAVING SUM(oi.quantity) > {t // 10_000}) GROUP BY o.status",
            "SELECT o.status, COUNT(DISTINCT o.customer_id) FROM orders AS o WHERE o.id IN (SELECT oi.order_id "
            f"FROM order_items AS oi GROUP BY oi.order_id HAVING {total} > {t}) GROUP BY o.status",
        ),
        errors=(
            "SELECT o.status, COUNT(*) FROM orders AS o WHERE o.id IN (SELECT oi.order_id FROM order_items AS oi "
            f"GROUP BY oi.order_id HAVING SUM(oi.quantity * oi.unit_price) > {t}) GROUP BY o.status",
        ),
    )


def _repeat_buyers(rng: random.Random) -> Question:
    y = rng.choice(YEARS)
    between = f"o.order_date BETWEEN '{y}-01-01' AND '{y}-12-31'"
    after = f"o.order_date >= '{y}-01-01' AND o.order_date <= '{y}-12-31'"
    rep = (
        "SELECT o.customer_id, oi.product_id FROM orders AS o JOIN order_items AS oi ON oi.order_id = o.id "
        f"WHERE {between} GROUP BY o.customer_id, oi.product_id "
        "HAVING COUNT(DISTINCT o.id) >= 2"
    )
    tail = "JOIN customers AS cu ON cu.id = rep.customer_id GROUP BY cu.segment"
    return Question(
        template="repeat_buyers",
        gold=f"SELECT cu.segment, COUNT(*) FROM ({rep}) AS rep {tail}",
        rewrites=(
            f"WITH rep AS ({rep}) SELECT cu.segment, COUNT(*) FROM rep {tail}",
            f"SELECT cu.segment, COUNT(*) FROM ({rep.replace(between, after)}) AS rep {tail}",
        ),
        wrongs=(
            f"SELECT cu.segment, COUNT(*) FROM ({rep.replace('>= 2', '>= 1')}) AS rep {tail}",
            f"SELECT cu.segment, COUNT(*) FROM ({rep.replace('>= 2', '>= 3')}) AS rep {tail}",
        ),
        errors=(
            f"SELECT cu.segment, COUNT(*) FROM ({rep.replace('DISTINCT o.id', 'DISTINCT o.ids')}) AS rep {tail}",
        ),
    )


_TEMPLATES: tuple[Callable[[random.Random], Question], ...] = (
    _category_revenue,
    _top_customers,
    _store_basket,
    _products_never_ordered,
    _monthly_revenue,
    _loyal_customers,
    _brand_discount,
    _region_channel,
    _big_orders,
    _repeat_buyers,
)

# Counts rows of a triple self-join of order_items: ~10^16 combinations at scale 1, ~10^9 even at scale 0.01.
RUNAWAY_SQL = (
    "SELECT COUNT(*) FROM order_items AS a, order_items AS b, order_items AS c "
    "WHERE a.quantity + b.quantity + c.quantity > 0"
)


def _customer_channels(rng: random.Random) -> Question:
    c = rng.randint(1, 50)  # low ids: the skewed customers with many orders
    body = f"FROM orders AS o WHERE o.customer_id = {c}"
    return Question(
        template="customer_channels",
        gold=f"SELECT o.channel, COUNT(*) {body} GROUP BY o.channel",
        rewrites=(f"SELECT channel, COUNT(id) FROM orders WHERE customer_id = {c} GROUP BY channel",),
        wrongs=(f"SELECT o.channel, COUNT(*) {body} AND o.status = 'delivered' GROUP BY o.channel",),
        errors=(f"SELECT o.channel, COUNT(*) FROM orders AS o WHERE o.customer = {c} GROUP BY o.channel",),
    )


def _product_category(rng: random.Random) -> Question:
    k = rng.randint(1, 40)
    join = "FROM products AS p JOIN categories AS c ON c.id = p.category_id"
    return Question(
        template="product_category",
        gold=f"SELECT p.name, c.name, c.department {join} WHERE p.id = {k}",
        rewrites=(
            "SELECT products.name, categories.name, categories.department FROM products, categories "
            f"WHERE categories.id = products.category_id AND products.id = {k}",
        ),
        wrongs=(f"SELECT p.name, c.name, c.department {join} WHERE p.id = {k % 40 + 1}",),
        errors=(f"SELECT p.name, c.nam, c.department {join} WHERE p.id = {k}",),
    )


# The long-tail load's cheap questions: indexed lookups of a few milliseconds.
_LOOKUPS: tuple[Callable[[random.Random], Question], ...] = (_customer_channels, _product_category)
LONGTAIL_HEAVY_EVERY = 12  # one question in 12 of the long-tail load is a heavy join of the default load
LONGTAIL_TIMEOUT_S = 2.0  # the long-tail load's deadline: its op budget must stop the runaway before it


def make_questions(n: int, seed: int = 0, templates: Sequence[Callable] = _TEMPLATES) -> list[Question]:
    """``n`` questions with distinct gold SQL, cycling through ``templates`` with seeded parameters."""
    rng = random.Random(f"questions-{seed}")
    questions: list[Question] = []
    seen: set[str] = set()
    attempts = 0
    while len(questions) < n:
        question = templates[attempts % len(templates)](rng)  # an exhausted template is skipped
        attempts += 1
        if attempts > 100 * n + 1000:
            raise ValueError(f"cannot make {n} distinct questions from the templates; ask for fewer")
        if question.gold not in seen:
            seen.add(question.gold)
            questions.append(question)
    return questions


# ----------------------------------------------------------------------------------------------------------
# The load: questions x samples, in GRPO order (the samples of one prompt side by side).
# ----------------------------------------------------------------------------------------------------------
SAMPLE_KINDS = ("identical", "rewrite", "wrong", "error", "runaway")
_NON_IDENTICAL_CYCLE = ("rewrite", "wrong", "rewrite", "error")


@dataclass(frozen=True)
class Sample:
    """One sampled completion: the question it answers, what kind of answer it is, and its SQL."""

    question: int
    kind: str
    sql: str


@dataclass
class Load:
    """A GRPO-like batch: ``samples`` lists every completion, the samples of one question side by side."""

    db_path: Path
    questions: list[Question]
    samples: list[Sample]

    @property
    def predictions(self) -> list[str]:
        return [s.sql for s in self.samples]

    @property
    def golds(self) -> list[str]:
        return [self.questions[s.question].gold for s in self.samples]

    @property
    def db_paths(self) -> list[str]:
        return [str(self.db_path)] * len(self.samples)

    def kind_counts(self) -> dict[str, int]:
        counts = Counter(s.kind for s in self.samples)
        return {kind: counts.get(kind, 0) for kind in SAMPLE_KINDS}

    def distinct_requests(self) -> list[tuple[str, str]]:
        """Every distinct (database, SQL) of the load, predictions and golds, in first-seen order."""
        pairs = []
        for sample, gold in zip(self.samples, self.golds):
            pairs += [(str(self.db_path), gold), (str(self.db_path), sample.sql)]
        return list(dict.fromkeys(pairs))


def build_load(
    db_path: str | os.PathLike,
    questions: int,
    samples: int,
    seed: int = 0,
    runaway: bool = True,
    longtail: bool = False,
) -> Load:
    """``questions`` x ``samples`` predictions: half identical to the gold, the rest cycling through an
    equivalent rewrite, a wrong answer, another rewrite and an error (question ``i`` starts the cycle at
    position ``i``, so small loads still hold every kind); with ``runaway`` one non-identical sample of a
    seeded question is replaced by :data:`RUNAWAY_SQL`. Samples are shuffled within a question.

    ``longtail``: few distinct statements and a long tail. Questions are indexed lookups of a few ms, one in
    :data:`LONGTAIL_HEAVY_EVERY` a heavy join of the default load (0.1-0.6 s); all samples but one are
    identical to the gold; the runaway is in the last question, so it starts last.
    """
    if questions < 1 or samples < 2:
        raise ValueError(f"need at least 1 question and 2 samples, got {questions} x {samples}")
    rng = random.Random(f"load-{seed}")
    if longtail:
        heavy = iter(make_questions(-(-questions // LONGTAIL_HEAVY_EVERY), seed))
        light = iter(make_questions(questions, seed, _LOOKUPS))
        qs = [next(heavy if i % LONGTAIL_HEAVY_EVERY == 0 else light) for i in range(questions)]
    else:
        qs = make_questions(questions, seed)
    runaway_at = (questions - 1 if longtail else rng.randrange(questions)) if runaway else -1
    out: list[Sample] = []
    for qi, question in enumerate(qs):
        n_identical = samples - 1 if longtail else samples // 2
        kinds = ["identical"] * n_identical
        cycle = _NON_IDENTICAL_CYCLE
        kinds += [cycle[(qi + i) % len(cycle)] for i in range(samples - n_identical)]
        if qi == runaway_at:
            kinds[-1] = "runaway"
        choices = {
            "identical": (question.gold,),
            "rewrite": question.rewrites,
            "wrong": question.wrongs,
            "error": question.errors,
            "runaway": (RUNAWAY_SQL,),
        }
        group = [Sample(qi, kind, rng.choice(choices[kind])) for kind in kinds]
        rng.shuffle(group)
        out += group
    return Load(Path(db_path), qs, out)


# ----------------------------------------------------------------------------------------------------------
# CPU accounting: wall-clock ratios on a shared machine are noise; CPU seconds say where the work went.
# ----------------------------------------------------------------------------------------------------------
def _cpu_seconds() -> tuple[float, float]:
    """CPU seconds used so far by this process, and by its children that have been waited for."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time(), children.ru_utime + children.ru_stime


def _cpu_since(before: tuple[float, float]) -> float:
    now = _cpu_seconds()
    return (now[0] - before[0]) + (now[1] - before[1])


# ----------------------------------------------------------------------------------------------------------
# (a) The physical limit: each distinct (database, SQL) once, serially, with plain sqlite3 under the same
#     deadline and op budget as the sandbox; the budget is calibrated here unless given.
# ----------------------------------------------------------------------------------------------------------
def calibrated_budget(max_finished_ops: int, factor: float = DEFAULT_OPS_FACTOR) -> int:
    """The op budget for a load whose heaviest finished query ran ``max_finished_ops`` VDBE instructions:
    ``factor`` times that, rounded up to two significant digits.

    >>> calibrated_budget(8_781_000)
    44000000
    >>> calibrated_budget(1234, factor=1.0)
    1300
    """
    raw = max(1, math.ceil(factor * max_finished_ops))
    step = 10 ** max(0, len(str(raw)) - 2)
    return -(-raw // step) * step


@dataclass
class PhysicalLimit:
    """Path (a): every distinct (database, SQL) once, serially; ``limit_s`` is the serial time per core.

    ``max_ops`` is the op budget the final runs used (``None``: deadline only) and ``calibrated`` says whether
    path (a) derived it. ``calibration_s`` is the time of provisional attempts that a calibration cut and ran
    again (not part of ``serial_s``: with a known budget they would not happen)."""

    serial_s: float
    cores: int
    distinct: int
    budget_stops: int
    deadline_stops: int
    errors: int
    cpu_s: float = 0.0
    max_ops: int | None = None
    calibrated: bool = False
    max_finished_ops: int = 0
    calibration_s: float = 0.0
    # (db, sql) -> the set of rows, or None when it failed or was stopped (used to check the load itself)
    rows: dict[tuple[str, str], frozenset | None] = field(repr=False, default_factory=dict)
    # (db, sql) -> real seconds its final run took (until it finished, failed or was stopped)
    seconds: dict[tuple[str, str], float] = field(repr=False, default_factory=dict)
    # (db, sql) -> VDBE instructions counted (to the progress handler's granularity)
    ops: dict[tuple[str, str], int] = field(repr=False, default_factory=dict)
    # (db, sql) -> "budget" or "deadline" when the final run was stopped, None otherwise
    stopped: dict[tuple[str, str], str | None] = field(repr=False, default_factory=dict)

    @property
    def limit_s(self) -> float:
        return self.serial_s / self.cores

    @property
    def timeouts(self) -> int:
        return self.budget_stops + self.deadline_stops


def _run_counted(
    conn: sqlite3.Connection, sql: str, timeout_s: float, max_ops: int | None
) -> tuple[frozenset | None, float, int, str | None, bool]:
    """Run ``sql`` to the end, counting VDBE instructions; stop it at ``max_ops`` or at the deadline.

    Returns ``(rows or None, real elapsed seconds, ops counted, "budget" | "deadline" | None, failed)``."""
    state = {"ops": 0, "stop": None}
    deadline = time.monotonic() + timeout_s

    def progress() -> int:
        state["ops"] += CALIBRATION_EVERY
        if max_ops is not None and state["ops"] > max_ops:
            state["stop"] = "budget"
            return 1
        if time.monotonic() > deadline:
            state["stop"] = "deadline"
            return 1
        return 0

    conn.set_progress_handler(progress, CALIBRATION_EVERY)
    started = time.perf_counter()
    try:
        rows, failed = frozenset(conn.execute(sql).fetchall()), False
    except sqlite3.Error:
        rows, failed = None, state["stop"] is None
    finally:
        elapsed = time.perf_counter() - started
        conn.set_progress_handler(None, 0)
    return rows, elapsed, state["ops"], state["stop"], failed


def time_physical_limit(
    load: Load,
    timeout_s: float,
    cores: int | None = None,
    max_ops: int | None = None,
    ops_factor: float = DEFAULT_OPS_FACTOR,
) -> PhysicalLimit:
    """Run every distinct (database, SQL) once with plain ``sqlite3`` (one connection per database), timing
    each and counting its VDBE instructions with a progress handler (every :data:`CALIBRATION_EVERY`); a
    query is stopped at ``max_ops`` instructions or at ``timeout_s``, whichever comes first, and counts
    with its real elapsed time.

    With ``max_ops=None`` the budget is calibrated on the way: ``ops_factor`` times the largest count among
    the queries that finished, rounded up (:func:`calibrated_budget`). In first-seen order a query runs under
    the provisional budget of the queries finished before it; one cut by a provisional budget is run again,
    after the pass, under the budget of everything that finished (repeated until the budget stops growing),
    so the final budget never cuts a query that finishes below it, whatever the order. Those first attempts
    are reported as ``calibration_s``, not counted in ``serial_s``."""
    cores = cores or os.cpu_count() or 1
    calibrate = max_ops is None
    conns: dict[str, sqlite3.Connection] = {}
    limit = PhysicalLimit(0.0, cores, 0, 0, 0, 0, max_ops=max_ops, calibrated=calibrate)
    cpu_before = _cpu_seconds()

    def budget_now() -> int | None:
        if not calibrate:
            return max_ops
        return calibrated_budget(limit.max_finished_ops, ops_factor) if limit.max_finished_ops else None

    def run(request: tuple[str, str], budget: int | None) -> tuple:
        db_path, sql = request
        conn = conns.get(db_path)
        if conn is None:
            conn = conns[db_path] = sqlite3.connect(db_path)
        outcome = _run_counted(conn, sql, timeout_s, budget)
        if outcome[0] is not None:
            limit.max_finished_ops = max(limit.max_finished_ops, outcome[2])
        return outcome

    final: dict[tuple[str, str], tuple] = {}
    try:
        requests = load.distinct_requests()
        deferred = []
        for request in requests:
            outcome = run(request, budget_now())
            if calibrate and outcome[3] == "budget":
                deferred.append(request)
                limit.calibration_s += outcome[1]
            else:
                final[request] = outcome
        while deferred:
            budget = budget_now()
            again = []
            for request in deferred:
                final[request] = outcome = run(request, budget)
                if outcome[3] == "budget":
                    again.append(request)
            if budget_now() == budget:  # nothing that finished raised the budget: the cuts are final
                break
            for request in again:  # the budget grew: what it cut may finish under the new one
                limit.calibration_s += final.pop(request)[1]
            deferred = again
    finally:
        for conn in conns.values():
            conn.close()
    limit.max_ops = budget_now()
    for request in requests:
        rows, elapsed, ops, stop, failed = final[request]
        limit.serial_s += elapsed
        limit.rows[request], limit.seconds[request] = rows, elapsed
        limit.ops[request], limit.stopped[request] = ops, stop
        limit.budget_stops += stop == "budget"
        limit.deadline_stops += stop == "deadline"
        limit.errors += failed
    limit.distinct = len(requests)
    limit.cpu_s = _cpu_since(cpu_before)
    return limit


def check_load(load: Load, limit: PhysicalLimit) -> dict[str, int]:
    """Count samples whose kind the plain-sqlite3 results contradict (a rewrite that does not return the gold's
    rows, a wrong answer that does, an error that runs, a runaway that finishes): all zero for a sound load."""
    problems = Counter()
    db = str(load.db_path)
    for sample, gold in zip(load.samples, load.golds):
        got, want = limit.rows[(db, sample.sql)], limit.rows[(db, gold)]
        if want is None:
            problems["gold_failed"] += 1
        elif sample.kind in ("identical", "rewrite") and got != want:
            problems[f"{sample.kind}_differs"] += 1
        elif sample.kind == "wrong" and (got is None or got == want):
            problems["wrong_matches_or_fails"] += 1
        elif sample.kind in ("error", "runaway") and got is not None:
            problems[f"{sample.kind}_ran"] += 1
    return dict(problems)


def baseline_serial_work(load: Load, limit: PhysicalLimit, timeout_s: float) -> tuple[float, int]:
    """What a BIRD-style evaluator must do, from path (a)'s results: ``(serial seconds, SQLite executions)``.

    Every pair runs its prediction, and its gold too unless the prediction failed or did not finish (nothing
    is deduplicated). A prediction that did not finish in (a) costs the baseline the whole ``timeout_s`` (and
    its thread goes on running after that, which this does not count)."""
    db = str(load.db_path)
    seconds, executions = 0.0, 0
    for sample, gold in zip(load.samples, load.golds):
        pred = (db, sample.sql)
        executions += 1
        if limit.stopped[pred] is not None:
            seconds += timeout_s
        else:
            seconds += limit.seconds[pred]
        if limit.rows[pred] is not None:
            seconds += limit.seconds[(db, gold)]
            executions += 1
    return seconds, executions


# ----------------------------------------------------------------------------------------------------------
# (b) The metric's batch path: Judge(mode="bird").judge_many on a new sandbox with the same limits.
# ----------------------------------------------------------------------------------------------------------
@dataclass
class SandboxRun:
    """Path (b): wall and CPU seconds (this process and its workers), the judgements, the sandbox's stats, the
    seconds SQLite spent inside the workers (summed over the executions, as the workers timed them), and how
    many executions the op budget and the deadline stopped."""

    seconds: float
    cpu_s: float
    judgements: list[Judgement] = field(repr=False)
    stats: dict
    in_worker_s: float
    budget_stops: int = 0
    deadline_stops: int = 0


def time_sandbox(
    load: Load, timeout_s: float, workers: int | None = None, max_ops: int | None = None
) -> SandboxRun:
    """Judge the whole load in one ``judge_many`` call on a NEW sandbox with
    ``Limits(timeout_s=timeout_s, max_ops=max_ops)`` (cold cache; worker start-up timed).

    CPU seconds include the worker processes (counted once they are closed and reaped)."""
    cpu_before = _cpu_seconds()
    started = time.perf_counter()
    sandbox = Sandbox(Limits(timeout_s=timeout_s, max_ops=max_ops), workers=workers)
    try:
        judge = Judge(sandbox, mode="bird")
        judgements = judge.judge_many(load.predictions, load.golds, load.db_paths)
        elapsed = time.perf_counter() - started
        stats = dict(sandbox.stats)
    finally:
        sandbox.close()
    executed = {}  # one entry per execution: duplicates and cache hits come back marked ``cached``
    for judgement in judgements:
        for result in (judgement.pred, judgement.gold):
            if result is not None and not result.cached:
                executed[id(result)] = result
    stops = Counter(_stop_reason(result) for result in executed.values())
    in_worker = sum(result.elapsed_s for result in executed.values())
    return SandboxRun(
        elapsed, _cpu_since(cpu_before), judgements, stats, in_worker, stops["budget"], stops["deadline"]
    )


def _stop_reason(result) -> str | None:
    """``"budget"`` or ``"deadline"`` for a timed-out sandbox result (from its error text), else ``None``."""
    if result is None or result.status is not ExecStatus.TIMEOUT:
        return None
    return "budget" if "op budget" in (result.error or "") else "deadline"


def check_against_limit(load: Load, limit: PhysicalLimit, judgements: Sequence[Judgement]) -> dict:
    """Do the judge's verdicts follow from path (a)'s plain-sqlite3 results, and did the sandbox's limits stop
    only the runaway?

    ``budget_cuts`` lists the samples whose prediction or gold the sandbox stopped (op budget or deadline)
    although the query is legitimate: not the load's runaway, or it finished in (a). ``disagreeing`` lists
    the samples whose verdict does not follow from (a)'s results (in ``bird`` mode a sample is correct exactly
    when its prediction finished in (a) with the gold's set of rows). Both must be empty."""
    db = str(load.db_path)
    cuts, disagreeing = [], []
    for i, (sample, gold, judgement) in enumerate(zip(load.samples, load.golds, judgements)):
        pred_rows, gold_rows = limit.rows[(db, sample.sql)], limit.rows[(db, gold)]
        pred_legitimate = sample.kind != "runaway" or pred_rows is not None
        pred_cut = pred_legitimate and judgement.pred_status is ExecStatus.TIMEOUT
        if pred_cut or judgement.gold_status is ExecStatus.TIMEOUT:  # every gold is legitimate
            cuts.append(i)
        expected = int(pred_rows is not None and pred_rows == gold_rows) if gold_rows is not None else None
        if judgement.correct != expected:
            disagreeing.append(i)
    return {"budget_cuts": cuts, "disagreeing": disagreeing}


# ----------------------------------------------------------------------------------------------------------
# (c) A BIRD-style baseline, structured as BIRD's evaluation script: a Pool, apply_async with a callback,
#     func_timeout around a function that opens a new connection and runs prediction then gold.
# ----------------------------------------------------------------------------------------------------------
def _bird_execute_sql(predicted_sql: str, ground_truth: str, db_path: str) -> int:
    conn = sqlite3.connect(db_path)
    cursor = conn.cursor()
    cursor.execute(predicted_sql)
    predicted_res = cursor.fetchall()
    cursor.execute(ground_truth)
    ground_truth_res = cursor.fetchall()
    res = 0
    if set(predicted_res) == set(ground_truth_res):
        res = 1
    return res


def _bird_execute_model(
    predicted_sql: str, ground_truth: str, db_place: str, idx: int, meta_time_out: float
) -> dict:
    # BIRD records timeout / error and scores both 0; we keep which one it was to compare verdicts.
    try:
        res = func_timeout(meta_time_out, _bird_execute_sql, args=(predicted_sql, ground_truth, db_place))
        outcome = "ran"
    except KeyboardInterrupt:
        sys.exit(0)
    except FunctionTimedOut:
        res, outcome = 0, "timeout"
    except Exception:  # BIRD's evaluator catches everything: an error scores 0
        res, outcome = 0, "error"
    return {"sql_idx": idx, "res": res, "outcome": outcome}


@dataclass
class BaselineRun:
    """Path (c): wall and CPU seconds (this process and the pool's), one result per sample (``None``: lost)."""

    seconds: float
    cpu_s: float
    results: list[dict | None] = field(repr=False)


def time_bird_baseline(load: Load, timeout_s: float, num_cpus: int | None = None) -> BaselineRun:
    """Run the load through the BIRD-style evaluator (``num_cpus`` pool processes, default every core).

    A timed-out query keeps running in its pool process (``func_timeout`` cannot stop a thread inside
    SQLite's C code) until the pool ends; its CPU is counted, as it is paid."""
    return run_bird_style(load.predictions, load.golds, load.db_paths, timeout_s, num_cpus)


def run_bird_style(
    predictions: Sequence[str],
    golds: Sequence[str],
    db_paths: Sequence[str],
    timeout_s: float,
    num_cpus: int | None = None,
) -> BaselineRun:
    """The BIRD-style evaluator on parallel lists of predictions, golds and database paths."""
    num_cpus = num_cpus or os.cpu_count() or 1
    exec_result: list[dict] = []
    cpu_before = _cpu_seconds()
    started = time.perf_counter()
    pool = mp.Pool(processes=num_cpus)
    for i, (predicted_sql, ground_truth, db_place) in enumerate(zip(predictions, golds, db_paths)):
        pool.apply_async(
            _bird_execute_model,
            args=(predicted_sql, ground_truth, db_place, i, timeout_s),
            callback=exec_result.append,
        )
    pool.close()
    pool.join()
    elapsed = time.perf_counter() - started
    by_index: list[dict | None] = [None] * len(predictions)
    for result in exec_result:
        by_index[result["sql_idx"]] = result
    return BaselineRun(elapsed, _cpu_since(cpu_before), by_index)


# ----------------------------------------------------------------------------------------------------------
# Verdict agreement and per-query overhead
# ----------------------------------------------------------------------------------------------------------
def compare_verdicts(judgements: Sequence[Judgement], baseline: Sequence[dict | None]) -> dict:
    """Compare the judge's 1/0 with the baseline's wherever the baseline finished (no timeout).

    An unscorable judgement (``correct is None``) where the baseline finished counts as a disagreement: every
    gold of the load runs, so it would be a sandbox failure."""
    disagreements, compared, unfinished, lost = [], 0, 0, 0
    table: Counter = Counter()
    for i, (judgement, base) in enumerate(zip(judgements, baseline)):
        if base is None:
            lost += 1
            continue
        table[(judgement.verdict.value, base["outcome"], base["res"])] += 1
        if base["outcome"] == "timeout":
            unfinished += 1
            continue
        compared += 1
        if judgement.correct != base["res"]:
            disagreements.append(i)
    return {
        **{"compared": compared, "baseline_unfinished": unfinished, "baseline_lost": lost},
        **{"disagreements": len(disagreements), "disagreeing_indices": disagreements},
        "table": {f"{v} | baseline {o} res={r}": n for (v, o, r), n in sorted(table.items())},
    }


def measure_overhead(db_path: str | os.PathLike, n: int = 2000, timeout_s: float = 5.0) -> dict[str, float]:
    """Microseconds per trivial query: plain sqlite3; one sandbox call at a time (a round trip to one warm
    worker; also in CPU microseconds, the worker's included, its start-up amortised over the ``n`` calls);
    one ``execute_many`` batch over all workers; and the BIRD-style evaluator on ``n // 2`` trivial pairs
    (two queries each). Every SQL string is distinct: no cache hits."""
    db = str(db_path)
    sqls = [f"SELECT name FROM regions WHERE id = {i % len(REGIONS) + 1} AND {i} >= 0" for i in range(n)]
    conn = sqlite3.connect(db)
    try:
        cpu_before = _cpu_seconds()
        started = time.perf_counter()
        for sql in sqls:
            conn.execute(sql).fetchall()
        direct = time.perf_counter() - started
        direct_cpu = _cpu_since(cpu_before)
    finally:
        conn.close()
    limits = Limits(timeout_s=timeout_s)
    cpu_before = _cpu_seconds()
    with Sandbox(limits, workers=1) as sandbox:
        sandbox.execute(db, "SELECT 1")  # start the worker and open the database
        started = time.perf_counter()
        for sql in sqls:
            sandbox.execute(db, sql)
        single = time.perf_counter() - started
    single_cpu = _cpu_since(cpu_before)  # the worker is reaped by close(): its CPU is in
    bird_sqls = [sql.replace(">= 0", ">= -2") for sql in sqls]
    bird = run_bird_style(bird_sqls[: n // 2], bird_sqls[n // 2 :], [db] * (n // 2), timeout_s)
    with Sandbox(limits) as sandbox:
        sandbox.execute_many([(db, f"SELECT {i}") for i in range(2 * sandbox.workers)])  # start every worker
        batch_sqls = [sql.replace(">= 0", ">= -1") for sql in sqls]
        started = time.perf_counter()
        sandbox.execute_many([(db, sql) for sql in batch_sqls])
        batch = time.perf_counter() - started
        workers = sandbox.workers
    return {
        "queries": n,
        "sqlite3_us": 1e6 * direct / n,
        "sandbox_execute_us": 1e6 * single / n,
        "sandbox_overhead_us": 1e6 * (single - direct) / n,
        "sqlite3_cpu_us": 1e6 * direct_cpu / n,
        "sandbox_execute_cpu_us": 1e6 * single_cpu / n,
        "sandbox_execute_many_us": 1e6 * batch / n,
        "execute_many_workers": workers,
        "bird_style_us": 1e6 * bird.seconds / n,
    }


# ----------------------------------------------------------------------------------------------------------
# The command line
# ----------------------------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Time the execution core on GRPO-like loads against the physical limit and a BIRD-style "
        "evaluator, each with its own defence against a runaway query, and check that their verdicts agree."
    )
    add = parser.add_argument
    add("--questions", type=int, default=40, help="questions in the default load (default 40)")
    add("--samples", type=int, default=8, help="samples per question (default 8)")
    add("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="deadline per query of the default load, "
        "the same for every path, s (default 30: BIRD's meta_time_out)")  # fmt: skip
    add("--max-ops", type=int, default=None, help="op budget (VDBE instructions) of paths (a) and (b) "
        "(default: calibrated in path (a) as --ops-factor times the heaviest query that finished)")  # fmt: skip
    add("--ops-factor", type=float, default=DEFAULT_OPS_FACTOR, help="margin of the calibrated op budget "
        "over the heaviest finished query (default 5)")  # fmt: skip
    add("--work-dir", default=None, help="where the database is built and reused (default: a temporary folder)")
    add("--seed", type=int, default=0, help="seed of the database and the loads (default 0)")
    add("--scale", type=float, default=1.0, help="database size factor (default 1: about 32 MB)")
    add("--overhead-queries", type=int, default=2000, help="trivial queries timed for the overhead")
    add("--skip-baseline", action="store_true", help="time (a) and (b) only (no baseline): for profiling")
    add("--longtail-questions", type=int, default=48, help="questions of the long-tail load, timed with (a) "
        "and (b) in the same run (default 48; 0: skip it)")  # fmt: skip
    add("--json", metavar="OUT", default=None, help="write every number to this JSON file")
    return parser


def _against(ratio: float, target: float) -> str:
    return f"target <= {target:g}: {'PASS' if ratio <= target else 'MISS'}"


def measure_limit_and_sandbox(load: Load, timeout_s: float, max_ops: int | None, ops_factor: float) -> tuple:
    """Paths (a) and (b) on one load, side by side, printed; returns ``(limit, sandbox run, numbers)``."""
    cores = os.cpu_count() or 1
    print("(a) physical limit: every distinct (db, SQL) once, serially, plain sqlite3 ...", flush=True)
    limit = time_physical_limit(load, timeout_s, cores, max_ops, ops_factor)
    problems = check_load(load, limit)
    calibration = (
        f"calibrated: {ops_factor:g}x the heaviest finished query ({limit.max_finished_ops:,} ops), rounded up; "
        f"provisional attempts cut and run again: {limit.calibration_s:.2f} s, not counted"
        if limit.calibrated
        else "given"
    )
    print(
        f"    op budget {'none' if limit.max_ops is None else f'{limit.max_ops:,}'} ({calibration})\n"
        f"    {limit.distinct} distinct ({limit.budget_stops} stopped by the op budget, {limit.deadline_stops} "
        f"by the deadline, {limit.errors} errors): serial {limit.serial_s:.2f} s / {cores} cores = "
        f"{limit.limit_s:.2f} s; CPU {limit.cpu_s:.2f} s"
    )
    for request, stop in [(r, stop) for r, stop in limit.stopped.items() if stop is not None][:5]:
        print(f"    stopped by the {stop} after {limit.seconds[request]:.2f} s: {request[1][:90]}")
    if problems:
        print(f"    ERROR: the load contradicts its own labels (too small an op budget?): {problems}")
    print(
        f"(b) Judge(mode='bird').judge_many on a new Sandbox(Limits(timeout_s={timeout_s:g}, "
        f"max_ops={limit.max_ops})) ...",
        flush=True,
    )
    sandbox = time_sandbox(load, timeout_s, max_ops=limit.max_ops)
    over_limit = sandbox.seconds / limit.limit_s
    checked = check_against_limit(load, limit, sandbox.judgements)
    print(
        f"    {sandbox.seconds:.2f} s: (b)/(a) = {over_limit:.2f} ({_against(over_limit, TARGET_SANDBOX_OVER_LIMIT)})"
        f"\n    CPU {sandbox.cpu_s:.2f} s: (b)/(a) CPU = {sandbox.cpu_s / limit.cpu_s:.2f}; it ran on "
        f"{sandbox.cpu_s / sandbox.seconds:.1f} of the {cores} cores on average; SQLite time inside "
        f"the workers {sandbox.in_worker_s:.2f} s ({sandbox.in_worker_s / limit.serial_s:.2f}x path (a)'s "
        f"serial); {sandbox.budget_stops} stopped by the op budget, {sandbox.deadline_stops} by the deadline; "
        f"stats {sandbox.stats}\n    samples with a legitimate query cut by the sandbox's limits: "
        f"{len(checked['budget_cuts'])}; verdicts contradicting path (a)'s results: {len(checked['disagreeing'])}"
    )
    if checked["budget_cuts"] or checked["disagreeing"]:
        print(
            f"    ERROR: samples cut {checked['budget_cuts'][:20]}, disagreeing {checked['disagreeing'][:20]}"
            " (raise --max-ops or --ops-factor)"
        )
    numbers = {
        "load": {
            "predictions": len(load.samples),
            "kinds": load.kind_counts(),
            "distinct_requests": limit.distinct,
            "timeout_s": timeout_s,
            "label_problems": problems,
        },
        "physical_limit": {
            **{k: getattr(limit, k) for k in ("serial_s", "cores", "limit_s", "cpu_s", "max_ops", "errors")},
            **{k: getattr(limit, k) for k in ("max_finished_ops", "calibration_s", "budget_stops", "deadline_stops")},
            "max_ops_calibrated": limit.calibrated,
        },
        "sandbox": {
            **{k: getattr(sandbox, k) for k in ("seconds", "cpu_s", "in_worker_s", "budget_stops", "deadline_stops")},
            "cores_used_on_average": sandbox.cpu_s / sandbox.seconds,
            "executions": sandbox.stats["executed"],
            "stats": sandbox.stats,
            "legitimate_cut": checked["budget_cuts"],
            "disagreeing_with_limit": checked["disagreeing"],
        },
        "ratios": {
            "sandbox_over_limit": over_limit,
            "sandbox_over_limit_target": TARGET_SANDBOX_OVER_LIMIT,
            "sandbox_cpu_over_limit_cpu": sandbox.cpu_s / limit.cpu_s,
        },
    }
    return limit, sandbox, numbers


def _time_baseline(load: Load, limit: PhysicalLimit, sandbox: SandboxRun, timeout_s: float, numbers: dict) -> None:
    """Path (c) on the default load and its verdict agreement with (b): printed and added to ``numbers``."""
    cores = os.cpu_count() or 1
    work, executions = baseline_serial_work(load, limit, timeout_s)
    print(
        f"(c) BIRD-style evaluator: Pool({cores}), apply_async, func_timeout({timeout_s:g}), new connection per "
        f"pair, prediction then gold ...\n    work: {executions} SQLite executions vs (b)'s "
        f"{sandbox.stats['executed']} ({executions / sandbox.stats['executed']:.1f}x); at least {work:.1f} s of "
        f"serial SQLite time vs (a)'s {limit.serial_s:.1f} s ({work / limit.serial_s:.1f}x)",
        flush=True,
    )
    baseline = time_bird_baseline(load, timeout_s, cores)
    over_sandbox = baseline.seconds / sandbox.seconds
    print(
        f"    {baseline.seconds:.2f} s: (c)/(b) = {over_sandbox:.1f} (no target: (b) runs near the limit (a), so "
        f"(c)/(b) is bounded by (c)'s work over (a)'s, {work / limit.serial_s:.1f}x on this load)\n"
        f"    CPU {baseline.cpu_s:.2f} s: (c)/(b) CPU = {baseline.cpu_s / sandbox.cpu_s:.1f}; it ran on "
        f"{baseline.cpu_s / baseline.seconds:.1f} of the {cores} cores on average"
    )
    agreement = compare_verdicts(sandbox.judgements, baseline.results)
    print(
        f"verdicts: {agreement['compared']} compared where the baseline finished "
        f"({agreement['baseline_unfinished']} baseline timeouts, {agreement['baseline_lost']} lost): "
        f"{agreement['disagreements']} disagreements"
    )
    for row, n in agreement["table"].items():
        print(f"    {n:4d}  judge {row}")
    if agreement["disagreements"]:
        print(f"    disagreeing samples: {agreement['disagreeing_indices'][:20]}")
    numbers["baseline"] = {
        "seconds": baseline.seconds,
        "cpu_s": baseline.cpu_s,
        "serial_work_s": work,
        "executions": executions,
    }
    numbers["ratios"].update(
        {
            "baseline_over_sandbox": over_sandbox,
            "baseline_cpu_over_sandbox_cpu": baseline.cpu_s / sandbox.cpu_s,
            "baseline_executions_over_sandbox_executions": executions / sandbox.stats["executed"],
            "baseline_work_over_limit_work": work / limit.serial_s,
        }
    )
    numbers["verdicts"] = agreement


def run_benchmark(args: argparse.Namespace) -> dict:
    """Run the three paths on the default load, (a) and (b) on the long-tail load, and the overhead
    measurement; returns every number (what ``--json`` writes)."""
    cores = os.cpu_count() or 1
    load_before = os.getloadavg()
    own_dir = args.work_dir is None
    work_dir = Path(tempfile.mkdtemp(prefix="slmsql-bench-")) if own_dir else Path(args.work_dir)
    try:
        started = time.perf_counter()
        cached = database_path(work_dir, args.seed, args.scale).is_file()
        db_path = build_database(work_dir, args.seed, args.scale)
        size_mb = db_path.stat().st_size / 1e6
        how = "reused" if cached else "built"
        print(f"database: {db_path} ({size_mb:.1f} MB, {how} in {time.perf_counter() - started:.1f} s)")
        db_path.read_bytes()  # warm the OS file cache so that no path pays the first disk read
        load = build_load(db_path, args.questions, args.samples, args.seed)
        budget_how = f"{args.max_ops:,} (given)" if args.max_ops else f"calibrated in (a), {args.ops_factor:g}x"
        print(
            f"load: {args.questions} questions x {args.samples} samples = {len(load.samples)} predictions ("
            + ", ".join(f"{k} {n}" for k, n in load.kind_counts().items())
            + f"); {cores} cores; load average {load_before[0]:.1f} / {load_before[1]:.1f} / {load_before[2]:.1f}"
            f" (1 / 5 / 15 min)\nrunaway defences, each path as shipped: wall-clock deadline {args.timeout:g} s "
            f"for all three (BIRD's meta_time_out is 30 s); op budget {budget_how} for (a) and (b), which "
            "stop SQLite itself at whichever comes first; (c) has func_timeout only, which cannot stop a thread "
            "inside SQLite"
        )
        if load_before[0] > 0.5 * cores:
            print(
                "WARNING: other processes are using the CPUs: wall-clock ratios are unreliable; "
                "the CPU-second figures below are not"
            )
        limit, sandbox, numbers = measure_limit_and_sandbox(load, args.timeout, args.max_ops, args.ops_factor)
        numbers["args"] = {k: v for k, v in vars(args).items() if k != "json"}
        numbers["environment"] = {
            "cores": cores,
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "platform": platform.platform(),
            "load_average_before": list(load_before),
        }
        numbers["database"] = {"path": str(db_path), "size_mb": size_mb}
        if not args.skip_baseline:
            _time_baseline(load, limit, sandbox, args.timeout, numbers)
        if args.longtail_questions:
            longtail = build_load(db_path, args.longtail_questions, args.samples, args.seed, longtail=True)
            print(
                f"long-tail load: {args.longtail_questions} questions x {args.samples} samples ("
                + ", ".join(f"{k} {n}" for k, n in longtail.kind_counts().items())
                + f"): indexed lookups, one question in {LONGTAIL_HEAVY_EVERY} a heavy join, the runaway last; "
                f"deadline {LONGTAIL_TIMEOUT_S:g} s; load average {os.getloadavg()[0]:.1f}"
            )
            tail = measure_limit_and_sandbox(longtail, LONGTAIL_TIMEOUT_S, args.max_ops, args.ops_factor)
            numbers["longtail"] = tail[2]
            both = (numbers["ratios"]["sandbox_over_limit"], numbers["longtail"]["ratios"]["sandbox_over_limit"])
            print(f"(b)/(a), side by side in this run: default load {both[0]:.2f}, long-tail load {both[1]:.2f}")

        overhead = measure_overhead(db_path, args.overhead_queries, args.timeout)
        print(
            f"per-query overhead on trivial queries ({overhead['queries']} distinct): sqlite3 "
            f"{overhead['sqlite3_us']:.0f} us, sandbox execute {overhead['sandbox_execute_us']:.0f} us "
            f"(+{overhead['sandbox_overhead_us']:.0f} us), execute_many over {overhead['execute_many_workers']} "
            f"workers {overhead['sandbox_execute_many_us']:.0f} us/query, BIRD-style "
            f"{overhead['bird_style_us']:.0f} us/query\n    CPU per query: sqlite3 {overhead['sqlite3_cpu_us']:.0f} us, "
            f"sandbox execute {overhead['sandbox_execute_cpu_us']:.0f} us (this process and the worker)"
        )
        numbers["overhead"] = overhead
        load_after = os.getloadavg()
        numbers["environment"]["load_average_after"] = list(load_after)
        print(f"load average at the end: {load_after[0]:.1f} / {load_after[1]:.1f} / {load_after[2]:.1f}")
        return numbers
    finally:
        if own_dir:
            shutil.rmtree(work_dir, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.questions < 1 or args.samples < 2 or args.timeout <= 0 or args.scale <= 0:
        parser.error("--questions >= 1, --samples >= 2, --timeout > 0 and --scale > 0 are required")
    if (args.max_ops is not None and args.max_ops <= 0) or args.ops_factor < 1:
        parser.error("--max-ops must be > 0 and --ops-factor >= 1")
    numbers = run_benchmark(args)
    if args.json:
        Path(args.json).write_text(json.dumps(numbers, indent=2) + "\n")
        print(f"numbers written to {args.json}")
    for part in (numbers, numbers.get("longtail")):
        if part and (part["load"]["label_problems"] or part["sandbox"]["legitimate_cut"]):
            return 1
        if part and part["sandbox"]["disagreeing_with_limit"]:
            return 1
    agreement = numbers.get("verdicts")
    if agreement is not None and (agreement["disagreements"] or agreement["baseline_lost"]):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
