"""Benchmark loaders: Spider, BIRD, SynSQL-2.5M and the embedded world, all as one ``datasets.Dataset`` shape.

Every loader returns the same columns (all strings):

- ``question_id``: unique within the benchmark split,
- ``question``, ``evidence`` (BIRD's / SynSQL's external knowledge, ``""`` otherwise),
- ``db_id``, ``db_path`` (absolute path of the SQLite file),
- ``gold_sql``,
- ``difficulty``: BIRD's label (simple / moderate / challenging), SynSQL's ``sql_complexity``, Spider's
  hardness (easy / medium / hard / extra, computed from the gold; ``""`` where it does not parse), the world's
  label,
- ``benchmark``: ``spider``, ``bird``, ``synsql`` or ``world``.

Every loader takes ``(root, split, *, limit, seed, skip_missing_db)``. ``limit`` takes a deterministic, seeded
subset (the same ``limit`` and ``seed`` always give the same questions, kept in file order): the study evaluated
149 BIRD and 200 Spider questions this way. A question whose database file is missing raises
:class:`~slmsql_hub.errors.UsageError`, or with ``skip_missing_db`` is dropped (logged with a count); so do a
missing or malformed JSON file and a question without its fields (one line each).

Layouts read:

- Spider: ``<root>/dev.json`` (``train``: ``train_spider.json`` + ``train_others.json``),
  ``<root>/database/<db>/<db>.sqlite`` (or ``databases/``, as the world names it); fields ``question``,
  ``query``, ``db_id``.
- BIRD: ``<root>/<split>.json`` and ``<root>/<split>_databases/<db>/<db>.sqlite``, or the release's layout
  ``<root>/<split>/<split>.json`` and ``<root>/<split>/<split>_databases/`` (one root serves train and dev);
  fields ``question_id``, ``question``, ``evidence``, ``SQL``, ``db_id``, ``difficulty``.
- SynSQL-2.5M: ``<root>/data.json`` and ``<root>/databases/<db>/<db>.sqlite``; fields ``question``, ``sql``,
  ``db_id``, ``external_knowledge``, ``sql_complexity``.
- The world: ``<root>/datasets/<split>`` (``save_to_disk``) and ``<root>/databases/<db>/<db>.sqlite``.
"""

from __future__ import annotations

import json
import logging
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:
    import datasets

logger = logging.getLogger(__name__)

BENCHMARK_COLUMNS: tuple[str, ...] = (
    "question_id",
    "question",
    "evidence",
    "db_id",
    "db_path",
    "gold_sql",
    "difficulty",
    "benchmark",
)
"""The columns every loader returns, in order."""

BENCHMARKS: tuple[str, ...] = ("spider", "bird", "synsql", "world")
"""The names :func:`load_benchmark` accepts."""


def benchmark_features() -> datasets.Features:
    """The ``datasets.Features`` of every benchmark dataset: :data:`BENCHMARK_COLUMNS`, all strings.

    Example:

    ```python
    >>> from slmsql_hub.data.benchmarks import benchmark_features
    >>> list(benchmark_features())[:3]
    ['question_id', 'question', 'evidence']

    ```
    """
    import datasets

    return datasets.Features({name: datasets.Value("string") for name in BENCHMARK_COLUMNS})


def seeded_subset(n: int, limit: int | None, seed: int = 0) -> list[int]:
    """Sorted indices of ``limit`` items of ``range(n)`` drawn with ``seed`` (all of them if ``limit`` is ``None``
    or ``>= n``). Two draws with one seed often nest: see :mod:`slmsql_hub.data.sft_record` for holding out.

    Example:

    ```python
    >>> from slmsql_hub.data.benchmarks import seeded_subset
    >>> seeded_subset(10, 3, seed=0) == seeded_subset(10, 3, seed=0)
    True
    >>> seeded_subset(4, None)
    [0, 1, 2, 3]

    ```
    """
    if limit is None or limit >= n:
        return list(range(n))
    if limit < 0:
        raise UsageError(f"limit must be >= 0, got {limit}")
    return sorted(random.Random(f"slmsql-subset:{seed}").sample(range(n), limit))


def _read_json_list(path: Path) -> list[dict]:
    if not path.is_file():
        raise UsageError(f"benchmark file not found: {path}")
    try:
        with path.open(encoding="utf-8") as handle:
            data = json.load(handle)
    except json.JSONDecodeError as err:
        raise UsageError(
            f"malformed JSON in {path}: {err.msg} at line {err.lineno} column {err.colno}"
        ) from None
    except UnicodeDecodeError as err:
        raise UsageError(f"{path} is not UTF-8 text: {err.reason} at byte {err.start}") from None
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise UsageError(f"{path} must hold a JSON list of objects (one per question)")
    return data


def _field(item: dict, name: str, path: Path, index: int) -> str:
    value = item.get(name)
    if value is None:
        raise UsageError(f"{path}: question {index} has no {name!r} field")
    return str(value)


