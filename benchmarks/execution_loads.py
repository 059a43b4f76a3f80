"""The loads of ``bench_execution.py``: a retail database built by the world's generator, and GRPO-like batches
of predictions over it.

The database is a :class:`~slmsql_hub.world.schemas.DatabaseSpec` (region, store, customer, category,
product, 120k sales, 420k sale lines at scale 1) whose rows come from :func:`slmsql_hub.world.populate.generate_rows`
and file from :func:`~slmsql_hub.world.populate.write_database`, the code that builds the world's databases;
eight indexes and ``ANALYZE`` are added on top, so the heavy joins take 50-600 ms.

Each question template writes a gold query, equivalent rewrites (other join syntax, ``NOT EXISTS`` for
``NOT IN``, CTEs, ``substr`` for ``strftime``), wrong answers and errors. Integer arithmetic only, so a
rewrite's rows are bit-identical to its gold's.
"""

from __future__ import annotations

import os
import random
import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from slmsql_hub.world.populate import generate_rows, write_database
from slmsql_hub.world.schemas import CATEGORY, DATE, FK, ID, LABEL, NUMBER, Column, DatabaseSpec, Table

DB_FORMAT_VERSION = 2  # bump when the database changes (2: built by the world's generator)
MAX_SCALE = 2.0  # product names are codes P-1000..P-9999: at most 9000 products

REGIONS = ("North", "South", "East", "West", "Central", "Coast", "Mountain", "Islands")
SEGMENTS = ("consumer", "corporate", "small_business", "education")
DEPARTMENTS = {
    "electronics": ("Phones", "Laptops", "Cameras", "Audio", "Monitors"),
    "home": ("Kitchen", "Bedding", "Lighting", "Storage", "Decor"),
    "garden": ("Tools", "Plants", "Grills", "Irrigation", "Seeds"),
    "sports": ("Cycling", "Running", "Swimming", "Camping", "Fitness"),
    "toys": ("Puzzles", "Dolls", "Blocks", "Boardgames", "Kites"),
    "grocery": ("Coffee", "Snacks", "Pasta", "Spices", "Tea"),
}
BRANDS = tuple(f"brand_{c}" for c in "abcdefghijklmnop")
STATUSES = ("delivered", "delivered", "delivered", "shipped", "returned", "cancelled")
CHANNELS = ("web", "web", "store", "phone", "app")
YEARS = (2019, 2020, 2021, 2022, 2023, 2024)
_CATEGORIES = tuple((name, dept) for dept, names in DEPARTMENTS.items() for name in names)

RETAIL = DatabaseSpec(
    db_id="retail",
    description="A retail chain: regions, stores, customers, a product catalogue and its sales.",
    tables=(
        Table("region", len(REGIONS), (Column("region_id", ID), Column("name", LABEL, ("fixed", REGIONS)))),
        Table("store", 120, (
            Column("store_id", ID), Column("name", LABEL, ("code", "ST-")),
            Column("opened_year", NUMBER, (2009, 2014)), Column("region_id", FK, references="region"),
        )),
        Table("customer", 25_000, (
            Column("customer_id", ID), Column("segment", CATEGORY, ("choice", SEGMENTS)),
            Column("signup_year", NUMBER, (2010, 2024)), Column("region_id", FK, references="region"),
        )),
        Table("category", len(_CATEGORIES), (
            Column("category_id", ID), Column("name", LABEL, ("fixed", tuple(n for n, _ in _CATEGORIES))),
            Column("department", CATEGORY, ("by_label", _CATEGORIES)),
        )),
        Table("product", 4_000, (
            Column("product_id", ID), Column("name", LABEL, ("code", "P-")),
            Column("brand", CATEGORY, ("choice", BRANDS)), Column("price_cents", NUMBER, (199, 99_999)),
            Column("category_id", FK, references="category"),
        )),
        Table("sale", 120_000, (
            Column("sale_id", ID), Column("sale_date", DATE, (YEARS[0], YEARS[-1])),
            Column("status", CATEGORY, ("choice", STATUSES)), Column("channel", CATEGORY, ("choice", CHANNELS)),
            Column("customer_id", FK, references="customer"), Column("store_id", FK, references="store"),
        )),
        Table("sale_line", 420_000, (
            Column("sale_line_id", ID), Column("quantity", NUMBER, (1, 5)),
            Column("unit_price_cents", NUMBER, (199, 99_999)), Column("discount_pct", NUMBER, (0, 25)),
            Column("sale_id", FK, references="sale"), Column("product_id", FK, (0.05,), references="product"),
        )),
    ),
)  # fmt: skip
"""The retail database at scale 1 (``sale_line.product_id``: 5% of the products are never sold)."""

