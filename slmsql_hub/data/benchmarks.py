"""The benchmark registry and its loaders: Spider, BIRD, BIRD mini-dev, SynSQL-2.5M and the embedded world, all
as one ``datasets.Dataset`` shape.

Everything the toolkit knows about a benchmark is its :class:`Benchmark` entry (reader, splits, default split,
compare mode, breakdown, licence, Hub dataset id, root option); :data:`REGISTRY` holds them by name and every
consumer (recipes, ``slmsql eval``, the Inspect tasks, the band's card) reads it through :func:`get_benchmark`.
Adding a benchmark is one entry plus its reader: :func:`register_benchmark` from your module, or a dotted path
``mypkg.bench:ENTRY`` wherever a benchmark name is accepted (imported and registered on first use).

Every loader returns :data:`BENCHMARK_COLUMNS`, all strings: ``question_id`` (unique within the split),
``question``, ``evidence`` (BIRD's / SynSQL's external knowledge, ``""`` otherwise), ``db_id``, ``db_path``
(absolute path of the SQLite file), ``gold_sql``, ``difficulty`` (BIRD's label, SynSQL's ``sql_complexity``,
Spider's hardness computed from the gold, ``""`` where it does not parse, the world's label) and ``benchmark``.

:func:`load_benchmark` takes ``(name, root, split, limit, seed, *, skip_missing_db)``; ``load_spider``,
``load_bird``, ``load_synsql`` and ``load_world`` are it with the name given. ``limit`` takes a deterministic,
seeded subset kept in file order (the study evaluated 149 BIRD and 200 Spider questions this way). A question
whose database file is missing raises :class:`~slmsql_hub.errors.UsageError`, or with ``skip_missing_db`` is
dropped (logged with a count); so do a missing or malformed JSON file and a question without its fields.

Layouts read:

- Spider: ``<root>/dev.json`` (``train``: ``train_spider.json`` + ``train_others.json``),
  ``<root>/database/<db>/<db>.sqlite`` (or ``databases/``, as the world names it); fields ``question``,
  ``query``, ``db_id``.
- BIRD: ``<root>/<split>.json`` and ``<root>/<split>_databases/<db>/<db>.sqlite``, or the release's layout
  ``<root>/<split>/<split>.json`` and ``<root>/<split>/<split>_databases/`` (one root serves train and dev);
  fields ``question_id``, ``question``, ``evidence``, ``SQL``, ``db_id``, ``difficulty``.
- BIRD mini-dev (``bird_mini_dev``, one split ``dev``): the release's ``<root>/mini_dev_sqlite.json`` (500
  questions; or ``<root>/MINIDEV/`` as the zip unpacks) and ``<root>/dev_databases/<db>/<db>.sqlite``; fields as
  BIRD's. Scored with BIRD's official EX rule (``set(pred_rows) == set(gold_rows)``: compare mode ``bird``);
  its soft-F1 and R-VES are out of scope.
- SynSQL-2.5M (one split, ``train``, read whole into memory: point ``root`` at a shard for quick runs):
  ``<root>/data.json`` and ``<root>/databases/<db>/<db>.sqlite``; fields ``question``, ``sql``, ``db_id``,
  ``external_knowledge``, ``sql_complexity``.
- The world (:func:`~slmsql_hub.world.build_world`): ``<root>/datasets/<split>`` (``save_to_disk``; splits
  ``foundation``, ``grounding``, ``rl_pool``, ``dev``, ``test``) and ``<root>/databases/<db>/<db>.sqlite``;
  ``db_path`` points into ``<root>/databases``, so the folder can move.

Example:

```python
>>> import json, sqlite3, tempfile, pathlib
>>> def release(db_folder, db, file, question):
...     root = pathlib.Path(tempfile.mkdtemp())
...     (root / db_folder / db).mkdir(parents=True)
...     sqlite3.connect(root / db_folder / db / f"{db}.sqlite").close()
...     _ = (root / file).write_text(json.dumps([question]))
...     return root
>>> spider = release("database", "pets", "dev.json",
...                  {"db_id": "pets", "question": "How many pets?", "query": "SELECT count(*) FROM pet"})
>>> row = load_spider(spider)[0]
>>> row["gold_sql"], row["difficulty"], row["benchmark"]
('SELECT count(*) FROM pet', 'easy', 'spider')
>>> bird = release("dev_databases", "shop", "dev.json",
...                {"question_id": 7, "db_id": "shop", "question": "Cheap items?", "evidence": "cheap: price < 5",
...                 "SQL": "SELECT name FROM item WHERE price < 5", "difficulty": "simple"})
>>> row = load_bird(bird)[0]
>>> row["question_id"], row["evidence"], row["difficulty"]
('bird-dev-7', 'cheap: price < 5', 'simple')
>>> synsql = release("databases", "farm", "data.json", {"db_id": "farm", "question": "All cows?",
...                  "sql": "SELECT * FROM cow", "external_knowledge": "", "sql_complexity": "Simple"})
>>> row = load_synsql(synsql)[0]
>>> row["question_id"], row["difficulty"], row["benchmark"]
('synsql-0', 'Simple', 'synsql')

```
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..run.artifacts import load_saved_dataset
from ..run.layout import WORLD_MANIFEST
from ..sql.compare import CompareMode

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

Reader = Callable[[Path, str], "tuple[list[dict], Path]"]
"""``read(root, split) -> (records, db_dir)``: one dict per question with the columns above but ``db_path``, and
the folder holding ``<db_id>/<db_id>.sqlite``. ``root`` is an existing directory; raise UsageError on a bad split."""


@dataclass(frozen=True)
class Benchmark:
    """One benchmark, everything the toolkit knows of it: register it with :func:`register_benchmark`.

    ``splits``: the splits the release has (empty: the reader decides, as the world's do); ``eval_splits``: the
    held-out ones ``slmsql eval`` may score (empty: a training pool only); ``compare_mode``: its official EX rule;
    ``breakdown``: what its ``difficulty`` column holds (``hardness`` or ``difficulty``); ``label``: computes
    ``difficulty`` from the gold SQL after the subset is drawn (Spider's hardness); ``root_option``: the recipe
    field holding its folder (``None``: ``benchmark_roots: [NAME=ROOT]``).

    Example:

    ```python
    >>> get_benchmark("bird_mini_dev").compare_mode, get_benchmark("spider").root_option
    (<CompareMode.BIRD: 'bird'>, 'spider_root')

    ```
    """

    name: str
    read: Reader
    splits: tuple[str, ...] = ()
    eval_splits: tuple[str, ...] = ()
    default_split: str = "dev"
    compare_mode: CompareMode = CompareMode.BIRD
    breakdown: str = "difficulty"
    label: Callable[[str], str] | None = None
    license: str = "other"
    dataset_id: str | None = None
    root_option: str | None = None
    description: str = ""


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
    or ``>= n``). Two draws with one seed often nest: see :mod:`slmsql_hub.data.sft_record`.

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
        record.setdefault("benchmark", name)
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
    label = get_benchmark(name).label
    if label is not None:
        for record in records:
            record["difficulty"] = label(record["gold_sql"])
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


def _spider(base: Path, split: str) -> tuple[list[dict], Path]:
    files = {"dev": ["dev.json"], "train": ["train_spider.json", "train_others.json"]}[split]
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
    return records, db_dir


def _bird(base: Path, split: str) -> tuple[list[dict], Path]:
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
    return records, base / f"{split}_databases"


def _bird_mini_dev(base: Path, split: str) -> tuple[list[dict], Path]:
    if not (base / "mini_dev_sqlite.json").is_file() and (base / "MINIDEV" / "mini_dev_sqlite.json").is_file():
        base = base / "MINIDEV"  # the folder the release's zip unpacks to
    records = _questions(
        base / "mini_dev_sqlite.json",
        "bird_mini_dev",
        lambda index, item: f"bird_mini_dev-{item.get('question_id', index)}",
        gold="SQL",
        evidence="evidence",
        difficulty="difficulty",
    )
    return records, base / "dev_databases"


def _synsql(base: Path, split: str) -> tuple[list[dict], Path]:
    records = _questions(
        base / "data.json",
        "synsql",
        lambda index, _: f"synsql-{index}",
        gold="sql",
        evidence="external_knowledge",
        difficulty="sql_complexity",
    )
    return records, base / "databases"


def _world(base: Path, split: str) -> tuple[list[dict], Path]:
    split_dir = base / "datasets" / split
    if not (base / WORLD_MANIFEST).is_file():
        raise UsageError(
            f"{base} is not an embedded world (no world.json); build one with `slmsql world build`"
        )
    if not split_dir.is_dir():
        available = sorted(p.name for p in (base / "datasets").glob("*") if p.is_dir())
        raise UsageError(f"world split {split!r} not found under {base / 'datasets'}; available: {available}")
    stored = load_saved_dataset(split_dir, "rebuild the world with `slmsql world build --overwrite`")
    return [{column: row[column] for column in BENCHMARK_COLUMNS} for row in stored], base / "databases"


def _spider_hardness(gold_sql: str) -> str:
    from ..sql.hardness import spider_hardness

    try:
        return spider_hardness(gold_sql)
    except ValueError:
        return ""


REGISTRY: dict[str, Benchmark] = {}
"""The registered benchmarks by name, in registration order: the built-ins, then yours."""


def register_benchmark(entry: Benchmark, *, replace: bool = False) -> Benchmark:
    """Add ``entry`` to :data:`REGISTRY` and return it; a name taken by another entry is a UsageError unless
    ``replace``.

    Example:

    ```python
    >>> from slmsql_hub.data.benchmarks import Benchmark, register_benchmark
    >>> register_benchmark(Benchmark("bird", read=lambda root, split: ([], root)))
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: benchmark 'bird' is already registered; pick another name or pass replace=True

    ```
    """
    name = entry.name
    if not name or not name.replace("_", "").isalnum() or name != name.lower():
        raise UsageError(f"benchmark name {name!r} must be lower-case letters, digits and _ (it names files)")
    if REGISTRY.get(name, entry) != entry and not replace:
        raise UsageError(f"benchmark {name!r} is already registered; pick another name or pass replace=True")
    REGISTRY[name] = entry
    return entry


def get_benchmark(name: str) -> Benchmark:
    """The registered benchmark ``name`` (any case), or the :class:`Benchmark` a dotted path ``module:ATTR``
    names, imported and registered under its own name.

    Example:

    ```python
    >>> get_benchmark("Spider").eval_splits
    ('dev',)
    >>> get_benchmark("wikisql")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: unknown benchmark 'wikisql'; choose one of spider, bird, synsql, world, bird_mini_dev, or give a dotted path module:ENTRY

    ```
    """
    key = str(name).strip()
    if key.lower() in REGISTRY:
        return REGISTRY[key.lower()]
    module, sep, attr = key.partition(":")
    if not sep or not module or not attr.isidentifier():
        raise UsageError(
            f"unknown benchmark {name!r}; choose one of {', '.join(REGISTRY)}, or give a dotted path module:ENTRY"
        )
    try:
        entry = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as err:
        raise UsageError(f"benchmark {name!r}: cannot import it ({err})") from None
    if not isinstance(entry, Benchmark):
        raise UsageError(f"benchmark {name!r} is a {type(entry).__name__}, not a slmsql_hub Benchmark")
    return register_benchmark(entry)


register_benchmark(Benchmark(
    "spider", _spider, splits=("dev", "train"), eval_splits=("dev",), compare_mode=CompareMode.SPIDER,
    breakdown="hardness", label=_spider_hardness, license="cc-by-sa-4.0", dataset_id="xlangai/spider",
    root_option="spider_root", description="Spider 1.0 (Yu et al., 2018), scored with the test-suite rule.",
))  # fmt: skip
register_benchmark(Benchmark(
    "bird", _bird, splits=("train", "dev"), eval_splits=("dev",), license="cc-by-sa-4.0",
    dataset_id="birdsql/bird-dev", root_option="bird_root",
    description="BIRD (Li et al., 2023). Its dev set has no official Hub copy: set dataset_ids: [bird=<yours>].",
))  # fmt: skip
register_benchmark(Benchmark(
    "synsql", _synsql, splits=("train",), default_split="train", root_option="synsql_root",
    description="SynSQL-2.5M (OmniSQL), a training pool.",
))  # fmt: skip
register_benchmark(Benchmark(
    "world", _world, eval_splits=("dev", "test", "probe_same", "probe_cross", "probe_control"),
    breakdown="hardness", license="apache-2.0", root_option="world_root",
    description="The embedded world (slmsql world build): built locally, published nowhere by default.",
))  # fmt: skip

# A recipe reads it with benchmarks: [bird_mini_dev:dev] and benchmark_roots: [bird_mini_dev=data/minidev].
register_benchmark(Benchmark(
    "bird_mini_dev", _bird_mini_dev, splits=("dev",), eval_splits=("dev",), license="cc-by-sa-4.0",
    dataset_id="birdsql/bird_mini_dev",
    description="BIRD mini-dev, SQLite edition: 500 dev questions over 11 databases, BIRD's EX (set equality). "
    "Its soft-F1 and R-VES metrics are out of scope.",
))  # fmt: skip


def load_benchmark(
    name: str,
    root: str | os.PathLike,
    split: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    *,
    skip_missing_db: bool = False,
) -> datasets.Dataset:
    """Split ``split`` of benchmark ``name`` (a registered name or ``module:ENTRY``; default split: the entry's),
    its seeded ``limit`` subset.

    Example:

    ```python
    >>> from slmsql_hub.data.benchmarks import load_benchmark
    >>> load_benchmark("synsql", ".", "dev")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: synsql has no split 'dev'; use train

    ```
    """
    entry = get_benchmark(name)
    split = entry.default_split if split is None else split
    if entry.splits and split not in entry.splits:
        raise UsageError(f"{entry.name} has no split {split!r}; use {' or '.join(entry.splits)}")
    records, db_dir = entry.read(_root(root, entry.name), split)
    return _finish(records, entry.name, db_dir, limit, seed, skip_missing_db)


load_spider = partial(load_benchmark, "spider")
load_bird = partial(load_benchmark, "bird")
load_synsql = partial(load_benchmark, "synsql")
load_world = partial(load_benchmark, "world")