def _spider_difficulty(sql: str) -> str:
    from ..sql.hardness import spider_hardness

    try:
        return spider_hardness(sql)
    except ValueError:
        return ""


def _finish(
    records: list[dict], name: str, db_dir: Path, limit: int | None, seed: int, skip_missing_db: bool
) -> datasets.Dataset:
    """Check database files, drop or refuse questions on missing ones, take the seeded subset, build the Dataset."""
    import datasets

    present: dict[str, bool] = {}
    resolved: dict[str, str] = {}  # one path resolution per database, not per question (SynSQL has millions)
    for record in records:
        db_id = record["db_id"]
        if db_id not in present:
            path = db_dir / db_id / f"{db_id}.sqlite"
            present[db_id] = path.is_file()
            resolved[db_id] = str(path.resolve())
        record["db_path"] = resolved[db_id]
    missing = sorted(db for db, ok in present.items() if not ok)
    if missing:
        n_missing = sum(1 for r in records if r["db_id"] in missing)
        shown = ", ".join(str(db_dir / db / f"{db}.sqlite") for db in missing[:3])
        if not skip_missing_db:
            raise UsageError(
                f"{name}: {n_missing} questions use missing database files ({shown}"
                f"{', ...' if len(missing) > 3 else ''}); add the files or pass skip_missing_db=True"
            )
        logger.warning(
            "%s: skipping %d of %d questions whose database file is missing: %s",
            name,
            n_missing,
            len(records),
            ", ".join(missing),
        )
        records = [r for r in records if r["db_id"] not in missing]
    records = [records[i] for i in seeded_subset(len(records), limit, seed)]
    if name == "spider":
        for record in records:
            record["difficulty"] = _spider_difficulty(record["gold_sql"])
    columns = {column: [str(r.get(column, "")) for r in records] for column in BENCHMARK_COLUMNS}
    logger.info("%s: %d questions over %d databases", name, len(records), len({r["db_id"] for r in records}))
    return datasets.Dataset.from_dict(columns, features=benchmark_features())


def _root(root: str | os.PathLike, name: str) -> Path:
    path = Path(root).expanduser()
    if not path.is_dir():
        raise UsageError(f"{name} root is not a directory: {path}")
    return path


def _questions(
    path: Path,
    benchmark: str,
    question_id: Callable[[int, dict], str],
    *,
    gold: str,
    evidence: str | None = None,
    difficulty: str | None = None,
) -> list[dict]:
    """One record per question of a JSON release file; ``gold``, ``evidence``, ``difficulty`` name its fields."""
    records = []
    for index, item in enumerate(_read_json_list(path)):
        records.append(
            {
                "question_id": question_id(index, item),
                "question": _field(item, "question", path, index),
                "evidence": str(item.get(evidence) or "") if evidence else "",
                "db_id": _field(item, "db_id", path, index),
                "gold_sql": _field(item, gold, path, index),
                "difficulty": str(item.get(difficulty) or "") if difficulty else "",
                "benchmark": benchmark,
            }
        )
    return records


def load_spider(
    root: str | os.PathLike,
    split: str = "dev",
    *,
    limit: int | None = None,
    seed: int = 0,
    skip_missing_db: bool = False,
) -> datasets.Dataset:
    """Spider ``dev`` or ``train`` (layout and fields: module docstring).

    Example:

    ```python
    >>> import json, sqlite3, tempfile, pathlib
    >>> from slmsql_hub.data.benchmarks import load_spider
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> (root / "database" / "pets").mkdir(parents=True)
    >>> sqlite3.connect(root / "database" / "pets" / "pets.sqlite").close()
    >>> q = {"db_id": "pets", "question": "How many pets?", "query": "SELECT count(*) FROM pet"}
    >>> _ = (root / "dev.json").write_text(json.dumps([q]))
    >>> row = load_spider(root)[0]
    >>> row["gold_sql"], row["difficulty"], row["benchmark"]
    ('SELECT count(*) FROM pet', 'easy', 'spider')

    ```
    """
    base = _root(root, "spider")
    files = {"dev": ["dev.json"], "train": ["train_spider.json", "train_others.json"]}.get(split)
    if files is None:
        raise UsageError(f"spider split must be 'dev' or 'train', got {split!r}")
    records: list[dict] = []
    for n, filename in enumerate(files):
        path = base / filename
        if n > 0 and not path.exists():
            continue
        offset = len(records)
        records += _questions(
            path, "spider", lambda index, _, offset=offset: f"spider-{split}-{offset + index}", gold="query"
        )
    db_dir = base / "database"
    if not db_dir.is_dir() and (base / "databases").is_dir():
        db_dir = base / "databases"  # the embedded world's folder name
    return _finish(records, "spider", db_dir, limit, seed, skip_missing_db)