_MIN_ROWS = {"store": 40, "customer": 50, "product": 40, "sale": 100, "sale_line": 350}
_INDEXES = """
CREATE INDEX idx_store_region ON store(region_id);
CREATE INDEX idx_customer_region ON customer(region_id);
CREATE INDEX idx_product_category ON product(category_id);
CREATE INDEX idx_sale_customer ON sale(customer_id);
CREATE INDEX idx_sale_store ON sale(store_id);
CREATE INDEX idx_sale_date ON sale(sale_date);
CREATE INDEX idx_line_sale ON sale_line(sale_id);
CREATE INDEX idx_line_product ON sale_line(product_id);
ANALYZE;
"""


def retail_spec(scale: float = 1.0) -> DatabaseSpec:
    """:data:`RETAIL` with every scalable table's rows times ``scale`` (floored at a minimum)."""
    tables = tuple(
        replace(t, rows=max(_MIN_ROWS[t.name], int(t.rows * scale))) if t.name in _MIN_ROWS else t
        for t in RETAIL.tables
    )
    return replace(RETAIL, tables=tables)


def database_path(work_dir: str | os.PathLike, seed: int = 0, scale: float = 1.0) -> Path:
    """Where :func:`build_database` puts the database for these arguments (inside ``work_dir``)."""
    return Path(work_dir) / f"bench_retail_v{DB_FORMAT_VERSION}_seed{seed}_scale{scale:g}.sqlite"


def build_database(work_dir: str | os.PathLike, seed: int = 0, scale: float = 1.0) -> Path:
    """Build the retail database with the world's generator (deterministic in ``seed``), or reuse it.

    About 30 MB at ``scale=1``. Written under a temporary name and renamed: an interrupted build leaves no
    half database behind.
    """
    path = database_path(work_dir, seed, scale)
    if path.is_file():
        return path
    spec = retail_spec(scale)
    rows = generate_rows(spec, seed)
    # A sale's lines stored together (as a shop writes them): GROUP BY sale_id reads them in order.
    lines = sorted(rows["sale_line"], key=lambda row: row[4])
    rows["sale_line"] = [(i, *row[1:]) for i, row in enumerate(lines, start=1)]
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    write_database(spec, rows, tmp)
    conn = sqlite3.connect(tmp)
    try:
        conn.executescript(_INDEXES)
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


_LINES = "sale_line AS oi JOIN sale AS o ON o.sale_id = oi.sale_id"
_REVENUE = "SUM(oi.quantity * oi.unit_price_cents)"


def _category_revenue(rng: random.Random) -> Question:
    y = rng.choice(YEARS)
    join = (
        f"FROM {_LINES} JOIN product AS p ON p.product_id = oi.product_id "
        "JOIN category AS c ON c.category_id = p.category_id"
    )
    where = f"WHERE o.sale_date BETWEEN '{y}-01-01' AND '{y}-12-31'"
    return Question(
        template="category_revenue",
        gold=f"SELECT c.name, {_REVENUE} AS revenue {join} {where} GROUP BY c.name",
        rewrites=(
            "SELECT category.name, SUM(sale_line.quantity * sale_line.unit_price_cents) "
            "FROM category, product, sale_line, sale WHERE category.category_id = product.category_id "
            "AND product.product_id = sale_line.product_id AND sale.sale_id = sale_line.sale_id "
            f"AND sale.sale_date >= '{y}-01-01' AND sale.sale_date < '{y + 1}-01-01' GROUP BY category.name",
            "select c.name, sum(oi.unit_price_cents * oi.quantity) from sale o join sale_line oi on "
            "oi.sale_id = o.sale_id join product p on oi.product_id = p.product_id join category c on "
            f"p.category_id = c.category_id where o.sale_date between '{y}-01-01' and '{y}-12-31' group by c.name",
        ),
        wrongs=(
            f"SELECT c.name, SUM(oi.quantity) AS revenue {join} {where} GROUP BY c.name",
            f"SELECT c.name, {_REVENUE} AS revenue {join} "
            f"WHERE o.sale_date BETWEEN '{y}-01-01' AND '{y}-06-30' GROUP BY c.name",
        ),
        errors=(
            f"SELECT c.name, SUM(oi.quantity * oi.unit_price) AS revenue {join} {where} GROUP BY c.name",
            f"SELECT c.name, {_REVENUE} AS revenue {join} {where} GROUP BY c.nme",
        ),
    )


