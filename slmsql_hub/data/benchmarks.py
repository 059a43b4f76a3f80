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

``limit`` takes a deterministic, seeded subset (the same ``limit`` and ``seed`` always give the same questions,
kept in file order): the study evaluated 149 BIRD and 200 Spider questions this way.

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
    """Indices of a deterministic subset of ``range(n)``: ``limit`` of them drawn with ``seed``, in order.

    Two draws with one seed often nest (``random.sample``'s first picks do not depend on ``limit`` while it
    keeps one method), so a subset is held out from another tool's only when that tool's questions are left
    out first: see :mod:`slmsql_hub.data.sft_record`.

    Args:
        n: how many items there are.
        limit: how many to keep (``None`` or ``>= n``: all).
        seed: the draw's seed.

    Returns:
        Sorted indices.

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
    records: list[dict],
    *,
    name: str,
    db_dir: Path,
    limit: int | None,
    seed: int,
    skip_missing_db: bool,
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


def load_spider(
    root: str | os.PathLike,
    split: str = "dev",
    *,
    limit: int | None = None,
    seed: int = 0,
    skip_missing_db: bool = False,
) -> datasets.Dataset:
    """Spider (``dev`` or ``train``) as a benchmark dataset; ``difficulty`` is the official hardness of the gold.

    Args:
        root: the Spider folder (``dev.json``, ``database/`` or ``databases/``).
        split: ``dev`` (``dev.json``) or ``train`` (``train_spider.json`` and, if present, ``train_others.json``).
        limit: keep a seeded subset of this many questions.
        seed: the subset's seed.
        skip_missing_db: drop questions whose database file is missing (logged with a count) instead of
            raising.

    Returns:
        The dataset (:data:`BENCHMARK_COLUMNS`).

    Raises:
        UsageError: a missing or malformed JSON file, a question without its fields, or (without
            ``skip_missing_db``) questions whose database file is missing.

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
        for index, item in enumerate(_read_json_list(path)):
            records.append(
                {
                    "question_id": f"spider-{split}-{len(records)}",
                    "question": _field(item, "question", path, index),
                    "evidence": "",
                    "db_id": _field(item, "db_id", path, index),
                    "gold_sql": _field(item, "query", path, index),
                    "benchmark": "spider",
                }
            )
    db_dir = base / "database"
    if not db_dir.is_dir() and (base / "databases").is_dir():
        db_dir = base / "databases"  # the embedded world's folder name
    return _finish(
        records,
        name="spider",
        db_dir=db_dir,
        limit=limit,
        seed=seed,
        skip_missing_db=skip_missing_db,
    )


def load_bird(
    root: str | os.PathLike,
    split: str = "dev",
    *,
    limit: int | None = None,
    seed: int = 0,
    skip_missing_db: bool = False,
) -> datasets.Dataset:
    """BIRD (``<split>.json`` + ``<split>_databases/``) as a benchmark dataset, with its evidence and difficulty.

    Args:
        root: the BIRD folder: the release's (``train/``, ``dev/``) or one split's (``dev.json``, ...).
        split: ``dev`` or ``train`` (any ``<split>.json`` with ``<split>_databases/`` beside it, in ``root`` or
            in ``root/<split>``).
        limit: keep a seeded subset of this many questions (the study: 149).
        seed: the subset's seed.
        skip_missing_db: drop questions whose database file is missing instead of raising.

    Returns:
        The dataset (:data:`BENCHMARK_COLUMNS`).

    Raises:
        UsageError: a missing or malformed JSON file, a question without its fields, or missing databases.

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
    path = base / f"{split}.json"
    records = []
    for index, item in enumerate(_read_json_list(path)):
        records.append(
            {
                "question_id": f"bird-{split}-{item.get('question_id', index)}",
                "question": _field(item, "question", path, index),
                "evidence": str(item.get("evidence") or ""),
                "db_id": _field(item, "db_id", path, index),
                "gold_sql": _field(item, "SQL", path, index),
                "difficulty": str(item.get("difficulty") or ""),
                "benchmark": "bird",
            }
        )
    return _finish(
        records,
        name="bird",
        db_dir=base / f"{split}_databases",
        limit=limit,
        seed=seed,
        skip_missing_db=skip_missing_db,
    )


def load_synsql(
    root: str | os.PathLike,
    split: str = "train",
    *,
    limit: int | None = None,
    seed: int = 0,
    skip_missing_db: bool = False,
) -> datasets.Dataset:
    """SynSQL-2.5M (``data.json`` + ``databases/``) as a benchmark dataset.

    ``evidence`` is the question's ``external_knowledge`` and ``difficulty`` its ``sql_complexity``. The
    whole ``data.json`` is read into memory (the full release is several GB: point ``root`` at a shard for
    quick runs).

    Args:
        root: the SynSQL folder.
        split: only ``train`` (the release has one split).
        limit: keep a seeded subset of this many questions.
        seed: the subset's seed.
        skip_missing_db: drop questions whose database file is missing instead of raising.

    Returns:
        The dataset (:data:`BENCHMARK_COLUMNS`).

    Raises:
        UsageError: a missing or malformed JSON file, a question without its fields, or missing databases.

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
    path = base / "data.json"
    records = []
    for index, item in enumerate(_read_json_list(path)):
        records.append(
            {
                "question_id": f"synsql-{index}",
                "question": _field(item, "question", path, index),
                "evidence": str(item.get("external_knowledge") or ""),
                "db_id": _field(item, "db_id", path, index),
                "gold_sql": _field(item, "sql", path, index),
                "difficulty": str(item.get("sql_complexity") or ""),
                "benchmark": "synsql",
            }
        )
    return _finish(
        records,
        name="synsql",
        db_dir=base / "databases",
        limit=limit,
        seed=seed,
        skip_missing_db=skip_missing_db,
    )


def load_world(
    root: str | os.PathLike,
    split: str = "dev",
    *,
    limit: int | None = None,
    seed: int = 0,
    skip_missing_db: bool = False,
) -> datasets.Dataset:
    """A split of an embedded world built by :func:`~slmsql_hub.data.world.build_world`.

    ``db_path`` is re-pointed at ``<root>/databases``, so a world folder can be moved or copied.

    Args:
        root: the world folder (``world.json``, ``datasets/``, ``databases/``).
        split: ``foundation``, ``grounding``, ``rl_pool``, ``dev`` or ``test``.
        limit: keep a seeded subset of this many questions.
        seed: the subset's seed.
        skip_missing_db: drop questions whose database file is missing instead of raising.

    Returns:
        The dataset (:data:`BENCHMARK_COLUMNS`).

    Raises:
        UsageError: the folder is not a built world, or the split does not exist.
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
    return _finish(
        records,
        name="world",
        db_dir=base / "databases",
        limit=limit,
        seed=seed,
        skip_missing_db=skip_missing_db,
    )


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
    """Load one benchmark split as a dataset with :data:`BENCHMARK_COLUMNS`.

    Args:
        name: ``spider``, ``bird``, ``synsql`` or ``world``.
        root: the benchmark's folder.
        split: the split (default: ``train`` for SynSQL, ``dev`` otherwise).
        limit: keep a deterministic seeded subset of this many questions.
        seed: the subset's seed.
        skip_missing_db: drop questions whose database file is missing (logged) instead of raising.

    Returns:
        The dataset.

    Raises:
        UsageError: an unknown benchmark name or any loader error.

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