def load_bird(
    root: str | os.PathLike,
    split: str = "dev",
    *,
    limit: int | None = None,
    seed: int = 0,
    skip_missing_db: bool = False,
) -> datasets.Dataset:
    """BIRD's ``split``, in ``root`` or ``root/<split>`` (module docstring).

    Example:

    ```python
    >>> import json, sqlite3, tempfile, pathlib
    >>> from slmsql_hub.data.benchmarks import load_bird
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> (root / "dev_databases" / "shop").mkdir(parents=True)
    >>> sqlite3.connect(root / "dev_databases" / "shop" / "shop.sqlite").close()
    >>> q = {"question_id": 7, "db_id": "shop", "question": "Cheap items?", "evidence": "cheap: price < 5",
    ...      "SQL": "SELECT name FROM item WHERE price < 5", "difficulty": "simple"}
    >>> _ = (root / "dev.json").write_text(json.dumps([q]))
    >>> row = load_bird(root)[0]
    >>> row["question_id"], row["evidence"], row["difficulty"]
    ('bird-dev-7', 'cheap: price < 5', 'simple')

    ```
    """
    base = _root(root, "bird")
    if not (base / f"{split}.json").is_file() and (base / split / f"{split}.json").is_file():
        base = base / split  # the release's layout: <root>/train/train.json, <root>/dev/dev.json
    records = _questions(
        base / f"{split}.json",
        "bird",
        lambda index, item: f"bird-{split}-{item.get('question_id', index)}",
        gold="SQL",
        evidence="evidence",
        difficulty="difficulty",
    )
    return _finish(records, "bird", base / f"{split}_databases", limit, seed, skip_missing_db)


def load_synsql(
    root: str | os.PathLike,
    split: str = "train",
    *,
    limit: int | None = None,
    seed: int = 0,
    skip_missing_db: bool = False,
) -> datasets.Dataset:
    """SynSQL-2.5M (one split, ``train``), read whole into memory: the full release is several GB, so point
    ``root`` at a shard for quick runs.

    Example:

    ```python
    >>> import json, sqlite3, tempfile, pathlib
    >>> from slmsql_hub.data.benchmarks import load_synsql
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> (root / "databases" / "farm").mkdir(parents=True)
    >>> sqlite3.connect(root / "databases" / "farm" / "farm.sqlite").close()
    >>> q = {"db_id": "farm", "question": "All cows?", "sql": "SELECT * FROM cow",
    ...      "external_knowledge": "", "sql_complexity": "Simple"}
    >>> _ = (root / "data.json").write_text(json.dumps([q]))
    >>> row = load_synsql(root)[0]
    >>> row["question_id"], row["difficulty"], row["benchmark"]
    ('synsql-0', 'Simple', 'synsql')

    ```
    """
    if split != "train":
        raise UsageError(f"SynSQL-2.5M has one split, 'train'; got {split!r}")
    base = _root(root, "synsql")
    records = _questions(
        base / "data.json",
        "synsql",
        lambda index, _: f"synsql-{index}",
        gold="sql",
        evidence="external_knowledge",
        difficulty="sql_complexity",
    )
    return _finish(records, "synsql", base / "databases", limit, seed, skip_missing_db)


def load_world(
    root: str | os.PathLike,
    split: str = "dev",
    *,
    limit: int | None = None,
    seed: int = 0,
    skip_missing_db: bool = False,
) -> datasets.Dataset:
    """A split (``foundation``, ``grounding``, ``rl_pool``, ``dev``, ``test``) of a world built by
    :func:`~slmsql_hub.world.build_world`; ``db_path`` points into ``<root>/databases``, so the folder can move.
    A folder without ``world.json`` or without the split is a ``UsageError``.
    """
    import datasets

    base = _root(root, "world")
    split_dir = base / "datasets" / split
    if not (base / "world.json").is_file():
        raise UsageError(
            f"{base} is not an embedded world (no world.json); build one with `slmsql world build`"
        )
    if not split_dir.is_dir():
        available = sorted(p.name for p in (base / "datasets").glob("*") if p.is_dir())
        raise UsageError(f"world split {split!r} not found under {base / 'datasets'}; available: {available}")
    stored = datasets.load_from_disk(str(split_dir))
    records = [{column: row[column] for column in BENCHMARK_COLUMNS} for row in stored]
    return _finish(records, "world", base / "databases", limit, seed, skip_missing_db)


_LOADERS = {"spider": load_spider, "bird": load_bird, "synsql": load_synsql, "world": load_world}


def load_benchmark(
    name: str,
    root: str | os.PathLike,
    split: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    *,
    skip_missing_db: bool = False,
) -> datasets.Dataset:
    """Load split ``split`` of benchmark ``name`` (default split: ``train`` for SynSQL, ``dev`` otherwise).

    Example:

    ```python
    >>> from slmsql_hub.data.benchmarks import load_benchmark
    >>> load_benchmark("wikisql", ".")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: unknown benchmark 'wikisql'; choose one of spider, bird, synsql, world

    ```
    """
    loader = _LOADERS.get(name.lower())
    if loader is None:
        raise UsageError(f"unknown benchmark {name!r}; choose one of {', '.join(BENCHMARKS)}")
    if split is None:
        split = "train" if name.lower() == "synsql" else "dev"
    return loader(root, split, limit=limit, seed=seed, skip_missing_db=skip_missing_db)