def _top_customers(rng: random.Random) -> Question:
    r, n = rng.randint(1, len(REGIONS)), rng.choice((3, 5, 8))
    sales = "JOIN sale AS o ON o.customer_id = cu.customer_id JOIN sale_line AS oi ON oi.sale_id = o.sale_id"
    body = f"FROM customer AS cu {sales} WHERE cu.region_id = {r} GROUP BY cu.customer_id"
    order = f"ORDER BY spent DESC, cu.customer_id LIMIT {n}"
    return Question(
        template="top_customers",
        gold=f"SELECT cu.customer_id, {_REVENUE} AS spent {body} {order}",
        rewrites=(
            "SELECT customer_id, total FROM (SELECT c.customer_id, SUM(i.quantity * i.unit_price_cents) AS total "
            "FROM customer c JOIN sale o ON o.customer_id = c.customer_id JOIN sale_line i ON i.sale_id = o.sale_id "
            f"WHERE c.region_id = {r} GROUP BY c.customer_id) ORDER BY total DESC, customer_id LIMIT {n}",
            f"SELECT cu.customer_id, {_REVENUE} AS spent FROM customer AS cu JOIN region AS rg ON "
            f"rg.region_id = cu.region_id {sales} WHERE rg.name = '{REGIONS[r - 1]}' GROUP BY cu.customer_id {order}",
        ),
        wrongs=(
            f"SELECT cu.customer_id, {_REVENUE} AS spent {body} {order.replace('DESC', 'ASC')}",
            f"SELECT cu.customer_id, {_REVENUE} AS spent {body} {order.replace(f'LIMIT {n}', f'LIMIT {n + 3}')}",
        ),
        errors=(
            f"SELECT cu.customer_id, {_REVENUE} AS spent {body} {order.replace('LIMIT', 'LIMT')}",
            f"SELECT cu.customer_id, {_REVENUE} AS spent {body.replace('customer AS', 'customers AS')} LIMIT {n}",
        ),
    )


def _store_basket(rng: random.Random) -> Question:
    r = rng.randint(1, len(REGIONS))
    inner = f"(SELECT o.store_id, o.sale_id, COUNT(*) AS lines FROM {_LINES} GROUP BY o.sale_id) AS t"
    return Question(
        template="store_basket",
        gold=f"SELECT s.name, AVG(t.lines) FROM store AS s JOIN {inner} ON t.store_id = s.store_id "
        f"WHERE s.region_id = {r} GROUP BY s.store_id",
        rewrites=(
            "SELECT s.name, CAST(COUNT(*) AS REAL) / COUNT(DISTINCT oi.sale_id) FROM store s JOIN sale o ON "
            f"o.store_id = s.store_id JOIN sale_line oi ON oi.sale_id = o.sale_id WHERE s.region_id = {r} "
            "GROUP BY s.store_id",
            f"SELECT s.name, AVG(t.lines) FROM {inner} JOIN store AS s ON s.store_id = t.store_id JOIN region AS rg "
            f"ON rg.region_id = s.region_id WHERE rg.name = '{REGIONS[r - 1]}' GROUP BY s.name",
        ),
        wrongs=(
            f"SELECT s.name, AVG(t.lines) FROM store AS s JOIN {inner} ON t.store_id = s.store_id GROUP BY s.store_id",
            f"SELECT s.name, COUNT(t.lines) FROM store AS s JOIN {inner} ON t.store_id = s.store_id "
            f"WHERE s.region_id = {r} GROUP BY s.store_id",
        ),
        errors=(
            f"SELECT s.name, AVG(t.line) FROM store AS s JOIN {inner} ON t.store_id = s.store_id "
            f"WHERE s.region_id = {r} GROUP BY s.store_id",
        ),
    )


def _products_never_sold(rng: random.Random) -> Question:
    d, y, q = rng.choice(sorted(DEPARTMENTS)), rng.choice(YEARS), rng.randint(0, 3)
    first, last = f"{y}-{3 * q + 1:02d}", f"{y}-{3 * q + 3:02d}"
    base = "SELECT p.name FROM product AS p JOIN category AS c ON c.category_id = p.category_id"
    sold = (
        f"SELECT oi.product_id FROM {_LINES} WHERE substr(o.sale_date, 1, 7) BETWEEN '{first}' AND '{last}'"
    )
    return Question(
        template="products_never_sold",
        gold=f"{base} WHERE c.department = '{d}' AND p.product_id NOT IN ({sold})",
        rewrites=(
            "SELECT p.name FROM product p JOIN category c ON c.category_id = p.category_id "
            f"WHERE c.department = '{d}' AND NOT EXISTS (SELECT 1 FROM sale_line oi JOIN sale o "
            f"ON o.sale_id = oi.sale_id WHERE oi.product_id = p.product_id AND o.sale_date BETWEEN '{first}-01' "
            f"AND '{last}-31')",
            f"{base} WHERE c.department = '{d}' AND p.product_id NOT IN (SELECT product_id FROM sale_line WHERE "
            f"sale_id IN (SELECT sale_id FROM sale WHERE sale_date BETWEEN '{first}-01' AND '{last}-31'))",
        ),
        wrongs=(
            f"{base} WHERE c.department = '{d}' AND p.product_id IN ({sold})",
            f"{base} WHERE p.product_id NOT IN ({sold})",
        ),
        errors=(f"{base} WHERE c.dept = '{d}' AND p.product_id NOT IN ({sold})",),
    )


def _monthly_revenue(rng: random.Random) -> Question:
    y, ch = rng.choice(YEARS), rng.choice(sorted(set(CHANNELS)))
    value = "oi.quantity * oi.unit_price_cents * (100 - oi.discount_pct)"
    body = (
        f"FROM sale AS o JOIN sale_line AS oi ON oi.sale_id = o.sale_id WHERE o.channel = '{ch}' "
        f"AND o.sale_date >= '{y}-01-01' AND o.sale_date < '{y + 1}-01-01' GROUP BY month"
    )
    return Question(
        template="monthly_revenue",
        gold=f"SELECT strftime('%m', o.sale_date) AS month, SUM({value}) / 100 {body}",
        rewrites=(
            f"SELECT substr(o.sale_date, 6, 2) AS month, SUM({value}) / 100 {body}",
            "SELECT m, SUM(v) / 100 FROM (SELECT substr(sale_date, 6, 2) AS m, "
            "quantity * unit_price_cents * (100 - discount_pct) AS v FROM sale_line JOIN sale "
            f"ON sale.sale_id = sale_line.sale_id WHERE channel = '{ch}' AND sale_date LIKE '{y}%') GROUP BY m",
        ),
        wrongs=(
            f"SELECT strftime('%m', o.sale_date) AS month, {_REVENUE} {body}",
            f"SELECT strftime('%m', o.sale_date) AS month, SUM({value}) / 100 "
            + body.replace(f"o.channel = '{ch}'", f"o.channel <> '{ch}'"),
        ),
        errors=(f"SELECT strftime('%m', o.saledate) AS month, SUM({value}) / 100 {body}",),
    )


def _loyal_customers(rng: random.Random) -> Question:
    seg, k = rng.choice(SEGMENTS), rng.choice((10, 20, 40, 80))
    per_customer = (
        f"SELECT o.customer_id FROM {_LINES} JOIN customer AS cu ON cu.customer_id = o.customer_id "
        f"WHERE cu.segment = '{seg}' GROUP BY o.customer_id"
    )
    return Question(
        template="loyal_customers",
        gold=f"SELECT COUNT(*) FROM ({per_customer} HAVING SUM(oi.quantity) > {k})",
        rewrites=(
            f"SELECT COUNT(*) FROM customer cu WHERE cu.segment = '{seg}' AND (SELECT SUM(oi.quantity) "
            f"FROM {_LINES} WHERE o.customer_id = cu.customer_id) > {k}",
            "SELECT COUNT(*) FROM (SELECT cu.customer_id FROM customer cu JOIN sale o ON o.customer_id = "
            f"cu.customer_id JOIN sale_line oi ON oi.sale_id = o.sale_id WHERE cu.segment = '{seg}' "
            f"GROUP BY cu.customer_id HAVING SUM(oi.quantity) >= {k + 1})",
        ),
        wrongs=(
            f"SELECT COUNT(*) FROM ({per_customer} HAVING SUM(oi.quantity) > {2 * k})",
            f"SELECT COUNT(*) FROM ({per_customer} HAVING COUNT(*) > {k})",
        ),
        errors=(f"SELECT COUNT(*) FROM ({per_customer} HAVING SUM(oi.quantity) > {k}",),
    )


def _brand_discount(rng: random.Random) -> Question:
    d, st = rng.choice(sorted(DEPARTMENTS)), rng.choice(sorted(set(STATUSES)))
    joins = (
        f"FROM {_LINES} JOIN product AS p ON p.product_id = oi.product_id "
        "JOIN category AS c ON c.category_id = p.category_id"
    )
    where = f"WHERE c.department = '{d}' AND o.status = '{st}' GROUP BY p.brand"
    return Question(
        template="brand_discount",
        gold=f"SELECT p.brand, AVG(oi.discount_pct) {joins} {where}",
        rewrites=(
            f"SELECT p.brand, SUM(oi.discount_pct) * 1.0 / COUNT(*) {joins} {where}",
            "SELECT product.brand, AVG(sale_line.discount_pct) FROM sale, sale_line, product, category WHERE "
            "sale.sale_id = sale_line.sale_id AND product.product_id = sale_line.product_id AND "
            f"category.category_id = product.category_id AND category.department = '{d}' AND sale.status = '{st}' "
            "GROUP BY product.brand",
        ),
        wrongs=(
            f"SELECT p.brand, MAX(oi.discount_pct) {joins} {where}",
            f"SELECT p.brand, AVG(oi.discount_pct) {joins} WHERE c.department = '{d}' GROUP BY p.brand",
        ),
        errors=(f"SELECT p.brandname, AVG(oi.discount_pct) {joins} {where}",),
    )


def _region_channel(rng: random.Random) -> Question:
    y = rng.choice(YEARS)
    joins = (
        "FROM sale AS o JOIN customer AS cu ON cu.customer_id = o.customer_id "
        "JOIN region AS r ON r.region_id = cu.region_id"
    )
    year = f"o.sale_date LIKE '{y}-%'"
    return Question(
        template="region_channel",
        gold=f"SELECT r.name, o.channel, COUNT(*) {joins} WHERE {year} GROUP BY r.name, o.channel",
        rewrites=(
            f"SELECT r.name, o.channel, COUNT(o.sale_id) {joins} WHERE substr(o.sale_date, 1, 4) = '{y}' "
            "GROUP BY o.channel, r.name",
            "SELECT region.name, sale.channel, COUNT(*) FROM region, customer, sale WHERE customer.region_id = "
            "region.region_id AND sale.customer_id = customer.customer_id AND sale.sale_date "
            f"BETWEEN '{y}-01-01' AND '{y}-12-31' GROUP BY region.name, sale.channel",
        ),
        wrongs=(
            "SELECT r.name, o.channel, COUNT(*) FROM sale AS o JOIN store AS s ON s.store_id = o.store_id JOIN "
            f"region AS r ON r.region_id = s.region_id WHERE {year} GROUP BY r.name, o.channel",
            f"SELECT r.name, o.channel, COUNT(DISTINCT cu.customer_id) {joins} WHERE {year} GROUP BY r.name, o.channel",
        ),
        errors=(  # region_id is ambiguous: customer's and region's
            "SELECT region_id, channel, COUNT(*) FROM sale JOIN customer ON customer.customer_id = sale.customer_id "
            f"JOIN region ON region.region_id = customer.region_id WHERE sale_date LIKE '{y}-%' "
            "GROUP BY region_id, channel",
        ),
    )


def _big_sales(rng: random.Random) -> Question:
    t = rng.choice((25_000, 50_000, 75_000, 100_000, 150_000, 200_000, 300_000, 400_000))
    big = f"SELECT oi.sale_id FROM sale_line AS oi GROUP BY oi.sale_id HAVING {_REVENUE} > {t}"
    return Question(
        template="big_sales",
        gold=f"SELECT o.status, COUNT(*) FROM sale AS o WHERE o.sale_id IN ({big}) GROUP BY o.status",
        rewrites=(
            "SELECT status, COUNT(*) FROM (SELECT o.sale_id, o.status FROM sale o JOIN sale_line oi ON "
            f"oi.sale_id = o.sale_id GROUP BY o.sale_id HAVING {_REVENUE} > {t}) GROUP BY status",
            "WITH totals AS (SELECT sale_id, SUM(unit_price_cents * quantity) AS total FROM sale_line GROUP BY "
            f"sale_id) SELECT o.status, COUNT(*) FROM sale o WHERE o.sale_id IN (SELECT sale_id FROM totals "
            f"WHERE total > {t}) GROUP BY o.status",
        ),
        wrongs=(
            "SELECT o.status, COUNT(*) FROM sale AS o WHERE o.sale_id IN (SELECT oi.sale_id FROM sale_line AS oi "
            f"GROUP BY oi.sale_id HAVING SUM(oi.quantity) > {t // 10_000}) GROUP BY o.status",
            f"SELECT o.status, COUNT(DISTINCT o.customer_id) FROM sale AS o WHERE o.sale_id IN ({big}) "
            "GROUP BY o.status",
        ),
        errors=(
            "SELECT o.status, COUNT(*) FROM sale AS o WHERE o.sale_id IN ("
            + big.replace("unit_price_cents", "unit_price")
            + ") GROUP BY o.status",
        ),
    )


def _repeat_buyers(rng: random.Random) -> Question:
    y = rng.choice(YEARS)
    between = f"o.sale_date BETWEEN '{y}-01-01' AND '{y}-12-31'"
    after = f"o.sale_date >= '{y}-01-01' AND o.sale_date <= '{y}-12-31'"
    rep = (
        f"SELECT o.customer_id, oi.product_id FROM {_LINES} WHERE {between} "
        "GROUP BY o.customer_id, oi.product_id HAVING COUNT(DISTINCT o.sale_id) >= 2"
    )
    tail = "JOIN customer AS cu ON cu.customer_id = rep.customer_id GROUP BY cu.segment"
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
            f"SELECT cu.segment, COUNT(*) FROM ({rep.replace('DISTINCT o.sale_id', 'DISTINCT o.sale_ids')}) "
            f"AS rep {tail}",
        ),
    )


TEMPLATES: tuple[Callable[[random.Random], Question], ...] = (
    _category_revenue,
    _top_customers,
    _store_basket,
    _products_never_sold,
    _monthly_revenue,
    _loyal_customers,
    _brand_discount,
    _region_channel,
    _big_sales,
    _repeat_buyers,
)
"""The heavy joins of the default load (50-600 ms each at scale 1)."""

RUNAWAY_SQL = (
    "SELECT COUNT(*) FROM sale_line AS a, sale_line AS b, sale_line AS c "
    "WHERE a.quantity + b.quantity + c.quantity > 0"
)
"""A triple self-join of ``sale_line``: ~10^16 combinations to count at scale 1, ~10^11 at scale 0.02."""


def _store_channels(rng: random.Random) -> Question:
    s = rng.randint(1, _MIN_ROWS["store"])
    body = f"FROM sale AS o WHERE o.store_id = {s}"
    return Question(
        template="store_channels",
        gold=f"SELECT o.channel, COUNT(*) {body} GROUP BY o.channel",
        rewrites=(f"SELECT channel, COUNT(sale_id) FROM sale WHERE store_id = {s} GROUP BY channel",),
        wrongs=(f"SELECT o.channel, COUNT(*) {body} AND o.status = 'delivered' GROUP BY o.channel",),
        errors=(f"SELECT o.channel, COUNT(*) FROM sale AS o WHERE o.store = {s} GROUP BY o.channel",),
    )


def _product_category(rng: random.Random) -> Question:
    k = rng.randint(1, _MIN_ROWS["product"])
    join = "FROM product AS p JOIN category AS c ON c.category_id = p.category_id"
    return Question(
        template="product_category",
        gold=f"SELECT p.name, c.name, c.department {join} WHERE p.product_id = {k}",
        rewrites=(
            "SELECT product.name, category.name, category.department FROM product, category "
            f"WHERE category.category_id = product.category_id AND product.product_id = {k}",
        ),
        wrongs=(f"SELECT p.name, c.name, c.department {join} WHERE p.product_id = {k % 40 + 1}",),
        errors=(f"SELECT p.name, c.nam, c.department {join} WHERE p.product_id = {k}",),
    )


LOOKUPS: tuple[Callable[[random.Random], Question], ...] = (_store_channels, _product_category)
"""The long-tail load's cheap questions: indexed lookups of a few milliseconds."""
LONGTAIL_HEAVY_EVERY = 12  # one question in 12 of the long-tail load is a heavy join of the default load
LONGTAIL_TIMEOUT_S = 2.0  # the long-tail load's deadline: its op budget must stop the runaway before it


RUNAWAY_FAMILIES = (
    "SELECT COUNT(*) FROM sale_line AS a, sale_line AS b, sale_line AS c WHERE a.quantity + b.quantity > {k}",
    "WITH RECURSIVE r(i) AS (SELECT {k} UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r",
    "WITH RECURSIVE r(i) AS (SELECT {k} UNION ALL SELECT i + 1 FROM r) SELECT i FROM r ORDER BY i DESC LIMIT 1",
    "SELECT count(*) FROM sale_line AS a, sale_line AS b WHERE length(printf('%*d', 3000000, a.quantity + {k})) > 0",
    "SELECT a.sale_line_id FROM sale_line AS a, sale_line AS b ORDER BY a.quantity * b.quantity + {k} LIMIT 1",
    "SELECT count(*) FROM (SELECT group_concat(b.quantity) FROM sale_line AS a, sale_line AS b "
    "WHERE a.quantity > -{k} GROUP BY a.sale_line_id)",
)
"""Runaways of the kinds models write (a cross join, unbounded recursion, a spilling sort, a heavy function per
row, group_concat over a cross join); ``{k}`` makes each statement distinct."""
RUNAWAY_SHARE = 0.05  # the runaway load: this share of the distinct statements run away
RUNAWAY_TIMEOUT_S = 2.0  # ... and its time limit (CPU seconds in the sandbox, wall clock in path (a))


def with_runaways(load: Load, share: float = RUNAWAY_SHARE, seed: int = 0) -> Load:
    """``load`` with seeded non-identical samples replaced by distinct runaways (cycling through
    :data:`RUNAWAY_FAMILIES`) until about ``share`` of its distinct statements run away."""
    n = max(1, round(share * len(load.distinct_requests())))
    rng = random.Random(f"runaways-{seed}")
    candidates = [i for i, s in enumerate(load.samples) if s.kind in ("rewrite", "wrong", "error")]
    samples = list(load.samples)
    for k, i in enumerate(sorted(rng.sample(candidates, min(n, len(candidates))))):
        sql = RUNAWAY_FAMILIES[k % len(RUNAWAY_FAMILIES)].format(k=k + 1)
        samples[i] = Sample(samples[i].question, "runaway", sql)
    return Load(load.db_path, load.questions, samples)


def make_questions(n: int, seed: int = 0, templates: Sequence[Callable] = TEMPLATES) -> list[Question]:
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
    """``questions`` x ``samples`` predictions, shuffled within a question.

    Default: half identical to the gold, the rest cycling through rewrite, wrong, rewrite, error (question
    ``i`` starts the cycle at ``i``, so small loads hold every kind); with ``runaway`` one non-identical
    sample of a seeded question is :data:`RUNAWAY_SQL`. ``longtail``: :data:`LOOKUPS`, one question in
    :data:`LONGTAIL_HEAVY_EVERY` a heavy join; all samples but one identical; the runaway in the last question.
    """
    if questions < 1 or samples < 2:
        raise ValueError(f"need at least 1 question and 2 samples, got {questions} x {samples}")
    rng = random.Random(f"load-{seed}")
    if longtail:
        heavy = iter(make_questions(-(-questions // LONGTAIL_HEAVY_EVERY), seed))
        light = iter(make_questions(questions, seed, LOOKUPS))
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
